/* Helpers shared by the commands of the tcomp tool: see cli.h. */
#include "cli.h"
#include "npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Print the usage error and exit with status 1 (cli.h). */
void die_usage(const char *usage, const char *fmt, const char *arg)
{
	fprintf(stderr, "tcomp: error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n\n%s", usage);
	exit(EXIT_USER);
}

/* The next option of a command's arguments (cli.h). */
int cli_next_opt(int argc, __tc_keep char **argv, const char *shortopts,
	__tc_keep const struct option *longopts, const char *usage)
{
	static int started;
	char opts[64];
	const char *bad;
	int c;
	if (!started) { /* a fresh scan (glibc: optind 0 re-initialises) */
		optind = 0;
		started = 1;
	}
	opterr = 0; /* the messages below instead of getopt's */
	snprintf(opts, sizeof(opts), ":%s", shortopts); /* ':' for a missing value */
	c = getopt_long(argc, argv, opts, longopts, NULL);
	if (c == OPT_HELP) {
		fputs(usage, stdout);
		exit(0);
	}
	if (c != '?' && c != ':')
		return c;
	bad = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
	if (c == ':')
		die_usage(usage, "option '%s' needs a value", bad);
	if (optopt && strncmp(bad, "--", 2)) { /* an unknown short option */
		char s[3] = {'-', (char)optopt, 0};
		die_usage(usage, "unknown option '%s'", s);
	}
	if (optopt) /* a value given to a flag: --print=1 */
		die_usage(usage, "option '%s' takes no value", bad);
	die_usage(usage, "unknown option '%s'", bad);
	return -1;
}

int write_output(const char *text, const char *out)
{
	FILE *f;
	int ok;
	if (!out) {
		fputs(text, stdout);
		return 0;
	}
	if (!(f = fopen(out, "w"))) {
		fprintf(stderr, "tcomp: error: cannot write %s\n", out);
		return EXIT_USER;
	}
	ok = fputs(text, f) >= 0;
	ok &= fclose(f) == 0; /* closed even when the write failed */
	if (!ok) {
		fprintf(stderr, "tcomp: error: cannot write %s\n", out);
		return EXIT_USER;
	}
	return 0;
}

/* Exit status for a failed library call, from the error's kind. */
int fail_status(__tc_keep tc_context *ctx)
{
	switch (tc_context_error_kind(ctx)) {
	case TC_ERROR_NOMEM:
	case TC_ERROR_INTERNAL: return EXIT_INTERNAL;
	default: return EXIT_USER;
	}
}

/* Print ctx's error; its exit status.  A message without a location
 * ("error: ...") gets the command's prefix, "tcomp: error: ..."; located
 * diagnostics ("file:line:col: error: ...") are printed as they are. */
int report(__tc_keep tc_context *ctx)
{
	const char *e = tc_context_error(ctx);
	if (!strncmp(e, "error: ", 7))
		fputs("tcomp: ", stderr);
	fputs(e, stderr);
	return fail_status(ctx);
}

/* Whether --help or -h is among the arguments. */
int wants_help(int argc, __tc_keep char **argv)
{
	int i;
	for (i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

/* The message of the last error on ctx without its "error: " prefix. */
const char *error_text(__tc_keep tc_context *ctx)
{
	const char *e = tc_context_error(ctx);
	return strncmp(e, "error: ", 7) ? e : e + 7;
}

/* Take --options, --option, --target, --threads or --gpu-arch; 1 if taken
 * (cli.h). */
int take_opt_arg(__tc_keep opt_args *oa, int code, const char *arg, const char *usage)
{
	if (code == OPT_OPTIONS) {
		if (oa->nfiles == 16)
			die_usage(usage, "%s", "too many --options");
		oa->files[oa->nfiles++] = arg;
		return 1;
	}
	if (code == OPT_OPTION || code == OPT_TARGET || code == OPT_THREADS ||
		code == OPT_GPU_ARCH) {
		const char *v = arg, *eq = strchr(v, '=');
		if (oa->nsets == 64)
			die_usage(usage, "%s", "too many --option");
		oa->owned[oa->nsets] = NULL;
		if (code != OPT_OPTION) { /* --target T, --threads N, --gpu-arch A */
			oa->names[oa->nsets] = code == OPT_TARGET ? "target"
				: code == OPT_GPU_ARCH ? "gpu_arch" : "threads";
			oa->values[oa->nsets] = v;
		} else {
			if (!eq || eq == v)
				die_usage(usage, "expected NAME=VALUE after --option but found '%s'", v);
			if (!(oa->owned[oa->nsets] = strndup(v, (size_t)(eq - v))))
				exit(EXIT_INTERNAL);
			oa->names[oa->nsets] = oa->owned[oa->nsets];
			oa->values[oa->nsets] = eq + 1;
		}
		oa->nsets++;
		return 1;
	}
	return 0;
}

/* N when the only option of oa is --threads N (cli.h). */
const char *threads_only(__tc_keep const opt_args *oa)
{
	return !oa->nfiles && oa->nsets == 1 && !oa->owned[0] && !strcmp(oa->names[0], "threads")
		? oa->values[0] : NULL;
}

/* Whether the only options of oa are --threads N and --target T (one or
 * both); N into *threads (NULL without it). */
int cache_lookup_only(__tc_keep const opt_args *oa, const char **threads)
{
	int i, nt = 0, nn = 0;
	*threads = NULL;
	if (oa->nfiles || oa->nsets < 1 || oa->nsets > 2)
		return 0;
	for (i = 0; i < oa->nsets; i++) {
		if (oa->owned[i])
			return 0;
		if (!strcmp(oa->names[i], "threads")) {
			*threads = oa->values[i];
			nn++;
		} else if (!strcmp(oa->names[i], "target")) {
			nt++;
		} else {
			return 0;
		}
	}
	if (nn > 1 || nt > 1)
		*threads = NULL;
	return nn <= 1 && nt <= 1;
}

/* Free the names split from --option N=V. */
void opt_args_free(__tc_keep opt_args *oa)
{
	int i;
	for (i = 0; i < oa->nsets; i++)
		free(oa->owned[i]);
}

/* Read a whole file as a string (malloc'd); NULL with errno. */
__tc_give char *read_text(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *s = NULL;
	size_t n = 0, cap = 0, got;
	if (!fp)
		return NULL;
	do {
		if (cap - n < 4096) {
			char *t = realloc(s, cap = cap * 2 + 4096);
			if (!t) {
				free(s);
				fclose(fp);
				errno = ENOMEM;
				return NULL;
			}
			s = t;
		}
		got = fread(s + n, 1, cap - n - 1, fp);
		n += got;
	} while (got);
	if (ferror(fp)) {
		int e = errno ? errno : EIO;
		free(s);
		fclose(fp);
		errno = e;
		return NULL;
	}
	fclose(fp);
	s[n] = 0;
	if (strlen(s) != n) {
		free(s);
		errno = EILSEQ; /* a NUL byte: not a text file */
		return NULL;
	}
	return s;
}

/* The options of oa (defaults for what they do not set); on an error, a
 * message and exit status 1. */
__tc_give tc_options *build_options(__tc_keep const opt_args *oa, __tc_keep tc_context *ctx)
{
	tc_options *o = tc_options_new();
	int i;
	if (!o)
		exit(EXIT_INTERNAL);
	for (i = 0; i < oa->nfiles; i++) {
		char *text = read_text(oa->files[i]);
		if (!text) {
			fprintf(stderr, "tcomp: error: cannot read options file '%s': %s\n",
				oa->files[i], strerror(errno));
			exit(errno == ENOMEM ? EXIT_INTERNAL : EXIT_USER);
		}
		if (tc_options_parse(o, text, ctx) < 0) {
			fprintf(stderr, "tcomp: error: %s: %s", oa->files[i], error_text(ctx));
			exit(fail_status(ctx));
		}
		free(text);
	}
	for (i = 0; i < oa->nsets; i++)
		if (tc_options_set(o, oa->names[i], oa->values[i], ctx) < 0) {
			fprintf(stderr, "tcomp: error: %s", error_text(ctx));
			exit(fail_status(ctx));
		}
	return o;
}

/* Load file and choose the def to use (*entry: -e NAME, or the only def of
 * the module), printing the module's warnings.  NULL (and *status the exit
 * status, the error printed) if the file does not load. */
__tc_give tc_module *load_entry(__tc_keep tc_context *ctx, const char *file, const char **entry,
	const char *usage, int *status)
{
	tc_module *m = tc_module_load(ctx, file);
	if (!m) {
		*status = report(ctx);
		return NULL;
	}
	fputs(tc_context_warnings(ctx), stderr);
	if (*entry)
		return m;
	if (tc_module_num_defs(m) != 1) {
		int i;
		fprintf(stderr, "tcomp: error: '%s' has several defs: choose one with -e NAME:",
			file);
		for (i = 0; i < tc_module_num_defs(m); i++)
			fprintf(stderr, "%s %s", i ? "," : "", tc_module_def_name(m, i));
		fprintf(stderr, "\n\n%s", usage);
		exit(EXIT_USER);
	}
	*entry = tc_module_def_name(m, 0);
	return m;
}

/* Parse "T=FILE". */
binding parse_binding(__tc_keep const char *arg, const char *usage)
{
	binding b;
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1])
		die_usage(usage, "expected TENSOR=FILE but found '%s'", arg);
	b.name = strndup(arg, (size_t)(eq - arg));
	b.path = eq + 1;
	b.used = 0;
	if (!b.name)
		exit(EXIT_INTERNAL);
	return b;
}

/* Take -e NAME, --entry NAME or (with shapes) --shape T=SHAPE (cli.h). */
int take_entry_arg(const char **entry, __tc_keep binding *shapes, int *nshapes, int code,
	const char *arg, const char *usage)
{
	if (code == OPT_ENTRY) {
		*entry = arg;
		return 1;
	}
	if (shapes && code == OPT_SHAPE) {
		if (*nshapes == 64)
			die_usage(usage, "%s", "too many --shape");
		shapes[(*nshapes)++] = parse_binding(arg, usage);
		return 1;
	}
	return 0;
}

/* Free the names of n bindings. */
void bindings_free(__tc_keep binding *b, int n)
{
	int i;
	for (i = 0; i < n; i++)
		free((char *)b[i].name);
}

/* Parse "4x5" (or "scalar") into shape; the rank, or -1.  Extents may be 0
 * (an empty tensor). */
int parse_shape(const char *s, __tc_keep int64_t *shape)
{
	int n = 0;
	char *end;
	if (!strcmp(s, "scalar"))
		return 0;
	for (;;) {
		long long v = strtoll(s, &end, 10);
		if (end == s || v < 0 || n == 8)
			return -1;
		shape[n++] = v;
		if (!*end)
			return n;
		if (*end != 'x')
			return -1;
		s = end + 1;
	}
}

/* Shape-only DLTensors (no data) for the inputs of entry from the --shape
 * arguments: every input named exactly once.  0 ok; -1 after printing the
 * error; exits on shape text that does not parse. */
int bind_shapes(__tc_keep tc_module *m, const char *entry, int n_in, __tc_keep binding *shapes,
	int nshapes, __tc_keep DLTensor *dl, __tc_keep int64_t (*dims)[8],
	__tc_keep const DLTensor **ptrs, const char *usage)
{
	int i, j, nd;
	for (i = 0; i < n_in; i++) {
		const char *name = tc_module_tensor_name(m, entry, i);
		for (j = 0; j < nshapes && strcmp(shapes[j].name, name); j++)
			;
		if (j == nshapes) {
			fprintf(stderr, "tcomp: error: no --shape for input '%s' of '%s'\n", name, entry);
			return -1;
		}
		shapes[j].used = 1;
		memset(&dl[i], 0, sizeof(dl[i]));
		dl[i].device.device_type = kDLCPU;
		tc_module_input_type(m, entry, i, &dl[i].dtype, &nd);
		dl[i].ndim = parse_shape(shapes[j].path, dims[i]);
		if (dl[i].ndim < 0)
			die_usage(usage, "bad shape '%s' (write it as 1024x1024, 64, or scalar)",
				shapes[j].path);
		dl[i].shape = dims[i];
		ptrs[i] = &dl[i];
	}
	for (j = 0; j < nshapes; j++)
		if (!shapes[j].used) {
			fprintf(stderr, "tcomp: error: '%s' is not an input of '%s'\n", shapes[j].name,
				entry);
			return -1;
		}
	return 0;
}

/* The inputs of entry from --shape and --in (cli.h). */
int bind_inputs(__tc_keep tc_module *m, const char *entry, int n_in, __tc_keep binding *shapes,
	int nshapes, __tc_keep binding *ins, int nin, __tc_keep tc_npy *arrays,
	__tc_keep int *from_file, __tc_keep DLTensor *dl, __tc_keep int64_t (*dims)[8],
	__tc_keep const DLTensor **ptrs, const char *usage)
{
	binding all[128];
	char text[64][8 * 21 + 8]; /* the shape of ins[j] as --shape text */
	int i, j, n = 0;
	for (i = 0; i < nshapes + nin; i++)
		for (j = 0; j < i; j++) {
			const char *x = i < nshapes ? shapes[i].name : ins[i - nshapes].name;
			const char *y = j < nshapes ? shapes[j].name : ins[j - nshapes].name;
			if (!strcmp(x, y))
				die_usage(usage, "tensor '%s' is given twice", x);
		}
	if (nshapes > 64 || nin > 64)
		die_usage(usage, "%s", "more than 64 --shape or --in");
	for (i = 0; i < n_in; i++) {
		const char *name = tc_module_tensor_name(m, entry, i);
		int found = 0;
		for (j = 0; j < nshapes + nin; j++)
			found |= !strcmp(j < nshapes ? shapes[j].name : ins[j - nshapes].name, name);
		if (!found) {
			fprintf(stderr, "tcomp: error: no --shape or --in for input '%s' of '%s'\n", name,
				entry);
			return -1;
		}
	}
	for (j = 0; j < nin; j++) { /* the files' shapes as --shape text */
		char *err = NULL, *t = text[j];
		if (tc_npy_read(ins[j].path, &arrays[j], &err) < 0) {
			fprintf(stderr, "tcomp: error: input '%s': %s\n", ins[j].name, err ? err : "?");
			tc_free(err);
			return -1;
		}
		strcpy(t, arrays[j].ndim ? "" : "scalar");
		for (i = 0; i < arrays[j].ndim; i++)
			t += sprintf(t, "%s%lld", i ? "x" : "", (long long)arrays[j].shape[i]);
	}
	for (j = 0; j < nshapes; j++)
		all[n++] = shapes[j];
	for (j = 0; j < nin; j++) {
		all[n].name = ins[j].name;
		all[n].path = text[j];
		all[n++].used = 0;
	}
	if (bind_shapes(m, entry, n_in, all, n, dl, dims, ptrs, usage) < 0)
		return -1;
	for (i = 0; i < n_in; i++) {
		const char *name = tc_module_tensor_name(m, entry, i);
		DLDataType dt;
		for (j = 0; j < nin && strcmp(ins[j].name, name); j++)
			;
		from_file[i] = j < nin ? j : -1;
		if (j == nin)
			continue;
		tc_dtype_parse(tc_dtype_name(arrays[j].dtype), &dt);
		if (dt.code != dl[i].dtype.code || dt.bits != dl[i].dtype.bits) {
			fprintf(stderr, "tcomp: error: input '%s' of '%s' is %s but %s holds %s\n", name,
				entry, tc_dtype_str(dl[i].dtype), ins[j].path,
				tc_dtype_name(arrays[j].dtype));
			return -1;
		}
	}
	return 0;
}

/* Seconds on the monotonic clock. */
double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The integer argument s of option opt, at least min; or a message and exit. */
long parse_count(const char *opt, const char *s, long min, const char *usage)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < min || v > INT32_MAX) {
		fprintf(stderr,
			"tcomp: error: %s needs an integer of at least %ld but found '%s'\n\n%s",
			opt, min, s, usage);
		exit(EXIT_USER);
	}
	return v;
}
