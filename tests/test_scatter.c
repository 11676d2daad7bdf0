/* Scatters: gathered left-hand subscripts, T(I(i), j) +=! e
 * (docs/language.md 5.5), through the public API.
 *
 * The embedding backward d_LUT(I(i), j) +=! d_O(i, j) at V = 1000 rows,
 * 4096 reads of D = 64 (indices int64 and int32, many repeated: drawn
 * from all rows, then a hundred reads of row 7), a histogram H(I(i)) +=!
 * 1.0, a scatter of a product and a max=! scatter run on random data with
 * the outputs poisoned (NaN) by the interpreter (target=interp), the CPU
 * on 1 and 2 threads and the CUDA emulator (target=cuda-emu, which fails
 * a run on a race or an out-of-bounds access).  Each is compared with
 * plain C loops (within the corpus's reduction tolerance: the loops round
 * every product), and the CPU's with the interpreter bit for bit: there a
 * scatter keeps the interpreter's order of the updates of each element
 * (docs/language.md 6.8).  The CUDA code adds float32 and float64 with
 * atomicAdd, in any order and without fusing a product (6.8), so its sums
 * are compared within the tolerance only.  Then the errors: an index out of
 * range at run time (on the CPU, at the subscript, in the words of a
 * right-hand gather's error, the kernel still usable afterwards), '=' and
 * '*=!' with a gathered left side and an output of unknown shape, located
 * at compile time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tcomp.h"
#include "tests/testutil.h"

static const char *const src =
	"def embed_bwd64(float(V,D) LUT, int64(B) I, float(B,D) d_O) -> (float(V,D) d_LUT) {\n"
	"    d_LUT(I(i),j) +=! d_O(i,j)\n"
	"}\n"
	"def embed_bwd32(float(V,D) LUT, int32(B) I, float(B,D) d_O) -> (float(V,D) d_LUT) {\n"
	"    d_LUT(I(i),j) +=! d_O(i,j)\n"
	"}\n"
	"def histogram(float(V) Bins, int32(N) I) -> (float(V) H) {\n"
	"    H(I(i)) +=! 1.0\n"
	"}\n"
	"def scatter_prod(float(V,D) LUT, int32(B) I, float(B) G, float(B,D) X) -> (float(V,D) O) {\n"
	"    O(I(i),j) +=! G(i) * X(i,j)\n"
	"}\n"
	"def segment_max(float(V) Bins, int32(N) I, float(N) X) -> (float(V) M) {\n"
	"    M(I(i)) max=! X(i)\n"
	"}\n";

/* The targets every case runs on: the interpreter first (the reference). */
static const char *const targets[] = {
	"target=interp", "target=cpu threads=1", "target=cpu threads=2", "target=cuda-emu",
};
#define NTARGETS 4

typedef struct fixture {
	tc_context *ctx;
	tc_module *m;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	if (!f || !(f->ctx = tc_context_new()))
		return -1;
	f->m = tc_module_parse(f->ctx, src, "scatter.tc");
	if (!f->m) {
		fprintf(stderr, "%s\n", tc_context_error(f->ctx));
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	tc_module_free(f->m);
	tc_context_free(f->ctx);
	free(f);
	return 0;
}

/* Run entry on ins under options text into out (poisoned first); fails
 * the test with the context's error if compiling or running fails. */
static void run_on(fixture *f, const char *entry, const char *text, tu_tensor *ins, int nin,
	tu_tensor *out)
{
	const DLTensor *in[8];
	DLTensor *outs[1] = {&out->dl};
	tc_options *o = tc_options_new();
	tc_kernel *k;
	for (int i = 0; i < nin; i++)
		in[i] = &ins[i].dl;
	assert_non_null(o);
	assert_int_equal(tc_options_parse(o, text, f->ctx), 0);
	k = tc_compile(f->m, entry, in, nin, o);
	if (!k)
		fail_msg("%s [%s]: tc_compile failed:\n%s", entry, text, tc_context_error(f->ctx));
	tu_poison(out);
	if (tc_kernel_run(k, in, nin, outs, 1) != 0)
		fail_msg("%s [%s]: run failed:\n%s", entry, text, tc_context_error(f->ctx));
	tc_kernel_free(k);
	tc_options_free(o);
}

/* Every element of got equal to want's bits (float32), NaN never: no
 * element may keep the poison. */
static void expect_same_bits(const char *what, const tu_tensor *got, const tu_tensor *want)
{
	const float *g = got->data, *w = want->data;
	for (int64_t i = 0; i < got->numel; i++)
		if (isnan(g[i]) || memcmp(&g[i], &w[i], sizeof(float)))
			fail_msg("%s: element %lld is %.9g, the interpreter's %.9g", what, (long long)i,
				(double)g[i], (double)w[i]);
}

/* got within atol + 1e-5 relative of the loops' ref. */
static void expect_close(const char *what, const tu_tensor *got, const float *ref, double atol)
{
	const float *g = got->data;
	for (int64_t i = 0; i < got->numel; i++)
		if (!(fabs((double)g[i] - (double)ref[i]) <= atol + 1e-5 * fabs((double)ref[i])))
			fail_msg("%s: element %lld is %.9g, the loops' %.9g", what, (long long)i,
				(double)g[i], (double)ref[i]);
}

/* Run entry on every target: each equal to the loops' ref within the
 * tolerance of tests/test_corpus.c's reduction_tol (1e-5 relative, 1e-6 *
 * nterms * the largest term absolute; the loops round every product),
 * and to the interpreter bit for bit. */
static void check_targets(fixture *f, const char *entry, tu_tensor *ins, int nin,
	const int64_t *odims, int ondim, const float *ref, int64_t nterms)
{
	tu_tensor got[NTARGETS];
	char what[160];
	for (int t = 0; t < NTARGETS; t++) {
		tu_tensor_init(&got[t], TU_F32, odims, ondim);
		run_on(f, entry, targets[t], ins, nin, &got[t]);
		snprintf(what, sizeof(what), "%s [%s]", entry, targets[t]);
		expect_close(what, &got[t], ref, 1e-6 * (double)nterms);
		if (t && strcmp(targets[t], "target=cuda-emu"))
			expect_same_bits(what, &got[t], &got[0]);
	}
	for (int t = 0; t < NTARGETS; t++)
		tu_tensor_fini(&got[t]);
}

static void fill_f32(tu_tensor *t, uint64_t *rng, double lo, double hi)
{
	float *p = t->data;
	for (int64_t i = 0; i < t->numel; i++)
		p[i] = (float)(lo + (hi - lo) * tu_rand_unit(rng));
}

/* Indices in [0, V): random, then the last 100 all row 7 (many repeats). */
static int64_t index_at(uint64_t *rng, int64_t i, int64_t n, int64_t V)
{
	return i >= n - 100 ? 7 : tu_rand_int(rng, 0, V - 1);
}

/* The embedding backward of int64 or int32 indices, V x D = 1000 x 64,
 * 4096 reads. */
static void embedding_backward(void **state, tu_elt index_elt)
{
	fixture *f = *state;
	const int64_t V = 1000, D = 64, B = 4096;
	uint64_t rng = tu_seed("embedding_backward", (uint64_t)index_elt);
	tu_tensor in[3];
	float *ref = calloc((size_t)(V * D), sizeof(float));
	assert_non_null(ref);
	tu_tensor_init(&in[0], TU_F32, (int64_t[]){V, D}, 2);
	tu_tensor_init(&in[1], index_elt, (int64_t[]){B}, 1);
	tu_tensor_init(&in[2], TU_F32, (int64_t[]){B, D}, 2);
	fill_f32(&in[0], &rng, -1, 1);
	fill_f32(&in[2], &rng, -1, 1);
	for (int64_t i = 0; i < B; i++) {
		int64_t row = index_at(&rng, i, B, V);
		if (index_elt == TU_I64)
			((int64_t *)in[1].data)[i] = row;
		else
			((int32_t *)in[1].data)[i] = (int32_t)row;
		for (int64_t j = 0; j < D; j++)
			ref[row * D + j] += ((const float *)in[2].data)[i * D + j];
	}
	check_targets(f, index_elt == TU_I64 ? "embed_bwd64" : "embed_bwd32", in, 3,
		(int64_t[]){V, D}, 2, ref, B);
	for (int i = 0; i < 3; i++)
		tu_tensor_fini(&in[i]);
	free(ref);
}

static void test_embedding_backward_int64_indices(void **state)
{
	embedding_backward(state, TU_I64);
}

static void test_embedding_backward_int32_indices(void **state)
{
	embedding_backward(state, TU_I32);
}

/* H(I(i)) +=! 1.0: the counts, rows never named 0. */
static void test_histogram_counts(void **state)
{
	fixture *f = *state;
	const int64_t V = 50, N = 3000;
	uint64_t rng = tu_seed("histogram", 0);
	tu_tensor in[2];
	float ref[50] = {0};
	tu_tensor_init(&in[0], TU_F32, (int64_t[]){V}, 1);
	tu_tensor_init(&in[1], TU_I32, (int64_t[]){N}, 1);
	fill_f32(&in[0], &rng, -1, 1);
	for (int64_t i = 0; i < N; i++) {
		int32_t v = (int32_t)tu_rand_int(&rng, 0, V - 10); /* the last 9 bins stay 0 */
		((int32_t *)in[1].data)[i] = v;
		ref[v] += 1;
	}
	check_targets(f, "histogram", in, 2, (int64_t[]){V}, 1, ref, 0);
	for (int i = 0; i < 2; i++)
		tu_tensor_fini(&in[i]);
}

/* O(I(i),j) +=! G(i) * X(i,j): fused into one rounding (contract=on) the
 * same way on every target. */
static void test_scatter_of_a_product(void **state)
{
	fixture *f = *state;
	const int64_t V = 37, D = 19, B = 500;
	uint64_t rng = tu_seed("scatter_prod", 0);
	tu_tensor in[4];
	float ref[37 * 19] = {0};
	tu_tensor_init(&in[0], TU_F32, (int64_t[]){V, D}, 2);
	tu_tensor_init(&in[1], TU_I32, (int64_t[]){B}, 1);
	tu_tensor_init(&in[2], TU_F32, (int64_t[]){B}, 1);
	tu_tensor_init(&in[3], TU_F32, (int64_t[]){B, D}, 2);
	fill_f32(&in[0], &rng, -1, 1);
	fill_f32(&in[2], &rng, -1, 1);
	fill_f32(&in[3], &rng, -1, 1);
	for (int64_t i = 0; i < B; i++) {
		int32_t v = (int32_t)index_at(&rng, i, B, V);
		((int32_t *)in[1].data)[i] = v;
		for (int64_t j = 0; j < D; j++)
			ref[v * D + j] += ((float *)in[2].data)[i] * ((float *)in[3].data)[i * D + j];
	}
	check_targets(f, "scatter_prod", in, 4, (int64_t[]){V, D}, 2, ref, B);
	for (int i = 0; i < 4; i++)
		tu_tensor_fini(&in[i]);
}

/* M(I(i)) max=! X(i): the largest per segment, the identity (the lowest
 * float32) where no index names it. */
static void test_max_scatter(void **state)
{
	fixture *f = *state;
	const int64_t V = 40, N = 1000;
	uint64_t rng = tu_seed("segment_max", 0);
	tu_tensor in[3];
	float ref[40];
	for (int v = 0; v < V; v++)
		ref[v] = -FLT_MAX;
	tu_tensor_init(&in[0], TU_F32, (int64_t[]){V}, 1);
	tu_tensor_init(&in[1], TU_I32, (int64_t[]){N}, 1);
	tu_tensor_init(&in[2], TU_F32, (int64_t[]){N}, 1);
	fill_f32(&in[0], &rng, -1, 1);
	fill_f32(&in[2], &rng, -100, 100);
	for (int64_t i = 0; i < N; i++) {
		int32_t v = (int32_t)tu_rand_int(&rng, 0, V - 5);
		float x = ((float *)in[2].data)[i];
		((int32_t *)in[1].data)[i] = v;
		ref[v] = x > ref[v] ? x : ref[v];
	}
	check_targets(f, "segment_max", in, 3, (int64_t[]){V}, 1, ref, 0);
	for (int i = 0; i < 3; i++)
		tu_tensor_fini(&in[i]);
}

/* An index out of range at run time: an error at the gathered subscript
 * (line 2, column 11 of the source: I(i)), in a right-hand gather's words,
 * on the CPU and the interpreter; the kernel runs again with valid
 * indices. */
static void test_index_out_of_range_is_a_located_runtime_error(void **state)
{
	fixture *f = *state;
	static const char *const where[] = {"target=interp", "target=cpu threads=2"};
	for (int t = 0; t < 2; t++) {
		tu_tensor in[3], out;
		const DLTensor *ins[3];
		DLTensor *outs[1] = {&out.dl};
		tc_options *o = tc_options_new();
		tc_kernel *k;
		tu_tensor_init(&in[0], TU_F32, (int64_t[]){5, 3}, 2);
		tu_tensor_init(&in[1], TU_I64, (int64_t[]){4}, 1);
		tu_tensor_init(&in[2], TU_F32, (int64_t[]){4, 3}, 2);
		tu_tensor_init(&out, TU_F32, (int64_t[]){5, 3}, 2);
		for (int i = 0; i < 3; i++)
			ins[i] = &in[i].dl;
		uint64_t rng = tu_seed("out_of_range", (uint64_t)t);
		fill_f32(&in[2], &rng, -1, 1);
		int64_t *idx = in[1].data;
		idx[0] = 1;
		idx[1] = 5; /* one past the end */
		idx[2] = 0;
		idx[3] = 4;
		assert_int_equal(tc_options_parse(o, where[t], f->ctx), 0);
		k = tc_compile(f->m, "embed_bwd64", ins, 3, o);
		assert_non_null(k);
		assert_int_equal(tc_kernel_run(k, ins, 3, outs, 1), -1);
		const char *msg = tc_context_error(f->ctx);
		if (!tu_contains(msg, "scatter.tc:2:11") ||
			!tu_contains(msg, "index 5 is out of bounds for dimension 0 of 'd_LUT' (extent 5)"))
			fail_msg("[%s] unexpected error:\n%s", where[t], msg);
		idx[1] = -3;
		assert_int_equal(tc_kernel_run(k, ins, 3, outs, 1), -1);
		if (!tu_contains(tc_context_error(f->ctx), "index -3 is out of bounds"))
			fail_msg("[%s] unexpected error:\n%s", where[t], tc_context_error(f->ctx));
		idx[1] = 1; /* valid again: row 1 twice */
		tu_poison(&out);
		assert_int_equal(tc_kernel_run(k, ins, 3, outs, 1), 0);
		const float *o_ = out.data, *x = in[2].data;
		for (int j = 0; j < 3; j++) {
			assert_true(o_[1 * 3 + j] == x[0 * 3 + j] + x[1 * 3 + j]);
			assert_true(o_[2 * 3 + j] == 0 && o_[3 * 3 + j] == 0);
		}
		tc_kernel_free(k);
		tc_options_free(o);
		for (int i = 0; i < 3; i++)
			tu_tensor_fini(&in[i]);
		tu_tensor_fini(&out);
	}
}

/* A strided scatter O(2 * i) +=! X(i): its subscript is affine, but range
 * inference bounds it by nothing (X gives i its range), so it is checked at
 * run time like a gather: with X of 6 elements and O of 4, 2 * 2 = 4 is
 * the located error on the interpreter and the CPU (which wrote past the
 * output before), and with X of 2 the run is right. */
static void test_strided_scatter_is_checked_at_run_time(void **state)
{
	fixture *f = *state;
	static const char *const where[] = {"target=interp", "target=cpu"};
	tc_module *m = tc_module_parse(f->ctx, "def s(float(N) A, float(M) X) -> (float(N) O) {\n"
		"    O(2*i) +=! X(i)\n}\n", "strided.tc");
	assert_non_null(m);
	for (int t = 0; t < 2; t++) {
		for (int64_t mx = 6; mx >= 2; mx -= 4) {
			tu_tensor in[2], out;
			const DLTensor *ins[2] = {&in[0].dl, &in[1].dl};
			DLTensor *outs[1] = {&out.dl};
			tc_options *o = tc_options_new();
			tc_kernel *k;
			uint64_t rng = tu_seed("strided", (uint64_t)t);
			tu_tensor_init(&in[0], TU_F32, (int64_t[]){4}, 1);
			tu_tensor_init(&in[1], TU_F32, &mx, 1);
			tu_tensor_init(&out, TU_F32, (int64_t[]){4}, 1);
			fill_f32(&in[0], &rng, -1, 1);
			fill_f32(&in[1], &rng, -1, 1);
			tu_poison(&out);
			assert_int_equal(tc_options_parse(o, where[t], f->ctx), 0);
			assert_non_null(k = tc_compile(m, "s", ins, 2, o));
			if (mx == 6) {
				assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), -1);
				if (!tu_contains(tc_context_error(f->ctx), "strided.tc:2:7") ||
					!tu_contains(tc_context_error(f->ctx),
						"index 4 is out of bounds for dimension 0 of 'O' (extent 4)"))
					fail_msg("[%s] unexpected error:\n%s", where[t],
						tc_context_error(f->ctx));
			} else {
				const float *x = in[1].data, *y = out.data;
				assert_int_equal(tc_kernel_run(k, ins, 2, outs, 1), 0);
				assert_true(y[0] == x[0] && y[1] == 0 && y[2] == x[1] && y[3] == 0);
			}
			tc_kernel_free(k);
			tc_options_free(o);
			tu_tensor_fini(&in[0]);
			tu_tensor_fini(&in[1]);
			tu_tensor_fini(&out);
		}
	}
	tc_module_free(m);
}

/* The CUDA text of entry (target=cuda-emu) at the inputs' shapes. */
static char *cuda_text(fixture *f, const char *entry, tu_tensor *ins, int nin)
{
	const DLTensor *in[8];
	tc_options *o = tc_options_new();
	tc_kernel *k;
	char *text;
	for (int i = 0; i < nin; i++)
		in[i] = &ins[i].dl;
	assert_int_equal(tc_options_parse(o, "target=cuda-emu", f->ctx), 0);
	k = tc_compile(f->m, entry, in, nin, o);
	if (!k)
		fail_msg("%s: tc_compile failed:\n%s", entry, tc_context_error(f->ctx));
	text = tc_kernel_emit(k, "cuda");
	assert_non_null(text);
	tc_kernel_free(k);
	tc_options_free(o);
	return text;
}

/* On the GPU a sum scatter runs its gathered loop on threads with atomic
 * additions (the runs above exercised them in the emulator), the
 * histogram's reads one per thread; a max scatter has no atomics and
 * keeps its gathered loop in one thread. */
static void test_gpu_sums_scatter_with_atomics(void **state)
{
	fixture *f = *state;
	tu_tensor in[3];
	char *text;
	tu_tensor_init(&in[0], TU_F32, (int64_t[]){50}, 1);
	tu_tensor_init(&in[1], TU_I32, (int64_t[]){3000}, 1);
	tu_tensor_init(&in[2], TU_F32, (int64_t[]){3000}, 1);
	text = cuda_text(f, "histogram", in, 2);
	if (!tu_contains(text, "TC_ATOMIC_ADD(H, (int64_t)TC_LDG(I, 256 * tc_bx + tc_tx), 1.0f);"))
		fail();
	tc_string_free(text);
	text = cuda_text(f, "segment_max", in, 3);
	assert_null(strstr(text, "TC_ATOMIC_ADD"));
	if (!tu_contains(text, "nothing mapped: one thread"))
		fail();
	tc_string_free(text);
	for (int i = 0; i < 3; i++)
		tu_tensor_fini(&in[i]);
}

/* Parse text and expect an error containing loc and phrase. */
static void expect_parse_error(fixture *f, const char *text, const char *loc, const char *phrase)
{
	tc_module *m = tc_module_parse(f->ctx, text, "bad.tc");
	const char *msg = tc_context_error(f->ctx);
	if (m || !tu_contains(msg, loc) || !tu_contains(msg, phrase))
		fail_msg("expected %s: ...%s..., got %s:\n%s", loc, phrase, m ? "a module" : "",
			msg ? msg : "(none)");
}

static void test_compile_errors_are_located(void **state)
{
	fixture *f = *state;
	expect_parse_error(f,
		"def f(float(V,D) L, int32(B) I, float(B,D) X) -> (float(V,D) O) {\n"
		"  O(I(i),j) = X(i,j)\n"
		"}\n",
		"bad.tc:2:13", "write '+=!' to add the values");
	expect_parse_error(f,
		"def f(float(V) W, int32(B) I, float(B) X) -> (float(V) O) {\n"
		"  O(I(i)) *=! X(i)\n"
		"}\n",
		"bad.tc:2:11", "but found '*=!'");
	expect_parse_error(f,
		"def f(float(V,D) L, int32(B) I, float(B,D) X) -> (O) {\n"
		"  O(I(i),j) +=! X(i,j)\n"
		"}\n",
		"bad.tc:2:3", "declare the output's shape");
	expect_parse_error(f,
		"def f(float(V,D) L, int32(B) I, float(B,D) X) -> (float(V,D) O) {\n"
		"  O(i + 1,j) +=! X(i,j)\n"
		"}\n",
		"bad.tc:2:5", "but this one is a shifted index");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedding_backward_int64_indices),
		cmocka_unit_test(test_embedding_backward_int32_indices),
		cmocka_unit_test(test_histogram_counts),
		cmocka_unit_test(test_scatter_of_a_product),
		cmocka_unit_test(test_max_scatter),
		cmocka_unit_test(test_gpu_sums_scatter_with_atomics),
		cmocka_unit_test(test_index_out_of_range_is_a_located_runtime_error),
		cmocka_unit_test(test_strided_scatter_is_checked_at_run_time),
		cmocka_unit_test(test_compile_errors_are_located),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
