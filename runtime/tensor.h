/* DLPack tensors at the API boundary: conversion to the IR's dense tensor
 * view with the checks the API promises (device, dtype, compact strides).
 *
 * Ownership: nothing here allocates; a view borrows the DLTensor's data,
 * and messages go to the caller's buffers. */
#ifndef TC_RT_TENSOR_H
#define TC_RT_TENSOR_H

#include "tcomp.h"

#include "../ir/ir.h"

#include <stddef.h>

/* View x as a dense tensor in *out (no copy: out->data is x's).  Refuses
 * non-CPU devices, dtypes tcomp lacks, vector lanes, rank above
 * TC_MAX_RANK, negative extents and strides other than the compact
 * row-major ones (a dimension of extent 1 may have any stride).  With
 * need_data, data must not be NULL.  -1 with a message in err[0..n). */
tc_stat tc_rt_tensor_from_dl(__tc_keep const DLTensor *x, int need_data,
	__tc_keep tc_tensor *out, __tc_keep char *err, size_t n);
/* The DLPack type of t. */
DLDataType tc_rt_dl_dtype(tc_dtype t);
/* tcomp's type of dt; TC_T_NONE if tcomp has no such type. */
tc_dtype tc_rt_dtype_from_dl(DLDataType dt);
/* Append t's type and shape, "float32[4x5]", to b. */
void tc_rt_describe(__tc_keep const tc_tensor *t, __tc_keep tc_buf *b);

#endif
