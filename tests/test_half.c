/* Unit tests of ir/half.c: IEEE binary16 <-> double conversions. */
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
