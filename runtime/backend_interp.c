/* The interp backend (backend.h): the reference interpreter (ir/interp.c)
 * runs the def's IR as written, bounds-checked, with exact semantics.
 * Nothing is compiled; kernels compiled for it still show the cpu
 * backend's stages (tcomp emit), which is how the tests compare schedules
 * without a JIT. */
#include "backend.h"

#include "error.h"
#include "../ir/interp.h"

static tc_stat run(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c, __tc_keep const tc_tensor *t,
	__tc_keep tc_rt_launch *launch)
{
	const tc_ir_func *f = c->f;
	tc_stat st = TC_OK;
	tc_diags d;
	(void)launch; /* no device: no stream */
	tc_diags_init(&d, m->src);
	if (tc_interp_run(f, c->params, t, t + f->ninputs, c->opts.cg.contract, &d) < 0) {
		tc_rt_set_error_diags(m->ctx, &d);
		st = TC_ERR;
	}
	tc_diags_clear(&d);
	return st;
}

const tc_rt_backend tc_rt_backend_interp = {
	.name = "interp",
	.device = kDLCPU,
	.pipeline = &tc_rt_backend_cpu,
	.run = run,
};
