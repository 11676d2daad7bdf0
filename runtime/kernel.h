/* Kernels (runtime/kernel.c): tc_compile and tc_kernel_*, and object code
 * compiled the way tc_compile compiles, for the kernel cache.
 *
 * Ownership: the module, inputs and options are borrowed; object code goes
 * into the caller's tc_rt_object, which owns what is filled in. */
#ifndef TC_RT_KERNEL_H
#define TC_RT_KERNEL_H

#include "internal.h"

/* Compile entry of m for inputs with options to object code into o, whose
 * symbol the caller sets (the name of the kernel function).  0 ok; -1 with
 * an error in m's context (also for a backend that makes no object code,
 * such as target=interp). */
int tc_rt_compile_object(__tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs, __tc_keep const tc_options *options,
	__tc_keep tc_rt_object *o);

#endif
