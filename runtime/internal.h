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
};

struct tc_module {
	tc_context *ctx;
	int refs;
	tc_arena *ar;
	tc_source *src;
	tc_program *prog;
	tc_ir_func **funcs; /* per def, lowered on demand */
	tc_vec compiled;    /* tc_rt_compiled *: the memo of tc_compile */
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
	const tc_ir_func *f;
	int64_t *params;
	tc_tensor *shapes; /* every tensor of f: dtype, ndim, shape (no data) */
	tc_rt_target target;
	tc_poly_opts popts; /* the schedule passes' settings */
	int threads;        /* for its parallel loops; 0: one per online CPU */
	tc_cg_code *code;  /* TC_RT_CPU */
	size_t ws_bytes;   /* workspace for the temporaries */
	size_t *ws_off;    /* offset of each temporary in it */
	tc_vec ws_free;    /* workspaces ready for reuse (void *) */
} tc_rt_compiled;

struct tc_kernel {
	tc_module *m;
	tc_rt_compiled *c;
};

void tc_rt_clear_error(tc_context *ctx);
void tc_rt_set_error_diags(tc_context *ctx, const tc_diags *d);
int tc_rt_find_def(tc_module *m, const char *entry);
const tc_ir_func *tc_rt_module_func(tc_module *m, int i);
/* A stage of the polyhedral pipeline of def i ("schedule", "ast", "c",
 * "llvm", "asm"), parametric (params NULL) or for concrete sizes, with the
 * passes' settings popts (NULL: defaults); NULL with an error. */
char *tc_rt_emit_poly(tc_module *m, int i, const int64_t *params, const tc_poly_opts *popts,
	const char *stage);
void tc_rt_compiled_free(tc_rt_compiled *c);

#endif
