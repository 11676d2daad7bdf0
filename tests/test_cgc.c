/* Tests of the C backend (codegen/c.c, tcomp emit --stage c).
 *
 * End to end: a def (from tests/corpus or written here) is parsed, checked
 * and lowered through the library internals, bound to input shapes
 * (tc_ir_bind gives the sizes), modelled with concrete sizes
 * (tc_poly_build, tc_poly_schedule with tc_poly_plain_passes, tc_poly_ast), and
 * printed with tc_cg_c_text.  The text is compiled by the system C compiler
 * ($CC, else cc) into a shared object with -Wall -Wextra -Werror (the text
 * must compile cleanly) and -ffp-contract=off (no fused multiply-adds the
 * interpreter does not do), loaded with dlopen and run on seeded random
 * inputs; its outputs are compared with the reference interpreter's
 * (tc_interp_run): bit for bit (NaN matching NaN), except float32 builtins
 * (libm's float functions against the interpreter's double ones: relative
 * 1e-6) and float32 reductions (1e-5: the schedule may reorder them).
 *
 * Golden: the text of the parametric matmul (sizes as parameters) is
 * tests/golden/matmul.c byte for byte; after an intended change run
 *
 *     TC_UPDATE_GOLDEN=1 ./build/tests/test_cgc
 *
 * and review the diff.  Files go to a fresh directory under $TMPDIR (or
 * /tmp), removed at the end; set TC_CGC_KEEP=1 to keep it. */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codegen/c.h"
#include "ir/half.h"
#include "ir/interp.h"
#include "lang/ast.h"
#include "lang/diag.h"
#include "polyhedral/passes.h"
#include "runtime/backend.h"
#include "testutil.h"

/* The host CPU as the cpu backend describes it (runtime/backend_cpu.c):
 * the target the models below are built for, as tc_compile builds them. */
static const tc_target *host_target(void)
{
	static tc_target t;
	if (!t.name)
		tc_rt_backend_cpu.describe(&t, NULL);
	return &t;
}

#define CORPUS_DIR TC_SOURCE_DIR "/tests/corpus"
#define GOLDEN_DIR TC_SOURCE_DIR "/tests/golden"
#define MAX_T 40 /* tensors of one def */

static char tmpdir[256];

static int env_flag(const char *name)
{
	const char *s = getenv(name);
	return s && *s && strcmp(s, "0") != 0;
}

static void spit(const char *path, const char *text)
{
	FILE *fp = fopen(path, "wb");
	if (!fp)
		fail_msg("cannot write %s", path);
	fputs(text, fp);
	if (fclose(fp) != 0)
		fail_msg("cannot write %s", path);
}

/* ---- a def through the front end ---- */

typedef struct loaded {
	tc_arena *ar;
	tc_source *src;
	tc_diags d;
	tc_ir_func *f;
} loaded;

static char *render(const tc_diags *d)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_diags_render(d, 1u << TC_SEV_ERROR | 1u << TC_SEV_WARNING, &b);
	return tc_buf_take(&b);
}

/* Load def entry of corpus file name (NAME.tc), or of text when file is NULL. */
static void load(loaded *l, const char *file, const char *text, const char *entry)
{
	char path[512];
	char *owned = NULL;
	tc_program *prog;
	const tc_def *def;

	memset(l, 0, sizeof(*l));
	if (file) {
		snprintf(path, sizeof(path), "%s/%s.tc", CORPUS_DIR, file);
		owned = tu_read_file(path);
		if (!owned)
			fail_msg("cannot read %s", path);
		text = owned;
	}
	l->ar = tc_arena_new();
	l->src = tc_source_new(file ? path : "t.tc", text, strlen(text));
	free(owned);
	assert_non_null(l->ar);
	assert_non_null(l->src);
	tc_diags_init(&l->d, l->src);
	prog = tc_parse(l->ar, l->src, &l->d);
	assert_non_null(prog);
	if (!l->d.nerrors)
		tc_sema_check(prog, &l->d);
	if (l->d.nerrors) {
		char *msg = render(&l->d);
		fail_msg("%s does not check:\n%s", file ? path : "the source", msg ? msg : "");
	}
	def = tc_program_find(prog, entry);
	if (!def)
		fail_msg("no def %s", entry);
	l->f = tc_ir_lower(l->ar, def, l->src);
	assert_non_null(l->f);
}

static void loaded_free(loaded *l)
{
	tc_diags_clear(&l->d);
	tc_arena_free(l->ar);
	tc_source_free(l->src);
}

/* The C text of f with sizes params (NULL: parametric); fails the test on
 * an error.  The caller frees the text with tc_free. */
static char *c_text(const tc_ir_func *f, const int64_t *params, int contract)
{
	isl_ctx *ctx = tc_poly_ctx_new();
	tc_diags d;
	tc_poly *p;
	char *text = NULL;

	assert_non_null(ctx);
	tc_diags_init(&d, NULL);
	p = tc_poly_build(ctx, f, params, host_target(), &d);
	if (p && tc_poly_schedule(p, tc_poly_plain_passes, tc_poly_nplain_passes, NULL, &d) == TC_OK &&
		tc_poly_ast(p, &d) == TC_OK)
		text = tc_cg_c_text(p, contract, &d);
	/* printing leaves isl's iterator type as it was */
	assert_string_equal(isl_options_get_ast_iterator_type(ctx), "int");
	tc_poly_free(p);
	isl_ctx_free(ctx);
	if (!text || d.nerrors) {
		char *msg = render(&d);
		fail_msg("no C text for %s:\n%s", f->name, msg ? msg : "");
	}
	tc_diags_clear(&d);
	return text;
}

/* ---- compiling the text ---- */

/* Compile text (as NAME.c in tmpdir) into a shared object and return the
 * function sym of it; *handle receives the dlopen handle. */
static void *compile(const char *name, const char *text, const char *sym, void **handle)
{
	char c_path[512], so_path[512], cmd[2048], out[4096];
	const char *cc = getenv("CC");
	FILE *pp;
	size_t n = 0;
	int status;
	void *h, *fn;

	snprintf(c_path, sizeof(c_path), "%s/%s.c", tmpdir, name);
	snprintf(so_path, sizeof(so_path), "%s/%s.so", tmpdir, name);
	spit(c_path, text);
	snprintf(cmd, sizeof(cmd),
		"%s -std=c11 -O1 -shared -fPIC -ffp-contract=off -Wall -Wextra -Werror "
		"-o '%s' '%s' -lm 2>&1",
		cc && *cc ? cc : "cc", so_path, c_path);
	pp = popen(cmd, "r");
	assert_non_null(pp);
	out[0] = 0;
	while (n + 1 < sizeof(out) && fgets(out + n, (int)(sizeof(out) - n), pp))
		n = strlen(out);
	status = pclose(pp);
	if (status != 0) {
		printf("%s\n", text);
		fail_msg("the C text of %s does not compile (%s):\n%s", name, cmd, out);
	}
	h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", so_path, dlerror());
	fn = dlsym(h, sym);
	if (!fn)
		fail_msg("no function %s in %s", sym, so_path);
	if (!env_flag("TC_CGC_KEEP")) {
		unlink(c_path);
		unlink(so_path);
	}
	*handle = h;
	return fn;
}

/* ---- data ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) * 0x1p-53;
}

/* Values of an input: [lo, hi] (both 0: a default for the type); nonzero
 * replaces zeros by 1 (divisors); specials puts NaN, infinities, -0 and
 * huge values among the floats. */
typedef struct range {
	double lo, hi;
	int nonzero;
} range;

static int64_t numel(const tc_tensor *t)
{
	int64_t n = 1;
	int k;
	for (k = 0; k < t->ndim; k++)
		n *= t->shape[k];
	return n;
}

static void fill(const tc_tensor *t, range r, int specials, uint64_t *rng)
{
	static const double special[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1e30, -1e30, 0.5};
	int64_t i, n = numel(t);
	tc_dtype ty = t->dtype;
	if (r.lo == 0 && r.hi == 0) {
		int nonneg = tc_dtype_is_unsigned(ty) || ty == TC_T_BOOL;
		r.lo = tc_dtype_is_float(ty) ? -1 : nonneg ? 0 : -5;
		r.hi = tc_dtype_is_float(ty) ? 1 : ty == TC_T_BOOL ? 1 : 5;
	}
	for (i = 0; i < n; i++) {
		double x = r.lo + (r.hi - r.lo) * rng_unit(rng);
		int64_t v = 0;
		if (!tc_dtype_is_float(ty))
			v = (int64_t)r.lo + (int64_t)(rng_next(rng) % (uint64_t)(r.hi - r.lo + 1));
		if (specials && tc_dtype_is_float(ty) && rng_next(rng) % 4 == 0)
			x = special[rng_next(rng) % (sizeof(special) / sizeof(special[0]))];
		if (r.nonzero && v == 0)
			v = 1;
		switch (ty) {
		case TC_T_BOOL: ((uint8_t *)t->data)[i] = (uint8_t)(v != 0); break;
		case TC_T_I8: ((int8_t *)t->data)[i] = (int8_t)v; break;
		case TC_T_I16: ((int16_t *)t->data)[i] = (int16_t)v; break;
		case TC_T_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
		case TC_T_I64: ((int64_t *)t->data)[i] = v; break;
		case TC_T_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
		case TC_T_U16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
		case TC_T_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
		case TC_T_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
		case TC_T_F16: ((uint16_t *)t->data)[i] = tc_half_from_double(x); break;
		case TC_T_BF16: ((uint16_t *)t->data)[i] = tc_bf16_from_double(x); break;
		case TC_T_F32: ((float *)t->data)[i] = (float)x; break;
		case TC_T_F64: ((double *)t->data)[i] = x; break;
		default: fail_msg("no data of this type");
		}
	}
}

/* Element i as a double (for messages and tolerances). */
static double elem(tc_dtype t, const void *p, int64_t i)
{
	switch (t) {
	case TC_T_BOOL: case TC_T_U8: return ((const uint8_t *)p)[i];
	case TC_T_I8: return ((const int8_t *)p)[i];
	case TC_T_I16: return ((const int16_t *)p)[i];
	case TC_T_I32: return ((const int32_t *)p)[i];
	case TC_T_I64: return (double)((const int64_t *)p)[i];
	case TC_T_U16: return ((const uint16_t *)p)[i];
	case TC_T_U32: return ((const uint32_t *)p)[i];
	case TC_T_U64: return (double)((const uint64_t *)p)[i];
	case TC_T_F16: return tc_half_to_double(((const uint16_t *)p)[i]);
	case TC_T_BF16: return tc_bf16_to_double(((const uint16_t *)p)[i]);
	case TC_T_F32: return ((const float *)p)[i];
	case TC_T_F64: return ((const double *)p)[i];
	default: return 0;
	}
}

/* got equals want: bit for bit (NaN matches NaN) or, for floats when
 * rtol > 0, within rtol of the larger magnitude (at least 1e-3). */
static void compare(const char *kernel, const char *tensor, tc_dtype t, const void *want,
	const void *got, int64_t n, double rtol)
{
	int size = tc_dtype_size(t);
	int64_t i;
	for (i = 0; i < n; i++) {
		double a = elem(t, want, i), b = elem(t, got, i);
		const char *pa = (const char *)want + i * size, *pb = (const char *)got + i * size;
		if (!memcmp(pa, pb, (size_t)size))
			continue;
		if (tc_dtype_is_float(t)) {
			if (isnan(a) && isnan(b))
				continue;
			if (rtol > 0 && fabs(a - b) <= rtol * fmax(1e-3, fmax(fabs(a), fabs(b))))
				continue;
		}
		fail_msg("%s: %s[%lld] is %.17g in C, %.17g in the interpreter", kernel, tensor,
			(long long)i, b, a);
	}
}

/* ---- the end-to-end cases ---- */

typedef struct cgc_case {
	const char *name; /* test name and file name of the text */
	const char *file; /* tests/corpus/FILE.tc, or NULL: src */
	const char *src;
	const char *entry;
	int64_t shapes[MAX_T][TC_MAX_RANK]; /* of the inputs, in order */
	range in[MAX_T];          /* values of the inputs */
	double rtol;              /* 0: bit for bit */
	int specials;             /* NaN, infinities, ... among float inputs */
	const char *sym;          /* the function's name in C, if not the def's */
	int contract;             /* the contract option: fma calls in the text,
				   * the interpreter's fused rounding */
} cgc_case;

static void *xcalloc(int64_t n, int size)
{
	void *p = calloc((size_t)(n > 0 ? n : 1), (size_t)size);
	assert_non_null(p);
	return p;
}

static void run_case(const cgc_case *c)
{
	loaded l;
	const tc_ir_func *f;
	tc_tensor t[MAX_T], ref[MAX_T]; /* all tensors (for C); the interpreter's outputs */
	void *ptrs[MAX_T];
	int64_t params[MAX_T];
	uint64_t rng = 0x9E3779B97F4A7C15ULL;
	const char *s;
	char *text;
	void *handle;
	void (*fn)(void *const *);
	int i, k;

	for (s = c->name; *s; s++)
		rng = (rng ^ (unsigned char)*s) * 1099511628211ULL;
	load(&l, c->file, c->src, c->entry);
	f = l.f;
	assert_true(f->ntensors <= MAX_T && f->nparams <= MAX_T);
	memset(t, 0, sizeof(t));
	memset(ref, 0, sizeof(ref));
	for (i = 0; i < f->ninputs; i++) {
		t[i].dtype = f->tensors[i].dtype;
		t[i].ndim = f->tensors[i].ndim;
		for (k = 0; k < t[i].ndim; k++)
			t[i].shape[k] = c->shapes[i][k];
		t[i].data = xcalloc(numel(&t[i]), tc_dtype_size(t[i].dtype));
		fill(&t[i], c->in[i], c->specials, &rng);
	}
	if (tc_ir_bind(f, t, f->ninputs, params, &l.d) < 0)
		fail_msg("%s: cannot bind the shapes: %s", c->name, render(&l.d));
	for (i = f->ninputs; i < f->ntensors; i++) {
		int64_t n;
		t[i].dtype = f->tensors[i].dtype;
		t[i].ndim = f->tensors[i].ndim;
		assert_int_equal(tc_ir_shape(f, i, params, t[i].shape, &l.d), TC_OK);
		n = numel(&t[i]);
		t[i].data = xcalloc(n, tc_dtype_size(t[i].dtype));
		if (i < f->ninputs + f->noutputs) { /* the same start for reductions without ! */
			range any = {0, 0, 0};
			fill(&t[i], any, 0, &rng);
			ref[i] = t[i];
			ref[i].data = xcalloc(n, tc_dtype_size(t[i].dtype));
			memcpy(ref[i].data, t[i].data,
				(size_t)n * (size_t)tc_dtype_size(t[i].dtype));
		}
	}
	for (i = 0; i < f->ntensors; i++)
		ptrs[i] = t[i].data;

	text = c_text(f, params, c->contract);
	*(void **)&fn = compile(c->name, text, c->sym ? c->sym : f->name, &handle);
	if (c->contract && !strstr(text, "fmaf("))
		fail_msg("%s: contract=on, and the text has no fmaf call", c->name);
	if (tc_interp_run(f, params, t, ref + f->ninputs, c->contract, &l.d) < 0)
		fail_msg("%s: the interpreter fails: %s", c->name, render(&l.d));
	fn(ptrs);
	for (i = f->ninputs; i < f->ninputs + f->noutputs; i++)
		compare(c->name, f->tensors[i].name, t[i].dtype, ref[i].data, t[i].data,
			numel(&t[i]), tc_dtype_is_float(t[i].dtype) ? c->rtol : 0);

	dlclose(handle);
	tc_free(text);
	for (i = 0; i < f->ntensors; i++) {
		free(t[i].data);
		free(ref[i].data);
	}
	loaded_free(&l);
}

static void test_case(void **state)
{
	run_case(*state);
}

#define R(lo, hi) {lo, hi, 0}
#define NONZERO(lo, hi) {lo, hi, 1}
#define FULL_I8 R(-128, 127)
#define FULL_U8 R(0, 255)

/* One builtin per output, in every float type: float64 and float16 call the
 * same double functions as the interpreter (bit for bit), float32 libm's
 * float versions where C99 has them. */
#define BUILTINS_DEF(T) \
	"def bi(" T "(N) A, " T "(N) B) -> (Oexp, Olog1p, Osin, Oatan2, Otanh, Opow,\n" \
	"    Ocbrt, Orsqrt, Oexp10, Orcbrt, Ofmod, Omod, Ohypot, Orhypot, Oldexp, Oj0,\n" \
	"    Oy1, Ojn, Oerf, Olgamma, Omin, Ofmax, Onext, Ofma, Oround, Orint, Oilogb,\n" \
	"    Otoint, Otouint, Oneg, Osel) {\n" \
	"  Oexp(i) = exp(A(i))\n" \
	"  Olog1p(i) = log1p(A(i))\n" \
	"  Osin(i) = sin(A(i))\n" \
	"  Oatan2(i) = atan2(A(i), B(i))\n" \
	"  Otanh(i) = tanh(A(i))\n" \
	"  Opow(i) = pow(A(i), B(i))\n" \
	"  Ocbrt(i) = cbrt(A(i))\n" \
	"  Orsqrt(i) = rsqrt(A(i))\n" \
	"  Oexp10(i) = exp10(A(i))\n" \
	"  Orcbrt(i) = rcbrt(B(i))\n" \
	"  Ofmod(i) = fmod(A(i), B(i))\n" \
	"  Omod(i) = A(i) % B(i)\n" \
	"  Ohypot(i) = hypot(A(i), B(i))\n" \
	"  Orhypot(i) = rhypot(A(i), B(i))\n" \
	"  Oldexp(i) = ldexp(A(i), 3)\n" \
	"  Oj0(i) = j0(A(i))\n" \
	"  Oy1(i) = y1(B(i))\n" \
	"  Ojn(i) = jn(2, A(i))\n" \
	"  Oerf(i) = erf(A(i))\n" \
	"  Olgamma(i) = lgamma(A(i))\n" \
	"  Omin(i) = min(A(i), B(i))\n" \
	"  Ofmax(i) = fmax(A(i), B(i))\n" \
	"  Onext(i) = nextafter(A(i), B(i))\n" \
	"  Ofma(i) = fma(A(i), B(i), A(i))\n" \
	"  Oround(i) = round(A(i) * 3)\n" \
	"  Orint(i) = rint(B(i) * 3)\n" \
	"  Oilogb(i) = ilogb(A(i))\n" \
	"  Otoint(i) = int32(A(i) * 100)\n" \
	"  Otouint(i) = uint8(B(i) * 50)\n" \
	"  Oneg(i) = -(A(i) - B(i))\n" \
	"  Osel(i) = A(i) < B(i) && !(A(i) == 0) ? A(i) : -B(i)\n" \
	"}\n"

static const cgc_case cases[] = {
	/* reductions and temporaries */
	{.name = "matmul", .file = "matmul", .entry = "matmul",
		.shapes = {{13, 7}, {7, 5}}, .rtol = 1e-5},
	{.name = "matmul_fma", .file = "matmul", .entry = "matmul",
		.shapes = {{13, 7}, {7, 5}}, .contract = 1}, /* in k order: bit for bit */
	{.name = "fc_relu_fma", .file = "mlp", .entry = "fc_relu", .shapes = {{3, 4}, {5, 4}, {5}},
		.contract = 1},
	{.name = "fma_rule", .entry = "k", .contract = 1,
		.src = "def k(float(N) X, double(N) Y, float(N) Z) -> (P, Q, R) {\n"
		       "  P(i) = X(i) * Z(i) - X(i)\n"
		       "  Q(i) = Y(i) - Y(i) * Y(i)\n"
		       "  R(i) = X(i) * X(i) + Z(i) * X(i)\n}\n",
		.shapes = {{17}, {17}, {17}}},
	{.name = "matmul_nt", .file = "matmul", .entry = "matmul_nt",
		.shapes = {{6, 9}, {4, 9}}, .rtol = 1e-5},
	{.name = "batch_matmul", .file = "matmul", .entry = "batch_matmul",
		.shapes = {{2, 3, 4}, {2, 4, 5}}, .rtol = 1e-5},
	{.name = "conv2d", .file = "conv2d", .entry = "conv2d",
		.shapes = {{2, 3, 7, 6}, {4, 3, 3, 2}, {4}}, .rtol = 1e-5},
	{.name = "softmax", .file = "softmax", .entry = "softmax", .shapes = {{5, 9}},
		.in = {R(-4, 4)}, .rtol = 1e-5},
	{.name = "softmax_outputs", .file = "softmax", .entry = "softmax_outputs",
		.shapes = {{3, 8}},
		.in = {R(-4, 4)}, .rtol = 1e-5},
	{.name = "layernorm", .file = "layernorm", .entry = "layernorm",
		.shapes = {{4, 6}, {6}, {6}}, .rtol = 1e-5},
	{.name = "maxpool2x2", .file = "pooling", .entry = "maxpool2x2", .shapes = {{2, 2, 5, 7}}},
	{.name = "avgpool2x2", .file = "pooling", .entry = "avgpool2x2",
		.shapes = {{1, 2, 6, 4}}, .rtol = 1e-5},
	{.name = "row_prod", .file = "reductions", .entry = "row_prod", .shapes = {{4, 5}},
		.in = {R(0.5, 1.5)}, .rtol = 1e-5},
	{.name = "max_into", .file = "reductions", .entry = "max_into", .shapes = {{4, 5}, {4}}},
	{.name = "min_of_sums", .file = "reductions", .entry = "min_of_sums",
		.shapes = {{4, 5}, {4, 5}}, .rtol = 1e-5},
	{.name = "sum_all", .file = "reductions", .entry = "sum_all",
		.shapes = {{4, 5}}, .rtol = 1e-5},
	{.name = "sum_except_first", .file = "reductions", .entry = "sum_except_first",
		.shapes = {{4, 5}}, .rtol = 1e-5},
	{.name = "int8_sum", .file = "reductions", .entry = "int8_sum", .shapes = {{4, 9}},
		.in = {FULL_I8}},
	{.name = "f16_row_sum", .file = "reductions", .entry = "f16_row_sum", .shapes = {{4, 9}},
		.in = {R(-100, 100)}},
	{.name = "f64_matmul", .file = "reductions", .entry = "f64_matmul",
		.shapes = {{3, 4}, {4, 5}}, .rtol = 1e-12},
	{.name = "conv2d_stride2", .file = "conv_strided", .entry = "conv2d_stride2",
		.shapes = {{2, 2, 7, 8}, {3, 2, 3, 2}}, .rtol = 1e-5},
	{.name = "group_conv", .file = "group_conv", .entry = "group_conv",
		.shapes = {{1, 2, 2, 5, 5}, {2, 3, 2, 3, 3}, {2, 3}}, .rtol = 1e-5},
	{.name = "kronecker3", .file = "kronecker", .entry = "kronecker3",
		.shapes = {{2, 3}, {3, 2}, {2, 2}, {2, 3, 2, 2}}, .rtol = 1e-5},
	{.name = "kronecker3_outputs", .file = "kronecker", .entry = "kronecker3_outputs",
		.shapes = {{2, 3}, {3, 2}, {2, 2}, {2, 3, 2, 2}}, .rtol = 1e-5},
	{.name = "fc_relu", .file = "mlp", .entry = "fc_relu", .shapes = {{3, 4}, {5, 4}, {5}},
		.rtol = 1e-5},
	{.name = "mlp2", .file = "mlp", .entry = "mlp2",
		.shapes = {{2, 3}, {4, 3}, {4}, {3, 4}, {3}}, .rtol = 1e-5},
	{.name = "let_sumsq", .file = "let_exists", .entry = "let_sumsq", .shapes = {{4, 5}},
		.rtol = 1e-5},
	{.name = "row_mean", .file = "shapes", .entry = "row_mean", .shapes = {{3, 4}},
		.rtol = 1e-5},
	/* arg-reductions */
	{.name = "argmin", .file = "argmin", .entry = "argmin", .shapes = {{6, 5}}},
	{.name = "argmax_int", .file = "argmin", .entry = "argmax_int", .shapes = {{6, 5}},
		.in = {R(-3, 3)}},
	{.name = "minmax_int8", .file = "argmin", .entry = "minmax_int8", .shapes = {{6, 1}},
		.in = {FULL_I8}},
	{.name = "minmax_int8_rows", .file = "argmin", .entry = "minmax_int8", .shapes = {{6, 4}},
		.in = {FULL_I8}},
	/* gathers */
	{.name = "lookup_sum_i32", .file = "embedding", .entry = "lookup_sum_i32",
		.shapes = {{10, 6}, {4, 3}},
		.in = {R(-1, 1), R(0, 9)}, .rtol = 1e-5},
	{.name = "lookup_sum_i64", .file = "embedding", .entry = "lookup_sum_i64",
		.shapes = {{10, 6}, {4, 3}},
		.in = {R(-1, 1), R(0, 9)}, .rtol = 1e-5},
	{.name = "gather_rows_u8", .file = "embedding", .entry = "gather_rows_u8",
		.shapes = {{10, 6}, {5}},
		.in = {R(-1, 1), R(0, 9)}},
	{.name = "gather2d", .file = "embedding", .entry = "gather2d", .shapes = {{5, 7}, {4}, {4}},
		.in = {R(-1, 1), R(0, 4), R(0, 6)}},
	/* subscripts */
	{.name = "reverse", .file = "indexing", .entry = "reverse", .shapes = {{9}}},
	{.name = "tile2", .file = "indexing", .entry = "tile2", .shapes = {{5}}},
	{.name = "upsample2", .file = "indexing", .entry = "upsample2", .shapes = {{5}}},
	{.name = "pad1", .file = "indexing", .entry = "pad1", .shapes = {{5}}},
	{.name = "concat_rows", .file = "concat", .entry = "concat_rows",
		.shapes = {{3, 4}, {2, 4}}},
	{.name = "concat_cols", .file = "concat", .entry = "concat_cols",
		.shapes = {{3, 2}, {3, 3}}},
	{.name = "shift_right", .file = "let_exists", .entry = "shift_right", .shapes = {{6}}},
	{.name = "outer3", .file = "shapes", .entry = "outer3", .shapes = {{4}}},
	{.name = "iota_scaled", .file = "shapes", .entry = "iota_scaled", .shapes = {{3, 4}}},
	/* floor division of a negative subscript: (0 - 1) / 2 is -1 */
	{.name = "floor_subscript",
		.src = "def halfshift(float(N) A) -> (O) {\n"
		       "  O(i) = A((i - 1) / 2 + 1) where i in 0:2*N-1\n"
		       "}\n",
		.entry = "halfshift", .shapes = {{6}}},
	{.name = "rgb_to_gray", .file = "indexing", .entry = "rgb_to_gray", .shapes = {{3, 4, 5}}},
	{.name = "trace", .file = "indexing", .entry = "trace", .shapes = {{5, 5}}, .rtol = 1e-5},
	/* types: int8, uint8, wrap-around, floor division, saturation, float16, bool */
	{.name = "i8_times3", .file = "casts", .entry = "i8_times3", .shapes = {{17}},
		.in = {FULL_I8}},
	{.name = "u8_add", .file = "casts", .entry = "u8_add", .shapes = {{17}, {17}},
		.in = {FULL_U8, FULL_U8}},
	{.name = "mixed_ints", .file = "casts", .entry = "mixed_ints", .shapes = {{17}, {17}, {17}},
		.in = {FULL_I8, R(-2147483648.0, 2147483647.0), R(-4e18, 4e18)}},
	{.name = "u8_plus_i8", .file = "casts", .entry = "u8_plus_i8", .shapes = {{17}, {17}},
		.in = {FULL_U8, FULL_I8}},
	{.name = "int_divmod", .file = "casts", .entry = "int_divmod", .shapes = {{17}, {17}},
		.in = {R(-1000, 1000), NONZERO(-9, 9)}},
	{.name = "to_int32", .file = "casts", .entry = "to_int32", .shapes = {{17}},
		.in = {R(-1e10, 1e10)}, .specials = 1},
	{.name = "to_int8", .file = "casts", .entry = "to_int8", .shapes = {{17}},
		.in = {R(-100000, 100000)}},
	{.name = "u8_to_float", .file = "casts", .entry = "u8_to_float", .shapes = {{17}},
		.in = {FULL_U8}},
	{.name = "f64_axpy", .file = "casts", .entry = "f64_axpy",
		.shapes = {{17}, {17}, {17}}, .specials = 1},
	{.name = "f64_to_f32", .file = "casts", .entry = "f64_to_f32", .shapes = {{17}},
		.in = {R(-1e39, 1e39)}, .specials = 1},
	{.name = "f16_fma", .file = "casts", .entry = "f16_fma", .shapes = {{17}, {17}},
		.in = {R(-100, 100), R(-100, 100)}, .specials = 1},
	{.name = "f16_to_f32", .file = "casts", .entry = "f16_to_f32", .shapes = {{17}},
		.in = {R(-100, 100)}, .specials = 1},
	{.name = "f32_to_f16", .file = "casts", .entry = "f32_to_f16", .shapes = {{17}},
		.in = {R(-30000, 30000)}, .specials = 1},
	{.name = "bf16_fma", .file = "casts", .entry = "bf16_fma", .shapes = {{17}, {17}},
		.in = {R(-1e30, 1e30), R(-100, 100)}, .specials = 1},
	{.name = "bf16_to_f32", .file = "casts", .entry = "bf16_to_f32", .shapes = {{17}},
		.in = {R(-100, 100)}, .specials = 1},
	{.name = "f32_to_bf16", .file = "casts", .entry = "f32_to_bf16", .shapes = {{17}},
		.in = {R(-3e38, 3e38)}, .specials = 1},
	{.name = "bf16_row_sum", .file = "reductions", .entry = "bf16_row_sum",
		.shapes = {{5, 37}}, .specials = 1},
	/* bfloat16 casts from every kind of source, one rounding each, and
	 * min=/max=, nextafter and a builtin in bfloat16 */
	{.name = "bf16_casts",
		.src = "def bc(int64(N) I, uint64(N) U, int32(N) J, float64(N) D, float16(N) H,\n"
		       "       bfloat16(N) B)\n"
		"    -> (O1, O2, O3, O4, O5, O6, O7, O8, O9, O10) {\n"
		"  O1(i) = bfloat16(I(i))\n"
		"  O2(i) = bfloat16(U(i))\n"
		"  O3(i) = bfloat16(J(i))\n"
		"  O4(i) = bfloat16(D(i))\n"
		"  O5(i) = bfloat16(H(i))\n"
		"  O6(i) = float16(B(i)) + float16(1)\n"
		"  O7(i) = int8(B(i))\n"
		"  O8(i) max=! B(i) * 2 where i in 0:N\n"
		"  O9(i) = nextafter(B(i), D(i) > 0 ? B(i) + 1 : B(i) - 1)\n"
		"  O10(i) = exp(B(i)) + 1.1\n"
		"}\n",
		.entry = "bc", .shapes = {{17}, {17}, {17}, {17}, {17}, {17}},
		.in = {R(-4e18, 4e18), R(0, 9e18), R(-2147483648.0, 2147483647.0), R(-1e39, 1e39),
			R(-60000, 60000), R(-200, 200)},
		.specials = 1},
	{.name = "greater", .file = "casts", .entry = "greater",
		.shapes = {{17}, {17}}, .specials = 1},
	{.name = "bool_logic", .file = "casts", .entry = "bool_logic", .shapes = {{17}, {17}}},
	{.name = "bool_select", .file = "casts", .entry = "bool_select",
		.shapes = {{17}, {17}, {17}}},
	{.name = "bool_to_int", .file = "casts", .entry = "bool_to_int", .shapes = {{17}}},
	/* builtins */
	{.name = "builtins_pointwise", .file = "pointwise", .entry = "builtins",
		.shapes = {{2, 3, 4}, {2, 3, 4}}, .rtol = 1e-6},
	{.name = "sigmoid", .file = "pointwise", .entry = "sigmoid", .shapes = {{9}},
		.in = {R(-5, 5)}, .rtol = 1e-6},
	{.name = "scale", .file = "pointwise", .entry = "scale", .shapes = {{9}, {0}}},
	{.name = "builtins_f64", .src = BUILTINS_DEF("float64"),
		.entry = "bi", .shapes = {{31}, {31}},
		.in = {R(-3, 3), R(-3, 3)}, .specials = 1},
	{.name = "builtins_f16", .src = BUILTINS_DEF("float16"),
		.entry = "bi", .shapes = {{31}, {31}},
		.in = {R(-3, 3), R(-3, 3)}, .specials = 1},
	{.name = "builtins_f32", .src = BUILTINS_DEF("float32"),
		.entry = "bi", .shapes = {{31}, {31}},
		.in = {R(-3, 3), R(-3, 3)}, .rtol = 1e-6, .specials = 1},
	/* integer types through a def of our own: uint16/uint32/uint64 wrap and
	 * divide, int16 negation, saturation to unsigned, bool min= */
	{.name = "unsigned_ops", 
		.src = "def u(uint16(N) A, uint32(N) B, uint64(N) C, int16(N) D, float(N) F,\n"
		       "      bool(N) P)\n"
		"    -> (O1, O2, O3, O4, O5, O6, O7, O8) {\n"
		"  O1(i) = A(i) * A(i) - 7\n"
		"  O2(i) = B(i) * B(i) / (B(i) % 13 + 1)\n"
		"  O3(i) = C(i) * C(i) - C(i) % 1000\n"
		"  O4(i) = -D(i) * D(i)\n"
		"  O5(i) = uint16(F(i)) + uint32(F(i))\n"
		"  O6(i) min=! P(i) where i in 0:N\n"
		"  O7(i) = max(A(i), uint16(D(i)))\n"
		"  O8(i) = min(D(i), int16(A(i)))\n"
		"}\n",
		.entry = "u", .shapes = {{17}, {17}, {17}, {17}, {17}, {17}},
		.in = {R(0, 65535), R(0, 4294967295.0), R(0, 9e18), R(-32768, 32767), R(-1e6, 1e6)},
		.specials = 1},
};

/* ---- the parametric text and its golden file ---- */

static void test_parametric_matmul_matches_golden(void **state)
{
	loaded l;
	char *text, *want;
	char path[512];
	(void)state;
	load(&l, "matmul", NULL, "matmul");
	text = c_text(l.f, NULL, 0);
	snprintf(path, sizeof(path), "%s/matmul.c", GOLDEN_DIR);
	if (env_flag("TC_UPDATE_GOLDEN")) {
		spit(path, text);
	} else {
		want = tu_read_file(path);
		if (!want)
			fail_msg("%s is missing: run TC_UPDATE_GOLDEN=1 test_cgc to create it",
				path);
		if (strcmp(want, text)) {
			printf("expected (%s):\n%s\nactual:\n%s\n", path, want, text);
			free(want);
			fail_msg("the C text of the parametric matmul differs from %s; if the new "
				 "text is right, rerun with TC_UPDATE_GOLDEN=1", path);
		}
		free(want);
	}
	tc_free(text);
	loaded_free(&l);
}

/* The parametric function takes the sizes after the tensors, in the order
 * of the def's sizes, and computes what the interpreter does. */
static void test_parametric_matmul_runs_with_sizes_as_arguments(void **state)
{
	loaded l;
	const tc_ir_func *f;
	tc_tensor t[3], ref;
	void *ptrs[3], *handle;
	void (*fn)(void *const *, int64_t, int64_t, int64_t);
	int64_t params[3], shapes[2][2] = {{9, 4}, {4, 11}};
	uint64_t rng = 42;
	char *text;
	int i;
	(void)state;

	load(&l, "matmul", NULL, "matmul");
	f = l.f;
	assert_int_equal(f->nparams, 3);
	assert_string_equal(f->params[0].name, "M");
	assert_string_equal(f->params[1].name, "K");
	assert_string_equal(f->params[2].name, "N");
	text = c_text(f, NULL, 0);
	assert_non_null(strstr(text, "parametric in M, K, N"));
	assert_non_null(strstr(text,
		"void matmul(void *const *tensors, int64_t M, int64_t K, int64_t N)"));
	*(void **)&fn = compile("matmul_parametric", text, "matmul", &handle);
	memset(t, 0, sizeof(t));
	for (i = 0; i < 2; i++) {
		range any = {0, 0, 0};
		t[i].dtype = TC_T_F32;
		t[i].ndim = 2;
		t[i].shape[0] = shapes[i][0];
		t[i].shape[1] = shapes[i][1];
		t[i].data = xcalloc(numel(&t[i]), 4);
		fill(&t[i], any, 0, &rng);
	}
	assert_int_equal(tc_ir_bind(f, t, 2, params, &l.d), TC_OK);
	t[2].dtype = TC_T_F32;
	t[2].ndim = 2;
	assert_int_equal(tc_ir_shape(f, 2, params, t[2].shape, &l.d), TC_OK);
	t[2].data = xcalloc(numel(&t[2]), 4);
	ref = t[2];
	ref.data = xcalloc(numel(&t[2]), 4);
	assert_int_equal(tc_interp_run(f, params, t, &ref, 0, &l.d), TC_OK);
	for (i = 0; i < 3; i++)
		ptrs[i] = t[i].data;
	fn(ptrs, params[0], params[1], params[2]);
	compare("matmul_parametric", "C", TC_T_F32, ref.data, t[2].data, numel(&t[2]), 1e-5);
	dlclose(handle);
	for (i = 0; i < 3; i++)
		free(t[i].data);
	free(ref.data);
	tc_free(text);
	loaded_free(&l);
}

/* ---- the shape of the text ---- */

static void test_specialised_text_declares_used_sizes_and_typed_tensors(void **state)
{
	loaded l;
	int64_t params[2] = {5, 7}; /* N, D */
	char *text;
	(void)state;
	load(&l, "softmax", NULL, "softmax");
	text = c_text(l.f, params, 0);
	assert_non_null(strstr(text, "/* tcomp: def softmax specialised to sizes N=5, D=7\n"));
	assert_non_null(strstr(text, "void softmax(void *const *tensors)\n{\n"));
	assert_non_null(strstr(text, "  const float *I = (const float *)tensors[0];\n"));
	assert_non_null(strstr(text, "  float *O = (float *)tensors[1];\n"));
	assert_non_null(strstr(text, "  float *mx = (float *)tensors[2];\n")); /* a temporary */
	assert_non_null(strstr(text, "  float *sm = (float *)tensors[3];\n"));
	assert_non_null(strstr(text, "  const int64_t D = 7;\n")); /* row length */
	assert_null(strstr(text, "const int64_t N")); /* bounds are constants */
	assert_non_null(strstr(text, "for (int64_t c0 = 0;")); /* 64-bit iterators */
	assert_non_null(strstr(text, "// tc_kernel")); /* the mark */
	assert_non_null(strstr(text, "mx[c0] = -FLT_MAX;")); /* max=! starts finite */
	assert_non_null(strstr(text, "expf(")); /* float32 builtins */
	assert_non_null(strstr(text, "#include <float.h>"));
	assert_null(strstr(text, "tc_d2h")); /* no unused helpers */
	tc_free(text);
	loaded_free(&l);
}

/* Tensors and the def named like C library names, isl's iterators, the
 * text's helpers or the tensors parameter get a trailing '_'; isl names its
 * iterators around a size named c0. */
static const char clash_src[] =
	"def memcpy(float(c0, N) c1, float(c0) tc_h, float(N) tensors) -> (int8_t, UINT8_MAX) {\n"
	"  int8_t(i) +=! c1(i, j) * tc_h(i) + tensors(j)\n"
	"  UINT8_MAX(i) = int8_t(i) + c0\n"
	"}\n";

static void test_names_that_clash_with_c_are_renamed(void **state)
{
	static const cgc_case c = {.name = "memcpy", .src = clash_src, .entry = "memcpy",
		.shapes = {{3, 4}, {3}, {4}}, .rtol = 1e-5, .sym = "memcpy_"};
	loaded l;
	int64_t params[2] = {3, 4};
	char *text;
	(void)state;
	load(&l, NULL, clash_src, "memcpy");
	text = c_text(l.f, params, 0);
	assert_non_null(strstr(text, "void memcpy_(void *const *tensors)"));
	assert_non_null(strstr(text, "const float *c1_ = (const float *)tensors[0];"));
	assert_non_null(strstr(text, "const float *tc_h_ = (const float *)tensors[1];"));
	assert_non_null(strstr(text, "const float *tensors_ = (const float *)tensors[2];"));
	assert_non_null(strstr(text, "float *int8_t_ = (float *)tensors[3];"));
	assert_non_null(strstr(text, "float *UINT8_MAX_ = (float *)tensors[4];"));
	assert_non_null(strstr(text, "const int64_t c0 = 3;"));
	assert_non_null(strstr(text, "for (int64_t c0_0 = 0;"));
	tc_free(text);
	loaded_free(&l);
	run_case(&c); /* and it computes what the interpreter does */
}

static void test_size_named_like_a_c_keyword_warns(void **state)
{
	loaded l;
	isl_ctx *ctx = tc_poly_ctx_new();
	tc_diags d;
	tc_poly *p;
	char *text, *msg;
	(void)state;
	load(&l, NULL, "def k(float(int) A) -> (O) {\n  O(i) = A(i) * int\n}\n", "k");
	tc_diags_init(&d, NULL);
	p = tc_poly_build(ctx, l.f, NULL, host_target(), &d);
	assert_non_null(p);
	assert_int_equal(tc_poly_schedule(p, tc_poly_plain_passes, tc_poly_nplain_passes, NULL, &d),
		TC_OK);
	assert_int_equal(tc_poly_ast(p, &d), TC_OK);
	text = tc_cg_c_text(p, 0, &d);
	assert_non_null(text); /* the text is still there to look at */
	assert_int_equal(d.nerrors, 0);
	assert_int_equal(d.nwarnings, 1);
	msg = render(&d);
	assert_non_null(strstr(msg, "the size 'int' of 'k' is a name C reserves"));
	tc_free(msg);
	tc_free(text);
	tc_diags_clear(&d);
	tc_poly_free(p);
	isl_ctx_free(ctx);
	loaded_free(&l);
}

/* CUDA math functions without a C counterpart are declared extern and
 * called in double; the text compiles (linking needs definitions). */
static void test_cuda_only_builtins_are_declared_extern(void **state)
{
	loaded l;
	int64_t params[1] = {4};
	char *text;
	(void)state;
	load(&l, NULL,
		"def k(float(N) A, float16(N) H) -> (O, P) {\n"
		"  O(i) = sinpi(A(i)) + normcdfinv(A(i)) + rnorm3d(A(i), A(i), A(i))\n"
		"  P(i) = erfinv(H(i))\n"
		"}\n",
		"k");
	text = c_text(l.f, params, 0);
	assert_non_null(strstr(text, "extern double tc_cuda_sinpi(double);\n"));
	assert_non_null(strstr(text, "extern double tc_cuda_normcdfinv(double);\n"));
	assert_non_null(strstr(text, "extern double tc_cuda_norm3d(double, double, double);\n"));
	assert_non_null(strstr(text, "extern double tc_cuda_erfinv(double);\n"));
	assert_non_null(strstr(text, "(float)tc_cuda_sinpi("));
	assert_non_null(strstr(text, "(1.0 / tc_cuda_norm3d("));
	assert_non_null(strstr(text, "tc_d2h(tc_cuda_erfinv(tc_h2d(H[c0])))"));
	{
		char c_path[512], cmd[1200];
		const char *cc = getenv("CC");
		snprintf(c_path, sizeof(c_path), "%s/cuda_only.c", tmpdir);
		spit(c_path, text);
		snprintf(cmd, sizeof(cmd),
			"%s -std=c11 -O1 -Wall -Wextra -Werror -c -o '%s.o' '%s' >&2",
			cc && *cc ? cc : "cc", c_path, c_path);
		assert_int_equal(system(cmd), 0);
		if (!env_flag("TC_CGC_KEEP")) {
			unlink(c_path);
			strcat(c_path, ".o");
			unlink(c_path);
		}
	}
	tc_free(text);
	loaded_free(&l);
}

/* ---- allocation failures ---- */

typedef struct alloc_fault {
	long countdown; /* allocations left before the failing one */
	int failed;
} alloc_fault;

static void *failing_alloc(void *ud, void *ptr, size_t size)
{
	alloc_fault *a = ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	if (a->countdown-- == 0) {
		a->failed = 1;
		return NULL;
	}
	return realloc(ptr, size);
}

/* Failing the n-th allocation of tc_cg_c_text, for every n until it
 * succeeds: NULL with an error (or a diags oom), never a crash or a leak. */
static void test_allocation_failures_fail_cleanly(void **state)
{
	loaded l;
	isl_ctx *ctx = tc_poly_ctx_new();
	tc_diags d;
	tc_poly *p;
	int64_t params[2] = {3, 5};
	long n;
	(void)state;
	load(&l, "argmin", NULL, "argmin");
	tc_diags_init(&d, NULL);
	p = tc_poly_build(ctx, l.f, params, host_target(), &d);
	assert_non_null(p);
	assert_int_equal(tc_poly_schedule(p, tc_poly_plain_passes, tc_poly_nplain_passes, NULL, &d),
		TC_OK);
	assert_int_equal(tc_poly_ast(p, &d), TC_OK);
	for (n = 0;; n++) {
		alloc_fault a = {n, 0};
		char *text;
		tc_diags dd;
		tc_diags_init(&dd, NULL);
		tc_set_alloc(failing_alloc, &a);
		text = tc_cg_c_text(p, 0, &dd);
		tc_set_alloc(NULL, NULL);
		if (!a.failed) {
			assert_non_null(text);
			tc_free(text);
			tc_diags_clear(&dd);
			break;
		}
		assert_null(text);
		assert_true(dd.nerrors > 0 || dd.oom);
		assert_string_equal(isl_options_get_ast_iterator_type(ctx), "int");
		tc_diags_clear(&dd);
	}
	assert_true(n > 10);
	tc_diags_clear(&d);
	tc_poly_free(p);
	isl_ctx_free(ctx);
	loaded_free(&l);
}

/* ---- driver ---- */

static int make_tmpdir(void **state)
{
	const char *base = getenv("TMPDIR");
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "%s/tcomp-cgc-XXXXXX", base && *base ? base : "/tmp");
	return mkdtemp(tmpdir) ? 0 : -1;
}

/* The directory and what failed tests left in it. */
static int remove_tmpdir(void **state)
{
	DIR *dir;
	struct dirent *e;
	char path[600];
	(void)state;
	if (env_flag("TC_CGC_KEEP")) {
		printf("C texts kept in %s\n", tmpdir);
		return 0;
	}
	if ((dir = opendir(tmpdir))) {
		while ((e = readdir(dir)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
				unlink(path);
			}
		closedir(dir);
	}
	rmdir(tmpdir);
	return 0;
}

int main(void)
{
	static const struct CMUnitTest fixed[] = {
		cmocka_unit_test(test_parametric_matmul_matches_golden),
		cmocka_unit_test(test_parametric_matmul_runs_with_sizes_as_arguments),
		cmocka_unit_test(test_specialised_text_declares_used_sizes_and_typed_tensors),
		cmocka_unit_test(test_names_that_clash_with_c_are_renamed),
		cmocka_unit_test(test_size_named_like_a_c_keyword_warns),
		cmocka_unit_test(test_cuda_only_builtins_are_declared_extern),
		cmocka_unit_test(test_allocation_failures_fail_cleanly),
	};
	enum {
		NFIXED = sizeof(fixed) / sizeof(fixed[0]),
		NCASES = sizeof(cases) / sizeof(cases[0]),
	};
	struct CMUnitTest tests[NFIXED + NCASES];
	char names[NCASES][80];
	int i;

	memcpy(tests, fixed, sizeof(fixed));
	for (i = 0; i < NCASES; i++) {
		snprintf(names[i], sizeof(names[i]), "c_text_matches_interpreter_%s",
			cases[i].name);
		memset(&tests[NFIXED + i], 0, sizeof(tests[0]));
		tests[NFIXED + i].name = names[i];
		tests[NFIXED + i].test_func = test_case;
		tests[NFIXED + i].initial_state = (void *)&cases[i];
	}
	return _cmocka_run_group_tests("cgc", tests, NFIXED + NCASES, make_tmpdir, remove_tmpdir);
}
