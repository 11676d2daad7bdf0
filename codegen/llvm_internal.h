/* Private to codegen/llvm*.c: what the files of the LLVM back end share.
 * No other file may include it; the back end's API is llvm.h.
 *
 * The back end is three files, each calling only the ones below it:
 *   llvm_jit.c   LLVM set-up, the host, the pass pipeline, the JIT, object
 *                files and the text stages; it calls
 *   llvm_loop.c  the walk over the isl AST (loops, their metadata,
 *                parallel loops, streaming stores) and the module of a
 *                kernel, which calls
 *   llvm_expr.c  values: types, calls, conversions, isl AST expressions,
 *                tensor accesses, run-time checks, IR expressions,
 *                builtins, statement bodies.
 * Nothing calls back up: statement bodies hold no loops, so llvm_expr.c
 * needs nothing of llvm_loop.c but the state the walk keeps in struct cg.
 * llvm_jit.c sees only the host record and the two functions of
 * llvm_loop.c declared at the end.
 *
 * Ownership: LLVM types, values, blocks and metadata belong to the
 * module's context, so none of the functions below gives its caller
 * anything to free but where it says so; isl objects passed in are
 * borrowed (__tc_keep), as is the state g. */
#ifndef TC_CG_LLVM_INTERNAL_H
#define TC_CG_LLVM_INTERNAL_H

#include "llvm.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include <isl/ast.h>
#include <isl/id.h>

/* The location of diagnostics about the back end itself (no source
 * location applies). */
static const tc_loc noloc = {0, 0, 0, 0};

/* The host: triple, CPU name and features (LLVM-allocated strings, owned
 * by the record: llvm_jit.c fills and disposes of it) and its target.
 * Code generation reads it for the attributes of the functions it makes
 * and to choose streaming stores (x86-64 only). */
typedef struct cg_host {
	char *triple, *cpu, *features;
	int fma; /* the CPU has fused multiply-add instructions */
	LLVMTargetRef target;
} cg_host;

/* An AST iterator in scope and its stack slot; where its loop starts at
 * the constant base and steps by the constant step (> 0), the iterator is
 * base modulo step (a tile loop "c1 = 0; ...; c1 += 16": 0 modulo 16);
 * else step is 0. */
typedef struct cg_iter {
	isl_id *id;
	LLVMValueRef slot;
	int64_t base, step;
} cg_iter;

#define CG_MAX_DIMS 64

/* The state of generating the module of one kernel: made and freed by
 * tc_cg_llvm_build_module (llvm_loop.c), which owns the arrays (base,
 * scope, noalias, ext, streamed, iters, sites) and the builders.  The AST
 * walk (llvm_loop.c) moves fn, A, B, err and tensors into each outlined
 * parallel body and back, binds the iterators and sets ordered and
 * stream; the expressions (llvm_expr.c) read them, set dom, ndom and
 * guarded while they build a statement, and add sites.  failed: a
 * message is in d, and every function returns at once. */
typedef struct cg {
	const tc_poly *p;
	tc_cg_opts opts; /* the code-generation options (codegen/opts.h) */
	tc_diags *d;
	int failed;
	LLVMContextRef C;
	LLVMModuleRef M;
	LLVMBuilderRef B;     /* code */
	LLVMBuilderRef A;     /* the entry block: allocas, tensor pointers */
	LLVMValueRef fn;
	LLVMTypeRef i1, i8, i16, i32, i64, f16, f32, f64, ptr, vd;
	LLVMValueRef *base;   /* data pointer of each tensor */
	LLVMValueRef *scope;  /* per tensor: its alias scope list, then ... */
	LLVMValueRef *noalias; /* ... the list of every other tensor's scope */
	unsigned md_scope, md_noalias; /* metadata kinds alias.scope and noalias */
	int64_t *ext;         /* extents: ext[t * TC_MAX_RANK + k] at the model's
			       * sizes (a free size's, p->free: its value
			       * at those sizes, for choices only) */
	LLVMValueRef *size;   /* per size left free (p->free): its run-time
			       * value in the current function (i64) */
	cg_iter *iters;
	int niters, cap;
	LLVMValueRef dom[CG_MAX_DIMS]; /* domain values of the current statement */
	int ndom;
	const tc_ir_stmt *dom_ir; /* the statement they belong to */
	LLVMValueRef err;  /* the error record: int64_t[2] */
	LLVMValueRef tensors; /* the current function's tensor array argument */
	const cg_host *h;  /* for the attributes of outlined functions */
	int nparallel;     /* outlined parallel loops so far */
	int guarded;       /* inside a branch of ?: or the right side of && || */
	int ordered;       /* inside a register tile: reductions keep their order */
	int unroll;        /* between TC_POLY_MARK_UNROLL and _UNROLLED: loops unrolled */
	int rolled;        /* below TC_POLY_MARK_ROLLED: outer loops kept rolled */
	int rolled_seen;   /* the current loop's body holds TC_POLY_MARK_ROLLED */
	int loop_body;     /* the node walked next is a loop's whole body (node() clears it) */
	int loop_follows;  /* the node walked next has a loop after it in its block */
	void *vnest;       /* the vector tile (llvm_loop.c vtile) whose sums a nest of
			    * reduction loops holds, being emitted, or NULL */
	isl_ast_node *vnest_rows; /* its rows' mark node, the innermost loop's body */
	const tc_poly_inst *points; /* the register tile whose pieces are being
			    * emitted (points_node): its origin ids' values */
	int nvector;       /* register tile pieces and inits emitted as vector code */
	const tc_poly_stmt *acc_init; /* the init whose tile was not emitted: the
			    * next vector tile of its statement starts its sums
			    * from its identity (llvm_loop.c init_in_registers) */
	int vactive;       /* lanes in use of the vectors being emitted (the
			    * first ones; 0: all): fewer make their loads and
			    * stores masked (tc_target.masked_rest) */
	int nscalar;       /* statements emitted as scalar code inside a loop */
	unsigned char *streamed; /* per tensor: written with streaming stores */
	int stream;        /* emitting the copy of the code that streams */
	unsigned md_loop;  /* metadata kind llvm.loop */
	tc_cg_site *sites; /* the run-time checks */
	int nsites, capsites;
} cg;

/* ---- llvm_expr.c: values ---- */

/* Whether size parameter k is a run-time value of the code (left free:
 * sizes=parametric, tc_poly_build_free). */
int tc_cg_llvm_size_free(__tc_keep cg *g, int k);

/* The extent of dimension k of tensor t as an i64 value: a constant, or
 * computed from the free sizes' run-time values. */
LLVMValueRef tc_cg_llvm_extent(__tc_keep cg *g, int t, int k);

/* Record "LLVM code generation: what detail" in g->d (the first failure
 * only) and set g->failed.  Returns NULL, for "return fail(...)". */
LLVMValueRef tc_cg_llvm_fail(__tc_keep cg *g, const char *what, const char *detail);

/* The i64 constant v. */
LLVMValueRef tc_cg_llvm_i64c(__tc_keep cg *g, int64_t v);

/* A new basic block name at the end of the function being generated. */
LLVMBasicBlockRef tc_cg_llvm_new_block(__tc_keep cg *g, const char *name);

/* A call of intrinsic name (its base name, e.g. "llvm.sin") overloaded
 * on over[0..nover), with args[0..nargs).  NULL (failure recorded) if LLVM
 * does not know the name. */
LLVMValueRef tc_cg_llvm_call_intrinsic(__tc_keep cg *g, const char *name,
	__tc_keep LLVMTypeRef *over, int nover, __tc_keep LLVMValueRef *args, int nargs);

/* Add the enum attribute name (with value val) to function f; nothing if
 * LLVM does not know the name. */
void tc_cg_llvm_add_fn_attr(__tc_keep cg *g, __tc_keep LLVMValueRef f, const char *name,
	uint64_t val);

/* v (i1 or i64) as i64, zero-extended; NULL stays NULL. */
LLVMValueRef tc_cg_llvm_as_i64(__tc_keep cg *g, __tc_keep LLVMValueRef v);

/* v (i1 or i64) as i1, true where it is not 0; NULL stays NULL. */
LLVMValueRef tc_cg_llvm_as_i1(__tc_keep cg *g, __tc_keep LLVMValueRef v);

/* The value of isl AST expression e: i64, or i1 for conditions.  Its
 * identifiers are the iterators in g->iters and the size parameters.
 * NULL with the failure recorded. */
LLVMValueRef tc_cg_llvm_ast_expr(__tc_keep cg *g, __tc_keep isl_ast_expr *e);

/* How many leading subscripts of tensor t select a row of its row buffer
 * (polyhedral/contract.c), or 0: t is kept whole. */
int tc_cg_llvm_row_dims(__tc_keep cg *g, int t);

/* The row buffer of tensor t (j leading subscripts dropped): an array
 * allocated in the entry block (g->A) of the function being generated. */
LLVMValueRef tc_cg_llvm_row_buffer(__tc_keep cg *g, int t, int j);

/* The alias scopes of the tensors (g->scope, g->noalias, g->md_scope,
 * g->md_noalias): one scope per tensor, set on every access. */
void tc_cg_llvm_alias_scopes(__tc_keep cg *g);

/* The code of statement instance inst (the annotation of an AST user
 * node) at g->B: its domain values from their isl expressions, then the
 * store of its value (an init, an assignment or a reduction step). */
void tc_cg_llvm_statement(__tc_keep cg *g, __tc_keep const tc_poly_inst *inst);

/* Whether statement s can be computed `lanes` elements at a time along
 * its domain dimension vc (its last left-hand dimension) with the
 * functions below: an init, or a float32/float64 sum reduction whose
 * right-hand side is broadcast reads, unit-stride row reads, constants
 * and + - * / (llvm_expr.c, "register tiles as vector code"). */
int tc_cg_llvm_vector_ok(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int vc);

/* The address of lane 0's left-hand element of statement s, g->dom holding
 * its left-hand domain values. */
LLVMValueRef tc_cg_llvm_lhs_address(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s);

/* A vector of `lanes` elements of tensor t from addr (lane 0's element),
 * and its store (returned, NULL on failure: a caller that proves more
 * alignment sets it); with the tensor's alias scopes and element alignment.
 * Where g->vactive is below the vector's lanes, only the first g->vactive
 * lanes are read (the others 0) and written: masked loads and stores,
 * which touch no memory for the lanes left out. */
LLVMValueRef tc_cg_llvm_vector_load(__tc_keep cg *g, int t, __tc_keep LLVMValueRef addr,
	int lanes);
LLVMValueRef tc_cg_llvm_vector_store(__tc_keep cg *g, int t, __tc_keep LLVMValueRef addr,
	__tc_keep LLVMValueRef v);

/* The new value of `lanes` elements of statement s (tc_cg_llvm_vector_ok
 * along vc) with g->dom holding lane 0's domain values: the reduction's
 * identity for an init, else acc (the elements' values so far) plus the
 * right-hand side, each lane with the scalar statement's operations. */
LLVMValueRef tc_cg_llvm_vector_value(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int vc,
	int lanes, __tc_keep LLVMValueRef acc);

/* Whether statement s is a copy that vector code moves (llvm_loop.c,
 * "copies as vector code"): an assignment of a float32 or float64 tensor,
 * its last left-hand dimension vb, from one read of a tensor of that type
 * (not in panels) whose last subscript is domain dimension va plus terms
 * without it and whose other subscripts do not use va: va == vb a row
 * copied a vector at a time, va another left-hand dimension a transpose
 * (its last subscript then not using vb), moved in square tiles
 * transposed in registers.  A left-hand side in panels (a packing copy's,
 * tc_ir_tensor.panel) only where a panel holds whole vectors; the caller
 * proves each vector's first element starts one (ast_residue).  In the
 * streaming copy a streamed output only as a transpose's, whose caller
 * proves its stores aligned to their size (then streaming stores).  And
 * tc_cg_llvm_vector_rhs, that read as a vector of `lanes` along va,
 * g->dom holding lane 0's domain values. */
int tc_cg_llvm_copy_ok(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int va, int vb);
LLVMValueRef tc_cg_llvm_vector_rhs(__tc_keep cg *g, __tc_keep const tc_poly_stmt *s, int va,
	int lanes);

/* ---- llvm_loop.c: the module of a kernel ---- */

/* The named metadata of a module whose statements inside loops are all
 * vector code of register tiles (llvm_loop.c): llvm_jit.c gives it the
 * lighter pass pipeline, since the loop and SLP vectorisers, the unroller
 * and LICM have nothing to do there. */
#define TC_CG_VECTOR_CODE "tc.vector_code"

/* Build the module of p in C with one function fname for the host h and
 * the data layout of tm, and the sites of its run-time checks (when sites
 * is not NULL; the caller frees them).  NULL with a message in d on
 * failure; the caller owns the module (it lives in C). */
__tc_give LLVMModuleRef tc_cg_llvm_build_module(__tc_keep LLVMContextRef C,
	__tc_keep const tc_poly *p, __tc_keep const tc_cg_opts *o, const char *fname,
	__tc_keep const cg_host *h,
	__tc_keep LLVMTargetMachineRef tm, __tc_keep tc_diags *d, __tc_give tc_cg_site **sites,
	int *nsites);

/* After the pass pipeline: the non-temporal flag on the aligned vector
 * stores of the outputs that tc_cg_llvm_build_module chose to stream (its
 * tc.stream metadata; nothing without it). */
void tc_cg_llvm_mark_streaming_stores(__tc_keep LLVMModuleRef M);

#endif
