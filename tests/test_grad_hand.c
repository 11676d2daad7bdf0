/* Derived gradients against the hand-written backward defs of bench/grad.tc
 * (issue 17).
 *
 * For each forward def NAME of bench/grad.tc with a hand-written backward
 * NAME_bwd (the table below):
 *   - the hand-written backward, compiled for the CPU, matches float64
 *     central finite differences of the forward at a few random elements of
 *     each gradient (the hand-written defs are the reference, so they are
 *     checked first);
 *   - where the derivation supports the forward def today (DERIVES), the
 *     derived backward (tc_module_grad, with and without TC_GRAD_SAVES, for
 *     the inputs NAME_bwd differentiates) compiled for the CPU agrees with
 *     the hand-written one on the same fresh random inputs, every element,
 *     in float64 and in float32 (the file as written);
 *   - where it does not (REFUSED), tc_module_grad fails with a located
 *     "not supported yet" gradient error.  When support lands, that
 *     assertion fails: set the case to DERIVES (one line per def) and the
 *     derived backward is checked against the hand-written one instead;
 *   - BAD_TEXT: the derivation gives text that does not check (a bug of
 *     lang/grad.c), asserted the same way so that its fix flips it.
 *
 * Inputs are random (never 0), integer inputs (class labels, row ids) in
 * [0, int_hi); outputs are poisoned (NaN) before each run.  A backward def's
 * inputs are found by name: the forward's inputs, its outputs (the values
 * of a forward run), d_O (random upstream gradients, one per output O), and
 * saved temporaries, from the forward with saves (NAME_saves of the file for
 * the hand-written def, NAME_fwd of the derived text for the derived one). */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "testutil.h"
#include "testrun.h"

#define GRAD_TC TC_SOURCE_DIR "/bench/grad.tc"
#define MAX_T 12

/* Derived against hand-written: |derived - hand| <= TOL * (1 + max |hand|)
 * per element, max over the gradient tensor.  float64: the two compute the
 * same sums in another order and form; float32: the same for sums of up to
 * a few hundred terms of float32 values of order 1 (bench/grad.py's check
 * at the benchmark sizes is separate). */
#define TOL_F64 1e-11
#define TOL_F32 2e-5
/* Finite differences (float64 only): step H * max(1, |x|); a gradient g
 * passes when |fd - g| <= FD_TOL * (1 + |g|) (truncation about H^2 f''',
 * rounding about eps |L| / H, both far below). */
#define H 1e-6
#define FD_TOL 1e-6
#define FD_POINTS 5

/* What the derivation does with a forward def today. */
typedef enum hand_state {
	DERIVES, /* the derived backward is checked against the hand-written one */
	REFUSED, /* a located "not supported yet" error (DERIVES when support lands) */
	BAD_TEXT /* derived text that does not check: a bug of lang/grad.c, pinned
		  * here so that its fix flips the case to DERIVES */
} hand_state;

/* A forward def of bench/grad.tc and its hand-written backward NAME_bwd. */
typedef struct hand_case {
	const char *name;
	const char *bwd; /* its hand-written backward: NULL for NAME_bwd */
	hand_state derives;
	const char *shapes[MAX_T]; /* NAME's inputs: "3x4", "" for a scalar */
	double lo, hi;             /* float inputs uniform in [lo, hi), not 0 */
	int64_t int_hi;            /* integer inputs uniform in [0, int_hi) */
} hand_case;

static const hand_case cases[] = {
	{"matmul", NULL, DERIVES, {"5x7", "7x6"}, -1, 1, 0},
	{"softmax", NULL, DERIVES, {"4x9"}, -1, 1, 0},
	{"lsm_nll", NULL, DERIVES, {"5x7", "5"}, -1, 1, 7},
	{"layernorm", NULL, DERIVES, {"4x10", "10", "10"}, -1, 1, 0},
	{"fcrelu", NULL, DERIVES, {"5x6", "7x6", "7"}, -1, 1, 0},
	{"mlp2", NULL, DERIVES, {"4x6", "8x6", "8", "5x8", "5"}, -1, 1, 0},
	/* the derivation did not support these when the file was written */
	{"lsm_nll_mean", NULL, DERIVES, {"5x7", "5"}, -1, 1, 7},
	{"softmax_safe", "softmax_bwd", DERIVES, {"4x9"}, -1, 1, 0},
	{"lsm_nll_onesum", "lsm_nll_bwd", DERIVES, {"5x7", "5"}, -1, 1, 7},
	{"conv2d", NULL, DERIVES, {"2x3x7x6", "4x3x3x3", "4"}, -1, 1, 0},
	{"conv2d_s2", NULL, DERIVES, {"2x3x9x8", "4x3x3x3"}, -1, 1, 0},
	{"conv2d_pad", NULL, DERIVES, {"2x3x6x5", "4x3x3x3"}, -1, 1, 0},
	{"maxpool", NULL, DERIVES, {"2x3x6x8"}, -1, 1, 0},
	{"embedding", NULL, DERIVES, {"7x5", "9"}, -1, 1, 7},
};

/* The name of c's hand-written backward def. */
static void bwd_name(const hand_case *c, char *buf, size_t size)
{
	if (c->bwd)
		snprintf(buf, size, "%s", c->bwd);
	else
		snprintf(buf, size, "%s_bwd", c->name);
}

/* The text of bench/grad.tc, with every type name "float" (float32) made
 * float64 when f64. */
static char *grad_source(int f64)
{
	FILE *f = fopen(GRAD_TC, "rb");
	char *s, *o;
	long n;
	size_t j = 0;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	s = malloc((size_t)n + 1);
	o = malloc(2 * (size_t)n + 1);
	assert_non_null(s);
	assert_non_null(o);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	s[n] = '\0';
	for (long i = 0; i < n; i++) {
		int word = !strncmp(s + i, "float", 5) && (i == 0 || !(isalnum((unsigned char)s[i - 1]) ||
			s[i - 1] == '_')) && !(isalnum((unsigned char)s[i + 5]) || s[i + 5] == '_');
		if (f64 && word) {
			memcpy(o + j, "float64", 7);
			j += 7;
			i += 4;
		} else {
			o[j++] = s[i];
		}
	}
	o[j] = '\0';
	free(s);
	return o;
}

static void set_elt(tu_tensor *t, int64_t j, double v)
{
	switch (t->elt) {
	case TU_F32: ((float *)t->data)[j] = (float)v; break;
	case TU_F64: ((double *)t->data)[j] = v; break;
	default: fail_msg("unexpected element type %s", tu_elt_name(t->elt));
	}
}

static tu_elt float_elt(int f64)
{
	return f64 ? TU_F64 : TU_F32;
}

/* Uniform in [lo, hi), never 0. */
static double rand_nonzero(uint64_t *rng, double lo, double hi)
{
	double v;
	do
		v = lo + (hi - lo) * tu_rand_unit(rng);
	while (v == 0);
	return v;
}

/* Named tensors: what a backward def's inputs are looked up in. */
typedef struct named {
	const char *name[4 * MAX_T];
	tu_tensor *t[4 * MAX_T];
	int n;
} named;

static void named_add(named *nm, const char *name, tu_tensor *t)
{
	assert_true(nm->n < 4 * MAX_T);
	nm->name[nm->n] = name;
	nm->t[nm->n++] = t;
}

static tu_tensor *named_find(const named *nm, const char *name)
{
	for (int i = nm->n - 1; i >= 0; i--) /* the latest first */
		if (!strcmp(nm->name[i], name))
			return nm->t[i];
	return NULL;
}

static tc_kernel *compile(tc_module *m, const char *entry, tu_tensor **in, int n,
	tc_context *ctx)
{
	const DLTensor *ins[MAX_T];
	tc_kernel *k;
	for (int i = 0; i < n; i++)
		ins[i] = &in[i]->dl;
	k = tc_compile(m, entry, ins, n, NULL);
	if (!k)
		fail_msg("tc_compile(%s) failed:\n%s", entry, tc_context_error(ctx));
	return k;
}

/* Allocate k's outputs (float of the precision asked), poisoned. */
static int make_outputs(tc_kernel *k, tu_tensor *out, int f64)
{
	return tr_make_outputs(k, out, MAX_T, f64 ? 64 : 32);
}

static void run(tc_kernel *k, tu_tensor **in, int nin, tu_tensor *out, int nout)
{
	const DLTensor *ins[MAX_T];
	DLTensor *outs[MAX_T];
	for (int i = 0; i < nin; i++)
		ins[i] = &in[i]->dl;
	for (int i = 0; i < nout; i++) {
		tu_poison(&out[i]);
		outs[i] = &out[i].dl;
	}
	assert_int_equal(tc_kernel_run(k, ins, nin, outs, nout), 0);
}

/* A def run on its inputs found by name in nm; its outputs, added to nm
 * under their names. */
typedef struct ran {
	tc_kernel *k;
	tu_tensor *in[MAX_T];
	tu_tensor out[MAX_T];
	int nin, nout;
} ran;

static void run_named(ran *r, tc_module *m, const char *entry, named *nm, int f64,
	tc_context *ctx)
{
	assert_int_equal(tc_module_def_arity(m, entry, &r->nin, &r->nout), 0);
	for (int i = 0; i < r->nin; i++) {
		const char *name = tc_module_tensor_name(m, entry, i);
		r->in[i] = named_find(nm, name);
		if (!r->in[i])
			fail_msg("%s: no value for its input '%s'", entry, name);
	}
	r->k = compile(m, entry, r->in, r->nin, ctx);
	assert_int_equal(make_outputs(r->k, r->out, f64), r->nout);
	run(r->k, r->in, r->nin, r->out, r->nout);
	for (int o = 0; o < r->nout; o++) {
		for (int64_t j = 0; j < r->out[o].numel; j++)
			if (isnan(tu_get(&r->out[o], j)))
				fail_msg("%s: output %s[%lld] not written", entry,
					tc_module_tensor_name(m, entry, r->nin + o), (long long)j);
		named_add(nm, tc_module_tensor_name(m, entry, r->nin + o), &r->out[o]);
	}
}

static void ran_free(ran *r)
{
	for (int o = 0; o < r->nout; o++)
		tu_tensor_fini(&r->out[o]);
	tc_kernel_free(r->k);
}

/* The hand-written backward's gradient outputs, "A,B" for the inputs they
 * belong to (the derivation's --wrt). */
static void wrt_of_hand(tc_module *m, const char *bwd, char *wrt, size_t size)
{
	int nin, nout;
	wrt[0] = '\0';
	assert_int_equal(tc_module_def_arity(m, bwd, &nin, &nout), 0);
	for (int o = 0; o < nout; o++) {
		const char *name = tc_module_tensor_name(m, bwd, nin + o);
		assert_true(!strncmp(name, "d_", 2));
		if (o)
			strncat(wrt, ",", size - strlen(wrt) - 1);
		strncat(wrt, name + 2, size - strlen(wrt) - 1);
	}
}

/* L = sum over the forward's outputs O of sum(d_O * O), in float64. */
static double loss(tc_module *m, const char *name, ran *fwd, const named *nm)
{
	double l = 0;
	for (int o = 0; o < fwd->nout; o++) {
		char dname[64];
		tu_tensor *d;
		snprintf(dname, sizeof(dname), "d_%s", tc_module_tensor_name(m, name, fwd->nin + o));
		d = named_find(nm, dname);
		assert_non_null(d);
		for (int64_t j = 0; j < fwd->out[o].numel; j++)
			l += tu_get(d, j) * tu_get(&fwd->out[o], j);
	}
	return l;
}

/* The hand-written gradients against central differences of the forward
 * (float64): FD_POINTS random elements of each. */
static void check_finite_differences(const hand_case *c, tc_module *m, ran *fwd, ran *bwd,
	const named *nm, uint64_t *rng)
{
	char bname[128];
	bwd_name(c, bname, sizeof(bname));
	for (int g = 0; g < bwd->nout; g++) {
		const char *gname = tc_module_tensor_name(m, bname, bwd->nin + g);
		tu_tensor *x = named_find(nm, gname + 2);
		assert_non_null(x);
		assert_int_equal(x->elt, TU_F64);
		assert_int_equal(x->numel, bwd->out[g].numel);
		for (int p = 0; p < FD_POINTS; p++) {
			int64_t j = (int64_t)(tu_rand_u64(rng) % (uint64_t)x->numel);
			double *xp = &((double *)x->data)[j], x0 = *xp, h = H * fmax(1.0, fabs(x0));
			double lp, lm, fd, gv = tu_get(&bwd->out[g], j);
			*xp = x0 + h;
			run(fwd->k, fwd->in, fwd->nin, fwd->out, fwd->nout);
			lp = loss(m, c->name, fwd, nm);
			*xp = x0 - h;
			run(fwd->k, fwd->in, fwd->nin, fwd->out, fwd->nout);
			lm = loss(m, c->name, fwd, nm);
			*xp = x0;
			fd = (lp - lm) / (2 * h);
			if (!(fabs(fd - gv) <= FD_TOL * (1 + fabs(gv))))
				fail_msg("%s: %s[%lld] = %.17g, finite differences of %s give %.17g",
					bname, gname, (long long)j, gv, c->name, fd);
		}
	}
	run(fwd->k, fwd->in, fwd->nin, fwd->out, fwd->nout); /* the unperturbed outputs */
}

/* The derived backward (flags: 0 or TC_GRAD_SAVES) on the tensors of nm,
 * against the hand-written one's outputs, element by element. */
static void check_derived(const hand_case *c, tc_module *m, const char *wrt, ran *hand,
	named *nm, int f64, int flags, tc_context *ctx)
{
	char bname[128], gname[128], fname[128];
	char *text = tc_module_grad(m, c->name, wrt, flags);
	tc_module *mb;
	ran saves = {0}, derived;
	int nm0 = nm->n;
	double tol = f64 ? TOL_F64 : TOL_F32;
	if (!text)
		fail_msg("%s: tc_module_grad failed:\n%s", c->name, tc_context_error(ctx));
	mb = tc_module_parse(ctx, text, "derived.tc");
	if (!mb)
		fail_msg("%s: the derived text does not check:\n%s\n%s", c->name, text,
			tc_context_error(ctx));
	bwd_name(c, bname, sizeof(bname));
	snprintf(gname, sizeof(gname), "%s_grad", c->name);
	snprintf(fname, sizeof(fname), "%s_fwd", c->name);
	if (tc_module_def_arity(mb, fname, NULL, NULL) == 0) /* the forward with saves */
		run_named(&saves, mb, fname, nm, f64, ctx);
	run_named(&derived, mb, gname, nm, f64, ctx);
	assert_int_equal(derived.nout, hand->nout);
	for (int g = 0; g < hand->nout; g++) {
		const char *name = tc_module_tensor_name(m, bname, hand->nin + g);
		tu_tensor *d = &derived.out[g], *h = &hand->out[g];
		double scale = 0, worst = 0;
		assert_string_equal(tc_module_tensor_name(mb, gname, derived.nin + g), name);
		assert_int_equal(d->numel, h->numel);
		for (int64_t j = 0; j < h->numel; j++)
			scale = fmax(scale, fabs(tu_get(h, j)));
		for (int64_t j = 0; j < h->numel; j++) {
			double e = fabs(tu_get(d, j) - tu_get(h, j));
			if (!(e <= tol * (1 + scale)))
				fail_msg("%s (%s%s): %s[%lld]: derived %.9g, hand-written %.9g\n%s", c->name,
					f64 ? "float64" : "float32", flags ? ", saves" : "", name, (long long)j,
					tu_get(d, j), tu_get(h, j), text);
			worst = fmax(worst, e);
		}
		assert_true(scale > 0); /* not a gradient of zeros */
		(void)worst;
	}
	ran_free(&derived);
	if (saves.k)
		ran_free(&saves);
	nm->n = nm0; /* drop the derived's saved tensors and outputs */
	tc_string_free(text);
	tc_module_free(mb);
}

/* The derivation of a def it does not support yet: a located error. */
static void check_refused(const hand_case *c, tc_module *m, const char *wrt, tc_context *ctx)
{
	for (int flags = 0; flags <= TC_GRAD_SAVES; flags += TC_GRAD_SAVES) {
		char *text = tc_module_grad(m, c->name, wrt, flags);
		const char *msg = tc_context_error(ctx);
		if (text)
			fail_msg("%s now derives: set the case to DERIVES in tests/test_grad_hand.c so "
				 "the derived backward is checked against the hand-written one:\n%s", c->name, text);
		assert_int_equal(tc_context_error_kind(ctx), TC_ERROR_USER);
		assert_true(tu_contains(msg, "grad.tc:"));
		assert_true(tu_contains(msg, ": error: gradient: "));
		assert_true(tu_contains(msg, "not supported yet"));
		assert_true(tu_contains(msg, "^"));
	}
}

/* A derivation that gives text which does not check (a bug): still so.
 * When this fails, the bug is fixed: set the case to DERIVES. */
static void check_bad_text(const hand_case *c, tc_module *m, const char *wrt, tc_context *ctx)
{
	for (int flags = 0; flags <= TC_GRAD_SAVES; flags += TC_GRAD_SAVES) {
		char *text = tc_module_grad(m, c->name, wrt, flags);
		tc_module *mb;
		if (!text)
			fail_msg("%s: tc_module_grad failed:\n%s", c->name, tc_context_error(ctx));
		mb = tc_module_parse(ctx, text, "derived.tc");
		if (mb)
			fail_msg("%s: the derived text checks now: set the case to DERIVES in "
				 "tests/test_grad_hand.c:\n%s", c->name, text);
		assert_true(tu_contains(tc_context_error(ctx), "derived.tc:"));
		tc_string_free(text);
	}
}

static void check_case(const hand_case *c, tc_module *m, int f64, tc_context *ctx)
{
	char bname[128], sname[128], wrt[256];
	tu_tensor in[MAX_T], dO[MAX_T];
	ran fwd, saves = {0}, hand;
	named nm = {0};
	uint64_t rng = tu_seed(c->name, (uint64_t)f64);
	int nin;

	bwd_name(c, bname, sizeof(bname));
	snprintf(sname, sizeof(sname), "%s_saves", c->name);
	/* random inputs, never 0 */
	assert_int_equal(tc_module_def_arity(m, c->name, &nin, NULL), 0);
	for (int i = 0; i < nin; i++) {
		int64_t dims[8];
		int nd = tr_parse_dims(c->shapes[i], dims), rank;
		DLDataType dt;
		assert_int_equal(tc_module_input_type(m, c->name, i, &dt, &rank), 0);
		assert_int_equal(rank, nd);
		if (dt.code == kDLFloat) {
			tu_tensor_init(&in[i], float_elt(f64), dims, nd);
			for (int64_t j = 0; j < in[i].numel; j++)
				set_elt(&in[i], j, rand_nonzero(&rng, c->lo, c->hi));
		} else {
			assert_true(c->int_hi > 0);
			tu_tensor_init(&in[i], TU_I64, dims, nd);
			for (int64_t j = 0; j < in[i].numel; j++)
				((int64_t *)in[i].data)[j] = tu_rand_int(&rng, 0, c->int_hi - 1);
		}
		named_add(&nm, tc_module_tensor_name(m, c->name, i), &in[i]);
	}
	run_named(&fwd, m, c->name, &nm, f64, ctx);
	/* d_O per output, random */
	for (int o = 0; o < fwd.nout; o++) {
		static char dnames[MAX_T][64];
		tu_tensor_init(&dO[o], float_elt(f64), fwd.out[o].shape, fwd.out[o].dl.ndim);
		for (int64_t j = 0; j < dO[o].numel; j++)
			set_elt(&dO[o], j, rand_nonzero(&rng, 0.25, 1.25));
		snprintf(dnames[o], sizeof(dnames[o]), "d_%s",
			tc_module_tensor_name(m, c->name, fwd.nin + o));
		named_add(&nm, dnames[o], &dO[o]);
	}
	if (tc_module_def_arity(m, sname, NULL, NULL) == 0)
		run_named(&saves, m, sname, &nm, f64, ctx);
	run_named(&hand, m, bname, &nm, f64, ctx);
	if (f64)
		check_finite_differences(c, m, &fwd, &hand, &nm, &rng);

	wrt_of_hand(m, bname, wrt, sizeof(wrt));
	if (c->derives == DERIVES) {
		check_derived(c, m, wrt, &hand, &nm, f64, 0, ctx);
		check_derived(c, m, wrt, &hand, &nm, f64, TC_GRAD_SAVES, ctx);
	} else if (c->derives == REFUSED) {
		check_refused(c, m, wrt, ctx);
	} else {
		check_bad_text(c, m, wrt, ctx);
	}

	ran_free(&hand);
	if (saves.k)
		ran_free(&saves);
	ran_free(&fwd);
	for (int o = 0; o < fwd.nout; o++)
		tu_tensor_fini(&dO[o]);
	for (int i = 0; i < nin; i++)
		tu_tensor_fini(&in[i]);
}

static void check_all(int f64)
{
	char *src = grad_source(f64);
	tc_context *ctx = tc_context_new();
	tc_module *m;
	assert_non_null(ctx);
	m = tc_module_parse(ctx, src, GRAD_TC);
	if (!m)
		fail_msg("bench/grad.tc does not check:\n%s", tc_context_error(ctx));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i], m, f64, ctx);
	tc_module_free(m);
	tc_context_free(ctx);
	free(src);
}

static void test_hand_written_match_finite_differences_and_derived_float64(void **state)
{
	(void)state;
	check_all(1);
}

static void test_derived_match_hand_written_float32(void **state)
{
	(void)state;
	check_all(0);
}

/* Every def of the file is a case's forward def, backward def or forward
 * with saves, and every case names defs of the file: a def added to
 * bench/grad.tc is not left unchecked. */
static void test_every_def_of_the_file_is_checked(void **state)
{
	tc_context *ctx = tc_context_new();
	tc_module *m = tc_module_load(ctx, GRAD_TC);
	size_t ncases = sizeof(cases) / sizeof(cases[0]);
	(void)state;
	if (!m)
		fail_msg("%s", tc_context_error(ctx));
	for (int i = 0; i < tc_module_num_defs(m); i++) {
		const char *name = tc_module_def_name(m, i);
		int found = 0;
		for (size_t k = 0; k < ncases && !found; k++) {
			char bname[128], sname[128];
			bwd_name(&cases[k], bname, sizeof(bname));
			snprintf(sname, sizeof(sname), "%s_saves", cases[k].name);
			found = !strcmp(name, cases[k].name) || !strcmp(name, bname) ||
				!strcmp(name, sname);
		}
		if (!found)
			fail_msg("bench/grad.tc: def %s has no case in tests/test_grad_hand.c", name);
	}
	for (size_t k = 0; k < ncases; k++) {
		char bname[128];
		bwd_name(&cases[k], bname, sizeof(bname));
		assert_int_equal(tc_module_def_arity(m, cases[k].name, NULL, NULL), 0);
		assert_int_equal(tc_module_def_arity(m, bname, NULL, NULL), 0);
	}
	tc_module_free(m);
	tc_context_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_def_of_the_file_is_checked),
		cmocka_unit_test(test_hand_written_match_finite_differences_and_derived_float64),
		cmocka_unit_test(test_derived_match_hand_written_float32),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
