/* CUDA C from the isl AST of a GPU-mapped tc_poly (see cuda.h).
 *
 * Owns: the prelude of every CUDA text (the contract's names under
 * NVRTC, which has no system headers). */
#include "cuda.h"

#include "../lang/util.h"

/* Under NVRTC: the fixed-width types and limits the expression printer
 * writes (c_expr.h), and the contract's macros.  NAN and INFINITY are
 * float constants, as in C. */
static const char prelude[] =
	"#ifndef TC_CUDA_EMU\n"
	"typedef signed char int8_t;\n"
	"typedef short int16_t;\n"
	"typedef int int32_t;\n"
	"typedef long long int64_t;\n"
	"typedef unsigned char uint8_t;\n"
	"typedef unsigned short uint16_t;\n"
	"typedef unsigned int uint32_t;\n"
	"typedef unsigned long long uint64_t;\n"
	"#define INT64_C(c) c##LL\n"
	"#define UINT64_C(c) c##ULL\n"
	"#define INT8_MIN (-128)\n"
	"#define INT8_MAX 127\n"
	"#define INT16_MIN (-32767 - 1)\n"
	"#define INT16_MAX 32767\n"
	"#define INT32_MIN (-2147483647 - 1)\n"
	"#define INT32_MAX 2147483647\n"
	"#define INT64_MIN (-INT64_C(9223372036854775807) - 1)\n"
	"#define INT64_MAX INT64_C(9223372036854775807)\n"
	"#define UINT8_MAX 255\n"
	"#define UINT16_MAX 65535\n"
	"#define UINT32_MAX 4294967295u\n"
	"#define UINT64_MAX UINT64_C(18446744073709551615)\n"
	"#define NAN __int_as_float(0x7fc00000)\n"
	"#define INFINITY __int_as_float(0x7f800000)\n"
	"#define FLT_MAX 3.40282346638528859812e+38F\n"
	"#define DBL_MAX 1.79769313486231570815e+308\n"
	"#define TC_GLOBAL(T) T *__restrict__\n"
	"#define TC_LDG(p, i) __ldg((p) + (i))\n"
	"#define TC_SHARED(T, name, n) __shared__ T name[n]\n"
	"#endif\n";

const char *tc_cg_cuda_prelude(void)
{
	return prelude;
}

void tc_cg_cuda_free(tc_cg_cuda *c)
{
	int i;
	if (!c)
		return;
	for (i = 0; i < c->nkernels; i++)
		tc_free(c->kernels[i].params);
	tc_free(c->kernels);
	if (c->names)
		for (i = 0; i < c->ntensors; i++)
			tc_free(c->names[i]);
	tc_free(c->names);
	tc_free(c->source);
	tc_free(c);
}
