/* IEEE 754 binary16 and bfloat16 conversions (round to nearest even, with
 * subnormals, infinities and NaN).
 *
 * Ownership: none.  Pure functions on values: nothing here allocates. */
#ifndef TC_HALF_H
#define TC_HALF_H

#include <stdint.h>

/* The binary16 value nearest to x (ties to even). */
uint16_t tc_half_from_double(double x);
/* The exact value of h. */
double tc_half_to_double(uint16_t h);

/* The bfloat16 value nearest to x (ties to even), in one rounding from the
 * double (not through float, which could round twice).  A NaN keeps its
 * sign and the top 7 bits of its payload, with the quiet bit set (as
 * x86's VCVTNEPS2BF16). */
uint16_t tc_bf16_from_double(double x);
/* The bfloat16 value nearest to float x (ties to even; NaN as above). */
uint16_t tc_bf16_from_float(float x);
/* The exact value of bfloat16 h (float32 with h as its top 16 bits). */
float tc_bf16_to_float(uint16_t h);
/* The bfloat16 value nearest to integer v (ties to even), in one rounding:
 * beyond 2^53 the bits shifted out are kept as a sticky bit, so the double
 * in between rounds to odd and the bfloat16 result is still correct. */
uint16_t tc_bf16_from_i64(int64_t v);
uint16_t tc_bf16_from_u64(uint64_t v);
double tc_bf16_to_double(uint16_t h);

/* The largest finite bfloat16, (2 - 2^-7) * 2^127 = 3.3895313892515355e38
 * (bits 0x7f7f): the identity of min=! on bfloat16. */
#define TC_BF16_MAX 0x1.fep127

#endif
