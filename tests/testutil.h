/* Helpers shared by the end-to-end tests (test_corpus.c, test_api.c):
 * a seeded PRNG, independent binary16 conversions, and owned DLTensors.
 *
 * Everything here is static: each test program includes it once.  The
 * binary16 conversions are deliberately written from scratch (not taken from
 * ir/half.c) so the tests check the library against an independent reading
 * of IEEE 754. */
#ifndef TC_TESTUTIL_H
#define TC_TESTUTIL_H

#include <dlpack/dlpack.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcomp.h"

#define TU_MAX_RANK 8

/* Element types the tests use. */
typedef enum tu_elt {
	TU_BOOL, /* one byte, 0 or 1 */
	TU_I8,
	TU_U8,
	TU_I32,
	TU_I64,
	TU_F16, /* stored as its 16 bits */
	TU_F32,
	TU_F64,
	TU_BF16, /* bfloat16, stored as its 16 bits (the top half of a float) */
} tu_elt;

static inline const char *tu_elt_name(tu_elt e)
{
	static const char *names[] = {"bool", "int8", "uint8", "int32", "int64", "float16",
		"float32", "float64", "bfloat16"};
	return names[e];
}

static inline DLDataType tu_dltype(tu_elt e)
{
	DLDataType t = {kDLFloat, 32, 1};
	switch (e) {
	case TU_BOOL: t.code = TC_DL_BOOL; t.bits = 8; break;
	case TU_I8: t.code = kDLInt; t.bits = 8; break;
	case TU_U8: t.code = kDLUInt; t.bits = 8; break;
	case TU_I32: t.code = kDLInt; t.bits = 32; break;
	case TU_I64: t.code = kDLInt; t.bits = 64; break;
	case TU_F16: t.code = kDLFloat; t.bits = 16; break;
	case TU_F32: t.code = kDLFloat; t.bits = 32; break;
	case TU_F64: t.code = kDLFloat; t.bits = 64; break;
	case TU_BF16: t.code = kDLBfloat; t.bits = 16; break;
	}
	return t;
}

static inline size_t tu_elt_size(tu_elt e)
{
	return tu_dltype(e).bits / 8;
}

static inline int tu_elt_is_float(tu_elt e)
{
	return e == TU_F16 || e == TU_F32 || e == TU_F64 || e == TU_BF16;
}

/* ---- PRNG: xorshift64*, seeded; deterministic across platforms ---- */

static inline uint64_t tu_rand_u64(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* A seed from a string and a number (never 0, which xorshift cannot leave). */
static inline uint64_t tu_seed(const char *s, uint64_t n)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	h ^= (n + 1) * 0x9E3779B97F4A7C15ULL;
	return h ? h : 1;
}

/* Uniform in [0, 1). */
static inline double tu_rand_unit(uint64_t *state)
{
	return (double)(tu_rand_u64(state) >> 11) * 0x1p-53;
}

/* Uniform integer in [lo, hi] (inclusive). */
static inline int64_t tu_rand_int(uint64_t *state, int64_t lo, int64_t hi)
{
	uint64_t span = (uint64_t)(hi - lo) + 1;
	return lo + (int64_t)(tu_rand_u64(state) % span);
}

/* ---- IEEE 754 binary16, round to nearest even ---- */

static inline uint16_t tu_half_from_double(double x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double a = fabs(x);
	if (isnan(x))
		return sign | 0x7e00;
	if (a >= 65520.0) /* halfway between 65504 and 2^16 rounds to even: inf */
		return sign | 0x7c00;
	if (a < 0x1p-14) /* subnormal: a multiple of 2^-24 (1024 is the least normal) */
		return sign | (uint16_t)nearbyint(a * 0x1p24);
	int e;
	frexp(a, &e); /* a in [2^(e-1), 2^e) */
	double q = nearbyint(ldexp(a, 11 - e)); /* 11 significant bits: [1024, 2048] */
	int E = e - 1;
	if (q == 2048) {
		q = 1024;
		E++;
	}
	if (E > 15)
		return sign | 0x7c00;
	return sign | (uint16_t)((E + 15) << 10) | (uint16_t)(q - 1024);
}

static inline double tu_half_to_double(uint16_t h)
{
	int E = (h >> 10) & 31, m = h & 1023;
	double v;
	if (E == 0)
		v = ldexp(m, -24);
	else if (E == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexp(m + 1024, E - 25);
	return (h & 0x8000) ? -v : v;
}

/* ---- bfloat16, round to nearest even (independent of ir/half.c) ---- */

/* The value of bfloat16 h: a float with h as its top 16 bits. */
static inline double tu_bf16_to_double(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* x rounded once to 8 significant bits (quantum 2^-133 below 2^-126, the
 * subnormals), with the overflow threshold halfway between the largest
 * finite value and 2^128. */
static inline uint16_t tu_bf16_from_double(double x)
{
	uint16_t sign = signbit(x) ? 0x8000 : 0;
	double a = fabs(x), q, v;
	float f;
	uint32_t u;
	int e;
	if (isnan(x))
		return sign | 0x7fc0;
	if (a >= 0x1.ffp127)
		return sign | 0x7f80;
	frexp(a, &e); /* a in [2^(e-1), 2^e) */
	q = e - 1 < -126 ? 0x1p-133 : ldexp(1, e - 8);
	v = nearbyint(a / q) * q; /* exact steps; the default rounding is to even */
	f = (float)v;
	memcpy(&u, &f, sizeof(u));
	return sign | (uint16_t)(u >> 16);
}

/* x rounded to the nearest binary16 value, as a double. */
static inline double tu_round_half(double x)
{
	return tu_half_to_double(tu_half_from_double(x));
}

/* ---- owned, dense, row-major CPU tensors ---- */

typedef struct tu_tensor {
	DLTensor dl; /* dl.shape points at shape, dl.data at data */
	int64_t shape[TU_MAX_RANK];
	tu_elt elt;
	int64_t numel;
	void *data; /* owned; zero-filled, at least one byte */
} tu_tensor;

static inline void tu_tensor_init(tu_tensor *t, tu_elt elt, const int64_t *dims, int ndim)
{
	memset(t, 0, sizeof(*t));
	t->elt = elt;
	t->numel = 1;
	for (int d = 0; d < ndim; d++) {
		t->shape[d] = dims[d];
		t->numel *= dims[d];
	}
	t->data = calloc((size_t)(t->numel > 0 ? t->numel : 1), tu_elt_size(elt));
	t->dl.data = t->data;
	t->dl.device.device_type = kDLCPU;
	t->dl.device.device_id = 0;
	t->dl.ndim = ndim;
	t->dl.dtype = tu_dltype(elt);
	t->dl.shape = t->shape;
	t->dl.strides = NULL;
	t->dl.byte_offset = 0;
}

static inline void tu_tensor_fini(tu_tensor *t)
{
	free(t->data);
	t->data = NULL;
	t->dl.data = NULL;
}

/* Element i (row-major linear index) as a double (int64 beyond 2^53 loses bits,
 * which the tests avoid). */
static inline double tu_get(const tu_tensor *t, int64_t i)
{
	const void *p = t->data;
	switch (t->elt) {
	case TU_BOOL: return ((const uint8_t *)p)[i];
	case TU_I8: return ((const int8_t *)p)[i];
	case TU_U8: return ((const uint8_t *)p)[i];
	case TU_I32: return ((const int32_t *)p)[i];
	case TU_I64: return (double)((const int64_t *)p)[i];
	case TU_F16: return tu_half_to_double(((const uint16_t *)p)[i]);
	case TU_F32: return ((const float *)p)[i];
	case TU_F64: return ((const double *)p)[i];
	case TU_BF16: return tu_bf16_to_double(((const uint16_t *)p)[i]);
	}
	return 0;
}

/* Fill with a value no kernel produces by accident: NaN for floats, 0x5A
 * bytes for integers and bool (0x5A is not a valid bool), so elements a
 * kernel forgets to write are caught. */
static inline void tu_poison(tu_tensor *t)
{
	for (int64_t i = 0; i < t->numel; i++) {
		switch (t->elt) {
		case TU_F16: ((uint16_t *)t->data)[i] = 0x7e00; break;
		case TU_BF16: ((uint16_t *)t->data)[i] = 0x7fc0; break;
		case TU_F32: ((float *)t->data)[i] = NAN; break;
		case TU_F64: ((double *)t->data)[i] = NAN; break;
		default: memset((char *)t->data + i * tu_elt_size(t->elt), 0x5A, tu_elt_size(t->elt));
		}
	}
}

/* The whole file at path, NUL-terminated (free it), or NULL. */
static inline char *tu_read_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	long n = -1;
	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
		(buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, fp) == (size_t)n) {
		buf[n] = 0;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(fp);
	return buf;
}

/* Remove the SQLite database at path with the write-ahead log and shared
 * memory files SQLite may leave beside it (-wal, -shm). */
static inline void tu_remove_db(const char *path)
{
	static const char *const ext[] = {"", "-wal", "-shm"};
	char p[4200];
	size_t i;
	for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", path, ext[i]);
		remove(p);
	}
}

/* Whether message contains needle; prints the message when not, so a failing
 * assertion shows what the library said. */
static inline int tu_contains(const char *message, const char *needle)
{
	if (message && strstr(message, needle))
		return 1;
	fprintf(stderr, "expected the message to contain \"%s\"; it is:\n%s\n", needle,
		message ? message : "(null)");
	return 0;
}

/* The backward pass of a small network as issue 15 gives it (seven
 * statements, the batch size B also a value), as def k: the text of
 * bench/kernels.tc's mlp_bwd. */
#define TU_MLP_BWD                                                                         \
	"def k(float(B,I) X, float(B,H) Hd, float(B,K) P, int64(B) Y, float(H,K) W2)"     \
	" -> (dW1, dB1, dW2, dB2) {\n"                                                     \
	"  dL(b,k) = (P(b,k) - (Y(b) == k ? 1.0 : 0.0)) / B\n"                              \
	"  dW2(h,k) +=! Hd(b,h) * dL(b,k)\n"                                                \
	"  dB2(k) +=! dL(b,k)\n"                                                            \
	"  dH(b,h) +=! dL(b,k) * W2(h,k)\n"                                                 \
	"  dH(b,h) = Hd(b,h) > 0 ? dH(b,h) : 0.0\n"                                         \
	"  dW1(i,h) +=! X(b,i) * dH(b,h)\n"                                                 \
	"  dB1(h) +=! dH(b,h)\n}\n"

#endif
