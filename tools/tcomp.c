/* tcomp: the command-line tool.
 *
 *   tcomp check FILE.tc...
 *   tcomp run   FILE.tc [-e NAME] --in A=a.npy ... [--out C=c.npy ...] [--target T]
 *   tcomp emit  FILE.tc [-e NAME] --stage STAGE [--shape T=4x5 ...]
 *   tcomp bench FILE.tc [-e NAME] --shape T=4x5 ... [--runs R] [--json]
 *   tcomp options
 *   tcomp autotune FILE.tc [-e NAME] --shape T=4x5 ... [--generations G] ...  (tools/cmd_autotune.c)
 *   tcomp cache list|show|export|import|prune|path   (tools/cmd_cache.c)
 *   tcomp grad FILE.tc [-e NAME] [--wrt A,B] [--saves] [-o OUT.tc]   (tools/cmd_grad.c)
 *   tcomp vmap FILE.tc [-e NAME] --batch A,B --size E [-o OUT.tc]   (tools/cmd_vmap.c)
 * run, emit and bench take mapping options with --options FILE and
 * --option NAME=VALUE (see runtime/options.c).
 *
 * Exit codes: 0 ok, 1 user error (bad .tc text, arguments, files, shapes),
 * 2 internal error.  This is the only place in tcomp allowed to exit(). */
#include "tcomp.h"

#include "cli.h"
#include "npy.h"
#include "../ir/half.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	"  bench FILE.tc [-e NAME] --shape T=1024x1024 ... [--runs R] [--json]\n"
	"                              time a def on random inputs of those shapes\n"
	"  options                     list the mapping options\n"
	"  autotune FILE.tc [-e NAME] --shape T=1024x1024 ... [--generations G]\n"
	"                              search the fastest mapping options for\n"
	"                              those shapes and print them\n"
	"  cache list|show|export|import|prune\n"
	"                              manage the kernel cache of tuned options\n"
	"  grad FILE.tc [-e NAME] [--wrt A,B] [--saves] [-o OUT.tc]\n"
	"                              print the backward def (gradients) as .tc\n"
	"  vmap FILE.tc [-e NAME] --batch A,B --size E [-o OUT.tc]\n"
	"                              print the def batched over a leading model\n"
	"                              dimension of extent E (A and B batched)\n"
	"\n"
	"run, emit and bench take mapping options: --options FILE (name=value\n"
	"lines) and --option NAME=VALUE (repeatable, applied after --options).\n"
	"Without them, run and bench use the kernel cache's best options for the\n"
	"kernel and shapes (--cache PATH, --no-cache; see tcomp cache --help);\n"
	"with --threads N alone, those options with N threads.\n"
	"\n"
	"Options take their value as --name VALUE or --name=VALUE, before or after\n"
	"the file.  tcomp <command> --help shows the details of a command; tcomp\n"
	"--version prints the version.  Errors are printed as 'tcomp: error: ...'\n"
	"(located ones as FILE:LINE:COL: error: ...).  Exit status: 0 ok, 1 user\n"
	"error, 2 out of memory or internal error.\n";

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
	"                 [--target T] [--options FILE] [--option NAME=VALUE ...]\n"
	"                 [--print] [--cache PATH | --no-cache] [--cache-result-options]\n"
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
	"                      interp: the bounds-checked reference interpreter;\n"
	"                      cuda: an NVIDIA GPU (CUDA C through NVRTC, run by\n"
	"                      the CUDA driver): the inputs are copied to device\n"
	"                      memory and the outputs back; cuda-emu: that CUDA\n"
	"                      code run on the CPU by tcomp's emulator, which\n"
	"                      reports out-of-bounds accesses and races (slow:\n"
	"                      for checking a mapping without a GPU)\n"
	"  --options FILE      mapping options from FILE: name=value pairs separated\n"
	"                      by newlines, ';' or blanks, '#' comments (the format\n"
	"                      of tc_options_parse; see tcomp options)\n"
	"  --option N=V        set a mapping option, after --options (repeatable);\n"
	"                      --target T is --option target=T\n"
	"  --gpu-arch A        --option gpu_arch=A (target=cuda: sm_70 ... sm_120)\n"
	"  --threads N         threads for parallel loops (threads=N; alone, it\n"
	"                      keeps the kernel cache's options, see below)\n"
	"  --print             also print the outputs' values (at most 64 per output)\n"
	"  --cache PATH        the kernel cache to read (default: $TCOMP_CACHE, else\n"
	"                      ~/.cache/tcomp/kernels.sqlite; see tcomp cache --help)\n"
	"  --no-cache          do not read the kernel cache\n"
	"  --cache-result-options  also take the options that change results\n"
	"                      (target, contract, fastmath) from the\n"
	"                      kernel cache; without it they keep their defaults\n"
	"                      (a note says which an entry set)\n"
	"Options take their value as --name VALUE or --name=VALUE.\n"
	"Without --options, --option, --target and --threads, the options are the\n"
	"kernel cache's best for these shapes, else for the nearest shapes, else\n"
	"the best tuned on another CPU of this architecture (a note says so), else\n"
	"the defaults.  With --threads N alone, the same with threads=N: the\n"
	"cache's entry as it is when it was tuned for N threads, else with\n"
	"threads=N; the defaults with threads=N when the cache has none.\n";

static const char *const emit_usage =
	"usage: tcomp emit FILE.tc [-e NAME] --stage STAGE [--shape T=4x5 ...]\n"
	"                  [--options FILE] [--option NAME=VALUE ...] [--target T]\n"
	"                  [--gpu-arch sm_XX]\n"
	"\n"
	"Print a stage of compilation of the def NAME.  With --shape for every\n"
	"input the stage is specialised to those shapes (as tcomp run compiles);\n"
	"without, it is parametric in the sizes.  --options FILE and --option N=V\n"
	"(as for tcomp run; --target T is --option target=T) compile the kernel\n"
	"with those mapping options; they need --shape.  With --target cuda\n"
	"(--option target=cuda) the schedule passes are the\n"
	"GPU's (scheduler, fusion, fuse-nests, gpu-fusion, order, gpu, mark), the\n"
	"stage c is replaced by cuda, ptx and cuda-resources, and --gpu-arch sm_XX\n"
	"(--option gpu_arch=sm_XX) compiles for that architecture (default: the\n"
	"device's, sm_90 without one; no GPU or driver is needed).\n"
	"  syntax     the checked syntax tree: names, types, index ranges\n"
	"  ir         the tensor IR: tensors, statements with explicit casts, and\n"
	"             each statement's domain in isl notation\n"
	"  canonical  the identifier-renamed canonical text and its hash (the\n"
	"             kernel cache's key)\n"
	"  schedule   the isl schedule tree\n"
	"  schedule:PASS  the schedule tree after the schedule pass PASS, in\n"
	"             order: scheduler, fusion, fuse-nests, pack, merge, order,\n"
	"             interchange, tile, regtile, parallel, check, hoist,\n"
	"             collapse, mark, rowbuf (polyhedral/README.md says what\n"
	"             each does)\n"
	"  schedule:all   the tree after every pass in turn, each under a line\n"
	"             \"# after PASS\" (a lowering log)\n"
	"  ast        the isl AST: the loop nest\n"
	"  c          the loop nest as readable C\n"
	"  llvm       the optimised LLVM IR (needs --shape)\n"
	"  asm        the host assembly (needs --shape)\n"
	"  cuda       target=cuda: the CUDA C, one __global__ function per kernel\n"
	"             with its launch configuration (needs --shape)\n"
	"  ptx        target=cuda: NVRTC's PTX (needs --shape)\n"
	"  cuda-resources  target=cuda: ptxas's registers, spills and shared\n"
	"             memory per kernel for the architecture (needs --shape)\n";

static const char *const bench_usage =
	"usage: tcomp bench FILE.tc [-e NAME] --shape T=1024x1024 ... [--in T=FILE.npy ...]\n"
	"                   [--options FILE] [--option NAME=VALUE ...] [--target T]\n"
	"                   [--runs R] [--warmup W] [--min-time SECONDS] [--json]\n"
	"                   [--cache PATH | --no-cache] [--cache-result-options]\n"
	"\n"
	"Time the def NAME (optional when the file has one def) compiled for inputs\n"
	"of the given shapes (--shape or --in for every input).  An input given by\n"
	"--in has the shape and values of its .npy file (as in tcomp run): time a\n"
	"kernel whose speed depends on its data (a comparison that decides a branch,\n"
	"gather indices) on real data.  Inputs given by --shape get random values\n"
	"from a fixed seed: floats uniform in [-1,1) without 0; integers in [1,H]\n"
	"with H = min(16, E - 1), where E is the smallest extent of any dimension\n"
	"of any input or output, so that the values are non-zero and in bounds\n"
	"when a kernel uses them as gather indices into any dimension (all 0 when\n"
	"E is 0 or 1); bools 0 or 1.  Outputs are allocated; every buffer is touched\n"
	"once before timing and reused by every run (outputs are not reset\n"
	"between runs).  Then W warm-up runs, and timed runs until there have been\n"
	"at least R and they took at least SECONDS in all.\n"
	"\n"
	"Prints the compile time (tc_compile: IR to callable kernel; it includes\n"
	"creating the JIT, which the first CPU compile of a process does), the\n"
	"median and minimum time of a run, GFLOP/s and GB/s at the median time\n"
	"(the operation and byte counts of tc_kernel_stats: the domain points\n"
	"times the + - * / and builtin calls of each statement plus 1 per\n"
	"reduction combine; the bytes of all inputs and outputs once), and the\n"
	"options used and where they came from: without --options, --option,\n"
	"--target and --threads, the kernel cache's best for these shapes\n"
	"(cache), else for the nearest shapes (cache-near), else the best tuned on\n"
	"another CPU of this architecture (cache-other-cpu), else the defaults;\n"
	"target, contract and fastmath keep their defaults unless\n"
	"--cache-result-options is given.\n"
	"--threads N alone looks the cache up too: an entry tuned for N threads\n"
	"is used as it is (cache, cache-near), another with threads=N\n"
	"(cache+threads, cache-near+threads); without an entry, the defaults with\n"
	"threads=N (default+threads).\n"
	"\n"
	"  -e, --entry NAME    the def to time\n"
	"  --shape T=SHAPE     shape of input T: 1024x1024, 64, 3x0, or scalar\n"
	"  --in T=FILE         input T from FILE (.npy: its dtype must be the def's)\n"
	"  --options FILE      mapping options from FILE (see tcomp run --help)\n"
	"  --option N=V        set a mapping option, after --options (repeatable)\n"
	"  --target T          the same as --option target=T: cpu, interp, cuda\n"
	"                      (the buffers in device memory, each run timed by\n"
	"                      CUDA events recorded around its launches on the\n"
	"                      stream), cuda-emu (the CUDA code emulated on the\n"
	"                      CPU, timed by the host's clock: for checking, not\n"
	"                      a GPU's speed; the output says \"emulated\")\n"
	"  --gpu-arch A        --option gpu_arch=A (target=cuda: sm_70 ... sm_120)\n"
	"  --threads N         threads=N, the cache still read (see above);\n"
	"                      --option threads=N reads no cache\n"
	"  --runs R            at least R timed runs (default 10)\n"
	"  --warmup W          W untimed runs first (default 2)\n"
	"  --min-time S        time runs for at least S seconds in all (default 1)\n"
	"  --cache PATH        the kernel cache to read (see tcomp cache --help)\n"
	"  --no-cache          do not read the kernel cache\n"
	"  --cache-result-options  take target, contract and fastmath\n"
	"                      from the kernel cache too\n"
	"  --json              print one JSON object on one line instead:\n"
	"                      {\"kernel\":..., \"shapes\":{\"A\":[1024,1024],...},\n"
	"                      \"median_ms\":..., \"min_ms\":..., \"runs\":...,\n"
	"                      \"compile_ms\":..., \"gflops\":..., \"gbs\":...,\n"
	"                      \"options\":\"target=cpu;...\", \"source\":\"default\",\n"
	"                      \"device\":\"cpu\", \"timer\":\"host-clock\",\n"
	"                      \"emulated\":false} (device: the target; timer:\n"
	"                      cuda-events for cuda; emulated: true for cuda-emu)\n"
	"                      (gflops and gbs are null when not computable;\n"
	"                      source is \"cache\", \"cache-near\",\n"
	"                      \"cache-other-cpu\", \"default\", the same with\n"
	"                      \"+threads\" (--threads N alone, see\n"
	"                      above), or \"file\" when --options, --option or\n"
	"                      --target set options)\n";

static const char *const options_usage =
	"usage: tcomp options\n"
	"\n"
	"List the mapping options: name, allowed values, default and meaning.\n"
	"Set them with --options FILE (name=value pairs, one per line or separated\n"
	"by ';' or blanks, '#' comments) or --option NAME=VALUE on tcomp run, emit\n"
	"and bench.\n";

static int cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_HELP, CLI_END};
	int i, j, status = 0;
	while (cli_next_opt(argc, argv, "h", longopts, check_usage) != -1)
		; /* no options but --help */
	if (optind >= argc)
		die_usage(check_usage, "%s", "check needs at least one FILE.tc");
	for (i = optind; i < argc; i++) {
		tc_context *ctx = tc_context_new();
		tc_module *m;
		if (!ctx)
			return EXIT_INTERNAL;
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

static int tensor_size(int ndim, const int64_t *shape, DLDataType dt, int64_t *n, size_t *bytes);

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
	for (d = 0; d < t->ndim; d++) /* at most 64 printed: stop counting there */
		n = t->shape[d] == 0 ? 0 : n > 64 ? n : n * t->shape[d];
	for (d = 0; d < t->ndim; d++)
		n = t->shape[d] == 0 ? 0 : n;
	printf("  ");
	for (i = 0; i < n && i < 64; i++) {
		const char *p = (const char *)t->data + i * (t->dtype.bits / 8);
		if (i && i % row == 0)
			printf("\n  ");
		if (!strcmp(tn, "float32"))
			printf("%.6g ", *(const float *)p);
		else if (!strcmp(tn, "float64"))
			printf("%.9g ", *(const double *)p);
		else if (!strcmp(tn, "bfloat16"))
			printf("%.4g ", tc_bf16_to_double(*(const uint16_t *)p));
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

/* A copy of nbytes of host data on dev (kDLCUDA: tc_device_alloc and
 * tc_device_copy), into *out; 0, or -1 after printing the error (what
 * names the tensor).  The caller frees *out with tc_device_free. */
static int to_device(tc_context *ctx, DLDevice dev, const void *host, size_t nbytes,
	const char *what, void **out)
{
	if (tc_device_alloc(ctx, dev, nbytes, out) < 0 ||
		tc_device_copy(ctx, *out, dev, host, (DLDevice){kDLCPU, 0}, nbytes) < 0) {
		fprintf(stderr, "tcomp: error: tensor '%s': %s\n", what, error_text(ctx));
		return -1;
	}
	return 0;
}

/* The bytes of DLTensor t (dense; shapes checked already). */
static size_t dl_bytes(const DLTensor *t)
{
	size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
	int i;
	for (i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	return n;
}

static int cmd_run(int argc, char **argv)
{
	const char *file = NULL, *entry = NULL;
	binding ins[64], outs[64];
	int nin = 0, nout = 0, i, j, n_in, n_out, status = 0, print = 0, user_options, lookup;
	size_t nwarn;
	tc_context *ctx;
	tc_options *opts, *copts = NULL;
	const char *threads, *source;
	opt_args oa = {0};
	cache_args ca = {0};
	tc_module *m = NULL;
	tc_kernel *k = NULL;
	tc_npy *arrays = NULL;
	DLTensor *dl = NULL;
	const DLTensor **in_ptrs = NULL;
	DLTensor **out_ptrs = NULL;
	int64_t(*oshape)[8] = NULL;
	void **odata = NULL, **ddata = NULL; /* ddata: device copies (--target cuda) */
	DLDevice dev = {kDLCPU, 0};

	enum { OPT_IN = OPT_COMMAND, OPT_OUT, OPT_PRINT };
	static const struct option longopts[] = {CLI_HELP, CLI_ENTRY, CLI_MAPPING, CLI_TARGET,
		CLI_CACHE, {"in", required_argument, NULL, OPT_IN},
		{"out", required_argument, NULL, OPT_OUT}, {"print", no_argument, NULL, OPT_PRINT},
		CLI_END};
	int c;

	if (wants_help(argc, argv)) {
		fputs(run_usage, stdout);
		return 0;
	}
	ctx = tc_context_new();
	if (!ctx)
		return EXIT_INTERNAL;
	while ((c = cli_next_opt(argc, argv, "he:", longopts, run_usage)) != -1) {
		if (take_entry_arg(&entry, NULL, NULL, c, optarg, run_usage))
			;
		else if (c == OPT_IN) {
			if (nin == 64)
				die_usage(run_usage, "%s", "too many --in");
			ins[nin++] = parse_binding(optarg, run_usage);
		} else if (c == OPT_OUT) {
			if (nout == 64)
				die_usage(run_usage, "%s", "too many --out");
			outs[nout++] = parse_binding(optarg, run_usage);
		} else if (take_opt_arg(&oa, c, optarg, run_usage) ||
			   take_cache_arg(&ca, c, optarg))
			;
		else if (c == OPT_PRINT)
			print = 1;
	}
	for (i = optind; i < argc; i++) {
		const char *a = argv[i];
		if (!file)
			file = a;
		else
			die_usage(run_usage, "unexpected argument '%s'", a);
	}
	if (!file)
		die_usage(run_usage, "%s", "run needs a FILE.tc");
	user_options = oa.nfiles || oa.nsets;
	lookup = cache_lookup_only(&oa, &threads);
	opts = build_options(&oa, ctx);
	opt_args_free(&oa);
	apply_cache_args(&ca, ctx);
	/* target=cuda: the tensors in device memory, copied in and out */
	if (user_options)
		dev.device_type = tc_options_device(opts);
	for (i = 0; i < nin + nout; i++)
		for (j = 0; j < i; j++) {
			const binding *x = i < nin ? &ins[i] : &outs[i - nin];
			const binding *y = j < nin ? &ins[j] : &outs[j - nin];
			if ((i < nin) == (j < nin) && !strcmp(x->name, y->name))
				die_usage(run_usage, "tensor '%s' is given twice", x->name);
		}
	m = load_entry(ctx, file, &entry, run_usage, &status);
	if (!m)
		goto done;
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
	ddata = calloc((size_t)(n_in + n_out) + 1, sizeof(void *));
	if (!arrays || !dl || !in_ptrs || !out_ptrs || !oshape || !odata || !ddata) {
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
		if (dev.device_type != kDLCPU) {
			if (to_device(ctx, dev, arrays[i].data, dl_bytes(&dl[i]), name, &ddata[i]) < 0) {
				status = fail_status(ctx);
				goto done;
			}
			dl[i].data = ddata[i];
			dl[i].device = dev;
		}
		in_ptrs[i] = &dl[i];
	}
	for (j = 0; j < nin; j++)
		if (!ins[j].used) {
			fprintf(stderr, "tcomp: error: '%s' is not an input of '%s'\n", ins[j].name, entry);
			status = EXIT_USER;
			goto done;
		}
	/* --threads N, --target T alone: the cache's entry for T, with N threads */
	if (lookup)
		copts = threads_cache_options(&ca, m, entry, in_ptrs, n_in, opts, threads, &source);
	nwarn = strlen(tc_context_warnings(ctx));
	k = tc_compile(m, entry, in_ptrs, n_in, lookup ? copts : user_options ? opts : NULL);
	print_new_warnings(ctx, nwarn);
	if (!k) {
		status = report(ctx);
		goto done;
	}
	/* outputs: zeroed buffers of the inferred shapes (tc_compile refuses
	 * shapes whose bytes overflow; checked again here, as every size
	 * product is) */
	for (i = 0; i < n_out; i++) {
		DLDataType dt;
		int nd;
		int64_t n;
		size_t nb;
		tc_kernel_output_shape(k, i, &dt, &nd, oshape[i]);
		if (tensor_size(nd, oshape[i], dt, &n, &nb) < 0) {
			fprintf(stderr, "tcomp: error: output '%s' is too large\n",
				tc_module_tensor_name(m, entry, n_in + i));
			status = EXIT_USER;
			goto done;
		}
		odata[i] = calloc(nb ? nb : 1, 1); /* an empty output too */
		if (!odata[i]) {
			fprintf(stderr, "tcomp: error: cannot allocate output %d\n", i);
			status = EXIT_INTERNAL;
			goto done;
		}
		dl[n_in + i] = make_dl(tc_dtype_str(dt), nd, oshape[i], odata[i]);
		if (dev.device_type != kDLCPU) {
			if (to_device(ctx, dev, odata[i], nb ? nb : 1,
				    tc_module_tensor_name(m, entry, n_in + i), &ddata[n_in + i]) < 0) {
				status = fail_status(ctx);
				goto done;
			}
			dl[n_in + i].data = ddata[n_in + i];
			dl[n_in + i].device = dev;
		}
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
	/* outputs back from the device */
	for (i = 0; dev.device_type != kDLCPU && i < n_out; i++) {
		if (tc_device_copy(ctx, odata[i], (DLDevice){kDLCPU, 0}, ddata[n_in + i], dev,
			    dl_bytes(&dl[n_in + i])) < 0) {
			fprintf(stderr, "tcomp: error: output '%s': %s\n",
				tc_module_tensor_name(m, entry, n_in + i), error_text(ctx));
			status = fail_status(ctx);
			goto done;
		}
		dl[n_in + i].data = odata[i];
		dl[n_in + i].device.device_type = kDLCPU;
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
	for (i = 0; ddata && i < n_in + n_out; i++)
		tc_device_free(ctx, dev, ddata[i]);
	free(ddata);
	free(arrays);
	free(dl);
	free(in_ptrs);
	free(out_ptrs);
	free(oshape);
	free(odata);
	bindings_free(ins, nin);
	bindings_free(outs, nout);
	tc_options_free(opts);
	tc_options_free(copts);
	tc_context_free(ctx);
	return status;
}

static int cmd_emit(int argc, char **argv)
{
	const char *file = NULL, *entry = NULL, *stage = NULL;
	binding shapes[64];
	int nshapes = 0, i, n_in, n_out, status = 0;
	tc_context *ctx;
	tc_options *o;
	opt_args oa = {0};
	tc_module *m;
	tc_kernel *k = NULL;
	char *text;
	size_t nwarn;

	enum { OPT_STAGE = OPT_COMMAND };
	static const struct option longopts[] = {CLI_HELP, CLI_ENTRY, CLI_SHAPE, CLI_MAPPING,
		CLI_GPU_ARCH, {"target", required_argument, NULL, OPT_TARGET},
		{"stage", required_argument, NULL, OPT_STAGE}, CLI_END};
	int c;

	if (wants_help(argc, argv)) {
		fputs(emit_usage, stdout);
		return 0;
	}
	while ((c = cli_next_opt(argc, argv, "he:", longopts, emit_usage)) != -1) {
		if (take_entry_arg(&entry, shapes, &nshapes, c, optarg, emit_usage) ||
			take_opt_arg(&oa, c, optarg, emit_usage))
			;
		else if (c == OPT_STAGE)
			stage = optarg;
	}
	for (i = optind; i < argc; i++) {
		if (!file)
			file = argv[i];
		else
			die_usage(emit_usage, "unexpected argument '%s'", argv[i]);
	}
	if (!file)
		die_usage(emit_usage, "%s", "emit needs a FILE.tc");
	if (!stage)
		die_usage(emit_usage, "%s", "emit needs --stage");
	if ((oa.nfiles || oa.nsets) && !nshapes)
		die_usage(emit_usage, "%s",
			"--options and --option apply to a compiled kernel: give --shape for every input");
	ctx = tc_context_new();
	if (!ctx)
		return EXIT_INTERNAL;
	o = build_options(&oa, ctx);
	opt_args_free(&oa);
	/* without options of the user's, the interpreter target: no need to JIT */
	if (!oa.nfiles && !oa.nsets)
		tc_options_set(o, "target", "interp", ctx);
	m = load_entry(ctx, file, &entry, emit_usage, &status);
	if (!m) {
		tc_options_free(o);
		tc_context_free(ctx);
		return status;
	}
	nwarn = strlen(tc_context_warnings(ctx)); /* the check's were printed */
	if (nshapes) { /* specialise: bind the shapes (no data is read) */
		int64_t dims[64][8];
		DLTensor dl[64];
		const DLTensor *ptrs[64];
		if (tc_module_def_arity(m, entry, &n_in, &n_out) < 0 || n_in > 64) {
			status = report(ctx);
			goto done;
		}
		if (bind_shapes(m, entry, n_in, shapes, nshapes, dl, dims, ptrs, emit_usage) < 0) {
			status = EXIT_USER;
			goto done;
		}
		for (int i = 0; i < n_in; i++) /* no data: on the target's device */
			dl[i].device.device_type = tc_options_device(o);
		k = tc_compile(m, entry, ptrs, n_in, o);
		if (!k) {
			status = report(ctx);
			goto done;
		}
		text = tc_kernel_emit(k, stage);
	} else {
		text = tc_module_emit(m, entry, stage);
	}
	print_new_warnings(ctx, nwarn); /* e.g. a schedule past isl's budget */
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
	bindings_free(shapes, nshapes);
	tc_kernel_free(k);
	tc_module_free(m);
	tc_options_free(o);
	tc_context_free(ctx);
	return status;
}

/* ---- bench ---- */

static uint64_t bench_rng = 0x2545F4914F6CDD1DULL;
static uint64_t next_rand(void)
{
	bench_rng ^= bench_rng << 13;
	bench_rng ^= bench_rng >> 7;
	bench_rng ^= bench_rng << 17;
	return bench_rng;
}

/* Uniform in [-1,1) without 0. */
static double rand_float(void)
{
	double r;
	do
		r = (double)(next_rand() >> 11) * 0x1p-52 - 1.0;
	while (r == 0.0);
	return r;
}

/* Fill n elements of dtype with random values (see bench_usage); integers
 * are in [1, ihi] (0 when ihi is 0). */
static void fill_random(void *data, int64_t n, DLDataType dt, int64_t ihi)
{
	int64_t i;
	for (i = 0; i < n; i++) {
		if (dt.code == kDLBfloat) {
			uint16_t h = tc_bf16_from_double(rand_float());
			if (!(h & 0x7fff)) /* rounded to zero (cannot happen: |r| >= 2^-52) */
				h = tc_bf16_from_double(0.5);
			((uint16_t *)data)[i] = h;
		} else if (dt.code == kDLFloat) {
			double r = rand_float();
			if (dt.bits == 16) {
				uint16_t h = tc_half_from_double(r);
				if (!(h & 0x7fff)) /* rounded to zero */
					h = tc_half_from_double(r < 0 ? -0.5 : 0.5);
				((uint16_t *)data)[i] = h;
			} else if (dt.bits == 32) {
				float f = (float)r;
				((float *)data)[i] = f != 0 ? f : 0.5f;
			} else {
				((double *)data)[i] = r;
			}
		} else if (dt.code == TC_DL_BOOL) {
			((uint8_t *)data)[i] = (uint8_t)(next_rand() >> 63);
		} else {
			uint64_t v = ihi ? 1 + next_rand() % (uint64_t)ihi : 0;
			switch (dt.bits) {
			case 8: ((uint8_t *)data)[i] = (uint8_t)v; break;
			case 16: ((uint16_t *)data)[i] = (uint16_t)v; break;
			case 32: ((uint32_t *)data)[i] = (uint32_t)v; break;
			default: ((uint64_t *)data)[i] = v; break;
			}
		}
	}
}

/* Elements and bytes of a tensor shape; -1 on overflow. */
static int tensor_size(int ndim, const int64_t *shape, DLDataType dt, int64_t *n, size_t *bytes)
{
	int d;
	*n = 1;
	for (d = 0; d < ndim; d++)
		if (__builtin_mul_overflow(*n, shape[d], n))
			return -1;
	if (__builtin_mul_overflow((size_t)*n, (size_t)((dt.bits + 7) / 8), bytes))
		return -1;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* A JSON string (tcomp's names and option values need no escapes beyond
 * these, but every byte is handled). */
static void put_json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* A finite number, or null. */
static void put_json_number(double v)
{
	if (isfinite(v))
		printf("%.6g", v);
	else
		printf("null");
}

static int cmd_bench(int argc, char **argv)
{
	const char *file = NULL, *entry = NULL;
	binding shapes[64], ins[64];
	tc_npy arrays[64]; /* the data of ins[j] */
	int from_file[64]; /* input i: its index in ins, or -1 */
	int nshapes = 0, nin = 0, i, j, n_in = 0, n_out = 0, status = 0, json = 0, nruns = 0;
	long runs = 10, warmup = 2;
	double min_time = 1.0, t0, compile_s, total = 0, median, best, flops = -1, bytes = -1;
	int64_t dims[64][8], oshape[64][8], min_ext = INT64_MAX, ihi;
	DLTensor dl[128];
	const DLTensor *in_ptrs[64];
	DLTensor *out_ptrs[64];
	void *bufs[128] = {0}, *dbufs[128] = {0}; /* dbufs: device copies (target=cuda) */
	DLDevice dev = {kDLCPU, 0};
	const char *target = "cpu";
	double *times = NULL;
	size_t cap = 0;
	tc_context *ctx;
	tc_options *o, *copts = NULL;
	opt_args oa = {0};
	tc_module *m = NULL;
	tc_kernel *k = NULL;
	char *optext = NULL, *p;
	const char *source = NULL, *threads;
	cache_args ca = {0};
	int user_options, lookup;
	size_t nwarn;

	enum { OPT_RUNS = OPT_COMMAND, OPT_WARMUP, OPT_MIN_TIME, OPT_JSON, OPT_IN };
	static const struct option longopts[] = {CLI_HELP, CLI_ENTRY, CLI_SHAPE, CLI_MAPPING,
		CLI_TARGET, CLI_CACHE, {"in", required_argument, NULL, OPT_IN},
		{"runs", required_argument, NULL, OPT_RUNS},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"min-time", required_argument, NULL, OPT_MIN_TIME},
		{"json", no_argument, NULL, OPT_JSON}, CLI_END};
	int c;

	if (wants_help(argc, argv)) {
		fputs(bench_usage, stdout);
		return 0;
	}
	memset(arrays, 0, sizeof(arrays));
	while ((c = cli_next_opt(argc, argv, "he:", longopts, bench_usage)) != -1) {
		if (take_entry_arg(&entry, shapes, &nshapes, c, optarg, bench_usage) ||
			take_opt_arg(&oa, c, optarg, bench_usage) || take_cache_arg(&ca, c, optarg))
			;
		else if (c == OPT_IN) {
			if (nin == 64)
				die_usage(bench_usage, "%s", "too many --in");
			ins[nin++] = parse_binding(optarg, bench_usage);
		} else if (c == OPT_RUNS)
			runs = parse_count("--runs", optarg, 1, bench_usage);
		else if (c == OPT_WARMUP)
			warmup = parse_count("--warmup", optarg, 0, bench_usage);
		else if (c == OPT_MIN_TIME) {
			char *end;
			min_time = strtod(optarg, &end);
			if (end == optarg || *end || !(min_time >= 0) || min_time > 1e6)
				die_usage(bench_usage, "--min-time needs a number of seconds but found '%s'",
					optarg);
		} else if (c == OPT_JSON)
			json = 1;
	}
	for (i = optind; i < argc; i++) {
		if (!file)
			file = argv[i];
		else
			die_usage(bench_usage, "unexpected argument '%s'", argv[i]);
	}
	if (!file)
		die_usage(bench_usage, "%s", "bench needs a FILE.tc");
	ctx = tc_context_new();
	if (!ctx)
		return EXIT_INTERNAL;
	user_options = oa.nfiles || oa.nsets;
	lookup = cache_lookup_only(&oa, &threads);
	o = build_options(&oa, ctx);
	opt_args_free(&oa);
	apply_cache_args(&ca, ctx);
	if (user_options) {
		dev.device_type = tc_options_device(o);
		target = tc_options_get(o, "target");
	}
	m = load_entry(ctx, file, &entry, bench_usage, &status);
	if (!m)
		goto done;
	if (tc_module_def_arity(m, entry, &n_in, &n_out) < 0) {
		status = report(ctx);
		goto done;
	}
	if (n_in > 64 || n_out > 64) {
		fprintf(stderr, "tcomp: error: '%s' has more than 64 inputs or outputs\n", entry);
		status = EXIT_USER;
		goto done;
	}
	if (bind_inputs(m, entry, n_in, shapes, nshapes, ins, nin, arrays, from_file, dl, dims,
		    in_ptrs, bench_usage) < 0) {
		status = EXIT_USER;
		goto done;
	}
	for (i = 0; i < n_in; i++) /* shape-only: on the target's device */
		dl[i].device = dev;
	/* --threads N, --target T alone: the cache's entry for T, with N threads */
	if (lookup)
		copts = threads_cache_options(&ca, m, entry, in_ptrs, n_in, o, threads, &source);
	/* compile (no data is read) */
	nwarn = strlen(tc_context_warnings(ctx));
	t0 = now_s();
	k = tc_compile(m, entry, in_ptrs, n_in, lookup ? copts : user_options ? o : NULL);
	compile_s = now_s() - t0;
	print_new_warnings(ctx, nwarn);
	if (!k) {
		status = report(ctx);
		goto done;
	}
	/* the buffers */
	for (i = 0; i < n_out; i++) {
		int nd;
		DLDataType dt;
		tc_kernel_output_shape(k, i, &dt, &nd, oshape[i]);
		memset(&dl[n_in + i], 0, sizeof(dl[0]));
		dl[n_in + i].device = dev;
		dl[n_in + i].dtype = dt;
		dl[n_in + i].ndim = nd;
		dl[n_in + i].shape = oshape[i];
		out_ptrs[i] = &dl[n_in + i];
	}
	for (i = 0; i < n_in + n_out; i++)
		for (j = 0; j < dl[i].ndim; j++)
			min_ext = dl[i].shape[j] < min_ext ? dl[i].shape[j] : min_ext;
	/* an empty tensor (min_ext 0) leaves nothing to index: 0 as for 1 */
	ihi = min_ext == INT64_MAX ? 16 : min_ext < 1 ? 0 : min_ext - 1 < 16 ? min_ext - 1 : 16;
	for (i = 0; i < n_in + n_out; i++) {
		int64_t n;
		size_t nb;
		if (tensor_size(dl[i].ndim, dl[i].shape, dl[i].dtype, &n, &nb) < 0) {
			fprintf(stderr, "tcomp: error: tensor '%s' is too large\n",
				tc_module_tensor_name(m, entry, i));
			status = EXIT_USER;
			goto done;
		}
		/* 64-byte aligned, as framework tensors are (PyTorch's CPU
		 * allocator; malloc gives 16 for large blocks) */
		bufs[i] = nb > SIZE_MAX - 63 ? NULL : aligned_alloc(64, nb ? (nb + 63) / 64 * 64 : 64);
		if (!bufs[i]) {
			fprintf(stderr, "tcomp: error: cannot allocate %zu bytes for '%s'\n", nb,
				tc_module_tensor_name(m, entry, i));
			status = EXIT_INTERNAL;
			goto done;
		}
		if (i < n_in && from_file[i] >= 0)
			memcpy(bufs[i], arrays[from_file[i]].data, nb);
		else if (i < n_in)
			fill_random(bufs[i], n, dl[i].dtype, ihi); /* touches every page */
		else
			memset(bufs[i], 0, nb ? nb : 1);
		dl[i].data = bufs[i];
		if (dev.device_type != kDLCPU) {
			if (to_device(ctx, dev, bufs[i], nb ? nb : 1, tc_module_tensor_name(m, entry, i),
				    &dbufs[i]) < 0) {
				status = fail_status(ctx);
				goto done;
			}
			dl[i].data = dbufs[i];
		}
	}
	/* warm-up, then timed runs */
	for (i = 0; i < warmup; i++)
		if (tc_kernel_run(k, in_ptrs, n_in, out_ptrs, n_out) < 0) {
			status = report(ctx);
			goto done;
		}
	while (nruns < runs || total < min_time) {
		double dt;
		if ((size_t)nruns == cap) {
			double *t = realloc(times, (cap = cap * 2 + 64) * sizeof(double));
			if (!t) {
				status = EXIT_INTERNAL;
				goto done;
			}
			times = t;
		}
		if (dev.device_type != kDLCPU) {
			/* CUDA events on the stream around the run's launches */
			if (tc_kernel_run_timed(k, in_ptrs, n_in, out_ptrs, n_out, &dt) < 0) {
				status = report(ctx);
				goto done;
			}
			dt *= 1e-3;
		} else {
			t0 = now_s();
			if (tc_kernel_run(k, in_ptrs, n_in, out_ptrs, n_out) < 0) {
				status = report(ctx);
				goto done;
			}
			dt = now_s() - t0;
		}
		times[nruns++] = dt;
		total += dt;
	}
	qsort(times, (size_t)nruns, sizeof(double), cmp_double);
	median = nruns % 2 ? times[nruns / 2] : (times[nruns / 2 - 1] + times[nruns / 2]) / 2;
	best = times[0];
	tc_kernel_stats(k, &flops, &bytes);
	/* the options on one line */
	optext = tc_kernel_options(k);
	if (!source) /* else --threads N alone changed what the cache gave */
		source = tc_kernel_options_source(k);
	if (!strcmp(source, "user"))
		source = "file";
	if (!optext) {
		status = EXIT_INTERNAL;
		goto done;
	}
	for (p = optext; *p; p++)
		if (*p == '\n')
			*p = p[1] ? ';' : 0;
	/* the target the kernel has (the cache's, with --cache-result-options) */
	if (!strncmp(optext, "target=cuda-emu;", 16))
		target = "cuda-emu";
	else if (!strncmp(optext, "target=", 7) && dev.device_type == kDLCPU)
		target = strncmp(optext, "target=interp;", 14) ? "cpu" : "interp";
	if (json) {
		printf("{\"kernel\":");
		put_json_string(entry);
		printf(",\"shapes\":{");
		for (i = 0; i < n_in; i++) {
			printf("%s", i ? "," : "");
			put_json_string(tc_module_tensor_name(m, entry, i));
			printf(":[");
			for (j = 0; j < dl[i].ndim; j++)
				printf("%s%lld", j ? "," : "", (long long)dl[i].shape[j]);
			printf("]");
		}
		printf("},\"median_ms\":");
		put_json_number(median * 1e3);
		printf(",\"min_ms\":");
		put_json_number(best * 1e3);
		printf(",\"runs\":%d,\"compile_ms\":", nruns);
		put_json_number(compile_s * 1e3);
		printf(",\"gflops\":");
		put_json_number(flops >= 0 && median > 0 ? flops / median * 1e-9 : NAN);
		printf(",\"gbs\":");
		put_json_number(bytes >= 0 && median > 0 ? bytes / median * 1e-9 : NAN);
		printf(",\"options\":");
		put_json_string(optext);
		printf(",\"source\":\"%s\",\"device\":\"%s\",\"timer\":\"%s\",\"emulated\":%s}\n",
			source, target, dev.device_type != kDLCPU ? "cuda-events" : "host-clock",
			!strcmp(target, "cuda-emu") ? "true" : "false");
	} else {
		printf("kernel   %s (", entry);
		for (i = 0; i < n_in; i++) {
			printf("%s%s=", i ? " " : "", tc_module_tensor_name(m, entry, i));
			if (!dl[i].ndim)
				printf("scalar");
			for (j = 0; j < dl[i].ndim; j++)
				printf("%s%lld", j ? "x" : "", (long long)dl[i].shape[j]);
		}
		printf(")\n");
		printf("compile  %.3f ms\n", compile_s * 1e3);
		if (!strcmp(target, "cuda-emu"))
			printf("device   cuda-emu: the CUDA code EMULATED on the CPU (host clock; "
			       "says nothing of a GPU's speed)\n");
		else if (dev.device_type != kDLCPU)
			printf("device   %s (CUDA events around each run's launches)\n", target);
		printf("time     median %.4g ms, min %.4g ms (%d timed runs, %ld warm-up)\n",
			median * 1e3, best * 1e3, nruns, warmup);
		if (flops >= 0 && median > 0)
			printf("rate     %.4g GFLOP/s (%.0f flop per run)\n", flops / median * 1e-9,
				flops);
		else
			printf("rate     GFLOP/s not computable\n");
		if (bytes >= 0 && median > 0)
			printf("traffic  %.4g GB/s (%.0f bytes of inputs and outputs per run)\n",
				bytes / median * 1e-9, bytes);
		printf("options  %s (%s%s)\n", optext,
			!strcmp(source, "file") ? "given"
			: !strncmp(source, "cache-near", 10) ? "kernel cache, nearest shapes"
			: !strncmp(source, "cache-other-cpu", 15) ? "kernel cache, another CPU"
			: !strncmp(source, "cache", 5) ? "kernel cache"
							: "defaults",
			strchr(source, '+') ? ", with the threads given" : "");
	}
done:
	tc_string_free(optext);
	free(times);
	for (i = 0; i < n_in + n_out && i < 128; i++) {
		free(bufs[i]);
		tc_device_free(ctx, dev, dbufs[i]);
	}
	bindings_free(shapes, nshapes);
	bindings_free(ins, nin);
	for (j = 0; j < nin; j++)
		tc_npy_free(&arrays[j]);
	tc_kernel_free(k);
	tc_module_free(m);
	tc_options_free(o);
	tc_options_free(copts);
	tc_context_free(ctx);
	return status;
}

static int cmd_options(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_HELP, CLI_END};
	char *text;
	while (cli_next_opt(argc, argv, "h", longopts, options_usage) != -1)
		;
	if (optind < argc)
		die_usage(options_usage, "unexpected argument '%s'", argv[optind]);
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
	if (argc < 2)
		die_usage(main_usage, "%s", "a command is needed");
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
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(cmd, "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(cmd, "emit"))
		return cmd_emit(argc - 1, argv + 1);
	if (!strcmp(cmd, "bench"))
		return cmd_bench(argc - 1, argv + 1);
	if (!strcmp(cmd, "options"))
		return cmd_options(argc - 1, argv + 1);
	if (!strcmp(cmd, "autotune"))
		return cmd_autotune(argc - 1, argv + 1);
	if (!strcmp(cmd, "cache"))
		return cmd_cache(argc - 1, argv + 1);
	if (!strcmp(cmd, "grad"))
		return cmd_grad(argc - 1, argv + 1);
	if (!strcmp(cmd, "vmap"))
		return cmd_vmap(argc - 1, argv + 1);
	fprintf(stderr, "tcomp: error: unknown command '%s'\n\n%s", cmd, main_usage);
	return EXIT_USER;
}
