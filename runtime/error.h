/* Errors of the library: one message per (thread, context), as
 * include/tcomp.h promises (tc_context_error).  A leaf of runtime/: every
 * other file reports through it.
 *
 * Messages are whole lines: "error: " + text + "\n", or rendered
 * diagnostics (file:line:col, the source line and a caret).
 *
 * Ownership: messages belong to the library (kept per thread and context,
 * freed when replaced or cleared, when the context is freed or when the
 * thread exits); contexts and diagnostics passed in are borrowed. */
#ifndef TC_RT_ERROR_H
#define TC_RT_ERROR_H

#include "tcomp.h"

#include "../lang/diag.h"

/* Record an error message in ctx (which may be NULL: then nothing).  Its
 * kind (tc_context_error_kind) follows the library's convention for the
 * format: "out of memory..." TC_ERROR_NOMEM, "...internal error..."
 * TC_ERROR_INTERNAL, anything else TC_ERROR_USER. */
void tc_rt_set_error(__tc_keep tc_context *ctx, const char *fmt, ...) TC_PRINTF(2, 3);
/* Record rendered diagnostics (errors and warnings of d) as ctx's error
 * (ctx NULL: nothing); "out of memory" when d holds no error.  Kind:
 * TC_ERROR_NOMEM when an allocation failed or d holds no error,
 * TC_ERROR_INTERNAL when an error is an "internal error", else
 * TC_ERROR_USER. */
void tc_rt_set_error_diags(__tc_keep tc_context *ctx, __tc_keep const tc_diags *d);
/* Forget the calling thread's error for ctx. */
void tc_rt_clear_error(__tc_keep tc_context *ctx);
/* The same for a context being freed (tc_context_free). */
void tc_rt_error_forget(__tc_keep const tc_context *ctx);
/* A number for a new context, unique in the process: a context made at a
 * freed one's address does not see the old one's messages. */
uint64_t tc_rt_error_serial(void);

#endif
