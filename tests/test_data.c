/* Unit tests of runtime/data.c (include/tcomp.h, "data: IDX files and
 * shuffled batches"): IDX files of every type byte and ranks 1 to 3, plain
 * and gzip-compressed, read back exactly; every refused file with a message
 * naming the file and the problem; allocation failures; batches that visit
 * every row once per epoch in the documented shuffle order, keep the
 * tensors' rows paired, convert as promised and allocate nothing; and the
 * real Fashion-MNIST files that `make setup` installs. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "lang/util.h"
#include "tcomp.h"
#include "tests/testutil.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

/* ---- files in a temporary folder ---- */

static char tmpdir[512];

static int make_tmpdir(void **state)
{
	const char *t = getenv("TMPDIR");
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "%s/tcomp-data-XXXXXX", t && *t ? t : "/tmp");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state)
{
	DIR *dir;
	struct dirent *e;
	char path[1024];
	(void)state;
	if ((dir = opendir(tmpdir))) {
		while ((e = readdir(dir)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
				unlink(path);
			}
		closedir(dir);
	}
	rmdir(tmpdir);
	return 0;
}

/* tmpdir/name, in one of a few static buffers. */
static const char *tmp_path(const char *name)
{
	static char path[4][1024];
	static int k;
	char *p = path[k++ % 4];
	snprintf(p, 1024, "%s/%s", tmpdir, name);
	return p;
}

static void write_plain(const char *path, const void *bytes, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	if (n)
		assert_int_equal(fwrite(bytes, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* path as gzip (zlib's gzwrite, as the gzip tool writes it). */
static void write_gz(const char *path, const void *bytes, size_t n)
{
	gzFile f = gzopen(path, "wb");
	assert_non_null(f);
	if (n)
		assert_int_equal(gzwrite(f, bytes, (unsigned)n), (int)n);
	assert_int_equal(gzclose(f), Z_OK);
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

/* ---- IDX images, written independently of the library ---- */

/* An IDX type byte and what it stands for. */
typedef struct idx_type {
	unsigned char byte;
	const char *name; /* tc_dtype_str of the tensor */
	int size;
	DLDataType dl;
} idx_type;

static const idx_type idx_types[] = {
	{0x08, "uint8", 1, {kDLUInt, 8, 1}},    {0x09, "int8", 1, {kDLInt, 8, 1}},
	{0x0B, "int16", 2, {kDLInt, 16, 1}},    {0x0C, "int32", 4, {kDLInt, 32, 1}},
	{0x0D, "float32", 4, {kDLFloat, 32, 1}}, {0x0E, "float64", 8, {kDLFloat, 64, 1}},
};

/* An IDX image: the header for type byte and shape, then count elements of
 * size bytes from host-order values, written most significant byte first.
 * malloc'd; *n gets its size. */
static unsigned char *idx_image(unsigned char type, int rank, const uint32_t *shape,
	const void *values, int size, size_t count, size_t *n)
{
	size_t header = 4 + 4 * (size_t)rank, i, k = 0;
	unsigned char *b = malloc(header + count * (size_t)size + 1);
	int d, j;
	assert_non_null(b);
	b[k++] = 0;
	b[k++] = 0;
	b[k++] = type;
	b[k++] = (unsigned char)rank;
	for (d = 0; d < rank; d++)
		for (j = 3; j >= 0; j--)
			b[k++] = (unsigned char)(shape[d] >> (8 * j));
	for (i = 0; i < count; i++) {
		uint64_t v = 0;
		switch (size) {
		case 1: v = ((const uint8_t *)values)[i]; break;
		case 2: v = ((const uint16_t *)values)[i]; break;
		case 4: v = ((const uint32_t *)values)[i]; break;
		default: v = ((const uint64_t *)values)[i]; break;
		}
		for (j = size - 1; j >= 0; j--)
			b[k++] = (unsigned char)(v >> (8 * j));
	}
	*n = k;
	return b;
}

/* count random non-zero values of type t (host order) into a malloc'd
 * array: integers over their whole range, floats with random mantissas,
 * signs and exponents, so that a byte in the wrong place shows. */
static void *random_values(const idx_type *t, size_t count, uint64_t *rng)
{
	unsigned char *v = malloc(count * (size_t)t->size + 1);
	size_t i;
	assert_non_null(v);
	for (i = 0; i < count; i++) {
		uint64_t r;
		do
			r = tu_rand_u64(rng);
		while (!(r & 0xff)); /* never 0, whatever the width */
		if (t->byte == 0x0D) {
			float f = (float)((tu_rand_unit(rng) + 0.5) * ldexp(1, (int)(r % 40) - 20));
			if (r & 0x100)
				f = -f;
			memcpy(v + 4 * i, &f, 4);
		} else if (t->byte == 0x0E) {
			double x = (tu_rand_unit(rng) + 0.5) * ldexp(1, (int)(r % 200) - 100);
			if (r & 0x100)
				x = -x;
			memcpy(v + 8 * i, &x, 8);
		} else {
			memcpy(v + (size_t)t->size * i, &r, (size_t)t->size); /* low bytes */
			if (t->size > 1 && !memcmp(v + (size_t)t->size * i, "\0\0\0\0", (size_t)t->size))
				v[(size_t)t->size * i] = 1;
		}
	}
	return v;
}

/* Read path and check it is exactly the tensor of type t, shape and values. */
static void expect_tensor(tc_context *ctx, const char *path, const idx_type *t, int rank,
	const uint32_t *shape, const void *values, size_t count)
{
	DLManagedTensor *m = tc_idx_read(ctx, path);
	DLTensor *x;
	int d;
	if (!m)
		fail_msg("%s: %s", path, tc_context_error(ctx));
	assert_string_equal(tc_context_error(ctx), "");
	x = &m->dl_tensor;
	assert_int_equal(x->device.device_type, kDLCPU);
	assert_int_equal(x->device.device_id, 0);
	assert_int_equal(x->dtype.code, t->dl.code);
	assert_int_equal(x->dtype.bits, t->dl.bits);
	assert_int_equal(x->dtype.lanes, 1);
	assert_string_equal(tc_dtype_str(x->dtype), t->name);
	assert_int_equal(x->ndim, rank);
	for (d = 0; d < rank; d++)
		assert_int_equal(x->shape[d], shape[d]);
	assert_null(x->strides);
	assert_int_equal(x->byte_offset, 0);
	assert_non_null(x->data);
	assert_int_equal((uintptr_t)x->data % 64, 0);
	if (count)
		assert_memory_equal(x->data, values, count * (size_t)t->size);
	assert_non_null(m->deleter);
	m->deleter(m);
}

/* ---- reading ---- */

/* Every type byte, ranks 1 to 3, plain and gzip: the values and shapes
 * written come back exactly, in host order. */
static void idx_every_type_and_rank_plain_and_gzip(void **state)
{
	static const uint32_t shapes[3][3] = {{37}, {5, 9}, {3, 4, 7}};
	tc_context *ctx = tc_context_new();
	size_t ti;
	int rank, gz;
	(void)state;
	assert_non_null(ctx);
	for (ti = 0; ti < sizeof(idx_types) / sizeof(idx_types[0]); ti++)
		for (rank = 1; rank <= 3; rank++) {
			const idx_type *t = &idx_types[ti];
			uint64_t rng = tu_seed(t->name, (uint64_t)rank);
			size_t count = 1, n;
			void *values;
			unsigned char *img;
			int d;
			for (d = 0; d < rank; d++)
				count *= shapes[rank - 1][d];
			values = random_values(t, count, &rng);
			img = idx_image(t->byte, rank, shapes[rank - 1], values, t->size, count, &n);
			for (gz = 0; gz < 2; gz++) {
				char name[64];
				const char *path;
				snprintf(name, sizeof(name), "%s-%d%s", t->name, rank, gz ? ".gz" : "");
				path = tmp_path(name);
				if (gz)
					write_gz(path, img, n);
				else
					write_plain(path, img, n);
				expect_tensor(ctx, path, t, rank, shapes[rank - 1], values, count);
			}
			free(img);
			free(values);
		}
	tc_context_free(ctx);
}

/* Rank 8 (the largest), an extent of 0 (a tensor without elements), and
 * a gzip file of two members (as `cat a.gz b.gz` makes). */
static void idx_rank_8_empty_and_concatenated_gzip(void **state)
{
	static const uint32_t s8[8] = {2, 1, 2, 1, 3, 1, 2, 2}, s0[2] = {0, 5};
	tc_context *ctx = tc_context_new();
	uint64_t rng = tu_seed("rank8", 0);
	const idx_type *t16 = &idx_types[2];
	void *values = random_values(t16, 48, &rng);
	unsigned char *img, *a, *b, *cat;
	size_t n, na, nb;
	const char *path;
	(void)state;
	img = idx_image(t16->byte, 8, s8, values, 2, 48, &n);
	path = tmp_path("rank8.gz");
	write_gz(path, img, n);
	expect_tensor(ctx, path, t16, 8, s8, values, 48);
	/* the same image in two gzip members */
	write_gz(tmp_path("part1.gz"), img, 11);
	write_gz(tmp_path("part2.gz"), img + 11, n - 11);
	a = slurp(tmp_path("part1.gz"), &na);
	b = slurp(tmp_path("part2.gz"), &nb);
	cat = malloc(na + nb);
	assert_non_null(cat);
	memcpy(cat, a, na);
	memcpy(cat + na, b, nb);
	path = tmp_path("two-members.gz");
	write_plain(path, cat, na + nb);
	expect_tensor(ctx, path, t16, 8, s8, values, 48);
	free(cat);
	free(a);
	free(b);
	free(img);
	img = idx_image(0x0D, 2, s0, NULL, 4, 0, &n);
	path = tmp_path("empty-tensor");
	write_plain(path, img, n);
	expect_tensor(ctx, path, &idx_types[4], 2, s0, NULL, 0);
	free(img);
	free(values);
	tc_context_free(ctx);
}

/* tc_idx_read of bytes[0..n) (written plain, or gzip when gz) refused with
 * a message holding the file's name and each of the phrases (NULL ends). */
static void expect_refused(tc_context *ctx, const char *name, const void *bytes, size_t n,
	int gz, ...)
{
	const char *path = tmp_path(name), *phrase, *msg;
	va_list ap;
	if (gz)
		write_gz(path, bytes, n);
	else
		write_plain(path, bytes, n);
	if (tc_idx_read(ctx, path))
		fail_msg("%s was read; expected an error", name);
	msg = tc_context_error(ctx);
	assert_int_equal(tc_context_error_kind(ctx), TC_ERROR_USER);
	assert_true(tu_contains(msg, path));
	va_start(ap, gz);
	while ((phrase = va_arg(ap, const char *)))
		assert_true(tu_contains(msg, phrase));
	va_end(ap);
}

/* Each malformed file: NULL, and a message naming the file and what is
 * wrong with it. */
static void idx_bad_files_say_what_is_wrong(void **state)
{
	static const uint32_t s34[2] = {3, 4};
	static const uint8_t twelve[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	static const unsigned char magic[] = {0x01, 0x00, 0x08, 0x01, 0, 0, 0, 1, 7};
	static const unsigned char type0a[] = {0, 0, 0x0A, 0x01, 0, 0, 0, 1, 7};
	static const unsigned char rank0[] = {0, 0, 0x08, 0x00, 7};
	static const unsigned char rank9[] = {0, 0, 0x08, 0x09, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
		0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 7};
	static const unsigned char short_header[] = {0, 0, 0x08, 0x03, 0, 0, 0, 2, 0, 0};
	tc_context *ctx = tc_context_new();
	unsigned char *img, *longer;
	const char *path;
	size_t n;
	(void)state;

	path = tmp_path("no-such-file");
	assert_null(tc_idx_read(ctx, path));
	assert_true(tu_contains(tc_context_error(ctx), "cannot open"));
	assert_true(tu_contains(tc_context_error(ctx), path));
	assert_true(tu_contains(tc_context_error(ctx), "No such file"));

	expect_refused(ctx, "empty", "", 0, 0, "is empty", NULL);
	expect_refused(ctx, "three-bytes", "\0\0\x08", 3, 0, "not an IDX file", "3 bytes", NULL);
	expect_refused(ctx, "bad-magic", magic, sizeof(magic), 0, "bad magic", "01 00", NULL);
	expect_refused(ctx, "bad-magic.gz", magic, sizeof(magic), 1, "bad magic", NULL);
	expect_refused(ctx, "type-0a", type0a, sizeof(type0a), 0, "unknown IDX type byte 0x0A",
		NULL);
	expect_refused(ctx, "rank-0", rank0, sizeof(rank0), 0, "rank 0", NULL);
	expect_refused(ctx, "rank-9", rank9, sizeof(rank9), 0, "rank 9", NULL);
	expect_refused(ctx, "short-header", short_header, sizeof(short_header), 0,
		"truncated IDX header", "expected 16", "found 10", NULL);

	img = idx_image(0x08, 2, s34, twelve, 1, 12, &n);
	expect_refused(ctx, "truncated", img, n - 2, 0, "truncated IDX data", "expected 12 bytes",
		"but found 10", "3x4", NULL);
	expect_refused(ctx, "truncated.gz", img, n - 2, 1, "truncated IDX data", "expected 12",
		"found 10", NULL);
	longer = malloc(n + 3);
	assert_non_null(longer);
	memcpy(longer, img, n);
	memcpy(longer + n, "abc", 3);
	expect_refused(ctx, "trailing", longer, n + 3, 0, "trailing bytes", "expected 12",
		"found 15", NULL);
	expect_refused(ctx, "trailing.gz", longer, n + 3, 1, "trailing bytes", NULL);
	free(longer);
	free(img);
	tc_context_free(ctx);
}

/* A gzip file cut short, one with bytes flipped in the middle, and one with
 * garbage after its stream: each refused as a corrupt or truncated stream,
 * never read short. */
static void idx_truncated_and_corrupt_gzip_are_errors(void **state)
{
	static const uint32_t shape[2] = {64, 50};
	tc_context *ctx = tc_context_new();
	uint64_t rng = tu_seed("gzip", 0);
	void *values = random_values(&idx_types[3], 3200, &rng);
	unsigned char *img, *gz, *bad;
	size_t n, ngz, cut;
	const char *path;
	(void)state;
	img = idx_image(0x0C, 2, shape, values, 4, 3200, &n);
	path = tmp_path("good.gz");
	write_gz(path, img, n);
	expect_tensor(ctx, path, &idx_types[3], 2, shape, values, 3200);
	gz = slurp(path, &ngz);
	assert_true(ngz > 1000);

	/* cut anywhere: in the deflate data, in the trailer, after the header */
	for (cut = 11; cut < ngz; cut += cut < ngz - 16 ? 997 : 1) {
		char name[64];
		snprintf(name, sizeof(name), "cut-%zu.gz", cut);
		expect_refused(ctx, name, gz, cut, 0, "truncated gzip stream", NULL);
	}

	bad = malloc(ngz + 8);
	assert_non_null(bad);
	memcpy(bad, gz, ngz);
	bad[ngz / 2] ^= 0xff;
	bad[ngz / 2 + 1] ^= 0x55;
	bad[ngz / 2 + 2] ^= 0xaa;
	expect_refused(ctx, "flipped.gz", bad, ngz, 0, "corrupt gzip stream", NULL);
	/* a flip in the stored CRC alone: zlib's check of the data catches it */
	memcpy(bad, gz, ngz);
	bad[ngz - 6] ^= 0x01;
	expect_refused(ctx, "bad-crc.gz", bad, ngz, 0, "corrupt gzip stream", NULL);
	/* garbage after a whole stream */
	memcpy(bad, gz, ngz);
	memcpy(bad + ngz, "garbage!", 8);
	expect_refused(ctx, "garbage.gz", bad, ngz + 8, 0, "corrupt gzip stream",
		"8 bytes after the end of the stream", NULL);
	free(bad);
	free(gz);
	free(img);
	free(values);
	tc_context_free(ctx);
}

/* An allocation hook that fails the n-th allocation from now on. */
typedef struct fail_nth {
	int n;
	int calls;
} fail_nth;

static void *fail_alloc(void *ud, void *ptr, size_t size)
{
	fail_nth *f = ud;
	if (!size) {
		free(ptr);
		return NULL;
	}
	f->calls++;
	if (f->n-- == 0)
		return NULL;
	return realloc(ptr, size);
}

/* Each allocation of tc_idx_read (plain and gzip) failing in turn: NULL
 * with "out of memory" (TC_ERROR_NOMEM), nothing leaked (ASan). */
static void idx_allocation_failures(void **state)
{
	static const uint32_t shape[1] = {300};
	tc_context *ctx = tc_context_new();
	uint64_t rng = tu_seed("oom", 0);
	void *values = random_values(&idx_types[5], 300, &rng);
	unsigned char *img;
	size_t n;
	int gz;
	(void)state;
	img = idx_image(0x0E, 1, shape, values, 8, 300, &n);
	write_plain(tmp_path("oom"), img, n);
	write_gz(tmp_path("oom.gz"), img, n);
	for (gz = 0; gz < 2; gz++) {
		const char *path = tmp_path(gz ? "oom.gz" : "oom");
		int k, failed = 0;
		for (k = 0;; k++) {
			fail_nth f = {k, 0};
			DLManagedTensor *m;
			tc_set_alloc(fail_alloc, &f);
			m = tc_idx_read(ctx, path);
			tc_set_alloc(NULL, NULL);
			if (m) {
				m->deleter(m);
				break;
			}
			if (tc_context_error_kind(ctx) != TC_ERROR_NOMEM)
				fail_msg("allocation %d failed: error %s", k, tc_context_error(ctx));
			failed++;
		}
		assert_true(failed >= (gz ? 3 : 2));
		expect_tensor(ctx, path, &idx_types[5], 1, shape, values, 300);
	}
	free(img);
	free(values);
	tc_context_free(ctx);
}

/* NULL arguments of tc_idx_read. */
static void idx_null_arguments(void **state)
{
	tc_context *ctx = tc_context_new();
	(void)state;
	assert_null(tc_idx_read(NULL, "x"));
	assert_null(tc_idx_read(ctx, NULL));
	assert_true(tu_contains(tc_context_error(ctx), "path is NULL"));
	tc_context_free(ctx);
}

/* ---- batches ---- */

#define NROWS 103
#define IMG_H 4
#define IMG_W 3

/* Images uint8[NROWS, IMG_H, IMG_W] whose bytes are a function of their row,
 * and labels int32[NROWS] holding the row's index: a batch's images and
 * labels must stay paired. */
typedef struct dataset {
	tu_tensor images, labels;
	const DLTensor *data[2];
} dataset;

static uint8_t pixel(int64_t row, int k)
{
	return (uint8_t)(row * 37 + k * 11 + 1);
}

static void dataset_init(dataset *s, int64_t rows)
{
	int64_t si[3] = {rows, IMG_H, IMG_W}, r;
	int k;
	tu_tensor_init(&s->images, TU_U8, si, 3);
	tu_tensor_init(&s->labels, TU_I32, si, 1);
	for (r = 0; r < rows; r++) {
		for (k = 0; k < IMG_H * IMG_W; k++)
			((uint8_t *)s->images.data)[r * IMG_H * IMG_W + k] = pixel(r, k);
		((int32_t *)s->labels.data)[r] = (int32_t)r;
	}
	s->data[0] = &s->images.dl;
	s->data[1] = &s->labels.dl;
}

static void dataset_fini(dataset *s)
{
	tu_tensor_fini(&s->images);
	tu_tensor_fini(&s->labels);
}

/* Out tensors for a batch: float32 images, int64 labels. */
typedef struct batch_out {
	tu_tensor x, y;
	DLTensor *out[2];
} batch_out;

static void batch_out_init(batch_out *o, int64_t batch, tu_elt xe, tu_elt ye, int flat)
{
	int64_t sx[3] = {batch, IMG_H, IMG_W}, sf[2] = {batch, IMG_H * IMG_W};
	if (flat) /* the rows reshaped: images as rows of IMG_H * IMG_W */
		tu_tensor_init(&o->x, xe, sf, 2);
	else
		tu_tensor_init(&o->x, xe, sx, 3);
	tu_tensor_init(&o->y, ye, sx, 1);
	o->out[0] = &o->x.dl;
	o->out[1] = &o->y.dl;
}

static void batch_out_fini(batch_out *o)
{
	tu_tensor_fini(&o->x);
	tu_tensor_fini(&o->y);
}

/* One epoch of b into order[0..per_epoch*batch) (the rows in the order
 * served, read from the labels), checking that each image is its label's
 * row (uint8 to float32 times 1/255, exactly as double then float) and that
 * the epoch ends with 0. */
static void run_epoch(tc_batches *b, batch_out *o, int64_t batch, int64_t *order)
{
	static const double scale[2] = {1 / 255.0, 1};
	int64_t per = tc_batches_per_epoch(b), k, r;
	int i;
	for (k = 0; k < per; k++) {
		tu_poison(&o->x);
		tu_poison(&o->y);
		if (tc_batches_next(b, o->out, 2, scale) != 1)
			fail_msg("batch %lld: not 1", (long long)k);
		for (r = 0; r < batch; r++) {
			int64_t row = ((int64_t *)o->y.data)[r];
			assert_true(row >= 0 && row < NROWS);
			order[k * batch + r] = row;
			for (i = 0; i < IMG_H * IMG_W; i++) {
				float want = (float)((double)pixel(row, i) * (1 / 255.0));
				float got = ((float *)o->x.data)[r * IMG_H * IMG_W + i];
				if (got != want)
					fail_msg("row %lld element %d: %.9g, expected %.9g",
						(long long)row, i, got, want);
				assert_true(got >= 0 && got <= 1);
			}
		}
	}
	assert_int_equal(tc_batches_next(b, o->out, 2, scale), 0);
}

/* Each row at most once in order[0..n), and exactly n distinct rows. */
static void expect_distinct(const int64_t *order, int64_t n, int64_t rows)
{
	char seen[NROWS] = {0};
	int64_t i, distinct = 0;
	for (i = 0; i < n; i++) {
		assert_true(order[i] >= 0 && order[i] < rows);
		if (seen[order[i]])
			fail_msg("row %lld twice in an epoch", (long long)order[i]);
		seen[order[i]] = 1;
		distinct++;
	}
	assert_int_equal(distinct, n);
}

/* The documented order (include/tcomp.h): for each epoch, the file order,
 * then for i = rows-1 down to 1 swap p[i] and p[j], j = next() % (i+1),
 * next() being xorshift64* (tu_rand_u64) continuing from the seed. */
static void reference_order(uint64_t *state, int64_t rows, int64_t *p)
{
	int64_t i;
	for (i = 0; i < rows; i++)
		p[i] = i;
	if (!*state)
		return;
	for (i = rows - 1; i >= 1; i--) {
		int64_t j = (int64_t)(tu_rand_u64(state) % (uint64_t)(i + 1)), t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
}

/* 103 rows in batches of 10: 10 batches per epoch, 100 distinct rows, the
 * last 3 of each epoch's order skipped; epochs counted from the first
 * batch; each epoch's order the documented one, different from the last;
 * images and labels paired. */
static void batches_visit_each_row_once_per_epoch(void **state)
{
	tc_context *ctx = tc_context_new();
	int64_t order[NROWS], prev[NROWS], want[NROWS];
	uint64_t ref = 12345;
	dataset s;
	batch_out o;
	tc_batches *b;
	int e;
	(void)state;
	dataset_init(&s, NROWS);
	batch_out_init(&o, 10, TU_F32, TU_I64, 0);
	b = tc_batches_new(ctx, s.data, 2, 10, 12345);
	assert_non_null(b);
	assert_int_equal(tc_batches_per_epoch(b), 10);
	assert_int_equal(tc_batches_epoch(b), 0);
	for (e = 1; e <= 4; e++) {
		run_epoch(b, &o, 10, order);
		assert_int_equal(tc_batches_epoch(b), e);
		expect_distinct(order, 100, NROWS);
		reference_order(&ref, NROWS, want);
		assert_memory_equal(order, want, 100 * sizeof(int64_t));
		if (e > 1)
			assert_memory_not_equal(order, prev, 100 * sizeof(int64_t));
		memcpy(prev, order, sizeof(order));
	}
	tc_batches_free(b);

	/* a batch that divides the rows: each row exactly once (into rows reshaped) */
	b = tc_batches_new(ctx, s.data, 2, 103, 7);
	batch_out_fini(&o);
	batch_out_init(&o, 103, TU_F32, TU_I64, 1);
	assert_int_equal(tc_batches_per_epoch(b), 1);
	run_epoch(b, &o, 103, order);
	expect_distinct(order, 103, NROWS);
	assert_int_equal(tc_batches_epoch(b), 1);
	run_epoch(b, &o, 103, order);
	assert_int_equal(tc_batches_epoch(b), 2);
	tc_batches_free(b);
	batch_out_fini(&o);
	dataset_fini(&s);
	tc_context_free(ctx);
}

/* tc_batches_set_partial: 103 rows in batches of 10 give 11 batches an
 * epoch, the last of 3 rows (tc_batches_rows), which fill the first 3 rows
 * of the out tensors and leave the others as they were; every row once an
 * epoch, in the documented order; refused while an epoch is under way;
 * off again, 10 batches. */
static void batches_partial_last_batch(void **state)
{
	static const double scale[2] = {1 / 255.0, 1};
	tc_context *ctx = tc_context_new();
	int64_t order[NROWS], want[NROWS];
	uint64_t ref = 77;
	dataset s;
	batch_out o;
	tc_batches *b;
	(void)state;
	dataset_init(&s, NROWS);
	batch_out_init(&o, 10, TU_F32, TU_I64, 1);
	assert_non_null(b = tc_batches_new(ctx, s.data, 2, 10, 77));
	assert_int_equal(tc_batches_rows(b), 0);
	assert_int_equal(tc_batches_set_partial(b, 1), 0);
	assert_int_equal(tc_batches_per_epoch(b), 11);
	for (int e = 0; e < 2; e++) {
		for (int64_t k = 0; k < 11; k++) {
			int64_t rows = k < 10 ? 10 : 3;
			tu_poison(&o.x);
			tu_poison(&o.y);
			assert_int_equal(tc_batches_next(b, o.out, 2, scale), 1);
			assert_int_equal(tc_batches_rows(b), rows);
			for (int64_t r = 0; r < 10; r++) {
				int64_t row = ((int64_t *)o.y.data)[r];
				float got = ((float *)o.x.data)[r * IMG_H * IMG_W + 5];
				if (r >= rows) { /* untouched: still the poison */
					assert_true(isnan(got));
					continue;
				}
				assert_true(row >= 0 && row < NROWS);
				order[k * 10 + r] = row;
				assert_true(got == (float)((double)pixel(row, 5) * (1 / 255.0)));
			}
			if (k == 4) { /* not while an epoch is under way */
				assert_int_equal(tc_batches_set_partial(b, 0), -1);
				assert_true(tu_contains(tc_context_error(ctx), "an epoch is under way"));
			}
		}
		assert_int_equal(tc_batches_next(b, o.out, 2, scale), 0);
		expect_distinct(order, NROWS, NROWS);
		reference_order(&ref, NROWS, want);
		assert_memory_equal(order, want, sizeof(order));
	}
	assert_int_equal(tc_batches_set_partial(b, 0), 0);
	assert_int_equal(tc_batches_per_epoch(b), 10);
	assert_int_equal(tc_batches_set_partial(NULL, 1), -1);
	assert_int_equal(tc_batches_rows(NULL), -1);
	tc_batches_free(b);
	batch_out_fini(&o);
	dataset_fini(&s);
	tc_context_free(ctx);
}

/* The same seed gives the same order, another seed another, seed 0 the
 * file order in every epoch. */
static void batches_seeds(void **state)
{
	tc_context *ctx = tc_context_new();
	int64_t a[NROWS], c[NROWS], d[NROWS], i;
	dataset s;
	batch_out o;
	tc_batches *b1, *b2, *b3, *b0;
	int e;
	(void)state;
	dataset_init(&s, NROWS);
	batch_out_init(&o, 25, TU_F32, TU_I64, 0);
	b1 = tc_batches_new(ctx, s.data, 2, 25, 99);
	b2 = tc_batches_new(ctx, s.data, 2, 25, 99);
	b3 = tc_batches_new(ctx, s.data, 2, 25, 100);
	b0 = tc_batches_new(ctx, s.data, 2, 25, 0);
	assert_true(b1 && b2 && b3 && b0);
	for (e = 0; e < 3; e++) {
		run_epoch(b1, &o, 25, a);
		run_epoch(b2, &o, 25, c);
		assert_memory_equal(a, c, 100 * sizeof(int64_t));
		run_epoch(b3, &o, 25, d);
		assert_memory_not_equal(a, d, 100 * sizeof(int64_t));
		run_epoch(b0, &o, 25, d);
		for (i = 0; i < 100; i++)
			assert_int_equal(d[i], i);
	}
	tc_batches_free(b1);
	tc_batches_free(b2);
	tc_batches_free(b3);
	tc_batches_free(b0);
	batch_out_fini(&o);
	dataset_fini(&s);
	tc_context_free(ctx);
}

/* An allocation hook that counts and allows everything. */
static void *count_alloc(void *ud, void *ptr, size_t size)
{
	int *calls = ud;
	if (!size) {
		free(ptr);
		return NULL;
	}
	++*calls;
	return realloc(ptr, size);
}

/* tc_batches_next allocates nothing, over several epochs. */
static void batches_next_allocates_nothing(void **state)
{
	static const double scale[2] = {1 / 255.0, 1};
	tc_context *ctx = tc_context_new();
	dataset s;
	batch_out o;
	tc_batches *b;
	int calls = 0, k, r, ones = 0;
	(void)state;
	dataset_init(&s, NROWS);
	batch_out_init(&o, 8, TU_F32, TU_I64, 0);
	b = tc_batches_new(ctx, s.data, 2, 8, 5);
	assert_non_null(b);
	tc_set_alloc(count_alloc, &calls);
	for (k = 0; k < 60; k++) {
		r = tc_batches_next(b, o.out, 2, scale);
		ones += r == 1;
		if (r < 0)
			break;
	}
	tc_set_alloc(NULL, NULL);
	assert_int_equal(r, 1);
	assert_int_equal(calls, 0);
	assert_int_equal(ones, 60 - 4); /* 12 batches then a 0, four times */
	tc_batches_free(b);
	batch_out_fini(&o);
	dataset_fini(&s);
	tc_context_free(ctx);
}

/* The conversions: the same type (bytes), integer to integer (uint8 labels
 * to int64, int32 to uint8 in range), integer to float32/float64 times the
 * scale; a value the out type cannot hold, a float to an integer, a float
 * to another float, and a scale on a copy without conversion are errors. */
static void batches_conversions(void **state)
{
	static const double one_255[2] = {1 / 255.0, 1}, half_two[2] = {0.5, 2};
	tc_context *ctx = tc_context_new();
	int64_t s1[1] = {4}, s2[2] = {4, 3}, sb1[1] = {2}, sb2[2] = {2, 3};
	tu_tensor u8, i32, f32, ob_u8, ob_i64, ob_f64, ob_f32, ob_i8, ob_u8l, ob_f32l;
	const DLTensor *data[2];
	DLTensor *out[2];
	tc_batches *b;
	int i, r;
	(void)state;
	tu_tensor_init(&u8, TU_U8, s2, 2);
	tu_tensor_init(&i32, TU_I32, s1, 1);
	tu_tensor_init(&f32, TU_F32, s2, 2);
	for (i = 0; i < 12; i++) {
		((uint8_t *)u8.data)[i] = (uint8_t)(200 + i * 4);
		((float *)f32.data)[i] = 0.25f * (float)i - 1;
	}
	((int32_t *)i32.data)[0] = 0;
	((int32_t *)i32.data)[1] = 255;
	((int32_t *)i32.data)[2] = 300; /* not a uint8 */
	((int32_t *)i32.data)[3] = -1;  /* neither */
	tu_tensor_init(&ob_u8, TU_U8, sb2, 2);
	tu_tensor_init(&ob_f64, TU_F64, sb2, 2);
	tu_tensor_init(&ob_f32, TU_F32, sb2, 2);
	tu_tensor_init(&ob_i8, TU_I8, sb2, 2);
	tu_tensor_init(&ob_i64, TU_I64, sb1, 1);
	tu_tensor_init(&ob_u8l, TU_U8, sb1, 1);
	tu_tensor_init(&ob_f32l, TU_F32, sb1, 1);

	/* file order (seed 0), batches of 2: rows 0,1 then 2,3 */
	data[0] = &u8.dl;
	data[1] = &i32.dl;
	b = tc_batches_new(ctx, data, 2, 2, 0);
	assert_non_null(b);
	out[0] = &ob_u8.dl; /* uint8 to uint8: the bytes */
	out[1] = &ob_i64.dl; /* int32 to int64 */
	assert_int_equal(tc_batches_next(b, out, 2, NULL), 1);
	assert_memory_equal(ob_u8.data, u8.data, 6);
	assert_int_equal(((int64_t *)ob_i64.data)[0], 0);
	assert_int_equal(((int64_t *)ob_i64.data)[1], 255);
	/* rows 2,3: 300 and -1 fit no uint8; int64 holds them */
	out[0] = &ob_f64.dl; /* uint8 to float64 times 0.5 */
	out[1] = &ob_u8l.dl;
	assert_int_equal(tc_batches_next(b, out, 2, (const double[]){0.5, 1}), -1);
	assert_true(tu_contains(tc_context_error(ctx), "300"));
	assert_true(tu_contains(tc_context_error(ctx), "uint8"));
	assert_true(tu_contains(tc_context_error(ctx), "cannot hold"));
	/* the failed call served no batch: the same rows again */
	out[1] = &ob_i64.dl;
	assert_int_equal(tc_batches_next(b, out, 2, (const double[]){0.5, 1}), 1);
	for (i = 0; i < 6; i++)
		assert_true(((double *)ob_f64.data)[i] == ((uint8_t *)u8.data)[6 + i] * 0.5);
	assert_int_equal(((int64_t *)ob_i64.data)[0], 300);
	assert_int_equal(((int64_t *)ob_i64.data)[1], -1);
	assert_int_equal(tc_batches_next(b, out, 2, NULL), 0);
	/* next epoch, rows 0,1 again: uint8 to float32 times 1/255, int32 to
	 * uint8 (0 and 255 fit) and to float32 times 2 */
	out[0] = &ob_f32.dl;
	out[1] = &ob_u8l.dl;
	assert_int_equal(tc_batches_next(b, out, 2, one_255), 1);
	for (i = 0; i < 6; i++)
		assert_true(((float *)ob_f32.data)[i] ==
			(float)(((uint8_t *)u8.data)[i] * (1 / 255.0)));
	assert_int_equal(((uint8_t *)ob_u8l.data)[0], 0);
	assert_int_equal(((uint8_t *)ob_u8l.data)[1], 255);
	out[1] = &ob_f32l.dl;
	assert_int_equal(tc_batches_next(b, out, 2, half_two), 1); /* rows 2,3 */
	assert_true(((float *)ob_f32l.data)[0] == 600.0f);
	assert_true(((float *)ob_f32l.data)[1] == -2.0f);
	/* uint8 200.. to int8: out of range (and says so with the value) */
	out[0] = &ob_i8.dl;
	out[1] = &ob_i64.dl;
	assert_int_equal(tc_batches_next(b, out, 2, NULL), 0); /* end of epoch 2 */
	assert_int_equal(tc_batches_next(b, out, 2, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "200"));
	assert_true(tu_contains(tc_context_error(ctx), "int8"));
	/* a scale on a copy that is no conversion to float */
	out[0] = &ob_u8.dl;
	assert_int_equal(tc_batches_next(b, out, 2, one_255), -1);
	assert_true(tu_contains(tc_context_error(ctx), "scale[0]"));
	tc_batches_free(b);

	/* int8 data (negative values too) to float32 and float64 times 1/3,
	 * then to float32 times 1/4: each rounded from the double product, as
	 * for wider types */
	{
		static const int8_t vals[12] = {-128, -127, -1, 0, 1, 127, -3, 3, 5, -5, 64, -64};
		static const double third[1] = {1 / 3.0};
		tu_tensor i8;
		const DLTensor *d8[1];
		DLTensor *o8[1];
		tu_tensor_init(&i8, TU_I8, s2, 2);
		memcpy(i8.data, vals, sizeof(vals));
		d8[0] = &i8.dl;
		assert_non_null(b = tc_batches_new(ctx, d8, 1, 2, 0));
		o8[0] = &ob_f32.dl;
		assert_int_equal(tc_batches_next(b, o8, 1, third), 1); /* rows 0,1 */
		for (i = 0; i < 6; i++)
			assert_true(((float *)ob_f32.data)[i] == (float)(vals[i] * (1 / 3.0)));
		o8[0] = &ob_f64.dl;
		assert_int_equal(tc_batches_next(b, o8, 1, third), 1); /* rows 2,3 */
		for (i = 0; i < 6; i++)
			assert_true(((double *)ob_f64.data)[i] == vals[6 + i] * (1 / 3.0));
		/* float32 again with another scale: the table follows the scale */
		o8[0] = &ob_f32.dl;
		assert_int_equal(tc_batches_next(b, o8, 1, third), 0); /* end of the epoch */
		assert_int_equal(tc_batches_next(b, o8, 1, (const double[]){0.25}), 1);
		for (i = 0; i < 6; i++)
			assert_true(((float *)ob_f32.data)[i] == (float)(vals[i] * 0.25));
		tc_batches_free(b);
		tu_tensor_fini(&i8);
	}

	/* float32 data: to float32 (the bytes) fine, to float64 or int8 not */
	data[0] = &f32.dl;
	b = tc_batches_new(ctx, data, 1, 2, 0);
	assert_non_null(b);
	out[0] = &ob_f32.dl;
	assert_int_equal(tc_batches_next(b, out, 1, NULL), 1);
	assert_memory_equal(ob_f32.data, f32.data, 6 * sizeof(float));
	out[0] = &ob_f64.dl;
	r = tc_batches_next(b, out, 1, NULL);
	assert_int_equal(r, -1);
	assert_true(tu_contains(tc_context_error(ctx), "cannot convert data[0]'s float32 to "
						       "out[0]'s float64"));
	out[0] = &ob_i8.dl;
	assert_int_equal(tc_batches_next(b, out, 1, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "cannot convert"));
	tc_batches_free(b);

	tu_tensor_fini(&u8);
	tu_tensor_fini(&i32);
	tu_tensor_fini(&f32);
	tu_tensor_fini(&ob_u8);
	tu_tensor_fini(&ob_f64);
	tu_tensor_fini(&ob_f32);
	tu_tensor_fini(&ob_i8);
	tu_tensor_fini(&ob_i64);
	tu_tensor_fini(&ob_u8l);
	tu_tensor_fini(&ob_f32l);
	tc_context_free(ctx);
}

/* Integer to integer at the edges of each type: the extremes fit, one past
 * does not. */
static void batches_integer_ranges(void **state)
{
	static const struct {
		tu_elt src, dst;
		int64_t ok, bad;
	} cases[] = {
		{TU_I64, TU_I8, -128, -129}, {TU_I64, TU_I8, 127, 128},
		{TU_I64, TU_U8, 255, 256},   {TU_I64, TU_U8, 0, -1},
		{TU_I64, TU_I32, INT32_MIN, (int64_t)INT32_MIN - 1},
		{TU_I32, TU_I8, -128, 200},  {TU_I8, TU_U8, 127, -128},
		{TU_U8, TU_I8, 127, 255},
	};
	tc_context *ctx = tc_context_new();
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int64_t s[1] = {2}, sb[1] = {1};
		tu_tensor src, dst;
		const DLTensor *data[1];
		DLTensor *out[1];
		tc_batches *b;
		tu_tensor_init(&src, cases[c].src, s, 1);
		tu_tensor_init(&dst, cases[c].dst, sb, 1);
		switch (cases[c].src) {
		case TU_I64:
			((int64_t *)src.data)[0] = cases[c].ok;
			((int64_t *)src.data)[1] = cases[c].bad;
			break;
		case TU_I32:
			((int32_t *)src.data)[0] = (int32_t)cases[c].ok;
			((int32_t *)src.data)[1] = (int32_t)cases[c].bad;
			break;
		case TU_I8:
			((int8_t *)src.data)[0] = (int8_t)cases[c].ok;
			((int8_t *)src.data)[1] = (int8_t)cases[c].bad;
			break;
		default:
			((uint8_t *)src.data)[0] = (uint8_t)cases[c].ok;
			((uint8_t *)src.data)[1] = (uint8_t)cases[c].bad;
			break;
		}
		data[0] = &src.dl;
		out[0] = &dst.dl;
		b = tc_batches_new(ctx, data, 1, 1, 0);
		assert_non_null(b);
		assert_int_equal(tc_batches_next(b, out, 1, NULL), 1);
		assert_true(tu_get(&dst, 0) == (double)cases[c].ok);
		if (tc_batches_next(b, out, 1, NULL) != -1)
			fail_msg("case %zu: %lld stored as %s", c, (long long)cases[c].bad,
				tu_elt_name(cases[c].dst));
		assert_true(tu_contains(tc_context_error(ctx), "cannot hold"));
		tc_batches_free(b);
		tu_tensor_fini(&src);
		tu_tensor_fini(&dst);
	}
	tc_context_free(ctx);
}

/* tc_batches_new and tc_batches_next refuse what the contract refuses, with
 * a message; NULL arguments give the failure value. */
static void batches_refused_arguments(void **state)
{
	tc_context *ctx = tc_context_new();
	dataset s;
	batch_out o, wrong_batch;
	tu_tensor other, scalar, y2, wx;
	int64_t s99[1] = {99}, s_wrong[3] = {10, IMG_H, IMG_W + 1}, strides[3] = {1, 10 * IMG_W, 10};
	int64_t s_y2[2] = {10, 2};
	const DLTensor *data[2], *with_null[2];
	DLTensor *out[2], *out_null[2];
	DLTensor strided;
	tc_batches *b;
	(void)state;
	dataset_init(&s, NROWS);
	batch_out_init(&o, 10, TU_F32, TU_I64, 0);
	tu_tensor_init(&other, TU_I32, s99, 1);
	tu_tensor_init(&scalar, TU_I32, s99, 0);

	assert_null(tc_batches_new(NULL, s.data, 2, 10, 1));
	assert_null(tc_batches_new(ctx, NULL, 2, 10, 1));
	assert_true(tu_contains(tc_context_error(ctx), "data array is NULL"));
	assert_null(tc_batches_new(ctx, s.data, 0, 10, 1));
	assert_true(tu_contains(tc_context_error(ctx), "at least one"));
	with_null[0] = s.data[0];
	with_null[1] = NULL;
	assert_null(tc_batches_new(ctx, with_null, 2, 10, 1));
	assert_true(tu_contains(tc_context_error(ctx), "data[1] is NULL"));
	data[0] = s.data[0];
	data[1] = &other.dl;
	assert_null(tc_batches_new(ctx, data, 2, 10, 1));
	assert_true(tu_contains(tc_context_error(ctx), "data[1] has 99 examples"));
	assert_true(tu_contains(tc_context_error(ctx), "103"));
	data[1] = &scalar.dl;
	assert_null(tc_batches_new(ctx, data, 2, 10, 1));
	assert_true(tu_contains(tc_context_error(ctx), "rank 0"));
	assert_null(tc_batches_new(ctx, s.data, 2, 0, 1));
	assert_true(tu_contains(tc_context_error(ctx), "batch 0 is not in 1..103"));
	assert_null(tc_batches_new(ctx, s.data, 2, 104, 1));
	assert_true(tu_contains(tc_context_error(ctx), "batch 104 is not in 1..103"));
	strided = *s.data[0];
	strided.strides = strides;
	data[0] = &strided;
	data[1] = s.data[1];
	assert_null(tc_batches_new(ctx, data, 2, 10, 1));
	assert_true(tu_contains(tc_context_error(ctx), "not a compact host tensor"));

	b = tc_batches_new(ctx, s.data, 2, 10, 1);
	assert_non_null(b);
	assert_string_equal(tc_context_error(ctx), "");
	assert_int_equal(tc_batches_next(NULL, o.out, 2, NULL), -1);
	assert_int_equal(tc_batches_next(b, NULL, 2, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "out array is NULL"));
	assert_int_equal(tc_batches_next(b, o.out, 1, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "1 out tensors for 2 data tensors"));
	out_null[0] = o.out[0];
	out_null[1] = NULL;
	assert_int_equal(tc_batches_next(b, out_null, 2, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "out[1] is NULL"));
	batch_out_init(&wrong_batch, 9, TU_F32, TU_I64, 0);
	assert_int_equal(tc_batches_next(b, wrong_batch.out, 2, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "out[0] has first extent 9"));
	tu_tensor_init(&wx, TU_F32, s_wrong, 3);
	out[0] = &wx.dl;
	out[1] = o.out[1];
	assert_int_equal(tc_batches_next(b, out, 2, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "out[0]'s rows hold"));
	tu_tensor_init(&y2, TU_I64, s_y2, 2);
	out[0] = o.out[0];
	out[1] = &y2.dl;
	assert_int_equal(tc_batches_next(b, out, 2, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "out[1]'s rows hold 2 elements; expected 1"));
	strided = *o.out[0];
	strided.strides = strides;
	out[0] = &strided;
	out[1] = o.out[1];
	assert_int_equal(tc_batches_next(b, out, 2, NULL), -1);
	assert_true(tu_contains(tc_context_error(ctx), "out[0] is not a compact host tensor"));
	/* none of these began an epoch */
	assert_int_equal(tc_batches_epoch(b), 0);
	assert_int_equal(tc_batches_next(b, o.out, 2, NULL), 1);
	assert_int_equal(tc_batches_epoch(b), 1);
	assert_string_equal(tc_context_error(ctx), "");

	assert_int_equal(tc_batches_per_epoch(NULL), -1);
	assert_int_equal(tc_batches_epoch(NULL), -1);
	tc_batches_free(NULL);
	tc_batches_free(b);
	tu_tensor_fini(&y2);
	tu_tensor_fini(&wx);
	batch_out_fini(&wrong_batch);
	tu_tensor_fini(&other);
	tu_tensor_fini(&scalar);
	batch_out_fini(&o);
	dataset_fini(&s);
	tc_context_free(ctx);
}

/* Each allocation of tc_batches_new failing in turn: NULL, out of memory. */
static void batches_allocation_failures(void **state)
{
	tc_context *ctx = tc_context_new();
	dataset s;
	tc_batches *b;
	int k, failed = 0;
	(void)state;
	dataset_init(&s, NROWS);
	for (k = 0;; k++) {
		fail_nth f = {k, 0};
		tc_set_alloc(fail_alloc, &f);
		b = tc_batches_new(ctx, s.data, 2, 10, 3);
		tc_set_alloc(NULL, NULL);
		if (b)
			break;
		if (tc_context_error_kind(ctx) != TC_ERROR_NOMEM)
			fail_msg("allocation %d failed: error %s", k, tc_context_error(ctx));
		failed++;
	}
	assert_true(failed >= 1);
	tc_batches_free(b);
	dataset_fini(&s);
	tc_context_free(ctx);
}

/* ---- Fashion-MNIST, as `make setup` installs it ---- */

/* FASHION_DIR/name read as a uint8 tensor of the given shape, labels in
 * 0..9 (rank 1) with per_class of each. */
static DLManagedTensor *read_fashion(tc_context *ctx, const char *name, int rank,
	const int64_t *shape)
{
	char path[512];
	DLManagedTensor *m;
	int d;
	snprintf(path, sizeof(path), "%s/%s", FASHION_DIR, name);
	m = tc_idx_read(ctx, path);
	if (!m)
		fail_msg("%s", tc_context_error(ctx));
	assert_string_equal(tc_dtype_str(m->dl_tensor.dtype), "uint8");
	assert_int_equal(m->dl_tensor.ndim, rank);
	for (d = 0; d < rank; d++)
		assert_int_equal(m->dl_tensor.shape[d], shape[d]);
	return m;
}

static void check_labels(const DLManagedTensor *m, int64_t per_class)
{
	int64_t count[10] = {0}, i;
	const uint8_t *y = m->dl_tensor.data;
	for (i = 0; i < m->dl_tensor.shape[0]; i++) {
		if (y[i] > 9)
			fail_msg("label %lld is %d, not in 0..9", (long long)i, y[i]);
		count[y[i]]++;
	}
	for (i = 0; i < 10; i++)
		assert_int_equal(count[i], per_class); /* the data set is balanced */
}

/* The four Fashion-MNIST files: shapes, types, labels 0..9 (6000 and 1000
 * of each class), and one epoch of the training set in batches of 1000 as
 * float32 images in [0, 1] with int64 labels. */
static void fashion_mnist_files(void **state)
{
	static const int64_t train_x[3] = {60000, 28, 28}, train_y[1] = {60000},
			     test_x[3] = {10000, 28, 28}, test_y[1] = {10000};
	static const double scale[2] = {1 / 255.0, 1};
	tc_context *ctx = tc_context_new();
	DLManagedTensor *xs, *ys, *xt, *yt;
	struct stat st;
	const DLTensor *data[2];
	int64_t sx[3] = {1000, 28, 28}, sy[1] = {1000}, k, i;
	tu_tensor bx, by;
	DLTensor *out[2];
	tc_batches *b;
	(void)state;
	if (stat(FASHION_DIR, &st) != 0 || !S_ISDIR(st.st_mode))
		fail_msg("%s is missing: run `make setup` (it installs the Debian package "
			 "dataset-fashion-mnist)", FASHION_DIR);
	xs = read_fashion(ctx, "train-images-idx3-ubyte.gz", 3, train_x);
	ys = read_fashion(ctx, "train-labels-idx1-ubyte.gz", 1, train_y);
	xt = read_fashion(ctx, "t10k-images-idx3-ubyte.gz", 3, test_x);
	yt = read_fashion(ctx, "t10k-labels-idx1-ubyte.gz", 1, test_y);
	check_labels(ys, 6000);
	check_labels(yt, 1000);

	data[0] = &xs->dl_tensor;
	data[1] = &ys->dl_tensor;
	b = tc_batches_new(ctx, data, 2, 1000, 2024);
	assert_non_null(b);
	assert_int_equal(tc_batches_per_epoch(b), 60);
	tu_tensor_init(&bx, TU_F32, sx, 3);
	tu_tensor_init(&by, TU_I64, sy, 1);
	out[0] = &bx.dl;
	out[1] = &by.dl;
	for (k = 0; k < 60; k++) {
		assert_int_equal(tc_batches_next(b, out, 2, scale), 1);
		for (i = 0; i < 1000; i++)
			assert_true(((int64_t *)by.data)[i] >= 0 && ((int64_t *)by.data)[i] <= 9);
		for (i = 0; i < 1000 * 28 * 28; i += 97)
			assert_true(((float *)bx.data)[i] >= 0 && ((float *)bx.data)[i] <= 1);
	}
	assert_int_equal(tc_batches_next(b, out, 2, scale), 0);
	tc_batches_free(b);
	tu_tensor_fini(&bx);
	tu_tensor_fini(&by);
	xs->deleter(xs);
	ys->deleter(ys);
	xt->deleter(xt);
	yt->deleter(yt);
	tc_context_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(idx_every_type_and_rank_plain_and_gzip),
		cmocka_unit_test(idx_rank_8_empty_and_concatenated_gzip),
		cmocka_unit_test(idx_bad_files_say_what_is_wrong),
		cmocka_unit_test(idx_truncated_and_corrupt_gzip_are_errors),
		cmocka_unit_test(idx_allocation_failures),
		cmocka_unit_test(idx_null_arguments),
		cmocka_unit_test(batches_visit_each_row_once_per_epoch),
		cmocka_unit_test(batches_seeds),
		cmocka_unit_test(batches_next_allocates_nothing),
		cmocka_unit_test(batches_partial_last_batch),
		cmocka_unit_test(batches_conversions),
		cmocka_unit_test(batches_integer_ranges),
		cmocka_unit_test(batches_refused_arguments),
		cmocka_unit_test(batches_allocation_failures),
		cmocka_unit_test(fashion_mnist_files),
	};
	return cmocka_run_group_tests_name("data", tests, make_tmpdir, remove_tmpdir);
}
