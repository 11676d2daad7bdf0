/* Every public function of include/tcomp.h called with NULL for each of its
 * pointer parameters, one at a time, the others valid: each returns the
 * error or does the no-op its comment in tcomp.h documents, and never
 * crashes (CI runs this under ASan and UBSan, which also catch a NULL
 * passed on to memset or strcmp).  Where a call fails with a context at
 * hand, the context's error says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "tcomp.h"
#include "lang/util.h"
#include "tests/testutil.h"

static const char src[] = "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
			  "  C(m,n) +=! A(m,r) * B(r,n)\n"
			  "}\n";

/* The error of ctx is not empty. */
static void says_why(tc_context *ctx)
{
	assert_true(strlen(tc_context_error(ctx)) > 0);
}

static void dtypes_and_contexts(void **state)
{
	DLDataType dt;
	(void)state;
	assert_int_equal(tc_dtype_parse(NULL, &dt), -1);
	assert_int_equal(tc_dtype_parse("float32", NULL), -1);
	tc_context_free(NULL);
	assert_string_equal(tc_context_error(NULL), "error: no context (NULL)\n");
	assert_string_equal(tc_context_warnings(NULL), "");
	assert_int_equal(tc_context_set_threads(NULL, 2), -1);
	assert_int_equal(tc_context_threads(NULL), -1);
	assert_int_equal(tc_context_set_cache(NULL, "x.sqlite"), -1);
	assert_int_equal(tc_context_set_cache_result_options(NULL, 1), -1);
	tc_string_free(NULL);
}

static void modules(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m;
	DLDataType dt;
	int ni, no, nd;
	char hash[17];
	(void)state;
	assert_null(tc_module_parse(NULL, src, "t.tc"));
	assert_null(tc_module_parse(ctx, NULL, "t.tc"));
	says_why(ctx);
	m = tc_module_parse(ctx, src, NULL); /* a NULL filename: "<string>" */
	assert_non_null(m);
	tc_module_free(m);
	assert_null(tc_module_load(NULL, "t.tc"));
	assert_null(tc_module_load(ctx, NULL));
	says_why(ctx);
	tc_module_free(NULL);
	m = tc_module_parse(ctx, src, "t.tc");
	assert_non_null(m);
	assert_int_equal(tc_module_num_defs(NULL), 0);
	assert_null(tc_module_def_name(NULL, 0));
	assert_int_equal(tc_module_def_arity(NULL, "mm", &ni, &no), -1);
	assert_int_equal(tc_module_def_arity(m, NULL, &ni, &no), -1);
	says_why(ctx);
	assert_int_equal(tc_module_def_arity(m, "mm", NULL, NULL), 0); /* counts not wanted */
	assert_int_equal(tc_module_input_type(NULL, "mm", 0, &dt, &nd), -1);
	assert_int_equal(tc_module_input_type(m, NULL, 0, &dt, &nd), -1);
	assert_int_equal(tc_module_input_type(m, "mm", 0, NULL, NULL), 0);
	assert_null(tc_module_tensor_name(NULL, "mm", 0));
	assert_int_equal(tc_module_output_overwritten(NULL, "mm", 0), -1);
	assert_int_equal(tc_module_output_overwritten(m, NULL, 0), -1);
	assert_null(tc_module_tensor_name(m, NULL, 0));
	assert_null(tc_module_signature(NULL, "mm"));
	assert_null(tc_module_signature(m, NULL));
	says_why(ctx);
	assert_null(tc_module_emit(NULL, "mm", "ir"));
	assert_null(tc_module_emit(m, NULL, "ir"));
	assert_null(tc_module_emit(m, "mm", NULL));
	says_why(ctx);
	assert_int_equal(tc_module_hash(NULL, "mm", hash), -1);
	assert_int_equal(tc_module_hash(m, NULL, hash), -1);
	assert_int_equal(tc_module_hash(m, "mm", NULL), -1);
	says_why(ctx);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* tc_module_vmap: NULL m gives NULL; a NULL entry, list or size name an
 * error saying why. */
static void batching(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "t.tc");
	char *t;
	(void)state;
	assert_non_null(m);
	assert_null(tc_module_vmap(NULL, "mm", "A", "E"));
	assert_null(tc_module_vmap(m, NULL, "A", "E"));
	says_why(ctx);
	assert_null(tc_module_vmap(m, "mm", NULL, "E"));
	says_why(ctx);
	assert_null(tc_module_vmap(m, "mm", "A", NULL));
	says_why(ctx);
	t = tc_module_vmap(m, "mm", "A", "E");
	assert_non_null(t);
	tc_string_free(t);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void options(void **state)
{
	tc_options *o = tc_options_new(), *c;
	char *t;
	(void)state;
	assert_non_null(o);
	tc_options_free(NULL);
	c = tc_options_copy(NULL); /* the defaults */
	assert_non_null(c);
	tc_options_free(c);
	assert_int_equal(tc_options_set(NULL, "tile", "none", NULL), -1);
	assert_int_equal(tc_options_set(o, NULL, "none", NULL), -1);
	assert_int_equal(tc_options_set(o, "tile", NULL, NULL), -1);
	assert_string_equal(tc_options_get(NULL, "tile"), "auto"); /* the default */
	assert_null(tc_options_get(o, NULL));
	assert_int_equal(tc_options_parse(NULL, "tile=none", NULL), -1);
	assert_int_equal(tc_options_parse(o, NULL, NULL), -1);
	t = tc_options_print(NULL); /* the defaults */
	assert_non_null(t);
	assert_non_null(strstr(t, "tile=auto\n"));
	tc_string_free(t);
	tc_options_free(o);
}

static void kernels(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "t.tc");
	int64_t sa[2] = {5, 3}, sb[2] = {3, 4}, shape[8];
	uint64_t rng = tu_seed("null", 1);
	tu_tensor a, b, out;
	const DLTensor *in[2], *in_null[2];
	DLTensor *outs[1], *outs_null[1] = {NULL};
	DLDataType dt;
	double flops, bytes;
	tc_kernel *k;
	int nd, i;
	(void)state;
	assert_non_null(m);
	tu_tensor_init(&a, TU_F32, sa, 2);
	tu_tensor_init(&b, TU_F32, sb, 2);
	for (i = 0; i < a.numel; i++)
		((float *)a.data)[i] = (float)tu_rand_unit(&rng) + 0.25f;
	for (i = 0; i < b.numel; i++)
		((float *)b.data)[i] = (float)tu_rand_unit(&rng) + 0.25f;
	in[0] = in_null[0] = &a.dl;
	in[1] = &b.dl;
	in_null[1] = NULL;
	assert_null(tc_compile(NULL, "mm", in, 2, NULL));
	assert_null(tc_compile(m, NULL, in, 2, NULL));
	says_why(ctx);
	assert_null(tc_compile(m, "mm", NULL, 2, NULL));
	says_why(ctx);
	assert_null(tc_compile(m, "mm", in_null, 2, NULL));
	says_why(ctx);
	k = tc_compile(m, "mm", in, 2, NULL);
	assert_non_null(k);
	assert_int_equal(tc_kernel_num_outputs(NULL), -1);
	assert_int_equal(tc_kernel_output_shape(NULL, 0, &dt, &nd, shape), -1);
	assert_int_equal(tc_kernel_output_shape(k, 0, NULL, NULL, NULL), 0); /* nothing wanted */
	assert_int_equal(tc_kernel_output_shape(k, 0, &dt, &nd, shape), 0);
	tu_tensor_init(&out, TU_F32, shape, nd);
	for (i = 0; i < out.numel; i++) /* poison */
		((float *)out.data)[i] = NAN;
	outs[0] = &out.dl;
	assert_int_equal(tc_kernel_run(NULL, in, 2, outs, 1), -1);
	assert_int_equal(tc_kernel_run(k, NULL, 2, outs, 1), -1);
	says_why(ctx);
	assert_int_equal(tc_kernel_run(k, in_null, 2, outs, 1), -1);
	says_why(ctx);
	assert_int_equal(tc_kernel_run(k, in, 2, NULL, 1), -1);
	says_why(ctx);
	assert_int_equal(tc_kernel_run(k, in, 2, outs_null, 1), -1);
	says_why(ctx);
	/* the failed runs wrote nothing; a good run writes every element */
	for (i = 0; i < out.numel; i++)
		assert_true(isnan(((float *)out.data)[i]));
	assert_int_equal(tc_kernel_run(k, in, 2, outs, 1), 0);
	for (i = 0; i < out.numel; i++) {
		int r = i / (int)shape[1], c = i % (int)shape[1], j;
		float want = 0;
		for (j = 0; j < 3; j++)
			want += ((float *)a.data)[r * 3 + j] * ((float *)b.data)[j * 4 + c];
		assert_true(fabsf(((float *)out.data)[i] - want) <= 1e-5f * (1 + fabsf(want)));
	}
	assert_null(tc_kernel_emit(NULL, "ir"));
	assert_null(tc_kernel_emit(k, NULL));
	says_why(ctx);
	assert_int_equal(tc_kernel_stats(NULL, &flops, &bytes), -1);
	assert_int_equal(tc_kernel_stats(k, NULL, NULL), 0);
	assert_null(tc_kernel_options(NULL));
	assert_null(tc_kernel_options_source(NULL));
	assert_int_equal(tc_kernel_reuses_code(NULL), -1);
	assert_int_equal(tc_kernel_reuses_code(k), 0);
	tc_kernel_free(NULL);
	tc_kernel_free(k);
	tu_tensor_fini(&out);
	tu_tensor_fini(&a);
	tu_tensor_fini(&b);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void autotuner(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "t.tc");
	int64_t sa[2] = {5, 3}, sb[2] = {3, 4};
	tu_tensor a, b;
	const DLTensor *in[2], *in_null[2];
	tc_options *best = NULL;
	(void)state;
	tc_tune_settings_init(NULL); /* a no-op */
	tu_tensor_init(&a, TU_F32, sa, 2);
	tu_tensor_init(&b, TU_F32, sb, 2);
	in[0] = in_null[0] = &a.dl;
	in[1] = &b.dl;
	in_null[1] = NULL;
	assert_int_equal(tc_autotune(NULL, "mm", in, 2, NULL, NULL, &best, NULL), -1);
	assert_int_equal(tc_autotune(m, NULL, in, 2, NULL, NULL, &best, NULL), -1);
	says_why(ctx);
	assert_int_equal(tc_autotune(m, "mm", NULL, 2, NULL, NULL, &best, NULL), -1);
	says_why(ctx);
	assert_int_equal(tc_autotune(m, "mm", in_null, 2, NULL, NULL, &best, NULL), -1);
	says_why(ctx);
	assert_null(best);
	tu_tensor_fini(&a);
	tu_tensor_fini(&b);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* Data: IDX files and batches (a NULL scale is 1). */
static void data(void **state)
{
	tc_context *ctx = tc_context_new();
	int64_t sx[2] = {4, 3}, sb[2] = {2, 3};
	tu_tensor x, bx;
	const DLTensor *in[1], *in_null[1] = {NULL};
	DLTensor *outs[1], *outs_null[1] = {NULL};
	tc_batches *b;
	(void)state;
	assert_null(tc_idx_read(NULL, "train-images-idx3-ubyte.gz"));
	assert_null(tc_idx_read(ctx, NULL));
	says_why(ctx);
	tu_tensor_init(&x, TU_U8, sx, 2);
	tu_tensor_init(&bx, TU_U8, sb, 2);
	in[0] = &x.dl;
	outs[0] = &bx.dl;
	assert_null(tc_batches_new(NULL, in, 1, 2, 1));
	assert_null(tc_batches_new(ctx, NULL, 1, 2, 1));
	says_why(ctx);
	assert_null(tc_batches_new(ctx, in_null, 1, 2, 1));
	says_why(ctx);
	b = tc_batches_new(ctx, in, 1, 2, 1);
	assert_non_null(b);
	assert_int_equal(tc_batches_next(NULL, outs, 1, NULL), -1);
	assert_int_equal(tc_batches_next(b, NULL, 1, NULL), -1);
	says_why(ctx);
	assert_int_equal(tc_batches_next(b, outs_null, 1, NULL), -1);
	says_why(ctx);
	assert_int_equal(tc_batches_next(b, outs, 1, NULL), 1); /* scale NULL: 1 */
	assert_int_equal(tc_batches_per_epoch(NULL), -1);
	assert_int_equal(tc_batches_epoch(NULL), -1);
	tc_batches_free(NULL);
	tc_batches_free(b);
	tu_tensor_fini(&x);
	tu_tensor_fini(&bx);
	tc_context_free(ctx);
}

static void training(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx,
		"def f(float(N) X, float(N) W) -> (Z) { Z(n) = X(n) * W(n) }\n"
		"def l(float(N) Z) -> (L) { L +=! Z(n) * Z(n) }\n",
		"null.tc");
	int64_t n4[1] = {4};
	tc_optimizer o;
	tc_model *md;
	DLDataType f32 = {kDLFloat, 32, 1};
	const DLTensor *in[1] = {NULL};
	DLTensor *out[1] = {NULL};
	(void)state;
	assert_non_null(m);
	tc_optimizer_init(NULL, TC_OPT_SGD, 0.1);
	tc_optimizer_init(&o, TC_OPT_SGD, 0.1);
	assert_null(tc_optimizer_source(NULL, f32));
	assert_null(tc_model_new(NULL, "f", "l"));
	assert_null(tc_model_new(m, NULL, "l"));
	says_why(ctx);
	assert_null(tc_model_new(m, "f", NULL));
	says_why(ctx);
	assert_int_equal(tc_model_param(NULL, "W", 1, n4, NULL), -1);
	assert_int_equal(tc_model_input(NULL, "X", 1, n4), -1);
	assert_int_equal(tc_model_ensemble(NULL, 2), -1);
	assert_int_equal(tc_model_build(NULL, &o, NULL, 1), -1);
	assert_int_equal(tc_model_step(NULL, NULL), -1);
	assert_int_equal(tc_model_step_rows(NULL, 4, NULL), -1);
	assert_int_equal(tc_model_prepare_rows(NULL, 4), -1);
	assert_int_equal(tc_model_eval(NULL, NULL), -1);
	assert_int_equal(tc_model_forward(NULL, in, 1, out, 1), -1);
	assert_null(tc_model_tensor(NULL, "W"));
	assert_null(tc_model_describe(NULL));
	assert_int_equal(tc_model_save(NULL, "p.safetensors"), -1);
	assert_int_equal(tc_model_load(NULL, "p.safetensors"), -1);
	assert_int_equal(tc_model_num_kernels(NULL), -1);
	{
		tc_module *km;
		const char *e;
		const DLTensor *const *kin;
		int kn;
		assert_int_equal(tc_model_kernel(NULL, 0, &km, &e, &kin, &kn), -1);
	}
	tc_model_free(NULL);
	md = tc_model_new(m, "f", "l");
	assert_non_null(md);
	assert_int_equal(tc_model_param(md, NULL, 1, n4, NULL), -1);
	says_why(ctx);
	assert_int_equal(tc_model_param(md, "W", 1, NULL, NULL), -1);
	says_why(ctx);
	assert_int_equal(tc_model_input(md, NULL, 1, n4), -1);
	says_why(ctx);
	assert_int_equal(tc_model_param(md, "W", 1, n4, NULL), 0); /* init NULL: zeros */
	assert_int_equal(tc_model_input(md, "X", 1, n4), 0);
	assert_int_equal(tc_model_build(md, NULL, NULL, 1), -1);
	says_why(ctx);
	assert_int_equal(tc_model_build(md, &o, NULL, 1), 0); /* options NULL: defaults */
	assert_null(tc_model_tensor(md, NULL));
	says_why(ctx);
	assert_int_equal(tc_model_save(md, NULL), -1);
	says_why(ctx);
	assert_int_equal(tc_model_load(md, NULL), -1);
	says_why(ctx);
	{
		tc_module *km;
		const char *e;
		const DLTensor *const *kin;
		int kn;
		assert_int_equal(tc_model_kernel(md, 0, NULL, &e, &kin, &kn), -1);
		says_why(ctx);
		assert_int_equal(tc_model_kernel(md, 0, &km, NULL, &kin, &kn), -1);
		says_why(ctx);
		assert_int_equal(tc_model_kernel(md, 0, &km, &e, NULL, &kn), -1);
		says_why(ctx);
		assert_int_equal(tc_model_kernel(md, 0, &km, &e, &kin, NULL), -1);
		says_why(ctx);
	}
	assert_int_equal(tc_model_step(md, NULL), 0); /* loss NULL: not wanted */
	assert_int_equal(tc_model_eval(md, NULL), 0);
	assert_int_equal(tc_model_forward(md, NULL, 1, out, 1), -1);
	says_why(ctx);
	assert_int_equal(tc_model_forward(md, in, 1, NULL, 1), -1);
	says_why(ctx);
	assert_int_equal(tc_model_forward(md, in, 1, out, 1), -1); /* NULL elements */
	says_why(ctx);
	tc_model_free(md);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* tc_module_grad and tc_module_grad_per_sample: NULL m gives NULL; a NULL
 * entry or batch gives NULL with an error; a NULL wrt is the default
 * (every floating-point input). */
static void grad_per_sample(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx,
		"def f(float(B,I) X, float(I) W) -> (Z) { Z(b,i) = X(b,i) * W(i) }\n", "null.tc");
	char *t;
	(void)state;
	assert_non_null(m);
	assert_null(tc_module_grad(NULL, "f", NULL, 0));
	assert_null(tc_module_grad(m, NULL, NULL, 0));
	says_why(ctx);
	t = tc_module_grad(m, "f", NULL, 0); /* wrt NULL: every floating-point input */
	assert_non_null(t);
	tc_string_free(t);
	assert_null(tc_module_grad_per_sample(NULL, "f", "W", "B", 0));
	assert_null(tc_module_grad_per_sample(m, NULL, "W", "B", 0));
	says_why(ctx);
	assert_null(tc_module_grad_per_sample(m, "f", "W", NULL, 0));
	says_why(ctx);
	assert_null(tc_module_grad_per_sample(m, "f", "W", NULL, TC_GRAD_SAVES));
	says_why(ctx);
	t = tc_module_grad_per_sample(m, "f", NULL, "B", 0); /* wrt NULL: the default */
	assert_non_null(t);
	assert_non_null(strstr(t, "float32(B,I) d_W"));
	tc_string_free(t);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* An allocation hook that fails the n-th allocation from now on. */
typedef struct fail_nth {
	int n;
} fail_nth;

static void *fail_alloc(void *ud, void *ptr, size_t size)
{
	fail_nth *f = ud;
	if (!size) {
		free(ptr);
		return NULL;
	}
	if (f->n-- == 0)
		return NULL;
	return realloc(ptr, size);
}

/* tc_context_error_kind: none after a success, user for bad text, out of
 * memory for every failed allocation of a parse (each in turn), as the
 * tcomp command's exit status reads it. */
static void error_kinds(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m;
	fail_nth f;
	int n, nomem = 0;
	(void)state;
	assert_int_equal(tc_context_error_kind(NULL), TC_ERROR_USER);
	m = tc_module_parse(ctx, src, "t.tc");
	assert_non_null(m);
	assert_int_equal(tc_context_error_kind(ctx), TC_ERROR_NONE);
	tc_module_free(m);
	assert_null(tc_module_parse(ctx, "def f(float(N) A) -> (B) { B(i) = C(i) }", "bad.tc"));
	assert_int_equal(tc_context_error_kind(ctx), TC_ERROR_USER);
	for (n = 0;; n++) {
		f.n = n;
		tc_set_alloc(fail_alloc, &f);
		m = tc_module_parse(ctx, src, "t.tc");
		tc_set_alloc(NULL, NULL);
		if (m) {
			tc_module_free(m);
			break;
		}
		if (tc_context_error_kind(ctx) != TC_ERROR_NOMEM)
			fail_msg("allocation %d failed: kind %d, error %s", n,
				(int)tc_context_error_kind(ctx), tc_context_error(ctx));
		nomem++;
	}
	assert_true(nomem > 10);
	tc_context_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dtypes_and_contexts),
		cmocka_unit_test(modules),
		cmocka_unit_test(batching),
		cmocka_unit_test(options),
		cmocka_unit_test(kernels),
		cmocka_unit_test(autotuner),
		cmocka_unit_test(data),
		cmocka_unit_test(training),
		cmocka_unit_test(grad_per_sample),
		cmocka_unit_test(error_kinds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
