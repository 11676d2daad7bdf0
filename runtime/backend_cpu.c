/* The cpu backend (backend.h): the host CPU through LLVM (codegen/llvm.h),
 * the only file of runtime/ that includes it.
 *
 * Its code is JIT-compiled into the context's JIT (its state) or compiled
 * to object code for the kernel cache.  A kernel's function takes one
 * array (codegen/llvm.h): the data of every tensor (inputs, outputs, then
 * the temporaries in the workspace), the error record of run-time checks,
 * tcomp's parallel_for, through which its parallel loops run on the
 * thread pool (runtime/pool.c), and the sizes (which code compiled with
 * sizes=parametric reads). */
#include "backend.h"

#include "error.h"
#include "../codegen/llvm.h"
#include "compiled.h"
#include "object.h"
#include "pool.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* ---- the machine ---- */

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static char *host_target; /* "triple;cpu;features", NULL if unknown */
static int64_t host_l1d, host_l2, host_l3; /* cache sizes in bytes, 0 if unknown */
static int host_level;    /* the highest x86-64 level the host runs (0: none) */

/* The caches assumed for code compiled for an x86-64 level (the cpu
 * option) rather than the host: those of the Zen 4 cores. */
#define LEVEL_L1D (32 << 10)
#define LEVEL_L2 (1 << 20)
#define LEVEL_L3 (32 << 20) /* a Zen 4 CCD's */

enum { CACHE_L1D, CACHE_L2, CACHE_L3 };

/* The size in bytes of the host's L1 data cache, L2 or L3 cache, 0 if
 * unknown (or implausible: under 4 KiB or over 64 MiB, for the L3 under
 * 256 KiB or over 16 GiB). */
static int64_t cache_bytes(int which)
{
	long v = -1;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && \
	defined(_SC_LEVEL3_CACHE_SIZE)
	v = sysconf(which == CACHE_L1D ? _SC_LEVEL1_DCACHE_SIZE
		: which == CACHE_L2 ? _SC_LEVEL2_CACHE_SIZE : _SC_LEVEL3_CACHE_SIZE);
#else
	(void)which;
#endif
	if (which == CACHE_L3)
		return v >= (256L << 10) && (int64_t)v <= ((int64_t)16 << 30) ? (int64_t)v : 0;
	return v >= (4 << 10) && v <= (64L << 20) ? (int64_t)v : 0;
}

/* Field k of host_target (0 the triple, 1 the CPU, 2 the features), up to
 * the next ';' or the end, or NULL if unknown. */
static const char *host_field(int k)
{
	const char *p = host_target;
	while (p && k-- > 0)
		if ((p = strchr(p, ';')))
			p++;
	return p;
}

static void host_init(void)
{
	const char *features;
	host_target = tc_cg_llvm_host_target();
	features = host_field(2);
	host_level = features && !strncmp(host_target, "x86_64", 6)
		? tc_cg_llvm_level_of(features) : 0;
	host_l1d = cache_bytes(CACHE_L1D);
	host_l2 = cache_bytes(CACHE_L2);
	host_l3 = cache_bytes(CACHE_L3);
}

/* Whether the host CPU, as LLVM names it, is cpu ("znver4"), or, with
 * prefix, a CPU whose name starts with cpu ("znver": AMD's Zen cores). */
static int host_cpu_is(const char *cpu, int prefix)
{
	const char *p = host_field(1);
	return p && (prefix || strcspn(p, ";") == strlen(cpu)) && !strncmp(p, cpu, strlen(cpu));
}

/* Whether the host's LLVM feature string enables feature ("+avx512f"). */
static int has_feature(const char *feature)
{
	const char *p = host_field(2);
	return p && tc_cg_llvm_has_feature(p, feature);
}

/* The host CPU.  Vectors from its features: 64 bytes and 32 registers with
 * AVX-512, 32 bytes and 16 registers with AVX, else 16 bytes (SSE: 16
 * registers; AArch64's NEON: 32); three quarters of the registers hold a
 * register tile's partial sums.  KC, NC and the L1's size come from the
 * host's L1d and L2 as the C library reports them (sysconf; Linux reads
 * the kernel's cache description) through tc_target_cache_blocks
 * (ir/target.c: a KC x NR panel of the right operand in L1, a KC x NC
 * block in a quarter of L2; the Zen 4 host, 32 KiB and 1 MiB: KC 128, NC
 * 512).  Where it reports none, the blocks measured on the Zen 5 cores of
 * docs/performance.md (48 KiB L1d, 1 MiB L2): KC 256, NC 512, 48 KiB.  MC
 * is measured: 48 rows, 192 for rows of 1536 or more (sgemm 2048: 107.6 ms
 * with 48-row blocks, 87.9 with 192); transposing copies in 16 x 16 tiles,
 * a cache line per row (matmul_nt 1024: the untiled copy took 3 of 14.5
 * ms on the Zen 5; on the Zen 4 host 16 x 16 took 0.93-0.96x the time of
 * 32 x 32, ir/target.h).
 * Loop nests of fewer than 32768 statement instances stay on the calling
 * thread (a parallel loop's hand-out cost more than fcrelu 128x128x10's
 * whole run).  Row buffers up to 64 KiB live on the stack.  The L3's size
 * (the x86-64 levels: a Zen 4 CCD's 32 MiB) decides where outputs stream
 * (codegen/llvm_loop.c, choose_streamed). */
static void describe(__tc_keep tc_target *t, __tc_keep const tc_rt_opts *o)
{
	int regs, level = o ? o->cg.cpu : 0, intel_avx512, zen4;
	pthread_once(&host_once, host_init);
	memset(t, 0, sizeof(*t));
	t->name = "cpu";
	if (level ? level >= 4 : has_feature("+avx512f")) {
		t->vector_bytes = 64;
		regs = 32;
	} else if (level ? level >= 3 : has_feature("+avx")) {
		t->vector_bytes = 32;
		regs = 16;
	} else {
		t->vector_bytes = 16;
		regs = !level && host_target && !strncmp(host_target, "aarch64", 7) ? 32 : 16;
	}
	t->accumulators = regs * 3 / 4;
	t->vector_regs = regs;
	/* a masked rest where 512-bit vectors run at full rate: not on Zen 4,
	 * whose two halves made 8 + 4 lanes faster than a masked 16
	 * (docs/performance.md, "Masked rows") */
	t->masked_rest = o && o->cg.mask ? o->cg.mask > 0
		: !level && t->vector_bytes == 64 && !host_cpu_is("znver4", 0);
	/* packing copies in panels of a register tile's row (two vectors on
	 * AVX2, four on AVX-512), where measured to pay: AVX2, rows of 1024
	 * bytes or more; the Intel AVX-512 host of docs/performance.md, rows
	 * of a page or more (not the Zen 5: "Panels of B on AVX-512"); and
	 * there the blocks of rows the threads' shares (tile.c, rows_tile:
	 * the right operand's blocks reused by all of a thread's rows; sgemm
	 * 1024 0.82-0.84x the time of blocks of 48, "An Intel host"); on the
	 * Zen 4, whose 32 KiB L1d holds a KC x NR panel of rows 8 KiB apart in
	 * no way, rows of two pages or more (sgemm 2048 0.91-0.94x the time
	 * on one thread, 0.96x on two; at 1024 within the spread and the
	 * compile 1.25x; at 512 1.03x slower: "Panels of B on Zen 4"); on the
	 * Intel host the reduction's blocks too from the register tile's
	 * streams (tile.c, deep_blocks: KC up to 1024 floats from the 48 KiB
	 * L1d, NC from the 2 MiB L2; sgemm 1024 0.93x and 0.95x the time of
	 * KC 192 and NC 640 on one and two threads, "Deep blocks of the
	 * reduction"; the Zen hosts keep the L1 rule, not measured there) */
	intel_avx512 = !level && t->vector_bytes == 64 && !host_cpu_is("znver", 1);
	zen4 = !level && t->vector_bytes == 64 && host_cpu_is("znver4", 0);
	t->panel_bytes = t->vector_bytes == 32 ? 64
		: intel_avx512 || zen4 ? 4 * t->vector_bytes : 0;
	t->panel_min_row = t->vector_bytes == 32 ? 1024 : zen4 ? 8192 : 4096;
	t->rows_per_thread = intel_avx512;
	t->deep_blocks = intel_avx512;
	t->block_rows = 48;
	t->block_rows_long = 192;
	t->long_rows = 1536;
	t->block_depth = 256;
	t->conv_depth = 256;
	t->block_cols = 512;
	t->transpose_tile = 16; /* ir/target.h: one cache line of floats per row */
	t->l1_bytes = 48 << 10;
	t->l2_bytes = 1 << 20;
	/* an x86-64 level is a family of machines: the caches of the Zen 4
	 * cores of docs/performance.md stand for theirs, so that code
	 * compiled for a level is the same on every host */
	if (level)
		tc_target_cache_blocks(t, LEVEL_L1D, LEVEL_L2);
	else
		tc_target_cache_blocks(t, host_l1d, host_l2);
	t->l3_bytes = level ? LEVEL_L3 : host_l3;
	t->parallel_min_instances = 32768;
	t->rowbuf_bytes = 64 << 10;
}

static __tc_give char *key_target(void)
{
	pthread_once(&host_once, host_init);
	return tc_strdup(host_target ? host_target : "unknown");
}

/* ---- compiling and loading ---- */

static __tc_give void *state_new(__tc_keep tc_diags *d)
{
	return tc_cg_jit_new(d);
}

static void state_free(__tc_take void *state)
{
	tc_cg_jit_free(state);
}

static tc_stat compile(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_poly *p, __tc_keep tc_diags *d)
{
	c->code = tc_cg_llvm_compile(state, p, &c->opts.cg, d);
	return c->code ? TC_OK : TC_ERR;
}

static tc_stat object(__tc_keep tc_rt_compiled *c, __tc_keep const tc_poly *p,
	__tc_keep tc_rt_object *o, __tc_keep tc_diags *d)
{
	o->code = tc_cg_llvm_object(p, &c->opts.cg, o->symbol, &o->size, &o->sites, &o->nsites, d);
	return o->code ? TC_OK : TC_ERR;
}

static tc_stat load(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_rt_object *o, __tc_take tc_cg_site *sites, __tc_keep tc_diags *d)
{
	c->code = tc_cg_llvm_load(state, o->code, o->size, o->symbol, sites, o->nsites, d);
	return c->code ? TC_OK : TC_ERR;
}

static void code_free(__tc_take void *code)
{
	tc_cg_code_free(code);
}

/* ---- running ---- */

/* The error of a kernel compiled for an x86-64 level (the cpu option)
 * whose instructions the host lacks: running it would stop the process on
 * an illegal instruction. */
static tc_stat refuse_level(__tc_keep tc_context *ctx, __tc_keep const tc_rt_compiled *c)
{
	const char *cpu = host_field(1);
	int n = cpu ? (int)strcspn(cpu, ";") : 7;
	tc_rt_set_error(ctx, "'%s' was compiled with cpu=%s, whose instructions this CPU (%.*s; "
		"its level: %s) does not have: the code can be emitted (tc_kernel_emit, tcomp "
		"emit) but not run here; compile with cpu=host (the default) to run it",
		c->f->name, tc_cg_llvm_level_name(c->opts.cg.cpu), n, cpu ? cpu : "unknown",
		host_level ? tc_cg_llvm_level_name(host_level) : "none");
	return TC_ERR;
}

#define FEW_ARGS 32 /* a kernel argument array this long or shorter lives on run's stack */

static tc_stat run(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c, __tc_keep const tc_tensor *t,
	__tc_keep tc_rt_launch *launch)
{
	tc_context *ctx = m->ctx;
	const tc_ir_func *f = c->cf;
	/* the kernel's argument array on the stack for a kernel with few
	 * tensors (temporaries included): no allocation per call */
	void *few[FEW_ARGS], **ptrs = f->ntensors + 4 <= FEW_ARGS ? few
				    : tc_calloc((size_t)f->ntensors + 4, sizeof(void *));
	void (*pf)(tc_rt_loop_body, void *const *, int64_t, int64_t, int64_t) = tc_rt_parallel_for;
	int64_t err[2] = {0, 0};
	void *ws = NULL;
	char *base;
	int i;
	(void)launch; /* the host: no stream; tc_kernel_run_timed uses the clock */
	if (c->opts.cg.cpu > host_level) {
		if (ptrs != few)
			tc_free(ptrs);
		return refuse_level(ctx, c);
	}
	if (!ptrs || (c->ws_bytes && !(ws = tc_rt_workspace_take(ctx, c)))) {
		if (ptrs != few)
			tc_free(ptrs);
		tc_rt_set_error(ctx, "out of memory for the workspace of '%s' (%zu bytes)", f->name,
			c->ws_bytes);
		return TC_ERR;
	}
	base = tc_rt_workspace_base(ws);
	for (i = 0; i < f->ninputs + f->noutputs; i++)
		ptrs[i] = t[i].data;
	for (; i < f->ntensors; i++)
		ptrs[i] = base + c->ws_off[i];
	ptrs[f->ntensors] = err;
	memcpy(&ptrs[f->ntensors + 1], &pf, sizeof(pf)); /* the pool, for parallel loops */
	ptrs[f->ntensors + 2] = c->params; /* the free sizes' values (sizes=parametric) */
	tc_rt_pool_set_threads(c->opts.threads ? c->opts.threads
					       : __atomic_load_n(&ctx->threads, __ATOMIC_RELAXED));
	tc_cg_code_fn(c->code)(ptrs);
	tc_rt_workspace_give(ctx, c, ws);
	if (ptrs != few)
		tc_free(ptrs);
	if (err[0]) {
		tc_rt_report_check(m, c, tc_cg_code_site(c->code, err[0] - 1), err);
		return TC_ERR;
	}
	return TC_OK;
}

/* ---- text stages ---- */

static const char *const stages[] = {"llvm", "asm", NULL};

static __tc_give char *emit(__tc_keep const tc_poly *p, __tc_keep const tc_rt_opts *o,
	const char *stage, __tc_keep tc_diags *d)
{
	return tc_cg_llvm_text(p, o ? &o->cg : NULL,
		!strcmp(stage, "llvm") ? TC_CG_TEXT_LLVM : TC_CG_TEXT_ASM, d);
}

const tc_rt_backend tc_rt_backend_cpu = {
	.name = "cpu",
	.device = kDLCPU,
	.pipeline = &tc_rt_backend_cpu,
	.passes = tc_poly_cpu_passes,
	.npasses = &tc_poly_ncpu_passes,
	.describe = describe,
	.state_new = state_new,
	.state_free = state_free,
	.compile = compile,
	.object = object,
	.load = load,
	.code_free = code_free,
	.run = run,
	.stages = stages,
	.emit = emit,
	.key_target = key_target,
	.object_version = tc_cg_llvm_version,
};
