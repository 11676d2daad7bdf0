/* Unit tests of tc_interp_builtin (ir/builtins.c), the builtin math functions
 * of the reference interpreter.
 *
 * Every builtin of TC_BUILTINS must have known values in the table below
 * (computed with mpmath at 300 bits and rounded to double), so a builtin
 * added to the table without a case in tc_interp_builtin, or without test
 * vectors here, fails test_every_builtin_matches_known_values.  The other
 * tests pin down the mapping onto libm, the inverses (erfinv, erfcinv,
 * normcdfinv) against their forward functions, the exact zeros of sinpi and
 * cospi, and the special values CUDA documents. */

/* j0, j1, jn, y0, y1, yn are X/Open functions of libm. */
#define _XOPEN_SOURCE 700

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "ir/interp.h"
#include "lang/types.h"

/* A known value: name(args) = want, within KNOWN_TOL relative. */
struct known {
	const char *name;
	double args[3];
	double want;
};

/* libm's functions are within a few ulp of these; a wrong mapping (j0 for
 * y0, log for log10, ...) is off by far more. */
#define KNOWN_TOL 1e-14

static const struct known known[] = {
	{"acos", {0.3, 0, 0}, 1.2661036727794992},
	{"acos", {-0.7, 0, 0}, 2.3461938234056494},
	{"acos", {1.0, 0, 0}, 0.0},
	{"acosh", {1.5, 0, 0}, 0.9624236501192069},
	{"acosh", {10.0, 0, 0}, 2.993222846126381},
	{"acosh", {10000000000.0, 0, 0}, 23.7189981105004},
	{"asin", {0.3, 0, 0}, 0.3046926540153975},
	{"asin", {-0.7, 0, 0}, -0.775397496610753},
	{"asin", {1e-05, 0, 0}, 1.0000000000166668e-05},
	{"asinh", {0.5, 0, 0}, 0.48121182505960347},
	{"asinh", {-3.0, 0, 0}, -1.8184464592320668},
	{"asinh", {10000000000.0, 0, 0}, 23.7189981105004},
	{"atan", {0.5, 0, 0}, 0.4636476090008061},
	{"atan", {-3.0, 0, 0}, -1.2490457723982544},
	{"atan", {10000000000.0, 0, 0}, 1.5707963266948965},
	{"atanh", {0.5, 0, 0}, 0.5493061443340549},
	{"atanh", {-0.9, 0, 0}, -1.4722194895832204},
	{"atanh", {0.0001, 0, 0}, 0.00010000000033333334},
	{"cbrt", {27.0, 0, 0}, 3.0},
	{"cbrt", {-2.0, 0, 0}, -1.2599210498948732},
	{"cbrt", {1e-300, 0, 0}, 1e-100},
	{"ceil", {1.5, 0, 0}, 2.0},
	{"ceil", {-1.5, 0, 0}, -1.0},
	{"ceil", {2.0, 0, 0}, 2.0},
	{"cos", {0.5, 0, 0}, 0.8775825618903728},
	{"cos", {-3.0, 0, 0}, -0.9899924966004454},
	{"cos", {100.0, 0, 0}, 0.8623188722876839},
	{"cosh", {0.5, 0, 0}, 1.1276259652063807},
	{"cosh", {-3.0, 0, 0}, 10.067661995777765},
	{"cosh", {700.0, 0, 0}, 5.0711602736750225e+303},
	{"cospi", {0.25, 0, 0}, 0.7071067811865476},
	{"cospi", {1.0, 0, 0}, -1.0},
	{"cospi", {-0.3, 0, 0}, 0.5877852522924731},
	{"cospi", {1000000.125, 0, 0}, 0.9238795325112867},
	{"erf", {0.5, 0, 0}, 0.5204998778130465},
	{"erf", {-1.5, 0, 0}, -0.9661051464753108},
	{"erf", {3.0, 0, 0}, 0.9999779095030014},
	{"erf", {1e-10, 0, 0}, 1.1283791670955126e-10},
	{"erfc", {0.5, 0, 0}, 0.4795001221869535},
	{"erfc", {-1.5, 0, 0}, 1.9661051464753108},
	{"erfc", {10.0, 0, 0}, 2.088487583762545e-45},
	{"erfc", {26.0, 0, 0}, 5.663192408856143e-296},
	{"erfcinv", {0.5, 0, 0}, 0.4769362762044699},
	{"erfcinv", {1.5, 0, 0}, -0.4769362762044699},
	{"erfcinv", {1e-10, 0, 0}, 4.572824967389486},
	{"erfcinv", {1e-300, 0, 0}, 26.209469960516124},
	{"erfcinv", {2.2250738585072014e-308, 0, 0}, 26.54325845425098},
	{"erfcinv", {1e-310, 0, 0}, 26.644806559364763},
	{"erfcinv", {1e-320, 0, 0}, 27.073153719853043},
	{"erfcinv", {5e-324, 0, 0}, 27.21329321081295},
	{"erfinv", {0.5, 0, 0}, 0.4769362762044699},
	{"erfinv", {-0.9, 0, 0}, -1.1630871536766743},
	{"erfinv", {0.999999, 0, 0}, 3.458910737275499},
	{"erfinv", {1e-10, 0, 0}, 8.862269254527581e-11},
	{"erfinv", {0x1.fffffffffffffp-1, 0, 0}, 5.8635847487551676},
	{"erfinv", {-0x1.fffffffffffffp-1, 0, 0}, -5.8635847487551676},
	{"exp", {1.0, 0, 0}, 2.718281828459045},
	{"exp", {-2.5, 0, 0}, 0.0820849986238988},
	{"exp", {700.0, 0, 0}, 1.0142320547350045e+304},
	{"exp10", {2.0, 0, 0}, 100.0},
	{"exp10", {-0.5, 0, 0}, 0.31622776601683794},
	{"exp10", {300.0, 0, 0}, 1e+300},
	{"exp2", {10.0, 0, 0}, 1024.0},
	{"exp2", {-0.5, 0, 0}, 0.7071067811865476},
	{"exp2", {3.3, 0, 0}, 9.849155306759329},
	{"expm1", {1e-10, 0, 0}, 1.00000000005e-10},
	{"expm1", {-2.5, 0, 0}, -0.9179150013761012},
	{"expm1", {1.0, 0, 0}, 1.7182818284590453},
	{"fabs", {-2.5, 0, 0}, 2.5},
	{"fabs", {3.0, 0, 0}, 3.0},
	{"fabs", {-1e-310, 0, 0}, 1e-310},
	{"floor", {1.5, 0, 0}, 1.0},
	{"floor", {-1.5, 0, 0}, -2.0},
	{"floor", {-2.0, 0, 0}, -2.0},
	{"j0", {0.5, 0, 0}, 0.9384698072408129},
	{"j0", {-3.0, 0, 0}, -0.26005195490193345},
	{"j0", {100.0, 0, 0}, 0.019985850304223122},
	{"j1", {0.5, 0, 0}, 0.2422684576748739},
	{"j1", {-3.0, 0, 0}, -0.3390589585259365},
	{"j1", {100.0, 0, 0}, -0.07714535201411216},
	{"lgamma", {0.5, 0, 0}, 0.5723649429247001},
	{"lgamma", {10.0, 0, 0}, 12.801827480081469},
	{"lgamma", {-2.5, 0, 0}, -0.056243716497674054},
	{"lgamma", {100.0, 0, 0}, 359.1342053695754},
	{"log", {2.0, 0, 0}, 0.6931471805599453},
	{"log", {1e-300, 0, 0}, -690.7755278982137},
	{"log", {10.0, 0, 0}, 2.302585092994046},
	{"log10", {2.0, 0, 0}, 0.3010299956639812},
	{"log10", {1e-300, 0, 0}, -300.0},
	{"log10", {1000.0, 0, 0}, 3.0},
	{"log1p", {1e-10, 0, 0}, 9.999999999500001e-11},
	{"log1p", {-0.5, 0, 0}, -0.6931471805599453},
	{"log1p", {3.0, 0, 0}, 1.3862943611198906},
	{"log2", {8.0, 0, 0}, 3.0},
	{"log2", {1e-300, 0, 0}, -996.5784284662087},
	{"log2", {3.0, 0, 0}, 1.584962500721156},
	{"logb", {8.0, 0, 0}, 3.0},
	{"logb", {-0.3, 0, 0}, -2.0},
	{"logb", {1e-310, 0, 0}, -1030.0},
	{"nearbyint", {2.5, 0, 0}, 2.0},
	{"nearbyint", {3.5, 0, 0}, 4.0},
	{"nearbyint", {-2.7, 0, 0}, -3.0},
	{"normcdf", {0.0, 0, 0}, 0.5},
	{"normcdf", {1.0, 0, 0}, 0.8413447460685429},
	{"normcdf", {-3.0, 0, 0}, 0.0013498980316300946},
	{"normcdf", {-30.0, 0, 0}, 4.906713927148187e-198},
	{"normcdfinv", {0.5, 0, 0}, 0.0},
	{"normcdfinv", {0.975, 0, 0}, 1.9599639845400538},
	{"normcdfinv", {1e-10, 0, 0}, -6.361340902404057},
	{"normcdfinv", {1e-300, 0, 0}, -37.0470962993612},
	{"normcdfinv", {5e-324, 0, 0}, -38.467405617144344},
	{"rcbrt", {8.0, 0, 0}, 0.5},
	{"rcbrt", {-27.0, 0, 0}, -0.3333333333333333},
	{"rcbrt", {1e-300, 0, 0}, 1e+100},
	{"rint", {2.5, 0, 0}, 2.0},
	{"rint", {3.5, 0, 0}, 4.0},
	{"rint", {-0.4, 0, 0}, -0.0},
	{"round", {2.5, 0, 0}, 3.0},
	{"round", {-2.5, 0, 0}, -3.0},
	{"round", {0.49999999999999994, 0, 0}, 0.0},
	{"rsqrt", {4.0, 0, 0}, 0.5},
	{"rsqrt", {2.0, 0, 0}, 0.7071067811865476},
	{"rsqrt", {1e-300, 0, 0}, 1e+150},
	{"sin", {0.5, 0, 0}, 0.479425538604203},
	{"sin", {-3.0, 0, 0}, -0.1411200080598672},
	{"sin", {100.0, 0, 0}, -0.5063656411097588},
	{"sinh", {0.5, 0, 0}, 0.5210953054937474},
	{"sinh", {-3.0, 0, 0}, -10.017874927409903},
	{"sinh", {1e-08, 0, 0}, 1e-08},
	{"sinpi", {0.25, 0, 0}, 0.7071067811865476},
	{"sinpi", {1.5, 0, 0}, -1.0},
	{"sinpi", {-0.3, 0, 0}, -0.8090169943749475},
	{"sinpi", {1000000.125, 0, 0}, 0.3826834323650898},
	{"sqrt", {4.0, 0, 0}, 2.0},
	{"sqrt", {2.0, 0, 0}, 1.4142135623730951},
	{"sqrt", {1e-300, 0, 0}, 1e-150},
	{"tan", {0.5, 0, 0}, 0.5463024898437905},
	{"tan", {-3.0, 0, 0}, 0.1425465430742778},
	{"tan", {100.0, 0, 0}, -0.5872139151569291},
	{"tanh", {0.5, 0, 0}, 0.46211715726000974},
	{"tanh", {-3.0, 0, 0}, -0.9950547536867305},
	{"tanh", {1e-08, 0, 0}, 1e-08},
	{"tgamma", {0.5, 0, 0}, 1.772453850905516},
	{"tgamma", {5.0, 0, 0}, 24.0},
	{"tgamma", {-2.5, 0, 0}, -0.9453087204829419},
	{"tgamma", {170.5, 0, 0}, 5.56209241456e+305},
	{"trunc", {2.7, 0, 0}, 2.0},
	{"trunc", {-2.7, 0, 0}, -2.0},
	{"trunc", {-0.5, 0, 0}, -0.0},
	{"y0", {0.5, 0, 0}, -0.44451873350670656},
	{"y0", {3.0, 0, 0}, 0.3768500100127904},
	{"y0", {100.0, 0, 0}, -0.07724431336508315},
	{"y1", {0.5, 0, 0}, -1.471472392670243},
	{"y1", {3.0, 0, 0}, 0.3246744247918},
	{"y1", {100.0, 0, 0}, -0.020372312002759792},
	{"atan2", {1.0, 2.0, 0}, 0.4636476090008061},
	{"atan2", {-1.0, -2.0, 0}, -2.677945044588987},
	{"atan2", {0.5, -3.0, 0}, 2.976443976175166},
	{"copysign", {2.0, -0.0, 0}, -2.0},
	{"copysign", {-3.0, 1.0, 0}, 3.0},
	{"copysign", {INFINITY, -1.0, 0}, -INFINITY},
	{"fdim", {5.0, 3.0, 0}, 2.0},
	{"fdim", {3.0, 5.0, 0}, 0.0},
	{"fdim", {-1.0, -4.0, 0}, 3.0},
	{"fmax", {1.0, 2.0, 0}, 2.0},
	{"fmax", {NAN, 2.0, 0}, 2.0},
	{"fmax", {-1.0, NAN, 0}, -1.0},
	{"fmin", {1.0, 2.0, 0}, 1.0},
	{"fmin", {NAN, 2.0, 0}, 2.0},
	{"fmin", {-1.0, NAN, 0}, -1.0},
	{"fmod", {7.5, 2.0, 0}, 1.5},
	{"fmod", {-7.5, 2.0, 0}, -1.5},
	{"fmod", {7.5, -2.0, 0}, 1.5},
	{"hypot", {3.0, 4.0, 0}, 5.0},
	{"hypot", {1e+300, 1e+300, 0}, 1.4142135623730952e+300},
	{"hypot", {1e-300, 2e-300, 0}, 2.2360679774997897e-300},
	{"nextafter", {1.0, 2.0, 0}, 1.0000000000000002},
	{"nextafter", {1.0, 0.0, 0}, 0.9999999999999999},
	{"nextafter", {0.0, -1.0, 0}, -5e-324},
	{"pow", {2.0, 10.0, 0}, 1024.0},
	{"pow", {2.0, 0.5, 0}, 1.4142135623730951},
	{"pow", {-2.0, 3.0, 0}, -8.0},
	{"pow", {10.0, -300.0, 0}, 1e-300},
	{"remainder", {7.5, 2.0, 0}, -0.5},
	{"remainder", {5.0, 2.0, 0}, 1.0},
	{"remainder", {7.0, 2.0, 0}, -1.0},
	{"rhypot", {3.0, 4.0, 0}, 0.2},
	{"rhypot", {1e+300, 1e+300, 0}, 7.071067811865475e-301},
	{"rhypot", {1e-300, 2e-300, 0}, 4.472135954999579e+299},
	{"fma", {2.0, 3.0, 4.0}, 10.0},
	{"fma", {0x1.00000004p0, 0x1.fffffff8p-1, -1.0}, -0x1p-60},
	{"fma", {-1.5, 2.0, 0.5}, -2.5},
	{"norm3d", {1.0, 2.0, 2.0}, 3.0},
	{"norm3d", {1e+300, -1e+300, 1e+300}, 1.7320508075688774e+300},
	{"norm3d", {3e-310, 4e-310, 0.0}, 5e-310},
	{"norm3d", {1e-200, 1.0, 1e-200}, 1.0},
	{"rnorm3d", {1.0, 2.0, 2.0}, 0.3333333333333333},
	{"rnorm3d", {1e+300, -1e+300, 1e+300}, 5.773502691896257e-301},
	{"rnorm3d", {1e-200, 1e-200, 1e-200}, 5.773502691896257e+199},
	{"ilogb", {8.0, 0, 0}, 3.0},
	{"ilogb", {-0.3, 0, 0}, -2.0},
	{"ilogb", {1e-310, 0, 0}, -1030.0},
	{"jn", {2.0, 1.5, 0}, 0.23208767214421472},
	{"jn", {-3.0, 2.5, 0}, -0.21660039103911352},
	{"jn", {10.0, 30.0, 0}, -0.12987689399858876},
	{"jn", {0.0, 0.5, 0}, 0.9384698072408129},
	{"yn", {2.0, 1.5, 0}, -0.9321937597629739},
	{"yn", {-3.0, 2.5, 0}, 0.756055496753671},
	{"yn", {10.0, 30.0, 0}, 0.07505670212239711},
	{"yn", {0.0, 0.5, 0}, -0.44451873350670656},
	{"ldexp", {3.0, 2.0, 0}, 12.0},
	{"ldexp", {1.0, -1074.0, 0}, 5e-324},
	{"ldexp", {-1.5, 1024.0, 0}, -INFINITY},
};

static double call1(tc_builtin_id id, double a)
{
	double args[3] = {a, 0, 0};
	return tc_interp_builtin(id, args);
}

static double call2(tc_builtin_id id, double a, double b)
{
	double args[3] = {a, b, 0};
	return tc_interp_builtin(id, args);
}

static double call3(tc_builtin_id id, double a, double b, double c)
{
	double args[3] = {a, b, c};
	return tc_interp_builtin(id, args);
}

/* Bitwise equality (so +0 and -0 differ), with every NaN equal. */
static int same(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return a == b && signbit(a) == signbit(b);
}

static int close_rel(double got, double want, double tol)
{
	if (same(got, want))
		return 1;
	if (isnan(got) || isnan(want) || isinf(got) || isinf(want))
		return 0;
	return fabs(got - want) <= tol * fabs(want);
}

/* Checks got against want (exact when tol is 0), naming the call. */
static void check(const char *what, double x, double got, double want, double tol)
{
	if (tol == 0 ? !same(got, want) : !close_rel(got, want, tol))
		fail_msg("%s(%.17g) = %.17g, want %.17g (tolerance %g)", what, x, got, want,
			tol);
}

static void test_every_builtin_matches_known_values(void **state)
{
	int id, i, n;
	(void)state;
	for (id = 0; id < TC_BI_COUNT; id++) {
		const char *name = tc_builtins[id].name;
		if (id == TC_BI_MIN || id == TC_BI_MAX)
			continue;
		n = 0;
		for (i = 0; i < (int)(sizeof known / sizeof known[0]); i++) {
			double got;
			if (strcmp(known[i].name, name))
				continue;
			n++;
			got = tc_interp_builtin((tc_builtin_id)id, known[i].args);
			if (!close_rel(got, known[i].want, KNOWN_TOL))
				fail_msg("%s(%.17g, %.17g, %.17g) = %.17g, want %.17g", name,
					known[i].args[0], known[i].args[1], known[i].args[2], got,
					known[i].want);
		}
		if (n < 3)
			fail_msg("builtin '%s' has %d known values in tests/test_builtins.c; add at "
				 "least 3",
				name, n);
	}
	/* Every known value names a builtin (no typos hiding a missing test). */
	for (i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
		if (tc_builtin_lookup(known[i].name, (int)strlen(known[i].name)) < 0)
			fail_msg("known value for unknown builtin '%s'", known[i].name);
}

static void test_min_and_max_are_left_to_the_interpreter(void **state)
{
	(void)state;
	assert_true(isnan(call2(TC_BI_MIN, 1.0, 2.0)));
	assert_true(isnan(call2(TC_BI_MAX, 1.0, 2.0)));
}

/* Arguments on which the libm-backed builtins are compared with libm:
 * ordinary values of both signs, zeros, tiny and huge ones, infinities, NaN. */
static const double sample[] = {0.0, -0.0, 0.1, -0.1, 0.5, -0.75, 1.0, -1.0, 1.5, 2.5,
	-2.5, 3.25, 10.0, -17.5, 100.0, 1e-310, -1e-300, 1e300, -1e300, INFINITY, -INFINITY,
	NAN};
#define NSAMPLE ((int)(sizeof sample / sizeof sample[0]))

static void test_libm_backed_builtins_match_libm(void **state)
{
	static const struct {
		tc_builtin_id id;
		double (*f)(double);
	} one[] = {
		{TC_BI_ACOS, acos}, {TC_BI_ACOSH, acosh}, {TC_BI_ASIN, asin},
		{TC_BI_ASINH, asinh}, {TC_BI_ATAN, atan}, {TC_BI_ATANH, atanh},
		{TC_BI_CBRT, cbrt}, {TC_BI_CEIL, ceil}, {TC_BI_COS, cos}, {TC_BI_COSH, cosh},
		{TC_BI_ERF, erf}, {TC_BI_ERFC, erfc}, {TC_BI_EXP, exp}, {TC_BI_EXP2, exp2},
		{TC_BI_EXPM1, expm1}, {TC_BI_FABS, fabs}, {TC_BI_FLOOR, floor}, {TC_BI_J0, j0},
		{TC_BI_J1, j1}, {TC_BI_LGAMMA, lgamma}, {TC_BI_LOG, log}, {TC_BI_LOG10, log10},
		{TC_BI_LOG1P, log1p}, {TC_BI_LOG2, log2}, {TC_BI_LOGB, logb},
		{TC_BI_NEARBYINT, nearbyint}, {TC_BI_RINT, rint}, {TC_BI_ROUND, round},
		{TC_BI_SIN, sin}, {TC_BI_SINH, sinh}, {TC_BI_SQRT, sqrt}, {TC_BI_TAN, tan},
		{TC_BI_TANH, tanh}, {TC_BI_TGAMMA, tgamma}, {TC_BI_TRUNC, trunc},
		{TC_BI_Y0, y0}, {TC_BI_Y1, y1},
	};
	static const struct {
		tc_builtin_id id;
		double (*f)(double, double);
	} two[] = {
		{TC_BI_ATAN2, atan2}, {TC_BI_COPYSIGN, copysign}, {TC_BI_FDIM, fdim},
		{TC_BI_FMAX, fmax}, {TC_BI_FMIN, fmin}, {TC_BI_FMOD, fmod},
		{TC_BI_HYPOT, hypot}, {TC_BI_NEXTAFTER, nextafter}, {TC_BI_POW, pow},
		{TC_BI_REMAINDER, remainder},
	};
	int i, j, k;
	(void)state;
	for (i = 0; i < (int)(sizeof one / sizeof one[0]); i++)
		for (j = 0; j < NSAMPLE; j++)
			check(tc_builtins[one[i].id].name, sample[j], call1(one[i].id, sample[j]),
				one[i].f(sample[j]), 0);
	for (i = 0; i < (int)(sizeof two / sizeof two[0]); i++)
		for (j = 0; j < NSAMPLE; j++)
			for (k = 0; k < NSAMPLE; k++) {
				double got = call2(two[i].id, sample[j], sample[k]);
				double want = two[i].f(sample[j], sample[k]);
				/* fmax(+0, -0) may be either zero (C leaves it open, and
				 * compilers fold it differently from libm). */
				int zeros = (two[i].id == TC_BI_FMAX || two[i].id == TC_BI_FMIN) &&
					got == 0 && want == 0;
				if (!same(got, want) && !zeros)
					fail_msg("%s(%.17g, %.17g) = %.17g, libm says %.17g",
						tc_builtins[two[i].id].name, sample[j], sample[k], got,
						want);
			}
	for (j = 0; j < NSAMPLE; j++)
		for (k = 0; k < NSAMPLE; k++)
			assert_true(same(call3(TC_BI_FMA, sample[j], sample[k], 0.5),
				fma(sample[j], sample[k], 0.5)));
}

/* The smallest |got - x| an inverse g of f can promise at y = f(x), y
 * rounded to double: half an ulp of y over |f'(x)|. */
static double inverse_slack(double y, double dfdx)
{
	double ulp = nextafter(fabs(y), INFINITY) - fabs(y);
	return ulp / fabs(dfdx);
}

static void test_erfinv_inverts_erf(void **state)
{
	int i;
	(void)state;
	/* erfinv(erf(x)) = x to 1e-14 relative (plus what the rounding of
	 * erf(x) to double leaves undetermined, which grows like exp(x^2)). */
	for (i = -6000; i <= 6000; i++) {
		double x = i * 0.001 + i * 1e-7, y = erf(x);
		double slack = inverse_slack(y, (2 / sqrt(M_PI)) * exp(-x * x));
		double got = call1(TC_BI_ERFINV, y);
		if (fabs(y) == 1.0)
			continue;
		if (!(fabs(got - x) <= 1e-14 * fabs(x) + slack))
			fail_msg("erfinv(erf(%.17g)) = %.17g", x, got);
	}
	/* Where erf is well conditioned the round trip is tight. */
	for (i = -2000; i <= 2000; i++) {
		double x = i * 0.001;
		check("erfinv(erf)", x, call1(TC_BI_ERFINV, erf(x)), x, 1e-14);
	}
	/* erf(erfinv(y)) = y over the whole open interval. */
	for (i = -9999; i <= 9999; i++) {
		double y = i * 1e-4;
		check("erf(erfinv)", y, erf(call1(TC_BI_ERFINV, y)), y, 4e-16);
	}
	for (i = 1; i <= 53; i++) {
		double y = 1.0 - ldexp(1.0, -i);
		check("erf(erfinv)", y, erf(call1(TC_BI_ERFINV, y)), y, 0);
		check("erfinv(-y)", y, call1(TC_BI_ERFINV, -y), -call1(TC_BI_ERFINV, y), 0);
		/* erfinv(1 - p) = erfcinv(p), exactly (one code path). */
		check("erfinv(1-p)", y, call1(TC_BI_ERFINV, y),
			call1(TC_BI_ERFCINV, ldexp(1.0, -i)), 0);
	}
	/* Tiny arguments: erfinv(x) = sqrt(pi)/2 x. */
	check("erfinv", 1e-300, call1(TC_BI_ERFINV, 1e-300), 0.5 * sqrt(M_PI) * 1e-300, 1e-15);
	check("erfinv", -1e-20, call1(TC_BI_ERFINV, -1e-20), -0.5 * sqrt(M_PI) * 1e-20, 1e-15);
}

static void test_erfcinv_inverts_erfc(void **state)
{
	int i;
	(void)state;
	/* erfcinv(erfc(x)) = x for x up to 26, where erfc(x) ~ 6e-296. */
	for (i = -1000; i <= 26000; i++) {
		double x = i * 0.001, p = erfc(x);
		double slack = inverse_slack(p, (2 / sqrt(M_PI)) * exp(-x * x));
		double got = call1(TC_BI_ERFCINV, p);
		if (!(fabs(got - x) <= 1e-14 * fabs(x) + slack))
			fail_msg("erfcinv(erfc(%.17g)) = %.17g", x, got);
		if (x >= 1.0)
			check("erfcinv(erfc)", x, got, x, 1e-14);
	}
	/* Tails down to the smallest subnormal: erfc(erfcinv(p)) = p. */
	for (i = 1; i <= 1000; i++) {
		double p = pow(10.0, -0.3 * i), q;
		double y = call1(TC_BI_ERFCINV, p);
		/* erfc magnifies the rounding of y to double 2y^2 times. */
		if (y < 26.0)
			check("erfc(erfcinv)", p, erfc(y), p, (2 * y * y + 2) * 2 * DBL_EPSILON);
		assert_true(y > 0 && isfinite(y));
		/* erfcinv(2 - q) = -erfcinv(q), q = 2 - (2 - p) the part of p that
		 * survives the subtraction. */
		q = 2.0 - p;
		check("erfcinv(2-p)", p, call1(TC_BI_ERFCINV, q),
			q == 2.0 ? -INFINITY : -call1(TC_BI_ERFCINV, 2.0 - q), 0);
	}
	/* Monotone decreasing through the whole range, subnormals included. */
	{
		double prev = INFINITY, p = 5e-324;
		while (p < 2.0) {
			double y = call1(TC_BI_ERFCINV, p);
			if (!(y <= prev))
				fail_msg("erfcinv not monotone at %.17g: %.17g after %.17g", p, y, prev);
			prev = y;
			p = p < 1e-300 ? p * 8 : p < 1.9 ? p * 1.01 + 1e-9 : p + 1e-3;
		}
	}
}

static void test_normcdfinv_inverts_normcdf(void **state)
{
	int i;
	(void)state;
	for (i = -3800; i <= 800; i++) {
		double x = i * 0.01 + 1e-4, p = call1(TC_BI_NORMCDF, x);
		double slack = inverse_slack(p, exp(-0.5 * x * x) / sqrt(2 * M_PI));
		double got = call1(TC_BI_NORMCDFINV, p);
		if (!(fabs(got - x) <= 1e-14 * fabs(x) + slack))
			fail_msg("normcdfinv(normcdf(%.17g)) = %.17g", x, got);
	}
	/* normcdf(x) + normcdf(-x) = 1. */
	for (i = -800; i <= 800; i++) {
		double x = i * 0.01;
		check("normcdf(x)+normcdf(-x)", x,
			call1(TC_BI_NORMCDF, x) + call1(TC_BI_NORMCDF, -x), 1.0, 4e-16);
	}
}

static void test_sinpi_cospi_are_exact_at_integers_and_half_integers(void **state)
{
	static const double big[] = {0x1p52, 0x1p53, 0x1p53 + 2, 1e300, DBL_MAX};
	int n;
	(void)state;
	for (n = -1000; n <= 1000; n++) {
		double odd = (n & 1) ? -1.0 : 1.0;
		check("sinpi", n, call1(TC_BI_SINPI, n), n < 0 ? -0.0 : 0.0, 0);
		check("cospi", n, call1(TC_BI_COSPI, n), odd, 0);
		check("sinpi", n + 0.5, call1(TC_BI_SINPI, n + 0.5), odd, 0);
		check("cospi", n + 0.5, call1(TC_BI_COSPI, n + 0.5), 0.0, 0);
		check("sinpi", n + 0.25, call1(TC_BI_SINPI, n + 0.25), sin(M_PI * (n + 0.25)), 1e-12);
		check("cospi", n + 0.25, call1(TC_BI_COSPI, n + 0.25), cos(M_PI * (n + 0.25)), 1e-12);
	}
	check("sinpi", 1, call1(TC_BI_SINPI, 1.0), 0.0, 0);
	check("cospi", 0.5, call1(TC_BI_COSPI, 0.5), 0.0, 0);
	check("sinpi", -0.0, call1(TC_BI_SINPI, -0.0), -0.0, 0);
	check("sinpi", 1e-300, call1(TC_BI_SINPI, 1e-300), M_PI * 1e-300, 1e-15);
	/* Every double of magnitude >= 2^53 is an even integer. */
	for (n = 0; n < (int)(sizeof big / sizeof big[0]); n++) {
		check("sinpi", big[n], call1(TC_BI_SINPI, big[n]), 0.0, 0);
		check("sinpi", -big[n], call1(TC_BI_SINPI, -big[n]), -0.0, 0);
		check("cospi", big[n], call1(TC_BI_COSPI, -big[n]), 1.0, 0);
	}
	check("cospi", 0x1p52 + 1, call1(TC_BI_COSPI, 0x1p52 + 1), -1.0, 0);
	check("sinpi", 0x1p51 + 0.5, call1(TC_BI_SINPI, 0x1p51 + 0.5), 1.0, 0);
}

/* With every floating argument NaN, every builtin returns NaN (ilogb
 * returns FP_ILOGBNAN); integer arguments are ordinary. */
static void test_nan_propagates_through_every_builtin(void **state)
{
	int id;
	(void)state;
	for (id = 0; id < TC_BI_COUNT; id++) {
		double args[3] = {NAN, NAN, NAN}, got;
		if (id == TC_BI_MIN || id == TC_BI_MAX)
			continue;
		if (tc_builtins[id].kind == TC_BK_INT_FIRST)
			args[0] = 3;
		if (tc_builtins[id].kind == TC_BK_INT_SECOND)
			args[1] = 3;
		got = tc_interp_builtin((tc_builtin_id)id, args);
		if (id == TC_BI_ILOGB)
			check("ilogb", NAN, got, FP_ILOGBNAN, 0);
		else if (!isnan(got))
			fail_msg("%s(NaN) = %.17g, want NaN", tc_builtins[id].name, got);
	}
}

static void test_special_values_follow_cuda(void **state)
{
	(void)state;
	/* Inverse functions at and beyond the ends of their domains. */
	check("erfinv", 1, call1(TC_BI_ERFINV, 1.0), INFINITY, 0);
	check("erfinv", -1, call1(TC_BI_ERFINV, -1.0), -INFINITY, 0);
	check("erfinv", 1.5, call1(TC_BI_ERFINV, 1.5), NAN, 0);
	check("erfinv", -INFINITY, call1(TC_BI_ERFINV, -INFINITY), NAN, 0);
	check("erfinv", 0, call1(TC_BI_ERFINV, 0.0), 0.0, 0);
	check("erfinv", -0.0, call1(TC_BI_ERFINV, -0.0), -0.0, 0);
	check("erfcinv", 0, call1(TC_BI_ERFCINV, 0.0), INFINITY, 0);
	check("erfcinv", 2, call1(TC_BI_ERFCINV, 2.0), -INFINITY, 0);
	check("erfcinv", 1, call1(TC_BI_ERFCINV, 1.0), 0.0, 0);
	check("erfcinv", -0.1, call1(TC_BI_ERFCINV, -0.1), NAN, 0);
	check("erfcinv", 2.1, call1(TC_BI_ERFCINV, 2.1), NAN, 0);
	check("erfcinv", INFINITY, call1(TC_BI_ERFCINV, INFINITY), NAN, 0);
	check("normcdfinv", 0, call1(TC_BI_NORMCDFINV, 0.0), -INFINITY, 0);
	check("normcdfinv", 1, call1(TC_BI_NORMCDFINV, 1.0), INFINITY, 0);
	check("normcdfinv", 0.5, call1(TC_BI_NORMCDFINV, 0.5), 0.0, 0);
	check("normcdfinv", -0.5, call1(TC_BI_NORMCDFINV, -0.5), NAN, 0);
	check("normcdfinv", 1.5, call1(TC_BI_NORMCDFINV, 1.5), NAN, 0);
	check("normcdf", INFINITY, call1(TC_BI_NORMCDF, INFINITY), 1.0, 0);
	check("normcdf", -INFINITY, call1(TC_BI_NORMCDF, -INFINITY), 0.0, 0);
	check("normcdf", 40, call1(TC_BI_NORMCDF, 40.0), 1.0, 0);
	check("normcdf", -40, call1(TC_BI_NORMCDF, -40.0), 0.0, 0);
	/* Reciprocals. */
	check("rsqrt", 0, call1(TC_BI_RSQRT, 0.0), INFINITY, 0);
	check("rsqrt", -0.0, call1(TC_BI_RSQRT, -0.0), -INFINITY, 0);
	check("rsqrt", INFINITY, call1(TC_BI_RSQRT, INFINITY), 0.0, 0);
	check("rsqrt", -1, call1(TC_BI_RSQRT, -1.0), NAN, 0);
	check("rcbrt", 0, call1(TC_BI_RCBRT, 0.0), INFINITY, 0);
	check("rcbrt", -0.0, call1(TC_BI_RCBRT, -0.0), -INFINITY, 0);
	check("rcbrt", INFINITY, call1(TC_BI_RCBRT, INFINITY), 0.0, 0);
	check("rcbrt", -INFINITY, call1(TC_BI_RCBRT, -INFINITY), -0.0, 0);
	check("rhypot", 0, call2(TC_BI_RHYPOT, 0.0, -0.0), INFINITY, 0);
	check("rhypot", INFINITY, call2(TC_BI_RHYPOT, INFINITY, NAN), 0.0, 0);
	check("rhypot", NAN, call2(TC_BI_RHYPOT, NAN, -INFINITY), 0.0, 0);
	/* norm3d: +inf if any argument is infinite, even with a NaN. */
	check("norm3d", INFINITY, call3(TC_BI_NORM3D, INFINITY, NAN, 1.0), INFINITY, 0);
	check("norm3d", NAN, call3(TC_BI_NORM3D, NAN, 1.0, -INFINITY), INFINITY, 0);
	check("norm3d", NAN, call3(TC_BI_NORM3D, NAN, 1.0, 2.0), NAN, 0);
	check("norm3d", 0, call3(TC_BI_NORM3D, 0.0, -0.0, 0.0), 0.0, 0);
	check("norm3d", DBL_MAX, call3(TC_BI_NORM3D, DBL_MAX, 0.0, 0.0), DBL_MAX, 0);
	check("norm3d", DBL_MAX, call3(TC_BI_NORM3D, DBL_MAX, DBL_MAX, 0.0), INFINITY, 0);
	check("norm3d", 5e-324, call3(TC_BI_NORM3D, 5e-324, 0.0, -5e-324), 5e-324, 0);
	check("rnorm3d", 0, call3(TC_BI_RNORM3D, 0.0, 0.0, -0.0), INFINITY, 0);
	check("rnorm3d", INFINITY, call3(TC_BI_RNORM3D, 1.0, NAN, -INFINITY), 0.0, 0);
	/* exp10 and the pi functions. */
	check("exp10", INFINITY, call1(TC_BI_EXP10, INFINITY), INFINITY, 0);
	check("exp10", -INFINITY, call1(TC_BI_EXP10, -INFINITY), 0.0, 0);
	check("exp10", 0, call1(TC_BI_EXP10, -0.0), 1.0, 0);
	check("exp10", 400, call1(TC_BI_EXP10, 400.0), INFINITY, 0);
	check("sinpi", INFINITY, call1(TC_BI_SINPI, INFINITY), NAN, 0);
	check("cospi", -INFINITY, call1(TC_BI_COSPI, -INFINITY), NAN, 0);
	/* ilogb as a double; logb, lgamma and tgamma at their poles. */
	check("ilogb", 0, call1(TC_BI_ILOGB, 0.0), FP_ILOGB0, 0);
	check("ilogb", -0.0, call1(TC_BI_ILOGB, -0.0), FP_ILOGB0, 0);
	check("ilogb", INFINITY, call1(TC_BI_ILOGB, -INFINITY), INT_MAX, 0);
	check("ilogb", 5e-324, call1(TC_BI_ILOGB, 5e-324), -1074, 0);
	check("logb", 0, call1(TC_BI_LOGB, 0.0), -INFINITY, 0);
	check("logb", -INFINITY, call1(TC_BI_LOGB, -INFINITY), INFINITY, 0);
	check("lgamma", 0, call1(TC_BI_LGAMMA, 0.0), INFINITY, 0);
	check("lgamma", -3, call1(TC_BI_LGAMMA, -3.0), INFINITY, 0);
	check("tgamma", -0.0, call1(TC_BI_TGAMMA, -0.0), -INFINITY, 0);
	check("tgamma", -3, call1(TC_BI_TGAMMA, -3.0), NAN, 0);
	check("tgamma", -INFINITY, call1(TC_BI_TGAMMA, -INFINITY), NAN, 0);
	check("fdim", NAN, call2(TC_BI_FDIM, 1.0, NAN), NAN, 0);
	check("pow", NAN, call2(TC_BI_POW, NAN, 0.0), 1.0, 0);
	check("hypot", NAN, call2(TC_BI_HYPOT, NAN, INFINITY), INFINITY, 0);
}

static void test_rounding_functions_break_ties_as_documented(void **state)
{
	static const double x[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994,
		0x1p51 + 0.5, 0x1p51 + 1.5, -0x1p51 - 0.5};
	/* round: half away from zero; rint and nearbyint: half to even. */
	static const double want_round[] = {1, 2, 3, -1, -2, -3, 0, 0x1p51 + 1, 0x1p51 + 2,
		-0x1p51 - 1};
	static const double want_even[] = {0, 2, 2, -0.0, -2, -2, 0, 0x1p51, 0x1p51 + 2,
		-0x1p51};
	int i;
	(void)state;
	for (i = 0; i < (int)(sizeof x / sizeof x[0]); i++) {
		check("round", x[i], call1(TC_BI_ROUND, x[i]), want_round[i], 0);
		check("rint", x[i], call1(TC_BI_RINT, x[i]), want_even[i], 0);
		check("nearbyint", x[i], call1(TC_BI_NEARBYINT, x[i]), want_even[i], 0);
	}
	check("trunc", -0.7, call1(TC_BI_TRUNC, -0.7), -0.0, 0);
	check("ceil", -0.7, call1(TC_BI_CEIL, -0.7), -0.0, 0);
	check("floor", 0.7, call1(TC_BI_FLOOR, 0.7), 0.0, 0);
}

static void test_integer_arguments_are_clamped_and_truncated(void **state)
{
	int n;
	(void)state;
	for (n = -8; n <= 8; n++) {
		check("jn", n, call2(TC_BI_JN, n, 2.5), jn(n, 2.5), 0);
		check("yn", n, call2(TC_BI_YN, n, 2.5), yn(n, 2.5), 0);
		check("jn", n, call2(TC_BI_JN, n, -7.25), jn(n, -7.25), 0);
		check("ldexp", n, call2(TC_BI_LDEXP, 1.5, n), ldexp(1.5, n), 0);
	}
	/* Huge orders: J_n(x) rounds to zero when n >> |x| (fast, not O(n)),
	 * with the sign of (x/2)^n and J_{-n} = (-1)^n J_n. */
	check("jn", INT_MAX, call2(TC_BI_JN, INT_MAX, 1.0), 0.0, 0);
	check("jn", INT_MAX, call2(TC_BI_JN, INT_MAX, -1.0), -0.0, 0);
	check("jn", INT_MIN, call2(TC_BI_JN, INT_MIN, 1.0), -0.0, 0);
	check("jn", 1e10, call2(TC_BI_JN, 1e10, 100.0), 0.0, 0);
	check("jn", 1000, call2(TC_BI_JN, 1000.0, 300.0), jn(1000, 300.0), 0);
	check("jn", 1001, call2(TC_BI_JN, 1001.0, -300.0), jn(1001, -300.0), 0);
	check("jn", 999, call2(TC_BI_JN, 999.0, 0.5), jn(999, 0.5), 0);
	check("jn", 1000, call2(TC_BI_JN, 1000.0, 200.0), jn(1000, 200.0), 0);
	check("yn", INT_MAX, call2(TC_BI_YN, INT_MAX, 1.0), -INFINITY, 0);
	check("jn", 2, call2(TC_BI_JN, 2.0, INFINITY), 0.0, 0);
	/* ldexp exponents beyond int saturate. */
	check("ldexp", 1e10, call2(TC_BI_LDEXP, 1.0, 1e10), INFINITY, 0);
	check("ldexp", -1e10, call2(TC_BI_LDEXP, -1.0, -1e10), -0.0, 0);
	check("ldexp", INFINITY, call2(TC_BI_LDEXP, 2.0, INFINITY), INFINITY, 0);
	check("ldexp", -INFINITY, call2(TC_BI_LDEXP, 2.0, -INFINITY), 0.0, 0);
	check("ldexp", NAN, call2(TC_BI_LDEXP, 2.0, NAN), NAN, 0);
	check("ldexp", 0, call2(TC_BI_LDEXP, INFINITY, 0.0), INFINITY, 0);
	check("jn", NAN, call2(TC_BI_JN, NAN, 1.0), NAN, 0);
	check("yn", NAN, call2(TC_BI_YN, NAN, 1.0), NAN, 0);
	check("ilogb", 1024, call1(TC_BI_ILOGB, 1024.0), 10, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_builtin_matches_known_values),
		cmocka_unit_test(test_min_and_max_are_left_to_the_interpreter),
		cmocka_unit_test(test_libm_backed_builtins_match_libm),
		cmocka_unit_test(test_erfinv_inverts_erf),
		cmocka_unit_test(test_erfcinv_inverts_erfc),
		cmocka_unit_test(test_normcdfinv_inverts_normcdf),
		cmocka_unit_test(test_sinpi_cospi_are_exact_at_integers_and_half_integers),
		cmocka_unit_test(test_nan_propagates_through_every_builtin),
		cmocka_unit_test(test_special_values_follow_cuda),
		cmocka_unit_test(test_rounding_functions_break_ties_as_documented),
		cmocka_unit_test(test_integer_arguments_are_clamped_and_truncated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
