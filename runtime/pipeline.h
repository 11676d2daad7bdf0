/* The compilation pipeline (runtime/pipeline.c): one driver for compiling
 * kernels, making object code for the kernel cache and printing stages.
 *
 *   IR function --rewrites--> IR (share, inline, pack: a list)
 *     --polyhedral/--> model --schedule passes (the backend's named list)-->
 *     schedule tree --> AST --backend--> code, object code or text.
 *
 * Every setting comes from the typed options (tc_rt_opts) and the target
 * description (tc_target); no stage reads an option string.
 *
 * Ownership: everything passed in is borrowed; rewritten IR lives in the
 * arena passed in; code goes into the tc_rt_compiled (which owns it),
 * object code into the caller's tc_rt_object, text to the caller. */
#ifndef TC_RT_PIPELINE_H
#define TC_RT_PIPELINE_H

#include "backend.h"

/* The IR rewrites, in order, of f bound to params (concrete sizes) as o
 * asks, for target t: a new function in ar, or f itself when none applies;
 * NULL when out of memory. */
const tc_ir_func *tc_rt_pipeline_rewrite(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const tc_rt_opts *o,
	__tc_keep const tc_target *t);

/* Add the warnings of d (a schedule that fell back because isl ran past
 * its budget) to ctx's warnings, each message once; the caller holds
 * ctx's lock (or is its one thread). */
void tc_rt_context_add_warnings(__tc_keep tc_context *ctx, __tc_keep const tc_diags *d);

/* Compile c (bound, rewritten, with its backend, options and target set):
 * load obj_in (NULL: none) when it is object code of c's def that loads;
 * else build, schedule and generate the AST of c->cf and hand it to the
 * backend, which compiles it into c->code or, with obj_out, into object
 * code there (obj_out->symbol set by the caller; left empty when the
 * backend makes no object code).  -1 with a message in d. */
tc_stat tc_rt_pipeline_compile(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_rt_object *obj_in, __tc_keep tc_rt_object *obj_out,
	__tc_keep tc_diags *d);

/* The text of stage ("schedule", "schedule:PASS", "ast", "c", or one of the
 * backend's own stages: see tc_rt_pipeline_stage_ok) of cf for params
 * (NULL: parametric) through backend b's pipeline with options o (NULL:
 * the model's defaults) and target t (NULL: b's machine).  NULL with a
 * message in d. */
__tc_give char *tc_rt_pipeline_emit(__tc_keep const tc_rt_backend *b,
	__tc_keep const tc_ir_func *cf, __tc_keep const int64_t *params,
	__tc_keep const tc_rt_opts *o, __tc_keep const tc_target *t, const char *stage,
	__tc_keep tc_diags *d);
/* Whether the pipeline of b prints stage: 1 yes, 2 yes but only for
 * concrete sizes (a backend's own stages), 0 no. */
int tc_rt_pipeline_stage_ok(__tc_keep const tc_rt_backend *b, const char *stage);

#endif
