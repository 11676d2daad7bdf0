/* Shared low-level utilities: the allocation hook, arenas, growable strings.
 *
 * Every allocation in the library goes through tc_malloc/tc_realloc/tc_free so
 * that tests can install a hook that fails the N-th allocation (fault injection,
 * as SQLite does).  Ownership annotations follow isl:
 *   __tc_give  the caller owns the returned object and must free it;
 *   __tc_take  the callee consumes the argument, even when it fails;
 *   __tc_keep  the argument is borrowed.
 */
#ifndef TC_UTIL_H
#define TC_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#define __tc_give
#define __tc_take
#define __tc_keep

/* Status of a fallible operation: 0 ok, -1 error (message recorded elsewhere). */
typedef int tc_stat;
#define TC_OK 0
#define TC_ERR (-1)

#if defined(__GNUC__)
#define TC_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TC_PRINTF(f, a)
#endif

/* The allocation hook.  realloc semantics: (NULL, n) allocates, (p, 0) frees
 * and returns NULL.  The default uses the C library. */
typedef void *(*tc_alloc_fn)(void *ud, void *ptr, size_t size);
void tc_set_alloc(tc_alloc_fn fn, void *ud);

void *tc_malloc(size_t n);
void *tc_calloc(size_t n, size_t size);
void *tc_realloc(void *p, size_t n);
void tc_free(void *p);
__tc_give char *tc_strdup(const char *s);
__tc_give char *tc_strndup(const char *s, size_t n);

/* Internal invariant check: reports through tc_internal_error and evaluates
 * to false instead of aborting, so the caller can fail cleanly. */
void tc_internal_error(const char *file, int line, const char *what);
int tc_assert_check(int ok, const char *file, int line, const char *what);
#define TC_ASSERT(c) tc_assert_check(!!(c), __FILE__, __LINE__, #c)

/* An arena: many small allocations freed at once.  AST and IR nodes of one
 * compilation live in one arena.  Allocation failure returns NULL. */
typedef struct tc_arena tc_arena;
__tc_give tc_arena *tc_arena_new(void);
void tc_arena_free(__tc_take tc_arena *a);
void *tc_arena_alloc(__tc_keep tc_arena *a, size_t n); /* zeroed */
char *tc_arena_strndup(__tc_keep tc_arena *a, const char *s, size_t n);
char *tc_arena_strdup(__tc_keep tc_arena *a, const char *s);
/* Whether any allocation from this arena has failed (sticky). */
int tc_arena_failed(const tc_arena *a);

/* A growable string.  On allocation failure the buffer records it (oom) and
 * further appends are ignored; tc_buf_take returns NULL then. */
typedef struct tc_buf {
	char *s;
	size_t len, cap;
	int oom;
} tc_buf;
void tc_buf_init(tc_buf *b);
void tc_buf_putc(tc_buf *b, char c);
void tc_buf_puts(tc_buf *b, const char *s);
void tc_buf_putn(tc_buf *b, const char *s, size_t n);
void tc_buf_printf(tc_buf *b, const char *fmt, ...) TC_PRINTF(2, 3);
void tc_buf_vprintf(tc_buf *b, const char *fmt, va_list ap);
/* The contents (never NULL unless oom); ownership passes to the caller. */
__tc_give char *tc_buf_take(tc_buf *b);
void tc_buf_free(tc_buf *b);

/* Growable array of pointers. */
typedef struct tc_vec {
	void **v;
	int n, cap;
} tc_vec;
tc_stat tc_vec_push(tc_vec *vec, void *p);
void tc_vec_free(tc_vec *vec);

/* 64-bit FNV-1a hash of bytes. */
uint64_t tc_hash_bytes(uint64_t h, const void *p, size_t n);
#define TC_HASH_INIT 0xcbf29ce484222325ULL

#endif
