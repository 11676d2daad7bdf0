/* Unit tests of ir/half.c: IEEE binary16 <-> double and bfloat16 <->
 * float/double/integer conversions. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/half.h"

static uint64_t bits_of(double x)
{
	uint64_t u;
	memcpy(&u, &x, sizeof(u));
	return u;
}

static double double_of(uint64_t u)
{
	double x;
	memcpy(&x, &u, sizeof(x));
	return x;
}

static int half_is_nan(uint16_t h)
{
	return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

/* Values with a known binary16 encoding, including the edges of the
 * normal, subnormal and overflow ranges. */
static void test_half_from_double_known_values(void **state)
{
	(void)state;
	assert_int_equal(tc_half_from_double(1.0), 0x3c00);
	assert_int_equal(tc_half_from_double(-2.0), 0xc000);
	assert_int_equal(tc_half_from_double(0.5), 0x3800);
	assert_int_equal(tc_half_from_double(0.0), 0x0000);
	assert_int_equal(tc_half_from_double(-0.0), 0x8000);
	assert_int_equal(tc_half_from_double(65504.0), 0x7bff); /* largest finite */
	assert_int_equal(tc_half_from_double(-65504.0), 0xfbff);
	assert_int_equal(tc_half_from_double(0x1p-14), 0x0400); /* smallest normal */
	assert_int_equal(tc_half_from_double(1023 * 0x1p-24), 0x03ff); /* largest subnormal */
	assert_int_equal(tc_half_from_double(0x1p-24), 0x0001); /* smallest subnormal */
	assert_int_equal(tc_half_from_double(-0x1p-24), 0x8001);
	assert_int_equal(tc_half_from_double(0.1), 0x2e66);
	assert_int_equal(tc_half_from_double(3.140625), 0x4248);
	assert_int_equal(tc_half_from_double(INFINITY), 0x7c00);
	assert_int_equal(tc_half_from_double(-INFINITY), 0xfc00);
}

/* Round to nearest, ties to even, in the normal and subnormal ranges. */
static void test_half_from_double_rounds_to_nearest_even(void **state)
{
	(void)state;
	/* 1 + 2^-11 is halfway between 0x3c00 and 0x3c01: even wins. */
	assert_int_equal(tc_half_from_double(1.0 + 0x1p-11), 0x3c00);
	assert_int_equal(tc_half_from_double(1.0 + 3 * 0x1p-11), 0x3c02);
	assert_int_equal(tc_half_from_double(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
	assert_int_equal(tc_half_from_double(1.0 + 0x1p-11 - 0x1p-40), 0x3c00);
	/* 2^-25 is halfway between 0 and the smallest subnormal: to 0. */
	assert_int_equal(tc_half_from_double(0x1p-25), 0x0000);
	assert_int_equal(tc_half_from_double(-0x1p-25), 0x8000);
	assert_int_equal(tc_half_from_double(nextafter(0x1p-25, 1.0)), 0x0001);
	assert_int_equal(tc_half_from_double(nextafter(0x1p-25, 0.0)), 0x0000);
	assert_int_equal(tc_half_from_double(3 * 0x1p-25), 0x0002);
	assert_int_equal(tc_half_from_double(5 * 0x1p-25), 0x0002);
	/* Halfway between the largest subnormal and the smallest normal. */
	assert_int_equal(tc_half_from_double(1023.5 * 0x1p-24), 0x0400);
	/* Carry out of the fraction bumps the exponent. */
	assert_int_equal(tc_half_from_double(2.0 - 0x1p-12), 0x4000);
}

/* Magnitudes from 65520 (the midpoint above 65504) up become infinity;
 * tiny ones and double subnormals become signed zeros. */
static void test_half_from_double_overflow_and_underflow(void **state)
{
	(void)state;
	assert_int_equal(tc_half_from_double(65519.99), 0x7bff);
	assert_int_equal(tc_half_from_double(65520.0), 0x7c00);
	assert_int_equal(tc_half_from_double(-65520.0), 0xfc00);
	assert_int_equal(tc_half_from_double(65536.0), 0x7c00);
	assert_int_equal(tc_half_from_double(1e300), 0x7c00);
	assert_int_equal(tc_half_from_double(DBL_MAX), 0x7c00);
	assert_int_equal(tc_half_from_double(1e-300), 0x0000);
	assert_int_equal(tc_half_from_double(-1e-300), 0x8000);
	assert_int_equal(tc_half_from_double(double_of(1)), 0x0000); /* double subnormal */
	assert_int_equal(tc_half_from_double(-double_of(1)), 0x8000);
}

/* NaNs stay NaNs with their sign and the top of their payload; a payload
 * that would vanish becomes the quiet NaN. */
static void test_half_from_double_keeps_nans(void **state)
{
	(void)state;
	assert_true(half_is_nan(tc_half_from_double(NAN)));
	assert_int_equal(tc_half_from_double(double_of(UINT64_C(0x7ff8000000000000))), 0x7e00);
	assert_int_equal(tc_half_from_double(double_of(UINT64_C(0xfff8000000000000))), 0xfe00);
	assert_int_equal(tc_half_from_double(double_of(UINT64_C(0x7ff0000000000001))), 0x7e00);
	assert_int_equal(tc_half_from_double(double_of(UINT64_C(0x7ffc000000000000))), 0x7f00);
}

static void test_half_to_double_known_values(void **state)
{
	double z;
	(void)state;
	assert_true(tc_half_to_double(0x3c00) == 1.0);
	assert_true(tc_half_to_double(0xc000) == -2.0);
	assert_true(tc_half_to_double(0x7bff) == 65504.0);
	assert_true(tc_half_to_double(0x0400) == 0x1p-14);
	assert_true(tc_half_to_double(0x03ff) == 1023 * 0x1p-24);
	assert_true(tc_half_to_double(0x0001) == 0x1p-24);
	assert_true(tc_half_to_double(0x2e66) == 0.0999755859375);
	assert_true(tc_half_to_double(0x7c00) == INFINITY);
	assert_true(tc_half_to_double(0xfc00) == -INFINITY);
	z = tc_half_to_double(0x8000);
	assert_true(z == 0.0 && signbit(z));
	z = tc_half_to_double(0x0000);
	assert_true(z == 0.0 && !signbit(z));
	assert_true(isnan(tc_half_to_double(0x7e00)));
	assert_true(isnan(tc_half_to_double(0x7c01))); /* signalling NaN */
	assert_true(isnan(tc_half_to_double(0xfe00)) && signbit(tc_half_to_double(0xfe00)));
}

/* half -> double -> half is the identity on all 65536 patterns, NaNs
 * included (payload and quiet bit kept), and to_double is exact: it agrees
 * with the value computed from the fields with ldexp. */
static void test_half_round_trip_is_identity_for_all_patterns(void **state)
{
	uint32_t h;
	(void)state;
	for (h = 0; h < 0x10000; h++) {
		double d = tc_half_to_double((uint16_t)h);
		uint16_t back = tc_half_from_double(d);
		int exp = (int)(h >> 10) & 0x1f, frac = (int)(h & 0x3ff);
		if (half_is_nan((uint16_t)h)) {
			assert_true(isnan(d));
		} else {
			double want = exp == 0 ? ldexp(frac, -24)
				: exp == 31 ? INFINITY : ldexp(frac | 0x400, exp - 25);
			if (h & 0x8000)
				want = -want;
			assert_true(bits_of(d) == bits_of(want));
		}
		assert_int_equal(back, h);
	}
}

/* For every pair of adjacent finite positive halves, the exact midpoint
 * rounds to the one with an even last bit and anything off the midpoint
 * rounds to the nearer one; the same holds for negatives by symmetry. */
static void test_half_rounding_at_every_midpoint(void **state)
{
	uint32_t h;
	(void)state;
	for (h = 0; h < 0x7c00; h++) {
		double a = tc_half_to_double((uint16_t)h);
		double b = h + 1 == 0x7c00 ? 65536.0 : tc_half_to_double((uint16_t)(h + 1));
		double mid = (a + b) / 2; /* exact: a and b are 11-bit numbers */
		uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
		assert_int_equal(tc_half_from_double(mid), even);
		assert_int_equal(tc_half_from_double(nextafter(mid, 0.0)), h);
		assert_int_equal(tc_half_from_double(nextafter(mid, INFINITY)), h + 1);
		assert_int_equal(tc_half_from_double(-mid), even | 0x8000);
		assert_int_equal(tc_half_from_double(-nextafter(mid, 0.0)), h | 0x8000);
	}
}

/* ---- bfloat16 ---- */

static int bf16_is_nan(uint16_t h)
{
	return (h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0;
}

static uint32_t fbits_of(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	return u;
}

/* Known encodings: the edges of the normal, subnormal and overflow ranges
 * (bfloat16 has float32's exponent range), and NaNs made quiet with their
 * sign and top payload bits kept. */
static void test_bf16_known_values(void **state)
{
	(void)state;
	assert_int_equal(tc_bf16_from_double(1.0), 0x3f80);
	assert_int_equal(tc_bf16_from_double(-2.0), 0xc000);
	assert_int_equal(tc_bf16_from_double(0.1), 0x3dcd); /* 0x3dcccccd rounds up */
	assert_int_equal(tc_bf16_from_double(3.140625), 0x4049);
	assert_int_equal(tc_bf16_from_double(-0.0), 0x8000);
	assert_int_equal(tc_bf16_from_double(0x1.fep127), 0x7f7f); /* largest finite */
	assert_true(tc_bf16_to_double(0x7f7f) == 0x1.fep127);
	assert_int_equal(tc_bf16_from_double(0x1.ffp127), 0x7f80); /* the midpoint: even is inf */
	assert_int_equal(tc_bf16_from_double(nextafter(0x1.ffp127, 0)), 0x7f7f);
	assert_int_equal(tc_bf16_from_double(FLT_MAX), 0x7f80);
	assert_int_equal(tc_bf16_from_double(1e300), 0x7f80);
	assert_int_equal(tc_bf16_from_double(-INFINITY), 0xff80);
	assert_int_equal(tc_bf16_from_double(0x1p-126), 0x0080); /* smallest normal */
	assert_int_equal(tc_bf16_from_double(0x1p-133), 0x0001); /* smallest subnormal */
	assert_int_equal(tc_bf16_from_double(0x1p-134), 0x0000); /* the midpoint: even is 0 */
	assert_int_equal(tc_bf16_from_double(nextafter(0x1p-134, 1)), 0x0001);
	assert_int_equal(tc_bf16_from_double(-1e-300), 0x8000);
	assert_int_equal(tc_bf16_from_double(NAN) & 0x7fc0, 0x7fc0);
	assert_int_equal(tc_bf16_from_double(double_of(UINT64_C(0xfff8000000000000))), 0xffc0);
	assert_int_equal(tc_bf16_from_float(tc_bf16_to_float(0x7f81)), 0x7fc1); /* made quiet */
	assert_int_equal(tc_bf16_from_double(double_of(UINT64_C(0x7ff0000000000001))) & 0x7fc0,
		0x7fc0);
}

/* Every pattern: to_float puts it in the top half of a float (so the
 * value is exact), and back again it is the identity, but for signalling
 * NaNs, which come back quiet (the quiet bit set, the rest kept). */
static void test_bf16_round_trip_for_all_patterns(void **state)
{
	uint32_t h;
	(void)state;
	for (h = 0; h < 0x10000; h++) {
		float f = tc_bf16_to_float((uint16_t)h);
		double d = tc_bf16_to_double((uint16_t)h);
		uint16_t want = bf16_is_nan((uint16_t)h) ? (uint16_t)(h | 0x40) : (uint16_t)h;
		assert_int_equal(fbits_of(f), h << 16);
		assert_true(bf16_is_nan((uint16_t)h) ? isnan(d) : d == (double)f);
		assert_int_equal(tc_bf16_from_float(f), want);
		assert_int_equal(tc_bf16_from_double(d), want);
	}
}

/* For every pair of adjacent finite positive bfloat16 values, the exact
 * midpoint rounds to the even one and the doubles next to it (which are
 * not floats: they take the round-to-odd path) to the nearer one; the
 * same for negatives; and every float next to the midpoint too. */
static void test_bf16_rounding_at_every_midpoint(void **state)
{
	uint32_t h;
	(void)state;
	for (h = 0; h < 0x7f80; h++) {
		double a = tc_bf16_to_double((uint16_t)h);
		double b = h + 1 == 0x7f80 ? 0x1p128 : tc_bf16_to_double((uint16_t)(h + 1));
		double mid = (a + b) / 2; /* exact */
		uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
		assert_int_equal(tc_bf16_from_double(mid), even);
		assert_int_equal(tc_bf16_from_double(nextafter(mid, 0.0)), h);
		assert_int_equal(tc_bf16_from_double(nextafter(mid, INFINITY)), h + 1);
		assert_int_equal(tc_bf16_from_double(-mid), even | 0x8000);
		assert_int_equal(tc_bf16_from_double(-nextafter(mid, 0.0)), h | 0x8000);
		assert_int_equal(tc_bf16_from_double(-nextafter(mid, INFINITY)), (h + 1) | 0x8000);
		if (h + 1 < 0x7f80) { /* the floats around the midpoint */
			assert_int_equal(tc_bf16_from_float(nextafterf((float)mid, 0.0f)), h);
			assert_int_equal(tc_bf16_from_float(nextafterf((float)mid, INFINITY)), h + 1);
		}
	}
}

/* The bfloat16 nearest m (ties to even), by integer arithmetic alone. */
static double bf16_of_u64_reference(uint64_t m)
{
	int p = 63, sh;
	uint64_t keep, rem, half;
	if (m < 256)
		return (double)m;
	while (!(m >> p))
		p--;
	sh = p - 7; /* keep 8 significant bits */
	keep = m >> sh;
	rem = m & ((UINT64_C(1) << sh) - 1);
	half = UINT64_C(1) << (sh - 1);
	if (rem > half || (rem == half && (keep & 1)))
		keep++;
	return ldexp((double)keep, sh);
}

/* Integers round once, also beyond 2^53 where going through double would
 * round twice: 2^60 + 2^52 + 1 is just above a midpoint (a double would
 * round it onto the midpoint, and then to even, down). */
static void test_bf16_from_integers_round_once(void **state)
{
	static const uint64_t hard[] = {0, 1, 255, 256, 257, 383, 384, 385, UINT64_C(1) << 24,
		(UINT64_C(1) << 24) + 1,
		(UINT64_C(1) << 60) + (UINT64_C(1) << 52) + 1, (UINT64_C(1) << 60) + (UINT64_C(1) << 52),
		(UINT64_C(1) << 53) + 1, UINT64_MAX, UINT64_MAX >> 1, (UINT64_C(1) << 63) + 1,
		(UINT64_C(3) << 61) + (UINT64_C(1) << 54) + 1};
	uint64_t s = 0x9e3779b97f4a7c15u;
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(hard) / sizeof(hard[0]) + 20000; i++) {
		uint64_t m;
		int64_t v;
		if (i < sizeof(hard) / sizeof(hard[0])) {
			m = hard[i];
		} else { /* random magnitudes of every length */
			s ^= s << 13, s ^= s >> 7, s ^= s << 17;
			m = s >> (s % 64);
		}
		assert_true(tc_bf16_to_double(tc_bf16_from_u64(m)) == bf16_of_u64_reference(m));
		v = (int64_t)m;
		if (v == INT64_MIN)
			assert_true(tc_bf16_to_double(tc_bf16_from_i64(v)) == -0x1p63);
		else if (v < 0)
			assert_true(tc_bf16_to_double(tc_bf16_from_i64(v)) ==
				-bf16_of_u64_reference(0 - (uint64_t)v));
		else
			assert_true(tc_bf16_to_double(tc_bf16_from_i64(v)) == bf16_of_u64_reference(m));
	}
	assert_true(tc_bf16_to_double(tc_bf16_from_u64((UINT64_C(1) << 60) + (UINT64_C(1) << 52) + 1)) ==
		0x1p60 + 0x1p53);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_half_from_double_known_values),
		cmocka_unit_test(test_half_from_double_rounds_to_nearest_even),
		cmocka_unit_test(test_half_from_double_overflow_and_underflow),
		cmocka_unit_test(test_half_from_double_keeps_nans),
		cmocka_unit_test(test_half_to_double_known_values),
		cmocka_unit_test(test_half_round_trip_is_identity_for_all_patterns),
		cmocka_unit_test(test_half_rounding_at_every_midpoint),
		cmocka_unit_test(test_bf16_known_values),
		cmocka_unit_test(test_bf16_round_trip_for_all_patterns),
		cmocka_unit_test(test_bf16_rounding_at_every_midpoint),
		cmocka_unit_test(test_bf16_from_integers_round_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
