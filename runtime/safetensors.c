/* Named tensors in one safetensors file (runtime/safetensors.h). */
#include "safetensors.h"

#include "error.h"
#include "tensor.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

/* safetensors' name of a DLPack type, or NULL. */
static const char *st_dtype(DLDataType d)
{
	if (d.lanes != 1)
		return NULL;
	switch (d.code) {
	case kDLFloat: return d.bits == 64 ? "F64" : d.bits == 32 ? "F32" : d.bits == 16 ? "F16" : NULL;
	case kDLBfloat: return d.bits == 16 ? "BF16" : NULL;
	case kDLInt:
		return d.bits == 64 ? "I64" : d.bits == 32 ? "I32" : d.bits == 16 ? "I16"
			: d.bits == 8 ? "I8" : NULL;
	case kDLUInt:
		return d.bits == 64 ? "U64" : d.bits == 32 ? "U32" : d.bits == 16 ? "U16"
			: d.bits == 8 ? "U8" : NULL;
	case TC_DL_BOOL: return d.bits == 8 ? "BOOL" : NULL;
	}
	return NULL;
}

/* Bytes of t (compact), or -1 with a message when it is not a compact host
 * tensor of a type the format has. */
static int64_t tensor_bytes(tc_context *ctx, const char *path, const char *name, const DLTensor *t)
{
	int64_t n = t->dtype.bits / 8;
	if (!st_dtype(t->dtype) || t->device.device_type != kDLCPU || t->byte_offset ||
		(t->ndim && !t->shape)) {
		tc_rt_set_error(ctx, "%s: tensor '%s' is not a host tensor of a type safetensors has",
			path, name);
		return -1;
	}
	for (int d = 0; d < t->ndim; d++) {
		if (t->strides) {
			int64_t want = 1;
			for (int e = d + 1; e < t->ndim; e++)
				want *= t->shape[e];
			if (t->shape[d] > 1 && t->strides[d] != want) {
				tc_rt_set_error(ctx, "%s: tensor '%s' is not compact", path, name);
				return -1;
			}
		}
		n *= t->shape[d];
	}
	return n;
}

/* "[128,784]": the shape as SQLite's JSON functions print an array. */
static void shape_json(tc_buf *b, const DLTensor *t)
{
	tc_buf_putc(b, '[');
	for (int d = 0; d < t->ndim; d++)
		tc_buf_printf(b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
	tc_buf_putc(b, ']');
}

tc_stat tc_rt_safetensors_write(__tc_keep tc_context *ctx, const char *path, int n,
	__tc_keep const char *const *names, __tc_keep const DLTensor *const *t)
{
	char *tmp = NULL;
	FILE *fp = NULL;
	tc_buf h;
	int64_t off = 0;
	unsigned char len8[8];
	tc_stat rc = TC_ERR;
	tc_buf_init(&h);
	tc_buf_putc(&h, '{');
	for (int i = 0; i < n; i++) {
		int64_t bytes = tensor_bytes(ctx, path, names[i], t[i]);
		if (bytes < 0)
			goto out;
		tc_buf_printf(&h, "\"%s\":{\"dtype\":\"%s\",\"shape\":", names[i], st_dtype(t[i]->dtype));
		shape_json(&h, t[i]);
		tc_buf_printf(&h, ",\"data_offsets\":[%lld,%lld]},", (long long)off,
			(long long)(off + bytes));
		off += bytes;
	}
	tc_buf_printf(&h, "\"__metadata__\":{\"producer\":\"tcomp %s\"}}", TCOMP_VERSION);
	while (h.len % 8) /* the data at a multiple of 8 bytes, as the format suggests */
		tc_buf_putc(&h, ' ');
	if (h.oom || !(tmp = tc_malloc(strlen(path) + 8))) {
		tc_rt_set_error(ctx, "out of memory");
		goto out;
	}
	sprintf(tmp, "%s.tmp", path);
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
	if (!(fp = fopen(tmp, "wb")) || fwrite(len8, 1, 8, fp) != 8 ||
		fwrite(h.s, 1, h.len, fp) != h.len)
		goto ioerr;
	for (int i = 0; i < n; i++) {
		size_t bytes = (size_t)tensor_bytes(ctx, path, names[i], t[i]);
		if (bytes && fwrite(t[i]->data, 1, bytes, fp) != bytes)
			goto ioerr;
	}
	if (fclose(fp)) {
		fp = NULL;
		goto ioerr;
	}
	fp = NULL;
	if (rename(tmp, path))
		goto ioerr;
	rc = TC_OK;
	goto out;
ioerr:
	tc_rt_set_error(ctx, "%s: cannot write: %s", path, strerror(errno));
	if (fp)
		fclose(fp);
	remove(tmp);
out:
	tc_free(tmp);
	tc_buf_free(&h);
	return rc;
}

/* The whole file at path in *buf (tc_malloc), its size in *size. */
static tc_stat read_all(tc_context *ctx, const char *path, unsigned char **buf, size_t *size)
{
	FILE *fp = fopen(path, "rb");
	long n;
	*buf = NULL;
	if (!fp || fseek(fp, 0, SEEK_END) || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET)) {
		tc_rt_set_error(ctx, "%s: cannot read: %s", path, strerror(errno));
		if (fp)
			fclose(fp);
		return TC_ERR;
	}
	if (!(*buf = tc_malloc((size_t)n + 1))) {
		fclose(fp);
		tc_rt_set_error(ctx, "out of memory reading %s", path);
		return TC_ERR;
	}
	if (fread(*buf, 1, (size_t)n, fp) != (size_t)n) {
		tc_rt_set_error(ctx, "%s: cannot read: %s", path, strerror(errno));
		fclose(fp);
		tc_free(*buf);
		*buf = NULL;
		return TC_ERR;
	}
	fclose(fp);
	*size = (size_t)n;
	return TC_OK;
}

tc_stat tc_rt_safetensors_read(__tc_keep tc_context *ctx, const char *path, int n,
	__tc_keep const char *const *names, __tc_keep DLTensor *const *t)
{
	static const char *const q =
		"SELECT key, value ->> '$.dtype', json(value -> '$.shape'), "
		"value ->> '$.data_offsets[0]', value ->> '$.data_offsets[1]', type "
		"FROM json_each(?1)";
	unsigned char *buf = NULL;
	size_t size = 0, hlen = 0;
	int64_t *begin = NULL;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	tc_stat rc = TC_ERR;
	tc_buf want;
	tc_buf_init(&want);
	if (read_all(ctx, path, &buf, &size) < 0)
		return TC_ERR;
	for (int i = 0; i < 8 && size >= 8; i++)
		hlen |= (size_t)buf[i] << (8 * i);
	if (size < 8 || hlen > size - 8) {
		tc_rt_set_error(ctx, "%s: not a safetensors file: %s", path,
			size < 8 ? "shorter than its 8-byte header length"
				 : "the header length exceeds the file");
		goto out;
	}
	if (!(begin = tc_calloc((size_t)n + 1, sizeof(*begin)))) {
		tc_rt_set_error(ctx, "out of memory reading %s", path);
		goto out;
	}
	for (int i = 0; i < n; i++)
		begin[i] = -1;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
		sqlite3_prepare_v2(db, "SELECT CASE WHEN json_valid(?1) THEN json_type(?1) = 'object' ELSE 0 END", -1, &st,
			NULL) != SQLITE_OK ||
		sqlite3_bind_text(st, 1, (const char *)buf + 8, (int)hlen, SQLITE_STATIC) != SQLITE_OK ||
		sqlite3_step(st) != SQLITE_ROW) {
		tc_rt_set_error(ctx, "%s: internal error: SQLite's JSON functions failed: %s", path,
			db ? sqlite3_errmsg(db) : "no database");
		goto out;
	}
	if (!sqlite3_column_int(st, 0) || memchr(buf + 8, 0, hlen)) {
		tc_rt_set_error(ctx, "%s: not a safetensors file: the header is not a JSON object", path);
		goto out;
	}
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK ||
		sqlite3_bind_text(st, 1, (const char *)buf + 8, (int)hlen, SQLITE_STATIC) != SQLITE_OK) {
		tc_rt_set_error(ctx, "%s: internal error: %s", path, sqlite3_errmsg(db));
		goto out;
	}
	for (int r; (r = sqlite3_step(st)) != SQLITE_DONE;) {
		const char *key, *dt, *shape;
		int64_t b, e, bytes;
		int i;
		if (r != SQLITE_ROW) {
			tc_rt_set_error(ctx, "%s: internal error: %s", path, sqlite3_errmsg(db));
			goto out;
		}
		key = (const char *)sqlite3_column_text(st, 0);
		if (key && !strcmp(key, "__metadata__"))
			continue;
		for (i = 0; i < n && (!key || strcmp(key, names[i])); i++)
			;
		if (i == n) {
			tc_rt_set_error(ctx, "%s: the file holds a tensor '%s' the model does not have", path,
				key ? key : "");
			goto out;
		}
		if (begin[i] >= 0) {
			tc_rt_set_error(ctx, "%s: tensor '%s' is in the header twice", path, key);
			goto out;
		}
		dt = (const char *)sqlite3_column_text(st, 1);
		shape = (const char *)sqlite3_column_text(st, 2);
		want.len = 0;
		shape_json(&want, t[i]);
		if ((bytes = tensor_bytes(ctx, path, names[i], t[i])) < 0)
			goto out;
		if (!dt || strcmp(dt, st_dtype(t[i]->dtype)) || !shape || want.oom ||
			strcmp(shape, want.s)) {
			tc_rt_set_error(ctx, "%s: tensor '%s' is %s%s in the file but %s%s in the model",
				path, key, dt ? dt : "(no dtype)", shape ? shape : "(no shape)",
				st_dtype(t[i]->dtype), want.s ? want.s : "");
			goto out;
		}
		b = sqlite3_column_int64(st, 3);
		e = sqlite3_column_int64(st, 4);
		if (sqlite3_column_type(st, 3) != SQLITE_INTEGER ||
			sqlite3_column_type(st, 4) != SQLITE_INTEGER || b < 0 || e < b ||
			(uint64_t)e > size - 8 - hlen || e - b != bytes) {
			tc_rt_set_error(ctx, "%s: tensor '%s' has data_offsets that are not the %lld bytes of its shape inside the file's %zu bytes of data",
				path, key, (long long)bytes, size - 8 - hlen);
			goto out;
		}
		begin[i] = b;
	}
	for (int i = 0; i < n; i++)
		if (begin[i] < 0) {
			tc_rt_set_error(ctx, "%s: the file has no tensor '%s'", path, names[i]);
			goto out;
		}
	for (int i = 0; i < n; i++) {
		int64_t bytes = tensor_bytes(ctx, path, names[i], t[i]);
		if (bytes)
			memcpy(t[i]->data, buf + 8 + hlen + begin[i], (size_t)bytes);
	}
	rc = TC_OK;
out:
	sqlite3_finalize(st);
	sqlite3_close(db);
	tc_buf_free(&want);
	tc_free(begin);
	tc_free(buf);
	return rc;
}
