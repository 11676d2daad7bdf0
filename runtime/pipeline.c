/* The compilation pipeline (pipeline.h): IR rewrites, the polyhedral
 * model, the backend's schedule passes, the AST, and the backend; the one
 * driver behind tc_compile, object code for the kernel cache, and tcomp
 * emit. */
#include "pipeline.h"

#include "../codegen/c.h"
#include "compiled.h"
#include "module.h"
#include "object.h"

#include <string.h>

/* ---- IR rewrites ---- */

/* One rewrite of the IR before the model is built: f rewritten in ar, f
 * itself when it does not apply, NULL when out of memory. */
typedef struct rewrite {
	const char *name;
	int (*wanted)(const tc_rt_opts *o, const tc_target *t);
	const tc_ir_func *(*apply)(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
		const tc_rt_opts *o, const tc_target *t);
} rewrite;

static int share_wanted(const tc_rt_opts *o, const tc_target *t)
{
	(void)t;
	return o->share != TC_RT_SHARE_OFF;
}

/* Row buffers need the rows' loops fused (fusion max or auto). */
static const tc_ir_func *share_apply(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
	const tc_rt_opts *o, const tc_target *t)
{
	return tc_ir_share(ar, f, params,
		o->share == TC_RT_SHARE_ROW && (o->sched.fusion == TC_POLY_FUSE_MAX ||
			o->sched.fusion == TC_POLY_FUSE_AUTO) ? t->rowbuf_bytes : 0);
}

static int inline_wanted(const tc_rt_opts *o, const tc_target *t)
{
	(void)t;
	return o->inline_temps;
}

static const tc_ir_func *inline_apply(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
	const tc_rt_opts *o, const tc_target *t)
{
	(void)o;
	(void)t;
	return tc_ir_inline(ar, f, params);
}

/* Packed copies serve the CPU's register tiles: not on a GPU (a target
 * with warps). */
static int pack_wanted(const tc_rt_opts *o, const tc_target *t)
{
	return o->pack && !t->warp_size;
}

/* A packed copy's rows fill at least a vector register. */
static const tc_ir_func *pack_apply(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
	const tc_rt_opts *o, const tc_target *t)
{
	(void)o;
	return tc_ir_pack(ar, f, params, t->vector_bytes, t->panel_bytes, t->panel_min_row);
}

/* Partial results per thread reorder float sums: only the CPU's compiled
 * code (not the interpreter), under vecreduce, with parallel loops, at
 * bound sizes. */
static int partials_wanted(const tc_rt_opts *o, const tc_target *t)
{
	return !strcmp(o->backend, "cpu") && o->sched.vecreduce && o->sched.parallel &&
		!o->parametric && t->threads >= 2;
}

static const tc_ir_func *partials_apply(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
	const tc_rt_opts *o, const tc_target *t)
{
	(void)o;
	return tc_ir_partials(ar, f, params, t);
}

static const rewrite rewrites[] = {
	{"share", share_wanted, share_apply},
	{"inline", inline_wanted, inline_apply},
	{"pack", pack_wanted, pack_apply},
	{"partials", partials_wanted, partials_apply},
};

const tc_ir_func *tc_rt_pipeline_rewrite(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const tc_rt_opts *o,
	__tc_keep const tc_target *t)
{
	size_t i;
	for (i = 0; f && i < sizeof(rewrites) / sizeof(rewrites[0]); i++)
		if (rewrites[i].wanted(o, t))
			f = rewrites[i].apply(ar, f, params, o, t);
	return f;
}

/* ---- model, schedule, AST ---- */

/* The model of cf (concrete sizes params, or NULL) in ictx, scheduled by
 * the passes of backend b's pipeline with o's settings (NULL: the model's
 * defaults), up to the pass named stop_after (NULL: all), and with its AST
 * when ast is set; NULL with a message in d. */
static tc_poly *schedule(isl_ctx *ictx, const tc_rt_backend *b, const tc_ir_func *cf,
	const int64_t *params, const tc_rt_opts *o, const tc_target *t, const char *stop_after,
	int ast, tc_diags *d)
{
	unsigned char *free = NULL;
	tc_poly *p;
	if (params && o && o->parametric) { /* sizes=parametric: leave the free sizes free */
		if (!(free = tc_malloc((size_t)cf->nparams + 1))) {
			tc_error(d, (tc_loc){0}, "out of memory");
			return NULL;
		}
		tc_ir_free_sizes(cf, free);
	}
	p = tc_poly_build_free(ictx, cf, params, free, t, d);
	tc_free(free);
	if (!p)
		return NULL;
	if (o)
		p->opts = o->sched;
	if (tc_poly_schedule(p, b->pipeline->passes, *b->pipeline->npasses, stop_after, d) < 0 ||
		(ast && tc_poly_ast(p, d) < 0)) {
		tc_poly_free(p);
		return NULL;
	}
	return p;
}

/* ---- compiling ---- */

void tc_rt_context_add_warnings(__tc_keep tc_context *ctx, __tc_keep const tc_diags *d)
{
	tc_buf b, all;
	if (!d->nwarnings)
		return;
	tc_buf_init(&b);
	tc_diags_render(d, 1u << TC_SEV_WARNING, &b);
	if (b.oom || !b.s || (ctx->warnings && strstr(ctx->warnings, b.s))) {
		tc_buf_free(&b);
		return;
	}
	tc_buf_init(&all);
	tc_buf_puts(&all, ctx->warnings ? ctx->warnings : "");
	tc_buf_puts(&all, b.s);
	tc_buf_free(&b);
	if (all.oom) {
		tc_buf_free(&all);
		return;
	}
	tc_free(ctx->warnings);
	ctx->warnings = tc_buf_take(&all);
}

/* Load the stored object o for c when it was made from the same def text;
 * 0 (the caller compiles) when it was not or does not load. */
static int load(tc_module *m, tc_rt_compiled *c, void *state, const tc_rt_object *o)
{
	const tc_def *def = tc_rt_module_def_of(m, c->f);
	tc_cg_site *sites;
	tc_diags d;
	int n, ok;
	if (!def || !(sites = tc_rt_object_attach(o, m, def, &n)))
		return 0;
	tc_diags_init(&d, m->src);
	ok = c->backend->load(state, c, o, sites, &d) == TC_OK;
	tc_diags_clear(&d); /* a failure only means compiling it */
	return ok;
}

tc_stat tc_rt_pipeline_compile(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c,
	__tc_keep const tc_rt_object *obj_in, __tc_keep tc_rt_object *obj_out,
	__tc_keep tc_diags *d)
{
	const tc_rt_backend *b = c->backend;
	isl_ctx *ictx = NULL;
	tc_poly *p = NULL;
	void *state = NULL;
	tc_stat st = TC_ERR;

	if (obj_out && !b->object)
		return TC_OK; /* no object code from this backend: obj_out stays empty */
	if (!obj_out && b->state_new && !(state = tc_rt_backend_state(m->ctx, b, d)))
		return TC_ERR;
	if (obj_in && obj_in->code && b->load && load(m, c, state, obj_in)) {
		c->from_object = 1;
		return TC_OK;
	}
	if (!(ictx = tc_poly_ctx_new()))
		return TC_ERR; /* out of memory: d says nothing */
	if (!(p = schedule(ictx, b, c->cf, tc_rt_compiled_at(c), &c->opts, &c->target, NULL, 1, d)))
		goto done;
	tc_rt_context_add_warnings(m->ctx, d);
	if (obj_out) {
		const tc_def *def = tc_rt_module_def_of(m, c->f);
		if (b->object(c, p, obj_out, d) < 0 || !def)
			goto done;
		tc_rt_object_detach(obj_out, m, def);
		st = TC_OK;
		goto done;
	}
	st = b->compile(state, c, p, d);
done:
	tc_poly_free(p);
	isl_ctx_free(ictx);
	return st;
}

/* ---- stages ---- */

/* The pass a stage "schedule:NAME" names (NAME, or "all"), or NULL. */
static const char *stage_pass(const char *stage)
{
	return !strncmp(stage, "schedule:", 9) && stage[9] ? stage + 9 : NULL;
}

int tc_rt_pipeline_stage_ok(__tc_keep const tc_rt_backend *b, const char *stage)
{
	if (!strcmp(stage, "schedule") || stage_pass(stage) || !strcmp(stage, "ast") ||
		(!strcmp(stage, "c") && b->pipeline->device == kDLCPU)) /* a GPU's: its own */
		return 1;
	return tc_rt_backend_has_stage(b->pipeline, stage) ? 2 : 0;
}

/* "schedule:all": the schedule tree after every pass of b's list, each
 * under a line "# after NAME" (the passes run again from the start for
 * each, as in Halide's lowering log). */
static char *lowering_log(isl_ctx *ictx, const tc_rt_backend *b, const tc_ir_func *cf,
	const int64_t *params, const tc_rt_opts *o, const tc_target *t, tc_diags *d)
{
	tc_buf log;
	int i;
	tc_buf_init(&log);
	for (i = 0; i < *b->npasses; i++) {
		const char *name = b->passes[i].name;
		tc_poly *p = schedule(ictx, b, cf, params, o, t, name, 0, d);
		char *tree = p ? tc_poly_schedule_str(p) : NULL;
		tc_poly_free(p);
		if (!tree) {
			tc_buf_free(&log);
			return NULL;
		}
		tc_buf_printf(&log, "%s# after %s\n%s\n", i ? "\n" : "", name, tree);
		tc_free(tree);
	}
	return tc_buf_take(&log);
}

__tc_give char *tc_rt_pipeline_emit(__tc_keep const tc_rt_backend *b,
	__tc_keep const tc_ir_func *cf, __tc_keep const int64_t *params,
	__tc_keep const tc_rt_opts *o, __tc_keep const tc_target *t, const char *stage,
	__tc_keep tc_diags *d)
{
	isl_ctx *ictx = tc_poly_ctx_new();
	tc_poly *p = NULL;
	char *text = NULL;
	tc_target host;
	b = b->pipeline;
	if (!t) {
		b->describe(&host, o);
		t = &host;
	}
	if (!ictx)
		return NULL;
	if (stage_pass(stage) && !strcmp(stage_pass(stage), "all")) {
		text = lowering_log(ictx, b, cf, params, o, t, d);
		isl_ctx_free(ictx);
		return text;
	}
	p = schedule(ictx, b, cf, params, o, t, stage_pass(stage),
		strcmp(stage, "schedule") && !stage_pass(stage), d);
	if (!p)
		;
	else if (!strcmp(stage, "schedule") || stage_pass(stage))
		text = tc_poly_schedule_str(p);
	else if (!strcmp(stage, "ast"))
		text = tc_poly_ast_str(p);
	else if (!strcmp(stage, "c"))
		text = tc_cg_c_text(p, o ? o->cg.contract : 0, d);
	else if (tc_rt_backend_has_stage(b, stage))
		text = b->emit(p, o, stage, d);
	tc_poly_free(p);
	isl_ctx_free(ictx);
	return text;
}
