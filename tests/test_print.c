/* Tests of the .tc printer (tc_ast_print_source, lang/astprint.c) and of the
 * canonical form built on it (tc_ir_canonical, ir/canon.c).
 *
 * The round trip: every def of every file of tests/corpus, bench/kernels.tc
 * and examples/, and small defs written here for the constructs the corpus
 * may lack, is printed; the text is parsed and checked again and must give
 * no errors (and no warnings the original did not have), print the same
 * text again (a fixed point), and have the original's canonical text and
 * hash (the kernel cache's key).  Also pinned: the plain printer's layout,
 * the order and kinds of names a renamer is given, a renamed print, and
 * canonical texts and hashes of defs with where ranges, lets and exists
 * (bytes the kernel cache depends on). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir/ir.h"
#include "lang/ast.h"
#include "lang/diag.h"

/* ---- helpers ---- */

/* A parsed and checked source; its diagnostics are kept, not asserted. */
typedef struct checked {
	tc_arena *ar;
	tc_source *src;
	tc_diags d;
	tc_program *prog;
} checked;

static void check_text(checked *c, const char *name, const char *text)
{
	c->ar = tc_arena_new();
	c->src = tc_source_new(name, text, strlen(text));
	assert_non_null(c->ar);
	assert_non_null(c->src);
	tc_diags_init(&c->d, c->src);
	c->prog = tc_parse(c->ar, c->src, &c->d);
	assert_non_null(c->prog);
	if (!c->d.nerrors)
		tc_sema_check(c->prog, &c->d);
}

static void checked_free(checked *c)
{
	tc_diags_clear(&c->d);
	tc_arena_free(c->ar);
	tc_source_free(c->src);
}

static char *render(const tc_diags *d)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_diags_render(d, ~0u, &b);
	tc_buf_puts(&b, "");
	return tc_buf_take(&b);
}

/* def printed with rn (NULL: names as written); the caller frees it. */
static char *print_def(const tc_def *def, tc_rename_fn rn, void *ud)
{
	tc_buf b;
	char *s;
	tc_buf_init(&b);
	tc_ast_print_source(def, rn, ud, &b);
	assert_false(b.oom);
	s = tc_buf_take(&b);
	assert_non_null(s);
	return s;
}

static char *canonical(const tc_def *def)
{
	tc_buf b;
	char *s;
	tc_buf_init(&b);
	tc_ir_canonical(def, &b);
	assert_false(b.oom);
	s = tc_buf_take(&b);
	assert_non_null(s);
	return s;
}

/* Does d have a warning with message msg? */
static int has_warning(const tc_diags *d, const char *msg)
{
	int i;
	for (i = 0; d && i < d->n; i++)
		if (d->v[i].sev == TC_SEV_WARNING && !strcmp(d->v[i].msg, msg))
			return 1;
	return 0;
}

/* Are a and b the same tree?  Float literals must read back as the same
 * double: the printer writes as many digits as that takes. */
static int same_expr(const tc_expr *a, const tc_expr *b)
{
	int i;
	if (a->kind != b->kind || a->nargs != b->nargs)
		return 0;
	switch (a->kind) {
	case TC_AST_INT:
		if (a->ival != b->ival)
			return 0;
		break;
	case TC_AST_FLOAT:
		if (a->fval < b->fval || a->fval > b->fval)
			return 0;
		break;
	case TC_AST_IDENT:
	case TC_AST_CALL:
		if (strcmp(a->name, b->name))
			return 0;
		break;
	case TC_AST_CAST:
		if (a->cast_type != b->cast_type)
			return 0;
		break;
	case TC_AST_UNARY:
	case TC_AST_BINARY:
		if (a->op != b->op)
			return 0;
		break;
	case TC_AST_TERNARY:
		break;
	}
	for (i = 0; i < a->nargs; i++)
		if (!same_expr(a->args[i], b->args[i]))
			return 0;
	return 1;
}

static int same_decl(const tc_decl *a, const tc_decl *b)
{
	int i;
	if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->has_shape != b->has_shape ||
		a->ndims != b->ndims)
		return 0;
	for (i = 0; i < a->ndims; i++)
		if (a->dims[i].name ? !b->dims[i].name || strcmp(a->dims[i].name, b->dims[i].name)
				    : b->dims[i].name || a->dims[i].value != b->dims[i].value)
			return 0;
	return 1;
}

static int same_where(const tc_where *a, const tc_where *b)
{
	if (a->kind != b->kind)
		return 0;
	if (a->kind == TC_WHERE_RANGE)
		return !strcmp(a->name, b->name) && same_expr(a->lo, b->lo) && same_expr(a->hi, b->hi);
	if (a->kind == TC_WHERE_LET && strcmp(a->name, b->name))
		return 0;
	return same_expr(a->val, b->val);
}

static int same_stmt(const tc_stmt *a, const tc_stmt *b)
{
	int i;
	if (strcmp(a->lhs, b->lhs) || a->nidx != b->nidx || a->red != b->red ||
		a->init != b->init || a->nwhere != b->nwhere || !same_expr(a->rhs, b->rhs))
		return 0;
	if (!a->sub != !b->sub)
		return 0;
	for (i = 0; i < a->nidx; i++)
		if (a->sub && (a->sub[i] || b->sub[i])) { /* a gathered subscript */
			if (!a->sub[i] || !b->sub[i] || !same_expr(a->sub[i], b->sub[i]))
				return 0;
		} else if (strcmp(a->idx[i], b->idx[i])) {
			return 0;
		}
	for (i = 0; i < a->nwhere; i++)
		if (!same_where(&a->where[i], &b->where[i]))
			return 0;
	return 1;
}

/* Do a and b have the same syntax (all but locations and <=>)? */
static int same_def(const tc_def *a, const tc_def *b)
{
	int i;
	if (strcmp(a->name, b->name) || a->nparams != b->nparams || a->nrets != b->nrets ||
		a->nstmts != b->nstmts)
		return 0;
	for (i = 0; i < a->nparams; i++)
		if (!same_decl(&a->params[i], &b->params[i]))
			return 0;
	for (i = 0; i < a->nrets; i++)
		if (!same_decl(&a->rets[i], &b->rets[i]))
			return 0;
	for (i = 0; i < a->nstmts; i++)
		if (!same_stmt(a->stmts[i], b->stmts[i]))
			return 0;
	return 1;
}

static char *tree(const tc_def *def)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_ast_print_def(def, &b);
	return tc_buf_take(&b);
}

/* The round trip of def, which checked without errors: its plain print
 * parses and checks without errors, with no warnings but those of orig
 * (the original's diagnostics; NULL: none allowed), as one def with the
 * same syntax tree that prints the same text and has the same canonical
 * text and hash. */
static void assert_prints_back(const tc_def *def, const char *what, const tc_diags *orig)
{
	char *text = print_def(def, NULL, NULL), *again, *c1, *c2;
	checked c;
	int i;

	assert_true(def->ok);
	check_text(&c, "printed.tc", text);
	for (i = 0; i < c.d.n; i++)
		if (c.d.v[i].sev == TC_SEV_ERROR ||
			(c.d.v[i].sev == TC_SEV_WARNING && !has_warning(orig, c.d.v[i].msg)))
			fail_msg("%s: the printed text\n%s\ngives\n%s", what, text, render(&c.d));
	assert_int_equal(c.prog->ndefs, 1);
	assert_true(c.prog->defs[0]->ok);
	if (!same_def(def, c.prog->defs[0]))
		fail_msg("%s: the printed text\n%s\nparses as\n%s\nnot as\n%s", what, text,
			tree(c.prog->defs[0]), tree(def));

	again = print_def(c.prog->defs[0], NULL, NULL);
	if (strcmp(again, text))
		fail_msg("%s: printing is not a fixed point:\n%s\nprints as\n%s", what, text, again);

	c1 = canonical(def);
	c2 = canonical(c.prog->defs[0]);
	if (strcmp(c1, c2))
		fail_msg("%s: the canonical text changed:\n%s\nbecame\n%s", what, c1, c2);
	assert_true(tc_ir_hash(def) == tc_ir_hash(c.prog->defs[0]));

	tc_free(text);
	tc_free(again);
	tc_free(c1);
	tc_free(c2);
	checked_free(&c);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;
	if (!f)
		fail_msg("cannot open %s", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	s = malloc((size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = 0;
	fclose(f);
	return s;
}

/* The round trip of every def of the file at path; returns their number. */
static int file_prints_back(const char *path)
{
	char *text = slurp(path), what[1200];
	checked c;
	int i;

	check_text(&c, path, text);
	if (c.d.nerrors)
		fail_msg("%s does not check:\n%s", path, render(&c.d));
	assert_true(c.prog->ndefs > 0);
	for (i = 0; i < c.prog->ndefs; i++) {
		snprintf(what, sizeof(what), "%s, def %s", path, c.prog->defs[i]->name);
		assert_prints_back(c.prog->defs[i], what, &c.d);
	}
	i = c.prog->ndefs;
	checked_free(&c);
	free(text);
	return i;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The round trip of every .tc file of a folder, in name order; adds the
 * number of files and defs. */
static void folder_prints_back(const char *dir, int *nfiles, int *ndefs)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	char *names[256], path[1100];
	int n = 0, i;

	if (!dp)
		fail_msg("cannot open %s", dir);
	while ((e = readdir(dp))) {
		size_t len = strlen(e->d_name);
		if (len > 3 && !strcmp(e->d_name + len - 3, ".tc")) {
			assert_true(n < 256);
			names[n++] = strdup(e->d_name);
		}
	}
	closedir(dp);
	qsort(names, (size_t)n, sizeof(names[0]), compare_names);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		*ndefs += file_prints_back(path);
		free(names[i]);
	}
	*nfiles += n;
}

/* The round trip of every def of text, which must check without diagnostics. */
static void text_prints_back(const char *text)
{
	checked c;
	int i;
	check_text(&c, "t.tc", text);
	if (c.d.n)
		fail_msg("the test's def does not check cleanly:\n%s\n%s", text, render(&c.d));
	for (i = 0; i < c.prog->ndefs; i++)
		assert_prints_back(c.prog->defs[i], c.prog->defs[i]->name, NULL);
	checked_free(&c);
}

/* ---- round trips ---- */

static void test_every_corpus_bench_and_example_def_prints_back(void **state)
{
	int nfiles = 0, ndefs = 0;
	(void)state;
	folder_prints_back(TC_SOURCE_DIR "/tests/corpus", &nfiles, &ndefs);
	ndefs += file_prints_back(TC_SOURCE_DIR "/bench/kernels.tc");
	nfiles++;
	folder_prints_back(TC_SOURCE_DIR "/examples", &nfiles, &ndefs);
	printf("printed %d defs of %d files back\n", ndefs, nfiles);
	/* 100 when this test was written: a smaller number means files were missed */
	assert_true(ndefs >= 100);
}

/* Every reduction operator, with and without '!'. */
static const char reductions_tc[] =
	"def reductions(float(N,M) A) -> (S, P, Lo, Hi, S2, P2, Lo2, Hi2) {\n"
	"  S(i) +=! A(i,r_j)\n"
	"  P(i) *=! A(i,r_j)\n"
	"  Lo(i) min=! A(i,r_j)\n"
	"  Hi(i) max=! A(i,r_j)\n"
	"  S2(i) = 0.0 where i in 0:N\n"
	"  S2(i) += A(i,r_j)\n"
	"  P2(i) = 1.0 where i in 0:N\n"
	"  P2(i) *= A(i,r_j)\n"
	"  Lo2(i) = A(i,0)\n"
	"  Lo2(i) min= A(i,r_j)\n"
	"  Hi2(i) = A(i,0)\n"
	"  Hi2(i)max=A(i,r_j)\n"
	"}\n";

/* Operators of every precedence level, ?: nested both ways, casts, calls,
 * literals of every form and negative constants. */
static const char exprs_tc[] =
	"def exprs(float(N) A, int32(N) I, float64(N) D) -> (O, J, B, E, K) {\n"
	"  O(i) = i > 0 && i < N - 1 || !(A(i) >= 0.5) ? -A(i) : (A(i) != 0 ? 1e-5 : -0.25)\n"
	"  J(i) = -2147483648 + I(i) / 3 % -7 - -I(i) * (2 - 5) - (I(i) - 1 - 1)\n"
	"  B(i) = I(i) <= 2 == (I(i) >= 3) && !(I(i) > 1 || I(i) < 0)\n"
	"  E(i) = float64(int8(I(i))) + D(i) * 3000000000 + float16(1.5E3) + min(i, 4)\n"
	"         + max(-3.0, fabs(A(i))) + 1e30 + 2.5e-3 + 1. + 0012 + -(-D(i))\n"
	"  K(i) = (i > 1 ? i < 3 ? 1 : 2 : 3) + ((i > 1 ? 4 : 5) > 4 ? 6 : 7) + -(i + 1) > 0\n"
	"         || !(i > 0) ? 8 : 9 where i in 0:N\n"
	"}\n";

/* where ranges, lets (one using another), exists, rank 0 (declared with
 * and without parentheses), a constant extent, a declared output shape and
 * a temporary. */
static const char clauses_tc[] =
	"def ranges(float(N) A, float(4,N) W, float(M) Z) -> (float(M) O) {\n"
	"  O(i) +=! A(2 * i + k) * W(k, i) * float(y) + Z(i) where i in 0:M, k in 0:3, x = k + 1, y = x * x\n"
	"}\n"
	"def lets(float(N) A, double s) -> (O, int8 r) {\n"
	"  T(i) = u * v where u = A(i) + 1, v = u - 1\n"
	"  O(i) = T(i) + -T(i) * s where exists A(i), exists T(0)\n"
	"  r() = int8(3)\n"
	"}\n"
	"def shift(float(N) A) -> (O) {\n"
	"  O(i) = i > 0 ? A(i-1) : 0 where exists A(i)\n"
	"}\n";

/* Comments, odd layout, redundant parentheses, <=>, float and double,
 * numbers spelled two ways, lets. */
static const char fc_tc[] =
	"# a fully connected layer\n"
	"def fc ( float(B,K) In, float(O,K) W, float(O) Bias, double s ) -> ( float(B,O) Out, T ) {\n"
	"    Out(b,o) +=! (In(b, r_k)) * W(o, r_k)   <=> matmul(In, W)   # the product\n"
	"    Out(b,o) = Out(b,o) + Bias(o)\n"
	"    Out(b,o) = fmax(Out(b,o), 0) where b in 0:B\n"
	"    T(b) max=! Out(b,r_o) * 2.50 + -1E3 * r where r = s * s, exists Out(b, 0)\n"
	"    T(b) = T(b) * r where r = 2\n"
	"}\n";

static void test_reduction_operators_print_back(void **state)
{
	(void)state;
	text_prints_back(reductions_tc);
}

static void test_expressions_print_back(void **state)
{
	(void)state;
	text_prints_back(exprs_tc);
}

static void test_clauses_and_declarations_print_back(void **state)
{
	(void)state;
	text_prints_back(clauses_tc);
	text_prints_back(fc_tc);
}

/* A float64 constant keeps every digit it needs: the plain text and the
 * canonical form of two defs whose constants differ in the 10th digit
 * differ, so the kernel cache keys them apart; a constant written with
 * fewer digits prints as written. */
static void test_float64_constants_keep_their_digits(void **state)
{
	static const char *text =
		"def a(double(N) X) -> (Y) { Y(i) = X(i) * 0.1234567891 + 0.25 }\n"
		"def b(double(N) X) -> (Y) { Y(i) = X(i) * 0.1234567892 + 0.25 }\n";
	char *pa, *pb, *ca, *cb;
	checked c;
	(void)state;
	check_text(&c, "t.tc", text);
	assert_int_equal(c.d.n, 0);
	pa = print_def(c.prog->defs[0], NULL, NULL);
	pb = print_def(c.prog->defs[1], NULL, NULL);
	assert_non_null(strstr(pa, "0.1234567891"));
	assert_non_null(strstr(pb, "0.1234567892"));
	assert_non_null(strstr(pa, "0.25"));
	ca = canonical(c.prog->defs[0]);
	cb = canonical(c.prog->defs[1]);
	assert_string_not_equal(ca, cb);
	assert_true(tc_ir_hash(c.prog->defs[0]) != tc_ir_hash(c.prog->defs[1]));
	text_prints_back(text);
	tc_free(pa);
	tc_free(pb);
	tc_free(ca);
	tc_free(cb);
	checked_free(&c);
}

/* ---- layout ---- */

/* The plain printer: names as written, types spelled canonically, one
 * statement a line; comments, layout, redundant parentheses and <=> gone. */
static void test_plain_print_layout(void **state)
{
	checked c;
	char *s;
	(void)state;
	check_text(&c, "t.tc", fc_tc);
	assert_int_equal(c.d.n, 0);
	s = print_def(c.prog->defs[0], NULL, NULL);
	assert_string_equal(s,
		"def fc(float32(B,K) In, float32(O,K) W, float32(O) Bias, float64 s) -> (float32(B,O) Out, T) {\n"
		"  Out(b,o) +=! In(b, r_k) * W(o, r_k)\n"
		"  Out(b,o) = Out(b, o) + Bias(o)\n"
		"  Out(b,o) = fmax(Out(b, o), 0) where b in 0:B\n"
		"  T(b) max=! (Out(b, r_o) * 2.5) + (-1000.0 * r) where r = s * s, exists Out(b, 0)\n"
		"  T(b) = T(b) * r where r = 2\n"
		"}\n");
	tc_free(s);
	checked_free(&c);
}

/* ---- renamers ---- */

/* Records every name and its kind ("D:f G:N ... U:fmax"), keeps names. */
static const char *record_name(void *ud, tc_name_kind kind, const char *name)
{
	static const char kinds[] = {[TC_NAME_DEF] = 'D', [TC_NAME_GLOBAL] = 'G',
		[TC_NAME_LOCAL] = 'L', [TC_NAME_USE] = 'U'};
	tc_buf *b = ud;
	tc_buf_printf(b, "%s%c:%s", b->len ? " " : "", kinds[kind], name);
	return name;
}

/* The printer passes every name, builtins included, in the order of the
 * text, announcing a statement's lets before its right-hand side. */
static void test_renamer_gets_every_name_in_order(void **state)
{
	checked c;
	tc_buf names;
	char *s;
	(void)state;
	check_text(&c, "t.tc",
		"def g(float(N) A) -> (O) {\n"
		"  O(i) = fmax(t, A(i)) where t = A(i) + 1, i in 0:N, exists A(i)\n"
		"  O(j) += 1\n"
		"}\n");
	assert_int_equal(c.d.nerrors, 0);
	tc_buf_init(&names);
	s = print_def(c.prog->defs[0], record_name, &names);
	assert_string_equal(names.s,
		"D:g G:N G:A G:O "
		"G:O L:i L:t U:fmax U:t U:A U:i L:t U:A U:i L:i U:N U:A U:i "
		"G:O L:j");
	tc_buf_free(&names);
	tc_free(s);
	checked_free(&c);
}

/* Prefixes every name but builtins with "z_", the def's with "renamed_";
 * the spelling lives in a buffer reused by the next call. */
typedef struct prefixer {
	char buf[128];
} prefixer;

static const char *prefix_name(void *ud, tc_name_kind kind, const char *name)
{
	prefixer *p = ud;
	if (tc_builtin_lookup(name, (int)strlen(name)) >= 0)
		return name;
	snprintf(p->buf, sizeof(p->buf), "%s%s", kind == TC_NAME_DEF ? "renamed_" : "z_", name);
	return p->buf;
}

/* A renamed print is valid .tc text with the original's canonical form. */
static void test_renamed_print_has_the_same_canonical_form(void **state)
{
	checked c, r;
	prefixer p;
	char *s, *c1, *c2;
	(void)state;
	check_text(&c, "t.tc",
		"def softmax(float(N,M) I) -> (O, mx, sum) {\n"
		"  mx(n) max=! I(n,r_m)\n"
		"  e(n,m) = exp(I(n,m) - mx(n))\n"
		"  sum(n) +=! e(n,r_m)\n"
		"  O(n,m) = e(n,m) / q where q = sum(n), exists sum(n)\n"
		"}\n");
	assert_int_equal(c.d.n, 0);
	s = print_def(c.prog->defs[0], prefix_name, &p);
	assert_string_equal(s,
		"def renamed_softmax(float32(z_N,z_M) z_I) -> (z_O, z_mx, z_sum) {\n"
		"  z_mx(z_n) max=! z_I(z_n, z_r_m)\n"
		"  z_e(z_n,z_m) = exp(z_I(z_n, z_m) - z_mx(z_n))\n"
		"  z_sum(z_n) +=! z_e(z_n, z_r_m)\n"
		"  z_O(z_n,z_m) = z_e(z_n, z_m) / z_q where z_q = z_sum(z_n), exists z_sum(z_n)\n"
		"}\n");
	check_text(&r, "renamed.tc", s);
	assert_int_equal(r.d.n, 0);
	c1 = canonical(c.prog->defs[0]);
	c2 = canonical(r.prog->defs[0]);
	assert_string_equal(c1, c2);
	tc_free(s);
	tc_free(c1);
	tc_free(c2);
	checked_free(&r);
	checked_free(&c);
}

/* ---- the canonical form's bytes ---- */

/* Canonical texts and hashes as the kernel cache has keyed them since before
 * the canonical form became the printer with a renamer (taken from that
 * build): statement-local names, lets numbered before the right side, where
 * ranges and exists, every reduction operator, literals. */
static void test_canonical_text_and_hash_are_pinned(void **state)
{
	static const struct {
		const char *src, *entry, *canon;
		uint64_t hash;
	} pins[] = {
		{"def let_chain(float(N) A, float(N) B) -> (O) {\n"
		 "    O(i) = u * v where u = A(i) + B(i), v = u - 1\n"
		 "}\n",
			"let_chain",
			"def f(float32(v0) v1, float32(v0) v2) -> (v3) {\n"
			"  v3(v4) = v5 * v6 where v5 = v1(v4) + v2(v4), v6 = v5 - 1\n"
			"}\n",
			0x5507900a9def3766ULL},
		{"def concat_exists(float(N,D) A, float(M,D) B) -> (O) {\n"
		 "    O(i,d) = i < N ? A(i,d) : B(i-N,d) where i in 0:N+M, exists A(0,d), exists B(0,d)\n"
		 "}\n",
			"concat_exists",
			"def f(float32(v0,v1) v2, float32(v3,v1) v4) -> (v5) {\n"
			"  v5(v6,v7) = v6 < v0 ? v2(v6, v7) : v4(v6 - v0, v7) where v6 in 0:v0 + v3, exists v2(0, v7), exists v4(0, v7)\n"
			"}\n",
			0xbfca2aaf919dd0c3ULL},
		{reductions_tc, "reductions",
			"def f(float32(v0,v1) v2) -> (v3, v4, v5, v6, v7, v8, v9, v10) {\n"
			"  v3(v11) +=! v2(v11, v12)\n"
			"  v4(v11) *=! v2(v11, v12)\n"
			"  v5(v11) min=! v2(v11, v12)\n"
			"  v6(v11) max=! v2(v11, v12)\n"
			"  v7(v11) = 0.0 where v11 in 0:v0\n"
			"  v7(v11) += v2(v11, v12)\n"
			"  v8(v11) = 1.0 where v11 in 0:v0\n"
			"  v8(v11) *= v2(v11, v12)\n"
			"  v9(v11) = v2(v11, 0)\n"
			"  v9(v11) min= v2(v11, v12)\n"
			"  v10(v11) = v2(v11, 0)\n"
			"  v10(v11) max= v2(v11, v12)\n"
			"}\n",
			0xb8c4d12509ae6b58ULL},
		{exprs_tc, "exprs",
			"def f(float32(v0) v1, int32(v0) v2, float64(v0) v3) -> (v4, v5, v6, v7, v8) {\n"
			"  v4(v9) = ((v9 > 0) && (v9 < (v0 - 1))) || !(v1(v9) >= 0.5) ? -v1(v9) : (v1(v9) != 0 ? 1e-05 : -0.25)\n"
			"  v5(v9) = ((-2147483648 + ((v2(v9) / 3) % -7)) - (-v2(v9) * (2 - 5))) - ((v2(v9) - 1) - 1)\n"
			"  v6(v9) = ((v2(v9) <= 2) == (v2(v9) >= 3)) && !((v2(v9) > 1) || (v2(v9) < 0))\n"
			"  v7(v9) = ((((((((float64(int8(v2(v9))) + (v3(v9) * 3000000000)) + float16(1500.0)) + min(v9, 4)) + max(-3.0, fabs(v1(v9)))) + 1e+30) + 0.0025) + 1.0) + 12) + -(-v3(v9))\n"
			"  v8(v9) = ((((v9 > 1 ? (v9 < 3 ? 1 : 2) : 3) + ((v9 > 1 ? 4 : 5) > 4 ? 6 : 7)) + -(v9 + 1)) > 0) || !(v9 > 0) ? 8 : 9 where v9 in 0:v0\n"
			"}\n",
			0x191fc43aa6071190ULL},
		{clauses_tc, "lets",
			"def f(float32(v0) v1, float64 v2) -> (v3, int8 v4) {\n"
			"  v5(v6) = v7 * v8 where v7 = v1(v6) + 1, v8 = v7 - 1\n"
			"  v3(v6) = v5(v6) + (-v5(v6) * v2) where exists v1(v6), exists v5(0)\n"
			"  v4 = int8(3)\n"
			"}\n",
			0x6bea284567b5c316ULL},
		{fc_tc, "fc",
			"def f(float32(v0,v1) v2, float32(v3,v1) v4, float32(v3) v5, float64 v6) -> (float32(v0,v3) v7, v8) {\n"
			"  v7(v9,v10) +=! v2(v9, v11) * v4(v10, v11)\n"
			"  v7(v9,v10) = v7(v9, v10) + v5(v10)\n"
			"  v7(v9,v10) = fmax(v7(v9, v10), 0) where v9 in 0:v0\n"
			"  v8(v9) max=! (v7(v9, v11) * 2.5) + (-1000.0 * v10) where v10 = v6 * v6, exists v7(v9, 0)\n"
			"  v8(v9) = v8(v9) * v10 where v10 = 2\n"
			"}\n",
			0xc0051f87b8a62052ULL},
	};
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		checked c;
		const tc_def *def;
		char *s;
		check_text(&c, "t.tc", pins[i].src);
		assert_int_equal(c.d.nerrors, 0);
		def = tc_program_find(c.prog, pins[i].entry);
		assert_non_null(def);
		s = canonical(def);
		assert_string_equal(s, pins[i].canon);
		if (tc_ir_hash(def) != pins[i].hash)
			fail_msg("the hash of\n%sis %016llx, expected %016llx", s,
				(unsigned long long)tc_ir_hash(def),
				(unsigned long long)pins[i].hash);
		tc_free(s);
		checked_free(&c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_corpus_bench_and_example_def_prints_back),
		cmocka_unit_test(test_reduction_operators_print_back),
		cmocka_unit_test(test_expressions_print_back),
		cmocka_unit_test(test_clauses_and_declarations_print_back),
		cmocka_unit_test(test_float64_constants_keep_their_digits),
		cmocka_unit_test(test_plain_print_layout),
		cmocka_unit_test(test_renamer_gets_every_name_in_order),
		cmocka_unit_test(test_renamed_print_has_the_same_canonical_form),
		cmocka_unit_test(test_canonical_text_and_hash_are_pinned),
	};
	return cmocka_run_group_tests_name("print", tests, NULL, NULL);
}
