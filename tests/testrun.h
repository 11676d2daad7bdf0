/* Helpers shared by the tests that derive defs from defs and run them
 * (test_grad.c, test_grad_sample.c, test_vmap.c, test_grad_hand.c,
 * test_grad_corpus.c): shapes written "3x4", comma-separated name lists,
 * compiling and running a kernel on owned tensors with poisoned outputs,
 * golden texts, the `tcomp` command in a folder, every def of the corpus,
 * and the allocation hook that fails one allocation after another.
 *
 * Everything here is static: each test program includes it once, after
 * <cmocka.h> (its assertions fail the running test) and "testutil.h". */
#ifndef TC_TESTRUN_H
#define TC_TESTRUN_H

#include <dirent.h>
#include <sys/wait.h>

#include "lang/util.h"

/* Inputs or outputs of one kernel run, at the most. */
#define TR_MAX_T 16

/* The extents of a shape written "3x4" ("" or NULL: a scalar) into dims;
 * their number. */
static inline int tr_parse_dims(const char *s, int64_t *dims)
{
	int n = 0;
	while (s && *s) {
		dims[n++] = strtoll(s, (char **)&s, 10);
		if (*s == 'x')
			s++;
	}
	return n;
}

/* Whether the comma-separated list (NULL: empty) names name. */
static inline int tr_list_has(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* The contents of the file at path (malloc'd), or NULL where it cannot be
 * opened. */
static inline char *tr_slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	s = malloc((size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = '\0';
	fclose(f);
	return s;
}

/* Options with target=interp (the caller frees them). */
static inline tc_options *tr_interp_options(tc_context *ctx)
{
	tc_options *o = tc_options_new();
	assert_non_null(o);
	assert_int_equal(tc_options_set(o, "target", "interp", ctx), 0);
	return o;
}

/* entry of m compiled with o (NULL: the defaults, the CPU) for the inputs
 * in[0..n); a failure fails the test with the context's message. */
static inline tc_kernel *tr_compile(tc_module *m, const char *entry, tu_tensor *in, int n,
	const tc_options *o, tc_context *ctx)
{
	const DLTensor *ins[TR_MAX_T];
	tc_kernel *k;
	assert_true(n <= TR_MAX_T);
	for (int i = 0; i < n; i++)
		ins[i] = &in[i].dl;
	k = tc_compile(m, entry, ins, n, o);
	if (!k)
		fail_msg("tc_compile(%s) failed:\n%s", entry, tc_context_error(ctx));
	return k;
}

/* Make k's outputs in out, poisoned; their number, at most max.  Every
 * output is floating-point: of bits bits (32 or 64), or with bits 0 either
 * float32 or float64. */
static inline int tr_make_outputs(tc_kernel *k, tu_tensor *out, int max, int bits)
{
	int n = tc_kernel_num_outputs(k);
	assert_true(n <= max);
	for (int i = 0; i < n; i++) {
		int64_t shape[TU_MAX_RANK];
		int nd;
		DLDataType dt;
		assert_int_equal(tc_kernel_output_shape(k, i, &dt, &nd, shape), 0);
		assert_int_equal(dt.code, kDLFloat);
		if (bits)
			assert_int_equal(dt.bits, bits);
		else
			assert_true(dt.bits == 32 || dt.bits == 64);
		tu_tensor_init(&out[i], dt.bits == 64 ? TU_F64 : TU_F32, shape, nd);
		tu_poison(&out[i]);
	}
	return n;
}

/* Run k on in[0..nin) into out[0..nout), poisoned first; the run must
 * succeed. */
static inline void tr_run(tc_kernel *k, tu_tensor *in, int nin, tu_tensor *out, int nout)
{
	const DLTensor *ins[TR_MAX_T];
	DLTensor *outs[TR_MAX_T];
	assert_true(nin <= TR_MAX_T && nout <= TR_MAX_T);
	for (int i = 0; i < nin; i++)
		ins[i] = &in[i].dl;
	for (int i = 0; i < nout; i++) {
		tu_poison(&out[i]);
		outs[i] = &out[i].dl;
	}
	assert_int_equal(tc_kernel_run(k, ins, nin, outs, nout), 0);
}

/* The number of the output of entry (in m, nin inputs, nout outputs)
 * named name, or -1. */
static inline int tr_output_named(tc_module *m, const char *entry, int nin, int nout,
	const char *name)
{
	for (int o = 0; o < nout; o++)
		if (!strcmp(tc_module_tensor_name(m, entry, nin + o), name))
			return o;
	return -1;
}

/* text against the golden file tests/golden/FILE: equal, or the test fails
 * saying that the text (what: "the backward text") differs; with
 * TC_UPDATE_GOLDEN set (not "0") the file is written instead.  prog is the
 * test program to rerun. */
static inline void tr_check_golden(const char *file, const char *text, const char *prog,
	const char *what)
{
	char path[512], *want;
	const char *update = getenv("TC_UPDATE_GOLDEN");
	snprintf(path, sizeof(path), "%s/tests/golden/%s", TC_SOURCE_DIR, file);
	if (update && *update && strcmp(update, "0")) {
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(text, f);
		fclose(f);
	} else {
		want = tr_slurp(path);
		if (!want)
			fail_msg("%s is missing: run TC_UPDATE_GOLDEN=1 %s", path, prog);
		if (strcmp(want, text))
			fail_msg("%s differs from %s:\n%s\nif it is right, rerun with "
				 "TC_UPDATE_GOLDEN=1", what, path, text);
		free(want);
	}
}

/* Run "tcomp ARGS" in dir with stdout and stderr into dir/out.txt; the
 * exit status, the output into *text (malloc'd). */
static inline int tr_tcomp(const char *dir, const char *args, char **text)
{
	char cmd[1024], path[600];
	int st;
	snprintf(cmd, sizeof(cmd), "cd %s && %s/tcomp %s > out.txt 2>&1", dir, TC_BINARY_DIR, args);
	st = system(cmd);
	snprintf(path, sizeof(path), "%s/out.txt", dir);
	*text = tr_slurp(path);
	assert_non_null(*text);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run "tcomp ARGS" in dir (tr_tcomp): its exit status must be status and,
 * unless want is NULL, its output must contain want. */
static inline void tr_tcomp_expect(const char *dir, const char *args, int status,
	const char *want)
{
	char *text;
	int st = tr_tcomp(dir, args, &text);
	if (st != status || (want && !strstr(text, want)))
		fail_msg("tcomp %s: exit status %d (expected %d), output:\n%s\nexpected in it: %s",
			args, st, status, text, want ? want : "(anything)");
	free(text);
}

/* ---- the corpus ---- */

/* What tr_each_corpus_module calls per file: m loaded from path (file is
 * its name alone) in ctx, both freed after the call. */
typedef void (*tr_module_fn)(tc_context *ctx, tc_module *m, const char *file, const char *path,
	void *arg);

/* fn(..., arg) on every .tc file of tests/corpus and examples/, and on
 * bench/kernels.tc, each loaded into a fresh context; a file that does not
 * load fails the test. */
static inline void tr_each_corpus_module(tr_module_fn fn, void *arg)
{
	static const char *const dirs[] = {TC_SOURCE_DIR "/tests/corpus", TC_SOURCE_DIR "/examples",
		TC_SOURCE_DIR "/bench"};
	for (size_t di = 0; di < sizeof(dirs) / sizeof(dirs[0]); di++) {
		DIR *dir = opendir(dirs[di]);
		struct dirent *ent;
		assert_non_null(dir);
		while ((ent = readdir(dir))) {
			char path[1024];
			size_t len = strlen(ent->d_name);
			tc_context *ctx;
			tc_module *m;
			if (len < 4 || strcmp(ent->d_name + len - 3, ".tc"))
				continue;
			if (di == 2 && strcmp(ent->d_name, "kernels.tc"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dirs[di], ent->d_name);
			ctx = tc_context_new();
			if (!(m = tc_module_load(ctx, path)))
				fail_msg("%s: %s", path, tc_context_error(ctx));
			fn(ctx, m, ent->d_name, path, arg);
			tc_module_free(m);
			tc_context_free(ctx);
		}
		closedir(dir);
	}
}

/* ---- allocation failures ---- */

/* The allocation hook's count: the fail_at-th allocation fails. */
typedef struct tr_alloc_fault {
	long count, fail_at;
} tr_alloc_fault;

/* The allocation hook (realloc semantics) of tr_alloc_fault ud. */
static inline void *tr_failing_alloc(void *ud, void *ptr, size_t size)
{
	tr_alloc_fault *a = ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	if (++a->count == a->fail_at)
		return NULL;
	return realloc(ptr, size);
}

/* A derivation under test: its text (tc_string_free), or NULL with the
 * error in the context. */
typedef char *(*tr_derive_fn)(void *arg);

/* derive(arg) with each of its allocations failing in turn, the first, the
 * second, ..., until a call in which none fails: that one must give want;
 * every other must give want or NULL with an out-of-memory error in ctx.
 * The number of calls (the allocations of a derivation, plus one). */
static inline long tr_each_allocation_failing(tr_derive_fn derive, void *arg, tc_context *ctx,
	const char *want)
{
	long n;
	for (n = 1;; n++) {
		tr_alloc_fault a = {0, n};
		char *text;
		tc_set_alloc(tr_failing_alloc, &a);
		text = derive(arg);
		tc_set_alloc(NULL, NULL);
		if (a.count < n) { /* no allocation failed: done */
			assert_non_null(text);
			assert_string_equal(text, want);
			tc_string_free(text);
			return n;
		}
		if (text) {
			assert_string_equal(text, want);
			tc_string_free(text);
		} else if (tc_context_error_kind(ctx) != TC_ERROR_NOMEM) {
			fail_msg("allocation %ld failed: %s", n, tc_context_error(ctx));
		}
	}
}

#endif
