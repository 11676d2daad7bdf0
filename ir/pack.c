/* Operand packing: copy an input that a contraction reads along the wrong
 * dimension into a temporary laid out for the contraction.
 *
 * The register tile (polyhedral/regtile.c) vectorises the output's stride-1
 * dimension: every operand must be either stride-1 in that dimension or
 * constant along it (a broadcast).  An operand whose stride-1 dimension is
 * the reduction instead, such as B in C(m,n) +=! A(m,r_k) * B(n,r_k) or the
 * weights W(o,r_i) of a fully connected layer, would need a gather per
 * lane.  Packing rewrites
 *     C(m,n) +=! A(m,r_k) * B(n,r_k)
 * into
 *     B_packed(r_k,n) = B(n,r_k)          (a packing statement, run first)
 *     C(m,n) +=! A(m,r_k) * B_packed(r_k,n)
 * which is the plain matmul the register tile handles.  The copy reads
 * every element of B once; the contraction then reads each element of the
 * packed copy M / rows times from cache.
 *
 * Only inputs are packed: nothing writes them, so the copies can run
 * before every other statement (the polyhedral model schedules them first,
 * on their own) and the arithmetic of the kernel is unchanged, bit for
 * bit. */
#include "ir.h"

#include "../lang/sexpr.h"

#include <string.h>

/* The value of e, a sum, difference, negation or product of constants,
 * sizes (params) and index v at value x, under casts, in *val; 0 when e
 * is of another form (or overflows). */
static int value_at(const tc_ir_expr *e, int v, int64_t x, const int64_t *params,
	int64_t *val)
{
	int64_t a, b;
	switch (e->op) {
	case TC_OP_CONST:
		*val = e->c.i;
		return 1;
	case TC_OP_INDEX:
		*val = x;
		return e->id == v;
	case TC_OP_SIZE:
		*val = params[e->id];
		return 1;
	case TC_OP_CAST:
		return tc_dtype_is_int(e->type) && value_at(e->args[0], v, x, params, val);
	case TC_OP_NEG:
		return value_at(e->args[0], v, x, params, &a) && !__builtin_sub_overflow(0, a, val);
	case TC_OP_ADD:
	case TC_OP_SUB:
	case TC_OP_MUL:
		if (!value_at(e->args[0], v, x, params, &a) || !value_at(e->args[1], v, x, params, &b))
			return 0;
		return e->op == TC_OP_ADD ? !__builtin_add_overflow(a, b, val)
			: e->op == TC_OP_SUB ? !__builtin_sub_overflow(a, b, val)
					     : !__builtin_mul_overflow(a, b, val);
	default:
		return 0;
	}
}

/* The index variable that subscript k of read r in statement s walks: the
 * variable itself (under casts), or, where params is given, an integer
 * multiple of one variable plus constants and sizes, the variable ranging
 * from 0 and the subscript within dimension k of r's tensor over that
 * range at the sizes params (2 * r_j + 1 in W1(f,c,2*r_j+1,2*r_i), the
 * weights of one phase of a strided convolution's data gradient: a copy
 * over r_j's range reads no element outside W1, where the statement's
 * guard may have kept r_j from reading one); -1 otherwise. */
static int sub_var(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *r, int k,
	const int64_t *params)
{
	const tc_ir_expr *e = r->args[k];
	int64_t lo, hi, step, ext, first, last;
	int v, found = -1;
	if ((v = tc_ir_plain_var(e)) >= 0 || !params)
		return v;
	if (!tc_ir_affine(e) || tc_ir_count_reads(e))
		return -1;
	for (v = 0; v < s->nvars; v++)
		if (tc_ir_uses_var(e, v)) {
			step = tc_ir_var_step(e, v);
			if (found >= 0 || step == 0 || step == TC_IR_NO_STEP)
				return -1;
			found = v;
		}
	if (found < 0 || !tc_ir_var_range(&s->vars[found], params, &lo, &hi) || lo != 0 ||
		hi < 1 || tc_sx_eval(f->tensors[r->id].ext[k], params, NULL, &ext) < 0 ||
		!value_at(e, found, 0, params, &first) || !value_at(e, found, hi - 1, params, &last))
		return -1;
	return first >= 0 && first < ext && last >= 0 && last < ext ? found : -1;
}

/* Whether read r of statement s is of an input of rank 2 or more whose
 * subscripts walk distinct index variables (sub_var; plain ones alone when
 * params is NULL), s's output of rank 2 or more (the register tile needs
 * two parallel dimensions); var[k] is the variable of subscript k. */
static int input_read_vars(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *r,
	const int64_t *params, int *var)
{
	int k, j;
	if (s->nlhs < 2 || f->tensors[r->id].kind != TC_TENSOR_INPUT || r->nargs < 2 ||
		r->nargs > TC_MAX_RANK)
		return 0;
	for (k = 0; k < r->nargs; k++) {
		if ((var[k] = sub_var(f, s, r, k, params)) < 0)
			return 0;
		for (j = 0; j < k; j++)
			if (var[j] == var[k])
				return 0;
	}
	return 1;
}

/* input_read_vars with plain subscripts alone. */
static int plain_input_read(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *r)
{
	int var[TC_MAX_RANK];
	return input_read_vars(f, s, r, NULL, var);
}

/* Whether read r of statement s, whose subscripts walk the distinct index
 * variables var[] (input_read_vars), should be packed, and how: perm[k] is
 * the dimension of the input that becomes dimension k of the packed copy
 * (the dimension indexed by the output's innermost index moves last, the
 * others keep their order).  Requires the last subscript's variable a
 * reduction index and the output's innermost index among the others.  A
 * subscript that is a multiple of its variable (sub_var) makes a copy of
 * the elements the statement reads, dimension k over that variable's
 * range. */
static int pack_plan(const tc_ir_stmt *s, const tc_ir_expr *r, const int *var, int *perm)
{
	int inner = s->nlhs - 1, at = -1, k, j, n = r->nargs;
	for (k = 0; k < n; k++)
		if (var[k] == inner)
			at = k;
	if (at < 0 || at == n - 1 || !s->vars[var[n - 1]].is_reduction)
		return 0;
	for (k = 0, j = 0; k < n; k++)
		if (k != at)
			perm[j++] = k;
	perm[n - 1] = at;
	return 1;
}

/* ---- broadcast operands read across their rows ----
 *
 * In a weight gradient dW(i,h) +=! X(r_b,i) * dH(r_b,h) the register tile
 * (rows of i, vectors of h) broadcasts X(r_b,i..i+R-1) at each step of the
 * reduction: R neighbours of one row of X, and the next step's R a row of
 * X further on.  Where that row is a page or more (I = 1024 floats), every
 * step reads another page, all in the same L1 set when the row is a
 * multiple of 4 KiB: the R rows of X a tile sweeps, re-read by each of the
 * output's column tiles, do not stay in the L1.  A copy with the reduction
 * last, X_packed(i,r_b) = X(r_b,i), is the left operand of a plain matmul
 * (R streams, each contiguous along the reduction), as BLAS libraries pack
 * the transposed operand of sgemm TN.  The copy reads X once; it repays
 * where the output has columns for several column tiles
 * (BCAST_MIN_COLS_BYTES of them): docs/performance.md, "Broadcast operands
 * read across their rows". */

/* The least bytes of a row of the output for a broadcast operand to be
 * packed (bcast_plan): 256 floats. */
#define BCAST_MIN_COLS_BYTES 1024
/* The least stride in bytes of the broadcast operand's reduction subscript
 * (a page per step of the reduction). */
#define BCAST_MIN_STRIDE_BYTES 4096

/* Whether read r of statement s, whose subscripts walk the distinct index
 * variables var[] (input_read_vars), is a broadcast operand read across its
 * rows (see above), and its copy's order in perm: the subscripts of
 * left-hand indices first, then those of reduction indices, each in their
 * order.  Requires no subscript of the output's innermost index, the last
 * subscript a left-hand index, reduction indices whose strides in the
 * input are all BCAST_MIN_STRIDE_BYTES or more, and an output row of
 * BCAST_MIN_COLS_BYTES or more, at the bound sizes. */
static int bcast_plan(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *r,
	const int *var, const int64_t *params, int *perm)
{
	const tc_ir_tensor *in = &f->tensors[r->id];
	int inner = s->nlhs - 1, k, j = 0, n = r->nargs, size = tc_dtype_size(in->dtype);
	int64_t stride = size, ext, finest = -1;
	if (s->vars[var[n - 1]].is_reduction ||
		tc_sx_eval(f->tensors[s->tensor].ext[inner], params, NULL, &ext) < 0 ||
		ext * tc_dtype_size(f->tensors[s->tensor].dtype) < BCAST_MIN_COLS_BYTES)
		return 0;
	for (k = n - 1; k >= 0; k--) {
		if (var[k] == inner)
			return 0;
		if (s->vars[var[k]].is_reduction && (finest < 0 || stride < finest))
			finest = stride;
		if (tc_sx_eval(in->ext[k], params, NULL, &ext) < 0 || ext > (1 << 30) / stride)
			return 0;
		stride *= ext;
	}
	if (finest < BCAST_MIN_STRIDE_BYTES)
		return 0;
	for (k = 0; k < n; k++)
		if (!s->vars[var[k]].is_reduction)
			perm[j++] = k;
	for (k = 0; k < n; k++)
		if (s->vars[var[k]].is_reduction)
			perm[j++] = k;
	return 1;
}

/* ---- panels ----
 *
 * A register tile of R rows and C columns (polyhedral/regtile.c) reads, at
 * each step of the reduction, C columns of one row of B in A(m,r_k) *
 * B(r_k,n): its k-th row, N elements after the (k-1)-th.  Where N is a
 * power of two of 1024 floats or more, every such row is on another 4 KiB
 * page and in the same L1 set: the tile's panel of B, C columns by the
 * block of k, never stays in the L1 and costs a TLB lookup per step.  A
 * copy laid out in panels of C columns (tc_ir_tensor.panel: the panel's
 * rows one after the other, C elements each) makes the tile's reads one
 * contiguous stream, as BLAS libraries pack B.  On the Zen 3 host of
 * docs/performance.md sgemm 1024 took about a third of the time with
 * B in panels (AVX2: 6 rows of 2 vectors, panels of 16 floats), sgemm 2048
 * on the Intel host 0.83-0.89x (AVX-512: 6 rows of 4 vectors, panels of
 * 64 floats; docs/performance.md, "An Intel host"); the target asks for
 * panels (tc_target.panel_bytes) where that was measured.
 * Copies take panels when their rows are long (plan_read), and the copy
 * of an operand read along its rows already is made only then, and when
 * the output has rows enough to repay it. */

/* A packed copy planned for one input and permutation. */
typedef struct pack {
	int input, ndim;
	int panel; /* the copy's panels' columns, 0 for none */
	int perm[TC_MAX_RANK];
	/* per dimension of the copy: the extent, the input's or, for a
	 * subscript that is a multiple of a variable (sub_var), the range of
	 * that variable in the user */
	const tc_sexpr *ext[TC_MAX_RANK];
	int var[TC_MAX_RANK];   /* per dimension of the input: the user's variable */
	int strided;            /* a subscript is such a multiple */
	int tensor;             /* the temporary's number in the new function */
	const tc_ir_stmt *user; /* the first statement reading it (names, location) */
	const tc_ir_expr *read; /* its read there */
} pack;

/* A read that reads a packed copy instead. */
typedef struct pack_use {
	const tc_ir_stmt *stmt;
	const tc_ir_expr *read;
	int pack;
} pack_use;

#define MAX_PACKS 32

typedef struct packer {
	tc_arena *ar;
	const tc_ir_func *f;
	const int64_t *params;
	int64_t min_bytes; /* least bytes of a row of the packed copy */
	int64_t panel_bytes; /* bytes of a panel's row (0: no panels) */
	int64_t panel_min_row; /* least bytes of a row of a copy in panels */
	pack packs[MAX_PACKS];
	int npacks;
	pack_use uses[MAX_PACKS];
	int nuses;
} packer;

/* Whether expressions a and b are the same tree. */
static int same_expr(const tc_ir_expr *a, const tc_ir_expr *b)
{
	int k;
	if (a->op != b->op || a->type != b->type || a->id != b->id || a->nargs != b->nargs ||
		memcmp(&a->c, &b->c, sizeof(a->c)))
		return 0;
	for (k = 0; k < a->nargs; k++)
		if (!same_expr(a->args[k], b->args[k]))
			return 0;
	return 1;
}

/* Whether reads a and b use the same tensor and index variables, or are
 * the same read (subscripts that are not plain indices). */
static int same_read(const tc_ir_expr *a, const tc_ir_expr *b)
{
	int k;
	if (a->id != b->id || a->nargs != b->nargs)
		return 0;
	for (k = 0; k < a->nargs; k++)
		if (tc_ir_plain_var(a->args[k]) != tc_ir_plain_var(b->args[k]) ||
			(tc_ir_plain_var(a->args[k]) < 0 && !same_expr(a->args[k], b->args[k])))
			return 0;
	return 1;
}

/* The pack that read r of statement s reads, or -1. */
static int find_use(const packer *P, const tc_ir_stmt *s, const tc_ir_expr *r)
{
	int i;
	for (i = 0; i < P->nuses; i++)
		if (P->uses[i].stmt == s && same_read(P->uses[i].read, r))
			return P->uses[i].pack;
	return -1;
}

/* Whether read r of statement s reads an input along the output's
 * innermost index already, with a reduction index among its other
 * subscripts (B in A(m,r_k) * B(r_k,n)), every subscript a distinct index
 * variable: a copy of it in panels keeps its order (perm the identity). */
static int panel_plan(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *r, int *perm)
{
	int k, n = r->nargs, red = 0;
	if (!plain_input_read(f, s, r) || tc_ir_plain_var(r->args[n - 1]) != s->nlhs - 1)
		return 0;
	for (k = 0; k < n; k++) {
		red |= s->vars[tc_ir_plain_var(r->args[k])].is_reduction;
		perm[k] = k;
	}
	return red;
}

/* The product of the extents of s's left-hand dimensions but the
 * innermost at the bound sizes (the rows of its register tiles), capped at
 * 2^20; -1 if one is unknown. */
static int64_t outer_rows(const packer *P, const tc_ir_stmt *s)
{
	int64_t rows = 1, ext;
	int k;
	for (k = 0; k < s->nlhs - 1; k++) {
		if (tc_sx_eval(P->f->tensors[s->tensor].ext[k], P->params, NULL, &ext) < 0)
			return -1;
		rows = ext > (1 << 20) || rows * ext > (1 << 20) ? 1 << 20 : rows * ext;
	}
	return rows;
}

/* Plan the packing of read r of statement s, if it pays: a row of the
 * packed copy has at least min_bytes (a vector register's worth; shorter
 * rows gain nothing from the register tile).  The copy is in panels where
 * the target asks for panels and its rows have the target's
 * panel_min_row bytes or more (AVX2: 1024; shorter ones share the L1's
 * sets and pages between a few rows: fcrelu's 128 columns, a
 * convolution's 64 output channels, where panels measured slower: conv2d
 * 8x64x56x56 1.2x the time on the Zen 3; the Intel AVX-512 host: 4096,
 * a page per row, as sgemm 512's copy cost more than it saved); a read in the
 * output's order already is copied only then, and when the output has 64
 * rows or more (the copy reads all of B once, the contraction reads it
 * once per block of rows). */
static void plan_read(packer *P, const tc_ir_stmt *s, const tc_ir_expr *r)
{
	int perm[TC_MAX_RANK], var[TC_MAX_RANK], i, k, panel = 0, transposed, strided = 0;
	int size = tc_dtype_size(P->f->tensors[r->id].dtype);
	const tc_sexpr *ext[TC_MAX_RANK];
	int64_t inner = 0;
	if (find_use(P, s, r) >= 0 || P->nuses == MAX_PACKS ||
		!input_read_vars(P->f, s, r, P->params, var))
		return;
	transposed = pack_plan(s, r, var, perm) || bcast_plan(P->f, s, r, var, P->params, perm);
	if (!transposed && (!P->panel_bytes || !panel_plan(P->f, s, r, perm)))
		return;
	for (k = 0; k < r->nargs; k++) {
		int plain = tc_ir_plain_var(r->args[perm[k]]) >= 0;
		strided |= !plain;
		ext[k] = plain ? P->f->tensors[r->id].ext[perm[k]] : s->vars[var[perm[k]]].hi;
	}
	if (tc_sx_eval(ext[r->nargs - 1], P->params, NULL, &inner) < 0 ||
		inner * size < P->min_bytes)
		return;
	if (P->panel_bytes && size > 0 && P->panel_bytes % size == 0 &&
		inner % (P->panel_bytes / size) == 0 && inner * size >= P->panel_min_row)
		panel = (int)(P->panel_bytes / size);
	if (!transposed && (!panel || outer_rows(P, s) < 64))
		return;
	for (i = 0; i < P->npacks; i++) /* another read's copy will do */
		if (P->packs[i].input == r->id &&
			!memcmp(P->packs[i].perm, perm, sizeof(perm[0]) * (size_t)r->nargs) &&
			(strided || P->packs[i].strided
				? P->packs[i].user == s && same_read(P->packs[i].read, r)
				: 1))
			break;
	if (i == P->npacks) {
		P->packs[i].input = r->id;
		P->packs[i].ndim = r->nargs;
		P->packs[i].panel = panel;
		memcpy(P->packs[i].perm, perm, sizeof(perm));
		memcpy(P->packs[i].ext, ext, sizeof(ext));
		memcpy(P->packs[i].var, var, sizeof(var));
		P->packs[i].strided = strided;
		P->packs[i].user = s;
		P->packs[i].read = r;
		P->npacks++;
	}
	P->uses[P->nuses].stmt = s;
	P->uses[P->nuses].read = r;
	P->uses[P->nuses++].pack = i;
}

/* Plan the packs of the reads in e (of statement s). */
static void plan(packer *P, const tc_ir_stmt *s, const tc_ir_expr *e)
{
	int k;
	if (e->op == TC_OP_READ)
		plan_read(P, s, e);
	for (k = 0; k < e->nargs; k++)
		plan(P, s, e->args[k]);
}

/* A copy of e (in the packer's arena) whose packed reads read their copies;
 * NULL when out of memory. */
static tc_ir_expr *rewrite(packer *P, const tc_ir_stmt *s, const tc_ir_expr *e)
{
	tc_ir_expr *c = tc_arena_alloc(P->ar, sizeof(*c));
	int k, i = e->op == TC_OP_READ ? find_use(P, s, e) : -1;
	if (!c)
		return NULL;
	*c = *e;
	if (e->nargs && !(c->args = tc_arena_alloc(P->ar, (size_t)e->nargs * sizeof(*c->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++) {
		const tc_ir_expr *a = i >= 0 ? e->args[P->packs[i].perm[k]] : NULL;
		if (a && tc_ir_plain_var(a) >= 0) { /* plain indices: share them */
			c->args[k] = (tc_ir_expr *)a;
		} else if (a) { /* a multiple of a variable: the variable (a
				 * strided copy serves this read alone: its var) */
			if (!(c->args[k] = tc_ir_new_expr(P->ar, TC_OP_INDEX, TC_T_I32, a->loc, 0)))
				return NULL;
			c->args[k]->id = P->packs[i].var[P->packs[i].perm[k]];
		} else if (!(c->args[k] = rewrite(P, s, e->args[k]))) {
			return NULL;
		}
	}
	if (i >= 0)
		c->id = P->packs[i].tensor;
	return c;
}

/* A copy of subscript e (an index under widening casts, or a multiple of
 * one: sub_var) with index from renamed to.  */
static tc_ir_expr *copy_index(packer *P, const tc_ir_expr *e, int from, int to)
{
	tc_ir_expr *c = tc_arena_alloc(P->ar, sizeof(*c));
	int k;
	if (!c)
		return NULL;
	*c = *e;
	if (e->op == TC_OP_INDEX && e->id == from)
		c->id = to;
	if (e->nargs && !(c->args = tc_arena_alloc(P->ar, (size_t)e->nargs * sizeof(*c->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++)
		if (!(c->args[k] = copy_index(P, e->args[k], from, to)))
			return NULL;
	return c;
}

/* The packing statement of pk: packed(i_0..) = input(...), over the
 * packed tensor's extents, its indices named after the reading statement's. */
static int make_copy(packer *P, const pack *pk, tc_ir_stmt *out)
{
	tc_ir_expr *rd = tc_arena_alloc(P->ar, sizeof(*rd));
	int k;
	memset(out, 0, sizeof(*out));
	out->tensor = pk->tensor;
	out->nlhs = out->nvars = pk->ndim;
	out->red = TC_RED_ASSIGN;
	out->pack = 1;
	out->loc = pk->user->loc;
	out->vars = tc_arena_alloc(P->ar, (size_t)pk->ndim * sizeof(*out->vars));
	if (!rd || !out->vars)
		return -1;
	*rd = *pk->read;
	if (!(rd->args = tc_arena_alloc(P->ar, (size_t)pk->ndim * sizeof(*rd->args))))
		return -1;
	for (k = 0; k < pk->ndim; k++) {
		int d = pk->perm[k], v = pk->var[d];
		if (!(rd->args[d] = copy_index(P, pk->read->args[d], v, k)) ||
			!(out->vars[k].lo = tc_sx_const(P->ar, 0)))
			return -1;
		out->vars[k].name = pk->user->vars[v].name;
		out->vars[k].hi = pk->ext[k];
	}
	out->rhs = rd;
	return 0;
}

/* ---- channels last ----
 *
 * A convolution O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)
 * vectorised along its output's stride-1 dimension w puts output rows of
 * W - KW + 1 points in vectors (54 = 48 + 6 at 56 x 56: a 6-wide tail per
 * row; 5 of 16 lanes at 7 x 7) and broadcasts a weight per row.  Moved
 * last, the output channels f fill whole vectors and the register tile's
 * rows become output points, each broadcasting one input element: oneDNN's
 * direct convolution.  So the reduction writes a temporary with f last,
 *     O_cl(n,h,w,f) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)
 *     O(n,f,h,w) = O_cl(n,h,w,f)
 * and the packing below then copies W1 with f last, as it does for any
 * contraction whose output's innermost index is not its operand's last.
 * Every element accumulates the same terms in the same order, so results
 * are bit for bit the same; the copy back costs one pass over the output,
 * which the scheduler fuses with the reduction's tiles.
 *
 * When it pays (conv_channel): a channels-last tile needs a broadcast of
 * an input element per point and vector of channels, a row-vector tile a
 * load per row and vector of points (the shared operand aside), so with
 * one vector of channels per point the two take as many loads per multiply
 * and channels last adds the copy back and the packing.  It is chosen when
 * the channels fill two vectors or more (a broadcast then feeds two
 * multiplies or more), or when the output's rows would fill less than half
 * a vector (5 of 16 lanes at 7 x 7), or when the window strides (2 * w +
 * r_kw: row vectors of the input would be gathers).  Grouped 3 x 3
 * convolutions with 16 channels per group, one thread: 14 x 14 images
 * 0.6x the time of channels last with rows of h kept (regtile.c), 28 x 28
 * about the same (0.96x), 56 x 56 0.86x; 7 x 7 images 12x the time (rows
 * of 5), so those stay channels last (docs/performance.md, Convolutions). */

/* A read in e whose last subscript uses index v but is not v alone (a
 * sliding window: w + r_kw, 2 * w + r_kw), or NULL. */
static const tc_ir_expr *window_read(const tc_ir_expr *e, int v)
{
	int k;
	if (e->op == TC_OP_READ && e->nargs &&
		tc_ir_plain_var(e->args[e->nargs - 1]) < 0 && tc_ir_uses_var(e->args[e->nargs - 1], v))
		return e;
	for (k = 0; k < e->nargs; k++) {
		const tc_ir_expr *r = window_read(e->args[k], v);
		if (r)
			return r;
	}
	return NULL;
}

/* The left-hand index of s that a filter read in e walks and window read
 * x does not: e reads an input with distinct indices (plain, or multiples
 * of one index: sub_var at the sizes params), not the output's innermost
 * one, its last a reduction index (W1(f,r_c,r_kh,r_kw): f;
 * W1(g,f,r_c,r_kh,r_kw) in a grouped convolution: f, since the input read
 * uses g; W1(f,c,2*r_j+1,2*r_i) in a phase of a strided convolution's data
 * gradient: c); the last such index of the first such read, or -1. */
static int channel_var(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *e,
	const tc_ir_expr *x, const int64_t *params)
{
	int k, var[TC_MAX_RANK], found = -1, inner = s->nlhs - 1;
	if (e->op == TC_OP_READ && e != x && f->tensors[e->id].kind == TC_TENSOR_INPUT &&
		e->nargs >= 2) {
		if (!input_read_vars(f, s, e, params, var) ||
			!s->vars[var[e->nargs - 1]].is_reduction || tc_ir_uses_var(e, inner))
			return -1;
		for (k = 0; k < e->nargs; k++)
			if (var[k] < s->nlhs && !tc_ir_uses_var(x, var[k]))
				found = var[k];
		return found;
	}
	for (k = 0; k < e->nargs && found < 0; k++)
		found = channel_var(f, s, e->args[k], x, params);
	return found;
}

/* Whether the window subscript e walks index v with stride 1: v itself or
 * a sum with v as one term (w + r_kw, not 2 * w + r_kw). */
static int unit_window(const tc_ir_expr *e, int v)
{
	while (e->op == TC_OP_CAST)
		e = e->args[0];
	return tc_ir_plain_var(e) == v || (e->op == TC_OP_ADD && e->nargs == 2 &&
		(tc_ir_plain_var(e->args[0]) == v || tc_ir_plain_var(e->args[1]) == v));
}

/* The output channel index of statement s when s is a convolution whose
 * output should be written channels last (see above), else -1: a reduction
 * with init over the whole extent of its output (rank 3 or more, not read
 * by s, not a widened accumulator), index bounds free of other indices, a
 * window read along the output's innermost index, a filter read, and a
 * row of channels of at least min_bytes (a vector) at the bound sizes
 * params; with fewer than two vectors of channels, only a strided window
 * or output rows shorter than half a vector (see above). */
static int conv_channel(const tc_ir_func *f, const tc_ir_stmt *s, const int64_t *params,
	int64_t min_bytes)
{
	const tc_ir_tensor *o = &f->tensors[s->tensor];
	const tc_ir_expr *x;
	int64_t lo, hi, ext, row;
	int k, c;
	if (s->red == TC_RED_ASSIGN || !s->init || s->pack || s->nlhs < 3 || s->nvars <= s->nlhs ||
		o->ndim != s->nlhs || o->widened || o->rowbuf || tc_ir_reads(s->rhs, s->tensor))
		return -1;
	for (k = 0; k < s->nvars; k++)
		if (!tc_ir_var_range(&s->vars[k], params, &lo, &hi) ||
			(k < s->nlhs && (tc_sx_eval(o->ext[k], params, NULL, &ext) < 0 || lo != 0 ||
				hi != ext)))
			return -1;
	if (!(x = window_read(s->rhs, s->nlhs - 1)) || (c = channel_var(f, s, s->rhs, x, params)) < 0 ||
		c == s->nlhs - 1)
		return -1;
	if (tc_sx_eval(o->ext[c], params, NULL, &ext) < 0 ||
		ext * tc_dtype_size(o->dtype) < min_bytes)
		return -1;
	if (ext * tc_dtype_size(o->dtype) < 2 * min_bytes &&
		unit_window(x->args[x->nargs - 1], s->nlhs - 1) &&
		(tc_sx_eval(o->ext[s->nlhs - 1], params, NULL, &row) < 0 ||
			2 * row * tc_dtype_size(o->dtype) >= min_bytes))
		return -1;
	return c;
}

/* Whether every read of tensor o in e has the plain subscripts 0 .. n-1,
 * in order (the element the statement writes). */
static int reads_own_element(const tc_ir_expr *e, int o, int n)
{
	int k;
	if (e->op == TC_OP_READ && e->id == o) {
		if (e->nargs != n)
			return 0;
		for (k = 0; k < n; k++)
			if (tc_ir_plain_var(e->args[k]) != k)
				return 0;
		return 1;
	}
	for (k = 0; k < e->nargs; k++)
		if (!reads_own_element(e->args[k], o, n))
			return 0;
	return 1;
}

/* Whether statement t, right after convolution s, is an epilogue the copy
 * back can take (the bias of O(n,f,h,w) = O(n,f,h,w) + B(f)): a plain
 * assignment to s's output over its whole extent, reading it only at the
 * element it writes.  Folded, the copy is one statement that the
 * scheduler fuses with the reduction's band, where a copy and an epilogue
 * apart made it leave the reduction members in bands of their own. */
static int foldable(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_stmt *t,
	const int64_t *params)
{
	return t->tensor == s->tensor && t->red == TC_RED_ASSIGN && !t->pack &&
		t->nvars == t->nlhs && tc_ir_covers_tensor(f, t, params) &&
		reads_own_element(t->rhs, t->tensor, t->nlhs);
}

/* A copy of e (in ar) reading tensor tmp, with subscript k moved to at[k],
 * where e reads tensor o; NULL when out of memory. */
static tc_ir_expr *reread(tc_arena *ar, const tc_ir_expr *e, int o, int tmp, const int *at)
{
	tc_ir_expr *c = tc_arena_alloc(ar, sizeof(*c));
	int k, is = e->op == TC_OP_READ && e->id == o;
	if (!c)
		return NULL;
	*c = *e;
	if (is)
		c->id = tmp;
	if (e->nargs && !(c->args = tc_arena_alloc(ar, (size_t)e->nargs * sizeof(*c->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++)
		if (is)
			c->args[at[k]] = e->args[k];
		else if (!(c->args[k] = reread(ar, e->args[k], o, tmp, at)))
			return NULL;
	return c;
}

/* A copy of e (in ar) with index variable k renamed to at[k]; NULL when
 * out of memory. */
static tc_ir_expr *renumber(tc_arena *ar, const tc_ir_expr *e, const int *at)
{
	tc_ir_expr *c = tc_arena_alloc(ar, sizeof(*c));
	int k;
	if (!c)
		return NULL;
	*c = *e;
	if (e->op == TC_OP_INDEX)
		c->id = at[e->id];
	if (e->nargs && !(c->args = tc_arena_alloc(ar, (size_t)e->nargs * sizeof(*c->args))))
		return NULL;
	for (k = 0; k < e->nargs; k++)
		if (!(c->args[k] = renumber(ar, e->args[k], at)))
			return NULL;
	return c;
}

/* Write statement s (whose output channel index is ch) into out[0] and
 * out[1] as the reduction into a channels-last temporary, tensor number
 * tmp of g (filled here), and the copy back into s's output: epilogue
 * reading the temporary when there is one to fold (foldable), else a
 * plain copy. */
static int split_conv(tc_arena *ar, tc_ir_func *g, const tc_ir_stmt *s, int ch, int tmp,
	const tc_ir_stmt *epilogue, tc_ir_stmt *out)
{
	const tc_ir_tensor *o = &g->tensors[s->tensor];
	tc_ir_tensor *t = &g->tensors[tmp];
	int at[TC_MAX_RANK * 2], idx[TC_MAX_RANK * 2], k, j, n = s->nlhs;
	if (s->nvars > TC_MAX_RANK * 2)
		return -1;
	/* index k of s becomes at[k]: the channel last of the left-hand ones */
	for (k = j = 0; k < n; k++)
		if (k != ch)
			at[k] = j++;
	at[ch] = n - 1;
	for (k = n; k < s->nvars; k++)
		at[k] = k;
	*t = *o;
	t->kind = TC_TENSOR_TEMP;
	t->name = tc_ir_fresh_name(ar, g, o->name, "_cl");
	/* a row buffer where the rowbuf pass finds one (polyhedral/contract.c):
	 * the copy back reads each row of O_cl right after the register tiles
	 * of that row wrote it, so one row (54 x 64 floats for conv2d
	 * 8x64x56x56) on the stack replaces a 6 MiB workspace region, whose
	 * pages made conv2d's time swing from process to process (17 to 24 ms
	 * of thread CPU time, docs/performance.md, Convolutions, The
	 * channels-last temporary as a row buffer); else the workspace */
	t->rowbuf = 1;
	t->ext = tc_arena_alloc(ar, (size_t)n * sizeof(*t->ext));
	out[0] = *s;
	out[0].tensor = tmp;
	out[0].vars = tc_arena_alloc(ar, (size_t)s->nvars * sizeof(*out[0].vars));
	if (!t->name || !t->ext || !out[0].vars || !(out[0].rhs = renumber(ar, s->rhs, at)) ||
		(s->guard && !(out[0].guard = renumber(ar, s->guard, at))))
		return -1;
	for (k = 0; k < s->nvars; k++)
		out[0].vars[at[k]] = s->vars[k];
	for (k = 0; k < n; k++)
		t->ext[at[k]] = o->ext[k];
	if (epilogue) { /* the epilogue reading O_cl in place of O */
		out[1] = *epilogue;
		return (out[1].rhs = reread(ar, epilogue->rhs, s->tensor, tmp, at)) ? 0 : -1;
	}
	/* O(lhs) = O_cl(lhs with the channel last) */
	memset(&out[1], 0, sizeof(out[1]));
	out[1].tensor = s->tensor;
	out[1].nlhs = out[1].nvars = n;
	out[1].red = TC_RED_ASSIGN;
	out[1].loc = s->loc;
	out[1].vars = s->vars; /* its left-hand ones, in order */
	for (k = 0; k < n; k++)
		idx[at[k]] = k;
	return (out[1].rhs = tc_ir_read_at(ar, g, tmp, idx, n, s->loc)) ? 0 : -1;
}

/* The index a statement's reduction should write last (split_conv), or
 * -1: conv_channel, short_row_var. */
typedef int (*split_choice)(const tc_ir_func *f, const tc_ir_stmt *s, const int64_t *params,
	int64_t min_bytes);

/* f with every statement for which choose gives an index split by
 * split_conv into a reduction into a temporary with that index last and
 * the copy back, into which the next statement is folded when fold is set
 * and it is foldable; f itself when there is none, NULL when out of
 * memory. */
static const tc_ir_func *split_each(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
	int64_t min_bytes, split_choice choose, int fold)
{
	tc_ir_func *g;
	int i, j, n = 0, *ch = tc_arena_alloc(ar, (size_t)(f->nstmts ? f->nstmts : 1) * sizeof(int));
	if (!ch)
		return NULL;
	for (i = 0; i < f->nstmts; i++)
		n += (ch[i] = choose(f, &f->stmts[i], params, min_bytes)) >= 0;
	if (!n)
		return f;
	if (!(g = tc_ir_func_room(ar, f, n, f->nstmts + n)))
		return NULL; /* its ntensors grows as the temporaries are named */
	for (i = j = 0; i < f->nstmts; i++) {
		const tc_ir_stmt *epi = fold && i + 1 < f->nstmts && ch[i + 1] < 0 &&
			foldable(f, &f->stmts[i], &f->stmts[i + 1], params) ? &f->stmts[i + 1] : NULL;
		if (ch[i] < 0) {
			g->stmts[j++] = f->stmts[i];
			continue;
		}
		if (split_conv(ar, g, &f->stmts[i], ch[i], g->ntensors, epi, &g->stmts[j]) < 0)
			return NULL;
		g->ntensors++;
		j += 2;
		i += epi != NULL;
	}
	g->nstmts = j;
	return g;
}

/* f with every convolution that conv_channel takes (its output channels
 * fill a vector of min_bytes, and channels last pays) written channels
 * last (see above), its epilogue folded into the copy back; f itself when
 * there is none, NULL when out of memory. */
static const tc_ir_func *channels_last(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
	int64_t min_bytes)
{
	return split_each(ar, f, params, min_bytes, conv_channel, 1);
}

/* ---- short rows ----
 *
 * A contraction whose output rows are shorter than a vector, such as the
 * weight gradient dW(i,h) +=! X(r_b,i) * dH(r_b,h) of a layer of 10 units,
 * leaves the register tile a fraction of a vector per row (8 + 2 lanes of
 * 10) and a broadcast for every multiply.  When another left-hand index
 * walks the last dimension of an operand (i in X(r_b,i)) and its extent
 * fills two vectors, the reduction writes a temporary with that index last,
 *     dW_cl(h,i) +=! X(r_b,i) * dH(r_b,h)
 *     dW(i,h) = dW_cl(h,i)
 * which is a plain matmul: whole vectors of X's rows and a broadcast of
 * dH per row of the tile (the 10 rows in tiles of 6 and 4).  The copy back
 * touches each output element once, against the reduction's extent of
 * terms per element.  Every element accumulates the same terms in the same
 * order, so results are bit for bit the same (split_conv makes both
 * statements, as for a convolution written channels last). */

/* Whether a read in e has index v alone as its last subscript. */
static int walks_last(const tc_ir_expr *e, int v)
{
	int k;
	if (e->op == TC_OP_READ && e->nargs && tc_ir_plain_var(e->args[e->nargs - 1]) == v)
		return 1;
	for (k = 0; k < e->nargs; k++)
		if (walks_last(e->args[k], v))
			return 1;
	return 0;
}

/* The left-hand index of statement s to move last (see above), else -1: s
 * is a reduction with init over the whole extent of its output (not read
 * by s, not a widened accumulator or a row buffer), with index bounds free
 * of other indices; its output's rows (the innermost extent) are shorter
 * than min_bytes; each element sums at least a vector's lanes of terms
 * (min_bytes / the dtype's size: with fewer, the copy back would be a
 * large share of the work); and the left-hand index is the last one that
 * some read walks as its last subscript and whose extent has twice
 * min_bytes or more
 * (at least two vectors, so that the register tiles along it make a loop
 * that threads can share: at 24 the rewritten nest of a network's
 * backward pass had no parallel loop), at the bound sizes params. */
static int short_row_var(const tc_ir_func *f, const tc_ir_stmt *s, const int64_t *params,
	int64_t min_bytes)
{
	const tc_ir_tensor *o = &f->tensors[s->tensor];
	int64_t lo, hi, ext[TC_MAX_RANK], terms = 1;
	int k, size = tc_dtype_size(o->dtype), found = -1;
	if (s->red == TC_RED_ASSIGN || !s->init || s->pack || s->nlhs < 2 ||
		s->nlhs > TC_MAX_RANK || s->nvars <= s->nlhs || o->ndim != s->nlhs || o->widened ||
		o->rowbuf || tc_ir_reads(s->rhs, s->tensor))
		return -1;
	for (k = 0; k < s->nvars; k++) {
		if (!tc_ir_var_range(&s->vars[k], params, &lo, &hi) ||
			(k < s->nlhs && (tc_sx_eval(o->ext[k], params, NULL, &ext[k]) < 0 || lo != 0 ||
				hi != ext[k])))
			return -1;
		if (k >= s->nlhs) /* at most min_bytes: no overflow */
			terms = hi - lo >= min_bytes || terms * (hi - lo) >= min_bytes
				? min_bytes : terms * (hi - lo);
	}
	if (ext[s->nlhs - 1] * size >= min_bytes || terms * size < min_bytes)
		return -1;
	for (k = 0; k < s->nlhs - 1; k++)
		if (ext[k] * size >= 2 * min_bytes && walks_last(s->rhs, k))
			found = k;
	return found;
}

/* f with every contraction of short output rows written with another
 * left-hand index last (see above); f itself when there is none, NULL
 * when out of memory. */
static const tc_ir_func *short_rows(tc_arena *ar, const tc_ir_func *f, const int64_t *params,
	int64_t min_bytes)
{
	return split_each(ar, f, params, min_bytes, short_row_var, 0);
}

/* ---- transposes the user writes ---- */

/* Whether read r of statement s reads an input at distinct plain index
 * variables of s (a bias D(n) or D(k) of T(k,n) = B(n,k) + D(n), a
 * scalar; E(k,n) too, which the code generator moves element by element
 * within the squares: strided along their rows). */
static int row_broadcast(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *r)
{
	int k, j, v[TC_MAX_RANK];
	if (f->tensors[r->id].kind != TC_TENSOR_INPUT || r->nargs > TC_MAX_RANK)
		return 0;
	for (k = 0; k < r->nargs; k++) {
		if ((v[k] = tc_ir_plain_var(r->args[k])) < 0 || v[k] >= s->nlhs)
			return 0;
		for (j = 0; j < k; j++)
			if (v[j] == v[k])
				return 0;
	}
	return 1;
}

/* Whether every read in e, of statement s, is a transposed read (a plain
 * input read whose subscripts permute the left-hand ones, the last the
 * left-hand last but one; *reads counts them) or an input read at plain
 * index variables (row_broadcast: D(n), D(k)).  The rest of e is any
 * pointwise computation (+ - * /, min, max and constants over reads of
 * s's type are what the code generator moves as vectors;
 * codegen/llvm_expr.c, tc_cg_llvm_copy_ok). */
static int transposed_terms(const tc_ir_func *f, const tc_ir_stmt *s, const tc_ir_expr *e,
	int *reads)
{
	int i;
	if (!e)
		return 0;
	if (e->op == TC_OP_READ) {
		/* distinct plain subscripts, as many as the variables: a
		 * permutation of the left-hand ones */
		if (e->nargs == s->nlhs && plain_input_read(f, s, e) &&
			tc_ir_plain_var(e->args[e->nargs - 1]) == s->nlhs - 2) {
			++*reads;
			return 1;
		}
		return row_broadcast(f, s, e);
	}
	for (i = 0; i < e->nargs; i++)
		if (!transposed_terms(f, s, e->args[i], reads))
			return 0;
	return 1;
}

/* A statement T(k,n) = B(n,k) that copies an input with its subscripts
 * permuted, the input's last one the output's last but one (a transpose
 * of the last two dimensions, what the square tiles move), or computes
 * pointwise from such reads (T(k,n) = B(n,k) * 2 + C(n,k), which ran
 * untiled at 15 times a transpose's time; fmax(B(n,k), 0)), whose tensor
 * no statement before it writes or reads, can run before every other
 * statement, as
 * the packing copies do: marked pack, the polyhedral model schedules it
 * in square tiles (polyhedral/schedule.c, pack_schedule) and the code
 * generator moves the squares as vectors transposed in registers
 * (codegen/llvm_loop.c, "transposing copies").  Left to the scheduler,
 * such a copy ran untiled: 1024 x 1024 took 3.0 ms against 0.1 for a
 * plain copy (docs/performance.md).  Its rows must have min_bytes or
 * more, as a packing copy's. */
static int user_transpose(const tc_ir_func *f, int i, const int64_t *params, int64_t min_bytes)
{
	const tc_ir_stmt *s = &f->stmts[i];
	int j, size = tc_dtype_size(f->tensors[s->tensor].dtype), reads = 0;
	int64_t inner;
	if (s->red != TC_RED_ASSIGN || s->pack || s->guard || s->nvars != s->nlhs ||
		f->tensors[s->tensor].kind == TC_TENSOR_INPUT ||
		!transposed_terms(f, s, s->rhs, &reads) || !reads)
		return 0;
	if (tc_sx_eval(f->tensors[s->tensor].ext[s->nlhs - 1], params, NULL, &inner) < 0 ||
		inner * size < min_bytes)
		return 0;
	for (j = 0; j < i; j++)
		if (f->stmts[j].tensor == s->tensor || tc_ir_reads(f->stmts[j].rhs, s->tensor) ||
			(f->stmts[j].guard && tc_ir_reads(f->stmts[j].guard, s->tensor)))
			return 0;
	return 1;
}

/* f with the transposes the user writes marked pack (see above), or f
 * itself when there are none; NULL when out of memory. */
static const tc_ir_func *mark_transposes(tc_arena *ar, const tc_ir_func *f,
	const int64_t *params, int64_t min_bytes)
{
	tc_ir_func *g = NULL;
	int i;
	for (i = 0; i < f->nstmts; i++) {
		if (!user_transpose(f, i, params, min_bytes))
			continue;
		if (!g) {
			if (!(g = tc_arena_alloc(ar, sizeof(*g))))
				return NULL;
			*g = *f;
			if (!(g->stmts = tc_arena_alloc(ar, (size_t)f->nstmts * sizeof(*g->stmts))))
				return NULL;
			memcpy(g->stmts, f->stmts, (size_t)f->nstmts * sizeof(*g->stmts));
		}
		g->stmts[i].pack = 1;
	}
	return g ? g : f;
}

const tc_ir_func *tc_ir_pack(__tc_keep tc_arena *ar, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, int64_t min_bytes, int64_t panel_bytes,
	int64_t panel_min_row)
{
	packer P;
	tc_ir_func *g;
	int i, k;

	if (!(f = channels_last(ar, f, params, min_bytes)) ||
		!(f = short_rows(ar, f, params, min_bytes)) ||
		!(f = mark_transposes(ar, f, params, min_bytes)))
		return NULL;
	memset(&P, 0, sizeof(P));
	P.ar = ar;
	P.f = f;
	P.params = params;
	P.min_bytes = min_bytes;
	P.panel_bytes = panel_bytes > 0 ? panel_bytes : 0;
	P.panel_min_row = panel_min_row;
	for (i = 0; i < f->nstmts; i++)
		if (f->stmts[i].red != TC_RED_ASSIGN && f->stmts[i].nvars > f->stmts[i].nlhs)
			plan(&P, &f->stmts[i], f->stmts[i].rhs);
	if (!P.npacks)
		return f;
	g = tc_arena_alloc(ar, sizeof(*g));
	if (!g)
		return NULL;
	*g = *f;
	g->nstmts = f->nstmts + P.npacks;
	g->tensors = tc_arena_alloc(ar, (size_t)(f->ntensors + P.npacks) * sizeof(*g->tensors));
	g->stmts = tc_arena_alloc(ar, (size_t)g->nstmts * sizeof(*g->stmts));
	if (!g->tensors || !g->stmts)
		return NULL;
	memcpy(g->tensors, f->tensors, (size_t)f->ntensors * sizeof(*g->tensors));
	for (i = 0; i < P.npacks; i++) {
		pack *pk = &P.packs[i];
		const tc_ir_tensor *in = &f->tensors[pk->input];
		tc_ir_tensor *t = &g->tensors[f->ntensors + i];
		pk->tensor = f->ntensors + i;
		*t = *in;
		t->kind = TC_TENSOR_TEMP;
		t->panel = pk->panel;
		/* named after the copies before it too (two layouts of one input) */
		g->ntensors = f->ntensors + i;
		t->name = tc_ir_fresh_name(ar, g, in->name, "_packed");
		t->ext = tc_arena_alloc(ar, (size_t)pk->ndim * sizeof(*t->ext));
		if (!t->name || !t->ext)
			return NULL;
		for (k = 0; k < pk->ndim; k++)
			t->ext[k] = pk->ext[k];
		if (make_copy(&P, pk, &g->stmts[i]) < 0)
			return NULL;
	}
	g->ntensors = f->ntensors + P.npacks;
	for (i = 0; i < f->nstmts; i++) {
		tc_ir_stmt *s = &g->stmts[P.npacks + i];
		*s = f->stmts[i];
		if (!(s->rhs = rewrite(&P, &f->stmts[i], f->stmts[i].rhs)))
			return NULL;
	}
	return g;
}
