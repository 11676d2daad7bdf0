/* The cuda backend (backend.h): the schedule mapped to GPU blocks and
 * threads (polyhedral/gpu.c, the GPU pass list), printed as CUDA C
 * (codegen/cuda.h), compiled to a cubin by NVRTC (codegen/nvrtc.h) and
 * run through the CUDA driver API opened with dlopen (cuda_driver.h): the
 * only runtime file that includes the CUDA code generators.
 *
 * Offline (no driver, no GPU) it still emits its stages: `cuda` (the C
 * text), `ptx` and `cuda-resources` (NVRTC's PTX, and ptxas's report of
 * registers, spills and shared memory per kernel), for the architecture
 * of the gpu_arch option (sm_90 when there is no device), and compiles
 * kernels (the CUDA code and its cubin).  Running one needs the driver,
 * opened once per process: device 0 and its primary context; without one
 * every run fails with the driver's reason ("no CUDA driver: libcuda.so.1
 * not found (...)", "no CUDA device"), the CPU path unaffected.
 *
 * A kernel's code: its kernels' functions in the loaded module, device
 * memory for its temporaries (allocated at compile time, freed with the
 * code).  A run checks that every tensor's data is device (or managed)
 * memory of that device, launches the kernels in order on the default
 * stream and waits for them: a fault is an error of the run. */
#include "backend.h"

#include "cuda_driver.h"
#include "error.h"
#include "../codegen/cuda.h"
#include "../codegen/cuda_emu.h"
#include "compiled.h"
#include "../codegen/nvrtc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- the machine ---- */

/* An NVIDIA GPU of compute capability 7.0 or later: warps of 32, blocks
 * of up to 1024 threads (64 in z), grids of 2^31 - 1 x 65535 x 65535
 * blocks, 48 KiB of static shared memory per block.  The mapping aims at
 * 256 threads per block.  Nothing of the CPU's (vectors, cache blocks,
 * row buffers, the pool's threshold). */
static void describe(__tc_keep tc_target *t)
{
	memset(t, 0, sizeof(*t));
	t->name = "cuda";
	t->warp_size = 32;
	t->max_block_threads = 1024;
	t->max_block[0] = 1024;
	t->max_block[1] = 1024;
	t->max_block[2] = 64;
	t->max_grid[0] = 2147483647;
	t->max_grid[1] = 65535;
	t->max_grid[2] = 65535;
	t->block_threads = 256;
	t->shared_bytes = 48 << 10;
}

/* The device kernels run on: ordinal 0 of the driver, its primary
 * context and compute capability; opened once per process, at the first
 * compile or run that needs it. */
typedef struct cuda_device {
	const tc_rt_cuda *cu;
	int device;
	void *ctx;
	int arch; /* compute capability, major * 10 + minor */
	char why[640]; /* why there is none */
} cuda_device;

static cuda_device dev;
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

static void dev_open(void)
{
	char why[512], buf[32];
	const tc_rt_cuda *cu = tc_rt_cuda_driver(why, sizeof(why));
	int major = 0, minor = 0;
	tc_cu_result r;
	if (!cu) {
		snprintf(dev.why, sizeof(dev.why), "target=cuda: %s", why);
		return;
	}
	if (!cu->primary_ctx_retain || !cu->ctx_push || !cu->ctx_pop || !cu->module_load_data ||
		!cu->module_unload || !cu->module_get_function || !cu->launch_kernel ||
		!cu->mem_alloc || !cu->mem_free || !cu->stream_synchronize ||
		!cu->pointer_get_attribute) {
		snprintf(dev.why, sizeof(dev.why), "target=cuda: the CUDA driver lacks entry points "
			"tcomp needs (cuLaunchKernel, cuMemAlloc_v2, ...): a driver for CUDA 11 or later");
		return;
	}
	if ((r = cu->device_get(&dev.device, 0)) ||
		(r = cu->device_attribute(&major, TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
			 dev.device)) ||
		(r = cu->device_attribute(&minor, TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
			 dev.device)) ||
		(r = cu->primary_ctx_retain(&dev.ctx, dev.device))) {
		snprintf(dev.why, sizeof(dev.why), "target=cuda: opening CUDA device 0 failed: %s",
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return;
	}
	dev.arch = major * 10 + minor;
	dev.cu = cu; /* the primary context stays with the process */
}

/* The device, or NULL with the reason in d (when d is non-NULL). */
static const cuda_device *device(tc_diags *d)
{
	pthread_once(&dev_once, dev_open);
	if (dev.cu)
		return &dev;
	if (d)
		tc_error(d, (tc_loc){0}, "%s", dev.why);
	return NULL;
}

/* The architecture to compile for: the option's, else the device's, else
 * sm_90 (offline: no driver or no device). */
static int arch_of(const tc_cg_opts *o)
{
	const cuda_device *v;
	if (o && o->gpu_arch)
		return o->gpu_arch;
	v = device(NULL);
	return v ? v->arch : 90;
}

/* ---- compiling ---- */

/* A compiled kernel: the CUDA code and its cubin; once loaded (at the
 * first run, under lock), the module, a function per kernel and the
 * temporaries' device memory. */
typedef struct cuda_code {
	tc_cg_cuda *code;
	char *cubin;
	int arch;
	pthread_mutex_t lock;
	int loaded;
	void *module;
	void **fn;                  /* per kernel */
	unsigned long long *temp;   /* per tensor: device memory of a temporary, else 0 */
	int ntensors;
} cuda_code;

static void code_free(__tc_take void *code)
{
	cuda_code *c = code;
	void *old;
	int i;
	if (!c)
		return;
	if (c->loaded && !dev.cu->ctx_push(dev.ctx)) {
		for (i = 0; c->temp && i < c->ntensors; i++)
			if (c->temp[i])
				dev.cu->mem_free(c->temp[i]);
		if (c->module)
			dev.cu->module_unload(c->module);
		dev.cu->ctx_pop(&old);
	}
	pthread_mutex_destroy(&c->lock);
	tc_free(c->temp);
	tc_free(c->fn);
	tc_free(c->cubin);
	tc_cg_cuda_free(c->code);
	tc_free(c);
}

/* The cubin (or PTX) of code for arch; NULL with a message in d. */
static char *nvrtc_image(const tc_cg_cuda *code, const char *def, int arch, int cubin,
	size_t *size, char **log, tc_diags *d)
{
	char name[160], sm[16];
	char *image = NULL;
	snprintf(name, sizeof(name), "%s.cu", def);
	snprintf(sm, sizeof(sm), "%s_%d", cubin ? "sm" : "compute", arch);
	if (tc_cg_nvrtc_compile(code->source, name, sm, cubin, &image, size, log, d) < 0) {
		tc_error(d, (tc_loc){0}, "internal error: NVRTC could not compile the CUDA code of "
			"'%s' (tcomp emit --stage cuda shows it)", def);
		return NULL;
	}
	return image;
}

/* The CUDA code of p and its cubin, for the device's architecture (or
 * the gpu_arch option's): no driver needed. */
static tc_stat compile(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_poly *p, __tc_keep tc_diags *d)
{
	cuda_code *k = tc_calloc(1, sizeof(*k));
	size_t size;
	(void)state;
	if (!k) {
		tc_error(d, (tc_loc){0}, "out of memory");
		return TC_ERR;
	}
	pthread_mutex_init(&k->lock, NULL);
	k->ntensors = p->f->ntensors;
	k->arch = arch_of(&c->opts.cg);
	if (!(k->code = tc_cg_cuda_build(p, c->opts.cg.contract, d)) ||
		!(k->cubin = nvrtc_image(k->code, p->f->name, k->arch, 1, &size, NULL, d))) {
		code_free(k);
		return TC_ERR;
	}
	c->code = k;
	return TC_OK;
}

/* Load k on the device (once): the module, its functions, the
 * temporaries' memory.  0, or -1 with an error in m's context. */
static int load_code(tc_module *m, tc_rt_compiled *c, cuda_code *k)
{
	const tc_ir_func *f = c->cf;
	tc_diags d;
	char buf[32];
	void *old;
	tc_cu_result r = 0;
	int i, st = 0;
	pthread_mutex_lock(&k->lock);
	if (k->loaded)
		goto done;
	tc_diags_init(&d, NULL);
	if (!device(&d)) {
		tc_rt_set_error_diags(m->ctx, &d);
		tc_diags_clear(&d);
		st = -1;
		goto done;
	}
	tc_diags_clear(&d);
	if (k->arch != dev.arch && !c->opts.cg.gpu_arch) {
		tc_rt_set_error(m->ctx, "'%s' was compiled for sm_%d, but CUDA device 0 is sm_%d",
			f->name, k->arch, dev.arch);
		st = -1;
		goto done;
	}
	k->fn = tc_calloc((size_t)k->code->nkernels + 1, sizeof(void *));
	k->temp = tc_calloc((size_t)f->ntensors + 1, sizeof(*k->temp));
	if (!k->fn || !k->temp) {
		tc_rt_set_error(m->ctx, "out of memory");
		st = -1;
		goto done;
	}
	if ((r = dev.cu->ctx_push(dev.ctx)))
		goto failed;
	r = dev.cu->module_load_data(&k->module, k->cubin);
	for (i = 0; !r && i < k->code->nkernels; i++)
		r = dev.cu->module_get_function(&k->fn[i], k->module, k->code->kernels[i].name);
	for (i = f->ninputs + f->noutputs; !r && i < f->ntensors; i++) {
		size_t bytes = tc_ir_tensor_bytes(&c->shapes[i]);
		r = dev.cu->mem_alloc(&k->temp[i], bytes ? bytes : 1);
	}
	dev.cu->ctx_pop(&old);
	k->loaded = 1; /* what was loaded is freed with the code, even on failure */
failed:
	if (r) {
		tc_rt_set_error(m->ctx, "CUDA driver: loading the kernels of '%s' failed: %s",
			f->name, tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		st = -1;
		k->loaded = 0;
		if (k->module || k->temp) {
			/* keep nothing half-loaded */
			if (!dev.cu->ctx_push(dev.ctx)) {
				for (i = 0; i < f->ntensors; i++)
					if (k->temp[i])
						dev.cu->mem_free(k->temp[i]);
				if (k->module)
					dev.cu->module_unload(k->module);
				dev.cu->ctx_pop(&old);
			}
			memset(k->temp, 0, (size_t)f->ntensors * sizeof(*k->temp));
			k->module = NULL;
		}
	}
done:
	pthread_mutex_unlock(&k->lock);
	return st;
}

/* ---- running ---- */

/* Whether ptr is device (or managed) memory of device v. */
static int device_pointer(const cuda_device *v, void *ptr)
{
	int type = 0, ordinal = -1;
	if (v->cu->pointer_get_attribute(&type, TC_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
		    (unsigned long long)(uintptr_t)ptr) ||
		(type != TC_CU_MEMORYTYPE_DEVICE && type != TC_CU_MEMORYTYPE_UNIFIED))
		return 0;
	return v->cu->pointer_get_attribute(&ordinal, TC_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
		       (unsigned long long)(uintptr_t)ptr) == 0 && ordinal == v->device;
}

#define FEW_PARAMS 32

static tc_stat run(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c, __tc_keep const tc_tensor *t)
{
	cuda_code *k = c->code;
	const tc_ir_func *f = c->cf;
	unsigned long long ptr[FEW_PARAMS];
	void *args[FEW_PARAMS], *old;
	char buf[32];
	tc_cu_result r;
	int i, j;
	if (load_code(m, c, k) < 0)
		return TC_ERR;
	if ((r = dev.cu->ctx_push(dev.ctx))) {
		tc_rt_set_error(m->ctx, "CUDA driver: cuCtxPushCurrent failed: %s",
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return TC_ERR;
	}
	for (i = 0; i < f->ninputs + f->noutputs; i++)
		if (t[i].data && tc_ir_tensor_bytes(&t[i]) && !device_pointer(&dev, t[i].data)) {
			dev.cu->ctx_pop(&old);
			tc_rt_set_error(m->ctx, "%s '%s' of '%s': its data is not memory of CUDA device "
				"%d (a host pointer passed as a device pointer?)",
				i < f->ninputs ? "input" : "output", f->tensors[i].name, f->name, dev.device);
			return TC_ERR;
		}
	for (i = 0, r = 0; !r && i < k->code->nkernels; i++) {
		const tc_cg_cuda_kernel *kn = &k->code->kernels[i];
		if (kn->nparams > FEW_PARAMS) {
			dev.cu->ctx_pop(&old);
			tc_rt_set_error(m->ctx, "internal error: kernel %s of '%s' has %d parameters "
				"(at most %d)", kn->name, f->name, kn->nparams, FEW_PARAMS);
			return TC_ERR;
		}
		for (j = 0; j < kn->nparams; j++) {
			int x = kn->params[j].tensor;
			ptr[j] = x < f->ninputs + f->noutputs ? (unsigned long long)(uintptr_t)t[x].data
							      : k->temp[x];
			args[j] = &ptr[j];
		}
		r = dev.cu->launch_kernel(k->fn[i], kn->grid[0], kn->grid[1], kn->grid[2],
			kn->block[0], kn->block[1], kn->block[2], 0, NULL, args, NULL);
	}
	if (!r)
		r = dev.cu->stream_synchronize(NULL);
	dev.cu->ctx_pop(&old);
	if (r) {
		tc_rt_set_error(m->ctx, "CUDA: running '%s' failed: %s", f->name,
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return TC_ERR;
	}
	return TC_OK;
}

/* ---- text stages ---- */

static const char *const stages[] = {"cuda", "ptx", "cuda-resources", NULL};

/* ptxas's lines of NVRTC's log ("ptxas info : Used 32 registers, ..."),
 * headed by the architecture; NULL with a message in d. */
static char *resources(const tc_cg_cuda *code, const char *def, int arch, tc_diags *d)
{
	char *log = NULL, *image;
	size_t size;
	tc_buf b;
	image = nvrtc_image(code, def, arch, 1, &size, &log, d);
	if (!image) {
		tc_free(log);
		return NULL;
	}
	tc_free(image);
	tc_buf_init(&b);
	tc_buf_printf(&b, "# %s for sm_%d: %zu bytes of cubin; ptxas says:\n", def, arch, size);
	tc_buf_puts(&b, log && *log ? log : "(nothing)\n");
	tc_free(log);
	return tc_buf_take(&b);
}

static __tc_give char *emit(__tc_keep const tc_poly *p, __tc_keep const tc_rt_opts *o,
	const char *stage, __tc_keep tc_diags *d)
{
	tc_cg_cuda *code = tc_cg_cuda_build(p, o ? o->cg.contract : 0, d);
	char *text = NULL;
	size_t size;
	int arch = arch_of(o ? &o->cg : NULL);
	if (!code)
		return NULL;
	if (!strcmp(stage, "cuda")) {
		text = code->source;
		code->source = NULL;
	} else if (!strcmp(stage, "ptx")) {
		text = nvrtc_image(code, p->f->name, arch, 0, &size, NULL, d);
	} else {
		text = resources(code, p->f->name, arch, d);
	}
	tc_cg_cuda_free(code);
	return text;
}

static __tc_give char *key_target(void)
{
	const tc_rt_cuda *cu = tc_rt_cuda_driver(NULL, 0);
	char name[128] = "unknown";
	int dev = 0, major = 0, minor = 0;
	tc_buf b;
	if (!cu || cu->device_get(&dev, 0) || cu->device_name(name, (int)sizeof(name), dev) ||
		cu->device_attribute(&major, TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
		cu->device_attribute(&minor, TC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
		return NULL;
	tc_buf_init(&b);
	tc_buf_printf(&b, "cuda;%s;sm_%d%d;driver %d", name, major, minor, cu->driver_version);
	return tc_buf_take(&b);
}

static void object_version(__tc_keep char *buf, size_t n)
{
	int major = 0, minor = 0;
	tc_diags d;
	tc_diags_init(&d, NULL);
	if (tc_cg_nvrtc_version(&major, &minor, &d) < 0)
		snprintf(buf, n, "nvrtc unknown");
	else
		snprintf(buf, n, "nvrtc %d.%d", major, minor);
	tc_diags_clear(&d);
}

const tc_rt_backend tc_rt_backend_cuda = {
	.name = "cuda",
	.device = kDLCUDA,
	.pipeline = &tc_rt_backend_cuda,
	.passes = tc_poly_gpu_passes,
	.npasses = &tc_poly_ngpu_passes,
	.describe = describe,
	.compile = compile,
	.code_free = code_free,
	.run = run,
	.stages = stages,
	.emit = emit,
	.key_target = key_target,
	.object_version = object_version,
};

/* ---- the emulator: the same CUDA code on the CPU ---- */

/* The cuda-emu backend's code: the CUDA code and its emulation. */
typedef struct emu_code {
	tc_cg_cuda *code;
	tc_cg_emu *emu;
} emu_code;

static void emu_code_free(__tc_take void *code)
{
	emu_code *c = code;
	if (!c)
		return;
	tc_cg_emu_free(c->emu);
	tc_cg_cuda_free(c->code);
	tc_free(c);
}

/* The CUDA code of p compiled by the system C++ compiler with the
 * emulation header (codegen/cuda_emu.h). */
static tc_stat emu_compile(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_poly *p, __tc_keep tc_diags *d)
{
	emu_code *k = tc_calloc(1, sizeof(*k));
	(void)state;
	if (!k) {
		tc_error(d, (tc_loc){0}, "out of memory");
		return TC_ERR;
	}
	if (!(k->code = tc_cg_cuda_build(p, c->opts.cg.contract, d)) ||
		!(k->emu = tc_cg_emu_compile(k->code, d))) {
		emu_code_free(k);
		return TC_ERR;
	}
	c->code = k;
	return TC_OK;
}

#define FEW_TENSORS 32

/* The kernels in order on the tensors (host memory), the temporaries in
 * the kernel's workspace; the emulator's report of an out-of-bounds
 * access or a race is the run's error. */
static tc_stat emu_run(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_tensor *t)
{
	emu_code *k = c->code;
	const tc_ir_func *f = c->cf;
	void *few_buf[FEW_TENSORS], **buf = few_buf, *ws = NULL;
	int64_t few_n[FEW_TENSORS], *nelem = few_n;
	tc_stat st = TC_OK;
	tc_diags d;
	char *base;
	int i, j;
	if (f->ntensors > FEW_TENSORS) {
		buf = tc_calloc((size_t)f->ntensors, sizeof(*buf));
		nelem = tc_calloc((size_t)f->ntensors, sizeof(*nelem));
	}
	if (!buf || !nelem || (c->ws_bytes && !(ws = tc_rt_workspace_take(m->ctx, c)))) {
		tc_rt_set_error(m->ctx, "out of memory for the workspace of '%s'", f->name);
		st = TC_ERR;
		goto done;
	}
	base = tc_rt_workspace_base(ws);
	for (i = 0; i < f->ntensors; i++) {
		const tc_tensor *x = i < f->ninputs + f->noutputs ? &t[i] : &c->shapes[i];
		nelem[i] = 1;
		for (j = 0; j < x->ndim; j++)
			nelem[i] *= x->shape[j];
		buf[i] = i < f->ninputs + f->noutputs ? t[i].data : base + c->ws_off[i];
	}
	tc_diags_init(&d, NULL);
	for (i = 0; st == TC_OK && i < k->code->nkernels; i++)
		if (tc_cg_emu_run(k->emu, i, buf, nelem, &d) < 0) {
			tc_rt_set_error_diags(m->ctx, &d);
			st = TC_ERR;
		}
	tc_diags_clear(&d);
done:
	tc_rt_workspace_give(m->ctx, c, ws);
	if (buf != few_buf)
		tc_free(buf);
	if (nelem != few_n)
		tc_free(nelem);
	return st;
}

const tc_rt_backend tc_rt_backend_cuda_emu = {
	.name = "cuda-emu",
	.device = kDLCPU,
	.pipeline = &tc_rt_backend_cuda,
	.compile = emu_compile,
	.code_free = emu_code_free,
	.run = emu_run,
};
