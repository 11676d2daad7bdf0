/* The polyhedral model of an IR function and its AST, built with stock
 * isl (poly.c; the AST: ast.c).  The schedule passes and the driver that computes
 * p->schedule are declared in passes.h.
 *
 * Pipeline (tc_poly_build, then tc_poly_schedule (passes.h), then
 * tc_poly_ast):
 *   IR function -> statement instances (a reduction with '!' becomes an
 *   init statement over its left-hand indices plus an update statement
 *   over all its indices) -> domains, read and write access relations
 *   (non-affine subscripts such as gathers over-approximated by the whole
 *   extent), the original textual-order schedule -> dependences (flow,
 *   anti, output with isl_union_access_info_compute_flow) -> a schedule
 *   tree from the isl scheduler (validity = all dependences), then the
 *   schedule passes -> an isl AST whose user nodes carry a tc_poly_inst
 *   annotation (a register tile's point loops built apart, from the tile
 *   sizes: tc_poly_points).
 *
 * This header is what backends and the runtime see of the polyhedral
 * stage: the model, its queries, the legality check, the marks passes
 * leave in the tree, the options passes read, and the AST.  Schedule
 * passes may insert mark nodes whose isl_id names a tcomp mark and carries
 * a tcomp object as its user pointer.  Backends walk the AST and see the
 * marks as AST mark nodes.
 *
 * Naming in isl: parameters are the size names, statement tuples are "S<k>"
 * (the update or only statement of IR statement k) and "S<k>_init", arrays
 * are the tensor names, statement dimensions the index variable names;
 * names that would clash with isl keywords get a trailing '_'.
 *
 * Specialisation: built with concrete sizes (params non-NULL), the model
 * has no isl parameters: its sets hold the sizes' values and the context
 * is the universe without parameters, so loop bounds are constants (the
 * generic model of tc_poly_build_generic keeps them as parameters);
 * without (params NULL) the model is parametric with the context "every
 * size >= 1 and the def's size conditions hold" (for printing and golden
 * tests).  Between the two (tc_poly_build_free): concrete sizes, some of
 * them left free; every size is a parameter and the context fixes all but
 * the free ones, so the schedule and the AST hold for every value >= 1 of
 * the free ones, while the passes make their choices (tile sizes, what is
 * worth a thread) at the given values (p->at).
 *
 * Ownership: a tc_poly is the caller's (tc_poly_build, tc_poly_free) and
 * owns its isl objects and arrays; it borrows the isl_ctx, the IR function
 * and the target, which must outlive it.  isl objects passed to and from
 * the functions below follow isl's rules, marked with tcomp's annotations;
 * a statement's annotation in the AST (tc_poly_inst) belongs to its AST
 * node and goes with p->ast. */
#ifndef TC_POLY_H
#define TC_POLY_H

#include <isl/aff.h>
#include <isl/ast.h>
#include <isl/ctx.h>
#include <isl/schedule.h>
#include <isl/space.h>
#include <isl/set.h>
#include <isl/union_map.h>
#include <isl/union_set.h>

#include "../ir/ir.h"
#include "../ir/target.h"

/* What a statement instance does. */
typedef enum tc_poly_kind {
	TC_POLY_ASSIGN, /* tensor[lhs] = rhs (an IR '=' statement) */
	TC_POLY_INIT,   /* tensor[lhs] = identity of the IR statement's operator */
	TC_POLY_UPDATE, /* tensor[lhs] = tensor[lhs] op rhs (op of the IR statement) */
} tc_poly_kind;

/* A statement of the polyhedral model. */
typedef struct tc_poly_stmt {
	const tc_ir_stmt *ir; /* the IR statement */
	int ir_index;         /* its number in the function */
	tc_poly_kind kind;
	int ndims;            /* domain dimensions: ir->nlhs for INIT, ir->nvars otherwise */
	char name[24];        /* isl tuple name */
} tc_poly_stmt;

/* The annotation of an AST user node: which statement runs, and the value
 * of each of its domain dimensions (its index variables, in order) as an
 * isl AST expression over the AST's iterators and the sizes, computed in
 * the at_each_domain callback. */
typedef struct tc_poly_inst {
	const tc_poly_stmt *stmt; /* NULL: a GPU kernel's copy or barrier (copy) */
	int n;
	isl_ast_expr **index; /* n expressions, owned; a copy: the box's
			       * origin in each dimension of its tensor */
	struct tc_poly_points *points; /* NULL, or the point loops this node
					* stands for (a reference, owned) */
	int copy;             /* stmt NULL: the copy (p->gpu_copies[copy]), or
			       * -1: a barrier of the block */
	int nshared;          /* reads of promoted tensors: ... */
	struct tc_poly_inst_shared {
		int copy;             /* p->gpu_copies[copy] holds the tensor */
		isl_ast_expr **index; /* the element in the copy, per dimension */
	} *shared;            /* ... nshared of them, owned */
} tc_poly_inst;

/* The point loops of a register tile, generated apart from the AST of the
 * tile loops (polyhedral/ast.c, tc_poly_ast).  The tile loops' AST runs
 * one user node per tile and statement, at the tile's origin (inst->index:
 * the origin's value in each dimension); such a node stands for the whole
 * tile of its statement: dimension v from the origin o[v] over
 * min(size[v], end[v] - o[v]) values.  A code generator binds origin[v] to
 * o[v] and finds which of the dimensions part[0 .. npart) are short (end -
 * o < size): with npart > 0 it emits piece[mask], bit k of mask set when
 * part[k] is short (piece[0]: every dimension whole, constant bounds: the
 * vectorised, unrolled micro-kernel; the others of constant bounds too,
 * NULL for combinations that never occur).  With npart 0 it emits
 * piece[0] when no dimension with may_partial is short, else partial,
 * whose bounds read the ids extent[v] (bound to end[v] - o[v], as in
 * every piece where may_partial[v] is 2); either
 * may be NULL when no tile is of that kind.  The user nodes of the pieces
 * carry their own tc_poly_inst, whose index expressions read the origin
 * ids and the point loops' iterators.  Reference counted: every
 * annotation holds one reference (freed with the AST). */
#define TC_POLY_MAX_PART 3
typedef struct tc_poly_points {
	int refs;
	int n;                 /* the statement's domain dimensions */
	int64_t *size;         /* per dimension: the tile's size (1: untiled) */
	int *may_partial;      /* per dimension: 0 no tile is short, 1 some
				* are (the pieces differ), 2 some are, and
				* every piece reads the extent (a loop
				* outside the unrolled rows) */
	isl_id **origin;       /* per dimension: the origin's id in the pieces */
	isl_id **extent;       /* per dimension: the extent's id in partial (or NULL) */
	isl_ast_expr **end;    /* per tiled dimension: one past its last value,
				* an expression of the sizes (else NULL) */
	int npart;             /* the dimensions whose short tiles have pieces ... */
	int part[TC_POLY_MAX_PART]; /* ... of their own */
	isl_ast_node *piece[1 << TC_POLY_MAX_PART];
	isl_ast_node *partial;
} tc_poly_points;

/* Mark names (isl_id names of mark nodes) that passes insert. */
#define TC_POLY_MARK_KERNEL "tc_kernel" /* the root; user pointer: the tc_poly */
#define TC_POLY_MARK_PARALLEL "tc_parallel" /* above a parallel (coincident) loop */
#define TC_POLY_MARK_REGTILE "tc_regtile" /* above a register tile's point loops */
#define TC_POLY_MARK_UNROLL "tc_unroll" /* above point loops the code generator
					  * unrolls: every loop down to ... */
#define TC_POLY_MARK_UNROLLED "tc_unrolled" /* ... this mark (a register tile's
					      * rows between them) */
#define TC_POLY_MARK_ROLLED "tc_rolled" /* above the point loops of a tile piece
					  * short of its rows, run one row at a time
					  * (polyhedral/ast.c): the loops below it but
					  * the innermost are kept as loops */

/* A GPU kernel (polyhedral/gpu.c, tc_poly_pass_gpu): a subtree of the
 * schedule below a TC_POLY_MARK_GPU_KERNEL mark, whose isl id carries this
 * record (owned by the id, freed with it).  Its outer coincident band
 * members are mapped to blocks and threads through a filter on the
 * parameters TC_POLY_GPU_BLOCK[d] and TC_POLY_GPU_THREAD[d] (d = 0, 1, 2:
 * x, y, z), which the AST reads as the block and thread indices; a code
 * generator defines them in the kernel (blockIdx.x, threadIdx.x, ...).
 * A kernel with nothing mapped runs on one thread, unless it is a
 * reduction mapped to the threads of x (reduce > 0, below). */
typedef struct tc_poly_gpu_kernel {
	int index;         /* launch order: 0, 1, ... */
	int nmapped;       /* band members mapped (0 to 3); with reduce, to
			    * blocks only (one block per value), or with
			    * warp_rows the innermost to blocks and the
			    * threads of y, the others to blocks only */
	unsigned grid[3];  /* blocks in x, y, z */
	unsigned block[3]; /* threads per block in x, y, z */
	int reduce;        /* 0, or the threads of x (block[0]) that share
			    * the reduction below a TC_POLY_MARK_GPU_REDUCE
			    * mark of the kernel */
	int warp_rows;     /* 0, or (with reduce == 32) the rows per block of
			    * a warp-per-row reduction: block[1], one row
			    * on each warp (tc_poly_gpu_reduce, warp) */
} tc_poly_gpu_kernel;
#define TC_POLY_MARK_GPU_KERNEL "tc_gpu_kernel" /* above a GPU kernel's subtree */

/* A reduction shared by the threads of x of a block (polyhedral/gpu.c):
 * the subtree below a TC_POLY_MARK_GPU_REDUCE mark runs one reduction's
 * update statement (sum of floats or integers, max or min; never a
 * product, nor 16-bit floats or bool), and writes one element of its
 * output for each value of the loops above the mark.  Every thread runs
 * the subtree's loops, but the depth-th for loop below the mark (0: the
 * mark's child, which is a for loop) strided: thread t takes the values
 * lo + t, lo + t + threads, ...; each thread accumulates into a register
 * from the operator's identity, then the block combines the partial
 * results (codegen/cuda.c: warp shuffles, one value per warp through
 * shared memory) and thread 0 applies the result to the element.  The
 * AST above the mark depends on no thread index of x, so every thread of
 * the block reaches the combine's barriers.  Owned by the mark's id. */
typedef struct tc_poly_gpu_reduce {
	int threads; /* threads of x sharing the reduction: 32 .. 1024, a power of two */
	int depth;   /* which for loop below the mark is strided */
	int warp;    /* 1: a warp per row (threads 32, the rows also on the
		      * threads of y): the warp's shuffles combine, with no
		      * shared memory and no barrier; the AST above the mark
		      * may read tc_ty but still no thread index of x */
} tc_poly_gpu_reduce;
#define TC_POLY_MARK_GPU_REDUCE "tc_gpu_reduce" /* above a reduction's loops */

/* A tensor copied into shared memory by a GPU kernel (polyhedral/gpu.c,
 * promotion): a box of the tensor (size[d] elements from an origin in
 * each dimension) that the block's threads read in one step of its tile
 * loops, copied in by a statement of the schedule (an extension,
 * named stmt, one instance per step) that every thread of the block
 * runs: it copies part of the box (cooperatively, elements outside the
 * tensor left unset) and a barrier statement (named TC_POLY_GPU_SYNC...)
 * follows the copies and the step's compute.  Reads of the tensor by
 * the kernel's statements read the copy instead (tc_poly_inst.shared). */
typedef struct tc_poly_gpu_copy {
	char stmt[40];             /* the copy statement's name */
	int kernel;                /* its kernel's index */
	int tensor;
	int ndims;                 /* the tensor's */
	int64_t size[TC_MAX_RANK]; /* the box: elements per dimension */
	isl_pw_multi_aff *offset;  /* the copy statement's instances -> the
				    * box's origin in the tensor */
} tc_poly_gpu_copy;

/* A statement's read of a promoted tensor: the element of the copy it
 * reads. */
typedef struct tc_poly_gpu_local {
	int stmt;                 /* p->stmts[stmt] ... */
	int copy;                 /* ... reads p->gpu_copies[copy] ... */
	isl_pw_multi_aff *index;  /* ... at this element of the box, per
				   * dimension (the statement's instances
				   * -> the tensor's space) */
} tc_poly_gpu_local;
#define TC_POLY_GPU_SYNC "tc_sync" /* prefix of the barrier statements' names */
#define TC_POLY_GPU_COPY "tc_shm"  /* prefix of the copy statements' names */
extern const char *const TC_POLY_GPU_BLOCK[3];  /* "tc_bx", "tc_by", "tc_bz" */
extern const char *const TC_POLY_GPU_THREAD[3]; /* "tc_tx", "tc_ty", "tc_tz" */

/* How a reduction mapped to threads (the reduce option) spreads its rows
 * (the reduce_map option; polyhedral/README.md, "Reductions on a
 * block"). */
typedef enum tc_poly_reduce_map {
	TC_POLY_REDUCE_MAP_AUTO,  /* a warp per row from 4096 rows (with
				   * reduce_threads auto or 32), else a block */
	TC_POLY_REDUCE_MAP_BLOCK, /* a block per row */
	TC_POLY_REDUCE_MAP_WARP,  /* a warp per row, several rows per block */
} tc_poly_reduce_map;

/* Fusion strategies, emulated with stock isl scheduler options:
 *   MAX   isl's clustering fuses whatever it can (serialize_sccs off);
 *   PRESERVE3COINCIDENT  fuses, but maximises coincidence first, so no
 *         fusion costs a parallel loop (schedule_maximize_coincidence);
 *   MIN   every strongly connected component of the dependence graph is
 *         scheduled on its own (serialize_sccs): no fusion;
 *   AUTO  chosen per nest: MAX, then each nest that lost its outer
 *         parallel loop or skewed a loop scheduled again with
 *         PRESERVE3COINCIDENT, then MIN, keeping what costs least
 *         (tc_poly_nest_measure, passes.h).  The runtime's default. */
typedef enum tc_poly_fusion {
	TC_POLY_FUSE_MAX,
	TC_POLY_FUSE_PRESERVE3COINCIDENT,
	TC_POLY_FUSE_MIN,
	TC_POLY_FUSE_AUTO,
} tc_poly_fusion;

/* What the schedule passes do (set by the caller before tc_poly_schedule;
 * tc_poly_build sets the defaults: order on, no tiling).  The schedule's
 * half of the options (runtime/options.c decodes both halves); the code
 * generators read theirs (codegen/opts.h).  vecreduce, vector and
 * unroll_inner are in both: here they say what the backend will do, which
 * the passes plan for. */
#define TC_POLY_MAX_TILE 16
typedef struct tc_poly_opts {
	int order;                     /* run tc_poly_pass_order */
	int vecreduce;                 /* the backend may vectorise float
					* reductions outside register tiles: a
					* dot product's sum goes innermost */
	int parallel;                  /* run tc_poly_pass_parallel: 1 on every
					* nest, 2 on nests with work enough */
	int ninterchange;              /* tc_poly_pass_interchange: members of
					* the band tc_poly_pass_tile tiles go to
					* positions 0..ninterchange-1 ... */
	int interchange[TC_POLY_MAX_TILE]; /* ... member interchange[k] to k
					* (a permutation; 0 members: as is) */
	int ntile;                     /* tile the outermost permutable band ... */
	int64_t tile[TC_POLY_MAX_TILE]; /* ... with these sizes, outermost first */
	int tile_auto;                 /* ntile 0: choose cache tiles for contractions */
	int nregtile;                  /* register tiles (tc_poly_pass_regtile) ... */
	int64_t regtile[TC_POLY_MAX_TILE]; /* ... sizes, innermost parallel member last */
	int regtile_auto;              /* nregtile 0: choose them for contractions */
	int unroll;                    /* unroll the register tile's outer point loops */
	tc_poly_fusion fusion;         /* how the isl scheduler fuses statements */
	int vector;                    /* lanes of the backend's vectors in
					* innermost loops (0: a register's): the
					* register tile counts vectors of this
					* many lanes, at most a register's */
	int unroll_inner;              /* vector iterations per trip of the
					* innermost loops (0: the backend
					* chooses): the register tile's rows
					* get that many vectors */
	int nblock;                    /* GPU: threads per block in x, y, z ... */
	int64_t block[3];              /* ... (nblock 0: chosen per kernel) */
	int ngrid;                     /* GPU: at most this many blocks in x, y, z ... */
	int64_t grid[3];               /* ... (ngrid 0: the device's limits) */
	int reduce;                    /* GPU: map reductions to the threads of
					* a block or a warp: 0 never, 1 where
					* legal, 2 (auto) where the reduced loop
					* fills a warp (tc_poly_pass_gpu) */
	int reduce_threads;            /* GPU: threads sharing a reduction
					* (0: chosen per kernel) */
	int shared;                    /* GPU: copy what a block reuses to
					* shared memory: 0 never, 1 what it
					* reads at least once per element, 2
					* (auto) at least twice (gpu_shared.c) */
	int shared_tile;               /* GPU: the reduced members' tile
					* between copies (0: 32) */
	tc_poly_reduce_map reduce_map; /* GPU: a block or a warp per row */
	unsigned long max_ops;         /* isl's budget per step: operations
					* (0: TC_POLY_MAX_OPS) ... */
	double max_seconds;            /* ... and seconds (0:
					* TC_POLY_MAX_SECONDS); tc_poly_budget */
} tc_poly_opts;

/* What one step of a compilation (building the model and its
 * dependences, the isl scheduler, each schedule pass, the AST build) may
 * take before isl gives up on it: isl operations (simplex pivots,
 * isl_ctx_set_max_operations) and seconds (a watchdog thread calls
 * isl_ctx_abort; pivots on numbers that keep growing can take seconds
 * each, so operations alone bound no time).  The scheduler and the passes
 * then fall back with a warning; building the model and the AST fail with
 * an error saying the def is too large (polyhedral/README.md, Budgets). */
#define TC_POLY_MAX_OPS 20000000ul
#define TC_POLY_MAX_SECONDS 10.0

/* The polyhedral model of one IR function (tc_poly_build), the schedule
 * the driver computes for it (tc_poly_schedule, passes.h) and its AST
 * (tc_poly_ast).  It owns its isl objects, stmts, params and rowbuf
 * (tc_poly_free frees them); ctx and f are borrowed and must outlive it.
 * merged and no_merge are the merge pass's and the driver's record of a
 * merged band chain (see passes.h). */
typedef struct tc_poly {
	isl_ctx *ctx; /* borrowed */
	tc_poly_opts opts;
	const tc_target *target; /* the machine (borrowed): vector width, block
				  * sizes, threads, row-buffer budget */
	const tc_ir_func *f;
	int64_t *params;    /* concrete sizes, or NULL: parametric */
	unsigned char *free; /* with params: free[i] set for each size the
			      * context leaves free (tc_poly_build_free),
			      * or NULL: none */
	isl_set *at;        /* with free sizes: the context fixing every
			     * size at params, where the passes measure
			     * (tc_poly_at); NULL otherwise */
	int nstmts;
	tc_poly_stmt *stmts;
	isl_set *context;        /* constraints on the sizes */
	isl_union_set *domain;
	isl_union_map *writes;   /* must-writes */
	isl_union_map *reads;    /* may-reads (every read, over-approximated) */
	isl_union_map *original; /* the textual-order schedule, as a map */
	isl_union_map *deps;     /* flow | anti | output dependences, each
				  * to the last write only (writes kill):
				  * the rest follow by transitivity */
	isl_union_map *near;     /* deps and, within each reduction, every
				  * pair without kills (an update's own in
				  * lexicographic form, tc_poly_lex_updates):
				  * what the isl scheduler is given */
	isl_set *gcontext;       /* with sizes, after tc_poly_build_generic:
				  * the context of a model without them
				  * (every size >= 1, or >= 0 where it is 0;
				  * the size conditions) ... */
	isl_union_set *gdomain;  /* ... the domain and ... */
	isl_union_map *gnear;    /* ... near within it: what the isl
				  * scheduler's fallback schedules for every
				  * size (NULL until then, and for a
				  * parametric model) */
	isl_set *gat;            /* after tc_poly_build_generic, where the
				  * model has no parameters (fixed sizes):
				  * the sizes as parameters equal to their
				  * values, which a schedule of the generic
				  * model keeps (tc_poly_generic_at) */
	isl_schedule *schedule;  /* after tc_poly_schedule */
	int merged;              /* tc_poly_pass_merge merged a band chain */
	int no_merge;            /* ... and the result was illegal: do not
				  * (set by the driver's check) */
	int textual;             /* the scheduler fell back to the textual
				  * order (fusion auto leaves it alone) */
	isl_ast_node *ast;       /* after tc_poly_ast */
	struct tc_poly_watch *watch; /* the budget's watchdog (tc_poly_budget) */
	unsigned long ctx_max_ops;   /* a quota the caller set on ctx before
					* tc_poly_build (0: none): it caps every
					* step's budget (tests fail isl with it) */
	tc_poly_gpu_copy *gpu_copies;   /* after the gpu pass: the shared-memory */
	int ngpu_copies;                /* copies of its kernels ... */
	tc_poly_gpu_local *gpu_locals;  /* ... and the reads that read them */
	int ngpu_locals;
	int *rowbuf;             /* per tensor, after tc_poly_schedule: for a
				  * row-buffered temporary (tc_poly_contract)
				  * how many leading subscripts select its row;
				  * 0 (or rowbuf NULL): kept whole */
} tc_poly;

/* Free p's GPU copies and locals (the gpu pass makes them, gpu_shared.c)
 * and empty the lists. */
void tc_poly_gpu_copies_free(__tc_keep tc_poly *p);

/* With sizes: build p->gcontext, p->gdomain and p->gnear, the model of
 * the same statements for every size (once; nothing for a parametric
 * model).  The scheduler falls back to it when scheduling at the sizes
 * runs past isl's budget: the sizes' constants can make the integer
 * programs of isl's clustering grow (a layer norm's backward pass ran past
 * the budget twice, 20 s, where scheduling for every size took 0.1 s).
 * TC_ERR with a message in d on an isl error. */
tc_stat tc_poly_build_generic(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* dom (taken: instances of p's model) with the sizes as parameters fixed at
 * p's values where p's model has none (tc_poly_build): a schedule of the
 * generic model restricted to it keeps its sizes' parameters equal to the
 * values, so that the AST's bounds are constants.  dom as it was for other
 * models; NULL on an isl error. */
__tc_give isl_union_set *tc_poly_generic_at(__tc_keep const tc_poly *p,
	__tc_take isl_union_set *dom);
/* The context of p's AST builds: p->context, with the sizes' parameters
 * of a generic schedule fixed (p->gat) where there are any. */
__tc_give isl_set *tc_poly_ast_context(__tc_keep const tc_poly *p);

/* The statement of the model whose isl tuple name is name (one of p's), or
 * NULL. */
const tc_poly_stmt *tc_poly_find_stmt(__tc_keep const tc_poly *p, const char *name);

/* The instances of statement st of p. */
__tc_give isl_union_set *tc_poly_stmt_instances(__tc_keep const tc_poly *p,
	__tc_keep const tc_poly_stmt *st);
/* near (taken: what build_parts computed for p->near or p->gnear) with
 * the dependences of each reduction's update on itself within dom
 * (borrowed) written as what they are, "the same element, a later
 * reduction instance" (the reduction indices in lexicographic order,
 * isl_map_lex_lt), for updates that read nothing of their own output and
 * write it at their left-hand indices.  isl's dataflow analysis gives the
 * same integer pairs, but may describe them by pieces whose rational
 * points run backwards (kw' = 1 - kw over a 2 x 2 window), and the isl
 * scheduler reasons on rational points: on a convolution with a 2 x 2
 * window it failed ("unable to carry dependences": the textual order,
 * untiled, 12x the time), with 2 x 3 or 1 x 2 windows it merged the
 * reduction loops into one (2 * r_c + r_kh: no register tile, 20x).  NULL
 * on an isl error. */
__tc_give isl_union_map *tc_poly_lex_updates(__tc_keep const tc_poly *p,
	__tc_take isl_union_map *near, __tc_keep isl_union_set *dom);
/* The instances of the packing copies (IR statements marked pack, see
 * tc_ir_pack); empty when there are none. */
__tc_give isl_union_set *tc_poly_pack_instances(__tc_keep const tc_poly *p);
/* The accesses of umap (p->reads or p->writes, borrowed) to tensor t, of
 * the instances in dom (borrowed; NULL: all), or NULL on an isl error. */
__tc_give isl_union_map *tc_poly_tensor_accesses(__tc_keep const tc_poly *p,
	__tc_keep isl_union_map *umap, int t, __tc_keep isl_union_set *dom);
/* Whether every instance in instances (borrowed) belongs to a packing
 * copy: the passes leave their loop nests alone. */
int tc_poly_is_pack(__tc_keep const tc_poly *p, __tc_keep isl_union_set *instances);

/* Build the model of f (sizes params[f->nparams], or NULL for a parametric
 * model) in ctx, for the machine target (ir/target.h; borrowed, it must
 * outlive the model).  NULL with a message in d on failure.  The ctx
 * should have isl's on_error set to ISL_ON_ERROR_CONTINUE (tc_poly_ctx_new
 * does). */
__tc_give tc_poly *tc_poly_build(__tc_keep isl_ctx *ctx, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const tc_target *target,
	__tc_keep tc_diags *d);
/* tc_poly_build with sizes params of which those with free[i] set (free
 * has f->nparams entries; NULL: none) stay parameters of the schedule and
 * the AST: the context says only that they are >= 1 and that the def's
 * size conditions hold, and p->at fixes them at params for the passes'
 * measures. */
__tc_give tc_poly *tc_poly_build_free(__tc_keep isl_ctx *ctx, __tc_keep const tc_ir_func *f,
	__tc_keep const int64_t *params, __tc_keep const unsigned char *free,
	__tc_keep const tc_target *target, __tc_keep tc_diags *d);

/* set (taken) where the passes measure it: at p's sizes when some are
 * free (intersected with p->at), else set itself. */
__tc_give isl_union_set *tc_poly_at(__tc_keep const tc_poly *p, __tc_take isl_union_set *set);

/* Whether schedule s runs the source of every dependence of p before its
 * target: 1 yes, 0 no, -1 on an isl error. */
int tc_poly_schedule_legal(__tc_keep tc_poly *p, __tc_keep isl_schedule *s);
/* The same against the dependences deps. */
int tc_poly_schedule_legal_for(__tc_keep isl_schedule *s, __tc_keep isl_union_map *deps);

/* Whether s is a word isl's parser reserves (a tcomp name equal to one
 * gets a trailing '_' in isl). */
int tc_poly_isl_keyword(const char *s);
/* Record in d that isl could not do what, with isl's last error message
 * when it has one, and clear the error in ctx; "out of memory" when isl
 * recorded no error (a callback of ours failed to allocate).  When isl ran
 * past its budget (tc_poly_budget) the message says so instead, and the
 * error stays (for the schedule driver, which undoes a pass that ran past
 * it). */
void tc_poly_isl_failed(__tc_keep isl_ctx *ctx, __tc_keep tc_diags *d, const char *what);
/* Start a step of p's compilation with isl's budget: p->opts.max_ops
 * operations and p->opts.max_seconds seconds from now (TC_POLY_MAX_OPS
 * and TC_POLY_MAX_SECONDS when 0), and no error recorded in p->ctx.  The
 * watchdog thread that enforces the seconds starts with the first budget
 * and ends with tc_poly_free. */
void tc_poly_budget(__tc_keep tc_poly *p);
/* End the step tc_poly_budget started: the watchdog no longer aborts. */
void tc_poly_budget_done(__tc_keep tc_poly *p);
/* Whether the last isl error of ctx is running past the budget (the
 * operations), or the watchdog aborted ctx's work since the step began. */
int tc_poly_over_budget(__tc_keep isl_ctx *ctx);
/* Around one isl call on this thread that returns nothing when isl gives
 * up (the scheduler): in AddressSanitizer builds, what the call allocated
 * and did not free is withheld from LeakSanitizer when gave_up is set
 * (isl loses memory when it is aborted at some points: polyhedral/leaks.c
 * says where and why this is the narrowest remedy); returns how many
 * allocations that was.  Scopes do not nest.  In other builds, nothing
 * (0). */
void tc_poly_leaks_begin(void);
size_t tc_poly_leaks_end(int gave_up);

/* Generate the AST of the schedule (p->ast). */
tc_stat tc_poly_ast(__tc_keep tc_poly *p, __tc_keep tc_diags *d);
/* Free p and everything it owns (NULL: nothing). */
void tc_poly_free(__tc_take tc_poly *p);

/* The annotation of a user node (NULL if it has none), borrowed from the
 * node: valid while the AST it belongs to lives. */
const tc_poly_inst *tc_poly_node_inst(__tc_keep isl_ast_node *user_node);
/* The number of the size named by an isl id in the AST or schedule (its
 * index in p->f->params and p->params), or -1 if the name is not a size.
 * The isl parameters, where there are any, are declared in that same
 * order. */
int tc_poly_param_index(__tc_keep const tc_poly *p, const char *isl_name);
/* The name of size i (0 <= i < p->f->nparams) in isl objects and the AST
 * (the def's, with a '_' after an isl keyword), the caller's to free; NULL
 * out of memory.  A model at fixed sizes has no parameters: its sets hold
 * the sizes' values (tc_poly_build). */
__tc_give char *tc_poly_param_name(__tc_keep const tc_poly *p, int i);

/* Text for `tcomp emit`: the schedule tree, the AST as C-like text; the
 * caller frees it with tc_free (NULL when out of memory). */
__tc_give char *tc_poly_schedule_str(__tc_keep const tc_poly *p);
__tc_give char *tc_poly_ast_str(__tc_keep const tc_poly *p);
/* Whether tc_poly_ast builds the point loops of the subtree top (a
 * register tile's: below a TC_POLY_MARK_REGTILE mark, or the point band
 * the mark will go above) apart from isl's AST of the tile loops, given
 * the tree above it as it stands (polyhedral/ast.c says when): 1 yes, 0
 * no (also for a model without sizes).  The regtile pass isolates the full
 * tiles for isl only where not. */
int tc_poly_points_exact(__tc_keep const tc_poly *p, __tc_keep isl_schedule_node *top);


/* A new isl context set up for tcomp (errors do not abort); the caller
 * frees it with isl_ctx_free once every model built in it is freed. */
__tc_give isl_ctx *tc_poly_ctx_new(void);

/* Whether scatter s (tc_ir_stmt.sub) combines with atomic additions on
 * p's target: a sum of float32, float64 or a 32- or 64-bit integer on a
 * GPU (a target with warps) that reads none of its own tensor's elements.  Its instances then carry no dependence
 * among themselves (any may run at once, in any order) and the CUDA code
 * adds with atomicAdd; every other scatter keeps the interpreter's order,
 * its gathered loops sequential. */
int tc_poly_scatter_atomic(__tc_keep const tc_poly *p, __tc_keep const tc_ir_stmt *s);

#endif
