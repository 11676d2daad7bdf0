/* The SGD update's large loop, W1n = W1 - 0.01 dW1 over 784 x 128 floats,
 * written by hand with 16-lane vectors row by row (as tcomp's defaults
 * compile it), timed with its three arrays at chosen offsets from each
 * other modulo 4 KiB: is the defaults' loss in compare.py's environment
 * (docs/performance.md, Defaults against tuned: short rows) 4K aliasing,
 * a load waiting for an earlier store whose address matches its own in
 * the low 12 bits?  Under compare.py's GLIBC_TUNABLES `tcomp bench`'s
 * buffers come from the heap one after another: W1, dW1 and W1n 128 bytes
 * apart modulo 4 KiB, so the store to W1n[r][c] matches the loads of
 * dW1[r][c + 32] and W1[r][c + 64], a few vectors later; mmap'd buffers all
 * lie at one offset.
 *
 * Not built by CMake (AVX-512 intrinsics):
 *   cc -O2 -march=x86-64-v4 bench/alias4k.c -o /tmp/alias4k && /tmp/alias4k [ROUNDS]
 * prints the best time per placement over ROUNDS (default 15) rounds of
 * 200 runs, the placements alternating within each round, and checks the
 * outputs of every placement against a scalar loop. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROWS 784
#define COLS 128
#define NPLACE 5

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* out = w - 0.01 d, row by row, 16 lanes at a time. */
__attribute__((noinline)) static void update(float *restrict out, const float *restrict w,
	const float *restrict d)
{
	const __m512 k = _mm512_set1_ps(-0.01f);
	int r, c;
	for (r = 0; r < ROWS; r++)
		for (c = 0; c < COLS; c += 16) {
			__m512 x = _mm512_loadu_ps(d + r * COLS + c);
			__m512 y = _mm512_loadu_ps(w + r * COLS + c);
			_mm512_storeu_ps(out + r * COLS + c, _mm512_fmadd_ps(x, k, y));
		}
}

int main(int argc, char **argv)
{
	/* byte offsets of W1, dW1 and W1n within their 4 KiB-aligned slots */
	static const int place[NPLACE][3] = {
		{0, 0, 0},     /* mmap'd buffers */
		{0, 128, 256}, /* compare.py's heap: the output after the inputs */
		{0, 64, 128},
		{256, 128, 0}, /* the output before the inputs */
		{0, 1024, 2048},
	};
	const size_t n = (size_t)ROWS * COLS * sizeof(float), slot = n + 8192;
	int rounds = argc > 1 ? atoi(argv[1]) : 15, round, p, i, bad = 0;
	double best[NPLACE];
	char *base = aligned_alloc(4096, 3 * slot);
	if (!base || rounds < 1) {
		fprintf(stderr, "alias4k: %s\n", base ? "ROUNDS must be positive" : "out of memory");
		return 1;
	}
	memset(base, 0, 3 * slot);
	for (p = 0; p < NPLACE; p++)
		best[p] = 1e30;
	for (round = 0; round < rounds; round++)
		for (p = 0; p < NPLACE; p++) {
			float *w = (float *)(base + place[p][0]);
			float *d = (float *)(base + slot + place[p][1]);
			float *o = (float *)(base + 2 * slot + place[p][2]);
			double t0, t;
			int it;
			for (i = 0; i < ROWS * COLS; i++) {
				w[i] = (float)(i % 977) * 1e-3f - 0.5f;
				d[i] = (float)(i % 613) * 2e-3f - 0.6f;
				o[i] = -1e30f; /* poison */
			}
			update(o, w, d);
			for (i = 0; i < ROWS * COLS; i++)
				bad += o[i] != __builtin_fmaf(d[i], -0.01f, w[i]);
			t0 = now();
			for (it = 0; it < 200; it++)
				update(o, w, d);
			t = (now() - t0) / 200;
			best[p] = t < best[p] ? t : best[p];
		}
	for (p = 0; p < NPLACE; p++)
		printf("W1 +%4d, dW1 +%4d, W1n +%4d bytes mod 4096: %7.2f us (%.3fx the first)\n",
			place[p][0], place[p][1], place[p][2], best[p] * 1e6, best[p] / best[0]);
	if (bad)
		printf("%d outputs differ from the scalar loop\n", bad);
	free(base);
	return bad != 0;
}
