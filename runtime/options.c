/* The option table and tc_options objects: set, get, parse and print as
 * text, describe. */
#include "options.h"

#include "../lang/util.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct opt_def {
	const char *name;
	tc_opt_type type;
	const char *range; /* '|'-separated words and LO..HI intervals: see options.h */
	const char *def;   /* the default, in canonical form */
	const char *doc;
} opt_def;

/* The option table.  Every option of tcomp is one row here: the API
 * (set/get/parse/print/describe), the CLI, the memo key and, later, the
 * autotuner's search space and the cache read it. */
static const opt_def opt_table[] = {
	{"target", TC_OPT_ENUM, "cpu|interp|cuda|cuda-emu", "cpu",
		"where kernels run: cpu compiles through isl and LLVM; interp is the reference interpreter (bounds-checked); cuda maps the schedule to GPU blocks and threads, compiles CUDA C with NVRTC and runs it through the CUDA driver on kDLCUDA tensors; cuda-emu runs that same CUDA C on the CPU through tcomp's emulator, which reports out-of-bounds accesses and races (slow: for checking a mapping without a GPU)"},
	{"order", TC_OPT_ENUM, "on|off", "on",
		"reorder permutable bands so the loop walking the stride-1 dimension is innermost (vectorisable)"},
	{"contract", TC_OPT_ENUM, "on|off", "on",
		"a float32/float64 sum or difference with a product operand (x * y + z, z - x * y, ...) and each step of a sum reduction of products (C +=! A * B) is one fused multiply-add, rounded once: a fixed rule on the text (docs/language.md), so every schedule and the interpreter give the same bits (off: every operation rounds)"},
	{"parallel", TC_OPT_ENUM, "auto|on|off", "auto",
		"run the outermost parallel loop of each loop nest on tcomp's thread pool (auto: only nests of at least 32768 statement instances, below which handing out the work costs more than it saves)"},
	{"threads", TC_OPT_INT, "auto|1..256", "auto",
		"how many threads run parallel loops (auto: one per CPU this process may run on: its affinity mask)"},
	{"fusion", TC_OPT_ENUM, "auto|max|preserve3coincident|min", "auto",
		"how the isl scheduler fuses statements into loop nests: auto fuses as max does, then schedules again each nest that fusing made serial (its outer loop no longer parallel), skewed, or strided (a statement run on every other iteration of a loop behind a test), keeping the cheaper of preserve3coincident and min for it; max fuses whatever it can (softmax and a layer's bias and activation run in one pass), preserve3coincident never gives up a parallel loop for fusion, min schedules every dependence component apart"},
	{"tile", TC_OPT_LIST, "auto|none|1..65536", "auto",
		"cache tile sizes for the members of the outermost permutable band, outermost first (none: no tiling; missing sizes: that member is not tiled; auto: BLIS-style blocks for the contraction of every loop nest, the target's measured block sizes)"},
	{"regtile", TC_OPT_LIST, "auto|none|1..1024", "auto",
		"register tile sizes for the parallel members of a contraction's innermost band, innermost (vectorised) last; the reduction runs inside the tile with its partial sums in registers (auto: up to 4 vectors per row and 24 accumulators, rows from the member whose rows share the most loads; with AVX2's 16 registers 2 vectors by 6 rows)"},
	{"unroll", TC_OPT_ENUM, "on|off", "on",
		"fully unroll the register tile's point loops but the innermost (at most 32 copies)"},
	{"unroll_inner", TC_OPT_ENUM, "auto|1|2|4|8", "auto",
		"vector iterations (scalar ones with vector=1) per trip of each innermost loop: the loop vectoriser's interleave count, each copy with its own partial sums where a reduction may be reordered, at most the vectors a loop of constant length holds (with vector=1 the unroller's count); the register tile's automatic rows get that many vectors (auto: 2 outside register tiles, LLVM's choice inside; rows of 4 vectors)"},
	{"vector", TC_OPT_ENUM, "auto|1|2|4|8|16|32|64", "auto",
		"lanes of the vectors of each innermost loop (llvm.loop.vectorize.width; auto: LLVM's cost model chooses, up to a 512-bit register; 1: no vector instructions, neither loop nor SLP vectorisation); a loop of constant length gets at most its length, and the register tile's automatic sizes count vectors of this many lanes (at most a register's)"},
	{"fastmath", TC_OPT_ENUM, "off|on", "off",
		"trade bit-identical results for speed: contract=on, float sums and products reassociated (reductions vectorise in any order), min/max assume no NaN operands (a NaN gives an unspecified result) and either zero of a tie, arcp (a / b may become a * (1 / b))"},
	{"vecreduce", TC_OPT_ENUM, "on|off", "on",
		"let float sums (+=) and max=!/min=! reductions outside register tiles run as vector partial results combined at the end, and column sums over rows that other statements also walk, or over rows too short to split among the threads by columns, run as one partial result per thread's chunk of rows (CPU, two threads or more): sums then round in another order than the interpreter's (the language allows it), max and min give the same value; products (*=) keep the interpreter's order (their partial products overflow and underflow in other orders: 0 became NaN) (off: every reduction accumulates in the interpreter's order, bit for bit)"},
	{"share", TC_OPT_ENUM, "on|off|row", "on",
		"compute once an expression with a builtin call that a statement writing its whole output shares with an earlier statement (softmax's exp in the sum and in the division): stored into that output first, read back by both; row: stored into a temporary that is kept as one row per thread on the stack when the rows' loops are fused (fusion max, rows of at most 64 KiB), so the output is written once and can be streamed (into the output otherwise); results are bit for bit the same"},
	{"inline", TC_OPT_ENUM, "on|off", "on",
		"compute a temporary that one pointwise statement of at most 4 operations (no builtin calls) defines again wherever it is read, instead of storing it, when each reader instance reads its own element (layer norm's centred input); results are bit for bit the same"},
	{"stream", TC_OPT_ENUM, "auto|on|off", "auto",
		"write large outputs (4 MiB or more) that one assignment writes once per element with non-temporal vector stores when they are 64-byte aligned at run time: no read of the lines before they are written (a third less traffic for a kernel reading one array and writing another), and they bypass the caches (auto: where the tensors the kernel touches take at least a quarter of the host's last-level cache, or its size is unknown; below, plain stores leave the output in that cache for the next run or kernel: layer norm 4096 x 1024, 32 MiB, 0.85x the time on a host with 480 MiB of L3; on: wherever they apply, whatever the cache; off: never)"},
	{"mask", TC_OPT_ENUM, "auto|on|off", "auto",
		"CPU: a register tile's row whose length is not a whole number of vectors (a convolution's output rows of 14 or 26 with 16-lane vectors) ends in one full-width vector under a lane mask (masked loads and stores, which touch no element outside the row) instead of narrower vectors; convolutions' register tiles then span the whole row (auto: on AVX-512 hosts that run 512-bit vectors at full rate, every one but Zen 4, whose halves made the narrower vectors faster; off when compiling for an x86-64 level)"},
	{"pack", TC_OPT_ENUM, "on|off", "on",
		"copy an input that a contraction reads along its reduction (B in A(m,r_k) * B(n,r_k), fully connected weights) into a temporary laid out so the register tile applies, and an operand the register tile broadcasts whose rows are a page or more apart along the reduction (X in a weight gradient dW(i,h) +=! X(r_b,i) * dH(r_b,h), when dW has 256 floats or more per row) with the reduction last; the copy runs first; on AVX2 hosts copies with rows of 1024 bytes or more are laid out in panels of 16 floats (on Intel AVX-512 hosts rows of 4096 bytes or more in panels of 64 floats, on Zen 4 rows of 8192 bytes or more), and B in A(m,r_k) * B(r_k,n) with such rows is copied into panels too when the output has 64 rows or more"},
	{"interchange", TC_OPT_PERM, "auto|0..15", "auto",
		"the order of the members of the band that tile tiles (the outermost permutable band of the first loop nest, packing copies aside), after order: entry k says which member goes to position k (2,0,1: the third loop outermost), so it orders the cache-tile loops and the loops within tiles; a shorter list permutes the first members only; a list longer than the band, or an order that would break a dependence, leaves the band as it is; tile sizes follow the new order (auto: the order option's order)"},
	{"block", TC_OPT_LIST, "auto|1..1024", "auto",
		"GPU: threads per block in x, y, z for the mapped loops of every kernel (x: the innermost mapped loop, its stride-1 accesses coalesced); at most 1024 threads in all and 64 in z (auto: 256 threads, x up to 32 when more than one loop is mapped)"},
	{"grid", TC_OPT_LIST, "auto|1..2147483647", "auto",
		"GPU: at most this many blocks in x, y, z; fewer blocks than tiles make each block take several tiles in turn (auto: one block per tile, up to the device's limits)"},
	{"gpu_arch", TC_OPT_ENUM, "auto|sm_70|sm_75|sm_80|sm_86|sm_87|sm_89|sm_90|sm_100|sm_120", "auto",
		"GPU: the architecture NVRTC compiles for (auto: the device's compute capability; sm_90 where there is no device, as when compiling offline)"},
	{"reduce", TC_OPT_ENUM, "auto|on|off", "auto",
		"GPU: run a reduction (sums of floats and integers, max, min; not products) on threads: each thread accumulates a strided part of the reduced loop in a register, the threads combine the parts with warp shuffles (and shared memory across the warps of a block), one thread writes the element (reduce_map: a block or a warp per row); float sums then round in another order than the interpreter's (auto: where the rows' count is known and the reduced loop has at least 32 values; on: wherever it applies; off: one thread per row, serially)"},
	{"reduce_threads", TC_OPT_ENUM, "auto|32|64|128|256|512|1024", "auto",
		"GPU: threads of a block sharing one reduction in the block-per-row form (auto: the reduced loop's length rounded up to a power of two, at least 32 and at most 256, or 1024 when the rows are fewer than the multiprocessors); more than 32 turns reduce_map auto to a block per row"},
	{"reduce_map", TC_OPT_ENUM, "auto|block|warp", "auto",
		"GPU: how a reduction on threads (reduce) spreads its rows: block: one block per row, its threads striding over the reduced loop; warp: one warp per row, its 32 lanes striding over the reduced loop (coalesced), 8 rows per block on the threads of y, combined by warp shuffles alone (no shared memory, no barrier); auto: a warp per row from 4096 rows on (unless reduce_threads asks more than 32), a block per row below"},
	{"shared", TC_OPT_ENUM, "auto|on|off", "auto",
		"GPU: copy the elements of an input that the threads of a block read several times (matmul's rows and columns, a convolution's window) into shared memory once per step of the reduced loops, the band tiled: the block's threads copy the box together, wait at a barrier, compute from the copy, and wait again before the next step (auto: tensors whose elements the step reads at least twice each on average, most reused first, within 48 KiB; on: read once or more; off: every read from global memory)"},
	{"shared_tile", TC_OPT_ENUM, "auto|1|2|4|8|16|32|64|128|256", "auto",
		"GPU: values of each reduced loop per step between shared-memory copies (auto: 32, or the loop's length when shorter); larger steps copy bigger boxes less often"},
	{"sizes", TC_OPT_ENUM, "auto|concrete|parametric", "auto",
		"concrete: every size is a constant of the generated code, and each new shape compiles again; parametric: the sizes that only the first dimension of tensors has (a batch, the rows of a matmul) are run-time values of the code, so a kernel compiled for one shape serves every shape that differs from it in those sizes only, without compiling again (decisions such as tile sizes are made for the first shape; the code may run somewhat slower than concrete code, see docs/performance.md); auto: the first shape of a def in a module compiles concrete, a second shape that differs from it only in those sizes compiles parametric, and every later such shape reuses that code"},
	{"cpu", TC_OPT_ENUM, "host|x86-64|x86-64-v2|x86-64-v3|x86-64-v4", "host",
		"the CPU the target cpu compiles for: host (its own instructions, vector width and caches) or an x86-64 psABI level (x86-64: SSE2; v2: SSE4.2; v3: AVX2 and FMA, 32-byte vectors; v4: AVX-512, 64-byte vectors), with the caches of a Zen 4 core (32 KiB L1d, 1 MiB L2), so that the same source and options give the same code on every machine; a kernel compiled for a level the host lacks can be emitted but not run"},
};
#define NOPTS ((int)(sizeof(opt_table) / sizeof(opt_table[0])))

struct tc_options {
	char *value[NOPTS]; /* canonical value, or NULL for the default */
};

tc_options *tc_options_new(void)
{
	return tc_calloc(1, sizeof(tc_options));
}

void tc_options_free(tc_options *o)
{
	int i;
	if (!o)
		return;
	for (i = 0; i < NOPTS; i++)
		tc_free(o->value[i]);
	tc_free(o);
}

tc_options *tc_options_copy(const tc_options *o)
{
	tc_options *c = tc_options_new();
	int i;
	for (i = 0; c && o && i < NOPTS; i++)
		if (o->value[i] && !(c->value[i] = tc_strdup(o->value[i]))) {
			tc_options_free(c);
			return NULL;
		}
	return c;
}

static int find_opt(const char *name)
{
	int i;
	for (i = 0; name && i < NOPTS; i++)
		if (!strcmp(opt_table[i].name, name))
			return i;
	return -1;
}

/* ---- values: words and integer intervals ---- */

/* A decimal integer filling s[0..n): optional '-', digits, no overflow. */
static int parse_int(const char *s, size_t n, int64_t *out)
{
	size_t i = 0;
	int neg = 0;
	uint64_t v = 0, lim;
	if (i < n && s[i] == '-') {
		neg = 1;
		i++;
	}
	if (i == n)
		return -1;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (v > (lim - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
	return 0;
}

/* An alternative of a range: a word, or an interval LO..HI. */
typedef struct alt {
	const char *s;
	size_t n;
	int is_interval;
	int64_t lo, hi;
} alt;

/* The next '|'-separated alternative at *p (advanced past it); 0 at the end. */
static int next_alt(const char **p, alt *a)
{
	const char *bar, *dots;
	if (!**p)
		return 0;
	bar = strchr(*p, '|');
	a->s = *p;
	a->n = bar ? (size_t)(bar - *p) : strlen(*p);
	*p += a->n + (bar ? 1 : 0);
	dots = strstr(a->s, "..");
	a->is_interval = dots && dots < a->s + a->n &&
		parse_int(a->s, (size_t)(dots - a->s), &a->lo) == 0 &&
		parse_int(dots + 2, a->n - (size_t)(dots + 2 - a->s), &a->hi) == 0;
	return 1;
}

static int range_has_word(const char *range, const char *w, size_t n)
{
	alt a;
	while (next_alt(&range, &a))
		if (!a.is_interval && a.n == n && !strncmp(a.s, w, n))
			return 1;
	return 0;
}

static int range_has_int(const char *range, int64_t v)
{
	alt a;
	while (next_alt(&range, &a))
		if (a.is_interval && a.lo <= v && v <= a.hi)
			return 1;
	return 0;
}

/* Whether the canonical list s (integers in 0..TC_OPT_LIST_MAX-1) is not a
 * permutation of 0..n-1 for its n entries: 1 with the reason in why[size]
 * (when why is non-NULL), else 0.  Without repeats, n values below n are
 * every one of them. */
static int perm_problem(const char *s, char *why, size_t size)
{
	int seen[TC_OPT_LIST_MAX] = {0}, n = 0, big = -1;
	const char *p;
	for (p = s; p && *p; n++) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break; /* a word: no list */
		if (v < 0 || v >= TC_OPT_LIST_MAX) {
			if (why)
				snprintf(why, size, "%ld is no position of a list", v);
			return 1;
		}
		if (seen[v]++) {
			if (why)
				snprintf(why, size, "%ld appears twice", v);
			return 1;
		}
		big = (int)v > big ? (int)v : big;
		p = *end == ',' ? end + 1 : end;
	}
	if (big >= n) {
		if (why)
			snprintf(why, size, "%d is beyond 0..%d, the positions of %d entries", big,
				n - 1, n);
		return 1;
	}
	return 0;
}

int tc_rt_opt_value(tc_opt_type type, const char *range, const char *value, __tc_give char **canon)
{
	size_t n = strlen(value);
	tc_buf b;
	const char *p;
	int count = 0;
	*canon = NULL;
	if (!n)
		return -1;
	if (range_has_word(range, value, n)) {
		*canon = tc_strdup(value);
		return 0;
	}
	if (type == TC_OPT_ENUM)
		return -1;
	tc_buf_init(&b);
	for (p = value;; p++) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int64_t v;
		if ((comma && type != TC_OPT_LIST && type != TC_OPT_PERM) ||
			++count > TC_OPT_LIST_MAX ||
			parse_int(p, len, &v) < 0 || !range_has_int(range, v)) {
			tc_buf_free(&b);
			return -1;
		}
		tc_buf_printf(&b, "%s%lld", count > 1 ? "," : "", (long long)v);
		if (!comma)
			break;
		p = comma;
	}
	if (type == TC_OPT_PERM && perm_problem(b.s, NULL, 0)) {
		tc_buf_free(&b);
		return -1;
	}
	*canon = tc_buf_take(&b);
	return 0;
}

/* What values an option allows, in words, for messages:
 * "cpu|interp", "an integer in 1..4096, or auto", ... */
static void put_allowed(tc_buf *b, const opt_def *d)
{
	const char *p = d->range;
	alt a;
	int nint = 0, nword = 0;
	if (d->type == TC_OPT_ENUM) {
		tc_buf_puts(b, d->range);
		return;
	}
	if (d->type == TC_OPT_INT)
		tc_buf_puts(b, "an integer in ");
	else if (d->type == TC_OPT_PERM)
		tc_buf_printf(b, "a permutation of 0..N-1 as N comma-separated integers (N 1 to %d) in ",
			TC_OPT_LIST_MAX);
	else
		tc_buf_printf(b, "1 to %d comma-separated integers in ", TC_OPT_LIST_MAX);
	while (next_alt(&p, &a))
		if (a.is_interval) {
			tc_buf_puts(b, nint++ ? " or " : "");
			tc_buf_putn(b, a.s, a.n);
		}
	for (p = d->range; next_alt(&p, &a);)
		if (!a.is_interval) {
			tc_buf_puts(b, nword++ ? "|" : ", or ");
			tc_buf_putn(b, a.s, a.n);
		}
}

/* The values column of the table: the range, with ",..." for lists. */
static void put_values(tc_buf *b, const opt_def *d)
{
	tc_buf_puts(b, d->range);
	if (d->type == TC_OPT_LIST || d->type == TC_OPT_PERM)
		tc_buf_puts(b, ",...");
}

/* ---- set, get ---- */

/* A message made with printf's rules (owned; NULL when out of memory). */
static char *message(const char *fmt, ...) TC_PRINTF(1, 2);
static char *message(const char *fmt, ...)
{
	tc_buf b;
	va_list ap;
	tc_buf_init(&b);
	va_start(ap, fmt);
	tc_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	return tc_buf_take(&b);
}

/* Check name=value; 0 with the option's index and canonical value (owned),
 * or -1 with a message after prefix ("" or "line 3: ") in *msg (owned; NULL
 * when out of memory). */
static int check_pair(const char *name, const char *value, char **msg, const char *prefix,
	int *index, char **canon)
{
	int i = find_opt(name), j;
	tc_buf b;
	*canon = NULL;
	if (i < 0) {
		tc_buf_init(&b);
		for (j = 0; j < NOPTS; j++)
			tc_buf_printf(&b, "%s%s", j ? ", " : "", opt_table[j].name);
		*msg = message("%sunknown option '%s' (options: %s; see tcomp options)", prefix, name,
			b.s ? b.s : "?");
		tc_buf_free(&b);
		return -1;
	}
	if (tc_rt_opt_value(opt_table[i].type, opt_table[i].range, value, canon) < 0) {
		char why[96] = "", *list = NULL;
		tc_buf_init(&b);
		put_allowed(&b, &opt_table[i]);
		/* a list that is merely no permutation: say why */
		if (opt_table[i].type == TC_OPT_PERM &&
			tc_rt_opt_value(TC_OPT_LIST, opt_table[i].range, value, &list) == 0 && list)
			perm_problem(list, why, sizeof(why));
		tc_free(list);
		if (!*value)
			*msg = message("%soption '%s' has no value (allowed: %s)", prefix, name,
				b.s ? b.s : "?");
		else if (*why)
			*msg = message("%soption '%s' cannot be '%s': not a permutation (%s; allowed: %s)",
				prefix, name, value, why, b.s ? b.s : "?");
		else
			*msg = message("%soption '%s' cannot be '%s' (allowed: %s)", prefix, name, value,
				b.s ? b.s : "?");
		tc_buf_free(&b);
		return -1;
	}
	if (!*canon) {
		*msg = message("out of memory");
		return -1;
	}
	*index = i;
	return 0;
}

/* Record the message of a failed call (NULL: out of memory) in ctx. */
static int fail_with(tc_context *ctx, char *msg)
{
	tc_rt_set_error(ctx, "%s", msg ? msg : "out of memory");
	tc_free(msg);
	return -1;
}

int tc_rt_options_set(__tc_keep tc_options *o, const char *name, const char *value,
	__tc_give char **msg)
{
	int i;
	char *v;
	*msg = NULL;
	if (!o || !name || !value) {
		*msg = message("tc_options_set: NULL argument");
		return -1;
	}
	if (check_pair(name, value, msg, "", &i, &v) < 0)
		return -1;
	tc_free(o->value[i]);
	o->value[i] = v;
	return 0;
}

int tc_options_set(tc_options *o, const char *name, const char *value, tc_context *ctx)
{
	char *msg;
	return tc_rt_options_set(o, name, value, &msg) < 0 ? fail_with(ctx, msg) : 0;
}

const char *tc_options_get(const tc_options *o, const char *name)
{
	int i = find_opt(name);
	if (i < 0)
		return NULL;
	return o && o->value[i] ? o->value[i] : opt_table[i].def;
}

/* ---- text ---- */

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* Ends a name or a value. */
static int is_stop(char c)
{
	return !c || is_blank(c) || c == '\n' || c == ';' || c == '#';
}

int tc_rt_options_parse(__tc_keep tc_options *o, const char *text, __tc_give char **msg)
{
	tc_options *t;
	const char *p;
	int line = 1, i, st = -1;
	char prefix[32];
	*msg = NULL;
	if (!o || !text) {
		*msg = message("tc_options_parse: NULL argument");
		return -1;
	}
	if (!(t = tc_options_copy(o))) {
		*msg = message("out of memory");
		return -1;
	}
	for (p = text;;) {
		const char *name, *value;
		size_t nn, nv;
		char *n = NULL, *v = NULL, *canon;
		int idx, bad;
		while (is_blank(*p) || *p == '\n' || *p == ';')
			line += *p++ == '\n';
		if (*p == '#') {
			while (*p && *p != '\n')
				p++;
			continue;
		}
		if (!*p)
			break;
		snprintf(prefix, sizeof(prefix), "line %d: ", line);
		for (name = p; !is_stop(*p) && *p != '='; p++)
			;
		nn = (size_t)(p - name);
		while (is_blank(*p))
			p++;
		if (!nn || *p != '=') {
			const char *e = name;
			while (!is_stop(*e))
				e++;
			*msg = message("%sexpected NAME=VALUE but found '%.*s'", prefix,
				(int)(e - name), name);
			goto done;
		}
		for (p++; is_blank(*p); p++)
			;
		for (value = p; !is_stop(*p); p++)
			;
		nv = (size_t)(p - value);
		n = tc_malloc(nn + 1);
		v = tc_malloc(nv + 1);
		if (!n || !v) {
			tc_free(n);
			tc_free(v);
			*msg = message("out of memory");
			goto done;
		}
		memcpy(n, name, nn);
		n[nn] = 0;
		memcpy(v, value, nv);
		v[nv] = 0;
		bad = check_pair(n, v, msg, prefix, &idx, &canon) < 0;
		tc_free(n);
		tc_free(v);
		if (bad)
			goto done;
		tc_free(t->value[idx]);
		t->value[idx] = canon; /* a later pair overrides an earlier one */
	}
	for (i = 0; i < NOPTS; i++) { /* success: o takes t's values */
		char *x = o->value[i];
		o->value[i] = t->value[i];
		t->value[i] = x;
	}
	st = 0;
done:
	tc_options_free(t);
	return st;
}

int tc_options_parse(tc_options *o, const char *text, tc_context *ctx)
{
	char *msg;
	return tc_rt_options_parse(o, text, &msg) < 0 ? fail_with(ctx, msg) : 0;
}

char *tc_options_print(const tc_options *o)
{
	tc_buf b;
	int i;
	tc_buf_init(&b);
	for (i = 0; i < NOPTS; i++)
		tc_buf_printf(&b, "%s=%s\n", opt_table[i].name, tc_options_get(o, opt_table[i].name));
	return tc_buf_take(&b);
}

char *tc_options_describe(void)
{
	tc_buf b, v;
	int i, wn = 4, wv = 6;
	for (i = 0; i < NOPTS; i++) {
		int n = (int)strlen(opt_table[i].name);
		int nv = (int)strlen(opt_table[i].range) +
			(opt_table[i].type == TC_OPT_LIST || opt_table[i].type == TC_OPT_PERM ? 4 : 0);
		wn = n > wn ? n : wn;
		wv = nv > wv ? nv : wv;
	}
	tc_buf_init(&b);
	for (i = 0; i < NOPTS; i++) {
		tc_buf_init(&v);
		put_values(&v, &opt_table[i]);
		tc_buf_printf(&b, "%-*s  %-*s  default %-8s %s\n", wn, opt_table[i].name, wv,
			v.s ? v.s : "?", opt_table[i].def, opt_table[i].doc);
		tc_buf_free(&v);
	}
	return tc_buf_take(&b);
}

__tc_give char *tc_rt_options_key(__tc_keep const tc_options *o)
{
	tc_buf b;
	int i;
	tc_buf_init(&b);
	for (i = 0; i < NOPTS; i++)
		tc_buf_printf(&b, "%s%s=%s", i ? ";" : "", opt_table[i].name,
			tc_options_get(o, opt_table[i].name));
	return tc_buf_take(&b);
}

/* The sizes of a list option's value (validated when set), the first max
 * of them into out; their count (more than max when there are more), 0
 * for a word. */
static int size_list(const char *s, int64_t *out, int max)
{
	int n = 0;
	while (s && *s >= '0' && *s <= '9' && n < TC_OPT_LIST_MAX) {
		char *end;
		int64_t v = strtoll(s, &end, 10);
		if (n < max)
			out[n] = v;
		n++;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* An option whose words are auto and counts: the count, 0 for auto. */
static int count_or_auto(const tc_options *o, const char *name)
{
	const char *v = tc_options_get(o, name);
	return strcmp(v, "auto") ? atoi(v) : 0;
}

/* The schedule-pass settings of o. */
static void poly_opts(const tc_options *o, tc_poly_opts *out)
{
	const char *tile = tc_options_get(o, "tile"), *reg = tc_options_get(o, "regtile");
	int64_t perm[TC_POLY_MAX_TILE];
	int k;
	memset(out, 0, sizeof(*out));
	/* a permutation (checked when set) or auto: no list */
	out->ninterchange = size_list(tc_options_get(o, "interchange"), perm, TC_POLY_MAX_TILE);
	for (k = 0; k < out->ninterchange; k++)
		out->interchange[k] = (int)perm[k];
	out->order = strcmp(tc_options_get(o, "order"), "off") != 0;
	out->vecreduce = strcmp(tc_options_get(o, "fastmath"), "on") == 0 ||
		strcmp(tc_options_get(o, "vecreduce"), "off") != 0;
	out->parallel = !strcmp(tc_options_get(o, "parallel"), "off") ? 0
		: !strcmp(tc_options_get(o, "parallel"), "on") ? 1 : 2;
	out->unroll = strcmp(tc_options_get(o, "unroll"), "off") != 0;
	out->unroll_inner = count_or_auto(o, "unroll_inner");
	out->vector = count_or_auto(o, "vector");
	out->fusion = !strcmp(tc_options_get(o, "fusion"), "auto") ? TC_POLY_FUSE_AUTO
		: !strcmp(tc_options_get(o, "fusion"), "min") ? TC_POLY_FUSE_MIN
		: !strcmp(tc_options_get(o, "fusion"), "preserve3coincident")
		? TC_POLY_FUSE_PRESERVE3COINCIDENT : TC_POLY_FUSE_MAX;
	out->tile_auto = !strcmp(tile, "auto");
	out->regtile_auto = !strcmp(reg, "auto");
	out->ntile = size_list(tile, out->tile, TC_POLY_MAX_TILE);
	out->nregtile = size_list(reg, out->regtile, TC_POLY_MAX_TILE);
	out->nblock = size_list(tc_options_get(o, "block"), out->block, 3); /* more: an error of the gpu pass */
	out->ngrid = size_list(tc_options_get(o, "grid"), out->grid, 3);
	out->reduce = !strcmp(tc_options_get(o, "reduce"), "off") ? 0
		: !strcmp(tc_options_get(o, "reduce"), "on") ? 1 : 2;
	out->reduce_threads = count_or_auto(o, "reduce_threads");
	out->reduce_map = !strcmp(tc_options_get(o, "reduce_map"), "block") ? TC_POLY_REDUCE_MAP_BLOCK
		: !strcmp(tc_options_get(o, "reduce_map"), "warp") ? TC_POLY_REDUCE_MAP_WARP
		: TC_POLY_REDUCE_MAP_AUTO;
	out->shared = !strcmp(tc_options_get(o, "shared"), "off") ? 0
		: !strcmp(tc_options_get(o, "shared"), "on") ? 1 : 2;
	out->shared_tile = count_or_auto(o, "shared_tile");
}

/* The x86-64 level (codegen/opts.h) the cpu option names, 0 for host. */
static int cpu_level(const char *v)
{
	if (!strcmp(v, "x86-64"))
		return 1;
	return !strncmp(v, "x86-64-v", 8) ? v[8] - '0' : 0;
}

void tc_rt_opts_decode(__tc_keep const tc_options *o, __tc_keep tc_rt_opts *out)
{
	const char *share = tc_options_get(o, "share");
	memset(out, 0, sizeof(*out));
	snprintf(out->backend, sizeof(out->backend), "%s", tc_options_get(o, "target"));
	out->threads = count_or_auto(o, "threads");
	out->share = !strcmp(share, "off") ? TC_RT_SHARE_OFF
		: !strcmp(share, "row") ? TC_RT_SHARE_ROW : TC_RT_SHARE_ON;
	out->inline_temps = !strcmp(tc_options_get(o, "inline"), "on");
	out->pack = !strcmp(tc_options_get(o, "pack"), "on");
	out->parametric = !strcmp(tc_options_get(o, "sizes"), "parametric");
	out->sizes_auto = !strcmp(tc_options_get(o, "sizes"), "auto");
	poly_opts(o, &out->sched);
	out->cg.fastmath = strcmp(tc_options_get(o, "fastmath"), "on") == 0;
	out->cg.contract = out->cg.fastmath || strcmp(tc_options_get(o, "contract"), "on") == 0;
	out->cg.vecreduce = out->cg.fastmath || strcmp(tc_options_get(o, "vecreduce"), "off") != 0;
	out->cg.stream = !strcmp(tc_options_get(o, "stream"), "on") ? 2
		: !strcmp(tc_options_get(o, "stream"), "off") ? 0 : 1;
	out->cg.mask = !strcmp(tc_options_get(o, "mask"), "on") ? 1
		: !strcmp(tc_options_get(o, "mask"), "off") ? -1 : 0;
	out->cg.vector = count_or_auto(o, "vector");
	out->cg.unroll_inner = count_or_auto(o, "unroll_inner");
	out->cg.gpu_arch = !strncmp(tc_options_get(o, "gpu_arch"), "sm_", 3)
		? atoi(tc_options_get(o, "gpu_arch") + 3) : 0;
	out->cg.cpu = cpu_level(tc_options_get(o, "cpu"));
}

/* ---- the table, row by row ---- */

int tc_rt_opt_count(void)
{
	return NOPTS;
}

const char *tc_rt_opt_name(int i)
{
	return i >= 0 && i < NOPTS ? opt_table[i].name : NULL;
}

tc_opt_type tc_rt_opt_type(int i)
{
	return i >= 0 && i < NOPTS ? opt_table[i].type : (tc_opt_type)-1;
}

const char *tc_rt_opt_range(int i)
{
	return i >= 0 && i < NOPTS ? opt_table[i].range : NULL;
}

const char *tc_rt_opt_default(int i)
{
	return i >= 0 && i < NOPTS ? opt_table[i].def : NULL;
}

int tc_rt_options_is_set(__tc_keep const tc_options *o, int i)
{
	return o && i >= 0 && i < NOPTS && o->value[i] != NULL;
}
