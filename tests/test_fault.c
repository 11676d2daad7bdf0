/* Allocation-failure injection beyond the front end: tc_compile and
 * tc_kernel_run (matmul and softmax, on the cpu and interp backends), the
 * kernel cache (object store, lookup through tc_compile, list, export,
 * import, prune) and a tiny autotuning run, each with the n-th allocation
 * failing (and, the second mode, every allocation from the n-th on).
 *
 * The layer: one counter behind the library's allocation hook
 * (tc_set_alloc) and behind SQLite's (sqlite3_config(SQLITE_CONFIG_MALLOC),
 * installed by this program before SQLite starts), so SQLite's own
 * allocations inside the cache are failure sites too.  isl and LLVM
 * allocate with malloc and C++ new: their allocations are not sites; what
 * our code does with isl's failures is covered by making isl fail through
 * its operation quota (test_isl_quota_failures_are_handled).
 *
 * Each run is a forked child (a crash is observed, not suffered): it
 * prepares its objects with the hook counting nothing, arms it, performs
 * the operation, disarms it, and checks that the operation either failed
 * with a message or succeeded with correct results (compared with the
 * reference interpreter's on random data, outputs poisoned first) and left
 * its objects uncorrupted (the cache's export is the old or the new one);
 * then the same operation again without failures must succeed and be
 * correct (the context, module and cache stay usable); then everything is
 * freed and no block of ours may be left (and, in the sanitizer build,
 * LeakSanitizer finds no leak of isl's or LLVM's either).  The tuner's
 * candidates run in its own forked children: those allocate unfailed (a
 * failure there is a failed candidate, which test_tune.c covers).
 *
 * Sites: a run without failures counts N allocations; the sweep fails
 * sites 1, 1 + s, 1 + 2s, ... and N with the stride s = ceil(N / samples).
 * samples is each scenario's own (its table below: 8 of an interp compile
 * and of each cache operation, 2 of a cpu compile, 1 of storing object
 * code and of the tuning run: sites 1 and N), so the program takes a few
 * seconds of CPU (about a minute in the sanitizer build); $TC_FAULT_SAMPLES sets
 * it for all, and TC_FAULT_SAMPLES=0 fails every site (minutes: every run
 * of a cpu compile spends tens of milliseconds in LLVM, every tuning run
 * most of a second).  $TC_FAULT_ONLY (a substring of the
 * scenario's name) runs some scenarios alone. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <isl/ctx.h>
#include <isl/options.h>
#include <isl/schedule.h>

#include "ir/ir.h"
#include "lang/ast.h"
#include "lang/diag.h"
#include "lang/util.h"
#include "polyhedral/passes.h"
#include "polyhedral/poly.h"
#include "runtime/backend.h"
#include "runtime/cache.h"
#include "runtime/cache_ops.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
#define TC_FAULT_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_FAULT_LSAN 1
#endif
#endif
#ifdef TC_FAULT_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* ---- the fault counter behind both hooks ---- */

/* One process's injection state.  armed: count allocations and fail the
 * chosen ones; live: our hook's blocks not freed (counted armed or not). */
static struct {
	pthread_mutex_t lock;
	int armed;
	int foreign; /* a process the child forked (the tuner's candidates) */
	long count;   /* allocations since armed */
	long fail_at; /* the allocation that fails (1-based; 0: none) */
	int sticky;   /* also fail every later one */
	int injected; /* a failure was injected */
	long live;
} F = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, 0};

/* Whether this allocation fails (and count it). */
static int fault_now(void)
{
	int fail = 0;
	if (!F.armed || F.foreign)
		return 0;
	pthread_mutex_lock(&F.lock);
	F.count++;
	if (F.fail_at && (F.count == F.fail_at || (F.sticky && F.count > F.fail_at))) {
		F.injected = 1;
		fail = 1;
	}
	pthread_mutex_unlock(&F.lock);
	return fail;
}

static void live_add(long d)
{
	if (F.foreign)
		return;
	pthread_mutex_lock(&F.lock);
	F.live += d;
	pthread_mutex_unlock(&F.lock);
}

/* The library's hook (realloc semantics). */
static void *fault_alloc(void *ud, void *ptr, size_t size)
{
	void *p;
	(void)ud;
	if (size == 0) {
		if (ptr) {
			free(ptr);
			live_add(-1);
		}
		return NULL;
	}
	if (fault_now())
		return NULL;
	p = realloc(ptr, size);
	if (p && !ptr)
		live_add(1);
	return p;
}

/* SQLite's hook: blocks carry their size in a 16-byte header (xSize). */
#define SQ_HDR 16
static void *sq_malloc(int n)
{
	unsigned char *p;
	if (n <= 0 || fault_now())
		return NULL;
	p = malloc((size_t)n + SQ_HDR);
	if (!p)
		return NULL;
	*(size_t *)p = (size_t)n;
	return p + SQ_HDR;
}
static void sq_free(void *p)
{
	if (p)
		free((unsigned char *)p - SQ_HDR);
}
static int sq_size(void *p)
{
	return p ? (int)*(size_t *)((unsigned char *)p - SQ_HDR) : 0;
}
static void *sq_realloc(void *p, int n)
{
	unsigned char *q;
	if (!p)
		return sq_malloc(n);
	if (n <= 0 || fault_now())
		return NULL;
	q = realloc((unsigned char *)p - SQ_HDR, (size_t)n + SQ_HDR);
	if (!q)
		return NULL;
	*(size_t *)q = (size_t)n;
	return q + SQ_HDR;
}
static int sq_roundup(int n)
{
	return (n + 7) & ~7;
}
static int sq_init(void *u)
{
	(void)u;
	return SQLITE_OK;
}
static void sq_shutdown(void *u)
{
	(void)u;
}

/* In a process the child forks (the tuner's candidates), inject nothing. */
static void mark_foreign(void)
{
	F.foreign = 1;
}

/* ---- shared inputs and references (made by the parent) ---- */

static const char *src =
	"def mm(float(M,K) A, float(K,N) B) -> (C) {\n  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n"
	"def softmax(float(N,D) I) -> (O) {\n  mx(n) max=! I(n,r_d)\n"
	"  sm(n) +=! exp(I(n,r_d) - mx(n))\n  O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n}\n";

static tu_tensor A, B, X;             /* random inputs */
static tu_tensor C_ref, O_ref;        /* the interpreter's outputs */
static char dir[1024];                /* this program's cache folder */
static char tmpl_path[1100];          /* the template cache */
static char *tmpl_export, *tmpl_list; /* its export and list texts */
static char *import_text;             /* another cache's export */
static char *imported_export;         /* the template's export after importing it */
static char *pruned_export;           /* ... after pruning failed runs */
static const char *best_options = "tile=8,8,8\nunroll=off";

static void fill_random(tu_tensor *t, uint64_t *rng)
{
	int64_t i;
	for (i = 0; i < t->numel; i++) /* non-zero, in [-1, 1) */
		((float *)t->data)[i] = (float)(tu_rand_unit(rng) * 1.98 - 0.99) + 0.005f;
}

/* Whether out matches ref within 1e-5 relative (reordered float sums). */
static int close_to(const tu_tensor *out, const tu_tensor *ref, char *why, size_t n)
{
	int64_t i;
	for (i = 0; i < ref->numel; i++) {
		double a = tu_get(out, i), e = tu_get(ref, i);
		if (!(fabs(a - e) <= 1e-5 * fabs(e) + 1e-6)) {
			snprintf(why, n, "element %lld is %g, expected %g", (long long)i, a, e);
			return 0;
		}
	}
	return 1;
}

/* ---- one child's objects ---- */

typedef struct fx {
	tc_context *ctx;
	tc_module *m;
	tc_cache *c;
	char path[1200]; /* this child's copy of the template cache */
	int cpu;         /* the cpu backend (else interp) */
	char why[512];   /* what went wrong */
} fx;

/* Outcome of an operation (its verify says which). */
enum { OP_OK, OP_ERROR, OP_BAD };

typedef struct scenario {
	const char *name;
	int cache;                /* prep copies and opens the template cache */
	int cpu;                  /* compile for the cpu backend */
	int (*op)(fx *f);         /* armed: 0 ok, -1 error (message in f->why) */
	int (*verify)(fx *f, int r); /* disarmed: OP_OK/OP_ERROR, OP_BAD (f->why) */
	int (*again)(fx *f);      /* afterwards, disarmed: 0 when the call works (NULL:
				     op and verify again) */
	long samples;             /* sites failed per mode ($TC_FAULT_SAMPLES) */
} scenario;

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t n;
	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			n = -1;
	close(in);
	close(out);
	return n < 0 ? -1 : 0;
}

static void why_from(fx *f, const char *msg)
{
	snprintf(f->why, sizeof(f->why), "%s", msg ? msg : "");
}

/* An error must say something, and not that an invariant broke. */
static int error_ok(fx *f)
{
	if (!f->why[0]) {
		why_from(f, "an error without a message");
		return OP_BAD;
	}
	if (strstr(f->why, "internal error"))
		return OP_BAD;
	return OP_ERROR;
}

/* ---- compile and run ---- */

static tc_kernel *compiled;
static tu_tensor out_mm, out_sm; /* outputs of mm and softmax */
static tu_tensor *out;           /* the last compile_run's */

static tc_options *backend_options(fx *f)
{
	tc_options *o = tc_options_new();
	if (o && tc_options_set(o, "target", f->cpu ? "cpu" : "interp", NULL) < 0) {
		tc_options_free(o);
		o = NULL;
	}
	return o;
}

/* Compile entry for inputs with options o (NULL: from the cache) and run it
 * into the poisoned out; 0 ok, -1 with the context's message. */
static int compile_run(fx *f, const char *entry, const DLTensor *const *in, int n_in,
	const tc_options *o)
{
	DLTensor *outs[1];
	out = strcmp(entry, "mm") ? &out_sm : &out_mm;
	outs[0] = &out->dl;
	compiled = tc_compile(f->m, entry, in, n_in, o);
	tu_poison(out);
	if (!compiled || tc_kernel_run(compiled, in, n_in, outs, 1) < 0) {
		why_from(f, tc_context_error(f->ctx));
		return -1;
	}
	return 0;
}

static int verify_compiled(fx *f, int r, const tu_tensor *ref)
{
	int v = r < 0 ? error_ok(f) : close_to(out, ref, f->why, sizeof(f->why)) ? OP_OK : OP_BAD;
	tc_kernel_free(compiled);
	compiled = NULL;
	return v;
}

static int op_matmul(fx *f)
{
	const DLTensor *in[2] = {&A.dl, &B.dl};
	tc_options *o = backend_options(f);
	int r;
	if (!o) {
		why_from(f, "out of memory (options)");
		return -1;
	}
	r = compile_run(f, "mm", in, 2, o);
	tc_options_free(o);
	return r;
}

static int verify_matmul(fx *f, int r)
{
	return verify_compiled(f, r, &C_ref);
}

static int op_softmax(fx *f)
{
	const DLTensor *in[1] = {&X.dl};
	tc_options *o = backend_options(f);
	int r;
	if (!o) {
		why_from(f, "out of memory (options)");
		return -1;
	}
	r = compile_run(f, "softmax", in, 1, o);
	tc_options_free(o);
	return r;
}

static int verify_softmax(fx *f, int r)
{
	return verify_compiled(f, r, &O_ref);
}

/* ---- the kernel cache ---- */

/* The cache's export text, disarmed (NULL on error). */
static char *export_of(fx *f)
{
	tc_buf b;
	tc_buf_init(&b);
	if (tc_cache_export(f->c, &b) < 0) {
		tc_buf_free(&b);
		return NULL;
	}
	return tc_buf_take(&b);
}

/* The export must be one of the two given states (the old one, or the new
 * one; either may be NULL). */
static int state_is(fx *f, const char *old, const char *new)
{
	char *e = export_of(f);
	int ok = e && ((old && !strcmp(e, old)) || (new && !strcmp(e, new)));
	if (!ok && e) {
		const char *ref = old ? old : new;
		size_t i = 0;
		while (e[i] && e[i] == ref[i])
			i++;
		char prev[sizeof(f->why)];
		snprintf(prev, sizeof(prev), "%s", f->why);
		snprintf(f->why, sizeof(f->why),
			"%.300s%sthe cache holds another state, from byte %zu: %.120s", prev,
			*prev ? "; " : "", i, e + i);
	} else if (!ok) {
		why_from(f, "the cache cannot be exported");
	}
	tc_free(e);
	return ok;
}

/* Store the object code of best_options for mm. */
static int op_store(fx *f)
{
	const DLTensor *in[2] = {&A.dl, &B.dl};
	tc_cache_key key;
	int r;
	if (tc_cache_key_init(&key, f->m, "mm", in, 2) < 0) {
		why_from(f, tc_context_error(f->ctx));
		return -1;
	}
	r = tc_cache_store_object(f->c, &key, f->m, in, 2, best_options);
	if (r < 0)
		why_from(f, tc_cache_error(f->c));
	tc_cache_key_clear(&key);
	return r;
}

/* Whatever store did, a compile with no options reads the cache: the
 * recorded best, correct, from object code or compiled again. */
static int verify_store(fx *f, int r)
{
	const DLTensor *in[2] = {&A.dl, &B.dl};
	int v = r < 0 ? error_ok(f) : OP_OK;
	if (v == OP_BAD)
		return v;
	if (compile_run(f, "mm", in, 2, NULL) < 0) {
		tc_kernel_free(compiled);
		compiled = NULL;
		return OP_BAD;
	}
	if (strcmp(tc_kernel_options_source(compiled), "cache")) {
		tc_kernel_free(compiled);
		compiled = NULL;
		why_from(f, "the recorded best was not found");
		return OP_BAD;
	}
	return verify_compiled(f, 0, &C_ref) == OP_OK ? v : OP_BAD;
}

/* tc_compile with no options: the cache's best with its object code. */
static int op_lookup(fx *f)
{
	const DLTensor *in[2] = {&A.dl, &B.dl};
	return compile_run(f, "mm", in, 2, NULL);
}

static int verify_lookup(fx *f, int r)
{
	return verify_matmul(f, r);
}

static char *listed;

static int op_list(fx *f)
{
	tc_buf b;
	tc_buf_init(&b);
	if (tc_cache_list(f->c, &b) < 0) {
		why_from(f, tc_cache_error(f->c));
		tc_buf_free(&b);
		return -1;
	}
	listed = tc_buf_take(&b);
	if (!listed) {
		why_from(f, "out of memory (list text)");
		return -1;
	}
	return 0;
}

static int verify_list(fx *f, int r)
{
	int v = r < 0 ? error_ok(f) : OP_OK;
	if (r == 0 && strcmp(listed, tmpl_list)) {
		why_from(f, "the list differs");
		v = OP_BAD;
	}
	tc_free(listed);
	listed = NULL;
	if (v != OP_BAD && !state_is(f, tmpl_export, NULL))
		v = OP_BAD;
	return v;
}

static char *exported;

static int op_export(fx *f)
{
	tc_buf b;
	tc_buf_init(&b);
	if (tc_cache_export(f->c, &b) < 0) {
		why_from(f, tc_cache_error(f->c));
		tc_buf_free(&b);
		return -1;
	}
	exported = tc_buf_take(&b);
	if (!exported) {
		why_from(f, "out of memory (export text)");
		return -1;
	}
	return 0;
}

static int verify_export(fx *f, int r)
{
	int v = r < 0 ? error_ok(f) : OP_OK;
	if (r == 0 && strcmp(exported, tmpl_export)) {
		why_from(f, "the export differs");
		v = OP_BAD;
	}
	tc_free(exported);
	exported = NULL;
	return v;
}

static int op_import(fx *f)
{
	int added = -1, present = -1, skipped = -1;
	if (tc_cache_import(f->c, import_text, &added, &present, &skipped) < 0) {
		why_from(f, tc_cache_error(f->c));
		return -1;
	}
	if (skipped != 0) {
		snprintf(f->why, sizeof(f->why), "%d line(s) skipped: %s", skipped,
			tc_cache_warnings(f->c));
		return -1;
	}
	return 0;
}

/* One transaction: after an error, the old state exactly. */
static int verify_import(fx *f, int r)
{
	int v = r < 0 ? error_ok(f) : OP_OK;
	if (v != OP_BAD && !state_is(f, r < 0 ? tmpl_export : NULL, imported_export)) {
		v = OP_BAD;
		if (r < 0 && state_is(f, imported_export, NULL))
			why_from(f, "an import that failed left its rows");
	}
	return v;
}

static int op_prune(fx *f)
{
	tc_cache_prune_opts o = {0, 1, 0, 0};
	int removed = -1;
	if (tc_cache_prune(f->c, &o, &removed) < 0) {
		why_from(f, tc_cache_error(f->c));
		return -1;
	}
	return 0;
}

/* After an error the rows are the old or the pruned ones (the VACUUM after
 * the deletion may be what failed). */
static int verify_prune(fx *f, int r)
{
	int v = r < 0 ? error_ok(f) : OP_OK;
	if (v != OP_BAD && !state_is(f, r < 0 ? tmpl_export : NULL, pruned_export))
		v = OP_BAD;
	return v;
}

/* ---- the tuner ---- */

static tc_options *tuned;

static int op_tune(fx *f)
{
	const DLTensor *in[2] = {&A.dl, &B.dl};
	tc_tune_settings st;
	tc_tune_settings_init(&st);
	st.generations = 1;
	st.population = 2;
	st.elites = 1;
	st.seed = 11;
	st.threads = 1;
	st.runs = 1;
	st.warmup = 0;
	st.min_time_s = 0;
	st.timeout_s = 5;
	st.compile_timeout_s = 60;
	st.cutoff = 1e6;
	st.final_candidates = 0;
	st.cache_path = f->path;
	st.use_cache = 1;
	if (tc_autotune(f->m, "mm", in, 2, NULL, &st, &tuned, NULL) < 0) {
		why_from(f, tc_context_error(f->ctx));
		return -1;
	}
	if (!tuned) {
		why_from(f, "tc_autotune succeeded without a best");
		return 0;
	}
	return 0;
}

/* The best options compile to a correct kernel; the cache stays readable. */
static int verify_tune(fx *f, int r)
{
	const DLTensor *in[2] = {&A.dl, &B.dl};
	int v = r < 0 ? error_ok(f) : OP_OK;
	if (r == 0 && !tuned)
		v = OP_BAD;
	if (v == OP_OK && verify_compiled(f, compile_run(f, "mm", in, 2, tuned), &C_ref) != OP_OK)
		v = OP_BAD;
	tc_options_free(tuned);
	tuned = NULL;
	if (v != OP_BAD) {
		char *e = export_of(f);
		if (!e) {
			why_from(f, "the cache cannot be exported after the run");
			v = OP_BAD;
		}
		tc_free(e);
	}
	return v;
}

/* Afterwards: the context compiles and runs matmul correctly and the
 * cache still reads (a tuning run again would take most of a second). */
static int again_tune(fx *f)
{
	const DLTensor *in[2] = {&A.dl, &B.dl};
	char *e;
	if (verify_compiled(f, compile_run(f, "mm", in, 2, NULL), &C_ref) != OP_OK)
		return -1;
	if (!(e = export_of(f))) {
		why_from(f, "the cache cannot be exported");
		return -1;
	}
	tc_free(e);
	return 0;
}

/* ---- one run in a child ---- */

/* How a child's run ended (its exit status, away from 0, 1 and the
 * sanitizers'); any other status or a signal is a crash. */
enum {
	RUN_COMPLETE = 40, /* no allocation failed and every step succeeded */
	RUN_CLEAN,         /* a failure was injected; handled (error or success) */
	RUN_PREP,          /* the unfaulted preparation failed (a test bug) */
	RUN_INCOMPLETE,    /* no allocation failed, yet the operation failed */
	RUN_BAD,           /* wrong results, a corrupted cache, a mute error */
	RUN_UNUSABLE,      /* the same operation without failures failed after */
	RUN_LEAK,          /* blocks of ours left, or LeakSanitizer found a leak */
	RUN_CRASH,
};

/* What the child tells the parent. */
typedef struct report {
	long count;
	int injected;
	char why[512];
} report;
static report *shared_report;

static void child_prep(fx *f, const scenario *sc)
{
	char *msg = NULL;
	memset(f, 0, sizeof(*f));
	f->cpu = sc->cpu;
	f->ctx = tc_context_new();
	if (!f->ctx)
		_exit(RUN_PREP);
	f->m = tc_module_parse(f->ctx, src, "fault.tc");
	if (!f->m)
		_exit(RUN_PREP);
	if (sc->cache) {
		snprintf(f->path, sizeof(f->path), "%s/run-%ld.sqlite", dir, (long)getpid());
		if (copy_file(tmpl_path, f->path) < 0 || tc_context_set_cache(f->ctx, f->path) < 0)
			_exit(RUN_PREP);
		f->c = tc_cache_open(f->path, TC_CACHE_WRITE, &msg);
		if (!f->c)
			_exit(RUN_PREP);
	} else if (tc_context_set_cache(f->ctx, "") < 0) {
		_exit(RUN_PREP);
	}
}

static void child_fini(fx *f)
{
	tc_cache_close(f->c);
	tc_module_free(f->m);
	tc_context_free(f->ctx);
	if (f->path[0])
		tu_remove_db(f->path);
}

static int child_run(const scenario *sc, long fail_at, int sticky)
{
	fx f;
	int r, v;
	tc_set_alloc(fault_alloc, NULL);
	child_prep(&f, sc);

	F.count = 0;
	F.fail_at = fail_at;
	F.sticky = sticky;
	F.injected = 0;
	F.armed = 1;
	r = sc->op(&f);
	F.armed = 0;
	v = sc->verify(&f, r);
	shared_report->count = F.count;
	shared_report->injected = F.injected;
	snprintf(shared_report->why, sizeof(shared_report->why), "%s", f.why);
	if (v == OP_BAD)
		return RUN_BAD;
	if (v == OP_ERROR && !F.injected)
		return RUN_INCOMPLETE;
	/* usable afterwards: the same operation, without failures */
	f.why[0] = 0;
	if (sc->again ? sc->again(&f) < 0 : sc->verify(&f, sc->op(&f)) != OP_OK) {
		snprintf(shared_report->why, sizeof(shared_report->why), "afterwards: %.480s", f.why);
		return RUN_UNUSABLE;
	}
	child_fini(&f);
	tc_set_alloc(NULL, NULL);
	if (F.live) {
		snprintf(shared_report->why, sizeof(shared_report->why), "%ld block(s) left", F.live);
		return RUN_LEAK;
	}
#ifdef TC_FAULT_LSAN
	if (__lsan_do_recoverable_leak_check()) {
		snprintf(shared_report->why, sizeof(shared_report->why),
			"LeakSanitizer found a leak (its report is on stderr)");
		return RUN_LEAK;
	}
#endif
	return F.injected ? RUN_CLEAN : RUN_COMPLETE;
}

/* One run with allocation fail_at failing (0: none), in a child; stderr
 * kept when verbose (a failure is run again so, to show what the library
 * and the sanitizers said). */
static int run_forked(const scenario *sc, long fail_at, int sticky, int verbose)
{
	pid_t pid;
	int status;
	memset(shared_report, 0, sizeof(*shared_report));
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
		size_t i;
		for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], SIG_DFL);
		if (!verbose) {
			int fd = open("/dev/null", O_WRONLY);
			if (fd >= 0) {
				dup2(fd, 2);
				close(fd);
			}
		}
		pthread_atfork(NULL, NULL, mark_foreign);
		_exit(child_run(sc, fail_at, sticky));
	}
	assert_true(waitpid(pid, &status, 0) == pid);
	if (sc->cache) { /* the child's cache copy, should it have stopped early */
		char p[1300];
		snprintf(p, sizeof(p), "%s/run-%ld.sqlite", dir, (long)pid);
		tu_remove_db(p);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) >= RUN_COMPLETE &&
		WEXITSTATUS(status) < RUN_CRASH)
		return WEXITSTATUS(status);
	return RUN_CRASH;
}

static const char *run_name(int r)
{
	switch (r) {
	case RUN_PREP: return "the preparation failed";
	case RUN_INCOMPLETE: return "an error without an allocation failure";
	case RUN_BAD: return "a wrong result, a corrupted cache or a mute error";
	case RUN_UNUSABLE: return "the same call failed afterwards";
	case RUN_LEAK: return "a leak";
	case RUN_CRASH: return "a crash";
	default: return "?";
	}
}

static long env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 10) : dflt;
}

/* Count the scenario's allocations, then fail sites 1, 1 + s, ..., N in
 * both modes; every run must end cleanly. */
static void sweep(const scenario *sc)
{
	long n, count, stride, samples = env_long("TC_FAULT_SAMPLES", sc->samples);
	int sticky, r, runs = 0;
	const char *only = getenv("TC_FAULT_ONLY");
	struct timespec t0, t1;
	if (only && *only && !strstr(sc->name, only))
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = run_forked(sc, 0, 0, 0);
	if (r != RUN_COMPLETE) {
		run_forked(sc, 0, 0, 1);
		fail_msg("%s without failures: %s (%s)", sc->name, run_name(r), shared_report->why);
	}
	count = shared_report->count;
	assert_true(count > 0);
	stride = samples > 0 ? (count + samples - 1) / samples : 1;
	for (sticky = 0; sticky <= 1; sticky++) {
		for (n = 1; n <= count; n = n < count && n + stride > count ? count : n + stride) {
			r = run_forked(sc, n, sticky, 0);
			runs++;
			/* RUN_COMPLETE: this run made fewer than n allocations
			 * (the tuner's count varies with timing), so nothing
			 * failed and every step was checked as usual. */
			if (r == RUN_CLEAN || r == RUN_COMPLETE)
				continue;
			run_forked(sc, n, sticky, 1);
			fail_msg("%s: %s when allocation %ld of %ld failed%s: %s", sc->name,
				run_name(r), n, count, sticky ? " (and every later one)" : "",
				shared_report->why);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s: %ld allocations, %d runs (stride %ld), %.2f s\n", sc->name, count, runs, stride,
		(double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

/* The default samples keep the whole program to a few seconds: a child
 * that compiles for the cpu backend spends tens of milliseconds in LLVM,
 * a tuning run most of a second. */
static const scenario scenarios[] = {
	{"compile-run matmul cpu", 0, 1, op_matmul, verify_matmul, NULL, 2},
	{"compile-run softmax cpu", 0, 1, op_softmax, verify_softmax, NULL, 2},
	{"compile-run matmul interp", 0, 0, op_matmul, verify_matmul, NULL, 8},
	{"compile-run softmax interp", 0, 0, op_softmax, verify_softmax, NULL, 8},
	{"cache store", 1, 1, op_store, verify_store, NULL, 1},
	{"cache lookup", 1, 1, op_lookup, verify_lookup, NULL, 4},
	{"cache list", 1, 1, op_list, verify_list, NULL, 8},
	{"cache export", 1, 1, op_export, verify_export, NULL, 8},
	{"cache import", 1, 1, op_import, verify_import, NULL, 8},
	{"cache prune", 1, 1, op_prune, verify_prune, NULL, 8},
	{"tune", 1, 1, op_tune, verify_tune, again_tune, 1},
};

static const scenario *find(const char *name)
{
	size_t i;
	for (i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (!strcmp(scenarios[i].name, name))
			return &scenarios[i];
	return NULL;
}

/* tc_compile and tc_kernel_run of matmul (cpu): every failure is an error
 * with a message or a correct kernel; the context compiles again; nothing
 * leaks. */
static void test_compile_matmul_cpu_under_failures(void **state)
{
	(void)state;
	sweep(find("compile-run matmul cpu"));
}

/* The same for softmax, whose temporaries take workspaces. */
static void test_compile_softmax_cpu_under_failures(void **state)
{
	(void)state;
	sweep(find("compile-run softmax cpu"));
}

/* The same on the interp backend. */
static void test_compile_interp_under_failures(void **state)
{
	(void)state;
	sweep(find("compile-run matmul interp"));
	sweep(find("compile-run softmax interp"));
}

/* Storing object code: an error or a stored object; a compile reading the
 * cache gets the recorded best and a correct kernel either way. */
static void test_cache_store_under_failures(void **state)
{
	(void)state;
	sweep(find("cache store"));
}

/* tc_compile reading the cache (options and object code). */
static void test_cache_lookup_under_failures(void **state)
{
	(void)state;
	sweep(find("cache lookup"));
}

/* list and export: the same text or an error, and the cache unchanged. */
static void test_cache_list_export_under_failures(void **state)
{
	(void)state;
	sweep(find("cache list"));
	sweep(find("cache export"));
}

/* import (one transaction: all or nothing) and prune. */
static void test_cache_import_prune_under_failures(void **state)
{
	(void)state;
	sweep(find("cache import"));
	sweep(find("cache prune"));
}

/* A tuning run of one generation of two (recording in the cache and
 * storing its best's object code): an error, or correct best options. */
static void test_tune_under_failures(void **state)
{
	(void)state;
	sweep(find("tune"));
}

/* ---- isl failing: its operation quota ---- */

/* Build, schedule (the cpu pass list) and generate the AST of entry of src
 * at the shapes of in, with isl allowed quota operations (0: no limit):
 * 1 done, 0 failed with a message in the diagnostics, -1 failed without
 * one (why says so). */
static int quota_run(const tc_ir_func *f, const int64_t *params, unsigned long quota,
	char *why, size_t nwhy)
{
	static tc_target t;
	isl_ctx *ctx = tc_poly_ctx_new();
	tc_diags d;
	tc_poly *p;
	int r;
	if (!t.name)
		tc_rt_backend_cpu.describe(&t, NULL);
	if (!ctx)
		return -1;
	tc_diags_init(&d, NULL);
	isl_ctx_set_max_operations(ctx, quota);
	p = tc_poly_build(ctx, f, params, &t, &d);
	r = p && tc_poly_schedule_cpu(p, &d) == 0 && tc_poly_ast(p, &d) == 0;
	if (!r && !d.nerrors) {
		snprintf(why, nwhy, "an isl failure at quota %lu without a message", quota);
		r = -1;
	}
	if (!r && getenv("TC_FAULT_VERBOSE")) {
		tc_buf b;
		tc_buf_init(&b);
		tc_diags_render(&d, 1u << TC_SEV_ERROR, &b);
		fprintf(stderr, "test_fault: isl quota %lu: %s", quota, b.s ? b.s : "?\n");
		tc_buf_free(&b);
	}
	tc_poly_free(p);
	isl_ctx_free(ctx);
	tc_diags_clear(&d);
	return r;
}

/* Quotas 1, 2, ... growing by an eighth until the whole pipeline fits in
 * the quota, for entry of src at one shape each input (float32, rank 2);
 * in a child (isl says each error on stderr).  Returns the number of
 * quotas that failed, or -1 with report->why. */
static long quota_sweep(const char *entry, const int64_t (*shapes)[2], int n_in)
{
	pid_t pid;
	int status;
	memset(shared_report, 0, sizeof(*shared_report));
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		tc_arena *ar = tc_arena_new();
		tc_source *s = tc_source_new("fault.tc", src, strlen(src));
		tc_diags d;
		tc_program *prog;
		const tc_def *def;
		const tc_ir_func *f;
		tc_tensor in[2];
		int64_t params[8];
		unsigned long q;
		int i, r = 0, fd = open("/dev/null", O_WRONLY);
		long failed = 0;
		if (fd >= 0 && !getenv("TC_FAULT_VERBOSE")) {
			dup2(fd, 2);
			close(fd);
		}
		tc_diags_init(&d, s);
		prog = tc_parse(ar, s, &d);
		if (!prog || tc_sema_check(prog, &d) < 0 || !(def = tc_program_find(prog, entry)) ||
			!(f = tc_ir_lower(ar, def, s)))
			_exit(RUN_PREP);
		memset(in, 0, sizeof(in));
		for (i = 0; i < n_in; i++) {
			in[i].dtype = TC_T_F32;
			in[i].ndim = 2;
			in[i].shape[0] = shapes[i][0];
			in[i].shape[1] = shapes[i][1];
		}
		if (tc_ir_bind(f, in, n_in, params, &d) < 0)
			_exit(RUN_PREP);
		for (q = 1; q < 100000000 && (r = quota_run(f, params, q, shared_report->why,
							 sizeof(shared_report->why))) == 0;
			q += q / 8 + 1) {
			failed++;
#ifdef TC_FAULT_LSAN
			/* verbose: which quota leaks */
			if (getenv("TC_FAULT_VERBOSE") && __lsan_do_recoverable_leak_check()) {
				fprintf(stderr, "test_fault: the leak above: %s at isl quota %lu\n",
					entry, q);
				break;
			}
#endif
		}
		shared_report->count = failed;
		tc_diags_clear(&d);
		tc_arena_free(ar);
		tc_source_free(s);
		if (r < 0)
			_exit(RUN_BAD);
		if (r == 0)
			_exit(RUN_INCOMPLETE); /* never fitted */
#ifdef TC_FAULT_LSAN
		if (__lsan_do_recoverable_leak_check()) {
			snprintf(shared_report->why, sizeof(shared_report->why),
				"LeakSanitizer found a leak (run with TC_FAULT_VERBOSE=1 to see it)");
			_exit(RUN_LEAK);
		}
#endif
		_exit(RUN_COMPLETE);
	}
	assert_true(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != RUN_COMPLETE)
		fail_msg("isl quota sweep of %s: %s: %s", entry,
			WIFEXITED(status) ? run_name(WEXITSTATUS(status)) : "a crash",
			shared_report->why);
	return shared_report->count;
}

/* isl failing (its operation quota exceeded) at every point of building
 * the model, the cpu pass list and the AST of matmul and softmax: each
 * failure an error with a message, never a crash (and, in the sanitizer
 * build, never a leak of isl objects: isl_ctx_free would keep the context). */
static void test_isl_quota_failures_are_handled(void **state)
{
	static const int64_t mm[2][2] = {{7, 13}, {13, 10}}, sm[1][2] = {{5, 11}};
	const char *only = getenv("TC_FAULT_ONLY");
	long n;
	(void)state;
	if (only && *only && !strstr("isl quota", only))
		return;
	n = quota_sweep("mm", mm, 2);
	printf("isl quota, mm: %ld quotas failed cleanly\n", n);
	assert_true(n > 5);
	n = quota_sweep("softmax", sm, 1);
	printf("isl quota, softmax: %ld quotas failed cleanly\n", n);
	assert_true(n > 5);
}

/* isl's scheduler stopped at many points of one problem (the schedule
 * constraints of a reduction def at its sizes, tests/isl/red_float16.sc:
 * its options, then the constraints), every 16th operation up to the
 * quota at which it succeeds, inside the scope the pipeline opens around
 * it (tc_poly_leaks_begin): each stop is a clean quota error, the last
 * run a schedule, and (sanitizer build) LeakSanitizer finds nothing.
 * Without the scope, stops inside isl_tab_basic_set_non_trivial_lexmin
 * lose the column array of isl_tab_push_basis (polyhedral/leaks.c): with
 * libLLVM 19's isl this sweep then leaks 3 blocks (276 bytes). */
static void test_isl_scheduler_stops_lose_nothing(void **state)
{
	const char *only = getenv("TC_FAULT_ONLY");
	char path[1024], *text;
	isl_ctx *ctx;
	isl_schedule_constraints *sc;
	isl_schedule *sched = NULL;
	unsigned long q;
	long stops = 0;
	size_t withheld = 0;
	int whole, serialize, coincidence, len;
	(void)state;
	if (only && *only && !strstr("isl scheduler stops", only))
		return;
	snprintf(path, sizeof(path), "%s/tests/isl/red_float16.sc", TC_SOURCE_DIR);
	text = tu_read_file(path);
	assert_non_null(text);
	assert_int_equal(sscanf(text, "%d %d %d\n%n", &whole, &serialize, &coincidence, &len), 3);
	ctx = isl_ctx_alloc();
	isl_options_set_on_error(ctx, ISL_ON_ERROR_CONTINUE);
	isl_options_set_schedule_whole_component(ctx, whole);
	isl_options_set_schedule_serialize_sccs(ctx, serialize);
	isl_options_set_schedule_maximize_coincidence(ctx, coincidence);
	sc = isl_schedule_constraints_read_from_str(ctx, text + len);
	free(text);
	assert_non_null(sc);
	for (q = 1; q < 1000000 && !sched; q += 16) {
		isl_ctx_set_max_operations(ctx, q);
		isl_ctx_reset_operations(ctx);
		isl_ctx_reset_error(ctx);
		tc_poly_leaks_begin();
		sched = isl_schedule_constraints_compute_schedule(isl_schedule_constraints_copy(sc));
		withheld += tc_poly_leaks_end(!sched && tc_poly_over_budget(ctx));
		if (!sched) {
			assert_int_equal(isl_ctx_last_error(ctx), isl_error_quota);
			stops++;
		}
	}
	assert_non_null(sched);
	printf("isl scheduler: %ld stops, %zu blocks withheld from LeakSanitizer\n", stops,
		withheld);
	assert_true(stops > 500);
	isl_schedule_free(sched);
	isl_schedule_constraints_free(sc);
	isl_ctx_free(ctx);
#ifdef TC_FAULT_LSAN
	assert_true(withheld > 0);
	assert_int_equal(__lsan_do_recoverable_leak_check(), 0);
#endif
}

/* ---- set-up: inputs, references, the template cache ---- */

static char *cache_text(const char *path, int list)
{
	char *msg = NULL, *s;
	tc_cache *c = tc_cache_open(path, TC_CACHE_READ, &msg);
	tc_buf b;
	if (!c) {
		fprintf(stderr, "cannot open %s: %s\n", path, msg ? msg : "no file");
		return NULL;
	}
	tc_buf_init(&b);
	if ((list ? tc_cache_list(c, &b) : tc_cache_export(c, &b)) < 0)
		fprintf(stderr, "%s\n", tc_cache_error(c));
	s = tc_buf_take(&b);
	tc_cache_close(c);
	return s;
}

static int record(tc_cache *c, const tc_cache_key *key, const char *opts, double ms, int ok)
{
	tc_cache_run run = {opts, ms, ms * 0.9, "fault-run", ok};
	return tc_cache_record(c, key, &run);
}

/* The template cache: two keys, ok and failed runs, the best's object
 * code; import_text from another cache; the texts expected after. */
/* A failed set-up says where. */
static int setup_failed(int line)
{
	fprintf(stderr, "test_fault: set-up failed at line %d\n", line);
	return -1;
}

static int setup(void **state)
{
	uint64_t rng = tu_seed("fault", 1);
	int64_t sa[2] = {7, 13}, sb[2] = {13, 10}, sc[2] = {7, 10}, sx[2] = {5, 11};
	const DLTensor *in_mm[2], *in_sm[1];
	DLTensor *o[1];
	tc_context *ctx;
	tc_module *m;
	tc_options *interp;
	tc_kernel *k;
	tc_cache *c;
	tc_cache_key key, key2;
	char *msg = NULL, p[1200];
	char *other;
	int added;
	(void)state;

	tu_tensor_init(&A, TU_F32, sa, 2);
	tu_tensor_init(&B, TU_F32, sb, 2);
	tu_tensor_init(&X, TU_F32, sx, 2);
	tu_tensor_init(&C_ref, TU_F32, sc, 2);
	tu_tensor_init(&O_ref, TU_F32, sx, 2);
	tu_tensor_init(&out_mm, TU_F32, sc, 2);
	tu_tensor_init(&out_sm, TU_F32, sx, 2);
	fill_random(&A, &rng);
	fill_random(&B, &rng);
	fill_random(&X, &rng);
	in_mm[0] = &A.dl;
	in_mm[1] = &B.dl;
	in_sm[0] = &X.dl;

	/* the references: the interpreter, checked against plain loops */
	ctx = tc_context_new();
	m = tc_module_parse(ctx, src, "fault.tc");
	interp = tc_options_new();
	if (!m || tc_options_set(interp, "target", "interp", ctx) < 0)
		return setup_failed(__LINE__);
	tu_poison(&C_ref);
	o[0] = &C_ref.dl;
	k = tc_compile(m, "mm", in_mm, 2, interp);
	if (!k || tc_kernel_run(k, in_mm, 2, o, 1) < 0)
		return setup_failed(__LINE__);
	tc_kernel_free(k);
	tu_poison(&O_ref);
	o[0] = &O_ref.dl;
	k = tc_compile(m, "softmax", in_sm, 1, interp);
	if (!k || tc_kernel_run(k, in_sm, 1, o, 1) < 0)
		return setup_failed(__LINE__);
	tc_kernel_free(k);
	tc_options_free(interp);
	{
		int i, j, r;
		for (i = 0; i < 7; i++)
			for (j = 0; j < 10; j++) {
				double s = 0;
				for (r = 0; r < 13; r++)
					s += (double)((float *)A.data)[i * 13 + r] * ((float *)B.data)[r * 10 + j];
				if (fabs(tu_get(&C_ref, i * 10 + j) - s) > 1e-5 * fabs(s) + 1e-6)
					return setup_failed(__LINE__);
			}
		for (i = 0; i < 5; i++) {
			double mx = -INFINITY, sum = 0;
			const float *row = (const float *)X.data + i * 11;
			for (j = 0; j < 11; j++)
				mx = row[j] > mx ? row[j] : mx;
			for (j = 0; j < 11; j++)
				sum += exp(row[j] - mx);
			for (j = 0; j < 11; j++)
				if (fabs(tu_get(&O_ref, i * 11 + j) - exp(row[j] - mx) / sum) > 1e-6)
					return setup_failed(__LINE__);
		}
	}

	/* the template cache */
	snprintf(dir, sizeof(dir), "%s/tests/fault-cache-%ld", TC_BINARY_DIR, (long)getpid());
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return setup_failed(__LINE__);
	snprintf(tmpl_path, sizeof(tmpl_path), "%s/template.sqlite", dir);
	unlink(tmpl_path);
	c = tc_cache_open(tmpl_path, TC_CACHE_WRITE, &msg);
	if (!c || tc_cache_key_init(&key, m, "mm", in_mm, 2) < 0 ||
		tc_cache_key_init(&key2, m, "softmax", in_sm, 1) < 0)
		return setup_failed(__LINE__);
	if (record(c, &key, best_options, 0.5, 1) < 0 || record(c, &key, "unroll=off", 0.9, 1) < 0 ||
		record(c, &key, "pack=off", 0, 0) < 0 || record(c, &key2, "fusion=min", 0.3, 1) < 0 ||
		record(c, &key2, "tile=4,4", 0, 0) < 0 ||
		tc_cache_store_object(c, &key, m, in_mm, 2, best_options) < 0) {
		fprintf(stderr, "%s\n", tc_cache_error(c));
		return setup_failed(__LINE__);
	}
	tc_cache_close(c);

	/* another cache to import from */
	snprintf(p, sizeof(p), "%s/other.sqlite", dir);
	unlink(p);
	c = tc_cache_open(p, TC_CACHE_WRITE, &msg);
	if (!c || record(c, &key, "regtile=none", 0.7, 1) < 0 ||
		record(c, &key2, "unroll=off", 0.4, 1) < 0)
		return setup_failed(__LINE__);
	tc_cache_close(c);
	import_text = cache_text(p, 0);
	unlink(p);

	tmpl_export = cache_text(tmpl_path, 0);
	tmpl_list = cache_text(tmpl_path, 1);
	if (!import_text || !tmpl_export || !tmpl_list)
		return setup_failed(__LINE__);

	/* the expected texts after import and after prune */
	snprintf(p, sizeof(p), "%s/expected.sqlite", dir);
	if (copy_file(tmpl_path, p) < 0 || !(c = tc_cache_open(p, TC_CACHE_WRITE, &msg)) ||
		tc_cache_import(c, import_text, &added, NULL, NULL) < 0 || added != 2)
		return setup_failed(__LINE__);
	tc_cache_close(c);
	imported_export = cache_text(p, 0);
	if (copy_file(tmpl_path, p) < 0 || !(c = tc_cache_open(p, TC_CACHE_WRITE, &msg))) {
		return setup_failed(__LINE__);
	} else {
		tc_cache_prune_opts po = {0, 1, 0, 0};
		if (tc_cache_prune(c, &po, &added) < 0 || added != 2)
			return setup_failed(__LINE__);
	}
	tc_cache_close(c);
	pruned_export = cache_text(p, 0);
	unlink(p);
	if (!imported_export || !pruned_export || !strcmp(imported_export, tmpl_export) ||
		!strcmp(pruned_export, tmpl_export))
		return setup_failed(__LINE__);
	other = cache_text(tmpl_path, 0);
	if (!other || strcmp(other, tmpl_export))
		return setup_failed(__LINE__); /* exporting twice gives the same text */
	tc_free(other);

	tc_cache_key_clear(&key);
	tc_cache_key_clear(&key2);
	tc_module_free(m);
	tc_context_free(ctx);

	shared_report = mmap(NULL, sizeof(report), PROT_READ | PROT_WRITE,
		MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return shared_report == MAP_FAILED ? -1 : 0;
}

static int teardown(void **state)
{
	char p[1200];
	(void)state;
	tu_tensor_fini(&A);
	tu_tensor_fini(&B);
	tu_tensor_fini(&X);
	tu_tensor_fini(&C_ref);
	tu_tensor_fini(&O_ref);
	tu_tensor_fini(&out_mm);
	tu_tensor_fini(&out_sm);
	tc_free(tmpl_export);
	tc_free(tmpl_list);
	tc_free(import_text);
	tc_free(imported_export);
	tc_free(pruned_export);
	{ /* the databases and what SQLite keeps beside them */
		static const char *const name[] = {"template", "expected", "other"};
		int i;
		for (i = 0; i < 3; i++) {
			snprintf(p, sizeof(p), "%s/%s.sqlite", dir, name[i]);
			tu_remove_db(p);
		}
	}
	rmdir(dir);
	munmap(shared_report, sizeof(report));
	return 0;
}

int main(void)
{
	static const sqlite3_mem_methods mem = {sq_malloc, sq_free, sq_realloc, sq_size,
		sq_roundup, sq_init, sq_shutdown, NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compile_matmul_cpu_under_failures),
		cmocka_unit_test(test_compile_softmax_cpu_under_failures),
		cmocka_unit_test(test_compile_interp_under_failures),
		cmocka_unit_test(test_cache_store_under_failures),
		cmocka_unit_test(test_cache_lookup_under_failures),
		cmocka_unit_test(test_cache_list_export_under_failures),
		cmocka_unit_test(test_cache_import_prune_under_failures),
		cmocka_unit_test(test_tune_under_failures),
		cmocka_unit_test(test_isl_quota_failures_are_handled),
		cmocka_unit_test(test_isl_scheduler_stops_lose_nothing),
	};
	/* SQLite's allocations through the fault counter: before SQLite starts */
	if (sqlite3_config(SQLITE_CONFIG_MALLOC, &mem) != SQLITE_OK) {
		fprintf(stderr, "sqlite3_config(SQLITE_CONFIG_MALLOC) failed\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
