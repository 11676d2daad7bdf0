/* The stages of compilation as text (tc_module_emit, tc_kernel_emit): the
 * front end's (syntax, ir, canonical) and, through the pipeline
 * (runtime/pipeline.h), the schedule, the AST, C, and the backend's own
 * stages.  A module's def is shown parametric in its sizes with the
 * model's default passes; a kernel's as it was compiled. */
#include "tcomp.h"

#include "backend.h"
#include "compiled.h"
#include "error.h"
#include "module.h"
#include "options.h"
#include "pipeline.h"

#include <pthread.h>
#include <string.h>

/* The backend of the default options (the target option's default). */
static const tc_rt_backend *default_backend(void)
{
	tc_rt_opts o;
	tc_rt_opts_decode(NULL, &o);
	return tc_rt_backend_find(o.backend);
}

/* Run the pipeline for stage; NULL with the error in m's context. */
static char *pipeline_text(tc_module *m, const tc_rt_backend *b, const tc_ir_func *f,
	const int64_t *params, const tc_rt_opts *o, const tc_target *t, const char *stage)
{
	tc_diags d;
	char *text;
	if (!f)
		return NULL;
	tc_diags_init(&d, m->src);
	if (!(text = tc_rt_pipeline_emit(b, f, params, o, t, stage, &d))) {
		tc_rt_set_error_diags(m->ctx, &d);
	} else if (d.nwarnings) {
		pthread_mutex_lock(&m->ctx->lock);
		tc_rt_context_add_warnings(m->ctx, &d);
		pthread_mutex_unlock(&m->ctx->lock);
	}
	tc_diags_clear(&d);
	return text;
}

/* ", and with shapes llvm, asm": the stages of b's pipeline that need
 * concrete sizes, for messages. */
static void put_shape_stages(tc_buf *b, const tc_rt_backend *be)
{
	int i;
	for (i = 0; be->pipeline->stages && be->pipeline->stages[i]; i++)
		tc_buf_printf(b, "%s%s", i ? ", " : ", and with shapes ", be->pipeline->stages[i]);
}

char *tc_module_emit(tc_module *m, const char *entry, const char *stage)
{
	const tc_rt_backend *be = default_backend();
	tc_buf b;
	int i, ok;
	if (!m)
		return NULL;
	tc_rt_clear_error(m->ctx);
	if ((i = tc_rt_find_def(m, entry)) < 0)
		return NULL;
	tc_buf_init(&b);
	ok = stage ? tc_rt_pipeline_stage_ok(be, stage) : 0;
	if (stage && !strcmp(stage, "syntax")) {
		tc_ast_print_def(m->prog->defs[i], &b);
	} else if (stage && !strcmp(stage, "ir")) {
		const tc_ir_func *f = tc_rt_module_func(m, i);
		if (!f)
			return NULL;
		tc_ir_print(f, &b);
	} else if (stage && !strcmp(stage, "canonical")) {
		tc_ir_canonical(m->prog->defs[i], &b);
	} else if (ok == 1) {
		return pipeline_text(m, be, tc_rt_module_func(m, i), NULL, NULL, NULL, stage);
	} else if (ok == 2) {
		tc_rt_set_error(m->ctx, "stage '%s' needs input shapes (tcomp emit --shape A=64x32 ...; tc_kernel_emit)",
			stage);
		return NULL;
	} else {
		put_shape_stages(&b, be);
		tc_rt_set_error(m->ctx, "unknown stage '%s' (stages: syntax, ir, canonical, schedule, ast, c%s)",
			stage ? stage : "(null)", b.s ? b.s : "");
		tc_buf_free(&b);
		return NULL;
	}
	if (b.oom) {
		tc_rt_set_error(m->ctx, "out of memory");
		tc_buf_free(&b);
		return NULL;
	}
	return tc_buf_take(&b);
}

char *tc_kernel_emit(tc_kernel *k, const char *stage)
{
	const tc_rt_compiled *c;
	if (!k)
		return NULL;
	c = k->c;
	tc_rt_clear_error(k->m->ctx);
	if (c->code_of) /* code compiled for other free sizes: show that code */
		c = c->code_of;
	if (stage && c->code && c->backend->code_text) { /* the text compiled, if kept */
		char *text = c->backend->code_text(c->code, stage);
		if (text)
			return text;
	}
	if (stage && tc_rt_pipeline_stage_ok(c->backend, stage))
		return pipeline_text(k->m, c->backend, c->cf, tc_rt_compiled_at(c), &c->opts,
			&c->target, stage);
	if (stage && !strcmp(stage, "ir") && c->cf != c->f) { /* rewritten */
		tc_buf b;
		tc_buf_init(&b);
		tc_ir_print(c->cf, &b);
		if (b.oom)
			tc_rt_set_error(k->m->ctx, "out of memory");
		return tc_buf_take(&b);
	}
	return tc_module_emit(k->m, c->f->name, stage);
}
