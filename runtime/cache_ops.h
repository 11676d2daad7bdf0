/* The kernel cache above its storage: what the library, the autotuner and
 * tcomp cache do with the rows of runtime/cache.h.  Each file below calls
 * down only (into the storage, and into the compiler for keys and object
 * code); storage calls none of them.
 *
 *   runtime/cache_key.c     a key from a module, an entry and its inputs
 *   runtime/cache_object.c  object code read back (its row format)
 *   runtime/cache_store.c   object code compiled for the host and stored
 *   runtime/cache_admin.c   the text of tcomp cache list and show
 *   runtime/cache_json.c    tcomp cache export and import: JSON lines
 *   runtime/cache_api.c     tc_compile's lookup (runtime/cache_api.h) and
 *                           the public cache API (tcomp.h)
 * tc_compile (runtime/kernel.c) calls cache_api.c; cache_store.c calls
 * kernel.c to compile: so cache_api.c and cache_object.c never do.
 *
 * Ownership: as in runtime/cache.h: the cache, modules and inputs are
 * borrowed; keys and objects are the caller's structs, owning what is
 * filled in; text goes to the caller's tc_buf. */
#ifndef TC_RT_CACHE_OPS_H
#define TC_RT_CACHE_OPS_H

#include "cache.h"

/* ---- runtime/cache_key.c ---- */

/* Fill key for entry of m compiled for inputs (only dtype, shape and
 * strides are read) on the host CPU.  0 ok; -1 with an error in m's context
 * (unknown entry, wrong input count, out of memory).  The strings are the
 * key's (tc_cache_key_clear); on failure key is left empty. */
int tc_cache_key_init(__tc_keep tc_cache_key *key, __tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs);
/* tc_cache_key_init for the target of options o rather than the inputs'
 * device: its machine part that of o's backend (cuda-emu's
 * "cuda-emu;triple;cpu;features" for host inputs; a backend without a key
 * part, the interpreter, keys as its device's), or, when target is not
 * NULL, the string target itself: the autotuner of target=cuda passes the
 * part its probe child learnt, so that its own process never opens the
 * CUDA driver (autotune/README.md).  o may be NULL (then as
 * tc_cache_key_init). */
int tc_cache_key_init_for(__tc_keep tc_cache_key *key, __tc_keep tc_module *m, const char *entry,
	__tc_keep const DLTensor *const *inputs, int n_inputs, __tc_keep const tc_options *o,
	const char *target);

/* ---- runtime/cache_store.c, runtime/cache_object.c ---- */

struct tc_rt_object; /* runtime/internal.h */
struct tc_rt_backend; /* runtime/backend.h */
/* Compile entry of m for inputs with the options text (as recorded) to
 * object code for the host and store it with key, next to the options, with
 * its check sites, the tcomp version, the backend's object version (the
 * LLVM version) and a checksum; a later
 * tc_compile with no options that hits this key and options loads the
 * object instead of running LLVM.  The autotuner calls it for the best
 * options it found.  0 ok (also for options that make no object code, the
 * interpreter's: nothing is stored); -1 with tc_cache_error. */
int tc_cache_store_object(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_module *m, __tc_keep const DLTensor *const *inputs, int n_inputs,
	const char *options);
/* The stored object code of kernel row kernel_id (tc_cache_hit) for the
 * options text (as the hit gives it), made by backend b, into *o: 1 found,
 * intact and made by this tcomp and b's object version (the LLVM version); 0 none usable (none stored, another
 * version, a checksum mismatch or malformed sites, which add a warning);
 * -1 error.  *o is left empty unless 1; then its pointers are the
 * caller's (tc_rt_object_clear). */
int tc_cache_load_object(__tc_keep tc_cache *c, __tc_keep const struct tc_rt_backend *b,
	int64_t kernel_id, const char *options, __tc_keep struct tc_rt_object *o);

/* ---- runtime/cache_admin.c ---- */

/* One line per key: "hash entry shapes best_ms default_ms speedup runs
 * options" as readable text (list) into b: best_ms is the best run's
 * median, default_ms the defaults' least median, a final re-timing's when
 * there is one (the best's and the defaults' then come from the same kind
 * of timing).  0 ok, -1 error. */
int tc_cache_list(__tc_keep tc_cache *c, __tc_keep tc_buf *b);
/* Every key whose hash, entry or "entry@shapes" matches what (NULL: all),
 * with every recorded run, into b.  Returns the number of keys shown, -1 on
 * error. */
int tc_cache_show(__tc_keep tc_cache *c, const char *what, __tc_keep tc_buf *b);

/* ---- runtime/cache_json.c ---- */

/* Every run as one JSON object per line (keys and runs together, so a line
 * stands alone), into b.  0 ok, -1 error. */
int tc_cache_export(__tc_keep tc_cache *c, __tc_keep tc_buf *b);
/* The same for the runs recorded after the run with id *after (0: every
 * run; tc_cache_each_row_after), *after then the last one's id. */
int tc_cache_export_after(__tc_keep tc_cache *c, int64_t *after, __tc_keep tc_buf *b);
/* Import JSON lines as written by tc_cache_export, in one transaction;
 * runs already present (same key, options, times, status, run id and
 * time recorded) are not added again.  The counts of runs added, runs
 * already present and lines skipped go to *added, *present and *skipped
 * (each may be NULL).  A line that does not parse, lacks a field, has a
 * hash that does not match its kernel text or has invalid options is
 * skipped with a warning naming its line.  0 ok, -1 database error
 * (nothing imported). */
int tc_cache_import(__tc_keep tc_cache *c, const char *text, int *added, int *present,
	int *skipped);

/* ---- runtime/cache_api.c ---- */

/* Reset in o the options that change results rather than speed (target,
 * contract, fastmath) to their defaults, appending "name=value"
 * of each one changed (its old value, ", " between them) to what (may be
 * NULL).  The number reset, or -1 when out of memory.  tc_compile applies
 * it to the kernel cache's options unless the context allows them
 * (tc_context_set_cache_result_options), and so does tcomp run and bench's
 * --threads N lookup. */
int tc_cache_keep_results(__tc_keep tc_options *o, __tc_keep tc_buf *what);
/* tc_cache_keep_results leaving the target as it is (the caller has set
 * it: tcomp run --target T). */
int tc_cache_keep_results_but_target(__tc_keep tc_options *o, __tc_keep tc_buf *what);
/* 1 when the targets of a and b (NULL: the defaults) key their kernel
 * cache entries alike (the same machine part: the interpreter's as the
 * CPU's; cuda-emu's its own), else 0. */
int tc_cache_same_key_target(__tc_keep const tc_options *a, __tc_keep const tc_options *b);
/* 1 when o's target keys its entries as tensors of device type dev do
 * (tc_cache_key_init's key, which tc_compile looks up), else 0. */
int tc_cache_keys_as_device(__tc_keep const tc_options *o, DLDeviceType dev);

#endif
