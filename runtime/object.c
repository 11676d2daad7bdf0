/* Object code of compiled kernels for the kernel cache, and reports of
 * failed run-time checks (object.h).  Backend-neutral: a backend makes and
 * loads the bytes (runtime/backend*.c); this file keeps their check sites
 * valid wherever the def's text sits. */
#include "object.h"

#include "error.h"
#include "module.h"

#include <string.h>

void tc_rt_object_clear(__tc_keep tc_rt_object *o)
{
	if (!o)
		return;
	tc_free(o->code);
	tc_free(o->symbol);
	tc_free(o->sites);
	memset(o, 0, sizeof(*o));
}

/* Make the locations of sites relative to def's start (dir -1), or
 * absolute again (dir +1). */
static void relocate_sites(tc_cg_site *s, int n, const tc_def *def, int dir)
{
	int i;
	for (i = 0; i < n; i++) {
		tc_loc *l = &s[i].loc;
		if (dir < 0) {
			if (l->line == def->loc.line)
				l->col -= def->loc.col;
			l->line -= def->loc.line;
			l->off -= def->loc.off;
		} else {
			if (l->line == 0)
				l->col += def->loc.col;
			l->line += def->loc.line;
			l->off += def->loc.off;
		}
	}
}

void tc_rt_object_detach(__tc_keep tc_rt_object *o, __tc_keep const tc_module *m,
	__tc_keep const tc_def *def)
{
	relocate_sites(o->sites, o->nsites, def, -1);
	o->def_hash = tc_rt_module_def_hash(m, def);
}

__tc_give tc_cg_site *tc_rt_object_attach(__tc_keep const tc_rt_object *o,
	__tc_keep const tc_module *m, __tc_keep const tc_def *def, int *n)
{
	tc_cg_site *sites;
	*n = 0;
	if (tc_rt_module_def_hash(m, def) != o->def_hash)
		return NULL;
	if (!(sites = tc_calloc((size_t)o->nsites + 1, sizeof(*sites))))
		return NULL;
	if (o->nsites)
		memcpy(sites, o->sites, (size_t)o->nsites * sizeof(*sites));
	relocate_sites(sites, o->nsites, def, +1);
	*n = o->nsites;
	return sites;
}

void tc_rt_report_check(__tc_keep tc_module *m, __tc_keep const tc_rt_compiled *c,
	__tc_keep const tc_cg_site *site, const int64_t *err)
{
	tc_diags d;
	tc_diags_init(&d, m->src);
	if (!site)
		tc_error(&d, (tc_loc){0, 0, 0, 0}, "internal error: unknown run-time check %lld",
			(long long)err[0]);
	else if (site->kind == TC_CG_CHECK_DIV)
		tc_error(&d, site->loc, "division by zero in '%c'", site->op);
	else
		tc_error(&d, site->loc,
			"index %lld is out of bounds for dimension %d of '%s' (extent %lld)",
			(long long)err[1], site->dim, c->cf->tensors[site->tensor].name,
			(long long)c->shapes[site->tensor].shape[site->dim]);
	tc_rt_set_error_diags(m->ctx, &d);
	tc_diags_clear(&d);
}
