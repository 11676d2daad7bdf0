/* Shared low-level utilities: the allocation hook, arenas, growable strings.
 *
 * Every allocation in the library goes through tc_malloc/tc_realloc/tc_free so
 * that tests can install a hook that fails the N-th allocation (fault injection,
 * as SQLite does).  Ownership annotations follow isl:
 *   __tc_give  the caller owns the returned object and must free it;
 *   __tc_take  the callee consumes the argument, even when it fails;
 *   __tc_keep  the argument is borrowed.
 * A pointer result without __tc_give is not the caller's to free: it lives
 * in an arena, is static, or is borrowed from an argument, as the
 * function's comment says.  Here: tc_malloc memory is the caller's, arena
 * memory the arena's (tc_arena_free frees it all), and a tc_buf or tc_vec
 * struct is the caller's while the array in it belongs to the struct.
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
/* Install fn (NULL: the C library's) as the allocation hook, with ud passed
 * to every call; ud is borrowed and must outlive the hook.  Not
 * thread-safe: for tests and for embedding programs at start-up. */
void tc_set_alloc(tc_alloc_fn fn, __tc_keep void *ud);

/* n bytes (at least one), uninitialised; NULL when out of memory. */
__tc_give void *tc_malloc(size_t n);
/* n elements of size bytes, zeroed; NULL when out of memory or when the
 * product overflows. */
__tc_give void *tc_calloc(size_t n, size_t size);
/* p (NULL: a new block) resized to n bytes (at least one).  Unlike other
 * __tc_take arguments, p is consumed only on success: when NULL is
 * returned, p is untouched and still the caller's (realloc semantics). */
__tc_give void *tc_realloc(__tc_take void *p, size_t n);
/* Free p (NULL: nothing). */
void tc_free(__tc_take void *p);
/* A copy of s (NULL: NULL); NULL when out of memory. */
__tc_give char *tc_strdup(const char *s);
/* A copy of s[0..n) with a terminating NUL; NULL when out of memory. */
__tc_give char *tc_strndup(const char *s, size_t n);

/* Internal invariant check: reports through tc_internal_error and evaluates
 * to false instead of aborting, so the caller can fail cleanly. */
void tc_internal_error(const char *file, int line, const char *what);
int tc_assert_check(int ok, const char *file, int line, const char *what);
#define TC_ASSERT(c) tc_assert_check(!!(c), __FILE__, __LINE__, #c)

/* An arena: many small allocations freed at once.  AST and IR nodes of one
 * compilation live in one arena.  Allocation failure returns NULL.  Memory
 * from an arena belongs to it: never tc_free it; it goes with
 * tc_arena_free. */
typedef struct tc_arena tc_arena;
/* A new, empty arena; NULL when out of memory. */
__tc_give tc_arena *tc_arena_new(void);
/* Free a and everything allocated from it (NULL: nothing). */
void tc_arena_free(__tc_take tc_arena *a);
/* n zeroed bytes in a, aligned for any type (owned by a). */
void *tc_arena_alloc(__tc_keep tc_arena *a, size_t n);
/* A copy of s[0..n) with a terminating NUL, or of the string s, in a. */
char *tc_arena_strndup(__tc_keep tc_arena *a, const char *s, size_t n);
char *tc_arena_strdup(__tc_keep tc_arena *a, const char *s);
/* Whether any allocation from this arena has failed (sticky). */
int tc_arena_failed(__tc_keep const tc_arena *a);

/* A growable string.  On allocation failure the buffer records it (oom) and
 * further appends are ignored; tc_buf_take returns NULL then.  The struct
 * is the caller's (on the stack, say); s belongs to it until tc_buf_take
 * hands it over or tc_buf_free frees it. */
typedef struct tc_buf {
	char *s;
	size_t len, cap;
	int oom;
} tc_buf;
/* Make b empty (it owns nothing yet). */
void tc_buf_init(__tc_keep tc_buf *b);
/* Append the character c, the string s, or the bytes s[0..n), to b. */
void tc_buf_putc(__tc_keep tc_buf *b, char c);
void tc_buf_puts(__tc_keep tc_buf *b, const char *s);
void tc_buf_putn(__tc_keep tc_buf *b, const char *s, size_t n);
/* Append printf-formatted text to b. */
void tc_buf_printf(__tc_keep tc_buf *b, const char *fmt, ...) TC_PRINTF(2, 3);
void tc_buf_vprintf(__tc_keep tc_buf *b, const char *fmt, va_list ap);
/* The contents (never NULL unless oom); ownership passes to the caller and
 * b is left empty (or freed, when oom). */
__tc_give char *tc_buf_take(__tc_keep tc_buf *b);
/* Free the contents of b and make it empty (b itself is the caller's). */
void tc_buf_free(__tc_keep tc_buf *b);

/* Growable array of pointers.  The struct is the caller's and owns the
 * array v; the pointers in it are borrowed: tc_vec_free frees the array
 * only, whoever owns the elements frees them. */
typedef struct tc_vec {
	void **v;
	int n, cap;
} tc_vec;
/* Append p (borrowed: vec holds it without owning it) to vec; -1 when out
 * of memory (vec unchanged). */
tc_stat tc_vec_push(__tc_keep tc_vec *vec, __tc_keep void *p);
/* Free the array of vec (not the elements) and make it empty. */
void tc_vec_free(__tc_keep tc_vec *vec);

/* mkdir -p of the folder part of path (everything before its last '/'),
 * mode 0777 before the umask: 0, or -1 when a folder could not be made
 * (the others are still tried) or out of memory. */
int tc_make_parent_dirs(__tc_keep const char *path);

/* 64-bit FNV-1a hash of bytes p[0..n), continuing from h (TC_HASH_INIT). */
uint64_t tc_hash_bytes(uint64_t h, __tc_keep const void *p, size_t n);
#define TC_HASH_INIT 0xcbf29ce484222325ULL

#endif
