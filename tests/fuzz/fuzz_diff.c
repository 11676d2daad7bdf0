/* fuzz_diff: a differential fuzzer, the compiled CPU code against the
 * reference interpreter, through the public API (include/tcomp.h) only.
 *
 * Each case is a random well-formed def (several statements of every kind,
 * every reduction operator and element type, casts, builtins, gathers,
 * lets, exists, where ranges, ?:, temporaries, in-place updates), random
 * sizes and a random mapping-option combination.  A forked child compiles
 * it twice (target=interp, and target=cpu with the drawn options), runs both
 * on the same fresh random inputs with outputs poisoned (two different
 * patterns, so an element neither writes differs) and compares the outputs:
 * bit for bit, but for float values the generator marked inexact (below),
 * which are compared within an error bound.  A crash or a hang (alarm) of
 * the child is a failure of that case, not the end of the run.
 *
 * Exactness by construction.  A float value is "inexact" when the two
 * backends may legally compute it differently: a float sum over reduction
 * indices (reassociated under vecreduce; products keep the interpreter's
 * order, docs/language.md 6.8 "Reduction order"), a builtin call (float32 builtins are
 * within a few ulp), or anything computed from such a value.  The generator
 * never feeds an inexact value to a discontinuous operation (comparisons,
 * casts and stores to integer or bool, floor-like builtins, %, a divisor),
 * so integer and bool outputs and exact float outputs must agree bit for
 * bit (NaN matching NaN, -0 matching +0; a value whose zero may have either
 * sign, from a float max/min reduction, reaches a divisor or a builtin that
 * tells the zeros apart through fabs).  An inexact float output may
 * differ by  2 * eps(dtype) * (R + 2) * scale,  R the number of values the
 * case reduces per element (summed over its statements), scale the largest
 * finite magnitude among the case's inputs and outputs, integers included
 * (at least 1);
 * infinities and NaN must match exactly (a NaN's sign aside: the sign of a
 * NaN that an operation makes is unspecified, docs/language.md 6.8, so
 * copysign's second argument is taken through fabs where it may be one,
 * fix_nsign).
 *
 * Each case's backward def is also derived (tc_module_grad, without and
 * with TC_GRAD_SAVES): a refusal must be a user error, never an internal
 * one (the library checks the text it derives, so a derived text that does
 * not check is one: class grad-internal-error).
 *
 * Failures are minimised (statements, outputs, where/let/exists clauses,
 * subexpressions, options, sizes; each candidate run in a child like any
 * case) and written as a reproducer (a .tc file whose leading comments give
 * the options, the inputs and the data seed; tests/README.md describes the
 * format) under the failure directory.  Known, filed differences are listed
 * in the exclusion table below (each with its reason); a failure one of them
 * matches is counted and reported as excluded, not as a failure.
 *
 * Usage: see usage() or tests/README.md. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcomp.h"
#include "testutil.h"
#include "codegen/llvm.h"
#include "lang/util.h"

/* ------------------------------------------------------------------ */
/* Element types: adding a dtype is one row (and, for a new storage   */
/* format, its load and store functions).                             */

enum { K_BOOL, K_INT, K_FLOAT };

typedef struct dtype_row {
	const char *name;                 /* as in .tc and tc_dtype_parse */
	int kind;                         /* K_BOOL, K_INT, K_FLOAT */
	double eps;                       /* float: unit roundoff 2^-p; else 0 */
	int weight;                       /* how often the generator picks it */
	double (*load)(const void *p);    /* element as a double */
	void (*store)(void *p, double v); /* v (already in range) stored */
} dtype_row;

#define LOADSTORE(suffix, ctype)                                                  \
	static double load_##suffix(const void *p)                                \
	{                                                                         \
		ctype x;                                                          \
		memcpy(&x, p, sizeof x);                                          \
		return (double)x;                                                 \
	}                                                                         \
	static void store_##suffix(void *p, double v)                             \
	{                                                                         \
		ctype x = (ctype)v;                                               \
		memcpy(p, &x, sizeof x);                                          \
	}
LOADSTORE(u8, uint8_t)
LOADSTORE(i8, int8_t)
LOADSTORE(i16, int16_t)
LOADSTORE(u16, uint16_t)
LOADSTORE(i32, int32_t)
LOADSTORE(u32, uint32_t)
LOADSTORE(i64, int64_t)
LOADSTORE(u64, uint64_t)
LOADSTORE(f32, float)
LOADSTORE(f64, double)

/* 16-bit floats: their bits converted (testutil.h's conversions, written
 * independently of ir/half.c). */
#define LOADSTORE16(suffix, to_double, from_double)                             \
	static double load_##suffix(const void *p)                              \
	{                                                                       \
		uint16_t h;                                                     \
		memcpy(&h, p, 2);                                               \
		return to_double(h);                                            \
	}                                                                       \
	static void store_##suffix(void *p, double v)                           \
	{                                                                       \
		uint16_t h = from_double(v);                                    \
		memcpy(p, &h, 2);                                               \
	}
LOADSTORE16(f16, tu_half_to_double, tu_half_from_double)
LOADSTORE16(bf16, tu_bf16_to_double, tu_bf16_from_double)

static const dtype_row dtypes[] = {
	{"bool", K_BOOL, 0, 2, load_u8, store_u8},
	{"int8", K_INT, 0, 2, load_i8, store_i8},
	{"int16", K_INT, 0, 1, load_i16, store_i16},
	{"int32", K_INT, 0, 3, load_i32, store_i32},
	{"int64", K_INT, 0, 2, load_i64, store_i64},
	{"uint8", K_INT, 0, 2, load_u8, store_u8},
	{"uint16", K_INT, 0, 1, load_u16, store_u16},
	{"uint32", K_INT, 0, 1, load_u32, store_u32},
	{"uint64", K_INT, 0, 1, load_u64, store_u64},
	{"float16", K_FLOAT, 0x1p-11, 2, load_f16, store_f16},
	{"bfloat16", K_FLOAT, 0x1p-8, 2, load_bf16, store_bf16},
	{"float32", K_FLOAT, 0x1p-24, 5, load_f32, store_f32},
	{"float64", K_FLOAT, 0x1p-53, 3, load_f64, store_f64},
};
#define NDTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static int dtype_find(const char *name)
{
	for (int i = 0; i < NDTYPES; i++)
		if (!strcmp(dtypes[i].name, name))
			return i;
	return -1;
}

/* The row of a DLDataType (tc_dtype_str names it). */
static int dtype_of(DLDataType t)
{
	const char *s = tc_dtype_str(t);
	return s ? dtype_find(s) : -1;
}

static int dtype_size(int d)
{
	DLDataType t;
	if (tc_dtype_parse(dtypes[d].name, &t) != 0)
		return 0;
	return t.bits / 8;
}

/* ------------------------------------------------------------------ */
/* Builtins drawn by the generator (docs/language.md section 7).      */

enum { B_FLOAT, B_INT_RESULT, B_INT_FIRST, B_INT_SECOND };

typedef struct builtin_row {
	const char *name;
	int arity;
	int kind;       /* B_* */
	int continuous; /* may take an inexact argument: its error stays within
			   the bound's scale (not exp, whose relative error grows
			   with |x|: seed 1414 case 2261, exp(expm1(i)) differed by
			   32 ulp; not cbrt, steep at 0; not sin and cos, whose
			   error is the argument's absolute error, eps * |x| for
			   an intermediate x the scale does not see: seed 20261213
			   case 3460, cos(sinh(B(i))) with sinh(-6) one ulp apart,
			   201.71315 and 201.71317, differed by 9e-6 > 7e-6) */
} builtin_row;

static const builtin_row builtins[] = {
	{"sin", 1, B_FLOAT, 0}, {"cos", 1, B_FLOAT, 0}, {"tanh", 1, B_FLOAT, 1},
	{"atan", 1, B_FLOAT, 1}, {"fabs", 1, B_FLOAT, 1}, {"erf", 1, B_FLOAT, 1},
	{"cbrt", 1, B_FLOAT, 0}, {"exp", 1, B_FLOAT, 0}, {"asinh", 1, B_FLOAT, 1},
	{"sqrt", 1, B_FLOAT, 0}, {"log", 1, B_FLOAT, 0}, {"log2", 1, B_FLOAT, 0},
	{"log1p", 1, B_FLOAT, 0}, {"expm1", 1, B_FLOAT, 0}, {"exp2", 1, B_FLOAT, 0},
	{"floor", 1, B_FLOAT, 0}, {"ceil", 1, B_FLOAT, 0}, {"round", 1, B_FLOAT, 0},
	{"trunc", 1, B_FLOAT, 0}, {"rint", 1, B_FLOAT, 0}, {"nearbyint", 1, B_FLOAT, 0},
	{"rsqrt", 1, B_FLOAT, 0}, {"lgamma", 1, B_FLOAT, 0}, {"tgamma", 1, B_FLOAT, 0},
	{"erfinv", 1, B_FLOAT, 0}, {"normcdf", 1, B_FLOAT, 1}, {"sinpi", 1, B_FLOAT, 0},
	{"cospi", 1, B_FLOAT, 0}, {"logb", 1, B_FLOAT, 0}, {"j0", 1, B_FLOAT, 0},
	{"y1", 1, B_FLOAT, 0}, {"sinh", 1, B_FLOAT, 0}, {"acos", 1, B_FLOAT, 0},
	{"atan2", 2, B_FLOAT, 0}, {"copysign", 2, B_FLOAT, 0}, {"fdim", 2, B_FLOAT, 1},
	{"fmax", 2, B_FLOAT, 1}, {"fmin", 2, B_FLOAT, 1}, {"fmod", 2, B_FLOAT, 0},
	{"hypot", 2, B_FLOAT, 1}, {"pow", 2, B_FLOAT, 0}, {"remainder", 2, B_FLOAT, 0},
	{"nextafter", 2, B_FLOAT, 0}, {"fma", 3, B_FLOAT, 1}, {"norm3d", 3, B_FLOAT, 1},
	{"ilogb", 1, B_INT_RESULT, 0}, {"jn", 2, B_INT_FIRST, 0}, {"yn", 2, B_INT_FIRST, 0},
	{"ldexp", 2, B_INT_SECOND, 1},
};
#define NBUILTINS ((int)(sizeof builtins / sizeof builtins[0]))

/* ------------------------------------------------------------------ */
/* The program model: flat arrays, so that a program is copied by value */
/* (the minimiser edits copies).                                       */

#define MAXSIZES 3
#define MAXT 12
#define MAXS 8
#define MAXV 6
#define MAXN 600
#define MAXOPT 24

enum { N_INT, N_FLOAT, N_VAR, N_SIZE, N_READ, N_NEG, N_NOT, N_BIN, N_COND, N_CAST, N_CALL,
	N_MINMAX, N_LET };
enum { B_ADD, B_SUB, B_MUL, B_DIV, B_MOD, B_LT, B_GT, B_LE, B_GE, B_EQ, B_NE, B_AND, B_OR };
static const char *const binop_text[] = {"+", "-", "*", "/", "%", "<", ">", "<=", ">=", "==",
	"!=", "&&", "||"};

typedef struct node {
	unsigned char k;    /* N_* */
	unsigned char sub;  /* 1: part of a subscript (the minimiser leaves it) */
	short op;           /* operator, builtin, dtype, var, size, tensor, let; N_MINMAX: 0 min 1 max */
	short n;            /* children */
	short a[4];         /* children (N_READ: the subscripts) */
	short kind, inexact, weak, conditional;
	short zsign;        /* a zero of this value may be -0 or +0 (see fix_zsign) */
	short nsign;        /* it may be a NaN an operation made, of unspecified
			       sign (see fix_nsign) */
	double v;           /* N_INT, N_FLOAT */
	short rev;          /* N_READ on a subscript position: N-1-v form is built as N_BIN */
} node;

enum { T_IN, T_INDEX, T_OUT, T_TEMP };

typedef struct tensor {
	char name[8];
	int role;        /* T_* */
	int dtype;       /* declared (inputs: always), -1 inferred */
	int decl;        /* outputs: the type is printed in the signature */
	int decl_shape;  /* outputs: the shape is printed too */
	int rank, dim[3];
	int dst;         /* T_INDEX: the size whose range its values index */
	int kind, inexact, written, dead;
	int zsign;       /* a zero in it may have either sign (a float max/min reduction) */
	int nsign;       /* it may hold a NaN of unspecified sign (fix_nsign) */
} tensor;

enum { OP_SET, OP_ADD_B, OP_MUL_B, OP_MAX_B, OP_MIN_B, OP_ADD, OP_MUL, OP_MAX, OP_MIN };
static const char *const op_text[] = {"=", "+=!", "*=!", "max=!", "min=!", "+=", "*=", "max=",
	"min="};

typedef struct stmt {
	int tensor, op, dead;
	int nlhs, nvars, var_size[MAXV];
	int where_lo[MAXV]; /* -1: no range clause, else the lower bound (0 or 1) */
	int root, nlets, let_root[2], exists_root; /* exists_root -1: none */
	int rank0_parens;
} stmt;

typedef struct prog {
	int nsizes, size_val[MAXSIZES];
	int ntensors;
	tensor t[MAXT];
	int nstmts;
	stmt s[MAXS];
	int nnodes;
	node nd[MAXN];
	int nopt;
	char opt[MAXOPT][48]; /* name=value, the drawn options */
	uint64_t data_seed;
} prog;

static const char *const size_names[MAXSIZES] = {"N", "M", "K"};

/* ------------------------------------------------------------------ */
/* Generator                                                          */

typedef struct gen {
	prog *p;
	uint64_t rng;
	stmt *s;
	int target;       /* the tensor the statement writes */
	int allow_red;    /* the statement may gain reduction indices */
	int self_read;    /* it may read its target at the left-hand indices */
	int overflow;     /* the node pool ran out */
} gen;

static int rnd(gen *g, int n) /* uniform in [0, n) */
{
	return (int)tu_rand_int(&g->rng, 0, n - 1);
}

static int chance(gen *g, double p)
{
	return tu_rand_unit(&g->rng) < p;
}

static int new_node(gen *g, int k)
{
	prog *p = g->p;
	node *n;
	if (p->nnodes >= MAXN) {
		g->overflow = 1;
		return 0; /* node 0 is a literal 1 made at the start */
	}
	n = &p->nd[p->nnodes];
	memset(n, 0, sizeof *n);
	n->k = (unsigned char)k;
	return p->nnodes++;
}

static int lit_int(gen *g, int v)
{
	int i = new_node(g, N_INT);
	g->p->nd[i].v = v;
	g->p->nd[i].kind = K_INT;
	g->p->nd[i].weak = 1;
	return i;
}

static int pick_dtype(gen *g, int kinds) /* kinds: bit mask of 1 << K_* */
{
	int total = 0, r, i;
	for (i = 0; i < NDTYPES; i++)
		if (kinds & (1 << dtypes[i].kind))
			total += dtypes[i].weight;
	r = rnd(g, total);
	for (i = 0; i < NDTYPES; i++)
		if (kinds & (1 << dtypes[i].kind)) {
			if (r < dtypes[i].weight)
				return i;
			r -= dtypes[i].weight;
		}
	return dtype_find("float32");
}

/* A variable of the statement with size sz: an existing one, or a new
 * reduction index when allowed; -1 if neither. */
static int var_of_size(gen *g, int sz, int allow_new)
{
	stmt *s = g->s;
	int cand[MAXV], n = 0, v;
	for (v = 0; v < s->nvars; v++)
		if (s->var_size[v] == sz)
			cand[n++] = v;
	if (allow_new && g->allow_red && s->nvars < MAXV && s->nvars - s->nlhs < 2 &&
		(n == 0 || chance(g, 0.35))) {
		s->var_size[s->nvars] = sz;
		s->where_lo[s->nvars] = -1;
		return s->nvars++;
	}
	return n ? cand[rnd(g, n)] : -1;
}

static int var_node(gen *g, int v, int sub)
{
	int i = new_node(g, N_VAR);
	g->p->nd[i].op = (short)v;
	g->p->nd[i].kind = K_INT;
	g->p->nd[i].sub = (unsigned char)sub;
	return i;
}

/* A subscript for a dimension of size sz. */
static int gen_subscript(gen *g, int sz, int depth)
{
	prog *p = g->p;
	int v, i, t, r = rnd(g, 10);
	if (r == 0) { /* a constant */
		i = lit_int(g, 0);
		p->nd[i].sub = 1;
		return i;
	}
	if (r == 1 && depth < 2) { /* a gather */
		int cand[MAXT], n = 0;
		for (t = 0; t < p->ntensors; t++)
			if (p->t[t].role == T_INDEX && p->t[t].dst == sz)
				cand[n++] = t;
		if (n) {
			t = cand[rnd(g, n)];
			v = var_of_size(g, p->t[t].dim[0], 1);
			if (v >= 0) {
				i = new_node(g, N_READ);
				p->nd[i].op = (short)t;
				p->nd[i].n = 1;
				p->nd[i].a[0] = (short)var_node(g, v, 1);
				p->nd[i].sub = 1;
				p->nd[i].kind = K_INT;
				return i;
			}
		}
	}
	v = var_of_size(g, sz, 1);
	if (v < 0) {
		i = lit_int(g, 0);
		p->nd[i].sub = 1;
		return i;
	}
	if (r == 2) { /* reversed: SIZE - 1 - v */
		int a = new_node(g, N_BIN), sn = new_node(g, N_SIZE), b;
		p->nd[sn].op = (short)sz;
		p->nd[sn].sub = 1;
		p->nd[a].op = B_SUB;
		p->nd[a].n = 2;
		p->nd[a].a[0] = (short)sn;
		p->nd[a].a[1] = (short)lit_int(g, 1);
		p->nd[p->nd[a].a[1]].sub = 1;
		p->nd[a].sub = 1;
		b = new_node(g, N_BIN);
		p->nd[b].op = B_SUB;
		p->nd[b].n = 2;
		p->nd[b].a[0] = (short)a;
		p->nd[b].a[1] = (short)var_node(g, v, 1);
		p->nd[b].sub = 1;
		return b;
	}
	return var_node(g, v, 1);
}

/* A read of a tensor the statement may read, or -1. */
static int gen_read(gen *g, int notaint, int depth)
{
	prog *p = g->p;
	int cand[MAXT], n = 0, t, i, d;
	for (t = 0; t < p->ntensors; t++) {
		tensor *x = &p->t[t];
		if (x->dead || (notaint && x->inexact))
			continue;
		if (x->role == T_IN || x->role == T_INDEX || (x->written && t != g->target))
			cand[n++] = t;
		else if (t == g->target && g->self_read && x->written)
			cand[n++] = t;
	}
	if (!n)
		return -1;
	t = cand[rnd(g, n)];
	i = new_node(g, N_READ);
	p->nd[i].op = (short)t;
	p->nd[i].kind = (short)p->t[t].kind;
	p->nd[i].inexact = (short)p->t[t].inexact;
	p->nd[i].zsign = (short)p->t[t].zsign;
	p->nd[i].nsign = (short)p->t[t].nsign;
	p->nd[i].n = (short)p->t[t].rank;
	for (d = 0; d < p->t[t].rank; d++) {
		int sub;
		if (t == g->target)
			sub = var_node(g, d, 1); /* the element being written */
		else
			sub = gen_subscript(g, p->t[t].dim[d], depth);
		p->nd[i].a[d] = (short)sub;
	}
	return i;
}

enum { W_ANY, W_NUM, W_BOOL, W_INT };

static int gen_expr(gen *g, int depth, int want, int notaint);

static int leaf(gen *g, int want, int notaint)
{
	prog *p = g->p;
	int i, tries;
	for (tries = 0; tries < 6; tries++) {
		int r = rnd(g, 10);
		if (r < 5) {
			i = gen_read(g, notaint, 0);
			if (i < 0)
				continue;
		} else if (r == 5 && g->s->nlets > 0 && want != W_BOOL) {
			/* lets are generated before the right-hand side and
			 * stored in op; their node says kind and exactness */
			int l = rnd(g, g->s->nlets), root = g->s->let_root[l];
			if (notaint && p->nd[root].inexact)
				continue;
			i = new_node(g, N_LET);
			p->nd[i].op = (short)l;
			p->nd[i].kind = p->nd[root].kind;
			p->nd[i].inexact = p->nd[root].inexact;
			p->nd[i].zsign = p->nd[root].zsign;
			p->nd[i].nsign = p->nd[root].nsign;
		} else if (r == 6) {
			i = new_node(g, N_SIZE);
			p->nd[i].op = (short)rnd(g, p->nsizes);
			p->nd[i].kind = K_INT;
		} else if (r == 7 && g->s->nvars > 0) {
			i = var_node(g, rnd(g, g->s->nvars), 0);
		} else if (r == 8) {
			i = new_node(g, N_FLOAT);
			p->nd[i].v = rnd(g, 33) / 8.0;
			p->nd[i].kind = K_FLOAT;
			p->nd[i].weak = 1;
		} else {
			i = lit_int(g, rnd(g, 4) ? rnd(g, 10) : rnd(g, 101));
		}
		if (want == W_BOOL && p->nd[i].kind != K_BOOL)
			continue;
		if (want == W_INT && p->nd[i].kind != K_INT)
			continue;
		if (want == W_NUM && p->nd[i].kind == K_BOOL)
			continue;
		return i;
	}
	if (want == W_BOOL) { /* 0 < 1, a bool made of literals */
		i = new_node(g, N_BIN);
		p->nd[i].op = B_LT;
		p->nd[i].n = 2;
		p->nd[i].a[0] = (short)lit_int(g, 0);
		p->nd[i].a[1] = (short)lit_int(g, 1);
		p->nd[i].kind = K_BOOL;
		return i;
	}
	i = new_node(g, N_SIZE);
	p->nd[i].op = (short)rnd(g, p->nsizes);
	p->nd[i].kind = K_INT;
	return i;
}

/* The kind of a binary arithmetic result or of a min/max/?: of a and b. */
static int common_kind(int a, int b, int arith)
{
	if (a == K_FLOAT || b == K_FLOAT)
		return K_FLOAT;
	if (a == K_BOOL && b == K_BOOL)
		return arith ? K_INT : K_BOOL;
	return K_INT;
}

/* An integer divisor: a literal, a size, or max(e, 1), never zero; or,
 * rarely, a size less one, zero when the size is 1 (a run-time error both
 * backends must report). */
static int safe_divisor(gen *g, int depth)
{
	prog *p = g->p;
	int r = rnd(g, 3), i;
	if (chance(g, 0.05)) {
		int sn = new_node(g, N_SIZE);
		p->nd[sn].op = (short)rnd(g, p->nsizes);
		p->nd[sn].kind = K_INT;
		i = new_node(g, N_BIN);
		p->nd[i].op = B_SUB;
		p->nd[i].n = 2;
		p->nd[i].a[0] = (short)sn;
		p->nd[i].a[1] = (short)lit_int(g, 1);
		p->nd[i].kind = K_INT;
		return i;
	}
	if (r == 0)
		return lit_int(g, 1 + rnd(g, 9));
	if (r == 1) {
		i = new_node(g, N_SIZE);
		p->nd[i].op = (short)rnd(g, p->nsizes);
		p->nd[i].kind = K_INT;
		return i;
	}
	i = new_node(g, N_MINMAX);
	p->nd[i].op = 1;
	p->nd[i].n = 2;
	p->nd[i].a[0] = (short)gen_expr(g, depth + 1, W_INT, 1);
	if (p->nd[p->nd[i].a[0]].weak) /* keep a literal-only max out */
		p->nd[i].a[0] = (short)leaf(g, W_INT, 1);
	p->nd[i].a[1] = (short)lit_int(g, 1);
	p->nd[i].kind = K_INT;
	return i;
}

/* fabs(a), or 0 (the literal 1) when out of nodes.  fabs is exact and
 * gives every zero and every NaN the + sign. */
static int wrap_fabs(gen *g, int a)
{
	prog *p = g->p;
	int i, b;
	for (b = 0; strcmp(builtins[b].name, "fabs"); b++)
		;
	i = new_node(g, N_CALL);
	if (!i)
		return 0;
	p->nd[i].op = (short)b;
	p->nd[i].n = 1;
	p->nd[i].a[0] = (short)a;
	p->nd[i].kind = K_FLOAT;
	p->nd[i].inexact = p->nd[a].inexact;
	return i;
}

/* Node a, or fabs(a) where a's zeros may have either sign: compiled max=!
 * and min=! reductions may give either zero of a tie of -0 and +0
 * (docs/language.md 6.8), which a divisor or a builtin that tells the
 * zeros apart (atan2, copysign, rsqrt, pow, ...) turns into different
 * values. */
static int fix_zsign(gen *g, int a)
{
	return g->p->nd[a].zsign ? wrap_fabs(g, a) : a;
}

/* Node a, or fabs(a) where a may be a NaN that an operation made: the
 * sign of such a NaN is unspecified (docs/language.md 6.8; x86 makes a
 * negative NaN at run time, LLVM folds a positive one), and copysign's
 * second argument turns it into different values (seed 20261202 cases
 * 4235 and 5330: copysign(1.75, 1.0 % 0), the % folded to a positive NaN
 * in the compiled code). */
static int fix_nsign(gen *g, int a)
{
	return g->p->nd[a].nsign ? wrap_fabs(g, a) : a;
}

/* An expression of the wanted kind; notaint: no inexact value in it. */
static int gen_expr(gen *g, int depth, int want, int notaint)
{
	prog *p = g->p;
	int i, r;
	if (depth >= 4 || p->nnodes > MAXN - 40 || chance(g, 0.25 + 0.12 * depth))
		return leaf(g, want, notaint);
	r = rnd(g, 20);
	if (want == W_BOOL) {
		if (r < 12) { /* a comparison of exact values */
			i = new_node(g, N_BIN);
			p->nd[i].op = (short)(B_LT + rnd(g, 6));
			p->nd[i].n = 2;
			p->nd[i].a[0] = (short)gen_expr(g, depth + 1, W_NUM, 1);
			p->nd[i].a[1] = (short)gen_expr(g, depth + 1, W_NUM, 1);
			if (p->nd[p->nd[i].a[0]].weak && p->nd[p->nd[i].a[1]].weak)
				p->nd[i].a[1] = (short)leaf(g, W_NUM, 1);
			if (p->nd[p->nd[i].a[1]].weak && p->nd[p->nd[i].a[0]].weak)
				return leaf(g, W_BOOL, 1);
			p->nd[i].kind = K_BOOL;
			return i;
		}
		if (r < 15) {
			i = new_node(g, N_NOT);
			p->nd[i].n = 1;
			p->nd[i].a[0] = (short)gen_expr(g, depth + 1, W_BOOL, 1);
			p->nd[i].kind = K_BOOL;
			return i;
		}
		if (r < 18) {
			i = new_node(g, N_BIN);
			p->nd[i].op = (short)(B_AND + rnd(g, 2));
			p->nd[i].n = 2;
			p->nd[i].a[0] = (short)gen_expr(g, depth + 1, W_BOOL, 1);
			p->nd[i].a[1] = (short)gen_expr(g, depth + 1, W_BOOL, 1);
			p->nd[p->nd[i].a[1]].conditional = 1;
			p->nd[i].kind = K_BOOL;
			return i;
		}
		if (r < 19) { /* bool(e) of an exact integer */
			i = new_node(g, N_CAST);
			p->nd[i].op = (short)dtype_find("bool");
			p->nd[i].n = 1;
			p->nd[i].a[0] = (short)gen_expr(g, depth + 1, W_INT, 1);
			p->nd[i].kind = K_BOOL;
			return i;
		}
		return leaf(g, W_BOOL, 1);
	}
	if (r < 7) { /* arithmetic */
		int op = rnd(g, 5), a, b, ka, kb;
		a = gen_expr(g, depth + 1, want == W_INT ? W_INT : chance(g, 0.9) ? W_NUM : W_ANY,
			notaint);
		b = gen_expr(g, depth + 1, want == W_INT ? W_INT : W_NUM, notaint);
		if (p->nd[a].weak && p->nd[b].weak)
			b = leaf(g, want == W_INT ? W_INT : W_NUM, notaint);
		if (p->nd[a].weak && p->nd[b].weak)
			return b;
		ka = p->nd[a].kind;
		kb = p->nd[b].kind;
		if (op >= B_DIV && common_kind(ka, kb, 1) != K_FLOAT) {
			b = safe_divisor(g, depth);
		} else if (op >= B_DIV) { /* float: no inexact divisor, no inexact % */
			if (p->nd[b].inexact)
				b = lit_int(g, 1 + rnd(g, 7));
			b = fix_zsign(g, b);
			if (op == B_MOD && p->nd[a].inexact)
				op = B_ADD;
		}
		if (p->nd[a].weak && p->nd[b].weak)
			return a;
		i = new_node(g, N_BIN);
		p->nd[i].op = (short)op;
		p->nd[i].n = 2;
		p->nd[i].a[0] = (short)a;
		p->nd[i].a[1] = (short)b;
		p->nd[i].kind = (short)common_kind(p->nd[a].kind, p->nd[b].kind, 1);
		p->nd[i].inexact = p->nd[a].inexact | p->nd[b].inexact;
		p->nd[i].zsign = p->nd[i].kind == K_FLOAT && (p->nd[a].zsign | p->nd[b].zsign);
		p->nd[i].nsign = p->nd[i].kind == K_FLOAT &&
			(p->nd[a].nsign | p->nd[b].nsign | (op == B_DIV) | (op == B_MOD));
		return i;
	}
	if (r < 8) { /* negation of a non-literal number */
		int a = gen_expr(g, depth + 1, want == W_INT ? W_INT : W_NUM, notaint);
		if (p->nd[a].weak || p->nd[a].kind == K_BOOL)
			return a;
		i = new_node(g, N_NEG);
		p->nd[i].n = 1;
		p->nd[i].a[0] = (short)a;
		p->nd[i].kind = p->nd[a].kind;
		p->nd[i].inexact = p->nd[a].inexact;
		p->nd[i].zsign = p->nd[a].zsign;
		p->nd[i].nsign = p->nd[a].nsign;
		return i;
	}
	if (r < 11) { /* c ? a : b */
		int c = gen_expr(g, depth + 1, W_BOOL, 1);
		int a = gen_expr(g, depth + 1, want, notaint);
		int b = gen_expr(g, depth + 1, want, notaint);
		i = new_node(g, N_COND);
		p->nd[i].n = 3;
		p->nd[i].a[0] = (short)c;
		p->nd[i].a[1] = (short)a;
		p->nd[i].a[2] = (short)b;
		p->nd[a].conditional = p->nd[b].conditional = 1;
		p->nd[i].kind = (short)common_kind(p->nd[a].kind, p->nd[b].kind, 0);
		p->nd[i].inexact = p->nd[a].inexact | p->nd[b].inexact;
		p->nd[i].zsign = p->nd[i].kind == K_FLOAT && (p->nd[a].zsign | p->nd[b].zsign);
		p->nd[i].nsign = p->nd[i].kind == K_FLOAT && (p->nd[a].nsign | p->nd[b].nsign);
		p->nd[i].weak = p->nd[a].weak && p->nd[b].weak;
		return i;
	}
	if (r < 13) { /* a cast */
		int d = want == W_INT ? pick_dtype(g, 1 << K_INT)
					: pick_dtype(g, (1 << K_INT) | (1 << K_FLOAT) |
							(want == W_ANY ? 1 << K_BOOL : 0));
		int a, exact = dtypes[d].kind != K_FLOAT;
		a = gen_expr(g, depth + 1, dtypes[d].kind == K_BOOL ? W_INT : W_ANY, notaint || exact);
		i = new_node(g, N_CAST);
		p->nd[i].op = (short)d;
		p->nd[i].n = 1;
		p->nd[i].a[0] = (short)a;
		p->nd[i].kind = (short)dtypes[d].kind;
		p->nd[i].inexact = exact ? 0 : p->nd[a].inexact;
		p->nd[i].zsign = exact ? 0 : p->nd[a].zsign;
		p->nd[i].nsign = exact ? 0 : p->nd[a].nsign;
		return i;
	}
	if (r < 17 && !notaint && want != W_INT) { /* a builtin */
		int b = rnd(g, NBUILTINS), k;
		const builtin_row *br = &builtins[b];
		i = new_node(g, N_CALL);
		p->nd[i].op = (short)b;
		p->nd[i].n = (short)br->arity;
		for (k = 0; k < br->arity; k++) {
			int a;
			if ((br->kind == B_INT_FIRST && k == 0))
				a = lit_int(g, rnd(g, 4));
			else if (br->kind == B_INT_SECOND && k == 1)
				a = gen_expr(g, depth + 1, W_INT, 1);
			else
				a = gen_expr(g, depth + 1, W_NUM, !br->continuous);
			if (!br->continuous)
				a = fix_zsign(g, a);
			if (k == 1 && !strcmp(br->name, "copysign"))
				a = fix_nsign(g, a);
			p->nd[i].zsign |= p->nd[a].zsign;
			p->nd[i].a[k] = (short)a;
		}
		/* all-literal arguments: make the first a read or size */
		if (p->nd[p->nd[i].a[br->arity - 1]].weak && p->nd[p->nd[i].a[0]].weak)
			p->nd[i].a[br->kind == B_INT_FIRST ? 1 : 0] =
				(short)fix_zsign(g, leaf(g, W_NUM, !br->continuous));
		p->nd[i].kind = br->kind == B_INT_RESULT ? K_INT : K_FLOAT;
		p->nd[i].zsign = p->nd[i].kind == K_FLOAT && p->nd[i].zsign;
		/* a float builtin may make a NaN (log(-1), fmod(x, 0), ...);
		 * fabs gives it a sign */
		p->nd[i].nsign = p->nd[i].kind == K_FLOAT && strcmp(br->name, "fabs");
		p->nd[i].inexact = br->kind != B_INT_RESULT;
		return i;
	}
	if (r < 19) { /* min / max */
		int a = gen_expr(g, depth + 1, want, notaint);
		int b = gen_expr(g, depth + 1, want, notaint);
		if (p->nd[a].weak && p->nd[b].weak)
			return a;
		i = new_node(g, N_MINMAX);
		p->nd[i].op = (short)rnd(g, 2);
		p->nd[i].n = 2;
		p->nd[i].a[0] = (short)a;
		p->nd[i].a[1] = (short)b;
		p->nd[i].kind = (short)common_kind(p->nd[a].kind, p->nd[b].kind, 0);
		p->nd[i].inexact = p->nd[a].inexact | p->nd[b].inexact;
		p->nd[i].zsign = p->nd[i].kind == K_FLOAT && (p->nd[a].zsign | p->nd[b].zsign);
		p->nd[i].nsign = p->nd[i].kind == K_FLOAT && (p->nd[a].nsign | p->nd[b].nsign);
		return i;
	}
	return leaf(g, want, notaint);
}

/* Marks in bound[] the variables a read outside a branch bounds. */
static void mark_bounded(const prog *p, int i, int cond, int *bound)
{
	const node *n = &p->nd[i];
	int k;
	cond = cond || n->conditional;
	if (n->k == N_READ && !cond)
		for (k = 0; k < n->n; k++) {
			const node *s = &p->nd[n->a[k]];
			if (s->k == N_VAR)
				bound[s->op] = 1;
			else if (s->k == N_BIN && p->nd[s->a[1]].k == N_VAR)
				bound[p->nd[s->a[1]].op] = 1; /* N-1-v */
		}
	for (k = 0; k < n->n; k++)
		mark_bounded(p, n->a[k], cond || n->k == N_READ, bound);
}

static void gen_stmt(gen *g)
{
	prog *p = g->p;
	stmt *s = &p->s[p->nstmts];
	int cand[MAXT], n = 0, t, v, inplace, notaint, red_len_float, zsign, nsign;
	int sizes_used[MAXSIZES] = {0}, nsz = 0, szl[MAXSIZES];
	memset(s, 0, sizeof *s);
	s->exists_root = -1;
	g->s = s;
	for (t = 0; t < p->ntensors; t++) {
		if ((p->t[t].role == T_OUT || p->t[t].role == T_TEMP) && p->t[t].written &&
			p->t[t].dtype >= 0)
			cand[n++] = t; /* in place: a known type to cast to */
		if (p->t[t].role == T_IN || p->t[t].role == T_INDEX)
			for (v = 0; v < p->t[t].rank; v++)
				sizes_used[p->t[t].dim[v]] = 1;
	}
	for (v = 0; v < p->nsizes; v++)
		if (sizes_used[v])
			szl[nsz++] = v;
	inplace = n > 0 && chance(g, 0.35);
	if (inplace) {
		t = cand[rnd(g, n)];
		int r = rnd(g, 20);
		s->op = r < 8 ? OP_SET : r < 16 ? OP_ADD + rnd(g, 4) : OP_ADD_B + rnd(g, 4);
	} else {
		int r = rnd(g, 20), rank;
		t = p->ntensors++;
		memset(&p->t[t], 0, sizeof p->t[t]);
		p->t[t].role = chance(g, 0.7) || p->nstmts == 0 ? T_OUT : T_TEMP;
		snprintf(p->t[t].name, sizeof p->t[t].name, "%s%d",
			p->t[t].role == T_OUT ? "O" : "T", t);
		p->t[t].dtype = -1;
		rank = rnd(g, 10);
		rank = rank < 2 ? 0 : rank < 5 ? 1 : rank < 8 ? 2 : 3;
		p->t[t].rank = rank;
		for (v = 0; v < rank; v++)
			p->t[t].dim[v] = szl[rnd(g, nsz)];
		s->op = r < 10 ? OP_SET : r < 14 ? OP_ADD_B : r < 16 ? OP_MUL_B
						    : r < 18 ? OP_MAX_B : OP_MIN_B;
	}
	s->tensor = t;
	g->target = t;
	s->nlhs = s->nvars = p->t[t].rank;
	for (v = 0; v < s->nlhs; v++) {
		s->var_size[v] = p->t[t].dim[v];
		s->where_lo[v] = -1;
	}
	g->allow_red = s->op != OP_SET;
	g->self_read = inplace && s->op == OP_SET;
	/* an integer or bool target takes exact values only */
	notaint = inplace && p->t[t].kind != K_FLOAT;
	s->nlets = chance(g, 0.2) ? 1 + rnd(g, 2) : 0;
	for (v = 0; v < s->nlets; v++) {
		int nl = s->nlets;
		s->nlets = v; /* a let may use the lets before it */
		s->let_root[v] = gen_expr(g, 1, W_NUM, notaint);
		s->nlets = nl;
	}
	s->root = gen_expr(g, 0, chance(g, 0.1) ? W_BOOL : chance(g, 0.9) ? W_NUM : W_ANY, notaint);
	if (chance(g, 0.1))
		s->exists_root = gen_read(g, 0, 1);
	{
		int bound[MAXV] = {0};
		mark_bounded(p, s->root, 0, bound);
		if (s->exists_root >= 0)
			mark_bounded(p, s->exists_root, 0, bound);
		for (v = 0; v < s->nvars; v++)
			if (!bound[v] || chance(g, 0.15))
				s->where_lo[v] = (v >= s->nlhs || inplace) && p->size_val[s->var_size[v]] > 1 &&
						  chance(g, 0.3)
					? 1 : 0; /* an empty range is an error */
	}
	/* what the statement makes of its target */
	{
		int rk = p->nd[s->root].kind, inexact = p->nd[s->root].inexact;
		for (v = 0; v < s->nlets; v++)
			inexact |= p->nd[s->let_root[v]].inexact;
		if (!inplace) {
			int kind = rk;
			if (rk == K_BOOL && (s->op == OP_ADD_B || s->op == OP_MUL_B))
				kind = K_INT;
			int r = rnd(g, 20);
			if (r < 12) { /* a type: declared (maybe with the shape) or by a cast */
				int d = pick_dtype(g, inexact ? 1 << K_FLOAT : 7);
				p->t[t].dtype = d;
				kind = dtypes[d].kind;
				p->t[t].decl = p->t[t].role == T_OUT && r < 8;
				p->t[t].decl_shape = p->t[t].decl && chance(g, 0.5);
				/* a +=! or *=! of bool values is int32 unless declared:
				 * the cast alone does not make the target bool */
				if (kind == K_BOOL && !p->t[t].decl &&
					(s->op == OP_ADD_B || s->op == OP_MUL_B)) {
					d = dtype_find("int32");
					p->t[t].dtype = d;
					kind = K_INT;
				}
			}
			p->t[t].kind = kind;
			p->t[t].written = 1;
		}
		if (p->t[t].dtype >= 0) {
			/* stores convert implicitly only where no value is lost:
			 * say the type (a temporary gets its type this way) */
			int c = new_node(g, N_CAST);
			p->nd[c].op = (short)p->t[t].dtype;
			p->nd[c].n = 1;
			p->nd[c].a[0] = (short)s->root;
			p->nd[c].kind = (short)dtypes[p->t[t].dtype].kind;
			p->nd[c].inexact = p->nd[s->root].inexact;
			p->nd[c].zsign = p->nd[c].kind == K_FLOAT && p->nd[s->root].zsign;
			p->nd[c].nsign = p->nd[c].kind == K_FLOAT && p->nd[s->root].nsign;
			s->root = c;
		}
		/* float sums over reduction indices may be reordered (vecreduce);
		 * products keep the interpreter's order (docs/language.md 6.8) */
		red_len_float = s->nvars > s->nlhs && p->t[t].kind == K_FLOAT &&
			(s->op == OP_ADD_B || s->op == OP_ADD);
		if (p->t[t].kind == K_FLOAT && (inexact || red_len_float))
			p->t[t].inexact = 1;
		/* a float max/min reduction may keep either zero of a tie */
		zsign = p->nd[s->root].zsign;
		for (v = 0; v < s->nlets; v++)
			zsign |= p->nd[s->let_root[v]].zsign;
		if (p->t[t].kind == K_FLOAT && (zsign || (s->nvars > s->nlhs &&
			(s->op == OP_MAX_B || s->op == OP_MIN_B || s->op == OP_MAX || s->op == OP_MIN))))
			p->t[t].zsign = 1;
		/* a NaN of unspecified sign stored (the inputs' values are
		 * finite: / and %, or a builtin, make the NaNs; + - * of
		 * them, not tracked, would need infinities first) */
		nsign = p->nd[s->root].nsign;
		for (v = 0; v < s->nlets; v++)
			nsign |= p->nd[s->let_root[v]].nsign;
		if (p->t[t].kind == K_FLOAT && nsign)
			p->t[t].nsign = 1;
	}
	s->rank0_parens = chance(g, 0.3);
	p->nstmts++;
}

/* Whether this machine runs code of the x86-64 level named level (the
 * cpu option's values), as the library decides (codegen/llvm.h). */
static int host_runs(const char *level)
{
	static int host = -1;
	int l;
	if (host < 0) {
		char *t = tc_cg_llvm_host_target(), *f = t ? strrchr(t, ';') : NULL;
		host = f && !strncmp(t, "x86_64", 6) ? tc_cg_llvm_level_of(f + 1) : 0;
		tc_free(t);
	}
	for (l = 1; tc_cg_llvm_level_name(l); l++)
		if (!strcmp(tc_cg_llvm_level_name(l), level))
			return l <= host;
	return 0;
}

/* Options drawn from the option table as tc_options_describe prints it:
 * each option is left at its default half the time; target, contract and
 * fastmath never change (the target is the comparison's, and the other two
 * change rounding by design), and cpu is drawn among the levels the host
 * runs.  Integer and list values are drawn small. */
static void gen_options(gen *g)
{
	char *desc = tc_options_describe(), *line, *save = NULL;
	prog *p = g->p;
	p->nopt = 0;
	if (!desc)
		return;
	for (line = strtok_r(desc, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[32], vals[128], *alt[16], *tok, *s2 = NULL, buf[48];
		int nalt = 0, k;
		if (sscanf(line, "%31s %127s", name, vals) != 2)
			continue;
		if (!strcmp(name, "target") || !strcmp(name, "contract") ||
			!strcmp(name, "fastmath") || chance(g, 0.5) || p->nopt >= MAXOPT)
			continue;
		for (tok = strtok_r(vals, "|", &s2); tok && nalt < 16; tok = strtok_r(NULL, "|", &s2))
			alt[nalt++] = tok;
		if (!nalt)
			continue;
		tok = alt[rnd(g, nalt)];
		if (!strcmp(name, "cpu") && strcmp(tok, "host") && !host_runs(tok))
			tok = "host"; /* a level this machine lacks runs nowhere here */
		if (strstr(tok, "..")) { /* lo..hi, maybe a list (",...") */
			int lo = atoi(tok), list = strstr(tok, ",...") != NULL, cnt, len;
			if (!strcmp(name, "interchange")) { /* a permutation of 2 to 4 */
				int perm[4] = {0, 1, 2, 3};
				cnt = 2 + rnd(g, 3);
				for (k = cnt - 1; k > 0; k--) {
					int j = rnd(g, k + 1), x = perm[k];
					perm[k] = perm[j];
					perm[j] = x;
				}
				len = snprintf(buf, sizeof buf, "%s=", name);
				for (k = 0; k < cnt; k++)
					len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%d",
						k ? "," : "", perm[k]);
			} else {
				static const int small[] = {1, 2, 3, 4, 5, 7, 8, 16, 32};
				cnt = list ? 1 + rnd(g, 3) : 1;
				len = snprintf(buf, sizeof buf, "%s=", name);
				for (k = 0; k < cnt; k++)
					len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%d",
						k ? "," : "",
						lo + small[rnd(g, list ? 9 : 4)] - 1);
			}
		} else {
			snprintf(buf, sizeof buf, "%s=%s", name, tok);
		}
		snprintf(p->opt[p->nopt++], sizeof p->opt[0], "%s", buf);
	}
	tc_string_free(desc);
}

static void gen_prog(prog *p, uint64_t seed)
{
	gen g;
	int k, nin, t, d;
	memset(p, 0, sizeof *p);
	memset(&g, 0, sizeof g);
	g.p = p;
	g.rng = seed ? seed : 1;
	g.target = -1;
	lit_int(&g, 1); /* node 0: the pool's fallback */
	p->nsizes = 1 + rnd(&g, MAXSIZES);
	for (k = 0; k < p->nsizes; k++)
		p->size_val[k] = chance(&g, 0.15) ? 1 : 2 + rnd(&g, chance(&g, 0.2) ? 12 : 6);
	nin = 1 + rnd(&g, 4);
	for (k = 0; k < nin; k++) {
		tensor *x = &p->t[p->ntensors];
		x->role = T_IN;
		snprintf(x->name, sizeof x->name, "%c", 'A' + k);
		x->dtype = pick_dtype(&g, 7);
		x->kind = dtypes[x->dtype].kind;
		x->rank = rnd(&g, 8) == 0 ? 0 : 1 + rnd(&g, 3);
		for (d = 0; d < x->rank; d++)
			x->dim[d] = k == 0 && d < p->nsizes ? d : rnd(&g, p->nsizes);
		x->written = 1;
		p->ntensors++;
	}
	if (chance(&g, 0.4)) { /* an index tensor for gathers */
		tensor *x = &p->t[p->ntensors];
		x->role = T_INDEX;
		snprintf(x->name, sizeof x->name, "G");
		x->dtype = pick_dtype(&g, 1 << K_INT);
		x->kind = K_INT;
		x->rank = 1;
		x->dim[0] = rnd(&g, p->nsizes);
		x->dst = rnd(&g, p->nsizes);
		x->written = 1;
		p->ntensors++;
	}
	{ /* a size no input declares is unusable: keep the used ones only */
		int map[MAXSIZES], n = 0, val[MAXSIZES];
		for (k = 0; k < p->nsizes; k++) {
			int used = 0;
			for (t = 0; t < p->ntensors; t++)
				for (d = 0; d < p->t[t].rank; d++)
					used |= p->t[t].dim[d] == k;
			map[k] = used ? n : -1;
			if (used)
				val[n++] = p->size_val[k];
		}
		if (n == 0) { /* rank-0 inputs only: give the first a dimension */
			p->t[0].rank = 1;
			p->t[0].dim[0] = 0;
			n = 1;
			val[0] = p->size_val[0];
			map[0] = 0;
		}
		for (t = 0; t < p->ntensors; t++) {
			for (d = 0; d < p->t[t].rank; d++)
				p->t[t].dim[d] = map[p->t[t].dim[d]];
			if (p->t[t].role == T_INDEX)
				p->t[t].dst = map[p->t[t].dst];
		}
		memcpy(p->size_val, val, sizeof(int) * (size_t)n);
		p->nsizes = n;
	}
	for (t = 0; t < p->ntensors; t++) /* a gather's destination must exist */
		if (p->t[t].role == T_INDEX && p->t[t].dst < 0)
			p->t[t].dst = 0;
	{
		int ns = 1 + rnd(&g, 5);
		for (k = 0; k < ns && !g.overflow; k++)
			gen_stmt(&g);
	}
	gen_options(&g);
	p->data_seed = tu_rand_u64(&g.rng) | 1;
}

/* ------------------------------------------------------------------ */
/* Printing                                                           */

typedef struct sbuf {
	char *s;
	size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (b->len + 256 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		char *s = realloc(b->s, cap);
		if (!s)
			return;
		b->s = s;
		b->cap = cap;
	}
	va_start(ap, fmt);
	n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= b->cap - b->len) {
		size_t cap = b->len + (size_t)n + 256;
		char *s = realloc(b->s, cap);
		if (!s)
			return;
		b->s = s;
		b->cap = cap;
		va_start(ap, fmt);
		vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

static void var_name(char *out, const stmt *s, int v)
{
	if (v < s->nlhs)
		snprintf(out, 8, "%c", "ijkl"[v]);
	else
		snprintf(out, 8, "r%d", (v - s->nlhs) % MAXV);
}

static void print_expr(sbuf *b, const prog *p, const stmt *s, int i)
{
	const node *n = &p->nd[i];
	char name[8];
	int k;
	switch (n->k) {
	case N_INT: sb_printf(b, "%d", (int)n->v); break;
	case N_FLOAT: sb_printf(b, "%.4f", n->v); break;
	case N_VAR: var_name(name, s, n->op); sb_printf(b, "%s", name); break;
	case N_SIZE: sb_printf(b, "%s", size_names[n->op]); break;
	case N_LET: sb_printf(b, "u%d", n->op); break;
	case N_READ:
		sb_printf(b, "%s", p->t[n->op].name);
		if (n->n || s->rank0_parens) {
			sb_printf(b, "(");
			for (k = 0; k < n->n; k++) {
				if (k)
					sb_printf(b, ", ");
				print_expr(b, p, s, n->a[k]);
			}
			sb_printf(b, ")");
		}
		break;
	case N_NEG: sb_printf(b, "-("); print_expr(b, p, s, n->a[0]); sb_printf(b, ")"); break;
	case N_NOT: sb_printf(b, "!("); print_expr(b, p, s, n->a[0]); sb_printf(b, ")"); break;
	case N_BIN:
		sb_printf(b, "(");
		print_expr(b, p, s, n->a[0]);
		sb_printf(b, " %s ", binop_text[n->op]);
		print_expr(b, p, s, n->a[1]);
		sb_printf(b, ")");
		break;
	case N_COND:
		sb_printf(b, "(");
		print_expr(b, p, s, n->a[0]);
		sb_printf(b, " ? ");
		print_expr(b, p, s, n->a[1]);
		sb_printf(b, " : ");
		print_expr(b, p, s, n->a[2]);
		sb_printf(b, ")");
		break;
	case N_CAST:
		sb_printf(b, "%s(", dtypes[n->op].name);
		print_expr(b, p, s, n->a[0]);
		sb_printf(b, ")");
		break;
	case N_CALL:
	case N_MINMAX:
		sb_printf(b, "%s(", n->k == N_CALL ? builtins[n->op].name : n->op ? "max" : "min");
		for (k = 0; k < n->n; k++) {
			if (k)
				sb_printf(b, ", ");
			print_expr(b, p, s, n->a[k]);
		}
		sb_printf(b, ")");
		break;
	}
}

static int tensor_live(const prog *p, int t)
{
	int k;
	if (p->t[t].dead)
		return 0;
	if (p->t[t].role == T_IN || p->t[t].role == T_INDEX)
		return 1;
	for (k = 0; k < p->nstmts; k++)
		if (!p->s[k].dead && p->s[k].tensor == t)
			return 1;
	return 0;
}

static void print_type(sbuf *b, const prog *p, const tensor *x, int shape)
{
	sb_printf(b, "%s", dtypes[x->dtype].name);
	if (shape) {
		sb_printf(b, "(");
		for (int d = 0; d < x->rank; d++)
			sb_printf(b, "%s%s", d ? "," : "", size_names[x->dim[d]]);
		sb_printf(b, ")");
	}
	(void)p;
}

/* The def's text, "def f(...) -> (...) { ... }". */
/* Marks in used[] the variables that occur under node i. */
static void mark_used(const prog *p, int i, int *used)
{
	const node *n = &p->nd[i];
	if (n->k == N_VAR)
		used[n->op] = 1;
	for (int k = 0; k < n->n; k++)
		mark_used(p, n->a[k], used);
}

/* The variables that occur in statement s. */
static void stmt_used_vars(const prog *p, const stmt *s, int *used)
{
	mark_used(p, s->root, used);
	for (int v = 0; v < s->nlets; v++)
		mark_used(p, s->let_root[v], used);
	if (s->exists_root >= 0)
		mark_used(p, s->exists_root, used);
}

static void print_prog(sbuf *b, const prog *p)
{
	int t, k, v, first = 1;
	sb_printf(b, "def f(");
	for (t = 0; t < p->ntensors; t++)
		if ((p->t[t].role == T_IN || p->t[t].role == T_INDEX) && !p->t[t].dead) {
			sb_printf(b, "%s", first ? "" : ", ");
			print_type(b, p, &p->t[t], p->t[t].rank > 0);
			sb_printf(b, " %s", p->t[t].name);
			first = 0;
		}
	sb_printf(b, ") -> (");
	first = 1;
	for (t = 0; t < p->ntensors; t++)
		if (p->t[t].role == T_OUT && tensor_live(p, t)) {
			sb_printf(b, "%s", first ? "" : ", ");
			if (p->t[t].decl) {
				print_type(b, p, &p->t[t], p->t[t].decl_shape);
				sb_printf(b, " ");
			}
			sb_printf(b, "%s", p->t[t].name);
			first = 0;
		}
	sb_printf(b, ") {\n");
	for (k = 0; k < p->nstmts; k++) {
		const stmt *s = &p->s[k];
		int nclause = 0, used[MAXV] = {0};
		char name[8];
		if (s->dead)
			continue;
		/* a reduction index whose reads were dropped (by the generator
		 * or the minimiser) gets no range clause */
		stmt_used_vars(p, s, used);
		sb_printf(b, "    %s", p->t[s->tensor].name);
		if (s->nlhs || s->rank0_parens) {
			sb_printf(b, "(");
			for (v = 0; v < s->nlhs; v++) {
				var_name(name, s, v);
				sb_printf(b, "%s%s", v ? ", " : "", name);
			}
			sb_printf(b, ")");
		}
		sb_printf(b, " %s ", op_text[s->op]);
		print_expr(b, p, s, s->root);
		for (v = 0; v < s->nvars; v++)
			if (s->where_lo[v] >= 0 && (v < s->nlhs || used[v])) {
				var_name(name, s, v);
				sb_printf(b, "%s%s in %d:%s", nclause++ ? ", " : " where ", name,
					s->where_lo[v], size_names[s->var_size[v]]);
			}
		for (v = 0; v < s->nlets; v++) {
			sb_printf(b, "%su%d = ", nclause++ ? ", " : " where ", v);
			print_expr(b, p, s, s->let_root[v]);
		}
		if (s->exists_root >= 0) {
			sb_printf(b, "%sexists ", nclause++ ? ", " : " where ");
			print_expr(b, p, s, s->exists_root);
		}
		sb_printf(b, "\n");
	}
	sb_printf(b, "}\n");
}

/* ------------------------------------------------------------------ */
/* A runnable case: the text and what the run needs besides it.  A     */
/* reproducer file holds exactly this.                                */

#define MAXTEXT 32768

typedef struct input_desc {
	char name[16];
	int dtype, ndim;
	int64_t dims[4];
	int64_t index_range; /* > 0: an index tensor, values in [0, index_range) */
} input_desc;

typedef struct rcase {
	char text[MAXTEXT];
	char opts[1024];
	int nin;
	input_desc in[MAXT];
	uint64_t data_seed;
	char inexact[256]; /* " O1 T3 " : the outputs compared within the bound */
	double reduced;    /* R of the bound */
} rcase;

static void prog_to_case(const prog *p, rcase *c)
{
	sbuf b = {0};
	int t, k, v;
	memset(c, 0, sizeof *c);
	print_prog(&b, p);
	snprintf(c->text, sizeof c->text, "%s", b.s ? b.s : "");
	free(b.s);
	for (k = 0; k < p->nopt; k++) {
		size_t len = strlen(c->opts);
		snprintf(c->opts + len, sizeof c->opts - len, "%s%s", k ? " " : "", p->opt[k]);
	}
	for (t = 0; t < p->ntensors; t++) {
		const tensor *x = &p->t[t];
		if ((x->role == T_IN || x->role == T_INDEX) && !x->dead) {
			input_desc *d = &c->in[c->nin++];
			snprintf(d->name, sizeof d->name, "%s", x->name);
			d->dtype = x->dtype;
			d->ndim = x->rank;
			for (k = 0; k < x->rank; k++)
				d->dims[k] = p->size_val[x->dim[k]];
			d->index_range = x->role == T_INDEX ? p->size_val[x->dst] : 0;
		}
		if (x->inexact && tensor_live(p, t) && x->role == T_OUT) {
			size_t len = strlen(c->inexact);
			snprintf(c->inexact + len, sizeof c->inexact - len, "%s%s ",
				len ? "" : " ", x->name);
		}
	}
	c->reduced = 0;
	for (k = 0; k < p->nstmts; k++) {
		double r = 1;
		int used[MAXV] = {0};
		if (p->s[k].dead)
			continue;
		stmt_used_vars(p, &p->s[k], used);
		for (v = p->s[k].nlhs; v < p->s[k].nvars; v++)
			if (used[v])
				r *= p->size_val[p->s[k].var_size[v]];
		c->reduced += r;
	}
	c->data_seed = p->data_seed;
}

/* Input data: a pure function of the seed and the input's name and shape. */
static double draw_value(uint64_t *rng, int dtype, int64_t range)
{
	const dtype_row *r = &dtypes[dtype];
	if (range > 0)
		return (double)tu_rand_int(rng, 0, range - 1);
	if (r->kind == K_BOOL)
		return (double)tu_rand_int(rng, 0, 1);
	if (r->kind == K_FLOAT) {
		int u = (int)tu_rand_int(rng, 0, 199);
		if (u == 0)
			return NAN;
		if (u == 1)
			return tu_rand_int(rng, 0, 1) ? INFINITY : -INFINITY;
		return (double)tu_rand_int(rng, -16, 16) / 8.0; /* exact in float16 */
	}
	{
		int is_signed = r->name[0] == 'i';
		int bits = 8 * dtype_size(dtype);
		if (tu_rand_int(rng, 0, 9) == 0) { /* the extremes */
			int64_t hi = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
			if (!is_signed)
				return tu_rand_int(rng, 0, 1) ? 0 : (double)hi * 2 + 1;
			return tu_rand_int(rng, 0, 1) ? (double)hi : -(double)hi - 1;
		}
		return is_signed ? (double)tu_rand_int(rng, -20, 20) : (double)tu_rand_int(rng, 0, 40);
	}
}

typedef struct buf_tensor {
	DLTensor dl;
	int64_t shape[4];
	size_t bytes;
} buf_tensor;

static int alloc_tensor(buf_tensor *b, DLDataType dt, int ndim, const int64_t *shape)
{
	size_t n = 1;
	memset(b, 0, sizeof *b);
	for (int d = 0; d < ndim; d++) {
		b->shape[d] = shape[d];
		n *= (size_t)shape[d];
	}
	b->bytes = n * (size_t)(dt.bits / 8);
	b->dl.data = malloc(b->bytes ? b->bytes : 1);
	if (!b->dl.data)
		return -1;
	b->dl.device.device_type = kDLCPU;
	b->dl.ndim = ndim;
	b->dl.dtype = dt;
	b->dl.shape = b->shape;
	return 0;
}

static int64_t numel(const DLTensor *t)
{
	int64_t n = 1;
	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

/* ------------------------------------------------------------------ */
/* One case, in a child process                                       */

enum { RES_OK, RES_REFUSED, RES_BOTH_ERR, RES_CPU_COMPILE, RES_RUN_DIFF, RES_MISMATCH, RES_CRASH,
	RES_TIMEOUT, RES_GRAD, RES_EXCLUDED };
static const char *const result_name[] = {"ok", "refused", "both-error", "cpu-compile-error",
	"run-error-differs", "mismatch", "crash", "timeout", "grad-internal-error", "excluded"};

typedef struct result {
	int cls;
	int warned;
	char stage[32]; /* the child's last stage, for crashes */
	char msg[2048];
} result;

static void set_msg(result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof r->msg, fmt, ap);
	va_end(ap);
}

static int stage_fd = -1;
static int force_exact; /* --exact: no bound for inexact outputs (shows it is needed) */

/* Tells the parent which stage the child has reached (kept if it dies). */
static void stage(result *r, const char *s)
{
	snprintf(r->stage, sizeof r->stage, "%s", s);
	if (stage_fd >= 0) {
		char line[40];
		int n = snprintf(line, sizeof line, "S%s\n", s);
		if (write(stage_fd, line, (size_t)n) < 0) {
			/* the parent is gone: nothing to tell */
		}
	}
}

static int is_inexact(const rcase *c, const char *name)
{
	char key[40];
	snprintf(key, sizeof key, " %s ", name);
	return strstr(c->inexact, key) != NULL;
}

/* The unit roundoff of an inexact output of type d: an inexact value may
 * have been computed in any float type the program names (a float64 output
 * can hold a float16 builtin's result) or in float32 (builtins of integer
 * arguments compute in float32), so the coarsest of those and d's own. */
static double case_eps(const rcase *c, int d)
{
	double eps = dtypes[d].eps > 0x1p-24 ? dtypes[d].eps : 0x1p-24;
	for (int k = 0; k < NDTYPES; k++)
		if (dtypes[k].kind == K_FLOAT && dtypes[k].eps > eps && strstr(c->text, dtypes[k].name))
			eps = dtypes[k].eps;
	return eps;
}

/* Compares output o (named name) of the two runs; 0 when they agree. */
static int compare_output(const rcase *c, result *r, const char *name, const buf_tensor *cpu,
	const buf_tensor *ref, double scale)
{
	int d = dtype_of(ref->dl.dtype), sz = dtype_size(d), inexact = is_inexact(c, name);
	double tol = inexact && d >= 0 && !force_exact ? 2 * case_eps(c, d) * (c->reduced + 2) * scale
						      : 0;
	int64_t e, n = numel(&ref->dl), bad = 0, first = -1;
	double fc = 0, fr = 0;
	for (e = 0; e < n; e++) {
		const char *pc = (const char *)cpu->dl.data + e * sz;
		const char *pr = (const char *)ref->dl.data + e * sz;
		int same;
		if (dtypes[d].kind != K_FLOAT) {
			same = !memcmp(pc, pr, (size_t)sz);
		} else {
			double a = dtypes[d].load(pc), b = dtypes[d].load(pr);
			if (isnan(a) || isnan(b))
				same = isnan(a) && isnan(b);
			else if (a == b)
				same = 1; /* -0 matches +0 */
			else if (isinf(a) || isinf(b))
				same = 0;
			else
				same = fabs(a - b) <= tol;
		}
		if (!same) {
			if (first < 0) {
				first = e;
				fc = dtypes[d].load(pc);
				fr = dtypes[d].load(pr);
			}
			bad++;
		}
	}
	if (!bad)
		return 0;
	set_msg(r, "%s (%s, %s): %lld of %lld elements differ; first [%lld]: cpu %.17g interp %.17g"
		   " (%s)", name, dtypes[d].name, inexact ? "inexact" : "exact", (long long)bad,
		(long long)n, (long long)first, fc, fr,
		inexact ? "beyond the bound" : "bit for bit expected");
	if (inexact) {
		size_t len = strlen(r->msg);
		snprintf(r->msg + len, sizeof r->msg - len, ", bound %.3g", tol);
	}
	return 1;
}

static void free_tensors(buf_tensor *b, int n)
{
	for (int i = 0; i < n; i++)
		free(b[i].dl.data);
}

/* Parse, compile twice, run twice, compare: the child's work. */
static void run_case(const rcase *c, result *r)
{
	tc_context *ctx = NULL;
	tc_module *m = NULL;
	tc_options *oi = NULL, *oc = NULL;
	tc_kernel *ki = NULL, *kc = NULL;
	buf_tensor ins[MAXT], outc[MAXT], outi[MAXT];
	const DLTensor *inp[MAXT];
	DLTensor *pc[MAXT], *pi[MAXT];
	int nout = 0, nin_alloc = 0, i, ni = -1, no = -1, rc_i, rc_c;
	double scale = 1;
	memset(r, 0, sizeof *r);
	stage(r, "parse");
	ctx = tc_context_new();
	if (!ctx) {
		r->cls = RES_REFUSED;
		set_msg(r, "no context");
		return;
	}
	m = tc_module_parse(ctx, c->text, "fuzz.tc");
	if (!m) {
		r->cls = RES_REFUSED;
		set_msg(r, "%s", tc_context_error(ctx));
		goto done;
	}
	r->warned = tc_context_warnings(ctx) && *tc_context_warnings(ctx);
	/* its backward def, recomputing and with saves: derived (the library
	 * checks the text it derives), or refused with a user error (an
	 * integer output, a construct not supported yet); an internal error
	 * is a bug of the derivation */
	stage(r, "grad");
	for (i = 0; i < 2; i++) {
		char *gt = tc_module_grad(m, "f", NULL, i ? TC_GRAD_SAVES : 0);
		if (gt) {
			tc_string_free(gt);
		} else if (tc_context_error_kind(ctx) == TC_ERROR_INTERNAL) {
			r->cls = RES_GRAD;
			set_msg(r, "tc_module_grad%s: %s", i ? " (saves)" : "", tc_context_error(ctx));
			goto done;
		}
	}
	if (tc_module_def_arity(m, "f", &ni, &no) != 0 || ni != c->nin) {
		r->cls = RES_REFUSED;
		set_msg(r, "def f takes %d inputs, the case gives %d", ni, c->nin);
		goto done;
	}
	for (i = 0; i < c->nin; i++) {
		DLDataType dt;
		uint64_t rng = tu_seed(c->in[i].name, c->data_seed);
		int sz = dtype_size(c->in[i].dtype);
		tc_dtype_parse(dtypes[c->in[i].dtype].name, &dt);
		if (alloc_tensor(&ins[i], dt, c->in[i].ndim, c->in[i].dims) != 0)
			goto oom;
		nin_alloc++;
		for (int64_t e = 0; e < numel(&ins[i].dl); e++)
			dtypes[c->in[i].dtype].store((char *)ins[i].dl.data + e * sz,
				draw_value(&rng, c->in[i].dtype, c->in[i].index_range));
		inp[i] = &ins[i].dl;
	}
	oi = tc_options_new();
	oc = tc_options_new();
	if (!oi || !oc)
		goto oom;
	if (tc_options_set(oi, "target", "interp", ctx) != 0 ||
		tc_options_parse(oc, c->opts, ctx) != 0 ||
		tc_options_set(oc, "target", "cpu", ctx) != 0) {
		r->cls = RES_REFUSED;
		set_msg(r, "options: %s", tc_context_error(ctx));
		goto done;
	}
	stage(r, "compile-interp");
	ki = tc_compile(m, "f", inp, c->nin, oi);
	if (!ki) {
		r->cls = RES_REFUSED;
		set_msg(r, "%s", tc_context_error(ctx));
		goto done;
	}
	stage(r, "compile-cpu");
	kc = tc_compile(m, "f", inp, c->nin, oc);
	if (!kc) {
		r->cls = RES_CPU_COMPILE;
		set_msg(r, "the interpreter compiles it but the cpu backend fails: %s",
			tc_context_error(ctx));
		goto done;
	}
	nout = tc_kernel_num_outputs(ki);
	if (nout != no || tc_kernel_num_outputs(kc) != nout || nout > MAXT) {
		r->cls = RES_MISMATCH;
		set_msg(r, "output counts differ: interp %d, cpu %d", nout,
			tc_kernel_num_outputs(kc));
		nout = 0;
		goto done;
	}
	for (i = 0; i < nout; i++) {
		DLDataType dti, dtc;
		int ndi, ndc;
		int64_t shi[8], shc[8];
		tc_kernel_output_shape(ki, i, &dti, &ndi, shi);
		tc_kernel_output_shape(kc, i, &dtc, &ndc, shc);
		if (ndi != ndc || memcmp(&dti, &dtc, sizeof dti) ||
			memcmp(shi, shc, sizeof(int64_t) * (size_t)ndi) || ndi > 4 ||
			dtype_of(dti) < 0) {
			r->cls = RES_MISMATCH;
			set_msg(r, "output %s: types or shapes differ (or unknown)",
				tc_module_tensor_name(m, "f", ni + i));
			nout = i;
			goto done;
		}
		if (alloc_tensor(&outc[i], dtc, ndc, shc) != 0)
			goto oom;
		if (alloc_tensor(&outi[i], dti, ndi, shi) != 0) {
			free(outc[i].dl.data);
			goto oom;
		}
		memset(outc[i].dl.data, 0xA5, outc[i].bytes); /* two poisons: an element */
		memset(outi[i].dl.data, 0x5A, outi[i].bytes); /* neither writes differs */
		pc[i] = &outc[i].dl;
		pi[i] = &outi[i].dl;
	}
	stage(r, "run-interp");
	rc_i = tc_kernel_run(ki, inp, c->nin, pi, nout);
	{
		char msg_i[512];
		snprintf(msg_i, sizeof msg_i, "%s", rc_i ? tc_context_error(ctx) : "");
		stage(r, "run-cpu");
		rc_c = tc_kernel_run(kc, inp, c->nin, pc, nout);
		if (rc_i && rc_c) {
			r->cls = RES_BOTH_ERR;
			set_msg(r, "%s", msg_i);
			goto done;
		}
		if (rc_i || rc_c) {
			r->cls = RES_RUN_DIFF;
			set_msg(r, "%s fails, %s runs: %s", rc_i ? "interp" : "cpu",
				rc_i ? "cpu" : "interp", rc_i ? msg_i : tc_context_error(ctx));
			goto done;
		}
	}
	stage(r, "compare");
	for (i = 0; i < c->nin + nout; i++) { /* the magnitudes of the case */
		/* integers too: converted, they are terms of float sums
		 * (seed 103 case 1632: 3.25 + int32 extremes summed) */
		const buf_tensor *b = i < c->nin ? &ins[i] : &outi[i - c->nin];
		int d = dtype_of(b->dl.dtype);
		if (d < 0 || dtypes[d].kind == K_BOOL)
			continue;
		for (int64_t e = 0; e < numel(&b->dl); e++) {
			double v = fabs(dtypes[d].load((char *)b->dl.data + e * dtype_size(d)));
			if (isfinite(v) && v > scale)
				scale = v;
		}
	}
	r->cls = RES_OK;
	for (i = 0; i < nout; i++)
		if (compare_output(c, r, tc_module_tensor_name(m, "f", ni + i), &outc[i], &outi[i],
			    scale)) {
			r->cls = RES_MISMATCH;
			break;
		}
	goto done;
oom:
	r->cls = RES_REFUSED;
	set_msg(r, "out of memory");
done:
	free_tensors(outc, nout);
	free_tensors(outi, nout);
	free_tensors(ins, nin_alloc);
	tc_kernel_free(ki);
	tc_kernel_free(kc);
	tc_options_free(oi);
	tc_options_free(oc);
	tc_module_free(m);
	tc_context_free(ctx);
}

static int case_timeout = 20;

/* Runs c in a forked child (crashes and hangs become results). */
static void run_isolated(const rcase *c, result *r)
{
	int fds[2], status;
	pid_t pid;
	memset(r, 0, sizeof *r);
	if (pipe(fds) != 0) {
		r->cls = RES_CRASH;
		set_msg(r, "pipe: %s", strerror(errno));
		return;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r->cls = RES_CRASH;
		set_msg(r, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return;
	}
	if (pid == 0) {
		result res;
		close(fds[0]);
		stage_fd = fds[1];
		alarm((unsigned)case_timeout);
		run_case(c, &res);
		{
			const char *p = (const char *)&res;
			size_t left = sizeof res;
			if (write(fds[1], "R", 1) != 1)
				_exit(3);
			while (left) {
				ssize_t w = write(fds[1], p, left);
				if (w <= 0)
					_exit(3);
				p += w;
				left -= (size_t)w;
			}
		}
		_exit(0);
	}
	close(fds[1]);
	{
		/* stage lines "Sname\n", then "R" and the result struct */
		char buf[sizeof(result) + 4096];
		size_t len = 0;
		ssize_t n;
		char last[32] = "start";
		int got = 0;
		while ((n = read(fds[0], buf + len, sizeof buf - len)) > 0) {
			len += (size_t)n;
			if (len == sizeof buf)
				break;
		}
		close(fds[0]);
		waitpid(pid, &status, 0);
		for (size_t i = 0; i < len;) {
			if (buf[i] == 'S') {
				size_t j = i + 1;
				while (j < len && buf[j] != '\n')
					j++;
				snprintf(last, sizeof last, "%.*s", (int)(j - i - 1), buf + i + 1);
				i = j + 1;
			} else if (buf[i] == 'R' && len - i - 1 >= sizeof(result)) {
				memcpy(r, buf + i + 1, sizeof(result));
				got = 1;
				break;
			} else {
				break;
			}
		}
		if (got && WIFEXITED(status) && WEXITSTATUS(status) == 0)
			return;
		memset(r, 0, sizeof *r);
		snprintf(r->stage, sizeof r->stage, "%s", last);
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
			r->cls = RES_TIMEOUT;
			set_msg(r, "no result after %d s (stage %s)", case_timeout, last);
		} else {
			r->cls = RES_CRASH;
			if (WIFSIGNALED(status))
				set_msg(r, "the child died of signal %d (%s) in stage %s",
					WTERMSIG(status), strsignal(WTERMSIG(status)), last);
			else
				set_msg(r, "the child exited with status %d in stage %s",
					WEXITSTATUS(status), last);
		}
	}
}

static int is_failure(int cls)
{
	return cls == RES_CPU_COMPILE || cls == RES_RUN_DIFF || cls == RES_MISMATCH || cls == RES_CRASH ||
		cls == RES_TIMEOUT || cls == RES_GRAD;
}

/* ------------------------------------------------------------------ */
/* Known, filed differences.  A failure that one of these matches is   */
/* counted as excluded, not as a failure: keep each entry narrow (the  */
/* class, text the message must contain, a test of the program) and   */
/* give its reason.  Remove an entry when its issue is fixed: the     */
/* bounded run then checks the fix.  Empty today: the three entries of */
/* issue 14 (a rank-0 byte read under a branch, a division by a size   */
/* expression that is 0, a product reassociated) went with their fixes.*/

typedef struct exclusion {
	const char *name;
	const char *reason;
	int cls;             /* the failure's class */
	const char *in_msg;  /* a string the failure's message contains ("" any) */
	int (*match)(const rcase *c, const result *r); /* NULL: anything */
} exclusion;

static const exclusion exclusions[] = {
	{NULL, NULL, 0, NULL, NULL},
};

static const exclusion *excluded(const rcase *c, const result *r)
{
	for (const exclusion *x = exclusions; x->name; x++)
		if (x->cls == r->cls && strstr(r->msg, x->in_msg) && (!x->match || x->match(c, r)))
			return x;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Minimising a failure                                               */

static double now_s(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

static int minimize_seconds = 60;
static int verbose;

typedef struct minimizer {
	int cls;
	double deadline;
	int tries, kept;
	rcase c; /* scratch */
	result r;
} minimizer;

/* Whether q still fails the same way; if so it replaces *p. */
static int try_prog(minimizer *mz, prog *p, const prog *q)
{
	if (now_s() > mz->deadline)
		return 0;
	mz->tries++;
	prog_to_case(q, &mz->c);
	run_isolated(&mz->c, &mz->r);
	if (mz->r.cls != mz->cls)
		return 0;
	*p = *q;
	mz->kept++;
	return 1;
}

static void collect_nodes(const prog *p, int i, int *list, int *n)
{
	const node *x = &p->nd[i];
	if (x->sub || *n >= MAXN)
		return;
	list[(*n)++] = i;
	for (int k = 0; k < x->n; k++)
		collect_nodes(p, x->a[k], list, n);
}

static void minimize(prog *p, int cls)
{
	static minimizer mz;
	static prog q;
	int progress = 1, k, v;
	mz.cls = cls;
	mz.deadline = now_s() + minimize_seconds;
	mz.tries = mz.kept = 0;
	while (progress && now_s() < mz.deadline) {
		progress = 0;
		for (k = p->nstmts - 1; k >= 0; k--) /* statements */
			if (!p->s[k].dead) {
				q = *p;
				q.s[k].dead = 1;
				progress |= try_prog(&mz, p, &q);
			}
		for (k = 0; k < p->ntensors; k++) /* outputs to temporaries, inputs */
			if (p->t[k].role == T_OUT && tensor_live(p, k)) {
				q = *p;
				q.t[k].role = T_TEMP;
				progress |= try_prog(&mz, p, &q);
			} else if ((p->t[k].role == T_IN || p->t[k].role == T_INDEX) && !p->t[k].dead) {
				q = *p;
				q.t[k].dead = 1;
				progress |= try_prog(&mz, p, &q);
			}
		for (k = 0; k < p->nstmts; k++) { /* clauses */
			stmt *s = &p->s[k];
			if (s->dead)
				continue;
			if (s->exists_root >= 0) {
				q = *p;
				q.s[k].exists_root = -1;
				progress |= try_prog(&mz, p, &q);
			}
			if (s->nlets) {
				q = *p;
				q.s[k].nlets--;
				progress |= try_prog(&mz, p, &q);
			}
			for (v = 0; v < s->nvars; v++)
				if (s->where_lo[v] >= 0) {
					q = *p;
					q.s[k].where_lo[v] = -1;
					if (!try_prog(&mz, p, &q) && s->where_lo[v] > 0) {
						q = *p;
						q.s[k].where_lo[v] = 0;
						progress |= try_prog(&mz, p, &q);
					} else {
						progress = 1;
					}
				}
		}
		for (k = 0; k < p->nstmts; k++) { /* subexpressions */
			static int list[MAXN];
			int n = 0, j, c;
			stmt *s = &p->s[k];
			if (s->dead)
				continue;
			collect_nodes(p, s->root, list, &n);
			for (v = 0; v < s->nlets; v++)
				collect_nodes(p, s->let_root[v], list, &n);
			for (j = 0; j < n; j++) {
				node *x = &p->nd[list[j]];
				int done = 0;
				for (c = 0; c < x->n && !done; c++) {
					if (p->nd[x->a[c]].sub)
						continue;
					q = *p;
					q.nd[list[j]] = p->nd[x->a[c]];
					q.nd[list[j]].conditional = x->conditional;
					done = try_prog(&mz, p, &q);
				}
				if (!done && x->k != N_INT && x->k != N_FLOAT) {
					q = *p;
					memset(&q.nd[list[j]], 0, sizeof(node));
					q.nd[list[j]].k = N_INT;
					q.nd[list[j]].v = 1;
					q.nd[list[j]].conditional = x->conditional;
					done = try_prog(&mz, p, &q);
				}
				if (done) {
					progress = 1;
					break; /* the node list is stale */
				}
			}
		}
		for (k = p->nopt - 1; k >= 0; k--) { /* options back to their defaults */
			q = *p;
			memmove(q.opt[k], q.opt[k + 1], sizeof q.opt[0] * (size_t)(q.nopt - k - 1));
			q.nopt--;
			progress |= try_prog(&mz, p, &q);
		}
		for (k = 0; k < p->nsizes; k++) /* sizes */
			if (p->size_val[k] > 1) {
				q = *p;
				q.size_val[k] = 1;
				if (!try_prog(&mz, p, &q)) {
					q = *p;
					q.size_val[k]--;
					progress |= try_prog(&mz, p, &q);
				} else {
					progress = 1;
				}
			}
	}
	if (verbose)
		fprintf(stderr, "fuzz_diff: minimised in %d tries (%d kept)\n", mz.tries, mz.kept);
}

/* ------------------------------------------------------------------ */
/* Reproducer files                                                   */

static int mkdirs(const char *path)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *s = buf + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(buf, 0777);
			*s = '/';
		}
	return mkdir(buf, 0777) == 0 || errno == EEXIST ? 0 : -1;
}

static int write_repro(const char *dir, const char *file, const rcase *c, const char *found)
{
	char path[1200];
	FILE *f;
	int i, d;
	if (mkdirs(dir) != 0)
		return -1;
	snprintf(path, sizeof path, "%s/%s", dir, file);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "# fuzz_diff reproducer: fuzz_diff --replay %s\n", path);
	fprintf(f, "# found: ");
	for (const char *s = found; *s; s++)
		fputc(*s == '\n' ? ' ' : *s, f);
	fprintf(f, "\n# options: %s\n", c->opts);
	for (i = 0; i < c->nin; i++) {
		fprintf(f, "# input: %s %s ", c->in[i].name, dtypes[c->in[i].dtype].name);
		if (!c->in[i].ndim)
			fprintf(f, "-");
		for (d = 0; d < c->in[i].ndim; d++)
			fprintf(f, "%s%lld", d ? "," : "", (long long)c->in[i].dims[d]);
		if (c->in[i].index_range)
			fprintf(f, " index %lld", (long long)c->in[i].index_range);
		fprintf(f, "\n");
	}
	fprintf(f, "# data: 0x%llx\n", (unsigned long long)c->data_seed);
	fprintf(f, "# inexact:%s\n", c->inexact);
	fprintf(f, "# reduced: %g\n", c->reduced);
	fprintf(f, "%s", c->text);
	fclose(f);
	printf("fuzz_diff: reproducer written to %s\n", path);
	return 0;
}

/* Reads a reproducer; -1 with a message on stderr when it is malformed. */
static int read_repro(const char *path, rcase *c)
{
	FILE *f = fopen(path, "r");
	char line[2048];
	size_t len = 0;
	int lineno = 0;
	memset(c, 0, sizeof *c);
	if (!f) {
		fprintf(stderr, "fuzz_diff: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (!strncmp(line, "# options:", 10)) {
			snprintf(c->opts, sizeof c->opts, "%.1000s", line + 10);
			c->opts[strcspn(c->opts, "\n")] = '\0';
		} else if (!strncmp(line, "# input:", 8)) {
			char name[16], type[16], dims[128], kw[16];
			long long range = 0;
			input_desc *d = &c->in[c->nin];
			int n = sscanf(line + 8, "%15s %15s %127s %15s %lld", name, type, dims, kw,
				&range);
			if (n < 3 || c->nin >= MAXT || dtype_find(type) < 0 ||
				(n >= 4 && (strcmp(kw, "index") || n < 5 || range <= 0))) {
				fprintf(stderr, "fuzz_diff: %s:%d: expected '# input: NAME DTYPE "
						"D0,D1,... [index RANGE]'\n", path, lineno);
				fclose(f);
				return -1;
			}
			snprintf(d->name, sizeof d->name, "%s", name);
			d->dtype = dtype_find(type);
			d->index_range = n >= 5 ? range : 0;
			if (strcmp(dims, "-"))
				for (char *s = dims; *s && d->ndim < 4; d->ndim++) {
					d->dims[d->ndim] = strtoll(s, &s, 10);
					if (*s == ',')
						s++;
				}
			c->nin++;
		} else if (!strncmp(line, "# data:", 7)) {
			c->data_seed = strtoull(line + 7, NULL, 0);
		} else if (!strncmp(line, "# inexact:", 10)) {
			snprintf(c->inexact, sizeof c->inexact, "%.250s", line + 10);
			c->inexact[strcspn(c->inexact, "\n")] = '\0';
			if (c->inexact[0]) {
				size_t l = strlen(c->inexact);
				if (l + 1 < sizeof c->inexact)
					strcat(c->inexact, " ");
			}
		} else if (!strncmp(line, "# reduced:", 10)) {
			c->reduced = atof(line + 10);
		}
		if (len + strlen(line) + 1 < sizeof c->text) { /* the whole file is the text */
			memcpy(c->text + len, line, strlen(line) + 1);
			len += strlen(line);
		}
	}
	fclose(f);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Driver                                                             */

static void usage(void)
{
	printf("usage: fuzz_diff [options]\n"
	       "  --seed S            the run's seed [1]; case N of seed S is always the same case\n"
	       "  --cases N           run cases 0..N-1 [100]\n"
	       "  --case N            run case N only (with --print: print it)\n"
	       "  --seconds T         stop starting cases after T seconds (0: no limit) [0]\n"
	       "  --out DIR           reproducers go here [build/fuzz-diff/failures]\n"
	       "  --replay PATH...    run saved reproducers (files, or folders of .tc files)\n"
	       "  --no-minimize       save failures as generated\n"
	       "  --minimize-seconds T  time for minimising one failure [60]\n"
	       "  --timeout T         seconds one case may take [20]\n"
	       "  --exact             compare inexact outputs bit for bit too (to see the bound matter)\n"
	       "  --print             print each case's program and options\n"
	       "  --verbose           print every case's result and refusals\n"
	       "exit status: 0 when no case failed (known exclusions aside), 1 otherwise\n");
}

typedef struct tally {
	int by_class[RES_EXCLUDED + 1];
	int warned, failed, cases;
	char first_refusal[3][512];
	int nref;
} tally;

static void record(tally *t, const rcase *c, result *r, const char *what)
{
	const exclusion *x = is_failure(r->cls) ? excluded(c, r) : NULL;
	t->cases++;
	t->warned += r->warned;
	if (x) {
		t->by_class[RES_EXCLUDED]++;
		printf("fuzz_diff: %s: %s (excluded: %s)\n", what, result_name[r->cls], x->name);
		r->cls = RES_EXCLUDED;
		return;
	}
	t->by_class[r->cls]++;
	if (r->cls == RES_REFUSED && t->nref < 3)
		snprintf(t->first_refusal[t->nref++], sizeof t->first_refusal[0], "%.100s: %.400s",
			what, r->msg);
	if (is_failure(r->cls)) {
		t->failed++;
		printf("fuzz_diff: FAIL %s: %s: %s\n", what, result_name[r->cls], r->msg);
	} else if (verbose) {
		printf("fuzz_diff: %s: %s%s%s\n", what, result_name[r->cls], r->msg[0] ? ": " : "",
			r->cls == RES_OK ? "" : r->msg);
	}
}

static void summary(const tally *t, double secs)
{
	printf("fuzz_diff: %d cases in %.1f s: %d ok, %d refused, %d both failing at run time "
	       "(the same error), %d warned; failures: %d cpu-compile-error, %d run-error-differs, "
	       "%d mismatch, %d crash, %d timeout, %d grad-internal-error; %d excluded as known\n",
		t->cases, secs, t->by_class[RES_OK], t->by_class[RES_REFUSED], t->by_class[RES_BOTH_ERR],
		t->warned, t->by_class[RES_CPU_COMPILE], t->by_class[RES_RUN_DIFF],
		t->by_class[RES_MISMATCH], t->by_class[RES_CRASH], t->by_class[RES_TIMEOUT],
		t->by_class[RES_GRAD], t->by_class[RES_EXCLUDED]);
	for (int i = 0; i < t->nref; i++)
		printf("fuzz_diff: refused: %s\n", t->first_refusal[i]);
}

static int replay_path(const char *path, tally *t)
{
	static rcase c;
	result r;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *e;
		char sub[1200];
		int n = 0;
		if (!d)
			return -1;
		while ((e = readdir(d))) {
			size_t l = strlen(e->d_name);
			if (l > 3 && !strcmp(e->d_name + l - 3, ".tc")) {
				snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
				replay_path(sub, t);
				n++;
			}
		}
		closedir(d);
		return n;
	}
	if (read_repro(path, &c) != 0) {
		t->failed++;
		return -1;
	}
	run_isolated(&c, &r);
	record(t, &c, &r, path);
	return 1;
}

static uint64_t case_seed(uint64_t seed, uint64_t n)
{
	return tu_seed("fuzz_diff", seed * 0x100000001B3ULL + n);
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;
	long cases = 100, only = -1;
	double seconds = 0, t0 = now_s();
	const char *out = "build/fuzz-diff/failures";
	int print = 0, do_min = 1, replay = 0, i, npaths = 0;
	const char **paths = calloc((size_t)argc, sizeof *paths);
	static prog p, orig;
	static rcase c;
	tally t;
	memset(&t, 0, sizeof t);
	if (!paths)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if (!strcmp(a, "--seed") && more)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(a, "--cases") && more)
			cases = atol(argv[++i]);
		else if (!strcmp(a, "--case") && more)
			only = atol(argv[++i]);
		else if (!strcmp(a, "--seconds") && more)
			seconds = atof(argv[++i]);
		else if (!strcmp(a, "--out") && more)
			out = argv[++i];
		else if (!strcmp(a, "--no-minimize"))
			do_min = 0;
		else if (!strcmp(a, "--minimize-seconds") && more)
			minimize_seconds = atoi(argv[++i]);
		else if (!strcmp(a, "--timeout") && more)
			case_timeout = atoi(argv[++i]);
		else if (!strcmp(a, "--exact"))
			force_exact = 1;
		else if (!strcmp(a, "--print"))
			print = 1;
		else if (!strcmp(a, "--verbose"))
			verbose = 1;
		else if (!strcmp(a, "--replay"))
			replay = 1;
		else if (replay && a[0] != '-')
			paths[npaths++] = a; /* replayed once every option is read */
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			free(paths);
			return 0;
		} else {
			fprintf(stderr, "fuzz_diff: unknown argument '%s' (--help lists them)\n", a);
			free(paths);
			return 2;
		}
	}
	if (replay) {
		for (i = 0; i < npaths; i++)
			replay_path(paths[i], &t);
		summary(&t, now_s() - t0);
		free(paths);
		return t.failed ? 1 : 0;
	}
	free(paths);
	for (long n = only >= 0 ? only : 0; n < (only >= 0 ? only + 1 : cases); n++) {
		result r;
		char what[96];
		if (seconds > 0 && now_s() - t0 > seconds)
			break;
		gen_prog(&p, case_seed(seed, (uint64_t)n));
		prog_to_case(&p, &c);
		snprintf(what, sizeof what, "--seed %llu --case %ld", (unsigned long long)seed, n);
		if (print)
			printf("# %s\n# options: %s\n%s", what, c.opts, c.text);
		run_isolated(&c, &r);
		record(&t, &c, &r, what);
		if (r.cls != RES_EXCLUDED && is_failure(r.cls)) {
			char file[128], found[2300];
			int cls = r.cls;
			orig = p;
			if (do_min) {
				minimize(&p, cls);
				prog_to_case(&p, &c);
				run_isolated(&c, &r); /* the message of the minimised case */
				if (r.cls != cls) { /* flaky: keep the original */
					p = orig;
					prog_to_case(&p, &c);
					run_isolated(&c, &r);
				}
			}
			snprintf(found, sizeof found, "%s: %s: %s", what, result_name[cls], r.msg);
			snprintf(file, sizeof file, "%s-s%llu-c%ld.tc", result_name[cls],
				(unsigned long long)seed, n);
			if (write_repro(out, file, &c, found) != 0)
				fprintf(stderr, "fuzz_diff: cannot write %s/%s\n", out, file);
			else if (do_min)
				printf("fuzz_diff: minimised:\n%s", c.text);
		}
	}
	summary(&t, now_s() - t0);
	return t.failed ? 1 : 0;
}
