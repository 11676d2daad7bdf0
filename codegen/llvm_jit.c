/* The LLVM back end's set-up and everything around the module builder:
 * LLVM initialisation, the host (triple, CPU, features) and its target
 * machines, the pass pipeline (optimize), the JIT (tc_cg_jit_*,
 * tc_cg_code_*, the symbols generated code calls, defined by address),
 * object files (tc_cg_llvm_object, tc_cg_llvm_load), the text stages
 * (tc_cg_llvm_text), tc_cg_llvm_host_target, tc_cg_llvm_version, and the
 * helpers generated code calls (tc_cg_builtin_call,
 * tc_cg_half_from_double).
 *
 * It gets modules from tc_cg_llvm_build_module (llvm_loop.c) and knows
 * nothing of how they are built: not the isl AST, not the IR, not the
 * code-generation state (struct cg).  See llvm.h for the contract.
 *
 * The JIT is ORC LLJIT.  Symbols the code may call (libm, the two helpers
 * above, memset/memcpy the optimiser may introduce) are defined as
 * absolute addresses taken here, so they resolve whether or not the host
 * exports them; a process symbol generator covers anything else LLVM's
 * back end may call.  Each kernel is added under its own resource tracker,
 * so freeing a tc_cg_code removes its machine code.  Modules are built in
 * their own thread-safe context; the pass pipeline (which uses the shared
 * target machine), adding to the JIT and looking up run under the JIT's
 * mutex. */

#define _GNU_SOURCE /* exp10, sincos, j0, ... for the JIT's symbol table */

#include "llvm_internal.h"

#include "../ir/half.h"
#include "../ir/interp.h"

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Called by generated code (declared here: the header is the library's
 * contract, these are the JIT's). */
double tc_cg_builtin_call(int id, double a, double b, double c);
uint16_t tc_cg_half_from_double(double x);

/* ---- helpers called by generated code ---- */

/* Builtin id (a tc_builtin_id) on double arguments, as the interpreter
 * evaluates it: the generated code extends its arguments to double, calls
 * this and rounds the result to the static type once.  Integer arguments
 * and results travel as doubles holding integers (see tc_interp_builtin). */
double tc_cg_builtin_call(int id, double a, double b, double c)
{
	double args[4];
	args[0] = a;
	args[1] = b;
	args[2] = c;
	args[3] = 0;
	return tc_interp_builtin((tc_builtin_id)id, args);
}

/* The binary16 bits nearest to x (ties to even): the float64 -> float16
 * conversion of generated code, the interpreter's own. */
uint16_t tc_cg_half_from_double(double x)
{
	return tc_half_from_double(x);
}

/* ---- LLVM set-up ---- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_ok;

static void init_llvm(void)
{
	init_ok = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
}

/* Record the message of an LLVMErrorRef (consumed) in d. */
static void llvm_error(tc_diags *d, const char *what, LLVMErrorRef err)
{
	char *msg = LLVMGetErrorMessage(err);
	tc_error(d, noloc, "LLVM: cannot %s: %s", what, msg ? msg : "unknown error");
	LLVMDisposeErrorMessage(msg);
}

static void host_dispose(cg_host *h)
{
	LLVMDisposeMessage(h->triple);
	LLVMDisposeMessage(h->cpu);
	LLVMDisposeMessage(h->features);
	memset(h, 0, sizeof(*h));
}

int tc_cg_llvm_has_feature(__tc_keep const char *features, __tc_keep const char *feature)
{
	size_t n = strlen(feature);
	const char *p;
	for (p = features; p && (p = strstr(p, feature)); p += n)
		if ((p == features || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* The x86-64 psABI levels (llvm.h): LLVM's CPU name, the features a
 * level adds to the one before (a machine runs a level's code when it has
 * all of them and the lower levels'), and the feature string its code is
 * compiled with.  LLVM's generic x86-64-v4 prefers 256-bit vectors (a
 * tuning for Intel's AVX-512 clocks); tcomp's description of an AVX-512
 * machine (runtime/backend_cpu.c) has 64-byte vectors, so the loop
 * vectoriser is told the same with -prefer-256-bit, as the Zen 4 and 5
 * hosts' own CPU names do. */
static const struct {
	const char *name, *adds, *compile;
} levels[TC_CG_LLVM_LEVELS] = {
	{"x86-64", "+cmov,+cx8,+fxsr,+mmx,+sse,+sse2", ""},
	{"x86-64-v2", "+cx16,+sahf,+popcnt,+sse3,+sse4.1,+sse4.2,+ssse3", ""},
	{"x86-64-v3", "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave", ""},
	{"x86-64-v4", "+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl", "-prefer-256-bit"},
};

const char *tc_cg_llvm_level_name(int level)
{
	return level >= 1 && level <= TC_CG_LLVM_LEVELS ? levels[level - 1].name : NULL;
}

int tc_cg_llvm_level_of(__tc_keep const char *features)
{
	int level;
	for (level = 0; level < TC_CG_LLVM_LEVELS; level++) {
		const char *f = levels[level].adds;
		while (*f) {
			char one[32];
			size_t n = strcspn(f, ",");
			snprintf(one, sizeof(one), "%.*s", (int)n, f);
			if (!tc_cg_llvm_has_feature(features, one))
				return level;
			f += n + (f[n] == ',');
		}
	}
	return level;
}

/* Describe the machine code is compiled for: the host's CPU and features,
 * or with level (1..TC_CG_LLVM_LEVELS) that x86-64 level's CPU name and
 * features on the host's triple, which must be x86-64. */
static tc_stat host_init(cg_host *h, int level, tc_diags *d)
{
	char *err = NULL;
	memset(h, 0, sizeof(*h));
	pthread_once(&init_once, init_llvm);
	if (!init_ok) {
		tc_error(d, noloc, "%s", "LLVM: the native target is not available");
		return TC_ERR;
	}
	h->triple = LLVMGetDefaultTargetTriple();
	if (level && h->triple && strncmp(h->triple, "x86_64", 6)) {
		tc_error(d, noloc, "cpu=%s names an x86-64 level, but this machine is %s: compile "
			"with cpu=host", tc_cg_llvm_level_name(level), h->triple);
		host_dispose(h);
		return TC_ERR;
	}
	h->cpu = level ? LLVMCreateMessage(levels[level - 1].name) : LLVMGetHostCPUName();
	h->features = level ? LLVMCreateMessage(levels[level - 1].compile)
			    : LLVMGetHostCPUFeatures();
	if (!level && h->features && tc_cg_llvm_has_feature(h->features, "+avx512f")) {
		/* the host's own CPU name may prefer 256-bit vectors too (Intel's
		 * AVX-512 cores: rocketlake, sapphirerapids, ...): as for
		 * x86-64-v4 above, the loop vectoriser gets the description's
		 * 64 bytes */
		tc_buf b;
		tc_buf_init(&b);
		tc_buf_printf(&b, "%s,-prefer-256-bit", h->features);
		LLVMDisposeMessage(h->features);
		h->features = b.oom ? NULL : LLVMCreateMessage(b.s);
		tc_buf_free(&b);
	}
	if (!h->triple || !h->cpu || !h->features) {
		tc_error(d, noloc, "%s", "LLVM: cannot describe the host CPU");
		host_dispose(h);
		return TC_ERR;
	}
	/* every 64-bit target LLVM runs on but x86-64 has FMA instructions */
	h->fma = level ? level >= 3
		       : strncmp(h->triple, "x86_64", 6) || tc_cg_llvm_has_feature(h->features, "+fma");
	if (LLVMGetTargetFromTriple(h->triple, &h->target, &err)) {
		tc_error(d, noloc, "LLVM: cannot target %s: %s", h->triple, err ? err : "?");
		LLVMDisposeMessage(err);
		host_dispose(h);
		return TC_ERR;
	}
	return TC_OK;
}

static LLVMTargetMachineRef host_tm(const cg_host *h, LLVMCodeModel cm, tc_diags *d)
{
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(h->target, h->triple, h->cpu,
		h->features, LLVMCodeGenLevelAggressive, LLVMRelocDefault, cm);
	if (!tm)
		tc_error(d, noloc, "LLVM: cannot create a target machine for %s (%s)",
			h->triple, h->cpu);
	return tm;
}

/* ---- the pass pipeline ---- */

/* Check that M is valid LLVM IR before any pass sees it: LLVM's passes
 * assume valid input, and a module that is not (a phi whose incoming
 * values differ in type, say) crashes the host process inside them
 * instead of failing.  Always on, in every build and for every module
 * compiled, emitted or made into object code (so every test runs it): the
 * verifier is linear in the module, 0.44 ms on the optimised 256 x 256
 * matmul (1000 lines of IR; the unoptimised module it checks is smaller)
 * whose compile takes over 100 ms, and it turns a code-generation bug
 * into an internal error with LLVM's description of the bad instruction. */
static tc_stat verify(LLVMModuleRef M, tc_diags *d)
{
	char *msg = NULL;
	tc_stat r = TC_OK;
	if (LLVMVerifyModule(M, LLVMReturnStatusAction, &msg)) {
		tc_error(d, noloc, "internal error: LLVM code generation made invalid IR: %s",
			msg && *msg ? msg : "(no detail)");
		r = TC_ERR;
	}
	LLVMDisposeMessage(msg);
	return r;
}

/* The pass pipeline of a module whose statements inside loops are all
 * register tiles' vector code (llvm_loop.c marks it TC_CG_VECTOR_CODE):
 * the code generator already wrote the micro-kernel LLVM's loop passes
 * would make (vectors of the target's width, accumulators loaded before
 * the reduction loop and stored after it, rows and vectors unrolled), so
 * what is left is promoting the iterator and accumulator slots to
 * registers (SROA), folding the unrolled copies' constant iterators into
 * addresses (EarlyCSE, InstCombine) and merging blocks (SimplifyCFG); the
 * back end's loop strength reduction and scheduling do the rest.  The
 * micro-kernel's machine code is the same as under default<O3> (matmul
 * 256: 24 vfmadd231ps, 6 broadcasts and 4 row loads per k, no spills),
 * and matmul's compile takes 0.66 times the time at 256, 0.58 at 1024
 * (docs/performance.md, Compile latency, eighth pass).  Chosen because
 * the code generator emitted the vector code, not by guessing from the
 * IR's shape: a shorter pipeline for every module left conv2d 1.8 times
 * slower (fifth pass). */
#define VECTOR_CODE_PIPELINE "function(sroa,early-cse,instcombine,simplifycfg)"

/* The O3 pipeline for the host, with loop and SLP vectorisation, on a
 * module the verifier accepts; VECTOR_CODE_PIPELINE for a module of
 * vector code. */
static tc_stat optimize(LLVMModuleRef M, LLVMTargetMachineRef tm, tc_diags *d)
{
	LLVMPassBuilderOptionsRef o;
	LLVMErrorRef err;
	if (verify(M, d) < 0)
		return TC_ERR;
	o = LLVMCreatePassBuilderOptions();
	LLVMPassBuilderOptionsSetLoopVectorization(o, 1);
	LLVMPassBuilderOptionsSetSLPVectorization(o, 1);
	LLVMPassBuilderOptionsSetLoopInterleaving(o, 1);
	LLVMPassBuilderOptionsSetLoopUnrolling(o, 1);
	/* a register tile's reduction loop holds dozens of accesses; LICM's
	 * default caps (100 clobber walks, 250 accesses) stop it from keeping
	 * the accumulators in registers there */
	LLVMPassBuilderOptionsSetLicmMssaOptCap(o, 4000);
	LLVMPassBuilderOptionsSetLicmMssaNoAccForPromotionCap(o, 4000);
	err = LLVMRunPasses(M, LLVMGetNamedMetadataNumOperands(M, TC_CG_VECTOR_CODE)
		? VECTOR_CODE_PIPELINE : "default<O3>", tm, o);
	LLVMDisposePassBuilderOptions(o);
	if (err) {
		llvm_error(d, "optimise the kernel", err);
		return TC_ERR;
	}
	tc_cg_llvm_mark_streaming_stores(M);
	return TC_OK;
}

static void kernel_name(char *buf, size_t n, const tc_poly *p, unsigned long k)
{
	if (k)
		snprintf(buf, n, "tc_%.80s_%lu", p->f->name, k);
	else
		snprintf(buf, n, "tc_%.80s", p->f->name);
}

/* ---- JIT ---- */

/* A JIT (see llvm.h).  The mutex guards the target machine (the pass
 * pipeline uses it), the LLJIT's main dylib, and the counter. */
struct tc_cg_jit {
	pthread_mutex_t lock;
	cg_host h;
	LLVMTargetMachineRef tm;
	LLVMOrcLLJITRef lljit;
	LLVMOrcJITDylibRef jd;
	unsigned long counter;
};

/* A compiled kernel: its resource tracker in the JIT and its address. */
struct tc_cg_code {
	tc_cg_jit *jit;
	LLVMOrcResourceTrackerRef rt;
	tc_cg_fn fn;
	tc_cg_site *sites; /* its run-time checks */
	int nsites;
};

/* Symbols generated code may call, by address. */
typedef struct cg_sym {
	const char *name;
	void (*addr)(void);
} cg_sym;

#define CG_SYM(f) {#f, (void (*)(void))f}
#define CG_SYM2(fn) CG_SYM(fn), CG_SYM(fn##f)

static const cg_sym cg_syms[] = {
	CG_SYM(tc_cg_builtin_call), CG_SYM(tc_cg_half_from_double),
	CG_SYM2(acos), CG_SYM2(acosh), CG_SYM2(asin), CG_SYM2(asinh), CG_SYM2(atan),
	CG_SYM2(atanh), CG_SYM2(cbrt), CG_SYM2(ceil), CG_SYM2(cos), CG_SYM2(cosh),
	CG_SYM2(erf), CG_SYM2(erfc), CG_SYM2(exp), CG_SYM2(exp10), CG_SYM2(exp2),
	CG_SYM2(expm1), CG_SYM2(fabs), CG_SYM2(floor), CG_SYM2(j0), CG_SYM2(j1),
	CG_SYM2(lgamma), CG_SYM2(log), CG_SYM2(log10), CG_SYM2(log1p), CG_SYM2(log2),
	CG_SYM2(logb), CG_SYM2(nearbyint), CG_SYM2(rint), CG_SYM2(round), CG_SYM2(sin),
	CG_SYM2(sinh), CG_SYM2(sqrt), CG_SYM2(tan), CG_SYM2(tanh), CG_SYM2(tgamma),
	CG_SYM2(trunc), CG_SYM2(y0), CG_SYM2(y1), CG_SYM2(atan2), CG_SYM2(copysign),
	CG_SYM2(fdim), CG_SYM2(fmax), CG_SYM2(fmin), CG_SYM2(fmod), CG_SYM2(hypot),
	CG_SYM2(nextafter), CG_SYM2(pow), CG_SYM2(remainder), CG_SYM2(fma), CG_SYM2(ldexp),
	CG_SYM2(sincos), CG_SYM(memset), CG_SYM(memcpy), CG_SYM(memmove),
};

static tc_stat define_symbols(tc_cg_jit *jit, tc_diags *d)
{
	size_t i, n = sizeof(cg_syms) / sizeof(cg_syms[0]);
	LLVMOrcCSymbolMapPair *pairs = tc_calloc(n, sizeof(*pairs));
	LLVMOrcDefinitionGeneratorRef gen = NULL;
	LLVMErrorRef err;

	if (!pairs) {
		tc_error(d, noloc, "%s", "out of memory");
		return TC_ERR;
	}
	for (i = 0; i < n; i++) {
		pairs[i].Name = LLVMOrcLLJITMangleAndIntern(jit->lljit, cg_syms[i].name);
		pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)cg_syms[i].addr;
		pairs[i].Sym.Flags.GenericFlags =
			LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
		pairs[i].Sym.Flags.TargetFlags = 0;
	}
	err = LLVMOrcJITDylibDefine(jit->jd, LLVMOrcAbsoluteSymbols(pairs, n));
	tc_free(pairs);
	if (err) {
		llvm_error(d, "define the runtime symbols", err);
		return TC_ERR;
	}
	/* anything else the back end calls (compiler-rt/libgcc helpers) */
	err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen,
		LLVMOrcLLJITGetGlobalPrefix(jit->lljit), NULL, NULL);
	if (err) {
		llvm_error(d, "search the process for symbols", err);
		return TC_ERR;
	}
	LLVMOrcJITDylibAddGenerator(jit->jd, gen);
	return TC_OK;
}

/* Create a JIT for the host CPU: a target machine for the pass pipeline,
 * an LLJIT whose code generator targets the same CPU and features at the
 * highest optimisation level, the runtime symbols.  NULL with a message in
 * d if LLVM cannot target the host.  The caller owns the result. */
__tc_give tc_cg_jit *tc_cg_jit_new(__tc_keep tc_diags *d)
{
	tc_cg_jit *jit = tc_calloc(1, sizeof(*jit));
	LLVMTargetMachineRef jtm;
	LLVMOrcLLJITBuilderRef builder;
	LLVMErrorRef err;

	if (!jit) {
		tc_error(d, noloc, "%s", "out of memory");
		return NULL;
	}
	if (pthread_mutex_init(&jit->lock, NULL)) {
		tc_free(jit);
		tc_error(d, noloc, "%s", "cannot create a mutex");
		return NULL;
	}
	if (host_init(&jit->h, 0, d) < 0)
		goto error;
	if (!(jit->tm = host_tm(&jit->h, LLVMCodeModelJITDefault, d)))
		goto error;
	/* the JIT's own target machine (the builder consumes it) */
	if (!(jtm = host_tm(&jit->h, LLVMCodeModelJITDefault, d)))
		goto error;
	builder = LLVMOrcCreateLLJITBuilder();
	LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder,
		LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jtm));
	err = LLVMOrcCreateLLJIT(&jit->lljit, builder);
	if (err) {
		jit->lljit = NULL;
		llvm_error(d, "create the JIT", err);
		goto error;
	}
	jit->jd = LLVMOrcLLJITGetMainJITDylib(jit->lljit);
	if (define_symbols(jit, d) < 0)
		goto error;
	return jit;
error:
	tc_cg_jit_free(jit);
	return NULL;
}

/* Free a JIT and all the code still in it (free every tc_cg_code of it
 * first: their functions become invalid here). */
void tc_cg_jit_free(__tc_take tc_cg_jit *jit)
{
	if (!jit)
		return;
	if (jit->lljit) {
		LLVMErrorRef err = LLVMOrcDisposeLLJIT(jit->lljit);
		if (err)
			LLVMConsumeError(err);
	}
	if (jit->tm)
		LLVMDisposeTargetMachine(jit->tm);
	host_dispose(&jit->h);
	pthread_mutex_destroy(&jit->lock);
	tc_free(jit);
}

/* The end of adding code to the JIT (called with jit->lock held, which it
 * releases): err is the add's result; look the kernel's symbol up and set
 * code->fn.  code, or NULL (code freed) with an error in d, where adding
 * and linking name the steps in the message. */
static tc_cg_code *jit_finish(tc_cg_jit *jit, tc_cg_code *code, LLVMErrorRef err,
	const char *symbol, const char *adding, const char *linking, tc_diags *d)
{
	LLVMOrcExecutorAddress addr = 0;
	if (err)
		llvm_error(d, adding, err);
	else if ((err = LLVMOrcLLJITLookup(jit->lljit, &addr, symbol)) != NULL)
		llvm_error(d, linking, err);
	pthread_mutex_unlock(&jit->lock);
	if (err || !addr) {
		if (!err)
			tc_error(d, noloc, "%s", "LLVM: the kernel has no address");
		tc_cg_code_free(code);
		return NULL;
	}
	code->fn = (tc_cg_fn)(uintptr_t)addr;
	return code;
}

/* Compile p into jit (see llvm.h): build the module in a fresh thread-safe
 * context, optimise it, add it to the JIT under a new resource tracker and
 * look up its function.  NULL with a message in d on failure.  The caller
 * owns the result, which must be freed before the JIT. */
__tc_give tc_cg_code *tc_cg_llvm_compile(__tc_keep tc_cg_jit *jit, __tc_keep const tc_poly *p,
	__tc_keep const tc_cg_opts *o, __tc_keep tc_diags *d)
{
	LLVMOrcThreadSafeContextRef tsc;
	LLVMOrcThreadSafeModuleRef tsm;
	LLVMTargetMachineRef level_tm = NULL;
	LLVMModuleRef M;
	LLVMErrorRef err;
	tc_cg_code *code;
	cg_host level;
	char name[128];
	unsigned long k;

	if (!jit || !p)
		return NULL;
	memset(&level, 0, sizeof(level));
	code = tc_calloc(1, sizeof(*code));
	if (!code) {
		tc_error(d, noloc, "%s", "out of memory");
		return NULL;
	}
	code->jit = jit;
	pthread_mutex_lock(&jit->lock);
	k = ++jit->counter;
	pthread_mutex_unlock(&jit->lock);
	kernel_name(name, sizeof(name), p, k);

	/* an x86-64 level instead of the host: its own description and
	 * target machine; the JIT's code generator follows the functions'
	 * target-cpu and target-features attributes */
	if (o && o->cpu && (host_init(&level, o->cpu, d) < 0 ||
			       !(level_tm = host_tm(&level, LLVMCodeModelJITDefault, d)))) {
		host_dispose(&level);
		tc_cg_code_free(code);
		return NULL;
	}
	tsc = LLVMOrcCreateNewThreadSafeContext();
	M = tc_cg_llvm_build_module(LLVMOrcThreadSafeContextGetContext(tsc), p, o, name,
		level_tm ? &level : &jit->h, level_tm ? level_tm : jit->tm, d, &code->sites,
		&code->nsites);
	if (!M)
		goto fail;
	pthread_mutex_lock(&jit->lock);
	if (optimize(M, level_tm ? level_tm : jit->tm, d) < 0) {
		pthread_mutex_unlock(&jit->lock);
		LLVMDisposeModule(M);
		goto fail;
	}
	if (level_tm) {
		LLVMDisposeTargetMachine(level_tm);
		host_dispose(&level);
	}
	code->rt = LLVMOrcJITDylibCreateResourceTracker(jit->jd);
	tsm = LLVMOrcCreateNewThreadSafeModule(M, tsc); /* owns M now */
	LLVMOrcDisposeThreadSafeContext(tsc);           /* the module keeps it */
	err = LLVMOrcLLJITAddLLVMIRModuleWithRT(jit->lljit, code->rt, tsm); /* owns tsm */
	return jit_finish(jit, code, err, name, "add the kernel to the JIT", "compile the kernel", d);
fail:
	LLVMOrcDisposeThreadSafeContext(tsc);
	if (level_tm)
		LLVMDisposeTargetMachine(level_tm);
	host_dispose(&level);
	tc_cg_code_free(code);
	return NULL;
}

/* Site number i of the code's run-time checks. */
const tc_cg_site *tc_cg_code_site(__tc_keep const tc_cg_code *c, int64_t i)
{
	return c && i >= 0 && i < c->nsites ? &c->sites[i] : NULL;
}

/* The function of compiled code (valid until the code is freed). */
tc_cg_fn tc_cg_code_fn(__tc_keep const tc_cg_code *c)
{
	return c ? c->fn : NULL;
}

/* Remove the code from its JIT and free it. */
void tc_cg_code_free(__tc_take tc_cg_code *c)
{
	if (!c)
		return;
	if (c->rt) {
		LLVMErrorRef err;
		pthread_mutex_lock(&c->jit->lock);
		err = LLVMOrcResourceTrackerRemove(c->rt);
		if (err)
			LLVMConsumeError(err);
		LLVMOrcReleaseResourceTracker(c->rt);
		pthread_mutex_unlock(&c->jit->lock);
	}
	tc_free(c->sites);
	tc_free(c);
}

/* The LLVM IR (optimised or not) or host assembly of p as text (see
 * llvm.h), from a private context and target machine.  NULL with a message
 * in d on failure; the caller owns the string. */
__tc_give char *tc_cg_llvm_text(__tc_keep const tc_poly *p, __tc_keep const tc_cg_opts *o,
	tc_cg_text what, __tc_keep tc_diags *d)
{
	cg_host h;
	LLVMTargetMachineRef tm = NULL;
	LLVMContextRef C = NULL;
	LLVMModuleRef M = NULL;
	LLVMMemoryBufferRef buf = NULL;
	char name[128], *msg = NULL, *r = NULL;

	if (!p || host_init(&h, o ? o->cpu : 0, d) < 0)
		return NULL;
	if (!(tm = host_tm(&h, LLVMCodeModelDefault, d)))
		goto done;
	C = LLVMContextCreate();
	kernel_name(name, sizeof(name), p, 0);
	if (!(M = tc_cg_llvm_build_module(C, p, o, name, &h, tm, d, NULL, NULL)) ||
		(what != TC_CG_TEXT_LLVM_RAW && optimize(M, tm, d) < 0))
		goto done;
	if (what != TC_CG_TEXT_ASM) {
		msg = LLVMPrintModuleToString(M);
		r = msg ? tc_strdup(msg) : NULL;
		LLVMDisposeMessage(msg);
	} else if (LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMAssemblyFile, &msg, &buf)) {
		tc_error(d, noloc, "LLVM: cannot emit assembly: %s", msg ? msg : "?");
		LLVMDisposeMessage(msg);
		goto done;
	} else {
		r = tc_strndup(LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
		LLVMDisposeMemoryBuffer(buf);
	}
	if (!r)
		tc_error(d, noloc, "%s", "out of memory");
done:
	if (M)
		LLVMDisposeModule(M);
	if (C)
		LLVMContextDispose(C);
	if (tm)
		LLVMDisposeTargetMachine(tm);
	host_dispose(&h);
	return r;
}

/* The host target as "triple;cpu;features" (the kernel cache's target key):
 * the triple, CPU name and feature string the JIT compiles for.  NULL when
 * LLVM cannot describe the host or out of memory; the caller owns it. */
__tc_give char *tc_cg_llvm_host_target(void)
{
	tc_diags d;
	tc_buf b;
	cg_host h;
	tc_diags_init(&d, NULL);
	if (host_init(&h, 0, &d) < 0) {
		tc_diags_clear(&d);
		return NULL;
	}
	tc_diags_clear(&d);
	tc_buf_init(&b);
	tc_buf_printf(&b, "%s;%s;%s", h.triple, h.cpu, h.features);
	host_dispose(&h);
	return tc_buf_take(&b);
}

/* The version of the LLVM library in use, e.g. "19.1.7", into buf. */
void tc_cg_llvm_version(__tc_keep char *buf, size_t n)
{
	unsigned major = 0, minor = 0, patch = 0;
	LLVMGetVersion(&major, &minor, &patch);
	snprintf(buf, n, "%u.%u.%u", major, minor, patch);
}

/* ---- object code (the kernel cache stores it; codegen does not know) ---- */

/* Compile p to a relocatable object file for the host (see llvm.h):
 * the same module and optimisation as tc_cg_llvm_compile, emitted with a
 * position-independent small-code-model target machine so that the JIT's
 * linker can place it anywhere. */
__tc_give void *tc_cg_llvm_object(__tc_keep const tc_poly *p, __tc_keep const tc_cg_opts *o,
	const char *fname, size_t *size, __tc_give tc_cg_site **sites, int *nsites,
	__tc_keep tc_diags *d)
{
	cg_host h;
	LLVMTargetMachineRef tm = NULL;
	LLVMContextRef C = NULL;
	LLVMModuleRef M = NULL;
	LLVMMemoryBufferRef buf = NULL;
	char *msg = NULL;
	void *r = NULL;

	*size = 0;
	*sites = NULL;
	*nsites = 0;
	if (!p || host_init(&h, o ? o->cpu : 0, d) < 0)
		return NULL;
	tm = LLVMCreateTargetMachine(h.target, h.triple, h.cpu, h.features,
		LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelSmall);
	if (!tm) {
		tc_error(d, noloc, "LLVM: cannot create a target machine for %s (%s)", h.triple,
			h.cpu);
		goto done;
	}
	C = LLVMContextCreate();
	if (!(M = tc_cg_llvm_build_module(C, p, o, fname, &h, tm, d, sites, nsites)) ||
		optimize(M, tm, d) < 0)
		goto done;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMObjectFile, &msg, &buf)) {
		tc_error(d, noloc, "LLVM: cannot emit object code: %s", msg ? msg : "?");
		LLVMDisposeMessage(msg);
		goto done;
	}
	*size = LLVMGetBufferSize(buf);
	r = tc_malloc(*size ? *size : 1);
	if (r)
		memcpy(r, LLVMGetBufferStart(buf), *size);
	else
		tc_error(d, noloc, "%s", "out of memory");
	LLVMDisposeMemoryBuffer(buf);
done:
	if (!r) {
		tc_free(*sites);
		*sites = NULL;
		*nsites = 0;
		*size = 0;
	}
	if (M)
		LLVMDisposeModule(M);
	if (C)
		LLVMContextDispose(C);
	if (tm)
		LLVMDisposeTargetMachine(tm);
	host_dispose(&h);
	return r;
}

/* Load object code made by tc_cg_llvm_object into jit under a new
 * resource tracker and look up fname (see llvm.h). */
__tc_give tc_cg_code *tc_cg_llvm_load(__tc_keep tc_cg_jit *jit, __tc_keep const void *obj,
	size_t size, const char *fname, __tc_take tc_cg_site *sites, int nsites,
	__tc_keep tc_diags *d)
{
	LLVMOrcExecutorAddress addr = 0;
	LLVMMemoryBufferRef mb;
	LLVMErrorRef err;
	tc_cg_code *code;

	if (!jit || !obj || !fname) {
		tc_free(sites);
		return NULL;
	}
	code = tc_calloc(1, sizeof(*code));
	if (!code) {
		tc_free(sites);
		tc_error(d, noloc, "%s", "out of memory");
		return NULL;
	}
	code->jit = jit;
	code->sites = sites;
	code->nsites = nsites;
	mb = LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)obj, size, fname);
	if (!mb) {
		tc_error(d, noloc, "%s", "out of memory");
		tc_cg_code_free(code);
		return NULL;
	}
	pthread_mutex_lock(&jit->lock);
	/* a symbol of this name already in the JIT: the same object loaded
	 * before (its code belongs to another kernel); the caller compiles */
	err = LLVMOrcLLJITLookup(jit->lljit, &addr, fname);
	if (!err) {
		pthread_mutex_unlock(&jit->lock);
		LLVMDisposeMemoryBuffer(mb);
		tc_error(d, noloc, "LLVM: '%s' is already loaded", fname);
		tc_cg_code_free(code);
		return NULL;
	}
	LLVMConsumeError(err);
	code->rt = LLVMOrcJITDylibCreateResourceTracker(jit->jd);
	err = LLVMOrcLLJITAddObjectFileWithRT(jit->lljit, code->rt, mb); /* owns mb */
	return jit_finish(jit, code, err, fname, "add the object code to the JIT",
		"link the object code", d);
}
