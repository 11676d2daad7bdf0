/* Automatic differentiation (tc_module_grad, lang/grad.c) checked
 * numerically on every def of the corpora: every .tc file of tests/corpus/
 * and examples/, bench/kernels.tc, and bench/grad.tc (its hand-written
 * backward defs differentiated again: second derivatives).
 *
 * Each file is converted to float64 (the type names float, float16,
 * bfloat16, float32 and double, whole identifiers, become float64, in
 * signatures and in casts) and parsed.  For each def:
 *
 * - Defs whose outputs are all of non-floating-point types are not
 *   differentiable by design: counted, not checked (where tc_module_grad
 *   refuses them, the error must still be located).
 * - The backward def is derived without flags and with TC_GRAD_SAVES (the
 *   temporaries it reads then come from the forward with saves, NAME_fwd,
 *   run by the interpreter).  A refusal must be a located user error
 *   ("FILE:LINE:COL: error: gradient: " and a caret); refusals are counted
 *   and their first lines printed, so a reader sees what is not supported
 *   yet.  Where the text with saves is the text without (nothing saved), it
 *   is the same def and is checked once; a def whose canonical text equals
 *   one checked before (examples/ and bench/ repeat defs of tests/corpus,
 *   and float16 and bfloat16 twins coincide in float64) is counted, not
 *   checked again.
 * - Sizes: every size symbol of the def's inputs drawn in 2..5 (constants as
 *   written, extent expressions evaluated), DRAWS times per def.  Where the
 *   shapes are refused (tc_compile with target=interp fails: a where clause
 *   or an extent needs N >= K; or a run-time bounds check of the forward
 *   fails: KP1 > K for Idx(k + 1)), sizes and inputs are drawn again, at
 *   most SIZE_TRIES times, from seeds fixed by the file, the def and the
 *   draw.
 * - A def whose first write of an output adds to what it holds ('+=' without
 *   '!', which the front end warns about) starts its float outputs from 0.5
 *   in every forward run: their contents are an input of the def then.
 * - Inputs: floats uniform in [-1, 1], or in [0.5, 1.5] when the def calls a
 *   builtin that needs positive arguments (log, sqrt, rsqrt, pow, ...);
 *   integers 0 or 1 (valid indices: every extent is at least 2) and bools,
 *   never all zero.  Upstream gradients d_O uniform in [-1, 1], one per
 *   floating-point output.
 * - Checks: the backward def run by the interpreter against central finite
 *   differences of L = sum over the float outputs O of sum(d_O * O),
 *   computed from the interpreter's runs of the float64 forward def, at up
 *   to SAMPLES random elements of each floating-point input per draw: step
 *   H = 1e-6 * max(1, |x|), pass when |fd - g| <= 1e-6 * (1 + |g|) (the
 *   tolerance of test_grad.c: a truncation error about H^2 |L'''| and a
 *   rounding error about eps |L| / H, both far below it at these sizes).
 *   At the first draw, the backward def without saves compiled for the CPU
 *   (the default target, NULL options), and its CUDA code run by the
 *   emulator (target=cuda-emu: the GPU mapping, checked for races and
 *   out-of-bounds accesses), must each match the interpreter's run of it at
 *   every element within 1e-12 * (1 + |g|) (float64 sums in another
 *   order).  The one with saves runs on the interpreter only: its statements
 *   are those of the one without saves less the recomputed temporaries, and
 *   a CPU compile costs 0.1 to 1 s, most of this test's run time (compiling
 *   both, at every draw, would take three times as long).  Every output is
 *   poisoned with NaN before each run, so an element nothing writes fails.
 *
 * The test asserts that every def that derives passes, that every refusal is
 * located, and that at least MIN_CHECKED defs were checked numerically (the
 * measured counts are printed), so that losing many supported defs is seen.
 * A failure is printed with the def, its sizes, the numbers and the derived
 * text, and every def is still tried.  TC_GRAD_CORPUS_VERBOSE=1 prints a
 * line per checked def with its sizes and time. */
#include <ctype.h>
#include <dirent.h>
#include <float.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "testutil.h"
#include "testrun.h"

#define H 1e-6
#define FD_TOL 1e-6
#define CPU_TOL 1e-12

/* Elements of each floating-point input checked by finite differences, per
 * draw. */
#define SAMPLES 16
/* Size draws per def, each checked on the interpreter; the first also on
 * the CPU. */
#define DRAWS 3
/* Tries of each draw before a def that does not bind is a failure. */
#define SIZE_TRIES 64
/* Defs checked numerically, at least (97 when last counted: the others
 * are repeats, defs without a floating-point output or input, and the
 * refusals docs/language.md section 14 lists). */
#define MIN_CHECKED 120

#define MAX_T 16
#define MAX_SIZES 24
#define MAX_DEFS 1024

/* ---- text ---- */

static int is_ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* src with every identifier float, float16, bfloat16, float32 and double
 * replaced by float64 (malloc'd). */
static char *to_float64(const char *src)
{
	static const char *const names[] = {"float", "float16", "bfloat16", "float32", "double"};
	size_t n = strlen(src), cap = 2 * n + 64, len = 0;
	char *out = malloc(cap);
	assert_non_null(out);
	for (size_t i = 0; i < n;) {
		if (is_ident_char(src[i]) && (i == 0 || !is_ident_char(src[i - 1]))) {
			size_t j = i, k;
			while (j < n && is_ident_char(src[j]))
				j++;
			for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
				if (strlen(names[k]) == j - i && !strncmp(src + i, names[k], j - i))
					break;
			if (k < sizeof(names) / sizeof(names[0])) {
				memcpy(out + len, "float64", 7);
				len += 7;
			} else {
				memcpy(out + len, src + i, j - i);
				len += j - i;
			}
			i = j;
		} else {
			out[len++] = src[i++];
		}
	}
	out[len] = '\0';
	return out;
}

/* ---- the signature: types and dimension expressions ---- */

typedef struct sig_tensor {
	char type[32];
	int ndim;
	char dims[TU_MAX_RANK][128];
} sig_tensor;

typedef struct sig {
	int nin, nout;
	sig_tensor in[MAX_T], out[MAX_T];
} sig;

/* The end of the list item starting at p: the next ',' or ')' outside
 * parentheses. */
static const char *item_end(const char *p)
{
	int depth = 0;
	for (; *p; p++) {
		if (*p == '(')
			depth++;
		else if (*p == ')' && depth-- == 0)
			return p;
		else if (*p == ',' && depth == 0)
			return p;
	}
	return p;
}

/* One declaration "TYPE(d1,d2) NAME" or "TYPE NAME" of [p, end). */
static void parse_decl(const char *p, const char *end, sig_tensor *t)
{
	size_t n = 0;
	while (*p == ' ')
		p++;
	while (p < end && (is_ident_char(*p)) && n + 1 < sizeof(t->type))
		t->type[n++] = *p++;
	t->type[n] = '\0';
	t->ndim = 0;
	if (*p != '(')
		return;
	p++;
	while (*p != ')') {
		const char *e = item_end(p);
		size_t len = (size_t)(e - p);
		assert_true(t->ndim < TU_MAX_RANK && len < sizeof(t->dims[0]));
		memcpy(t->dims[t->ndim], p, len);
		t->dims[t->ndim++][len] = '\0';
		p = *e == ',' ? e + 1 : e;
	}
}

/* The declarations of the list starting after its '(' at p; the end. */
static const char *parse_list(const char *p, sig_tensor *ts, int *n)
{
	*n = 0;
	while (*p && *p != ')') {
		const char *e = item_end(p);
		assert_true(*n < MAX_T);
		parse_decl(p, e, &ts[(*n)++]);
		p = *e == ',' ? e + 1 : e;
	}
	return p;
}

/* The signature of entry in m, "def f(float64(M,K) A, ...) -> (...)". */
static void parse_signature(tc_module *m, const char *entry, sig *s)
{
	char *text = tc_module_signature(m, entry);
	const char *p;
	assert_non_null(text);
	p = strchr(text, '(');
	assert_non_null(p);
	p = parse_list(p + 1, s->in, &s->nin);
	p = strstr(p, "-> (");
	assert_non_null(p);
	parse_list(p + 4, s->out, &s->nout);
	tc_string_free(text);
}

static int is_float_type(const char *type)
{
	DLDataType dt;
	return tc_dtype_parse(type, &dt) == 0 && (dt.code == kDLFloat || dt.code == kDLBfloat);
}

/* The size symbols, with their values. */
typedef struct sizes {
	int n;
	char name[MAX_SIZES][32];
	int64_t value[MAX_SIZES];
} sizes;

static void add_size(sizes *z, const char *name, size_t len)
{
	for (int i = 0; i < z->n; i++)
		if (strlen(z->name[i]) == len && !strncmp(z->name[i], name, len))
			return;
	assert_true(z->n < MAX_SIZES && len < sizeof(z->name[0]));
	memcpy(z->name[z->n], name, len);
	z->name[z->n++][len] = '\0';
}

/* Every identifier of a dimension expression but floor is a size. */
static void collect_sizes(const char *dim, sizes *z)
{
	for (const char *p = dim; *p;) {
		if (isalpha((unsigned char)*p) || *p == '_') {
			const char *q = p;
			while (is_ident_char(*q))
				q++;
			if ((size_t)(q - p) != 5 || strncmp(p, "floor", 5))
				add_size(z, p, (size_t)(q - p));
			p = q;
		} else {
			p++;
		}
	}
}

/* A dimension expression at the sizes: integers, sizes, + - * / % (floor
 * division), parentheses and floor(). */
typedef struct evaluator {
	const char *p;
	const sizes *z;
} evaluator;

static int64_t eval_sum(evaluator *e);

static void skip_blanks(evaluator *e)
{
	while (*e->p == ' ')
		e->p++;
}

static int64_t eval_primary(evaluator *e)
{
	int64_t v;
	skip_blanks(e);
	if (*e->p == '-') {
		e->p++;
		return -eval_primary(e);
	}
	if (*e->p == '(') {
		e->p++;
		v = eval_sum(e);
		skip_blanks(e);
		assert_int_equal(*e->p, ')');
		e->p++;
		return v;
	}
	if (isdigit((unsigned char)*e->p))
		return strtoll(e->p, (char **)&e->p, 10);
	if (!strncmp(e->p, "floor", 5) && !is_ident_char(e->p[5])) {
		e->p += 5;
		return eval_primary(e); /* the argument is an integer already */
	}
	for (int i = 0; i < e->z->n; i++) {
		size_t len = strlen(e->z->name[i]);
		if (!strncmp(e->p, e->z->name[i], len) && !is_ident_char(e->p[len])) {
			e->p += len;
			return e->z->value[i];
		}
	}
	fail_msg("cannot evaluate the dimension at \"%s\"", e->p);
	return 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t eval_product(evaluator *e)
{
	int64_t v = eval_primary(e);
	for (;;) {
		char op;
		int64_t w;
		skip_blanks(e);
		op = *e->p;
		if (op != '*' && op != '/' && op != '%')
			return v;
		e->p++;
		w = eval_primary(e);
		if (op == '*')
			v *= w;
		else {
			assert_true(w != 0);
			v = op == '/' ? floor_div(v, w) : v - w * floor_div(v, w);
		}
	}
}

static int64_t eval_sum(evaluator *e)
{
	int64_t v = eval_product(e);
	for (;;) {
		char op;
		skip_blanks(e);
		op = *e->p;
		if (op != '+' && op != '-')
			return v;
		e->p++;
		v = op == '+' ? v + eval_product(e) : v - eval_product(e);
	}
}

static int64_t eval_dim(const char *dim, const sizes *z)
{
	evaluator e = {dim, z};
	int64_t v = eval_sum(&e);
	skip_blanks(&e);
	assert_int_equal(*e.p, '\0');
	return v;
}

/* ---- tensors and runs ---- */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The element types of inputs and outputs after the conversion to float64. */
static const tu_elt elts[] = {TU_BOOL, TU_I8, TU_U8, TU_I32, TU_I64, TU_F64};

static tu_elt elt_named(const char *type)
{
	for (size_t i = 0; i < sizeof(elts) / sizeof(elts[0]); i++)
		if (!strcmp(type, tu_elt_name(elts[i])))
			return elts[i];
	fail_msg("an input of type %s after the conversion to float64", type);
	return TU_F64;
}

/* The value a forward def's float outputs hold before a run where its
 * first write of them adds to what they hold ('+=' without '!', which the
 * front end warns about): their contents are an input of the def then,
 * the same at every run, so that L's differences are the def's. */
#define START 0.5

/* Runs k with its outputs poisoned first (start NaN), or float outputs set
 * to start; 0, or -1 with the error in the context. */
static int run_from(tc_kernel *k, tu_tensor *in, int nin, tu_tensor *out, int nout,
	double start)
{
	const DLTensor *ins[2 * MAX_T];
	DLTensor *outs[MAX_T];
	for (int i = 0; i < nin; i++)
		ins[i] = &in[i].dl;
	for (int i = 0; i < nout; i++) {
		tu_poison(&out[i]);
		if (!isnan(start) && out[i].elt == TU_F64)
			for (int64_t j = 0; j < out[i].numel; j++)
				((double *)out[i].data)[j] = start;
		outs[i] = &out[i].dl;
	}
	return tc_kernel_run(k, ins, nin, outs, nout);
}

/* run_from with the outputs poisoned. */
static int run(tc_kernel *k, tu_tensor *in, int nin, tu_tensor *out, int nout)
{
	return run_from(k, in, nin, out, nout, NAN);
}

/* NULL options: the default target, the CPU. */
static tc_kernel *compile(tc_module *m, const char *entry, tu_tensor *in, int n,
	const tc_options *o)
{
	const DLTensor *ins[2 * MAX_T];
	for (int i = 0; i < n; i++)
		ins[i] = &in[i].dl;
	return tc_compile(m, entry, ins, n, o);
}

/* k's outputs, poisoned; their number.  The forward's float outputs and the
 * gradients are float64; the forward may have integer outputs too, and the
 * forward with saves integer temporaries (positions of max=! and min=!). */
static int make_outputs(tc_kernel *k, tu_tensor *out)
{
	int n = tc_kernel_num_outputs(k);
	assert_true(n <= MAX_T);
	for (int i = 0; i < n; i++) {
		int64_t shape[TU_MAX_RANK];
		int nd;
		size_t e;
		DLDataType dt;
		assert_int_equal(tc_kernel_output_shape(k, i, &dt, &nd, shape), 0);
		for (e = 0; e < sizeof(elts) / sizeof(elts[0]); e++)
			if (tu_dltype(elts[e]).code == dt.code && tu_dltype(elts[e]).bits == dt.bits)
				break;
		if (e == sizeof(elts) / sizeof(elts[0]))
			fail_msg("an output of type %s", tc_dtype_str(dt));
		tu_tensor_init(&out[i], elts[e], shape, nd);
		tu_poison(&out[i]);
	}
	return n;
}

/* Floats uniform in [lo, hi] without 0; integers and bools 0 or 1, not all 0. */
static void fill_random(tu_tensor *t, double lo, double hi, uint64_t *rng)
{
	int nonzero = 0;
	for (int64_t j = 0; j < t->numel; j++) {
		switch (t->elt) {
		case TU_F64: {
			double v = 0;
			while (v == 0)
				v = lo + (hi - lo) * tu_rand_unit(rng);
			((double *)t->data)[j] = v;
			break;
		}
		case TU_I64: ((int64_t *)t->data)[j] = tu_rand_int(rng, 0, 1); break;
		case TU_I32: ((int32_t *)t->data)[j] = (int32_t)tu_rand_int(rng, 0, 1); break;
		case TU_I8: ((int8_t *)t->data)[j] = (int8_t)tu_rand_int(rng, 0, 1); break;
		case TU_U8:
		case TU_BOOL: ((uint8_t *)t->data)[j] = (uint8_t)tu_rand_int(rng, 0, 1); break;
		default: fail_msg("element type %s", tu_elt_name(t->elt));
		}
		nonzero |= tu_get(t, j) != 0;
	}
	if (!nonzero) {
		if (t->elt == TU_I64)
			((int64_t *)t->data)[0] = 1;
		else if (t->elt == TU_I32)
			((int32_t *)t->data)[0] = 1;
		else
			((uint8_t *)t->data)[0] = 1;
	}
}

/* L = sum over the float outputs o of sum(dO[o] * out[o]), but for the
 * elements that are the identity of a max=! or min=! scatter (the lowest
 * or largest finite float64, -/+1.7976931348623157e308), which no index
 * names: a constant whatever the inputs, whose derivative is 0 and whose
 * term would overflow L to an infinity. */
static double loss(const tu_tensor *out, const tu_tensor *dO, const int *is_float, int nout)
{
	double l = 0;
	for (int o = 0; o < nout; o++)
		for (int64_t j = 0; is_float[o] && j < out[o].numel; j++) {
			double v = tu_get(&out[o], j);
			assert_false(isnan(v));
			if (fabs(v) != DBL_MAX)
				l += tu_get(&dO[o], j) * v;
		}
	return l;
}

/* Whether adj names the adjoint of x: d_X, or d_X_2, ... where the def
 * already has a d_X. */
static int is_adjoint_of(const char *adj, const char *x)
{
	size_t n = strlen(x);
	return adj && !strncmp(adj, "d_", 2) && !strncmp(adj + 2, x, n) &&
	       (adj[2 + n] == '\0' || adj[2 + n] == '_');
}

/* ---- the counts ---- */

typedef struct tally {
	int defs, checked, refused, nonfloat, no_float_input, repeated, failures;
	long elements;  /* gradient elements checked against finite differences */
	int verbose;    /* TC_GRAD_CORPUS_VERBOSE: a line per checked def */
	tc_options *emu; /* target=cuda-emu: the CUDA code of the backward, emulated */
	long emulated;   /* backward defs run on the emulator */
	int nhashes;
	char hashes[MAX_DEFS][17]; /* tc_module_hash of the defs checked */
} tally;

/* A failure of a def that derives: printed and counted; the test fails at
 * the end, after every def has been tried, so that one run shows them all. */
static void report(tally *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("FAIL ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	t->failures++;
}

/* The first line of s, at most n - 1 characters, into buf. */
static const char *first_line(const char *s, char *buf, size_t n)
{
	size_t len = strcspn(s, "\n");
	if (len >= n)
		len = n - 1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return buf;
}

/* Whether the def calls a builtin that needs positive arguments. */
static int needs_positive(tc_module *m, const char *entry)
{
	static const char *const names[] = {"log", "log2", "log10", "log1p", "sqrt", "rsqrt",
		"cbrt", "rcbrt", "pow", "lgamma", "tgamma", "acosh"};
	char *text = tc_module_emit(m, entry, "syntax"), pat[64];
	int found = 0;
	assert_non_null(text);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !found; i++) {
		snprintf(pat, sizeof(pat), "Call %s [builtin]", names[i]);
		found = strstr(text, pat) != NULL;
	}
	tc_string_free(text);
	return found;
}

/* ---- one def ---- */

/* The forward def at drawn sizes and inputs. */
typedef struct forward {
	tc_module *m;
	const char *name, *where; /* where: "FILE: NAME [SIZES]" for messages */
	int nin, nout;
	tu_tensor in[MAX_T], out[MAX_T], dO[MAX_T]; /* dO: for float outputs only */
	int is_float[MAX_T];                        /* of each output */
	double start;                               /* NaN, or START (see there) */
	tc_kernel *k;                               /* on the interpreter */
} forward;

/* A derived backward def and its gradients at the forward's inputs. */
typedef struct backward {
	int saves;
	char *text;
	tc_module *mb;
	int ngrad;
	int wrt_of[MAX_T];  /* the forward input of each gradient */
	tu_tensor g[MAX_T]; /* the interpreter's gradients */
} backward;

/* Runs b's backward def on the interpreter at f's inputs (with its outputs,
 * or the forward with saves' outputs and temporaries, and its upstream
 * gradients), and where cpu is set on the CPU too, and compares the two
 * runs; b->g gets the interpreter's gradients.  0, or -1 after a reported
 * failure. */
static int run_backward(tally *t, tc_context *ctx, forward *f, backward *b, int cpu,
	const tc_options *oi)
{
	char entry[160], fwd[160];
	tc_module *mp = f->m;
	const char *pentry = f->name, *tag = b->saves ? " (saves)" : "";
	tc_kernel *kp = NULL, *kbi = NULL, *kbc = NULL, *kbe = NULL;
	tu_tensor bin[2 * MAX_T], pout[MAX_T], gc[MAX_T], ge[MAX_T], *po = f->out;
	int nbin = 0, nbout = 0, npout = f->nout, status = -1, ngc = 0, nge = 0, nfo = 0, nwrt = 0;

	snprintf(entry, sizeof(entry), "%s_grad", f->name);
	snprintf(fwd, sizeof(fwd), "%s_fwd", f->name);
	for (int o = 0; o < f->nout; o++)
		nfo += f->is_float[o];
	assert_int_equal(tc_module_def_arity(b->mb, entry, &nbin, &nbout), 0);
	assert_true(nbin >= f->nin + nfo && nbin <= 2 * MAX_T && nbout <= MAX_T);
	b->ngrad = 0;
	/* the saved temporaries: from the forward with saves */
	if (b->saves && tc_module_def_arity(b->mb, fwd, NULL, NULL) == 0) {
		mp = b->mb;
		pentry = fwd;
		assert_int_equal(tc_module_def_arity(mp, pentry, NULL, &npout), 0);
		kp = compile(mp, pentry, f->in, f->nin, oi);
		if (!kp) {
			report(t, "%s%s: %s does not compile:\n%s\n%s", f->where, tag, fwd,
				tc_context_error(ctx), b->text);
			return -1;
		}
		assert_int_equal(make_outputs(kp, pout), npout);
		po = pout;
		if (run_from(kp, f->in, f->nin, pout, npout, f->start)) {
			report(t, "%s%s: %s fails:\n%s\n%s", f->where, tag, fwd, tc_context_error(ctx),
				b->text);
			goto done;
		}
	}
	/* the backward's inputs: the forward's, then the outputs and saved
	 * temporaries it reads, then d_O per float output */
	for (int i = 0; i < f->nin; i++)
		bin[i] = f->in[i];
	for (int i = f->nin; i < nbin - nfo; i++) {
		const char *bn = tc_module_tensor_name(b->mb, entry, i);
		int o;
		for (o = 0; o < npout; o++)
			if (!strcmp(tc_module_tensor_name(mp, pentry, f->nin + o), bn))
				break;
		if (o == npout) {
			report(t, "%s%s: input %d of %s, '%s', is no output of %s\n%s", f->where, tag, i,
				entry, bn, pentry, b->text);
			goto done;
		}
		bin[i] = po[o];
	}
	for (int o = 0, i = nbin - nfo; o < f->nout; o++) {
		if (!f->is_float[o])
			continue;
		assert_true(is_adjoint_of(tc_module_tensor_name(b->mb, entry, i),
			tc_module_tensor_name(f->m, f->name, f->nin + o)));
		bin[i++] = f->dO[o];
	}
	/* the gradients: one per float input (every one by default), in order */
	for (int i = 0; i < f->nin; i++) {
		if (f->in[i].elt != TU_F64)
			continue;
		assert_true(nwrt < nbout);
		assert_true(is_adjoint_of(tc_module_tensor_name(b->mb, entry, nbin + nwrt),
			tc_module_tensor_name(f->m, f->name, i)));
		b->wrt_of[nwrt++] = i;
	}
	assert_int_equal(nwrt, nbout);

	kbi = compile(b->mb, entry, bin, nbin, oi);
	if (!kbi) {
		report(t, "%s%s: %s does not compile for the interpreter:\n%s\n%s", f->where, tag,
			entry, tc_context_error(ctx), b->text);
		goto done;
	}
	if (cpu) {
		kbc = compile(b->mb, entry, bin, nbin, NULL);
		if (!kbc) {
			report(t, "%s%s: %s does not compile for the CPU:\n%s\n%s", f->where, tag,
				entry, tc_context_error(ctx), b->text);
			goto done;
		}
		ngc = make_outputs(kbc, gc);
		assert_int_equal(ngc, nbout);
		kbe = compile(b->mb, entry, bin, nbin, t->emu);
		if (!kbe) {
			report(t, "%s%s: %s does not compile for the CUDA emulator:\n%s\n%s", f->where,
				tag, entry, tc_context_error(ctx), b->text);
			goto done;
		}
		nge = make_outputs(kbe, ge);
		assert_int_equal(nge, nbout);
		t->emulated++;
	}
	b->ngrad = make_outputs(kbi, b->g);
	assert_int_equal(b->ngrad, nbout);
	for (int g = 0; g < nbout; g++)
		assert_true(b->g[g].elt == TU_F64 && (!kbc || gc[g].elt == TU_F64));
	if (run(kbi, bin, nbin, b->g, b->ngrad) || (kbc && run(kbc, bin, nbin, gc, ngc)) ||
		(kbe && run(kbe, bin, nbin, ge, nge))) {
		report(t, "%s%s: %s fails:\n%s\n%s", f->where, tag, entry, tc_context_error(ctx),
			b->text);
		goto done;
	}
	status = 0;
	for (int e = 0; e < 2; e++) /* the CPU's, then the emulator's */
		for (int g = 0; g < (e ? nge : ngc) && status == 0; g++)
			for (int64_t j = 0; j < gc[g].numel; j++) {
				double gv = tu_get(&b->g[g], j), cv = tu_get(e ? &ge[g] : &gc[g], j);
				if (!(fabs(cv - gv) <= CPU_TOL * (1 + fabs(gv)))) {
					report(t, "%s%s: d_%s[%lld]: %s %.17g, interpreter %.17g\n%s",
						f->where, tag,
						tc_module_tensor_name(f->m, f->name, b->wrt_of[g]),
						(long long)j, e ? "cuda-emu" : "cpu", cv, gv, b->text);
					status = -1;
					break;
				}
			}
done:
	for (int g = 0; g < ngc; g++)
		tu_tensor_fini(&gc[g]);
	for (int g = 0; g < nge; g++)
		tu_tensor_fini(&ge[g]);
	if (kp) {
		for (int o = 0; o < npout; o++)
			tu_tensor_fini(&pout[o]);
		tc_kernel_free(kp);
	}
	tc_kernel_free(kbi);
	tc_kernel_free(kbc);
	tc_kernel_free(kbe);
	if (status) {
		for (int g = 0; g < b->ngrad; g++)
			tu_tensor_fini(&b->g[g]);
		b->ngrad = 0;
	}
	return status;
}

/* The sizes as "N=3 K=2", into buf. */
static const char *sizes_str(const sizes *z, char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = '\0';
	for (int i = 0; i < z->n && len < n; i++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s=%lld", i ? " " : "", z->name[i],
			(long long)z->value[i]);
	return buf;
}

/* Draw n: sizes and inputs, drawn until the forward binds and runs on the
 * interpreter (f->k); f->in and f->out made.  0, or -1 when no try did. */
static int draw(forward *f, const sig *s, const char *file, int n, sizes *z,
	const tc_options *oi, uint64_t *rng)
{
	double lo = -1, hi = 1;
	char seed[256];
	for (int i = 0; i < f->nin; i++)
		for (int d = 0; d < s->in[i].ndim; d++)
			collect_sizes(s->in[i].dims[d], z);
	if (needs_positive(f->m, f->name)) {
		lo = 0.5;
		hi = 1.5;
	}
	snprintf(seed, sizeof(seed), "%s:%s:%d", file, f->name, n);
	for (int try = 0; try < SIZE_TRIES; try++) {
		*rng = tu_seed(seed, (uint64_t)try);
		for (int k = 0; k < z->n; k++)
			z->value[k] = tu_rand_int(rng, 2, 5);
		for (int i = 0; i < f->nin; i++) {
			int64_t dims[TU_MAX_RANK];
			for (int d = 0; d < s->in[i].ndim; d++)
				dims[d] = eval_dim(s->in[i].dims[d], z);
			tu_tensor_init(&f->in[i], elt_named(s->in[i].type), dims, s->in[i].ndim);
			fill_random(&f->in[i], lo, hi, rng);
		}
		f->k = compile(f->m, f->name, f->in, f->nin, oi);
		if (f->k) {
			assert_int_equal(make_outputs(f->k, f->out), f->nout);
			for (int o = 0; o < f->nout; o++)
				assert_true(!f->is_float[o] || f->out[o].elt == TU_F64);
			if (run_from(f->k, f->in, f->nin, f->out, f->nout, f->start) == 0)
				return 0;
			/* a run-time check refused the sizes or the index data */
			for (int o = 0; o < f->nout; o++)
				tu_tensor_fini(&f->out[o]);
			tc_kernel_free(f->k);
			f->k = NULL;
		}
		for (int i = 0; i < f->nin; i++)
			tu_tensor_fini(&f->in[i]);
	}
	return -1;
}

/* Finite differences of L at up to SAMPLES elements of each float input
 * against the gradients of the nb backward defs. */
static void check_finite_differences(tally *t, forward *f, backward *bw, int nb, uint64_t *rng)
{
	for (int i = 0; i < f->nin; i++) {
		tu_tensor *x = &f->in[i];
		int64_t *perm, ns;
		int fails = 0;
		if (x->elt != TU_F64)
			continue;
		perm = malloc((size_t)x->numel * sizeof(*perm));
		assert_non_null(perm);
		for (int64_t j = 0; j < x->numel; j++)
			perm[j] = j;
		ns = x->numel < SAMPLES ? x->numel : SAMPLES;
		for (int64_t a = 0; a < ns; a++) { /* a partial Fisher-Yates shuffle */
			int64_t r = tu_rand_int(rng, a, x->numel - 1), tmp = perm[a];
			perm[a] = perm[r];
			perm[r] = tmp;
		}
		for (int64_t a = 0; a < ns && fails < 3; a++) {
			int64_t j = perm[a];
			double *p = &((double *)x->data)[j], x0 = *p, h = H * fmax(1.0, fabs(x0));
			double lp, lm, fd;
			*p = x0 + h;
			assert_int_equal(run_from(f->k, f->in, f->nin, f->out, f->nout, f->start), 0);
			lp = loss(f->out, f->dO, f->is_float, f->nout);
			*p = x0 - h;
			assert_int_equal(run_from(f->k, f->in, f->nin, f->out, f->nout, f->start), 0);
			lm = loss(f->out, f->dO, f->is_float, f->nout);
			*p = x0;
			fd = (lp - lm) / (2 * h);
			for (int b = 0; b < nb; b++) {
				int g = 0;
				double gv;
				while (bw[b].wrt_of[g] != i)
					g++;
				gv = tu_get(&bw[b].g[g], j);
				t->elements++;
				if (!(fabs(fd - gv) <= FD_TOL * (1 + fabs(gv)))) {
					report(t, "%s%s: d_%s[%lld] = %.17g, finite differences give %.17g%s%s",
						f->where, bw[b].saves ? " (saves)" : "",
						tc_module_tensor_name(f->m, f->name, i), (long long)j, gv, fd,
						fails ? "" : "\n", fails ? "" : bw[b].text);
					fails++;
				}
			}
		}
		free(perm);
	}
}

/* Whether def name of the module parsed from src, whose warnings are w,
 * has a warning that a reduction adds to what its tensor holds before any
 * statement writes it (a warning located between "def name(" and the next
 * def). */
static int accumulates(const char *w, const char *src, const char *name)
{
	const char *p;
	char head[160];
	int first = 0, last = 1 << 30, line = 1;
	snprintf(head, sizeof(head), "def %s(", name);
	for (p = src; *p; p++) {
		if (!strncmp(p, head, strlen(head)) && (p == src || p[-1] == '\n'))
			first = line;
		else if (first && line > first && !strncmp(p, "def ", 4) && p[-1] == '\n' &&
			last > line)
			last = line;
		line += *p == '\n';
	}
	for (p = w; p && first && (p = strstr(p, ": warning: ")); p++) {
		const char *q = p, *eol;
		int l;
		while (q > w && q[-1] != '\n')
			q--;
		/* FILE:LINE:COL: warning: ... */
		q = strchr(q, ':');
		l = q ? atoi(q + 1) : 0;
		eol = strchr(p, '\n');
		if (l >= first && l < last && strstr(p, "before any statement writes it") &&
			(!eol || strstr(p, "before any statement writes it") < eol))
			return 1;
	}
	return 0;
}

/* Derives (without and with saves), counts, and checks def name of m. */
static void check_def(tally *t, tc_context *ctx, tc_module *m, const char *file,
	const char *src, const char *warnings, const char *name, const tc_options *oi)
{
	sig s;
	sizes z = {0};
	backward bw[2];
	forward f = {0};
	int nb = 0, nfo = 0, ok, failures = t->failures;
	char where[256], wz[544], msg[512], zs[256], hash[17];
	uint64_t rng;
	double t0 = now();

	snprintf(where, sizeof(where), "%s: %s", file, name);
	t->defs++;
	parse_signature(m, name, &s);
	f.m = m;
	f.name = name;
	f.start = accumulates(warnings, src, name) ? START : NAN;
	f.nin = s.nin;
	f.nout = s.nout;
	for (int o = 0; o < f.nout; o++)
		nfo += f.is_float[o] = is_float_type(s.out[o].type);

	/* derive, without and with saves */
	for (int saves = 0; saves <= 1; saves++) {
		char *text = tc_module_grad(m, name, NULL, saves ? TC_GRAD_SAVES : 0);
		if (!text) {
			const char *err = tc_context_error(ctx);
			if (tc_context_error_kind(ctx) != TC_ERROR_USER || !strstr(err, file) ||
			    !strstr(err, ": error: gradient: ") || !strchr(err, '^'))
				report(t, "%s: the refusal is not a located gradient error:\n%s", where, err);
			else if (nfo && saves == 0) {
				t->refused++;
				printf("refused %s: %s\n", where, first_line(err, msg, sizeof(msg)));
				fflush(stdout);
			} else if (nfo && nb > 0)
				report(t, "%s: derives without saves but not with them:\n%s", where, err);
			continue;
		}
		if (nfo && saves && nb == 0)
			report(t, "%s: derives with saves but not without them:\n%s", where, text);
		if (!nfo || (saves && nb == 0)) {
			tc_string_free(text);
			continue;
		}
		bw[nb].saves = saves;
		bw[nb].text = text;
		bw[nb].ngrad = 0;
		bw[nb].mb = tc_module_parse(ctx, text, "grad.tc");
		if (!bw[nb].mb) {
			report(t, "%s: the derived text does not check:\n%s\n%s", where, text,
				tc_context_error(ctx));
			tc_string_free(text);
			continue;
		}
		nb++;
	}
	if (!nfo) { /* not differentiable by design */
		t->nonfloat++;
		return;
	}
	if (nb == 0)
		return;
	/* nothing saved: the same def as without saves, checked once */
	if (nb == 2 && !strcmp(bw[0].text, bw[1].text)) {
		tc_module_free(bw[1].mb);
		tc_string_free(bw[1].text);
		nb = 1;
	}
	{
		char entry[160];
		int nbout = 0;
		snprintf(entry, sizeof(entry), "%s_grad", name);
		assert_int_equal(tc_module_def_arity(bw[0].mb, entry, NULL, &nbout), 0);
		if (nbout == 0) { /* no float input: no gradient to check */
			t->no_float_input++;
			goto free_backward;
		}
	}
	/* a def the same as one checked before (examples/ and bench/ repeat defs
	 * of tests/corpus, and in float64 float16 and bfloat16 twins coincide):
	 * the same canonical text, so the same derivation */
	assert_int_equal(tc_module_hash(m, name, hash), 0);
	for (int i = 0; i < t->nhashes; i++)
		if (!strcmp(t->hashes[i], hash)) {
			t->repeated++;
			goto free_backward;
		}
	assert_true(t->nhashes < MAX_DEFS);
	memcpy(t->hashes[t->nhashes++], hash, sizeof(hash));

	for (int d = 0; d < DRAWS && failures == t->failures; d++) {
		if (draw(&f, &s, file, d, &z, oi, &rng)) {
			report(t, "%s: no sizes in 2..5 bind and run (%d draws):\n%s", where,
				SIZE_TRIES, tc_context_error(ctx));
			break;
		}
		snprintf(wz, sizeof(wz), "%s [%s]", where, sizes_str(&z, zs, sizeof(zs)));
		f.where = wz;
		for (int o = 0; o < f.nout; o++)
			if (f.is_float[o]) {
				tu_tensor_init(&f.dO[o], TU_F64, f.out[o].shape, f.out[o].dl.ndim);
				fill_random(&f.dO[o], -1, 1, &rng);
			}
		ok = 1;
		for (int b = 0; b < nb; b++)
			ok &= run_backward(t, ctx, &f, &bw[b], d == 0 && !bw[b].saves, oi) == 0;
		if (ok)
			check_finite_differences(t, &f, bw, nb, &rng);
		if (t->verbose)
			printf("  draw %d: %s%s: %s\n", d, wz, nb == 2 ? " and with saves" : "",
				failures == t->failures ? "ok" : "failed");
		for (int b = 0; b < nb; b++) {
			for (int g = 0; g < bw[b].ngrad; g++)
				tu_tensor_fini(&bw[b].g[g]);
			bw[b].ngrad = 0;
		}
		for (int o = 0; o < f.nout; o++) {
			tu_tensor_fini(&f.out[o]);
			if (f.is_float[o])
				tu_tensor_fini(&f.dO[o]);
		}
		for (int i = 0; i < f.nin; i++)
			tu_tensor_fini(&f.in[i]);
		tc_kernel_free(f.k);
	}
	if (failures == t->failures) {
		t->checked++;
		if (t->verbose)
			printf("checked %s: %.0f ms\n", where, 1e3 * (now() - t0));
	}
free_backward:
	for (int b = 0; b < nb; b++) {
		for (int g = 0; g < bw[b].ngrad; g++)
			tu_tensor_fini(&bw[b].g[g]);
		tc_module_free(bw[b].mb);
		tc_string_free(bw[b].text);
	}
}

/* ---- the corpora ---- */

static void check_file(tally *t, const char *dir, const char *file)
{
	char path[1024], *src, *src64, *warnings;
	tc_context *ctx = tc_context_new();
	tc_options *oi = tc_options_new();
	tc_module *m;
	assert_non_null(ctx);
	assert_non_null(oi);
	assert_int_equal(tc_options_set(oi, "target", "interp", ctx), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	src = tr_slurp(path);
	assert_non_null(src);
	src64 = to_float64(src);
	m = tc_module_parse(ctx, src64, file);
	if (!m)
		fail_msg("%s in float64 does not check:\n%s", path, tc_context_error(ctx));
	warnings = strdup(tc_context_warnings(ctx) ? tc_context_warnings(ctx) : "");
	assert_non_null(warnings);
	for (int i = 0; i < tc_module_num_defs(m); i++)
		check_def(t, ctx, m, file, src64, warnings, tc_module_def_name(m, i), oi);
	free(warnings);
	tc_module_free(m);
	tc_options_free(oi);
	tc_context_free(ctx);
	free(src64);
	free(src);
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every .tc file of dir (only `only` when not NULL), in name order. */
static void check_dir(tally *t, const char *dir, const char *only)
{
	DIR *d = opendir(dir);
	struct dirent *ent;
	char *names[256];
	int n = 0;
	assert_non_null(d);
	while ((ent = readdir(d))) {
		size_t len = strlen(ent->d_name);
		if (len < 4 || strcmp(ent->d_name + len - 3, ".tc"))
			continue;
		if (only && strcmp(ent->d_name, only))
			continue;
		assert_true(n < 256);
		names[n] = strdup(ent->d_name);
		assert_non_null(names[n]);
		n++;
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), compare_names);
	for (int i = 0; i < n; i++) {
		check_file(t, dir, names[i]);
		free(names[i]);
	}
}

static void test_every_corpus_def_gradient_matches_finite_differences_and_cpu(void **state)
{
	static tally t;
	const char *v = getenv("TC_GRAD_CORPUS_VERBOSE");
	(void)state;
	t.verbose = v && *v && strcmp(v, "0");
	assert_non_null(t.emu = tc_options_new());
	assert_int_equal(tc_options_set(t.emu, "target", "cuda-emu", NULL), 0);
	check_dir(&t, TC_SOURCE_DIR "/tests/corpus", NULL);
	check_dir(&t, TC_SOURCE_DIR "/examples", NULL);
	check_dir(&t, TC_SOURCE_DIR "/bench", "kernels.tc");
	check_dir(&t, TC_SOURCE_DIR "/bench", "grad.tc");
	printf("%d defs: %d checked numerically (%ld gradient elements against finite "
	       "differences), %d the same as a def checked before, %d refused, %d without a "
	       "floating-point output, %d without a floating-point input; %ld backward defs "
	       "also on the CPU and the CUDA emulator; %d failures\n",
		t.defs, t.checked, t.elements, t.repeated, t.refused, t.nonfloat, t.no_float_input,
		t.emulated, t.failures);
	fflush(stdout);
	tc_options_free(t.emu);
	assert_int_equal(t.failures, 0);
	assert_true(t.checked >= MIN_CHECKED);
	assert_true(t.emulated >= MIN_CHECKED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_corpus_def_gradient_matches_finite_differences_and_cpu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
