/* Device memory through the public API (tc_device_alloc, tc_device_free,
 * tc_device_copy; include/tcomp.h): host memory for kDLCPU, and for
 * kDLCUDA device 0 the CUDA driver's memory in the primary context that
 * the cuda backend runs in (cuda_driver.h), so that tensors allocated here
 * are the ones target=cuda kernels take.  Without a driver every kDLCUDA
 * call fails with the driver's reason, which is the same for every call
 * of the process; the kDLCPU calls need no driver.
 *
 * Ownership: memory given by tc_device_alloc is the caller's, freed with
 * tc_device_free for the same device; the context is borrowed (errors). */
#include "internal.h"

#include "cuda_driver.h"
#include "error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether dev is one this file serves: kDLCPU (any id: there is one
 * host), or kDLCUDA 0; else an error in ctx. */
static int known_device(tc_context *ctx, DLDevice dev, const char *what)
{
	if (dev.device_type == kDLCPU)
		return 1;
	if (dev.device_type == kDLCUDA && dev.device_id == 0)
		return 1;
	if (dev.device_type == kDLCUDA)
		tc_rt_set_error(ctx, "%s: CUDA device %d: tcomp runs on CUDA device 0 only", what,
			(int)dev.device_id);
	else
		tc_rt_set_error(ctx, "%s: device type %d is neither kDLCPU (%d) nor kDLCUDA (%d)",
			what, (int)dev.device_type, (int)kDLCPU, (int)kDLCUDA);
	return 0;
}

/* The CUDA device with its context pushed (pop with pop()), or NULL with
 * the error in ctx. */
static const tc_rt_cuda_dev *push(tc_context *ctx, const char *what)
{
	char why[640], buf[32];
	const tc_rt_cuda_dev *v = tc_rt_cuda_device(why, sizeof(why));
	tc_cu_result r;
	if (!v) {
		tc_rt_set_error(ctx, "%s: %s", what, why);
		return NULL;
	}
	if ((r = v->cu->ctx_push(v->ctx))) {
		tc_rt_set_error(ctx, "%s: cuCtxPushCurrent failed: %s", what,
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return NULL;
	}
	return v;
}

static void pop(const tc_rt_cuda_dev *v)
{
	void *old;
	v->cu->ctx_pop(&old);
}

int tc_device_alloc(tc_context *ctx, DLDevice dev, size_t bytes, void **ptr)
{
	const tc_rt_cuda_dev *v;
	unsigned long long p = 0;
	char buf[32];
	tc_cu_result r;
	if (!ctx)
		return -1;
	tc_rt_clear_error(ctx);
	if (!ptr) {
		tc_rt_set_error(ctx, "tc_device_alloc: ptr is NULL");
		return -1;
	}
	*ptr = NULL;
	if (!known_device(ctx, dev, "tc_device_alloc"))
		return -1;
	if (dev.device_type == kDLCPU) {
		size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
		if (n < bytes || !(*ptr = aligned_alloc(64, n))) {
			tc_rt_set_error(ctx, "tc_device_alloc: out of host memory (%zu bytes)", bytes);
			return -1;
		}
		return 0;
	}
	if (!(v = push(ctx, "tc_device_alloc")))
		return -1;
	r = v->cu->mem_alloc(&p, bytes ? bytes : 1);
	pop(v);
	if (r) {
		tc_rt_set_error(ctx, "tc_device_alloc: cuMemAlloc of %zu bytes failed: %s", bytes,
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return -1;
	}
	*ptr = (void *)(uintptr_t)p;
	return 0;
}

int tc_device_free(tc_context *ctx, DLDevice dev, void *ptr)
{
	const tc_rt_cuda_dev *v;
	char buf[32];
	tc_cu_result r;
	if (!ctx)
		return -1;
	tc_rt_clear_error(ctx);
	if (!known_device(ctx, dev, "tc_device_free"))
		return -1;
	if (!ptr)
		return 0;
	if (dev.device_type == kDLCPU) {
		free(ptr);
		return 0;
	}
	if (!(v = push(ctx, "tc_device_free")))
		return -1;
	r = v->cu->mem_free((unsigned long long)(uintptr_t)ptr);
	pop(v);
	if (r) {
		tc_rt_set_error(ctx, "tc_device_free: cuMemFree failed: %s",
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return -1;
	}
	return 0;
}

int tc_device_copy(tc_context *ctx, void *dst, DLDevice dst_dev, const void *src,
	DLDevice src_dev, size_t bytes)
{
	const tc_rt_cuda_dev *v;
	unsigned long long d = (unsigned long long)(uintptr_t)dst;
	unsigned long long s = (unsigned long long)(uintptr_t)src;
	char buf[32];
	tc_cu_result r;
	if (!ctx)
		return -1;
	tc_rt_clear_error(ctx);
	if (!known_device(ctx, dst_dev, "tc_device_copy (destination)") ||
		!known_device(ctx, src_dev, "tc_device_copy (source)"))
		return -1;
	if (!bytes)
		return 0;
	if (!dst || !src) {
		tc_rt_set_error(ctx, "tc_device_copy: a NULL %s of %zu bytes",
			dst ? "source" : "destination", bytes);
		return -1;
	}
	if (dst_dev.device_type == kDLCPU && src_dev.device_type == kDLCPU) {
		memmove(dst, src, bytes);
		return 0;
	}
	if (!(v = push(ctx, "tc_device_copy")))
		return -1;
	if (dst_dev.device_type == kDLCUDA && src_dev.device_type == kDLCUDA)
		r = v->cu->memcpy_dtod(d, s, bytes);
	else if (dst_dev.device_type == kDLCUDA)
		r = v->cu->memcpy_htod(d, src, bytes);
	else
		r = v->cu->memcpy_dtoh(dst, s, bytes);
	pop(v);
	if (r) {
		tc_rt_set_error(ctx, "tc_device_copy: copying %zu bytes %s failed: %s", bytes,
			dst_dev.device_type == src_dev.device_type ? "device to device"
			: dst_dev.device_type == kDLCUDA           ? "host to device"
								   : "device to host",
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return -1;
	}
	return 0;
}
