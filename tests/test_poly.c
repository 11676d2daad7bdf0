/* Golden tests of the polyhedral stages through the public API: the isl
 * schedule tree and the isl AST (the loop nest) of corpus kernels.
 *
 *   matmul       one reduction (init and update statements)
 *   conv2d       a reduction then a bias: two statements the scheduler fuses
 *   softmax      three statements through two temporaries
 *   maxpool2x2   a strided window given by where ranges
 *   concat_rows  ?: over ranges given by a where clause
 *
 * For each, tc_module_emit(m, entry, "schedule") and (m, entry, "ast")
 * (parametric: sizes as parameters) must equal tests/golden/NAME.schedule
 * and tests/golden/NAME.ast byte for byte; for matmul and softmax also
 * tc_kernel_emit(k, "ast") for concrete shapes, which must equal
 * tests/golden/NAME_SHAPES.ast (the kernels are compiled with
 * target=interp: no JIT, but tc_kernel_emit still builds the AST
 * specialised to the shapes; and cpu=x86-64-v4, so that the register
 * tiles and cache blocks are the same on every host).  After an intended change of the schedule or
 * of the printing, regenerate the files with
 *
 *     TC_UPDATE_GOLDEN=1 ./build/tests/test_poly
 *
 * and review the diff (git diff tests/golden).
 *
 * Golden files pin isl's exact output, which a new isl version may change
 * harmlessly; so the tests also assert facts that do not depend on isl's
 * formatting: the schedule reads back into isl with the tc_kernel mark
 * under its domain, matmul's band (read by isl) is coincident on m and n
 * but not on the reduction dimension, conv2d's bias statement S1 is inside the loop
 * nest of the reduction S0 (fused), and the specialised matmul AST has
 * constant loop bounds.  The stages "schedule:PASS" and "schedule:all"
 * (the tree after each named pass) are checked on matmul: each pass's
 * marks appear from that pass on, the last pass's tree is the whole
 * schedule, and an unknown pass is an error listing the passes. */
#include <ctype.h>
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <isl/ctx.h>
#include <isl/id.h>
#include <isl/schedule.h>
#include <isl/schedule_node.h>

#include "tcomp.h"
#include "tests/testutil.h"

#define CORPUS_DIR TC_SOURCE_DIR "/tests/corpus"
#define GOLDEN_DIR TC_SOURCE_DIR "/tests/golden"

/* A kernel of the corpus, and for the specialised AST the shapes of its
 * float32 inputs (0-terminated; no shapes: parametric only). */
typedef struct poly_case {
	const char *name; /* golden file stem */
	const char *file; /* tests/corpus/<file>.tc */
	const char *entry;
	int nin;
	int64_t shapes[2][3];
	const char *shape_name; /* the specialised AST is NAME_<shape_name>.ast */
} poly_case;

static const poly_case cases[] = {
	{"matmul", "matmul", "matmul", 2, {{64, 48}, {48, 32}}, "64x48x32"},
	{"conv2d", "conv2d", "conv2d", 0, {{0}}, NULL},
	{"softmax", "softmax", "softmax", 1, {{37, 61}}, "37x61"},
	{"maxpool2x2", "pooling", "maxpool2x2", 0, {{0}}, NULL},
	{"concat_rows", "concat", "concat_rows", 0, {{0}}, NULL},
};

#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static const poly_case *find_case(const char *name)
{
	for (int i = 0; i < NCASES; i++)
		if (!strcmp(cases[i].name, name))
			return &cases[i];
	fail_msg("no case %s", name);
	return NULL;
}

/* ---- files ---- */

static int env_flag(const char *name)
{
	const char *s = getenv(name);
	return s && *s && strcmp(s, "0") != 0;
}

static void spit(const char *path, const char *text)
{
	FILE *fp = fopen(path, "wb");
	if (!fp)
		fail_msg("cannot write %s", path);
	size_t n = strlen(text);
	int ok = fwrite(text, 1, n, fp) == n;
	ok &= fclose(fp) == 0;
	if (!ok)
		fail_msg("cannot write %s", path);
}

/* text equals tests/golden/<file> byte for byte (or, with
 * TC_UPDATE_GOLDEN, becomes it). */
static void expect_golden(const char *text, const char *file)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, file);
	if (env_flag("TC_UPDATE_GOLDEN")) {
		spit(path, text);
		return;
	}
	char *want = tu_read_file(path);
	if (!want)
		fail_msg("%s is missing: run TC_UPDATE_GOLDEN=1 test_poly to create it", path);
	if (strcmp(want, text) != 0) {
		size_t i = 0;
		int line = 1;
		for (; want[i] && want[i] == text[i]; i++)
			line += want[i] == '\n';
		printf("expected (%s):\n%s\nactual:\n%s\n(first difference on line %d, byte %zu)\n",
			path, want, text, line, i);
		free(want);
		fail_msg("the text differs from %s; if the new text is right, rerun with "
			 "TC_UPDATE_GOLDEN=1 and review the diff", path);
	}
	free(want);
}

/* ---- emitting ---- */

typedef struct loaded {
	tc_context *ctx;
	tc_module *m;
} loaded;

static void load(loaded *l, const poly_case *c)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.tc", CORPUS_DIR, c->file);
	l->ctx = tc_context_new();
	assert_non_null(l->ctx);
	l->m = tc_module_load(l->ctx, path);
	if (!l->m)
		fail_msg("cannot load %s:\n%s", path, tc_context_error(l->ctx));
}

static void unload(loaded *l)
{
	tc_module_free(l->m);
	tc_context_free(l->ctx);
}

/* tc_module_emit(entry, stage): parametric. */
static char *emit(const poly_case *c, const char *stage)
{
	loaded l;
	load(&l, c);
	char *text = tc_module_emit(l.m, c->entry, stage);
	if (!text)
		fail_msg("tc_module_emit(%s, %s) failed:\n%s", c->entry, stage,
			tc_context_error(l.ctx));
	unload(&l);
	return text;
}

/* tc_kernel_emit(stage) of the kernel compiled with target=interp,
 * cpu=x86-64-v4 and the options text extra (or NULL) for the case's
 * shapes. */
static char *emit_specialised_with(const poly_case *c, const char *stage, const char *extra)
{
	loaded l;
	load(&l, c);
	tu_tensor in[2];
	const DLTensor *ins[2];
	for (int i = 0; i < c->nin; i++) {
		int ndim = 0;
		while (ndim < 3 && c->shapes[i][ndim])
			ndim++;
		tu_tensor_init(&in[i], TU_F32, c->shapes[i], ndim);
		ins[i] = &in[i].dl;
	}
	tc_options *o = tc_options_new();
	assert_non_null(o);
	assert_int_equal(tc_options_set(o, "target", "interp", l.ctx), 0);
	/* for x86-64-v4 whatever the host: the goldens' register tiles and
	 * cache blocks are its */
	assert_int_equal(tc_options_set(o, "cpu", "x86-64-v4", l.ctx), 0);
	if (extra)
		assert_int_equal(tc_options_parse(o, extra, l.ctx), 0);
	tc_kernel *k = tc_compile(l.m, c->entry, ins, c->nin, o);
	tc_options_free(o);
	for (int i = 0; i < c->nin; i++)
		tu_tensor_fini(&in[i]);
	if (!k)
		fail_msg("tc_compile(%s) failed:\n%s", c->entry, tc_context_error(l.ctx));
	char *text = tc_kernel_emit(k, stage);
	if (!text)
		fail_msg("tc_kernel_emit(%s, %s) failed:\n%s", c->entry, stage,
			tc_context_error(l.ctx));
	tc_kernel_free(k);
	unload(&l);
	return text;
}

static char *emit_specialised(const poly_case *c, const char *stage)
{
	return emit_specialised_with(c, stage, NULL);
}

/* ---- the golden tests ---- */

static void test_golden_schedule(void **state)
{
	const poly_case *c = *state;
	char file[128];
	char *text = emit(c, "schedule");
	snprintf(file, sizeof(file), "%s.schedule", c->name);
	expect_golden(text, file);
	tc_string_free(text);
}

static void test_golden_ast(void **state)
{
	const poly_case *c = *state;
	char file[128];
	char *text = emit(c, "ast");
	snprintf(file, sizeof(file), "%s.ast", c->name);
	expect_golden(text, file);
	tc_string_free(text);
}

static void test_golden_specialised_ast(void **state)
{
	const poly_case *c = *state;
	char file[128];
	char *text = emit_specialised(c, "ast");
	snprintf(file, sizeof(file), "%s_%s.ast", c->name, c->shape_name);
	expect_golden(text, file);
	tc_string_free(text);
}

/* Every .schedule and .ast file in tests/golden belongs to a case (no stale
 * golden file is left behind when a case goes). */
static void test_golden_set_is_complete(void **state)
{
	(void)state;
	DIR *dir = opendir(GOLDEN_DIR);
	assert_non_null(dir);
	struct dirent *e;
	int stale = 0;
	while ((e = readdir(dir))) {
		const char *dot = strrchr(e->d_name, '.');
		if (!dot || (strcmp(dot, ".schedule") && strcmp(dot, ".ast")))
			continue;
		int known = 0;
		for (int i = 0; i < NCASES && !known; i++) {
			char name[128];
			snprintf(name, sizeof(name), "%s.schedule", cases[i].name);
			known |= !strcmp(e->d_name, name);
			snprintf(name, sizeof(name), "%s.ast", cases[i].name);
			known |= !strcmp(e->d_name, name);
			if (cases[i].shape_name) {
				snprintf(name, sizeof(name), "%s_%s.ast", cases[i].name,
					cases[i].shape_name);
				known |= !strcmp(e->d_name, name);
			}
		}
		if (!known) {
			print_error("tests/golden/%s belongs to no case of test_poly\n", e->d_name);
			stale++;
		}
	}
	closedir(dir);
	assert_int_equal(stale, 0);
}

/* ================================================================
 * Facts that do not depend on isl's formatting.
 * ================================================================ */

/* The printed schedule read back into isl (which must accept it), and the
 * node under its domain, which must be the tc_kernel mark.  The caller
 * frees the schedule and the node. */
static isl_schedule *read_schedule(isl_ctx *ictx, const poly_case *c, isl_schedule_node **mark)
{
	char *text = emit(c, "schedule");
	isl_schedule *s = isl_schedule_read_from_str(ictx, text);
	if (!s)
		fail_msg("%s: isl cannot read the schedule:\n%s", c->name, text);
	tc_string_free(text);
	isl_schedule_node *root = isl_schedule_get_root(s);
	assert_int_equal(isl_schedule_node_get_type(root), isl_schedule_node_domain);
	assert_true(isl_schedule_node_has_children(root) == isl_bool_true);
	*mark = isl_schedule_node_child(root, 0);
	assert_non_null(*mark);
	if (isl_schedule_node_get_type(*mark) != isl_schedule_node_mark)
		fail_msg("%s: the domain's child is not a mark", c->name);
	isl_id *id = isl_schedule_node_mark_get_id(*mark);
	assert_string_equal(isl_id_get_name(id), "tc_kernel");
	isl_id_free(id);
	return s;
}

/* The printed schedule is an isl schedule whose domain holds the tc_kernel
 * mark (read back with isl, not by matching text); the AST carries the
 * mark as a comment. */
static void test_schedule_reads_back_with_the_mark(void **state)
{
	const poly_case *c = *state;
	isl_ctx *ictx = isl_ctx_alloc();
	assert_non_null(ictx);
	isl_schedule_node *mark;
	isl_schedule *s = read_schedule(ictx, c, &mark);
	isl_schedule_node_free(mark);
	isl_schedule_free(s);
	isl_ctx_free(ictx);

	char *text = emit(c, "ast");
	assert_true(tu_contains(text, "// tc_kernel"));
	tc_string_free(text);
}

/* matmul's schedule under the kernel mark: a tc_parallel mark above a band
 * (m), coincident (the parallel loop), then a band (r_k, n): the isl
 * scheduler's (m, n, r_k) with n, the stride-1 dimension of B and C, moved
 * innermost by the order pass, and m split off by the parallel pass.  n is
 * coincident, r_k not: the reduction carries a dependence. */
static void test_matmul_band_is_parallel_except_the_reduction(void **state)
{
	(void)state;
	isl_ctx *ictx = isl_ctx_alloc();
	assert_non_null(ictx);
	isl_schedule_node *mark;
	isl_schedule *s = read_schedule(ictx, find_case("matmul"), &mark);
	isl_schedule_node *par = isl_schedule_node_child(mark, 0);
	assert_int_equal(isl_schedule_node_get_type(par), isl_schedule_node_mark);
	isl_id *pid = isl_schedule_node_mark_get_id(par);
	assert_string_equal(isl_id_get_name(pid), "tc_parallel");
	isl_id_free(pid);
	isl_schedule_node *outer = isl_schedule_node_child(par, 0);
	assert_int_equal(isl_schedule_node_get_type(outer), isl_schedule_node_band);
	assert_int_equal(isl_schedule_node_band_n_member(outer), 1);
	assert_true(isl_schedule_node_band_member_get_coincident(outer, 0) == isl_bool_true);
	isl_schedule_node *band = isl_schedule_node_child(outer, 0);
	assert_int_equal(isl_schedule_node_get_type(band), isl_schedule_node_band);
	assert_int_equal(isl_schedule_node_band_n_member(band), 2);
	char flags[3];
	for (int i = 0; i < 2; i++)
		flags[i] = isl_schedule_node_band_member_get_coincident(band, i) == isl_bool_true ?
			'1' : '0';
	flags[2] = 0;
	assert_string_equal(flags, "01");
	assert_true(isl_schedule_node_band_get_permutable(band) == isl_bool_true);
	isl_schedule_node_free(band);
	isl_schedule_free(s);
	isl_ctx_free(ictx);
}

/* ---- reading the loop nest of a printed AST ---- */

/* The printed AST as lines (pointers into a copy); returns the count. */
typedef struct lines {
	char *buf;
	char *v[512];
	int n;
} lines;

static void split_lines(lines *l, const char *text)
{
	l->buf = strdup(text);
	assert_non_null(l->buf);
	l->n = 0;
	for (char *p = l->buf; *p && l->n < 512;) {
		l->v[l->n++] = p;
		char *nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = 0;
		p = nl + 1;
	}
}

static int indent_of(const char *s)
{
	int i = 0;
	while (s[i] == ' ')
		i++;
	return i;
}

/* The line of the first call of statement stmt ("S1" matches "S1(...)",
 * not "S1_init(...)"), or -1. */
static int stmt_line(const lines *l, const char *stmt)
{
	size_t n = strlen(stmt);
	for (int i = 0; i < l->n; i++) {
		const char *s = l->v[i] + indent_of(l->v[i]);
		if (!strncmp(s, stmt, n) && s[n] == '(')
			return i;
	}
	return -1;
}

/* The "for" lines enclosing line at: walking back, each line indented less
 * than everything since is an enclosing construct (isl indents each nested
 * body by two more spaces).  Writes their line numbers, innermost first,
 * and returns the count. */
static int enclosing_loops(const lines *l, int at, int *out, int max)
{
	int n = 0, cur = indent_of(l->v[at]);
	for (int i = at - 1; i >= 0 && cur > 0; i--) {
		int ind = indent_of(l->v[i]);
		if (ind >= cur || !l->v[i][ind])
			continue;
		cur = ind;
		if (!strncmp(l->v[i] + ind, "for (", 5) && n < max)
			out[n++] = i;
	}
	return n;
}

/* conv2d's bias statement S1 runs inside the loop nest of the reduction S0:
 * one pass over the output rows.  S1 is in 4 loops (n, f, h, and its own
 * w loop after the reduction of the row), of which the outer three are S0's
 * outer three; S0 is in 7 (n, f, h, c, w, kh, kw: the order pass moved w,
 * the stride-1 dimension of O, inside the channel loop). */
static void test_conv2d_bias_is_fused_into_the_reduction_nest(void **state)
{
	(void)state;
	char *text = emit(find_case("conv2d"), "ast");
	lines l;
	split_lines(&l, text);
	int s0 = stmt_line(&l, "S0"), s1 = stmt_line(&l, "S1");
	if (s0 < 0 || s1 < 0)
		fail_msg("conv2d's AST lacks S0 or S1:\n%s", text);
	int l0[16], l1[16];
	int n0 = enclosing_loops(&l, s0, l0, 16), n1 = enclosing_loops(&l, s1, l1, 16);
	if (n0 != 7 || n1 != 4) {
		print_error("%s\n", text);
		fail_msg("S0 is in %d loops (expected 7), S1 in %d (expected 4)", n0, n1);
	}
	/* Innermost first: S1's outer three loops are S0's outer three. */
	for (int i = 1; i < 4; i++)
		if (l1[i] != l0[3 + i]) {
			print_error("%s\n", text);
			fail_msg("S1's loop on line %d is not a loop of S0", l1[i] + 1);
		}
	free(l.buf);
	tc_string_free(text);
}

/* Whether the "for" headers of text name only iterators (c0, c1, ...,
 * and tc_p0, ... of a register tile's point loops): numbers and operators
 * otherwise, no size parameters.  The names found otherwise go to bad. */
static int loop_bounds_are_constant(const char *text, char *bad, size_t n)
{
	lines l;
	split_lines(&l, text);
	int constant = 1, loops = 0;
	bad[0] = 0;
	for (int i = 0; i < l.n; i++) {
		const char *s = l.v[i] + indent_of(l.v[i]);
		if (strncmp(s, "for (", 5))
			continue;
		loops++;
		for (const char *p = s; *p;) {
			if (!isalpha((unsigned char)*p) && *p != '_') {
				p++;
				continue;
			}
			const char *b = p;
			while (isalnum((unsigned char)*p) || *p == '_')
				p++;
			size_t len = (size_t)(p - b);
			size_t at = len > 4 && !strncmp(b, "tc_p", 4) ? 4 : 1;
			int iterator = (b[0] == 'c' || at == 4) && len > at;
			for (size_t k = at; iterator && k < len; k++)
				iterator = isdigit((unsigned char)b[k]);
			if (iterator || (len == 3 && !strncmp(b, "for", 3)) ||
				(len == 3 && !strncmp(b, "int", 3)))
				continue;
			constant = 0;
			if (strlen(bad) + len + 2 < n)
				strncat(strcat(bad, bad[0] ? " " : ""), b, len);
		}
	}
	free(l.buf);
	assert_true(loops > 0);
	return constant;
}

/* A tile piece short of its rows runs them in chunks that keep enough
 * sums in flight (polyhedral/ast.c, short_rows_chunk): at 64x48x64 the
 * tiles are 6 rows of 4 vectors (N = 64), and the 4 rows left at 60 run as
 * 2 chunks of 2 rows, the loop over the chunks outermost under tc_rolled;
 * at 64x48x32 (rows of 2 vectors) only all 4 rows keep 8 sums in flight,
 * and that piece stays as it was (the golden AST above). */
static void test_short_rows_run_in_chunks(void **state)
{
	(void)state;
	poly_case c = *find_case("matmul");
	char *text;
	c.shapes[1][1] = 64;
	text = emit_specialised(&c, "ast");
	assert_true(tu_contains(text, "// tc_unroll\n      for (int tc_p1 = 0; tc_p1 <= 5; "
				      "tc_p1 += 1) {\n        // tc_unrolled\n"));
	assert_true(tu_contains(text, "dimension 0 short of 6\n    // tc_rolled\n"
				      "    for (int tc_p0 = 0; tc_p0 <= 1; tc_p0 += 1)\n"
				      "      for (int tc_p1 = 0; tc_p1 <= 47; tc_p1 += 1) {\n"
				      "        // tc_unroll\n"
				      "        for (int tc_p2 = 0; tc_p2 <= 1; tc_p2 += 1) {\n"));
	assert_true(tu_contains(text, "S0(tc_o0 + (2 * tc_p0 + tc_p2), tc_o1 + tc_p3, "
				      "tc_o2 + tc_p1);"));
	tc_string_free(text);
	text = emit_specialised(find_case("matmul"), "ast");
	assert_null(strstr(text, "tc_rolled"));
	tc_string_free(text);
}

/* Specialised to 64x48x32, matmul's loops have numbers for bounds; the
 * parametric ones name M, K and N, in loop order (m, r_k, n) (so the check
 * can see names at all). */
static void test_specialised_matmul_has_constant_bounds(void **state)
{
	(void)state;
	const poly_case *c = find_case("matmul");
	char bad[256];
	char *text = emit_specialised(c, "ast");
	if (!loop_bounds_are_constant(text, bad, sizeof(bad)))
		fail_msg("the specialised AST's loops name %s:\n%s", bad, text);
	/* register tiles of 12 rows by 2 vectors (N = 32: 24 accumulators):
	 * a tile at every 12th row (tile indices c0 = 0, ..., 5: origins 0,
	 * 12, ..., 60), its point loops built apart (polyhedral/ast.c): 12
	 * rows where the tile is whole, 4 in the partial one at 60; the rows
	 * are loops the code generator unrolls (between the marks) */
	assert_true(tu_contains(text, "c0 <= 5; c0 += 1"));
	assert_true(tu_contains(text, "S0(12 * c0, 0, 0);"));
	assert_true(tu_contains(text, "// tc_unroll\n      for (int tc_p1 = 0; tc_p1 <= 11; "
				      "tc_p1 += 1) {\n        // tc_unrolled\n"));
	assert_true(tu_contains(text, "// tc_unroll\n      for (int tc_p1 = 0; tc_p1 <= 3; "
				      "tc_p1 += 1) {\n        // tc_unrolled\n"));
	assert_true(tu_contains(text, "S0(tc_o0 + tc_p1, "));
	assert_true(tu_contains(text, "<= 31"));
	assert_true(tu_contains(text, "<= 47"));
	tc_string_free(text);

	text = emit(c, "ast");
	assert_false(loop_bounds_are_constant(text, bad, sizeof(bad)));
	assert_string_equal(bad, "M K N");
	tc_string_free(text);
}

/* A sum over a pad(e, 0) factor skips the padding (docs/language.md 6.8):
 * lowering drops the select and gives the statement its bounds tests as a
 * guard, which restricts the update's domain, so the loop over the
 * window's taps gets bounds instead of a test per term, and the init of
 * '+=!' still covers every output element. */
static void test_padded_sum_restricts_its_domain(void **state)
{
	(void)state;
	const poly_case c = {"pad_let_factor", "pad", "let_factor", 2, {{16}, {3}}, "16x3"};
	char *text = emit(&c, "ir");
	assert_true(tu_contains(text, "S0: O[i] +=! (A[((i + r_k) - 1:int32)] * Kw[r_k])\n"));
	assert_true(tu_contains(text, "      guard: ((0:int64 <= int64(((i + r_k) - 1:int32))) && "
				      "(int64(((i + r_k) - 1:int32)) < int64(N)))\n"));
	assert_false(tu_contains(text, " ? "));
	tc_string_free(text);
	text = emit_specialised(&c, "ast");
	assert_true(tu_contains(text, "for (int c0 = 0; c0 <= 15; c0 += 1) {\n  S0_init(c0);\n"
				      "  for (int c1 = max(0, -c0 + 1); c1 <= min(2, -c0 + 16); c1 += 1)\n"
				      "    S0(c0, c1);\n}"));
	assert_false(tu_contains(text, "if ("));
	tc_string_free(text);
	/* a pad that is not a zero factor of a sum stays a select */
	const poly_case sel = {"pad_shift_left", "pad", "shift_left", 1, {{16}}, "16"};
	text = emit(&sel, "ir");
	assert_true(tu_contains(text, " ? A[(i + 1:int32)] : -1:float32)"));
	assert_false(tu_contains(text, "guard:"));
	tc_string_free(text);
}

/* A sum whose whole right side is c ? x : 0 with c affine skips the terms
 * where c is false the same way (docs/language.md 6.8): tri_matmul's
 * band becomes the statement's guard and its loops triangular bounds, and
 * so as a factor of the product (tri_factor); a condition that reads a
 * tensor stays a select. */
static void test_guarded_sum_restricts_its_domain(void **state)
{
	(void)state;
	const poly_case c = {"tri_matmul", "guarded", "tri_matmul", 2, {{7, 13}, {13, 7}}, "7x13"};
	char *text = emit(&c, "ir");
	assert_false(tu_contains(text, " ? "));
	assert_true(tu_contains(text, "guard: "));
	tc_string_free(text);
	text = emit_specialised(&c, "ast");
	assert_false(tu_contains(text, "if ("));
	tc_string_free(text);
	/* the band as a factor of the product: the same guard */
	const poly_case fac = {"tri_factor", "guarded", "tri_factor", 2, {{7, 13}, {13, 7}}, "7x13"};
	text = emit(&fac, "ir");
	assert_false(tu_contains(text, " ? "));
	assert_true(tu_contains(text, "guard: "));
	tc_string_free(text);
	const poly_case sel = {"masked_convolve", "guarded", "masked_convolve", 0, {{0}}, NULL};
	text = emit(&sel, "ir");
	assert_true(tu_contains(text, " ? "));
	assert_false(tu_contains(text, "guard:"));
	tc_string_free(text);
}

/* tcomp emit --stage schedule:PASS: the tree after each named pass of the
 * CPU list, as the same kernel's full schedule would be built.  matmul 64
 * (specialised, parallel=on: under parallel=auto its register tiles are
 * too little work to share): no mark before "regtile" puts the register
 * tile's, no parallel mark before "parallel", no kernel mark before
 * "mark", and the tree after the last pass is the whole schedule. */
static void test_schedule_after_each_pass(void **state)
{
	static const char *const passes[] = {"scheduler", "fuse-nests", "pack", "merge", "order",
		"interchange", "tile", "regtile", "parallel", "check", "hoist", "mark", "rowbuf"};
	const poly_case *c = find_case("matmul");
	char *full = emit_specialised_with(c, "schedule", "parallel=on"), *all = emit_specialised_with(c, "schedule:all", "parallel=on");
	const char *at = all;
	(void)state;
	for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++) {
		char stage[64], head[64];
		char *text;
		snprintf(stage, sizeof(stage), "schedule:%s", passes[i]);
		text = emit_specialised_with(c, stage, "parallel=on");
		assert_int_equal(strstr(text, "tc_regtile") != NULL, i >= 7);
		assert_int_equal(strstr(text, "tc_parallel") != NULL, i >= 8);
		assert_int_equal(strstr(text, "tc_kernel") != NULL, i >= 11);
		/* schedule:all: every pass's tree under its name, in order */
		snprintf(head, sizeof(head), "# after %s\n", passes[i]);
		assert_non_null(at = strstr(at, head));
		at += strlen(head);
		assert_int_equal(strncmp(at, text, strlen(text)), 0);
		if (i == sizeof(passes) / sizeof(passes[0]) - 1)
			assert_string_equal(text, full);
		tc_string_free(text);
	}
	tc_string_free(full);
	tc_string_free(all);
}

/* schedule:NAME also without shapes; a name of no pass is an error that
 * lists the passes. */
static void test_schedule_after_pass_parametric_and_unknown(void **state)
{
	const poly_case *c = find_case("matmul");
	char *text = emit(c, "schedule:order");
	loaded l;
	(void)state;
	assert_true(tu_contains(text, "domain"));
	assert_null(strstr(text, "tc_kernel"));
	tc_string_free(text);
	load(&l, c);
	assert_null(tc_module_emit(l.m, c->entry, "schedule:tiles"));
	assert_true(tu_contains(tc_context_error(l.ctx),
		"expected the name of a schedule pass (scheduler, fusion, fuse-nests, pack, merge, order, "
		"interchange, tile, regtile, parallel, check, hoist, collapse, mark, rowbuf) but found 'tiles'"));
	unload(&l);
}

int main(void)
{
	struct CMUnitTest tests[4 * NCASES + 9];
	char names[4 * NCASES][96];
	int n = 0, nn = 0;
	for (int i = 0; i < NCASES; i++) {
		static const char *kinds[] = {"schedule", "ast", "specialised_ast", "mark"};
		void (*fns[])(void **) = {test_golden_schedule, test_golden_ast,
			test_golden_specialised_ast, test_schedule_reads_back_with_the_mark};
		for (int k = 0; k < 4; k++) {
			if (k == 2 && !cases[i].shape_name)
				continue;
			snprintf(names[nn], sizeof(names[nn]), "%s_%s", kinds[k], cases[i].name);
			tests[n] = (struct CMUnitTest){names[nn++], fns[k], NULL, NULL,
				(void *)&cases[i]};
			n++;
		}
	}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_golden_set_is_complete);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(
		test_matmul_band_is_parallel_except_the_reduction);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(
		test_conv2d_bias_is_fused_into_the_reduction_nest);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_specialised_matmul_has_constant_bounds);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_short_rows_run_in_chunks);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_padded_sum_restricts_its_domain);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_guarded_sum_restricts_its_domain);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_schedule_after_each_pass);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(
		test_schedule_after_pass_parametric_and_unknown);
	return _cmocka_run_group_tests("poly", tests, (size_t)n, NULL, NULL);
}
