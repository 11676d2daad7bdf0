/* Per-sample gradients (tc_module_grad_per_sample, lang/grad_sample.c,
 * tcomp grad --per-sample).
 *
 * Each def is differentiated per sample (with and without saves, in
 * float32 and float64), and the per-sample backward def compiled for the
 * CPU must give, for every sample b, what the ordinary backward def gives
 * on a batch of one: sample b of every batched input (and of d_O, and of
 * the saved tensors, computed on that batch of one), every element; the
 * interpreter must agree with the CPU.  The printed per-sample backward of
 * an MLP is pinned by tests/golden/grad_mlp_per_sample.tc (after an
 * intended change run TC_UPDATE_GOLDEN=1 ./build/tests/test_grad_sample).
 * A def that mixes samples, a batch that is not a size, and a gradient
 * that does not depend on the batch are errors located in the source. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <ctype.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "testrun.h"

#define MAX_T 12
/* The batch size of every case: no tensor without a batch dimension has a
 * first dimension of this extent, so a tensor is batched (its first
 * dimension is the batch) exactly when its first extent is NB. */
#define NB 3
/* Per-sample against the ordinary def on a batch of one, and the CPU
 * against the interpreter: |x - want| <= TOL * (1 + |want|). */
#define TOL64 1e-12
#define TOL32 2e-5

/* A def to differentiate per sample: its source with float32 types
 * spelled "float" (float64(...) replaces float(...) for the float64
 * runs), --wrt (NULL: default), the batch size's name, the forward
 * inputs' shapes with the batch first where batched ("3x4"), the range of
 * random floating-point inputs, and that of integer ones. */
typedef struct ps_case {
	const char *name;
	const char *src;
	const char *wrt;
	const char *batch;
	const char *shapes[MAX_T];
	double lo, hi;
	int64_t ilo, ihi;
} ps_case;

static const char mlp_src[] =
	"def mlp(float(B,I) X, float(H,I) W1, float(H) B1, float(K,H) W2, float(K) B2) -> (Z) {\n"
	"    A(b,h) +=! X(b,r_i) * W1(h,r_i)\n"
	"    A(b,h) = fmax(A(b,h) + B1(h), 0)\n"
	"    Z(b,k) +=! A(b,r_h) * W2(k,r_h)\n"
	"    Z(b,k) = Z(b,k) + B2(k)\n"
	"}\n";

static const ps_case cases[] = {
	{"mlp", mlp_src, "W1,B1,W2,B2", "B", {"3x4", "5x4", "5", "2x5", "2"}, -1, 1, 0, 0},
	/* every floating-point input: d_X keeps X's shape */
	{"mlp", mlp_src, NULL, "B", {"3x4", "5x4", "5", "2x5", "2"}, -1, 1, 0, 0},
	{"conv",
		"def conv(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) Bias) -> (O) {\n"
		"    O(n,f,y,x) +=! I(n,c,y+kh,x+kw) * W1(f,c,kh,kw)\n"
		"    O(n,f,y,x) = O(n,f,y,x) + Bias(f)\n"
		"}\n",
		NULL, "N", {"3x2x5x4", "4x2x2x3", "4"}, -1, 1, 0, 0},
	/* a temporary of the parameters: its adjoint d_T(h) sums over the
	 * batch and feeds d_W, so it becomes per-sample too */
	{"scl",
		"def scl(float(B,H) X, float(H) W) -> (Z) {\n"
		"    T(h) = W(h) * W(h)\n"
		"    Z(b,h) = tanh(X(b,h) * T(h))\n"
		"}\n",
		"W", "B", {"3x4", "4"}, -1, 1, 0, 0},
	/* a layer norm per row: statistics per sample, samples independent */
	{"ln",
		"def ln(float(B,D) X, float(D) G, float(D) Be) -> (Y) {\n"
		"    M(b) +=! X(b,r_d) / D\n"
		"    V(b) +=! (X(b,r_d) - M(b)) * (X(b,r_d) - M(b)) / D\n"
		"    Y(b,d) = (X(b,d) - M(b)) / sqrt(V(b) + 0.00001) * G(d) + Be(d)\n"
		"}\n",
		NULL, "B", {"3x6", "6", "6"}, -1, 1, 0, 0},
	/* an embedding: the per-sample gradient of the table is a scatter */
	{"emb",
		"def emb(float(V,D) LUT, int64(B) I, float(D) W) -> (O) {\n"
		"    O(i,j) = tanh(LUT(I(i), j)) * W(j)\n"
		"}\n",
		NULL, "B", {"5x4", "3", "4"}, -1, 1, 0, 4},
};

/* The source of the case named name. */
static const char *case_named_src(const char *name)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(cases[i].name, name))
			return cases[i].src;
	fail_msg("no case %s", name);
	return NULL;
}

/* src with float(...) written float64(...) (f64), or a copy; malloc'd. */
static char *typed_source(const char *src, int f64)
{
	size_t n = strlen(src);
	char *out = malloc(2 * n + 1), *o = out;
	assert_non_null(out);
	for (const char *p = src; *p; p++) {
		if (f64 && !strncmp(p, "float(", 6)) {
			memcpy(o, "float64(", 8);
			o += 8;
			p += 5;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return out;
}

/* A copy of t (in *c). */
static void copy_tensor(const tu_tensor *t, tu_tensor *c)
{
	tu_tensor_init(c, t->elt, t->shape, t->dl.ndim);
	memcpy(c->data, t->data, (size_t)t->numel * tu_elt_size(t->elt));
}

/* Whether t is batched: its first extent is NB. */
static int batched(const tu_tensor *t)
{
	return t->dl.ndim > 0 && t->shape[0] == NB;
}

/* Sample b of t (in *s): its b-th slice along the first dimension, with
 * extent 1 there, where t is batched; else a copy. */
static void slice(const tu_tensor *t, int64_t b, tu_tensor *s)
{
	int64_t shape[TU_MAX_RANK];
	size_t each;
	if (!batched(t)) {
		copy_tensor(t, s);
		return;
	}
	memcpy(shape, t->shape, sizeof(shape));
	shape[0] = 1;
	tu_tensor_init(s, t->elt, shape, t->dl.ndim);
	each = (size_t)(t->numel / NB) * tu_elt_size(t->elt);
	memcpy(s->data, (const char *)t->data + (size_t)b * each, each);
}

/* The inputs of backward def bentry of mb at the forward inputs in (nin of
 * them) and the upstream gradients dO (one per forward output, nout): the
 * forward inputs, then the outputs and saved temporaries it reads, made by
 * the forward with saves of mb (entry_fwd) where it has one, else by the
 * forward def of mf; the number of inputs, in bin. */
static int backward_inputs(tc_module *mf, tc_module *mb, const char *entry, const char *bentry,
	tu_tensor *in, int nin, tu_tensor *dO, int nout, const tc_options *o, tc_context *ctx,
	tu_tensor *bin)
{
	char fwd[128];
	tc_module *mp = mf;
	const char *pentry = entry;
	tc_kernel *kp;
	tu_tensor pout[MAX_T];
	int nbin, npout;
	snprintf(fwd, sizeof(fwd), "%s_fwd", entry);
	if (tc_module_def_arity(mb, fwd, NULL, NULL) == 0) {
		mp = mb;
		pentry = fwd;
	}
	assert_int_equal(tc_module_def_arity(mb, bentry, &nbin, NULL), 0);
	assert_true(nbin <= MAX_T);
	kp = tr_compile(mp, pentry, in, nin, o, ctx);
	npout = tr_make_outputs(kp, pout, MAX_T, 0);
	tr_run(kp, in, nin, pout, npout);
	for (int i = 0; i < nbin; i++) {
		if (i < nin) {
			copy_tensor(&in[i], &bin[i]);
		} else if (i >= nbin - nout) {
			copy_tensor(&dO[i - (nbin - nout)], &bin[i]);
		} else {
			int p = tr_output_named(mp, pentry, nin, npout,
				tc_module_tensor_name(mb, bentry, i));
			assert_true(p >= 0);
			copy_tensor(&pout[p], &bin[i]);
		}
	}
	for (int i = 0; i < npout; i++)
		tu_tensor_fini(&pout[i]);
	tc_kernel_free(kp);
	return nbin;
}

static void expect_close(double got, double want, double tol, const char *what, int g,
	int64_t j, const char *text)
{
	if (!(fabs(got - want) <= tol * (1 + fabs(want))))
		fail_msg("%s: gradient %d [%lld]: %.17g, expected %.17g\n%s", what, g, (long long)j,
			got, want, text);
}

/* Case c per sample, in float64 (f64) or float32, with flags (0 or
 * TC_GRAD_SAVES). */
static void check_case(const ps_case *c, int f64, int flags)
{
	tc_context *ctx = tc_context_new();
	char *src = typed_source(c->src, f64), *text, *rtext, bentry[128], what[160];
	tc_module *mf, *mps, *mref;
	tc_options *oi;
	tc_kernel *kf, *kc, *ki, *kr = NULL;
	tu_tensor in[MAX_T], fout[MAX_T], dO[MAX_T], bin[MAX_T], gc[MAX_T], gi[MAX_T];
	int nin = 0, nout, nbin, ngrad;
	double tol = f64 ? TOL64 : TOL32;
	uint64_t rng = tu_seed(c->name, (uint64_t)(2 * f64 + flags));

	snprintf(what, sizeof(what), "%s (%s%s, wrt %s)", c->name, f64 ? "float64" : "float32",
		flags ? ", saves" : "", c->wrt ? c->wrt : "default");
	assert_non_null(ctx);
	mf = tc_module_parse(ctx, src, c->name);
	if (!mf)
		fail_msg("%s: %s", what, tc_context_error(ctx));
	text = tc_module_grad_per_sample(mf, c->name, c->wrt, c->batch, flags);
	if (!text)
		fail_msg("%s: tc_module_grad_per_sample failed:\n%s", what, tc_context_error(ctx));
	rtext = tc_module_grad(mf, c->name, c->wrt, flags);
	assert_non_null(rtext);
	mps = tc_module_parse(ctx, text, "per_sample.tc");
	if (!mps)
		fail_msg("%s: the per-sample text does not check:\n%s\n%s", what, text,
			tc_context_error(ctx));
	mref = tc_module_parse(ctx, rtext, "grad.tc");
	assert_non_null(mref);
	snprintf(bentry, sizeof(bentry), "%s_grad", c->name);

	/* random inputs, never zero; d_O random in [0.25, 1.25) */
	assert_int_equal(tc_module_def_arity(mf, c->name, &nin, &nout), 0);
	for (int i = 0; i < nin; i++) {
		int64_t dims[8];
		int nd = tr_parse_dims(c->shapes[i], dims);
		DLDataType dt;
		assert_int_equal(tc_module_input_type(mf, c->name, i, &dt, NULL), 0);
		if (dt.code == kDLFloat) {
			tu_tensor_init(&in[i], f64 ? TU_F64 : TU_F32, dims, nd);
			for (int64_t j = 0; j < in[i].numel; j++) {
				double v = c->lo + (c->hi - c->lo) * tu_rand_unit(&rng);
				if (v == 0)
					v = 0.5;
				if (f64)
					((double *)in[i].data)[j] = v;
				else
					((float *)in[i].data)[j] = (float)v;
			}
		} else {
			tu_tensor_init(&in[i], TU_I64, dims, nd);
			for (int64_t j = 0; j < in[i].numel; j++)
				((int64_t *)in[i].data)[j] = tu_rand_int(&rng, c->ilo, c->ihi);
		}
	}
	oi = tr_interp_options(ctx);
	kf = tr_compile(mf, c->name, in, nin, NULL, ctx);
	assert_int_equal(tr_make_outputs(kf, fout, MAX_T, 0), nout);
	for (int o = 0; o < nout; o++) {
		assert_true(batched(&fout[o]));
		tu_tensor_init(&dO[o], fout[o].elt, fout[o].shape, fout[o].dl.ndim);
		for (int64_t j = 0; j < dO[o].numel; j++) {
			double v = 0.25 + tu_rand_unit(&rng);
			if (f64)
				((double *)dO[o].data)[j] = v;
			else
				((float *)dO[o].data)[j] = (float)v;
		}
	}

	/* the per-sample def on the whole batch, CPU and interpreter */
	nbin = backward_inputs(mf, mps, c->name, bentry, in, nin, dO, nout, NULL, ctx, bin);
	kc = tr_compile(mps, bentry, bin, nbin, NULL, ctx);
	ki = tr_compile(mps, bentry, bin, nbin, oi, ctx);
	ngrad = tr_make_outputs(kc, gc, MAX_T, 0);
	assert_int_equal(tr_make_outputs(ki, gi, MAX_T, 0), ngrad);
	tr_run(kc, bin, nbin, gc, ngrad);
	tr_run(ki, bin, nbin, gi, ngrad);
	for (int g = 0; g < ngrad; g++) {
		assert_true(batched(&gc[g]));
		for (int64_t j = 0; j < gc[g].numel; j++)
			expect_close(tu_get(&gi[g], j), tu_get(&gc[g], j), tol, what, g, j, text);
	}

	/* the ordinary def on each sample alone */
	for (int64_t b = 0; b < NB; b++) {
		tu_tensor sin[MAX_T], sdO[MAX_T], sbin[MAX_T], sg[MAX_T];
		int snbin;
		for (int i = 0; i < nin; i++)
			slice(&in[i], b, &sin[i]);
		for (int o = 0; o < nout; o++)
			slice(&dO[o], b, &sdO[o]);
		snbin = backward_inputs(mf, mref, c->name, bentry, sin, nin, sdO, nout, NULL, ctx,
			sbin);
		assert_int_equal(snbin, nbin);
		if (!kr)
			kr = tr_compile(mref, bentry, sbin, snbin, NULL, ctx);
		assert_int_equal(tr_make_outputs(kr, sg, MAX_T, 0), ngrad);
		tr_run(kr, sbin, snbin, sg, ngrad);
		for (int g = 0; g < ngrad; g++) {
			int64_t each = gc[g].numel / NB;
			assert_int_equal(sg[g].numel, each);
			for (int64_t j = 0; j < each; j++)
				expect_close(tu_get(&gc[g], b * each + j), tu_get(&sg[g], j), tol, what, g,
					b * each + j, text);
			tu_tensor_fini(&sg[g]);
		}
		for (int i = 0; i < nin; i++)
			tu_tensor_fini(&sin[i]);
		for (int o = 0; o < nout; o++)
			tu_tensor_fini(&sdO[o]);
		for (int i = 0; i < snbin; i++)
			tu_tensor_fini(&sbin[i]);
	}

	for (int i = 0; i < nin; i++)
		tu_tensor_fini(&in[i]);
	for (int o = 0; o < nout; o++) {
		tu_tensor_fini(&fout[o]);
		tu_tensor_fini(&dO[o]);
	}
	for (int i = 0; i < nbin; i++)
		tu_tensor_fini(&bin[i]);
	for (int g = 0; g < ngrad; g++) {
		tu_tensor_fini(&gc[g]);
		tu_tensor_fini(&gi[g]);
	}
	tc_kernel_free(kf);
	tc_kernel_free(kc);
	tc_kernel_free(ki);
	tc_kernel_free(kr);
	tc_options_free(oi);
	tc_string_free(text);
	tc_string_free(rtext);
	tc_module_free(mps);
	tc_module_free(mref);
	tc_module_free(mf);
	free(src);
	tc_context_free(ctx);
}

static void test_per_sample_matches_each_sample_alone(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int f64 = 0; f64 < 2; f64++) {
			check_case(&cases[i], f64, 0);
			check_case(&cases[i], f64, TC_GRAD_SAVES);
		}
}

/* ---- the derived text ---- */

/* The per-sample text of entry in src (wrt, batch, flags); malloc'd by the
 * library (tc_string_free). */
static char *per_sample_text(const char *src, const char *entry, const char *wrt,
	const char *batch, int flags)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "f.tc");
	char *text;
	if (!m)
		fail_msg("%s", tc_context_error(ctx));
	text = tc_module_grad_per_sample(m, entry, wrt, batch, flags);
	if (!text)
		fail_msg("%s: %s", entry, tc_context_error(ctx));
	tc_module_free(m);
	tc_context_free(ctx);
	return text;
}

/* The MLP's per-sample backward (the parameters only, recomputing) is
 * tests/golden/grad_mlp_per_sample.tc. */
static void test_printed_mlp_per_sample_matches_golden(void **state)
{
	char *text = per_sample_text(mlp_src, "mlp", "W1,B1,W2,B2", "B", 0);
	(void)state;
	tr_check_golden("grad_mlp_per_sample.tc", text, "test_grad_sample", "the per-sample text");
	tc_string_free(text);
}

/* The rule on small defs: a reduction over the batch alone becomes '=',
 * another reduction index stays '+=!'; a temporary summed over the batch
 * becomes per-sample with what reads it (a fresh batch index there); the
 * batch dimension need not be the first; a where range names it. */
static void test_rule_keeps_the_batch_index(void **state)
{
	char *t;
	(void)state;
	t = per_sample_text(case_named_src("conv"), "conv", NULL, "N", 0);
	assert_true(tu_contains(t, "-> (float32(N,C,H,W) d_I, float32(N,F,C,KH,KW) d_W1, "
		"float32(N,F) d_Bias) {\n"));
	assert_true(tu_contains(t, "  d_Bias(n,f) +=! d_O(n, f, y, x)\n"));
	assert_true(tu_contains(t, "  d_W1(n,f,c,kh,kw) +=! d_O(n, f, y, x) * "
		"I(n, c, y + kh, x + kw) where kh in 0:KH, kw in 0:KW\n"));
	tc_string_free(t);
	t = per_sample_text(case_named_src("scl"), "scl", "W", "B", 0);
	assert_true(tu_contains(t, "-> (float32(B,H) d_W) {\n"));
	assert_true(tu_contains(t, "  d_T(b,h) = "));
	assert_true(tu_contains(t, "  d_W(b,h) = d_T(b, h) * (W(h) + W(h))\n"));
	tc_string_free(t);
	t = per_sample_text("def tr(float(D,B) X, float(D) W) -> (Y) {\n"
			    "  Y(d,s) = X(d,s) * W(d)\n}\n", "tr", "W", "B", 0);
	assert_true(tu_contains(t, "-> (float32(B,D) d_W) {\n  d_W(s,d) = d_Y(d, s) * X(d, s)\n}\n"));
	tc_string_free(t);
	t = per_sample_text("def wr(float(B,D) X, float(D) W) -> (float(B,D) Y) {\n"
			    "  Y(i,d) = X(i,d) * W(d) where i in 0:B\n}\n", "wr", "W", "B", 0);
	assert_true(tu_contains(t, "  d_W(i,d) = d_Y(i, d) * X(i, d) where i in 0:B\n"));
	tc_string_free(t);
	/* a gradient that is zero until statements add parts: the zero per
	 * sample too, over a where range of the batch */
	t = per_sample_text("def part(float(B,K) A, float(K) W) -> (O) {\n"
			    "  O(b) +=! A(b,k) * W(k) where k in 1:K-1\n}\n", "part", "W", "B", 0);
	assert_true(tu_contains(t, "  d_W(b,i0) = 0.0 where b in 0:B, i0 in 0:K\n"));
	assert_true(tu_contains(t, "  d_W(b,k) += d_O(b) * A(b, k) where k in 1:K - 1\n"));
	tc_string_free(t);
}

/* ---- errors ---- */

/* tc_module_grad_per_sample of entry in src (wrt, batch) fails with a
 * message containing each of the NULL-terminated needles. */
static void expect_error(const char *src, const char *entry, const char *wrt, const char *batch,
	...)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, src, "bad.tc");
	const char *needle;
	va_list ap;
	if (!m)
		fail_msg("%s", tc_context_error(ctx));
	assert_null(tc_module_grad_per_sample(m, entry, wrt, batch, 0));
	assert_int_equal(tc_context_error_kind(ctx), TC_ERROR_USER);
	va_start(ap, batch);
	while ((needle = va_arg(ap, const char *)))
		assert_true(tu_contains(tc_context_error(ctx), needle));
	va_end(ap);
	assert_null(tc_module_grad_per_sample(m, entry, wrt, batch, TC_GRAD_SAVES));
	tc_module_free(m);
	tc_context_free(ctx);
}

static void test_errors_are_located(void **state)
{
	(void)state;
	expect_error(mlp_src, "mlp", NULL, "Q", "bad.tc:1:5: error: gradient: per-sample: 'Q' "
		"is not a size of 'mlp' (its sizes: B, I, H, K)", "^~~", NULL);
	/* a batch norm's mean mixes samples */
	expect_error("def bn(float(B,C) X, float(C) G) -> (Y) {\n"
		     "  M(c) +=! X(b,c) / B\n"
		     "  Y(b,c) = (X(b,c) - M(c)) * G(c)\n}\n", "bn", NULL, "B",
		"bad.tc:2:14: error: gradient: per-sample gradients need samples that are "
		"independent, but 'M' reduces over the batch index 'b' (0:B), mixing samples", NULL);
	expect_error("def sh(float(B,D) X, float(D) W) -> (Y) {\n"
		     "  Y(b,d) = X(b,d) * W(d) + X(0,d)\n}\n", "sh", NULL, "B",
		"bad.tc:2:30: error: gradient: per-sample gradients need samples that are "
		"independent, but dimension 1 of 'X' (the batch, 0:B) is read at '0', not at the "
		"plain batch index", NULL);
	expect_error("def rev(float(B,D) X, float(D) W) -> (Y) {\n"
		     "  Y(b,d) = X(B - 1 - b,d) * W(d)\n}\n", "rev", NULL, "B",
		"bad.tc:2:14: error:", "is read at '(B - 1) - b', not at the plain batch index",
		NULL);
	expect_error("def gram(float(B,D) X) -> (G) {\n"
		     "  G(b1,b2) +=! X(b1,d) * X(b2,d)\n}\n", "gram", NULL, "B",
		"bad.tc:2:8: error: gradient: per-sample gradients need samples that are "
		"independent, but 'b1' and 'b2' both range over the batch (0:B) in this statement, "
		"mixing samples", NULL);
	expect_error("def reg(float(B,D) X, float(D) W) -> (Y, R) {\n"
		     "  Y(b,d) = X(b,d) * W(d)\n  R(d) = W(d) * W(d)\n}\n", "reg", NULL, "B",
		"bad.tc:1:42: error: gradient: per-sample gradients need samples that are "
		"independent, but output 'R' has no dimension of size 'B': it is not per sample",
		NULL);
	/* V is not read: its gradient is zero, the same for every sample */
	expect_error("def nd(float(B,D) X, float(D) W, float(D) V) -> (Y) {\n"
		     "  Y(b,d) = X(b,d) * W(d)\n}\n", "nd", "W,V", "B",
		"bad.tc:1:43: error: gradient: per-sample: the gradient of 'V' does not depend on "
		"the batch 'B' (no sample's output reads it), so it has no per-sample value", NULL);
	/* the ordinary derivation's errors come first */
	expect_error("def lg(float(B) A) -> (O) {\n  O(b) = lgamma(A(b))\n}\n", "lg", NULL, "B",
		"the derivative of 'lgamma' is not supported yet", NULL);
	expect_error(mlp_src, "nope", NULL, "B", "no def named 'nope'", NULL);
}

/* ---- every def of the corpus ---- */

/* The size names of def name of m (up to max, malloc'd, into sizes): the
 * single names among the extents of its signature; their number. */
static int sizes_of(tc_module *m, const char *name, char **sizes, int max)
{
	char *sig = tc_module_signature(m, name);
	int n = 0;
	assert_non_null(sig);
	for (char *p = sig + 1; *p && n < max; p++) {
		size_t len = 0;
		int k;
		if ((p[-1] != '(' && p[-1] != ',') || !isupper((unsigned char)*p))
			continue;
		while (isalnum((unsigned char)p[len]) || p[len] == '_')
			len++;
		if (p[len] != ',' && p[len] != ')')
			continue;
		for (k = 0; k < n && (strlen(sizes[k]) != len || strncmp(sizes[k], p, len)); k++)
			;
		if (k == n)
			sizes[n++] = strndup(p, len);
	}
	tc_string_free(sig);
	return n;
}

/* Counts of the corpus test. */
typedef struct corpus_counts {
	int derived, refused, mixing;
} corpus_counts;

/* Def name of m (loaded from file) per sample over batch with flags: the
 * text checks, or the error is a located "gradient:" one in file, not an
 * internal error. */
static void per_sample_or_located(tc_context *ctx, tc_module *m, const char *file,
	const char *name, const char *batch, int flags, corpus_counts *n)
{
	char *text = tc_module_grad_per_sample(m, name, NULL, batch, flags);
	const char *e;
	if (text) {
		tc_module *mb = tc_module_parse(ctx, text, "grad.tc");
		if (!mb)
			fail_msg("%s: %s per %s: the text does not check:\n%s\n%s", file, name, batch,
				text, tc_context_error(ctx));
		tc_module_free(mb);
		tc_string_free(text);
		n->derived++;
		return;
	}
	e = tc_context_error(ctx);
	assert_int_equal(tc_context_error_kind(ctx), TC_ERROR_USER);
	assert_true(tu_contains(e, file));
	assert_true(tu_contains(e, ": error: gradient: "));
	assert_true(tu_contains(e, "^"));
	if (strstr(e, "internal error"))
		fail_msg("%s: %s per %s: %s", file, name, batch, e);
	n->mixing += strstr(e, "need samples that are independent") != NULL;
	n->refused++;
}

/* Every def of m (loaded from file) per sample over each of its sizes in
 * turn, with and without saves (arg: corpus_counts). */
static void per_sample_each_size(tc_context *ctx, tc_module *m, const char *file,
	const char *path, void *arg)
{
	(void)path;
	for (int i = 0; i < tc_module_num_defs(m); i++) {
		const char *name = tc_module_def_name(m, i);
		char *sizes[16];
		int nsizes = sizes_of(m, name, sizes, 16);
		for (int k = 0; k < nsizes; k++) {
			per_sample_or_located(ctx, m, file, name, sizes[k], 0, arg);
			per_sample_or_located(ctx, m, file, name, sizes[k], TC_GRAD_SAVES, arg);
			free(sizes[k]);
		}
	}
}

/* Every def of tests/corpus, examples/ and bench/kernels.tc, per sample
 * over each of its sizes in turn, with and without saves: the text checks,
 * or the error is a located "gradient:" one, never an internal error.  At
 * least 20 succeed, and some fail because the def mixes samples. */
static void test_corpus_defs_per_sample_or_fail_located(void **state)
{
	corpus_counts n = {0, 0, 0};
	(void)state;
	tr_each_corpus_module(per_sample_each_size, &n);
	printf("per sample: derived %d, refused %d (%d mixing samples)\n", n.derived, n.refused,
		n.mixing);
	assert_true(n.derived >= 20);
	assert_true(n.mixing > 0);
}

/* ---- allocation failures ---- */

/* A derivation of test_allocation_failures_are_errors: the MLP of m per
 * sample over B, with flags. */
typedef struct mlp_call {
	tc_module *m;
	int flags;
} mlp_call;

static char *mlp_call_derive(void *arg)
{
	const mlp_call *c = arg;
	return tc_module_grad_per_sample(c->m, "mlp", NULL, "B", c->flags);
}

/* tc_module_grad_per_sample with each of its allocations failing in turn
 * gives NULL and an out-of-memory error, or the text it gives without
 * failures. */
static void test_allocation_failures_are_errors(void **state)
{
	(void)state;
	for (int flags = 0; flags <= TC_GRAD_SAVES; flags += TC_GRAD_SAVES) {
		tc_context *ctx = tc_context_new();
		tc_module *m = tc_module_parse(ctx, mlp_src, "f.tc");
		mlp_call call = {m, flags};
		char *want = mlp_call_derive(&call);
		assert_non_null(want);
		assert_true(tr_each_allocation_failing(mlp_call_derive, &call, ctx, want) > 10);
		tc_string_free(want);
		tc_module_free(m);
		tc_context_free(ctx);
	}
}

/* ---- tcomp grad --per-sample ---- */

static void test_tcomp_grad_per_sample_command(void **state)
{
	char dir[512], path[600], *text, *want;
	FILE *f;
	(void)state;
	snprintf(dir, sizeof(dir), "%s/tmp-grad-sample-XXXXXX", TC_BINARY_DIR);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/mlp.tc", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(mlp_src, f);
	fclose(f);
	/* the library's text, and a file tcomp checks */
	want = per_sample_text(mlp_src, "mlp", "W1,B1,W2,B2", "B", TC_GRAD_SAVES);
	assert_int_equal(tr_tcomp(dir, "grad mlp.tc --wrt W1,B1,W2,B2 --saves --per-sample B", &text),
		0);
	assert_string_equal(text, want);
	free(text);
	tc_string_free(want);
	assert_int_equal(tr_tcomp(dir, "grad mlp.tc --per-sample=B -o g.tc", &text), 0);
	assert_string_equal(text, "");
	free(text);
	tr_tcomp_expect(dir, "check g.tc", 0,
		"-> (float32(B,I) d_X, float32(B,H,I) d_W1, float32(B,H) "
		"d_B1, float32(B,K,H) d_W2, float32(B,K) d_B2)");
	/* errors: located, exit status 1 */
	tr_tcomp_expect(dir, "grad mlp.tc --per-sample H2", 1,
		"mlp.tc:1:5: error: gradient: per-sample: 'H2' is not a "
		"size of 'mlp'");
	tr_tcomp_expect(dir, "grad mlp.tc --per-sample", 1, NULL);
	tr_tcomp_expect(dir, "grad --help", 0, "--per-sample B");
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_sample_matches_each_sample_alone),
		cmocka_unit_test(test_printed_mlp_per_sample_matches_golden),
		cmocka_unit_test(test_rule_keeps_the_batch_index),
		cmocka_unit_test(test_errors_are_located),
		cmocka_unit_test(test_corpus_defs_per_sample_or_fail_located),
		cmocka_unit_test(test_allocation_failures_are_errors),
		cmocka_unit_test(test_tcomp_grad_per_sample_command),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
