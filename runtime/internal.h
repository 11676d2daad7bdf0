/* Internals shared by the files of runtime/: the API objects and helpers.
 *
 * Lifetimes: a context outlives its modules and kernels (the caller frees
 * it last).  A module is reference counted: the caller's reference plus one
 * per live kernel.  A module owns the compiled objects of its kernels (the
 * memo of tc_compile), freed with it.  ctx->lock guards the reference
 * counts, the memo, the JIT and the workspace pools. */
#ifndef TC_RT_INTERNAL_H
#define TC_RT_INTERNAL_H

#include "tcomp.h"

#include "../codegen/llvm.h"
#include "../ir/ir.h"
#include "../lang/ast.h"

#include <pthread.h>

struct tc_context {
	char *warnings;
	uint64_t serial;      /* unique among the contexts of the process */
	pthread_mutex_t lock; /* recursive */
	tc_cg_jit *jit; /* created on the first CPU compile */
	int threads;    /* for kernels with threads=auto; 0: one per online CPU */
	char *cache_path; /* tc_context_set_cache: NULL default location */
	int cache_off;    /* tc_context_set_cache(ctx, "") */
};

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

/* Where a kernel runs. */
typedef enum tc_rt_target {
	TC_RT_CPU,    /* compiled through isl and LLVM */
	TC_RT_INTERP, /* the reference interpreter */
} tc_rt_target;

/* A def compiled for input shapes and options: shared by every tc_kernel
 * made with the same (entry, shapes, options) from one module. */
typedef struct tc_rt_compiled {
	char *key;
	const tc_ir_func *f;  /* the module's function (the interpreter runs it) */
	const tc_ir_func *cf; /* what the CPU code and the emitted stages come
			       * from: f, or f with packed operands (in ar) */
	tc_arena *ar;
	int64_t *params;
	tc_tensor *shapes; /* every tensor of cf: dtype, ndim, shape (no data) */
	tc_rt_target target;
	char *options;      /* the options it was compiled with (tc_options_print) */
	tc_poly_opts popts; /* the schedule passes' settings */
	int threads;        /* for its parallel loops; 0: one per online CPU */
	tc_cg_code *code;  /* TC_RT_CPU */
	int from_object;   /* code loaded from the kernel cache's object code */
	size_t ws_bytes;   /* workspace for the temporaries */
	size_t ws_touch;   /* the part of it a new workspace has touched */
	size_t *ws_off;    /* offset of each temporary in it */
	tc_vec ws_free;    /* workspaces ready for reuse (void *) */
} tc_rt_compiled;

/* Where a kernel's options came from (tc_kernel_options_source). */
typedef enum tc_rt_source {
	TC_RT_SRC_DEFAULT,    /* no options given, none in the kernel cache */
	TC_RT_SRC_USER,       /* given to tc_compile */
	TC_RT_SRC_CACHE,      /* the cache's best for exactly these shapes */
	TC_RT_SRC_CACHE_NEAR, /* the cache's best for the nearest other shapes */
} tc_rt_source;

struct tc_kernel {
	tc_module *m;
	tc_rt_compiled *c;
	tc_rt_source source;
};

void tc_rt_clear_error(tc_context *ctx);
void tc_rt_set_error_diags(tc_context *ctx, const tc_diags *d);
int tc_rt_find_def(tc_module *m, const char *entry);
const tc_ir_func *tc_rt_module_func(tc_module *m, int i);
/* A stage of the polyhedral pipeline of function f ("schedule", "ast",
 * "c", "llvm", "asm"), parametric (params NULL) or for concrete sizes, with
 * the passes' settings popts (NULL: defaults); NULL with an error. */
char *tc_rt_emit_poly(tc_module *m, const tc_ir_func *f, const int64_t *params,
	const tc_poly_opts *popts, const char *stage);
void tc_rt_compiled_free(tc_rt_compiled *c);

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
void tc_rt_object_clear(__tc_keep tc_rt_object *o);
/* Compile entry of m for inputs with options to object code into o, whose
 * symbol the caller sets (the name of the kernel function).  0 ok; -1 with
 * an error in m's context (also for target=interp: no object code). */
int tc_rt_compile_object(__tc_keep tc_module *m, const char *entry, const DLTensor *const *inputs,
	int n_inputs, __tc_keep const tc_options *options, __tc_keep tc_rt_object *o);

/* The options tc_compile uses for entry at these inputs when it is given
 * none (runtime/cache_api.c): the kernel cache's best for exactly these
 * shapes, else for the nearest shapes, else NULL (the defaults), with
 * *source saying which; on an exact hit, also the entry's stored object
 * code for those options into *obj when there is one that is intact and
 * made by this tcomp and LLVM (else obj is left empty).  Problems with the cache file become warnings of
 * the context, never errors.  Called with ctx->lock held; the result is the
 * caller's. */
__tc_give tc_options *tc_rt_cache_options(__tc_keep tc_module *m, const char *entry,
	const DLTensor *const *inputs, int n_inputs, const char *memo, tc_rt_source *source,
	__tc_keep struct tc_rt_object *obj);
/* Free the module's lookup memo (tc_module_free). */
void tc_rt_cache_lookups_free(__tc_keep tc_module *m);

#endif
