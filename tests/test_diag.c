/* Golden tests of the front end's diagnostics.
 *
 * Every tests/diag/NAME.tc is a program with one kind of mistake (the first
 * line, a comment, says which); tests/diag/NAME.err holds the exact text the
 * library reports for it:
 *   - when tc_module_load fails: tc_context_error (errors and warnings, in
 *     the order they were found);
 *   - when it succeeds (cases that only warn): tc_context_warnings, which
 *     must then be non-empty.
 * The driver chdirs into tests/diag and loads "NAME.tc", so the file names in
 * the messages are relative and the golden files hold no absolute paths.
 * A mismatch prints a unified diff (expected .err against the actual text).
 *
 * Updating the golden files after an intended change of a message:
 *
 *     TC_UPDATE_GOLDEN=1 ./build/tests/test_diag
 *
 * rewrites every NAME.err from the current output (and creates missing
 * ones); review the change with git diff before committing it.  Adding a
 * case is adding NAME.tc and running the command above once. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tcomp.h"

#define DIAG_DIR TC_SOURCE_DIR "/tests/diag"

/* At least this many cases: the suite must keep covering every check. */
#define MIN_CASES 40

static int update_golden(void)
{
	const char *s = getenv("TC_UPDATE_GOLDEN");
	return s && *s && strcmp(s, "0") != 0;
}

/* The whole file, NUL-terminated, or NULL if it cannot be read. */
static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!fp)
		return NULL;
	for (;;) {
		if (cap - len < 4097) {
			char *nb;
			cap = cap ? 2 * cap : 8192;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(fp);
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len - 1, fp);
		len += n;
		if (n == 0)
			break;
	}
	fclose(fp);
	buf[len] = 0;
	return buf;
}

static int spit(const char *path, const char *text)
{
	FILE *fp = fopen(path, "wb");
	size_t n = strlen(text);
	if (!fp)
		return -1;
	if (fwrite(text, 1, n, fp) != n) {
		fclose(fp);
		return -1;
	}
	return fclose(fp) == 0 ? 0 : -1;
}

/* ---- a small line diff (LCS), printed as unified-diff hunks ---- */

typedef struct lines {
	const char **s; /* start of each line */
	int *len;       /* length with its '\n' (if any) */
	int n;
} lines;

static void split_lines(const char *text, lines *l)
{
	const char *p = text;
	int cap = 16;
	l->n = 0;
	l->s = malloc((size_t)cap * sizeof(*l->s));
	l->len = malloc((size_t)cap * sizeof(*l->len));
	assert_non_null(l->s);
	assert_non_null(l->len);
	while (*p) {
		const char *e = strchr(p, '\n');
		int len = e ? (int)(e - p + 1) : (int)strlen(p);
		if (l->n == cap) {
			cap *= 2;
			l->s = realloc(l->s, (size_t)cap * sizeof(*l->s));
			l->len = realloc(l->len, (size_t)cap * sizeof(*l->len));
			assert_non_null(l->s);
			assert_non_null(l->len);
		}
		l->s[l->n] = p;
		l->len[l->n++] = len;
		p += len;
	}
}

static void free_lines(lines *l)
{
	free(l->s);
	free(l->len);
}

static int line_eq(const lines *a, int i, const lines *b, int j)
{
	return a->len[i] == b->len[j] && !memcmp(a->s[i], b->s[j], (size_t)a->len[i]);
}

static void print_line(FILE *out, char tag, const lines *l, int i)
{
	int len = l->len[i];
	int nl = len > 0 && l->s[i][len - 1] == '\n';
	fprintf(out, "%c%.*s\n", tag, nl ? len - 1 : len, l->s[i]);
	if (!nl)
		fprintf(out, "\\ No newline at end of file\n");
}

/* Print the differences of expected (a) and actual (b) as unified-diff
 * hunks with 3 lines of context. */
static void print_diff(FILE *out, const char *name_a, const char *a_text,
	const char *name_b, const char *b_text)
{
	lines a, b;
	int *lcs, i, j, k, nops = 0, prev_end = 0;
	char *ops; /* ' ' keep, '-' only in a, '+' only in b */
	int *oa, *ob;

	split_lines(a_text, &a);
	split_lines(b_text, &b);
	lcs = calloc((size_t)(a.n + 1) * (size_t)(b.n + 1), sizeof(int));
	ops = malloc((size_t)(a.n + b.n + 1));
	oa = malloc((size_t)(a.n + b.n + 1) * sizeof(int));
	ob = malloc((size_t)(a.n + b.n + 1) * sizeof(int));
	assert_non_null(lcs);
	assert_non_null(ops);
	assert_non_null(oa);
	assert_non_null(ob);
#define LCS(i, j) lcs[(size_t)(i) * (size_t)(b.n + 1) + (size_t)(j)]
	for (i = a.n - 1; i >= 0; i--)
		for (j = b.n - 1; j >= 0; j--)
			LCS(i, j) = line_eq(&a, i, &b, j) ? LCS(i + 1, j + 1) + 1
				: LCS(i + 1, j) > LCS(i, j + 1) ? LCS(i + 1, j) : LCS(i, j + 1);
	for (i = 0, j = 0; i < a.n || j < b.n;) {
		oa[nops] = i;
		ob[nops] = j;
		if (i < a.n && j < b.n && line_eq(&a, i, &b, j)) {
			ops[nops++] = ' ';
			i++;
			j++;
		} else if (i < a.n && (j == b.n || LCS(i + 1, j) >= LCS(i, j + 1))) {
			ops[nops++] = '-';
			i++;
		} else {
			ops[nops++] = '+';
			j++;
		}
	}
#undef LCS
	fprintf(out, "--- %s\n+++ %s\n", name_a, name_b);
	for (k = 0; k < nops;) {
		int start, end, last_change, na = 0, nb = 0, m;
		if (ops[k] == ' ') {
			k++;
			continue;
		}
		/* a hunk: from 3 lines before this change to 3 lines after the last
		 * change that is at most 6 unchanged lines from the previous one */
		start = k - 3 > prev_end ? k - 3 : prev_end;
		last_change = k;
		for (m = k; m < nops; m++) {
			if (ops[m] != ' ')
				last_change = m;
			else if (m - last_change > 6)
				break;
		}
		end = last_change + 4 < nops ? last_change + 4 : nops;
		for (m = start; m < end; m++) {
			if (ops[m] != '+')
				na++;
			if (ops[m] != '-')
				nb++;
		}
		fprintf(out, "@@ -%d,%d +%d,%d @@\n", oa[start] + 1, na, ob[start] + 1, nb);
		for (m = start; m < end; m++) {
			if (ops[m] == '+')
				print_line(out, '+', &b, ob[m]);
			else
				print_line(out, ops[m], &a, oa[m]);
		}
		k = prev_end = end;
	}
	free(lcs);
	free(ops);
	free(oa);
	free(ob);
	free_lines(&a);
	free_lines(&b);
}

/* ---- the cases ---- */

typedef struct diag_case {
	char name[256]; /* NAME, without .tc */
} diag_case;

static diag_case *cases;
static int ncases;

static int cmp_case(const void *a, const void *b)
{
	return strcmp(((const diag_case *)a)->name, ((const diag_case *)b)->name);
}

/* Collect the NAME.tc files of the current directory, sorted. */
static void collect_cases(void)
{
	DIR *dir = opendir(".");
	struct dirent *de;
	int cap = 0;

	ncases = 0;
	if (!dir)
		return;
	while ((de = readdir(dir))) {
		size_t len = strlen(de->d_name);
		if (len < 4 || len - 3 >= sizeof(cases[0].name) ||
			strcmp(de->d_name + len - 3, ".tc"))
			continue;
		if (ncases == cap) {
			diag_case *nc;
			cap = cap ? 2 * cap : 128;
			nc = realloc(cases, (size_t)cap * sizeof(*cases));
			if (!nc)
				break;
			cases = nc;
		}
		memcpy(cases[ncases].name, de->d_name, len - 3);
		cases[ncases].name[len - 3] = 0;
		ncases++;
	}
	closedir(dir);
	if (ncases)
		qsort(cases, (size_t)ncases, sizeof(*cases), cmp_case);
}

/* Load NAME.tc and return the text to compare (malloc'ed); *loaded says
 * whether the module loaded. */
static char *actual_output(const char *name, int *loaded)
{
	char path[300];
	tc_context *ctx = tc_context_new();
	tc_module *m;
	char *out;

	assert_non_null(ctx);
	snprintf(path, sizeof(path), "%s.tc", name);
	m = tc_module_load(ctx, path);
	*loaded = m != NULL;
	out = strdup(m ? tc_context_warnings(ctx) : tc_context_error(ctx));
	assert_non_null(out);
	tc_module_free(m);
	tc_context_free(ctx);
	return out;
}

/* One golden case: the output equals NAME.err byte for byte. */
static void test_golden_case(void **state)
{
	const diag_case *c = *state;
	char path[300];
	char *actual, *expected;
	int loaded;

	actual = actual_output(c->name, &loaded);
	snprintf(path, sizeof(path), "%s.err", c->name);
	if (update_golden()) {
		if (spit(path, actual) < 0)
			fail_msg("cannot write %s/%s", DIAG_DIR, path);
		free(actual);
		return;
	}
	expected = slurp(path);
	if (!expected) {
		free(actual);
		fail_msg("%s/%s is missing; run TC_UPDATE_GOLDEN=1 %s to create it", DIAG_DIR,
			path, "test_diag");
	}
	if (strcmp(expected, actual)) {
		char actual_name[320];
		snprintf(actual_name, sizeof(actual_name), "%s.tc (actual %s)", c->name,
			loaded ? "tc_context_warnings" : "tc_context_error");
		printf("golden mismatch for tests/diag/%s.tc:\n", c->name);
		print_diff(stdout, path, expected, actual_name, actual);
		free(expected);
		free(actual);
		fail_msg("tests/diag/%s.err differs from the output (diff above); if the new "
			 "text is right, rerun with TC_UPDATE_GOLDEN=1",
			c->name);
	}
	/* a case that loads must at least warn: every case shows a diagnostic */
	if (loaded && !*actual) {
		free(expected);
		free(actual);
		fail_msg("tests/diag/%s.tc loads without any diagnostic", c->name);
	}
	free(expected);
	free(actual);
}

/* The directory holds enough cases and every NAME.err has its NAME.tc. */
static void test_golden_set_is_complete(void **state)
{
	DIR *dir;
	struct dirent *de;
	int i;
	(void)state;

	assert_true(ncases >= MIN_CASES);
	for (i = 1; i < ncases; i++)
		assert_true(strcmp(cases[i - 1].name, cases[i].name) < 0);
	dir = opendir(".");
	assert_non_null(dir);
	while ((de = readdir(dir))) {
		size_t len = strlen(de->d_name);
		diag_case key;
		if (len < 5 || strcmp(de->d_name + len - 4, ".err"))
			continue;
		assert_true(len - 4 < sizeof(key.name));
		memcpy(key.name, de->d_name, len - 4);
		key.name[len - 4] = 0;
		if (!bsearch(&key, cases, (size_t)ncases, sizeof(*cases), cmp_case))
			fail_msg("tests/diag/%s has no matching .tc file", de->d_name);
	}
	closedir(dir);
}

/* The mismatch report: a changed line shows as '-' then '+' with context,
 * a missing final newline is marked. */
static void test_diff_report_shows_changed_lines(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	(void)state;

	assert_non_null(out);
	print_diff(out, "exp", "a\nb\nc\n", "act", "a\nB\nc\nd");
	fclose(out);
	assert_string_equal(buf, "--- exp\n+++ act\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n c\n"
				 "+d\n\\ No newline at end of file\n");
	free(buf);
}

int main(void)
{
	struct CMUnitTest *tests;
	int i, rc;

	if (chdir(DIAG_DIR) != 0) {
		fprintf(stderr, "test_diag: cannot chdir to %s\n", DIAG_DIR);
		return 1;
	}
	collect_cases();
	tests = calloc((size_t)ncases + 2, sizeof(*tests));
	if (!tests)
		return 1;
	tests[0].name = "golden_set_is_complete";
	tests[0].test_func = test_golden_set_is_complete;
	tests[1].name = "diff_report_shows_changed_lines";
	tests[1].test_func = test_diff_report_shows_changed_lines;
	for (i = 0; i < ncases; i++) {
		tests[i + 2].name = cases[i].name;
		tests[i + 2].test_func = test_golden_case;
		tests[i + 2].initial_state = &cases[i];
	}
	rc = _cmocka_run_group_tests("diag_golden", tests, (size_t)ncases + 2, NULL, NULL);
	free(tests);
	free(cases);
	return rc;
}
