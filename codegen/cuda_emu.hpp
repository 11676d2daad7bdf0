/* The CUDA emulation header: what NVRTC provides to tcomp's CUDA text
 * (codegen/cuda.h, "the text's contract"), for the CPU.
 *
 * codegen/cuda_emu.c compiles a def's CUDA text with the system C++
 * compiler (C++17) and this header -include'd before it, into a shared
 * object with one launcher per kernel (tc_emu_run_K, written by
 * cuda_emu.c).  A launch runs the grid's blocks one after another; the
 * threads of a block are cooperative fibers that switch only at
 * __syncthreads(), __syncwarp() and the warp shuffles, so a launch is
 * deterministic.  Each access to a tensor (TC_GLOBAL) or a shared array
 * (TC_SHARED) goes through a checking proxy, as compute-sanitizer's
 * memcheck and racecheck would check it on a GPU:
 *   - out of bounds: an index outside [0, n) (the access goes to a dummy
 *     element, so memory is never corrupted, and the launch goes on);
 *   - races: two threads touching one element, at least one writing, not
 *     ordered: in the same block, no __syncthreads() between (or, for
 *     lanes of one warp, no __syncwarp()); in different blocks of one
 *     launch, always (global memory only: shared memory is per block);
 *   - barrier divergence: a thread returns, or waits at another barrier or
 *     warp intrinsic, while others wait at __syncthreads() (an error, not a
 *     hang); the same for the lanes a warp intrinsic's mask names; a mask
 *     naming lanes that do not exist, or leaving out the caller.
 * The first problem is kept as a message (kind, array and index, thread
 * and block, read or write), further ones are counted.  Divergence stops
 * the launch; the other problems do not.
 *
 * How it is done: a shadow record per element (tc_emu::shadow) keeps the
 * last writer and up to two readers, each as (thread in the block, the
 * block phase, the warp phase).  Block phases are numbered by one counter
 * that only grows (a new block starts a new phase, every __syncthreads()
 * another), so two accesses in one phase are in one block and unordered,
 * and an access from a phase before the current block's first is from
 * another block (global memory: a race; shared memory: stale, ignored).
 * Shared arrays are function-local statics, filled with 0xff bytes (NaN
 * for floats) at each block's first touch, so reading an element no
 * thread wrote shows up in the results.
 *
 * Not thread-safe: the state is the module's own (static), and
 * cuda_emu.c runs one launch at a time in the whole process.  The fibers
 * switch with a few instructions of assembly on x86-64 (ucontext's
 * swapcontext makes a system call per switch) and with ucontext
 * elsewhere, on stacks of TC_EMU_STACK bytes with a guard page. */
#ifndef TC_CUDA_EMU
#define TC_CUDA_EMU 1

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <type_traits>
/* The fibers' switch: assembly on x86-64, ucontext elsewhere (or when
 * TC_EMU_UCONTEXT is defined). */
#if defined(__x86_64__) && !defined(TC_EMU_UCONTEXT)
#define TC_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TC_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TC_EMU_ASAN 1
#endif
#ifdef TC_EMU_ASAN
extern "C" void __sanitizer_start_switch_fiber(void **, const void *, size_t);
extern "C" void __sanitizer_finish_switch_fiber(void *, const void **, size_t *);
extern "C" void __asan_unpoison_memory_region(void const volatile *, size_t);
#endif

#ifndef TC_EMU_STACK
#define TC_EMU_STACK (256 * 1024) /* bytes of stack per thread */
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define TC_GLOBAL(T) tc_emu::gptr<T>
#define TC_LDG(p, i) ((p).ldg(i))
#define TC_ATOMIC_ADD(p, i, v) ((p).atomic_add((i), (v)))
#define TC_ATOMIC_ADD_I64(p, i, v) ((p).atomic_add((i), (v)))
#define TC_SHARED(T, name, n) static tc_emu::shared_array<T, (n)> name(#name)

namespace tc_emu {

struct uint3 {
	unsigned x, y, z;
};
struct dim3 {
	unsigned x, y, z;
};

/* ---- problems ---- */

static char report_msg[1024];
static long report_count;

__attribute__((format(printf, 1, 2))) static void problem(const char *fmt, ...)
{
	va_list ap;
	if (report_count++)
		return;
	va_start(ap, fmt);
	vsnprintf(report_msg, sizeof report_msg, fmt, ap);
	va_end(ap);
}

/* ---- the launch's state ---- */

enum { RUN, BAR, WARP, DONE };

struct fiber {
	void *sp;       /* saved stack pointer (x86-64) */
#ifndef TC_EMU_ASM_SWITCH
	ucontext_t uc;
#endif
	char *stack;    /* the usable part (above the guard page) */
	int state;      /* RUN, BAR (at __syncthreads), WARP (at a warp
			 * intrinsic), DONE */
	int line;       /* the line of the barrier or intrinsic it waits at */
	uint64_t val;   /* its shuffle operand, then the result */
	int arg, width; /* the shuffle's lane, delta or mask; its width */
#ifdef TC_EMU_ASAN
	void *fake;
#endif
};

/* A pending warp intrinsic: what every lane of mask must call. */
struct warp_op {
	int kind; /* 0: none, else the WOP_ value */
	int line;
	unsigned mask, arrived;
};
enum { WOP_SYNC = 1, WOP_IDX, WOP_DOWN, WOP_XOR };
static const char *const wop_names[] = {"", "__syncwarp", "__shfl_sync", "__shfl_down_sync",
	"__shfl_xor_sync"};

static fiber *fibers;        /* allocated for nfibers threads */
static unsigned nfibers;
static unsigned nthreads;    /* of a block of the current launch */
static unsigned cur;         /* the running thread, linear in the block */
static void *sched_sp;
#ifndef TC_EMU_ASM_SWITCH
static ucontext_t sched_uc;
#endif
#ifdef TC_EMU_ASAN
static const void *sched_bottom;
static size_t sched_size;
#endif
static void (*body)(void *);
static void *body_arg;
static int aborted;          /* a divergence: the launch stops */

static dim3 grid, block;
static uint3 block_idx;
static uint32_t phase;       /* the block phase, never reset */
static uint32_t block_first; /* the first phase of the current block */
static uint32_t wphase;      /* the warp-phase counter */
static uint32_t warp_phase[32];
static warp_op warp_ops[32];
static unsigned block_serial; /* blocks run so far by this module */
static uint32_t *block_firsts; /* the first phase of each block of the launch */
static unsigned long nblocks_run;

} /* namespace tc_emu */

/* The CUDA built-in variables: the running thread's (set at every switch). */
static tc_emu::uint3 threadIdx;
static tc_emu::uint3 blockIdx;
static tc_emu::dim3 blockDim;
static tc_emu::dim3 gridDim;
static const int warpSize = 32;

namespace tc_emu {

/* ---- fibers ---- */

#ifdef TC_EMU_ASM_SWITCH
/* tc_emu_swap(void **save, void *to): saves the callee-saved registers,
 * MXCSR and the x87 control word on the stack, stores the stack pointer
 * in *save, and resumes the stack to. */
__asm__(".text\n"
	".p2align 4\n"
	".type tc_emu_swap, @function\n"
	"tc_emu_swap:\n"
	"\tpushq %rbp\n"
	"\tpushq %rbx\n"
	"\tpushq %r12\n"
	"\tpushq %r13\n"
	"\tpushq %r14\n"
	"\tpushq %r15\n"
	"\tsubq $8, %rsp\n"
	"\tstmxcsr (%rsp)\n"
	"\tfnstcw 4(%rsp)\n"
	"\tmovq %rsp, (%rdi)\n"
	"\tmovq %rsi, %rsp\n"
	"\tldmxcsr (%rsp)\n"
	"\tfldcw 4(%rsp)\n"
	"\taddq $8, %rsp\n"
	"\tpopq %r15\n"
	"\tpopq %r14\n"
	"\tpopq %r13\n"
	"\tpopq %r12\n"
	"\tpopq %rbx\n"
	"\tpopq %rbp\n"
	"\tret\n"
	".size tc_emu_swap, .-tc_emu_swap\n");
extern "C" void tc_emu_swap(void **save, void *to) __attribute__((visibility("hidden")));
#endif

static void fiber_entry();

/* Switch from the scheduler to thread i. */
static void enter(unsigned i)
{
	fiber &f = fibers[i];
	cur = i;
	threadIdx.x = i % block.x;
	threadIdx.y = i / block.x % block.y;
	threadIdx.z = i / (block.x * block.y);
#ifdef TC_EMU_ASAN
	void *fake = nullptr;
	__sanitizer_start_switch_fiber(&fake, f.stack, TC_EMU_STACK);
#endif
#ifdef TC_EMU_ASM_SWITCH
	tc_emu_swap(&sched_sp, f.sp);
#else
	swapcontext(&sched_uc, &f.uc);
#endif
#ifdef TC_EMU_ASAN
	__sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

/* Switch from the running thread back to the scheduler (for good when it
 * is DONE). */
static void leave()
{
	fiber &f = fibers[cur];
#ifdef TC_EMU_ASAN
	f.fake = nullptr;
	__sanitizer_start_switch_fiber(f.state == DONE ? nullptr : &f.fake, sched_bottom, sched_size);
#endif
#ifdef TC_EMU_ASM_SWITCH
	tc_emu_swap(&f.sp, sched_sp);
#else
	swapcontext(&f.uc, &sched_uc);
#endif
#ifdef TC_EMU_ASAN
	__sanitizer_finish_switch_fiber(f.fake, nullptr, nullptr);
#endif
}

static void fiber_entry()
{
#ifdef TC_EMU_ASAN
	__sanitizer_finish_switch_fiber(nullptr, &sched_bottom, &sched_size);
#endif
	body(body_arg);
	fibers[cur].state = DONE;
	leave();
	__builtin_unreachable();
}

/* Make thread i start at fiber_entry when entered. */
static void fiber_start(unsigned i)
{
	fiber &f = fibers[i];
	f.state = RUN;
#ifdef TC_EMU_ASAN
	/* frames left on the stack (a finished or abandoned thread's) keep
	 * their poisoned redzones */
	__asan_unpoison_memory_region(f.stack, TC_EMU_STACK);
#endif
#ifdef TC_EMU_ASM_SWITCH
	uint64_t *top = (uint64_t *)(((uintptr_t)f.stack + TC_EMU_STACK) & ~(uintptr_t)15);
	uint32_t csr[2];
	__asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
	top[-1] = 0;                              /* no return address */
	top[-2] = (uint64_t)(uintptr_t)fiber_entry; /* tc_emu_swap's ret */
	for (int r = 3; r <= 8; r++)
		top[-r] = 0;                      /* rbp, rbx, r12 .. r15 */
	memcpy(&top[-9], csr, 8);
	f.sp = &top[-9];
#else
	getcontext(&f.uc);
	f.uc.uc_stack.ss_sp = f.stack;
	f.uc.uc_stack.ss_size = TC_EMU_STACK;
	f.uc.uc_link = nullptr;
	makecontext(&f.uc, fiber_entry, 0);
#endif
}

/* Stacks for n threads (kept for later launches): 0, or -1 when mmap
 * fails. */
static int reserve(unsigned n)
{
	if (n <= nfibers)
		return 0;
	fiber *nf = (fiber *)realloc((void *)fibers, n * sizeof(fiber));
	if (!nf)
		return -1;
	fibers = nf;
	for (; nfibers < n; nfibers++) {
		size_t page = 4096;
		void *p = mmap(nullptr, TC_EMU_STACK + page, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return -1;
		mprotect(p, page, PROT_NONE); /* a guard page below the stack */
		memset((void *)&fibers[nfibers], 0, sizeof(fiber));
		fibers[nfibers].stack = (char *)p + page;
	}
	return 0;
}

/* ---- naming threads and blocks in messages ---- */

struct name_buf {
	char s[48];
};

static name_buf thread_name(unsigned t)
{
	name_buf b;
	snprintf(b.s, sizeof b.s, "(%u,%u,%u)", t % block.x, t / block.x % block.y,
		t / (block.x * block.y));
	return b;
}

static name_buf block_name(unsigned long linear)
{
	name_buf b;
	snprintf(b.s, sizeof b.s, "(%lu,%lu,%lu)", linear % grid.x, linear / grid.x % grid.y,
		linear / ((unsigned long)grid.x * grid.y));
	return b;
}

/* The block that ran phase p of this launch. */
static unsigned long block_of_phase(uint32_t p)
{
	unsigned long lo = 0, hi = nblocks_run; /* block_firsts[lo] <= p */
	while (hi - lo > 1) {
		unsigned long mid = (lo + hi) / 2;
		if (block_firsts[mid] <= p)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static unsigned long cur_block_linear()
{
	return block_idx.x + (unsigned long)grid.x * (block_idx.y + (unsigned long)grid.y * block_idx.z);
}

/* ---- shadow state and checked element references ---- */

/* One access: the thread (linear in its block) + 1 (0: none), its block
 * phase and warp phase. */
struct access {
	uint32_t thread, phase, wphase;
};

/* What an element has seen: the last write and up to two reads by
 * different threads (the newest first). */
struct shadow {
	access w, r1, r2;
};

/* An array the proxies check: a tensor of the launch or a shared array. */
struct array_info {
	void *base;
	int64_t n;
	shadow *sh;
	const char *name;
	int shared;
};

/* Whether access a (not the current thread's own) conflicts with the
 * current thread now: -1 it is stale (shared memory of another block:
 * none), 0 ordered, 1 a race. */
static inline int unordered(const access &a, int shared)
{
	if (!a.thread)
		return 0;
	if (a.phase < block_first)
		return shared ? 0 : 1;
	if (a.thread == cur + 1)
		return 0;
	if (a.phase != phase)
		return 0;
	if ((a.thread - 1) / 32 == cur / 32 && a.wphase != warp_phase[cur / 32])
		return 0;
	return 1;
}

__attribute__((noinline)) static void report_race(const array_info *a, int64_t i, int writes,
	const access &other, int other_writes)
{
	unsigned long ob = other.phase < block_first ? block_of_phase(other.phase) : cur_block_linear();
	name_buf t = thread_name(cur), b = block_name(cur_block_linear());
	name_buf ot = thread_name(other.thread - 1), obn = block_name(ob);
	problem("race on %s%s[%lld]: thread %s of block %s %s it, thread %s of block %s %s it %s",
		a->shared ? "shared " : "", a->name, (long long)i, t.s, b.s, writes ? "writes" : "reads",
		ot.s, obn.s, other_writes ? "wrote" : "read",
		other.phase < block_first ? "(another block of the same launch)"
					  : "since the last barrier");
}

__attribute__((noinline)) static void report_oob(const array_info *a, int64_t i, int writes)
{
	name_buf t = thread_name(cur), b = block_name(cur_block_linear());
	problem("out of bounds: thread %s of block %s %s %s%s[%lld] (%s has %lld elements)", t.s, b.s,
		writes ? "writes" : "reads", a->shared ? "shared " : "", a->name, (long long)i,
		a->name, (long long)a->n);
}

/* Check and record a read (writes = 0) or write of element i; false when
 * i is out of bounds. */
static inline bool touch(const array_info *a, int64_t i, int writes)
{
	if (__builtin_expect(i < 0 || i >= a->n, 0)) {
		report_oob(a, i, writes);
		return false;
	}
	shadow &s = a->sh[i];
	access me = {cur + 1, phase, warp_phase[cur / 32]};
	int sh = a->shared;
	if (unordered(s.w, sh) > 0) {
		report_race(a, i, writes, s.w, 1);
	} else if (writes) {
		if (unordered(s.r1, sh) > 0)
			report_race(a, i, 1, s.r1, 0);
		else if (unordered(s.r2, sh) > 0)
			report_race(a, i, 1, s.r2, 0);
	}
	if (writes) {
		s.w = me;
	} else if (s.r1.thread != me.thread || s.r1.phase < block_first) {
		/* keep the previous reader when it may still race with a
		 * later write */
		if (unordered(s.r1, sh) > 0)
			s.r2 = s.r1;
		s.r1 = me;
	} else {
		s.r1 = me;
	}
	return true;
}

/* a + b, wrapping for integers (as a GPU's atomicAdd does). */
template <class V> static inline V add_wrapping(V a, V b)
{
	if constexpr (std::is_integral<V>::value) {
		typedef typename std::make_unsigned<V>::type U;
		return (V)((U)a + (U)b);
	} else {
		return a + b;
	}
}

template <class T> struct ref {
	typedef typename std::remove_const<T>::type V;
	const array_info *a;
	int64_t i;

	V *place(int writes) const
	{
		static V dummy;
		if (!touch(a, i, writes))
			return &dummy;
		return (V *)a->base + i;
	}
	V load() const { return *place(0); }
	/* atomicAdd (TC_ATOMIC_ADD): the fibers run one at a time, so the
	 * read-modify-write is atomic as it stands.  As racecheck treats
	 * atomics: checked for bounds and against the element's plain
	 * accesses (an unordered plain write or read is a race), but not
	 * recorded, so atomic additions never race with each other.
	 * Integers wrap (added as unsigned). */
	V atomic_add(V v) const
	{
		if (__builtin_expect(i < 0 || i >= a->n, 0)) {
			report_oob(a, i, 1);
			return V();
		}
		shadow &s = a->sh[i];
		if (unordered(s.w, a->shared) > 0)
			report_race(a, i, 1, s.w, 1);
		else if (unordered(s.r1, a->shared) > 0)
			report_race(a, i, 1, s.r1, 0);
		else if (unordered(s.r2, a->shared) > 0)
			report_race(a, i, 1, s.r2, 0);
		V *p = (V *)a->base + i, old = *p;
		*p = add_wrapping(old, v);
		return old;
	}
	void store(V v) const { *place(1) = v; }
	operator V() const { return load(); }
	const ref &operator=(V v) const
	{
		store(v);
		return *this;
	}
	const ref &operator=(const ref &o) const
	{
		store(o.load());
		return *this;
	}
#define TC_EMU_COMPOUND(op)                                                    \
	template <class U> const ref &operator op##=(U v) const                \
	{                                                                      \
		V x = load();                                                  \
		x op## = v;                                                    \
		store(x);                                                      \
		return *this;                                                  \
	}
	TC_EMU_COMPOUND(+)
	TC_EMU_COMPOUND(-)
	TC_EMU_COMPOUND(*)
	TC_EMU_COMPOUND(/)
	TC_EMU_COMPOUND(%)
	TC_EMU_COMPOUND(&)
	TC_EMU_COMPOUND(|)
	TC_EMU_COMPOUND(^)
	TC_EMU_COMPOUND(<<)
	TC_EMU_COMPOUND(>>)
#undef TC_EMU_COMPOUND
	const ref &operator++() const
	{
		V x = load();
		store(++x);
		return *this;
	}
	const ref &operator--() const
	{
		V x = load();
		store(--x);
		return *this;
	}
	V operator++(int) const
	{
		V x = load();
		V y = x;
		store(++y);
		return x;
	}
	V operator--(int) const
	{
		V x = load();
		V y = x;
		store(--y);
		return x;
	}
};

/* A tensor parameter of a kernel (TC_GLOBAL(T)): P[i] is a checked
 * element reference, TC_LDG(P, i) a checked read. */
template <class T> struct gptr {
	const array_info *a;
	ref<T> operator[](int64_t i) const { return ref<T>{a, i}; }
	typename std::remove_const<T>::type ldg(int64_t i) const { return ref<T>{a, i}.load(); }
	typename std::remove_const<T>::type atomic_add(int64_t i,
		typename std::remove_const<T>::type v) const
	{
		return ref<T>{a, i}.atomic_add(v);
	}
};

/* A block-shared array (TC_SHARED(T, name, N)): a function-local static,
 * poisoned with 0xff bytes at each block's first touch. */
template <class T, long N> struct shared_array {
	T v[N];
	shadow sh[N];
	array_info a;
	unsigned serial;

	explicit shared_array(const char *name) : v(), sh(), a{v, N, sh, name, 1}, serial(0) {}
	ref<T> operator[](int64_t i)
	{
		if (__builtin_expect(serial != block_serial, 0)) {
			memset((void *)v, 0xff, sizeof v);
			serial = block_serial;
		}
		return ref<T>{&a, i};
	}
};

/* ---- barriers and warp intrinsics ---- */

static void syncthreads(int line)
{
	fibers[cur].state = BAR;
	fibers[cur].line = line;
	leave();
}

/* The lanes of the running thread's warp (bit i: lane i exists). */
static unsigned warp_lanes()
{
	unsigned first = cur / 32 * 32, n = nthreads - first;
	return n >= 32 ? 0xffffffffu : (1u << n) - 1;
}

/* The lane lane reads in a shuffle of kind with argument arg and width,
 * or -1 for its own value. */
static int shfl_source(int kind, unsigned lane, int arg, int width)
{
	unsigned w = (unsigned)width, base = lane & ~(w - 1);
	switch (kind) {
	case WOP_IDX:
		return (int)(base + ((unsigned)arg & (w - 1)));
	case WOP_DOWN:
		return (lane & (w - 1)) + (unsigned)arg < w ? (int)(lane + (unsigned)arg) : -1;
	case WOP_XOR: {
		unsigned s = lane ^ (unsigned)arg;
		return s >= base + w ? -1 : (int)s;
	}
	}
	return -1;
}

/* A warp intrinsic of kind at line by the running thread with mask and
 * (for shuffles) the value's bits, lane argument and width: waits for the
 * mask's lanes, then returns the value it receives. */
static uint64_t warp_meet(int kind, int line, unsigned mask, uint64_t val, int arg, int width)
{
	unsigned w = cur / 32, lane = cur % 32, lanes = warp_lanes();
	warp_op &op = warp_ops[w];
	fiber &f = fibers[cur];
	name_buf t = thread_name(cur), b = block_name(cur_block_linear());
	if (width < 1 || width > 32 || (width & (width - 1))) {
		problem("%s (line %d): thread %s of block %s passes width %d (not a power of 2 up to 32)",
			wop_names[kind], line, t.s, b.s, width);
		width = 32;
	}
	if (mask & ~lanes) {
		problem("%s (line %d): thread %s of block %s names lanes 0x%x of warp %u in its mask, "
			"which has no such threads",
			wop_names[kind], line, t.s, b.s, mask & ~lanes, w);
		mask &= lanes;
	}
	if (!(mask & 1u << lane)) {
		problem("%s (line %d): thread %s of block %s (lane %u) calls it with mask 0x%x, "
			"which leaves it out",
			wop_names[kind], line, t.s, b.s, lane, mask);
		mask |= 1u << lane;
	}
	if (op.kind && (op.kind != kind || op.line != line || op.mask != mask)) {
		problem("warp divergence: thread %s of block %s is at %s (line %d, mask 0x%x) while "
			"lanes 0x%x of its warp wait at %s (line %d, mask 0x%x)",
			t.s, b.s, wop_names[kind], line, mask, op.arrived, wop_names[op.kind], op.line,
			op.mask);
		aborted = 1;
		f.state = DONE;
		leave();
	}
	if (!op.kind) {
		op.kind = kind;
		op.line = line;
		op.mask = mask;
		op.arrived = 0;
	}
	op.arrived |= 1u << lane;
	f.val = val;
	f.arg = arg;
	f.width = width;
	if (op.arrived != mask) {
		f.state = WARP;
		f.line = line;
		leave();
		return f.val;
	}
	/* the last lane: exchange, wake the others */
	uint64_t got[32];
	for (unsigned l = 0; l < 32; l++) {
		if (!(mask & 1u << l))
			continue;
		fiber &g = fibers[w * 32 + l];
		got[l] = g.val;
		if (kind == WOP_SYNC)
			continue;
		int s = shfl_source(kind, l, g.arg, g.width);
		if (s >= 0 && s < 32 && !(mask & 1u << s)) {
			name_buf lt = thread_name(w * 32 + l);
			problem("%s (line %d): thread %s of block %s reads lane %d, which is not in the "
				"mask 0x%x",
				wop_names[kind], line, lt.s, b.s, s, mask);
			s = -1;
		}
		got[l] = s < 0 ? g.val : fibers[w * 32 + s].val;
	}
	for (unsigned l = 0; l < 32; l++) {
		if (!(mask & 1u << l))
			continue;
		fiber &g = fibers[w * 32 + l];
		g.val = got[l];
		if (g.state == WARP)
			g.state = RUN;
	}
	if (kind == WOP_SYNC)
		warp_phase[w] = ++wphase;
	op.kind = 0;
	return f.val;
}

template <class T> static T shfl(int kind, int line, unsigned mask, T v, int arg, int width)
{
	uint64_t bits = 0;
	memcpy(&bits, &v, sizeof v);
	bits = warp_meet(kind, line, mask, bits, arg, width);
	memcpy(&v, &bits, sizeof v);
	return v;
}

#define TC_EMU_SHFL(T)                                                                      \
	static inline T shfl_idx(int line, unsigned m, T v, int l, int w = 32)             \
	{                                                                                   \
		return shfl<T>(WOP_IDX, line, m, v, l, w);                                  \
	}                                                                                   \
	static inline T shfl_down(int line, unsigned m, T v, unsigned d, int w = 32)       \
	{                                                                                   \
		return shfl<T>(WOP_DOWN, line, m, v, (int)d, w);                            \
	}                                                                                   \
	static inline T shfl_xor(int line, unsigned m, T v, int x, int w = 32)             \
	{                                                                                   \
		return shfl<T>(WOP_XOR, line, m, v, x, w);                                  \
	}
TC_EMU_SHFL(int)
TC_EMU_SHFL(unsigned)
TC_EMU_SHFL(long)
TC_EMU_SHFL(unsigned long)
TC_EMU_SHFL(long long)
TC_EMU_SHFL(unsigned long long)
TC_EMU_SHFL(float)
TC_EMU_SHFL(double)
#undef TC_EMU_SHFL

/* __syncwarp(mask) at a line (the mask is optional). */
struct syncwarp_at {
	int line;
	void operator()(unsigned mask = 0xffffffffu) const { warp_meet(WOP_SYNC, line, mask, 0, 0, 32); }
};

/* ---- the launch ---- */

/* Why the block cannot go on: every thread is DONE, at a barrier or at a
 * warp intrinsic and none can run.  Reports it and returns 1, or releases
 * the barrier and returns 0, or returns 2 when the block is complete. */
static int settle()
{
	unsigned done = 0, bar = 0, first_bar = 0, first_done = 0;
	name_buf b = block_name(cur_block_linear());
	for (unsigned i = 0; i < nthreads; i++) {
		fiber &f = fibers[i];
		if (f.state == WARP) {
			unsigned w = i / 32;
			warp_op &op = warp_ops[w];
			for (unsigned l = 0; l < 32; l++) {
				if (!(op.mask & 1u << l) || (op.arrived & 1u << l))
					continue;
				fiber &g = fibers[w * 32 + l];
				name_buf t = thread_name(w * 32 + l);
				if (g.state == DONE)
					problem("warp divergence: thread %s of block %s has returned while "
						"lanes 0x%x of its warp wait at %s (line %d, mask 0x%x)",
						t.s, b.s, op.arrived, wop_names[op.kind], op.line, op.mask);
				else
					problem("warp divergence: thread %s of block %s waits at "
						"__syncthreads() (line %d) while lanes 0x%x of its warp "
						"wait at %s (line %d, mask 0x%x)",
						t.s, b.s, g.line, op.arrived, wop_names[op.kind], op.line,
						op.mask);
				return 1;
			}
		}
		if (f.state == DONE && !done++)
			first_done = i;
		if (f.state == BAR && !bar++)
			first_bar = i;
	}
	if (done == nthreads)
		return 2;
	if (done) {
		name_buf t = thread_name(first_done), w = thread_name(first_bar);
		problem("barrier divergence: thread %s of block %s has returned while %u threads, "
			"thread %s first, wait at __syncthreads() (line %d)",
			t.s, b.s, bar, w.s, fibers[first_bar].line);
		return 1;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		if (fibers[i].line != fibers[first_bar].line) {
			name_buf t = thread_name(i), w = thread_name(first_bar);
			problem("barrier divergence: in block %s thread %s waits at __syncthreads() "
				"(line %d), thread %s at __syncthreads() (line %d)",
				b.s, t.s, fibers[i].line, w.s, fibers[first_bar].line);
			return 1;
		}
	}
	phase++;
	for (unsigned i = 0; i < nthreads; i++)
		fibers[i].state = RUN;
	return 0;
}

/* Run fn(arg) as a grid g of blocks b: 0, or -1 with the first problem
 * (and a count of the others) in msg. */
static int launch(dim3 g, dim3 b, void (*fn)(void *), void *arg, char *msg, size_t size)
{
	unsigned long nb = (unsigned long)g.x * g.y * g.z;
	report_count = 0;
	report_msg[0] = 0;
	aborted = 0;
	grid = g;
	block = b;
	gridDim = g;
	blockDim = b;
	nthreads = b.x * b.y * b.z;
	body = fn;
	body_arg = arg;
	if (reserve(nthreads) < 0) {
		snprintf(msg, size, "out of memory for the stacks of %u threads", nthreads);
		return -1;
	}
	block_firsts = (uint32_t *)malloc(nb * sizeof *block_firsts);
	if (!block_firsts) {
		snprintf(msg, size, "out of memory");
		return -1;
	}
	nblocks_run = 0;
	for (unsigned z = 0; z < g.z && !aborted; z++)
		for (unsigned y = 0; y < g.y && !aborted; y++)
			for (unsigned x = 0; x < g.x && !aborted; x++) {
				block_idx = {x, y, z};
				blockIdx = block_idx;
				block_serial++;
				block_first = ++phase;
				block_firsts[nblocks_run++] = block_first;
				memset(warp_ops, 0, sizeof warp_ops);
				for (unsigned i = 0; i < nthreads; i++)
					fiber_start(i);
				for (;;) {
					int ran = 1;
					while (ran && !aborted) {
						ran = 0;
						for (unsigned i = 0; i < nthreads && !aborted; i++)
							if (fibers[i].state == RUN) {
								enter(i);
								ran = 1;
							}
					}
					if (aborted)
						break;
					int s = settle();
					if (s == 2)
						break;
					if (s == 1) {
						aborted = 1;
						break;
					}
				}
			}
	free(block_firsts);
	block_firsts = nullptr;
	if (!report_count)
		return 0;
	if (report_count > 1)
		snprintf(msg, size, "%s (and %ld more problem%s)", report_msg, report_count - 1,
			report_count > 2 ? "s" : "");
	else
		snprintf(msg, size, "%s", report_msg);
	return -1;
}

/* Call the closure at f (the kernel with its arguments). */
template <class F> static void thunk(void *f)
{
	(*(F *)f)();
}

/* A tensor of a launch: its shadow (calloc'd, freed with it). */
struct tensor {
	array_info a;
	explicit tensor(void *base, int64_t n, const char *name)
		: a{base, n, (shadow *)calloc(n > 0 ? (size_t)n : 1, sizeof(shadow)), name, 0}
	{
	}
	~tensor() { free(a.sh); }
	bool ok() const { return a.sh != nullptr; }
};

} /* namespace tc_emu */

/* Free the stacks (the runner calls it before closing the module). */
extern "C" void tc_emu_release()
{
	for (unsigned i = 0; i < tc_emu::nfibers; i++)
		munmap(tc_emu::fibers[i].stack - 4096, TC_EMU_STACK + 4096);
	free((void *)tc_emu::fibers);
	tc_emu::fibers = nullptr;
	tc_emu::nfibers = 0;
}

namespace tc_emu {

/* ---- CUDA's math functions that C++ lacks (float: computed in double,
 * rounded once), the algorithms of the interpreter (ir/builtins.c) ---- */

static const double PI = 3.14159265358979323846264338327950288;
static const double SQRT2 = 1.41421356237309504880168872420969808;
static const double SQRT1_2 = 0.70710678118654752440084436210484904;
static const double SQRT1_2_LO = -4.833646656726456518593584e-17;
static const double TWO_OVER_SQRTPI = 1.12837916709551257389615890312154517;
static const double SQRTPI = 1.77245385090551602729816748334114518;
static const double SQRTPI_2 = 0.88622692545275801364908374167057259;
static const double LOG_SQRTPI = 0.57236494292470008707171367567652935;

static inline double m_sinpi(double x)
{
	double r, s = 1.0, v;
	if (std::isnan(x) || std::isinf(x))
		return x - x;
	r = fmod(fabs(x), 2.0);
	if (r >= 1.0) {
		s = -1.0;
		r -= 1.0;
	}
	if (r > 0.5)
		r = 1.0 - r;
	if (r == 0.0)
		v = 0.0;
	else if (r == 0.5)
		v = s;
	else if (r <= 0.25)
		v = s * sin(PI * r);
	else
		v = s * cos(PI * (0.5 - r));
	if (v == 0.0)
		return copysign(0.0, x);
	return x < 0 ? -v : v;
}

static inline double m_cospi(double x)
{
	double r, s = 1.0;
	if (std::isnan(x) || std::isinf(x))
		return x - x;
	r = fmod(fabs(x), 2.0);
	if (r > 1.0)
		r = 2.0 - r;
	if (r > 0.5) {
		s = -1.0;
		r = 1.0 - r;
	}
	if (r == 0.5)
		return 0.0;
	if (r == 0.0)
		return s;
	if (r <= 0.25)
		return s * cos(PI * r);
	return s * sin(PI * (0.5 - r));
}

static inline double m_norm3d(double a, double b, double c)
{
	double m;
	int e;
	if (std::isinf(a) || std::isinf(b) || std::isinf(c))
		return INFINITY;
	if (std::isnan(a) || std::isnan(b) || std::isnan(c))
		return NAN;
	a = fabs(a);
	b = fabs(b);
	c = fabs(c);
	m = fmax(a, fmax(b, c));
	if (m == 0.0)
		return 0.0;
	frexp(m, &e);
	a = ldexp(a, -e);
	b = ldexp(b, -e);
	c = ldexp(c, -e);
	return ldexp(sqrt(a * a + b * b + c * c), e);
}

/* Winitzki's approximation of erfinv in terms of L = log(1 - x^2). */
static inline double erfinv_guess(double L)
{
	const double a = 0.147;
	double c = 2.0 / (PI * a) + 0.5 * L, d = -L / a, inner;
	if (c > 0)
		inner = d / (sqrt(c * c + d) + c);
	else
		inner = sqrt(c * c + d) - c;
	return sqrt(inner);
}

/* |x| <= 0.5: Halley steps on erf(y) = x. */
static inline double erfinv_central(double x)
{
	double y, u, step;
	if (fabs(x) < 1e-6)
		return SQRTPI_2 * (x + (PI / 12.0) * x * x * x);
	y = copysign(erfinv_guess(log1p(-x * x)), x);
	for (int i = 0; i < 8; i++) {
		u = (erf(y) - x) / (TWO_OVER_SQRTPI * exp(-y * y));
		step = u / (1.0 + y * u);
		y -= step;
		if (fabs(step) <= 0x1p-30 * fabs(y))
			break;
	}
	return y;
}

/* log(erfc(y)) for y > 0, and exp(-y^2) / erfc(y) in *ratio. */
static inline double log_erfc(double y, double *ratio)
{
	if (y < 25.0) {
		double e = erfc(y);
		*ratio = exp(-y * y) / e;
		return log(e);
	}
	double z = 1.0 / (2.0 * y * y), t = 1.0, s = 1.0;
	for (int k = 1; k <= 12; k++) {
		t *= -(2 * k - 1) * z;
		s += t;
	}
	*ratio = y * SQRTPI / s;
	return -y * y - log(y) - LOG_SQRTPI + log(s);
}

/* erfcinv(p) for 0 < p < 0.5: Newton steps on log(erfc(y)) = log(p). */
static inline double erfcinv_tail(double p)
{
	double lp = log(p), y, g, ratio, step;
	y = erfinv_guess(lp + log(2.0 - p));
	for (int i = 0; i < 12; i++) {
		g = log_erfc(y, &ratio) - lp;
		step = g / (-TWO_OVER_SQRTPI * ratio);
		y -= step;
		if (fabs(step) <= 0x1p-35 * y)
			break;
	}
	return y;
}

static inline double m_erfinv(double x)
{
	double a = fabs(x);
	if (std::isnan(x) || a > 1.0)
		return NAN;
	if (a == 1.0)
		return copysign(INFINITY, x);
	if (a <= 0.5)
		return erfinv_central(x);
	return copysign(erfcinv_tail(1.0 - a), x);
}

static inline double m_erfcinv(double p)
{
	if (std::isnan(p) || p < 0.0 || p > 2.0)
		return NAN;
	if (p == 0.0)
		return INFINITY;
	if (p == 2.0)
		return -INFINITY;
	if (p < 0.5)
		return erfcinv_tail(p);
	if (p <= 1.5)
		return erfinv_central(1.0 - p);
	return -erfcinv_tail(2.0 - p);
}

static inline double m_normcdf(double x)
{
	if (std::isnan(x) || std::isinf(x))
		return 0.5 * erfc(-x);
	double t_hi = -x * SQRT1_2;
	double t_lo = fma(-x, SQRT1_2, -t_hi) + -x * SQRT1_2_LO;
	return 0.5 * (erfc(t_hi) - t_lo * TWO_OVER_SQRTPI * exp(-t_hi * t_hi));
}

static inline double m_normcdfinv(double p)
{
	if (std::isnan(p) || p < 0.0 || p > 1.0)
		return NAN;
	return -SQRT2 * m_erfcinv(2.0 * p) + 0.0;
}

static inline double m_rsqrt(double x) { return 1.0 / sqrt(x); }
static inline double m_rcbrt(double x) { return 1.0 / cbrt(x); }
static inline double m_rhypot(double x, double y) { return 1.0 / hypot(x, y); }
static inline double m_exp10(double x) { return pow(10.0, x); }
static inline double m_rnorm3d(double a, double b, double c) { return 1.0 / m_norm3d(a, b, c); }

template <class T> static inline T as(const void *p)
{
	T v;
	memcpy(&v, p, sizeof v);
	return v;
}

} /* namespace tc_emu */

/* The built-ins, as macros over the functions above (__LINE__ names the
 * barrier or intrinsic in messages). */
#define __syncthreads() tc_emu::syncthreads(__LINE__)
#define __syncwarp(...) tc_emu::syncwarp_at{__LINE__}(__VA_ARGS__)
#define __shfl_sync(...) tc_emu::shfl_idx(__LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) tc_emu::shfl_down(__LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) tc_emu::shfl_xor(__LINE__, __VA_ARGS__)

#define rsqrt(x) tc_emu::m_rsqrt(x)
#define rsqrtf(x) ((float)tc_emu::m_rsqrt((float)(x)))
#define rcbrt(x) tc_emu::m_rcbrt(x)
#define rcbrtf(x) ((float)tc_emu::m_rcbrt((float)(x)))
#define rhypot(x, y) tc_emu::m_rhypot(x, y)
#define rhypotf(x, y) ((float)tc_emu::m_rhypot((float)(x), (float)(y)))
#define exp10(x) tc_emu::m_exp10(x)
#define exp10f(x) ((float)tc_emu::m_exp10((float)(x)))
#define sinpi(x) tc_emu::m_sinpi(x)
#define sinpif(x) ((float)tc_emu::m_sinpi((float)(x)))
#define cospi(x) tc_emu::m_cospi(x)
#define cospif(x) ((float)tc_emu::m_cospi((float)(x)))
#define erfinv(x) tc_emu::m_erfinv(x)
#define erfinvf(x) ((float)tc_emu::m_erfinv((float)(x)))
#define erfcinv(x) tc_emu::m_erfcinv(x)
#define erfcinvf(x) ((float)tc_emu::m_erfcinv((float)(x)))
#define normcdf(x) tc_emu::m_normcdf(x)
#define normcdff(x) ((float)tc_emu::m_normcdf((float)(x)))
#define normcdfinv(x) tc_emu::m_normcdfinv(x)
#define normcdfinvf(x) ((float)tc_emu::m_normcdfinv((float)(x)))
#define norm3d(a, b, c) tc_emu::m_norm3d(a, b, c)
#define norm3df(a, b, c) ((float)tc_emu::m_norm3d((float)(a), (float)(b), (float)(c)))
#define rnorm3d(a, b, c) tc_emu::m_rnorm3d(a, b, c)
#define rnorm3df(a, b, c) ((float)tc_emu::m_rnorm3d((float)(a), (float)(b), (float)(c)))

static inline float __int_as_float(int i) { return tc_emu::as<float>(&i); }
static inline int __float_as_int(float f) { return tc_emu::as<int>(&f); }
static inline float __uint_as_float(unsigned i) { return tc_emu::as<float>(&i); }
static inline unsigned __float_as_uint(float f) { return tc_emu::as<unsigned>(&f); }
static inline double __longlong_as_double(long long i) { return tc_emu::as<double>(&i); }
static inline long long __double_as_longlong(double f) { return tc_emu::as<long long>(&f); }

/* ---- float16 and bfloat16 (the prelude16 of codegen/cuda.c) ----
 *
 * The 2-byte types and the conversions NVRTC gets from prelude16, with the
 * GPU's rounding done in integer arithmetic: to nearest, ties to even,
 * with subnormals (no flush to zero) and infinities; a NaN becomes the
 * canonical NaN 0x7fff (as PTX's cvt gives it), a float16 or bfloat16 NaN
 * a float NaN.  __double2float_rz rounds toward zero as PTX's
 * cvt.rz.f32.f64 (a finite double beyond float's range gives FLT_MAX). */
struct __half {
	unsigned short __x;
};
struct __nv_bfloat16 {
	unsigned short __x;
};

static inline float __half2float(__half h)
{
	unsigned sign = (unsigned)(h.__x & 0x8000u) << 16, exp = (h.__x >> 10) & 0x1fu,
		 frac = h.__x & 0x3ffu;
	if (exp == 0) { /* zero or subnormal: frac * 2^-24, exact */
		float x = (float)frac * 0x1p-24f;
		return sign ? -x : x;
	}
	if (exp == 0x1f)
		return __uint_as_float(sign | 0x7f800000u | frac << 13);
	return __uint_as_float(sign | (exp - 15 + 127) << 23 | frac << 13);
}

static inline __half __float2half_rn(float f)
{
	unsigned u = __float_as_uint(f), a = u & 0x7fffffffu, m, r, rest, half;
	unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
	int e, shift;
	if (a > 0x7f800000u)
		return __half{0x7fffu};
	if (a < 0x33000000u) /* below 2^-25: to zero */
		return __half{sign};
	e = (int)(a >> 23) - 127;
	if (e > 15) /* 2^16 or more, or infinity */
		return __half{(unsigned short)(sign | 0x7c00u)};
	m = (a & 0x7fffffu) | 0x800000u; /* 24 significant bits */
	shift = e >= -14 ? 13 : -1 - e;  /* to the float16 quantum */
	r = m >> shift;
	rest = m & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rest > half || (rest == half && (r & 1u)))
		r++;
	if (e >= -14) /* a carry out of the significand bumps the exponent */
		r += (unsigned)(e + 15 - 1) << 10;
	return __half{(unsigned short)(sign | r)};
}

static inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float((unsigned)h.__x << 16); }

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return __nv_bfloat16{0x7fffu};
	return __nv_bfloat16{(unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

static inline float __double2float_rz(double x)
{
	float f = (float)x;
	if (x == x && fabs((double)f) > fabs(x))
		f = nextafterf(f, 0.0f);
	return f;
}

#endif
