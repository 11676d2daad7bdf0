/* Modules (runtime/module.c): the public tc_module_* functions and what the
 * rest of runtime/ asks of a module.
 *
 * Ownership: the module is borrowed; the IR functions and defs returned
 * live in the module's arena and are valid while the module lives. */
#ifndef TC_RT_MODULE_H
#define TC_RT_MODULE_H

#include "internal.h"

/* The number of the def called entry, or -1 with an error in m's context
 * listing the defs. */
int tc_rt_find_def(__tc_keep tc_module *m, const char *entry);
/* The IR of def i, lowered on first use (owned by m); NULL with an error. */
const tc_ir_func *tc_rt_module_func(__tc_keep tc_module *m, int i);
/* The def whose IR is f (tc_rt_module_func's result, or a function with its
 * name), or NULL; owned by m. */
const tc_def *tc_rt_module_def_of(__tc_keep const tc_module *m, __tc_keep const tc_ir_func *f);

#endif
