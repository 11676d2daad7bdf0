/* The schedule driver: runs a named pass list over a model
 * (tc_poly_schedule), and the steps of the CPU list that are no
 * transformation of their own: the isl scheduler with its fusion settings,
 * the packing copies' schedule, the check that schedules again without
 * merging, the kernel mark; the repairs (repair.c) and the row buffers
 * (contract.c) run from here too.
 *
 * Owns: the order of the CPU passes (tc_poly_cpu_passes, and the plain
 * list without the transformations), when each repair runs (fusing nests
 * only under fusion max, on the scheduler's own tree; hoisting after the
 * passes), and the restart without merging when a merged band chain broke
 * a dependence.  Entry points (passes.h): tc_poly_schedule,
 * tc_poly_schedule_cpu, tc_poly_pass_names, tc_poly_cpu_passes,
 * tc_poly_plain_passes.
 *
 * Uses everything in polyhedral/ through its entry points; nothing in
 * polyhedral/ uses it.  Must not know the passes' internals, the backends
 * or the runtime: a GPU backend supplies its own list to tc_poly_schedule. */
#include "band.h"
#include "passes.h"

#include <isl/aff.h>
#include <isl/id.h>
#include <isl/map.h>
#include <isl/options.h>
#include <isl/schedule_node.h>
#include <isl/val.h>

#include <stdio.h>
#include <string.h>

/* ---- the scheduler ---- */

/* Whether p has packing copies (IR statements marked pack). */
static int has_packs(const tc_poly *p)
{
	int i;
	for (i = 0; i < p->nstmts; i++)
		if (p->stmts[i].ir->pack)
			return 1;
	return 0;
}

/* The instances the isl scheduler schedules: the packing copies read
 * inputs only, so they run first, on their own, and the scheduler sees
 * the other statements. */
static isl_union_set *scheduled_instances(const tc_poly *p)
{
	isl_union_set *r = isl_union_set_copy(p->domain);
	return has_packs(p) ? isl_union_set_subtract(r, tc_poly_pack_instances(p)) : r;
}

/* The dependences (p->deps) among the instances the isl scheduler
 * schedules (scheduled_instances). */
static isl_union_map *scheduled_deps(const tc_poly *p)
{
	isl_union_set *r;
	if (!has_packs(p))
		return isl_union_map_copy(p->deps);
	r = scheduled_instances(p);
	return isl_union_map_intersect_range(isl_union_map_intersect_domain(
		isl_union_map_copy(p->deps), isl_union_set_copy(r)), r);
}

/* Warn in d that step (of p's def) ran past isl's budget and what
 * happens instead. */
static void warn_budget(tc_poly *p, tc_diags *d, const char *step, const char *instead)
{
	tc_loc none;
	memset(&none, 0, sizeof(none));
	tc_warning(d, none, "def '%s': %s ran past isl's budget of operations or seconds; %s "
		"(docs/language.md, Limits)", p->f->name, step, instead);
}

/* The original schedule as a schedule tree (when the scheduler fails). */
static isl_schedule *original_tree(tc_poly *p)
{
	isl_schedule *s = isl_schedule_from_domain(isl_union_set_copy(p->domain));
	isl_multi_union_pw_aff *m =
		isl_multi_union_pw_aff_from_union_map(isl_union_map_copy(p->original));
	return isl_schedule_insert_partial_schedule(s, m);
}

/* p->schedule failed: the original order, which is always legal, over
 * every statement (the packing copies included), with a warning when isl
 * ran past its budget. */
static tc_stat fall_back(tc_poly *p, tc_diags *d)
{
	if (tc_poly_over_budget(p->ctx))
		warn_budget(p, d, "the isl scheduler", "the statements run in textual order");
	/* no budget: the original tree costs little, and is the last resort */
	tc_poly_budget(p);
	tc_poly_budget_done(p);
	isl_ctx_set_max_operations(p->ctx, 0);
	p->schedule = original_tree(p);
	p->textual = 1;
	if (!p->schedule) {
		tc_poly_isl_failed(p->ctx, d, "compute a schedule");
		return TC_ERR;
	}
	return TC_OK;
}

/* Whether every statement of p has at most two dimensions (row
 * reductions and their pointwise neighbours: softmax, layer norm). */
static int all_low(const tc_poly *p)
{
	int i, low = 1;
	for (i = 0; i < p->nstmts; i++)
		low &= p->stmts[i].ndims <= 2;
	return low;
}

/* isl's scheduler on sc (taken).  Fusion min schedules every strongly
 * connected component apart (serialize_sccs).  Otherwise isl clusters
 * components step by step (whole_component off), which fuses a
 * contraction's init, update and epilogue into one band, except for
 * kernels whose statements all have at most two dimensions (row
 * reductions and their pointwise neighbours: softmax, layer norm): there
 * the clustering spends its time on integer programs that place one
 * statement's loop after another's within the same row loop, shifted by a
 * size, and their constants grow with the sizes (softmax: 0.5 s at 128 x
 * 1000, 3.5 s at 4096 x 4096), while scheduling each component whole
 * finds the same fused rows in milliseconds.  Not for everything: whole
 * components took 32 s on the three-factor Kronecker product.  With other
 * set, the opposite choice: the scheduler's second try when the first ran
 * past its budget (clustering on a def of a max-reduction, a product
 * reduction and two statements reading single elements of them pivoted
 * on ever larger numbers for minutes, where the whole component took
 * 0.1 s: docs/language.md, Limits). */
static isl_schedule *compute_schedule(tc_poly *p, isl_schedule_constraints *sc, int other,
	tc_poly_fusion fusion)
{
	isl_schedule *s;
	int low = all_low(p), was = isl_options_get_schedule_whole_component(p->ctx);
	isl_options_set_schedule_serialize_sccs(p->ctx, fusion == TC_POLY_FUSE_MIN);
	isl_options_set_schedule_maximize_coincidence(p->ctx,
		fusion == TC_POLY_FUSE_PRESERVE3COINCIDENT);
	isl_options_set_schedule_whole_component(p->ctx, (low || was) != other);
	tc_poly_leaks_begin();
	s = isl_schedule_constraints_compute_schedule(sc);
	tc_poly_leaks_end(!s && tc_poly_over_budget(p->ctx));
	isl_options_set_schedule_whole_component(p->ctx, was);
	return s;
}

/* The constraints of the isl scheduler on the instances dom (taken) with
 * the dependences deps (taken) among them, in p's context (generic: that
 * of every size): every dependence as validity,
 * proximity and coincidence, so that a band member is marked coincident
 * only if it carries no dependence (parallel loops, later). */
static isl_schedule_constraints *constraints(tc_poly *p, isl_union_set *dom,
	isl_union_map *deps, int generic)
{
	isl_schedule_constraints *sc = isl_schedule_constraints_on_domain(dom);
	sc = isl_schedule_constraints_set_context(sc,
		isl_set_copy(generic ? p->gcontext : p->context));
	sc = isl_schedule_constraints_set_validity(sc, isl_union_map_copy(deps));
	sc = isl_schedule_constraints_set_proximity(sc, isl_union_map_copy(deps));
	return isl_schedule_constraints_set_coincidence(sc, deps);
}

/* What the isl scheduler schedules of the instances dom (kept): with
 * generic set (after tc_poly_build_generic), the same statements for
 * every size (p->gdomain) and the dependences among them (p->gnear);
 * else dom and p->near. */
static isl_schedule_constraints *constraints_for(tc_poly *p, isl_union_set *dom, int generic)
{
	isl_union_set *at = isl_union_set_copy(dom);
	isl_union_map *near = generic ? p->gnear : p->near;
	if (generic)
		at = isl_union_set_intersect(isl_union_set_universe(at),
			isl_union_set_copy(p->gdomain));
	return constraints(p, at, isl_union_map_intersect_range(
		isl_union_map_intersect_domain(isl_union_map_copy(near), isl_union_set_copy(at)),
		isl_union_set_copy(at)), generic);
}

/* The seconds the isl scheduler may take at the sizes of a kernel whose
 * statements all have at most two dimensions (all_low: isl schedules its
 * components whole) before it schedules for every size instead
 * (schedule_instances).  At the sizes, whole components ran for the whole
 * budget (10 s, on a few pivots of ever larger numbers, so the operations
 * never ran out) on layernorm_bwd of bench/kernels.tc at every size
 * tried, from 64 x 32 to 4096 x 1024, where scheduling for every size
 * takes 0.04 s; softmax and layer norm take 5 ms at their sizes.
 * Scheduling such kernels for every size from the start gives the same
 * code (softmax, layer norm, rmsnorm_res: schedules that differ in
 * constant shifts, the same optimised LLVM IR) but costs building the
 * model again (softmax 1024 x 1024: 4 -> 43 ms), so the sizes come first. */
#define LOW_SECONDS 0.25

/* A schedule of the instances dom (kept) with fusion strategy fusion, or
 * NULL: at p's sizes, or, past isl's budget there (with a warning in d),
 * for every size, restricted to dom afterwards (legal at the sizes since
 * it is at every size).  Once scheduling at the sizes ran past the budget,
 * later calls (the fusion entry's) schedule for every size at once.  For
 * a kernel of all_low statements the attempt at the sizes has
 * LOW_SECONDS, and running past them needs no warning (the code is the
 * same); the rest of the step then has a budget of its own. */
static isl_schedule *schedule_instances(tc_poly *p, isl_union_set *dom, tc_poly_fusion fusion,
	tc_diags *d)
{
	isl_schedule *s = NULL;
	if (!p->gdomain) { /* at the sizes, until that ran past the budget once */
		tc_diags quiet;
		tc_stat st;
		double secs = p->opts.max_seconds;
		int over, brief = p->params && all_low(p) && (secs <= 0 || secs > LOW_SECONDS);
		if (brief) {
			p->opts.max_seconds = LOW_SECONDS;
			tc_poly_budget(p);
			p->opts.max_seconds = secs;
		}
		s = compute_schedule(p, constraints_for(p, dom, 0), 0, fusion);
		over = !s && tc_poly_over_budget(p->ctx);
		if (brief && (s || over))
			tc_poly_budget(p); /* the rest of the step: a budget of its own */
		if (s || !over || !p->params)
			return s;
		if (!brief) {
			warn_budget(p, d, "the isl scheduler", "scheduling again for every size");
			tc_poly_budget(p);
		}
		/* failing, the caller's fallbacks go on (the textual order last) */
		tc_diags_init(&quiet, NULL);
		st = tc_poly_build_generic(p, &quiet);
		tc_diags_clear(&quiet);
		if (st < 0)
			return NULL;
	}
	s = compute_schedule(p, constraints_for(p, dom, 1), 0, fusion);
	return s ? isl_schedule_intersect_domain(s, tc_poly_generic_at(p, isl_union_set_copy(dom)))
		 : NULL;
}

/* "scheduler": the isl scheduler on every statement but the packing
 * copies, with every dependence as a validity constraint and the fusion
 * option's settings (fusion auto starts from max: the "fusion" entry
 * revisits its nests), or the original schedule of every statement if it
 * fails.  Past isl's budget at the sizes, for every size
 * (schedule_instances), then with the other clustering, then the textual
 * order. */
static tc_stat schedule_pass(tc_poly *p, tc_diags *d)
{
	isl_union_set *rest;
	tc_poly_fusion fusion = p->opts.fusion == TC_POLY_FUSE_AUTO ? TC_POLY_FUSE_MAX
		: p->opts.fusion;

	rest = scheduled_instances(p);
	isl_schedule_free(p->schedule);
	p->textual = 0;
	p->schedule = schedule_instances(p, rest, fusion, d);
	if (!p->schedule && tc_poly_over_budget(p->ctx)) {
		/* the other way of clustering, with a budget of its own */
		warn_budget(p, d, "the isl scheduler",
			"scheduling again with the other clustering (whole components or not)");
		tc_poly_budget(p);
		p->schedule = compute_schedule(p, constraints_for(p, rest, 0), 1, fusion);
	}
	isl_union_set_free(rest);
	return p->schedule ? TC_OK : fall_back(p, d);
}

/* ---- fusion per nest ---- */

/* A schedule of the instances of the nest at node alone (its statements'
 * dependences among themselves: the nests around it are ordered by the
 * sequence above) with fusion strategy fusion, or NULL. */
static isl_schedule *schedule_nest(tc_poly *p, isl_schedule_node *node, tc_poly_fusion fusion,
	tc_diags *d)
{
	isl_union_set *dom = isl_schedule_node_get_domain(node);
	isl_schedule *s = schedule_instances(p, dom, fusion, d);
	isl_union_set_free(dom);
	return s;
}

/* Whether a nest measured c costs nothing: no serial, untiled or chained
 * instances, no skewed band. */
static int costs_nothing(const tc_poly_nest_cost *c)
{
	return c->serial == 0 && c->untiled == 0 && c->chained == 0 && c->strided == 0 &&
		!c->skewed;
}

/* The nest at node (taken), or another schedule of its statements in its
 * place when isl's clustering cost it something (tc_poly_nest_measure: a
 * serial outermost loop, a contraction no band can register-tile,
 * contractions sharing a nest, a skewed loop) and preserve3coincident or, after it, min costs less.  Sets
 * *over when isl ran past the budget. */
static isl_schedule_node *refit_nest(tc_poly *p, isl_schedule_node *node, int *over,
	tc_diags *d)
{
	static const tc_poly_fusion tries[] = {TC_POLY_FUSE_PRESERVE3COINCIDENT, TC_POLY_FUSE_MIN};
	tc_poly_nest_cost best, c;
	isl_schedule *choice = NULL;
	size_t k;
	tc_poly_nest_measure(p, node, &best);
	if (best.statements < 2 || costs_nothing(&best))
		return node;
	for (k = 0; k < sizeof(tries) / sizeof(tries[0]); k++) {
		isl_schedule *s = schedule_nest(p, node, tries[k], d);
		isl_schedule_node *root = s ? isl_schedule_get_root(s) : NULL;
		if (!s) {
			*over = tc_poly_over_budget(p->ctx);
			break;
		}
		tc_poly_nest_measure(p, root, &c);
		isl_schedule_node_free(root);
		if (tc_poly_nest_cost_less(&c, &best)) {
			best = c;
			isl_schedule_free(choice);
			choice = s;
		} else {
			isl_schedule_free(s);
		}
		if (costs_nothing(&best))
			break;
	}
	if (choice && !*over)
		node = tc_poly_graft(node, choice);
	isl_schedule_free(choice);
	return node;
}

/* What a refit does to one top-level nest at node (taken): the node at
 * the same position, *over set when isl ran past its budget. */
typedef isl_schedule_node *(*refit_fn)(tc_poly *p, isl_schedule_node *node, int *over,
	tc_diags *d);

/* Apply refit to each top-level nest of p's schedule (each child of the
 * root's sequence, or the whole tree), a nest it turned into a sequence
 * taking its nests' place in the root's sequence.  Legal by construction
 * when refit schedules a nest's statements again: the isl scheduler orders
 * each nest's own dependences, the sequence those between nests.  Past
 * the budget the driver restores the scheduler's tree; what names the
 * work in the error message. */
static tc_stat refit_nests(tc_poly *p, refit_fn refit, const char *what, tc_diags *d)
{
	isl_schedule_node *node;
	isl_schedule *s;
	isl_size n, i;
	int over = 0;
	node = isl_schedule_node_child(isl_schedule_get_root(p->schedule), 0);
	if (node && isl_schedule_node_get_type(node) == isl_schedule_node_sequence) {
		n = isl_schedule_node_n_children(node);
		for (i = 0; node && !over && i < n; i++) {
			isl_size m = 1;
			node = isl_schedule_node_child(isl_schedule_node_child(node, (int)i), 0);
			node = refit(p, node, &over, d);
			if (node && isl_schedule_node_get_type(node) == isl_schedule_node_sequence)
				m = isl_schedule_node_n_children(node);
			node = isl_schedule_node_parent(isl_schedule_node_parent(node));
			if (m > 1) { /* its nests in the root's sequence */
				node = isl_schedule_node_sequence_splice_child(node, (int)i);
				i += m - 1;
				n += m - 1;
			}
		}
	} else if (node) {
		node = refit(p, node, &over, d);
	}
	s = node ? isl_schedule_node_get_schedule(node) : NULL;
	isl_schedule_node_free(node);
	if (!s) {
		if (over || tc_poly_over_budget(p->ctx))
			return TC_OK; /* the driver restores the scheduler's tree */
		tc_poly_isl_failed(p->ctx, d, what);
		return TC_ERR;
	}
	isl_schedule_free(p->schedule);
	p->schedule = s;
	return TC_OK;
}

/* "fusion": under fusion auto, each nest of the scheduler's tree that
 * isl's clustering made costly (refit_nest) scheduled again without that
 * fusion. */
static tc_stat fusion_pass(tc_poly *p, tc_diags *d)
{
	if (p->opts.fusion != TC_POLY_FUSE_AUTO || p->textual)
		return TC_OK;
	return refit_nests(p, refit_nest, "choose the fusion of loop nests", d);
}

/* The nest at node (taken) scheduled again with fusion min when
 * tc_poly_gpu_split_nest would rather see it split. */
static isl_schedule_node *split_nest(tc_poly *p, isl_schedule_node *node, int *over,
	tc_diags *d)
{
	isl_schedule *split;
	if (!node || !tc_poly_gpu_split_nest(p, node))
		return node;
	split = schedule_nest(p, node, TC_POLY_FUSE_MIN, d);
	if (!split)
		*over = tc_poly_over_budget(p->ctx);
	else
		node = tc_poly_graft(node, split);
	isl_schedule_free(split);
	return node;
}

/* "gpu-fusion": each top-level nest whose row reductions would run
 * serially on few threads split apart (split_nest). */
static tc_stat gpu_fusion_pass(tc_poly *p, tc_diags *d)
{
	if (p->textual)
		return TC_OK;
	return refit_nests(p, split_nest, "split nests for the GPU", d);
}

/* Whether schedule a costs more than b (tc_poly_nest_measure of their
 * whole trees). */
static int costlier(tc_poly *p, isl_schedule *a, isl_schedule *b)
{
	isl_schedule_node *ra = isl_schedule_get_root(a), *rb = isl_schedule_get_root(b);
	tc_poly_nest_cost ca, cb;
	tc_poly_nest_measure(p, ra, &ca);
	tc_poly_nest_measure(p, rb, &cb);
	isl_schedule_node_free(ra);
	isl_schedule_node_free(rb);
	return tc_poly_nest_cost_less(&cb, &ca);
}

/* "fuse-nests": under fusion max (and auto), the repair tc_poly_fuse_nests of the
 * scheduler's own tree, against the dependences the scheduler saw (before
 * the packing copies join it; the original schedule it may have fallen
 * back to is one band, which the repair leaves alone). */
static tc_stat fuse_nests_pass(tc_poly *p, tc_diags *d)
{
	isl_union_map *deps;
	isl_schedule *before;
	if (p->opts.fusion != TC_POLY_FUSE_MAX && p->opts.fusion != TC_POLY_FUSE_AUTO)
		return TC_OK;
	deps = scheduled_deps(p);
	/* under auto, only where it costs nothing */
	before = p->opts.fusion == TC_POLY_FUSE_AUTO ? isl_schedule_copy(p->schedule) : NULL;
	p->schedule = tc_poly_fuse_nests(p->schedule, deps);
	if (before && p->schedule && costlier(p, p->schedule, before)) {
		isl_schedule_free(p->schedule);
		p->schedule = before;
		before = NULL;
	}
	isl_schedule_free(before);
	/* on the CPU, nests that read the same data under shared loops */
	if (p->schedule && p->params && !p->target->warp_size && !p->textual)
		p->schedule = tc_poly_fuse_reuse(p, p->schedule, deps);
	isl_union_map_free(deps);
	/* past the budget: the driver restores the scheduler's tree */
	return p->schedule || tc_poly_over_budget(p->ctx) ? TC_OK : fall_back(p, d);
}

/* Tile band node (of packing copy st, its last two members in squares of
 * s) with its full squares generated apart from the partial ones (isl's
 * "isolate" option): their point loops then have constant bounds, which
 * the code generator moves as vectors transposed in registers
 * (codegen/llvm_loop.c, "transposing copies"); a square is full where its
 * last instance exists (the copy's domain is a box). */
static isl_schedule_node *isolate_full_squares(isl_schedule_node *node, const tc_poly_stmt *st,
	int64_t s)
{
	isl_ctx *ctx = isl_schedule_node_get_ctx(node);
	isl_union_set *dom = isl_schedule_node_get_domain(node), *full, *whole;
	isl_union_map *part;
	isl_set *last;
	isl_map *ends;
	char text[160];
	int n = st->ndims;
	if (!dom || isl_union_set_n_set(dom) != 1 || n < 2 || s < 2) {
		isl_union_set_free(dom);
		return node;
	}
	/* the instances at a square's last position in both of the last two
	 * dimensions of the copy's space */
	last = isl_set_from_union_set(dom);
	snprintf(text, sizeof(text), "{ [i, j] : exists (a, b : i = %lld a + %lld and j = %lld b + %lld) }",
		(long long)s, (long long)(s - 1), (long long)s, (long long)(s - 1));
	ends = isl_map_from_range(isl_set_read_from_str(ctx, text));
	ends = isl_map_insert_dims(ends, isl_dim_out, 0, (unsigned)(n - 2));
	ends = isl_map_set_tuple_id(ends, isl_dim_out, isl_set_get_tuple_id(last));
	last = isl_set_intersect(last, isl_map_range(ends));
	part = isl_schedule_node_band_get_partial_schedule_union_map(node);
	whole = isl_union_set_apply(isl_schedule_node_get_domain(node), isl_union_map_copy(part));
	full = isl_union_set_apply(isl_union_set_from_set(last), part);
	if (isl_union_set_is_equal(full, whole) == isl_bool_true) {
		isl_union_set_free(full);
		full = NULL;
	}
	isl_union_set_free(whole);
	full = tc_poly_isolate_option(ctx, full, 0); /* NULL: none */
	return full ? isl_schedule_node_band_set_ast_build_options(node, full) : node;
}

/* Schedules for the packing copies: each in its own loop nest over the
 * copy's dimensions in order (so its writes are stride-1), its last two in
 * square tiles of the target's transpose_tile (a transpose: the reads of a
 * tile walk that many rows; on the CPU 16 x 16, a cache line per row:
 * ir/target.h), one after the other.  NULL when there are none.  Measured on
 * matmul_nt 1024: the untiled copy took about 3 ms of the kernel's 14.5. */
static isl_schedule *pack_schedule(const tc_poly *p)
{
	isl_schedule *all = NULL;
	int i, k;
	for (i = 0; i < p->nstmts; i++) {
		isl_schedule *one;
		isl_schedule_node *node;
		isl_union_set *dom;
		isl_union_map *id;
		const tc_poly_stmt *st = &p->stmts[i];
		if (!st->ir->pack)
			continue;
		dom = tc_poly_stmt_instances(p, st);
		id = isl_union_set_identity(isl_union_set_copy(dom));
		id = isl_union_map_from_map(isl_map_reset_tuple_id(isl_map_from_union_map(id),
			isl_dim_out));
		one = isl_schedule_insert_partial_schedule(isl_schedule_from_domain(dom),
			isl_multi_union_pw_aff_from_union_map(id));
		node = isl_schedule_node_child(isl_schedule_get_root(one), 0);
		node = isl_schedule_node_band_set_permutable(node, 1);
		for (k = 0; k < st->ndims; k++) /* a copy: no dependences among its instances */
			node = isl_schedule_node_band_member_set_coincident(node, k, 1);
		if (st->ndims >= 2) { /* a transpose: in tiles that fit in L1 */
			isl_multi_val *sizes = isl_multi_val_zero(isl_schedule_node_band_get_space(node));
			for (k = 0; k < st->ndims; k++)
				sizes = isl_multi_val_set_val(sizes, k, isl_val_int_from_si(p->ctx,
					k < st->ndims - 2 ? 1 : p->target->transpose_tile));
			node = isl_schedule_node_band_tile(node, sizes);
			node = isolate_full_squares(node, st, p->target->transpose_tile);
		}
		isl_schedule_free(one);
		one = isl_schedule_node_get_schedule(node);
		isl_schedule_node_free(node);
		all = all ? isl_schedule_sequence(all, one) : one;
	}
	return all;
}

/* "pack": the packing copies' schedule (pack_schedule) before the
 * scheduler's tree, unless that already holds them (the original schedule
 * the scheduler fell back to). */
static tc_stat pack_pass(tc_poly *p, tc_diags *d)
{
	isl_union_set *dom, *packs;
	isl_bool apart;
	if (!has_packs(p))
		return TC_OK;
	dom = isl_schedule_get_domain(p->schedule);
	packs = tc_poly_pack_instances(p);
	apart = isl_union_set_is_disjoint(dom, packs);
	isl_union_set_free(dom);
	isl_union_set_free(packs);
	if (apart < 0) {
		tc_poly_isl_failed(p->ctx, d, "compute a schedule");
		return TC_ERR;
	}
	if (!apart)
		return TC_OK;
	p->schedule = isl_schedule_sequence(pack_schedule(p), p->schedule);
	return p->schedule || tc_poly_over_budget(p->ctx) ? TC_OK : fall_back(p, d);
}

/* ---- after the transformations ---- */

/* "check": a merged band chain (tc_poly_pass_merge) is marked permutable
 * without being so for its reduction members, so the transformed schedule
 * is checked against the dependences; when it breaks one (or the check
 * fails), the driver schedules again from the first entry without
 * merging. */
static tc_stat check_pass(tc_poly *p, tc_diags *d)
{
	if (p->merged && tc_poly_schedule_legal(p, p->schedule) != 1) {
		p->merged = 0;
		p->no_merge = 1;
		return TC_POLY_RESCHEDULE;
	}
	return TC_OK;
}

/* "hoist": the repair tc_poly_hoist_constant, after the transformations
 * (which place a register tile's init themselves). */
static tc_stat hoist_pass(tc_poly *p, tc_diags *d)
{
	p->schedule = tc_poly_hoist_constant(p->schedule, p->deps);
	if (!p->schedule) {
		tc_poly_isl_failed(p->ctx, d, "hoist statements out of loops");
		return TC_ERR;
	}
	return TC_OK;
}

/* "mark": the kernel mark below the domain node, carrying the model. */
static tc_stat mark_pass(tc_poly *p, tc_diags *d)
{
	isl_schedule_node *node = isl_schedule_get_root(p->schedule);
	node = isl_schedule_node_child(node, 0);
	node = isl_schedule_node_insert_mark(node, isl_id_alloc(p->ctx, TC_POLY_MARK_KERNEL, p));
	isl_schedule_free(p->schedule);
	p->schedule = isl_schedule_node_get_schedule(node);
	isl_schedule_node_free(node);
	if (!p->schedule) {
		tc_poly_isl_failed(p->ctx, d, "mark the schedule");
		return TC_ERR;
	}
	return TC_OK;
}

/* ---- the lists ---- */

/* Entries that both CPU lists hold. */
#define SCHEDULER {"scheduler", schedule_pass, \
	"the isl scheduler on all but the packing copies (fusion option; else textual order)"}
#define FUSION {"fusion", fusion_pass, \
	"fusion auto: each nest that fusing made serial or skewed scheduled again without it"}
#define FUSE_NESTS {"fuse-nests", fuse_nests_pass, \
	"fusion max: the scheduler's parallel nests under one loop when it carries no dependence"}
#define PACK {"pack", pack_pass, \
	"the packing copies first, each in its own nest (a transpose in square tiles)"}
#define HOIST {"hoist", hoist_pass, \
	"statements a band runs once per outer iteration before (or after) its loops"}
#define MARK {"mark", mark_pass, "the tc_kernel mark at the root, carrying the model"}
#define ROWBUF {"rowbuf", tc_poly_contract, \
	"row buffers for temporaries that one iteration writes and reads (sizes known)"}

const tc_poly_pass_def tc_poly_cpu_passes[] = {
	SCHEDULER,
	FUSION,
	FUSE_NESTS,
	PACK,
	{"merge", tc_poly_pass_merge,
		"merge a band with the chain of bands a reduction over several indices split"},
	{"order", tc_poly_pass_order,
		"the stride-1 member innermost in permutable bands; a dot product's reduction alone"},
	{"interchange", tc_poly_pass_interchange,
		"the interchange option's member order for the band the tile pass tiles"},
	{"tile", tc_poly_pass_tile,
		"cache tiles of the outermost permutable band (tile option, or contraction blocks)"},
	{"regtile", tc_poly_pass_regtile,
		"register tiles of contraction bands: init before, epilogue after, rows unrolled"},
	{"parallel", tc_poly_pass_parallel,
		"the tc_parallel mark above the outermost parallel loop of each nest"},
	{"check", check_pass,
		"a merged band chain that breaks a dependence: schedule again without merging"},
	HOIST,
	{"collapse", tc_poly_pass_collapse,
		"the last two members of an innermost band that walk whole short rows as one"},
	MARK,
	ROWBUF,
};
const int tc_poly_ncpu_passes = sizeof(tc_poly_cpu_passes) / sizeof(tc_poly_cpu_passes[0]);

const tc_poly_pass_def tc_poly_plain_passes[] = {SCHEDULER, FUSION, FUSE_NESTS, PACK, HOIST, MARK, ROWBUF};
const int tc_poly_nplain_passes = sizeof(tc_poly_plain_passes) / sizeof(tc_poly_plain_passes[0]);

const tc_poly_pass_def tc_poly_gpu_passes[] = {
	SCHEDULER,
	FUSION,
	FUSE_NESTS,
	{"gpu-fusion", gpu_fusion_pass,
		"nests whose row reductions would run serially on few threads split apart"},
	{"order", tc_poly_pass_order,
		"the stride-1 member innermost in permutable bands (the GPU's thread x)"},
	{"gpu", tc_poly_pass_gpu,
		"each top-level nest a kernel: outer coincident members to blocks and threads"},
	MARK,
};
const int tc_poly_ngpu_passes = sizeof(tc_poly_gpu_passes) / sizeof(tc_poly_gpu_passes[0]);

/* ---- the driver ---- */

void tc_poly_pass_names(__tc_keep tc_buf *b, __tc_keep const tc_poly_pass_def *passes, int npasses)
{
	int i;
	for (i = 0; i < npasses; i++) {
		if (i)
			tc_buf_puts(b, ", ");
		tc_buf_puts(b, passes[i].name);
	}
}

/* The index of the entry of passes named name, or -1. */
static int find_pass(const tc_poly_pass_def *passes, int npasses, const char *name)
{
	int i;
	for (i = 0; i < npasses; i++)
		if (!strcmp(passes[i].name, name))
			return i;
	return -1;
}

/* Forget the diagnostics of d from the n-th on (a pass's error about a
 * budget it ran past, which the driver turns into a warning). */
static void drop_diags(tc_diags *d, int n)
{
	while (d->n > n) {
		tc_diag *g = &d->v[--d->n];
		if (g->sev == TC_SEV_ERROR)
			d->nerrors--;
		else if (g->sev == TC_SEV_WARNING)
			d->nwarnings--;
		tc_free(g->msg);
	}
}

/* Run pass def over p with a budget of its own (tc_poly_budget).  A pass
 * other than the first (the scheduler, which falls back itself) that runs
 * past it, failing or not (a legality check that failed reads as
 * "illegal"), is undone: the schedule and what the pass records in p as
 * they were before it, with a warning instead of its error.  Passes
 * transform a legal schedule into a legal one, so skipping one keeps the
 * schedule legal. */
static tc_stat run_pass(tc_poly *p, const tc_poly_pass_def *def, int first, tc_diags *d)
{
	isl_schedule *before = isl_schedule_copy(p->schedule);
	int merged = p->merged, n = d->n;
	int *rowbuf = p->rowbuf;
	tc_stat st;
	char what[64];

	p->rowbuf = NULL;
	tc_poly_budget(p);
	st = def->run(p, d);
	if (first || !tc_poly_over_budget(p->ctx)) {
		isl_schedule_free(before);
		if (p->rowbuf)
			tc_free(rowbuf);
		else
			p->rowbuf = rowbuf;
		return st;
	}
	drop_diags(d, n);
	snprintf(what, sizeof(what), "the schedule pass '%s'", def->name);
	warn_budget(p, d, what, "the schedule stays as it was before it");
	isl_ctx_reset_error(p->ctx);
	isl_schedule_free(p->schedule);
	p->schedule = before;
	p->merged = merged;
	tc_free(p->rowbuf);
	p->rowbuf = rowbuf;
	return p->schedule ? TC_OK : TC_ERR;
}

tc_stat tc_poly_schedule(__tc_keep tc_poly *p, __tc_keep const tc_poly_pass_def *passes,
	int npasses, const char *stop_after, __tc_keep tc_diags *d)
{
	int i, last = npasses - 1;
	tc_stat st;
	if (stop_after && (last = find_pass(passes, npasses, stop_after)) < 0) {
		tc_loc none;
		tc_buf b;
		memset(&none, 0, sizeof(none));
		tc_buf_init(&b);
		tc_poly_pass_names(&b, passes, npasses);
		tc_error(d, none, "expected the name of a schedule pass (%s) but found '%s'",
			b.oom || !b.s ? "?" : b.s, stop_after);
		tc_buf_free(&b);
		return TC_ERR;
	}
	for (i = 0; i <= last; i++) {
		st = run_pass(p, &passes[i], i == 0, d);
		if (st < 0) {
			tc_poly_budget_done(p);
			return TC_ERR;
		}
		if (st == TC_POLY_RESCHEDULE)
			i = -1; /* the whole list again (the entry that asked changed p) */
	}
	tc_poly_budget_done(p);
	return TC_OK;
}

tc_stat tc_poly_schedule_cpu(__tc_keep tc_poly *p, __tc_keep tc_diags *d)
{
	return tc_poly_schedule(p, tc_poly_cpu_passes, tc_poly_ncpu_passes, NULL, d);
}
