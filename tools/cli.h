/* Helpers shared by the commands of the tcomp tool (tools/tcomp.c and the
 * tools/cmd_*.c files): usage errors, exit statuses, mapping-option
 * arguments, loading a def, --shape arguments, the clock.  Functions here
 * may exit() (tools/ is the only place allowed to). */
#ifndef TC_TOOLS_CLI_H
#define TC_TOOLS_CLI_H

#include "tcomp.h"

#include <stddef.h>

#define EXIT_USER 1
#define EXIT_INTERNAL 2

/* Mapping options of a command: --options FILE (several are applied in
 * order), then --option NAME=VALUE and --target T in command-line order. */
typedef struct opt_args {
	const char *files[16];
	int nfiles;
	const char *names[64], *values[64];
	char *owned[64]; /* the names split from --option N=V */
	int nsets;
} opt_args;

/* A NAME=VALUE argument (--in, --out, --shape): the name (owned), the value
 * (borrowed from argv) and whether it was matched. */
typedef struct binding {
	const char *name, *path;
	int used;
} binding;

/* Print "tcomp: " fmt (with arg) and usage to stderr; exit with status 1. */
void die_usage(const char *usage, const char *fmt, const char *arg);
/* Exit status for a failed library call: internal errors are 2, others 1. */
int fail_status(tc_context *ctx);
/* Print ctx's error to stderr; its exit status. */
int report(tc_context *ctx);
/* Whether --help or -h is among the arguments. */
int wants_help(int argc, char **argv);
/* The message of the last error on ctx without its "error: " prefix. */
const char *error_text(tc_context *ctx);
/* Take argv[*i] (and its value) if it is --options, --option or (with
 * target) --target or --threads; 1 if taken. */
int take_opt_arg(opt_args *oa, int argc, char **argv, int *i, const char *usage, int target);
/* N when the only option of oa is --threads N (not --option threads=N),
 * else NULL.  Borrowed from argv. */
const char *threads_only(const opt_args *oa);
void opt_args_free(opt_args *oa);
/* Read a whole file as a string (malloc'd); NULL with errno. */
char *read_text(const char *path);
/* The options of oa (defaults for what they do not set); on an error, a
 * message and exit status 1. */
tc_options *build_options(const opt_args *oa, tc_context *ctx);
/* Load file and choose the def to use (*entry: -e NAME, or the only def of
 * the module), printing the module's warnings.  NULL (and *status the exit
 * status, the error printed) if the file does not load. */
tc_module *load_entry(tc_context *ctx, const char *file, const char **entry, const char *usage,
	int *status);
/* Parse "T=VALUE" (exits with usage on a malformed argument). */
binding parse_binding(const char *arg, const char *usage);
/* Take argv[*i] (and its value) if it is -e NAME or --entry NAME (into
 * *entry) or, with shapes not NULL, --shape T=SHAPE (appended to
 * shapes[*nshapes], at most 64: more is a usage error); 1 if taken.  The
 * same for tcomp run, emit, bench and autotune. */
int take_entry_arg(const char **entry, binding *shapes, int *nshapes, int argc, char **argv,
	int *i, const char *usage);
/* Free the names of n bindings. */
void bindings_free(binding *b, int n);
/* Parse "4x5" (or "scalar") into shape[8]; the rank, or -1. */
int parse_shape(const char *s, int64_t *shape);
/* Shape-only DLTensors (no data) for the inputs of entry from the --shape
 * arguments: every input named exactly once.  0 ok; -1 after printing the
 * error; exits on shape text that does not parse. */
int bind_shapes(tc_module *m, const char *entry, int n_in, binding *shapes, int nshapes,
	DLTensor *dl, int64_t (*dims)[8], const DLTensor **ptrs, const char *usage);
/* Seconds on the monotonic clock. */
double now_s(void);
/* The integer argument s of option opt, at least min (and at most
 * INT32_MAX); or a message with usage and exit status 1. */
long parse_count(const char *opt, const char *s, long min, const char *usage);

/* --cache PATH and --no-cache of run and bench (tools/cmd_cache.c). */
typedef struct cache_args {
	const char *path; /* NULL: the default location */
	int off;
} cache_args;
/* Take --cache PATH or --no-cache at argv[*i]; 1 if taken. */
int take_cache_arg(cache_args *ca, int argc, char **argv, int *i);
/* Make ctx's compiles read the cache ca names (or none with --no-cache). */
void apply_cache_args(const cache_args *ca, tc_context *ctx);
/* The options for tcomp run and bench given --threads N and no other
 * option (given: the defaults with threads=N), from the kernel cache that
 * ca names: its best for these shapes (else the nearest) as it is, when it
 * was tuned for N threads (returns NULL and *source NULL: compile with no
 * options, tc_compile looks it up and says where from); else that entry
 * with threads=N ("cache+threads", "cache-near+threads"); with no entry,
 * given ("default+threads").  The cache's problems are warnings on stderr.
 * The caller owns the options returned. */
tc_options *threads_cache_options(const cache_args *ca, tc_module *m, const char *entry,
	const DLTensor *const *in, int n_in, const tc_options *given, const char **source);
/* Print to stderr what ctx's warnings gained past their first from chars
 * (the kernel cache's warnings from tc_compile). */
void print_new_warnings(tc_context *ctx, size_t from);
/* tcomp cache list|show|export|import|prune|path. */
int cmd_cache(int argc, char **argv);

/* tcomp autotune (tools/cmd_autotune.c). */
int cmd_autotune(int argc, char **argv);

#endif
