/* tcomp: the command-line tool.
 *
 *   tcomp check FILE.tc...
 *   tcomp run   FILE.tc [-e NAME] --in A=a.npy ... [--out C=c.npy ...] [--target cpu|interp]
 *   tcomp emit  FILE.tc [-e NAME] --stage STAGE [--shape T=4x5 ...]
 *
 * Exit codes: 0 ok, 1 user error (bad .tc text, arguments, files, shapes),
 * 2 internal error.  This is the only place in tcomp allowed to exit(). */
#include "tcomp.h"

#include "npy.h"
#include "../ir/half.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USER 1
#define EXIT_INTERNAL 2

static const char *const main_usage =
	"usage: tcomp <command> [arguments]\n"
	"\n"
	"commands:\n"
	"  check FILE.tc...            parse and check; print each def's signature\n"
	"                              with the inferred output types and shapes\n"
	"  run FILE.tc [-e NAME] --in A=a.npy ... [--out C=c.npy ...]\n"
	"                              run a def on NumPy .npy inputs\n"
	"  emit FILE.tc [-e NAME] --stage STAGE [--shape T=4x5 ...]\n"
	"                              print a compilation stage (syntax, ir,\n"
	"                              canonical, schedule, ast, c, llvm, asm)\n"
	"  options                     list the mapping options\n"
	"\n"
	"tcomp <command> --help shows the details of a command; tcomp --version\n"
	"prints the version.  Exit status: 0 ok, 1 user error, 2 internal error.\n";

static const char *const check_usage =
	"usage: tcomp check FILE.tc...\n"
	"\n"
	"Parse and check each file.  For every def, print its signature with the\n"
	"inferred output types and shapes in terms of the size parameters, e.g.\n"
	"  def mm(float32(M,K) A, float32(K,N) B) -> (float32(M,N) C)\n"
	"Errors and warnings go to stderr as file:line:col: with the source line\n"
	"and a caret.  Exit status 1 if any file has an error.\n";

static const char *const run_usage =
	"usage: tcomp run FILE.tc [-e NAME] --in T=FILE.npy ... [--out T=FILE.npy ...]\n"
	"                 [--target cpu|interp] [--option NAME=VALUE ...] [--print]\n"
	"\n"
	"Run the def NAME (optional when the file has one def) on inputs read from\n"
	"NumPy .npy files (little-endian, C order; every input named once) and write\n"
	"the outputs named with --out.  Outputs start zeroed, so a reduction without\n"
	"'!' accumulates into zeros.  A line per output says its dtype and shape.\n"
	"\n"
	"  -e, --entry NAME    the def to run\n"
	"  --in T=FILE         input tensor T from FILE (.npy)\n"
	"  --out T=FILE        write output tensor T to FILE (.npy)\n"
	"  --target T          cpu (default): compiled through isl and LLVM;\n"
	"                      interp: the bounds-checked reference interpreter\n"
	"  --option N=V        set a mapping option (see tcomp options)\n"
	"  --print             also print the outputs' values (at most 64 per output)\n";

static const char *const emit_usage =
	"usage: tcomp emit FILE.tc [-e NAME] --stage STAGE [--shape T=4x5 ...]\n"
	"\n"
	"Print a stage of compilation of the def NAME.  With --shape for every\n"
	"input the stage is specialised to those shapes (as tcomp run compiles);\n"
	"without, it is parametric in the sizes.\n"
	"  syntax     the checked syntax tree: names, types, index ranges\n"
	"  ir         the tensor IR: tensors, statements with explicit casts, and\n"
	"             each statement's domain in isl notation\n"
	"  canonical  the identifier-renamed canonical text and its hash (the\n"
	"             kernel cache's key)\n"
	"  schedule   the isl schedule tree\n"
	"  ast        the isl AST: the loop nest\n"
	"  c          the loop nest as readable C\n"
	"  llvm       the optimised LLVM IR (needs --shape)\n"
	"  asm        the host assembly (needs --shape)\n";

static void die_usage(const char *usage, const char *fmt, const char *arg)
{
	fprintf(stderr, "tcomp: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n\n%s", usage);
	exit(EXIT_USER);
}

/* Exit status for a failed library call: internal errors are 2. */
static int fail_status(tc_context *ctx)
{
	const char *e = tc_context_error(ctx);
	return strstr(e, "internal error") || strstr(e, "out of memory") ? EXIT_INTERNAL
									  : EXIT_USER;
}

static int report(tc_context *ctx)
{
	fputs(tc_context_error(ctx), stderr);
	return fail_status(ctx);
}

static int wants_help(int argc, char **argv)
{
	int i;
	for (i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

static int cmd_check(int argc, char **argv)
{
	int i, j, status = 0;
	if (wants_help(argc, argv)) {
		fputs(check_usage, stdout);
		return 0;
	}
	if (argc == 0)
		die_usage(check_usage, "%s", "check needs at least one FILE.tc");
	for (i = 0; i < argc; i++) {
		tc_context *ctx = tc_context_new();
		tc_module *m;
		if (!ctx)
			return EXIT_INTERNAL;
		if (argv[i][0] == '-')
			die_usage(check_usage, "unknown option '%s'", argv[i]);
		m = tc_module_load(ctx, argv[i]);
		if (!m) {
			int st = report(ctx);
			status = status > st ? status : st;
		} else {
			fputs(tc_context_warnings(ctx), stderr);
			for (j = 0; j < tc_module_num_defs(m); j++) {
				char *sig = tc_module_signature(m, tc_module_def_name(m, j));
				if (!sig) {
					status = report(ctx);
					continue;
				}
				printf("%s\n", sig);
				tc_string_free(sig);
			}
			tc_module_free(m);
		}
		tc_context_free(ctx);
	}
	return status;
}

/* The def to use: -e NAME, or the only def of the module. */
static const char *pick_entry(tc_module *m, const char *entry, const char *usage)
{
	if (entry)
		return entry;
	if (tc_module_num_defs(m) == 1)
		return tc_module_def_name(m, 0);
	die_usage(usage, "%s", "the file has several defs: choose one with -e NAME");
	return NULL;
}

typedef struct binding {
	const char *name, *path;
	int used;
} binding;

/* Parse "T=FILE". */
static binding parse_binding(const char *arg, const char *usage)
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

static DLTensor make_dl(const char *dtype_name, int ndim, int64_t *shape, void *data)
{
	DLTensor t;
	memset(&t, 0, sizeof(t));
	t.device.device_type = kDLCPU;
	tc_dtype_parse(dtype_name, &t.dtype);
	t.ndim = ndim;
	t.shape = shape;
	t.data = data;
	return t;
}

/* Print up to 64 values of a dense tensor, row-major, one row per line for
 * rank >= 2. */
static void print_values(const DLTensor *t)
{
	int64_t n = 1, i, row = t->ndim ? t->shape[t->ndim - 1] : 1;
	int d;
	const char *tn = tc_dtype_str(t->dtype);
	for (d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	printf("  ");
	for (i = 0; i < n && i < 64; i++) {
		const char *p = (const char *)t->data + i * (t->dtype.bits / 8);
		if (i && i % row == 0)
			printf("\n  ");
		if (!strcmp(tn, "float32"))
			printf("%.6g ", *(const float *)p);
		else if (!strcmp(tn, "float64"))
			printf("%.9g ", *(const double *)p);
		else if (t->dtype.code == kDLInt || !strcmp(tn, "bool")) {
			int64_t v = t->dtype.bits == 8 ? *(const int8_t *)p : t->dtype.bits == 16
				? *(const int16_t *)p : t->dtype.bits == 32 ? *(const int32_t *)p
				: *(const int64_t *)p;
			printf("%lld ", (long long)v);
		} else if (t->dtype.code == kDLUInt) {
			uint64_t v = t->dtype.bits == 8 ? *(const uint8_t *)p : t->dtype.bits == 16
				? *(const uint16_t *)p : t->dtype.bits == 32 ? *(const uint32_t *)p
				: *(const uint64_t *)p;
			printf("%llu ", (unsigned long long)v);
		} else {
			printf("%.5g ", tc_half_to_double(*(const uint16_t *)p));
		}
	}
	printf("%s\n", n > 64 ? "..." : "");
}

static int cmd_run(int argc, char **argv)
{
	const char *file = NULL, *entry = NULL;
	binding ins[64], outs[64];
	int nin = 0, nout = 0, i, j, n_in, n_out, status = 0, print = 0;
	tc_context *ctx;
	tc_options *opts;
	tc_module *m = NULL;
	tc_kernel *k = NULL;
	tc_npy *arrays = NULL;
	DLTensor *dl = NULL;
	const DLTensor **in_ptrs = NULL;
	DLTensor **out_ptrs = NULL;
	int64_t(*oshape)[8] = NULL;
	void **odata = NULL;

	if (wants_help(argc, argv)) {
		fputs(run_usage, stdout);
		return 0;
	}
	ctx = tc_context_new();
	opts = tc_options_new();
	if (!ctx || !opts)
		return EXIT_INTERNAL;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if ((!strcmp(a, "-e") || !strcmp(a, "--entry")) && more)
			entry = argv[++i];
		else if (!strcmp(a, "--in") && more) {
			if (nin == 64)
				die_usage(run_usage, "%s", "too many --in");
			ins[nin++] = parse_binding(argv[++i], run_usage);
		} else if (!strcmp(a, "--out") && more) {
			if (nout == 64)
				die_usage(run_usage, "%s", "too many --out");
			outs[nout++] = parse_binding(argv[++i], run_usage);
		} else if (!strcmp(a, "--target") && more) {
			if (tc_options_set(opts, "target", argv[++i], ctx) < 0)
				die_usage(run_usage, "%s", tc_context_error(ctx));
		} else if (!strcmp(a, "--option") && more) {
			binding b = parse_binding(argv[++i], run_usage);
			if (tc_options_set(opts, b.name, b.path, ctx) < 0)
				die_usage(run_usage, "%s", tc_context_error(ctx));
			free((char *)b.name);
		} else if (!strcmp(a, "--print"))
			print = 1;
		else if (a[0] == '-')
			die_usage(run_usage, "unknown or incomplete option '%s'", a);
		else if (!file)
			file = a;
		else
			die_usage(run_usage, "unexpected argument '%s'", a);
	}
	if (!file)
		die_usage(run_usage, "%s", "run needs a FILE.tc");
	for (i = 0; i < nin + nout; i++)
		for (j = 0; j < i; j++) {
			const binding *x = i < nin ? &ins[i] : &outs[i - nin];
			const binding *y = j < nin ? &ins[j] : &outs[j - nin];
			if ((i < nin) == (j < nin) && !strcmp(x->name, y->name))
				die_usage(run_usage, "tensor '%s' is given twice", x->name);
		}
	m = tc_module_load(ctx, file);
	if (!m) {
		status = report(ctx);
		goto done;
	}
	fputs(tc_context_warnings(ctx), stderr);
	entry = pick_entry(m, entry, run_usage);
	if (tc_module_def_arity(m, entry, &n_in, &n_out) < 0) {
		status = report(ctx);
		goto done;
	}
	arrays = calloc((size_t)n_in + 1, sizeof(tc_npy));
	dl = calloc((size_t)(n_in + n_out) + 1, sizeof(DLTensor));
	in_ptrs = calloc((size_t)n_in + 1, sizeof(DLTensor *));
	out_ptrs = calloc((size_t)n_out + 1, sizeof(DLTensor *));
	oshape = calloc((size_t)n_out + 1, sizeof(*oshape));
	odata = calloc((size_t)n_out + 1, sizeof(void *));
	if (!arrays || !dl || !in_ptrs || !out_ptrs || !oshape || !odata) {
		status = EXIT_INTERNAL;
		goto done;
	}
	/* inputs: every one named exactly once */
	for (i = 0; i < n_in; i++) {
		const char *name = tc_module_tensor_name(m, entry, i);
		char *err = NULL;
		for (j = 0; j < nin && strcmp(ins[j].name, name); j++)
			;
		if (j == nin) {
			fprintf(stderr, "tcomp: error: no --in for input '%s' of '%s'\n", name, entry);
			status = EXIT_USER;
			goto done;
		}
		ins[j].used = 1;
		if (tc_npy_read(ins[j].path, &arrays[i], &err) < 0) {
			fprintf(stderr, "tcomp: error: input '%s': %s\n", name, err ? err : "?");
			tc_free(err);
			status = EXIT_USER;
			goto done;
		}
		dl[i] = make_dl(tc_dtype_name(arrays[i].dtype), arrays[i].ndim, arrays[i].shape,
			arrays[i].data);
		in_ptrs[i] = &dl[i];
	}
	for (j = 0; j < nin; j++)
		if (!ins[j].used) {
			fprintf(stderr, "tcomp: error: '%s' is not an input of '%s'\n", ins[j].name, entry);
			status = EXIT_USER;
			goto done;
		}
	k = tc_compile(m, entry, in_ptrs, n_in, opts);
	if (!k) {
		status = report(ctx);
		goto done;
	}
	/* outputs: zeroed buffers of the inferred shapes */
	for (i = 0; i < n_out; i++) {
		DLDataType dt;
		int nd, e;
		int64_t n = 1;
		tc_kernel_output_shape(k, i, &dt, &nd, oshape[i]);
		for (e = 0; e < nd; e++)
			n *= oshape[i][e];
		odata[i] = calloc((size_t)n, (size_t)(dt.bits / 8));
		if (!odata[i]) {
			fprintf(stderr, "tcomp: error: cannot allocate output %d\n", i);
			status = EXIT_INTERNAL;
			goto done;
		}
		dl[n_in + i] = make_dl(tc_dtype_str(dt), nd, oshape[i], odata[i]);
		out_ptrs[i] = &dl[n_in + i];
	}
	for (j = 0; j < nout; j++) {
		for (i = 0; i < n_out && strcmp(outs[j].name, tc_module_tensor_name(m, entry, n_in + i));
			i++)
			;
		if (i == n_out) {
			fprintf(stderr, "tcomp: error: '%s' is not an output of '%s'\n", outs[j].name,
				entry);
			status = EXIT_USER;
			goto done;
		}
	}
	if (tc_kernel_run(k, in_ptrs, n_in, out_ptrs, n_out) < 0) {
		status = report(ctx);
		goto done;
	}
	for (i = 0; i < n_out; i++) {
		const char *name = tc_module_tensor_name(m, entry, n_in + i);
		const DLTensor *t = out_ptrs[i];
		printf("%s: %s[", name, tc_dtype_str(t->dtype));
		for (j = 0; j < t->ndim; j++)
			printf("%s%lld", j ? "x" : "", (long long)t->shape[j]);
		printf("]");
		for (j = 0; j < nout; j++)
			if (!strcmp(outs[j].name, name)) {
				const char *tn = tc_dtype_str(t->dtype);
				char *err = NULL;
				if (tc_npy_write(outs[j].path, tc_dtype_from_name(tn, (int)strlen(tn)),
					    t->ndim, t->shape, t->data, &err) < 0) {
					fprintf(stderr, "\ntcomp: error: output '%s': %s\n", name,
						err ? err : "?");
					tc_free(err);
					status = EXIT_USER;
					goto done;
				}
				printf(" -> %s", outs[j].path);
			}
		printf("\n");
		if (print)
			print_values(t);
	}
done:
	tc_kernel_free(k);
	tc_module_free(m);
	for (i = 0; arrays && i < n_in; i++)
		tc_npy_free(&arrays[i]);
	for (i = 0; odata && i < n_out; i++)
		free(odata[i]);
	free(arrays);
	free(dl);
	free(in_ptrs);
	free(out_ptrs);
	free(oshape);
	free(odata);
	for (i = 0; i < nin; i++)
		free((char *)ins[i].name);
	for (i = 0; i < nout; i++)
		free((char *)outs[i].name);
	tc_options_free(opts);
	tc_context_free(ctx);
	return status;
}

/* Parse "4x5" (or "scalar") into shape; the rank, or -1. */
static int parse_shape(const char *s, int64_t *shape)
{
	int n = 0;
	char *end;
	if (!strcmp(s, "scalar"))
		return 0;
	for (;;) {
		long long v = strtoll(s, &end, 10);
		if (end == s || v < 1 || n == 8)
			return -1;
		shape[n++] = v;
		if (!*end)
			return n;
		if (*end != 'x')
			return -1;
		s = end + 1;
	}
}

static int cmd_emit(int argc, char **argv)
{
	const char *file = NULL, *entry = NULL, *stage = NULL;
	binding shapes[64];
	int nshapes = 0, i, j, n_in, n_out, status = 0;
	tc_context *ctx;
	tc_module *m;
	tc_kernel *k = NULL;
	char *text;

	if (wants_help(argc, argv)) {
		fputs(emit_usage, stdout);
		return 0;
	}
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < argc;
		if ((!strcmp(a, "-e") || !strcmp(a, "--entry")) && more)
			entry = argv[++i];
		else if (!strcmp(a, "--stage") && more)
			stage = argv[++i];
		else if (!strcmp(a, "--shape") && more) {
			if (nshapes == 64)
				die_usage(emit_usage, "%s", "too many --shape");
			shapes[nshapes++] = parse_binding(argv[++i], emit_usage);
		} else if (a[0] == '-')
			die_usage(emit_usage, "unknown or incomplete option '%s'", a);
		else if (!file)
			file = a;
		else
			die_usage(emit_usage, "unexpected argument '%s'", a);
	}
	if (!file)
		die_usage(emit_usage, "%s", "emit needs a FILE.tc");
	if (!stage)
		die_usage(emit_usage, "%s", "emit needs --stage");
	ctx = tc_context_new();
	if (!ctx)
		return EXIT_INTERNAL;
	m = tc_module_load(ctx, file);
	if (!m) {
		status = report(ctx);
		tc_context_free(ctx);
		return status;
	}
	fputs(tc_context_warnings(ctx), stderr);
	entry = pick_entry(m, entry, emit_usage);
	if (nshapes) { /* specialise: bind the shapes (no data is read) */
		int64_t dims[64][8];
		DLTensor dl[64];
		const DLTensor *ptrs[64];
		tc_options *o = tc_options_new();
		if (!o || tc_module_def_arity(m, entry, &n_in, &n_out) < 0 || n_in > 64) {
			status = report(ctx);
			goto done;
		}
		tc_options_set(o, "target", "interp", ctx); /* no need to JIT */
		for (i = 0; i < n_in; i++) {
			const char *name = tc_module_tensor_name(m, entry, i);
			int nd;
			for (j = 0; j < nshapes && strcmp(shapes[j].name, name); j++)
				;
			if (j == nshapes) {
				fprintf(stderr, "tcomp: error: no --shape for input '%s' of '%s'\n", name,
					entry);
				status = EXIT_USER;
				tc_options_free(o);
				goto done;
			}
			shapes[j].used = 1;
			memset(&dl[i], 0, sizeof(dl[i]));
			dl[i].device.device_type = kDLCPU;
			tc_module_input_type(m, entry, i, &dl[i].dtype, &nd);
			dl[i].ndim = parse_shape(shapes[j].path, dims[i]);
			if (dl[i].ndim < 0)
				die_usage(emit_usage, "bad shape '%s' (write it as 64x32, or scalar)",
					shapes[j].path);
			dl[i].shape = dims[i];
			ptrs[i] = &dl[i];
		}
		for (j = 0; j < nshapes; j++)
			if (!shapes[j].used)
				die_usage(emit_usage, "'%s' is not an input", shapes[j].name);
		k = tc_compile(m, entry, ptrs, n_in, o);
		tc_options_free(o);
		if (!k) {
			status = report(ctx);
			goto done;
		}
		text = tc_kernel_emit(k, stage);
	} else {
		text = tc_module_emit(m, entry, stage);
	}
	if (!text) {
		status = report(ctx);
	} else {
		fputs(text, stdout);
		if (!strcmp(stage, "canonical")) {
			char hash[17];
			if (tc_module_hash(m, entry, hash) == 0)
				printf("# hash %s\n", hash);
		}
		tc_string_free(text);
	}
done:
	for (i = 0; i < nshapes; i++)
		free((char *)shapes[i].name);
	tc_kernel_free(k);
	tc_module_free(m);
	tc_context_free(ctx);
	return status;
}

static int cmd_options(int argc, char **argv)
{
	char *text;
	(void)argc;
	(void)argv;
	text = tc_options_describe();
	if (!text)
		return EXIT_INTERNAL;
	fputs(text, stdout);
	tc_string_free(text);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd;
	if (argc < 2) {
		fputs(main_usage, stderr);
		return EXIT_USER;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(main_usage, stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("tcomp %s\n", TCOMP_VERSION);
		return 0;
	}
	if (!strcmp(cmd, "check"))
		return cmd_check(argc - 2, argv + 2);
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(cmd, "emit"))
		return cmd_emit(argc - 2, argv + 2);
	if (!strcmp(cmd, "options"))
		return cmd_options(argc - 2, argv + 2);
	fprintf(stderr, "tcomp: unknown command '%s'\n\n%s", cmd, main_usage);
	return EXIT_USER;
}
