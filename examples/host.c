/* host: a host C program on the public tcomp API (include/tcomp.h only).
 *
 *   host [-o NAME=VALUE]... MATMUL.tc SOFTMAX.tc M K N
 *
 * Loads the two .tc files (they may be the same file), compiles the def
 * `matmul` for A float32(M,K) x B float32(K,N) and the def `softmax` for its
 * result C float32(M,N), runs both on deterministic pseudo-random inputs,
 * prints each output's shape with a checksum (sum and sum of squares), and
 * checks the results against plain C loops:
 *   - matmul: |C - ref| <= 1e-4 * sum_k |A(m,k) B(k,n)| for every element (the
 *     error of a dot product is relative to the sum of the magnitudes of its
 *     terms; relative to |ref| alone it is unbounded when terms cancel);
 *   - softmax: every row sums to 1 within 1e-5, and every element is within
 *     relative 1e-4 of the softmax computed in double.
 * Exit status: 0 ok, 1 on an API error (the message of tc_context_error is
 * printed), a mismatch or bad arguments.
 *
 * Kernels are compiled with the default options (the default target), so the
 * program runs unchanged whatever target the library picks; -o sets an option
 * by name, e.g. `-o target=interp`. */
#include <tcomp.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM 8
#define MAX_SIZE 4096 /* per dimension: M, K, N */

/* xorshift64*: the same numbers on every machine. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* n floats uniform in [-1, 1), from seed. */
static void fill_random(float *x, int64_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
	int64_t i;
	for (i = 0; i < n; i++)
		x[i] = (float)((double)(rng_next(&s) >> 40) / (double)(1 << 23) - 1.0);
}

static int parse_size(const char *s, const char *name, int64_t *out)
{
	char *end;
	long long v;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > MAX_SIZE) {
		fprintf(stderr, "host: %s must be an integer from 1 to %d, not '%s'\n", name, MAX_SIZE,
			s);
		return -1;
	}
	*out = v;
	return 0;
}

/* "float32[64x48]" */
static void print_tensor(const char *name, const DLTensor *t)
{
	const char *ts = tc_dtype_str(t->dtype);
	int i;
	printf("%s %s[", name ? name : "?", ts ? ts : "?");
	for (i = 0; i < t->ndim; i++)
		printf("%s%lld", i ? "x" : "", (long long)t->shape[i]);
	printf("]");
}

static void print_checksum(const char *name, const DLTensor *t)
{
	const float *x = t->data;
	double sum = 0, sumsq = 0;
	int64_t n = 1, i;
	int d;
	for (d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	for (i = 0; i < n; i++) {
		sum += x[i];
		sumsq += (double)x[i] * x[i];
	}
	printf("  ");
	print_tensor(name, t);
	printf("  sum=%.6g sumsq=%.6g\n", sum, sumsq);
}

static void api_error(tc_context *ctx, const char *what)
{
	const char *msg = tc_context_error(ctx);
	size_t n;
	if (!msg || !*msg)
		msg = "(no message)\n";
	n = strlen(msg);
	fprintf(stderr, "host: %s failed: %s%s", what, msg, msg[n - 1] == '\n' ? "" : "\n");
}

/* Compile entry of m for inputs, check it has one float32 output, and allocate
 * that output into out (shape into out_shape).  NULL on error (reported). */
static tc_kernel *compile_one(tc_context *ctx, tc_module *m, const char *entry,
	const DLTensor *const *inputs, int n_inputs, const tc_options *opts, DLTensor *out,
	int64_t *out_shape)
{
	tc_kernel *k = tc_compile(m, entry, inputs, n_inputs, opts);
	int64_t n = 1;
	int d;
	char what[128];
	if (!k) {
		snprintf(what, sizeof(what), "tc_compile(%s)", entry);
		api_error(ctx, what);
		return NULL;
	}
	memset(out, 0, sizeof(*out));
	out->device.device_type = kDLCPU;
	out->shape = out_shape;
	if (tc_kernel_num_outputs(k) != 1 ||
		tc_kernel_output_shape(k, 0, &out->dtype, &out->ndim, out_shape) < 0) {
		fprintf(stderr, "host: '%s' should have exactly one output\n", entry);
		tc_kernel_free(k);
		return NULL;
	}
	if (out->dtype.code != kDLFloat || out->dtype.bits != 32 || out->dtype.lanes != 1) {
		fprintf(stderr, "host: the output of '%s' is not float32\n", entry);
		tc_kernel_free(k);
		return NULL;
	}
	for (d = 0; d < out->ndim; d++)
		n *= out_shape[d];
	if (!(out->data = calloc((size_t)n + 1, sizeof(float)))) {
		fprintf(stderr, "host: out of memory\n");
		tc_kernel_free(k);
		return NULL;
	}
	return k;
}

static int run_one(tc_context *ctx, tc_kernel *k, const char *entry,
	const DLTensor *const *inputs, int n_inputs, DLTensor *out)
{
	DLTensor *outs[1] = {out};
	char what[128];
	if (tc_kernel_run(k, inputs, n_inputs, outs, 1) < 0) {
		snprintf(what, sizeof(what), "tc_kernel_run(%s)", entry);
		api_error(ctx, what);
		return -1;
	}
	return 0;
}

/* The checks against plain C loops (double accumulation). */
static int check_matmul(const float *a, const float *b, const float *c, int64_t M, int64_t K,
	int64_t N)
{
	double worst = 0;
	int64_t i, j, k, bad = 0;
	for (i = 0; i < M; i++)
		for (j = 0; j < N; j++) {
			double ref = 0, mag = 0, err;
			for (k = 0; k < K; k++) {
				double t = (double)a[i * K + k] * b[k * N + j];
				ref += t;
				mag += fabs(t);
			}
			err = fabs((double)c[i * N + j] - ref);
			if (mag > 0 && err / mag > worst)
				worst = err / mag;
			if (!(err <= 1e-4 * mag)) { /* also catches NaN */
				if (bad++ < 5)
					fprintf(stderr, "host: matmul MISMATCH at (%lld,%lld): %.9g, C loops %.9g\n",
						(long long)i, (long long)j, c[i * N + j], ref);
			}
		}
	if (bad) {
		fprintf(stderr, "host: matmul: %lld of %lld elements differ from the C loops\n",
			(long long)bad, (long long)(M * N));
		return -1;
	}
	printf("  matmul matches the C loops (largest error %.2g of the term magnitudes; limit 1e-4)\n",
		worst);
	return 0;
}

static int check_softmax(const float *x, const float *o, int64_t M, int64_t N)
{
	double worst_sum = 0, worst_rel = 0;
	int64_t i, j, bad = 0;
	for (i = 0; i < M; i++) {
		const float *xr = x + i * N, *orow = o + i * N;
		double mx = -INFINITY, sref = 0, sum = 0;
		for (j = 0; j < N; j++)
			mx = xr[j] > mx ? xr[j] : mx;
		for (j = 0; j < N; j++)
			sref += exp((double)xr[j] - mx);
		for (j = 0; j < N; j++) {
			double ref = exp((double)xr[j] - mx) / sref;
			double rel = fabs(orow[j] - ref) / ref;
			sum += orow[j];
			if (rel > worst_rel)
				worst_rel = rel;
			if (!(rel <= 1e-4) && bad++ < 5)
				fprintf(stderr, "host: softmax MISMATCH at (%lld,%lld): %.9g, C loops %.9g\n",
					(long long)i, (long long)j, orow[j], ref);
		}
		if (fabs(sum - 1) > worst_sum)
			worst_sum = fabs(sum - 1);
		if (!(fabs(sum - 1) <= 1e-5) && bad++ < 5)
			fprintf(stderr, "host: softmax MISMATCH: row %lld sums to %.9g\n", (long long)i, sum);
	}
	if (bad) {
		fprintf(stderr, "host: softmax: %lld mismatches\n", (long long)bad);
		return -1;
	}
	printf("  softmax rows sum to 1 (largest |sum - 1| %.2g; limit 1e-5), elements match the C "
	       "loops (largest relative error %.2g; limit 1e-4)\n",
		worst_sum, worst_rel);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: host [-o NAME=VALUE]... MATMUL.tc SOFTMAX.tc M K N\n"
		   "  compiles 'matmul' for float32 (M,K) x (K,N) and 'softmax' for its (M,N) result,\n"
		   "  runs both on pseudo-random data and checks them against C loops.\n"
		   "  -o NAME=VALUE  a compile option (see `tcomp options`); default: the defaults\n");
}

int main(int argc, char **argv)
{
	const char *paths[2] = {NULL, NULL}, *sizes[3] = {NULL, NULL, NULL};
	int64_t M = 0, K = 0, N = 0, sa[2], sb[2], sc[MAX_DIM], so[MAX_DIM];
	tc_context *ctx = NULL;
	tc_module *mm_mod = NULL, *sm_mod = NULL;
	tc_kernel *mm = NULL, *sm = NULL;
	tc_options *opts = NULL;
	float *a = NULL, *b = NULL;
	DLTensor A, B, C = {0}, O = {0};
	int i, npos = 0, rc = 1;

	setvbuf(stdout, NULL, _IOLBF, 0); /* keep stdout and stderr in order */
	if (!(ctx = tc_context_new())) {
		fprintf(stderr, "host: out of memory\n");
		return 1;
	}
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			rc = 0;
			goto done;
		} else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--option")) {
			char *eq, *name;
			int st;
			if (i + 1 >= argc || !(eq = strchr(argv[i + 1], '='))) {
				usage(stderr);
				goto done;
			}
			if (!opts && !(opts = tc_options_new())) {
				fprintf(stderr, "host: out of memory\n");
				goto done;
			}
			if (!(name = malloc((size_t)(eq - argv[i + 1]) + 1))) {
				fprintf(stderr, "host: out of memory\n");
				goto done;
			}
			memcpy(name, argv[i + 1], (size_t)(eq - argv[i + 1]));
			name[eq - argv[i + 1]] = 0;
			st = tc_options_set(opts, name, eq + 1, ctx);
			free(name);
			if (st < 0) {
				api_error(ctx, "tc_options_set");
				goto done;
			}
			i++;
		} else if (npos < 2) {
			paths[npos++] = argv[i];
		} else if (npos < 5) {
			sizes[npos++ - 2] = argv[i];
		} else {
			usage(stderr);
			goto done;
		}
	}
	if (npos != 5) {
		usage(stderr);
		goto done;
	}
	if (parse_size(sizes[0], "M", &M) < 0 || parse_size(sizes[1], "K", &K) < 0 ||
		parse_size(sizes[2], "N", &N) < 0)
		goto done;

	/* The two modules; their warnings, if any, go to stderr. */
	if (!(mm_mod = tc_module_load(ctx, paths[0]))) {
		api_error(ctx, "tc_module_load");
		goto done;
	}
	if (*tc_context_warnings(ctx))
		fputs(tc_context_warnings(ctx), stderr);
	if (!(sm_mod = tc_module_load(ctx, paths[1]))) {
		api_error(ctx, "tc_module_load");
		goto done;
	}
	if (*tc_context_warnings(ctx))
		fputs(tc_context_warnings(ctx), stderr);

	/* Inputs: dense row-major float32 on the CPU. */
	a = malloc((size_t)(M * K) * sizeof(float));
	b = malloc((size_t)(K * N) * sizeof(float));
	if (!a || !b) {
		fprintf(stderr, "host: out of memory\n");
		goto done;
	}
	fill_random(a, M * K, 1);
	fill_random(b, K * N, 2);
	sa[0] = M, sa[1] = K, sb[0] = K, sb[1] = N;
	A = (DLTensor){a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	B = (DLTensor){b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};

	printf("host: M=%lld K=%lld N=%lld\n", (long long)M, (long long)K, (long long)N);

	/* matmul: C = A x B */
	{
		const DLTensor *in[2] = {&A, &B};
		if (!(mm = compile_one(ctx, mm_mod, "matmul", in, 2, opts, &C, sc)))
			goto done;
		if (run_one(ctx, mm, "matmul", in, 2, &C) < 0)
			goto done;
		printf("matmul (%s):\n", paths[0]);
		print_checksum(tc_module_tensor_name(mm_mod, "matmul", 2), &C);
		if (C.ndim != 2 || sc[0] != M || sc[1] != N) {
			fprintf(stderr, "host: matmul MISMATCH: the output shape is not %lldx%lld\n",
				(long long)M, (long long)N);
			goto done;
		}
		if (check_matmul(a, b, C.data, M, K, N) < 0)
			goto done;
	}

	/* softmax of each row of C */
	{
		const DLTensor *in[1] = {&C};
		if (!(sm = compile_one(ctx, sm_mod, "softmax", in, 1, opts, &O, so)))
			goto done;
		if (run_one(ctx, sm, "softmax", in, 1, &O) < 0)
			goto done;
		printf("softmax (%s):\n", paths[1]);
		print_checksum(tc_module_tensor_name(sm_mod, "softmax", 1), &O);
		if (O.ndim != 2 || so[0] != M || so[1] != N) {
			fprintf(stderr, "host: softmax MISMATCH: the output shape is not %lldx%lld\n",
				(long long)M, (long long)N);
			goto done;
		}
		if (check_softmax(C.data, O.data, M, N) < 0)
			goto done;
	}
	printf("ok\n");
	rc = 0;

done:
	tc_kernel_free(mm);
	tc_kernel_free(sm);
	tc_module_free(mm_mod);
	tc_module_free(sm_mod);
	tc_options_free(opts);
	tc_context_free(ctx);
	free(a);
	free(b);
	free(C.data);
	free(O.data);
	return rc;
}
