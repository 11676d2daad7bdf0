/* Option sizes: code that reads the free sizes (those only first
 * dimensions have) at run time (parametric, and auto from a def's second
 * shape on), and tc_compile giving a kernel for other values of them the
 * code compiled before (tc_kernel_reuses_code).
 * Every kernel's results are compared with the reference interpreter's
 * on fresh random inputs, outputs poisoned first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcomp.h"
#include "testutil.h"

static tc_context *ctx;

static int setup(void **state)
{
	(void)state;
	ctx = tc_context_new();
	return ctx ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tc_context_free(ctx);
	return 0;
}

#define MAX_IN 5
#define MAX_OUT 4

/* One call: the inputs' types and shapes; an integer input holds values
 * in [0, lim). */
typedef struct input {
	tu_elt elt;
	int ndim;
	int64_t dims[4];
	int64_t lim;
} input;

static tc_kernel *compile_with(tc_module *m, const char *entry, const DLTensor *const *in,
	int nin, const char *opts)
{
	tc_options *o = tc_options_new();
	tc_kernel *k;
	assert_int_equal(tc_options_parse(o, opts, ctx), 0);
	k = tc_compile(m, entry, in, nin, o);
	tc_options_free(o);
	if (!k)
		fail_msg("%s: %s", opts, tc_context_error(ctx));
	return k;
}

/* Run entry of m on random inputs of the shapes ins[0..nin) with options
 * opts and with the interpreter; every float32 output within rel of the
 * interpreter's.  Returns tc_kernel_reuses_code of the compiled kernel. */
static int check(tc_module *m, const char *entry, const input *ins, int nin, const char *opts,
	uint64_t seed, float rel)
{
	tu_tensor in[MAX_IN], out[2][MAX_OUT];
	const DLTensor *inp[MAX_IN];
	DLTensor *outp[MAX_OUT];
	tc_kernel *k[2];
	int i, v, nout, reuses;
	int64_t j;
	for (i = 0; i < nin; i++) {
		tu_tensor_init(&in[i], ins[i].elt, ins[i].dims, ins[i].ndim);
		for (j = 0; j < in[i].numel; j++)
			if (ins[i].elt == TU_F32)
				((float *)in[i].data)[j] = (float)(2 * tu_rand_unit(&seed) - 1);
			else
				((int64_t *)in[i].data)[j] = tu_rand_int(&seed, 0, ins[i].lim - 1);
		inp[i] = &in[i].dl;
	}
	k[0] = compile_with(m, entry, inp, nin, opts);
	k[1] = compile_with(m, entry, inp, nin, "target=interp");
	reuses = tc_kernel_reuses_code(k[0]);
	nout = tc_kernel_num_outputs(k[0]);
	assert_true(nout >= 1 && nout <= MAX_OUT);
	for (v = 0; v < 2; v++) {
		for (i = 0; i < nout; i++) {
			int64_t shape[8];
			int nd;
			assert_int_equal(tc_kernel_output_shape(k[v], i, NULL, &nd, shape), 0);
			tu_tensor_init(&out[v][i], TU_F32, shape, nd);
			tu_poison(&out[v][i]);
			outp[i] = &out[v][i].dl;
		}
		if (tc_kernel_run(k[v], inp, nin, outp, nout) != 0)
			fail_msg("%s: %s", v ? "interp" : opts, tc_context_error(ctx));
	}
	for (i = 0; i < nout; i++) {
		for (j = 0; j < out[0][i].numel; j++) {
			float a = ((float *)out[0][i].data)[j], b = ((float *)out[1][i].data)[j];
			if (!(fabsf(a - b) <= rel * (1 + fabsf(b))))
				fail_msg("%s, output %d element %lld: %g, the interpreter %g", opts, i,
					(long long)j, a, b);
		}
		tu_tensor_fini(&out[0][i]);
		tu_tensor_fini(&out[1][i]);
	}
	for (i = 0; i < nin; i++)
		tu_tensor_fini(&in[i]);
	tc_kernel_free(k[0]);
	tc_kernel_free(k[1]);
	return reuses;
}

/* The MLP's backward pass (the batch size B is also a value: / B): the
 * code compiled at B = 32 serves B = 7, 1, 50 and 129; another hidden
 * width (H, a second dimension) compiles again. */
static void batch_sizes_share_code(void **state)
{
	static const int64_t batches[] = {32, 7, 1, 50, 129};
	tc_module *m = tc_module_parse(ctx, TU_MLP_BWD, "bwd.tc");
	size_t n;
	(void)state;
	assert_non_null(m);
	for (n = 0; n < sizeof(batches) / sizeof(batches[0]); n++) {
		int64_t b = batches[n];
		input ins[5] = {
			{TU_F32, 2, {b, 40}, 0}, {TU_F32, 2, {b, 24}, 0}, {TU_F32, 2, {b, 10}, 0},
			{TU_I64, 1, {b}, 10}, {TU_F32, 2, {24, 10}, 0},
		};
		assert_int_equal(check(m, "k", ins, 5, "sizes=parametric", 100 + n, 1e-4f), n > 0);
	}
	{
		input ins[5] = {
			{TU_F32, 2, {16, 40}, 0}, {TU_F32, 2, {16, 20}, 0}, {TU_F32, 2, {16, 10}, 0},
			{TU_I64, 1, {16}, 10}, {TU_F32, 2, {20, 10}, 0},
		};
		assert_int_equal(check(m, "k", ins, 5, "sizes=parametric", 9, 1e-4f), 0);
	}
	tc_module_free(m);
}

/* Matmul's rows M on two threads (parallel loops outlined, each reading
 * the sizes): compiled at M = 96, shared with M = 1, 37 and 200 (full and
 * partial register tiles); its C text takes M as an argument.  Other K
 * or N compile again. */
static void matmul_rows_share_code(void **state)
{
	static const int64_t rows[] = {96, 1, 37, 200};
	const char *opts = "sizes=parametric threads=2 parallel=on";
	tc_module *m = tc_module_parse(ctx,
		"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }\n",
		"mm.tc");
	size_t n;
	(void)state;
	assert_non_null(m);
	for (n = 0; n < sizeof(rows) / sizeof(rows[0]); n++) {
		input ins[2] = {{TU_F32, 2, {rows[n], 64}, 0}, {TU_F32, 2, {64, 72}, 0}};
		assert_int_equal(check(m, "k", ins, 2, opts, 200 + n, 1e-5f), n > 0);
	}
	{
		input a[2] = {{TU_F32, 2, {37, 48}, 0}, {TU_F32, 2, {48, 72}, 0}};
		input b[2] = {{TU_F32, 2, {37, 64}, 0}, {TU_F32, 2, {64, 80}, 0}};
		assert_int_equal(check(m, "k", a, 2, opts, 300, 1e-5f), 0);
		assert_int_equal(check(m, "k", b, 2, opts, 301, 1e-5f), 0);
	}
	{
		tu_tensor a, b;
		int64_t sa[2] = {5, 64}, sb[2] = {64, 72};
		const DLTensor *in[2];
		tc_kernel *k;
		char *c;
		tu_tensor_init(&a, TU_F32, sa, 2);
		tu_tensor_init(&b, TU_F32, sb, 2);
		in[0] = &a.dl;
		in[1] = &b.dl;
		k = compile_with(m, "k", in, 2, opts);
		assert_int_equal(tc_kernel_reuses_code(k), 1);
		c = tc_kernel_emit(k, "c");
		assert_non_null(c);
		assert_true(tu_contains(c, "sizes M (free; choices made at 96), K=64, N=72"));
		assert_true(tu_contains(c, "void k(void *const *tensors, int64_t M)"));
		tc_string_free(c);
		tc_kernel_free(k);
		tu_tensor_fini(&a);
		tu_tensor_fini(&b);
	}
	tc_module_free(m);
}

/* The stage text of entry of m compiled for ins with opts. */
static char *stage_for(tc_module *m, const char *entry, const input *ins, int nin,
	const char *opts, const char *stage)
{
	tu_tensor in[MAX_IN];
	const DLTensor *inp[MAX_IN] = {0};
	tc_kernel *k;
	char *text;
	int i;
	for (i = 0; i < nin; i++) {
		tu_tensor_init(&in[i], ins[i].elt, ins[i].dims, ins[i].ndim);
		inp[i] = &in[i].dl;
	}
	k = compile_with(m, entry, inp, nin, opts);
	text = tc_kernel_emit(k, stage);
	assert_non_null(text);
	tc_kernel_free(k);
	for (i = 0; i < nin; i++)
		tu_tensor_fini(&in[i]);
	return text;
}

/* Register tiles whose point loops polyhedral/ast.c builds from the tile
 * sizes (the tile loops' AST runs each statement at its tiles' origins):
 * matmul and a fully connected layer with its bias and ReLU epilogue at
 * sizes with short tiles in the rows, the columns or both (every
 * combination a piece of constant bounds), sizes smaller than one tile
 * (no whole tile at all), and the rows free at run time (sizes=parametric:
 * one partial tile bounded by the extents, M from 1 to 50 through code
 * compiled at 40), on one thread and, once, two; each against the
 * interpreter. */
static void register_tile_pieces_match_the_interpreter(void **state)
{
	/* 64 x 23 x 64 and 100 x 9 x 128: with AVX-512's tiles of 6 rows of 4
	 * vectors the last 4 rows run as 2 chunks of 2 (polyhedral/ast.c,
	 * short_rows_chunk) */
	static const int64_t mm[][3] = {{13, 7, 37}, {3, 5, 5}, {101, 27, 131}, {64, 23, 64},
		{100, 9, 128}};
	static const int64_t rows[] = {40, 1, 7, 50};
	tc_module *m = tc_module_parse(ctx,
		"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }\n"
		"def fc(float(B,I) X, float(O,I) W, float(O) b) -> (Y) {\n"
		"  Y(n,o) +=! X(n,r_i) * W(o,r_i)\n"
		"  Y(n,o) = fmax(Y(n,o) + b(o), 0.0)\n}\n",
		"pieces.tc");
	size_t n;
	char *text;
	(void)state;
	assert_non_null(m);
	for (n = 0; n < sizeof(mm) / sizeof(mm[0]); n++) {
		input ins[2] = {{TU_F32, 2, {mm[n][0], mm[n][1]}, 0},
			{TU_F32, 2, {mm[n][1], mm[n][2]}, 0}};
		input fc[3] = {{TU_F32, 2, {mm[n][0], mm[n][1]}, 0},
			{TU_F32, 2, {mm[n][2], mm[n][1]}, 0}, {TU_F32, 1, {mm[n][2]}, 0}};
		check(m, "k", ins, 2, n ? "" : "threads=2 parallel=on", 400 + n, 1e-5f);
		check(m, "fc", fc, 3, "", 420 + n, 1e-5f);
	}
	for (n = 0; n < sizeof(rows) / sizeof(rows[0]); n++) {
		input ins[2] = {{TU_F32, 2, {rows[n], 19}, 0}, {TU_F32, 2, {19, 37}, 0}};
		input fc[3] = {{TU_F32, 2, {rows[n], 19}, 0}, {TU_F32, 2, {37, 19}, 0},
			{TU_F32, 1, {37}, 0}};
		assert_int_equal(check(m, "k", ins, 2, "sizes=parametric", 430 + n, 1e-5f), n > 0);
		if (n % 2 == 0)
			assert_int_equal(check(m, "fc", fc, 3, "sizes=parametric", 440 + n, 1e-5f),
				n > 0);
	}
	{ /* the tiles are the code generator's: rows and columns short of a
	   * tile at 13 x 37 (mask=on: no host takes the 37 columns whole,
	   * polyhedral/regtile.c, whole_row), the rows maybe short with the
	   * rows free */
		input ins[2] = {{TU_F32, 2, {13, 7}, 0}, {TU_F32, 2, {7, 37}, 0}};
		text = stage_for(m, "k", ins, 2, "mask=on", "ast");
		assert_true(tu_contains(text, "its tile from tc_o0"));
		assert_true(tu_contains(text, "dimension 0 short of"));
		assert_true(tu_contains(text, "dimension 1 short of"));
		tc_string_free(text);
		text = stage_for(m, "k", ins, 2, "sizes=parametric", "ast");
		assert_true(tu_contains(text, "dimension 0 maybe short of"));
		assert_true(tu_contains(text, "tc_e0 = M - tc_o0"));
		tc_string_free(text);
		text = stage_for(m, "k", ins, 2, "", "schedule");
		assert_null(strstr(text, "isolate")); /* no full tiles for isl to isolate */
		tc_string_free(text);
	}
	tc_module_free(m);
}

#define SOFTMAX_TC \
	"def k(float(N,D) I) -> (O) {\n" \
	"  mx(n) max=! I(n,r_d)\n" \
	"  O(n,d) = exp(I(n,d) - mx(n))\n" \
	"  sm(n) +=! O(n,r_d)\n" \
	"  O(n,d) = O(n,d) / sm(n)\n}\n"

/* A cache tile as long as its member (N = 100: one tile of 100 columns)
 * leaves the point member n mod 100, which is n on every instance; the
 * register tile's members are simplified on the band's instances before
 * and after the register tiling (polyhedral/regtile.c, gist_band), so the
 * register tile splits n, not (n + 28*floor(n/100)) mod 64 (whose exactness
 * test took a quarter of matmul 100's compile); the code still matches
 * the interpreter, at 100 x 100 x 100 and at 100 x 9 x 70 (columns short of
 * a tile, the reduction shorter than a vector). */
static void register_tile_members_simplified_on_the_domain(void **state)
{
	static const int64_t mm[][3] = {{100, 100, 100}, {100, 9, 70}};
	tc_module *m = tc_module_parse(ctx,
		"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }\n",
		"gist.tc");
	size_t n;
	(void)state;
	assert_non_null(m);
	for (n = 0; n < sizeof(mm) / sizeof(mm[0]); n++) {
		input ins[2] = {{TU_F32, 2, {mm[n][0], mm[n][1]}, 0},
			{TU_F32, 2, {mm[n][1], mm[n][2]}, 0}};
		char *text = stage_for(m, "k", ins, 2, "", "schedule");
		assert_true(tu_contains(text, "tc_regtile"));
		assert_null(strstr(text, "floor((n)/"));
		tc_string_free(text);
		check(m, "k", ins, 2, "", 470 + n, 1e-5f);
	}
	tc_module_free(m);
}

/* With sizes=concrete each shape compiles again; with parametric, only
 * kernels of the same options share code. */
static void sharing_needs_the_option_and_the_same_options(void **state)
{
	tc_module *m = tc_module_parse(ctx, SOFTMAX_TC, "softmax.tc");
	input a[1] = {{TU_F32, 2, {20, 100}, 0}}, b[1] = {{TU_F32, 2, {3, 100}, 0}};
	input c[1] = {{TU_F32, 2, {41, 100}, 0}};
	(void)state;
	assert_non_null(m);
	assert_int_equal(check(m, "k", a, 1, "sizes=concrete", 1, 1e-5f), 0);
	assert_int_equal(check(m, "k", b, 1, "sizes=concrete", 2, 1e-5f), 0);
	assert_int_equal(check(m, "k", c, 1, "sizes=concrete", 7, 1e-5f), 0);
	assert_int_equal(check(m, "k", a, 1, "sizes=parametric fusion=min", 3, 1e-5f), 0);
	assert_int_equal(check(m, "k", b, 1, "sizes=parametric", 4, 1e-5f), 0);
	assert_int_equal(check(m, "k", c, 1, "sizes=parametric", 5, 1e-5f), 1);
	assert_int_equal(check(m, "k", c, 1, "sizes=parametric fusion=min", 6, 1e-5f), 1);
	tc_module_free(m);
}

/* The row count N the choices of the code of entry k of m at inputs in
 * under options opts were made at, as its C stage says, when N is a free
 * size of the code (parametric code), else 0. */
static long long made_at(tc_module *m, const input *in, const char *opts)
{
	const char *s;
	long long at = 0;
	tu_tensor t;
	const DLTensor *p[1];
	tc_kernel *k;
	char *text;
	tu_tensor_init(&t, in->elt, in->dims, in->ndim);
	p[0] = &t.dl;
	k = compile_with(m, "k", p, 1, opts);
	text = tc_kernel_emit(k, "c");
	if (!text)
		fail_msg("emit: %s", tc_context_error(ctx));
	if ((s = strstr(text, "sizes N (free; choices made at ")) != NULL)
		assert_int_equal(sscanf(s, "sizes N (free; choices made at %lld)", &at), 1);
	tc_string_free(text);
	tc_kernel_free(k);
	tu_tensor_fini(&t);
	return at;
}

/* The default, sizes=auto: the first shape of a def compiles concrete
 * code; the second (other rows only) parametric code, its choices made at
 * the larger row count, which serves every shape up to it; a larger one
 * compiles parametric code again.  Another column count compiles concrete
 * code again, and other options are kept apart. */
static void auto_sizes_go_parametric_at_the_second_shape(void **state)
{
	tc_module *m = tc_module_parse(ctx, SOFTMAX_TC, "softmax.tc");
	input a[1] = {{TU_F32, 2, {20, 100}, 0}}, b[1] = {{TU_F32, 2, {3, 100}, 0}};
	input c[1] = {{TU_F32, 2, {41, 100}, 0}}, d[1] = {{TU_F32, 2, {1, 100}, 0}};
	input e[1] = {{TU_F32, 2, {20, 33}, 0}}, g[1] = {{TU_F32, 2, {17, 100}, 0}};
	input h[1] = {{TU_F32, 2, {30, 100}, 0}};
	(void)state;
	assert_non_null(m);
	assert_int_equal(check(m, "k", a, 1, "", 11, 1e-5f), 0);
	assert_int_equal(made_at(m, a, ""), 0);
	assert_int_equal(check(m, "k", b, 1, "", 12, 1e-5f), 0);
	assert_int_equal(made_at(m, b, ""), 20);
	assert_int_equal(check(m, "k", d, 1, "", 13, 1e-5f), 1);
	assert_int_equal(check(m, "k", g, 1, "", 14, 1e-5f), 1);
	assert_int_equal(check(m, "k", c, 1, "", 15, 1e-5f), 0); /* above 20 */
	assert_int_equal(made_at(m, c, ""), 41);
	assert_int_equal(check(m, "k", h, 1, "", 16, 1e-5f), 1);
	assert_int_equal(made_at(m, h, ""), 41);
	assert_int_equal(check(m, "k", e, 1, "", 17, 1e-5f), 0);
	assert_int_equal(made_at(m, e, ""), 0);
	/* other options: a first shape of their own */
	assert_int_equal(check(m, "k", c, 1, "fusion=min", 18, 1e-5f), 0);
	assert_int_equal(made_at(m, c, "fusion=min"), 0);
	assert_int_equal(check(m, "k", a, 1, "fusion=min", 19, 1e-5f), 0);
	assert_int_equal(made_at(m, a, "fusion=min"), 41);
	assert_int_equal(check(m, "k", h, 1, "fusion=min", 20, 1e-5f), 1); /* made at 41 */
	tc_module_free(m);
}

/* A convolution rewritten channels last (16 output channels, ir/pack.c)
 * shares its code across batch sizes: the rewrite at the new batch is
 * the same function. */
static void convolution_batches_share_code(void **state)
{
	static const int64_t batches[] = {2, 1, 3};
	tc_module *m = tc_module_parse(ctx,
		"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
		"  O(n,f,h,w) +=! I(n,r_c,h + r_kh,w + r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
		"conv.tc");
	size_t n;
	(void)state;
	assert_non_null(m);
	for (n = 0; n < sizeof(batches) / sizeof(batches[0]); n++) {
		input ins[2] = {{TU_F32, 4, {batches[n], 4, 10, 12}, 0},
			{TU_F32, 4, {16, 4, 3, 3}, 0}};
		assert_int_equal(check(m, "k", ins, 2, "sizes=parametric", 400 + n, 1e-5f), n > 0);
	}
	tc_module_free(m);
}

/* A value the option does not take is refused with the values it does. */
static void option_values(void **state)
{
	tc_options *o = tc_options_new();
	(void)state;
	assert_int_equal(tc_options_parse(o, "sizes=parametric", ctx), 0);
	assert_int_not_equal(tc_options_parse(o, "sizes=sometimes", ctx), 0);
	assert_true(tu_contains(tc_context_error(ctx), "auto|concrete|parametric"));
	tc_options_free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(batch_sizes_share_code),
		cmocka_unit_test(matmul_rows_share_code),
		cmocka_unit_test(register_tile_pieces_match_the_interpreter),
		cmocka_unit_test(register_tile_members_simplified_on_the_domain),
		cmocka_unit_test(sharing_needs_the_option_and_the_same_options),
		cmocka_unit_test(auto_sizes_go_parametric_at_the_second_shape),
		cmocka_unit_test(convolution_batches_share_code),
		cmocka_unit_test(option_values),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
