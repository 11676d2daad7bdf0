/* Helpers shared by the commands of the tcomp tool (tools/tcomp.c and the
 * tools/cmd_*.c files): usage errors, exit statuses, mapping-option
 * arguments, loading a def, --shape arguments, the clock.  Functions here
 * may exit() (tools/ is the only place allowed to).
 *
 * Ownership: the tool allocates its own strings with the C library (free
 * them with free()); what the library returns is freed with the library's
 * functions (tc_options_free, tc_module_free, tc_free).  The argument
 * structs keep pointers into argv, which outlives them; the names they own
 * are freed by opt_args_free and bindings_free. */
#ifndef TC_TOOLS_CLI_H
#define TC_TOOLS_CLI_H

#include "tcomp.h"

#include "../lang/util.h"

#include <getopt.h>
#include <stddef.h>

#define EXIT_USER 1
#define EXIT_INTERNAL 2

/* Command-line options are parsed by glibc's getopt_long: --name value and
 * --name=value alike, -e NAME and -eNAME, options and operands in any
 * order, "--" ending the options.  Each command lists its options in a
 * struct option table from the pieces below and reads them with
 * cli_next_opt; the codes are getopt_long's values. */
enum {
	OPT_ENTRY = 'e', /* -e, --entry NAME */
	OPT_HELP = 'h',  /* -h, --help */
	OPT_OUTPUT = 'o', /* -o FILE (tcomp cache export) */
	OPT_SHAPE = 256, /* --shape T=SHAPE */
	OPT_OPTIONS,     /* --options FILE */
	OPT_OPTION,      /* --option NAME=VALUE */
	OPT_TARGET,      /* --target T */
	OPT_THREADS,     /* --threads N */
	OPT_CACHE,       /* --cache PATH */
	OPT_NO_CACHE,    /* --no-cache */
	OPT_CACHE_RESULT_OPTIONS, /* --cache-result-options */
	OPT_GPU_ARCH,    /* --gpu-arch sm_XX */
	OPT_COMMAND = 320, /* a command's own options from here on */
};
#define CLI_HELP {"help", no_argument, NULL, OPT_HELP}
#define CLI_ENTRY {"entry", required_argument, NULL, OPT_ENTRY}
#define CLI_SHAPE {"shape", required_argument, NULL, OPT_SHAPE}
#define CLI_MAPPING {"options", required_argument, NULL, OPT_OPTIONS}, \
	{"option", required_argument, NULL, OPT_OPTION}
#define CLI_TARGET {"target", required_argument, NULL, OPT_TARGET}, \
	{"threads", required_argument, NULL, OPT_THREADS}, \
	{"gpu-arch", required_argument, NULL, OPT_GPU_ARCH}
#define CLI_GPU_ARCH {"gpu-arch", required_argument, NULL, OPT_GPU_ARCH}
#define CLI_CACHE {"cache", required_argument, NULL, OPT_CACHE}, \
	{"no-cache", no_argument, NULL, OPT_NO_CACHE}, \
	{"cache-result-options", no_argument, NULL, OPT_CACHE_RESULT_OPTIONS}
#define CLI_END {NULL, 0, NULL, 0}

/* The next option of a command's arguments (argv[0] is the command's name,
 * "run"; glibc moves the operands behind the options): its code, with its
 * value in optarg; -1 after the last one, the operands then being
 * argv[optind] to argv[argc - 1].  shortopts: the short options ("e:h").
 * -h and --help print usage to stdout and exit 0; an unknown option, one
 * without its value or a value given to a flag are usage errors (exit 1). */
int cli_next_opt(int argc, __tc_keep char **argv, const char *shortopts,
	__tc_keep const struct option *longopts, const char *usage);

/* Mapping options of a command: --options FILE (several are applied in
 * order), then --option NAME=VALUE and --target T in command-line order.
 * files and values point into argv; owned[] holds the names it owns. */
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

/* Print "tcomp: error: " fmt (with arg) and usage to stderr; exit with
 * status 1. */
void die_usage(const char *usage, const char *fmt, const char *arg);
/* Exit status for a failed library call, from the error's kind
 * (tc_context_error_kind): out of memory and internal errors are 2, others
 * 1. */
int fail_status(__tc_keep tc_context *ctx);
/* Print ctx's error to stderr; its exit status. */
int report(__tc_keep tc_context *ctx);
/* Write text to the file out (-o OUT), or to stdout when out is NULL; the
 * exit status: 0, or 1 after "tcomp: error: cannot write OUT" when the
 * file cannot be written. */
int write_output(const char *text, const char *out);
/* Whether --help or -h is among the arguments. */
int wants_help(int argc, __tc_keep char **argv);
/* The message of the last error on ctx without its "error: " prefix
 * (borrowed from ctx: valid until its next error). */
const char *error_text(__tc_keep tc_context *ctx);
/* Take option code (value arg) if it is --options, --option, --target or
 * --threads; 1 if taken.  oa keeps pointers into argv; a name split from
 * --option N=V is oa's (opt_args_free). */
int take_opt_arg(__tc_keep opt_args *oa, int code, const char *arg, const char *usage);
/* N when the only option of oa is --threads N (not --option threads=N),
 * else NULL.  Borrowed from argv. */
const char *threads_only(__tc_keep const opt_args *oa);
/* 1 when the only options of oa are --threads N and --target T (not
 * --option), one or both: tcomp run and bench then read the kernel cache
 * for that target (threads_cache_options); N into *threads, NULL
 * without --threads. */
int cache_lookup_only(__tc_keep const opt_args *oa, const char **threads);
/* Free the names oa owns (oa itself is the caller's). */
void opt_args_free(__tc_keep opt_args *oa);
/* Read a whole file as a string, which the caller frees with free() (it is
 * malloc'd, not tc_malloc'd); NULL with errno. */
__tc_give char *read_text(const char *path);
/* The options of oa (defaults for what they do not set), which the caller
 * frees with tc_options_free; on an error, a message and exit status 1. */
__tc_give tc_options *build_options(__tc_keep const opt_args *oa, __tc_keep tc_context *ctx);
/* Load file and choose the def to use (*entry: -e NAME, or the only def of
 * the module, a name borrowed from the module), printing the module's
 * warnings.  The module is the caller's (tc_module_free).  NULL (and
 * *status the exit status, the error printed) if the file does not load.
 * A file of several defs without -e is a usage error that lists them. */
__tc_give tc_module *load_entry(__tc_keep tc_context *ctx, const char *file, const char **entry,
	const char *usage, int *status);
/* Parse "T=VALUE" (exits with usage on a malformed argument): the name a
 * copy (the binding's: bindings_free), the value borrowed from arg. */
binding parse_binding(__tc_keep const char *arg, const char *usage);
/* Take option code (value arg) if it is -e NAME or --entry NAME (into
 * *entry, borrowed from argv) or, with shapes not NULL, --shape T=SHAPE
 * (appended to shapes[*nshapes], at most 64: more is a usage error); 1 if
 * taken.  The same for tcomp run, emit, bench and autotune. */
int take_entry_arg(const char **entry, __tc_keep binding *shapes, int *nshapes, int code,
	const char *arg, const char *usage);
/* Free the names of n bindings (the array is the caller's). */
void bindings_free(__tc_keep binding *b, int n);
/* Parse "4x5" (or "scalar") into shape[8]; the rank, or -1. */
int parse_shape(const char *s, __tc_keep int64_t *shape);
/* Shape-only DLTensors (no data) for the inputs of entry from the --shape
 * arguments: every input named exactly once.  The caller's arrays are
 * linked: dl[i].shape points into dims[i] and ptrs[i] to dl[i].  0 ok; -1
 * after printing the error; exits on shape text that does not parse. */
int bind_shapes(__tc_keep tc_module *m, const char *entry, int n_in, __tc_keep binding *shapes,
	int nshapes, __tc_keep DLTensor *dl, __tc_keep int64_t (*dims)[8],
	__tc_keep const DLTensor **ptrs, const char *usage);
struct tc_npy;
/* The inputs of entry from --shape (shape only) and --in T=FILE.npy (the
 * file's shape and data; its dtype must be the def's): every input named
 * once by one of them (tcomp bench, tcomp autotune).  Reads each file into
 * arrays[j] (the caller's, zeroed, at least nin; free with tc_npy_free
 * whatever happens); from_file[i] is input i's index in ins, or -1.
 * dl[i] is shape-only as bind_shapes makes it (data NULL: the caller points
 * it at arrays[from_file[i]].data or at its own).  0 ok; -1 after printing
 * the error; exits with usage on a tensor named twice or bad shape text. */
int bind_inputs(__tc_keep tc_module *m, const char *entry, int n_in, __tc_keep binding *shapes,
	int nshapes, __tc_keep binding *ins, int nin, __tc_keep struct tc_npy *arrays,
	__tc_keep int *from_file, __tc_keep DLTensor *dl, __tc_keep int64_t (*dims)[8],
	__tc_keep const DLTensor **ptrs, const char *usage);
/* Seconds on the monotonic clock. */
double now_s(void);
/* The integer argument s of option opt, at least min (and at most
 * INT32_MAX); or a message with usage and exit status 1. */
long parse_count(const char *opt, const char *s, long min, const char *usage);

/* --cache PATH and --no-cache of run and bench (tools/cmd_cache.c); path
 * borrowed from argv. */
typedef struct cache_args {
	const char *path; /* NULL: the default location */
	int off;
	int result_options; /* --cache-result-options: take target, contract,
			     * fastmath and vecreduce from the cache too */
} cache_args;
/* Take option code (value arg) if it is --cache PATH, --no-cache or
 * --cache-result-options; 1 if taken. */
int take_cache_arg(__tc_keep cache_args *ca, int code, const char *arg);
/* Make ctx's compiles read the cache ca names (or none with --no-cache),
 * taking the result-changing options from it with --cache-result-options. */
void apply_cache_args(__tc_keep const cache_args *ca, __tc_keep tc_context *ctx);
/* The options for tcomp run and bench given --threads N and --target T
 * alone (cache_lookup_only; given: the defaults with those; threads: N or
 * NULL), from the kernel cache that ca names, keyed for given's target
 * (cuda-emu's entries are its own, runtime/cache_key.c): its best for
 * these shapes (else the nearest) as it is, when it was tuned for N
 * threads (or no N) and the target keys as the inputs' device does
 * (returns NULL and *source NULL: compile with no options, tc_compile
 * looks it up, loads its object code and says where from); else that
 * entry with threads=N and the target T ("cache+threads",
 * "cache-near+threads", or "cache", "cache-near" without N); with no
 * entry, given ("default+threads", "default").  The cache's problems are
 * warnings on stderr.  The caller owns the options returned
 * (tc_options_free); *source is static text. */
__tc_give tc_options *threads_cache_options(__tc_keep const cache_args *ca,
	__tc_keep tc_module *m, const char *entry, __tc_keep const DLTensor *const *in, int n_in,
	__tc_keep const tc_options *given, const char *threads, const char **source);
/* Print to stderr what ctx's warnings gained past their first from chars
 * (the kernel cache's warnings from tc_compile). */
void print_new_warnings(__tc_keep tc_context *ctx, size_t from);
/* tcomp cache list|show|export|import|prune|path. */
int cmd_cache(int argc, __tc_keep char **argv);

/* Distributed tuning over MPI (tools/mpi.c).  mpi_world_size: the number
 * of ranks of the job that started this process (1: not started by an MPI
 * launcher).  mpi_built: whether this tcomp has MPI.  mpi_start: MPI_Init
 * and the transport t of this rank; -1 without MPI or when MPI_Init
 * failed.  mpi_end: MPI_Finalize (at most 30 s of it, then
 * _exit(status)), skipped after a run that gave lost ranks up under
 * mpirun --enable-recovery (it could wait for a dead rank). */
int mpi_world_size(void);
int mpi_built(void);
int mpi_start(int *argc, char ***argv, tc_tune_transport *t);
void mpi_end(int lost, int status);

/* tcomp autotune (tools/cmd_autotune.c). */
int cmd_autotune(int argc, __tc_keep char **argv);

/* tcomp grad (tools/cmd_grad.c). */
int cmd_grad(int argc, __tc_keep char **argv);

/* tcomp vmap (tools/cmd_vmap.c). */
int cmd_vmap(int argc, __tc_keep char **argv);

#endif
