/* The training runtime (include/tcomp.h, "training"; runtime/train.c,
 * runtime/optim.c) on a small perceptron, the model of
 * examples/train_mlp.tc at other sizes and types:
 *   - the gradients of a step, for the whole model, against float64
 *     central finite differences of the loss (tc_model_eval);
 *   - a few steps of SGD, SGD with momentum and Adam (with and without
 *     weight decay) against an independent float64 implementation in plain
 *     C (forward, loss, backward and update written out here): every
 *     step's loss and the final parameters, in float64 and float32;
 *   - the steady state allocates nothing (the library's allocation hook
 *     counts every allocation);
 *   - initialisers: the same seed the same values, bounds and moments of
 *     each kind;
 *   - tc_model_forward at another batch size against the reference;
 *   - an ensemble (tc_model_ensemble) against a reference per model, and
 *     steps on partial batches (tc_model_step_rows);
 *   - every misuse the API refuses, with its message.
 * Data are random, never 0; labels in [0, K). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "testutil.h"
#include "testrun.h"

#include "../lang/util.h"

#define B 6
#define I 7
#define H 5
#define K 4
#define NP (H * I + H + K * H + K)

/* The model of examples/train_mlp.tc with the element type T. */
static char *model_source(const char *t)
{
	static char buf[2048];
	snprintf(buf, sizeof(buf),
		"def mlp(%s(B,I) X, %s(H,I) W1, %s(H) B1, %s(K,H) W2, %s(K) B2) -> (Z) {\n"
		"    A(b,h) +=! X(b,r_i) * W1(h,r_i)\n"
		"    A(b,h) = fmax(A(b,h) + B1(h), 0)\n"
		"    Z(b,k) +=! A(b,r_h) * W2(k,r_h)\n"
		"    Z(b,k) = Z(b,k) + B2(k)\n"
		"}\n"
		"def xent(%s(B,K) Z, int64(B) Y) -> (L) {\n"
		"    mx(b) max=! Z(b,r_k)\n"
		"    s(b) +=! exp(Z(b,r_k) - mx(b))\n"
		"    picked(b) +=! Y(b) == r_k ? Z(b,r_k) : 0.0\n"
		"    L +=! (log(s(r_b)) + mx(r_b) - picked(r_b)) / B\n"
		"}\n",
		t, t, t, t, t, t);
	return buf;
}

/* ---- the reference: the same model in float64, written out ---- */

typedef struct ref {
	double w1[H][I], b1[H], w2[K][H], b2[K];    /* parameters */
	double gw1[H][I], gb1[H], gw2[K][H], gb2[K]; /* gradients of the last step */
	double s1[NP], s2[NP];                       /* optimiser state, flat */
} ref;

/* The loss of the first nb rows of x, y under r's parameters (the mean
 * over nb); with grads, the gradients too. */
static double ref_loss_rows(ref *r, double x[B][I], const int64_t *y, int grads, int nb)
{
	double a[B][H], pre[B][H], z[B][K], loss = 0;
	for (int b = 0; b < nb; b++)
		for (int h = 0; h < H; h++) {
			double s = 0;
			for (int i = 0; i < I; i++)
				s += x[b][i] * r->w1[h][i];
			pre[b][h] = s + r->b1[h];
			a[b][h] = pre[b][h] > 0 ? pre[b][h] : 0;
		}
	for (int b = 0; b < nb; b++)
		for (int k = 0; k < K; k++) {
			double s = r->b2[k];
			for (int h = 0; h < H; h++)
				s += a[b][h] * r->w2[k][h];
			z[b][k] = s;
		}
	if (grads) {
		memset(r->gw1, 0, sizeof(r->gw1));
		memset(r->gb1, 0, sizeof(r->gb1));
		memset(r->gw2, 0, sizeof(r->gw2));
		memset(r->gb2, 0, sizeof(r->gb2));
	}
	for (int b = 0; b < nb; b++) {
		double mx = z[b][0], sum = 0, dz[K], da[H];
		for (int k = 1; k < K; k++)
			mx = fmax(mx, z[b][k]);
		for (int k = 0; k < K; k++)
			sum += exp(z[b][k] - mx);
		loss += (log(sum) + mx - z[b][y[b]]) / nb;
		if (!grads)
			continue;
		for (int k = 0; k < K; k++)
			dz[k] = (exp(z[b][k] - mx) / sum - (k == y[b])) / nb;
		for (int h = 0; h < H; h++) {
			da[h] = 0;
			for (int k = 0; k < K; k++)
				da[h] += dz[k] * r->w2[k][h];
			da[h] = pre[b][h] > 0 ? da[h] : 0;
		}
		for (int k = 0; k < K; k++) {
			r->gb2[k] += dz[k];
			for (int h = 0; h < H; h++)
				r->gw2[k][h] += dz[k] * a[b][h];
		}
		for (int h = 0; h < H; h++) {
			r->gb1[h] += da[h];
			for (int i = 0; i < I; i++)
				r->gw1[h][i] += da[h] * x[b][i];
		}
	}
	return loss;
}

static double ref_loss(ref *r, double x[B][I], const int64_t *y, int grads)
{
	return ref_loss_rows(r, x, y, grads, B);
}

/* The parameters (or gradients: grads != 0) of r as one flat list, in the
 * order W1, B1, W2, B2; p points at each element. */
static void ref_flat(ref *r, int grads, double *p[NP])
{
	int n = 0;
	for (int h = 0; h < H; h++)
		for (int i = 0; i < I; i++)
			p[n++] = grads ? &r->gw1[h][i] : &r->w1[h][i];
	for (int h = 0; h < H; h++)
		p[n++] = grads ? &r->gb1[h] : &r->b1[h];
	for (int k = 0; k < K; k++)
		for (int h = 0; h < H; h++)
			p[n++] = grads ? &r->gw2[k][h] : &r->w2[k][h];
	for (int k = 0; k < K; k++)
		p[n++] = grads ? &r->gb2[k] : &r->b2[k];
}

/* One update of r's parameters from its gradients, step t (from 1), as
 * include/tcomp.h states it. */
static void ref_update(ref *r, const tc_optimizer *o, int t)
{
	double *p[NP], *g[NP];
	ref_flat(r, 0, p);
	ref_flat(r, 1, g);
	for (int n = 0; n < NP; n++) {
		*p[n] *= 1 - o->lr * o->weight_decay;
		switch (o->kind) {
		case TC_OPT_SGD:
			*p[n] -= o->lr * *g[n];
			break;
		case TC_OPT_MOMENTUM:
			r->s1[n] = o->momentum * r->s1[n] + *g[n];
			*p[n] -= o->lr * r->s1[n];
			break;
		case TC_OPT_ADAM:
			r->s1[n] = o->beta1 * r->s1[n] + (1 - o->beta1) * *g[n];
			r->s2[n] = o->beta2 * r->s2[n] + (1 - o->beta2) * *g[n] * *g[n];
			*p[n] -= o->lr * (r->s1[n] / (1 - pow(o->beta1, t))) /
				(sqrt(r->s2[n] / (1 - pow(o->beta2, t))) + o->eps);
			break;
		}
	}
}

/* ---- the model under test ---- */

typedef struct fixture {
	tc_context *ctx;
	tc_module *m;
	tc_model *md;
	int f64;
} fixture;

static const int64_t shape_w1[2] = {H, I}, shape_b1[1] = {H}, shape_w2[2] = {K, H},
		     shape_b2[1] = {K}, shape_x[2] = {B, I}, shape_y[1] = {B};

/* A built model of the element type (f64: float64, else float32) with
 * optimiser o; its parameters random from seed (Kaiming and uniform); with
 * ens > 0 an ensemble of ens models. */
static void model_make_ens(fixture *fx, int f64, const tc_optimizer *o, uint64_t seed, int ens)
{
	tc_init wi = {TC_INIT_KAIMING_UNIFORM, 0, 0, 0, 0};
	tc_init bi = {TC_INIT_UNIFORM, -0.5, 0.5, 0, 0};
	fx->f64 = f64;
	assert_non_null(fx->ctx = tc_context_new());
	fx->m = tc_module_parse(fx->ctx, model_source(f64 ? "float64" : "float32"), "model.tc");
	assert_non_null(fx->m);
	assert_non_null(fx->md = tc_model_new(fx->m, "mlp", "xent"));
	assert_int_equal(tc_model_param(fx->md, "W1", 2, shape_w1, &wi), 0);
	assert_int_equal(tc_model_param(fx->md, "B1", 1, shape_b1, &bi), 0);
	assert_int_equal(tc_model_param(fx->md, "W2", 2, shape_w2, &wi), 0);
	assert_int_equal(tc_model_param(fx->md, "B2", 1, shape_b2, &bi), 0);
	assert_int_equal(tc_model_input(fx->md, "X", 2, shape_x), 0);
	assert_int_equal(tc_model_input(fx->md, "Y", 1, shape_y), 0);
	if (ens)
		assert_int_equal(tc_model_ensemble(fx->md, ens), 0);
	if (tc_model_build(fx->md, o, NULL, seed) < 0)
		fail_msg("build: %s", tc_context_error(fx->ctx));
}

static void model_make(fixture *fx, int f64, const tc_optimizer *o, uint64_t seed)
{
	model_make_ens(fx, f64, o, seed, 0);
}

static void model_done(fixture *fx)
{
	tc_model_free(fx->md);
	tc_module_free(fx->m);
	tc_context_free(fx->ctx);
}

static double get(const DLTensor *t, int64_t i)
{
	return t->dtype.bits == 64 ? ((double *)t->data)[i] : ((float *)t->data)[i];
}

static void set(DLTensor *t, int64_t i, double v)
{
	if (t->dtype.bits == 64)
		((double *)t->data)[i] = v;
	else
		((float *)t->data)[i] = (float)v;
}

static DLTensor *tensor(fixture *fx, const char *name)
{
	DLTensor *t = tc_model_tensor(fx->md, name);
	if (!t)
		fail_msg("tc_model_tensor(%s): %s", name, tc_context_error(fx->ctx));
	return t;
}

/* Fresh random data (values of the model's type) into the model's X and Y
 * and into x, y. */
static void fill_data(fixture *fx, uint64_t *s, double x[B][I], int64_t y[B])
{
	DLTensor *X = tensor(fx, "X"), *Y = tensor(fx, "Y");
	for (int b = 0; b < B; b++) {
		for (int i = 0; i < I; i++) {
			double v = tu_rand_unit(s) * 2 - 1;
			set(X, b * I + i, v);
			x[b][i] = get(X, b * I + i); /* the value the model holds */
		}
		y[b] = ((int64_t *)Y->data)[b] = tu_rand_int(s, 0, K - 1);
	}
}

/* The elements of T that are model e's in an ensemble (e < 0: all of T):
 * their count, the first in *first. */
static int64_t model_slice(const DLTensor *T, int e, int64_t *first)
{
	int64_t cnt = 1;
	for (int d = 0; d < T->ndim; d++)
		cnt *= T->shape[d];
	*first = 0;
	if (e >= 0) {
		cnt /= T->shape[0];
		*first = e * cnt;
	}
	return cnt;
}

/* r's parameters from the model's (model e's in an ensemble; e < 0: not
 * an ensemble). */
static void ref_from_model_e(ref *r, fixture *fx, int e)
{
	static const char *const names[4] = {"W1", "B1", "W2", "B2"};
	double *p[NP];
	int n = 0;
	memset(r, 0, sizeof(*r));
	ref_flat(r, 0, p);
	for (int t = 0; t < 4; t++) {
		DLTensor *T = tensor(fx, names[t]);
		int64_t first, cnt = model_slice(T, e, &first);
		for (int64_t j = 0; j < cnt; j++)
			*p[n++] = get(T, first + j);
	}
	assert_int_equal(n, NP);
}

static void ref_from_model(ref *r, fixture *fx)
{
	ref_from_model_e(r, fx, -1);
}

/* The largest |model - ref| over the parameters (grads: gradients) of
 * model e of an ensemble (e < 0: not an ensemble), relative to 1 + the
 * largest |ref|. */
static double param_diff_e(ref *r, fixture *fx, int grads, int e)
{
	static const char *const names[4] = {"W1", "B1", "W2", "B2"};
	double *p[NP], worst = 0, big = 0;
	char name[8];
	int n = 0;
	ref_flat(r, grads, p);
	for (int t = 0; t < 4; t++) {
		DLTensor *T;
		int64_t first, cnt;
		snprintf(name, sizeof(name), "%s%s", grads ? "d_" : "", names[t]);
		T = tensor(fx, name);
		cnt = model_slice(T, e, &first);
		for (int64_t j = 0; j < cnt; j++, n++) {
			worst = fmax(worst, fabs(get(T, first + j) - *p[n]));
			big = fmax(big, fabs(*p[n]));
		}
	}
	return worst / (1 + big);
}

static double param_diff(ref *r, fixture *fx, int grads)
{
	return param_diff_e(r, fx, grads, -1);
}

/* ---- tests ---- */

/* The gradients a step leaves in d_W1 ... d_B2 against central finite
 * differences of tc_model_eval's loss, every parameter element, float64;
 * lr 0 so that the step leaves the parameters as they were. */
static void test_gradients_match_finite_differences(void **state)
{
	static const char *const names[4] = {"W1", "B1", "W2", "B2"};
	tc_optimizer o;
	fixture fx;
	double x[B][I], loss, worst = 0;
	int64_t y[B];
	uint64_t s = tu_seed("fd", 0);
	(void)state;
	tc_optimizer_init(&o, TC_OPT_SGD, 0.0);
	model_make(&fx, 1, &o, 7);
	fill_data(&fx, &s, x, y);
	assert_int_equal(tc_model_step(fx.md, &loss), 0);
	for (int t = 0; t < 4; t++) {
		char gname[8];
		DLTensor *P = tensor(&fx, names[t]), *G;
		int64_t cnt = 1;
		snprintf(gname, sizeof(gname), "d_%s", names[t]);
		G = tensor(&fx, gname);
		for (int d = 0; d < P->ndim; d++)
			cnt *= P->shape[d];
		for (int64_t e = 0; e < cnt; e++) {
			double v = get(P, e), h = 1e-6 * fmax(1, fabs(v)), lp, lm, fd, g = get(G, e);
			set(P, e, v + h);
			assert_int_equal(tc_model_eval(fx.md, &lp), 0);
			set(P, e, v - h);
			assert_int_equal(tc_model_eval(fx.md, &lm), 0);
			set(P, e, v);
			fd = (lp - lm) / (2 * h);
			if (fabs(fd - g) > 1e-6 * (1 + fabs(g)))
				fail_msg("d_%s[%lld]: step %.12g, finite difference %.12g", names[t],
					(long long)e, g, fd);
			worst = fmax(worst, fabs(g));
		}
	}
	assert_true(worst > 1e-3); /* the gradients are not all zero */
	model_done(&fx);
}

/* Steps of optimiser o on fresh data each step against the reference: the
 * loss of every step and the parameters at the end. */
static void check_steps(const tc_optimizer *o, int f64)
{
	fixture fx;
	ref r;
	double x[B][I], tol = f64 ? 1e-12 : 2e-5;
	int64_t y[B];
	uint64_t s = tu_seed("steps", (uint64_t)o->kind * 2 + f64);
	model_make(&fx, f64, o, 11 + (uint64_t)o->kind);
	ref_from_model(&r, &fx);
	for (int t = 1; t <= 6; t++) {
		double loss = NAN, want;
		fill_data(&fx, &s, x, y);
		want = ref_loss(&r, x, y, 1);
		if (tc_model_step(fx.md, &loss) < 0)
			fail_msg("step %d: %s", t, tc_context_error(fx.ctx));
		if (fabs(loss - want) > tol * (1 + fabs(want)))
			fail_msg("optimiser %d %s step %d: loss %.15g, reference %.15g", (int)o->kind,
				f64 ? "float64" : "float32", t, loss, want);
		if (param_diff(&r, &fx, 1) > tol)
			fail_msg("optimiser %d step %d: gradients differ by %g", (int)o->kind, t,
				param_diff(&r, &fx, 1));
		ref_update(&r, o, t);
	}
	if (param_diff(&r, &fx, 0) > tol)
		fail_msg("optimiser %d %s: parameters differ by %g after 6 steps", (int)o->kind,
			f64 ? "float64" : "float32", param_diff(&r, &fx, 0));
	model_done(&fx);
}

static void test_sgd_steps_match_reference(void **state)
{
	tc_optimizer o;
	(void)state;
	tc_optimizer_init(&o, TC_OPT_SGD, 0.3);
	check_steps(&o, 1);
	check_steps(&o, 0);
	o.weight_decay = 0.05;
	check_steps(&o, 1);
}

static void test_momentum_steps_match_reference(void **state)
{
	tc_optimizer o;
	(void)state;
	tc_optimizer_init(&o, TC_OPT_MOMENTUM, 0.2);
	o.momentum = 0.8;
	check_steps(&o, 1);
	check_steps(&o, 0);
	o.weight_decay = 0.01;
	check_steps(&o, 1);
}

static void test_adam_steps_match_reference(void **state)
{
	tc_optimizer o;
	(void)state;
	tc_optimizer_init(&o, TC_OPT_ADAM, 0.01);
	check_steps(&o, 1);
	check_steps(&o, 0);
	o.weight_decay = 0.1;
	o.beta1 = 0.8;
	o.beta2 = 0.99;
	check_steps(&o, 1);
}

/* An ensemble of E models (tc_model_ensemble) against E separate
 * float64 references, each started from its model's slice of the
 * parameters: every step each model's loss (the loss tensor's element e),
 * the mean the step reports, each model's gradients, and each model's
 * parameters after 6 steps and a step on a partial batch of 4 rows; the
 * shapes of the model's tensors; the forward at another batch size gives
 * each model's logits. */
static void check_ensemble(const tc_optimizer *o, int f64)
{
	enum { E = 3, N = 5 };
	fixture fx;
	ref r[E];
	double x[B][I], tol = f64 ? 1e-12 : 2e-5, xin[N * I], z[E * N * K];
	int64_t y[B], xs[2] = {N, I}, zs[3] = {E, N, K};
	uint64_t s = tu_seed("ensemble", (uint64_t)o->kind * 2 + f64);
	DLTensor *W1, *L;
	DLTensor Xn = {xin, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, xs, NULL, 0};
	DLTensor Zn = {z, {kDLCPU, 0}, 3, {kDLFloat, 64, 1}, zs, NULL, 0};
	const DLTensor *fin[1] = {&Xn};
	DLTensor *fout[1] = {&Zn};

	model_make_ens(&fx, f64, o, 21 + (uint64_t)o->kind, E);
	W1 = tensor(&fx, "W1");
	L = tensor(&fx, "L");
	assert_int_equal(W1->ndim, 3);
	assert_true(W1->shape[0] == E && W1->shape[1] == H && W1->shape[2] == I);
	assert_true(L->ndim == 1 && L->shape[0] == E);
	assert_true(tensor(&fx, "d_B2")->ndim == 2 && tensor(&fx, "X")->ndim == 2);
	for (int e = 0; e < E; e++)
		ref_from_model_e(&r[e], &fx, e);
	assert_true(r[0].w1[0][0] != r[1].w1[0][0]); /* the models differ */
	{
		char *d = tc_model_describe(fx.md);
		assert_non_null(d);
		assert_non_null(strstr(d, "# an ensemble of 3 models: 'mlp' batched over its parameters"));
		assert_non_null(strstr(d, "d_W1 float"));
		tc_string_free(d);
	}
	for (int t = 1; t <= 6; t++) {
		double loss = NAN, want[E], mean = 0;
		fill_data(&fx, &s, x, y);
		for (int e = 0; e < E; e++)
			mean += (want[e] = ref_loss(&r[e], x, y, 1)) / E;
		if (tc_model_step(fx.md, &loss) < 0)
			fail_msg("step %d: %s", t, tc_context_error(fx.ctx));
		if (fabs(loss - mean) > tol * (1 + fabs(mean)))
			fail_msg("ensemble step %d: mean loss %.15g, reference %.15g", t, loss, mean);
		for (int e = 0; e < E; e++) {
			if (fabs(get(L, e) - want[e]) > tol * (1 + fabs(want[e])))
				fail_msg("ensemble step %d: model %d's loss %.15g, reference %.15g", t, e,
					get(L, e), want[e]);
			if (param_diff_e(&r[e], &fx, 1, e) > tol)
				fail_msg("ensemble step %d: model %d's gradients differ by %g", t, e,
					param_diff_e(&r[e], &fx, 1, e));
			ref_update(&r[e], o, t);
		}
	}
	{ /* a partial batch: each model's loss and gradients over its first 4 rows */
		fill_data(&fx, &s, x, y);
		if (tc_model_step_rows(fx.md, 4, NULL) < 0)
			fail_msg("ensemble, 4 rows: %s", tc_context_error(fx.ctx));
		for (int e = 0; e < E; e++) {
			double want = ref_loss_rows(&r[e], x, y, 1, 4);
			if (fabs(get(L, e) - want) > tol * (1 + fabs(want)) ||
				param_diff_e(&r[e], &fx, 1, e) > tol)
				fail_msg("ensemble, 4 rows: model %d's loss %.15g (reference %.15g), "
					 "gradients %g apart", e, get(L, e), want,
					param_diff_e(&r[e], &fx, 1, e));
			ref_update(&r[e], o, 7);
		}
	}
	for (int e = 0; e < E; e++)
		if (param_diff_e(&r[e], &fx, 0, e) > tol)
			fail_msg("ensemble %s: model %d's parameters differ by %g after 7 steps",
				f64 ? "float64" : "float32", e, param_diff_e(&r[e], &fx, 0, e));
	if (f64) { /* the forward alone, at batch N: E x N x K logits */
		for (int j = 0; j < N * I; j++)
			xin[j] = tu_rand_unit(&s) * 2 - 1;
		for (int j = 0; j < E * N * K; j++)
			z[j] = NAN;
		if (tc_model_forward(fx.md, fin, 1, fout, 1) < 0)
			fail_msg("forward: %s", tc_context_error(fx.ctx));
		for (int e = 0; e < E; e++)
			for (int b = 0; b < N; b++)
				for (int k = 0; k < K; k++) {
					double want = r[e].b2[k];
					for (int h = 0; h < H; h++) {
						double a = r[e].b1[h];
						for (int i = 0; i < I; i++)
							a += xin[b * I + i] * r[e].w1[h][i];
						want += fmax(a, 0) * r[e].w2[k][h];
					}
					assert_true(fabs(z[(e * N + b) * K + k] - want) <=
						1e-12 * (1 + fabs(want)));
				}
	}
	model_done(&fx);
}

static void test_ensemble_matches_separate_models(void **state)
{
	tc_optimizer o;
	(void)state;
	tc_optimizer_init(&o, TC_OPT_SGD, 0.3);
	check_ensemble(&o, 1);
	tc_optimizer_init(&o, TC_OPT_ADAM, 0.01);
	o.weight_decay = 0.1;
	check_ensemble(&o, 1);
	check_ensemble(&o, 0);
}

/* Steps on partial batches (tc_model_step_rows) between whole ones, the
 * rows 6, 4, 6, 1, 4, 6 of a batch of 6: each step's loss (the mean over
 * its rows) and gradients against the reference on those rows, the
 * parameters after all; once a row count's kernels exist, its steps
 * allocate nothing; rows out of range are refused. */
static void *counting_alloc(void *ud, void *ptr, size_t size);
static void expect_error(tc_context *ctx, int failed, const char *what);

static void check_partial(const tc_optimizer *o, int f64)
{
	static const int rows[6] = {B, 4, B, 1, 4, B};
	fixture fx;
	ref r;
	double x[B][I], tol = f64 ? 1e-12 : 2e-5;
	int64_t y[B];
	long calls = 0;
	uint64_t s = tu_seed("partial", (uint64_t)o->kind * 2 + f64);
	model_make(&fx, f64, o, 31 + (uint64_t)o->kind);
	assert_int_equal(tc_model_prepare_rows(fx.md, 1), 0);
	ref_from_model(&r, &fx);
	for (int t = 1; t <= 6; t++) {
		double loss = NAN, want;
		fill_data(&fx, &s, x, y);
		want = ref_loss_rows(&r, x, y, 1, rows[t - 1]);
		if (tc_model_step_rows(fx.md, rows[t - 1], &loss) < 0)
			fail_msg("step %d (%d rows): %s", t, rows[t - 1], tc_context_error(fx.ctx));
		if (fabs(loss - want) > tol * (1 + fabs(want)))
			fail_msg("partial step %d (%d rows): loss %.15g, reference %.15g", t,
				rows[t - 1], loss, want);
		if (param_diff(&r, &fx, 1) > tol)
			fail_msg("partial step %d (%d rows): gradients differ by %g", t, rows[t - 1],
				param_diff(&r, &fx, 1));
		ref_update(&r, o, t);
	}
	if (param_diff(&r, &fx, 0) > tol)
		fail_msg("partial steps: parameters differ by %g", param_diff(&r, &fx, 0));
	tc_set_alloc(counting_alloc, &calls);
	for (int t = 0; t < 4; t++)
		assert_int_equal(tc_model_step_rows(fx.md, 4, NULL), 0);
	tc_set_alloc(NULL, NULL);
	assert_int_equal(calls, 0);
	expect_error(fx.ctx, tc_model_step_rows(fx.md, 0, NULL) < 0, "0 rows of a batch of 6 (1 to 6)");
	expect_error(fx.ctx, tc_model_step_rows(fx.md, B + 1, NULL) < 0, "7 rows of a batch of 6");
	expect_error(fx.ctx, tc_model_prepare_rows(fx.md, -2) < 0, "tc_model_prepare_rows: -2 rows");
	model_done(&fx);
}

/* The first step of a row count with allocations failing at 12 points
 * spread over its allocations (compiling the partial batch's kernels):
 * each attempt succeeds or fails with a message, and then a step of that
 * row count still matches the reference. */
static void test_partial_batch_allocation_failures(void **state)
{
	tc_optimizer o;
	fixture fx;
	ref r;
	double x[B][I], loss = NAN, want;
	int64_t y[B];
	long total = 0, failed = 0;
	uint64_t s = tu_seed("partial-fault", 0);
	(void)state;
	tc_optimizer_init(&o, TC_OPT_SGD, 0.1);
	model_make(&fx, 1, &o, 5);
	fill_data(&fx, &s, x, y);
	tc_set_alloc(counting_alloc, &total);
	assert_int_equal(tc_model_step_rows(fx.md, 3, NULL), 0);
	tc_set_alloc(NULL, NULL);
	model_done(&fx);
	assert_true(total > 12);
	model_make(&fx, 1, &o, 5);
	for (long k = 0; k < 12; k++) {
		tr_alloc_fault a = {0, 1 + k * total / 12};
		int rc;
		fill_data(&fx, &s, x, y);
		tc_set_alloc(tr_failing_alloc, &a);
		rc = tc_model_step_rows(fx.md, 3, NULL);
		tc_set_alloc(NULL, NULL);
		if (rc < 0 && !tc_context_error(fx.ctx)[0])
			fail_msg("allocation %ld failing: -1 without a message", a.fail_at);
		failed += rc < 0;
	}
	assert_true(failed > 0);
	ref_from_model(&r, &fx);
	fill_data(&fx, &s, x, y);
	want = ref_loss_rows(&r, x, y, 1, 3);
	if (tc_model_step_rows(fx.md, 3, &loss) < 0)
		fail_msg("after the failures: %s", tc_context_error(fx.ctx));
	assert_true(fabs(loss - want) <= 1e-12 * (1 + fabs(want)));
	assert_true(param_diff(&r, &fx, 1) <= 1e-12);
	model_done(&fx);
}

static void test_partial_batches_match_reference(void **state)
{
	tc_optimizer o;
	(void)state;
	tc_optimizer_init(&o, TC_OPT_SGD, 0.3);
	check_partial(&o, 1);
	tc_optimizer_init(&o, TC_OPT_ADAM, 0.01);
	check_partial(&o, 0);
}

/* Counts the library's allocations (every one goes through the hook). */
static void *counting_alloc(void *ud, void *ptr, size_t size)
{
	if (size)
		++*(long *)ud;
	if (!size) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, size);
}

/* After two warm-up steps (the kernels' workspaces are made on first
 * use), steps and evaluations allocate nothing. */
static void test_steady_state_allocates_nothing(void **state)
{
	tc_optimizer o;
	fixture fx;
	double x[B][I];
	int64_t y[B];
	long calls = 0;
	uint64_t s = tu_seed("alloc", 0);
	(void)state;
	tc_optimizer_init(&o, TC_OPT_ADAM, 0.01);
	model_make(&fx, 0, &o, 3);
	fill_data(&fx, &s, x, y);
	assert_int_equal(tc_model_step(fx.md, NULL), 0);
	assert_int_equal(tc_model_step(fx.md, NULL), 0);
	assert_int_equal(tc_model_eval(fx.md, NULL), 0);
	tc_set_alloc(counting_alloc, &calls);
	for (int i = 0; i < 20; i++) {
		fill_data(&fx, &s, x, y);
		assert_int_equal(tc_model_step(fx.md, NULL), 0);
		assert_int_equal(tc_model_eval(fx.md, NULL), 0);
	}
	tc_set_alloc(NULL, NULL);
	assert_int_equal(calls, 0);
	model_done(&fx);
}

/* tc_model_forward on a batch of another size: the reference's logits. */
static void test_forward_at_another_batch_size(void **state)
{
	enum { N = 9 };
	tc_optimizer o;
	fixture fx;
	ref r;
	double xin[N * I], z[N * K];
	int64_t xs[2] = {N, I}, zs[2] = {N, K};
	DLTensor X = {xin, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, xs, NULL, 0};
	DLTensor Z = {z, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, zs, NULL, 0};
	const DLTensor *in[1] = {&X};
	DLTensor *out[1] = {&Z};
	uint64_t s = tu_seed("forward", 0);
	(void)state;
	tc_optimizer_init(&o, TC_OPT_SGD, 0.1);
	model_make(&fx, 1, &o, 5);
	ref_from_model(&r, &fx);
	for (int e = 0; e < N * I; e++)
		xin[e] = tu_rand_unit(&s) * 2 - 1;
	for (int e = 0; e < N * K; e++)
		z[e] = NAN;
	if (tc_model_forward(fx.md, in, 1, out, 1) < 0)
		fail_msg("forward: %s", tc_context_error(fx.ctx));
	for (int b = 0; b < N; b++)
		for (int k = 0; k < K; k++) {
			double want = r.b2[k];
			for (int h = 0; h < H; h++) {
				double a = r.b1[h];
				for (int i = 0; i < I; i++)
					a += xin[b * I + i] * r.w1[h][i];
				want += fmax(a, 0) * r.w2[k][h];
			}
			assert_true(fabs(z[b * K + k] - want) <= 1e-12 * (1 + fabs(want)));
		}
	/* a wrong count is refused */
	assert_int_equal(tc_model_forward(fx.md, in, 0, out, 1), -1);
	assert_non_null(strstr(tc_context_error(fx.ctx), "takes 1 data input"));
	model_done(&fx);
}

/* Initialisers: one model with a 256 x 512 weight per kind (fan_in 512,
 * fan_out 256), built with seeds 1, 2 and 1 again: the same seed gives the
 * same values, another seed others; each kind within its bounds with
 * about its moments (the mean within 5 standard errors, the standard
 * deviation within 2%). */
static void test_initialisers(void **state)
{
	static const struct {
		tc_init_kind kind;
		double a, b, lo, hi, mean, sd;
	} cases[] = {
		{TC_INIT_ZEROS, 0, 0, 0, 0, 0, 0},
		{TC_INIT_CONSTANT, 0.25, 0, 0.25, 0.25, 0.25, 0},
		{TC_INIT_UNIFORM, -0.5, 1.5, -0.5, 1.5, 0.5, 0.57735026918962584},
		{TC_INIT_NORMAL, 1, 0.1, -INFINITY, INFINITY, 1, 0.1},
		/* bound sqrt(2) sqrt(3 / 512) */
		{TC_INIT_KAIMING_UNIFORM, 0, 0, -0.10825317547305482, 0.10825317547305482, 0,
			0.0625},
		{TC_INIT_KAIMING_NORMAL, 0, 0, -INFINITY, INFINITY, 0, 0.0625},
		/* bound sqrt(6 / 768) */
		{TC_INIT_XAVIER_UNIFORM, 0, 0, -0.08838834764831845, 0.08838834764831845, 0,
			0.05103103630798288},
		{TC_INIT_XAVIER_NORMAL, 0, 0, -INFINITY, INFINITY, 0, 0.05103103630798288},
	};
	enum { R = 256, C = 512, NK = sizeof(cases) / sizeof(*cases) };
	static float first[NK][R * C];
	(void)state;
	for (int seed = 1; seed <= 3; seed++) {
		tc_context *ctx = tc_context_new();
		tc_module *m = tc_module_parse(ctx,
			"def f(float(N,C) X, float(R,C) W0, float(R,C) W1, float(R,C) W2, float(R,C) W3,\n"
			"      float(R,C) W4, float(R,C) W5, float(R,C) W6, float(R,C) W7) -> (Z) {\n"
			"    Z(n,r) +=! X(n,c) * (W0(r,c) + W1(r,c) + W2(r,c) + W3(r,c) + W4(r,c)\n"
			"                         + W5(r,c) + W6(r,c) + W7(r,c))\n"
			"}\n"
			"def l(float(N,R) Z) -> (L) { L +=! Z(n,r) * Z(n,r) }\n",
			"init.tc");
		tc_model *md = tc_model_new(m, "f", "l");
		int64_t ws[2] = {R, C}, xs[2] = {2, C};
		tc_optimizer o;
		assert_non_null(md);
		tc_optimizer_init(&o, TC_OPT_SGD, 0.1);
		for (int c = 0; c < NK; c++) {
			char name[16];
			tc_init in = {cases[c].kind, cases[c].a, cases[c].b, 0, 0};
			snprintf(name, sizeof(name), "W%d", c);
			assert_int_equal(tc_model_param(md, name, 2, ws, &in), 0);
		}
		assert_int_equal(tc_model_input(md, "X", 2, xs), 0);
		if (tc_model_build(md, &o, NULL, seed == 3 ? 1 : (uint64_t)seed) < 0)
			fail_msg("%s", tc_context_error(ctx));
		for (int c = 0; c < NK; c++) {
			char name[16];
			const float *w;
			double sum = 0, sq = 0, n = (double)R * C, mean, sd;
			snprintf(name, sizeof(name), "W%d", c);
			w = tc_model_tensor(md, name)->data;
			if (seed > 1) {
				/* seed 2 differs from seed 1 (but for constants), seed 1 again is equal */
				int same = !memcmp(first[c], w, sizeof(first[c]));
				assert_int_equal(same, seed == 3 || cases[c].kind <= TC_INIT_CONSTANT);
				continue;
			}
			memcpy(first[c], w, sizeof(first[c]));
			for (int e = 0; e < R * C; e++) {
				assert_true(w[e] >= cases[c].lo && w[e] <= cases[c].hi);
				sum += w[e];
				sq += (double)w[e] * w[e];
			}
			mean = sum / n;
			sd = sqrt(fmax(0, sq / n - mean * mean));
			if (fabs(mean - cases[c].mean) > 5 * cases[c].sd / sqrt(n) + 1e-7 ||
				fabs(sd - cases[c].sd) > 0.02 * cases[c].sd + 1e-7)
				fail_msg("initialiser %d: mean %g (want %g), sd %g (want %g)",
					(int)cases[c].kind, mean, cases[c].mean, sd, cases[c].sd);
		}
		tc_model_free(md);
		tc_module_free(m);
		tc_context_free(ctx);
	}
}

/* The optimisers' defs check and their texts say what they compute. */
static void test_optimizer_sources(void **state)
{
	tc_optimizer o;
	DLDataType f32 = {kDLFloat, 32, 1}, f64 = {kDLFloat, 64, 1}, i32 = {kDLInt, 32, 1};
	tc_context *ctx = tc_context_new();
	(void)state;
	for (int kind = TC_OPT_SGD; kind <= TC_OPT_ADAM; kind++)
		for (int wd = 0; wd < 2; wd++) {
			char *text;
			tc_module *m;
			tc_optimizer_init(&o, (tc_opt_kind)kind, 0.1);
			o.weight_decay = wd ? 0.01 : 0;
			text = tc_optimizer_source(&o, wd ? f64 : f32);
			assert_non_null(text);
			assert_non_null(strstr(text, wd ? "float64(N) G" : "float32(N) G"));
			assert_int_equal(!!strstr(text, "P(i) *= decay"), wd);
			if (!(m = tc_module_parse(ctx, text, "opt.tc")))
				fail_msg("%s\n%s", text, tc_context_error(ctx));
			tc_module_free(m);
			tc_string_free(text);
		}
	assert_null(tc_optimizer_source(&o, i32));
	o.kind = (tc_opt_kind)7;
	assert_null(tc_optimizer_source(&o, f32));
	assert_null(tc_optimizer_source(NULL, f32));
	tc_context_free(ctx);
}

/* Expect call to have failed with a message containing what. */
static void expect_error(tc_context *ctx, int failed, const char *what)
{
	assert_true(failed);
	if (!strstr(tc_context_error(ctx), what))
		fail_msg("expected an error with \"%s\", got: %s", what, tc_context_error(ctx));
}

/* What the API refuses, each with its message. */
static void test_misuse_is_refused_with_a_message(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_parse(ctx, model_source("float32"), "model.tc");
	tc_module *bad = tc_module_parse(ctx,
		"def f(float(N) X, float(N) W, float64(N) V, int32(N) J) -> (Z, Q) {\n"
		"    Z(n) = X(n) * W(n) + float(V(n)) + float(J(n))\n"
		"    Q(n) = X(n)\n"
		"}\n"
		"def vec(float(N) Z, float(N) Q) -> (L) { L(n) = Z(n) + Q(n) }\n"
		"def few(float(N) Z) -> (L) { L +=! Z(n) }\n"
		"def ok(float(N) Z, float(N) Q) -> (L) { L +=! Z(n) * Q(n) }\n"
		"def intin(int32(N) Z, float(N) Q) -> (L) { L +=! Q(n) }\n",
		"bad.tc");
	tc_model *md;
	tc_optimizer o;
	int64_t s2[2] = {H, I}, neg[1] = {-1}, n4[1] = {4};
	(void)state;
	assert_non_null(m);
	assert_non_null(bad);
	tc_optimizer_init(&o, TC_OPT_SGD, 0.1);

	expect_error(ctx, !tc_model_new(m, "nope", "xent"), "no def named 'nope'");
	expect_error(ctx, !tc_model_new(m, "mlp", NULL), "loss def's name is NULL");
	expect_error(ctx, !tc_model_new(bad, "f", "vec"), "must have one output, a float scalar");
	expect_error(ctx, !tc_model_new(bad, "f", "few"), "must take the forward def 'f''s 2 outputs");
	expect_error(ctx, !tc_model_new(bad, "f", "intin"), "input 1 of the loss def 'intin'");

	md = tc_model_new(bad, "f", "ok");
	assert_non_null(md);
	expect_error(ctx, tc_model_param(md, "J", 1, n4, NULL) < 0, "not a float");
	expect_error(ctx, tc_model_param(md, "nope", 1, n4, NULL) < 0, "not an input of the forward def");
	expect_error(ctx, tc_model_param(md, "W", 1, neg, NULL) < 0, "negative extent");
	expect_error(ctx, tc_model_param(md, "W", 1, NULL, NULL) < 0, "shape is NULL");
	expect_error(ctx, tc_model_param(md, "W", 9, n4, NULL) < 0, "rank 9");
	{
		tc_init weird = {(tc_init_kind)42, 0, 0, 0, 0};
		expect_error(ctx, tc_model_param(md, "W", 1, n4, &weird) < 0, "unknown initialiser");
	}
	assert_int_equal(tc_model_param(md, "W", 1, n4, NULL), 0);
	expect_error(ctx, tc_model_param(md, "W", 1, n4, NULL) < 0, "declared twice");
	expect_error(ctx, tc_model_input(md, "Z", 1, n4) < 0, "not a data input");
	expect_error(ctx, tc_model_step(md, NULL) < 0, "not built (call tc_model_build first)");
	expect_error(ctx, !tc_model_tensor(md, "W"), "not built");
	assert_int_equal(tc_model_input(md, "X", 1, n4), 0);
	/* V undeclared */
	expect_error(ctx, tc_model_build(md, &o, NULL, 1) < 0, "input 'V' of the forward def 'f' is neither");
	expect_error(ctx, tc_model_build(md, &o, NULL, 1) < 0, "its build failed");
	tc_model_free(md);

	md = tc_model_new(bad, "f", "ok");
	assert_int_equal(tc_model_param(md, "W", 1, n4, NULL), 0);
	assert_int_equal(tc_model_param(md, "V", 1, n4, NULL), 0);
	assert_int_equal(tc_model_input(md, "X", 1, n4), 0);
	assert_int_equal(tc_model_input(md, "J", 1, n4), 0);
	expect_error(ctx, tc_model_build(md, &o, NULL, 1) < 0, "every parameter must have the same type");
	tc_model_free(md);

	md = tc_model_new(m, "mlp", "xent");
	assert_int_equal(tc_model_param(md, "W1", 1, n4, NULL), 0);
	expect_error(ctx, tc_model_ensemble(md, 0) < 0, "0 models (at least 1)");
	expect_error(ctx, tc_model_build(md, NULL, NULL, 1) < 0, "optimiser is NULL");
	{
		tc_optimizer weird = o;
		weird.kind = (tc_opt_kind)9;
		expect_error(ctx, tc_model_build(md, &weird, NULL, 1) < 0, "unknown optimiser kind 9");
	}
	expect_error(ctx, tc_model_build(md, &o, NULL, 1) < 0, "declared with rank 1, but 'mlp' reads it with rank 2");
	tc_model_free(md);

	/* W1 (H, I+1) against X (B, I): first without Y's shape, then with it */
	for (int with_y = 0; with_y < 2; with_y++) {
		int64_t w1[2] = {H, I + 1};
		md = tc_model_new(m, "mlp", "xent");
		assert_int_equal(tc_model_param(md, "W1", 2, w1, NULL), 0);
		assert_int_equal(tc_model_param(md, "B1", 1, shape_b1, NULL), 0);
		assert_int_equal(tc_model_param(md, "W2", 2, shape_w2, NULL), 0);
		assert_int_equal(tc_model_param(md, "B2", 1, shape_b2, NULL), 0);
		assert_int_equal(tc_model_input(md, "X", 2, shape_x), 0);
		if (with_y)
			assert_int_equal(tc_model_input(md, "Y", 1, shape_y), 0);
		expect_error(ctx, tc_model_build(md, &o, NULL, 1) < 0, with_y
			? "size I is 7 from X (dimension 1) but 8 from W1"
			: "input 'Y' of the loss def 'xent' is a label input without a shape");
		tc_model_free(md);
	}

	/* after a build: no more declarations, no second build, unknown names */
	{
		fixture fx;
		model_make(&fx, 0, &o, 1);
		expect_error(fx.ctx, tc_model_param(fx.md, "W1", 2, s2, NULL) < 0, "built already");
		expect_error(fx.ctx, tc_model_build(fx.md, &o, NULL, 1) < 0, "built already");
		expect_error(fx.ctx, tc_model_ensemble(fx.md, 2) < 0, "built already");
		expect_error(fx.ctx, !tc_model_tensor(fx.md, "nope"), "no tensor 'nope'");
		expect_error(fx.ctx, !tc_model_tensor(fx.md, NULL), "name is NULL");
		model_done(&fx);
	}
	tc_module_free(bad);
	tc_module_free(m);
	tc_context_free(ctx);
}

/* Write bytes[0..n) to path. */
static void write_bytes(const char *path, const void *bytes, size_t n)
{
	FILE *fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(bytes, 1, n, fp), n);
	fclose(fp);
}

/* A safetensors file with this header (padded to 8 bytes) and n data bytes. */
static void write_st(const char *path, const char *header, size_t n)
{
	unsigned char buf[4096] = {0};
	size_t h = strlen(header), hp = (h + 7) / 8 * 8;
	assert_true(8 + hp + n <= sizeof(buf));
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)hp >> (8 * i));
	memset(buf + 8, ' ', hp);
	memcpy(buf + 8, header, h);
	write_bytes(path, buf, 8 + hp + n);
}

/* Parameters saved and loaded back (the file's header as the safetensors
 * format writes it); every bad file refused with its message and the
 * parameters left as they were. */
static void test_save_and_load_parameters(void **state)
{
	char dir[] = "/tmp/tc-train-XXXXXX", path[256], bad[256];
	static const char *const cases[][2] = {
		{"{\"W1\":", "the header is not a JSON object"},
		{"[1,2]", "the header is not a JSON object"},
		{"{\"W1\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,140]}}", "has no tensor 'B1'"},
		{"{\"Q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "a tensor 'Q' the model does not have"},
		{"{\"W1\":{\"dtype\":\"F64\",\"shape\":[5,7],\"data_offsets\":[0,280]}}", "is F64[5,7] in the file but F32[5,7]"},
		{"{\"W1\":{\"dtype\":\"F32\",\"shape\":[7,5],\"data_offsets\":[0,140]}}", "is F32[7,5] in the file but F32[5,7]"},
		{"{\"W1\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,9999]}}", "data_offsets that are not the 140 bytes"},
		{"{\"W1\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[-4,136]}}", "data_offsets that are not"},
	};
	tc_optimizer o;
	fixture fx, fy;
	float before[H * I], saved[H * I];
	DLTensor *W1;
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.safetensors", dir);
	snprintf(bad, sizeof(bad), "%s/bad.safetensors", dir);
	tc_optimizer_init(&o, TC_OPT_SGD, 0.1);
	model_make(&fx, 0, &o, 21);
	model_make(&fy, 0, &o, 22); /* other values */
	W1 = tensor(&fx, "W1");
	memcpy(saved, W1->data, sizeof(saved));
	if (tc_model_save(fx.md, path) < 0)
		fail_msg("%s", tc_context_error(fx.ctx));
	{ /* the header: 8-byte length, then the JSON object of the format */
		FILE *fp = fopen(path, "rb");
		char head[128] = {0};
		assert_non_null(fp);
		assert_int_equal(fread(head, 1, sizeof(head) - 1, fp), sizeof(head) - 1);
		fclose(fp);
		assert_int_equal(memcmp(head + 8, "{\"W1\":{\"dtype\":\"F32\",\"shape\":[5,7],\"data_offsets\":[0,140]},", 58), 0);
	}
	W1 = tensor(&fy, "W1");
	assert_memory_not_equal(W1->data, saved, sizeof(saved));
	if (tc_model_load(fy.md, path) < 0)
		fail_msg("%s", tc_context_error(fy.ctx));
	assert_memory_equal(W1->data, saved, sizeof(saved));
	assert_memory_equal(tensor(&fy, "B2")->data, tensor(&fx, "B2")->data, K * sizeof(float));

	/* bad files: nothing changes */
	((float *)W1->data)[3] = 42;
	memcpy(before, W1->data, sizeof(before));
	for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); c++) {
		write_st(bad, cases[c][0], 200);
		assert_int_equal(tc_model_load(fy.md, bad), -1);
		if (!strstr(tc_context_error(fy.ctx), cases[c][1]) || !strstr(tc_context_error(fy.ctx), bad))
			fail_msg("case %zu: %s", c, tc_context_error(fy.ctx));
		assert_memory_equal(W1->data, before, sizeof(before));
	}
	write_bytes(bad, "\x10\0\0", 3);
	assert_int_equal(tc_model_load(fy.md, bad), -1);
	assert_non_null(strstr(tc_context_error(fy.ctx), "shorter than its 8-byte header length"));
	write_bytes(bad, "\xff\0\0\0\0\0\0\0{}", 10);
	assert_int_equal(tc_model_load(fy.md, bad), -1);
	assert_non_null(strstr(tc_context_error(fy.ctx), "the header length exceeds the file"));
	{ /* a file cut in its data */
		snprintf(bad, sizeof(bad), "%s/p.safetensors", dir);
		FILE *fp = fopen(bad, "rb");
		unsigned char buf[1024];
		size_t n;
		assert_non_null(fp);
		n = fread(buf, 1, sizeof(buf), fp);
		fclose(fp);
		snprintf(bad, sizeof(bad), "%s/cut.safetensors", dir);
		write_bytes(bad, buf, n - 8);
		assert_int_equal(tc_model_load(fy.md, bad), -1);
		assert_non_null(strstr(tc_context_error(fy.ctx), "data_offsets"));
	}
	snprintf(bad, sizeof(bad), "%s/none.safetensors", dir);
	assert_int_equal(tc_model_load(fy.md, bad), -1);
	assert_non_null(strstr(tc_context_error(fy.ctx), "cannot read"));
	assert_memory_equal(W1->data, before, sizeof(before));
	/* a directory that does not exist: the save fails, nothing is written */
	snprintf(bad, sizeof(bad), "%s/no/such/p.safetensors", dir);
	assert_int_equal(tc_model_save(fy.md, bad), -1);
	assert_non_null(strstr(tc_context_error(fy.ctx), "cannot write"));
	assert_int_equal(tc_model_save(fy.md, NULL), -1);
	assert_int_equal(tc_model_load(NULL, path), -1);
	model_done(&fx);
	model_done(&fy);
	snprintf(bad, sizeof(bad), "rm -rf %s", dir);
	assert_int_equal(system(bad), 0);
}

/* Checkpoints: a model of optimiser o trains 3 steps, saves a checkpoint,
 * trains 3 more; another model (another seed) loads the checkpoint and
 * trains the same 3 steps: the same losses and parameters, bit for bit (the
 * optimiser's state and step count came along).  A parameters-only file is
 * no checkpoint and a checkpoint no parameters-only file; a checkpoint of
 * another optimiser is refused and changes nothing. */
static void check_checkpoint(const tc_optimizer *o, const char *dir)
{
	char path[256], params[256];
	tc_optimizer other;
	fixture fx, fy, fz;
	double x[3][B][I], lx[3], ly[3];
	int64_t y[3][B];
	uint64_t s = tu_seed("checkpoint", (uint64_t)o->kind);
	snprintf(path, sizeof(path), "%s/ck%d.safetensors", dir, (int)o->kind);
	snprintf(params, sizeof(params), "%s/pa%d.safetensors", dir, (int)o->kind);
	model_make(&fx, 0, o, 41);
	for (int t = 0; t < 3; t++) {
		fill_data(&fx, &s, x[0], y[0]);
		assert_int_equal(tc_model_step(fx.md, NULL), 0);
	}
	if (tc_model_save_checkpoint(fx.md, path) < 0 || tc_model_save(fx.md, params) < 0)
		fail_msg("%s", tc_context_error(fx.ctx));
	for (int t = 0; t < 3; t++) {
		fill_data(&fx, &s, x[t], y[t]);
		assert_int_equal(tc_model_step(fx.md, &lx[t]), 0);
	}
	model_make(&fy, 0, o, 42);
	expect_error(fy.ctx, tc_model_load(fy.md, path) < 0, "the model does not have");
	expect_error(fy.ctx, tc_model_load_checkpoint(fy.md, params) < 0, "has no tensor");
	if (tc_model_load_checkpoint(fy.md, path) < 0)
		fail_msg("%s", tc_context_error(fy.ctx));
	for (int t = 0; t < 3; t++) {
		DLTensor *X = tensor(&fy, "X"), *Y = tensor(&fy, "Y");
		/* the data of step t after the checkpoint again */
		for (int b = 0; b < B; b++) {
			for (int i = 0; i < I; i++)
				set(X, b * I + i, x[t][b][i]);
			((int64_t *)Y->data)[b] = y[t][b];
		}
		assert_int_equal(tc_model_step(fy.md, &ly[t]), 0);
		if (ly[t] != lx[t])
			fail_msg("optimiser %d, step %d after the checkpoint: loss %.9g, the original %.9g",
				(int)o->kind, t + 1, ly[t], lx[t]);
	}
	for (int k = 0; k < 4; k++) {
		static const char *const names[4] = {"W1", "B1", "W2", "B2"};
		DLTensor *a = tensor(&fx, names[k]), *b = tensor(&fy, names[k]);
		int64_t cnt = 1;
		for (int d = 0; d < a->ndim; d++)
			cnt *= a->shape[d];
		assert_memory_equal(a->data, b->data, (size_t)cnt * sizeof(float));
	}
	/* another optimiser's checkpoint: refused, nothing changed */
	tc_optimizer_init(&other, o->kind == TC_OPT_ADAM ? TC_OPT_MOMENTUM : TC_OPT_ADAM, 0.1);
	model_make(&fz, 0, &other, 43);
	{
		float w[H * I];
		memcpy(w, tensor(&fz, "W1")->data, sizeof(w));
		assert_int_equal(tc_model_load_checkpoint(fz.md, path), -1);
		assert_non_null(strstr(tc_context_error(fz.ctx), path));
		assert_memory_equal(tensor(&fz, "W1")->data, w, sizeof(w));
	}
	model_done(&fx);
	model_done(&fy);
	model_done(&fz);
}

static void test_checkpoints_resume_training(void **state)
{
	char dir[] = "/tmp/tc-ckpt-XXXXXX", cmd[64];
	tc_optimizer o;
	(void)state;
	assert_non_null(mkdtemp(dir));
	tc_optimizer_init(&o, TC_OPT_ADAM, 0.01);
	check_checkpoint(&o, dir);
	tc_optimizer_init(&o, TC_OPT_MOMENTUM, 0.1);
	check_checkpoint(&o, dir);
	tc_optimizer_init(&o, TC_OPT_SGD, 0.1);
	check_checkpoint(&o, dir);
	assert_int_equal(tc_model_save_checkpoint(NULL, "x"), -1);
	assert_int_equal(tc_model_load_checkpoint(NULL, "x"), -1);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* tc_model_describe lists the five kernels with their shapes and the
 * derived text. */
static void test_describe_lists_the_step(void **state)
{
	tc_optimizer o;
	fixture fx;
	char *d;
	(void)state;
	tc_optimizer_init(&o, TC_OPT_MOMENTUM, 0.1);
	model_make(&fx, 0, &o, 1);
	assert_non_null(d = tc_model_describe(fx.md));
	assert_non_null(strstr(d, "# a step: 5 kernels"));
	assert_non_null(strstr(d, "1. forward: mlp_fwd(X float32[6x7]"));
	assert_non_null(strstr(d, "2. loss: xent_fwd(Z float32[6x4], Y int64[6]) -> (L float32[]"));
	assert_non_null(strstr(d, "4. forward backward: mlp_grad("));
	assert_non_null(strstr(d, "d_W1 float32[5x7]"));
	assert_non_null(strstr(d, "5. update: sgd_momentum("));
	assert_non_null(strstr(d, "def mlp_grad("));
	tc_string_free(d);
	model_done(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gradients_match_finite_differences),
		cmocka_unit_test(test_sgd_steps_match_reference),
		cmocka_unit_test(test_momentum_steps_match_reference),
		cmocka_unit_test(test_adam_steps_match_reference),
		cmocka_unit_test(test_ensemble_matches_separate_models),
		cmocka_unit_test(test_partial_batches_match_reference),
		cmocka_unit_test(test_partial_batch_allocation_failures),
		cmocka_unit_test(test_steady_state_allocates_nothing),
		cmocka_unit_test(test_forward_at_another_batch_size),
		cmocka_unit_test(test_initialisers),
		cmocka_unit_test(test_optimizer_sources),
		cmocka_unit_test(test_misuse_is_refused_with_a_message),
		cmocka_unit_test(test_save_and_load_parameters),
		cmocka_unit_test(test_checkpoints_resume_training),
		cmocka_unit_test(test_describe_lists_the_step),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
