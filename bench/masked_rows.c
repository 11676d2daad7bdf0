/* Masked 16-lane vectors against 8-lane pieces for the register tile's rows
 * of the two grouped convolutions that trail PyTorch (issue 15;
 * docs/performance.md, Convolutions, "Masked rows"), written by hand with
 * AVX-512 intrinsics so that the accumulators stay in registers whatever
 * LLVM's loop passes would do:
 *
 *   12: N=32 G=32 C=F=16, 14 x 14 -> 12 x 12, 3 x 3.  A tile of 12 rows of h
 *       (one output channel), each row 12 outputs: "pieces" is an 8-lane
 *       tile and a 4-lane one (tcomp's default code), "masked" one 16-lane
 *       vector under a mask of 12 (masked loads and stores), "unmasked" the
 *       same with plain loads (lanes 12-15 read the next input row and are
 *       dropped by the masked store).
 *   26: N=32 G=32 C=F=8, 28 x 28 -> 26 x 26, 3 x 3.  A tile of the 8 output
 *       channels of a group, each row 26 outputs of one h: "pieces" three
 *       8-lane tiles and a 2-lane rest (tcomp's default), "masked" 16 lanes
 *       and 10 under a mask (16 accumulators).
 *
 * Multiplies and adds stay separate, as tcomp's contract=off.  Every
 * variant is checked against a naive loop on random data (outputs poisoned
 * first), then the variants are timed alternating, ROUNDS rounds of 10
 * runs, one thread; the median and minimum of each round are printed.
 *
 *   clang -O3 -march=x86-64-v4 -ffp-contract=off bench/masked_rows.c -o masked_rows12
 *   clang -O3 -march=x86-64-v4 -ffp-contract=off -DROW26 bench/masked_rows.c -o masked_rows26
 *   ./masked_rows12 [ROUNDS]
 *
 * Not built by CMake: it needs AVX-512. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 32
#define G 32
#ifdef ROW26
#define C 8
#define H 28
#else
#define C 16
#define H 14
#endif
#define OH (H - 2)

typedef void (*conv_fn)(const float *I, const float *W, const float *B, float *O);

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* O(n,g,f,h,w) = sum I(n,g,c,h+kh,w+kw) * W(g,f,c,kh,kw) + B(g,f), naively. */
static void reference(const float *I, const float *W, const float *B, float *O)
{
	for (int n = 0; n < N; n++)
	for (int g = 0; g < G; g++)
	for (int f = 0; f < C; f++)
	for (int h = 0; h < OH; h++)
	for (int w = 0; w < OH; w++) {
		float s = 0;
		for (int c = 0; c < C; c++)
		for (int kh = 0; kh < 3; kh++)
		for (int kw = 0; kw < 3; kw++)
			s += I[(((n * G + g) * C + c) * H + h + kh) * H + w + kw] *
				W[(((g * C + f) * C + c) * 3 + kh) * 3 + kw];
		O[(((n * G + g) * C + f) * OH + h) * OH + w] = s + B[g * C + f];
	}
}

#ifndef ROW26
/* 12 rows of h x (8 lanes, then 4 lanes). */
__attribute__((noinline)) static void pieces(const float *I, const float *W, const float *B, float *O)
{
	for (int n = 0; n < N; n++)
	for (int g = 0; g < G; g++)
	for (int f = 0; f < C; f++) {
		const float *in = I + ((n * G + g) * C) * H * H, *wt = W + ((g * C + f) * C) * 9;
		float *o = O + (((n * G + g) * C + f) * OH) * OH;
		__m256 a[12];
		__m128 q[12];
		for (int h = 0; h < 12; h++)
			a[h] = _mm256_setzero_ps();
		for (int c = 0; c < C; c++)
		for (int kh = 0; kh < 3; kh++)
		for (int kw = 0; kw < 3; kw++) {
			__m256 b = _mm256_broadcast_ss(wt + c * 9 + kh * 3 + kw);
			for (int h = 0; h < 12; h++)
				a[h] = _mm256_add_ps(a[h], _mm256_mul_ps(b,
					_mm256_loadu_ps(in + (c * H + h + kh) * H + kw)));
		}
		for (int h = 0; h < 12; h++)
			_mm256_storeu_ps(o + h * OH, _mm256_add_ps(a[h], _mm256_set1_ps(B[g * C + f])));
		for (int h = 0; h < 12; h++)
			q[h] = _mm_setzero_ps();
		for (int c = 0; c < C; c++)
		for (int kh = 0; kh < 3; kh++)
		for (int kw = 0; kw < 3; kw++) {
			__m128 b = _mm_broadcast_ss(wt + c * 9 + kh * 3 + kw);
			for (int h = 0; h < 12; h++)
				q[h] = _mm_add_ps(q[h], _mm_mul_ps(b,
					_mm_loadu_ps(in + (c * H + h + kh) * H + kw + 8)));
		}
		for (int h = 0; h < 12; h++)
			_mm_storeu_ps(o + h * OH + 8, _mm_add_ps(q[h], _mm_set1_ps(B[g * C + f])));
	}
}

/* 12 rows of h x one 16-lane vector under a mask of 12 lanes; with
 * plain loads when masked_loads is 0. */
static inline void masked_tile(const float *I, const float *W, const float *B, float *O,
	int masked_loads)
{
	const __mmask16 k = 0x0fff;
	for (int n = 0; n < N; n++)
	for (int g = 0; g < G; g++)
	for (int f = 0; f < C; f++) {
		const float *in = I + ((n * G + g) * C) * H * H, *wt = W + ((g * C + f) * C) * 9;
		float *o = O + (((n * G + g) * C + f) * OH) * OH;
		__m512 a[12];
		for (int h = 0; h < 12; h++)
			a[h] = _mm512_setzero_ps();
		for (int c = 0; c < C; c++)
		for (int kh = 0; kh < 3; kh++)
		for (int kw = 0; kw < 3; kw++) {
			__m512 b = _mm512_set1_ps(wt[c * 9 + kh * 3 + kw]);
			for (int h = 0; h < 12; h++) {
				const float *x = in + (c * H + h + kh) * H + kw;
				a[h] = _mm512_add_ps(a[h], _mm512_mul_ps(b, masked_loads ?
					_mm512_maskz_loadu_ps(k, x) : _mm512_loadu_ps(x)));
			}
		}
		for (int h = 0; h < 12; h++)
			_mm512_mask_storeu_ps(o + h * OH, k, _mm512_add_ps(a[h], _mm512_set1_ps(B[g * C + f])));
	}
}

__attribute__((noinline)) static void masked(const float *I, const float *W, const float *B, float *O)
{
	masked_tile(I, W, B, O, 1);
}

__attribute__((noinline)) static void unmasked(const float *I, const float *W, const float *B, float *O)
{
	masked_tile(I, W, B, O, 0);
}

static conv_fn fns[] = {pieces, masked, unmasked};
static const char *names[] = {"pieces", "masked", "unmasked"};
#else
/* 8 rows of f x (3 tiles of 8 lanes, then 2 lanes). */
__attribute__((noinline)) static void pieces(const float *I, const float *W, const float *B, float *O)
{
	for (int n = 0; n < N; n++)
	for (int g = 0; g < G; g++)
	for (int h = 0; h < OH; h++) {
		const float *in = I + ((n * G + g) * C) * H * H + h * H, *wt = W + (g * C) * C * 9;
		float *o = O + ((n * G + g) * C) * OH * OH + h * OH;
		__m128 q[8];
		for (int w0 = 0; w0 < 24; w0 += 8) {
			__m256 a[8];
			for (int f = 0; f < 8; f++)
				a[f] = _mm256_setzero_ps();
			for (int c = 0; c < C; c++)
			for (int kh = 0; kh < 3; kh++)
			for (int kw = 0; kw < 3; kw++) {
				__m256 x = _mm256_loadu_ps(in + (c * H + kh) * H + w0 + kw);
				for (int f = 0; f < 8; f++)
					a[f] = _mm256_add_ps(a[f], _mm256_mul_ps(x,
						_mm256_broadcast_ss(wt + ((f * C + c) * 3 + kh) * 3 + kw)));
			}
			for (int f = 0; f < 8; f++)
				_mm256_storeu_ps(o + f * OH * OH + w0,
					_mm256_add_ps(a[f], _mm256_set1_ps(B[g * C + f])));
		}
		for (int f = 0; f < 8; f++)
			q[f] = _mm_setzero_ps();
		for (int c = 0; c < C; c++)
		for (int kh = 0; kh < 3; kh++)
		for (int kw = 0; kw < 3; kw++) {
			__m128 x = _mm_castpd_ps(_mm_load_sd((const double *)(in + (c * H + kh) * H + 24 + kw)));
			for (int f = 0; f < 8; f++)
				q[f] = _mm_add_ps(q[f], _mm_mul_ps(x,
					_mm_broadcast_ss(wt + ((f * C + c) * 3 + kh) * 3 + kw)));
		}
		for (int f = 0; f < 8; f++)
			_mm_store_sd((double *)(o + f * OH * OH + 24),
				_mm_castps_pd(_mm_add_ps(q[f], _mm_set1_ps(B[g * C + f]))));
	}
}

/* 8 rows of f x (16 lanes, then 10 under a mask). */
__attribute__((noinline)) static void masked(const float *I, const float *W, const float *B, float *O)
{
	const __mmask16 k = 0x03ff;
	for (int n = 0; n < N; n++)
	for (int g = 0; g < G; g++)
	for (int h = 0; h < OH; h++) {
		const float *in = I + ((n * G + g) * C) * H * H + h * H, *wt = W + (g * C) * C * 9;
		float *o = O + ((n * G + g) * C) * OH * OH + h * OH;
		__m512 a[8], b[8];
		for (int f = 0; f < 8; f++)
			a[f] = b[f] = _mm512_setzero_ps();
		for (int c = 0; c < C; c++)
		for (int kh = 0; kh < 3; kh++)
		for (int kw = 0; kw < 3; kw++) {
			const float *x = in + (c * H + kh) * H + kw;
			__m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_maskz_loadu_ps(k, x + 16);
			for (int f = 0; f < 8; f++) {
				__m512 w = _mm512_set1_ps(wt[((f * C + c) * 3 + kh) * 3 + kw]);
				a[f] = _mm512_add_ps(a[f], _mm512_mul_ps(x0, w));
				b[f] = _mm512_add_ps(b[f], _mm512_mul_ps(x1, w));
			}
		}
		for (int f = 0; f < 8; f++) {
			__m512 bb = _mm512_set1_ps(B[g * C + f]);
			_mm512_storeu_ps(o + f * OH * OH, _mm512_add_ps(a[f], bb));
			_mm512_mask_storeu_ps(o + f * OH * OH + 16, k, _mm512_add_ps(b[f], bb));
		}
	}
}

static conv_fn fns[] = {pieces, masked};
static const char *names[] = {"pieces", "masked"};
#endif

#define NFN ((int)(sizeof fns / sizeof fns[0]))

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	size_t ni = (size_t)N * G * C * H * H, nw = (size_t)G * C * C * 9, no = (size_t)N * G * C * OH * OH;
	/* 64 bytes of slack: the unmasked variant reads past the last row */
	float *I = malloc(ni * 4 + 64), *W = malloc(nw * 4), *B = malloc(G * C * 4);
	float *R = malloc(no * 4), *O = malloc(no * 4);
	int rounds = argc > 1 ? atoi(argv[1]) : 5, bad = 0;
	if (!I || !W || !B || !R || !O) {
		fprintf(stderr, "masked_rows: out of memory\n");
		return 1;
	}
	srand(1);
	for (size_t i = 0; i < ni + 16; i++)
		I[i] = rand() / (float)RAND_MAX - 0.5f;
	for (size_t i = 0; i < nw; i++)
		W[i] = rand() / (float)RAND_MAX - 0.5f;
	for (int i = 0; i < G * C; i++)
		B[i] = rand() / (float)RAND_MAX;
	reference(I, W, B, R);
	for (int v = 0; v < NFN; v++) {
		double e = 0;
		memset(O, 0xff, no * 4); /* NaN: a value not written shows */
		fns[v](I, W, B, O);
		for (size_t i = 0; i < no; i++) {
			double d = O[i] > R[i] ? O[i] - R[i] : R[i] - O[i];
			if (!(d <= e))
				e = d;
			if (d != d) /* not written */
				break;
		}
		printf("%s max abs error %g\n", names[v], e);
		bad |= !(e < 1e-4);
	}
	for (int r = 0; r < rounds; r++)
		for (int v = 0; v < NFN; v++) {
			double ts[10];
			for (int i = 0; i < 10; i++) {
				double t = now_ms();
				fns[v](I, W, B, O);
				ts[i] = now_ms() - t;
			}
			qsort(ts, 10, sizeof ts[0], cmp_double);
			printf("%s median %.3f min %.3f ms\n", names[v], ts[5], ts[0]);
		}
	free(I);
	free(W);
	free(B);
	free(R);
	free(O);
	return bad;
}
