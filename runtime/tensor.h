/* DLPack tensors at the API boundary: conversion to the IR's dense tensor
 * view with the checks the API promises (device, dtype, compact strides). */
#ifndef TC_RT_TENSOR_H
#define TC_RT_TENSOR_H

#include "tcomp.h"

#include "../ir/ir.h"

#include <stddef.h>

/* View x as a dense tensor (no copy).  Refuses non-CPU devices, dtypes
 * tcomp lacks, vector lanes, rank above TC_MAX_RANK, negative extents and
 * strides other than the compact row-major ones (a dimension of extent 1
 * may have any stride).  With need_data, data must not be NULL.  -1 with a
 * message in err[0..n). */
tc_stat tc_rt_tensor_from_dl(const DLTensor *x, int need_data, tc_tensor *out, char *err,
	size_t n);
DLDataType tc_rt_dl_dtype(tc_dtype t);
/* TC_T_NONE if tcomp has no such type. */
tc_dtype tc_rt_dtype_from_dl(DLDataType dt);
/* "float32[4x5]" */
void tc_rt_describe(const tc_tensor *t, tc_buf *b);

#endif
