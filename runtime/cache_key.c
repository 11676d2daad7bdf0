/* Kernel cache keys from modules (runtime/cache_ops.h): what a compile of
 * an entry for some inputs on this host is, as the storage
 * (runtime/cache.h) files it: the def's canonical text and hash, the entry,
 * the input dtypes, ranks, shapes and strides, the machine (the key part of
 * the backend that serves the inputs' device: runtime/backend.h) and the
 * tcomp version.  The machine part tells the targets apart: the CPU's
 * "triple;cpu;features", cuda's "cuda;GPU name;sm_XY;driver N",
 * cuda-emu's "cuda-emu;triple;cpu;features" (the emulator runs on the
 * host CPU, but its entries are never a CPU compile's).
 *
 * Owns: tc_cache_key_init, tc_cache_key_init_for.
 * Must not know: SQLite or the database; it only fills a tc_cache_key. */
#include "cache_ops.h"

#include "backend.h"
#include "error.h"
#include "internal.h"
#include "module.h"
#include "tensor.h"

#include <stdio.h>
#include <string.h>

/* The key of entry of m for inputs, its target part the string target
 * (borrowed) when it is not NULL, else the key part of backend b, else of
 * the backend that serves the inputs' device. */
static int key_init(__tc_keep tc_cache_key *key, __tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs, __tc_keep const tc_rt_backend *b,
	const char *target)
{
	tc_buf canon, types, shapes, strides;
	const tc_def *def;
	char err[512];
	int i, k, d;

	memset(key, 0, sizeof(*key));
	if (!m)
		return -1;
	if ((d = tc_rt_find_def(m, entry)) < 0)
		return -1;
	def = m->prog->defs[d];
	if (n_inputs != def->ninputs || (n_inputs && !inputs)) {
		tc_rt_set_error(m->ctx, "'%s' takes %d inputs but %d were given", entry,
			def->ninputs, n_inputs);
		return -1;
	}
	tc_buf_init(&canon);
	tc_buf_init(&types);
	tc_buf_init(&shapes);
	tc_buf_init(&strides);
	tc_ir_canonical(def, &canon);
	snprintf(key->hash, sizeof(key->hash), "%016llx", (unsigned long long)tc_ir_hash(def));
	for (i = 0; i < n_inputs; i++) {
		tc_tensor t;
		int64_t stride = 1, st[TC_MAX_RANK];
		if (tc_rt_tensor_from_dl(inputs[i], 0, &t, NULL, err, sizeof(err)) < 0) {
			tc_rt_set_error(m->ctx, "input %d ('%s'): %s", i, def->tensors[i].name, err);
			goto error;
		}
		tc_buf_printf(&types, "%s%s/%d", i ? "," : "", tc_dtype_name(t.dtype), t.ndim);
		if (i) {
			tc_buf_putc(&shapes, ',');
			tc_buf_putc(&strides, ',');
		}
		/* the compact strides: kernels are compiled for compact tensors
		 * (tc_kernel_run copies strided ones); -1 once the product
		 * overflows (binding refuses such a tensor) */
		for (k = t.ndim - 1; k >= 0; k--) {
			st[k] = stride;
			if (stride >= 0 && __builtin_mul_overflow(stride, t.shape[k], &stride))
				stride = -1;
		}
		for (k = 0; k < t.ndim; k++) {
			tc_buf_printf(&shapes, "%s%lld", k ? "x" : "", (long long)t.shape[k]);
			tc_buf_printf(&strides, "%s%lld", k ? "x" : "", (long long)st[k]);
		}
	}
	key->canonical = tc_buf_take(&canon);
	key->types = tc_buf_take(&types);
	key->shapes = tc_buf_take(&shapes);
	key->strides = tc_buf_take(&strides);
	key->entry = tc_strdup(entry);
	if (!target && (!b || !b->key_target))
		b = tc_rt_backend_for_device(b ? b->device
					       : n_inputs ? inputs[0]->device.device_type : kDLCPU);
	/* a GPU it cannot describe (no driver) is "unknown", as for no
	 * backend (the CPU's NULL is out of memory) */
	if (target)
		key->target = tc_strdup(target);
	else if (!b || (!(key->target = b->key_target()) && b->device != kDLCPU))
		key->target = tc_strdup("unknown");
	key->version = tc_strdup(TCOMP_VERSION);
	if (!key->canonical || !key->types || !key->shapes || !key->strides || !key->entry ||
		!key->target || !key->version) {
		tc_rt_set_error(m->ctx, "out of memory");
		tc_cache_key_clear(key);
		return -1;
	}
	return 0;
error:
	tc_buf_free(&canon);
	tc_buf_free(&types);
	tc_buf_free(&shapes);
	tc_buf_free(&strides);
	return -1;
}

int tc_cache_key_init(__tc_keep tc_cache_key *key, __tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs)
{
	return key_init(key, m, entry, inputs, n_inputs, NULL, NULL);
}

int tc_cache_key_init_for(__tc_keep tc_cache_key *key, __tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs, __tc_keep const tc_options *o,
	const char *target)
{
	return key_init(key, m, entry, inputs, n_inputs, o ? tc_rt_backend_of(o) : NULL, target);
}
