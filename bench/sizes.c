/* What sizes=parametric costs and saves.  For each case, a def and two
 * shapes that differ in the batch (the sizes only first dimensions have):
 *
 *   compile concrete   cold tc_compile at the first shape, sizes=concrete
 *   compile parametric cold tc_compile at the first shape, sizes=parametric
 *   reuse              tc_compile at the second shape in the module that
 *                      compiled the parametric kernel (its code reused)
 *   run concrete/param run time at the second shape: the concrete kernel
 *                      compiled for it against the reused parametric one,
 *                      alternating, medians
 *
 *   bench_sizes [ROUNDS [THREADS]]   (default 5 rounds, 1 thread)
 *
 * Compiles are medians over ROUNDS fresh modules; inputs are random,
 * outputs reused (pre-faulted by the first run). */
#include "tcomp.h"
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXT 5

typedef struct tensor_shape {
	int ndim;
	int64_t dims[4];
	int is_int; /* int64 values in [0, 10) */
} tensor_shape;

typedef struct bench_case {
	const char *name, *source;
	int nin;
	tensor_shape in[2][MAXT]; /* at the first shape, then the second */
} bench_case;

static const bench_case cases[] = {
	{"matmul 256 -> M=100", "def k(float(M,K) A, float(K,N) B) -> (C) {\n"
				 "  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n",
		2,
		{{{2, {256, 256}, 0}, {2, {256, 256}, 0}},
			{{2, {100, 256}, 0}, {2, {256, 256}, 0}}}},
	{"matmul 1024 -> M=1000", "def k(float(M,K) A, float(K,N) B) -> (C) {\n"
				   "  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n",
		2,
		{{{2, {1024, 1024}, 0}, {2, {1024, 1024}, 0}},
			{{2, {1000, 1024}, 0}, {2, {1024, 1024}, 0}}}},
	{"softmax 128x1000 -> N=96", "def k(float(N,D) I) -> (O) {\n"
				      "  mx(n) max=! I(n,r_d)\n"
				      "  O(n,d) = exp(I(n,d) - mx(n))\n"
				      "  sm(n) +=! O(n,r_d)\n"
				      "  O(n,d) = O(n,d) / sm(n)\n}\n",
		1, {{{2, {128, 1000}, 0}}, {{2, {96, 1000}, 0}}}},
	{"fcrelu 128x784x128 -> B=96",
		"def k(float(B,I) X, float(O,I) W, float(O) Bias) -> (Y) {\n"
		"  Y(b,o) +=! X(b,r_i) * W(o,r_i)\n"
		"  Y(b,o) = fmax(Y(b,o) + Bias(o), 0)\n}\n",
		3,
		{{{2, {128, 784}, 0}, {2, {128, 784}, 0}, {1, {128}, 0}},
			{{2, {96, 784}, 0}, {2, {128, 784}, 0}, {1, {128}, 0}}}},
	{"mlp_bwd 128 -> B=96",
		"def k(float(B,I) X, float(B,H) Hd, float(B,K) P, int64(B) Y, float(H,K) W2)"
		" -> (dW1, dB1, dW2, dB2) {\n"
		"  dL(b,k) = (P(b,k) - (Y(b) == k ? 1.0 : 0.0)) / B\n"
		"  dW2(h,k) +=! Hd(b,h) * dL(b,k)\n"
		"  dB2(k) +=! dL(b,k)\n"
		"  dH(b,h) +=! dL(b,k) * W2(h,k)\n"
		"  dH(b,h) = Hd(b,h) > 0 ? dH(b,h) : 0.0\n"
		"  dW1(i,h) +=! X(b,i) * dH(b,h)\n"
		"  dB1(h) +=! dH(b,h)\n}\n",
		5,
		{{{2, {128, 784}, 0}, {2, {128, 128}, 0}, {2, {128, 10}, 0}, {1, {128}, 1},
			 {2, {128, 10}, 0}},
			{{2, {96, 784}, 0}, {2, {96, 128}, 0}, {2, {96, 10}, 0}, {1, {96}, 1},
				{2, {128, 10}, 0}}}},
	{"conv2d 8x64x56x56 k3 -> N=4",
		"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
		"  O(n,f,h,w) +=! I(n,r_c,h + r_kh,w + r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
		2,
		{{{4, {8, 64, 56, 56}, 0}, {4, {64, 64, 3, 3}, 0}},
			{{4, {4, 64, 56, 56}, 0}, {4, {64, 64, 3, 3}, 0}}}},
};

/* Inputs of one shape: DLTensors over random data (owned by the caller). */
typedef struct inputs {
	DLTensor t[MAXT];
	const DLTensor *p[MAXT];
	int64_t shape[MAXT][4];
	int n;
} inputs;

static int make_inputs(const bench_case *c, int which, inputs *in)
{
	uint64_t r = 12345 + (uint64_t)which;
	int i;
	memset(in, 0, sizeof(*in));
	in->n = c->nin;
	for (i = 0; i < c->nin; i++) {
		const tensor_shape *s = &c->in[which][i];
		int64_t n = 1, j;
		int d;
		for (d = 0; d < s->ndim; d++)
			n *= in->shape[i][d] = s->dims[d];
		in->t[i].data = malloc((size_t)n * 8);
		if (!in->t[i].data)
			return -1;
		for (j = 0; j < n; j++) {
			r = r * 6364136223846793005ULL + 1442695040888963407ULL;
			if (s->is_int)
				((int64_t *)in->t[i].data)[j] = (int64_t)((r >> 33) % 10);
			else
				((float *)in->t[i].data)[j] = (float)((r >> 40) / (double)(1 << 24)) - 0.5f;
		}
		in->t[i].device.device_type = kDLCPU;
		in->t[i].ndim = s->ndim;
		in->t[i].dtype.code = s->is_int ? kDLInt : kDLFloat;
		in->t[i].dtype.bits = s->is_int ? 64 : 32;
		in->t[i].dtype.lanes = 1;
		in->t[i].shape = in->shape[i];
		in->p[i] = &in->t[i];
	}
	return 0;
}

static void free_inputs(inputs *in)
{
	int i;
	for (i = 0; i < in->n; i++)
		free(in->t[i].data);
}

/* Outputs for kernel k (owned by the caller). */
typedef struct outputs {
	DLTensor t[4];
	DLTensor *p[4];
	int64_t shape[4][8];
	int n;
} outputs;

static int make_outputs(tc_kernel *k, outputs *o)
{
	int i, d;
	memset(o, 0, sizeof(*o));
	o->n = tc_kernel_num_outputs(k);
	for (i = 0; i < o->n && i < 4; i++) {
		int64_t n = 1;
		DLDataType dt;
		int nd;
		tc_kernel_output_shape(k, i, &dt, &nd, o->shape[i]);
		for (d = 0; d < nd; d++)
			n *= o->shape[i][d];
		if (!(o->t[i].data = calloc((size_t)n, 8)))
			return -1;
		o->t[i].device.device_type = kDLCPU;
		o->t[i].ndim = nd;
		o->t[i].dtype = dt;
		o->t[i].shape = o->shape[i];
		o->p[i] = &o->t[i];
	}
	return 0;
}

static void free_outputs(outputs *o)
{
	int i;
	for (i = 0; i < o->n && i < 4; i++)
		free(o->t[i].data);
}

static tc_context *ctx;

static tc_kernel *compile(tc_module *m, const inputs *in, const char *opts, int threads,
	double *ms)
{
	tc_options *o = tc_options_new();
	char text[128];
	tc_kernel *k;
	double t0;
	snprintf(text, sizeof(text), "%s threads=%d", opts, threads);
	if (!o || tc_options_parse(o, text, ctx) < 0) {
		tc_options_free(o);
		return NULL;
	}
	t0 = bench_wall_ms();
	k = tc_compile(m, "k", in->p, in->n, o);
	*ms = bench_wall_ms() - t0;
	tc_options_free(o);
	if (!k)
		fprintf(stderr, "bench_sizes: %s\n", tc_context_error(ctx));
	return k;
}

/* Median milliseconds of one run of k, over runs that last >= 50 ms. */
static double run_ms(tc_kernel *k, const inputs *in, outputs *o)
{
	double t[7], t0;
	int i, n = 1, j;
	for (;;) { /* how many runs fill 10 ms */
		t0 = bench_wall_ms();
		for (j = 0; j < n; j++)
			tc_kernel_run(k, in->p, in->n, o->p, o->n);
		if (bench_wall_ms() - t0 >= 10 || n >= 1 << 20)
			break;
		n *= 2;
	}
	for (i = 0; i < 7; i++) {
		t0 = bench_wall_ms();
		for (j = 0; j < n; j++)
			tc_kernel_run(k, in->p, in->n, o->p, o->n);
		t[i] = (bench_wall_ms() - t0) / n;
	}
	return bench_median(t, 7);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5, threads = argc > 2 ? atoi(argv[2]) : 1;
	size_t c;
	ctx = tc_context_new();
	if (!ctx || rounds < 1 || rounds > 100) {
		fprintf(stderr, "usage: bench_sizes [ROUNDS [THREADS]]\n");
		return 2;
	}
	tc_context_set_cache(ctx, ""); /* no kernel cache */
	printf("| case | compile concrete ms | compile parametric ms | reuse ms | run concrete ms "
	       "| run parametric ms | parametric/concrete |\n|---|---|---|---|---|---|---|\n");
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		double cc[100], cp[100], ru[100], rc[100], rp[100], ms;
		inputs a, b;
		outputs oc, op;
		tc_kernel *kc = NULL, *kp = NULL;
		int r;
		if (make_inputs(&cases[c], 0, &a) < 0 || make_inputs(&cases[c], 1, &b) < 0)
			return 1;
		for (r = 0; r < rounds; r++) {
			tc_module *m1 = tc_module_parse(ctx, cases[c].source, "bench.tc");
			tc_module *m2 = tc_module_parse(ctx, cases[c].source, "bench.tc");
			tc_kernel *k1, *k2, *k3;
			if (!m1 || !m2)
				return 1;
			k1 = compile(m1, &a, "sizes=concrete", threads, &cc[r]);
			k2 = compile(m2, &a, "sizes=parametric", threads, &cp[r]);
			k3 = compile(m2, &b, "sizes=parametric", threads, &ru[r]);
			if (!k1 || !k2 || !k3 || tc_kernel_reuses_code(k3) != 1) {
				fprintf(stderr, "bench_sizes: %s: no reuse\n", cases[c].name);
				return 1;
			}
			tc_kernel_free(k1);
			tc_kernel_free(k2);
			if (r == rounds - 1) { /* kept for the run times */
				kp = k3;
				kc = compile(m1, &b, "sizes=concrete", threads, &ms);
				if (!kc)
					return 1;
			} else {
				tc_kernel_free(k3);
			}
			tc_module_free(m1);
			tc_module_free(m2);
		}
		if (make_outputs(kc, &oc) < 0 || make_outputs(kp, &op) < 0)
			return 1;
		for (r = 0; r < rounds; r++) { /* alternating */
			if (r % 2) {
				rp[r] = run_ms(kp, &b, &op);
				rc[r] = run_ms(kc, &b, &oc);
			} else {
				rc[r] = run_ms(kc, &b, &oc);
				rp[r] = run_ms(kp, &b, &op);
			}
		}
		{
			double mc = bench_median(rc, rounds), mp = bench_median(rp, rounds);
			printf("| %s | %.1f | %.1f | %.3f | %.4f | %.4f | %.3f |\n", cases[c].name,
				bench_median(cc, rounds), bench_median(cp, rounds), bench_median(ru, rounds), mc, mp,
				mp / mc);
			fflush(stdout);
		}
		free_outputs(&oc);
		free_outputs(&op);
		tc_kernel_free(kc);
		tc_kernel_free(kp);
		free_inputs(&a);
		free_inputs(&b);
	}
	tc_context_free(ctx);
	return 0;
}
