/* DLPack tensors at the API boundary. */
#include "tensor.h"

#include "backend.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DLDataType tc_rt_dl_dtype(tc_dtype t)
{
	DLDataType dt;
	dt.lanes = 1;
	dt.bits = (uint8_t)tc_dtype_bits(t);
	if (t == TC_T_BOOL)
		dt.code = TC_DL_BOOL;
	else if (t == TC_T_BF16) /* DLPack's own code, as torch and JAX use */
		dt.code = kDLBfloat;
	else if (tc_dtype_is_float(t))
		dt.code = kDLFloat;
	else if (tc_dtype_is_unsigned(t))
		dt.code = kDLUInt;
	else
		dt.code = kDLInt;
	return dt;
}

tc_dtype tc_rt_dtype_from_dl(DLDataType dt)
{
	/* by code and bits directly: this runs for every tensor of every call
	 * (a search over tc_rt_dl_dtype of each type took a twentieth of a
	 * 128 x 128 column sum's call) */
	static const tc_dtype sint[] = {TC_T_I8, TC_T_I16, TC_T_NONE, TC_T_I32, TC_T_NONE,
		TC_T_NONE, TC_T_NONE, TC_T_I64};
	static const tc_dtype uint[] = {TC_T_U8, TC_T_U16, TC_T_NONE, TC_T_U32, TC_T_NONE,
		TC_T_NONE, TC_T_NONE, TC_T_U64};
	int slot = dt.bits % 8 == 0 && dt.bits >= 8 && dt.bits <= 64 ? dt.bits / 8 - 1 : -1;
	if (dt.lanes != 1 || slot < 0)
		return TC_T_NONE;
	switch (dt.code) {
	case kDLInt:
		return sint[slot];
	case kDLUInt:
		return uint[slot];
	case kDLFloat:
		return dt.bits == 16 ? TC_T_F16 : dt.bits == 32 ? TC_T_F32 : dt.bits == 64 ? TC_T_F64
											 : TC_T_NONE;
	case kDLBfloat:
		return dt.bits == 16 ? TC_T_BF16 : TC_T_NONE;
	case TC_DL_BOOL:
		return dt.bits == 8 ? TC_T_BOOL : TC_T_NONE;
	default:
		return TC_T_NONE;
	}
}

void tc_rt_describe(__tc_keep const tc_tensor *t, __tc_keep tc_buf *b)
{
	int i;
	tc_buf_printf(b, "%s[", tc_dtype_name(t->dtype));
	for (i = 0; i < t->ndim; i++)
		tc_buf_printf(b, "%s%lld", i ? "x" : "", (long long)t->shape[i]);
	tc_buf_putc(b, ']');
}

tc_stat tc_rt_tensor_from_dl(__tc_keep const DLTensor *x, int need_data, __tc_keep tc_tensor *out,
	__tc_keep tc_rt_layout *layout, __tc_keep char *err, size_t n)
{
	int i, empty = 0;
	int64_t stride = 1;

	if (!x) {
		snprintf(err, n, "the tensor pointer is NULL");
		return TC_ERR;
	}
	if (!tc_rt_backend_serves(x->device.device_type)) {
		snprintf(err, n, "tensor is on device type %d; tcomp runs on the CPU (kDLCPU) and CUDA devices (kDLCUDA) only",
			(int)x->device.device_type);
		return TC_ERR;
	}
	out->dtype = tc_rt_dtype_from_dl(x->dtype);
	if (out->dtype == TC_T_NONE) {
		snprintf(err, n, "unsupported DLPack dtype (code %d, %d bits, %d lanes)",
			(int)x->dtype.code, (int)x->dtype.bits, (int)x->dtype.lanes);
		return TC_ERR;
	}
	if (x->ndim < 0 || x->ndim > TC_MAX_RANK) {
		snprintf(err, n, "rank %d is not supported (at most %d)", x->ndim, TC_MAX_RANK);
		return TC_ERR;
	}
	if (x->ndim > 0 && !x->shape) {
		snprintf(err, n, "shape is NULL");
		return TC_ERR;
	}
	out->ndim = x->ndim;
	for (i = 0; i < x->ndim; i++) {
		if (x->shape[i] < 0) {
			snprintf(err, n, "dimension %d has negative extent %lld", i,
				(long long)x->shape[i]);
			return TC_ERR;
		}
		out->shape[i] = x->shape[i];
		empty |= x->shape[i] == 0;
	}
	if (layout) {
		layout->compact = 1;
		for (i = x->ndim - 1; i >= 0; i--) {
			layout->strides[i] = x->strides ? x->strides[i] : stride;
			if (x->shape[i] != 1 && layout->strides[i] != stride)
				layout->compact = 0;
			/* the compact strides of a huge tensor may overflow; the
			 * shape check against the kernel's refuses it later */
			if (__builtin_mul_overflow(stride, x->shape[i], &stride))
				stride = INT64_MAX;
		}
		if (empty)
			layout->compact = 1; /* nothing to copy */
	}
	if (need_data && !x->data && !empty) {
		snprintf(err, n, "data pointer is NULL");
		return TC_ERR;
	}
	out->data = x->data ? (char *)x->data + x->byte_offset : NULL;
	return TC_OK;
}

tc_stat tc_rt_tensor_span(__tc_keep const tc_tensor *x, __tc_keep const tc_rt_layout *l,
	int64_t *lo, int64_t *hi)
{
	int64_t size = tc_dtype_size(x->dtype), a = 0, b = 0;
	int i;
	*lo = *hi = 0;
	for (i = 0; i < x->ndim; i++)
		if (x->shape[i] == 0)
			return TC_OK;
	for (i = 0; i < x->ndim; i++) {
		int64_t reach; /* bytes from the first to the last element of dimension i */
		if (__builtin_mul_overflow(x->shape[i] - 1, l->strides[i], &reach) ||
			__builtin_mul_overflow(reach, size, &reach))
			return TC_ERR;
		if (__builtin_add_overflow(reach < 0 ? a : b, reach, reach < 0 ? &a : &b))
			return TC_ERR;
	}
	if (__builtin_add_overflow(b, size, &b) || a == INT64_MIN) /* -a must fit */
		return TC_ERR;
	*lo = a;
	*hi = b;
	return TC_OK;
}

int tc_rt_tensor_self_overlap(__tc_keep const tc_tensor *x, __tc_keep const tc_rt_layout *l,
	int *dim)
{
	int order[TC_MAX_RANK], n = 0, i, j;
	int64_t reach = 0; /* elements spanned by the dimensions seen so far */
	for (i = 0; i < x->ndim; i++) {
		if (x->shape[i] == 0)
			return 0;
		if (x->shape[i] > 1)
			order[n++] = i;
	}
	for (i = 1; i < n; i++) /* by |stride|, insertion sort of at most 8 */
		for (j = i; j > 0 && llabs(l->strides[order[j]]) < llabs(l->strides[order[j - 1]]);
			j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (i = 0; i < n; i++) {
		int d = order[i];
		int64_t s = llabs(l->strides[d]), r;
		if (s <= reach || __builtin_mul_overflow(s, x->shape[d] - 1, &r) ||
			__builtin_add_overflow(reach, r, &reach)) {
			*dim = d;
			return 1;
		}
	}
	return 0;
}

/* One element of esize bytes (fixed-size copies the compiler inlines). */
static inline void copy_elt(char *dst, const char *src, size_t esize)
{
	switch (esize) {
	case 1: *dst = *src; break;
	case 2: memcpy(dst, src, 2); break;
	case 4: memcpy(dst, src, 4); break;
	case 8: memcpy(dst, src, 8); break;
	default: memcpy(dst, src, esize);
	}
}

#define COPY_TILE 32 /* elements per side of the tiles of a transposing copy */

/* The last two dimensions of copy_dim in tiles, elements of type T: the
 * strided side at p (byte strides bs[d], bs[d + 1]), the compact side at q
 * (n x m). */
#define COPY_TILES(T)                                                                    \
	do {                                                                             \
		int64_t m = x->shape[d + 1], i0, j0, s0 = bs[d], s1 = bs[d + 1];         \
		for (i0 = 0; i0 < n; i0 += COPY_TILE)                                    \
			for (j0 = 0; j0 < m; j0 += COPY_TILE) {                          \
				int64_t ie = i0 + COPY_TILE < n ? i0 + COPY_TILE : n;    \
				int64_t je = j0 + COPY_TILE < m ? j0 + COPY_TILE : m;    \
				for (i = i0; i < ie; i++)                                \
					for (j = j0; j < je; j++) {                      \
						char *e = p + i * s0 + j * s1;           \
						char *f = q + (i * m + j) * (int64_t)sizeof(T); \
						if (to_dense) /* memcpy: alignment */    \
							memcpy(f, e, sizeof(T));         \
						else                                     \
							memcpy(e, f, sizeof(T));         \
					}                                                \
			}                                                                \
	} while (0)

/* The strided copy both directions share: dimensions d.. of the strided
 * side (element pointer p, strides bs in bytes) against the compact block
 * q of those dimensions.  Rows whose last stride is the element size are
 * one memcpy; when it is not (a transposed view), the last two dimensions
 * are walked in COPY_TILE x COPY_TILE tiles, so neither side strides
 * through memory a cache line per element for long. */
static void copy_dim(const tc_tensor *x, const int64_t *bs, int d, char *p, char *q, size_t esize,
	int to_dense)
{
	int64_t i, j, n = x->shape[d];
	size_t inner = esize; /* bytes of the compact block of dimensions d+1.. */
	for (i = d + 1; i < x->ndim; i++)
		inner *= (size_t)x->shape[i];
	if (d == x->ndim - 1 && bs[d] == (int64_t)esize) {
		memcpy(to_dense ? q : p, to_dense ? p : q, (size_t)n * esize);
	} else if (d == x->ndim - 1) {
		for (i = 0; i < n; i++)
			if (to_dense)
				copy_elt(q + i * (int64_t)esize, p + i * bs[d], esize);
			else
				copy_elt(p + i * bs[d], q + i * (int64_t)esize, esize);
	} else if (d == x->ndim - 2 && bs[d + 1] != (int64_t)esize) {
		switch (esize) {
		case 1: COPY_TILES(uint8_t); break;
		case 2: COPY_TILES(uint16_t); break;
		case 4: COPY_TILES(uint32_t); break;
		default: COPY_TILES(uint64_t); break;
		}
	} else {
		for (i = 0; i < n; i++)
			copy_dim(x, bs, d + 1, p + i * bs[d], q + (size_t)i * inner, esize, to_dense);
	}
}

/* Copy x (strided, layout l) to or from the compact buffer dense.  A
 * tensor of rank 0 or without elements is always compact: never here. */
static void copy(const tc_tensor *x, const tc_rt_layout *l, char *dense, int to_dense)
{
	int64_t bs[TC_MAX_RANK];
	size_t esize = (size_t)tc_dtype_size(x->dtype);
	int i;
	if (x->ndim == 0)
		return;
	for (i = 0; i < x->ndim; i++) {
		if (x->shape[i] == 0)
			return;
		bs[i] = l->strides[i] * (int64_t)esize; /* fits: the span was checked */
	}
	copy_dim(x, bs, 0, x->data, dense, esize, to_dense);
}

void tc_rt_tensor_gather(__tc_keep const tc_tensor *src, __tc_keep const tc_rt_layout *l,
	__tc_keep void *dense)
{
	copy(src, l, dense, 1);
}

void tc_rt_tensor_scatter(__tc_keep const void *dense, __tc_keep const tc_tensor *dst,
	__tc_keep const tc_rt_layout *l)
{
	copy(dst, l, (char *)(uintptr_t)dense, 0);
}

int tc_dtype_parse(const char *name, DLDataType *out)
{
	tc_dtype t = name ? tc_dtype_from_name(name, (int)strlen(name)) : TC_T_NONE;
	if (t == TC_T_NONE || !out)
		return -1;
	*out = tc_rt_dl_dtype(t);
	return 0;
}

const char *tc_dtype_str(DLDataType dtype)
{
	tc_dtype t = tc_rt_dtype_from_dl(dtype);
	return t == TC_T_NONE ? NULL : tc_dtype_name(t);
}
