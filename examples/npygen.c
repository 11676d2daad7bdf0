/* npygen: write a .npy file of uniform random values, for tests and demos.
 *
 *   npygen OUT.npy DTYPE SHAPE [--seed N] [--range LO:HI]
 *
 * DTYPE is a tcomp type name (float32, int8, bool, float16, ...), SHAPE is
 * 4x5 (any rank up to 8) or "scalar" for rank 0.  Values are uniform in
 * [LO, HI); the default range is [-1, 1) for floats, [-10, 10) for signed and
 * [0, 10) for unsigned integers (clipped to the type's range), and 0 or 1 for
 * bool.  Integer types and bool take integer bounds (bool's are clipped to
 * 0..1).  The generator is splitmix64 seeded with N (default 1), so a seed
 * always gives the same file.  A non-empty array is never all zeros (a
 * kernel test on zeros proves little): if it would be, the first element is
 * drawn again until it is not, and a range holding only zero is an error. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/half.h"
#include "../tools/npy.h"

/* Draws tried before deciding a range holds no value of the type. */
#define NPYGEN_TRIES 10000

/* What to generate: the type and the bounds of the range, [flo, fhi) for
 * floats or [ilo, ihi] (inclusive, within the type) for integers and bool. */
typedef struct npygen_spec {
	tc_dtype dtype;
	double flo, fhi;
	int64_t ilo, ihi;
} npygen_spec;

static void npygen_usage(FILE *f)
{
	fprintf(f,
		"usage: npygen OUT.npy DTYPE SHAPE [--seed N] [--range LO:HI]\n"
		"  DTYPE  bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,\n"
		"         float16, float32 (float), float64 (double)\n"
		"  SHAPE  dimensions joined by 'x' (4x5, 7, 2x3x4), or 'scalar' for rank 0\n"
		"  --seed N       seed of the generator (default 1)\n"
		"  --range LO:HI  values uniform in [LO, HI) (default -1:1 for floats,\n"
		"                 -10:10 for signed, 0:10 for unsigned integers)\n");
}

/* Report a bad argument with the usage and give the exit status. */
static int npygen_bad_args(const char *fmt, const char *arg)
{
	fprintf(stderr, "npygen: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	npygen_usage(stderr);
	return 1;
}

/* splitmix64: a tiny generator with good statistics for test data. */
static uint64_t npygen_next(uint64_t *state)
{
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* SHAPE: "scalar" or dims joined by 'x'.  -1 if malformed. */
static int npygen_parse_shape(const char *s, int *ndim, int64_t *shape)
{
	*ndim = 0;
	if (!strcmp(s, "scalar"))
		return 0;
	for (;;) {
		int64_t d = 0;
		if (*s < '0' || *s > '9' || *ndim == TC_NPY_MAX_RANK)
			return -1;
		for (; *s >= '0' && *s <= '9'; s++) {
			if (d > (INT64_MAX - (*s - '0')) / 10)
				return -1;
			d = d * 10 + (*s - '0');
		}
		shape[(*ndim)++] = d;
		if (!*s)
			return 0;
		if (*s++ != 'x')
			return -1;
	}
}

/* A whole string as a finite double, or -1. */
static int npygen_parse_double(const char *s, double *v)
{
	char *end;
	errno = 0;
	*v = strtod(s, &end);
	return end == s || *end || errno || !isfinite(*v) ? -1 : 0;
}

/* A whole string as an int64, or -1. */
static int npygen_parse_int(const char *s, int64_t *v)
{
	char *end;
	long long x;
	errno = 0;
	x = strtoll(s, &end, 10);
	if (end == s || *end || errno)
		return -1;
	*v = x;
	return 0;
}

/* The smallest and largest values of an integer or bool type, as int64
 * (uint64 is limited to INT64_MAX, as the bounds are int64). */
static void npygen_int_limits(tc_dtype t, int64_t *lo, int64_t *hi)
{
	int bits = tc_dtype_bits(t);
	if (t == TC_T_BOOL) {
		*lo = 0;
		*hi = 1;
	} else if (tc_dtype_is_signed(t)) {
		*hi = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
		*lo = -*hi - 1;
	} else {
		*lo = 0;
		*hi = bits == 64 ? INT64_MAX : (INT64_C(1) << bits) - 1;
	}
}

/* Set up the range of spec from "LO:HI" (NULL: the default for the type).
 * Returns 0, or 1 after reporting a bad range. */
static int npygen_parse_range(const char *range, npygen_spec *spec)
{
	tc_dtype t = spec->dtype;
	char lo_s[128], *colon;
	int64_t tlo, thi, ilo, ihi;

	if (tc_dtype_is_float(t)) {
		spec->flo = -1;
		spec->fhi = 1;
	}
	ilo = t == TC_T_BOOL || tc_dtype_is_unsigned(t) ? 0 : -10;
	ihi = t == TC_T_BOOL ? 2 : 10;
	if (range) {
		colon = strchr(range, ':');
		if (!colon || (size_t)(colon - range) >= sizeof(lo_s))
			return npygen_bad_args("bad --range '%s': expected LO:HI", range);
		memcpy(lo_s, range, (size_t)(colon - range));
		lo_s[colon - range] = 0;
		if (tc_dtype_is_float(t)) {
			if (npygen_parse_double(lo_s, &spec->flo) < 0 ||
				npygen_parse_double(colon + 1, &spec->fhi) < 0)
				return npygen_bad_args("bad --range '%s': expected two finite "
						       "numbers LO:HI", range);
			if (!(spec->flo < spec->fhi))
				return npygen_bad_args("bad --range '%s': LO must be below HI",
					range);
			return 0;
		}
		if (npygen_parse_int(lo_s, &ilo) < 0 || npygen_parse_int(colon + 1, &ihi) < 0)
			return npygen_bad_args("bad --range '%s': integer types need integer "
					       "bounds LO:HI (64-bit)", range);
		if (ilo >= ihi)
			return npygen_bad_args("bad --range '%s': LO must be below HI", range);
	}
	if (tc_dtype_is_float(t))
		return 0;
	/* [ilo, ihi) clipped to the type: [max(ilo, min), min(ihi - 1, max)]. */
	npygen_int_limits(t, &tlo, &thi);
	spec->ilo = ilo > tlo ? ilo : tlo;
	spec->ihi = ihi - 1 < thi ? ihi - 1 : thi;
	if (spec->ilo > spec->ihi) {
		fprintf(stderr, "npygen: the range %s holds no %s values\n",
			range ? range : "(default)", tc_dtype_name(t));
		return 1;
	}
	return 0;
}

/* Draw one value of spec into dst (an element of spec->dtype) and say
 * whether it is zero.  Floats are drawn in double, rounded to the type and
 * drawn again when rounding left [flo, fhi).  -1 if NPYGEN_TRIES draws found
 * no value of the type in the range. */
static int npygen_draw(const npygen_spec *spec, uint64_t *state, void *dst, int *is_zero)
{
	tc_dtype t = spec->dtype;
	int i;

	if (!tc_dtype_is_float(t)) {
		uint64_t span = (uint64_t)spec->ihi - (uint64_t)spec->ilo + 1; /* >= 1 */
		uint64_t r = npygen_next(state);
		int64_t v = (int64_t)((uint64_t)spec->ilo + (span ? r % span : r));
		int8_t i8 = (int8_t)v;
		int16_t i16 = (int16_t)v;
		int32_t i32 = (int32_t)v;
		*is_zero = v == 0;
		switch (tc_dtype_size(t)) {
		case 1: memcpy(dst, &i8, 1); break;
		case 2: memcpy(dst, &i16, 2); break;
		case 4: memcpy(dst, &i32, 4); break;
		default: memcpy(dst, &v, 8); break;
		}
		return 0;
	}
	for (i = 0; i < NPYGEN_TRIES; i++) {
		double u = (double)(npygen_next(state) >> 11) * 0x1p-53; /* [0, 1) */
		double v = spec->fhi - spec->flo;
		double x;
		float f;
		uint16_t h;
		/* lo + u * (hi - lo), unless hi - lo overflows. */
		v = isfinite(v) ? spec->flo + u * v : spec->flo * (1 - u) + spec->fhi * u;
		switch (t) {
		case TC_T_F16:
			h = tc_half_from_double(v);
			x = tc_half_to_double(h);
			memcpy(dst, &h, 2);
			break;
		case TC_T_BF16:
			h = tc_bf16_from_double(v);
			x = tc_bf16_to_double(h);
			memcpy(dst, &h, 2);
			break;
		case TC_T_F32:
			f = (float)v;
			x = f;
			memcpy(dst, &f, 4);
			break;
		default:
			x = v;
			memcpy(dst, &x, 8);
			break;
		}
		if (x >= spec->flo && x < spec->fhi) {
			*is_zero = x == 0;
			return 0;
		}
	}
	return -1;
}

int main(int argc, char **argv)
{
	const char *pos[3], *range = NULL, *seed_s = NULL;
	int npos = 0, ndim, i, all_zero = 1, is_zero;
	int64_t shape[TC_NPY_MAX_RANK];
	uint64_t seed = 1, state, numel = 1, k;
	npygen_spec spec;
	size_t size;
	unsigned char *data;
	char *err = NULL;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			npygen_usage(stdout);
			return 0;
		} else if (!strcmp(a, "--seed") || !strcmp(a, "--range")) {
			if (i + 1 == argc)
				return npygen_bad_args("%s needs a value", a);
			if (!strcmp(a, "--seed"))
				seed_s = argv[++i];
			else
				range = argv[++i];
		} else if (!strncmp(a, "--seed=", 7)) {
			seed_s = a + 7;
		} else if (!strncmp(a, "--range=", 8)) {
			range = a + 8;
		} else if (a[0] == '-' && a[1]) {
			return npygen_bad_args("unknown option '%s'", a);
		} else if (npos == 3) {
			return npygen_bad_args("unexpected argument '%s'", a);
		} else {
			pos[npos++] = a;
		}
	}
	if (npos < 3)
		return npygen_bad_args("%s", "expected OUT.npy DTYPE SHAPE");
	memset(&spec, 0, sizeof(spec));
	spec.dtype = tc_dtype_from_name(pos[1], (int)strlen(pos[1]));
	if (spec.dtype == TC_T_NONE)
		return npygen_bad_args("unknown DTYPE '%s'", pos[1]);
	if (npygen_parse_shape(pos[2], &ndim, shape) < 0)
		return npygen_bad_args("bad SHAPE '%s': expected dimensions like 4x5 (at most "
				       "8), or 'scalar'", pos[2]);
	if (seed_s) {
		char *end;
		errno = 0;
		seed = strtoull(seed_s, &end, 10);
		if (end == seed_s || *end || errno || seed_s[0] == '-' || seed_s[0] == '+')
			return npygen_bad_args("bad --seed '%s': expected a non-negative integer",
				seed_s);
	}
	if (npygen_parse_range(range, &spec))
		return 1;

	size = (size_t)tc_dtype_size(spec.dtype);
	for (i = 0; i < ndim; i++) {
		if (shape[i] && numel > (uint64_t)INT64_MAX / size / (uint64_t)shape[i]) {
			fprintf(stderr, "npygen: shape %s is too large\n", pos[2]);
			return 1;
		}
		numel *= (uint64_t)shape[i];
	}
	data = malloc(numel ? (size_t)numel * size : 1);
	if (!data) {
		fprintf(stderr, "npygen: out of memory for shape %s\n", pos[2]);
		return 1;
	}
	state = seed;
	for (k = 0; k < numel; k++) {
		if (npygen_draw(&spec, &state, data + k * size, &is_zero) < 0)
			goto empty_range;
		all_zero &= is_zero;
	}
	for (i = 0; numel && all_zero && i < NPYGEN_TRIES; i++)
		if (npygen_draw(&spec, &state, data, &is_zero) == 0 && !is_zero)
			all_zero = 0;
	if (numel && all_zero) {
		fprintf(stderr, "npygen: the range %s holds no nonzero %s values\n",
			range ? range : "(default)", tc_dtype_name(spec.dtype));
		free(data);
		return 1;
	}
	if (tc_npy_write(pos[0], spec.dtype, ndim, shape, data, &err) < 0) {
		fprintf(stderr, "npygen: %s\n", err ? err : "out of memory");
		tc_free(err);
		free(data);
		return 1;
	}
	free(data);
	return 0;

empty_range:
	fprintf(stderr, "npygen: the range %s holds no %s values\n",
		range ? range : "(default)", tc_dtype_name(spec.dtype));
	free(data);
	return 1;
}
