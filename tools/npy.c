/* NumPy .npy reading and writing (format described in NumPy's
 * numpy/lib/format.py, "NPY format"):
 *
 *   "\x93NUMPY" major minor   magic and format version (1.0, 2.0, 3.0)
 *   header length             uint16 LE in 1.0, uint32 LE in 2.0 and 3.0
 *   header                    a Python dict literal, e.g.
 *                             {'descr': '<f4', 'fortran_order': False, 'shape': (4, 5), }
 *                             padded with spaces and ended by '\n'
 *   data                      the elements in C (or Fortran) order
 *
 * The header is parsed by a small recursive-descent parser over exactly the
 * subset of Python literals NumPy writes, bounded by the header length, so
 * that any byte string gives either an array or a message (see npy.h for the
 * decisions on trailing data, bool bytes and Fortran order). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fileno, ftello */
#endif
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
	__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tools/npy.c stores .npy data as is and needs a little-endian host"
#endif

static const unsigned char tc_npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- messages ---- */

/* Set *err (when err is not NULL) to "name: " followed by the formatted
 * message, allocated with tc_malloc.  Always returns TC_ERR so callers can
 * write "return tc_npy_fail(...)". */
static tc_stat tc_npy_fail(char **err, const char *name, const char *fmt, ...)
	TC_PRINTF(3, 4);
static tc_stat tc_npy_fail(char **err, const char *name, const char *fmt, ...)
{
	tc_buf b;
	va_list ap;

	if (!err)
		return TC_ERR;
	tc_buf_init(&b);
	tc_buf_printf(&b, "%s: ", name);
	va_start(ap, fmt);
	tc_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	*err = tc_buf_take(&b);
	return TC_ERR;
}

/* Write s[0..n) into dst[0..cap) as printable ASCII between single quotes:
 * other bytes become \xNN and text that does not fit ends with "...".  Header
 * text comes from the file and may hold anything, including NUL. */
static void tc_npy_quote(char *dst, size_t cap, const char *s, size_t n)
{
	size_t i, k = 0;

	dst[k++] = '\'';
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		int w = c >= 0x20 && c < 0x7f && c != '\\' ? 1 : 4;
		if (k + w + 5 > cap) { /* room for "...'" and NUL */
			memcpy(dst + k, "...", 3);
			k += 3;
			break;
		}
		if (w == 1)
			dst[k++] = (char)c;
		else
			k += (size_t)snprintf(dst + k, cap - k, "\\x%02x", c);
	}
	dst[k++] = '\'';
	dst[k] = 0;
}

/* Append "4x5" (or "scalar" for rank 0) to b. */
static void tc_npy_put_shape(tc_buf *b, int ndim, const int64_t *shape)
{
	int i;

	if (ndim == 0)
		tc_buf_puts(b, "scalar");
	for (i = 0; i < ndim; i++)
		tc_buf_printf(b, "%s%lld", i ? "x" : "", (long long)shape[i]);
}

/* ---- dtypes ---- */

/* The descr NumPy writes for t (little-endian, '|' for one-byte types). */
static const char *tc_npy_descr_of(tc_dtype t)
{
	switch (t) {
	case TC_T_BOOL: return "|b1";
	case TC_T_I8: return "|i1";
	case TC_T_I16: return "<i2";
	case TC_T_I32: return "<i4";
	case TC_T_I64: return "<i8";
	case TC_T_U8: return "|u1";
	case TC_T_U16: return "<u2";
	case TC_T_U32: return "<u4";
	case TC_T_U64: return "<u8";
	case TC_T_F16: return "<f2";
	case TC_T_F32: return "<f4";
	case TC_T_F64: return "<f8";
	case TC_T_BF16: return "<V2"; /* what np.save writes for ml_dtypes.bfloat16 */
	default: return NULL;
	}
}

/* A readable name for an unsupported descr, for messages ("complex64",
 * "unicode string", ...).  kind is the type character after the byte-order
 * prefix, bits the item size in bits or 0 if the size is not a number. */
static const char *tc_npy_kind_name(char kind, int bits, char *buf, size_t cap)
{
	const char *base;

	switch (kind) {
	case 'b': base = "bool"; break;
	case 'i': base = "int"; break;
	case 'u': base = "uint"; break;
	case 'f': base = "float"; break;
	case 'c': base = "complex"; break;
	case 'U': return "unicode string";
	case 'S': case 'a': return "byte string";
	case 'O': return "Python object";
	case 'M': return "datetime64";
	case 'm': return "timedelta64";
	case 'V': return "void (raw bytes)";
	default: return "unknown type";
	}
	if (!bits)
		return base;
	snprintf(buf, cap, "%s%d", base, bits);
	return buf;
}

/* Map a descr string (borrowed, length n) to a tcomp dtype, or report why
 * it cannot be read.  descr := [byteorder] kind size, byteorder one of
 * "<|=" (or '>' '!' for one-byte types, where order does not matter). */
static tc_stat tc_npy_dtype_of_descr(const char *d, size_t n, tc_dtype *out,
	const char *name, char **err)
{
	static const struct {
		const char *spec;
		tc_dtype t;
	} table[] = {
		{"b1", TC_T_BOOL}, {"i1", TC_T_I8}, {"i2", TC_T_I16}, {"i4", TC_T_I32},
		{"i8", TC_T_I64}, {"u1", TC_T_U8}, {"u2", TC_T_U16}, {"u4", TC_T_U32},
		{"u8", TC_T_U64}, {"f2", TC_T_F16}, {"f4", TC_T_F32}, {"f8", TC_T_F64},
		/* NumPy has no bfloat16; ml_dtypes' is saved as 2-byte void */
		{"V2", TC_T_BF16},
	};
	char q[80], kb[32];
	const char *spec = d;
	size_t i, sn = n;
	char order = 0;
	int bits = 0;

	tc_npy_quote(q, sizeof(q), d, n);
	if (n > 0 && d[0] && strchr("<>|=!", d[0])) {
		order = d[0];
		spec++;
		sn--;
	}
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (sn != 2 || memcmp(spec, table[i].spec, 2) != 0)
			continue;
		if ((order == '>' || order == '!') && tc_dtype_size(table[i].t) > 1)
			return tc_npy_fail(err, name,
				"big-endian data not supported (dtype %s, %s): convert it with "
				"a.astype('<%s')", q, tc_dtype_name(table[i].t), table[i].spec);
		*out = table[i].t;
		return TC_OK;
	}
	if (sn == 0)
		return tc_npy_fail(err, name, "unsupported dtype %s: not a NumPy type", q);
	/* The item size in bits, when it is a plain number ("c8", "f16"). */
	if (sn >= 2 && sn <= 4) {
		int v = 0;
		for (i = 1; i < sn && spec[i] >= '0' && spec[i] <= '9'; i++)
			v = v * 10 + (spec[i] - '0');
		if (i == sn)
			bits = v * 8;
	}
	return tc_npy_fail(err, name,
		"unsupported dtype %s (%s); tcomp reads bool, int8/16/32/64, "
		"uint8/16/32/64, float16, float32, float64 and bfloat16 (as '<V2')",
		q, tc_npy_kind_name(spec[0], bits, kb, sizeof(kb)));
}

/* ---- header parser ---- */

/* The state of parsing one header: the text (not NUL-terminated, may hold
 * any bytes), the position, and what was found. */
typedef struct tc_npy_parser {
	const char *s;
	size_t len, pos;
	const char *name; /* file name, for messages */
	char **err;

	int has_descr, has_fortran, has_shape;
	const char *descr; /* points into s */
	size_t descr_len;
	int fortran;
	int ndim; /* entries of the shape tuple, possibly more than stored */
	int64_t shape[TC_NPY_MAX_RANK];
	size_t shape_pos, shape_end; /* the tuple's text, for messages */
	int bad_dim; /* 0, or 1 negative / 2 too large: the first bad entry */
	size_t bad_pos, bad_len;
} tc_npy_parser;

/* Report a syntax error at the current position, quoting the header. */
static tc_stat tc_npy_syntax(tc_npy_parser *p, const char *what)
{
	char q[160];
	size_t n = p->len;

	/* The padding NumPy writes (spaces, '\n') says nothing: leave it out. */
	while (n > 0 && (p->s[n - 1] == ' ' || p->s[n - 1] == '\n'))
		n--;
	tc_npy_quote(q, sizeof(q), p->s, n);
	return tc_npy_fail(p->err, p->name, "malformed header: %s (at byte %zu of %s)", what,
		p->pos, q);
}

static int tc_npy_peek(tc_npy_parser *p)
{
	return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static void tc_npy_skip_ws(tc_npy_parser *p)
{
	while (p->pos < p->len && p->s[p->pos] && strchr(" \t\n\r\f\v", p->s[p->pos]))
		p->pos++;
}

/* Consume c (after white space) or fail with "expected <what>". */
static tc_stat tc_npy_expect(tc_npy_parser *p, char c, const char *what)
{
	tc_npy_skip_ws(p);
	if (tc_npy_peek(p) != (unsigned char)c)
		return tc_npy_syntax(p, what);
	p->pos++;
	return TC_OK;
}

/* string := "'" chars "'" | '"' chars '"'   (a backslash escapes one char)
 * Sets *str and *n to the raw text between the quotes. */
static tc_stat tc_npy_string(tc_npy_parser *p, const char **str, size_t *n)
{
	int q = tc_npy_peek(p);
	size_t start;

	if (q != '\'' && q != '"')
		return tc_npy_syntax(p, "expected a quoted string");
	start = ++p->pos;
	while (p->pos < p->len && p->s[p->pos] != q && p->s[p->pos] != '\n') {
		if (p->s[p->pos] == '\\')
			p->pos++;
		p->pos++;
	}
	if (p->pos >= p->len || p->s[p->pos] != q)
		return tc_npy_syntax(p, "unterminated string");
	*str = p->s + start;
	*n = p->pos - start;
	p->pos++;
	return TC_OK;
}

/* bool := 'True' | 'False' */
static tc_stat tc_npy_bool(tc_npy_parser *p, int *v)
{
	size_t rest = p->len - p->pos;
	size_t n = 0;

	if (rest >= 4 && !memcmp(p->s + p->pos, "True", 4))
		n = 4, *v = 1;
	else if (rest >= 5 && !memcmp(p->s + p->pos, "False", 5))
		n = 5, *v = 0;
	if (n && p->pos + n < p->len) {
		char c = p->s[p->pos + n];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(c >= '0' && c <= '9') || c == '_')
			n = 0;
	}
	if (!n)
		return tc_npy_syntax(p, "'fortran_order' must be True or False");
	p->pos += n;
	return TC_OK;
}

/* int := ['+' | '-'] digit+ ['L' | 'l']   (the L of Python 2 longs)
 * A negative or too large entry is remembered in bad_dim (the first one) and
 * reported after the whole header has been read. */
static tc_stat tc_npy_int(tc_npy_parser *p, int64_t *v)
{
	size_t start = p->pos;
	int neg = 0, big = 0;
	uint64_t x = 0;

	if (tc_npy_peek(p) == '+' || tc_npy_peek(p) == '-')
		neg = p->s[p->pos++] == '-';
	if (tc_npy_peek(p) < '0' || tc_npy_peek(p) > '9')
		return tc_npy_syntax(p, "expected an integer in the shape");
	while (tc_npy_peek(p) >= '0' && tc_npy_peek(p) <= '9') {
		unsigned d = (unsigned)(p->s[p->pos++] - '0');
		if (x > ((uint64_t)INT64_MAX - d) / 10)
			big = 1;
		else
			x = x * 10 + d;
	}
	if (tc_npy_peek(p) == 'L' || tc_npy_peek(p) == 'l')
		p->pos++;
	if (neg && x == 0 && !big)
		neg = 0; /* "-0" is 0 */
	if ((neg || big) && !p->bad_dim) {
		p->bad_dim = neg ? 1 : 2;
		p->bad_pos = start;
		p->bad_len = p->pos - start;
	}
	*v = big || neg ? 0 : (int64_t)x;
	return TC_OK;
}

/* shape := '(' [ int (',' int)* [','] ] ')'
 * As in Python, "(5)" is not a tuple: one entry needs the comma, "(5,)". */
static tc_stat tc_npy_shape(tc_npy_parser *p)
{
	int commas = 0;

	p->shape_pos = p->pos;
	if (tc_npy_expect(p, '(', "expected '(' starting the shape tuple") < 0)
		return TC_ERR;
	p->ndim = 0;
	for (;;) {
		int64_t v = 0;
		tc_npy_skip_ws(p);
		if (tc_npy_peek(p) == ')')
			break;
		if (tc_npy_int(p, &v) < 0)
			return TC_ERR;
		if (p->ndim < TC_NPY_MAX_RANK)
			p->shape[p->ndim] = v;
		if (p->ndim < 1000000)
			p->ndim++;
		tc_npy_skip_ws(p);
		if (tc_npy_peek(p) != ',')
			break;
		p->pos++;
		commas++;
	}
	if (tc_npy_expect(p, ')', "expected ',' or ')' in the shape tuple") < 0)
		return TC_ERR;
	if (p->ndim == 1 && commas == 0) {
		p->pos = p->shape_pos;
		return tc_npy_syntax(p, "'shape' must be a tuple: write (N,) for one dimension");
	}
	p->shape_end = p->pos;
	return TC_OK;
}

/* entry := string ':' value, where the key chooses the value's rule:
 *   'descr': string    'fortran_order': bool    'shape': shape */
static tc_stat tc_npy_entry(tc_npy_parser *p)
{
	const char *key;
	size_t n;
	int *seen;

	if (tc_npy_string(p, &key, &n) < 0)
		return TC_ERR;
	if (n == 5 && !memcmp(key, "descr", 5))
		seen = &p->has_descr;
	else if (n == 13 && !memcmp(key, "fortran_order", 13))
		seen = &p->has_fortran;
	else if (n == 5 && !memcmp(key, "shape", 5))
		seen = &p->has_shape;
	else {
		char q[80];
		tc_npy_quote(q, sizeof(q), key, n);
		return tc_npy_fail(p->err, p->name,
			"malformed header: unexpected key %s (a .npy header has exactly "
			"'descr', 'fortran_order' and 'shape')", q);
	}
	if (*seen) {
		char q[24];
		tc_npy_quote(q, sizeof(q), key, n);
		return tc_npy_fail(p->err, p->name, "malformed header: duplicate key %s", q);
	}
	*seen = 1;
	if (tc_npy_expect(p, ':', "expected ':' after a key") < 0)
		return TC_ERR;
	tc_npy_skip_ws(p);
	if (seen == &p->has_descr) {
		if (tc_npy_peek(p) == '[')
			return tc_npy_fail(p->err, p->name,
				"unsupported dtype: structured (record) arrays are not supported");
		return tc_npy_string(p, &p->descr, &p->descr_len);
	}
	if (seen == &p->has_fortran)
		return tc_npy_bool(p, &p->fortran);
	return tc_npy_shape(p);
}

/* header := '{' [ entry (',' entry)* [','] ] '}' whitespace* <end> */
static tc_stat tc_npy_header(tc_npy_parser *p)
{
	if (tc_npy_expect(p, '{', "expected '{' starting the header dictionary") < 0)
		return TC_ERR;
	for (;;) {
		tc_npy_skip_ws(p);
		if (tc_npy_peek(p) == '}')
			break;
		if (tc_npy_entry(p) < 0)
			return TC_ERR;
		tc_npy_skip_ws(p);
		if (tc_npy_peek(p) != ',')
			break;
		p->pos++;
	}
	if (tc_npy_expect(p, '}', "expected ',' or '}' in the header dictionary") < 0)
		return TC_ERR;
	tc_npy_skip_ws(p);
	if (p->pos != p->len)
		return tc_npy_syntax(p, "unexpected text after the header dictionary");
	if (!p->has_descr || !p->has_fortran || !p->has_shape)
		return tc_npy_fail(p->err, p->name, "malformed header: no %s key",
			!p->has_descr ? "'descr'" : !p->has_fortran ? "'fortran_order'"
								       : "'shape'");
	return TC_OK;
}

/* What a header says about the array. */
typedef struct tc_npy_info {
	tc_dtype dtype;
	int ndim;
	int64_t shape[TC_NPY_MAX_RANK];
	int64_t numel;
	size_t nbytes;
} tc_npy_info;

/* Parse the header text h[0..n) and check what it describes is an array
 * tcomp can hold; fill *info. */
static tc_stat tc_npy_check_header(const char *h, size_t n, tc_npy_info *info,
	const char *name, char **err)
{
	tc_npy_parser p;
	char q[80];
	uint64_t numel = 1, limit;
	int i, big = 0, nontrivial = 0;

	memset(&p, 0, sizeof(p));
	p.s = h;
	p.len = n;
	p.name = name;
	p.err = err;
	if (tc_npy_header(&p) < 0)
		return TC_ERR;
	if (tc_npy_dtype_of_descr(p.descr, p.descr_len, &info->dtype, name, err) < 0)
		return TC_ERR;
	tc_npy_quote(q, sizeof(q), p.s + p.shape_pos, p.shape_end - p.shape_pos);
	if (p.ndim > TC_NPY_MAX_RANK)
		return tc_npy_fail(err, name,
			"has rank %d (shape %s); tcomp supports at most %d dimensions",
			p.ndim, q, TC_NPY_MAX_RANK);
	if (p.bad_dim) {
		char d[48];
		tc_npy_quote(d, sizeof(d), p.s + p.bad_pos, p.bad_len);
		if (p.bad_dim == 1)
			return tc_npy_fail(err, name, "negative dimension %s in shape %s", d, q);
		return tc_npy_fail(err, name, "dimension %s in shape %s is too large", d, q);
	}
	/* The byte count must fit in int64 and size_t; a zero dimension makes
	 * an empty array whatever the others are. */
	limit = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX
							  : (uint64_t)SIZE_MAX;
	limit /= (uint64_t)tc_dtype_size(info->dtype);
	for (i = 0; i < p.ndim; i++) {
		uint64_t d = (uint64_t)p.shape[i];
		if (d > 1)
			nontrivial++;
		if (d == 0)
			numel = 0;
		else if (numel > limit / d)
			big = 1;
		else
			numel *= d;
	}
	if (numel != 0 && big)
		return tc_npy_fail(err, name, "shape %s is too large: its size overflows", q);
	if (p.fortran && nontrivial > 1 && numel != 0)
		return tc_npy_fail(err, name,
			"is in Fortran order; tcomp needs C order: save with "
			"np.ascontiguousarray(a)");
	info->ndim = p.ndim;
	memcpy(info->shape, p.shape, sizeof(info->shape));
	info->numel = (int64_t)numel;
	info->nbytes = (size_t)numel * (size_t)tc_dtype_size(info->dtype);
	return TC_OK;
}

/* ---- byte sources: a FILE or a buffer ---- */

typedef struct tc_npy_src {
	FILE *f; /* the file, or NULL to read mem */
	const unsigned char *mem;
	size_t len, pos;
	int error; /* errno of a failed read, or 0 */
} tc_npy_src;

/* Read up to n bytes into dst; fewer only at the end or on an error. */
static size_t tc_npy_src_read(tc_npy_src *src, void *dst, size_t n)
{
	size_t got;

	if (!src->f) {
		got = src->len - src->pos < n ? src->len - src->pos : n;
		if (got)
			memcpy(dst, src->mem + src->pos, got);
		src->pos += got;
		return got;
	}
	errno = 0;
	got = fread(dst, 1, n, src->f);
	if (got < n && ferror(src->f))
		src->error = errno ? errno : EIO;
	return got;
}

/* Set *rem to the number of bytes left and return 1 when that is known
 * (memory, regular files); return 0 for pipes and devices. */
static int tc_npy_src_remaining(tc_npy_src *src, uint64_t *rem)
{
	struct stat st;
	off_t at;

	if (!src->f) {
		*rem = src->len - src->pos;
		return 1;
	}
	if (fstat(fileno(src->f), &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	at = ftello(src->f);
	if (at < 0 || at > st.st_size)
		return 0;
	*rem = (uint64_t)(st.st_size - at);
	return 1;
}

/* ---- reading ---- */

/* The message for data of the wrong length: have bytes follow the header
 * (have_known 0: more than the header says, count unknown). */
static tc_stat tc_npy_size_mismatch(const tc_npy_info *info, uint64_t have, int have_known,
	const char *name, char **err)
{
	tc_buf b;
	char *what;
	tc_stat r;

	tc_buf_init(&b);
	tc_npy_put_shape(&b, info->ndim, info->shape);
	tc_buf_printf(&b, " %s (%zu bytes)", tc_dtype_name(info->dtype), info->nbytes);
	what = tc_buf_take(&b);
	if (!what)
		return tc_npy_fail(err, name, "out of memory");
	if (have < info->nbytes)
		r = tc_npy_fail(err, name, "truncated: header says %s but only %llu bytes follow",
			what, (unsigned long long)have);
	else if (have_known)
		r = tc_npy_fail(err, name,
			"header says %s but %llu bytes follow (%llu bytes of trailing data)",
			what, (unsigned long long)have, (unsigned long long)(have - info->nbytes));
	else
		r = tc_npy_fail(err, name, "header says %s but more bytes follow (trailing data)",
			what);
	tc_free(what);
	return r;
}

/* Read the nbytes of data that follow the header into a new buffer (given
 * to *data), checking that exactly that many follow.  When the remaining
 * size is known a wrong size fails before anything is allocated, so a
 * corrupt shape cannot make the reader allocate more than the file holds;
 * otherwise the buffer grows as bytes arrive. */
static tc_stat tc_npy_read_data(tc_npy_src *src, const tc_npy_info *info,
	__tc_give void **data, const char *name, char **err)
{
	uint64_t rem;
	size_t cap, got = 0, n;
	unsigned char *buf, *nb, extra[1];
	int known = tc_npy_src_remaining(src, &rem);

	*data = NULL;
	if (known && rem != info->nbytes)
		return tc_npy_size_mismatch(info, rem, 1, name, err);
	cap = known || info->nbytes < (1u << 20) ? info->nbytes : (1u << 20);
	buf = tc_malloc(cap);
	if (!buf)
		return tc_npy_fail(err, name, "out of memory reading %zu bytes", info->nbytes);
	while (got < info->nbytes) {
		if (got == cap) {
			cap = info->nbytes - cap < cap ? info->nbytes : cap * 2;
			nb = tc_realloc(buf, cap);
			if (!nb) {
				tc_npy_fail(err, name, "out of memory reading %zu bytes",
					info->nbytes);
				goto error;
			}
			buf = nb;
		}
		n = tc_npy_src_read(src, buf + got, cap - got);
		got += n;
		if (n == 0 || src->error)
			break;
	}
	if (!src->error && got == info->nbytes && tc_npy_src_read(src, extra, 1) == 1) {
		tc_npy_size_mismatch(info, (uint64_t)got + 1, 0, name, err);
		goto error;
	}
	if (src->error) {
		tc_npy_fail(err, name, "read error: %s", strerror(src->error));
		goto error;
	}
	if (got < info->nbytes) {
		tc_npy_size_mismatch(info, got, 1, name, err);
		goto error;
	}
	*data = buf;
	return TC_OK;
error:
	tc_free(buf);
	return TC_ERR;
}

/* Decode a whole .npy image from src into *out (zeroed on failure). */
static tc_stat tc_npy_load(tc_npy_src *src, tc_npy *out, const char *name, char **err)
{
	unsigned char pre[8], lenb[4];
	size_t n, hlen, lsize;
	char *header = NULL;
	tc_npy_info info = {0};
	void *data;
	int major, minor;

	memset(out, 0, sizeof(*out));
	if (err)
		*err = NULL;
	n = tc_npy_src_read(src, pre, sizeof(pre));
	if (src->error)
		return tc_npy_fail(err, name, "read error: %s", strerror(src->error));
	if (n == 0)
		return tc_npy_fail(err, name, "not a .npy file (it is empty)");
	if (n >= 4 && !memcmp(pre, "PK\x03\x04", 4))
		return tc_npy_fail(err, name,
			"not a .npy file (it is a zip archive, perhaps .npz: extract "
			"the arrays with np.load and save each with np.save)");
	if (memcmp(pre, tc_npy_magic, n < 6 ? n : 6) != 0)
		return tc_npy_fail(err, name,
			"not a .npy file (it does not start with \\x93NUMPY)");
	if (n < sizeof(pre))
		return tc_npy_fail(err, name,
			"truncated: the file ends after %zu bytes, inside the .npy preamble", n);
	major = pre[6];
	minor = pre[7];
	if (major < 1 || major > 3 || minor != 0)
		return tc_npy_fail(err, name,
			"unsupported .npy format version %d.%d (tcomp reads 1.0, 2.0 and 3.0)",
			major, minor);
	lsize = major == 1 ? 2 : 4;
	if (tc_npy_src_read(src, lenb, lsize) != lsize)
		return src->error ? tc_npy_fail(err, name, "read error: %s", strerror(src->error))
				  : tc_npy_fail(err, name,
					    "truncated: the file ends inside the header length");
	hlen = (size_t)lenb[0] | (size_t)lenb[1] << 8;
	if (lsize == 4)
		hlen |= (size_t)lenb[2] << 16 | (size_t)lenb[3] << 24;
	if (hlen > TC_NPY_MAX_HEADER)
		return tc_npy_fail(err, name,
			"malformed header: its length %zu is above the limit of %u bytes", hlen,
			TC_NPY_MAX_HEADER);
	header = tc_malloc(hlen);
	if (!header)
		return tc_npy_fail(err, name, "out of memory");
	n = tc_npy_src_read(src, header, hlen);
	if (src->error) {
		tc_npy_fail(err, name, "read error: %s", strerror(src->error));
		goto error;
	}
	if (n < hlen) {
		tc_npy_fail(err, name,
			"truncated: the header should have %zu bytes but only %zu follow", hlen, n);
		goto error;
	}
	if (tc_npy_check_header(header, hlen, &info, name, err) < 0)
		goto error;
	tc_free(header);
	header = NULL;
	if (tc_npy_read_data(src, &info, &data, name, err) < 0)
		return TC_ERR;
	if (info.dtype == TC_T_BOOL) {
		unsigned char *b = data;
		for (n = 0; n < info.nbytes; n++)
			b[n] = b[n] != 0;
	}
	out->dtype = info.dtype;
	out->ndim = info.ndim;
	memcpy(out->shape, info.shape, sizeof(out->shape));
	out->numel = info.numel;
	out->data = data;
	out->nbytes = info.nbytes;
	return TC_OK;
error:
	tc_free(header);
	return TC_ERR;
}

/* Read the .npy file at path (see npy.h). */
tc_stat tc_npy_read(__tc_keep const char *path, __tc_give tc_npy *out,
	__tc_give char **err)
{
	tc_npy_src src;
	tc_stat r;

	memset(&src, 0, sizeof(src));
	memset(out, 0, sizeof(*out));
	if (err)
		*err = NULL;
	src.f = fopen(path, "rb");
	if (!src.f)
		return tc_npy_fail(err, path, "cannot open: %s", strerror(errno));
	r = tc_npy_load(&src, out, path, err);
	fclose(src.f);
	return r;
}

/* Decode a .npy image in memory (see npy.h). */
tc_stat tc_npy_parse(__tc_keep const void *bytes, size_t len, __tc_keep const char *name,
	__tc_give tc_npy *out, __tc_give char **err)
{
	tc_npy_src src;

	memset(&src, 0, sizeof(src));
	src.mem = bytes;
	src.len = bytes ? len : 0;
	return tc_npy_load(&src, out, name ? name : "<memory>", err);
}

/* ---- writing ---- */

/* Write a version 1.0 .npy file (see npy.h).  The header is the one NumPy
 * writes: {'descr': '<f4', 'fortran_order': False, 'shape': (4, 5), }
 * then spaces and '\n' up to a multiple of 64 bytes with the preamble. */
tc_stat tc_npy_write(__tc_keep const char *path, tc_dtype dtype, int ndim,
	__tc_keep const int64_t *shape, __tc_keep const void *data, __tc_give char **err)
{
	const char *descr = dtype > TC_T_NONE && dtype < TC_T_COUNT ? tc_npy_descr_of(dtype)
								       : NULL;
	unsigned char pre[10];
	uint64_t numel = 1, limit;
	size_t nbytes, total;
	char *header;
	FILE *f;
	struct stat st;
	tc_buf b;
	int i, ok, saved, is_reg;

	if (err)
		*err = NULL;
	if (!descr)
		return tc_npy_fail(err, path, "cannot write dtype %d: not an element type",
			(int)dtype);
	if (ndim < 0 || ndim > TC_NPY_MAX_RANK || (ndim > 0 && !shape))
		return tc_npy_fail(err, path, "cannot write rank %d (tcomp supports 0 to %d)",
			ndim, TC_NPY_MAX_RANK);
	limit = ((uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX
							   : (uint64_t)SIZE_MAX) /
		(uint64_t)tc_dtype_size(dtype);
	for (i = 0; i < ndim; i++)
		if (shape[i] < 0)
			return tc_npy_fail(err, path, "cannot write negative dimension %lld",
				(long long)shape[i]);
	for (i = 0; i < ndim && numel; i++) {
		if (shape[i] && numel > limit / (uint64_t)shape[i])
			return tc_npy_fail(err, path, "cannot write: the shape's size overflows");
		numel *= (uint64_t)shape[i];
	}
	nbytes = (size_t)numel * (size_t)tc_dtype_size(dtype);
	if (nbytes && !data)
		return tc_npy_fail(err, path, "cannot write: no data");

	tc_buf_init(&b);
	tc_buf_printf(&b, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
	for (i = 0; i < ndim; i++)
		tc_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)shape[i]);
	tc_buf_puts(&b, ndim == 1 ? ",), }" : "), }");
	total = sizeof(pre) + b.len + 1;
	while (total % 64) {
		tc_buf_putc(&b, ' ');
		total++;
	}
	tc_buf_putc(&b, '\n');
	if (b.oom) {
		tc_buf_free(&b);
		return tc_npy_fail(err, path, "out of memory");
	}
	memcpy(pre, tc_npy_magic, 6);
	pre[6] = 1;
	pre[7] = 0;
	pre[8] = (unsigned char)(b.len & 0xff);
	pre[9] = (unsigned char)(b.len >> 8);
	header = tc_buf_take(&b);
	if (!header)
		return tc_npy_fail(err, path, "out of memory");

	f = fopen(path, "wb");
	if (!f) {
		saved = errno;
		tc_free(header);
		return tc_npy_fail(err, path, "cannot create: %s", strerror(saved));
	}
	/* On failure only a regular file is removed, never a device such as
	 * /dev/full that the path may name. */
	is_reg = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
	errno = 0;
	ok = fwrite(pre, 1, sizeof(pre), f) == sizeof(pre) &&
		fwrite(header, 1, total - sizeof(pre), f) == total - sizeof(pre) &&
		(nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes) && fflush(f) == 0;
	saved = errno ? errno : EIO;
	tc_free(header);
	if (fclose(f) != 0 && ok) {
		ok = 0;
		saved = errno ? errno : EIO;
	}
	if (!ok) {
		if (is_reg)
			remove(path);
		return tc_npy_fail(err, path, "write error: %s", strerror(saved));
	}
	return TC_OK;
}

/* Release the data of a (see npy.h). */
void tc_npy_free(__tc_keep tc_npy *a)
{
	if (!a)
		return;
	tc_free(a->data);
	memset(a, 0, sizeof(*a));
}
