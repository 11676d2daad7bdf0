/* Object code of compiled kernels, as the kernel cache keeps it
 * (tc_rt_object, internal.h), and the reports of failed run-time checks of
 * generated code, whose sites objects carry (runtime/object.c).
 *
 * Ownership: a tc_rt_object is the caller's struct and owns its code,
 * symbol and sites (tc_rt_object_clear); sites and bytes made here are the
 * caller's; modules, defs and compiled kernels are borrowed. */
#ifndef TC_RT_OBJECT_H
#define TC_RT_OBJECT_H

#include "internal.h"

/* Free what o holds and zero it (o itself is the caller's). */
void tc_rt_object_clear(__tc_keep tc_rt_object *o);
/* After a backend made o from def of m: make o's site locations relative
 * to the def's start (line 0 is the def's first line, columns on it
 * relative to the def's column) and record the hash of the def's text, so
 * that o stays usable when the same def text sits elsewhere in another
 * file. */
void tc_rt_object_detach(__tc_keep tc_rt_object *o, __tc_keep const tc_module *m,
	__tc_keep const tc_def *def);
/* A copy of o's sites located in def of m (the caller's), for loading o
 * there; NULL when o was made from other text than def's (it must be
 * compiled instead) or out of memory.  *n gets the count. */
__tc_give tc_cg_site *tc_rt_object_attach(__tc_keep const tc_rt_object *o,
	__tc_keep const tc_module *m, __tc_keep const tc_def *def, int *n);

/* The sites' serial form in the kernel cache: 8 little-endian int32s per
 * site (kind, offset, length, line, column, tensor, dimension, operator).
 * encode: the bytes (*size of them; the caller's), NULL when out of
 * memory; decode: the sites of size bytes at p into *out (the caller's)
 * and *n, -1 if malformed (not whole sites, too many, an unknown kind) or
 * out of memory. */
__tc_give unsigned char *tc_rt_sites_encode(__tc_keep const tc_cg_site *s, int n, size_t *size);
tc_stat tc_rt_sites_decode(__tc_keep const unsigned char *p, size_t size,
	__tc_give tc_cg_site **out, int *n);

/* Report the failed run-time check site (NULL: unknown) of c, with err the
 * kernel's error record (err[0]: site + 1, err[1]: the offending index), as
 * the interpreter words it, at the site's location: the error of m's
 * context. */
void tc_rt_report_check(__tc_keep tc_module *m, __tc_keep const tc_rt_compiled *c,
	__tc_keep const tc_cg_site *site, __tc_keep const int64_t *err);

#endif
