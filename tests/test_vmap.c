/* Batching over models (tc_module_vmap, lang/vmap.c).
 *
 * Each def is batched over a new leading dimension of K = 3 models for
 * some of its inputs; the batched def, parsed back from the text, run on
 * random inputs (never zero; the outputs poisoned with NaN first) must
 * give, for every model k, what the original def gives on slice k of the
 * batched inputs and the shared inputs: in the interpreter bit for bit
 * (the same operations in the same order), compiled for the CPU with
 * vecreduce=off (every reduction in the interpreter's order, fused
 * multiply-adds by the same rule in every schedule) bit for bit against
 * the original compiled so, and compiled with the default options (float
 * sums as vector partial results, in an order that depends on the
 * schedule) within a tolerance of the original compiled so.  The printed text of one
 * batched def is pinned by a golden file (tests/golden/vmap_*.tc; after
 * an intended change run TC_UPDATE_GOLDEN=1 ./build/tests/test_vmap).
 * What cannot be batched, and every misuse, must be an error with its
 * message, located in the source where it has a place there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "testrun.h"

#define K 3     /* models */
/* default CPU options: float sums may round in another order */
#define TOL_F32 1e-5
#define TOL_F64 1e-12
#define MAX_T 8 /* inputs or outputs of a def */

/* A def to batch: its entry and source, the inputs to batch and the new
 * size's name, the original inputs' shapes ("3x4", "" for a scalar), and
 * the range [0, ihi) of integer inputs (indices). */
typedef struct vmap_case {
	const char *entry;
	const char *src;
	const char *batch;
	const char *size;
	const char *shapes[MAX_T];
	int64_t ihi;
} vmap_case;

#define MLP2                                                                   \
	"def mlp2(float(B,I) X, float(H,I) W1, float(H) B1, float(O,H) W2, float(O) B2)" \
	" -> (Y) {\n"                                                          \
	"  A(b,h) +=! X(b,r_i) * W1(h,r_i)\n"                                  \
	"  Z(b,h) = fmax(A(b,h) + B1(h), 0)\n"                                 \
	"  Y(b,o) +=! Z(b,r_h) * W2(o,r_h)\n"                                  \
	"  Y(b,o) = Y(b,o) + B2(o)\n}\n"
#define MLP2_SHAPES {"5x7", "6x7", "6", "4x6", "4"}

#define SOFTMAX                                                                \
	"def softmax(float(N,D) I) -> (O, mx, sm) {\n"                         \
	"  mx(n) max=! I(n,d)\n"                                               \
	"  e(n,d) = exp(I(n,d) - mx(n))\n"                                     \
	"  sm(n) +=! e(n,d)\n"                                                 \
	"  O(n,d) = e(n,d) / sm(n)\n}\n"

#define CONV2D                                                                 \
	"def conv2d(float(N,C,H,W) I, float(F,C,KH,KW) Wt, float(F) Bias) -> (O) {\n" \
	"  O(n,f,h,w) +=! I(n,c,h+kh,w+kw) * Wt(f,c,kh,kw)\n"                  \
	"  O(n,f,h,w) = O(n,f,h,w) + Bias(f)\n}\n"
#define CONV2D_SHAPES {"2x3x7x6", "4x3x3x2", "4"}

#define LAYERNORM                                                              \
	"def layernorm(float(N,D) X, float(D) G, float(D) Bt) -> (Y) {\n"      \
	"  mean(n) +=! X(n,d) / D\n"                                           \
	"  xc(n,d) = X(n,d) - mean(n)\n"                                       \
	"  var(n) +=! xc(n,d) * xc(n,d) / D\n"                                 \
	"  Y(n,d) = xc(n,d) * rsqrt(var(n) + 1e-5) * G(d) + Bt(d)\n}\n"

#define EMBED "def embed(float(V,D) E, int64(T) Ids) -> (O) {\n  O(t,d) = E(Ids(t), d)\n}\n"

/* a temporary reduced to a scalar, a scalar input, a declared scalar output */
#define SCALED                                                                 \
	"def scaled(float(N) A, float(N) B, float S) -> (O, float() Tot) {\n"  \
	"  T +=! A(i) * A(i)\n"                                                \
	"  O(i) = S * B(i) / T\n"                                              \
	"  Tot +=! O(i)\n}\n"

#define INPLACE "def inplace(float(N) A, float(N) B) -> (O) {\n  O(i) = A(i) * 2\n  O(i) = O(i) + B(i)\n}\n"

/* lets, where ranges, exists, ?:, casts, pad, every reduction, in-place
 * updates, a scatter into a declared output and one in place, integer and
 * bool outputs */
#define MISC                                                                   \
	"def misc(float64(N,K) A, float64(K) B, int32(N) I, float64(V) Z)"     \
	" -> (O, P, Q, mn, idx, float64(V) H, S, C) {\n"                       \
	"  O(i) +=! y * x where k in 0:K, x = A(i,k) + B(k), y = tanh(x)\n"    \
	"  O(i) += B(k) * 0.5\n"                                               \
	"  P(i) *=! A(i,k) > 0.0 ? A(i,k) : float64(int32(B(k) * 4.0)) + 0.5\n" \
	"  Q(i) = i > 0 ? A(i - 1, 0) : B(0) where exists A(i, 0)\n"           \
	"  Q(i) max= pad(A(i + 1, 1), -1.0)\n"                                 \
	"  mn(i) min=! A(i,k)\n"                                               \
	"  idx(i) min=! A(i,k) == mn(i) ? k : K\n"                             \
	"  H(I(i)) +=! A(i,0) * 2.0\n"                                         \
	"  S(v) = Z(v)\n"                                                      \
	"  S(I(i)) max= B(i % K)\n"                                            \
	"  C(i) = A(i,0) > B(0) && A(i,1) < 0.5\n}\n"
#define MISC_SHAPES {"6x5", "5", "6", "4"}

/* a let used only under ?: (the model index gets a where range) */
#define CONCAT                                                                 \
	"def concat(float(N) A, float(M) B) -> (O) {\n"                        \
	"  O(i) = i < N ? a : B(i - N) where a = A(i), i in 0:N+M\n}\n"

static const vmap_case cases[] = {
	{"mlp2", MLP2, "W1,B1,W2,B2", "E", MLP2_SHAPES, 0},
	{"mlp2", MLP2, "X", "E", MLP2_SHAPES, 0},
	{"mlp2", MLP2, "B1", "E", MLP2_SHAPES, 0},
	{"mlp2", MLP2, "B2", "Models", MLP2_SHAPES, 0},
	{"softmax", SOFTMAX, "I", "E", {"4x9"}, 0},
	{"conv2d", CONV2D, "Wt,Bias", "E", CONV2D_SHAPES, 0},
	{"conv2d", CONV2D, "I", "E", CONV2D_SHAPES, 0},
	{"layernorm", LAYERNORM, "G,Bt", "E", {"5x8", "8", "8"}, 0},
	{"layernorm", LAYERNORM, "X", "E", {"5x8", "8", "8"}, 0},
	{"embed", EMBED, "E", "K", {"10x4", "7"}, 10},
	{"embed", EMBED, "Ids", "K", {"10x4", "7"}, 10},
	{"embed", EMBED, "Ids,E", "K", {"10x4", "7"}, 10},
	{"scaled", SCALED, "A", "E", {"6", "6", ""}, 0},
	{"scaled", SCALED, "S", "E", {"6", "6", ""}, 0},
	{"scaled", SCALED, "B", "E", {"6", "6", ""}, 0},
	{"inplace", INPLACE, "B", "E", {"6", "6"}, 0},
	{"inplace", INPLACE, "A", "E", {"6", "6"}, 0},
	{"misc", MISC, "A", "E", MISC_SHAPES, 4},
	{"misc", MISC, "B,I", "E", MISC_SHAPES, 4},
	{"misc", MISC, "Z", "E", MISC_SHAPES, 4},
	{"misc", MISC, "I", "E", MISC_SHAPES, 4},
	{"concat", CONCAT, "A", "E", {"4", "3"}, 0},
};

static tu_elt elt_of(DLDataType dt)
{
	if (dt.code == kDLFloat)
		return dt.bits == 64 ? TU_F64 : dt.bits == 16 ? TU_F16 : TU_F32;
	if (dt.code == kDLInt)
		return dt.bits == 64 ? TU_I64 : dt.bits == 8 ? TU_I8 : TU_I32;
	if (dt.code == kDLUInt)
		return TU_U8;
	if (dt.code == kDLBfloat)
		return TU_BF16;
	return TU_BOOL;
}

/* Random data: floats of magnitude [0.25, 1.25) and either sign (never
 * zero), integers in [0, ihi). */
static void fill(tu_tensor *t, uint64_t *rng, int64_t ihi)
{
	for (int64_t i = 0; i < t->numel; i++) {
		double u = tu_rand_unit(rng);
		double x = (u < 0.5 ? -1 : 1) * (0.25 + 2 * (u < 0.5 ? u : u - 0.5));
		switch (t->elt) {
		case TU_F32: ((float *)t->data)[i] = (float)x; break;
		case TU_F64: ((double *)t->data)[i] = x; break;
		case TU_I32: ((int32_t *)t->data)[i] = (int32_t)tu_rand_int(rng, 0, ihi - 1); break;
		case TU_I64: ((int64_t *)t->data)[i] = tu_rand_int(rng, 0, ihi - 1); break;
		default: fail_msg("no random data of type %s", tu_elt_name(t->elt));
		}
	}
}

/* Options: target, and vecreduce when not NULL. */
static tc_options *options(tc_context *ctx, const char *target, const char *vecreduce)
{
	tc_options *o = tc_options_new();
	assert_non_null(o);
	assert_int_equal(tc_options_set(o, "target", target, ctx), 0);
	if (vecreduce)
		assert_int_equal(tc_options_set(o, "vecreduce", vecreduce, ctx), 0);
	return o;
}

/* Run entry of m (compiled with o) on in[0..nin); its outputs, made and
 * poisoned here, into out; their number. */
static int run(tc_module *m, const char *entry, tu_tensor *in, int nin, const tc_options *o,
	tc_context *ctx, tu_tensor *out)
{
	const DLTensor *ins[MAX_T];
	DLTensor *outs[MAX_T];
	tc_kernel *k;
	int nout;
	for (int i = 0; i < nin; i++)
		ins[i] = &in[i].dl;
	if (!(k = tc_compile(m, entry, ins, nin, o)))
		fail_msg("tc_compile(%s) failed:\n%s", entry, tc_context_error(ctx));
	nout = tc_kernel_num_outputs(k);
	for (int i = 0; i < nout; i++) {
		int64_t shape[8];
		int nd;
		DLDataType dt;
		assert_int_equal(tc_kernel_output_shape(k, i, &dt, &nd, shape), 0);
		tu_tensor_init(&out[i], elt_of(dt), shape, nd);
		tu_poison(&out[i]);
		outs[i] = &out[i].dl;
	}
	if (tc_kernel_run(k, ins, nin, outs, nout) != 0)
		fail_msg("running %s failed:\n%s", entry, tc_context_error(ctx));
	tc_kernel_free(k);
	return nout;
}

/* Whether element i of a (at offset off) and element i of b differ: bit
 * for bit with tol 0, else by more than tol relative to 1 + |b|; NaN
 * always differs. */
static int differs(const tu_tensor *a, int64_t off, const tu_tensor *b, int64_t i, double tol)
{
	size_t es = tu_elt_size(a->elt);
	double x = tu_get(a, off + i), y = tu_get(b, i);
	if (isnan(x) || isnan(y))
		return 1;
	if (tol == 0 || !tu_elt_is_float(a->elt))
		return memcmp((const char *)a->data + (off + i) * (int64_t)es,
			(const char *)b->data + i * (int64_t)es, es) != 0;
	return fabs(x - y) > tol * (1 + fabs(y));
}

/* Output o of the batched def (got) against model k's output of the
 * original def (want): its slice k when batched (a leading dimension of
 * K), else the whole tensor (shared by the models). */
static void compare(const vmap_case *c, const char *what, int o, const tu_tensor *got, int k,
	const tu_tensor *want, double tol)
{
	int batched = got->dl.ndim == want->dl.ndim + 1;
	int64_t off = batched ? k * want->numel : 0;
	assert_int_equal(got->elt, want->elt);
	if (batched)
		assert_int_equal(got->shape[0], K);
	else
		assert_int_equal(got->dl.ndim, want->dl.ndim);
	for (int d = 0; d < want->dl.ndim; d++)
		assert_int_equal(got->shape[d + batched], want->shape[d]);
	for (int64_t i = 0; i < want->numel; i++)
		if (differs(got, off, want, i, tol))
			fail_msg("%s --batch %s (%s): output %d, model %d, element %lld: %.17g, "
				 "expected %.17g", c->entry, c->batch, what, o, k, (long long)i,
				tu_get(got, off + i), tu_get(want, i));
}

/* Batch case c and check its results as the head comment says. */
static void check_case(const vmap_case *c)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, c->src, "orig.tc"), *mb;
	tc_options *o[3] = {options(ctx, "interp", NULL), options(ctx, "cpu", "off"),
		options(ctx, "cpu", NULL)};
	static const char *const what[3] = {"interpreter", "cpu, vecreduce=off", "cpu"};
	tu_tensor in[MAX_T], slice[K][MAX_T], want[3][K][MAX_T], got[3][MAX_T];
	int nin, nout, nin_b, nout_b, nbatched = 0;
	uint64_t rng = tu_seed(c->entry, strlen(c->batch));
	char *text;

	assert_non_null(m);
	assert_int_equal(tc_module_def_arity(m, c->entry, &nin, &nout), 0);
	if (!(text = tc_module_vmap(m, c->entry, c->batch, c->size)))
		fail_msg("vmap %s --batch %s: %s", c->entry, c->batch, tc_context_error(ctx));
	if (!(mb = tc_module_parse(ctx, text, "vmap.tc")))
		fail_msg("the batched text does not check:\n%s\n%s", text, tc_context_error(ctx));
	assert_int_equal(tc_module_def_arity(mb, c->entry, &nin_b, &nout_b), 0);
	assert_int_equal(nin_b, nin);
	assert_int_equal(nout_b, nout);
	for (int i = 0; i < nin; i++) {
		int64_t dims[TU_MAX_RANK + 1];
		int nd = tr_parse_dims(c->shapes[i], dims + 1), nd_b;
		int b = tr_list_has(c->batch, tc_module_tensor_name(m, c->entry, i));
		DLDataType dt;
		assert_int_equal(tc_module_input_type(m, c->entry, i, &dt, NULL), 0);
		assert_int_equal(tc_module_input_type(mb, c->entry, i, NULL, &nd_b), 0);
		assert_int_equal(nd_b, nd + b);
		dims[0] = K;
		tu_tensor_init(&in[i], elt_of(dt), b ? dims : dims + 1, nd + b);
		fill(&in[i], &rng, c->ihi);
		for (int k = 0; k < K; k++) {
			size_t bytes = (size_t)(in[i].numel / (b ? K : 1)) * tu_elt_size(in[i].elt);
			tu_tensor_init(&slice[k][i], in[i].elt, dims + 1, nd);
			memcpy(slice[k][i].data, (char *)in[i].data + (b ? k * bytes : 0), bytes);
		}
		nbatched += b;
	}
	assert_true(nbatched > 0);
	for (int r = 0; r < 3; r++) {
		for (int k = 0; k < K; k++)
			assert_int_equal(run(m, c->entry, slice[k], nin, o[r], ctx, want[r][k]), nout);
		assert_int_equal(run(mb, c->entry, in, nin, o[r], ctx, got[r]), nout);
		for (int j = 0; j < nout; j++)
			for (int k = 0; k < K; k++) {
				const tu_tensor *w = &want[r][k][j];
				double tol = r < 2 ? 0 : w->elt == TU_F64 ? TOL_F64 : TOL_F32;
				compare(c, what[r], j, &got[r][j], k, w, tol);
			}
		for (int j = 0; j < nout; j++) {
			tu_tensor_fini(&got[r][j]);
			for (int k = 0; k < K; k++)
				tu_tensor_fini(&want[r][k][j]);
		}
		tc_options_free(o[r]);
	}
	for (int i = 0; i < nin; i++) {
		tu_tensor_fini(&in[i]);
		for (int k = 0; k < K; k++)
			tu_tensor_fini(&slice[k][i]);
	}
	tc_string_free(text);
	tc_module_free(mb);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void test_batched_defs_match_the_def_run_per_model(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i]);
}

/* ---- the rule, on the text ---- */

/* The text of tc_module_vmap (which must succeed), malloc'd. */
static char *vmap_text(const char *src, const char *entry, const char *batch, const char *size)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "f.tc");
	char *text, *copy;
	if (!m)
		fail_msg("%s", tc_context_error(ctx));
	if (!(text = tc_module_vmap(m, entry, batch, size)))
		fail_msg("%s", tc_context_error(ctx));
	copy = strdup(text);
	tc_string_free(text);
	tc_module_free(m);
	tc_context_free(ctx);
	return copy;
}

static void test_the_example_of_the_brief(void **state)
{
	char *t;
	(void)state;
	t = vmap_text("def mlp(float(B,I) X, float(H,I) W1, float(H) B1) -> (Z) {\n"
		      "    A(b,h) +=! X(b,r_i) * W1(h,r_i)\n"
		      "    Z(b,h) = fmax(A(b,h) + B1(h), 0)\n}\n", "mlp", "W1,B1", "E");
	assert_string_equal(t, "def mlp(float32(B,I) X, float32(E,H,I) W1, float32(E,H) B1) -> (Z) {\n"
			       "  A(e,b,h) +=! X(b, r_i) * W1(e, h, r_i)\n"
			       "  Z(e,b,h) = fmax(A(e, b, h) + B1(e, h), 0)\n}\n");
	free(t);
}

static void test_shared_statements_stay_and_batched_ones_get_the_index(void **state)
{
	char *t;
	(void)state;
	/* B1 alone: the first layer's product is shared, Z and Y are batched */
	t = vmap_text(MLP2, "mlp2", "B1", "E");
	assert_true(tu_contains(t, "  A(b,h) +=! X(b, r_i) * W1(h, r_i)\n"));
	assert_true(tu_contains(t, "  Z(e,b,h) = fmax(A(b, h) + B1(e, h), 0)\n"));
	assert_true(tu_contains(t, "  Y(e,b,o) +=! Z(e, b, r_h) * W2(o, r_h)\n"));
	assert_true(tu_contains(t, "  Y(e,b,o) = Y(e, b, o) + B2(o)\n"));
	free(t);
	/* B2 alone: Y is written shared first, then batched: batched throughout,
	 * its first statement repeats the shared value over a where range */
	t = vmap_text(MLP2, "mlp2", "B2", "E");
	assert_true(tu_contains(t, "  Z(b,h) = fmax(A(b, h) + B1(h), 0)\n"));
	assert_true(tu_contains(t, "  Y(e,b,o) +=! Z(b, r_h) * W2(o, r_h) where e in 0:E\n"));
	assert_true(tu_contains(t, "  Y(e,b,o) = Y(e, b, o) + B2(e, o)\n"));
	free(t);
	/* a name e in the def: the model index is e1 */
	t = vmap_text(SOFTMAX, "softmax", "I", "E");
	assert_true(tu_contains(t, "  e(e1,n,d) = exp(I(e1, n, d) - mx(e1, n))\n"));
	free(t);
	/* scalars: a batched scalar input and a declared scalar output get
	 * rank 1; a temporary scalar is written T(e) */
	t = vmap_text(SCALED, "scaled", "A,S", "E");
	assert_true(tu_contains(t, "def scaled(float32(E,N) A, float32(N) B, float32(E) S) -> "
		"(O, float32(E) Tot) {\n"));
	assert_true(tu_contains(t, "  T(e) +=! A(e, i) * A(e, i)\n"));
	assert_true(tu_contains(t, "  O(e,i) = (S(e) * B(i)) / T(e)\n"));
	free(t);
	/* gathers and scatters: the index tensor batched or not */
	t = vmap_text(EMBED, "embed", "Ids", "K");
	assert_true(tu_contains(t, "  O(e,t,d) = E(Ids(e, t), d)\n"));
	free(t);
	t = vmap_text(MISC, "misc", "I", "E");
	assert_true(tu_contains(t, "  H(e,I(e, i)) +=! A(i, 0) * 2.0\n"));
	assert_true(tu_contains(t, "  S(e,v) = Z(v) where e in 0:E\n"));
	assert_true(tu_contains(t, "  S(e,I(e, i)) max= B(i % K)\n"));
	assert_true(tu_contains(t, "  mn(i) min=! A(i, k)\n"));
	free(t);
	/* lets, exists and pad: the reads inside them */
	t = vmap_text(MISC, "misc", "A", "E");
	assert_true(tu_contains(t, "  O(e,i) +=! y * x where k in 0:K, x = A(e, i, k) + B(k), "
		"y = tanh(x)\n"));
	assert_true(tu_contains(t, "  O(e,i) += B(k) * 0.5\n"));
	assert_true(tu_contains(t, "where exists A(e, i, 0)\n"));
	assert_true(tu_contains(t, "  Q(e,i) max= pad(A(e, i + 1, 1), -1.0)\n"));
	free(t);
	/* a batched read only under ?: bounds nothing: a where range */
	t = vmap_text(CONCAT, "concat", "A", "E");
	assert_true(tu_contains(t, "where a = A(e, i), i in 0:N + M, e in 0:E\n"));
	free(t);
}

/* The module's def is not changed: its canonical hash is the same after
 * batching. */
static void test_the_def_is_not_changed(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, MISC, "f.tc");
	char before[17], after[17], *t;
	(void)state;
	assert_int_equal(tc_module_hash(m, "misc", before), 0);
	t = tc_module_vmap(m, "misc", "A,B", "E");
	assert_non_null(t);
	tc_string_free(t);
	assert_int_equal(tc_module_hash(m, "misc", after), 0);
	assert_string_equal(before, after);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* ---- golden text ---- */

static void check_golden(const char *src, const char *entry, const char *batch,
	const char *size, const char *file)
{
	char *text = vmap_text(src, entry, batch, size);
	tr_check_golden(file, text, "test_vmap", "the batched text");
	free(text);
}

static void test_printed_batched_def_matches_golden(void **state)
{
	(void)state;
	check_golden(MLP2, "mlp2", "W1,B1,W2,B2", "E", "vmap_mlp2.tc");
}

/* ---- errors ---- */

/* tc_module_vmap of entry in src fails with a message containing each of
 * the NULL-terminated needles, and an error of kind kind. */
static void expect_error(const char *src, const char *entry, const char *batch, const char *size,
	...)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "bad.tc");
	const char *needle;
	va_list ap;
	if (!m)
		fail_msg("%s", tc_context_error(ctx));
	assert_null(tc_module_vmap(m, entry, batch, size));
	assert_int_equal(tc_context_error_kind(ctx), TC_ERROR_USER);
	va_start(ap, size);
	while ((needle = va_arg(ap, const char *)))
		assert_true(tu_contains(tc_context_error(ctx), needle));
	va_end(ap);
	tc_module_free(m);
	tc_context_free(ctx);
}

static void test_misuse_is_an_error_with_its_message(void **state)
{
	(void)state;
	/* the size name */
	expect_error(MLP2, "mlp2", "W1", "H", "bad.tc:1:30: error: vmap: the size name 'H' is "
		"already a size of 'mlp2'; choose a name that 'mlp2' does not use", "^\n", NULL);
	expect_error(MLP2, "mlp2", "W1", "Z", "bad.tc:3:3: error: vmap: the size name 'Z' is "
		"already a name of 'mlp2'", NULL);
	expect_error(MLP2, "mlp2", "W1", "r_h", "bad.tc:4:18: error: vmap: the size name 'r_h' is "
		"already a name of 'mlp2'", "^~~\n", NULL);
	expect_error(MISC, "misc", "A", "x", "bad.tc:2:34: error: vmap: the size name 'x' is "
		"already a name of 'misc'", NULL);
	expect_error(MLP2, "mlp2", "W1", "2E", "bad.tc:1:5: error: vmap: the size name '2E' is not "
		"a valid size name: an identifier starts with a letter or '_'", NULL);
	expect_error(MLP2, "mlp2", "W1", "E-1", "an identifier has only letters, digits and '_'",
		NULL);
	expect_error(MLP2, "mlp2", "W1", "", "the size name '' is not a valid size name: it is "
		"empty", NULL);
	expect_error(MLP2, "mlp2", "W1", "where", "it is a keyword", NULL);
	expect_error(MLP2, "mlp2", "W1", "float", "it is a type name", NULL);
	expect_error(MLP2, "mlp2", "W1", "exp", "it is a builtin function", NULL);
	expect_error(MLP2, "mlp2", "W1", NULL, "tc_module_vmap: the size name is NULL", NULL);
	/* the inputs to batch */
	expect_error(MLP2, "mlp2", "Y", "E", "bad.tc:1:5: error: vmap: 'Y' is not an input of "
		"'mlp2' (its inputs: X, W1, B1, W2, B2)", "^~~~\n", NULL);
	expect_error(MLP2, "mlp2", "W1,A", "E", "vmap: 'A' is not an input of 'mlp2'", NULL);
	expect_error(MLP2, "mlp2", "W1,B1,W1", "E", "bad.tc:1:35: error: vmap: input 'W1' is "
		"named twice in the inputs to batch", NULL);
	expect_error(MLP2, "mlp2", "", "E", "bad.tc:1:5: error: vmap: no input of 'mlp2' to "
		"batch; name one or more (its inputs: X, W1, B1, W2, B2)", NULL);
	expect_error(MLP2, "mlp2", "W1,,B1", "E", "tc_module_vmap: empty name in 'W1,,B1'", NULL);
	expect_error(MLP2, "mlp2", "W1,", "E", "tc_module_vmap: empty name in 'W1,'", NULL);
	expect_error(MLP2, "mlp2", NULL, "E",
		"tc_module_vmap: the list of inputs to batch is NULL", NULL);
	expect_error(MLP2, "mlp", "W1", "E", "no def named 'mlp'", NULL);
	/* a rank that cannot grow: the input and what it computes */
	expect_error("def r8(float(A,B,C,D,F,G,H,I) X, float(A) Y) -> (O, P) {\n"
		     "  O(a,b,c,d,f,g,h,i) = X(a,b,c,d,f,g,h,i)\n  P(a) = Y(a)\n}\n", "r8", "X", "E",
		"bad.tc:1:31: error: vmap: 'X' has rank 8; batched, it would have 9 dimensions, "
		"but tcomp supports at most 8", "bad.tc:1:50: error: vmap: 'O' has rank 8", NULL);
}

/* ---- allocation failures ---- */

/* A derivation of test_allocation_failures_are_errors: entry of m batched
 * over the inputs batch, the new size E. */
typedef struct vmap_call {
	tc_module *m;
	const char *entry, *batch;
} vmap_call;

static char *vmap_call_derive(void *arg)
{
	const vmap_call *c = arg;
	return tc_module_vmap(c->m, c->entry, c->batch, "E");
}

/* tc_module_vmap with each of its allocations failing in turn gives NULL
 * and an out-of-memory error, or the text it gives without failures. */
static void test_allocation_failures_are_errors(void **state)
{
	static const struct {
		const char *src, *entry, *batch;
	} defs[] = {{MLP2, "mlp2", "W1,B1"}, {MISC, "misc", "A,I"}, {SCALED, "scaled", "S"}};
	(void)state;
	for (size_t c = 0; c < sizeof(defs) / sizeof(defs[0]); c++) {
		tc_context *ctx = tc_context_new();
		tc_module *m = tc_module_parse(ctx, defs[c].src, "f.tc");
		vmap_call call = {m, defs[c].entry, defs[c].batch};
		char *want = vmap_call_derive(&call);
		assert_non_null(want);
		assert_true(tr_each_allocation_failing(vmap_call_derive, &call, ctx, want) > 3);
		tc_string_free(want);
		tc_module_free(m);
		tc_context_free(ctx);
	}
}

/* ---- tcomp vmap ---- */

static void test_tcomp_vmap_command(void **state)
{
	char dir[512], path[600], *text;
	FILE *f;
	(void)state;
	snprintf(dir, sizeof(dir), "%s/tmp-vmap-XXXXXX", TC_BINARY_DIR);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/nets.tc", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(MLP2, f);
	fputs(EMBED, f);
	fclose(f);

	/* stdout */
	assert_int_equal(tr_tcomp(dir, "vmap nets.tc -e embed --batch E --size K", &text), 0);
	assert_string_equal(text, "def embed(float32(K,V,D) E, int64(T) Ids) -> (O) {\n"
				  "  O(e,t,d) = E(e, Ids(t), d)\n}\n");
	free(text);
	/* -o: the text is a file that tcomp checks */
	assert_int_equal(tr_tcomp(dir, "vmap nets.tc -e mlp2 --batch=W1,B1 --size E -o b.tc", &text),
		0);
	assert_string_equal(text, "");
	free(text);
	tr_tcomp_expect(dir, "check b.tc", 0,
		"def mlp2(float32(B,I) X, float32(E,H,I) W1, float32(E,H) B1, "
		"float32(O,H) W2, float32(O) B2) -> (float32(E,B,O) Y)  # temporaries: "
		"float32(E,B,H) A, float32(E,B,H) Z");
	/* errors: located, exit status 1; usage errors */
	tr_tcomp_expect(dir, "vmap nets.tc -e embed --batch E --size E", 1,
		"nets.tc:7:22: error: vmap: the size name 'E' is already a "
		"name of 'embed'");
	tr_tcomp_expect(dir, "vmap nets.tc -e embed --size K", 1, "vmap needs --batch A,B");
	tr_tcomp_expect(dir, "vmap nets.tc -e embed --batch E", 1, "vmap needs --size E");
	tr_tcomp_expect(dir, "vmap nets.tc --batch E --size K", 1, "-e");
	tr_tcomp_expect(dir, "vmap --help", 0, "usage: tcomp vmap FILE.tc");
	tr_tcomp_expect(dir, "--help", 0, "  vmap FILE.tc [-e NAME] --batch A,B --size E");
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batched_defs_match_the_def_run_per_model),
		cmocka_unit_test(test_the_example_of_the_brief),
		cmocka_unit_test(test_shared_statements_stay_and_batched_ones_get_the_index),
		cmocka_unit_test(test_the_def_is_not_changed),
		cmocka_unit_test(test_printed_batched_def_matches_golden),
		cmocka_unit_test(test_misuse_is_an_error_with_its_message),
		cmocka_unit_test(test_allocation_failures_are_errors),
		cmocka_unit_test(test_tcomp_vmap_command),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
