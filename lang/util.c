/* Allocation hook, arenas, growable strings and vectors. */
#include "util.h"

#include <errno.h>
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *default_alloc(void *ud, void *ptr, size_t size)
{
	(void)ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, size);
}

static tc_alloc_fn alloc_fn = default_alloc;
static void *alloc_ud;

/* Install an allocation hook (NULL restores the C library).  Not thread-safe:
 * meant for tests and for embedding programs at start-up. */
void tc_set_alloc(tc_alloc_fn fn, __tc_keep void *ud)
{
	alloc_fn = fn ? fn : default_alloc;
	alloc_ud = fn ? ud : NULL;
}

__tc_give void *tc_malloc(size_t n)
{
	return alloc_fn(alloc_ud, NULL, n ? n : 1);
}

__tc_give void *tc_calloc(size_t n, size_t size)
{
	void *p;
	if (size && n > SIZE_MAX / size)
		return NULL;
	p = tc_malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

__tc_give void *tc_realloc(__tc_take void *p, size_t n)
{
	return alloc_fn(alloc_ud, p, n ? n : 1);
}

void tc_free(__tc_take void *p)
{
	if (p)
		alloc_fn(alloc_ud, p, 0);
}

__tc_give char *tc_strndup(const char *s, size_t n)
{
	char *r = tc_malloc(n + 1);
	if (!r)
		return NULL;
	memcpy(r, s, n);
	r[n] = 0;
	return r;
}

__tc_give char *tc_strdup(const char *s)
{
	return s ? tc_strndup(s, strlen(s)) : NULL;
}

/* Internal invariant violated: say so on stderr (the library's callers see a
 * failed operation with an "internal error" message from the caller). */
void tc_internal_error(const char *file, int line, const char *what)
{
	fprintf(stderr, "tcomp: internal error at %s:%d: %s\n", file, line, what);
}

/* The value of TC_ASSERT(c): c, after reporting a violated invariant. */
int tc_assert_check(int ok, const char *file, int line, const char *what)
{
	if (!ok)
		tc_internal_error(file, line, what);
	return ok;
}

/* ---- arena ---- */

struct tc_arena_chunk {
	struct tc_arena_chunk *next;
	size_t used, cap;
	max_align_t data[];
};

struct tc_arena {
	struct tc_arena_chunk *head;
	int failed;
};

__tc_give tc_arena *tc_arena_new(void)
{
	return tc_calloc(1, sizeof(tc_arena));
}

void tc_arena_free(__tc_take tc_arena *a)
{
	struct tc_arena_chunk *c, *next;
	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		tc_free(c);
	}
	tc_free(a);
}

void *tc_arena_alloc(__tc_keep tc_arena *a, size_t n)
{
	struct tc_arena_chunk *c = a->head;
	size_t align = sizeof(max_align_t);
	void *p;

	n = (n + align - 1) / align * align;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 16384 ? n : 16384;
		c = tc_malloc(sizeof(*c) + cap);
		if (!c) {
			a->failed = 1;
			return NULL;
		}
		c->used = 0;
		c->cap = cap;
		c->next = a->head;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

char *tc_arena_strndup(__tc_keep tc_arena *a, const char *s, size_t n)
{
	char *r = tc_arena_alloc(a, n + 1);
	if (!r)
		return NULL;
	memcpy(r, s, n);
	r[n] = 0;
	return r;
}

char *tc_arena_strdup(__tc_keep tc_arena *a, const char *s)
{
	return tc_arena_strndup(a, s, strlen(s));
}

int tc_arena_failed(__tc_keep const tc_arena *a)
{
	return a->failed;
}

/* ---- growable strings ---- */

void tc_buf_init(__tc_keep tc_buf *b)
{
	b->s = NULL;
	b->len = b->cap = 0;
	b->oom = 0;
}

static int buf_reserve(tc_buf *b, size_t extra)
{
	size_t cap;
	char *s;
	if (b->oom)
		return 0;
	if (b->len + extra + 1 <= b->cap)
		return 1;
	cap = b->cap ? b->cap * 2 : 64;
	while (cap < b->len + extra + 1)
		cap *= 2;
	s = tc_realloc(b->s, cap);
	if (!s) {
		b->oom = 1;
		return 0;
	}
	b->s = s;
	b->cap = cap;
	return 1;
}

void tc_buf_putn(__tc_keep tc_buf *b, const char *s, size_t n)
{
	if (!buf_reserve(b, n))
		return;
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
}

void tc_buf_puts(__tc_keep tc_buf *b, const char *s)
{
	tc_buf_putn(b, s, strlen(s));
}

void tc_buf_putc(__tc_keep tc_buf *b, char c)
{
	tc_buf_putn(b, &c, 1);
}

void tc_buf_vprintf(__tc_keep tc_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0 || !buf_reserve(b, (size_t)n))
		return;
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void tc_buf_printf(__tc_keep tc_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tc_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

__tc_give char *tc_buf_take(__tc_keep tc_buf *b)
{
	char *s;
	if (b->oom) {
		tc_buf_free(b);
		return NULL;
	}
	if (!b->s)
		buf_reserve(b, 0);
	if (b->oom)
		return NULL;
	b->s[b->len] = 0;
	s = b->s;
	tc_buf_init(b);
	return s;
}

void tc_buf_free(__tc_keep tc_buf *b)
{
	tc_free(b->s);
	tc_buf_init(b);
}

/* ---- vectors ---- */

tc_stat tc_vec_push(__tc_keep tc_vec *vec, __tc_keep void *p)
{
	if (vec->n == vec->cap) {
		int cap = vec->cap ? vec->cap * 2 : 8;
		void **v = tc_realloc(vec->v, (size_t)cap * sizeof(void *));
		if (!v)
			return TC_ERR;
		vec->v = v;
		vec->cap = cap;
	}
	vec->v[vec->n++] = p;
	return TC_OK;
}

void tc_vec_free(__tc_keep tc_vec *vec)
{
	tc_free(vec->v);
	vec->v = NULL;
	vec->n = vec->cap = 0;
}

uint64_t tc_hash_bytes(uint64_t h, __tc_keep const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i;
	for (i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

int tc_make_parent_dirs(const char *path)
{
	char *d = tc_strdup(path), *p;
	int st = 0;
	if (!d)
		return -1;
	for (p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(d, 0777) < 0 && errno != EEXIST)
			st = -1;
		*p = '/';
	}
	tc_free(d);
	return st;
}
