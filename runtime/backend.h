/* Backends: what compiles a def's schedule into code and runs it.  One
 * table (runtime/backend.c), read by the pipeline (runtime/pipeline.c), the
 * kernels (runtime/kernel.c) and the kernel cache's layers; runtime/
 * dispatches on the table alone, so a new backend (CUDA) is one more entry
 * here and one more pass list in polyhedral/.
 *
 * Entries today:
 *   cpu     LLVM for the host CPU: code JIT-compiled, object code for the
 *           kernel cache, parallel loops on tcomp's thread pool
 *           (runtime/backend_cpu.c, the only runtime file that includes
 *           codegen/llvm.h);
 *   interp  the reference interpreter, bounds-checked, which runs the IR;
 *           its kernels show the cpu backend's stages
 *           (runtime/backend_interp.c);
 *   cuda    NVIDIA GPUs: the GPU pass list, CUDA C through NVRTC, the
 *           driver opened with dlopen (runtime/backend_cuda.c);
 *   cuda-emu the cuda backend's code run on the CPU by the emulator
 *           (codegen/cuda_emu.h), which reports out-of-bounds accesses
 *           and races: for checking without a GPU (backend_cuda.c).
 *
 * Functions an entry lacks are NULL; the comments say what that means.
 *
 * Ownership: the table and its entries are static.  A backend's state is
 * owned by the context it was made for (state_new, freed by state_free
 * with the context); compiled code by the tc_rt_compiled holding it
 * (code_free); texts and key strings returned are the caller's. */
#ifndef TC_RT_BACKEND_H
#define TC_RT_BACKEND_H

#include "internal.h"

#include "../polyhedral/passes.h"

typedef struct tc_rt_backend tc_rt_backend;

/* How a run is launched (tc_kernel_set_stream, tc_kernel_run_timed): the
 * caller's CUDA stream (a CUstream; NULL: the legacy default stream) and,
 * when timed is set, the device time of the run's launches in ms, which a
 * backend that measures it (cuda: events recorded on the stream around
 * them) stores, setting measured; the caller times the others with the
 * host's clock. */
typedef struct tc_rt_launch {
	void *stream;
	int timed;
	int measured;
	double ms;
} tc_rt_launch;

/* An entry of the table: a backend's name, device, passes and functions. */
struct tc_rt_backend {
	const char *name;    /* the value of the target option that selects it */
	DLDeviceType device; /* where its kernels' tensors live */
	/* Whose IR rewrites, schedule passes and text stages its kernels use:
	 * the entry itself, or (the interpreter, which has none) another. */
	const tc_rt_backend *pipeline;
	/* The schedule passes in order (polyhedral/passes.h), *npasses of
	 * them; NULL when it schedules nothing. */
	const tc_poly_pass_def *passes;
	const int *npasses;
	/* Fill t with the machine it compiles for under the options o (the
	 * cpu option; NULL: the defaults); t->threads is the caller's. */
	void (*describe)(__tc_keep tc_target *t, __tc_keep const tc_rt_opts *o);

	/* Per-context state (the JIT), made on first use by state_new (NULL
	 * with a message in d) and freed with the context; NULL: none. */
	__tc_give void *(*state_new)(__tc_keep tc_diags *d);
	void (*state_free)(__tc_take void *state);

	/* Compile the scheduled model p (concrete sizes, with its AST) into
	 * c->code; -1 with a message in d.  NULL: the backend runs c->f as it
	 * is (nothing is compiled, and nothing is scheduled). */
	tc_stat (*compile)(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
		__tc_keep const tc_poly *p, __tc_keep tc_diags *d);
	/* Object code of p for the kernel cache into o (o->symbol set by the
	 * caller: the kernel function's name); -1 with a message in d.  NULL:
	 * the backend makes no object code. */
	tc_stat (*object)(__tc_keep tc_rt_compiled *c, __tc_keep const tc_poly *p,
		__tc_keep tc_rt_object *o, __tc_keep tc_diags *d);
	/* Load object code o (made by object, in this or another process) into
	 * c->code, its sites (taken, even on failure) located in c's module;
	 * -1 with a message in d when it does not load (the caller compiles). */
	tc_stat (*load)(__tc_keep void *state, __tc_keep tc_rt_compiled *c,
		__tc_keep const tc_rt_object *o, __tc_take tc_cg_site *sites, __tc_keep tc_diags *d);
	void (*code_free)(__tc_take void *code);

	/* Run c on tensors t (inputs, then outputs, converted and checked by
	 * the caller) as launch says (NULL: the defaults; backends without a
	 * device ignore it); 0, or -1 with an error in m's context (a failed
	 * run-time check among them: tc_rt_report_check). */
	tc_stat (*run)(__tc_keep tc_module *m, __tc_keep tc_rt_compiled *c,
		__tc_keep const tc_tensor *t, __tc_keep tc_rt_launch *launch);

	/* Text stages of its own (NULL-terminated; NULL: none) and their
	 * text for the scheduled model p with its AST (NULL with a message in
	 * d). */
	const char *const *stages;
	__tc_give char *(*emit)(__tc_keep const tc_poly *p, __tc_keep const tc_rt_opts *o,
		const char *stage, __tc_keep tc_diags *d);
	/* The text of stage that compiled code (c->code) holds, exactly what
	 * was compiled, owned by the caller; NULL when it holds none (loaded
	 * from the cache, another stage, out of memory: the caller runs the
	 * pipeline again).  NULL: the code holds no text. */
	__tc_give char *(*code_text)(__tc_keep const void *code, const char *stage);

	/* The kernel cache's key part for the machine ("triple;cpu;features"),
	 * owned by the caller, NULL when unknown; the version of its object
	 * code ("19.1.7"), into buf[n]. */
	__tc_give char *(*key_target)(void);
	void (*object_version)(__tc_keep char *buf, size_t n);
};

/* The number of entries, and entry i (static; NULL outside 0..count-1). */
int tc_rt_backend_count(void);
const tc_rt_backend *tc_rt_backend_at(int i);
/* The entry named name (static), or NULL. */
const tc_rt_backend *tc_rt_backend_find(const char *name);
/* The number of entry b in the table (its slot in tc_context.backend_state). */
int tc_rt_backend_index(__tc_keep const tc_rt_backend *b);
/* The backend the target option of o (NULL: the defaults) names (static). */
const tc_rt_backend *tc_rt_backend_of(__tc_keep const tc_options *o);
/* The backend that keys the kernel cache's entries for tensors of device
 * type dev (the first in the table with a key_target), or NULL. */
const tc_rt_backend *tc_rt_backend_for_device(DLDeviceType dev);
/* Whether some backend runs kernels on tensors of device type dev. */
int tc_rt_backend_serves(DLDeviceType dev);
/* The state of b in ctx, made on first use (NULL with a message in d);
 * owned by ctx, freed with it.  Called with ctx->lock held. */
void *tc_rt_backend_state(__tc_keep tc_context *ctx, __tc_keep const tc_rt_backend *b,
	__tc_keep tc_diags *d);
/* Free every backend state of ctx (tc_context_free). */
void tc_rt_backend_states_free(__tc_keep tc_context *ctx);
/* Whether b emits stage itself (among b->stages). */
int tc_rt_backend_has_stage(__tc_keep const tc_rt_backend *b, const char *stage);

/* The table's entries (runtime/backend_cpu.c, runtime/backend_interp.c,
 * runtime/backend_cuda.c). */
extern const tc_rt_backend tc_rt_backend_cpu;
extern const tc_rt_backend tc_rt_backend_interp;
extern const tc_rt_backend tc_rt_backend_cuda;
extern const tc_rt_backend tc_rt_backend_cuda_emu;

#endif
