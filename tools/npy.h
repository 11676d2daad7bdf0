/* NumPy .npy files: reading and writing dense arrays of tcomp's element types.
 *
 * Read: format versions 1.0, 2.0 and 3.0, descr strings '|b1', '|i1' '<i2'
 * '<i4' '<i8', '|u1' '<u2' '<u4' '<u8', '<f2' '<f4' '<f8', and '<V2' for
 * bfloat16 (with any of the byte-order prefixes '<', '|', '=' or none, and
 * '>' for one-byte types), C order, rank 0 to 8.  NumPy has no bfloat16:
 * np.save writes an ml_dtypes.bfloat16 array with descr '<V2' (2-byte void,
 * checked with NumPy 2.4 and ml_dtypes 0.6), np.load reads it back as void
 * ('|V2'), and .view(ml_dtypes.bfloat16) restores it; tcomp writes
 * bfloat16 the same way and reads any 2-byte void as bfloat16.  Write: version 1.0, the header padded with spaces so
 * the data starts at a multiple of 64 bytes, as NumPy does.
 *
 * In memory, elements use the layout of lang/types.h: bool one byte 0 or 1,
 * integers and floats native little-endian, float16 and bfloat16 as their
 * 16 bits.  The host
 * must be little-endian (the build refuses otherwise).
 *
 * Decisions where NumPy leaves room:
 *   - Trailing bytes after the array's data are an error.  np.load ignores
 *     them, but for tcomp they mean the header's shape or dtype does not
 *     describe the file (a hand-edited header, a wrong dtype), which would
 *     otherwise go unnoticed.
 *   - Bool bytes other than 0 and 1 are read as true (normalised to 1), the
 *     way NumPy interprets them, so the 0/1 invariant holds in memory.
 *   - fortran_order True is accepted when the Fortran and C layouts coincide
 *     (at most one dimension above 1, or no elements); otherwise an error.
 *   - A header longer than TC_NPY_MAX_HEADER bytes is refused: headers of
 *     supported arrays are a few hundred bytes, and the limit bounds what a
 *     corrupt length field can make the reader allocate.
 *
 * Errors: functions return 0 or -1.  On -1, when err is not NULL, *err is set
 * to a message allocated with tc_malloc (free it with tc_free) that starts
 * with the file name, e.g. "x.npy: big-endian data not supported ..."; *err
 * is NULL if even the message could not be allocated.  The reader never
 * crashes or reads out of bounds on any input (it is fuzzed).
 *
 * Ownership: a tc_npy struct is the caller's and owns its data (tc_malloc,
 * released by tc_npy_free); messages are the caller's (tc_free); paths,
 * names, bytes and arrays passed in are borrowed for the call. */
#ifndef TC_NPY_H
#define TC_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "../lang/types.h"
#include "../lang/util.h"

#define TC_NPY_MAX_RANK 8
#define TC_NPY_MAX_HEADER (1u << 20)

/* A dense C-order array read from a .npy file.  data (owned by the struct,
 * allocated with tc_malloc, never NULL after a successful read even when the
 * array has no elements) holds numel elements of dtype, nbytes bytes.  Rank 0
 * is a scalar: one element, no shape entries.  Release with tc_npy_free. */
typedef struct tc_npy {
	tc_dtype dtype;
	int ndim;
	int64_t shape[TC_NPY_MAX_RANK];
	int64_t numel;
	void *data;
	size_t nbytes;
} tc_npy;

/* Read the .npy file at path into *out.  0 ok; -1 with *out zeroed (safe to
 * pass to tc_npy_free) and *err set as described above. */
tc_stat tc_npy_read(__tc_keep const char *path, __tc_give tc_npy *out,
	__tc_give char **err);

/* Decode the .npy image in bytes[0..len) into *out, as tc_npy_read does for
 * a file; name is used in messages.  For fuzzing and for data in memory. */
tc_stat tc_npy_parse(__tc_keep const void *bytes, size_t len, __tc_keep const char *name,
	__tc_give tc_npy *out, __tc_give char **err);

/* Write a version 1.0 .npy file at path holding the array data (borrowed) of
 * dtype with ndim dimensions shape[0..ndim).  shape may be NULL when ndim is
 * 0.  Bool elements are written as stored.  On failure a partly written
 * regular file is removed.  0 ok; -1 with *err set. */
tc_stat tc_npy_write(__tc_keep const char *path, tc_dtype dtype, int ndim,
	__tc_keep const int64_t *shape, __tc_keep const void *data, __tc_give char **err);

/* Release the data of a (the struct itself is the caller's) and zero it.
 * Accepts NULL and zeroed structs. */
void tc_npy_free(__tc_keep tc_npy *a);

#endif
