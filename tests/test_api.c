/* The public API's behaviour on bad input: every error returns NULL or -1
 * (never crashes or exits) and leaves a message in the context that says
 * what went wrong.  Each test checks the return value and a key phrase of
 * the message; where the exact wording is the implementation's choice, the
 * test accepts any of a few natural phrasings (see expect_message_any). */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tcomp.h"
#include "tests/testutil.h"

/* The kernels the tests compile.  Line numbers matter: the gather read is on
 * line 5 (see test_gather_out_of_range_is_a_runtime_error). */
static const char api_source[] =
	"def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
	"    C(m,n) +=! A(m,r_k) * B(r_k,n)\n"
	"}\n"
	"def gather(float(V,D) LUT, int32(B) I) -> (O) {\n"
	"    O(i,j) = LUT(I(i),j)\n"
	"}\n"
	"def conv1d(float(N) X, float(K) W) -> (Y) {\n"
	"    Y(i) +=! X(i+r_k) * W(r_k)\n"
	"}\n";

/* ---- message checks ---- */

static int icontains(const char *hay, const char *needle)
{
	if (!hay)
		return 0;
	size_t n = strlen(needle);
	for (; *hay; hay++) {
		size_t i = 0;
		while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
			i++;
		if (i == n)
			return 1;
	}
	return n == 0;
}

/* The context's message contains every needle (case-sensitive). */
#define expect_message(ctx, ...) expect_message_all_((ctx), (const char *[]){__VA_ARGS__, NULL})
static void expect_message_all_(tc_context *ctx, const char **needles)
{
	const char *msg = tc_context_error(ctx);
	for (; *needles; needles++)
		if (!tu_contains(msg, *needles))
			fail_msg("message lacks \"%s\"", *needles);
}

/* The context's message contains at least one needle (case-insensitive). */
#define expect_message_any(ctx, ...) expect_message_any_((ctx), (const char *[]){__VA_ARGS__, NULL})
static void expect_message_any_(tc_context *ctx, const char **needles)
{
	const char *msg = tc_context_error(ctx);
	for (const char **n = needles; *n; n++)
		if (icontains(msg, *n))
			return;
	fprintf(stderr, "expected the message to contain one of:");
	for (const char **n = needles; *n; n++)
		fprintf(stderr, " \"%s\"", *n);
	fprintf(stderr, "\nit is:\n%s\n", msg ? msg : "(null)");
	fail_msg("message lacks every expected phrase");
}

/* A failed call must leave a non-empty message. */
static void expect_some_message(tc_context *ctx)
{
	const char *msg = tc_context_error(ctx);
	assert_non_null(msg);
	if (!*msg)
		fail_msg("the call failed but tc_context_error is empty");
}

/* The message has "file:line:COL:" for some column number. */
static void expect_location(tc_context *ctx, const char *file, int line)
{
	char prefix[128];
	snprintf(prefix, sizeof(prefix), "%s:%d:", file, line);
	const char *msg = tc_context_error(ctx);
	const char *p = msg ? strstr(msg, prefix) : NULL;
	if (p) {
		p += strlen(prefix);
		const char *digits = p;
		while (isdigit((unsigned char)*p))
			p++;
		if (p > digits && *p == ':')
			return;
	}
	fail_msg("message lacks \"%sCOL:\":\n%s", prefix, msg ? msg : "(null)");
}

/* ---- fixture: a context, the parsed api_source, and matmul operands ---- */

typedef struct fixture {
	tc_context *ctx;
	tc_module *m;
	tu_tensor A, B, C; /* A(3,4), B(4,5), C(3,5) float32 */
	const DLTensor *ins[2];
	DLTensor *outs[1];
} fixture;

static void fill_f32(tu_tensor *t, uint64_t *rng)
{
	float *p = t->data;
	for (int64_t i = 0; i < t->numel; i++)
		p[i] = (float)(2 * tu_rand_unit(rng) - 1);
}

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	uint64_t rng = tu_seed("test_api", 0);
	f->ctx = tc_context_new();
	assert_non_null(f->ctx);
	f->m = tc_module_parse(f->ctx, api_source, "api.tc");
	if (!f->m)
		fail_msg("api_source does not parse:\n%s", tc_context_error(f->ctx));
	tu_tensor_init(&f->A, TU_F32, (int64_t[]){3, 4}, 2);
	tu_tensor_init(&f->B, TU_F32, (int64_t[]){4, 5}, 2);
	tu_tensor_init(&f->C, TU_F32, (int64_t[]){3, 5}, 2);
	fill_f32(&f->A, &rng);
	fill_f32(&f->B, &rng);
	f->ins[0] = &f->A.dl;
	f->ins[1] = &f->B.dl;
	f->outs[0] = &f->C.dl;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	tu_tensor_fini(&f->A);
	tu_tensor_fini(&f->B);
	tu_tensor_fini(&f->C);
	tc_module_free(f->m);
	tc_context_free(f->ctx);
	free(f);
	return 0;
}

/* Compile matmul for the fixture's operands (must succeed). */
static tc_kernel *compile_matmul(fixture *f)
{
	tc_kernel *k = tc_compile(f->m, "matmul", f->ins, 2, NULL);
	if (!k)
		fail_msg("tc_compile(matmul) failed:\n%s", tc_context_error(f->ctx));
	return k;
}

/* C computed by the fixture's kernel matches plain loops. */
static void check_matmul_result(fixture *f)
{
	const float *A = f->A.data, *B = f->B.data, *C = f->C.data;
	for (int m = 0; m < 3; m++)
		for (int n = 0; n < 5; n++) {
			float acc = 0;
			for (int k = 0; k < 4; k++)
				acc += A[m * 4 + k] * B[k * 5 + n];
			assert_float_equal(C[m * 5 + n], acc, 1e-5);
		}
}

/* ---- the happy path, as a baseline for the error cases ---- */

static void test_matmul_compiles_and_runs(void **state)
{
	fixture *f = *state;
	tc_kernel *k = compile_matmul(f);
	assert_string_equal(tc_context_error(f->ctx), "");
	assert_int_equal(tc_kernel_num_outputs(k), 1);
	DLDataType dt;
	int ndim = 0;
	int64_t shape[8];
	assert_int_equal(tc_kernel_output_shape(k, 0, &dt, &ndim, shape), 0);
	assert_int_equal(dt.code, kDLFloat);
	assert_int_equal(dt.bits, 32);
	assert_int_equal(dt.lanes, 1);
	assert_int_equal(ndim, 2);
	assert_int_equal(shape[0], 3);
	assert_int_equal(shape[1], 5);
	tu_poison(&f->C);
	assert_int_equal(tc_kernel_run(k, f->ins, 2, f->outs, 1), 0);
	check_matmul_result(f);
	tc_kernel_free(k);
}

static void test_module_introspection(void **state)
{
	fixture *f = *state;
	assert_int_equal(tc_module_num_defs(f->m), 3);
	assert_string_equal(tc_module_def_name(f->m, 0), "matmul");
	assert_string_equal(tc_module_def_name(f->m, 1), "gather");
	char *sig = tc_module_signature(f->m, "matmul");
	assert_non_null(sig);
	assert_string_equal(sig, "def matmul(float32(M,K) A, float32(K,N) B) -> (float32(M,N) C)");
	tc_string_free(sig);
	assert_null(tc_module_signature(f->m, "no_such_def"));
	char hash[17];
	assert_int_equal(tc_module_hash(f->m, "matmul", hash), 0);
	assert_int_equal(strlen(hash), 16);
	assert_int_equal(tc_module_hash(f->m, "no_such_def", hash), -1);
}

/* tc_module_output_overwritten: the defs it calls overwritten (1) give the
 * same outputs whatever the output buffers held (run twice, poisoned with
 * NaN and with 12345), and those whose results depend on the old contents
 * are 0. */
static void test_output_overwritten(void **state)
{
	static const struct {
		const char *src;
		int expect[2]; /* per output */
		int depends;   /* output 0's result changes with its old contents */
	} cases[] = {
		{"def f(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
			{1, -1}, 0},
		{"def f(float(M,K) A, float(K,N) B) -> (float(M) S) { S(m) += A(m,k) }",
			{0, -1}, 1},
		{"def f(float(M,K) A, float(K,N) B) -> (float(M) O) {\n"
		 "  O(i) = A(i,0) where i in 1:M\n}", {0, -1}, 1},
		{"def f(float(M,K) A, float(K,N) B) -> (O) {\n"
		 "  O(i) = A(i,0)\n  O(i) max= A(i,j)\n}", {1, -1}, 0},
		{"def f(float(M,K) A, float(K,N) B) -> (s, O) {\n"
		 "  s +=! A(r_i,r_j)\n  O(i) = A(i,0)\n  O(i) = O(i) * s\n}", {1, 1}, 0},
		{"def f(float(M,K) A, float(K,N) B) -> (float(K,K) O) {\n"
		 "  O(i,j) = i == j ? B(i,0) : 0.0 where i in 0:K, j in 0:K\n}", {1, -1}, 0},
		{"def f(float(M,K) A, float(K,N) B) -> (float(M,K) O, S) {\n"
		 "  O(i,j) = A(i,j) where i in 0:M, j in 1:K\n  S(i) +=! A(i,j)\n}",
			{0, 1}, 1},
	};
	fixture *f = *state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		tc_module *m = tc_module_parse(f->ctx, cases[c].src, "ow.tc");
		int nout = 0;
		tu_tensor out[2][2];
		DLTensor *outs[2];
		tc_kernel *k;
		if (!m)
			fail_msg("case %d does not parse:\n%s", (int)c, tc_context_error(f->ctx));
		assert_int_equal(tc_module_def_arity(m, "f", NULL, &nout), 0);
		for (int i = 0; i < nout; i++)
			if (tc_module_output_overwritten(m, "f", i) != cases[c].expect[i])
				fail_msg("case %d output %d: %d, expected %d", (int)c, i,
					tc_module_output_overwritten(m, "f", i), cases[c].expect[i]);
		assert_int_equal(tc_module_output_overwritten(m, "f", nout), -1);
		expect_message(f->ctx, "no output number");
		assert_int_equal(tc_module_output_overwritten(m, "nope", 0), -1);
		/* run twice with differently poisoned outputs */
		if (!(k = tc_compile(m, "f", f->ins, 2, NULL)))
			fail_msg("case %d: %s", (int)c, tc_context_error(f->ctx));
		for (int p = 0; p < 2; p++) {
			for (int i = 0; i < nout; i++) {
				int64_t sh[8];
				int nd;
				assert_int_equal(tc_kernel_output_shape(k, i, NULL, &nd, sh), 0);
				tu_tensor_init(&out[p][i], TU_F32, sh, nd);
				for (int64_t e = 0; e < out[p][i].numel; e++)
					((float *)out[p][i].data)[e] = p ? 12345.0f : NAN;
				outs[i] = &out[p][i].dl;
			}
			assert_int_equal(tc_kernel_run(k, f->ins, 2, outs, nout), 0);
		}
		for (int i = 0; i < nout; i++) {
			int same = !memcmp(out[0][i].data, out[1][i].data,
				(size_t)out[0][i].numel * sizeof(float));
			if (cases[c].expect[i] == 1 && !same)
				fail_msg("case %d output %d: said overwritten, but its old contents "
					 "changed the result", (int)c, i);
			if (i == 0 && cases[c].depends && same)
				fail_msg("case %d: the old contents were expected to show", (int)c);
			tu_tensor_fini(&out[0][i]);
			tu_tensor_fini(&out[1][i]);
		}
		tc_kernel_free(k);
		tc_module_free(m);
	}
}

/* Kernels that differ only in names have the same canonical hash. */
static void test_hash_ignores_names(void **state)
{
	fixture *f = *state;
	tc_module *other = tc_module_parse(f->ctx,
		"def mm2(float(P,Q) X, float(Q,R) Y) -> (Z) {\n"
		"    Z(i,j) +=! X(i,kk) * Y(kk,j)\n"
		"}\n", "other.tc");
	assert_non_null(other);
	char h1[17], h2[17];
	assert_int_equal(tc_module_hash(f->m, "matmul", h1), 0);
	assert_int_equal(tc_module_hash(other, "mm2", h2), 0);
	assert_string_equal(h1, h2);
	tc_module_free(other);
}

static void test_emit_unknown_stage_or_entry(void **state)
{
	fixture *f = *state;
	char *s = tc_module_emit(f->m, "matmul", "bogus_stage");
	assert_null(s);
	expect_message(f->ctx, "bogus_stage");
	s = tc_module_emit(f->m, "no_such_def", "ir");
	assert_null(s);
	expect_message(f->ctx, "no_such_def");
	s = tc_module_emit(f->m, "matmul", "canonical");
	assert_non_null(s);
	tc_string_free(s);
}

/* A success after a failure clears the message. */
static void test_success_clears_error(void **state)
{
	fixture *f = *state;
	assert_null(tc_compile(f->m, "no_such_def", f->ins, 2, NULL));
	expect_some_message(f->ctx);
	tc_kernel *k = compile_matmul(f);
	assert_string_equal(tc_context_error(f->ctx), "");
	tc_kernel_free(k);
}

/* ---- tc_compile: inputs that do not fit the def ---- */

static void test_compile_wrong_dtype(void **state)
{
	fixture *f = *state;
	tu_tensor Ai;
	tu_tensor_init(&Ai, TU_I32, (int64_t[]){3, 4}, 2);
	const DLTensor *ins[2] = {&Ai.dl, &f->B.dl};
	assert_null(tc_compile(f->m, "matmul", ins, 2, NULL));
	expect_message(f->ctx, "A", "float32", "int32");
	tu_tensor_fini(&Ai);
}

/* bfloat16 is DLPack's kDLBfloat with 16 bits: named by tc_dtype_parse and
 * tc_dtype_str, and not confused with float16 (kDLFloat, 16 bits) either
 * way when a kernel is compiled. */
static void test_bfloat16_is_kDLBfloat(void **state)
{
	fixture *f = *state;
	DLDataType dt = {0, 0, 0};
	tu_tensor H, B;
	tc_module *m;
	assert_int_equal(tc_dtype_parse("bfloat16", &dt), 0);
	assert_int_equal(dt.code, kDLBfloat);
	assert_int_equal(dt.bits, 16);
	assert_int_equal(dt.lanes, 1);
	assert_string_equal(tc_dtype_str(dt), "bfloat16");
	dt.code = kDLFloat;
	assert_string_equal(tc_dtype_str(dt), "float16");
	m = tc_module_parse(f->ctx, "def h(bfloat16(N) X) -> (O) { O(i) = X(i) * 2 }\n"
				    "def g(float16(N) X) -> (O) { O(i) = X(i) * 2 }\n", "bf.tc");
	assert_non_null(m);
	tu_tensor_init(&H, TU_F16, (int64_t[]){4}, 1);
	tu_tensor_init(&B, TU_BF16, (int64_t[]){4}, 1);
	const DLTensor *hin[1] = {&H.dl}, *bin[1] = {&B.dl};
	assert_null(tc_compile(m, "h", hin, 1, NULL));
	expect_message(f->ctx, "X", "bfloat16", "float16");
	assert_null(tc_compile(m, "g", bin, 1, NULL));
	expect_message(f->ctx, "X", "float16", "bfloat16");
	tu_tensor_fini(&H);
	tu_tensor_fini(&B);
	tc_module_free(m);
}

/* Every type name parses to a DLPack type that tc_dtype_str names back,
 * and DLPack types tcomp has no type for (odd widths, vector lanes,
 * 8-bit floats, unknown codes) have no name. */
static void test_every_dtype_round_trips(void **state)
{
	static const char *names[] = {"bool", "int8", "int16", "int32", "int64", "uint8",
		"uint16", "uint32", "uint64", "float16", "float32", "float64", "bfloat16"};
	static const DLDataType none[] = {{kDLInt, 24, 1}, {kDLInt, 12, 1}, {kDLUInt, 128, 1},
		{kDLFloat, 8, 1}, {kDLFloat, 24, 1}, {kDLBfloat, 32, 1}, {TC_DL_BOOL, 16, 1},
		{kDLFloat, 32, 4}, {kDLInt, 0, 1}, {kDLComplex, 64, 1}, {99, 32, 1}};
	DLDataType dt;
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(tc_dtype_parse(names[i], &dt), 0);
		assert_int_equal(dt.lanes, 1);
		assert_non_null(tc_dtype_str(dt));
		assert_string_equal(tc_dtype_str(dt), names[i]);
	}
	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		assert_null(tc_dtype_str(none[i]));
}

static void test_compile_wrong_rank(void **state)
{
	fixture *f = *state;
	tu_tensor A3;
	tu_tensor_init(&A3, TU_F32, (int64_t[]){3, 4, 1}, 3);
	const DLTensor *ins[2] = {&A3.dl, &f->B.dl};
	assert_null(tc_compile(f->m, "matmul", ins, 2, NULL));
	expect_message(f->ctx, "A");
	expect_message_any(f->ctx, "rank", "dimension", "indices");
	tu_tensor_fini(&A3);
}

/* A(3,45) with B(46,5): the message names the size K and both values. */
static void test_compile_mismatched_sizes(void **state)
{
	fixture *f = *state;
	tu_tensor A, B;
	tu_tensor_init(&A, TU_F32, (int64_t[]){3, 45}, 2);
	tu_tensor_init(&B, TU_F32, (int64_t[]){46, 5}, 2);
	const DLTensor *ins[2] = {&A.dl, &B.dl};
	assert_null(tc_compile(f->m, "matmul", ins, 2, NULL));
	expect_message(f->ctx, "size K", "45", "46");
	tu_tensor_fini(&A);
	tu_tensor_fini(&B);
}

static void test_compile_missing_entry(void **state)
{
	fixture *f = *state;
	assert_null(tc_compile(f->m, "no_such_def", f->ins, 2, NULL));
	expect_message(f->ctx, "no_such_def");
}

static void test_compile_too_few_inputs(void **state)
{
	fixture *f = *state;
	assert_null(tc_compile(f->m, "matmul", f->ins, 1, NULL));
	expect_message(f->ctx, "2", "1");
	expect_message_any(f->ctx, "input", "tensor", "argument");
}

static void test_compile_too_many_inputs(void **state)
{
	fixture *f = *state;
	const DLTensor *ins[3] = {&f->A.dl, &f->B.dl, &f->C.dl};
	assert_null(tc_compile(f->m, "matmul", ins, 3, NULL));
	expect_message(f->ctx, "2", "3");
	expect_message_any(f->ctx, "input", "tensor", "argument");
}

static void test_compile_non_cpu_tensor(void **state)
{
	fixture *f = *state;
	tu_tensor A;
	tu_tensor_init(&A, TU_F32, (int64_t[]){3, 4}, 2);
	A.dl.device.device_type = kDLCUDA;
	const DLTensor *ins[2] = {&A.dl, &f->B.dl};
	assert_null(tc_compile(f->m, "matmul", ins, 2, NULL));
	expect_message_any(f->ctx, "cpu", "device");
	tu_tensor_fini(&A);
}

/* Sizes that make an inferred range empty (K > N in conv1d). */
static void test_compile_empty_range(void **state)
{
	fixture *f = *state;
	tu_tensor X, W;
	tu_tensor_init(&X, TU_F32, (int64_t[]){3}, 1);
	tu_tensor_init(&W, TU_F32, (int64_t[]){5}, 1);
	const DLTensor *ins[2] = {&X.dl, &W.dl};
	tc_kernel *k = tc_compile(f->m, "conv1d", ins, 2, NULL);
	if (k) { /* a run-time check is also acceptable, but it must fail */
		tu_tensor Y;
		tu_tensor_init(&Y, TU_F32, (int64_t[]){1}, 1);
		DLTensor *outs[1] = {&Y.dl};
		assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), -1);
		tu_tensor_fini(&Y);
		tc_kernel_free(k);
	}
	expect_message_any(f->ctx, "empty", "range");
	tu_tensor_fini(&X);
	tu_tensor_fini(&W);
}

/* ---- NULL pointers ---- */

static void test_null_pointers(void **state)
{
	fixture *f = *state;
	/* No context to report to: just fail. */
	assert_null(tc_module_parse(NULL, api_source, "x.tc"));
	assert_null(tc_module_load(NULL, TC_SOURCE_DIR "/tests/corpus/matmul.tc"));
	assert_null(tc_compile(NULL, "matmul", f->ins, 2, NULL));
	assert_int_equal(tc_kernel_run(NULL, f->ins, 2, f->outs, 1), -1);
	assert_int_equal(tc_module_num_defs(NULL) <= 0, 1);
	assert_null(tc_module_signature(NULL, "matmul"));
	char hash[17];
	assert_int_equal(tc_module_hash(NULL, "matmul", hash), -1);
	DLDataType dt;
	int ndim;
	int64_t shape[8];
	assert_int_equal(tc_kernel_output_shape(NULL, 0, &dt, &ndim, shape), -1);
	/* Freeing NULL is a no-op, like free(). */
	tc_kernel_free(NULL);
	tc_module_free(NULL);
	tc_context_free(NULL);
	tc_options_free(NULL);
	tc_string_free(NULL);

	/* With a context: a message. */
	assert_null(tc_module_parse(f->ctx, NULL, "x.tc"));
	expect_some_message(f->ctx);
	assert_null(tc_module_load(f->ctx, NULL));
	expect_some_message(f->ctx);

	assert_null(tc_compile(f->m, NULL, f->ins, 2, NULL));
	expect_message_any(f->ctx, "null", "entry");
	assert_null(tc_compile(f->m, "matmul", NULL, 2, NULL));
	expect_message_any(f->ctx, "null", "input");
	const DLTensor *with_null[2] = {&f->A.dl, NULL};
	assert_null(tc_compile(f->m, "matmul", with_null, 2, NULL));
	expect_message_any(f->ctx, "null", "input 1", "B");

	/* A tensor whose shape or data pointer is NULL. */
	tu_tensor A;
	tu_tensor_init(&A, TU_F32, (int64_t[]){3, 4}, 2);
	A.dl.shape = NULL;
	const DLTensor *no_shape[2] = {&A.dl, &f->B.dl};
	assert_null(tc_compile(f->m, "matmul", no_shape, 2, NULL));
	expect_some_message(f->ctx);
	tu_tensor_fini(&A);

	tc_kernel *k = compile_matmul(f);
	assert_int_equal(tc_kernel_run(k, NULL, 2, f->outs, 1), -1);
	expect_some_message(f->ctx);
	assert_int_equal(tc_kernel_run(k, with_null, 2, f->outs, 1), -1);
	expect_message_any(f->ctx, "null", "input 1", "B");
	assert_int_equal(tc_kernel_run(k, f->ins, 2, NULL, 1), -1);
	expect_some_message(f->ctx);
	DLTensor *null_out[1] = {NULL};
	assert_int_equal(tc_kernel_run(k, f->ins, 2, null_out, 1), -1);
	expect_message_any(f->ctx, "null", "output");
	tu_tensor C;
	tu_tensor_init(&C, TU_F32, (int64_t[]){3, 5}, 2);
	C.dl.data = NULL;
	DLTensor *no_data[1] = {&C.dl};
	assert_int_equal(tc_kernel_run(k, f->ins, 2, no_data, 1), -1);
	expect_some_message(f->ctx);
	tu_tensor_fini(&C);
	/* Output shape queries with bad arguments. */
	assert_int_equal(tc_kernel_output_shape(k, 1, &dt, &ndim, shape), -1);
	assert_int_equal(tc_kernel_output_shape(k, -1, &dt, &ndim, shape), -1);
	/* The kernel still works after all that. */
	assert_int_equal(tc_kernel_run(k, f->ins, 2, f->outs, 1), 0);
	check_matmul_result(f);
	tc_kernel_free(k);
}

/* ---- strides ---- */

/* Explicit strides equal to the compact row-major ones are accepted. */
static void test_compact_explicit_strides_accepted(void **state)
{
	fixture *f = *state;
	int64_t sa[2] = {4, 1}, sb[2] = {5, 1}, sc[2] = {5, 1};
	f->A.dl.strides = sa;
	f->B.dl.strides = sb;
	f->C.dl.strides = sc;
	tc_kernel *k = compile_matmul(f);
	tu_poison(&f->C);
	if (tc_kernel_run(k, f->ins, 2, f->outs, 1) != 0)
		fail_msg("run with compact strides failed:\n%s", tc_context_error(f->ctx));
	check_matmul_result(f);
	tc_kernel_free(k);
	f->A.dl.strides = f->B.dl.strides = f->C.dl.strides = NULL;
}

/* Column-major A and C are taken (tc_kernel_run copies them: see
 * tests/test_tensors.c for every layout): A's buffer holds A by columns,
 * C's is written by columns. */
static void test_non_compact_strides_accepted(void **state)
{
	fixture *f = *state;
	int64_t a_col_major[2] = {1, 3}, c_col_major[2] = {1, 3};
	float rows[12], *A = f->A.data, *B = f->B.data, *C = f->C.data;
	tc_kernel *k = compile_matmul(f);
	memcpy(rows, A, sizeof(rows));
	for (int m = 0; m < 3; m++) /* the same matrix, stored by columns */
		for (int r = 0; r < 4; r++)
			A[r * 3 + m] = rows[m * 4 + r];
	f->A.dl.strides = a_col_major;
	f->C.dl.strides = c_col_major;
	tu_poison(&f->C);
	if (tc_kernel_run(k, f->ins, 2, f->outs, 1) != 0)
		fail_msg("run with column-major A and C failed:\n%s", tc_context_error(f->ctx));
	for (int m = 0; m < 3; m++)
		for (int n = 0; n < 5; n++) {
			float acc = 0;
			for (int r = 0; r < 4; r++)
				acc += rows[m * 4 + r] * B[r * 5 + n];
			assert_float_equal(C[n * 3 + m], acc, 1e-5);
		}
	f->A.dl.strides = f->C.dl.strides = NULL;
	memcpy(A, rows, sizeof(rows));
	tc_kernel_free(k);
}

/* ---- tc_kernel_run: tensors that do not fit the compiled kernel ---- */

static void test_run_with_other_shapes(void **state)
{
	fixture *f = *state;
	tc_kernel *k = compile_matmul(f);
	/* Consistent among themselves (K = 4) but not the compiled N = 5. */
	tu_tensor B6, C6;
	tu_tensor_init(&B6, TU_F32, (int64_t[]){4, 6}, 2);
	tu_tensor_init(&C6, TU_F32, (int64_t[]){3, 6}, 2);
	const DLTensor *ins[2] = {&f->A.dl, &B6.dl};
	DLTensor *outs[1] = {&C6.dl};
	assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), -1);
	expect_message(f->ctx, "6", "5");
	expect_message_any(f->ctx, "shape", "compiled", "size");
	/* Right inputs, output of the wrong shape. */
	assert_int_equal(tc_kernel_run(k, f->ins, 2, outs, 1), -1);
	expect_message_any(f->ctx, "shape", "compiled", "size");
	/* Output of the wrong dtype. */
	tu_tensor Cd;
	tu_tensor_init(&Cd, TU_F64, (int64_t[]){3, 5}, 2);
	DLTensor *outs_d[1] = {&Cd.dl};
	assert_int_equal(tc_kernel_run(k, f->ins, 2, outs_d, 1), -1);
	expect_message(f->ctx, "float64");
	/* Wrong tensor counts. */
	assert_int_equal(tc_kernel_run(k, f->ins, 1, f->outs, 1), -1);
	expect_some_message(f->ctx);
	assert_int_equal(tc_kernel_run(k, f->ins, 2, f->outs, 0), -1);
	expect_some_message(f->ctx);
	tu_tensor_fini(&B6);
	tu_tensor_fini(&C6);
	tu_tensor_fini(&Cd);
	tc_kernel_free(k);
}

/* An out-of-range gather index is reported at run time with the location
 * of the read in the source (line 5 of api.tc), and the kernel stays usable. */
static void test_gather_out_of_range_is_a_runtime_error(void **state)
{
	fixture *f = *state;
	tu_tensor LUT, I, O;
	tu_tensor_init(&LUT, TU_F32, (int64_t[]){7, 3}, 2);
	tu_tensor_init(&I, TU_I32, (int64_t[]){4}, 1);
	tu_tensor_init(&O, TU_F32, (int64_t[]){4, 3}, 2);
	float *lut = LUT.data;
	for (int i = 0; i < 21; i++)
		lut[i] = (float)i + 0.5f;
	int32_t *idx = I.data;
	idx[0] = 2;
	idx[1] = 6;
	idx[2] = 7; /* one past the end */
	idx[3] = 0;
	const DLTensor *ins[2] = {&LUT.dl, &I.dl};
	DLTensor *outs[1] = {&O.dl};
	tc_kernel *k = tc_compile(f->m, "gather", ins, 2, NULL);
	if (!k)
		fail_msg("tc_compile(gather) failed:\n%s", tc_context_error(f->ctx));
	assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), -1);
	expect_location(f->ctx, "api.tc", 5);
	expect_message_any(f->ctx, "out of", "bound", "range");
	expect_message(f->ctx, "7", "LUT");

	idx[2] = -1; /* negative */
	assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), -1);
	expect_location(f->ctx, "api.tc", 5);
	expect_message(f->ctx, "-1");

	idx[2] = 5; /* valid again: the same kernel runs */
	tu_poison(&O);
	if (tc_kernel_run(k, ins, 2, outs, 1) != 0)
		fail_msg("valid gather failed:\n%s", tc_context_error(f->ctx));
	const float *o = O.data;
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 3; j++)
			assert_float_equal(o[i * 3 + j], lut[idx[i] * 3 + j], 0);
	tc_kernel_free(k);
	tu_tensor_fini(&LUT);
	tu_tensor_fini(&I);
	tu_tensor_fini(&O);
}

/* An int64 index beyond the int32 range is out of bounds, not truncated
 * (2^32 + 1 would wrap to 1, a valid index). */
static void test_int64_gather_index_not_truncated(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def g(float(R,C) A, int64(B) J) -> (O) {\n"
		"    O(i) = A(0, J(i))\n"
		"}\n", "g64.tc");
	assert_non_null(m);
	tu_tensor A, J, O;
	tu_tensor_init(&A, TU_F32, (int64_t[]){2, 3}, 2);
	tu_tensor_init(&J, TU_I64, (int64_t[]){1}, 1);
	tu_tensor_init(&O, TU_F32, (int64_t[]){1}, 1);
	((int64_t *)J.data)[0] = 4294967297LL;
	const DLTensor *ins[2] = {&A.dl, &J.dl};
	DLTensor *outs[1] = {&O.dl};
	tc_kernel *k = tc_compile(m, "g", ins, 2, NULL);
	assert_non_null(k);
	assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), -1);
	expect_location(f->ctx, "g64.tc", 2);
	expect_message(f->ctx, "4294967297");
	tc_kernel_free(k);
	tc_module_free(m);
	tu_tensor_fini(&A);
	tu_tensor_fini(&J);
	tu_tensor_fini(&O);
}

/* Integer division by zero is a run-time error at the division, not SIGFPE;
 * INT32_MIN / -1 does not trap either. */
static void test_integer_division_by_zero(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def dv(int32(N) A, int32(N) B) -> (Q) {\n"
		"    Q(i) = A(i) / B(i)\n"
		"}\n", "div.tc");
	assert_non_null(m);
	tu_tensor A, B, Q;
	tu_tensor_init(&A, TU_I32, (int64_t[]){2}, 1);
	tu_tensor_init(&B, TU_I32, (int64_t[]){2}, 1);
	tu_tensor_init(&Q, TU_I32, (int64_t[]){2}, 1);
	int32_t *a = A.data, *b = B.data;
	a[0] = 7;
	b[0] = 0;
	a[1] = INT32_MIN;
	b[1] = -1;
	const DLTensor *ins[2] = {&A.dl, &B.dl};
	DLTensor *outs[1] = {&Q.dl};
	tc_kernel *k = tc_compile(m, "dv", ins, 2, NULL);
	assert_non_null(k);
	assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), -1);
	expect_location(f->ctx, "div.tc", 2);
	expect_message_any(f->ctx, "division by zero", "divide by zero", "by zero");
	b[0] = 2;
	assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), 0);
	assert_int_equal(((int32_t *)Q.data)[0], 3);
	tc_kernel_free(k);
	tc_module_free(m);
	tu_tensor_fini(&A);
	tu_tensor_fini(&B);
	tu_tensor_fini(&Q);
}

/* DLPack's byte_offset is added to data. */
static void test_byte_offset_honoured(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def twice(float(N) A) -> (O) {\n    O(i) = A(i) * 2\n}\n", "off.tc");
	assert_non_null(m);
	tu_tensor X, Y;
	tu_tensor_init(&X, TU_F32, (int64_t[]){6}, 1);
	tu_tensor_init(&Y, TU_F32, (int64_t[]){2}, 1);
	for (int i = 0; i < 6; i++)
		((float *)X.data)[i] = (float)(i + 1);
	X.shape[0] = 2; /* a view of elements 4 and 5 */
	X.dl.byte_offset = 4 * sizeof(float);
	const DLTensor *ins[1] = {&X.dl};
	DLTensor *outs[1] = {&Y.dl};
	tc_kernel *k = tc_compile(m, "twice", ins, 1, NULL);
	assert_non_null(k);
	assert_int_equal(tc_kernel_run(k, ins, 1, outs, 1), 0);
	assert_float_equal(((float *)Y.data)[0], 10, 0);
	assert_float_equal(((float *)Y.data)[1], 12, 0);
	tc_kernel_free(k);
	tc_module_free(m);
	tu_tensor_fini(&X);
	tu_tensor_fini(&Y);
}

/* An output sharing memory with an input is refused before anything runs
 * (generated code keeps partial results in registers and reorders
 * accesses); disjoint views of one buffer are fine. */
static void test_overlapping_output_refused(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def twice(float(N) A) -> (O) {\n    O(i) = A(i) * 2\n}\n", "overlap.tc");
	assert_non_null(m);
	tu_tensor X, Y;
	tu_tensor_init(&X, TU_F32, (int64_t[]){8}, 1);
	tu_tensor_init(&Y, TU_F32, (int64_t[]){4}, 1);
	for (int i = 0; i < 8; i++)
		((float *)X.data)[i] = (float)(i + 1);
	X.shape[0] = 4; /* X: elements 0..3 of the buffer */
	Y.dl.data = X.data; /* Y: elements 2..5 of the same buffer */
	Y.dl.byte_offset = 2 * sizeof(float);
	const DLTensor *ins[1] = {&X.dl};
	DLTensor *outs[1] = {&Y.dl};
	tc_kernel *k = tc_compile(m, "twice", ins, 1, NULL);
	assert_non_null(k);
	assert_int_equal(tc_kernel_run(k, ins, 1, outs, 1), -1);
	expect_message(f->ctx, "output 'O' shares memory with input 'A'");
	for (int i = 0; i < 8; i++) /* nothing was written */
		assert_float_equal(((float *)X.data)[i], (float)(i + 1), 0);
	Y.dl.byte_offset = 4 * sizeof(float); /* elements 4..7: disjoint */
	assert_int_equal(tc_kernel_run(k, ins, 1, outs, 1), 0);
	for (int i = 0; i < 4; i++) {
		assert_float_equal(((float *)X.data)[i], (float)(i + 1), 0);
		assert_float_equal(((float *)X.data)[4 + i], (float)(2 * (i + 1)), 0);
	}
	tc_kernel_free(k);
	tc_module_free(m);
	Y.dl.data = Y.data;
	tu_tensor_fini(&X);
	tu_tensor_fini(&Y);
}

/* Tensors DLPack can describe but tcomp cannot take. */
static void test_compile_bad_tensor_descriptions(void **state)
{
	fixture *f = *state;
	f->A.dl.dtype.lanes = 2;
	assert_null(tc_compile(f->m, "matmul", f->ins, 2, NULL));
	expect_message_any(f->ctx, "lanes", "dtype");
	f->A.dl.dtype.lanes = 1;

	f->A.shape[0] = -1;
	assert_null(tc_compile(f->m, "matmul", f->ins, 2, NULL));
	expect_message(f->ctx, "-1");
	expect_message_any(f->ctx, "negative", "extent", "size");

	/* an extent of 0 is an empty tensor, not an error (tests/test_tensors.c) */
	f->A.shape[0] = 0;
	tc_kernel *k = tc_compile(f->m, "matmul", f->ins, 2, NULL);
	if (!k)
		fail_msg("an empty A is refused:\n%s", tc_context_error(f->ctx));
	int64_t shape[2];
	assert_int_equal(tc_kernel_output_shape(k, 0, NULL, NULL, shape), 0);
	assert_int_equal(shape[0], 0);
	assert_int_equal(shape[1], 5);
	tc_kernel_free(k);
	f->A.shape[0] = 3;
}

/* One size naming two dimensions of the same tensor must agree. */
static void test_compile_square_size_mismatch(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def diag(float(N,N) A) -> (d) {\n    d(i) = A(i,i)\n}\n", "sq.tc");
	assert_non_null(m);
	tu_tensor A;
	tu_tensor_init(&A, TU_F32, (int64_t[]){3, 4}, 2);
	const DLTensor *ins[1] = {&A.dl};
	assert_null(tc_compile(m, "diag", ins, 1, NULL));
	expect_message(f->ctx, "size N", "3", "4");
	tc_module_free(m);
	tu_tensor_fini(&A);
}

/* A constant extent in a parameter's type is checked. */
static void test_compile_constant_extent_mismatch(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def g(float(3,H) I) -> (O) {\n    O(h) = I(0,h) + I(2,h)\n}\n", "const.tc");
	assert_non_null(m);
	tu_tensor I;
	tu_tensor_init(&I, TU_F32, (int64_t[]){4, 5}, 2);
	const DLTensor *ins[1] = {&I.dl};
	assert_null(tc_compile(m, "g", ins, 1, NULL));
	expect_message(f->ctx, "I", "3", "4");
	tc_module_free(m);
	tu_tensor_fini(&I);
}

/* A declared output shape that disagrees with the inferred one is refused
 * (here (M,N) declared, (N,M) inferred: only N == M may compile). */
static void test_declared_output_shape_mismatch(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def w(float(N,M) A) -> (float(M,N) O) {\n    O(i,j) = A(i,j)\n}\n", "decl.tc");
	if (!m) { /* refusing it at parse time is fine too */
		expect_message(f->ctx, "decl.tc:");
		expect_message_any(f->ctx, "declared");
		return;
	}
	tu_tensor A;
	tu_tensor_init(&A, TU_F32, (int64_t[]){3, 4}, 2);
	const DLTensor *ins[1] = {&A.dl};
	assert_null(tc_compile(m, "w", ins, 1, NULL));
	expect_location(f->ctx, "decl.tc", 2);
	expect_message_any(f->ctx, "declared");
	tc_module_free(m);
	tu_tensor_fini(&A);
}

/* A kernel keeps what it needs: it runs after its module is freed. */
static void test_kernel_outlives_module(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx, api_source, "api.tc");
	assert_non_null(m);
	tc_kernel *k = tc_compile(m, "matmul", f->ins, 2, NULL);
	assert_non_null(k);
	tc_module_free(m);
	tu_poison(&f->C);
	assert_int_equal(tc_kernel_run(k, f->ins, 2, f->outs, 1), 0);
	check_matmul_result(f);
	tc_kernel_free(k);
}

/* ---- front-end diagnostics through tc_module_parse / tc_module_load ---- */

/* The caret under the culprit lines up with it in the quoted source line. */
static void expect_caret_under(const char *msg, const char *culprit)
{
	const char *src = strstr(msg, culprit);
	if (!src)
		fail_msg("the message does not quote \"%s\":\n%s", culprit, msg);
	const char *line = src;
	while (line > msg && line[-1] != '\n')
		line--;
	const char *next = strchr(src, '\n');
	if (!next)
		fail_msg("no line after the quoted source:\n%s", msg);
	next++;
	const char *caret = strchr(next, '^');
	const char *eol = strchr(next, '\n');
	if (!caret || (eol && caret > eol))
		fail_msg("no caret line under the quoted source:\n%s", msg);
	if (caret - next != src - line)
		fail_msg("caret at column %d but \"%s\" at column %d:\n%s", (int)(caret - next),
			culprit, (int)(src - line), msg);
}

static void test_parse_error_has_location_and_caret(void **state)
{
	fixture *f = *state;
	const char *bad =
		"def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
		"    C(m,n) +=! A(m,k) * B(k,n,1)\n"
		"}\n";
	assert_null(tc_module_parse(f->ctx, bad, "bad.tc"));
	/* B is at column 25 of line 2. */
	expect_message(f->ctx, "bad.tc:2:25: error:");
	expect_caret_under(tc_context_error(f->ctx), "B(k,n,1)");
}

static void test_syntax_error(void **state)
{
	fixture *f = *state;
	const char *bad =
		"def f(float(N) A) -> (O) {\n"
		"    O(i) = A(i) +* 2\n"
		"}\n";
	assert_null(tc_module_parse(f->ctx, bad, "syntax.tc"));
	expect_message(f->ctx, "syntax.tc:2:", ": error:", "^");
	expect_message_any(f->ctx, "expected");
}

/* Errors accumulate: two bad defs give two errors. */
static void test_several_errors_reported(void **state)
{
	fixture *f = *state;
	const char *bad =
		"def f(float(N) A) -> (O) {\n"
		"    O(i) = A(i) + undefined_thing\n"
		"}\n"
		"def g(float(N) A) -> (O) {\n"
		"    O(i) = A(i, i)\n"
		"}\n";
	assert_null(tc_module_parse(f->ctx, bad, "two.tc"));
	expect_message(f->ctx, "two.tc:2:", "two.tc:5:");
}

static void test_lexical_errors(void **state)
{
	fixture *f = *state;
	assert_null(tc_module_parse(f->ctx,
		"def f(float(N) A) -> (O) {\n    O(i) = A(i) * inf\n}\n", "lex.tc"));
	expect_message(f->ctx, "lex.tc:2:", ": error:");
	assert_null(tc_module_parse(f->ctx,
		"def f(float(N) A) -> (O) {\n    O(i) = A(i) $ 2\n}\n", "lex.tc"));
	expect_message(f->ctx, "lex.tc:2:", ": error:");
}

static void test_range_inference_error(void **state)
{
	fixture *f = *state;
	assert_null(tc_module_parse(f->ctx,
		"def f(float(N) A) -> (O) {\n    O(i) = 2\n}\n", "range.tc"));
	expect_message(f->ctx, "range.tc:2:", "'i'");
}

static void test_narrowing_needs_cast(void **state)
{
	fixture *f = *state;
	assert_null(tc_module_parse(f->ctx,
		"def f(float(N) A) -> (int32(N) O) {\n    O(i) = A(i)\n}\n", "narrow.tc"));
	expect_message(f->ctx, "narrow.tc:2:", "int32", "float32");
}

static void test_write_to_input_rejected(void **state)
{
	fixture *f = *state;
	assert_null(tc_module_parse(f->ctx,
		"def w(float(N) A) -> (O) {\n    A(i) = 1 where i in 0:N\n    O(i) = A(i)\n}\n",
		"ro.tc"));
	expect_message(f->ctx, "ro.tc:2:", ": error:", "'A'");
	expect_message_any(f->ctx, "read-only", "input");
}

/* tcomp: a left-hand range that does not start at 0 is an error. */
static void test_lhs_range_must_start_at_zero(void **state)
{
	fixture *f = *state;
	assert_null(tc_module_parse(f->ctx,
		"def s(float(N) A) -> (O) {\n    O(i) = A(i) where i in 1:N\n}\n", "lhs.tc"));
	expect_message(f->ctx, "lhs.tc:2:", ": error:", "'i'");
	expect_message_any(f->ctx, "start at 0", "starts at 0", "start at zero");
}

/* Warnings do not stop a module; they are available after the parse. */
static void test_warnings_reported(void **state)
{
	fixture *f = *state;
	tc_module *m = tc_module_parse(f->ctx,
		"def acc(float(N,M) A) -> (float(N) S) {\n    S(i) += A(i,j)\n}\n", "warn.tc");
	assert_non_null(m);
	assert_string_equal(tc_context_error(f->ctx), "");
	const char *w = tc_context_warnings(f->ctx);
	assert_true(tu_contains(w, "warn.tc:2:"));
	assert_true(tu_contains(w, "warning:"));
	assert_true(tu_contains(w, "+=!"));
	tc_module_free(m);
	/* A clean parse clears them. */
	m = tc_module_parse(f->ctx, api_source, "api.tc");
	assert_non_null(m);
	assert_string_equal(tc_context_warnings(f->ctx), "");
	tc_module_free(m);
}

static void test_load_missing_file(void **state)
{
	fixture *f = *state;
	const char *path = TC_SOURCE_DIR "/tests/corpus/no_such_file.tc";
	assert_null(tc_module_load(f->ctx, path));
	expect_message(f->ctx, "no_such_file.tc");
}

/* ---- options ---- */

static void test_options(void **state)
{
	fixture *f = *state;
	tc_options *o = tc_options_new();
	assert_non_null(o);
	assert_string_equal(tc_options_get(o, "target"), "cpu"); /* the default */

	assert_int_equal(tc_options_set(o, "no_such_option", "1", f->ctx), -1);
	expect_message(f->ctx, "no_such_option");
	assert_int_equal(tc_options_set(o, "target", "no_such_target", f->ctx), -1);
	expect_message(f->ctx, "target", "no_such_target");
	/* ctx may be NULL; NULL arguments fail cleanly. */
	assert_int_equal(tc_options_set(o, "no_such_option", "1", NULL), -1);
	assert_int_equal(tc_options_set(NULL, "target", "interp", f->ctx), -1);
	assert_int_equal(tc_options_set(o, NULL, "interp", f->ctx), -1);
	assert_int_equal(tc_options_set(o, "target", NULL, f->ctx), -1);
	/* The failed calls left the option alone. */
	assert_string_equal(tc_options_get(o, "target"), "cpu");

	assert_int_equal(tc_options_set(o, "target", "interp", f->ctx), 0);
	tc_kernel *k = tc_compile(f->m, "matmul", f->ins, 2, o);
	if (!k)
		fail_msg("tc_compile with target=interp failed:\n%s", tc_context_error(f->ctx));
	tu_poison(&f->C);
	assert_int_equal(tc_kernel_run(k, f->ins, 2, f->outs, 1), 0);
	check_matmul_result(f);
	tc_kernel_free(k);

	char *table = tc_options_describe();
	assert_non_null(table);
	assert_true(tu_contains(table, "target"));
	tc_string_free(table);
	tc_options_free(o);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_matmul_compiles_and_runs),
		T(test_module_introspection),
		T(test_output_overwritten),
		T(test_hash_ignores_names),
		T(test_emit_unknown_stage_or_entry),
		T(test_success_clears_error),
		T(test_bfloat16_is_kDLBfloat),
		T(test_every_dtype_round_trips),
		T(test_compile_wrong_dtype),
		T(test_compile_wrong_rank),
		T(test_compile_mismatched_sizes),
		T(test_compile_missing_entry),
		T(test_compile_too_few_inputs),
		T(test_compile_too_many_inputs),
		T(test_compile_non_cpu_tensor),
		T(test_compile_empty_range),
		T(test_null_pointers),
		T(test_compact_explicit_strides_accepted),
		T(test_non_compact_strides_accepted),
		T(test_run_with_other_shapes),
		T(test_gather_out_of_range_is_a_runtime_error),
		T(test_int64_gather_index_not_truncated),
		T(test_integer_division_by_zero),
		T(test_byte_offset_honoured),
		T(test_overlapping_output_refused),
		T(test_compile_bad_tensor_descriptions),
		T(test_compile_square_size_mismatch),
		T(test_compile_constant_extent_mismatch),
		T(test_declared_output_shape_mismatch),
		T(test_kernel_outlives_module),
		T(test_parse_error_has_location_and_caret),
		T(test_syntax_error),
		T(test_several_errors_reported),
		T(test_lexical_errors),
		T(test_range_inference_error),
		T(test_narrowing_needs_cast),
		T(test_write_to_input_rejected),
		T(test_lhs_range_must_start_at_zero),
		T(test_warnings_reported),
		T(test_load_missing_file),
		T(test_options),
	};
	return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
