/* The builtin math functions for the reference interpreter.
 *
 * tc_interp_builtin evaluates every builtin of TC_BUILTINS in double
 * precision with the semantics of the CUDA math function of the same name;
 * the interpreter then rounds the result to the static type (float16,
 * float32 or float64).  One switch, one case per builtin:
 *
 * - Functions C99/POSIX libm has (exp, log, erf, lgamma, tgamma, j0, jn,
 *   nearbyint, remainder, nextafter, ...) call libm: its special values
 *   (NaN in, NaN out; inf handling) are the ones CUDA documents.
 * - CUDA-only functions are written here:
 *     exp10(x)          pow(10, x) (exp10 is a GNU extension);
 *     rsqrt, rcbrt      1/sqrt(x), 1/cbrt(x) (so rsqrt(-0) = -inf);
 *     sinpi, cospi      sin(pi x), cos(pi x) with the argument reduced
 *                       exactly modulo 2 first: exact zeros at integers
 *                       (sinpi) and half-integers (cospi, always +0);
 *     normcdf(x)        0.5 erfc(-x / sqrt(2)), with -x / sqrt(2) carried in
 *                       two doubles (erfc magnifies its rounding error);
 *     normcdfinv(p)     -sqrt(2) erfcinv(2p);
 *     erfinv, erfcinv   an initial approximation refined by Halley steps on
 *                       erf (central part) or Newton steps on log(erfc)
 *                       (tails, accurate down to the smallest subnormal);
 *     rhypot            1/hypot(x, y);
 *     norm3d, rnorm3d   sqrt(a^2 + b^2 + c^2) scaled by a power of two so it
 *                       neither overflows nor underflows; +inf (rnorm3d +0)
 *                       when any argument is infinite, even with a NaN.
 * - Integer-valued results and arguments travel as doubles: ilogb returns
 *   its int (FP_ILOGB0 for +-0, FP_ILOGBNAN for NaN, INT_MAX for +-inf);
 *   the n of jn/yn (args[0]) and the exponent of ldexp (args[1]) are
 *   truncated to int after clamping to the int range (a NaN gives NaN);
 *   jn returns the zero it would round to without libm's O(n) loop when n
 *   is large and |x| is not (see bi_jn).
 * - min and max (TC_BI_MIN, TC_BI_MAX) are not math functions: the
 *   interpreter evaluates them in the operands' own type (they may be
 *   integers), so here they return NaN.
 *
 * Rounding functions: round is half away from zero, rint and nearbyint
 * round half to even (the default rounding mode, which tcomp never
 * changes), trunc/floor/ceil are the C ones. */

/* j0, j1, jn, y0, y1, yn are X/Open functions of libm. */
#define _XOPEN_SOURCE 700

#include "interp.h"

#include <float.h>
#include <limits.h>
#include <math.h>

static const double PI = 3.14159265358979323846264338327950288;
static const double SQRT2 = 1.41421356237309504880168872420969808;
/* sqrt(1/2) = SQRT1_2 + SQRT1_2_LO to about 2^-106. */
static const double SQRT1_2 = 0.70710678118654752440084436210484904;
static const double SQRT1_2_LO = -4.833646656726456518593584e-17;
/* 2 / sqrt(pi), sqrt(pi), sqrt(pi) / 2 and log(sqrt(pi)). */
static const double TWO_OVER_SQRTPI = 1.12837916709551257389615890312154517;
static const double SQRTPI = 1.77245385090551602729816748334114518;
static const double SQRTPI_2 = 0.88622692545275801364908374167057259;
static const double LOG_SQRTPI = 0.57236494292470008707171367567652935;

/* An integer argument passed as a double: truncated, clamped to
 * [-INT_MAX, INT_MAX] (jn(INT_MIN, x) would negate INT_MIN inside libm).
 * The caller has ruled out NaN. */
static int bi_int_arg(double x)
{
	if (x >= (double)INT_MAX)
		return INT_MAX;
	if (x <= -(double)INT_MAX)
		return -INT_MAX;
	return (int)x;
}

/* sin(pi x).  fmod is exact, and so are the reflections below (Sterbenz), so
 * the only rounding is in pi * r and the final sin/cos: about one ulp. */
static double bi_sinpi(double x)
{
	double r, s = 1.0, v;

	if (isnan(x) || isinf(x))
		return x - x; /* NaN */
	r = fmod(fabs(x), 2.0); /* [0, 2) */
	if (r >= 1.0) {
		s = -1.0; /* sin(pi (r + 1)) = -sin(pi r) */
		r -= 1.0;
	}
	if (r > 0.5)
		r = 1.0 - r; /* sin(pi (1 - r)) = sin(pi r) */
	if (r == 0.0)
		v = 0.0; /* integers: +0 here, the sign of x below */
	else if (r == 0.5)
		v = s;
	else if (r <= 0.25)
		v = s * sin(PI * r);
	else
		v = s * cos(PI * (0.5 - r));
	/* sinpi is odd; at integers it is +0 for x > 0 and -0 for x < 0. */
	if (v == 0.0)
		return copysign(0.0, x);
	return x < 0 ? -v : v;
}

/* cos(pi x), reduced like bi_sinpi.  cospi(n + 1/2) is +0. */
static double bi_cospi(double x)
{
	double r, s = 1.0;

	if (isnan(x) || isinf(x))
		return x - x; /* NaN */
	r = fmod(fabs(x), 2.0); /* cospi is even; [0, 2) */
	if (r > 1.0)
		r = 2.0 - r; /* cos(pi (2 - r)) = cos(pi r) */
	if (r > 0.5) {
		s = -1.0; /* cos(pi (1 - r)) = -cos(pi r) */
		r = 1.0 - r;
	}
	if (r == 0.5)
		return 0.0;
	if (r == 0.0)
		return s;
	if (r <= 0.25)
		return s * cos(PI * r);
	return s * sin(PI * (0.5 - r));
}

/* sqrt(a^2 + b^2 + c^2) without spurious overflow or underflow: the
 * arguments are scaled by a power of two (exactly) so that the largest is
 * in [0.5, 1). */
static double bi_norm3d(double a, double b, double c)
{
	double m;
	int e;

	if (isinf(a) || isinf(b) || isinf(c))
		return INFINITY;
	if (isnan(a) || isnan(b) || isnan(c))
		return NAN;
	a = fabs(a);
	b = fabs(b);
	c = fabs(c);
	m = fmax(a, fmax(b, c));
	if (m == 0.0)
		return 0.0;
	frexp(m, &e);
	a = ldexp(a, -e);
	b = ldexp(b, -e);
	c = ldexp(c, -e);
	return ldexp(sqrt(a * a + b * b + c * c), e);
}

/* Initial guess for erfinv: Winitzki's approximation (relative error about
 * 1e-3 over the whole range), written in terms of L = log(1 - x^2) so that
 * the tails can pass L = log(p (2 - p)) for x = 1 - p without forming 1 - p.
 * Returns y >= 0 with erf(y) ~ sqrt(1 - exp(L)). */
static double bi_erfinv_guess(double L)
{
	const double a = 0.147;
	double c = 2.0 / (PI * a) + 0.5 * L, d = -L / a, inner;

	/* inner = sqrt(c^2 + d) - c, without cancellation when c > 0. */
	if (c > 0)
		inner = d / (sqrt(c * c + d) + c);
	else
		inner = sqrt(c * c + d) - c;
	return sqrt(inner);
}

/* erfinv(x) for |x| <= 0.5: Halley's method on erf(y) = x, whose residual
 * is computed with relative accuracy there.  For tiny |x| the Maclaurin
 * series erfinv(x) = sqrt(pi)/2 (x + pi/12 x^3 + ...) is exact to rounding. */
static double bi_erfinv_central(double x)
{
	double y, u, step;
	int i;

	if (fabs(x) < 1e-6)
		return SQRTPI_2 * (x + (PI / 12.0) * x * x * x);
	y = copysign(bi_erfinv_guess(log1p(-x * x)), x);
	for (i = 0; i < 8; i++) {
		/* f = erf(y) - x, f' = 2/sqrt(pi) exp(-y^2), f'' = -2y f'. */
		u = (erf(y) - x) / (TWO_OVER_SQRTPI * exp(-y * y));
		step = u / (1.0 + y * u);
		y -= step;
		/* Convergence is cubic: after a step this small the error is
		 * far below an ulp. */
		if (fabs(step) <= 0x1p-30 * fabs(y))
			break;
	}
	return y;
}

/* log(erfc(y)) for y > 0.  Up to 25 libm's erfc is accurate and normal;
 * beyond, the asymptotic series
 *   erfc(y) = exp(-y^2) / (y sqrt(pi)) (1 - 1/(2y^2) + 3/(2y^2)^2 - ...)
 * converges to double precision within a dozen terms.  *ratio receives
 * exp(-y^2) / erfc(y), the factor of the derivative. */
static double bi_log_erfc(double y, double *ratio)
{
	double z, t, s;
	int k;

	if (y < 25.0) {
		double e = erfc(y);
		*ratio = exp(-y * y) / e;
		return log(e);
	}
	z = 1.0 / (2.0 * y * y);
	t = 1.0;
	s = 1.0;
	for (k = 1; k <= 12; k++) {
		t *= -(2 * k - 1) * z;
		s += t;
	}
	*ratio = y * SQRTPI / s;
	return -y * y - log(y) - LOG_SQRTPI + log(s);
}

/* erfcinv(p) for 0 < p < 0.5: Newton's method on log(erfc(y)) = log(p).
 * In log space the residual stays accurate for every positive double p,
 * subnormals included (erfc(y) itself underflows near y = 26.5). */
static double bi_erfcinv_tail(double p)
{
	double lp = log(p), y, g, ratio, step;
	int i;

	y = bi_erfinv_guess(lp + log(2.0 - p));
	for (i = 0; i < 12; i++) {
		/* g = log erfc(y) - log p, g' = -2/sqrt(pi) exp(-y^2) / erfc(y). */
		g = bi_log_erfc(y, &ratio) - lp;
		step = g / (-TWO_OVER_SQRTPI * ratio);
		y -= step;
		/* Convergence is quadratic (error^2 / 2y): after a step this
		 * small the error is far below an ulp. */
		if (fabs(step) <= 0x1p-35 * y)
			break;
	}
	return y;
}

/* Inverse error function: erfinv(+-1) = +-inf, NaN outside [-1, 1]. */
static double bi_erfinv(double x)
{
	double a = fabs(x);

	if (isnan(x) || a > 1.0)
		return NAN;
	if (a == 1.0)
		return copysign(INFINITY, x);
	if (a <= 0.5)
		return bi_erfinv_central(x);
	/* 1 - a is exact for a in [0.5, 1]. */
	return copysign(bi_erfcinv_tail(1.0 - a), x);
}

/* Inverse complementary error function: erfcinv(0) = +inf,
 * erfcinv(2) = -inf, NaN outside [0, 2].  erfcinv(2 - p) = -erfcinv(p) and
 * erfcinv(p) = erfinv(1 - p); every subtraction below is exact. */
static double bi_erfcinv(double p)
{
	if (isnan(p) || p < 0.0 || p > 2.0)
		return NAN;
	if (p == 0.0)
		return INFINITY;
	if (p == 2.0)
		return -INFINITY;
	if (p < 0.5)
		return bi_erfcinv_tail(p);
	if (p <= 1.5)
		return bi_erfinv_central(1.0 - p);
	return -bi_erfcinv_tail(2.0 - p);
}

/* The standard normal CDF, 0.5 erfc(-x / sqrt(2)).  The rounding error of
 * t = -x / sqrt(2) would be amplified 2t^2 times by erfc (1e-13 relative
 * error near x = -37), so t is carried as t_hi + t_lo and erfc corrected
 * to first order: erfc(t_hi + t_lo) = erfc(t_hi) - t_lo 2/sqrt(pi) exp(-t_hi^2). */
static double bi_normcdf(double x)
{
	double t_hi, t_lo;

	if (isnan(x) || isinf(x))
		return 0.5 * erfc(-x); /* NaN, 1 at +inf, 0 at -inf */
	t_hi = -x * SQRT1_2;
	t_lo = fma(-x, SQRT1_2, -t_hi) + -x * SQRT1_2_LO;
	return 0.5 * (erfc(t_hi) - t_lo * TWO_OVER_SQRTPI * exp(-t_hi * t_hi));
}

/* Inverse of the standard normal CDF: -inf at 0, +inf at 1, NaN outside
 * [0, 1]; +0 at 0.5. */
static double bi_normcdfinv(double p)
{
	if (isnan(p) || p < 0.0 || p > 1.0)
		return NAN;
	return -SQRT2 * bi_erfcinv(2.0 * p) + 0.0;
}

/* jn(n, x).  libm's jn takes O(|n|) steps, which for the n of int32 is
 * seconds per call; when |n| >= 1000 and |n| >= 3|x| the bound
 * |J_n(x)| <= (x/2)^n / n! <= (e|x| / 2|n|)^|n| < 0.46^1000 shows the result
 * rounds to zero, with the sign of the leading term (x/2)^n / n! (and
 * J_{-n} = (-1)^n J_n).  The remaining |n| < 3|x| cases cost O(|n|). */
static double bi_jn(double nd, double x)
{
	int n, m;

	if (isnan(nd) || isnan(x))
		return NAN;
	n = bi_int_arg(nd);
	m = n < 0 ? -n : n;
	if (m >= 1000 && (double)m >= 3.0 * fabs(x)) {
		int neg = (m & 1) && ((x < 0) != (n < 0));
		return neg ? -0.0 : 0.0;
	}
	return jn(n, x);
}

/* ilogb with CUDA's results for the special cases made explicit. */
static double bi_ilogb(double x)
{
	if (isnan(x))
		return FP_ILOGBNAN;
	if (x == 0.0)
		return FP_ILOGB0;
	if (isinf(x))
		return INT_MAX;
	return ilogb(x);
}

double tc_interp_builtin(tc_builtin_id id, __tc_keep const double *args)
{
	double x = args[0];

	switch (id) {
	/* ---- one argument ---- */
	case TC_BI_ACOS: return acos(x);
	case TC_BI_ACOSH: return acosh(x);
	case TC_BI_ASIN: return asin(x);
	case TC_BI_ASINH: return asinh(x);
	case TC_BI_ATAN: return atan(x);
	case TC_BI_ATANH: return atanh(x);
	case TC_BI_CBRT: return cbrt(x);
	case TC_BI_CEIL: return ceil(x);
	case TC_BI_COS: return cos(x);
	case TC_BI_COSH: return cosh(x);
	case TC_BI_COSPI: return bi_cospi(x);
	case TC_BI_ERF: return erf(x);
	case TC_BI_ERFC: return erfc(x);
	case TC_BI_ERFCINV: return bi_erfcinv(x);
	case TC_BI_ERFINV: return bi_erfinv(x);
	case TC_BI_EXP: return exp(x);
	case TC_BI_EXP10: return pow(10.0, x);
	case TC_BI_EXP2: return exp2(x);
	case TC_BI_EXPM1: return expm1(x);
	case TC_BI_FABS: return fabs(x);
	case TC_BI_FLOOR: return floor(x);
	case TC_BI_J0: return j0(x);
	case TC_BI_J1: return j1(x);
	case TC_BI_LGAMMA: return lgamma(x);
	case TC_BI_LOG: return log(x);
	case TC_BI_LOG10: return log10(x);
	case TC_BI_LOG1P: return log1p(x);
	case TC_BI_LOG2: return log2(x);
	case TC_BI_LOGB: return logb(x);
	case TC_BI_NEARBYINT: return nearbyint(x);
	case TC_BI_NORMCDF: return bi_normcdf(x);
	case TC_BI_NORMCDFINV: return bi_normcdfinv(x);
	case TC_BI_RCBRT: return 1.0 / cbrt(x);
	case TC_BI_RINT: return rint(x);
	case TC_BI_ROUND: return round(x);
	case TC_BI_RSQRT: return 1.0 / sqrt(x);
	case TC_BI_SIN: return sin(x);
	case TC_BI_SINH: return sinh(x);
	case TC_BI_SINPI: return bi_sinpi(x);
	case TC_BI_SQRT: return sqrt(x);
	case TC_BI_TAN: return tan(x);
	case TC_BI_TANH: return tanh(x);
	case TC_BI_TGAMMA: return tgamma(x);
	case TC_BI_TRUNC: return trunc(x);
	case TC_BI_Y0: return y0(x);
	case TC_BI_Y1: return y1(x);
	/* ---- two and three arguments ---- */
	case TC_BI_ATAN2: return atan2(x, args[1]);
	case TC_BI_COPYSIGN: return copysign(x, args[1]);
	case TC_BI_FDIM: return fdim(x, args[1]);
	/* a NaN operand ignored; ties (-0 against +0) keep the first operand */
	case TC_BI_FMAX: return isnan(args[1]) ? x : isnan(x) ? args[1] : x >= args[1] ? x : args[1];
	case TC_BI_FMIN: return isnan(args[1]) ? x : isnan(x) ? args[1] : x <= args[1] ? x : args[1];
	case TC_BI_FMOD: return fmod(x, args[1]);
	case TC_BI_HYPOT: return hypot(x, args[1]);
	case TC_BI_NEXTAFTER: return nextafter(x, args[1]);
	case TC_BI_POW: return pow(x, args[1]);
	case TC_BI_REMAINDER: return remainder(x, args[1]);
	case TC_BI_RHYPOT: return 1.0 / hypot(x, args[1]);
	case TC_BI_FMA: return fma(x, args[1], args[2]);
	case TC_BI_NORM3D: return bi_norm3d(x, args[1], args[2]);
	case TC_BI_RNORM3D: return 1.0 / bi_norm3d(x, args[1], args[2]);
	/* ---- integer results and arguments ---- */
	case TC_BI_ILOGB: return bi_ilogb(x);
	case TC_BI_JN: return bi_jn(x, args[1]);
	case TC_BI_YN: return isnan(x) ? NAN : yn(bi_int_arg(x), args[1]);
	case TC_BI_LDEXP:
		return isnan(args[1]) ? NAN : ldexp(x, bi_int_arg(args[1]));
	/* ---- evaluated by the interpreter in the operands' type ---- */
	case TC_BI_MIN:
	case TC_BI_MAX:
	case TC_BI_COUNT:
		return NAN;
	}
	return NAN;
}
