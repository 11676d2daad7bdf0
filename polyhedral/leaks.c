/* What isl loses when it gives up (tc_poly_leaks_begin, poly.h).
 *
 * isl counts an operation on every allocation, and once a context is
 * aborted (isl_ctx_abort: tcomp's watchdog) or out of operations
 * (isl_ctx_set_max_operations) every allocation fails.  One of its
 * functions does not free what it allocated first when its second
 * allocation fails: push_union in isl_tab.c, called by isl_tab_push_basis
 * with the column array it has just allocated, returns -1 without freeing
 * the array when the undo record's allocation fails (read in isl's sources
 * of 2018; LeakSanitizer caught it in libLLVM 19's isl-0.25-193).  The
 * scheduler reaches it about once every 20 operations in
 * isl_tab_basic_set_non_trivial_lexmin, so an abort at a random moment
 * loses 4 bytes per column now and then.  That is a few hundred bytes per
 * aborted scheduling step in a long-running program, but LeakSanitizer
 * reports it, and a suite that aborts the scheduler under a wall-clock
 * budget then fails at random.
 *
 * LeakSanitizer's suppressions cannot name it: libLLVM has no frame
 * pointers, so the fast unwinder stops at isl_malloc_or_die, and the slow
 * one makes the sanitizer suite several times slower (past its budgets).
 * So in sanitizer builds, while a scope is open on a thread, the
 * sanitizer's allocation hooks record that thread's live allocations;
 * when the scope closes after isl gave up, those still live are passed
 * to __lsan_ignore_object.  A scope is only opened around one isl call
 * that returns nothing when it gives up (the scheduler), so what is live
 * then is isl's own: its leaks and what its context keeps (freed with the
 * context).  Nothing tcomp allocates, and no step that returned a
 * result, is ever hidden.  In other builds the scope does nothing. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "poly.h"

#if defined(__SANITIZE_ADDRESS__)
#define TC_LEAK_SCOPES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_LEAK_SCOPES 1
#endif
#endif

#ifdef TC_LEAK_SCOPES

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sanitizer/lsan_interface.h>

/* The sanitizers' allocator interface (sanitizer/allocator_interface.h,
 * which GCC 12 does not install; libasan exports it). */
int __sanitizer_install_malloc_and_free_hooks(
	void (*malloc_hook)(const volatile void *, size_t),
	void (*free_hook)(const volatile void *));

/* The live allocations of one thread's open scope: an open-addressing
 * table of addresses (0: empty slot) in pages of its own (mmap: the hooks
 * run inside malloc and must not call it). */
typedef struct leak_scope {
	int open;
	int failed; /* the table could not grow: nothing is ignored */
	uintptr_t *slot;
	size_t cap, n; /* cap a power of two, or 0 */
} leak_scope;

/* initial-exec: the hooks run on every allocation of every thread, and
 * the general TLS model may allocate on a thread's first access */
static __thread leak_scope scope __attribute__((tls_model("initial-exec")));
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static size_t home(uintptr_t a, size_t cap)
{
	return (size_t)(((uint64_t)(a >> 4) * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static void put(uintptr_t *slot, size_t cap, uintptr_t a)
{
	size_t i = home(a, cap);
	while (slot[i] && slot[i] != a)
		i = (i + 1) & (cap - 1);
	slot[i] = a;
}

static int grow(leak_scope *s)
{
	size_t cap = s->cap ? 2 * s->cap : 4096, i;
	uintptr_t *slot = mmap(NULL, cap * sizeof *slot, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (slot == MAP_FAILED)
		return -1;
	for (i = 0; i < s->cap; i++)
		if (s->slot[i])
			put(slot, cap, s->slot[i]);
	if (s->slot)
		munmap(s->slot, s->cap * sizeof *s->slot);
	s->slot = slot;
	s->cap = cap;
	return 0;
}

static void on_malloc(const volatile void *p, size_t size)
{
	leak_scope *s = &scope;
	(void)size;
	if (!s->open || s->failed || !p)
		return;
	if (2 * (s->n + 1) > s->cap && grow(s) < 0) {
		s->failed = 1;
		return;
	}
	put(s->slot, s->cap, (uintptr_t)p);
	s->n++;
}

/* Removal with backward shifts (no tombstones): each entry after the
 * hole that may move into it does. */
static void on_free(const volatile void *p)
{
	leak_scope *s = &scope;
	uintptr_t a = (uintptr_t)p;
	size_t i, j, mask;
	if (!s->open || !s->cap || !a)
		return;
	mask = s->cap - 1;
	for (i = home(a, s->cap); s->slot[i] != a; i = (i + 1) & mask)
		if (!s->slot[i])
			return; /* allocated before the scope opened */
	s->slot[i] = 0;
	s->n--;
	for (j = (i + 1) & mask; s->slot[j]; j = (j + 1) & mask) {
		size_t k = home(s->slot[j], s->cap);
		/* the entry at j stays if its home lies cyclically in (i, j] */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		s->slot[i] = s->slot[j];
		s->slot[j] = 0;
		i = j;
	}
}

static void install_hooks(void)
{
	__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}

void tc_poly_leaks_begin(void)
{
	pthread_once(&hooks_once, install_hooks);
	scope.failed = 0;
	scope.open = 1;
}

size_t tc_poly_leaks_end(int gave_up)
{
	size_t i, ignored = 0;
	scope.open = 0;
	if (gave_up && !scope.failed)
		for (i = 0; i < scope.cap; i++)
			if (scope.slot[i]) {
				__lsan_ignore_object((const void *)scope.slot[i]);
				ignored++;
			}
	if (scope.slot)
		munmap(scope.slot, scope.cap * sizeof *scope.slot);
	scope.slot = NULL;
	scope.cap = scope.n = 0;
	return ignored;
}

#else

void tc_poly_leaks_begin(void)
{
}

size_t tc_poly_leaks_end(int gave_up)
{
	(void)gave_up;
	return 0;
}

#endif
