/* Run-time checks of generated code, shared by every backend and by the
 * runtime that reports them.
 *
 * Generated code checks what range inference could not prove: reads whose
 * subscripts may leave the tensor (a gather, a read under a branch of ?: or
 * on the right of && and ||) and integer division or modulo by a divisor
 * that is not a constant.  Each check is a site, numbered in the order the
 * code generator made them; the first failing check of a run stores its
 * site number + 1 and the offending index in an error record the runtime
 * passes to the kernel (int64_t err[2], zero on entry), and the runtime
 * reports it with the interpreter's message at the site's location.
 *
 * Ownership: a site is plain data (no pointers); an array of sites belongs
 * to whatever the function that made it says (compiled code, an object,
 * or the caller). */
#ifndef TC_CG_CHECK_H
#define TC_CG_CHECK_H

#include "../lang/diag.h"

/* What a run-time check guards. */
typedef enum tc_cg_check {
	TC_CG_CHECK_BOUNDS, /* dimension dim of tensor read out of bounds */
	TC_CG_CHECK_DIV,    /* integer division (op '/') or modulo ('%') by zero */
} tc_cg_check;

/* One check of the generated code. */
typedef struct tc_cg_site {
	tc_cg_check kind;
	tc_loc loc; /* of the read or the division */
	int tensor, dim;
	char op; /* '/' or '%' */
} tc_cg_site;

#endif
