/* Named tensors in one file, in the safetensors format (the format of
 * Hugging Face's safetensors library, which PyTorch, JAX and NumPy users
 * read with safetensors.{torch,numpy}.load_file):
 *
 *   8 bytes   N, the header's length, little-endian
 *   N bytes   a JSON object: for each tensor "NAME": {"dtype": "F32",
 *             "shape": [128, 784], "data_offsets": [BEGIN, END]} (offsets
 *             into the data, END - BEGIN its bytes), and optionally
 *             "__metadata__": {string: string}; padded with spaces
 *   the data  every tensor's bytes, little-endian, row-major
 *
 * The training runtime saves and loads a model's parameters with it
 * (tc_model_save, tc_model_load).  The JSON header is written here and
 * read by SQLite's JSON functions (json_each, ->>), never parsed by hand.
 *
 * Ownership: names and tensors are borrowed; messages go to ctx. */
#ifndef TC_RT_SAFETENSORS_H
#define TC_RT_SAFETENSORS_H

#include "tcomp.h"

#include "../lang/util.h"

/* Write the n compact host tensors t[i] named names[i] (float32, float64,
 * float16, bfloat16 or an integer type) to path, through a temporary file
 * renamed over path at the end, so a failed save leaves any earlier file
 * whole.  -1 with a message naming path. */
tc_stat tc_rt_safetensors_write(__tc_keep tc_context *ctx, const char *path, int n,
	__tc_keep const char *const *names, __tc_keep const DLTensor *const *t);

/* Read path and copy its tensors into the n compact host tensors t[i]
 * named names[i]: each must be in the file with t[i]'s dtype and shape,
 * and the file must hold no other tensor.  Everything is checked before
 * anything is copied, so on an error no t[i] has changed.  -1 with a
 * message naming path and the first problem (a file too short for its
 * header, a header that is not a JSON object, a missing or extra tensor, a
 * dtype or shape that differs, offsets outside the data or not matching
 * the tensor's size). */
tc_stat tc_rt_safetensors_read(__tc_keep tc_context *ctx, const char *path, int n,
	__tc_keep const char *const *names, __tc_keep DLTensor *const *t);

#endif
