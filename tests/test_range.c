/* Range inference (docs/language.md, "Range inference") through the library
 * internals: programs are parsed and checked with tc_parse + tc_sema_check,
 * inferred extents and index ranges are compared as printed size
 * expressions (tc_sx_print with the def's size names) and evaluated at
 * concrete sizes (tc_sx_eval), and the conditions left for run time are
 * exercised with tc_ir_lower + tc_ir_bind on concrete shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir/ir.h"
#include "lang/ast.h"
#include "lang/diag.h"

/* ---- helpers ---- */

/* A parsed and checked source. */
typedef struct checked {
	tc_arena *ar;
	tc_source *src;
	tc_diags d;
	tc_program *prog;
	int ok; /* no errors */
	char *errors; /* rendered diagnostics (malloc'ed by the library) */
} checked;

static void check_source(checked *c, const char *text)
{
	tc_buf b;
	memset(c, 0, sizeof(*c));
	c->ar = tc_arena_new();
	c->src = tc_source_new("t.tc", text, strlen(text));
	assert_non_null(c->ar);
	assert_non_null(c->src);
	tc_diags_init(&c->d, c->src);
	c->prog = tc_parse(c->ar, c->src, &c->d);
	assert_non_null(c->prog);
	if (!c->d.nerrors)
		tc_sema_check(c->prog, &c->d);
	c->ok = c->d.nerrors == 0;
	tc_buf_init(&b);
	tc_diags_render(&c->d, 1u << TC_SEV_ERROR | 1u << TC_SEV_WARNING, &b);
	c->errors = tc_buf_take(&b);
	assert_non_null(c->errors);
}

static void checked_free(checked *c)
{
	tc_free(c->errors);
	tc_diags_clear(&c->d);
	tc_arena_free(c->ar);
	tc_source_free(c->src);
}

/* Check text that must be accepted; print the diagnostics if it is not. */
static void check_ok(checked *c, const char *text)
{
	check_source(c, text);
	if (!c->ok)
		fail_msg("unexpected errors:\n%s", c->errors);
}

/* Check text that must be rejected with an error containing what. */
static void check_error(checked *c, const char *text, const char *what)
{
	check_source(c, text);
	if (c->ok)
		fail_msg("accepted, but an error containing \"%s\" was expected", what);
	if (!strstr(c->errors, what))
		fail_msg("expected an error containing \"%s\" but got:\n%s", what, c->errors);
}

static const tc_def *def_named(const checked *c, const char *name)
{
	const tc_def *def = tc_program_find(c->prog, name);
	assert_non_null(def);
	return def;
}

static int tensor_id(const tc_def *def, const char *name)
{
	int i;
	for (i = 0; i < def->ntensors; i++)
		if (!strcmp(def->tensors[i].name, name))
			return i;
	fail_msg("no tensor '%s' in '%s'", name, def->name);
	return -1;
}

static const char *print_sx(const tc_def *def, const tc_sexpr *e, char *buf, size_t n)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_sx_print(e, def->sizes, NULL, &b);
	assert_non_null(b.s);
	snprintf(buf, n, "%s", b.s);
	tc_buf_free(&b);
	return buf;
}

/* Dimension dim of tensor name is printed as want. */
static void assert_extent(const tc_def *def, const char *name, int dim, const char *want)
{
	const tc_tensor_info *t = &def->tensors[tensor_id(def, name)];
	char buf[256];
	assert_true(dim < t->ndim);
	assert_non_null(t->ext);
	assert_string_equal(print_sx(def, t->ext[dim], buf, sizeof(buf)), want);
}

static const tc_stmt_var *var_named(const tc_def *def, int stmt, const char *name)
{
	const tc_stmt *s = def->stmts[stmt];
	int v;
	for (v = 0; v < s->nvars; v++)
		if (!strcmp(s->vars[v].name, name))
			return &s->vars[v];
	fail_msg("no index '%s' in statement %d of '%s'", name, stmt, def->name);
	return NULL;
}

/* The range of an index of statement stmt is printed as "[lo, hi)". */
static void assert_range(const tc_def *def, int stmt, const char *var, const char *want)
{
	const tc_stmt_var *v = var_named(def, stmt, var);
	char lo[128], hi[128], got[300];
	print_sx(def, v->lo, lo, sizeof(lo));
	print_sx(def, v->hi, hi, sizeof(hi));
	snprintf(got, sizeof(got), "[%s, %s)", lo, hi);
	assert_string_equal(got, want);
}

/* Parameter values by name: "H=10 KH=3". */
static void set_sizes(const tc_def *def, int64_t *params, const char *spec)
{
	char name[64];
	long long v;
	int n, i;
	for (i = 0; i < def->nsizes; i++)
		params[i] = -1;
	while (sscanf(spec, " %63[A-Za-z0-9_]=%lld%n", name, &v, &n) == 2) {
		for (i = 0; i < def->nsizes && strcmp(def->sizes[i], name); i++)
			;
		if (i == def->nsizes)
			fail_msg("no size '%s' in '%s'", name, def->name);
		params[i] = v;
		spec += n;
	}
}

static int64_t eval_sx(const tc_sexpr *e, const int64_t *params)
{
	int64_t v = 0;
	assert_int_equal(tc_sx_eval(e, params, NULL, &v), TC_OK);
	return v;
}

static int64_t eval_extent(const tc_def *def, const char *name, int dim, const char *sizes)
{
	int64_t params[16];
	assert_true(def->nsizes <= 16);
	set_sizes(def, params, sizes);
	return eval_sx(def->tensors[tensor_id(def, name)].ext[dim], params);
}

/* Lower def and bind it to inputs of the given shapes (all of the inputs'
 * declared dtypes); returns the status, the rendered errors in *msg
 * (malloc'ed by the library, may be "") and the size values in params. */
static tc_stat bind_shapes(const checked *c, const tc_def *def, const int64_t shapes[][4],
	int64_t *params, char **msg)
{
	tc_ir_func *f = tc_ir_lower(c->ar, def, c->src);
	tc_tensor in[8];
	tc_diags d;
	tc_buf b;
	tc_stat st;
	int i, k;

	assert_non_null(f);
	assert_true(def->ninputs <= 8);
	memset(in, 0, sizeof(in));
	for (i = 0; i < def->ninputs; i++) {
		in[i].dtype = def->tensors[i].dtype;
		in[i].ndim = def->tensors[i].ndim;
		for (k = 0; k < in[i].ndim; k++)
			in[i].shape[k] = shapes[i][k];
	}
	tc_diags_init(&d, c->src);
	st = tc_ir_bind(f, in, def->ninputs, params, &d);
	tc_buf_init(&b);
	tc_diags_render(&d, 1u << TC_SEV_ERROR, &b);
	*msg = tc_buf_take(&b);
	assert_non_null(*msg);
	tc_diags_clear(&d);
	return st;
}

/* ---- worked examples ---- */

/* The example of docs/language.md: k is solved from K, then i from B. */
static void test_conv1d_extent_is_b_minus_k_plus_1(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def conv1d(float(B) In, float(K) Ker) -> (A) {\n"
		     "  A(i) +=! In(i+k) * Ker(k)\n"
		     "}\n");
	def = def_named(&c, "conv1d");
	assert_extent(def, "A", 0, "B - K + 1");
	assert_range(def, 0, "k", "[0, K)");
	assert_range(def, 0, "i", "[0, B - K + 1)");
	assert_true(var_named(def, 0, "k")->is_reduction);
	assert_false(var_named(def, 0, "i")->is_reduction);
	assert_int_equal(eval_extent(def, "A", 0, "B=10 K=3"), 8);
	assert_int_equal(eval_extent(def, "A", 0, "B=5 K=5"), 1);
	/* K > B would give no output: a condition checked when binding */
	assert_int_equal(def->nchecks, 1);
	checked_free(&c);
}

/* Every i in [0, ext) reads inside A and ext is the largest such bound:
 * checked by brute force for a read A(a*i + b). */
static void check_affine_extent(const tc_def *def, int64_t a, int64_t b)
{
	int64_t n, i;
	for (n = 1; n <= 40; n++) {
		char spec[32];
		int64_t ext;
		snprintf(spec, sizeof(spec), "N=%lld", (long long)n);
		ext = eval_extent(def, "O", 0, spec);
		for (i = 0; i < ext; i++)
			assert_true(a * i + b >= 0 && a * i + b < n);
		assert_true(a * ext + b >= n); /* the next index would be out */
	}
}

static void test_strided_read_halves_the_extent(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def s0(float(N) A) -> (O) { O(i) = A(2*i) }\n"
		     "def s1(float(N) A) -> (O) { O(i) = A(2*i+1) }\n"
		     "def s3(float(N) A) -> (O) { O(i) = A(3*i+2) }\n");
	def = def_named(&c, "s0");
	assert_extent(def, "O", 0, "floor((N + 1) / 2)");
	check_affine_extent(def, 2, 0);
	def = def_named(&c, "s1");
	assert_extent(def, "O", 0, "floor(N / 2)");
	/* N = 1 leaves no element: that is a check at bind time, not an error */
	assert_int_equal(def->nchecks, 1);
	def = def_named(&c, "s3");
	check_affine_extent(def, 3, 2);
	checked_free(&c);
}

/* A negative coefficient: O(i) = A(N - 1 - i) reverses A and keeps its size. */
static void test_reversed_read_keeps_the_extent(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def rev(float(N) A) -> (O) { O(i) = A(N - 1 - i) }\n");
	def = def_named(&c, "rev");
	assert_extent(def, "O", 0, "N");
	assert_int_equal(def->nchecks, 0);
	checked_free(&c);
}

static void test_conv2d_extents(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def conv2d(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
		     "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n"
		     "}\n");
	def = def_named(&c, "conv2d");
	assert_extent(def, "O", 0, "N");
	assert_extent(def, "O", 1, "F");
	assert_extent(def, "O", 2, "H - KH + 1");
	assert_extent(def, "O", 3, "W - KW + 1");
	assert_range(def, 0, "r_c", "[0, C)");
	assert_range(def, 0, "r_kh", "[0, KH)");
	assert_int_equal(eval_extent(def, "O", 2, "N=1 C=1 H=32 W=1 F=1 KH=5 KW=1"), 28);
	checked_free(&c);
}

/* Strided convolution: floor((H - KH) / 2) + 1, evaluated against the closed
 * form for every H <= 24 and KH <= H. */
static void test_strided_conv_extent_matches_closed_form(void **state)
{
	checked c;
	const tc_def *def;
	int64_t h, kh;
	(void)state;
	check_ok(&c, "def sconv(float(H,W) I, float(KH,KW) F) -> (O) {\n"
		     "  O(h,w) +=! I(2*h+kh, 2*w+kw) * F(kh,kw)\n"
		     "}\n");
	def = def_named(&c, "sconv");
	assert_extent(def, "O", 0, "floor((H - KH) / 2) + 1");
	assert_extent(def, "O", 1, "floor((W - KW) / 2) + 1");
	for (h = 1; h <= 24; h++)
		for (kh = 1; kh <= h; kh++) {
			char spec[64];
			snprintf(spec, sizeof(spec), "H=%lld W=1 KH=%lld KW=1", (long long)h,
				(long long)kh);
			assert_int_equal(eval_extent(def, "O", 0, spec), (h - kh) / 2 + 1);
		}
	checked_free(&c);
}

/* A strided window whose output rows a where range gives (bench/grad.tc's
 * conv2d_s2): the last row read, 2 * floor((H - KH) / 2) + KH - 1, is
 * below H (H - KH - 2 * floor((H - KH) / 2) >= 0, the remainder of a floor
 * division), so the reads add no bound to the window's range 0:KH (it was
 * min(KH, H - 2 * floor((H - KH) / 2)), and the gradient could not tell
 * that kh covers d_W1's extent: its '= 0' and '+=' took 5x the time of
 * '+=!').  With rows of another stride (3 * h over (H - KH) / 2 + 1 rows)
 * the bound is no remainder, and stays. */
static void test_strided_window_ranges(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def s2(float(H) I, float(KH) F) -> (O) {\n"
		     "  O(h) +=! I(2*h+kh) * F(kh) where h in 0:(H-KH)/2+1\n"
		     "}\n"
		     "def s3(float(H) I, float(KH) F) -> (O) {\n"
		     "  O(h) +=! I(3*h+kh) * F(kh) where h in 0:(H-KH)/3+1\n"
		     "}\n"
		     "def odd(float(H) I, float(KH) F) -> (O) {\n"
		     "  O(h) +=! I(3*h+kh) * F(kh) where h in 0:(H-KH)/2+1\n"
		     "}\n");
	assert_range(def_named(&c, "s2"), 0, "kh", "[0, KH)");
	assert_range(def_named(&c, "s3"), 0, "kh", "[0, KH)");
	def = def_named(&c, "odd");
	assert_range(def, 0, "kh", "[0, min(KH, H - 3*floor((H - KH) / 2)))");
	checked_free(&c);
}

/* Binding strided convolution with a kernel larger than the image fails
 * with the empty-range condition. */
static void test_strided_conv_kernel_larger_than_input_fails_at_bind(void **state)
{
	checked c;
	const tc_def *def;
	int64_t params[8];
	char *msg;
	const int64_t ok_shapes[2][4] = {{9, 9}, {3, 3}};
	const int64_t bad_shapes[2][4] = {{3, 9}, {5, 3}};
	(void)state;
	check_ok(&c, "def sconv(float(H,W) I, float(KH,KW) F) -> (O) {\n"
		     "  O(h,w) +=! I(2*h+kh, 2*w+kw) * F(kh,kw)\n"
		     "}\n");
	def = def_named(&c, "sconv");
	assert_int_equal(bind_shapes(&c, def, ok_shapes, params, &msg), TC_OK);
	assert_string_equal(msg, "");
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def, bad_shapes, params, &msg), TC_ERR);
	assert_non_null(strstr(msg, "for these input sizes, the range of 'h' is empty"));
	tc_free(msg);
	checked_free(&c);
}

/* where ranges are fixed before inference; the reads they make are checked
 * against the sizes at bind time. */
static void test_where_range_is_fixed_and_checked_at_bind(void **state)
{
	checked c;
	const tc_def *def;
	int64_t params[4];
	char *msg;
	const int64_t big[1][4] = {{4}}, small[1][4] = {{3}};
	(void)state;
	check_ok(&c, "def first4(float(N) A) -> (O) {\n"
		     "  O(i) = A(i) where i in 0:4\n"
		     "}\n");
	def = def_named(&c, "first4");
	assert_extent(def, "O", 0, "4");
	assert_int_equal(def->nchecks, 1);
	assert_string_equal(def->checks[0].msg,
		"A(i) can go out of bounds in dimension 0 of 'A' (extent N): needs N - 4 >= 0");
	assert_int_equal(bind_shapes(&c, def, big, params, &msg), TC_OK);
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def, small, params, &msg), TC_ERR);
	assert_string_equal(msg,
		"t.tc:2:10: error: for these input sizes, A(i) can go out of bounds in dimension 0 of 'A' (extent N): needs N - 4 >= 0 (here N = 3)\n"
		"    O(i) = A(i) where i in 0:4\n"
		"           ^~~~\n");
	tc_free(msg);
	checked_free(&c);
}

/* Pooling: a where range for the window and a strided read. */
static void test_pooling_window_where_range(void **state)
{
	checked c;
	const tc_def *def;
	int64_t h;
	(void)state;
	check_ok(&c, "def pool(float(H) I) -> (O) {\n"
		     "  O(h) max=! I(2*h + r) where r in 0:3\n"
		     "}\n");
	def = def_named(&c, "pool");
	assert_range(def, 0, "r", "[0, 3)");
	for (h = 3; h <= 30; h++) {
		char spec[32];
		snprintf(spec, sizeof(spec), "H=%lld", (long long)h);
		/* the last window starts at 2*(ext-1) and ends at 2*(ext-1)+2 <= H-1 */
		assert_int_equal(eval_extent(def, "O", 0, spec), (h - 3) / 2 + 1);
	}
	checked_free(&c);
}

/* A where range can also shrink an output below what the reads allow. */
static void test_where_range_with_sizes(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def head(float(N) A) -> (O) { O(i) = A(i) where i in 0:N-1 }\n");
	def = def_named(&c, "head");
	assert_extent(def, "O", 0, "N - 1");
	checked_free(&c);
}

/* A let is inlined: j = i + 1 reads A(i + 1), so together with A(i) the
 * output has N - 1 elements, and alone it shifts the range (an error,
 * exactly as for the inlined A(i + 1)). */
static void test_let_is_inlined_for_inference(void **state)
{
	checked c, d;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def diff(float(N) A) -> (O) {\n"
		     "  O(i) = A(j) - A(i) where j = i + 1\n"
		     "}\n");
	def = def_named(&c, "diff");
	assert_extent(def, "O", 0, "N - 1");
	assert_int_equal(def->nchecks, 1); /* N = 1 would leave no element */
	checked_free(&c);

	check_error(&c, "def f(float(N) A) -> (O) { O(i) = A(j) where j = i + 1 }\n",
		"the inferred range of 'i' is [-1, N - 1)");
	check_error(&d, "def f(float(N) A) -> (O) { O(i) = A(i + 1) }\n",
		"the inferred range of 'i' is [-1, N - 1)");
	assert_int_equal(c.d.n, 1);
	assert_int_equal(d.d.n, 1);
	assert_string_equal(c.d.v[0].msg, d.d.v[0].msg);
	checked_free(&c);
	checked_free(&d);
}

/* A let whose value reads a tensor constrains the index (corpus let_poly). */
static void test_let_with_read_bounds_the_index(void **state)
{
	checked c;
	(void)state;
	check_ok(&c, "def let_poly(float(N) A) -> (O) {\n"
		     "  O(i) = x * x + x where x = A(i) * 2\n"
		     "}\n");
	assert_extent(def_named(&c, "let_poly"), "O", 0, "N");
	checked_free(&c);
}

/* exists feeds inference without being evaluated. */
static void test_exists_gives_the_extent(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def ones(float(N) A) -> (O) { O(i) = 1.0 where exists A(i) }\n"
		     "def shift_right(float(N) A) -> (O) {\n"
		     "  O(i) = i > 0 ? A(i-1) : 0 where exists A(i)\n"
		     "}\n");
	def = def_named(&c, "ones");
	assert_extent(def, "O", 0, "N");
	assert_int_equal(def->tensors[tensor_id(def, "O")].dtype, TC_T_F32);
	def = def_named(&c, "shift_right");
	assert_extent(def, "O", 0, "N");
	checked_free(&c);
}

/* Several reads intersect; equal sizes simplify. */
static void test_intersection_of_constraints(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def add2(float(N) A, float(M) B) -> (O) { O(i) = A(i) + B(i) }\n"
		     "def same(float(N) A, float(N) B) -> (O) { O(i) = A(i) + B(i) }\n"
		     "def twice(float(N) A) -> (O) { O(i) = A(i) * A(i) }\n");
	def = def_named(&c, "add2");
	assert_extent(def, "O", 0, "min(N, M)");
	assert_int_equal(eval_extent(def, "O", 0, "N=3 M=5"), 3);
	assert_int_equal(eval_extent(def, "O", 0, "N=7 M=2"), 2);
	assert_extent(def_named(&c, "same"), "O", 0, "N");
	assert_extent(def_named(&c, "twice"), "O", 0, "N");
	checked_free(&c);
}

/* Reads under ?: bound an index that nothing else bounds (TC's rule):
 * every index of a statement may come from them, from the condition's reads
 * and from where ranges together, and reads under ?: that were not needed
 * leave no run-time check (the generated code checks them where they run). */
static void test_reads_under_ternary_bound_free_indices(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def concat_tc(float(M, N) A, float(M, N) B) -> (O1) {\n"
		     "  O1(n, i, m) = i == 0 ? A(m, n) : B(m, n) where i in 0:2\n"
		     "}\n"
		     "def masked(float(B,C,H,W) I, float(F,C,K,K) Wt, uint8(F,C) Mask) -> (O) {\n"
		     "  O(b,f,h,w) +=! Mask(f,r_c) == 1 ? I(b,r_c,h+r_k1,w+r_k2) * Wt(f,r_c,r_k1,r_k2) : 0.0\n"
		     "}\n"
		     "def tri(float(M,K) L, float(K,M) U) -> (LU) {\n"
		     "  LU(m1,m2) +=! r_k >= m1 && r_k <= m2 ? L(m1,r_k) * U(r_k,m2) : 0\n"
		     "}\n"
		     "def let_in_branch(float(N) A) -> (O) {\n"
		     "  O(i) = i > 1 ? a : 0.0 where a = A(i)\n"
		     "}\n");
	def = def_named(&c, "concat_tc");
	assert_extent(def, "O1", 0, "N");
	assert_extent(def, "O1", 1, "2");
	assert_extent(def, "O1", 2, "M");
	assert_int_equal(def->nchecks, 0);
	def = def_named(&c, "masked");
	assert_extent(def, "O", 0, "B");
	assert_extent(def, "O", 1, "F");
	assert_extent(def, "O", 2, "H - K + 1");
	assert_extent(def, "O", 3, "W - K + 1");
	assert_range(def, 0, "r_c", "[0, C)");
	assert_range(def, 0, "r_k1", "[0, K)");
	def = def_named(&c, "tri");
	assert_extent(def, "LU", 0, "M");
	assert_extent(def, "LU", 1, "M");
	assert_range(def, 0, "r_k", "[0, K)");
	assert_extent(def_named(&c, "let_in_branch"), "O", 0, "N");
	checked_free(&c);
}

/* Reads under ?: come last: a where range, an unguarded read (the
 * condition's included) or the declared shape of the tensor written bound
 * the index instead, and the read under ?: bounds nothing. */
static void test_reads_under_ternary_come_last(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def shifted_add(float(N) A, float(M) B) -> (O) {\n"
		     "  O(i) = A(i) + (i > 0 ? B(i - 1) : 0.0)\n"
		     "}\n"
		     "def by_condition(float(N) A, float(M) B) -> (O) {\n"
		     "  O(i) = A(i) > 0.0 ? B(i + 3) : 1.0\n"
		     "}\n"
		     "def declared(float(N) A, float(M) B, float(K) C) -> (float(K) O) {\n"
		     "  O(i) = i < N ? A(i) : B(i - N)\n"
		     "}\n"
		     "def later(float(N) A, float(M) B) -> (O) {\n"
		     "  O(i) = A(i)\n"
		     "  O(i) = i < M ? B(i) : O(i)\n"
		     "}\n");
	def = def_named(&c, "shifted_add");
	assert_extent(def, "O", 0, "N");
	assert_int_equal(def->nchecks, 0);
	def = def_named(&c, "by_condition");
	assert_extent(def, "O", 0, "N");
	assert_int_equal(def->nchecks, 0);
	def = def_named(&c, "declared");
	assert_range(def, 0, "i", "[0, K)");
	def = def_named(&c, "later");
	assert_range(def, 1, "i", "[0, N)");
	checked_free(&c);
}

/* Where reads under ?: each cover their part of the range (a concatenation,
 * a shift behind a test), the range they give is wrong; the error says where
 * it came from and suggests a where clause. */
static void test_reads_under_ternary_wrong_range_advice(void **state)
{
	checked c;
	(void)state;
	check_error(&c, "def f(float(N) A, float(M) B) -> (O) { O(i) = i < N ? A(i) : B(i - N) }\n",
		"the range of 'i' is empty: [N, N); this range comes from reads under ?: (they bound an index that nothing else bounds): give 'i' its range with a where clause such as 'where i in 0:N'");
	checked_free(&c);
	check_error(&c, "def f(float(N) A) -> (O) { O(i) = i > 0 ? A(i - 1) : 0.0 }\n",
		"the inferred range of 'i' is [1, N + 1), but ranges of left-hand indices must start at 0; this range comes from reads under ?:");
	checked_free(&c);
}

/* Concatenation: a where range fixes the index, and the reads under ?:
 * bound nothing. */
static void test_concat_with_ternary_and_where(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def concat_rows(float(N,D) A, float(M,D) B) -> (O) {\n"
		     "  O(i,d) = i < N ? A(i,d) : B(i-N,d) where i in 0:N+M, d in 0:D\n"
		     "}\n"
		     "def concat_exists(float(N,D) A, float(M,D) B) -> (O) {\n"
		     "  O(i,d) = i < N ? A(i,d) : B(i-N,d) where i in 0:N+M, exists A(0,d), exists B(0,d)\n"
		     "}\n");
	def = def_named(&c, "concat_rows");
	assert_extent(def, "O", 0, "N + M");
	assert_extent(def, "O", 1, "D");
	assert_int_equal(eval_extent(def, "O", 0, "N=2 M=3 D=1"), 5);
	def = def_named(&c, "concat_exists");
	assert_extent(def, "O", 0, "N + M");
	assert_extent(def, "O", 1, "D");
	checked_free(&c);
}

/* Reduction indices get ranges like any other index. */
static void test_reduction_index_ranges(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def mv(float(N,M) A, float(K) x) -> (O) { O(i) +=! A(i,j) * x(j) }\n"
		     "def pairs(float(N,M) A) -> (O) { O(i) +=! A(i,j) * A(i,j+1) }\n"
		     "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }\n");
	def = def_named(&c, "mv");
	assert_range(def, 0, "j", "[0, min(M, K))");
	assert_true(var_named(def, 0, "j")->is_reduction);
	def = def_named(&c, "pairs");
	assert_range(def, 0, "j", "[0, M - 1)");
	def = def_named(&c, "mm");
	assert_range(def, 0, "k", "[0, K)");
	assert_extent(def, "C", 0, "M");
	assert_extent(def, "C", 1, "N");
	assert_int_equal(def->nchecks, 0);
	checked_free(&c);
}

/* A gather: the outer subscript cannot be bounded statically, the inner
 * read bounds i and k. */
static void test_gather_embedding_lookup(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def embed(float(V,D) LUT, int32(B,L) I) -> (O) {\n"
		     "  O(i,j) +=! LUT(I(i,k), j)\n"
		     "}\n");
	def = def_named(&c, "embed");
	assert_extent(def, "O", 0, "B");
	assert_extent(def, "O", 1, "D");
	assert_range(def, 0, "k", "[0, L)");
	assert_int_equal(def->nchecks, 0);
	checked_free(&c);
}

/* A scatter: the gathered subscript's own read bounds i (I(i): [0, B),
 * although d_O has more rows), a where clause bounds an index only the
 * gather uses, and the written tensor's extent bounds its plain index j
 * only. */
static void test_scatter_gather_bounds_its_indices(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def bwd(float(V,D) L, int32(B) I, float(N,D) dO) -> (float(V,D) dL) {\n"
		     "  dL(I(i),j) +=! dO(i,j)\n"
		     "}\n"
		     "def wh(float(V) W, int32(B) I) -> (float(V) H) {\n"
		     "  H(I(i)) +=! 1.0 where i in 0:3\n"
		     "}\n"
		     "def cols(float(V,D) L, int32(B) I) -> (float(V,D) dL) {\n"
		     "  dL(I(i),j) +=! 1.0\n"
		     "}\n");
	def = def_named(&c, "bwd");
	assert_range(def, 0, "i", "[0, min(B, N))");
	assert_range(def, 0, "j", "[0, D)");
	assert_true(var_named(def, 0, "i")->is_reduction);
	assert_false(var_named(def, 0, "j")->is_reduction);
	def = def_named(&c, "wh");
	assert_range(def, 0, "i", "[0, 3)");
	def = def_named(&c, "cols");
	assert_range(def, 0, "j", "[0, D)");
	assert_range(def, 0, "i", "[0, B)");
	checked_free(&c);
}

/* Later statements use the extents inferred by earlier ones. */
static void test_in_place_statements_reuse_extents(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def mlp(float(B,I) X, float(O,I) W, float(O) bias) -> (Y) {\n"
		     "  Y(b,o) +=! X(b,i) * W(o,i)\n"
		     "  Y(b,o) = Y(b,o) + bias(o)\n"
		     "  Y(b,o) = fmax(Y(b,o), 0)\n"
		     "}\n");
	def = def_named(&c, "mlp");
	assert_extent(def, "Y", 0, "B");
	assert_extent(def, "Y", 1, "O");
	assert_range(def, 1, "o", "[0, O)");
	assert_range(def, 2, "b", "[0, B)");
	checked_free(&c);
}

/* A declared output shape solves an index nothing else bounds. */
static void test_declared_shape_solves_unread_index(void **state)
{
	checked c;
	const tc_def *def;
	(void)state;
	check_ok(&c, "def fill(float(N) A) -> (float(N) O) { O(i) = 1.0 }\n");
	def = def_named(&c, "fill");
	assert_range(def, 0, "i", "[0, N)");
	checked_free(&c);
}

/* ---- failure modes ---- */

static void test_unsolvable_index_is_an_error(void **state)
{
	checked c;
	(void)state;
	check_error(&c, "def f(float(N) A) -> (O) { O(i,j) = A(i) }\n",
		"could not infer the range of 'j': it does not appear in any read");
	checked_free(&c);
	check_error(&c, "def f(float(N) A) -> (O) { O(i) +=! A(i+j) }\n",
		"could not infer the range of 'i': it appears only together with other indices");
	checked_free(&c);
	check_error(&c, "def f(float(N) A) -> (O) { O(i) = i > 0 ? A(i*i) : 0.0 }\n",
		"it appears only in subscripts that are not affine");
	checked_free(&c);
	check_error(&c, "def f(float(N) A) -> (O) { O(i) = A(i*i) }\n",
		"it appears only in subscripts that are not affine");
	checked_free(&c);
}

/* Size expressions and ranges at the limits (docs/language.md, section 12):
 * folding that overflows int64 is an error at the bound, a range beyond
 * int32 is an error when it is for every size and a run-time check when it
 * depends on them, and so is a constant extent above 2^31 - 1. */
static void test_size_expression_limits(void **state)
{
	static const char *bad[][2] = {
		{"O(i) = 1.0 where i in 0:4611686018427387904*4", "t.tc:1:52: error: this range bound overflows int64"},
		{"O(i) = 1.0 where i in 0:-(-9223372036854775807-1)", "this range bound overflows int64"},
		{"O(i) = 1.0 where i in 0:9223372036854775807+1-1", "this range bound overflows int64"},
		{"O(i) = 1.0 where i in 0:min(9223372036854775807+1, 4)", "this range bound overflows int64"},
		{"O(i) = 1.0 where i in 0:(9223372036854775807+1)/2", "this range bound overflows int64"},
		{"O(i) = 1.0 where i in 0:3000000000",
			"the range of 'i', [0, 3000000000), does not fit in int32 (indices are int32 values, from -2147483648 to 2147483647)"},
		{"O(i) = 1.0 where i in 0:9223372036854775807/2", "does not fit in int32"},
		{"O(i) = 1.0 where i in 0:N+2147483647", "the range of 'i', [0, N + 2147483647), does not fit in int32"},
		{"O(i) +=! A(i) * j where j in 0:4294967297", "the range of 'j', [0, 4294967297), does not fit in int32"},
		{"O(i) +=! A(i) * j where j in 4294967296:4294967297", "does not fit in int32"},
		{"O(i) +=! A(i) * j where j in -2147483649:0", "the range of 'j', [-2147483649, 0), does not fit"},
	};
	static const char *fine[] = {
		"O(i) +=! A(i) * j where j in 0:2147483647",
		"O(i) +=! A(i) * j where j in -2147483648:0",
		"O(i) = 1.0 where i in 0:9223372036854775807-9223372036854775806",
		"O(i) = 1.0 where i in 0:(4611686018427387903*2+1)/4294967296",
	};
	static const int64_t small[][4] = {{1000}}, large[][4] = {{1500000000}};
	checked c;
	const tc_def *def;
	char text[256], *msg;
	int64_t params[4];
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "def f(float(N) A) -> (O) { %s }\n", bad[i][0]);
		check_error(&c, text, bad[i][1]);
		checked_free(&c);
	}
	for (i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		snprintf(text, sizeof(text), "def f(float(N) A) -> (O) { %s }\n", fine[i]);
		check_ok(&c, text);
		assert_int_equal(def_named(&c, "f")->nchecks, 0);
		checked_free(&c);
	}
	check_error(&c, "def f(float(4294967297) A) -> (O) { O(i) = A(i) }\n",
		"t.tc:1:13: error: a constant extent must be at most 2147483647 (extents are int32 values) but is 4294967297");
	checked_free(&c);
	check_error(&c, "def f(float(N) A) -> (float(N,3000000000) O) { O(i,j) = A(i) }\n",
		"a constant extent must be at most 2147483647");
	checked_free(&c);
	/* 2*N fits for small sizes: a run-time check */
	check_ok(&c, "def f(float(N) A) -> (O) { O(i) +=! A(i) * j where j in 0:2*N }\n");
	def = def_named(&c, "f");
	assert_int_equal(def->nchecks, 1);
	assert_int_equal(bind_shapes(&c, def, small, params, &msg), TC_OK);
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def, large, params, &msg), TC_ERR);
	if (!strstr(msg, "for these input sizes, the range of 'j', [0, 2*N), does not fit in int32 (indices are int32 values, from -2147483648 to 2147483647): needs 2147483647 - 2*N >= 0 (here N = 1500000000)"))
		fail_msg("unexpected message: %s", msg);
	tc_free(msg);
	checked_free(&c);
}

static void test_empty_range_is_an_error(void **state)
{
	checked c;
	(void)state;
	check_error(&c, "def f(float(4) A) -> (O) { O(i) = A(i) + A(i+4) }\n",
		"the range of 'i' is empty: [0, 0)");
	checked_free(&c);
	check_error(&c, "def f(float(N) A, float(M) B) -> (O) { O(i) +=! A(i) * B(j) where j in 2:1 }\n",
		"the range of 'j' is empty: [2, 1)");
	checked_free(&c);
}

static void test_nonzero_origin_is_an_error(void **state)
{
	checked c;
	(void)state;
	check_error(&c, "def f(float(N) A) -> (O) { O(i) = A(i-1) }\n",
		"the inferred range of 'i' is [1, N + 1), but ranges of left-hand indices must start at 0");
	checked_free(&c);
	check_error(&c, "def f(float(N) A) -> (O) { O(i) = A(i) where i in 1:N }\n",
		"must start at 0");
	checked_free(&c);
}

/* "size K is 45 from A but 46 from B" and the other binding checks. */
static void test_bind_reports_inconsistent_sizes(void **state)
{
	checked c;
	const tc_def *def;
	int64_t params[4];
	char *msg;
	const int64_t good[2][4] = {{2, 45}, {45, 3}};
	const int64_t bad[2][4] = {{2, 45}, {46, 3}};
	(void)state;
	check_ok(&c, "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }\n");
	def = def_named(&c, "mm");
	assert_int_equal(bind_shapes(&c, def, good, params, &msg), TC_OK);
	tc_free(msg);
	assert_int_equal(params[0], 2);
	assert_int_equal(params[1], 45);
	assert_int_equal(params[2], 3);
	assert_int_equal(bind_shapes(&c, def, bad, params, &msg), TC_ERR);
	assert_string_equal(msg,
		"t.tc: error: size K is 45 from A (dimension 1) but 46 from B (dimension 0)\n");
	tc_free(msg);
	checked_free(&c);
}

static void test_bind_checks_constant_dimensions(void **state)
{
	checked c;
	int64_t params[4];
	char *msg;
	const int64_t bad[1][4] = {{5, 4}};
	(void)state;
	check_ok(&c, "def f(float(N,3) A) -> (O) { O(i) = A(i, 0) }\n");
	assert_int_equal(bind_shapes(&c, def_named(&c, "f"), bad, params, &msg), TC_ERR);
	assert_non_null(strstr(msg, "dimension 1 of input 'A' must be 3 but is 4"));
	tc_free(msg);
	checked_free(&c);
}

/* An input's extent may be an expression of sizes (sizes named by plain
 * dimensions, in any input): it is checked when shapes are bound. */
static void test_input_extent_expressions(void **state)
{
	checked c;
	const tc_def *def;
	int64_t params[4];
	char *msg;
	const int64_t good[3][4] = {{9}, {3}, {7, 4}}, bad[3][4] = {{9}, {3}, {8, 4}};
	const int64_t bad2[3][4] = {{9}, {3}, {7, 5}};
	char buf[64];
	(void)state;
	check_ok(&c, "def f(float(N) I, float(K) W, float(N - K + 1, min(N, 2 * K) / 2 + 1) D) -> (O) {\n"
		     "  O(i) +=! D(i, j) * W(0) * I(i)\n"
		     "}\n");
	def = def_named(&c, "f");
	assert_string_equal(print_sx(def, def->tensors[2].ext[0], buf, sizeof(buf)), "N - K + 1");
	assert_int_equal(bind_shapes(&c, def, good, params, &msg), TC_OK);
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def, bad, params, &msg), TC_ERR);
	assert_non_null(strstr(msg, "dimension 0 of input 'D' (declared float32(N - K + 1,"));
	assert_non_null(strstr(msg, "must be 7 but is 8"));
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def, bad2, params, &msg), TC_ERR);
	assert_non_null(strstr(msg, "dimension 1 of input 'D'"));
	assert_non_null(strstr(msg, "must be 4 but is 5"));
	tc_free(msg);
	checked_free(&c);
	/* sizes must be named by a plain dimension; only affine expressions */
	check_error(&c, "def f(float(N) I, float(N - K) D) -> (O) { O(i) = D(i) }\n",
		"t.tc:1:29: error: 'K' in the extent of 'D' is not a size (a size is named by a "
		"dimension of an input, e.g. float(N) A)");
	checked_free(&c);
	check_error(&c, "def f(float(N) I, float(N * N) D) -> (O) { O(i) = D(i) }\n",
		"t.tc:1:25: error: an extent must be an integer expression of sizes and constants");
	checked_free(&c);
	check_error(&c, "def f(float(N) I, float(exp(N)) D) -> (O) { O(i) = D(i) }\n",
		"error: an extent expression can call only min and max, not 'exp'");
	checked_free(&c);
	/* a declared output shape may be one too */
	check_ok(&c, "def f(float(N) I, float(K) W) -> (float(N - K + 1) O) {\n"
		     "  O(i) +=! I(i + k) * W(k)\n"
		     "}\n");
	checked_free(&c);
	check_error(&c, "def f(float(N) I, float(K) W) -> (float(N - K) O) {\n"
		     "  O(i) +=! I(i + k) * W(k)\n"
		     "}\n", "declared as 'N - K' but the statement gives it 'N - K + 1'");
	checked_free(&c);
}

/* Leftover constraints (here: B read with A's range) fail at bind time for
 * sizes that violate them and pass for the others. */
static void test_bind_checks_leftover_constraints(void **state)
{
	checked c;
	const tc_def *def;
	int64_t params[4];
	char *msg;
	const int64_t ok[2][4] = {{3}, {5}}, bad[2][4] = {{5}, {3}};
	(void)state;
	check_ok(&c, "def f(float(N) A, float(M) B) -> (O) {\n"
		     "  O(i) = A(i) * B(i) where i in 0:N\n"
		     "}\n");
	def = def_named(&c, "f");
	assert_int_equal(def->nchecks, 1);
	assert_int_equal(bind_shapes(&c, def, ok, params, &msg), TC_OK);
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def, bad, params, &msg), TC_ERR);
	assert_non_null(strstr(msg,
		"t.tc:2:17: error: for these input sizes, B(i) can go out of bounds in dimension 0 of 'B' (extent M)"));
	tc_free(msg);
	checked_free(&c);
}

/* A declared output shape that inference cannot compare statically becomes
 * a bind-time check. */
static void test_bind_checks_declared_output_shape(void **state)
{
	checked c;
	const tc_def *def;
	int64_t params[4];
	char *msg;
	const int64_t ok[2][4] = {{4, 2}, {4}}, bad[2][4] = {{3, 2}, {4}};
	(void)state;
	check_ok(&c, "def f(float(M,K) A, float(N) B) -> (float(N) O) {\n"
		     "  O(i) +=! A(i,j)\n"
		     "}\n");
	def = def_named(&c, "f");
	assert_int_equal(bind_shapes(&c, def, ok, params, &msg), TC_OK);
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def, bad, params, &msg), TC_ERR);
	assert_non_null(strstr(msg,
		"for these input sizes, dimension 0 of 'O' is declared as 'N' but the statement gives it 'M'"));
	tc_free(msg);
	checked_free(&c);
}

/* The sizes of the empty-range condition of conv1d are checked at bind. */
static void test_bind_rejects_kernel_longer_than_signal(void **state)
{
	checked c;
	int64_t params[4];
	char *msg;
	const int64_t bad[2][4] = {{3}, {4}}, ok[2][4] = {{4}, {4}};
	(void)state;
	check_ok(&c, "def conv1d(float(B) In, float(K) Ker) -> (A) {\n"
		     "  A(i) +=! In(i+k) * Ker(k)\n"
		     "}\n");
	assert_int_equal(bind_shapes(&c, def_named(&c, "conv1d"), ok, params, &msg), TC_OK);
	tc_free(msg);
	assert_int_equal(bind_shapes(&c, def_named(&c, "conv1d"), bad, params, &msg), TC_ERR);
	assert_non_null(strstr(msg, "the range of 'i' is empty: [0, B - K + 1)"));
	tc_free(msg);
	checked_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conv1d_extent_is_b_minus_k_plus_1),
		cmocka_unit_test(test_strided_read_halves_the_extent),
		cmocka_unit_test(test_reversed_read_keeps_the_extent),
		cmocka_unit_test(test_conv2d_extents),
		cmocka_unit_test(test_strided_conv_extent_matches_closed_form),
		cmocka_unit_test(test_strided_window_ranges),
		cmocka_unit_test(test_strided_conv_kernel_larger_than_input_fails_at_bind),
		cmocka_unit_test(test_where_range_is_fixed_and_checked_at_bind),
		cmocka_unit_test(test_pooling_window_where_range),
		cmocka_unit_test(test_where_range_with_sizes),
		cmocka_unit_test(test_let_is_inlined_for_inference),
		cmocka_unit_test(test_let_with_read_bounds_the_index),
		cmocka_unit_test(test_exists_gives_the_extent),
		cmocka_unit_test(test_intersection_of_constraints),
		cmocka_unit_test(test_concat_with_ternary_and_where),
		cmocka_unit_test(test_reads_under_ternary_bound_free_indices),
		cmocka_unit_test(test_reads_under_ternary_come_last),
		cmocka_unit_test(test_reads_under_ternary_wrong_range_advice),
		cmocka_unit_test(test_reduction_index_ranges),
		cmocka_unit_test(test_gather_embedding_lookup),
		cmocka_unit_test(test_scatter_gather_bounds_its_indices),
		cmocka_unit_test(test_in_place_statements_reuse_extents),
		cmocka_unit_test(test_declared_shape_solves_unread_index),
		cmocka_unit_test(test_unsolvable_index_is_an_error),
		cmocka_unit_test(test_size_expression_limits),
		cmocka_unit_test(test_empty_range_is_an_error),
		cmocka_unit_test(test_nonzero_origin_is_an_error),
		cmocka_unit_test(test_bind_reports_inconsistent_sizes),
		cmocka_unit_test(test_bind_checks_constant_dimensions),
		cmocka_unit_test(test_bind_checks_leftover_constraints),
		cmocka_unit_test(test_input_extent_expressions),
		cmocka_unit_test(test_bind_checks_declared_output_shape),
		cmocka_unit_test(test_bind_rejects_kernel_longer_than_signal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
