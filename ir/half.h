/* IEEE 754 binary16 conversions (round to nearest even, with subnormals,
 * infinities and NaN).
 *
 * Ownership: none.  Pure functions on values: nothing here allocates. */
#ifndef TC_HALF_H
#define TC_HALF_H

#include <stdint.h>

/* The binary16 value nearest to x (ties to even). */
uint16_t tc_half_from_double(double x);
/* The exact value of h. */
double tc_half_to_double(uint16_t h);

#endif
