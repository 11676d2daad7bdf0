/* Unit tests of tools/npy.c: .npy round trips, the versions and header
 * spellings NumPy can produce, every error message, robustness against
 * truncated and mutated files, and allocation failures. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lang/util.h"
#include "npy.h"

#ifndef TC_BINARY_DIR
#define TC_BINARY_DIR "."
#endif

/* ---- helpers ---- */

/* A fresh path under TC_BINARY_DIR/tmp-npy, distinct per process and call
 * (ctest may run several test programs at once). */
static const char *tmp_path(const char *stem)
{
	static char path[4][512];
	static int k;
	char *p = path[k++ % 4];
	mkdir(TC_BINARY_DIR "/tmp-npy", 0777);
	snprintf(p, 512, "%s/tmp-npy/%s-%ld.npy", TC_BINARY_DIR, stem, (long)getpid());
	return p;
}

static void write_bytes(const char *path, const void *bytes, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(bytes, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* The whole content of a file, malloc'd; *n gets its size. */
static unsigned char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long size;
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	size = ftell(f);
	assert_true(size >= 0);
	rewind(f);
	buf = malloc((size_t)size + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	*n = (size_t)size;
	return buf;
}

/* A .npy image with the given version and header text (taken verbatim, no
 * padding) followed by ndata bytes of data; malloc'd, *n gets its size. */
static unsigned char *make_npy(int major, int minor, const char *header, const void *data,
	size_t ndata, size_t *n)
{
	size_t hlen = strlen(header), lsize = major == 1 ? 2 : 4, k = 0;
	unsigned char *b = malloc(8 + lsize + hlen + ndata + 1);
	assert_non_null(b);
	memcpy(b, "\x93NUMPY", 6);
	b[6] = (unsigned char)major;
	b[7] = (unsigned char)minor;
	k = 8;
	b[k++] = (unsigned char)(hlen & 0xff);
	b[k++] = (unsigned char)((hlen >> 8) & 0xff);
	if (lsize == 4) {
		b[k++] = (unsigned char)((hlen >> 16) & 0xff);
		b[k++] = (unsigned char)((hlen >> 24) & 0xff);
	}
	memcpy(b + k, header, hlen);
	k += hlen;
	if (ndata)
		memcpy(b + k, data, ndata);
	*n = k + ndata;
	return b;
}

/* Parse an image expecting failure with a message containing phrase (and
 * the name); the output must come back zeroed. */
static void expect_parse_error(const void *bytes, size_t n, const char *phrase)
{
	tc_npy a;
	char *err = NULL;
	memset(&a, 0xab, sizeof(a));
	if (tc_npy_parse(bytes, n, "in.npy", &a, &err) != -1)
		fail_msg("parse succeeded, expected an error with '%s'", phrase);
	assert_non_null(err);
	if (!strstr(err, phrase) || strncmp(err, "in.npy: ", 8) != 0)
		fail_msg("message '%s' lacks '%s'", err, phrase);
	assert_null(a.data);
	assert_int_equal(a.ndim, 0);
	assert_int_equal(a.nbytes, 0);
	tc_free(err);
}

/* A header (version 1.0) plus ndata bytes must fail with phrase. */
static void expect_header_error(const char *header, size_t ndata, const char *phrase)
{
	size_t n;
	unsigned char *data = calloc(1, ndata + 1);
	unsigned char *img;
	assert_non_null(data);
	img = make_npy(1, 0, header, data, ndata, &n);
	expect_parse_error(img, n, phrase);
	free(img);
	free(data);
}

/* A header (version 1.0) plus data must parse to dtype and shape. */
static void expect_header_ok(const char *header, const void *data, size_t ndata,
	tc_dtype dtype, int ndim, const int64_t *shape)
{
	size_t n;
	unsigned char *img = make_npy(1, 0, header, data, ndata, &n);
	tc_npy a;
	char *err = NULL;
	int i;
	if (tc_npy_parse(img, n, "in.npy", &a, &err) != 0)
		fail_msg("header %s: %s", header, err ? err : "(no message)");
	assert_null(err);
	assert_int_equal(a.dtype, dtype);
	assert_int_equal(a.ndim, ndim);
	for (i = 0; i < ndim; i++)
		assert_int_equal(a.shape[i], shape[i]);
	assert_int_equal(a.nbytes, ndata);
	assert_memory_equal(a.data, data, ndata);
	tc_npy_free(&a);
	free(img);
}

static const char *const f4_2x3 =
	"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

/* ---- round trips ---- */

/* Every dtype at ranks 0, 1, 2 and 8 and an empty array: write, read back,
 * same dtype, shape and bytes. */
static void test_npy_round_trip_every_dtype_and_rank(void **state)
{
	static const int64_t shapes[][8] = {
		{0}, {7}, {3, 4}, {2, 1, 2, 1, 3, 1, 1, 2}, {0, 3},
	};
	static const int ranks[] = {0, 1, 2, 8, 2};
	const char *path = tmp_path("roundtrip");
	int t, s;
	(void)state;
	for (t = TC_T_BOOL; t < TC_T_COUNT; t++) {
		for (s = 0; s < 5; s++) {
			int64_t numel = 1;
			size_t nbytes, i;
			unsigned char *data;
			tc_npy a;
			char *err = NULL;
			int d;
			for (d = 0; d < ranks[s]; d++)
				numel *= shapes[s][d];
			nbytes = (size_t)numel * (size_t)tc_dtype_size((tc_dtype)t);
			data = malloc(nbytes + 1);
			assert_non_null(data);
			for (i = 0; i < nbytes; i++)
				data[i] = t == TC_T_BOOL ? (unsigned char)(i % 3 == 1)
							 : (unsigned char)(i * 37 + 11);
			if (tc_npy_write(path, (tc_dtype)t, ranks[s], shapes[s], data, &err) != 0)
				fail_msg("write %s rank %d: %s", tc_dtype_name((tc_dtype)t),
					ranks[s], err);
			if (tc_npy_read(path, &a, &err) != 0)
				fail_msg("read %s rank %d: %s", tc_dtype_name((tc_dtype)t),
					ranks[s], err);
			assert_null(err);
			assert_int_equal(a.dtype, t);
			assert_int_equal(a.ndim, ranks[s]);
			for (d = 0; d < ranks[s]; d++)
				assert_int_equal(a.shape[d], shapes[s][d]);
			assert_int_equal(a.numel, numel);
			assert_int_equal(a.nbytes, nbytes);
			assert_non_null(a.data);
			assert_memory_equal(a.data, data, nbytes);
			tc_npy_free(&a);
			assert_null(a.data);
			free(data);
		}
	}
	remove(path);
}

/* The written file is what NumPy writes: version 1.0, its header dict
 * spelling, padded with spaces and '\n' so the data starts at a multiple of
 * 64 bytes. */
static void test_npy_write_produces_numpy_layout(void **state)
{
	static const struct {
		tc_dtype t;
		int ndim;
		int64_t shape[2];
		const char *header;
	} cases[] = {
		{TC_T_F32, 2, {3, 4}, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"},
		{TC_T_I8, 1, {5}, "{'descr': '|i1', 'fortran_order': False, 'shape': (5,), }"},
		{TC_T_BOOL, 0, {0}, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }"},
		{TC_T_F16, 1, {2}, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }"},
		{TC_T_U64, 1, {1}, "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }"},
		{TC_T_BF16, 1, {2}, "{'descr': '<V2', 'fortran_order': False, 'shape': (2,), }"},
	};
	const char *path = tmp_path("layout");
	unsigned char data[64] = {1, 0, 1, 1, 0};
	size_t c, n, hlen, i;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		unsigned char *b;
		char *err = NULL;
		assert_int_equal(tc_npy_write(path, cases[c].t, cases[c].ndim, cases[c].shape,
					 data, &err), 0);
		b = slurp(path, &n);
		assert_memory_equal(b, "\x93NUMPY\x01\x00", 8);
		hlen = (size_t)b[8] | (size_t)b[9] << 8;
		assert_int_equal((10 + hlen) % 64, 0);
		assert_memory_equal(b + 10, cases[c].header, strlen(cases[c].header));
		for (i = 10 + strlen(cases[c].header); i < 10 + hlen - 1; i++)
			assert_int_equal(b[i], ' ');
		assert_int_equal(b[10 + hlen - 1], '\n');
		free(b);
	}
	remove(path);
}

/* Format versions 2.0 and 3.0 (4-byte header length) read like 1.0, from
 * memory and from a file. */
static void test_npy_reads_versions_2_and_3(void **state)
{
	static const float vals[6] = {1, 2, 3, 4, 5, 6};
	const char *path = tmp_path("v23");
	int major;
	(void)state;
	for (major = 1; major <= 3; major++) {
		size_t n;
		unsigned char *img = make_npy(major, 0, f4_2x3, vals, sizeof(vals), &n);
		tc_npy a;
		char *err = NULL;
		assert_int_equal(tc_npy_parse(img, n, "v.npy", &a, &err), 0);
		assert_int_equal(a.dtype, TC_T_F32);
		assert_int_equal(a.ndim, 2);
		assert_int_equal(a.shape[0], 2);
		assert_int_equal(a.shape[1], 3);
		assert_memory_equal(a.data, vals, sizeof(vals));
		tc_npy_free(&a);
		write_bytes(path, img, n);
		assert_int_equal(tc_npy_read(path, &a, &err), 0);
		assert_memory_equal(a.data, vals, sizeof(vals));
		tc_npy_free(&a);
		free(img);
	}
	remove(path);
}

/* Header spellings other writers (and Python 2 NumPy) produce: other key
 * order, double quotes, no trailing comma, no padding, extra white space,
 * 2L longs, byte-order prefixes '=', '<' on one-byte types, none; the void
 * descr of ml_dtypes' bfloat16. */
static void test_npy_accepts_header_variants(void **state)
{
	static const int64_t s23[] = {2, 3}, s4[] = {4}, s3[] = {3};
	static const float f[6] = {0.5f, 1, 2, 3, 4, 5};
	static const int8_t i8[4] = {-1, 2, -3, 4};
	static const uint8_t u8[4] = {1, 2, 3, 250};
	static const double f8[3] = {1.5, -2, 1e300};
	(void)state;
	expect_header_ok("{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}\n", f,
		sizeof(f), TC_T_F32, 2, s23);
	expect_header_ok("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,3)}", f,
		sizeof(f), TC_T_F32, 2, s23);
	expect_header_ok(" { 'descr' : '=f4' ,\n 'fortran_order' : False ,\t'shape' : ( 2L , 3L , ) , } \n",
		f, sizeof(f), TC_T_F32, 2, s23);
	expect_header_ok("{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3)}", f,
		sizeof(f), TC_T_F32, 2, s23);
	expect_header_ok("{'descr': '<i1', 'fortran_order': False, 'shape': (4,)}", i8,
		sizeof(i8), TC_T_I8, 1, s4);
	expect_header_ok("{'descr': '>u1', 'fortran_order': False, 'shape': (4,)}", u8,
		sizeof(u8), TC_T_U8, 1, s4);
	expect_header_ok("{'descr': '<u1', 'fortran_order': False, 'shape': (4,)}", u8,
		sizeof(u8), TC_T_U8, 1, s4);
	expect_header_ok("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f8,
		sizeof(f8), TC_T_F64, 1, s3);
	/* bfloat16: the bytes np.save writes for an ml_dtypes.bfloat16 array
	 * [1.0, -2.5, 3.140625] (NumPy 2.4, ml_dtypes 0.6), and '|V2', the
	 * dtype.str np.load gives it back as */
	expect_header_ok("{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }",
		"\x80\x3f\x20\xc0\x49\x40", 6, TC_T_BF16, 1, s3);
	expect_header_ok("{'descr': '|V2', 'fortran_order': False, 'shape': (3,), }",
		"\x80\x3f\x20\xc0\x49\x40", 6, TC_T_BF16, 1, s3);
	expect_header_ok("{'descr': '<f8', 'fortran_order': False, 'shape': (-0,), }", NULL,
		0, TC_T_F64, 1, (const int64_t[]){0});
	/* Fortran order is harmless when only one dimension exceeds 1. */
	expect_header_ok("{'descr': '|u1', 'fortran_order': True, 'shape': (4,)}", u8,
		sizeof(u8), TC_T_U8, 1, s4);
	expect_header_ok("{'descr': '|u1', 'fortran_order': True, 'shape': (1, 4, 1)}", u8,
		sizeof(u8), TC_T_U8, 3, (const int64_t[]){1, 4, 1});
	expect_header_ok("{'descr': '|u1', 'fortran_order': True, 'shape': (3, 0)}", NULL, 0,
		TC_T_U8, 2, (const int64_t[]){3, 0});
}

/* Bool bytes other than 0 and 1 read as true (1), as NumPy interprets them. */
static void test_npy_normalises_bool_bytes(void **state)
{
	static const unsigned char raw[5] = {0, 1, 2, 255, 0x80};
	static const unsigned char want[5] = {0, 1, 1, 1, 1};
	size_t n;
	unsigned char *img = make_npy(1, 0, "{'descr': '|b1', 'fortran_order': False, 'shape': (5,)}",
		raw, sizeof(raw), &n);
	tc_npy a;
	char *err = NULL;
	(void)state;
	assert_int_equal(tc_npy_parse(img, n, "b.npy", &a, &err), 0);
	assert_int_equal(a.dtype, TC_T_BOOL);
	assert_memory_equal(a.data, want, sizeof(want));
	tc_npy_free(&a);
	free(img);
}

/* ---- errors ---- */

static void test_npy_missing_file_names_file_and_reason(void **state)
{
	tc_npy a;
	char *err = NULL;
	const char *path = TC_BINARY_DIR "/tmp-npy/does-not-exist.npy";
	(void)state;
	assert_int_equal(tc_npy_read(path, &a, &err), -1);
	assert_non_null(err);
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "cannot open"));
	assert_non_null(strstr(err, strerror(ENOENT)));
	assert_null(a.data);
	tc_free(err);
	/* A NULL err is allowed: the caller only wants the status. */
	assert_int_equal(tc_npy_read(path, &a, NULL), -1);
}

static void test_npy_rejects_non_npy_files(void **state)
{
	size_t n;
	unsigned char *img;
	(void)state;
	expect_parse_error("", 0, "not a .npy file (it is empty)");
	expect_parse_error("hello world", 11, "not a .npy file");
	expect_parse_error("\x93NUMPZ\x01\x00", 8, "not a .npy file");
	expect_parse_error("PK\x03\x04zzzz", 8, "not a .npy file (it is a zip archive");
	expect_parse_error("\x93NUM", 4, "truncated");
	expect_parse_error("\x93NUMPY\x01", 7, "truncated");
	img = make_npy(4, 0, f4_2x3, NULL, 0, &n);
	expect_parse_error(img, n, "unsupported .npy format version 4.0");
	free(img);
	img = make_npy(1, 1, f4_2x3, NULL, 0, &n);
	expect_parse_error(img, n, "unsupported .npy format version 1.1");
	free(img);
	img = make_npy(0, 0, f4_2x3, NULL, 0, &n);
	expect_parse_error(img, n, "unsupported .npy format version 0.0");
	free(img);
}

static void test_npy_rejects_malformed_headers(void **state)
{
	static const char *const bad[] = {
		"",
		"   \n",
		"{",
		"[]",
		"{'descr': '<f4'",
		"{'descr': '<f4', 'fortran_order': False}",
		"{'descr': '<f4', 'shape': (4,)}",
		"{'fortran_order': False, 'shape': (4,)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}",
		"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}",
		"{'descr': '<f4', 'fortran_order': 0, 'shape': (4,)}",
		"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (4,)}",
		"{'descr': '<f4', 'fortran_order': None, 'shape': (4,)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': [4]}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4.0,)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (a,)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4,,)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4 4)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4,}",
		"{'descr': <f4, 'fortran_order': False, 'shape': (4,)}",
		"{'descr': '<f4, 'fortran_order': False, 'shape': (4,)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} x",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)}}",
		"{'descr' '<f4', 'fortran_order': False, 'shape': (4,)}",
		"{'descr': '<f4' 'fortran_order': False, 'shape': (4,)}",
		"{descr: '<f4', 'fortran_order': False, 'shape': (4,)}",
		"{,}",
	};
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_header_error(bad[i], 16, "malformed header");
}

static void test_npy_rejects_fortran_order(void **state)
{
	(void)state;
	expect_header_error("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24,
		"is in Fortran order; tcomp needs C order: save with np.ascontiguousarray");
}

static void test_npy_rejects_big_endian(void **state)
{
	(void)state;
	expect_header_error("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24,
		"big-endian data not supported");
	expect_header_error("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", 4,
		"big-endian data not supported");
	expect_header_error("{'descr': '!u8', 'fortran_order': False, 'shape': (1,), }", 8,
		"astype('<u8')");
}

static void test_npy_names_unsupported_dtypes(void **state)
{
	static const struct {
		const char *descr, *phrase;
	} cases[] = {
		{"<c8", "complex64"},
		{"<c16", "complex128"},
		{"<U5", "unicode string"},
		{"|S3", "byte string"},
		{"|O", "Python object"},
		{"<M8[ns]", "datetime64"},
		{"<m8[s]", "timedelta64"},
		{"|V16", "void"},
		{"<f16", "float128"},
		{"<i3", "'<i3'"},
		{"|b2", "'|b2'"},
		{"", "unsupported dtype ''"},
		{"<", "unsupported dtype '<'"},
		{"f4 ", "'f4 '"},
		{"\x01\xff", "'\\x01\\xff'"},
	};
	size_t i;
	char header[200];
	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(header, sizeof(header),
			"{'descr': '%s', 'fortran_order': False, 'shape': (2,), }", cases[i].descr);
		expect_header_error(header, 8, "unsupported dtype");
		expect_header_error(header, 8, cases[i].phrase);
	}
	expect_header_error("{'descr': [('x', '<f4'), ('y', '<i4')], 'fortran_order': False, "
			    "'shape': (2,), }", 16, "structured");
}

static void test_npy_rejects_bad_shapes(void **state)
{
	(void)state;
	expect_header_error("{'descr': '|u1', 'fortran_order': False, "
			    "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", 1,
		"has rank 9");
	expect_header_error("{'descr': '|u1', 'fortran_order': False, "
			    "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", 1,
		"at most 8 dimensions");
	expect_header_error("{'descr': '|u1', 'fortran_order': False, 'shape': (-1, 3), }", 0,
		"negative dimension '-1' in shape '(-1, 3)'");
	expect_header_error("{'descr': '|u1', 'fortran_order': False, 'shape': (3, -4), }", 0,
		"negative dimension");
	expect_header_error("{'descr': '|u1', 'fortran_order': False, "
			    "'shape': (99999999999999999999,), }", 0, "is too large");
	expect_header_error("{'descr': '|u1', 'fortran_order': False, "
			    "'shape': (9223372036854775808,), }", 0, "is too large");
	expect_header_error("{'descr': '<f8', 'fortran_order': False, "
			    "'shape': (4294967296, 4294967296), }", 0, "too large");
	expect_header_error("{'descr': '<f8', 'fortran_order': False, "
			    "'shape': (1152921504606846976,), }", 0, "too large");
}

/* Data shorter or longer than the header says: the message gives both. */
static void test_npy_reports_truncated_and_trailing_data(void **state)
{
	static const char *const h =
		"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 5), }";
	const char *path = tmp_path("trunc");
	unsigned char data[100] = {0};
	size_t n;
	unsigned char *img;
	tc_npy a;
	char *err = NULL;
	(void)state;
	expect_header_error(h, 40, "truncated: header says 4x5 float32 (80 bytes) but only 40 bytes follow");
	expect_header_error(h, 0, "truncated: header says 4x5 float32 (80 bytes) but only 0 bytes follow");
	expect_header_error(h, 96, "header says 4x5 float32 (80 bytes) but 96 bytes follow (16 bytes of trailing data)");
	expect_header_error("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 4,
		"header says scalar int64 (8 bytes) but only 4 bytes follow");
	/* The same through a file. */
	img = make_npy(1, 0, h, data, 40, &n);
	write_bytes(path, img, n);
	assert_int_equal(tc_npy_read(path, &a, &err), -1);
	assert_non_null(strstr(err, "truncated: header says 4x5 float32 (80 bytes) but only 40 bytes follow"));
	assert_non_null(strstr(err, path));
	tc_free(err);
	free(img);
	/* A header cut short. */
	img = make_npy(1, 0, h, data, 0, &n);
	expect_parse_error(img, n - 10, "truncated: the header should have");
	expect_parse_error(img, 9, "truncated");
	free(img);
	remove(path);
}

/* A header length above the limit is refused before anything is allocated. */
static void test_npy_rejects_huge_header_length(void **state)
{
	unsigned char img[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0x7f};
	(void)state;
	expect_parse_error(img, sizeof(img), "above the limit");
}

/* Writing reports its failures too and leaves no partial file behind. */
static void test_npy_write_reports_errors(void **state)
{
	static const int64_t shape[2] = {2, 2}, neg[1] = {-1};
	static const float vals[4] = {0};
	char *err = NULL;
	const char *path = tmp_path("werr");
	(void)state;
	assert_int_equal(tc_npy_write(TC_BINARY_DIR "/tmp-npy/no/such/dir/x.npy", TC_T_F32, 2,
				 shape, vals, &err), -1);
	assert_non_null(strstr(err, "cannot create"));
	tc_free(err);
	assert_int_equal(tc_npy_write(path, TC_T_NONE, 2, shape, vals, &err), -1);
	assert_non_null(strstr(err, "not an element type"));
	tc_free(err);
	assert_int_equal(tc_npy_write(path, TC_T_F32, 9, shape, vals, &err), -1);
	assert_non_null(strstr(err, "rank 9"));
	tc_free(err);
	assert_int_equal(tc_npy_write(path, TC_T_F32, 1, neg, vals, &err), -1);
	assert_non_null(strstr(err, "negative"));
	tc_free(err);
	assert_int_equal(tc_npy_write(path, TC_T_F32, 2, shape, NULL, &err), -1);
	assert_non_null(strstr(err, "no data"));
	tc_free(err);
	if (access("/dev/full", W_OK) == 0) {
		assert_int_equal(tc_npy_write("/dev/full", TC_T_F32, 2, shape, vals, &err), -1);
		assert_non_null(strstr(err, "write error"));
		tc_free(err);
	}
	assert_int_equal(access(path, F_OK), -1);
}

/* Reading through a pipe (size unknown in advance): the buffer grows as
 * data arrives and wrong sizes are still caught. */
static void read_through_fifo(const unsigned char *img, size_t n, int expect_ok,
	const char *phrase, size_t nbytes)
{
	const char *path = tmp_path("fifo");
	pid_t pid;
	tc_npy a;
	char *err = NULL;
	int status, r;

	remove(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		FILE *f = fopen(path, "wb");
		size_t w = f ? fwrite(img, 1, n, f) : 0;
		_exit(f && w == n && fclose(f) == 0 ? 0 : 1);
	}
	r = tc_npy_read(path, &a, &err);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	remove(path);
	if (expect_ok) {
		if (r != 0)
			fail_msg("fifo read: %s", err);
		assert_int_equal(a.nbytes, nbytes);
		assert_memory_equal(a.data, img + n - nbytes, nbytes);
		tc_npy_free(&a);
	} else {
		assert_int_equal(r, -1);
		if (!strstr(err, phrase))
			fail_msg("message '%s' lacks '%s'", err, phrase);
		tc_free(err);
	}
}

static void test_npy_reads_from_pipes(void **state)
{
	static const char *const h =
		"{'descr': '<f8', 'fortran_order': False, 'shape': (700, 300), }";
	size_t nbytes = 700 * 300 * 8, n, i;
	unsigned char *data = malloc(nbytes + 8);
	unsigned char *img;
	(void)state;
	assert_non_null(data);
	for (i = 0; i < nbytes + 8; i++)
		data[i] = (unsigned char)(i * 7);
	img = make_npy(1, 0, h, data, nbytes, &n);
	read_through_fifo(img, n, 1, NULL, nbytes);
	read_through_fifo(img, n - 1000, 0, "truncated: header says 700x300 float64", 0);
	free(img);
	img = make_npy(1, 0, h, data, nbytes + 8, &n);
	read_through_fifo(img, n, 0, "more bytes follow (trailing data)", 0);
	free(img);
	free(data);
}

/* ---- robustness ---- */

/* Parse one mutated image; any outcome but a crash or an inconsistent
 * result is fine. */
static void parse_any(const unsigned char *img, size_t n)
{
	tc_npy a;
	char *err = NULL;
	if (tc_npy_parse(img, n, "fuzz.npy", &a, &err) == 0) {
		assert_null(err);
		assert_non_null(a.data);
		assert_true(a.ndim >= 0 && a.ndim <= 8);
		assert_true(a.dtype > TC_T_NONE && a.dtype < TC_T_COUNT);
		assert_int_equal(a.nbytes, (size_t)a.numel * (size_t)tc_dtype_size(a.dtype));
		assert_true(a.nbytes <= n);
		tc_npy_free(&a);
	} else {
		assert_non_null(err);
		assert_null(a.data);
		assert_int_equal(strncmp(err, "fuzz.npy: ", 10), 0);
		tc_free(err);
	}
}

/* Every prefix of valid images fails cleanly (all but the whole image), and
 * every byte replaced by interesting values gives an array or a message. */
static void test_npy_survives_truncation_and_mutation_at_every_byte(void **state)
{
	static const unsigned char vals[] = {0, 1, 0x7f, 0x80, 0xff, ' ', '\n', '\'', '"', '(',
		')', ',', ':', '{', '}', '[', '-', '0', '9', 'L', 'T', '<', '>', '|', '\\', 2, 3};
	static const int16_t i2[6] = {1, -2, 3, -4, 5, -6};
	static const char *const headers[] = {
		"{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }          \n",
		"{'descr': '|b1', 'fortran_order': False, 'shape': (12,), }\n",
		"{\"shape\": (3L, 2L), \"descr\": \"<f2\", \"fortran_order\": False}",
	};
	const char *path = tmp_path("fuzz");
	int major, hi;
	(void)state;
	for (hi = 0; hi < 3; hi++) {
		for (major = 1; major <= 3; major += 2) {
			size_t n, k, v;
			unsigned char *img = make_npy(major, 0, headers[hi], i2, sizeof(i2), &n);
			unsigned char *m = malloc(n);
			assert_non_null(m);
			for (k = 0; k < n; k++) {
				tc_npy a;
				char *err = NULL;
				assert_int_equal(tc_npy_parse(img, k, "fuzz.npy", &a, &err), -1);
				assert_non_null(err);
				tc_free(err);
			}
			parse_any(img, n);
			for (k = 0; k < n; k++) {
				memcpy(m, img, n);
				for (v = 0; v < sizeof(vals); v++) {
					m[k] = vals[v];
					parse_any(m, n);
				}
				for (v = 0; v < 8; v++) {
					m[k] = img[k] ^ (unsigned char)(1u << v);
					parse_any(m, n);
				}
			}
			/* Truncation through real files, every 7th length. */
			for (k = 0; k < n; k += 7) {
				tc_npy a;
				char *err = NULL;
				write_bytes(path, img, k);
				assert_int_equal(tc_npy_read(path, &a, &err), -1);
				assert_non_null(err);
				tc_free(err);
			}
			free(m);
			free(img);
		}
	}
	remove(path);
}

/* Random multi-byte mutations, splices and lengths (deterministic). */
static void test_npy_survives_random_mutations(void **state)
{
	uint64_t s = 0x9e3779b97f4a7c15u;
	static const double f8[4] = {1, 2, 3, 4};
	size_t n, i;
	unsigned char *img = make_npy(1, 0,
		"{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", f8, sizeof(f8), &n);
	unsigned char *m = malloc(n + 64);
	(void)state;
	assert_non_null(m);
	for (i = 0; i < 40000; i++) {
		size_t len = n, j, edits;
		memcpy(m, img, n);
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		edits = 1 + s % 4;
		for (j = 0; j < edits; j++) {
			uint64_t r = s * (j + 1) * 0x2545f4914f6cdd1du;
			m[(r >> 8) % n] = (unsigned char)(r >> 40);
		}
		if (s & 0x100)
			len = (size_t)((s >> 20) % (n + 64));
		if (len > n)
			memset(m + n, (int)(s >> 50), len - n);
		parse_any(m, len);
	}
	free(m);
	free(img);
}

/* ---- allocation failures ---- */

static long alloc_countdown;

/* An allocation hook that fails once alloc_countdown reaches zero. */
static void *failing_alloc(void *ud, void *ptr, size_t size)
{
	(void)ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	if (alloc_countdown-- == 0)
		return NULL;
	return realloc(ptr, size);
}

/* Failing the N-th allocation, for every N, gives -1 (or success once N is
 * past the last allocation) and leaks nothing (checked under ASan). */
static void test_npy_handles_allocation_failures(void **state)
{
	static const float vals[6] = {1, 2, 3, 4, 5, 6};
	static const int64_t shape[2] = {2, 3};
	const char *path = tmp_path("oom");
	size_t n, nbad;
	unsigned char *img = make_npy(1, 0, f4_2x3, vals, sizeof(vals), &n);
	unsigned char *bad = make_npy(1, 0, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
		vals, sizeof(vals), &nbad);
	long k;
	int done = 0;
	(void)state;
	for (k = 0; !done; k++) {
		tc_npy a;
		char *err = NULL;
		int r1, r2, r3;
		alloc_countdown = k;
		tc_set_alloc(failing_alloc, NULL);
		r1 = tc_npy_parse(img, n, "m.npy", &a, &err);
		if (r1 == 0)
			tc_npy_free(&a);
		tc_free(err);
		err = NULL;
		alloc_countdown = k;
		r2 = tc_npy_parse(bad, nbad, "m.npy", &a, &err);
		assert_int_equal(r2, -1);
		tc_free(err);
		err = NULL;
		alloc_countdown = k;
		r3 = tc_npy_write(path, TC_T_F32, 2, shape, vals, &err);
		tc_free(err);
		err = NULL;
		tc_set_alloc(NULL, NULL);
		if (r3 == 0) {
			assert_int_equal(tc_npy_read(path, &a, &err), 0);
			assert_memory_equal(a.data, vals, sizeof(vals));
			tc_npy_free(&a);
		}
		done = r1 == 0 && r3 == 0 && k > 8;
		assert_true(k < 100);
	}
	remove(path);
	free(img);
	free(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_npy_round_trip_every_dtype_and_rank),
		cmocka_unit_test(test_npy_write_produces_numpy_layout),
		cmocka_unit_test(test_npy_reads_versions_2_and_3),
		cmocka_unit_test(test_npy_accepts_header_variants),
		cmocka_unit_test(test_npy_normalises_bool_bytes),
		cmocka_unit_test(test_npy_missing_file_names_file_and_reason),
		cmocka_unit_test(test_npy_rejects_non_npy_files),
		cmocka_unit_test(test_npy_rejects_malformed_headers),
		cmocka_unit_test(test_npy_rejects_fortran_order),
		cmocka_unit_test(test_npy_rejects_big_endian),
		cmocka_unit_test(test_npy_names_unsupported_dtypes),
		cmocka_unit_test(test_npy_rejects_bad_shapes),
		cmocka_unit_test(test_npy_reports_truncated_and_trailing_data),
		cmocka_unit_test(test_npy_rejects_huge_header_length),
		cmocka_unit_test(test_npy_write_reports_errors),
		cmocka_unit_test(test_npy_reads_from_pipes),
		cmocka_unit_test(test_npy_survives_truncation_and_mutation_at_every_byte),
		cmocka_unit_test(test_npy_survives_random_mutations),
		cmocka_unit_test(test_npy_handles_allocation_failures),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
