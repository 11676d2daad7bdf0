/* tcomp: a tensor-expression compiler.  The public C API.
 *
 *   tc_context *ctx = tc_context_new();
 *   tc_module  *m   = tc_module_load(ctx, "kernels.tc");   // NULL: see tc_context_error
 *   tc_kernel  *k   = tc_compile(m, "matmul", inputs, 2, NULL);
 *   tc_kernel_output_shape(k, 0, &dtype, &ndim, shape);     // allocate the output
 *   tc_kernel_run(k, inputs, 2, outputs, 1);
 *
 * Tensors are DLPack DLTensors on the CPU with any strides (NULL: compact
 * row-major).  Kernels are compiled for compact tensors; tc_kernel_run
 * copies a strided input (a transposed or sliced view, a broadcast with
 * stride 0, negative strides) into a compact buffer, and computes a strided
 * output into one and copies it back through its strides.  Extents may be 0:
 * an output with a zero extent is empty, a reduction over an empty range
 * gives the operator's identity; data may be NULL for a tensor without
 * elements.
 *
 * Errors: functions return NULL or -1 and record a message in the context,
 * read with tc_context_error().  Messages about .tc text carry
 * "file:line:col: error: ...", the source line and a caret.  The library never
 * exits or aborts on bad input.
 *
 * Threads: tc_kernel_run may be called from several threads at once, on the
 * same kernel or on different ones.  tc_compile, tc_kernel_free and
 * tc_module_free may be called from any thread (the context serialises
 * them).  Parsing a module and reading its warnings are for one thread at a
 * time per context (tc_compile may add a warning about the kernel cache).
 * Errors are kept per thread (tc_context_error).  A
 * context must outlive its modules and kernels; a kernel keeps its module
 * alive.  Compiled kernels are memoised per (module, entry, input dtypes
 * and shapes, options): compiling the same again is cheap.
 *
 * Ownership: objects returned by *_new, *_parse, *_load and tc_compile
 * belong to the caller and are freed with the matching *_free; strings
 * returned as char * are freed with tc_string_free; const char * results
 * are borrowed and valid until the next call on the same object.
 *
 * NULL pointers: every function accepts NULL for each of its pointer
 * parameters without crashing; the comment of each function says what it
 * does then ("NULL:" notes).  In short: *_free(NULL) and tc_string_free(NULL)
 * do nothing; a NULL object (context, module, kernel, options to change)
 * gives the failure value (NULL, -1) without a message, since there is no
 * context to hold one; a NULL name, text, entry, stage or input/output
 * array (or a NULL element of one) gives the failure value with a message
 * in the context; out-parameters documented as optional may be NULL.
 * tests/test_null.c calls every function so under ASan and UBSan. */
#ifndef TCOMP_H
#define TCOMP_H

#include <dlpack/dlpack.h>
#include <signal.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbol export: the shared library (libtcomp.so) is built with
 * -fvisibility=hidden and exports exactly the functions declared in this
 * header: everything between this push and the pop at the end has default
 * visibility, so a function added here is exported without further marking. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(default)
#define TC_VISIBILITY_PUSHED_
#endif

/* The version of tcomp: the library, the tcomp command and the kernel
 * cache's keys (entries tuned by another version are not used).  The one
 * place it is written: CMakeLists.txt reads it from here. */
#define TCOMP_VERSION "0.4.0"

/* DLPack 0.6 has no bool code; tcomp uses the code later DLPack versions
 * define (kDLBool = 6) with 8 bits per element. */
#define TC_DL_BOOL 6

/* Element types by name: "float32", "float" (= float32), "int8", "bool",
 * "bfloat16" (DLPack's kDLBfloat with 16 bits, as PyTorch and JAX use), ...
 * tc_dtype_parse returns -1 for an unknown name (NULL: name or out NULL);
 * tc_dtype_str returns NULL for a DLPack type tcomp does not support. */
int tc_dtype_parse(const char *name, DLDataType *out);
const char *tc_dtype_str(DLDataType dtype);

typedef struct tc_context tc_context;
typedef struct tc_module tc_module;
typedef struct tc_kernel tc_kernel;
typedef struct tc_options tc_options;

/* ---- contexts ---- */
/* A new context; NULL when out of memory.  tc_context_free(NULL) does
 * nothing. */
tc_context *tc_context_new(void);
void tc_context_free(tc_context *ctx);
/* The calling thread's last error about ctx (rendered diagnostics), or ""
 * when its last call on ctx succeeded ("error: out of memory" when the
 * message itself could not be made).  Valid until that thread's next call
 * on ctx.  Errors are per thread, so threads running kernels at once each
 * see their own.  NULL ctx: "error: no context (NULL)\n". */
const char *tc_context_error(const tc_context *ctx);
/* What kind of error tc_context_error holds, for callers that act on it
 * (the tcomp command's exit status) without reading the message. */
typedef enum tc_error_kind {
	TC_ERROR_NONE,     /* the calling thread's last call on ctx succeeded */
	TC_ERROR_USER,     /* bad input: .tc text, entry, shapes, options, files,
	                      arguments (also a NULL ctx) */
	TC_ERROR_NOMEM,    /* an allocation failed */
	TC_ERROR_INTERNAL, /* a bug in tcomp: a broken invariant, a failed
	                      isl or LLVM step that should not fail */
} tc_error_kind;
tc_error_kind tc_context_error_kind(const tc_context *ctx);
/* Warnings of the last tc_module_parse/load (rendered), and those of the
 * kernel cache from tc_compile since (see "kernel cache"), or "" (also for
 * a NULL ctx). */
const char *tc_context_warnings(const tc_context *ctx);
/* How many threads run the parallel loops of ctx's kernels whose "threads"
 * option is auto: 1 to 256, or 0 for one per CPU this process may run on
 * (its affinity mask, as taskset or mpirun --bind-to set it; the default).  A
 * kernel's own threads=N wins.  Takes effect on the next tc_kernel_run; -1
 * with an error for a count out of range, -1 for a NULL ctx.
 * tc_context_threads: the setting, -1 for a NULL ctx. */
int tc_context_set_threads(tc_context *ctx, int threads);
int tc_context_threads(const tc_context *ctx);

/* ---- modules: parsed and checked .tc text ---- */
/* Parse and check source; NULL if any def has an error (all errors are
 * reported, several per def).  filename is used in messages (NULL:
 * "<string>").  NULL ctx: NULL; NULL source or path: NULL with an error. */
tc_module *tc_module_parse(tc_context *ctx, const char *source, const char *filename);
tc_module *tc_module_load(tc_context *ctx, const char *path);
/* NULL: nothing. */
void tc_module_free(tc_module *m);
/* The number of defs (0 for a NULL m) and the name of def i (NULL when i
 * is out of range or m is NULL). */
int tc_module_num_defs(const tc_module *m);
const char *tc_module_def_name(const tc_module *m, int i);
/* Number of inputs and outputs of entry (-1 if absent), and the name of
 * tensor i (inputs first, then outputs).  n_inputs and n_outputs may be
 * NULL (not wanted).  For these and the functions below taking an entry:
 * a NULL m gives -1 or NULL; a NULL or unknown entry the same with an
 * error naming the module's defs. */
int tc_module_def_arity(tc_module *m, const char *entry, int *n_inputs, int *n_outputs);
/* Declared dtype and rank of input i of entry (-1 if absent); dtype and
 * ndim may be NULL. */
int tc_module_input_type(tc_module *m, const char *entry, int i, DLDataType *dtype, int *ndim);
const char *tc_module_tensor_name(tc_module *m, const char *entry, int i);
/* Whether every run of entry writes all of output i before anything reads
 * it, so that the output's previous contents never matter: 1 if so (its
 * buffer may be left uninitialised), 0 if a run may read them or leave
 * some elements as they were (a first '+=' without '!', a first write over
 * part of a dimension, a scatter, an 'exists' clause, a read of the output
 * before its first write; conservative: 0 where this cannot be shown from
 * the text alone), -1 with an error for an i out of range. */
int tc_module_output_overwritten(tc_module *m, const char *entry, int i);
/* "def mm(float32(M,K) A, float32(K,N) B) -> (float32(M,N) C)" with the
 * inferred output types and shapes; NULL if entry is absent. */
char *tc_module_signature(tc_module *m, const char *entry);
/* Text of a compilation stage of entry, for any sizes: "syntax" (the
 * checked syntax tree), "ir" (tensor IR), "canonical" (renamed text),
 * "schedule" (isl schedule tree), "schedule:PASS" (the tree after the
 * schedule pass named PASS: scheduler, fuse-nests, pack, merge, order,
 * interchange, tile, regtile, parallel, check, hoist, mark, rowbuf),
 * "schedule:all" (the tree after every pass in turn, each under a line
 * "# after PASS"), "ast" (isl AST: the loop nest), "c" (readable C).
 * "llvm" and "asm" need shapes: tc_kernel_emit.  NULL with an error for an
 * unknown (or NULL) entry, stage or pass; NULL for a NULL m. */
char *tc_module_emit(tc_module *m, const char *entry, const char *stage);
/* Stable hash of the canonical (identifier-renamed) text of entry, as 16 hex
 * digits, written into out[17]; -1 if entry is absent (or NULL), or m or
 * out is NULL. */
int tc_module_hash(tc_module *m, const char *entry, char out[17]);

/* The backward def of entry as .tc text (automatic differentiation, see
 * README "Gradients" and docs/language.md "Gradients"): a def named
 * "<entry>_grad" whose inputs are entry's inputs, then the outputs (and,
 * with TC_GRAD_SAVES, the temporaries) whose values it reads, then d_<O>
 * for each output O, and whose outputs are d_<X> for the inputs X named in
 * wrt (a comma-separated list such as "A,B"; NULL or "": every
 * floating-point input).  flags 0: the temporaries it reads are recomputed
 * inside it; TC_GRAD_SAVES: they are inputs, and the text starts with the
 * def "<entry>_fwd", entry returning them after its outputs (when it reads
 * any).  The text parses, checks and compiles with tc_module_parse: it is
 * checked before it is returned, and a derived text that would not check
 * (a bug of tcomp's) is an internal error (TC_ERROR_INTERNAL) located in
 * it ("<derived from ENTRY>:LINE:COL"), never text handed back.
 * NULL with an error for an unknown entry, a name in wrt that is not a
 * floating-point input, or a construct that cannot be differentiated yet
 * (located in the source like other diagnostics); NULL for a NULL m.  Free
 * the text with tc_string_free. */
#define TC_GRAD_SAVES 1
char *tc_module_grad(tc_module *m, const char *entry, const char *wrt, int flags);
/* Per-sample gradients (what functorch's vmap(grad) computes; README
 * "Gradients", docs/language.md "Per-sample gradients"): the text of
 * tc_module_grad with the same entry, wrt and flags (0 or TC_GRAD_SAVES),
 * except that the gradient of every input X without a dimension of extent
 * batch (the parameters) keeps the batch index instead of summing over it:
 * d_X gets the size batch prepended to its shape, and d_X(b, ...) is the
 * gradient of sample b's part of L = sum over O of sum(d_O * O).  A
 * gradient of an input with such a dimension keeps its shape (its row b is
 * sample b's).  batch names a size of entry ("B"); an index ranging over
 * 0:batch is the batch index of its statement.  The def is still named
 * "<entry>_grad" (per sample by its outputs' shapes).  NULL with an error
 * as tc_module_grad, and also for a NULL batch, a batch that is not a size
 * of entry, a def that mixes samples (a statement that reduces over the
 * batch index, such as a batch norm's mean, or reads a batched tensor at
 * another subscript than the batch index; a floating-point output without
 * a batch dimension), or a gradient asked for that does not depend on the
 * batch (each located in the source); NULL for a NULL m.  Free the text
 * with tc_string_free. */
char *tc_module_grad_per_sample(tc_module *m, const char *entry, const char *wrt,
	const char *batch, int flags);

/* entry batched over a leading "model" dimension, as .tc text (what
 * jax.vmap and torch.func.vmap do with in_dims 0 for some arguments and
 * None for the others: K models of one def in one set of kernels;
 * docs/language.md "Batching over models").  batched is a
 * comma-separated list of entry's inputs ("W1,B1"); size the name of the
 * new size ("E"), which entry must not use.  Each input in batched gets
 * size as its first dimension, and so does every tensor that a statement
 * writes from a batched tensor (a temporary or an output, the whole
 * tensor: one written from shared values and later from batched ones is
 * batched throughout); the others (the shared inputs and what is computed
 * from them alone) keep their shapes.  Each statement writing a batched
 * tensor gets a new first left-hand index, the model index (e, or e1, ...
 * where entry uses e), read first by every batched tensor in it.  Outputs
 * declared with a shape get size prepended when batched; a batched scalar
 * becomes rank 1.  Element [k] of a batched output is what entry computes
 * on element [k] of the batched inputs and the shared inputs.  The def
 * keeps entry's name: to keep it beside entry in one module, rename one of
 * them in the text.  The text parses, checks and compiles with
 * tc_module_parse (checked before it is returned, as tc_module_grad's).
 * NULL with an error for an unknown (or NULL) entry, a
 * NULL or empty batched, an empty name in it, a name in it that is not an
 * input or is named twice, a NULL size, a size that is not an identifier
 * or is a keyword, type or builtin name or a name entry uses, or a tensor
 * that would get more than 8 dimensions (located in the source like other
 * diagnostics); NULL for a NULL m.  Free the text with tc_string_free. */
char *tc_module_vmap(tc_module *m, const char *entry, const char *batched, const char *size);

/* ---- options ---- */
/* Mapping options are name=value pairs defined by one declarative table
 * (name, type, range, default, doc); tc_options_describe prints it, and
 * `tcomp options` shows it.  A tc_options starts with every option at its
 * default.  Options in this release:
 *   target   cpu|interp   where kernels run: compiled for the host CPU
 *                         (default) or in the bounds-checked reference
 *                         interpreter
 *   order    on|off       move the loop walking the stride-1 dimension
 *                         innermost in each permutable band (default on)
 *   contract on|off       a float32/float64 sum or difference with a product
 *                         operand, and each step of a sum reduction of
 *                         products, is one fused multiply-add (default on;
 *                         the rule is docs/language.md's, the same in every
 *                         schedule and in the interpreter; off: every
 *                         operation rounds)
 *   fastmath off|on       contract, plus reordered float arithmetic
 *                         everywhere, min/max that assume no NaN operands
 *                         and division by a reciprocal (default off);
 *                         never chosen by the autotuner
 *   vecreduce on|off      float sums, products, max and min reductions
 *                         outside register tiles may run as vector partial
 *                         results (default on: sums and products then round
 *                         in another order than the interpreter's, as the
 *                         language allows; max and min are exact); off keeps
 *                         the interpreter's order bit for bit
 *   share    on|off|row   compute once an expression with a builtin call
 *                         that a statement writing its whole output shares
 *                         with an earlier one (softmax's exp), storing it in
 *                         that output (default on; results unchanged); row:
 *                         in a temporary kept as one row per thread on the
 *                         stack when the rows' loops are fused, so that the
 *                         output is written once and can be streamed
 *   inline   on|off       compute a temporary defined by a cheap pointwise
 *                         statement again where it is read instead of
 *                         storing it (layer norm's centred input; default
 *                         on; results unchanged)
 *   stream   auto|off     non-temporal stores for outputs of 4 MiB or more
 *                         written once per element, when 64-byte aligned at
 *                         run time (default auto)
 *   parallel auto|on|off  run the outermost parallel loop of each loop
 *                         nest on tcomp's thread pool (default auto: only
 *                         nests of at least 32768 statement instances)
 *   threads  auto|N       threads for those loops (default auto: the
 *                         context's setting, tc_context_set_threads, which
 *                         defaults to one per CPU the process may run on)
 *   fusion   auto|max|preserve3coincident|min
 *                         how statements fuse into loop nests (default max)
 *   tile     auto|none|N,N,...
 *                         cache tile sizes for the outermost permutable
 *                         band, outermost member first (default auto:
 *                         BLIS-style blocks for contractions, none for
 *                         other kernels)
 *   regtile  auto|none|N,N,...
 *                         register tile sizes for the parallel members of a
 *                         contraction's innermost band, innermost last
 *                         (default auto: up to 4 vector registers per
 *                         row, 24 accumulators: 6 x 4, 8 x 3, 12 x 2)
 *   unroll   on|off       unroll the register tile's rows (default on)
 *   vector   auto|1|2|4|8|16|32|64
 *                         lanes of the vectors of each innermost loop
 *                         (default auto: LLVM's loop vectoriser chooses;
 *                         1: no vector instructions at all; N: that many
 *                         lanes, at most the length of a loop of constant
 *                         length; a loop that carries a float reduction
 *                         that must keep its order (float16 and
 *                         bfloat16 sums' float32 accumulators, register
 *                         tiles, vecreduce=off; not under fastmath) is left
 *                         to LLVM, since a given width would let LLVM
 *                         reorder the sum); automatic register tiles count
 *                         vectors of that many lanes
 *   unroll_inner auto|1|2|4|8
 *                         vector iterations per trip of each innermost loop,
 *                         LLVM's interleave count (default auto: 2
 *                         outside register tiles, LLVM's choice inside;
 *                         at most the vectors a loop of constant
 *                         length holds; with vector=1 the unroll count);
 *                         automatic register tiles get that many vectors
 *                         per row
 *   pack     on|off       copy an input that a contraction reads with the
 *                         reduction as its stride-1 dimension (B in
 *                         A(m,r_k) * B(n,r_k)) into a temporary in which
 *                         the output's stride-1 dimension is stride-1, so
 *                         the register tile applies (default on)
 *   interchange auto|N,N,...
 *                         the order of the members of the band tile tiles
 *                         (the outermost permutable band of the first loop
 *                         nest, packing copies aside), after the order
 *                         pass: entry k names the member that goes to
 *                         position k (2,0,1: the third member outermost),
 *                         so it orders the cache-tile loops and the loops
 *                         within tiles, and tile's sizes follow the new
 *                         order; N entries must be 0..N-1, each once; a
 *                         shorter list than the band permutes its first
 *                         members only; a longer one, or an order that
 *                         would break a dependence (conv2d's reduction
 *                         members), leaves the band as it is (default
 *                         auto: the order pass's order)
 * `tcomp options` prints the full table with each option's documentation.
 * Values are words from the option's list, integers inside its range, or
 * comma-separated lists of such integers, depending on the option; they are
 * kept in a canonical form (integers without leading zeros), which
 * tc_options_get and tc_options_print return. */
/* New options at their defaults (NULL when out of memory); free with
 * tc_options_free (NULL: nothing). */
tc_options *tc_options_new(void);
void tc_options_free(tc_options *o);
/* A new tc_options with the same settings as o (o NULL: the defaults);
 * NULL when out of memory. */
tc_options *tc_options_copy(const tc_options *o);
/* -1 (with a message in ctx, which may be NULL) for an unknown name or a
 * value out of range; the message names the option and what it allows.
 * -1 for a NULL o, name or value (a message in ctx for the latter two). */
int tc_options_set(tc_options *o, const char *name, const char *value, tc_context *ctx);
/* The value of an option (its default unless set; o may be NULL for the
 * defaults); NULL for an unknown (or NULL) name.  Borrowed from o. */
const char *tc_options_get(const tc_options *o, const char *name);
/* The device type the tensors of kernels compiled with o live on: that of
 * the backend its target option names (kDLCUDA for cuda; kDLCPU for cpu,
 * interp and cuda-emu, which runs CUDA code on the CPU).  o may be NULL
 * for the defaults. */
DLDeviceType tc_options_device(const tc_options *o);
/* Set options from text: name=value pairs separated by newlines, ';' or
 * blanks, with '#' starting a comment that runs to the end of the line;
 * blanks around '=' are allowed, and a later pair overrides an earlier one.
 * Every pair is checked as tc_options_set checks it.  0 ok; -1 with a
 * message in ctx (which may be NULL) that starts with "line N: " (N counted
 * from 1) and names the option for an unknown name, a bad value or a pair
 * without '='; o is then left unchanged; -1 for a NULL o or text.  Example:
 *   # options for matmul
 *   target=cpu */
int tc_options_parse(tc_options *o, const char *text, tc_context *ctx);
/* Every option in table order as "name=value\n", defaults included, so that
 * tc_options_parse of the text gives the same options (o NULL: the
 * defaults).  NULL when out of memory; free with tc_string_free. */
char *tc_options_print(const tc_options *o);
/* The option table: one line per option with name, values, default, doc. */
char *tc_options_describe(void);

/* ---- kernels: a def specialised to input shapes ---- */
/* Bind entry to the shapes and dtypes of inputs (data and strides are not
 * read: the kernel serves every layout).  options may be NULL (defaults).
 * Refused: sizes the def's conditions reject, a tensor whose bytes exceed
 * 2^63 - 1, a statement that runs but reads a tensor without elements.
 * NULL m: NULL; a NULL entry, a NULL inputs array (with n_inputs > 0) or a
 * NULL element of it: NULL with an error. */
tc_kernel *tc_compile(tc_module *m, const char *entry, const DLTensor *const *inputs,
	int n_inputs, const tc_options *options);
/* -1 for a NULL k. */
int tc_kernel_num_outputs(const tc_kernel *k);
/* dtype, rank and shape of output i (shape needs room for the rank; at most
 * 8); each of the three may be NULL (not wanted).  -1 for a NULL k or an i
 * out of range. */
int tc_kernel_output_shape(const tc_kernel *k, int i, DLDataType *dtype, int *ndim,
	int64_t *shape);
/* Run on inputs of exactly the compiled shapes; outputs must have the shapes
 * tc_kernel_output_shape gives.  Reductions without '!' accumulate into the
 * outputs' previous contents.  Strided tensors are copied (see the top of
 * this file); an output that may overlap itself (a stride of 0, interleaved
 * strides) or whose bytes, first to last element, overlap another tensor's
 * is refused.  0 ok, -1 error (a NULL k; with a message: a NULL inputs or
 * outputs array or element, nothing written then; a strided output is left
 * as it was on any error). */
int tc_kernel_run(tc_kernel *k, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs);
/* tc_kernel_run, and the time of the run in *ms: for target=cuda the
 * device time between CUDA events recorded on the kernel's stream before
 * its first launch and after its last (cuEventElapsedTime), otherwise the
 * host's monotonic clock around the whole call (target=cuda-emu: the
 * emulator on the CPU, not a GPU's time).  *ms is 0 on an error. */
int tc_kernel_run_timed(tc_kernel *k, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs, double *ms);
/* The CUDA stream (a CUstream of the current driver context, cast to void
 * *) that runs of k launch on; NULL (the default) is the legacy default
 * stream.  A target=cuda run launches its kernels in order on the stream
 * and then waits for that stream (cuStreamSynchronize): tc_kernel_run
 * returns with the outputs written, and a launch failure or a fault in a
 * kernel is that run's error, not a later one's.  Work the caller queued
 * on the stream before runs first.  A non-NULL stream for a kernel of a
 * CPU target (cpu, interp, cuda-emu) is an error (-1, message); NULL is
 * always fine.  Not for concurrent use with runs of the same handle. */
int tc_kernel_set_stream(tc_kernel *k, void *stream);
/* Text of a compilation stage of the kernel, specialised to its shapes:
 * the stages of tc_module_emit plus "llvm" (optimised LLVM IR) and "asm"
 * (host assembly).  The "cuda" stage of a target=cuda or cuda-emu kernel
 * compiled here is the text it was compiled from, kept with it (no
 * scheduling again), and so are a target=cuda kernel's "cuda-resources"
 * (ptxas's report of the very cubin) and "ptx" (NVRTC on the kept text);
 * other stages, and kernels loaded from the cache, run the compiler's
 * stages again.  NULL with an error for an unknown (or
 * NULL) stage; NULL for a NULL k. */
char *tc_kernel_emit(tc_kernel *k, const char *stage);
/* Work of one run of the kernel at its shapes, for rates such as GFLOP/s
 * and GB/s (tcomp bench).  Either pointer may be NULL.
 *   *flops: the sum over the statements of (points of the statement's
 *     domain) x (operations per point), where the operations of a point are
 *     the + - * / and builtin calls of the right-hand side, 1 each, outside
 *     subscripts (index arithmetic is not counted; of a ?: the condition and
 *     the costlier branch), plus 1 for the combine of a reduction or
 *     accumulation (+= *= min= max=, with or without '!').  Matmul M x K x N
 *     gives 2MNK.  -1 when the domains are too irregular to count quickly
 *     (bounds that depend on outer indices over more than 10^7 points).
 *   *bytes: the size in bytes of every input and output, each counted once:
 *     the least memory traffic of a run (temporaries are not counted).
 * 0 ok, -1 if k is NULL. */
int tc_kernel_stats(const tc_kernel *k, double *flops, double *bytes);
/* Whether k runs code compiled for other shapes: tc_compile gives a
 * kernel for new input shapes the parametric code of one it compiled
 * before in the same module (same def, options, input types and ranks)
 * when the shapes differ only in the sizes that only first dimensions
 * have (a batch), each of them >= 1: no schedule, no LLVM, microseconds
 * instead of a compile.  Option sizes: parametric makes parametric code
 * from the first shape on; auto, the default, from a def's second shape
 * on (its choices made at the largest sizes seen, serving no larger
 * ones); concrete never.  1 then, 0 for a kernel with code of its own
 * (compiled, or loaded from the kernel cache), -1 for a NULL k. */
int tc_kernel_reuses_code(const tc_kernel *k);
/* NULL: nothing. */
void tc_kernel_free(tc_kernel *k);
/* The options k was compiled with, as tc_options_print writes them (free
 * with tc_string_free); NULL if k is NULL or out of memory. */
char *tc_kernel_options(const tc_kernel *k);

/* ---- kernel cache ---- */
/* The kernel cache is one SQLite file of options measured by the autotuner
 * (`tcomp autotune`), keyed by the canonical (identifier-renamed) kernel
 * text, the entry, the input dtypes, shapes and strides, the host CPU (name
 * and features) and the tcomp version.  Its default location is
 * $TCOMP_CACHE, else $XDG_CACHE_HOME/tcomp/kernels.sqlite, else
 * ~/.cache/tcomp/kernels.sqlite; `tcomp cache` lists, shows, exports,
 * imports and prunes it.
 *
 * tc_compile with options NULL looks the kernel up: the best options
 * recorded for exactly these shapes (the autotuner's final choice when a
 * run with a final stage recorded one, else the fastest measured), else
 * the best for the nearest other
 * shapes of the same kernel, entry, input types and ranks, CPU and tcomp
 * version (distance: the sum over all input dimensions of |log(a/b)|),
 * else the best for the same kernel, entry, input types and tcomp version
 * tuned on another CPU of the same architecture (the same LLVM triple,
 * another CPU name or feature string: the options are portable, the
 * object code is not, so none is loaded; a note in tc_context_warnings
 * says so), else the defaults.  Options that change results rather than
 * speed (target, contract, fastmath: those the autotuner never searches)
 * are not taken from the cache: an entry's other values for them are reset to the defaults, with
 * a note in tc_context_warnings, unless tc_context_set_cache_result_options
 * allows them.  It only reads the cache (it never creates the file);
 * without a cache file the lookup costs one stat().  A module remembers its
 * lookups: compiling the same entry and shapes again gives the same options
 * while the module lives.  Options read from the cache are checked as
 * tc_options_parse checks user input.  A damaged, truncated, foreign or
 * newer-schema file, or a row with invalid options, is never an error: it
 * adds a warning to tc_context_warnings (once per message) and the defaults
 * are used.  Given options (non-NULL) never consult the cache.
 *
 * tc_context_set_cache sets the file ctx's compiles read: a path, NULL for
 * the default location (the initial setting), or "" to disable the cache.
 * 0 ok, -1 if ctx is NULL or out of memory.  Takes effect for kernels not
 * yet looked up by their module. */
int tc_context_set_cache(tc_context *ctx, const char *path);
/* allow non-zero: ctx's compiles take every option of a kernel cache entry
 * as it is, the result-changing ones too (target, contract, fastmath as
 * recorded); 0 (the initial setting): those keep their defaults.  0 ok, -1
 * if ctx is NULL.  Takes effect for kernels not yet looked up. */
int tc_context_set_cache_result_options(tc_context *ctx, int allow);
/* Where k's options came from: "user" (given to tc_compile), "cache" (the
 * cache's best for these shapes), "cache-near" (the best for the nearest
 * other shapes), "cache-other-cpu" (tuned on another CPU of the same
 * architecture) or "default"; NULL if k is NULL.  Static string. */
const char *tc_kernel_options_source(const tc_kernel *k);

/* ---- autotuner ----
 * tc_autotune searches the mapping options of one def at fixed input shapes
 * for the fastest correct kernel with a genetic search (see
 * autotune/README.md).  The searched options and their candidate values
 * come from the option table: order, parallel, fusion, unroll, unroll_inner,
 * vector and pack take their words; tile takes auto, none or one size per
 * loop of the deepest statement, each a power of two or three times one
 * (8, 16, 24, 32, 48, ...) up to the largest extent; regtile takes auto,
 * none or R rows by V vector registers (R 1..8, V 1..4); threads takes auto
 * or 1..the CPUs the process may run on; interchange takes auto (half of the random draws)
 * or an order of the first 2 or 3 members that keeps the innermost loop.
 * target, contract and fastmath (which change results) are never searched, and
 * neither is any option the base options set explicitly: those keep the
 * base value.  Every candidate is compiled and run in a forked child
 * process, several compiling at once but only one timing at a time; a
 * candidate that fails to compile, crashes, exceeds its time limit or
 * computes a result that differs from the first correct candidate's (on
 * the same random inputs, with a tolerance by dtype) is recorded as failed
 * and the search goes on.  A configuration is measured at most once per
 * run.  The final stage then re-times the best few distinct correct
 * configurations of the search and the base options together, round robin
 * in child processes, after a long warm-up and with the stack moved to
 * another offset each round (timings of some kernels depend on it); the
 * lowest median of the rounds wins, and the base options are returned
 * unless another configuration beats them by more than the noise margin
 * (see final_candidates).  Do not use the module's context from other
 * threads during a run (children are forked from the calling thread). */

/* A message transport between the ranks of a distributed tuning run
 * (README "Tuning at scale"): rank 0 runs the search and the final stage,
 * ranks 1..size-1 compile and time candidates (tc_tune_serve).  tcomp
 * autotune implements it over MPI; any reliable, ordered message channel
 * will do (the tests use socket pairs).  Messages are byte strings; the
 * ranks must share byte order and tcomp version (checked when a worker
 * says hello).  Called only from the thread that calls tc_autotune or
 * tc_tune_serve. */
typedef struct tc_tune_transport {
	int rank, size;
	/* Send len bytes to rank to: 0, or -1 when the message cannot go (the
	 * peer is known to be gone). */
	int (*send)(void *user, int to, const void *data, size_t len);
	/* Wait at most timeout_s seconds (0: only look) for the next message
	 * from any rank: 1 with *from, *data and *len (the data owned by the
	 * transport, valid until its next send or recv), 0 when none came, -1
	 * when the transport failed.  A transport that can tell that a rank is
	 * gone (a socket's end of file) says so once with a message of length
	 * 0 from it: rank 0 then gives that rank up at once rather than after
	 * its silence (MPI cannot tell). */
	int (*recv)(void *user, double timeout_s, int *from, const void **data, size_t *len);
	void *user;
	/* The library's, on rank 0: what it knows of the other ranks across
	 * tc_autotune calls (NULL at first; tc_tune_dismiss frees it). */
	void *state;
} tc_tune_transport;

/* Rank 0, at the end of a distributed run: tell every other rank that the
 * run is over (their tc_tune_serve returns) and free t->state; if
 * measured is not NULL, measured[r] = the search candidates rank r
 * measured (t->size entries; rank 0's: those measured in this process),
 * or after tc_autotune_batch the jobs rank r tuned.
 * Returns the number of ranks given up during the run (tc_autotune's
 * warnings say which and why); 0 for a NULL t. */
int tc_tune_dismiss(tc_tune_transport *t, int *measured);

/* What became of one candidate. */
typedef enum tc_tune_status {
	TC_TUNE_OK,            /* measured and correct */
	TC_TUNE_CUT,           /* correct, but far slower than the best: timed briefly */
	TC_TUNE_COMPILE_ERROR, /* tc_compile refused or failed (message) */
	TC_TUNE_RUN_ERROR,     /* tc_kernel_run returned an error (message) */
	TC_TUNE_CRASH,         /* the child process died (signal or exit) */
	TC_TUNE_TIMEOUT,       /* compile or timed runs exceeded their limit */
	TC_TUNE_WRONG,         /* result differs from the reference candidate's */
} tc_tune_status;

/* One measured candidate, passed to the record callback.  Everything is
 * borrowed for the duration of the call. */
typedef struct tc_tune_candidate {
	const char *options;  /* tc_options_print text of the candidate */
	tc_tune_status status;
	double median_s;      /* median of the timed runs (OK, CUT); else INFINITY */
	double min_s;         /* fastest timed run (OK, CUT); else INFINITY */
	int runs;             /* timed runs */
	double compile_s;     /* tc_compile time in the child (0 if unknown) */
	const char *message;  /* why it failed ("" when OK or CUT) */
	int generation;       /* 0-based (a final re-timing: the number of generations) */
	int index;            /* 0-based, in the order candidates were started (a
	                         final re-timing: the index it had in the search) */
	int final;            /* 1: a final-stage re-timing (median_s is the median
	                         of its rounds' medians, runs all its timed runs) */
	int chosen;           /* 1: the final stage's choice (final only) */
} tc_tune_candidate;

/* Where a run stands, passed to the progress callback after each candidate. */
typedef struct tc_tune_progress {
	int generation, generations; /* current (0-based) and planned */
	int done;                    /* candidates measured so far (failed included) */
	int planned;                 /* at most this many will be measured */
	int failed;
	double best_s;               /* best median so far (INFINITY: none yet) */
	double gen_median_s;         /* median of this generation's measured medians */
	double elapsed_s, eta_s;     /* wall time so far, estimated time left */
	const tc_tune_candidate *last; /* the candidate just measured */
	/* The final stage: 0 during the search; else the round (1-based) of
	 * final_rounds in which last (final = 1, median_s that round's median)
	 * was re-timed; done and planned then count re-timings (rounds x
	 * configurations). */
	int final_round, final_rounds;
} tc_tune_progress;

/* Settings of a tuning run; tc_tune_settings_init fills in the defaults
 * (given in brackets). */
typedef struct tc_tune_settings {
	int generations;      /* [5], at most 10000 */
	int population;       /* candidates per generation [20], at most 10000 */
	int elites;           /* best candidates carried into the next generation [2] */
	double mutation_rate; /* chance that a child's option is redrawn [0.15] */
	int tournament;       /* candidates per selection tournament [2], at most 10000 */
	uint64_t seed;        /* the search's random choices; 0: from the clock [0] */
	int threads;          /* candidates compiling at once; 0: the CPUs this process may run on [0] */
	double timeout_s;     /* limit on one candidate's runs [10] */
	double compile_timeout_s; /* limit on one candidate's compile [120] */
	int warmup;           /* untimed runs after the checked first run [1] */
	int runs;             /* at least this many timed runs [5] ... */
	double min_time_s;    /* ... taking at least this long in all [0.1] */
	double cutoff;        /* stop timing when a run takes > cutoff x best [3] */
	/* The final stage: the final_candidates best distinct correct
	 * configurations of the search other than the base options, and the
	 * base options, are compiled again in child processes and timed in
	 * turn, final_rounds rounds (each: warm-up runs, then at least runs
	 * timed runs taking final_time_s; the first round's warm-up lasts at
	 * least final_warmup_s, past slow first runs); each round moves the
	 * stack to another offset in its page.  A configuration's time is the
	 * median of its round medians.  The base options are the result
	 * unless the fastest other is faster by more than final_margin (a
	 * fraction) and in more than half of the rounds.  Every re-timing is
	 * recorded (final = 1), the choice marked chosen.  final_candidates 0
	 * turns the stage off: the search's best is returned. */
	int final_candidates; /* [3] */
	int final_rounds;     /* [5] */
	double final_time_s;  /* [0.2] */
	double final_warmup_s; /* [0.5] */
	double final_margin;  /* [0.02] */
	/* Extra starting points: options texts (tc_options_parse form), e.g.
	 * the best entries of the kernel cache; invalid ones are skipped.  The
	 * base options are always the first candidate. */
	const char *const *seeds;
	int n_seeds;
	/* The kernel cache: path of the database to take seeds from and record
	 * every candidate in (NULL: the default path, see tcomp cache); with
	 * use_cache 0 no cache is read or written [1]. */
	const char *cache_path;
	int use_cache;
	/* Called after every measured candidate (NULL: none).  record sees
	 * every candidate, failed ones included: the hook by which results are
	 * stored.  progress returning non-zero stops the run after the current
	 * candidate; the best found so far is kept. */
	void (*record)(void *user, const tc_tune_candidate *c);
	int (*progress)(void *user, const tc_tune_progress *p);
	void *user;
	/* When non-NULL and set non-zero (say by a SIGINT handler), the search
	 * stops as soon as it can (running children are killed) and keeps the
	 * best found so far; the final stage still runs on what was measured.
	 * A change of the flag during the final stage (a second Ctrl-C: the
	 * handler counts) ends that too, and the search's best is returned.
	 * A progress callback returning non-zero does the same in either. */
	volatile sig_atomic_t *stop;
	/* Distributed evaluation (NULL: every candidate runs here).  With a
	 * transport of size > 1, this process (rank 0) runs the search and the
	 * final stage, and the candidates of each generation are compiled and
	 * timed by the ranks that serve (tc_tune_serve), as many at once on
	 * each as it has CPUs (or --jobs), timed one at a time per rank.  The
	 * first correct candidate (the base options) runs here: its result is
	 * the reference every rank checks against.  A rank that stops
	 * answering for compile_timeout_s + timeout_s + 10 seconds while it
	 * holds candidates, or whose transport says it is gone, is given up: they go to the other ranks (a
	 * candidate lost twice is recorded as crashed), and with no rank left
	 * this process measures the rest.  The search makes the same choices
	 * as without a transport (same seed, same times: the same candidates). */
	tc_tune_transport *transport;
} tc_tune_settings;

/* Fill s with the defaults; NULL s: nothing. */
void tc_tune_settings_init(tc_tune_settings *s);

/* Serve a distributed tuning run as rank t->rank > 0 (see
 * tc_tune_settings.transport): say hello to rank 0, then compile and time
 * the candidates it sends, in forked child processes as tc_autotune does,
 * with jobs of them compiling at once (0: the CPUs this process may run
 * on), until rank 0 says the run is over.  stop (may be NULL) set non-zero
 * ends the candidates in progress and the service.  When rank 0 ended the
 * run, the number of ranks it gave up (0: none; a caller over MPI may then
 * want to skip MPI_Finalize, which can wait for a dead rank); -1 with an
 * error in ctx (the transport failed, rank 0 is gone, out of memory). */
int tc_tune_serve(tc_context *ctx, const tc_tune_transport *t, int jobs,
	volatile sig_atomic_t *stop);

/* The outcome of a tuning run.  With a final stage, default_s and best_s
 * are its times (same rounds, so comparable); without one, the search's. */
typedef struct tc_tune_report {
	double default_s;  /* median time of the base options (INFINITY: failed) */
	double best_s;     /* median time of the best options */
	int measured;      /* candidates measured by the search (each configuration once) */
	int failed;        /* of them, failed (any status but OK and CUT) */
	int cut;           /* of them, cut off early */
	int generations;   /* generations completed */
	int stopped;       /* 1 if the search stopped early (stop flag or progress) */
	double elapsed_s;  /* the whole run, final stage included */
	double search_default_s, search_best_s; /* the search's times of the base
	                                          options and of its best */
	int final_measured; /* configurations re-timed by the final stage (0: none) */
	int final_rounds;   /* its rounds */
	int final_stopped;  /* 1 if it was stopped: the search's best is returned */
	int defaults_won;   /* 1 if the final stage returned the base options: they
	                       were fastest, or no other beat them beyond the noise */
} tc_tune_report;

/* Tune entry of m for the shapes and dtypes of inputs.  An input with
 * data is used as it is (the tuning input); one whose data is NULL gets
 * random values (as tcomp bench makes them: non-zero floats in [-1,1),
 * small positive integers).  base (NULL: defaults) is the first candidate; options it sets
 * explicitly are kept fixed.  settings may be NULL (defaults).  On success
 * returns 0 and, if best is not NULL, *best = the fastest correct options
 * (the final stage's choice; owned by the caller), and fills *report (may
 * be NULL).  -1 with an error
 * in m's context when nothing could be measured (bad entry or shapes, no
 * correct candidate: the message then carries the first failed candidate's,
 * such as an index out of bounds in the caller's data; fork failure), or
 * when entry, inputs (n_inputs > 0)
 * or an element of inputs is NULL; -1 without a message for a NULL m. */
int tc_autotune(tc_module *m, const char *entry, const DLTensor *const *inputs, int n_inputs,
	const tc_options *base, const tc_tune_settings *settings, tc_options **best,
	tc_tune_report *report);

/* One kernel of a batch (tc_autotune_batch). */
typedef struct tc_tune_job {
	/* what to tune, borrowed for the call */
	tc_module *m;
	const char *entry;
	const DLTensor *const *inputs; /* shapes and dtypes; data is not read: the
	                                * inputs are random, as tcomp bench makes them */
	int n_inputs;
	const tc_options *base;        /* NULL: defaults */
	/* what became of it */
	int ok;                        /* 1 tuned, 0 not (message says why) */
	char message[512];
	tc_options *best;              /* when ok: the choice, the caller's (tc_options_free) */
	tc_tune_report report;
	int rank;                      /* the rank that tuned it (0: this process) */
} tc_tune_job;

/* Where a batch stands, passed to its progress callback. */
typedef struct tc_tune_batch_progress {
	int job;                     /* the job this is about */
	int jobs, finished, running; /* the batch's jobs, those finished (tuned or
	                                not), those being tuned */
	const tc_tune_progress *p;   /* the job's own progress (a candidate or
	                                re-timing); NULL when the job just finished */
	double elapsed_s, eta_s;     /* the whole batch: wall time so far, estimated
	                                time left (from the candidates measured per
	                                second so far and those still planned) */
} tc_tune_batch_progress;

/* Tune the kernels jobs[0..n) with settings (NULL: defaults), each as
 * tc_autotune would (its own search and final stage, every candidate in
 * the kernel cache), one progress callback for all (NULL: none; non-zero
 * stops the batch as the stop flag does).  Without a transport (or one of
 * size 1) the jobs are tuned here one after another.  With one, rank 0
 * (this process) hands whole jobs to the ranks that serve (tc_tune_serve),
 * largest first, one per rank at a time: a job's candidates and its final
 * stage are all timed on one rank; the rank tunes into a kernel cache file
 * of its own (in its $TMPDIR) and sends its rows back as it records them
 * (with each progress message), which rank 0 adds to its cache (settings->cache_path; the rows keep the key, so that rank's
 * machine): no file is shared between machines.  Seeds from rank 0's
 * cache go with the job, as the cache is when the job starts (jobs of one
 * def tuned at once do not seed each other; one after another, here, the
 * earlier seeds the later).  settings->record is called for the jobs tuned
 * here only.  A rank that sends nothing for compile_timeout_s + timeout_s
 * + 2 x (final_time_s + final_warmup_s) + 10 seconds is given up and its
 * job goes to another rank (a job lost twice fails); with no rank left,
 * the rest are tuned here.  A stop ends the jobs being tuned (each keeps
 * its best so far) and starts no other.  Returns the number of jobs not
 * tuned (0: all ok), or -1 with an error in ctx (NULL arguments, the
 * transport failed, out of memory). */
int tc_autotune_batch(tc_context *ctx, tc_tune_job *jobs, int n, const tc_tune_settings *settings,
	int (*progress)(void *user, const tc_tune_batch_progress *p), void *user);

/* ---- training (README "Training") ----
 *
 * A model is a forward def, a loss def and parameter tensors, in one
 * module:
 *
 *   def mlp(float(B,I) X, float(H,I) W1, float(H) B1, ...) -> (Z) { ... }
 *   def xent(float(B,K) Z, int64(B) Y) -> (L) { ... }      # L: a scalar
 *
 * The forward def's inputs are parameters (declared with tc_model_param)
 * and data (the others, declared with tc_model_input).  The loss def's
 * first inputs are the forward def's outputs, in order (same types and
 * ranks; the names may differ); its other inputs are data too (the labels);
 * its one output is the loss, a float32 or float64 scalar.  Every
 * parameter has the same float type.
 *
 * tc_model_build derives the backward defs (tc_module_grad with
 * TC_GRAD_SAVES: the forward's temporaries that the backward reads are
 * saved by the forward, not recomputed) and the optimiser's update (a .tc
 * def too: tc_optimizer_source prints it), compiles every kernel once
 * (tc_compile: memoised, served from the kernel cache), and allocates every
 * buffer once, pre-faulted: parameters and their gradients in two arenas,
 * the data inputs, the forward's outputs and saved temporaries, the loss.
 * tc_model_step then runs a fixed sequence of kernels on the context's
 * thread pool: forward with saves, loss, the loss's backward, the
 * forward's backward (the parameters' gradients), the update, with no
 * allocation.  Not for concurrent use of one model; different models may
 * step in different threads.
 *
 * Initialisation (tc_init, one per parameter, in the order declared): a
 * xorshift64* stream from build's seed, so the values are the same on every
 * machine.  fan_in and fan_out are taken from the shape unless set
 * (non-zero): fan_in = the product of the extents after the first (a
 * (out, in) weight's in, a convolution's C*KH*KW), fan_out = the first
 * extent times those after the second (PyTorch's rule); for a rank-1
 * tensor both are its extent. */
typedef enum tc_init_kind {
	TC_INIT_ZEROS,           /* 0 */
	TC_INIT_CONSTANT,        /* a */
	TC_INIT_UNIFORM,         /* uniform in [a, b) */
	TC_INIT_NORMAL,          /* mean a, standard deviation b */
	TC_INIT_KAIMING_UNIFORM, /* uniform in [-bound, bound), bound = gain * sqrt(3 / fan_in) */
	TC_INIT_KAIMING_NORMAL,  /* mean 0, standard deviation gain / sqrt(fan_in) */
	TC_INIT_XAVIER_UNIFORM,  /* bound = gain * sqrt(6 / (fan_in + fan_out)) */
	TC_INIT_XAVIER_NORMAL,   /* standard deviation gain * sqrt(2 / (fan_in + fan_out)) */
} tc_init_kind;
/* gain is a (0: sqrt(2) for Kaiming, as for ReLU, 1 for Xavier).  PyTorch's
 * nn.Linear default is TC_INIT_KAIMING_UNIFORM with gain sqrt(1/3) for the
 * weight (bound 1 / sqrt(fan_in)) and TC_INIT_UNIFORM in that bound for
 * the bias. */
typedef struct tc_init {
	tc_init_kind kind;
	double a, b;
	int64_t fan_in, fan_out; /* 0: from the shape */
} tc_init;

/* The update, elementwise over every parameter p with gradient g (lr the
 * learning rate, t the step, from 1):
 *   TC_OPT_SGD       p -= lr * g
 *   TC_OPT_MOMENTUM  v = momentum * v + g; p -= lr * v   (PyTorch's SGD
 *                    with momentum, dampening 0; v starts at 0)
 *   TC_OPT_ADAM      m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
 *                    p -= lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 * weight_decay (default 0) is decoupled, applied first: p *= 1 - lr *
 * weight_decay (AdamW's; for SGD the same as PyTorch's weight_decay).
 * tc_optimizer_init sets kind and lr and the rest to PyTorch's defaults
 * (momentum 0.9, beta1 0.9, beta2 0.999, eps 1e-8, weight_decay 0). */
typedef enum tc_opt_kind { TC_OPT_SGD, TC_OPT_MOMENTUM, TC_OPT_ADAM } tc_opt_kind;
typedef struct tc_optimizer {
	tc_opt_kind kind;
	double lr, momentum, beta1, beta2, eps, weight_decay;
} tc_optimizer;
void tc_optimizer_init(tc_optimizer *o, tc_opt_kind kind, double lr);
/* The optimiser's update as .tc text for parameters of dtype (float32 or
 * float64): one def over the parameters as one flat vector, its state
 * (v; m and v) and the parameters updated in place by accumulation (see
 * docs/language.md 5.4).  Free with tc_string_free; NULL for a NULL o, an
 * unknown kind or another dtype. */
char *tc_optimizer_source(const tc_optimizer *o, DLDataType dtype);

typedef struct tc_model tc_model;
/* A model of m's defs forward and loss (checked here: they exist, the loss
 * has one float scalar output and at least as many inputs as the forward
 * has outputs, of the same types and ranks).  Keeps m alive (m may be freed
 * by the caller after).  NULL with a message in m's context; NULL m: NULL. */
tc_model *tc_model_new(tc_module *m, const char *forward, const char *loss);
/* Declare the forward input name a parameter of this shape (its rank and
 * the def's sizes are checked at build), initialised by init (NULL:
 * zeros).  Before build only.  0 ok, -1 with a message: not a float input
 * of the forward def, declared twice, a negative extent. */
int tc_model_param(tc_model *md, const char *name, int ndim, const int64_t *shape,
	const tc_init *init);
/* Declare the shape of a data input (of the forward def or a label of the
 * loss def).  Before build only.  0 ok, -1 with a message. */
int tc_model_input(tc_model *md, const char *name, int ndim, const int64_t *shape);
/* Make md an ensemble of k models (what torch.func.stack_module_state and
 * vmap do): k copies of the model, each with parameters of its own,
 * trained in one set of kernels on the same batches.  Before build; k >= 1
 * (1: an ensemble of one, with the leading dimension).  At build the
 * forward def is batched over its parameters and the loss def over its
 * first inputs (tc_module_vmap: docs/language.md "Batching over models"),
 * so that every parameter, its gradient, the forward's outputs and the loss
 * get a leading dimension of k, and model e's slices are what a model
 * alone would compute from its parameters; the data inputs are shared.
 * Parameters are declared with one model's shape (the initialisers' fans
 * are one model's); each model's values follow the previous one's in the
 * seed's stream.  tc_model_tensor gives the k-model tensors ("W1":
 * k x H x I, the loss: k elements), and tc_model_step and tc_model_eval
 * report the mean of the k losses.  tc_model_forward's outputs get the
 * leading k too; save and load the k-model tensors.  0 ok, -1 with a
 * message (k < 1, after build). */
int tc_model_ensemble(tc_model *md, int64_t k);
/* Derive, compile, allocate and initialise (see above).  options (NULL:
 * defaults) apply to every kernel; the kernel cache serves each as
 * tc_compile does.  0 ok, -1 with a message: a forward input neither
 * parameter nor data, shapes the defs reject, a def that cannot be
 * differentiated (the derivation's located error), parameters of different
 * types; once built, a model cannot be built again. */
int tc_model_build(tc_model *md, const tc_optimizer *opt, const tc_options *options,
	uint64_t seed);
/* The model's tensor called name, owned by the model, at the same address
 * for the model's life (after build): a parameter ("W1"), its gradient of
 * the last step ("d_W1"), a data input ("X", "Y": fill them before a
 * step), a forward output (by the forward def's name, "Z") or the loss
 * (the loss def's name for it).  NULL with a message for another name or
 * before build. */
DLTensor *tc_model_tensor(tc_model *md, const char *name);
/* One training step on the data inputs' current contents: forward, loss,
 * gradients, update.  *loss (may be NULL) gets the loss before the update.
 * 0 ok, -1 with a message (not built; a kernel's run-time error). */
int tc_model_step(tc_model *md, double *loss);
/* tc_model_step on the first rows rows of the data inputs (a partial
 * batch: the last of an epoch, tc_batches_set_partial and tc_batches_rows),
 * 1 <= rows <= the batch, the data inputs' common first extent; rows = the
 * batch is tc_model_step.  The kernels for that row count are compiled on
 * its first use (with sizes=auto: parametric code, docs/performance.md)
 * over views of the model's buffers (the first rows of each data input,
 * the first elements of the others) and kept, so later steps of that row
 * count allocate nothing.  The loss def's mean (its division by the batch
 * size) is then over rows.  0 ok, -1 with a message (not built, rows out
 * of range, data inputs whose first extents differ). */
int tc_model_step_rows(tc_model *md, int64_t rows, double *loss);
/* Compile the kernels tc_model_step_rows needs for rows rows now (at
 * build time, say, for an epoch's partial last batch), without a step.  0
 * ok, -1 with a message (as tc_model_step_rows). */
int tc_model_prepare_rows(tc_model *md, int64_t rows);
/* The forward def and the loss on the current inputs and parameters,
 * nothing updated (evaluation): the forward's outputs and *loss (may be
 * NULL).  The defs as written are compiled on the first call (not at
 * build), into the step's buffers.  0 ok, -1 with a message. */
int tc_model_eval(tc_model *md, double *loss);
/* Run the forward def alone on inputs of other shapes (a test set as one
 * batch, say) with the current parameters: inputs holds the forward's data
 * inputs in the def's order (the parameters left out), outputs its
 * outputs, of the shapes tc_kernel_output_shape would give.  Compiled on
 * first use of each shape (memoised).  0 ok, -1 with a message. */
int tc_model_forward(tc_model *md, const DLTensor *const *inputs, int n_inputs,
	DLTensor *const *outputs, int n_outputs);
/* Save the parameters to path, one safetensors file (the format of the
 * safetensors library: an 8-byte header length, a JSON header naming each
 * tensor with its dtype "F32"/"F64", shape and byte offsets, then the
 * data; safetensors.torch.load_file reads it), through a temporary file
 * renamed over path, so a failed save leaves an earlier file whole.
 * tc_model_load reads such a file into the parameters: every parameter
 * must be there with its dtype and shape, and no other tensor; everything
 * is checked before anything is copied, so on an error the parameters are
 * as they were.  Parameters only: the optimiser's state (momentum, Adam's
 * moments and step count) goes in a checkpoint (below).  0 ok, -1 with a
 * message naming the file (not built, cannot write or read, a malformed
 * header, a missing, extra or mismatched tensor). */
int tc_model_save(tc_model *md, const char *path);
int tc_model_load(tc_model *md, const char *path);
/* A checkpoint, to resume training where it stopped: one safetensors file
 * (as tc_model_save's) with the parameters, the optimiser's state of each
 * under PyTorch's names ("W1.momentum_buffer" for TC_OPT_MOMENTUM,
 * "W1.exp_avg" and "W1.exp_avg_sq" for TC_OPT_ADAM; none for TC_OPT_SGD)
 * and the steps taken, "optimizer.step" (a uint64 scalar: Adam's bias
 * corrections go on from it).  tc_model_load_checkpoint reads one into a
 * model built with the same parameters and optimiser kind (the
 * hyper-parameters are the model's own), all or nothing as tc_model_load;
 * a parameters-only file (tc_model_save) is not a checkpoint, nor the
 * reverse (a missing or extra tensor).  0 ok, -1 with a message. */
int tc_model_save_checkpoint(tc_model *md, const char *path);
int tc_model_load_checkpoint(tc_model *md, const char *path);
/* The step's kernels, for tuning them (tcomp autotune --train): there are
 * tc_model_num_kernels of them (-1 for a NULL md or before build), in the
 * order they run; kernel i is the def *entry of *module, run on *inputs
 * (*n_inputs tensors, the model's buffers: their data are the model's).
 * All four are borrowed from the model and live as long as it does.
 * tc_autotune on them records the best options in the kernel cache under
 * the def's text and shapes, where a later tc_model_build of the same
 * model finds them.  0 ok, -1 with a message (i out of range, a NULL
 * out-parameter, not built). */
int tc_model_num_kernels(const tc_model *md);
int tc_model_kernel(tc_model *md, int i, tc_module **module, const char **entry,
	const DLTensor *const **inputs, int *n_inputs);
/* Every kernel of a step, in order, as text: the def it runs and its
 * shapes, then the derived defs' .tc text (for `tcomp emit` users and
 * tests).  Free with tc_string_free; NULL before build. */
char *tc_model_describe(tc_model *md);
void tc_model_free(tc_model *md);

/* ---- data: IDX files and shuffled batches (README "Training") ----
 *
 * tc_idx_read reads an IDX file, the format of the MNIST family: two zero
 * bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D
 * float32, 0x0E float64), the rank (1 to 8), each extent as a big-endian
 * uint32, then the elements, big-endian, row-major.  A file starting with
 * gzip's magic (1f 8b) is inflated with zlib first.  The result is a
 * compact host tensor (kDLCPU) of that type and shape in the host's byte
 * order, owned by the caller: free it with t->deleter(t).  Refused with a
 * message naming the file (NULL returned, the error in ctx): a file that
 * cannot be opened or read, a corrupt or truncated gzip stream, a bad
 * magic, an unknown type byte, a rank of 0 or above 8, data shorter than
 * the header's shape says ("truncated": the bytes expected and found) or
 * longer (trailing bytes).  NULL ctx: NULL; NULL path: NULL with a message.
 *
 * tc_batches walks the first dimension of n_data tensors (the same extent
 * in each: the examples; images and their labels, say) in batches of
 * batch rows, in an order shuffled from seed (Fisher-Yates over a
 * xorshift64* stream, so the order is the same on every machine; seed 0:
 * the file order, unshuffled), a new order each epoch.  Exactly: each
 * epoch starts from p = 0, 1, ..., n-1 and, for i = n-1 down to 1, swaps
 * p[i] and p[j], j = next() % (i+1), where next() is xorshift64* on a
 * uint64 state x, set to seed once and carried from epoch to epoch:
 * x ^= x >> 12; x ^= x << 25; x ^= x >> 27; return x * 0x2545F4914F6CDD1D
 * (mod 2^64).  Batch k of the epoch is rows p[k*batch .. (k+1)*batch).
 * The last rows of an epoch that do not fill a batch are skipped (that
 * epoch's order then puts other rows last) unless tc_batches_set_partial
 * keeps them: then they are the epoch's last batch, a partial one.  The tensors are borrowed:
 * they must outlive the tc_batches and stay compact host tensors.  NULL
 * with a message in ctx: n_data < 1, a NULL data array or element, a
 * tensor that is not a compact host tensor of rank 1 or more, extents
 * that differ, batch < 1 or above the number of examples.  NULL ctx: NULL.
 *
 * tc_batches_next copies the next batch into out[i] (compact host tensors
 * whose first extent is batch and whose other extents hold as many elements
 * as a row of data[i]: the same extents, or a reshape such as 28x28 images
 * into rows of 784): of
 * data[i]'s type, or converted from an integer data[i]: to an integer
 * type (int8 to int64, uint8 to uint64; a value out[i]'s type cannot hold
 * is an error) or to float32/float64, each value multiplied by scale[i]
 * (in double, rounded once to out[i]'s type; scale NULL: 1; scale
 * 1/255.0 maps image bytes to [0, 1]; labels stored as uint8 go to an
 * int64 tensor; a scale[i] other than 1 for any other copy is an error).
 * Returns 1 with a batch, 0 at the end of an epoch (nothing copied; the
 * next call starts the next epoch), -1 with a message (a NULL or
 * mismatched out, a conversion other than those; the batch is not
 * consumed, though out may be partly written).  It allocates nothing;
 * a batch of 64 KiB or more per out tensor is copied by the context's
 * threads (tc_context_set_threads), each a share of the rows.
 * tc_batches_epoch: the number of epochs begun (1 from the first batch);
 * tc_batches_per_epoch: batches per epoch (with the partial one, if kept);
 * tc_batches_rows: the rows of the batch the last tc_batches_next served
 * (batch, or fewer for a partial batch, which fills the first rows of
 * each out tensor and leaves the others as they were; 0 before the first).
 * tc_batches_set_partial(b, keep): whether the partial batch is served
 * (keep != 0; default: skipped, as drop_last does), between epochs only.
 * NULL b: -1.
 * tc_batches_free(NULL): nothing.  A tc_batches is for one thread at a
 * time. */
DLManagedTensor *tc_idx_read(tc_context *ctx, const char *path);
typedef struct tc_batches tc_batches;
tc_batches *tc_batches_new(tc_context *ctx, const DLTensor *const *data, int n_data,
	int64_t batch, uint64_t seed);
int tc_batches_next(tc_batches *b, DLTensor *const *out, int n_out, const double *scale);
int64_t tc_batches_per_epoch(const tc_batches *b);
int tc_batches_set_partial(tc_batches *b, int keep);
int64_t tc_batches_rows(const tc_batches *b);
int64_t tc_batches_epoch(const tc_batches *b);
void tc_batches_free(tc_batches *b);

/* ---- device memory ----
 *
 * Memory for the tensors of target=cuda kernels (kDLCUDA, device 0: the
 * device tcomp runs on, in the driver's primary context, which the CUDA
 * runtime shares), so that a program without its own CUDA code can run
 * them (tcomp run --target cuda does).  kDLCPU is host memory (64-byte
 * aligned), so code can be written once for both.  Without a driver each
 * call is an error with the reason, the same for every call of the
 * process: "no CUDA driver: libcuda.so.1 not found (...)", "CUDA driver
 * (...): cuInit failed: CUDA_ERROR_STUB_LIBRARY (...)", "no CUDA device";
 * a device other than kDLCPU, or kDLCUDA 0, is refused with a message.
 * 0 ok, -1 with the error in ctx (ctx may not be NULL).
 *
 * tc_device_alloc: *ptr gets bytes of memory on dev (at least one byte is
 * allocated, so a 0-byte tensor has an address); *ptr is NULL on error.
 * tc_device_free: frees what tc_device_alloc gave for dev; NULL is fine.
 * tc_device_copy: copies bytes from src on src_dev to dst on dst_dev:
 * host to device, device to host, device to device (cuMemcpy*_v2, which
 * return once the copy is done for the host and follow the work queued on
 * the legacy default stream), or host to host (memcpy). */
int tc_device_alloc(tc_context *ctx, DLDevice dev, size_t bytes, void **ptr);
int tc_device_free(tc_context *ctx, DLDevice dev, void *ptr);
int tc_device_copy(tc_context *ctx, void *dst, DLDevice dst_dev, const void *src,
	DLDevice src_dev, size_t bytes);

/* Free a string the library returned (NULL: nothing). */
void tc_string_free(char *s);

#ifdef TC_VISIBILITY_PUSHED_
#pragma GCC visibility pop
#undef TC_VISIBILITY_PUSHED_
#endif

#ifdef __cplusplus
}
#endif

#endif
