/* DLPack tensors at the API boundary: conversion to the IR's dense tensor
 * view with the checks the API promises (device, dtype, shape), their
 * layouts (DLPack strides), and the copies between a strided tensor and a
 * compact one that tc_kernel_run makes at the boundary (runtime/kernel.c).
 *
 * Ownership: nothing here allocates; a view borrows the DLTensor's data,
 * and messages go to the caller's buffers. */
#ifndef TC_RT_TENSOR_H
#define TC_RT_TENSOR_H

#include "tcomp.h"

#include "../ir/ir.h"

#include <stddef.h>

/* The layout of a DLTensor's elements in memory: DLPack strides, in
 * elements, and whether they are the compact row-major ones (a dimension of
 * extent 1 may have any stride; a tensor without elements is compact). */
typedef struct tc_rt_layout {
	int64_t strides[TC_MAX_RANK];
	int compact;
} tc_rt_layout;

/* View x as a tensor in *out (no copy: out->data is the address of x's
 * element 0, x->data + byte_offset) and its strides in *layout (NULL: the
 * caller needs only dtype and shape, as tc_compile).  Refuses non-CPU
 * devices, dtypes tcomp lacks, vector lanes, rank above TC_MAX_RANK and
 * negative extents; any strides are accepted (NULL strides are compact),
 * negative and zero ones too.  With need_data, data must not be NULL unless
 * x has no elements.  -1 with a message in err[0..n). */
tc_stat tc_rt_tensor_from_dl(__tc_keep const DLTensor *x, int need_data,
	__tc_keep tc_tensor *out, __tc_keep tc_rt_layout *layout, __tc_keep char *err, size_t n);
/* The bytes x spans in memory: [*lo, *hi) relative to x's element 0 (lo <=
 * 0 with negative strides); both 0 when x has no elements.  -1 when the
 * span does not fit in int64 (nor -lo). */
tc_stat tc_rt_tensor_span(__tc_keep const tc_tensor *x, __tc_keep const tc_rt_layout *l,
	int64_t *lo, int64_t *hi);
/* Whether two distinct elements of x may share memory (a stride of 0 on a
 * dimension of extent 2 or more, or strides that interleave); conservative:
 * strides that do not nest (sorted by magnitude, each at least the span of
 * the smaller ones) count as overlapping.  The dimension to name in *dim. */
int tc_rt_tensor_self_overlap(__tc_keep const tc_tensor *x, __tc_keep const tc_rt_layout *l,
	int *dim);
/* Copy the elements of strided tensor src (its layout l) into dense, a
 * compact row-major buffer of the same shape and dtype. */
void tc_rt_tensor_gather(__tc_keep const tc_tensor *src, __tc_keep const tc_rt_layout *l,
	__tc_keep void *dense);
/* Copy the compact row-major buffer dense into the strided tensor dst (its
 * layout l), which must not overlap itself. */
void tc_rt_tensor_scatter(__tc_keep const void *dense, __tc_keep const tc_tensor *dst,
	__tc_keep const tc_rt_layout *l);
/* The DLPack type of t. */
DLDataType tc_rt_dl_dtype(tc_dtype t);
/* tcomp's type of dt; TC_T_NONE if tcomp has no such type. */
tc_dtype tc_rt_dtype_from_dl(DLDataType dt);
/* Append t's type and shape, "float32[4x5]", to b. */
void tc_rt_describe(__tc_keep const tc_tensor *t, __tc_keep tc_buf *b);

#endif
