/* Data for training (include/tcomp.h, "data: IDX files and shuffled
 * batches"): IDX files read into host tensors, and a walk over the first
 * dimension of a few tensors in shuffled batches.
 *
 * tc_idx_read reads the whole file into memory, inflates it with zlib when
 * it starts with gzip's magic (1f 8b), checks the header against the size
 * and copies the elements, big-endian in the file, into a tensor of the
 * host's order.  The tensor is one allocation (the DLManagedTensor, its
 * shape and its data, 64-byte aligned), freed by its deleter.
 *
 * tc_batches shuffles the row indices with Fisher-Yates over xorshift64*
 * (see shuffle() for the exact steps: a Python script can reproduce the
 * order) and copies the rows of each batch into the caller's tensors,
 * converting integers to wider or narrower integers (range-checked) or to
 * floats (times a scale).  tc_batches_next allocates nothing.
 *
 * Ownership: the tensor tc_idx_read returns is the caller's (its deleter
 * frees it); a tc_batches is the caller's (tc_batches_free) and borrows the
 * context and the data tensors, which must outlive it.  A tc_batches is for
 * one thread at a time. */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include "data.h"
#include "internal.h"

#include "error.h"
#include "pool.h"
#include "tensor.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <zlib.h>

/* ---- reading a file ---- */

/* A byte buffer owned by its holder (tc_free(p)). */
typedef struct bytes {
	unsigned char *p;
	size_t len, cap;
} bytes;

/* Make b hold at least need bytes of room (need itself, or twice what it
 * held when that is more); -1 when out of memory (b is unchanged then). */
static tc_stat bytes_reserve(bytes *b, size_t need)
{
	size_t cap = b->cap <= SIZE_MAX / 2 ? 2 * b->cap : SIZE_MAX;
	unsigned char *p;
	if (need <= b->cap)
		return TC_OK;
	if (cap < need)
		cap = need < 65536 ? 65536 : need;
	if (!(p = tc_realloc(b->p, cap)))
		return TC_ERR;
	b->p = p;
	b->cap = cap;
	return TC_OK;
}

/* The whole content of path into *out (the caller's); -1 with the error in
 * ctx. */
static tc_stat read_whole(tc_context *ctx, const char *path, bytes *out)
{
	FILE *fp = fopen(path, "rb");
	struct stat st;
	bytes b = {0};
	size_t n;

	if (!fp) {
		tc_rt_set_error(ctx, "cannot open '%s': %s", path, strerror(errno));
		return TC_ERR;
	}
	/* a regular file's size up front, so it is read into one block */
	if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
		(uint64_t)st.st_size < SIZE_MAX && bytes_reserve(&b, (size_t)st.st_size + 1))
		goto nomem;
	for (;;) {
		if (b.len == b.cap && bytes_reserve(&b, b.len + 1))
			goto nomem;
		n = fread(b.p + b.len, 1, b.cap - b.len, fp);
		b.len += n;
		if (n == 0)
			break;
	}
	if (ferror(fp)) {
		tc_rt_set_error(ctx, "cannot read '%s': %s", path, strerror(errno));
		goto error;
	}
	fclose(fp);
	*out = b;
	return TC_OK;
nomem:
	tc_rt_set_error(ctx, "out of memory reading '%s'", path);
error:
	fclose(fp);
	tc_free(b.p);
	return TC_ERR;
}

/* Ask for transparent huge pages over the whole 2 MiB pages of [p, p+n)
 * before it is first written (a data set of tens of megabytes: batches read
 * scattered rows, and 4 KiB pages cost a TLB miss per row and a page fault
 * per page on loading).  Advice only: ignored where unsupported. */
static void advise_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
	const uintptr_t huge = (uintptr_t)2 << 20;
	uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + n) & ~(huge - 1);
	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
	(void)p;
	(void)n;
#endif
}

/* zlib's allocations through the library's hook (lang/util.h). */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	if (size && items > SIZE_MAX / size)
		return Z_NULL;
	return tc_malloc((size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p)
{
	(void)opaque;
	tc_free(p);
}

/* Inflate the gzip data in[0..n) (one member or several, concatenated, as
 * gzip writes them) into *out (the caller's); -1 with the error in ctx: a
 * corrupt stream (zlib's reason), a truncated one (the input ends before
 * the stream does), bytes after the last member that are not another. */
static tc_stat gunzip(tc_context *ctx, const char *path, const unsigned char *in, size_t n,
	bytes *out)
{
	z_stream s;
	bytes b = {0};
	size_t in_pos = 0, hint;
	int ret;

	memset(&s, 0, sizeof(s));
	s.zalloc = z_alloc;
	s.zfree = z_free;
	if (inflateInit2(&s, 16 + MAX_WBITS) != Z_OK) {
		tc_rt_set_error(ctx, "out of memory inflating '%s'", path);
		return TC_ERR;
	}
	/* the size gzip records (mod 2^32, in the last 4 bytes) as the first
	 * guess, one byte more so that the end is seen without growing; not
	 * believed beyond deflate's largest ratio (1032:1), which a truncated
	 * file's last bytes may claim */
	hint = n >= 18 ? ((size_t)in[n - 4] | (size_t)in[n - 3] << 8 | (size_t)in[n - 2] << 16 |
				 (size_t)in[n - 1] << 24)
		       : 0;
	if (hint / 1032 > n)
		hint = n <= SIZE_MAX / 4 ? 4 * n : n;
	if (bytes_reserve(&b, hint + 1))
		goto nomem;
	for (;;) {
		size_t in_left = n - in_pos, out_left, in_give, out_give;
		if (b.len == b.cap && bytes_reserve(&b, b.len + 1))
			goto nomem;
		out_left = b.cap - b.len;
		/* zlib counts in uInt: hand over at most 1 GiB at a time */
		in_give = in_left < (1u << 30) ? in_left : (1u << 30);
		out_give = out_left < (1u << 30) ? out_left : (1u << 30);
		s.next_in = (Bytef *)(in + in_pos);
		s.avail_in = (uInt)in_give;
		s.next_out = b.p + b.len;
		s.avail_out = (uInt)out_give;
		ret = inflate(&s, Z_NO_FLUSH);
		in_pos += in_give - s.avail_in;
		b.len += out_give - s.avail_out;
		if (ret == Z_STREAM_END) {
			if (in_pos == n)
				break;
			if (n - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b) {
				if (inflateReset(&s) != Z_OK)
					goto corrupt;
				continue; /* the next member */
			}
			tc_rt_set_error(ctx,
				"'%s': corrupt gzip stream: %zu bytes after the end of the stream "
				"(at byte %zu of %zu) are not gzip data",
				path, n - in_pos, in_pos, n);
			goto error;
		}
		if (ret == Z_OK)
			continue;
		if (ret == Z_BUF_ERROR) { /* no progress: out of room or of input */
			if (b.len == b.cap)
				continue;
			tc_rt_set_error(ctx,
				"'%s': truncated gzip stream: the file ends (%zu bytes) before the "
				"stream does (%zu bytes inflated)",
				path, n, b.len);
			goto error;
		}
		if (ret == Z_MEM_ERROR)
			goto nomem;
		goto corrupt;
	}
	inflateEnd(&s);
	*out = b;
	return TC_OK;
corrupt:
	tc_rt_set_error(ctx, "'%s': corrupt gzip stream: %s (near byte %zu of %zu)", path,
		s.msg ? s.msg : "invalid data", in_pos, n);
	goto error;
nomem:
	tc_rt_set_error(ctx, "out of memory inflating '%s'", path);
error:
	inflateEnd(&s);
	tc_free(b.p);
	return TC_ERR;
}

/* ---- IDX ---- */

/* The element type of an IDX type byte; TC_T_NONE for an unknown one. */
static tc_dtype idx_dtype(unsigned char type)
{
	switch (type) {
	case 0x08: return TC_T_U8;
	case 0x09: return TC_T_I8;
	case 0x0B: return TC_T_I16;
	case 0x0C: return TC_T_I32;
	case 0x0D: return TC_T_F32;
	case 0x0E: return TC_T_F64;
	default: return TC_T_NONE;
	}
}

/* "60000x28x28" into buf[0..n). */
static void shape_str(const int64_t *shape, int ndim, char *buf, size_t n)
{
	size_t k = 0;
	int i;
	buf[0] = 0;
	for (i = 0; i < ndim && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, i ? "x%lld" : "%lld", (long long)shape[i]);
}

/* The deleter of tc_idx_read's tensors: the struct starts the one block. */
static void idx_deleter(DLManagedTensor *self)
{
	tc_free(self);
}

/* The block of a tensor: the managed tensor, then its shape, then the data
 * at the next multiple of 64 bytes. */
typedef struct idx_block {
	DLManagedTensor mt;
	int64_t shape[TC_MAX_RANK];
} idx_block;

/* Copy count elements of size bytes from big-endian src to host-order dst. */
static void from_big_endian(unsigned char *dst, const unsigned char *src, size_t count,
	int size)
{
	size_t i;
	switch (size) {
	case 1:
		memcpy(dst, src, count);
		break;
	case 2:
		for (i = 0; i < count; i++, src += 2) {
			uint16_t v = (uint16_t)(src[0] << 8 | src[1]);
			memcpy(dst + 2 * i, &v, 2);
		}
		break;
	case 4:
		for (i = 0; i < count; i++, src += 4) {
			uint32_t v = (uint32_t)src[0] << 24 | (uint32_t)src[1] << 16 |
				     (uint32_t)src[2] << 8 | src[3];
			memcpy(dst + 4 * i, &v, 4);
		}
		break;
	case 8:
		for (i = 0; i < count; i++, src += 8) {
			uint64_t v = 0;
			int k;
			for (k = 0; k < 8; k++)
				v = v << 8 | src[k];
			memcpy(dst + 8 * i, &v, 8);
		}
		break;
	}
}

/* The tensor of the IDX image f[0..n) read from path, or NULL with the
 * error in ctx. */
static DLManagedTensor *idx_parse(tc_context *ctx, const char *path, const unsigned char *f,
	size_t n)
{
	int64_t shape[TC_MAX_RANK];
	size_t header, count = 1, need, head_room;
	char shp[160];
	tc_dtype t;
	int rank, size, i;
	idx_block *blk;
	unsigned char *data;

	if (n == 0) {
		tc_rt_set_error(ctx, "'%s' is empty: not an IDX file", path);
		return NULL;
	}
	if (n < 4) {
		tc_rt_set_error(ctx,
			"'%s' is not an IDX file: %zu bytes, fewer than the 4 of an IDX header",
			path, n);
		return NULL;
	}
	if (f[0] != 0 || f[1] != 0) {
		tc_rt_set_error(ctx,
			"'%s' is not an IDX file: bad magic: expected 00 00 but found %02x %02x",
			path, f[0], f[1]);
		return NULL;
	}
	if ((t = idx_dtype(f[2])) == TC_T_NONE) {
		tc_rt_set_error(ctx,
			"'%s': unknown IDX type byte 0x%02X (known: 0x08 uint8, 0x09 int8, "
			"0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64)",
			path, f[2]);
		return NULL;
	}
	rank = f[3];
	if (rank < 1 || rank > TC_MAX_RANK) {
		tc_rt_set_error(ctx, "'%s': IDX rank %d is not supported (1 to %d)", path, rank,
			TC_MAX_RANK);
		return NULL;
	}
	header = 4 + 4 * (size_t)rank;
	if (n < header) {
		tc_rt_set_error(ctx,
			"'%s': truncated IDX header: expected %zu bytes for rank %d but found %zu",
			path, header, rank, n);
		return NULL;
	}
	size = tc_dtype_size(t);
	for (i = 0; i < rank; i++) {
		const unsigned char *e = f + 4 + 4 * i;
		shape[i] = (int64_t)((uint32_t)e[0] << 24 | (uint32_t)e[1] << 16 |
				     (uint32_t)e[2] << 8 | e[3]);
		if (shape[i] && count > SIZE_MAX / (size_t)shape[i])
			count = SIZE_MAX; /* too large: refused below */
		else
			count *= (size_t)shape[i];
	}
	shape_str(shape, rank, shp, sizeof(shp));
	head_room = sizeof(idx_block) + 63;
	if (count > (SIZE_MAX - head_room) / (size_t)size || count > INT64_MAX / (size_t)size) {
		tc_rt_set_error(ctx, "'%s': the IDX shape %s (%s) is too large", path, shp,
			tc_dtype_name(t));
		return NULL;
	}
	need = count * (size_t)size;
	if (n - header != need) {
		tc_rt_set_error(ctx,
			"'%s': %s: expected %zu bytes of data for the shape %s (%s) but found %zu",
			path, n - header < need ? "truncated IDX data" : "trailing bytes after the IDX data",
			need, shp, tc_dtype_name(t), n - header);
		return NULL;
	}
	if (!(blk = tc_malloc(head_room + need))) {
		tc_rt_set_error(ctx, "out of memory reading '%s' (%zu bytes of data)", path, need);
		return NULL;
	}
	data = (unsigned char *)(((uintptr_t)(blk + 1) + 63) & ~(uintptr_t)63);
	advise_huge(data, need);
	from_big_endian(data, f + header, count, size);
	memset(&blk->mt, 0, sizeof(blk->mt));
	memcpy(blk->shape, shape, sizeof(shape));
	blk->mt.dl_tensor.data = data;
	blk->mt.dl_tensor.device.device_type = kDLCPU;
	blk->mt.dl_tensor.device.device_id = 0;
	blk->mt.dl_tensor.ndim = rank;
	blk->mt.dl_tensor.dtype = tc_rt_dl_dtype(t);
	blk->mt.dl_tensor.shape = blk->shape;
	blk->mt.dl_tensor.strides = NULL;
	blk->mt.dl_tensor.byte_offset = 0;
	blk->mt.manager_ctx = NULL;
	blk->mt.deleter = idx_deleter;
	return &blk->mt;
}

__tc_give DLManagedTensor *tc_idx_read(__tc_keep tc_context *ctx, const char *path)
{
	bytes raw = {0}, plain = {0};
	DLManagedTensor *t;

	if (!ctx)
		return NULL;
	tc_rt_clear_error(ctx);
	if (!path) {
		tc_rt_set_error(ctx, "tc_idx_read: path is NULL");
		return NULL;
	}
	if (read_whole(ctx, path, &raw))
		return NULL;
	if (raw.len >= 2 && raw.p[0] == 0x1f && raw.p[1] == 0x8b) {
		tc_stat st = gunzip(ctx, path, raw.p, raw.len, &plain);
		tc_free(raw.p);
		if (st)
			return NULL;
	} else {
		plain = raw;
	}
	t = idx_parse(ctx, path, plain.p, plain.len);
	tc_free(plain.p);
	return t;
}

/* ---- batches ---- */

/* How many rows ahead tc_batches_next asks for the lines of the row it
 * will copy: rows are scattered over a data set far larger than the caches,
 * and a row of MNIST (784 bytes, 13 lines) is too short for the hardware
 * prefetcher; 4 rows ahead halved the copy of a 128-row batch (100 to 50 us
 * on the Zen 3 host: a loop over tc_batches_next, best of 30 epochs). */
#define PREFETCH_ROWS 4

/* A batch of this many bytes or more (per out tensor) is copied by the
 * context's threads (the pool of runtime/pool.c), each a share of the
 * rows: a Fashion-MNIST batch (400 KiB of floats) took 37-48 us at two
 * threads against 50-86 at one (the Zen 3 host, best of 30 epochs,
 * alternating; the machine was noisy). */
#define PARALLEL_BYTES (64 << 10)

/* The kinds of copy tc_batches_next makes from a data tensor to an out
 * tensor. */
typedef enum copy_kind {
	COPY_SAME,  /* the same type: the rows' bytes */
	COPY_INT,   /* integer to integer, range-checked */
	COPY_FLOAT, /* integer to float32/float64, times the scale */
} copy_kind;

/* One data tensor: the borrowed DLTensor and what tc_batches_new read of
 * it. */
typedef struct batch_src {
	const DLTensor *dl;
	tc_dtype dtype;
	int ndim;
	int64_t shape[TC_MAX_RANK];
	size_t row_elems; /* elements per example */
	copy_kind kind;   /* to the out tensor of the current call */
	/* COPY_FLOAT from an 8-bit type: every value's result, indexed by the
	 * byte (the value as uint8), in lut (float32 results) or lutd
	 * (float64); lut_ok says whether it is in use.  check_out fills the
	 * table of the out type when the type or the scale differs from those
	 * it was filled for (lut_dt, lut_sc; lut_dt 0: never), not per batch. */
	int lut_ok;
	tc_dtype lut_dt;
	double lut_sc;
	float lut[256];
	double lutd[256];
} batch_src;

/* Batches over the first dimension of n_data tensors.  perm is the order of
 * the epoch under way; state the xorshift64* state (the seed; 0: no
 * shuffle). */
struct tc_batches {
	tc_context *ctx;           /* borrowed: errors */
	int n_data;
	batch_src *src;            /* n_data entries, in this block */
	int64_t rows, batch, per_epoch;
	int partial;               /* whether the last, partial batch is served */
	int64_t served;            /* rows of the last batch served */
	int64_t *perm;             /* rows entries, in this block */
	uint64_t state;
	int64_t epoch;             /* epochs begun */
	int64_t next;              /* the next batch of the epoch */
	int in_epoch;              /* whether an epoch is under way */
};

uint64_t tc_rt_xorshift64s(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* The order of a new epoch in b->perm: the file order 0..rows-1, then with a
 * seed Fisher-Yates from the end, continuing b's stream:
 *
 *     for i = rows-1 down to 1:  j = next() % (i + 1);  swap(perm[i], perm[j])
 *
 * (next() as tc_rt_xorshift64s; the modulo's bias, below 2^-32 for fewer than
 * 2^32 rows, is accepted for an order anyone can reproduce). */
static void shuffle(tc_batches *b)
{
	int64_t i;
	for (i = 0; i < b->rows; i++)
		b->perm[i] = i;
	if (!b->state)
		return;
	for (i = b->rows - 1; i >= 1; i--) {
		int64_t j = (int64_t)(tc_rt_xorshift64s(&b->state) % (uint64_t)(i + 1)), t = b->perm[i];
		b->perm[i] = b->perm[j];
		b->perm[j] = t;
	}
}

__tc_give tc_batches *tc_batches_new(__tc_keep tc_context *ctx,
	__tc_keep const DLTensor *const *data, int n_data, int64_t batch, uint64_t seed)
{
	tc_batches *b;
	tc_tensor v;
	tc_rt_layout l;
	char err[256];
	size_t head, size;
	int i, d;

	if (!ctx)
		return NULL;
	tc_rt_clear_error(ctx);
	if (!data) {
		tc_rt_set_error(ctx, "tc_batches_new: the data array is NULL");
		return NULL;
	}
	if (n_data < 1) {
		tc_rt_set_error(ctx, "tc_batches_new: %d data tensors; at least one is needed",
			n_data);
		return NULL;
	}
	for (i = 0; i < n_data; i++) {
		if (!data[i]) {
			tc_rt_set_error(ctx, "tc_batches_new: data[%d] is NULL", i);
			return NULL;
		}
		if (tc_rt_tensor_from_dl(data[i], 1, &v, &l, err, sizeof(err))) {
			tc_rt_set_error(ctx, "tc_batches_new: data[%d]: %s", i, err);
			return NULL;
		}
		if (data[i]->device.device_type != kDLCPU || !l.compact) {
			tc_rt_set_error(ctx, "tc_batches_new: data[%d] is not a compact host "
					     "tensor (kDLCPU, compact row-major strides)", i);
			return NULL;
		}
		if (v.ndim < 1) {
			tc_rt_set_error(ctx, "tc_batches_new: data[%d] has rank 0; its first "
					     "dimension must be the examples", i);
			return NULL;
		}
		if (v.shape[0] != data[0]->shape[0]) {
			tc_rt_set_error(ctx, "tc_batches_new: data[%d] has %lld examples (first "
					     "extent) but data[0] has %lld",
				i, (long long)v.shape[0], (long long)data[0]->shape[0]);
			return NULL;
		}
	}
	if (batch < 1 || batch > data[0]->shape[0]) {
		tc_rt_set_error(ctx, "tc_batches_new: batch %lld is not in 1..%lld (the number "
				     "of examples)",
			(long long)batch, (long long)data[0]->shape[0]);
		return NULL;
	}
	head = sizeof(*b) + (size_t)n_data * sizeof(batch_src);
	head = (head + 7) & ~(size_t)7;
	if ((uint64_t)data[0]->shape[0] > (SIZE_MAX - head) / sizeof(int64_t)) {
		tc_rt_set_error(ctx, "out of memory: tc_batches_new: %lld examples",
			(long long)data[0]->shape[0]);
		return NULL;
	}
	size = head + (size_t)data[0]->shape[0] * sizeof(int64_t);
	if (!(b = tc_malloc(size))) {
		tc_rt_set_error(ctx, "out of memory: tc_batches_new: %zu bytes", size);
		return NULL;
	}
	memset(b, 0, sizeof(*b));
	b->ctx = ctx;
	b->n_data = n_data;
	b->src = (batch_src *)(b + 1);
	b->perm = (int64_t *)((char *)b + head);
	b->rows = data[0]->shape[0];
	b->batch = batch;
	b->per_epoch = b->rows / batch;
	b->state = seed;
	for (i = 0; i < n_data; i++) {
		batch_src *s = &b->src[i];
		memset(s, 0, sizeof(*s)); /* lut_dt TC_T_NONE: no table yet */
		tc_rt_tensor_from_dl(data[i], 1, &v, &l, err, sizeof(err));
		s->dl = data[i];
		s->dtype = v.dtype;
		s->ndim = v.ndim;
		s->row_elems = 1;
		for (d = 0; d < v.ndim; d++) {
			s->shape[d] = v.shape[d];
			if (d > 0)
				s->row_elems *= (size_t)v.shape[d];
		}
	}
	return b;
}

/* Check out (n_out tensors) against b; the kind of copy of each in
 * b->src[i].kind.  -1 with the error in b->ctx. */
static tc_stat check_out(tc_batches *b, DLTensor *const *out, int n_out, const double *scale)
{
	tc_tensor v;
	tc_rt_layout l;
	char err[256];
	int i, d;
	size_t row;

	if (!out) {
		tc_rt_set_error(b->ctx, "tc_batches_next: the out array is NULL");
		return TC_ERR;
	}
	if (n_out != b->n_data) {
		tc_rt_set_error(b->ctx, "tc_batches_next: %d out tensors for %d data tensors", n_out,
			b->n_data);
		return TC_ERR;
	}
	for (i = 0; i < n_out; i++) {
		batch_src *s = &b->src[i];
		double sc = scale ? scale[i] : 1.0;
		if (!out[i]) {
			tc_rt_set_error(b->ctx, "tc_batches_next: out[%d] is NULL", i);
			return TC_ERR;
		}
		if (tc_rt_tensor_from_dl(out[i], 1, &v, &l, err, sizeof(err))) {
			tc_rt_set_error(b->ctx, "tc_batches_next: out[%d]: %s", i, err);
			return TC_ERR;
		}
		if (out[i]->device.device_type != kDLCPU || !l.compact) {
			tc_rt_set_error(b->ctx, "tc_batches_next: out[%d] is not a compact host "
						"tensor (kDLCPU, compact row-major strides)", i);
			return TC_ERR;
		}
		if (v.ndim < 1 || v.shape[0] != b->batch) {
			tc_rt_set_error(b->ctx, "tc_batches_next: out[%d] has first extent %lld; "
						"expected the batch, %lld", i,
				v.ndim < 1 ? 0LL : (long long)v.shape[0], (long long)b->batch);
			return TC_ERR;
		}
		/* the rows may be reshaped: 28x28 images into rows of 784 */
		for (d = 1, row = 1; d < v.ndim; d++)
			row *= (size_t)v.shape[d];
		if (row != s->row_elems) {
			tc_rt_set_error(b->ctx, "tc_batches_next: out[%d]'s rows hold %zu elements; "
						"expected %zu, as data[%d]'s",
				i, row, s->row_elems, i);
			return TC_ERR;
		}
		if (v.dtype == s->dtype)
			s->kind = COPY_SAME;
		else if (tc_dtype_is_int(s->dtype) && tc_dtype_is_int(v.dtype))
			s->kind = COPY_INT;
		else if (tc_dtype_is_int(s->dtype) && (v.dtype == TC_T_F32 || v.dtype == TC_T_F64))
			s->kind = COPY_FLOAT;
		else {
			tc_rt_set_error(b->ctx, "tc_batches_next: cannot convert data[%d]'s %s to "
						"out[%d]'s %s (the same type, integer to integer, "
						"or integer to float32/float64 only)",
				i, tc_dtype_name(s->dtype), i, tc_dtype_name(v.dtype));
			return TC_ERR;
		}
		s->lut_ok = s->kind == COPY_FLOAT && tc_dtype_bits(s->dtype) == 8;
		if (s->lut_ok && (s->lut_dt != v.dtype || s->lut_sc != sc)) {
			/* the same rounding as int_to_float, once per value */
			for (int u = 0; u < 256; u++) {
				unsigned char byte = (unsigned char)u;
				double x = s->dtype == TC_T_U8 ? (double)byte
							       : (double)(int8_t)byte;
				if (v.dtype == TC_T_F32)
					s->lut[u] = (float)(x * sc);
				else
					s->lutd[u] = x * sc;
			}
			s->lut_dt = v.dtype;
			s->lut_sc = sc;
		}
		if (s->kind != COPY_FLOAT && sc != 1.0) {
			tc_rt_set_error(b->ctx, "tc_batches_next: scale[%d] is %g, but out[%d] (%s from "
						"%s) is no conversion to float32/float64, which alone "
						"scale; give 1",
				i, sc, i, tc_dtype_name(v.dtype), tc_dtype_name(s->dtype));
			return TC_ERR;
		}
	}
	return TC_OK;
}

/* Element k of integer array p of type t, as a signed value (*neg) with
 * its magnitude's bits: signed types give their value, unsigned ones their
 * value as uint64. */
static uint64_t load_int(const void *p, tc_dtype t, size_t k, int *neg)
{
	int64_t v;
	*neg = 0;
	switch (t) {
	case TC_T_U8: return ((const uint8_t *)p)[k];
	case TC_T_U16: return ((const uint16_t *)p)[k];
	case TC_T_U32: return ((const uint32_t *)p)[k];
	case TC_T_U64: return ((const uint64_t *)p)[k];
	case TC_T_I8: v = ((const int8_t *)p)[k]; break;
	case TC_T_I16: v = ((const int16_t *)p)[k]; break;
	case TC_T_I32: v = ((const int32_t *)p)[k]; break;
	default: v = ((const int64_t *)p)[k]; break;
	}
	*neg = v < 0;
	return (uint64_t)v; /* two's complement bits */
}

/* Whether the value (bits u, negative when neg) fits integer type t. */
static int int_fits(uint64_t u, int neg, tc_dtype t)
{
	int bits = tc_dtype_bits(t);
	if (tc_dtype_is_unsigned(t))
		return !neg && (bits == 64 || u <= (UINT64_MAX >> (64 - bits)));
	if (neg) /* u is v's two's complement bits: v >= -2^(bits-1) */
		return bits == 64 || (int64_t)u >= -(INT64_C(1) << (bits - 1));
	return u <= ((uint64_t)INT64_MAX >> (64 - bits));
}

/* Store the value (its bits u) as element k of integer array p of type t. */
static void store_int(void *p, tc_dtype t, size_t k, uint64_t u)
{
	switch (t) {
	case TC_T_U8: ((uint8_t *)p)[k] = (uint8_t)u; break;
	case TC_T_U16: ((uint16_t *)p)[k] = (uint16_t)u; break;
	case TC_T_U32: ((uint32_t *)p)[k] = (uint32_t)u; break;
	case TC_T_U64: ((uint64_t *)p)[k] = u; break;
	case TC_T_I8: ((int8_t *)p)[k] = (int8_t)(int64_t)u; break;
	case TC_T_I16: ((int16_t *)p)[k] = (int16_t)(int64_t)u; break;
	case TC_T_I32: ((int32_t *)p)[k] = (int32_t)(int64_t)u; break;
	default: ((int64_t *)p)[k] = (int64_t)u; break;
	}
}

/* n integers of type st from src into dst of float type dt, each times sc
 * (in double, rounded once to dt). */
#define TO_FLOAT(ST, DT)                                                                   \
	for (k = 0; k < n; k++)                                                            \
		((DT *)dst)[k] = (DT)((double)((const ST *)src)[k] * sc)

static void int_to_float(const void *src, tc_dtype st, void *dst, tc_dtype dt, size_t n,
	double sc)
{
	size_t k;
	if (dt == TC_T_F32) {
		switch (st) {
		case TC_T_U8: TO_FLOAT(uint8_t, float); break;
		case TC_T_U16: TO_FLOAT(uint16_t, float); break;
		case TC_T_U32: TO_FLOAT(uint32_t, float); break;
		case TC_T_U64: TO_FLOAT(uint64_t, float); break;
		case TC_T_I8: TO_FLOAT(int8_t, float); break;
		case TC_T_I16: TO_FLOAT(int16_t, float); break;
		case TC_T_I32: TO_FLOAT(int32_t, float); break;
		default: TO_FLOAT(int64_t, float); break;
		}
	} else {
		switch (st) {
		case TC_T_U8: TO_FLOAT(uint8_t, double); break;
		case TC_T_U16: TO_FLOAT(uint16_t, double); break;
		case TC_T_U32: TO_FLOAT(uint32_t, double); break;
		case TC_T_U64: TO_FLOAT(uint64_t, double); break;
		case TC_T_I8: TO_FLOAT(int8_t, double); break;
		case TC_T_I16: TO_FLOAT(int16_t, double); break;
		case TC_T_I32: TO_FLOAT(int32_t, double); break;
		default: TO_FLOAT(int64_t, double); break;
		}
	}
}

#undef TO_FLOAT

/* One out tensor's copy of a batch: its data tensor s, the data and out
 * bytes, the out type, the bytes of a row in each, the batch's rows. */
typedef struct copy_plan {
	const batch_src *s;
	const char *sdata;
	char *odata;
	tc_dtype dt;
	size_t rowbytes, outbytes;
	const int64_t *order;
	int64_t batch;
	double sc;
} copy_plan;

/* Rows begin..end-1 of the batch of plan *tensors[0] (COPY_SAME or
 * COPY_FLOAT: nothing can fail), as a parallel loop's body
 * (runtime/pool.h). */
static void copy_rows(void *const *tensors, int64_t begin, int64_t end, int64_t lo, int64_t step)
{
	const copy_plan *p = tensors[0];
	const batch_src *s = p->s;
	(void)lo;
	(void)step;
	for (int64_t r = begin; r < end; r++) {
		const char *from = p->sdata + (size_t)p->order[r] * p->rowbytes;
		char *to = p->odata + (size_t)r * p->outbytes;
		size_t k;
		if (r + PREFETCH_ROWS < end) {
			const char *ahead = p->sdata + (size_t)p->order[r + PREFETCH_ROWS] * p->rowbytes;
			for (size_t o = 0; o < p->rowbytes; o += 64)
				__builtin_prefetch(ahead + o);
		}
		if (s->kind == COPY_SAME)
			memcpy(to, from, p->rowbytes);
		else if (s->lut_ok && p->dt == TC_T_F32)
			for (k = 0; k < s->row_elems; k++)
				((float *)to)[k] = s->lut[((const uint8_t *)from)[k]];
		else if (s->lut_ok)
			for (k = 0; k < s->row_elems; k++)
				((double *)to)[k] = s->lutd[((const uint8_t *)from)[k]];
		else
			int_to_float(from, s->dtype, to, p->dt, s->row_elems, p->sc);
	}
}

/* The batch of plan p, integers to integers (COPY_INT) for out tensor i,
 * each value checked; -1 with the error in b->ctx for one the out type
 * cannot hold. */
static tc_stat copy_ints(tc_batches *b, const copy_plan *p, int i)
{
	const batch_src *s = p->s;
	for (int64_t r = 0; r < p->batch; r++) {
		const char *from = p->sdata + (size_t)p->order[r] * p->rowbytes;
		char *to = p->odata + (size_t)r * p->outbytes;
		for (size_t k = 0; k < s->row_elems; k++) {
			int neg;
			uint64_t u = load_int(from, s->dtype, k, &neg);
			if (!int_fits(u, neg, p->dt)) {
				tc_rt_set_error(b->ctx,
					"tc_batches_next: data[%d] row %lld holds %s%llu (element %zu "
					"of the row), which out[%d]'s %s cannot hold",
					i, (long long)p->order[r], neg ? "-" : "",
					(unsigned long long)(neg ? 0 - u : u), k, i, tc_dtype_name(p->dt));
				return TC_ERR;
			}
			store_int(to, p->dt, k, u);
		}
	}
	return TC_OK;
}

int tc_batches_next(__tc_keep tc_batches *b, __tc_keep DLTensor *const *out, int n_out,
	const double *scale)
{
	int i, threads;
	int64_t rows;

	if (!b)
		return -1;
	tc_rt_clear_error(b->ctx);
	if (check_out(b, out, n_out, scale))
		return -1;
	if (!b->in_epoch) {
		b->epoch++;
		shuffle(b);
		b->next = 0;
		b->in_epoch = 1;
	}
	if (b->next == b->per_epoch) {
		b->in_epoch = 0;
		return 0;
	}
	rows = b->rows - b->next * b->batch < b->batch ? b->rows - b->next * b->batch : b->batch;
	threads = tc_context_threads(b->ctx);
	for (i = 0; i < n_out; i++) {
		const batch_src *s = &b->src[i];
		tc_dtype dt = tc_rt_dtype_from_dl(out[i]->dtype);
		copy_plan cp = {s, (const char *)s->dl->data + s->dl->byte_offset,
			(char *)out[i]->data + out[i]->byte_offset, dt,
			s->row_elems * (size_t)tc_dtype_size(s->dtype),
			s->row_elems * (size_t)tc_dtype_size(dt), b->perm + b->next * b->batch,
			rows, scale ? scale[i] : 1.0};
		void *arg[1] = {&cp};
		if (!s->row_elems)
			continue;
		if (s->kind == COPY_INT) {
			if (copy_ints(b, &cp, i) < 0)
				return -1;
		} else if (threads != 1 && (size_t)rows * cp.outbytes >= PARALLEL_BYTES) {
			tc_rt_pool_set_threads(threads);
			tc_rt_parallel_for(copy_rows, arg, rows, 0, 1);
		} else
			copy_rows(arg, 0, rows, 0, 1);
	}
	b->next++;
	b->served = rows;
	return 1;
}

int tc_batches_set_partial(__tc_keep tc_batches *b, int keep)
{
	if (!b)
		return -1;
	tc_rt_clear_error(b->ctx);
	if (b->in_epoch) {
		tc_rt_set_error(b->ctx, "tc_batches_set_partial: an epoch is under way (set it "
					"before the first batch or at the end of an epoch)");
		return -1;
	}
	b->partial = keep != 0;
	b->per_epoch = b->rows / b->batch + (b->partial && b->rows % b->batch);
	return 0;
}

int64_t tc_batches_rows(__tc_keep const tc_batches *b)
{
	return b ? b->served : -1;
}

int64_t tc_batches_per_epoch(__tc_keep const tc_batches *b)
{
	return b ? b->per_epoch : -1;
}

int64_t tc_batches_epoch(__tc_keep const tc_batches *b)
{
	return b ? b->epoch : -1;
}

void tc_batches_free(__tc_take tc_batches *b)
{
	tc_free(b);
}
