/* IEEE 754 binary16 <-> double and bfloat16 <-> float/double, in portable
 * C on the bit patterns.
 *
 * The compiler's _Float16 is not used: it is missing on some targets and its
 * conversions go through float on others (double rounding).  Working on the
 * integer bits gives one correctly rounded step and keeps NaN payloads.
 *
 * binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits.
 * binary64: 1 sign bit, 11 exponent bits (bias 1023), 52 fraction bits.
 * bfloat16: binary32's top 16 bits: 1 sign bit, 8 exponent bits (bias 127),
 * 7 fraction bits; float32's range with 8 significant bits. */
#include "half.h"

#include <math.h>
#include <string.h>

#define TC_HALF_SIGN 0x8000u
#define TC_HALF_INF 0x7c00u
#define TC_HALF_QUIET 0x0200u /* the quiet bit, top of the fraction */
#define TC_HALF_FRAC 0x03ffu

static uint64_t tc_half_double_bits(double x)
{
	uint64_t u;
	memcpy(&u, &x, sizeof(u));
	return u;
}

static double tc_half_bits_double(uint64_t u)
{
	double x;
	memcpy(&x, &u, sizeof(x));
	return x;
}

/* The binary16 value nearest to x, ties to even.  Magnitudes that round
 * above 65504 become infinity (the largest finite half is 65504; 65520 is the
 * midpoint to the next power of two and rounds to even, i.e. up, to inf).
 * NaNs keep their sign and the top 10 bits of their payload, so the quiet bit
 * survives and half -> double -> half is the identity for every pattern; a
 * NaN whose kept payload would be zero gets the quiet bit so it stays a NaN. */
uint16_t tc_half_from_double(double x)
{
	uint64_t u = tc_half_double_bits(x);
	uint16_t sign = (uint16_t)((u >> 48) & TC_HALF_SIGN);
	int exp = (int)((u >> 52) & 0x7ff);
	uint64_t frac = u & ((UINT64_C(1) << 52) - 1);
	uint64_t sig, rest, halfway, r;
	int e, shift;

	if (exp == 0x7ff) {
		uint16_t payload = (uint16_t)(frac >> 42);
		if (frac == 0)
			return (uint16_t)(sign | TC_HALF_INF);
		if (payload == 0)
			payload = TC_HALF_QUIET;
		return (uint16_t)(sign | TC_HALF_INF | payload);
	}
	/* Zero and double subnormals (below 2^-1022) round to a signed zero. */
	if (exp == 0)
		return sign;
	e = exp - 1023; /* x = sig * 2^(e - 52), sig in [2^52, 2^53) */
	if (e > 15)
		return (uint16_t)(sign | TC_HALF_INF);
	if (e < -25) /* below 2^-25: under half the smallest subnormal */
		return sign;
	sig = frac | (UINT64_C(1) << 52);
	/* Keep 11 significant bits for normals (quantum 2^(e-10)), fewer for
	 * subnormals whose quantum is fixed at 2^-24. */
	shift = 42 + (e < -14 ? -14 - e : 0); /* 42 .. 53 */
	r = sig >> shift;
	rest = sig & ((UINT64_C(1) << shift) - 1);
	halfway = UINT64_C(1) << (shift - 1);
	if (rest > halfway || (rest == halfway && (r & 1)))
		r++;
	/* For normals r holds the implicit bit (2^10); adding it to the biased
	 * exponent field minus one lets a carry out of the fraction bump the
	 * exponent, up to infinity.  For subnormals r is the fraction itself and
	 * r == 2^10 is exactly the smallest normal. */
	if (e >= -14)
		r += (uint64_t)(e + 14) << 10;
	if (r >= TC_HALF_INF)
		return (uint16_t)(sign | TC_HALF_INF);
	return (uint16_t)(sign | r);
}

/* The exact value of h as a double (every binary16 value is representable).
 * NaNs map to double NaNs with the same sign and the 10 payload bits at the
 * top of the double's fraction, so the quiet bit stays the quiet bit. */
double tc_half_to_double(uint16_t h)
{
	uint64_t sign = (uint64_t)(h & TC_HALF_SIGN) << 48;
	int exp = (h >> 10) & 0x1f;
	uint64_t frac = h & TC_HALF_FRAC;

	if (exp == 0x1f)
		return tc_half_bits_double(sign | (UINT64_C(0x7ff) << 52) | (frac << 42));
	if (exp == 0) {
		/* Subnormal or zero: frac * 2^-24, exact in double. */
		double v = (double)frac * 0x1p-24;
		return sign ? -v : v;
	}
	return tc_half_bits_double(sign | ((uint64_t)(exp - 15 + 1023) << 52) | (frac << 42));
}

#define TC_BF16_QUIET 0x0040u /* the quiet bit, top of the fraction */

static uint32_t tc_bf16_float_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	return u;
}

/* Round to nearest even on the float's bits: adding 0x7fff plus the kept
 * part's lowest bit carries into the kept part exactly when the dropped
 * half is above the midpoint, or at it with an odd kept part; a carry out
 * of the fraction bumps the exponent, up to infinity (0x7f80). */
uint16_t tc_bf16_from_float(float x)
{
	uint32_t u = tc_bf16_float_bits(x);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN */
		return (uint16_t)((u >> 16) | TC_BF16_QUIET);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* One correct rounding from double: round to float32 *to odd* first (the
 * float nearest x toward zero, with its lowest bit set when x is not
 * exactly a float), then to nearest even in bfloat16.  Round to odd keeps
 * the information of every dropped bit in the lowest one, so the second
 * rounding is the correct one from x itself (float's 24 bits are more
 * than bfloat16's 8 + 2).  The same steps are what the LLVM back end emits
 * (codegen/llvm_expr.c), so compiled code and the interpreter agree. */
uint16_t tc_bf16_from_double(double x)
{
	float f = (float)x;
	uint32_t u;
	if (x != x || (double)f == x) /* NaN, or exactly a float */
		return tc_bf16_from_float(f);
	u = tc_bf16_float_bits(f);
	if (fabs((double)f) > fabs(x)) /* rounded away from zero: step back */
		u--;
	u |= 1;
	memcpy(&f, &u, sizeof(f));
	return tc_bf16_from_float(f);
}

/* The exact value of h: a float whose top 16 bits are h (NaNs keep their
 * payload). */
float tc_bf16_to_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* The exact value of h as a double (through the float, exactly). */
double tc_bf16_to_double(uint16_t h)
{
	return (double)tc_bf16_to_float(h);
}

/* The double nearest v rounded to odd: exact below 2^53, else the top bits
 * with the dropped ones or-ed into the lowest (round to odd at 43 or more
 * bits), times the power of two shifted out (exact). */
static double tc_bf16_u64_odd(uint64_t m)
{
	if (m < (UINT64_C(1) << 53))
		return (double)m;
	return (double)((m >> 11) | ((m & 0x7ffu) != 0)) * 2048.0;
}

/* The bfloat16 nearest v, in one rounding (through tc_bf16_u64_odd). */
uint16_t tc_bf16_from_u64(uint64_t v)
{
	return tc_bf16_from_double(tc_bf16_u64_odd(v));
}

/* The bfloat16 nearest v, in one rounding: the magnitude as for uint64,
 * then the sign (rounding to nearest even is symmetric). */
uint16_t tc_bf16_from_i64(int64_t v)
{
	uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	double d = tc_bf16_u64_odd(m);
	return tc_bf16_from_double(v < 0 ? -d : d);
}
