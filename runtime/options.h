/* Mapping options: one declarative table (name, values, default, doc) read
 * by the API, the CLI and, later, the autotuner and the kernel cache. */
#ifndef TC_RT_OPTIONS_H
#define TC_RT_OPTIONS_H

#include "tcomp.h"

#include "../lang/util.h"

/* A copy of o (NULL when out of memory). */
tc_options *tc_options_copy(const tc_options *o);

/* "name=value;..." for every option in table order (defaults filled in):
 * the options' part of a kernel's memo key.  NULL when out of memory. */
char *tc_rt_options_key(const tc_options *o);

/* Record an error message in ctx (which may be NULL: then nothing). */
void tc_rt_set_error(tc_context *ctx, const char *fmt, ...) TC_PRINTF(2, 3);

#endif
