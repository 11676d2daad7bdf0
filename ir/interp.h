/* The reference interpreter: executes IR functions on concrete tensors with
 * exact TC semantics.  It is the ground truth for every backend, so it is
 * written to be obviously correct rather than fast: every statement is run
 * point by point over its domain in textual order, every value is computed
 * in its static type (integers wrap in their width, float16 results are
 * rounded to binary16, float32 results to binary32), and every tensor access
 * is bounds-checked (the "checked mode").
 *
 * Ownership: everything passed in is borrowed (the outputs' data is written,
 * never freed); the temporaries are allocated and freed inside
 * tc_interp_run, and nothing is left for the caller to free. */
#ifndef TC_INTERP_H
#define TC_INTERP_H

#include "ir.h"

/* Run f.  params come from tc_ir_bind; inputs and outputs are dense tensors
 * of the shapes tc_ir_shape gives (outputs are allocated by the caller; their
 * previous contents are what reductions without '!' accumulate into).
 * Temporaries are allocated and freed here.  Run-time errors (out-of-bounds
 * gathers, sizes that make a range empty) go to d with the location of the
 * culprit in f->src.  contract: sums and differences with a product, and
 * sum reductions of products, round once (the rule of tc_ir_fma_of and
 * tc_ir_fma_reduction, which the compiled code follows under the contract
 * option); 0: every operation rounds. */
tc_stat tc_interp_run(__tc_keep const tc_ir_func *f, __tc_keep const int64_t *params,
	__tc_keep const tc_tensor *inputs, __tc_keep const tc_tensor *outputs,
	int contract, __tc_keep tc_diags *d);

/* Evaluate builtin id on double arguments (the interpreter computes every
 * floating builtin in double and rounds to the result type).  Integer
 * arguments (n of jn/yn, exponent of ldexp) are passed as doubles holding
 * integers.  ilogb returns its int result as a double. */
double tc_interp_builtin(tc_builtin_id id, __tc_keep const double *args);

#endif
