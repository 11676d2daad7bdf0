/* The kernel cache's storage (runtime/cache.c): one SQLite database of
 * measured mapping options (and, optionally, compiled object code) per
 * kernel specialisation.  It stores and returns strings, numbers and
 * opaque bytes; what they mean to a module, to LLVM or to a reader is the
 * business of the layer above (runtime/cache_ops.h: keys from modules,
 * object code, the text of tcomp cache, JSON lines, tc_compile's lookup).
 *
 * Where: tc_cache_default_path() -- $TCOMP_CACHE, else
 * $XDG_CACHE_HOME/tcomp/kernels.sqlite, else ~/.cache/tcomp/kernels.sqlite.
 *
 * Key (tc_cache_key): the canonical kernel text (identifier-renamed, so
 * kernels differing only in names share entries) and its hash, the entry
 * name, the input dtypes and ranks, shapes and strides, the target (LLVM
 * triple, CPU name and feature string of the host) and the tcomp version.
 * Values: every measured candidate (options text in the tc_options_print
 * form, median and minimum time, when, which tuner run, ok or failed).  The
 * best entry of a key is its chosen ok run with the smallest median when it
 * has chosen runs, else its ok run with the smallest median: a run is
 * chosen when its run id ends in TC_CACHE_CHOSEN (the autotuner's final
 * stage marks its choice so; its other re-timings end in TC_CACHE_FINAL).
 * So a run of the search that looked faster than it is never displaces
 * the choice the final stage made by timing the best few again together.
 *
 * Concurrency: WAL mode, a busy timeout, and every write in one IMMEDIATE
 * transaction, so several tuners (threads or processes, each with its own
 * tc_cache) write at once without losing rows, and a writer killed at any
 * point (SIGKILL) leaves a valid database.  One tc_cache is for one thread
 * at a time.
 *
 * Failure: a file that is not SQLite, is corrupt or truncated, or holds
 * another schema (a foreign database, or a newer tcomp's) is never used nor
 * modified: open fails with a message saying why, and callers fall back to
 * the default options.  Options read back are checked with tc_options_parse
 * as user input is; a row whose options do not parse is skipped with a
 * warning (tc_cache_warnings).
 *
 * Errors: functions return -1 (or NULL) and leave a message for
 * tc_cache_error; messages never contain a trailing newline.
 *
 * Ownership: a tc_cache is the caller's (tc_cache_open, tc_cache_close).
 * Keys, hits and object rows are the caller's structs, which own the
 * strings and bytes the cache fills in (their _clear functions free them);
 * what the caller passes in (keys, runs, rows) is borrowed for the call.
 * Messages, and the strings handed to callbacks, are borrowed from c.
 *
 * Storage knows SQLite, the option table (runtime/options.h, to check and
 * canonicalise options text) and lang/util.h; it knows nothing of modules,
 * contexts, the IR, code generation or JSON, and compiles nothing. */
#ifndef TC_RT_CACHE_H
#define TC_RT_CACHE_H

#include "tcomp.h"

#include "../lang/util.h"

#include <stddef.h>
#include <stdint.h>

/* Version of the database layout this tcomp reads and writes (meta table,
 * name 'schema_version').  A file with another version is not used. */
#define TC_CACHE_SCHEMA_VERSION 1

/* Suffixes of the run ids of the autotuner's final stage (see above): a
 * re-timing, and the re-timing of the configuration it chose. */
#define TC_CACHE_FINAL "/final"
#define TC_CACHE_CHOSEN "/chosen"

typedef struct tc_cache tc_cache;

/* The default location of the cache file (see above); NULL when no home
 * directory is known or out of memory.  Caller owns the result. */
__tc_give char *tc_cache_default_path(void);

/* How to open the cache. */
typedef enum tc_cache_mode {
	TC_CACHE_READ,  /* lookups only: never creates or modifies a file */
	TC_CACHE_WRITE, /* creates the file (and its directory) if absent */
} tc_cache_mode;

/* Open the cache at path (NULL: the default path).  Returns NULL when it
 * cannot be used: *msg (if msg is not NULL) is then NULL when there is
 * simply no file to read (TC_CACHE_READ), and otherwise a message saying
 * why (not SQLite, corrupt, foreign or newer schema, cannot create...),
 * owned by the caller.  The schema is checked (and, in TC_CACHE_WRITE mode,
 * created) here; an existing file is checked before anything is written to
 * it (WAL mode included), so a file that is not a tcomp kernel cache is
 * never modified.  TC_CACHE_WRITE on a read-only file (no write permission
 * bit, even for root, or not writable by this process) opens it for
 * reading: lookups work, writes fail with a clear error
 * (tc_cache_is_read_only). */
__tc_give tc_cache *tc_cache_open(const char *path, tc_cache_mode mode, __tc_give char **msg);
/* Close c (NULL: nothing). */
void tc_cache_close(__tc_take tc_cache *c);
/* The path of the open cache (borrowed). */
const char *tc_cache_path(__tc_keep const tc_cache *c);
/* The last error of c ("" if none), and the warnings gathered since open
 * (rows skipped because their options did not parse; "" if none); both
 * borrowed, newline-separated lines. */
const char *tc_cache_error(__tc_keep const tc_cache *c);
const char *tc_cache_warnings(__tc_keep const tc_cache *c);

/* For the layers above, which report through c as storage does: set c's
 * error (tc_cache_error); set it to prefix followed by message, a
 * context's message (tc_context_error) without its "error: " and its
 * trailing newlines; add a warning line "warning: kernel cache 'PATH':
 * ..." (tc_cache_warnings). */
void tc_cache_set_error(__tc_keep tc_cache *c, const char *fmt, ...) TC_PRINTF(2, 3);
void tc_cache_set_error_msg(__tc_keep tc_cache *c, const char *prefix, const char *message);
void tc_cache_warn(__tc_keep tc_cache *c, const char *fmt, ...) TC_PRINTF(2, 3);
/* 0 when c was opened TC_CACHE_WRITE, else -1 with the error "kernel cache
 * 'PATH' is open for reading only" (or, for a read-only file, "... is
 * read-only (the file cannot be written); lookups work, nothing is
 * recorded"). */
int tc_cache_writable(__tc_keep tc_cache *c);
/* 1 when c was asked for TC_CACHE_WRITE but its file is read-only (no write
 * permission bit, or not writable by this process): it was opened for
 * reading, and every write fails (tc_cache_writable); else 0. */
int tc_cache_is_read_only(__tc_keep const tc_cache *c);

/* What an entry is for.  Every string is owned by the key (the layer above
 * fills one from a module: tc_cache_key_init in runtime/cache_ops.h). */
typedef struct tc_cache_key {
	char hash[17];   /* tc_module_hash of the entry: 16 hex digits */
	char *canonical; /* canonical text of the def */
	char *entry;     /* the def's name */
	char *types;     /* input dtypes and ranks: "float32/2,float32/2" */
	char *shapes;    /* input shapes: "64x32,32x48" ("" for a scalar) */
	char *strides;   /* input strides in elements: "32x1,48x1" */
	char *target;    /* "x86_64-pc-linux-gnu;znver4;+avx2,+fma,..." */
	char *version;   /* TCOMP_VERSION */
} tc_cache_key;
/* Free the strings of key and zero it (NULL: nothing). */
void tc_cache_key_clear(__tc_keep tc_cache_key *key);

/* One measured candidate, as the autotuner records it (strings borrowed). */
typedef struct tc_cache_run {
	const char *options; /* tc_options_print text (or any tc_options_parse text) */
	double median_ms;    /* median time of the timed runs (ignored if failed) */
	double min_ms;       /* fastest timed run (ignored if failed) */
	const char *run_id;  /* the tuner run's id (may be NULL) */
	int ok;              /* 1: measured and correct; 0: failed (crash, timeout,
	                        wrong result, compile error) */
} tc_cache_run;

/* Record a candidate under key (creating the key's row when new) in one
 * transaction; the options are checked with tc_options_parse and stored in
 * the canonical tc_options_print form.  0 ok; -1 (bad options, database
 * error) with tc_cache_error.  Needs a TC_CACHE_WRITE cache. */
int tc_cache_record(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep const tc_cache_run *run);

/* The result of a lookup. */
typedef struct tc_cache_hit {
	tc_options *options; /* the best options, validated; owned by the hit */
	char *text;          /* the same as stored text (tc_options_print form) */
	double median_ms, min_ms;
	char *shapes;        /* the shapes of the entry found */
	double distance;     /* 0 for an exact hit; see tc_cache_lookup_near */
	int64_t kernel_id;   /* the entry's row, for tc_cache_object_get */
	char *target;        /* tc_cache_lookup_other_cpu: the target of the entry
	                        found; otherwise NULL (the key's) */
} tc_cache_hit;
/* Free what hit owns and zero it (NULL: nothing). */
void tc_cache_hit_clear(__tc_keep tc_cache_hit *hit);

/* The best ok options recorded for exactly key (the chosen run with the
 * least median, else the ok run with the least median).  1 found (hit filled), 0
 * none, -1 database error (tc_cache_error).  Rows whose options do not
 * parse are skipped with a warning; the next best is taken. */
int tc_cache_lookup(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_cache_hit *hit);
/* The best ok options recorded for the nearest other shape of the same
 * kernel (canonical text), entry, input types and ranks, target and tcomp
 * version.  Distance between two shape lists: the sum over every dimension
 * of every input of |log(a / b)| (a shape twice as large in one dimension
 * is log 2 away); ties go to the faster entry.  Entries with an extent 0
 * where the other has a positive one are not near.  Same return values as
 * tc_cache_lookup, with hit->distance set. */
int tc_cache_lookup_near(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_cache_hit *hit);
/* The best ok options recorded for the same kernel, entry, input types
 * and ranks and tcomp version on another CPU of the same architecture: a
 * target with the key's triple but another CPU name or feature string
 * (the options are portable between them, object code is not).  The
 * nearest shapes first, the same shapes (distance 0) nearest of all; ties
 * go to the faster entry.  Same return values as tc_cache_lookup, with
 * hit->distance and hit->target (the entry's target) set. */
int tc_cache_lookup_other_cpu(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_cache_hit *hit);
/* Seeds for a tuner: up to max distinct ok options texts, best first, from
 * key itself, then from the nearest shapes (as tc_cache_lookup_near), then
 * from other CPUs of the same architecture (tc_cache_lookup_other_cpu).
 * *n receives the count and *texts an array of strings, each (and the
 * array) owned by the caller (free with tc_free).  0 ok, -1 error. */
int tc_cache_seeds(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key, int max,
	__tc_give char ***texts, int *n);

/* ---- stored object code: opaque bytes with their metadata ---- */

/* An object row: what the layer above stores next to a run's options
 * (runtime/cache_object.c gives it meaning).  Filled by
 * tc_cache_object_get, every pointer is owned by the row
 * (tc_cache_object_row_clear); given to tc_cache_object_put, it is
 * borrowed. */
typedef struct tc_cache_object_row {
	char *symbol;      /* the name of the kernel function in code */
	char *def_hash;    /* the hash of the def text the sites point into */
	void *sites;       /* the run-time check sites, encoded (may be NULL if 0 bytes) */
	size_t sites_size;
	void *code;        /* the object file */
	size_t code_size;
} tc_cache_object_row;
/* Free what row owns and zero it (NULL: nothing). */
void tc_cache_object_row_clear(__tc_keep tc_cache_object_row *row);

/* Store row for key and the options text (the canonical tc_options_print
 * form, as lookups give it in tc_cache_hit.text), replacing the one
 * stored before, in one transaction, stamped with this tcomp's version,
 * object_version (what else the bytes depend on: the LLVM version) and a
 * checksum of it all.  0 ok; -1 with tc_cache_error.  Needs a
 * TC_CACHE_WRITE cache. */
int tc_cache_object_put(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	const char *options, const char *object_version, __tc_keep const tc_cache_object_row *row);
/* The object row of kernel row kernel_id (tc_cache_hit) for the options
 * text into *row: 1 found, intact (checksum, non-empty code) and stamped
 * with this tcomp's version and object_version; 0 none usable (none
 * stored, other versions, or a checksum mismatch, which adds a warning);
 * -1 error.  *row is left empty unless 1. */
int tc_cache_object_get(__tc_keep tc_cache *c, int64_t kernel_id, const char *options,
	const char *object_version, __tc_keep tc_cache_object_row *row);

/* ---- management (tcomp cache) ---- */

/* A key's row as management reads it.  Strings are borrowed, valid during
 * the callback only, never NULL ("" for a NULL column or a field the
 * iterator does not fill: see each). */
typedef struct tc_cache_entry {
	int64_t id;
	const char *hash, *entry, *types, *shapes, *strides, *target, *version, *canonical;
	const char *created; /* first recorded: "YYYY-MM-DD HH:MM:SS", UTC */
	int has_best;        /* best_ms is set: the key has a best ok run */
	double best_ms;      /* the best run's median (see above) */
	int has_default;     /* default_ms is set: the defaults were measured */
	double default_ms;   /* the defaults' least median, a final re-timing's
			      * when there is one */
	int runs, failed;    /* runs recorded; of them failed */
	int objects;         /* object rows stored */
} tc_cache_entry;
/* A run as management reads it (borrowed strings, as tc_cache_entry). */
typedef struct tc_cache_run_row {
	int64_t id;
	const char *options; /* as stored */
	const char *status;  /* "ok" or "failed" */
	const char *run_id;  /* "": none */
	double median_ms, min_ms;
	const char *at;      /* when recorded: "YYYY-MM-DD HH:MM:SS", UTC */
	int is_default;      /* its options are the defaults (however old its text) */
} tc_cache_run_row;
/* A run with its key, as exported and imported (tcomp cache export and
 * import): strings borrowed (from tc_cache_each_row: valid during the
 * callback), NULL for a NULL column or none; has_X says whether X is set. */
typedef struct tc_cache_row {
	const char *hash, *entry, *types, *shapes, *strides, *target, *version, *canonical;
	const char *options, *status, *run_id;
	int has_median, has_min, has_at;
	double median_ms, min_ms; /* milliseconds */
	double at;                /* Unix seconds */
} tc_cache_row;

/* Callbacks of the iterators below: 0 to go on, -1 to stop (with the
 * error recorded in c by the callback, or by a nested call). */
typedef int (*tc_cache_entry_fn)(void *user, __tc_keep const tc_cache_entry *e);
typedef int (*tc_cache_run_fn)(void *user, __tc_keep const tc_cache_run_row *r);
typedef int (*tc_cache_row_fn)(void *user, __tc_keep const tc_cache_row *r);

/* Each key with id, hash, entry, shapes, target, version and the summary
 * fields (has_best to objects), ordered by entry, hash, shapes, id.  The
 * number of keys, or -1 (database error, or a callback stopped). */
int tc_cache_each_summary(__tc_keep tc_cache *c, tc_cache_entry_fn fn, __tc_keep void *user);
/* Each key whose hash, entry or "entry@shapes" is what (NULL: every key),
 * with id, hash, entry, types, shapes, strides, target, version, canonical
 * and created, in the same order.  The number of keys, or -1. */
int tc_cache_each_entry(__tc_keep tc_cache *c, const char *what, tc_cache_entry_fn fn,
	__tc_keep void *user);
/* Each run of key row kernel_id, best first (ok before failed, chosen runs
 * first, least median first).  The number of runs, or -1. */
int tc_cache_each_run(__tc_keep tc_cache *c, int64_t kernel_id, tc_cache_run_fn fn,
	__tc_keep void *user);
/* Each run with its key, in the order keys and runs were recorded.  The
 * number of runs, or -1. */
int tc_cache_each_row(__tc_keep tc_cache *c, tc_cache_row_fn fn, __tc_keep void *user);
/* Each run recorded after the run with id *after (0: every run) with its
 * key, in the order recorded; *after becomes the last one's id, so that
 * the next call gives the runs recorded since.  The number of runs, or
 * -1. */
int tc_cache_each_row_after(__tc_keep tc_cache *c, int64_t *after, tc_cache_row_fn fn,
	__tc_keep void *user);

/* Importing rows: tc_cache_import_begin starts one transaction (needs a
 * TC_CACHE_WRITE cache); tc_cache_import_row checks row and adds it unless
 * the same run is present (same key, options, status, run id, times and
 * time recorded); tc_cache_import_end commits it (commit nonzero) or
 * rolls it back.  A row is checked as a recorded run is (status, times,
 * options, which are stored canonical) and its key too: the hash must be
 * that of the canonical text, and shapes and strides well formed.
 * tc_cache_import_row returns 1 added, 2 already present, 0 refused (*why,
 * borrowed from c until the next call, says why: "malformed shapes or
 * strides"...), -1 database error.  begin and end: 0 ok, -1 error (end
 * with commit 0 returns 0). */
int tc_cache_import_begin(__tc_keep tc_cache *c);
int tc_cache_import_row(__tc_keep tc_cache *c, __tc_keep const tc_cache_row *row,
	const char **why);
int tc_cache_import_end(__tc_keep tc_cache *c, int commit);

/* What prune removes. */
typedef struct tc_cache_prune_opts {
	int other_versions; /* keys of another tcomp version */
	int failed;         /* failed runs */
	double older_than_s; /* runs recorded more than this many seconds ago (0: keep) */
	int all_but_best;   /* every run of a key but its best (and its default) */
} tc_cache_prune_opts;
/* Delete what o selects, then keys left without runs, then VACUUM.  The
 * number of runs removed goes to *removed.  0 ok, -1 error. */
int tc_cache_prune(__tc_keep tc_cache *c, __tc_keep const tc_cache_prune_opts *o, int *removed);

#endif
