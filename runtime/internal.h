/* The objects of runtime/: the API's structures (contexts, modules,
 * kernels) and the compiled kernels and object code behind them.  Types
 * only; each file's functions are declared in its own header (error.h,
 * module.h, compiled.h, backend.h, pipeline.h, object.h, kernel.h, ...).
 *
 * Lifetimes: a context outlives its modules and kernels (the caller frees
 * it last).  A module is reference counted: the caller's reference plus one
 * per live kernel.  A module owns the compiled objects of its kernels (the
 * memo of tc_compile), freed with it.  ctx->lock guards the reference
 * counts, the memo, the backends' states and the workspace pools.
 * Each struct below says what its pointers own; a pointer it does not
 * own is marked borrowed or shared. */
#ifndef TC_RT_INTERNAL_H
#define TC_RT_INTERNAL_H

#include "tcomp.h"

#include "../codegen/check.h"
#include "../codegen/opts.h"
#include "../ir/ir.h"
#include "../ir/target.h"
#include "../lang/ast.h"
#include "../polyhedral/poly.h"

#include <pthread.h>

/* What share= does (ir/share.c). */
typedef enum tc_rt_share {
	TC_RT_SHARE_OFF, /* no sharing */
	TC_RT_SHARE_ON,  /* shared expressions stored into the output */
	TC_RT_SHARE_ROW, /* ... into a row-buffered temporary when the rows' loops fuse */
} tc_rt_share;

#define TC_RT_BACKEND_NAME_MAX 16

/* Every option of a tc_options, decoded once into typed fields: what the
 * pipeline (runtime/pipeline.c) and the backends read.  Nothing else
 * compares option strings. */
typedef struct tc_rt_opts {
	char backend[TC_RT_BACKEND_NAME_MAX]; /* target: the backend's name (runtime/backend.c) */
	int threads;         /* threads: how many run parallel loops; 0 for auto */
	tc_rt_share share;   /* share */
	int inline_temps;    /* inline=on: ir/inline.c */
	int pack;            /* pack=on: ir/pack.c */
	int parametric;      /* the free sizes of the code (tc_ir_free_sizes)
			      * are run-time values: sizes=parametric, or
			      * sizes=auto for a def's second shape (kernel.c) */
	int sizes_auto;      /* sizes=auto */
	tc_poly_opts sched;  /* the schedule passes' settings */
	tc_cg_opts cg;       /* the code generators' settings */
} tc_rt_opts;

/* The most backends the table holds (runtime/backend.c). */
#define TC_RT_MAX_BACKENDS 8

/* A context: owns its warnings, cache path and backends' states. */
struct tc_context {
	char *warnings;
	uint64_t serial;      /* unique among the contexts of the process */
	pthread_mutex_t lock; /* recursive */
	void *backend_state[TC_RT_MAX_BACKENDS]; /* per backend (by its number in
				  * the table): its state, made on first use
				  * (the LLVM backend's JIT) */
	int threads;    /* for kernels with threads=auto; 0: one per CPU it may run on */
	char *cache_path; /* tc_context_set_cache: NULL default location */
	int cache_off;    /* tc_context_set_cache(ctx, "") */
	int cache_result_options; /* tc_context_set_cache_result_options */
};

/* A module: borrows its context; owns its arena (AST and IR), source,
 * per-def IR table, compiled kernels and lookups. */
struct tc_module {
	tc_context *ctx;
	int refs;
	tc_arena *ar;
	tc_source *src;
	tc_program *prog;
	tc_ir_func **funcs; /* per def, lowered on demand */
	tc_vec compiled;    /* tc_rt_compiled *: the memo of tc_compile */
	tc_vec lookups;     /* tc_rt_lookup *: kernel cache lookups made (runtime/cache_api.c) */
};

struct tc_rt_backend; /* runtime/backend.h */

/* A def compiled for input shapes and options: shared by every tc_kernel
 * made with the same (entry, shapes, options) from one module, which owns
 * it.  It owns key, ar, params, shapes, options, code, ws_off and the
 * workspaces in ws_free and copy_free; f and backend are borrowed. */
typedef struct tc_rt_compiled {
	char *key;
	const tc_ir_func *f;  /* the module's function (the interpreter runs it) */
	const tc_ir_func *cf; /* what the compiled code and the emitted stages
			       * come from: f after the pipeline's IR rewrites
			       * (in ar), or f itself */
	tc_arena *ar;
	int64_t *params;
	tc_tensor *shapes; /* every tensor of cf: dtype, ndim, shape (no data) */
	int64_t *at;       /* parametric code compiled under sizes=auto: the
			    * sizes its choices (tile sizes, ...) were made
			    * at, the free ones the largest seen; it serves
			    * no larger ones.  NULL: params */
	const struct tc_rt_backend *backend; /* where it runs (the target option) */
	char *options;      /* the options it was compiled with (tc_options_print) */
	tc_rt_opts opts;    /* the same, decoded */
	tc_target target;   /* the machine it was compiled for (with opts.threads
			     * or the context's count as the expected threads) */
	void *code;        /* the backend's compiled code (NULL: none) */
	const struct tc_rt_compiled *code_of; /* code and cf borrowed from
			      * this one of the module's (sizes=parametric:
			      * compiled for other values of the free sizes),
			      * or NULL: its own */
	int from_object;   /* code loaded from the kernel cache's object code */
	size_t ws_bytes;   /* workspace for the temporaries */
	size_t ws_touch;   /* the part of it a new workspace has touched */
	size_t *ws_off;    /* offset of each temporary in it */
	tc_vec ws_free;    /* workspaces ready for reuse (void *) */
	size_t copy_bytes; /* room for compact copies of every input and output
			    * (each 64-byte aligned), for strided tensors */
	tc_vec copy_free;  /* such rooms ready for reuse (void *) */
} tc_rt_compiled;

/* Where a kernel's options came from (tc_kernel_options_source). */
typedef enum tc_rt_source {
	TC_RT_SRC_DEFAULT,    /* no options given, none in the kernel cache */
	TC_RT_SRC_USER,       /* given to tc_compile */
	TC_RT_SRC_CACHE,      /* the cache's best for exactly these shapes */
	TC_RT_SRC_CACHE_NEAR, /* the cache's best for the nearest other shapes */
	TC_RT_SRC_CACHE_OTHER_CPU, /* the best of another CPU of the same
				   * architecture (another feature string) */
} tc_rt_source;

/* A kernel cache lookup a module made (runtime/cache_api.c): its key
 * (entry and input shapes), the options found (NULL: the defaults) and
 * where they came from.  Owned by the module, freed with it. */
typedef struct tc_rt_lookup {
	char *memo;
	tc_options *options;
	tc_rt_source source;
} tc_rt_lookup;

/* A kernel: holds a reference to its module; c is owned by the module. */
struct tc_kernel {
	tc_module *m;
	tc_rt_compiled *c;
	tc_rt_source source;
	void *stream; /* the CUDA stream its runs launch on (tc_kernel_set_stream) */
};

/* Object code of a kernel as the kernel cache keeps it: the bytes of a
 * relocatable object file, the name of its kernel function, its run-time
 * check sites with locations relative to the def's start (line 0 is the
 * def's first line, columns on it relative to the def's column), and a hash
 * of the def's source text (the sites are valid for that text only).
 * Every pointer is owned. */
typedef struct tc_rt_object {
	void *code;
	size_t size;
	char *symbol;
	tc_cg_site *sites;
	int nsites;
	uint64_t def_hash;
} tc_rt_object;

#endif
