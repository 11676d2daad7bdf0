/* The kernel cache (runtime/cache.c) and its use by tc_compile: round
 * trips, nearest shapes, concurrent writers, a writer killed mid-write,
 * damaged and foreign files, invalid options, and the `tcomp cache` and
 * `tcomp bench` commands.  Every cache lives in a fresh folder under the
 * build directory; nothing touches the user's ~/.cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cache_ops.h"
#include "runtime/internal.h"
#include "tests/testutil.h"

static char dir[256];


static const char *path(const char *name)
{
	static char buf[8][512];
	static int k;
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

static char out_text[65536];

/* Run "tcomp ARGS" in dir (a shell fragment); its exit status, with
 * stdout+stderr in out_text (stderr alone in err.txt). */
static int tcomp(const char *fmt, ...)
{
	char cmd[8192], args[4096];
	va_list ap;
	FILE *fp;
	size_t n;
	int st;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "cd %s && %s/tcomp %s > out.txt 2> err.txt; s=$?; "
				   "cat err.txt >> out.txt; exit $s", dir, TC_BINARY_DIR, args);
	st = system(cmd);
	fp = fopen(path("out.txt"), "rb");
	n = fp ? fread(out_text, 1, sizeof(out_text) - 1, fp) : 0;
	out_text[n] = 0;
	if (fp)
		fclose(fp);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char *slurp(const char *p)
{
	FILE *fp = fopen(p, "rb");
	char *s;
	long n;
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	s = calloc(1, (size_t)n + 1);
	assert_int_equal(fread(s, 1, (size_t)n, fp), (size_t)n);
	fclose(fp);
	return s;
}

static int exists(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0;
}

static const char src[] =
	"def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
	"  C(m,n) +=! A(m,r) * B(r,n)\n"
	"}\n"
	"def scale(float(N) X) -> (Y) { Y(i) = X(i) * 3 }\n";

/* A module of src, and matmul inputs of the given sizes. */
typedef struct fixture {
	tc_context *ctx;
	tc_module *m;
	tu_tensor a, b;
	const DLTensor *in[2];
} fixture;

static void fx_init(fixture *f, int64_t M, int64_t K, int64_t N)
{
	int64_t sa[2] = {M, K}, sb[2] = {K, N};
	uint64_t rng = tu_seed("cache", (uint64_t)(M * 131 + K * 7 + N));
	int64_t i;
	memset(f, 0, sizeof(*f));
	f->ctx = tc_context_new();
	assert_non_null(f->ctx);
	f->m = tc_module_parse(f->ctx, src, "cache.tc");
	assert_non_null(f->m);
	tu_tensor_init(&f->a, TU_F32, sa, 2);
	tu_tensor_init(&f->b, TU_F32, sb, 2);
	for (i = 0; i < f->a.numel; i++) /* non-zero, in [-1, 1) */
		((float *)f->a.data)[i] = (float)(tu_rand_unit(&rng) * 1.98 - 0.99) + 0.005f;
	for (i = 0; i < f->b.numel; i++)
		((float *)f->b.data)[i] = (float)(tu_rand_unit(&rng) * 1.98 - 0.99) + 0.005f;
	f->in[0] = &f->a.dl;
	f->in[1] = &f->b.dl;
}

static void fx_fini(fixture *f)
{
	tu_tensor_fini(&f->a);
	tu_tensor_fini(&f->b);
	tc_module_free(f->m);
	tc_context_free(f->ctx);
}

static void key_of(fixture *f, tc_cache_key *key)
{
	assert_int_equal(tc_cache_key_init(key, f->m, "mm", f->in, 2), 0);
}

static tc_cache *open_write(const char *p)
{
	char *msg = NULL;
	tc_cache *c = tc_cache_open(p, TC_CACHE_WRITE, &msg);
	if (!c)
		fail_msg("cannot open %s: %s", p, msg ? msg : "?");
	return c;
}

static void record(tc_cache *c, const tc_cache_key *key, const char *opts, double ms, int ok)
{
	tc_cache_run run = {opts, ms, ms * 0.9, "test-run", ok};
	if (tc_cache_record(c, key, &run) < 0)
		fail_msg("record: %s", tc_cache_error(c));
}

/* Canonical text of options text. */
static char *canon(const char *text)
{
	tc_options *o = tc_options_new();
	char *r;
	assert_int_equal(tc_options_parse(o, text, NULL), 0);
	r = tc_options_print(o);
	tc_options_free(o);
	return r;
}

#define TUNED "tile=16,16\nregtile=none\nparallel=off\n"
#define TUNED_FAR "tile=none\nregtile=2,8\norder=off\n"

/* Run kernel k on the fixture's inputs and compare with the interpreter. */
static void check_against_interp(fixture *f, tc_kernel *k)
{
	tc_options *io = tc_options_new();
	tc_kernel *ki;
	tu_tensor c1, c2;
	int64_t shape[8];
	DLTensor *o1[1], *o2[1];
	int nd, i;
	DLDataType dt;
	assert_int_equal(tc_options_set(io, "target", "interp", f->ctx), 0);
	ki = tc_compile(f->m, "mm", f->in, 2, io);
	assert_non_null(ki);
	assert_string_equal(tc_kernel_options_source(ki), "user");
	assert_int_equal(tc_kernel_output_shape(k, 0, &dt, &nd, shape), 0);
	tu_tensor_init(&c1, TU_F32, shape, nd);
	tu_tensor_init(&c2, TU_F32, shape, nd);
	for (i = 0; i < c1.numel; i++) /* poison: every element must be written */
		((float *)c1.data)[i] = ((float *)c2.data)[i] = NAN;
	o1[0] = &c1.dl;
	o2[0] = &c2.dl;
	assert_int_equal(tc_kernel_run(k, f->in, 2, o1, 1), 0);
	assert_int_equal(tc_kernel_run(ki, f->in, 2, o2, 1), 0);
	for (i = 0; i < c1.numel; i++) {
		float x = ((float *)c1.data)[i], y = ((float *)c2.data)[i];
		if (!(fabsf(x - y) <= 1e-5f * (1 + fabsf(y))))
			fail_msg("element %d: compiled %g, interpreter %g", i, x, y);
	}
	tu_tensor_fini(&c1);
	tu_tensor_fini(&c2);
	tc_kernel_free(ki);
	tc_options_free(io);
}

/* ---- set-up: a fresh folder per test ---- */

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "%s/tmp-cache-XXXXXX", TC_BINARY_DIR);
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[600];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- the store ---- */

static void record_then_lookup_exact_and_near(void **state)
{
	fixture f, g, h;
	tc_cache_key k1, k2, k3;
	tc_cache_hit hit;
	tc_cache *c;
	char *want = canon(TUNED), *want_far = canon(TUNED_FAR);
	(void)state;
	fx_init(&f, 64, 32, 48);
	fx_init(&g, 60, 32, 48);
	fx_init(&h, 512, 32, 48);
	key_of(&f, &k1);
	key_of(&g, &k2);
	key_of(&h, &k3);
	assert_string_equal(k1.shapes, "64x32,32x48");
	assert_string_equal(k1.strides, "32x1,48x1");
	assert_string_equal(k1.types, "float32/2,float32/2");
	c = open_write(path("sub/dir/k.sqlite")); /* creates the folders */
	record(c, &k1, "", 2.0, 1);         /* the defaults */
	record(c, &k1, TUNED, 1.0, 1);      /* the best */
	record(c, &k1, "tile=none", 0.5, 0); /* failed: never chosen */
	record(c, &k1, "tile=8,8", 1.5, 1);
	record(c, &k3, TUNED_FAR, 0.1, 1);
	assert_int_equal(tc_cache_lookup(c, &k1, &hit), 1);
	assert_string_equal(hit.text, want);
	assert_true(hit.median_ms == 1.0);
	assert_true(hit.distance == 0);
	tc_cache_hit_clear(&hit);
	/* 60 rows: no exact entry; 64 is nearer than 512 */
	assert_int_equal(tc_cache_lookup(c, &k2, &hit), 0);
	assert_int_equal(tc_cache_lookup_near(c, &k2, &hit), 1);
	assert_string_equal(hit.text, want);
	assert_string_equal(hit.shapes, "64x32,32x48");
	assert_true(fabs(hit.distance - log(64.0 / 60.0)) < 1e-12);
	tc_cache_hit_clear(&hit);
	/* 512 itself is exact; from 512 the nearest other is 64 */
	assert_int_equal(tc_cache_lookup(c, &k3, &hit), 1);
	assert_string_equal(hit.text, want_far);
	tc_cache_hit_clear(&hit);
	{
		char **texts;
		int n, i;
		assert_int_equal(tc_cache_seeds(c, &k2, 10, &texts, &n), 0);
		assert_int_equal(n, 4); /* 64's three ok options (best first), then 512's */
		assert_string_equal(texts[0], want);
		assert_string_equal(texts[3], want_far);
		for (i = 0; i < n; i++)
			tc_free(texts[i]);
		tc_free(texts);
	}
	tc_cache_close(c);
	tc_cache_key_clear(&k1);
	tc_cache_key_clear(&k2);
	tc_cache_key_clear(&k3);
	tc_string_free(want);
	tc_string_free(want_far);
	fx_fini(&f);
	fx_fini(&g);
	fx_fini(&h);
}

/* The number of lines of text (NULL or "": 0). */
static int lines_of(const char *text)
{
	int n = 0;
	for (; text && *text; text++)
		n += *text == '\n';
	return n;
}

/* tc_cache_export_after gives the runs recorded since its last call, from a
 * reader open while a writer records (a serving rank sends its job's runs
 * so): every run once, in the order recorded, with its key. */
static void export_after_gives_each_new_run_once(void **state)
{
	fixture f, g;
	tc_cache_key k1, k2;
	tc_cache *w, *r;
	int64_t after = 0, last;
	char *msg = NULL;
	tc_buf b;
	(void)state;
	fx_init(&f, 64, 32, 48);
	fx_init(&g, 16, 32, 48);
	key_of(&f, &k1);
	key_of(&g, &k2);
	w = open_write(path("after.sqlite"));
	record(w, &k1, "", 2.0, 1);
	record(w, &k1, "tile=8,8", 1.5, 1);
	assert_non_null(r = tc_cache_open(path("after.sqlite"), TC_CACHE_READ, &msg));
	tc_buf_init(&b);
	assert_int_equal(tc_cache_export_after(r, &after, &b), 0);
	assert_int_equal(lines_of(b.s), 2);
	assert_true(after > 0);
	tc_buf_free(&b);
	last = after;
	tc_buf_init(&b);
	assert_int_equal(tc_cache_export_after(r, &after, &b), 0); /* nothing new */
	assert_int_equal(lines_of(b.s), 0);
	assert_true(after == last);
	tc_buf_free(&b);
	record(w, &k2, "tile=4,4", 0.5, 1); /* another key, then the first again */
	record(w, &k1, "tile=none", 0.7, 0);
	tc_buf_init(&b);
	assert_int_equal(tc_cache_export_after(r, &after, &b), 0);
	assert_int_equal(lines_of(b.s), 2);
	assert_non_null(strstr(b.s, "\"shapes\":\"16x32,32x48\""));
	assert_true(strstr(b.s, "tile=4") < strstr(b.s, "tile=none")); /* as recorded */
	assert_true(after > last);
	tc_buf_free(&b);
	/* from 0 again: all four, as tc_cache_export gives them */
	after = 0;
	tc_buf_init(&b);
	assert_int_equal(tc_cache_export_after(r, &after, &b), 0);
	assert_int_equal(lines_of(b.s), 4);
	tc_buf_free(&b);
	tc_buf_init(&b);
	assert_int_equal(tc_cache_export(r, &b), 0);
	assert_int_equal(lines_of(b.s), 4);
	tc_buf_free(&b);
	assert_int_equal(tc_cache_export_after(NULL, &after, &b), -1);
	assert_int_equal(tc_cache_export_after(r, NULL, &b), -1);
	tc_cache_close(r);
	tc_cache_close(w);
	tc_cache_key_clear(&k1);
	tc_cache_key_clear(&k2);
	fx_fini(&f);
	fx_fini(&g);
}

static void renamed_kernel_shares_entries(void **state)
{
	static const char renamed[] = "def mm(float(P,Q) X, float(Q,R) Y) -> (Z) {\n"
				      "  Z(i,j) +=! X(i,k) * Y(k,j)\n}\n";
	fixture f;
	tc_module *m2;
	tc_cache_key k1, k2;
	(void)state;
	fx_init(&f, 8, 4, 6);
	m2 = tc_module_parse(f.ctx, renamed, "renamed.tc");
	assert_non_null(m2);
	key_of(&f, &k1);
	assert_int_equal(tc_cache_key_init(&k2, m2, "mm", f.in, 2), 0);
	assert_string_equal(k1.hash, k2.hash);
	assert_string_equal(k1.canonical, k2.canonical);
	tc_cache_key_clear(&k1);
	tc_cache_key_clear(&k2);
	tc_module_free(m2);
	fx_fini(&f);
}

static void reading_never_creates_a_file(void **state)
{
	char *msg = (char *)1;
	fixture f;
	tc_kernel *k;
	(void)state;
	assert_null(tc_cache_open(path("none/k.sqlite"), TC_CACHE_READ, &msg));
	assert_null(msg);
	assert_false(exists(path("none")));
	fx_init(&f, 8, 4, 6);
	assert_int_equal(tc_context_set_cache(f.ctx, path("none/k.sqlite")), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "default");
	assert_false(exists(path("none")));
	assert_string_equal(tc_context_warnings(f.ctx), "");
	tc_kernel_free(k);
	fx_fini(&f);
}

/* ---- tc_compile ---- */

static void compile_uses_exact_then_near_then_defaults(void **state)
{
	fixture f, g, h;
	tc_cache_key key;
	tc_cache *c;
	tc_kernel *k;
	char *want = canon(TUNED), *got, *dflt = canon("");
	(void)state;
	fx_init(&f, 37, 19, 23);
	key_of(&f, &key);
	c = open_write(path("k.sqlite"));
	record(c, &key, "", 3.0, 1);
	record(c, &key, TUNED, 1.0, 1);
	tc_cache_close(c);
	tc_cache_key_clear(&key);

	assert_int_equal(tc_context_set_cache(f.ctx, path("k.sqlite")), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "cache");
	got = tc_kernel_options(k);
	assert_string_equal(got, want);
	tc_string_free(got);
	check_against_interp(&f, k);
	tc_kernel_free(k);

	/* other sizes: the nearest entry's options */
	fx_init(&g, 41, 19, 23);
	assert_int_equal(tc_context_set_cache(g.ctx, path("k.sqlite")), 0);
	k = tc_compile(g.m, "mm", g.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "cache-near");
	got = tc_kernel_options(k);
	assert_string_equal(got, want);
	tc_string_free(got);
	check_against_interp(&g, k);
	tc_kernel_free(k);
	/* another entry of the module has no entries: the defaults */
	{
		int64_t sx[1] = {10};
		tu_tensor x;
		const DLTensor *xin[1];
		tu_tensor_init(&x, TU_F32, sx, 1);
		xin[0] = &x.dl;
		k = tc_compile(g.m, "scale", xin, 1, NULL);
		assert_non_null(k);
		assert_string_equal(tc_kernel_options_source(k), "default");
		got = tc_kernel_options(k);
		assert_string_equal(got, dflt);
		tc_string_free(got);
		tc_kernel_free(k);
		tu_tensor_fini(&x);
	}
	fx_fini(&g);

	/* "" disables the cache; given options are the user's */
	fx_init(&h, 37, 19, 23);
	assert_int_equal(tc_context_set_cache(h.ctx, ""), 0);
	k = tc_compile(h.m, "mm", h.in, 2, NULL);
	assert_string_equal(tc_kernel_options_source(k), "default");
	tc_kernel_free(k);
	assert_int_equal(tc_context_set_cache(h.ctx, path("k.sqlite")), 0);
	{
		tc_options *o = tc_options_new();
		k = tc_compile(h.m, "mm", h.in, 2, o);
		assert_string_equal(tc_kernel_options_source(k), "user");
		tc_kernel_free(k);
		tc_options_free(o);
	}
	fx_fini(&h);
	fx_fini(&f);
	tc_string_free(want);
	tc_string_free(dflt);
}

static void env_variable_gives_the_default_path(void **state)
{
	char *p;
	(void)state;
	setenv("TCOMP_CACHE", path("env.sqlite"), 1);
	p = tc_cache_default_path();
	assert_string_equal(p, path("env.sqlite"));
	tc_free(p);
	unsetenv("TCOMP_CACHE");
	setenv("XDG_CACHE_HOME", "/xdg", 1);
	p = tc_cache_default_path();
	assert_string_equal(p, "/xdg/tcomp/kernels.sqlite");
	tc_free(p);
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "/home/u", 1);
	p = tc_cache_default_path();
	assert_string_equal(p, "/home/u/.cache/tcomp/kernels.sqlite");
	tc_free(p);
	setenv("TCOMP_CACHE", path("no-kernel-cache.sqlite"), 1); /* hermetic again */
}

/* ---- concurrency and crashes ---- */

static int count_runs(const char *p)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int n = -1;
	assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM runs", -1, &st, NULL),
		SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static void integrity_ok(const char *p)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL),
		SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* A child process recording n runs (forever if n < 0) under its own key
 * shapes; exits 0 when done. */
static void writer_child(const char *p, int M, int n)
{
	fixture f;
	tc_cache_key key;
	tc_cache *c;
	char id[32], *msg = NULL;
	int i;
	fx_init(&f, M, 4, 6);
	key_of(&f, &key);
	c = tc_cache_open(p, TC_CACHE_WRITE, &msg);
	if (!c) {
		fprintf(stderr, "child: %s\n", msg ? msg : "(no message)");
		_exit(3);
	}
	snprintf(id, sizeof(id), "writer-%d", M);
	for (i = 0; n < 0 || i < n; i++) {
		char opts[64];
		tc_cache_run run = {opts, 1.0 + i, 1.0 + i, id, 1};
		snprintf(opts, sizeof(opts), "tile=%d,%d", 1 + i % 64, 1 + i % 7);
		if (tc_cache_record(c, &key, &run) < 0) {
			fprintf(stderr, "child: %s\n", tc_cache_error(c));
			_exit(4);
		}
	}
	tc_cache_close(c);
	_exit(0);
}

static void two_processes_write_at_once(void **state)
{
	const char *p = path("shared.sqlite");
	pid_t a, b;
	int sa, sb;
	(void)state;
	tc_cache_close(open_write(p)); /* the schema, before the race on rows */
	if ((a = fork()) == 0)
		writer_child(p, 5, 150);
	if ((b = fork()) == 0)
		writer_child(p, 7, 150);
	assert_true(a > 0 && b > 0);
	assert_int_equal(waitpid(a, &sa, 0), a);
	assert_int_equal(waitpid(b, &sb, 0), b);
	assert_true(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
	assert_true(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
	assert_int_equal(count_runs(p), 300);
	integrity_ok(p);
}

/* Two processes open a file that does not exist yet, each writing a few
 * rows; many rounds, since one process checking the file while the other
 * commits the schema (a window of microseconds) once took a new cache for
 * another program's database. */
static void two_processes_create_the_file_at_once(void **state)
{
	int round;
	(void)state;
	for (round = 0; round < 40; round++) {
		char name[64];
		const char *p;
		pid_t a, b;
		int sa, sb;
		snprintf(name, sizeof(name), "fresh/%d/new.sqlite", round);
		p = path(name);
		if ((a = fork()) == 0)
			writer_child(p, 5, round ? 1 : 20);
		if ((b = fork()) == 0)
			writer_child(p, 7, round ? 1 : 20);
		assert_int_equal(waitpid(a, &sa, 0), a);
		assert_int_equal(waitpid(b, &sb, 0), b);
		assert_true(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
		assert_true(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
		assert_int_equal(count_runs(p), round ? 2 : 40);
	}
}

static void sigkill_during_writes_leaves_a_valid_database(void **state)
{
	const char *p = path("killed.sqlite");
	struct timespec ts = {0, 2000000};
	fixture f;
	tc_cache_key key;
	tc_cache_hit hit;
	tc_cache *c;
	pid_t a;
	int st, n, i;
	(void)state;
	tc_cache_close(open_write(p));
	if ((a = fork()) == 0)
		writer_child(p, 9, -1);
	for (i = 0; i < 2000 && count_runs(p) < 30; i++) /* well into its writes */
		nanosleep(&ts, NULL);
	kill(a, SIGKILL);
	assert_int_equal(waitpid(a, &st, 0), a);
	assert_true(WIFSIGNALED(st));
	n = count_runs(p);
	assert_true(n >= 30);
	integrity_ok(p);
	/* and it is still usable: read and write */
	fx_init(&f, 9, 4, 6);
	key_of(&f, &key);
	c = open_write(p);
	assert_int_equal(tc_cache_lookup(c, &key, &hit), 1);
	tc_cache_hit_clear(&hit);
	record(c, &key, "", 0.5, 1);
	tc_cache_close(c);
	assert_int_equal(count_runs(p), n + 1);
	tc_cache_key_clear(&key);
	fx_fini(&f);
}

/* ---- damaged and foreign files ---- */

/* tc_compile with the cache at p: the defaults and a warning containing
 * what (no crash, no error). */
static void compile_falls_back(const char *p, const char *what)
{
	fixture f;
	tc_kernel *k;
	fx_init(&f, 64, 32, 48);
	assert_int_equal(tc_context_set_cache(f.ctx, p), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "default");
	if (!strstr(tc_context_warnings(f.ctx), what))
		fail_msg("warnings '%s' do not say '%s'", tc_context_warnings(f.ctx), what);
	assert_non_null(strstr(tc_context_warnings(f.ctx), "using the default options"));
	check_against_interp(&f, k);
	tc_kernel_free(k);
	/* once per context, however many compiles */
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	tc_kernel_free(k);
	fx_fini(&f);
}

/* A cache at p with n runs for 64x32,32x48. */
static void make_cache(const char *p, int n)
{
	fixture f;
	tc_cache_key key;
	tc_cache *c;
	int i;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(p);
	for (i = 0; i < n; i++) {
		char opts[64];
		snprintf(opts, sizeof(opts), "tile=%d,%d\nregtile=none", 1 + i % 97, 1 + i % 89);
		record(c, &key, opts, 1.0 + i, 1);
	}
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	fx_fini(&f);
	integrity_ok(p); /* and checkpointed: everything is in the main file */
}

static void write_bytes(const char *p, const void *data, size_t n, const char *mode)
{
	FILE *fp = fopen(p, mode);
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, n, fp), n);
	fclose(fp);
}

static void not_sqlite_gives_a_warning_and_defaults(void **state)
{
	const char *p = path("text.sqlite");
	char *msg = NULL;
	(void)state;
	write_bytes(p, "this is not a database\n", 23, "wb");
	assert_null(tc_cache_open(p, TC_CACHE_READ, &msg));
	assert_non_null(strstr(msg, "not an SQLite database"));
	tc_free(msg);
	/* writers do not take it over either */
	assert_null(tc_cache_open(p, TC_CACHE_WRITE, &msg));
	assert_non_null(strstr(msg, "not an SQLite database"));
	tc_free(msg);
	compile_falls_back(p, "not an SQLite database");
	/* a directory where the file should be */
	assert_int_equal(mkdir(path("dir.sqlite"), 0777), 0);
	compile_falls_back(path("dir.sqlite"), "not a regular file");
}

static void corrupt_file_gives_a_warning_and_defaults(void **state)
{
	const char *p = path("corrupt.sqlite");
	static char junk[8192];
	FILE *fp;
	(void)state;
	make_cache(p, 400);
	memset(junk, 0xA5, sizeof(junk));
	fp = fopen(p, "r+b");
	assert_non_null(fp);
	fseek(fp, 4096, SEEK_SET); /* past the header page: the tables' pages */
	fwrite(junk, 1, sizeof(junk), fp);
	fclose(fp);
	compile_falls_back(p, "corrupt.sqlite");
}

static void truncated_file_gives_a_warning_and_defaults(void **state)
{
	const char *p = path("truncated.sqlite");
	struct stat sb;
	(void)state;
	make_cache(p, 400);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(truncate(p, sb.st_size / 3), 0);
	compile_falls_back(p, "truncated.sqlite");
}

static void exec_sql(const char *p, const char *sql)
{
	sqlite3 *db;
	char *err = NULL;
	assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		fail_msg("%s: %s", sql, err);
	sqlite3_close(db);
}

static void newer_schema_is_not_used(void **state)
{
	const char *p = path("newer.sqlite");
	char *msg = NULL;
	(void)state;
	make_cache(p, 3);
	exec_sql(p, "UPDATE meta SET value = '99' WHERE name = 'schema_version'");
	assert_null(tc_cache_open(p, TC_CACHE_WRITE, &msg));
	assert_non_null(strstr(msg, "schema version 99"));
	assert_non_null(strstr(msg, "newer tcomp"));
	tc_free(msg);
	compile_falls_back(p, "schema version 99");
}

static void foreign_database_is_not_used(void **state)
{
	const char *p = path("foreign.sqlite");
	char *msg = NULL;
	(void)state;
	exec_sql(p, "CREATE TABLE photos(id INTEGER, name TEXT); INSERT INTO photos VALUES(1, 'x')");
	assert_null(tc_cache_open(p, TC_CACHE_WRITE, &msg));
	assert_non_null(strstr(msg, "not a tcomp kernel cache"));
	tc_free(msg);
	compile_falls_back(p, "not a tcomp kernel cache");
}

/* Whether the file at p holds exactly the bytes of want (size n). */
static int same_bytes(const char *p, const char *want, long n)
{
	FILE *fp = fopen(p, "rb");
	char *got;
	long m;
	int same;
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	m = ftell(fp);
	fclose(fp);
	if (m != n)
		return 0;
	got = slurp(p);
	same = memcmp(got, want, (size_t)n) == 0;
	free(got);
	return same;
}

/* Another program's SQLite file (in rollback-journal mode, as SQLite makes
 * it) is refused by every command that writes, before anything is written:
 * its bytes stay the same and no WAL file appears. */
static void foreign_sqlite_file_is_never_modified(void **state)
{
	const char *p = path("photos.sqlite");
	char *before;
	long n;
	FILE *fp;
	(void)state;
	exec_sql(p, "CREATE TABLE photos(id INTEGER, name TEXT); INSERT INTO photos VALUES(1, 'x')");
	before = slurp(p);
	fp = fopen(p, "rb");
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fclose(fp);
	fp = fopen(path("mm.tc"), "w");
	fputs(src, fp);
	fclose(fp);
	assert_int_equal(tcomp("cache import --cache photos.sqlite /dev/null"), 1);
	assert_non_null(strstr(out_text, "not a tcomp kernel cache"));
	assert_true(same_bytes(p, before, n));
	assert_int_equal(tcomp("cache prune --cache photos.sqlite"), 1);
	assert_non_null(strstr(out_text, "not a tcomp kernel cache"));
	assert_true(same_bytes(p, before, n));
	assert_int_equal(tcomp("autotune mm.tc -e scale --shape X=64 --generations 1 "
			       "--population 2 --final-candidates 0 --quiet --cache photos.sqlite"), 0);
	assert_non_null(strstr(out_text, "not a tcomp kernel cache"));
	assert_true(same_bytes(p, before, n));
	assert_false(exists(path("photos.sqlite-wal")));
	free(before);
}

/* A read-only cache file (chmod 0444; root honours it too) is read:
 * lookups and tc_compile use it, writes fail saying so, and its bytes stay
 * the same. */
static void read_only_cache_is_read(void **state)
{
	const char *p = path("ro.sqlite");
	fixture f;
	tc_cache_key key;
	tc_cache_hit hit;
	tc_cache *c;
	tc_kernel *k;
	char *before;
	long n;
	FILE *fp;
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(p);
	record(c, &key, TUNED, 1.0, 1);
	tc_cache_close(c);
	integrity_ok(p);
	assert_int_equal(chmod(p, 0444), 0);
	before = slurp(p);
	fp = fopen(p, "rb");
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fclose(fp);
	/* a writer opens it for reading */
	c = open_write(p);
	assert_int_equal(tc_cache_is_read_only(c), 1);
	memset(&hit, 0, sizeof(hit));
	assert_int_equal(tc_cache_lookup(c, &key, &hit), 1);
	assert_string_equal(tc_options_get(hit.options, "tile"), "16,16");
	tc_cache_hit_clear(&hit);
	{
		tc_cache_run run = {TUNED_FAR, 2.0, 1.9, "ro", 1};
		assert_int_equal(tc_cache_record(c, &key, &run), -1);
		assert_non_null(strstr(tc_cache_error(c), "read-only"));
	}
	tc_cache_close(c);
	/* tc_compile reads it */
	assert_int_equal(tc_context_set_cache(f.ctx, p), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "cache");
	assert_string_equal(tc_context_warnings(f.ctx), "");
	check_against_interp(&f, k);
	tc_kernel_free(k);
	/* the commands: reading works, writing says why it cannot */
	assert_int_equal(tcomp("cache list --cache ro.sqlite"), 0);
	assert_non_null(strstr(out_text, "64x32,32x48"));
	assert_int_equal(tcomp("cache import --cache ro.sqlite /dev/null"), 1);
	assert_non_null(strstr(out_text, "read-only"));
	assert_null(strstr(out_text, "damaged"));
	assert_true(same_bytes(p, before, n));
	free(before);
	tc_cache_key_clear(&key);
	fx_fini(&f);
}

static void invalid_options_in_a_row_are_skipped_with_a_warning(void **state)
{
	const char *p = path("bad.sqlite");
	fixture f;
	tc_cache_key key;
	tc_cache *c;
	tc_kernel *k;
	char *got, *want = canon(TUNED);
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(p);
	record(c, &key, TUNED, 2.0, 1);
	tc_cache_close(c);
	/* a faster row whose options do not parse (edited by hand, or an
	 * option this tcomp does not have) */
	exec_sql(p, "INSERT INTO runs(kernel_id, options, median_ms, min_ms, status, at) "
		    "SELECT kernel_id, 'tile=banana', 0.5, 0.5, 'ok', 0 FROM runs LIMIT 1;"
		    "INSERT INTO runs(kernel_id, options, median_ms, min_ms, status, at) "
		    "SELECT kernel_id, 'warp=9', 0.7, 0.7, 'ok', 0 FROM runs LIMIT 1");
	assert_int_equal(tc_context_set_cache(f.ctx, p), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "cache");
	got = tc_kernel_options(k);
	assert_string_equal(got, want);
	tc_string_free(got);
	assert_non_null(strstr(tc_context_warnings(f.ctx), "tile"));
	assert_non_null(strstr(tc_context_warnings(f.ctx), "warp"));
	assert_non_null(strstr(tc_context_warnings(f.ctx), "ignored"));
	tc_kernel_free(k);
	/* recording invalid options is refused */
	c = open_write(p);
	{
		tc_cache_run run = {"tile=banana", 1, 1, NULL, 1};
		assert_int_equal(tc_cache_record(c, &key, &run), -1);
		assert_non_null(strstr(tc_cache_error(c), "tile"));
	}
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	tc_string_free(want);
	fx_fini(&f);
}

/* A run recorded before an option existed (its text lacks it) still
 * counts as the defaults' run in list's speedup. */
static void list_finds_the_defaults_in_older_texts(void **state)
{
	const char *p = path("old.sqlite");
	fixture f;
	tc_cache_key key;
	tc_cache *c;
	tc_buf b;
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(p);
	record(c, &key, TUNED, 1.0, 1);
	tc_cache_close(c);
	exec_sql(p, "INSERT INTO runs(kernel_id, options, median_ms, min_ms, status, at) "
		    "SELECT kernel_id, 'target=cpu\norder=on', 3.0, 3.0, 'ok', 0 FROM runs LIMIT 1");
	c = open_write(p);
	tc_buf_init(&b);
	assert_int_equal(tc_cache_list(c, &b), 0);
	if (!strstr(b.s, "3.00x"))
		fail_msg("no 3.00x speedup in:\n%s", b.s);
	tc_buf_free(&b);
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	fx_fini(&f);
}

static void record_id(tc_cache *c, const tc_cache_key *key, const char *opts, double ms,
	const char *run_id)
{
	tc_cache_run run = {opts, ms, ms * 0.9, run_id, 1};
	if (tc_cache_record(c, key, &run) < 0)
		fail_msg("record: %s", tc_cache_error(c));
}

static void the_final_stages_choice_is_the_best(void **state)
{
	const char *p = path("chosen.sqlite");
	fixture f;
	tc_cache_key key;
	tc_cache_hit hit;
	tc_cache *c;
	tc_buf b;
	char **texts, *tuned = canon(TUNED), *fast = canon("tile=8,8");
	int n, i, removed;
	tc_cache_prune_opts po;
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(p);
	/* a search: the defaults 2 ms, a lucky 0.5 ms, TUNED 1.0 ms */
	record_id(c, &key, "", 2.0, "tune-1-1");
	record_id(c, &key, "tile=8,8", 0.5, "tune-1-1");
	record_id(c, &key, TUNED, 1.0, "tune-1-1");
	assert_int_equal(tc_cache_lookup(c, &key, &hit), 1);
	assert_string_equal(hit.text, fast); /* no choice yet: the least median */
	tc_cache_hit_clear(&hit);
	/* its final stage: the lucky one is 1.6 ms now, TUNED 1.1 ms and chosen */
	record_id(c, &key, "", 1.5, "tune-1-1" TC_CACHE_FINAL);
	record_id(c, &key, "tile=8,8", 1.6, "tune-1-1" TC_CACHE_FINAL);
	record_id(c, &key, TUNED, 1.1, "tune-1-1" TC_CACHE_CHOSEN);
	/* a later search without a final stage finds something faster still */
	record_id(c, &key, "tile=4,4", 0.3, "tune-2-2");
	assert_int_equal(tc_cache_lookup(c, &key, &hit), 1);
	assert_string_equal(hit.text, tuned);
	assert_true(hit.median_ms == 1.1);
	tc_cache_hit_clear(&hit);
	/* the choice is the first seed */
	assert_int_equal(tc_cache_seeds(c, &key, 10, &texts, &n), 0);
	assert_int_equal(n, 4);
	assert_string_equal(texts[0], tuned);
	for (i = 0; i < n; i++)
		tc_free(texts[i]);
	tc_free(texts);
	/* list: the choice's median, and the defaults' final re-timing */
	tc_buf_init(&b);
	assert_int_equal(tc_cache_list(c, &b), 0);
	if (!strstr(b.s, "       1.1        1.5    1.36x"))
		fail_msg("no 1.1 ms best, 1.5 ms defaults in:\n%s", b.s);
	tc_buf_free(&b);
	/* show puts it first */
	tc_buf_init(&b);
	assert_int_equal(tc_cache_show(c, "mm", &b), 1);
	assert_non_null(strstr(b.s, "runs (best first):\n    #6 "));
	assert_non_null(strstr(b.s, "run tune-1-1/chosen"));
	tc_buf_free(&b);
	/* prune --keep-best keeps it (and the defaults' final re-timing) */
	memset(&po, 0, sizeof(po));
	po.all_but_best = 1;
	assert_int_equal(tc_cache_prune(c, &po, &removed), 0);
	assert_int_equal(removed, 5);
	assert_int_equal(tc_cache_lookup(c, &key, &hit), 1);
	assert_string_equal(hit.text, tuned);
	tc_cache_hit_clear(&hit);
	tc_buf_init(&b);
	assert_int_equal(tc_cache_list(c, &b), 0);
	assert_non_null(strstr(b.s, "    1.36x     2      0"));
	tc_buf_free(&b);
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	tc_string_free(tuned);
	tc_string_free(fast);
	fx_fini(&f);
}

/* ---- stored object code ---- */

/* A cache at p with TUNED recorded for f's shapes, and its object code. */
static void cache_with_object(fixture *f, const char *p)
{
	tc_cache_key key;
	tc_cache *c;
	key_of(f, &key);
	c = open_write(p);
	record(c, &key, "", 2.0, 1);
	record(c, &key, TUNED, 1.0, 1);
	if (tc_cache_store_object(c, &key, f->m, f->in, 2, TUNED) < 0)
		fail_msg("store_object: %s", tc_cache_error(c));
	tc_cache_close(c);
	tc_cache_key_clear(&key);
}

/* Compile mm in a fresh context reading cache p; whether LLVM was skipped. */
static int compile_fresh(const char *p, const char *warning)
{
	fixture f;
	tc_kernel *k;
	char *got, *want = canon(TUNED);
	int from;
	fx_init(&f, 64, 32, 48);
	assert_int_equal(tc_context_set_cache(f.ctx, p), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "cache");
	got = tc_kernel_options(k);
	assert_string_equal(got, want);
	from = k->c->from_object;
	check_against_interp(&f, k);
	if (warning && !strstr(tc_context_warnings(f.ctx), warning))
		fail_msg("warnings '%s' do not say '%s'", tc_context_warnings(f.ctx), warning);
	if (!warning)
		assert_string_equal(tc_context_warnings(f.ctx), "");
	tc_string_free(got);
	tc_string_free(want);
	tc_kernel_free(k);
	fx_fini(&f);
	return from;
}

static void stored_object_code_skips_llvm(void **state)
{
	const char *p = path("obj.sqlite");
	fixture f;
	(void)state;
	fx_init(&f, 64, 32, 48);
	cache_with_object(&f, p);
	fx_fini(&f);
	assert_int_equal(compile_fresh(p, NULL), 1);
	/* another LLVM's or tcomp's object: compiled from the options, quietly */
	exec_sql(p, "UPDATE objects SET llvm_version = '1.0.0'");
	assert_int_equal(compile_fresh(p, NULL), 0);
	exec_sql(p, "UPDATE objects SET llvm_version = '0', tcomp_version = '0.0.1'");
	assert_int_equal(compile_fresh(p, NULL), 0);
}

static void damaged_object_code_is_compiled_again(void **state)
{
	const char *p = path("obj.sqlite");
	fixture f;
	(void)state;
	fx_init(&f, 64, 32, 48);
	cache_with_object(&f, p);
	fx_fini(&f);
	/* one byte of the code changed */
	exec_sql(p, "UPDATE objects SET code = substr(code, 1, 100) || x'5a' || "
		    "substr(code, 102)");
	assert_int_equal(compile_fresh(p, "fails its checksum"), 0);
	/* garbage that passes the checksum is not possible without the
	 * checksum; a truncated blob fails it too */
	exec_sql(p, "UPDATE objects SET code = substr(code, 1, 64)");
	assert_int_equal(compile_fresh(p, "fails its checksum"), 0);
}

static void object_loaded_twice_in_a_context_compiles_the_second(void **state)
{
	const char *p = path("obj.sqlite");
	fixture f;
	tc_module *m2;
	tc_kernel *k1, *k2;
	(void)state;
	fx_init(&f, 64, 32, 48);
	cache_with_object(&f, p);
	assert_int_equal(tc_context_set_cache(f.ctx, p), 0);
	m2 = tc_module_parse(f.ctx, src, "again.tc");
	assert_non_null(m2);
	k1 = tc_compile(f.m, "mm", f.in, 2, NULL);
	k2 = tc_compile(m2, "mm", f.in, 2, NULL);
	assert_non_null(k1);
	assert_non_null(k2);
	assert_int_equal(k1->c->from_object, 1);
	assert_int_equal(k2->c->from_object, 0);
	check_against_interp(&f, k1);
	check_against_interp(&f, k2);
	tc_kernel_free(k1);
	tc_kernel_free(k2);
	tc_module_free(m2);
	fx_fini(&f);
}

/* An object's run-time checks report locations in the source it is loaded
 * for: the same def text further down another file. */
static void object_check_sites_follow_the_def(void **state)
{
	static const char g1[] = "def g(float(N) X, int32(M) I) -> (Y) { Y(i) = X(I(i)) }\n";
	static const char g2[] = "# the same gather, lower down\n\n\n"
				 "def g(float(N) X, int32(M) I) -> (Y) { Y(i) = X(I(i)) }\n";
	int64_t sx[1] = {5}, si[1] = {4};
	tu_tensor x, idx, y;
	const DLTensor *in[2];
	DLTensor *out[1];
	tc_context *ctx = tc_context_new();
	tc_module *m1 = tc_module_parse(ctx, g1, "g1.tc"), *m2;
	tc_cache_key key;
	tc_cache *c;
	tc_kernel *k;
	int i;
	(void)state;
	assert_non_null(m1);
	tu_tensor_init(&x, TU_F32, sx, 1);
	tu_tensor_init(&idx, TU_I32, si, 1);
	tu_tensor_init(&y, TU_F32, si, 1);
	for (i = 0; i < 5; i++)
		((float *)x.data)[i] = 0.5f + (float)i;
	for (i = 0; i < 4; i++)
		((int32_t *)idx.data)[i] = 4 - i;
	in[0] = &x.dl;
	in[1] = &idx.dl;
	out[0] = &y.dl;
	assert_int_equal(tc_cache_key_init(&key, m1, "g", in, 2), 0);
	c = open_write(path("g.sqlite"));
	record(c, &key, "", 1.0, 1);
	if (tc_cache_store_object(c, &key, m1, in, 2, "") < 0)
		fail_msg("%s", tc_cache_error(c));
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	tc_module_free(m1);
	tc_context_free(ctx);

	ctx = tc_context_new();
	assert_int_equal(tc_context_set_cache(ctx, path("g.sqlite")), 0);
	m2 = tc_module_parse(ctx, g2, "g2.tc");
	k = tc_compile(m2, "g", in, 2, NULL);
	assert_non_null(k);
	assert_int_equal(k->c->from_object, 1);
	assert_int_equal(tc_kernel_run(k, in, 2, out, 1), 0);
	for (i = 0; i < 4; i++)
		assert_true(((float *)y.data)[i] == 0.5f + (float)(4 - i));
	((int32_t *)idx.data)[2] = 7; /* out of bounds */
	assert_int_equal(tc_kernel_run(k, in, 2, out, 1), -1);
	if (!strstr(tc_context_error(ctx), "g2.tc:4:47"))
		fail_msg("error '%s' is not located at g2.tc:4:47", tc_context_error(ctx));
	assert_non_null(strstr(tc_context_error(ctx), "index 7 is out of bounds"));
	tc_kernel_free(k);
	tc_module_free(m2);
	tc_context_free(ctx);
	tu_tensor_fini(&x);
	tu_tensor_fini(&idx);
	tu_tensor_fini(&y);
}

/* An entry that sets options changing results (fastmath=on, target=interp)
 * gives tc_compile its speed options only, with a note, unless the context
 * allows them; tcomp bench says the same and takes them with
 * --cache-result-options. */
static void cached_result_changing_options_need_consent(void **state)
{
	fixture f, g;
	tc_cache_key key;
	tc_cache *c;
	tc_kernel *k;
	char *got;
	const char *w;
	FILE *fp;
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(path("r.sqlite"));
	record(c, &key, TUNED "fastmath=on\ntarget=interp\n", 1.0, 1);
	tc_cache_close(c);
	assert_int_equal(tc_context_set_cache(f.ctx, path("r.sqlite")), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "cache");
	got = tc_kernel_options(k);
	assert_non_null(strstr(got, "tile=16,16\n"));      /* the speed options are taken */
	assert_non_null(strstr(got, "fastmath=off\n"));    /* the others are not */
	assert_non_null(strstr(got, "target=cpu\n"));
	tc_string_free(got);
	w = tc_context_warnings(f.ctx);
	if (!strstr(w, "sets target=interp, fastmath=on, which change results: not applied"))
		fail_msg("warnings: %s", w);
	check_against_interp(&f, k);
	tc_kernel_free(k);
	/* allowed: taken as they are */
	fx_init(&g, 64, 32, 48);
	assert_int_equal(tc_context_set_cache(g.ctx, path("r.sqlite")), 0);
	assert_int_equal(tc_context_set_cache_result_options(g.ctx, 1), 0);
	k = tc_compile(g.m, "mm", g.in, 2, NULL);
	assert_non_null(k);
	got = tc_kernel_options(k);
	assert_non_null(strstr(got, "fastmath=on\n"));
	assert_non_null(strstr(got, "target=interp\n"));
	tc_string_free(got);
	assert_string_equal(tc_context_warnings(g.ctx), "");
	check_against_interp(&g, k);
	tc_kernel_free(k);
	/* the command line */
	fp = fopen(path("k.tc"), "w");
	fputs(src, fp);
	fclose(fp);
	assert_int_equal(tcomp("bench k.tc -e mm --shape A=64x32 --shape B=32x48 --runs 1 "
			       "--warmup 0 --min-time 0 --cache r.sqlite"), 0);
	assert_non_null(strstr(out_text, "which change results: not applied"));
	assert_non_null(strstr(out_text, "fastmath=off"));
	assert_int_equal(tcomp("bench k.tc -e mm --shape A=64x32 --shape B=32x48 --runs 1 "
			       "--warmup 0 --min-time 0 --cache r.sqlite --threads 1"), 0);
	assert_non_null(strstr(out_text, "which change results: not applied"));
	assert_non_null(strstr(out_text, "fastmath=off"));
	assert_int_equal(tcomp("bench k.tc -e mm --shape A=64x32 --shape B=32x48 --runs 1 "
			       "--warmup 0 --min-time 0 --cache r.sqlite --cache-result-options"), 0);
	assert_null(strstr(out_text, "not applied"));
	assert_non_null(strstr(out_text, "fastmath=on"));
	tc_cache_key_clear(&key);
	fx_fini(&f);
	fx_fini(&g);
}

/* An entry tuned on another CPU of the same architecture (same triple,
 * another CPU name and features) is used when this CPU has none, as a
 * nearest entry with a note (source cache-other-cpu, no object code); one
 * of another architecture is not. */
static void entry_of_another_cpu_is_shared(void **state)
{
	fixture f, g;
	tc_cache_key key;
	tc_cache *c;
	tc_kernel *k;
	char *got, *want = canon(TUNED), *triple_end, other[256];
	char *mine;
	FILE *fp;
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	mine = key.target;
	triple_end = strchr(mine, ';');
	assert_non_null(triple_end);
	snprintf(other, sizeof(other), "%.*s;othercpu;+sse2,-avx512f", (int)(triple_end - mine),
		mine);
	key.target = other;
	c = open_write(path("o.sqlite"));
	record(c, &key, TUNED, 1.0, 1);
	key.target = (char *)"riscv64-unknown-linux-gnu;generic;+m"; /* another architecture */
	record(c, &key, TUNED_FAR, 0.5, 1);
	tc_cache_close(c);
	key.target = mine;
	assert_int_equal(tc_context_set_cache(f.ctx, path("o.sqlite")), 0);
	k = tc_compile(f.m, "mm", f.in, 2, NULL);
	assert_non_null(k);
	assert_string_equal(tc_kernel_options_source(k), "cache-other-cpu");
	got = tc_kernel_options(k);
	assert_string_equal(got, want);
	tc_string_free(got);
	if (!strstr(tc_context_warnings(f.ctx), "tuned on another CPU of this architecture "
						 "(othercpu)"))
		fail_msg("warnings: %s", tc_context_warnings(f.ctx));
	check_against_interp(&f, k);
	tc_kernel_free(k);
	/* the command says so */
	fp = fopen(path("k.tc"), "w");
	fputs(src, fp);
	fclose(fp);
	assert_int_equal(tcomp("bench k.tc -e mm --shape A=64x32 --shape B=32x48 --runs 1 "
			       "--warmup 0 --min-time 0 --cache o.sqlite --json"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"cache-other-cpu\""));
	assert_non_null(strstr(out_text, "note: kernel cache"));
	assert_non_null(strstr(out_text, "tuned on another CPU of this architecture (othercpu)"));
	/* other shapes of it too; an entry of this CPU wins over it */
	fx_init(&g, 16, 8, 4);
	assert_int_equal(tc_context_set_cache(g.ctx, path("o.sqlite")), 0);
	k = tc_compile(g.m, "mm", g.in, 2, NULL);
	assert_string_equal(tc_kernel_options_source(k), "cache-other-cpu");
	tc_kernel_free(k);
	c = open_write(path("o.sqlite"));
	record(c, &key, "", 3.0, 1);
	tc_cache_close(c);
	tc_module_free(g.m);
	g.m = tc_module_parse(g.ctx, src, "cache.tc");
	k = tc_compile(g.m, "mm", g.in, 2, NULL);
	assert_string_equal(tc_kernel_options_source(k), "cache-near");
	tc_kernel_free(k);
	tc_free(want);
	tc_cache_key_clear(&key);
	fx_fini(&f);
	fx_fini(&g);
}

/* ---- the tcomp command ---- */

static void cli_export_import_round_trip(void **state)
{
	fixture f, g;
	tc_cache_key k1, k2;
	tc_cache *c;
	char *e1, *e2;
	FILE *fp;
	(void)state;
	fx_init(&f, 64, 32, 48);
	fx_init(&g, 16, 8, 4);
	key_of(&f, &k1);
	key_of(&g, &k2);
	c = open_write(path("a.sqlite"));
	record(c, &k1, "", 4.0, 1);
	record(c, &k1, TUNED, 1.0, 1);
	record(c, &k1, "tile=none", 0, 0);
	record(c, &k2, TUNED_FAR, 0.25, 1);
	tc_cache_close(c);
	assert_int_equal(tcomp("cache export --cache a.sqlite -o a.jsonl"), 0);
	assert_int_equal(tcomp("cache import --cache b/b.sqlite a.jsonl"), 0);
	assert_non_null(strstr(out_text, "4 runs added, 0 already present, 0 lines skipped"));
	/* importing again adds nothing */
	assert_int_equal(tcomp("cache import --cache b/b.sqlite - < a.jsonl"), 0);
	assert_non_null(strstr(out_text, "0 runs added, 4 already present, 0 lines skipped"));
	assert_int_equal(tcomp("cache export --cache b/b.sqlite -o b.jsonl"), 0);
	e1 = slurp(path("a.jsonl"));
	e2 = slurp(path("b.jsonl"));
	assert_string_equal(e1, e2);
	assert_non_null(strstr(e1, "\"status\":\"failed\""));
	free(e1);
	free(e2);
	/* list: best, defaults and speedup */
	assert_int_equal(tcomp("cache list --cache b/b.sqlite"), 0);
	assert_non_null(strstr(out_text, "64x32,32x48"));
	assert_non_null(strstr(out_text, "4.00x"));
	assert_int_equal(tcomp("cache show mm@16x8,8x4 --cache b/b.sqlite"), 0);
	assert_non_null(strstr(out_text, "tile=none; regtile=2,8"));
	assert_int_equal(tcomp("cache show nothing --cache b/b.sqlite"), 1);
	/* a bad line and a line with invalid options are skipped with warnings */
	fp = fopen(path("bad.jsonl"), "w");
	fputs("not json\n", fp);
	e1 = slurp(path("a.jsonl"));
	*strchr(e1, '\n') = 0;
	{
		char *o = strstr(e1, "\"options\":\"");
		assert_non_null(o);
		memcpy(o + 11, "tile=x", 6);
	}
	fprintf(fp, "%s\n", e1);
	fclose(fp);
	free(e1);
	assert_int_equal(tcomp("cache import --cache b/b.sqlite bad.jsonl"), 1);
	assert_non_null(strstr(out_text, "tcomp: error: 2 lines were skipped"));
	assert_non_null(strstr(out_text, "0 runs added, 0 already present, 2 lines skipped"));
	assert_non_null(strstr(out_text, "line 1: not a JSON object"));
	assert_non_null(strstr(out_text, "line 2: invalid options"));
	/* prune: failed runs and runs of other versions by default */
	assert_int_equal(tcomp("cache prune --cache b/b.sqlite"), 0);
	assert_non_null(strstr(out_text, "1 run removed"));
	assert_int_equal(count_runs(path("b/b.sqlite")), 3);
	assert_int_equal(tcomp("cache prune --keep-best --cache b/b.sqlite"), 0);
	assert_int_equal(count_runs(path("b/b.sqlite")), 3); /* best and defaults kept */
	/* reading commands never create a file */
	assert_int_equal(tcomp("cache list --cache none.sqlite"), 0);
	assert_non_null(strstr(out_text, "no kernel cache at"));
	assert_int_equal(tcomp("cache export --cache none.sqlite"), 0);
	assert_int_equal(tcomp("cache show --cache none.sqlite"), 0);
	assert_int_equal(tcomp("cache prune --cache none.sqlite"), 0);
	assert_false(exists(path("none.sqlite")));
	assert_int_equal(tcomp("cache list --cache bad.jsonl"), 1);
	assert_non_null(strstr(out_text, "not an SQLite database"));
	tc_cache_key_clear(&k1);
	tc_cache_key_clear(&k2);
	fx_fini(&f);
	fx_fini(&g);
}

/* line with the value of "field" (a string, or with num a number)
 * replaced by value, into out. */
static void with_field(char *out, size_t size, const char *line, const char *field,
	const char *value, int num)
{
	char pat[64];
	const char *a, *e;
	snprintf(pat, sizeof(pat), "\"%s\":", field);
	a = strstr(line, pat);
	assert_non_null(a);
	a += strlen(pat);
	if (*a == '"') {
		for (e = a + 1; *e != '"'; e++)
			if (*e == '\\')
				e++;
		e++;
	} else
		e = a + strcspn(a, ",}");
	snprintf(out, size, "%.*s%s%s%s%s", (int)(a - line), line, num ? "" : "\"", value,
		num ? "" : "\"", e);
}

/* tcomp cache import checks every field of the key and the run: each
 * malformed field skips its line with a warning that says what is wrong,
 * the exit status is 1 and the summary counts the skipped lines; nothing
 * of them reaches the file. */
static void import_refuses_malformed_fields(void **state)
{
	static const struct {
		const char *field, *value, *says;
		int num;
	} bad[] = {
		{"shapes", "0x0,0x0", "extents of at least 1", 0},
		{"shapes", "64x32,32x48x2", "rank 3", 0},
		{"shapes", "64x32", "as many shapes", 0},
		{"shapes", "64x032,32x48", "extents of at least 1", 0},
		{"types", "float99/2,float32/2", "unknown dtype \"float99\"", 0},
		{"types", "float/2,float32/2", "unknown dtype", 0},
		{"types", "float32/9,float32/2", "DTYPE/RANK", 0},
		{"strides", "1x64,48x1", "compact row-major", 0},
		{"entry", "mm; drop", "not a def name", 0},
		{"target", "x86_64", "TRIPLE;CPU;FEATURES", 0},
		{"version", "latest", "N.N.N", 0},
		{"median_ms", "-1", "median_ms", 1},
		{"min_ms", "5", "min_ms at most median_ms", 1},
		{"at", "-5", "Unix seconds", 1},
		{"status", "great", "neither ok nor failed", 0},
		{"median_ms", "\"1.5abc\"", "\"median_ms\" is not a number", 1},
		{"at", "\"nan\"", "Unix seconds", 1},
	};
	fixture f;
	tc_cache_key key;
	tc_cache *c;
	char *good, line[16384];
	FILE *fp;
	size_t i;
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(path("src.sqlite"));
	record(c, &key, TUNED, 2.0, 1);
	tc_cache_close(c);
	assert_int_equal(tcomp("cache export --cache src.sqlite -o good.jsonl"), 0);
	good = slurp(path("good.jsonl"));
	*strchr(good, '\n') = 0;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		with_field(line, sizeof(line), good, bad[i].field, bad[i].value, bad[i].num);
		fp = fopen(path("bad.jsonl"), "w");
		fprintf(fp, "%s\n", line);
		fclose(fp);
		assert_int_equal(tcomp("cache import --cache dst.sqlite bad.jsonl"), 1);
		if (!strstr(out_text, "0 runs added, 0 already present, 1 line skipped") ||
			!strstr(out_text, "line 1: ") || !strstr(out_text, bad[i].says))
			fail_msg("%s=%s: %s", bad[i].field, bad[i].value, out_text);
	}
	assert_int_equal(count_runs(path("dst.sqlite")), 0);
	/* the line itself is accepted */
	assert_int_equal(tcomp("cache import --cache dst.sqlite good.jsonl"), 0);
	assert_non_null(strstr(out_text, "1 run added"));
	assert_int_equal(count_runs(path("dst.sqlite")), 1);
	free(good);
	tc_cache_key_clear(&key);
	fx_fini(&f);
}

static void cli_bench_and_run_report_the_source(void **state)
{
	fixture f;
	tc_cache_key key;
	tc_cache *c;
	FILE *fp;
	(void)state;
	fx_init(&f, 64, 32, 48);
	key_of(&f, &key);
	c = open_write(path("k.sqlite"));
	record(c, &key, TUNED, 1.0, 1);
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	fp = fopen(path("k.tc"), "w");
	fputs(src, fp);
	fclose(fp);
#define BENCH "bench k.tc -e mm --runs 1 --warmup 0 --min-time 0 --json "
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --cache k.sqlite"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"cache\""));
	assert_non_null(strstr(out_text, "tile=16,16;"));
	assert_int_equal(tcomp(BENCH "--shape A=50x32 --shape B=32x48 --cache k.sqlite"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"cache-near\""));
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --no-cache"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"default\""));
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --cache k.sqlite "
				     "--option tile=none"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"file\""));
	/* --threads N alone still reads the cache: its entry with N threads ... */
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --cache k.sqlite "
				     "--threads 2"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"cache+threads\""));
	assert_non_null(strstr(out_text, "threads=2;"));
	assert_non_null(strstr(out_text, "tile=16,16;"));
	assert_int_equal(tcomp(BENCH "--shape A=50x32 --shape B=32x48 --cache k.sqlite "
				     "--threads 2"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"cache-near+threads\""));
	assert_non_null(strstr(out_text, "tile=16,16;"));
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --no-cache --threads 2"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"default+threads\""));
	assert_non_null(strstr(out_text, "threads=2;"));
	assert_int_equal(tcomp("bench k.tc -e mm --runs 1 --warmup 0 --min-time 0 --shape A=64x32 "
			       "--shape B=32x48 --cache k.sqlite --threads 2"), 0);
	assert_non_null(strstr(out_text, "(kernel cache, with the threads given)"));
	/* ... as it is when tuned for N threads; --option threads=N is a file's */
	key_of(&f, &key);
	c = open_write(path("k.sqlite"));
	record(c, &key, TUNED "threads=2\n", 0.5, 1);
	tc_cache_close(c);
	tc_cache_key_clear(&key);
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --cache k.sqlite "
				     "--threads 2"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"cache\""));
	assert_non_null(strstr(out_text, "threads=2;"));
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --cache k.sqlite "
				     "--threads 1"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"cache+threads\""));
	assert_non_null(strstr(out_text, "threads=1;"));
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --cache k.sqlite "
				     "--option threads=2"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"file\""));
	assert_non_null(strstr(out_text, "tile=auto;")); /* no cache: the defaults */
	/* $TCOMP_CACHE is the default location */
	assert_int_equal(tcomp("bench k.tc -e mm --runs 1 --warmup 0 --min-time 0 "
			       "--shape A=64x32 --shape B=32x48 --json"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"default\""));
	setenv("TCOMP_CACHE", path("k.sqlite"), 1);
	assert_int_equal(tcomp("bench k.tc -e mm --runs 1 --warmup 0 --min-time 0 "
			       "--shape A=64x32 --shape B=32x48 --json"), 0);
	setenv("TCOMP_CACHE", path("no-kernel-cache.sqlite"), 1);
	assert_non_null(strstr(out_text, "\"source\":\"cache\""));
	/* a damaged cache: a warning on stderr, the defaults, exit 0 */
	fp = fopen(path("junk.sqlite"), "w");
	fputs("junk junk junk junk junk", fp);
	fclose(fp);
	assert_int_equal(tcomp(BENCH "--shape A=64x32 --shape B=32x48 --cache junk.sqlite"), 0);
	assert_non_null(strstr(out_text, "\"source\":\"default\""));
	assert_non_null(strstr(out_text, "warning: 'junk.sqlite' is not an SQLite database"));
	fx_fini(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(record_then_lookup_exact_and_near, setup, teardown),
		cmocka_unit_test_setup_teardown(export_after_gives_each_new_run_once, setup, teardown),
		cmocka_unit_test_setup_teardown(renamed_kernel_shares_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(reading_never_creates_a_file, setup, teardown),
		cmocka_unit_test_setup_teardown(compile_uses_exact_then_near_then_defaults, setup,
			teardown),
		cmocka_unit_test_setup_teardown(env_variable_gives_the_default_path, setup, teardown),
		cmocka_unit_test_setup_teardown(two_processes_write_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(two_processes_create_the_file_at_once, setup,
			teardown),
		cmocka_unit_test_setup_teardown(sigkill_during_writes_leaves_a_valid_database, setup,
			teardown),
		cmocka_unit_test_setup_teardown(not_sqlite_gives_a_warning_and_defaults, setup,
			teardown),
		cmocka_unit_test_setup_teardown(corrupt_file_gives_a_warning_and_defaults, setup,
			teardown),
		cmocka_unit_test_setup_teardown(truncated_file_gives_a_warning_and_defaults, setup,
			teardown),
		cmocka_unit_test_setup_teardown(newer_schema_is_not_used, setup, teardown),
		cmocka_unit_test_setup_teardown(foreign_database_is_not_used, setup, teardown),
		cmocka_unit_test_setup_teardown(foreign_sqlite_file_is_never_modified, setup,
			teardown),
		cmocka_unit_test_setup_teardown(read_only_cache_is_read, setup, teardown),
		cmocka_unit_test_setup_teardown(invalid_options_in_a_row_are_skipped_with_a_warning,
			setup, teardown),
		cmocka_unit_test_setup_teardown(the_final_stages_choice_is_the_best, setup, teardown),
		cmocka_unit_test_setup_teardown(list_finds_the_defaults_in_older_texts, setup,
			teardown),
		cmocka_unit_test_setup_teardown(stored_object_code_skips_llvm, setup, teardown),
		cmocka_unit_test_setup_teardown(damaged_object_code_is_compiled_again, setup,
			teardown),
		cmocka_unit_test_setup_teardown(object_loaded_twice_in_a_context_compiles_the_second,
			setup, teardown),
		cmocka_unit_test_setup_teardown(object_check_sites_follow_the_def, setup, teardown),
		cmocka_unit_test_setup_teardown(cli_export_import_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(import_refuses_malformed_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(cached_result_changing_options_need_consent, setup,
			teardown),
		cmocka_unit_test_setup_teardown(entry_of_another_cpu_is_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(cli_bench_and_run_report_the_source, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
