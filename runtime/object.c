/* Object code of compiled kernels for the kernel cache, and reports of
 * failed run-time checks (object.h).  Backend-neutral: a backend makes and
 * loads the bytes (runtime/backend*.c); this file keeps their check sites
 * valid wherever the def's text sits. */
#include "object.h"

#include "error.h"

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

/* ---- the sites' serial form ---- */

#define SITE_INTS 8 /* kind, off, len, line, col, tensor, dim, op */

__tc_give unsigned char *tc_rt_sites_encode(__tc_keep const tc_cg_site *s, int n, size_t *size)
{
	unsigned char *b = tc_malloc((size_t)n * SITE_INTS * 4 + 1), *p = b;
	int i, k;
	*size = (size_t)n * SITE_INTS * 4;
	if (!b)
		return NULL;
	for (i = 0; i < n; i++) {
		int32_t v[SITE_INTS] = {(int32_t)s[i].kind, s[i].loc.off, s[i].loc.len, s[i].loc.line,
			s[i].loc.col, s[i].tensor, s[i].dim, s[i].op};
		for (k = 0; k < SITE_INTS; k++, p += 4) {
			uint32_t u = (uint32_t)v[k];
			p[0] = (unsigned char)u;
			p[1] = (unsigned char)(u >> 8);
			p[2] = (unsigned char)(u >> 16);
			p[3] = (unsigned char)(u >> 24);
		}
	}
	return b;
}

tc_stat tc_rt_sites_decode(__tc_keep const unsigned char *p, size_t size,
	__tc_give tc_cg_site **out, int *n)
{
	size_t i, count = size / (SITE_INTS * 4);
	int k;
	*out = NULL;
	*n = 0;
	if (size % (SITE_INTS * 4) || count > 1000000)
		return -1;
	if (count && !(*out = tc_calloc(count, sizeof(tc_cg_site))))
		return -1;
	for (i = 0; i < count; i++) {
		int32_t v[SITE_INTS];
		for (k = 0; k < SITE_INTS; k++, p += 4)
			v[k] = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
					 (uint32_t)p[3] << 24);
		if (v[0] != TC_CG_CHECK_BOUNDS && v[0] != TC_CG_CHECK_DIV) {
			tc_free(*out);
			*out = NULL;
			return -1;
		}
		(*out)[i].kind = (tc_cg_check)v[0];
		(*out)[i].loc = (tc_loc){v[1], v[2], v[3], v[4]};
		(*out)[i].tensor = v[5];
		(*out)[i].dim = v[6];
		(*out)[i].op = (char)v[7];
	}
	*n = (int)count;
	return 0;
}

/* ---- locations ---- */

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

/* A hash of the source text of def (the locations of an object's run-time
 * checks are valid for that text only). */
static uint64_t def_hash(const tc_module *m, const tc_def *def)
{
	return tc_hash_bytes(TC_HASH_INIT, m->src->text + def->loc.off, (size_t)def->loc.len);
}

void tc_rt_object_detach(__tc_keep tc_rt_object *o, __tc_keep const tc_module *m,
	__tc_keep const tc_def *def)
{
	relocate_sites(o->sites, o->nsites, def, -1);
	o->def_hash = def_hash(m, def);
}

__tc_give tc_cg_site *tc_rt_object_attach(__tc_keep const tc_rt_object *o,
	__tc_keep const tc_module *m, __tc_keep const tc_def *def, int *n)
{
	tc_cg_site *sites;
	*n = 0;
	if (def_hash(m, def) != o->def_hash)
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
	__tc_keep const tc_cg_site *site, __tc_keep const int64_t *err)
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
