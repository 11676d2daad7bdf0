/* DLPack tensors at the API boundary. */
#include "tensor.h"

#include "backend.h"

#include <stdio.h>
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
	int t;
	if (dt.lanes != 1)
		return TC_T_NONE;
	for (t = TC_T_BOOL; t < TC_T_COUNT; t++) {
		DLDataType x = tc_rt_dl_dtype((tc_dtype)t);
		if (x.code == dt.code && x.bits == dt.bits)
			return (tc_dtype)t;
	}
	return TC_T_NONE;
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
	__tc_keep char *err, size_t n)
{
	int i;
	int64_t stride = 1;

	if (!x) {
		snprintf(err, n, "the tensor pointer is NULL");
		return TC_ERR;
	}
	if (!tc_rt_backend_serves(x->device.device_type)) {
		snprintf(err, n, "tensor is on device type %d; this release runs on the CPU (kDLCPU) only",
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
	}
	if (x->strides)
		for (i = x->ndim - 1; i >= 0; i--) {
			if (x->shape[i] != 1 && x->strides[i] != stride) {
				snprintf(err, n,
					"strides are not compact row-major (dimension %d has stride %lld, expected %lld); pass a contiguous copy",
					i, (long long)x->strides[i], (long long)stride);
				return TC_ERR;
			}
			stride *= x->shape[i];
		}
	if (need_data && !x->data) {
		snprintf(err, n, "data pointer is NULL");
		return TC_ERR;
	}
	out->data = x->data ? (char *)x->data + x->byte_offset : NULL;
	return TC_OK;
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
