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
 * memory for its temporaries (allocated at the first run, freed with the
 * code).  A run checks that every tensor's data is device (or managed)
 * memory of that device, launches the kernels in order on the kernel
 * handle's stream (tc_kernel_set_stream; NULL: the legacy default stream)
 * and waits for that stream: a fault is an error of the run.  Timed runs
 * (tc_kernel_run_timed) record CUDA events around the launches.  Object
 * code for the kernel cache is the launch table and the cubin (object,
 * load): a cached kernel skips the code generator and NVRTC. */
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
static void describe(__tc_keep tc_target *t, __tc_keep const tc_rt_opts *o)
{
	(void)o;
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

/* The device kernels run on (cuda_driver.h: ordinal 0, its primary
 * context), or NULL with the reason in d (when d is non-NULL). */
static const tc_rt_cuda_dev *device(tc_diags *d)
{
	char why[640];
	const tc_rt_cuda_dev *v = tc_rt_cuda_device(why, sizeof(why));
	if (!v && d)
		tc_error(d, (tc_loc){0}, "target=cuda: %s", why);
	return v;
}

/* The architecture to compile for: the option's, else the device's, else
 * sm_90 (offline: no driver or no device). */
static int arch_of(const tc_cg_opts *o)
{
	const tc_rt_cuda_dev *v;
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
	size_t cubin_size;
	int arch;
	char *def;                  /* the def's name (compiled here, not loaded) */
	char *resources;            /* the cuda-resources text of the cubin, or NULL */
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
	const tc_rt_cuda_dev *v = c && c->loaded ? device(NULL) : NULL;
	void *old;
	int i;
	if (!c)
		return;
	if (v && !v->cu->ctx_push(v->ctx)) {
		for (i = 0; c->temp && i < c->ntensors; i++)
			if (c->temp[i])
				v->cu->mem_free(c->temp[i]);
		if (c->module)
			v->cu->module_unload(c->module);
		v->cu->ctx_pop(&old);
	}
	pthread_mutex_destroy(&c->lock);
	tc_free(c->temp);
	tc_free(c->fn);
	tc_free(c->cubin);
	tc_free(c->def);
	tc_free(c->resources);
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

/* The cuda-resources text of def's cubin for arch (size bytes) from
 * NVRTC's log (ptxas's lines: registers, spills, shared memory); NULL when
 * out of memory. */
static char *resources_text(const char *def, int arch, size_t size, const char *log)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_buf_printf(&b, "# %s for sm_%d: %zu bytes of cubin; ptxas says:\n", def, arch, size);
	tc_buf_puts(&b, log && *log ? log : "(nothing)\n");
	return tc_buf_take(&b);
}

/* The CUDA code of p and its cubin, for the device's architecture (or
 * the gpu_arch option's): no driver needed.  The def's name and the
 * cubin's resources are kept for the text stages (code_text). */
static tc_stat compile(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_poly *p, __tc_keep tc_diags *d)
{
	cuda_code *k = tc_calloc(1, sizeof(*k));
	char *log = NULL;
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
		!(k->cubin = nvrtc_image(k->code, p->f->name, k->arch, 1, &size, &log, d))) {
		tc_free(log);
		code_free(k);
		return TC_ERR;
	}
	k->cubin_size = size;
	k->def = tc_strdup(p->f->name);
	k->resources = resources_text(p->f->name, k->arch, size, log); /* NULL: asked again */
	tc_free(log);
	c->code = k;
	return TC_OK;
}

/* Load k on the device (once): the module, its functions, the
 * temporaries' memory.  0, or -1 with an error in m's context. */
static int load_code(tc_module *m, tc_rt_compiled *c, cuda_code *k)
{
	const tc_ir_func *f = c->cf;
	const tc_rt_cuda_dev *v;
	tc_diags d;
	char buf[32];
	void *old;
	tc_cu_result r = 0;
	int i, st = 0;
	pthread_mutex_lock(&k->lock);
	if (k->loaded)
		goto done;
	tc_diags_init(&d, NULL);
	if (!(v = device(&d))) {
		tc_rt_set_error_diags(m->ctx, &d);
		tc_diags_clear(&d);
		st = -1;
		goto done;
	}
	tc_diags_clear(&d);
	if (k->arch != v->arch && !c->opts.cg.gpu_arch) {
		tc_rt_set_error(m->ctx, "'%s' was compiled for sm_%d, but CUDA device 0 is sm_%d",
			f->name, k->arch, v->arch);
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
	if ((r = v->cu->ctx_push(v->ctx)))
		goto failed;
	r = v->cu->module_load_data(&k->module, k->cubin);
	for (i = 0; !r && i < k->code->nkernels; i++)
		r = v->cu->module_get_function(&k->fn[i], k->module, k->code->kernels[i].name);
	for (i = f->ninputs + f->noutputs; !r && i < f->ntensors; i++) {
		size_t bytes = tc_ir_tensor_bytes(&c->shapes[i]);
		r = v->cu->mem_alloc(&k->temp[i], bytes ? bytes : 1);
	}
	v->cu->ctx_pop(&old);
	k->loaded = 1; /* what was loaded is freed with the code, even on failure */
failed:
	if (r) {
		tc_rt_set_error(m->ctx, "CUDA driver: loading the kernels of '%s' failed: %s",
			f->name, tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		st = -1;
		k->loaded = 0;
		if (k->module || k->temp) {
			/* keep nothing half-loaded */
			if (!v->cu->ctx_push(v->ctx)) {
				for (i = 0; i < f->ntensors; i++)
					if (k->temp[i])
						v->cu->mem_free(k->temp[i]);
				if (k->module)
					v->cu->module_unload(k->module);
				v->cu->ctx_pop(&old);
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
static int device_pointer(const tc_rt_cuda_dev *v, void *ptr)
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

/* Launch c's kernels in order on launch's stream (the legacy default
 * stream without one), then wait for that stream: a run returns with its
 * outputs written, and a launch failure or a fault is its error.  Timed
 * (tc_kernel_run_timed): events recorded on the stream before the first
 * launch and after the last give the device time. */
static tc_stat run(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c, __tc_keep const tc_tensor *t,
	__tc_keep tc_rt_launch *launch)
{
	cuda_code *k = c->code;
	const tc_ir_func *f = c->cf;
	const tc_rt_cuda_dev *v;
	unsigned long long ptr[FEW_PARAMS];
	void *args[FEW_PARAMS], *old, *stream = launch ? launch->stream : NULL;
	void *ev[2] = {NULL, NULL};
	const char *what = "launching a kernel";
	float ms = 0;
	char buf[32];
	tc_cu_result r;
	int i, j, timed = launch && launch->timed;
	if (load_code(m, c, k) < 0)
		return TC_ERR;
	v = device(NULL); /* open: load_code succeeded */
	if ((r = v->cu->ctx_push(v->ctx))) {
		tc_rt_set_error(m->ctx, "CUDA driver: cuCtxPushCurrent failed: %s",
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return TC_ERR;
	}
	for (i = 0; i < f->ninputs + f->noutputs; i++)
		if (t[i].data && tc_ir_tensor_bytes(&t[i]) && !device_pointer(v, t[i].data)) {
			v->cu->ctx_pop(&old);
			tc_rt_set_error(m->ctx, "%s '%s' of '%s': its data is not memory of CUDA device "
				"%d (a host pointer passed as a device pointer?)",
				i < f->ninputs ? "input" : "output", f->tensors[i].name, f->name, v->device);
			return TC_ERR;
		}
	for (i = 0; i < k->code->nkernels; i++)
		if (k->code->kernels[i].nparams > FEW_PARAMS) {
			v->cu->ctx_pop(&old);
			tc_rt_set_error(m->ctx, "internal error: kernel %s of '%s' has %d parameters "
				"(at most %d)", k->code->kernels[i].name, f->name,
				k->code->kernels[i].nparams, FEW_PARAMS);
			return TC_ERR;
		}
	r = 0;
	if (timed) {
		what = "timing with events";
		if (!(r = v->cu->event_create(&ev[0], 0)) && !(r = v->cu->event_create(&ev[1], 0)))
			r = v->cu->event_record(ev[0], stream);
	}
	for (i = 0; !r && i < k->code->nkernels; i++) {
		const tc_cg_cuda_kernel *kn = &k->code->kernels[i];
		for (j = 0; j < kn->nparams; j++) {
			int x = kn->params[j].tensor;
			ptr[j] = x < f->ninputs + f->noutputs ? (unsigned long long)(uintptr_t)t[x].data
							      : k->temp[x];
			args[j] = &ptr[j];
		}
		what = "launching a kernel";
		r = v->cu->launch_kernel(k->fn[i], kn->grid[0], kn->grid[1], kn->grid[2],
			kn->block[0], kn->block[1], kn->block[2], 0, stream, args, NULL);
	}
	if (!r && timed && !(r = v->cu->event_record(ev[1], stream)) &&
		!(r = v->cu->event_synchronize(ev[1])))
		r = v->cu->event_elapsed_time(&ms, ev[0], ev[1]);
	if (!r) {
		what = "waiting for the stream";
		r = v->cu->stream_synchronize(stream);
	}
	for (i = 0; i < 2; i++)
		if (ev[i])
			v->cu->event_destroy(ev[i]);
	v->cu->ctx_pop(&old);
	if (r) {
		tc_rt_set_error(m->ctx, "CUDA: running '%s' failed (%s): %s", f->name, what,
			tc_rt_cuda_result_name(r, buf, sizeof(buf)));
		return TC_ERR;
	}
	if (timed) {
		launch->measured = 1;
		launch->ms = ms;
	}
	return TC_OK;
}

/* ---- object code for the kernel cache ---- */

/* The object code of a cuda kernel: a text header naming the kernels and
 * how each is launched, then the cubin, so that a kernel loaded from the
 * kernel cache skips both the CUDA code generator and NVRTC:
 *   tcomp-cuda 1 sm_ARCH KERNELS CUBIN_BYTES\n
 *   NAME GX GY GZ BX BY BZ NPARAMS TENSOR...\n   (a line per kernel)
 *   the cubin's bytes */
static tc_stat object(__tc_keep tc_rt_compiled *c, __tc_keep const tc_poly *p,
	__tc_keep tc_rt_object *o, __tc_keep tc_diags *d)
{
	cuda_code *k;
	tc_buf b;
	size_t size = 0;
	char *cubin = NULL;
	int i, j;
	if (compile(NULL, c, p, d) < 0)
		return TC_ERR;
	k = c->code;
	c->code = NULL;
	tc_buf_init(&b);
	/* the cubin's size: NVRTC's image again would cost a compile; an
	 * ELF's size is not in k, so keep it from nvrtc_image's answer */
	size = k->cubin_size;
	cubin = k->cubin;
	tc_buf_printf(&b, "tcomp-cuda 1 sm_%d %d %zu\n", k->arch, k->code->nkernels, size);
	for (i = 0; i < k->code->nkernels; i++) {
		const tc_cg_cuda_kernel *kn = &k->code->kernels[i];
		tc_buf_printf(&b, "%s %u %u %u %u %u %u %d", kn->name, kn->grid[0], kn->grid[1],
			kn->grid[2], kn->block[0], kn->block[1], kn->block[2], kn->nparams);
		for (j = 0; j < kn->nparams; j++)
			tc_buf_printf(&b, " %d", kn->params[j].tensor);
		tc_buf_puts(&b, "\n");
	}
	if (b.oom || !(o->code = tc_malloc(b.len + size + 1))) {
		tc_buf_free(&b);
		code_free(k);
		tc_error(d, (tc_loc){0}, "out of memory");
		return TC_ERR;
	}
	memcpy(o->code, b.s, b.len);
	memcpy((char *)o->code + b.len, cubin, size);
	o->size = b.len + size;
	tc_buf_free(&b);
	code_free(k);
	return TC_OK;
}

/* Read object o (made by object) into c->code: the launch table and the
 * cubin, loaded on the device at the first run.  -1 with a message in d
 * when it is not one of ours or is malformed (the caller compiles). */
static tc_stat load(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_rt_object *o, __tc_take tc_cg_site *sites, __tc_keep tc_diags *d)
{
	const char *s = o->code, *end = s ? s + o->size : NULL, *nl;
	unsigned long long size = 0;
	int version = 0, arch = 0, nk = 0, used = 0, i, j, want;
	cuda_code *k = NULL;
	char line[64 + 32 * 12];
	(void)state;
	tc_free(sites); /* CUDA code has no run-time check sites */
	if (!s || !(nl = memchr(s, '\n', o->size)) || (size_t)(nl - s) >= sizeof(line))
		goto bad;
	memcpy(line, s, (size_t)(nl - s));
	line[nl - s] = 0;
	if (sscanf(line, "tcomp-cuda %d sm_%d %d %llu%n", &version, &arch, &nk, &size, &used) != 4 ||
		version != 1 || nk < 1 || nk > 4096 || line[used])
		goto bad;
	want = c->opts.cg.gpu_arch ? c->opts.cg.gpu_arch : arch_of(NULL);
	if (arch != want) {
		tc_error(d, (tc_loc){0}, "the cached cubin is for sm_%d, not sm_%d", arch, want);
		return TC_ERR;
	}
	if (!(k = tc_calloc(1, sizeof(*k))) || !(k->code = tc_calloc(1, sizeof(*k->code))) ||
		!(k->code->kernels = tc_calloc((size_t)nk, sizeof(tc_cg_cuda_kernel))))
		goto oom;
	pthread_mutex_init(&k->lock, NULL);
	k->arch = arch;
	k->ntensors = c->cf->ntensors;
	k->code->nkernels = nk;
	for (i = 0; i < nk; i++) {
		tc_cg_cuda_kernel *kn = &k->code->kernels[i];
		const char *q;
		int np = 0;
		s = nl + 1;
		if (s >= end || !(nl = memchr(s, '\n', (size_t)(end - s))) ||
			(size_t)(nl - s) >= sizeof(line))
			goto bad;
		memcpy(line, s, (size_t)(nl - s));
		line[nl - s] = 0;
		if (sscanf(line, "%63s %u %u %u %u %u %u %d%n", kn->name, &kn->grid[0], &kn->grid[1],
			    &kn->grid[2], &kn->block[0], &kn->block[1], &kn->block[2], &np,
			    &used) != 8 || np < 0 || np > FEW_PARAMS)
			goto bad;
		if (np && !(kn->params = tc_calloc((size_t)np, sizeof(tc_cg_cuda_param))))
			goto oom;
		kn->nparams = np;
		for (q = line + used, j = 0; j < np; j++) {
			int x, n = 0;
			if (sscanf(q, " %d%n", &x, &n) != 1 || x < 0 || x >= c->cf->ntensors)
				goto bad;
			kn->params[j].tensor = x;
			q += n;
		}
		if (*q)
			goto bad;
	}
	s = nl + 1;
	if (s > end || (unsigned long long)(end - s) != size || !size ||
		!(k->cubin = tc_malloc((size_t)size)))
		goto bad;
	memcpy(k->cubin, s, (size_t)size);
	k->cubin_size = (size_t)size;
	c->code = k;
	return TC_OK;
bad:
	tc_error(d, (tc_loc){0}, "the cached object is not a cuda kernel of this tcomp");
	code_free(k);
	return TC_ERR;
oom:
	tc_error(d, (tc_loc){0}, "out of memory");
	code_free(k);
	return TC_ERR;
}

/* ---- text stages ---- */

static const char *const stages[] = {"cuda", "ptx", "cuda-resources", NULL};

/* ptxas's lines of NVRTC's log ("ptxas info : Used 32 registers, ..."),
 * headed by the architecture; NULL with a message in d. */
static char *resources(const tc_cg_cuda *code, const char *def, int arch, tc_diags *d)
{
	char *log = NULL, *image, *text;
	size_t size;
	image = nvrtc_image(code, def, arch, 1, &size, &log, d);
	if (!image) {
		tc_free(log);
		return NULL;
	}
	tc_free(image);
	text = resources_text(def, arch, size, log);
	tc_free(log);
	return text;
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

/* The CUDA text of code when stage is "cuda" and code has it (not when
 * loaded from the cache: a cubin only); NULL otherwise. */
static __tc_give char *source_text(__tc_keep const tc_cg_cuda *code, const char *stage)
{
	return code && code->source && !strcmp(stage, "cuda") ? tc_strdup(code->source) : NULL;
}

/* The kept text of a kernel compiled here: its CUDA text, its cubin's
 * resources, its PTX (NVRTC from the kept text: no scheduling again). */
static __tc_give char *code_text(__tc_keep const void *code, const char *stage)
{
	const cuda_code *k = code;
	tc_diags d;
	char *text = NULL;
	size_t size;
	if (!k->code || !k->code->source || !k->def)
		return NULL; /* loaded from the cache: a cubin only */
	if (!strcmp(stage, "cuda-resources"))
		return k->resources ? tc_strdup(k->resources) : NULL;
	if (strcmp(stage, "ptx"))
		return source_text(k->code, stage);
	tc_diags_init(&d, NULL); /* a failure: the pipeline's emit says why */
	text = nvrtc_image(k->code, k->def, k->arch, 0, &size, NULL, &d);
	tc_diags_clear(&d);
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
	.object = object,
	.load = load,
	.code_free = code_free,
	.run = run,
	.stages = stages,
	.emit = emit,
	.code_text = code_text,
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

static __tc_give char *emu_code_text(__tc_keep const void *code, const char *stage)
{
	return source_text(((const emu_code *)code)->code, stage);
}

#define FEW_TENSORS 32

/* The kernels in order on the tensors (host memory), the temporaries in
 * the kernel's workspace; the emulator's report of an out-of-bounds
 * access or a race is the run's error. */
static tc_stat emu_run(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_tensor *t, __tc_keep tc_rt_launch *launch)
{
	emu_code *k = c->code;
	const tc_ir_func *f = c->cf;
	void *few_buf[FEW_TENSORS], **buf = few_buf, *ws = NULL;
	int64_t few_n[FEW_TENSORS], *nelem = few_n;
	tc_stat st = TC_OK;
	tc_diags d;
	char *base;
	int i, j;
	(void)launch; /* host memory: no stream; timed with the host's clock */
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

/* The emulator's key part: "cuda-emu;" and the host's (its times are the
 * host CPU's), so that an entry tuned with cuda-emu is never a CPU
 * compile's, nor the reverse, though both take host tensors. */
static __tc_give char *emu_key_target(void)
{
	char *host = tc_rt_backend_cpu.key_target();
	tc_buf b;
	if (!host)
		return NULL;
	tc_buf_init(&b);
	tc_buf_printf(&b, "cuda-emu;%s", host);
	tc_free(host);
	return tc_buf_take(&b);
}

const tc_rt_backend tc_rt_backend_cuda_emu = {
	.name = "cuda-emu",
	.device = kDLCPU,
	.pipeline = &tc_rt_backend_cuda,
	.compile = emu_compile,
	.code_free = emu_code_free,
	.run = emu_run,
	.code_text = emu_code_text,
	.key_target = emu_key_target,
};
