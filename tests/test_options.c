/* Mapping options as text: tc_options_parse and tc_options_print (round
 * trip, comments and separators, every error with its message and line, the
 * options left unchanged by a failed parse), tc_options_describe, and the
 * integer and list value kinds of the table (runtime/options.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <float.h>
#include <math.h>

#include "tcomp.h"
#include "runtime/backend.h"
#include "runtime/options.h"
#include "testutil.h"

static tc_context *ctx;

static int setup(void **state)
{
	(void)state;
	ctx = tc_context_new();
	return ctx ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tc_context_free(ctx);
	return 0;
}

/* The printed text of o. */
static char printed[4096];
static const char *print_of(const tc_options *o)
{
	char *s = tc_options_print(o);
	assert_non_null(s);
	snprintf(printed, sizeof(printed), "%s", s);
	tc_string_free(s);
	return printed;
}

/* parse must fail with a message containing want. */
static void expect_parse_error(tc_options *o, const char *text, const char *want)
{
	const char *e;
	assert_int_equal(tc_options_parse(o, text, ctx), -1);
	e = tc_context_error(ctx);
	if (!e || !strstr(e, want))
		fail_msg("parsing '%s': expected a message with '%s' but got '%s'", text ? text : "(NULL)", want,
			e ? e : "(no message)");
}

static void defaults_print_every_option(void **state)
{
	tc_options *o = tc_options_new();
	(void)state;
	assert_non_null(o);
	assert_string_equal(print_of(o), "target=cpu\norder=on\ncontract=on\nparallel=auto\nthreads=auto\nfusion=auto\ntile=auto\nregtile=auto\nunroll=on\nunroll_inner=auto\nvector=auto\nfastmath=off\nvecreduce=on\nshare=on\ninline=on\nstream=auto\nmask=auto\npack=on\ninterchange=auto\nblock=auto\ngrid=auto\ngpu_arch=auto\nreduce=auto\nreduce_threads=auto\nreduce_map=auto\nshared=auto\nshared_tile=auto\nsizes=auto\ncpu=host\n");
	assert_string_equal(print_of(NULL), "target=cpu\norder=on\ncontract=on\nparallel=auto\nthreads=auto\nfusion=auto\ntile=auto\nregtile=auto\nunroll=on\nunroll_inner=auto\nvector=auto\nfastmath=off\nvecreduce=on\nshare=on\ninline=on\nstream=auto\nmask=auto\npack=on\ninterchange=auto\nblock=auto\ngrid=auto\ngpu_arch=auto\nreduce=auto\nreduce_threads=auto\nreduce_map=auto\nshared=auto\nshared_tile=auto\nsizes=auto\ncpu=host\n"); /* NULL: the defaults */
	assert_string_equal(tc_options_get(NULL, "target"), "cpu");
	assert_null(tc_options_get(o, "no_such_option"));
	tc_options_free(o);
}

static void parse_print_round_trip(void **state)
{
	tc_options *o = tc_options_new(), *p = tc_options_new(), *q = tc_options_new();
	char text[4096];
	(void)state;
	/* the defaults round-trip */
	snprintf(text, sizeof(text), "%s", print_of(o));
	assert_int_equal(tc_options_parse(p, text, ctx), 0);
	assert_string_equal(print_of(p), text);
	/* and so does a set value */
	assert_int_equal(tc_options_set(o, "target", "interp", ctx), 0);
	snprintf(text, sizeof(text), "%s", print_of(o));
	assert_string_equal(text, "target=interp\norder=on\ncontract=on\nparallel=auto\nthreads=auto\nfusion=auto\ntile=auto\nregtile=auto\nunroll=on\nunroll_inner=auto\nvector=auto\nfastmath=off\nvecreduce=on\nshare=on\ninline=on\nstream=auto\nmask=auto\npack=on\ninterchange=auto\nblock=auto\ngrid=auto\ngpu_arch=auto\nreduce=auto\nreduce_threads=auto\nreduce_map=auto\nshared=auto\nshared_tile=auto\nsizes=auto\ncpu=host\n");
	assert_int_equal(tc_options_parse(q, text, ctx), 0);
	assert_string_equal(print_of(q), text);
	assert_string_equal(tc_options_get(q, "target"), "interp");
	/* parsing the defaults' text resets a set option */
	assert_int_equal(tc_options_parse(q, "target=cpu\n", ctx), 0);
	assert_string_equal(tc_options_get(q, "target"), "cpu");
	/* empty text, blanks and comments only: nothing changes */
	assert_int_equal(tc_options_parse(o, "", ctx), 0);
	assert_int_equal(tc_options_parse(o, " \n\t;;\n# only a comment\n", ctx), 0);
	assert_string_equal(tc_options_get(o, "target"), "interp");
	tc_options_free(o);
	tc_options_free(p);
	tc_options_free(q);
}

/* The target option's values are the backend table's names, in its order,
 * and its default names the first backend. */
static void target_values_are_the_backends(void **state)
{
	char range[256] = "";
	int i, row = -1;
	(void)state;
	for (i = 0; i < tc_rt_opt_count(); i++)
		if (!strcmp(tc_rt_opt_name(i), "target"))
			row = i;
	assert_true(row >= 0);
	for (i = 0; i < tc_rt_backend_count(); i++) {
		size_t n = strlen(range);
		snprintf(range + n, sizeof(range) - n, "%s%s", i ? "|" : "", tc_rt_backend_at(i)->name);
	}
	assert_string_equal(tc_rt_opt_range(row), range);
	assert_string_equal(tc_rt_opt_default(row), tc_rt_backend_at(0)->name);
	assert_null(tc_rt_backend_at(tc_rt_backend_count()));
}

/* tc_options_copy: the same settings, independent of the original;
 * NULL copies the defaults. */
static void copy_keeps_settings_and_is_independent(void **state)
{
	tc_options *o = tc_options_new(), *c, *d;
	char text[4096];
	(void)state;
	assert_int_equal(tc_options_parse(o, "target=interp tile=32,16 interchange=1,0", ctx), 0);
	assert_non_null(c = tc_options_copy(o));
	snprintf(text, sizeof(text), "%s", print_of(o));
	assert_string_equal(print_of(c), text);
	assert_int_equal(tc_options_set(o, "tile", "none", ctx), 0);
	assert_string_equal(tc_options_get(c, "tile"), "32,16");
	assert_string_equal(tc_options_get(o, "tile"), "none");
	assert_non_null(d = tc_options_copy(NULL));
	snprintf(text, sizeof(text), "%s", print_of(NULL));
	assert_string_equal(print_of(d), text);
	tc_options_free(o);
	tc_options_free(c);
	tc_options_free(d);
}

static void comments_and_separators(void **state)
{
	static const struct {
		const char *text, *target;
	} cases[] = {
		{"target=interp", "interp"},
		{"target=interp\n", "interp"},
		{"# a comment\ntarget=interp # a comment after a pair\n", "interp"},
		{"target=interp#no blank before the comment", "interp"},
		{"target = interp\n", "interp"},          /* blanks around '=' */
		{"\ttarget\t=\tinterp\t\n", "interp"},
		{"target=interp\r\n", "interp"},           /* CRLF */
		{"target=interp;target=cpu", "cpu"},       /* ';', the later pair wins */
		{"target=cpu target=interp", "interp"},    /* blanks separate pairs */
		{"target=cpu\n\n\ntarget=interp\n", "interp"},
		{";;target=interp;;", "interp"},
		{"# target=interp\n", "cpu"},              /* commented out */
		{"target=cpu # ; target=interp\n", "cpu"}, /* ';' inside a comment */
	};
	size_t i;
	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tc_options *o = tc_options_new();
		if (tc_options_parse(o, cases[i].text, ctx) != 0)
			fail_msg("parsing '%s' failed: %s", cases[i].text, tc_context_error(ctx));
		if (strcmp(tc_options_get(o, "target"), cases[i].target))
			fail_msg("parsing '%s' gave target=%s, expected %s", cases[i].text,
				tc_options_get(o, "target"), cases[i].target);
		tc_options_free(o);
	}
}

static void errors_name_the_option_and_line(void **state)
{
	tc_options *o = tc_options_new();
	(void)state;
	expect_parse_error(o, "target=cpu\n\nbogus=1\n",
		"error: line 3: unknown option 'bogus' (options: target, order, contract, parallel, threads, fusion, tile, regtile, unroll, unroll_inner, vector, fastmath, vecreduce, share, inline, stream, mask, pack, interchange, block, grid, gpu_arch, reduce, reduce_threads, reduce_map, shared, shared_tile, sizes, cpu; see tcomp options)");
	expect_parse_error(o, "\ntarget=gpu",
		"line 2: option 'target' cannot be 'gpu' (allowed: cpu|interp|cuda|cuda-emu)");
	expect_parse_error(o, "target=", "line 1: option 'target' has no value (allowed: cpu|interp|cuda|cuda-emu)");
	expect_parse_error(o, "target=\ncpu\n", "line 1: option 'target' has no value");
	expect_parse_error(o, "target=;", "line 1: option 'target' has no value");
	expect_parse_error(o, "target= # cpu", "line 1: option 'target' has no value");
	expect_parse_error(o, "target cpu", "line 1: expected NAME=VALUE but found 'target'");
	expect_parse_error(o, "target\n=cpu", "line 1: expected NAME=VALUE but found 'target'");
	expect_parse_error(o, "=cpu", "line 1: expected NAME=VALUE but found '=cpu'");
	expect_parse_error(o, "target=cpu\n  = interp", "line 2: expected NAME=VALUE but found '='");
	expect_parse_error(o, "target=CPU", "option 'target' cannot be 'CPU'");
	expect_parse_error(o, "target=cpu=1", "option 'target' cannot be 'cpu=1'");
	expect_parse_error(o, "target=cpux", "option 'target' cannot be 'cpux'");
	/* lines: comments and blank lines count, ';' does not start a line */
	expect_parse_error(o, "# one\n# two\n\ntarget=x\n", "line 4: option 'target' cannot be 'x'");
	expect_parse_error(o, "target=cpu; target=interp; nope=3", "line 1: unknown option 'nope'");
	expect_parse_error(o, "target=cpu\r\ntarget=interp\r\nnope=3\r\n", "line 3: unknown option 'nope'");
	/* the first error is the one reported */
	expect_parse_error(o, "a=1\nb=2\n", "line 1: unknown option 'a'");
	/* NULL arguments; ctx may be NULL */
	expect_parse_error(NULL, "target=cpu", "tc_options_parse: NULL argument");
	expect_parse_error(o, NULL, "tc_options_parse: NULL argument");
	assert_int_equal(tc_options_parse(o, "bogus=1", NULL), -1);
	assert_int_equal(tc_options_parse(o, "target=interp", NULL), 0);
	assert_string_equal(tc_options_get(o, "target"), "interp");
	/* tc_options_set says the same things, without a line */
	assert_int_equal(tc_options_set(o, "bogus", "1", ctx), -1);
	assert_non_null(strstr(tc_context_error(ctx),
		"error: unknown option 'bogus' (options: target, order, contract, parallel, threads, fusion, tile, regtile, unroll, unroll_inner, vector, fastmath, vecreduce, share, inline, stream, mask, pack, interchange, block, grid, gpu_arch, reduce, reduce_threads, reduce_map, shared, shared_tile, sizes, cpu; see tcomp options)"));
	assert_int_equal(tc_options_set(o, "target", "", ctx), -1);
	assert_non_null(strstr(tc_context_error(ctx), "option 'target' has no value"));
	assert_null(strstr(tc_context_error(ctx), "line"));
	tc_options_free(o);
}

static void failed_parse_leaves_options_unchanged(void **state)
{
	tc_options *o = tc_options_new();
	(void)state;
	assert_int_equal(tc_options_set(o, "target", "interp", ctx), 0);
	/* the first pair is good and would change target; the second is not */
	expect_parse_error(o, "target=cpu\nbogus=1\n", "line 2: unknown option 'bogus'");
	assert_string_equal(tc_options_get(o, "target"), "interp");
	assert_string_equal(print_of(o), "target=interp\norder=on\ncontract=on\nparallel=auto\nthreads=auto\nfusion=auto\ntile=auto\nregtile=auto\nunroll=on\nunroll_inner=auto\nvector=auto\nfastmath=off\nvecreduce=on\nshare=on\ninline=on\nstream=auto\nmask=auto\npack=on\ninterchange=auto\nblock=auto\ngrid=auto\ngpu_arch=auto\nreduce=auto\nreduce_threads=auto\nreduce_map=auto\nshared=auto\nshared_tile=auto\nsizes=auto\ncpu=host\n");
	expect_parse_error(o, "target=cpu;target=gpu", "cannot be 'gpu'");
	assert_string_equal(tc_options_get(o, "target"), "interp");
	/* on defaults too */
	tc_options_free(o);
	o = tc_options_new();
	expect_parse_error(o, "target=interp\ntarget", "line 2: expected NAME=VALUE");
	assert_string_equal(print_of(o), "target=cpu\norder=on\ncontract=on\nparallel=auto\nthreads=auto\nfusion=auto\ntile=auto\nregtile=auto\nunroll=on\nunroll_inner=auto\nvector=auto\nfastmath=off\nvecreduce=on\nshare=on\ninline=on\nstream=auto\nmask=auto\npack=on\ninterchange=auto\nblock=auto\ngrid=auto\ngpu_arch=auto\nreduce=auto\nreduce_threads=auto\nreduce_map=auto\nshared=auto\nshared_tile=auto\nsizes=auto\ncpu=host\n");
	tc_options_free(o);
}

/* Every option printed by tc_options_print has a line in the table, and
 * the table has no other lines. */
static void describe_lists_every_option(void **state)
{
	char *table = tc_options_describe(), *copy;
	const char *p = print_of(NULL);
	int nprint = 0, ntable = 0;
	(void)state;
	assert_non_null(table);
	while (*p) {
		const char *eq = strchr(p, '='), *nl = strchr(p, '\n'), *t;
		size_t n;
		int found = 0;
		assert_non_null(eq);
		assert_non_null(nl);
		n = (size_t)(eq - p);
		for (t = table; *t; t = strchr(t, '\n') + 1) {
			if (!strncmp(t, p, n) && t[n] == ' ') {
				/* the line has the default and a doc */
				const char *end = strchr(t, '\n');
				char line[1024];
				char want[256];
				snprintf(line, sizeof(line), "%.*s", (int)(end - t), t);
				snprintf(want, sizeof(want), "default %.*s ", (int)(nl - eq - 1), eq + 1);
				assert_non_null(strstr(line, want));
				found = 1;
			}
			if (!strchr(t, '\n'))
				break;
		}
		if (!found)
			fail_msg("option '%.*s' is not in the table:\n%s", (int)n, p, table);
		nprint++;
		p = nl + 1;
	}
	copy = table;
	for (; *copy; copy++)
		ntable += *copy == '\n';
	assert_int_equal(ntable, nprint);
	assert_non_null(strstr(table, "cpu|interp|cuda|cuda-emu"));
	tc_string_free(table);
}

/* The value kinds of the table, tested directly (the release's only option
 * is an enum). */
static void check_value(tc_opt_type type, const char *range, const char *value, const char *want)
{
	char *canon = NULL;
	int st = tc_rt_opt_value(type, range, value, &canon);
	if (!want) {
		if (st != -1)
			fail_msg("'%s' accepted for range '%s' (as '%s')", value, range,
				canon ? canon : "?");
		assert_null(canon);
		return;
	}
	if (st != 0 || !canon)
		fail_msg("'%s' refused for range '%s'", value, range);
	assert_string_equal(canon, want);
	tc_free(canon);
}

static void value_kinds(void **state)
{
	char list16[64] = "", list17[80];
	int i;
	(void)state;
	/* enums: exact words */
	check_value(TC_OPT_ENUM, "cpu|interp", "cpu", "cpu");
	check_value(TC_OPT_ENUM, "cpu|interp", "interp", "interp");
	check_value(TC_OPT_ENUM, "cpu|interp", "cp", NULL);
	check_value(TC_OPT_ENUM, "cpu|interp", "cpus", NULL);
	check_value(TC_OPT_ENUM, "cpu|interp", "cpu|interp", NULL);
	check_value(TC_OPT_ENUM, "cpu|interp", "", NULL);
	check_value(TC_OPT_ENUM, "off|on", "on", "on");
	/* integers: inside an interval, canonical form, or a word */
	check_value(TC_OPT_INT, "1..4096", "64", "64");
	check_value(TC_OPT_INT, "1..4096", "0064", "64");
	check_value(TC_OPT_INT, "1..4096", "1", "1");
	check_value(TC_OPT_INT, "1..4096", "4096", "4096");
	check_value(TC_OPT_INT, "1..4096", "0", NULL);
	check_value(TC_OPT_INT, "1..4096", "4097", NULL);
	check_value(TC_OPT_INT, "1..4096", "-1", NULL);
	check_value(TC_OPT_INT, "1..4096", "+5", NULL);
	check_value(TC_OPT_INT, "1..4096", " 5", NULL);
	check_value(TC_OPT_INT, "1..4096", "5 ", NULL);
	check_value(TC_OPT_INT, "1..4096", "12a", NULL);
	check_value(TC_OPT_INT, "1..4096", "0x10", NULL);
	check_value(TC_OPT_INT, "1..4096", "", NULL);
	check_value(TC_OPT_INT, "1..4096", "-", NULL);
	check_value(TC_OPT_INT, "1..4096", "1,2", NULL);
	check_value(TC_OPT_INT, "1..4096", "auto", NULL);
	check_value(TC_OPT_INT, "1..9223372036854775807", "9223372036854775807",
		"9223372036854775807");
	check_value(TC_OPT_INT, "1..9223372036854775807", "9223372036854775808", NULL);
	check_value(TC_OPT_INT, "1..4096", "99999999999999999999999", NULL);
	check_value(TC_OPT_INT, "auto|1..4096", "auto", "auto");
	check_value(TC_OPT_INT, "auto|1..4096", "32", "32");
	check_value(TC_OPT_INT, "-8..8", "-8", "-8");
	check_value(TC_OPT_INT, "-8..8", "-0", "0");
	check_value(TC_OPT_INT, "-8..8", "-9", NULL);
	check_value(TC_OPT_INT, "0..0|2..4|8..8", "8", "8");
	check_value(TC_OPT_INT, "0..0|2..4|8..8", "1", NULL);
	check_value(TC_OPT_INT, "0..0|2..4|8..8", "5", NULL);
	/* lists: comma-separated integers, each in an interval, or a word alone */
	check_value(TC_OPT_LIST, "1..64", "32,32,8", "32,32,8");
	check_value(TC_OPT_LIST, "1..64", "7", "7");
	check_value(TC_OPT_LIST, "1..64", "08,004", "8,4");
	check_value(TC_OPT_LIST, "1..64", "32,,8", NULL);
	check_value(TC_OPT_LIST, "1..64", "32,", NULL);
	check_value(TC_OPT_LIST, "1..64", ",32", NULL);
	check_value(TC_OPT_LIST, "1..64", "32, 8", NULL);
	check_value(TC_OPT_LIST, "1..64", "65", NULL);
	check_value(TC_OPT_LIST, "1..64", "1,0", NULL);
	check_value(TC_OPT_LIST, "1..64", "", NULL);
	check_value(TC_OPT_LIST, "auto|1..64", "auto", "auto");
	check_value(TC_OPT_LIST, "auto|1..64", "auto,4", NULL);
	for (i = 0; i < TC_OPT_LIST_MAX; i++)
		strcat(list16, i ? ",1" : "1");
	check_value(TC_OPT_LIST, "1..64", list16, list16);
	strcpy(list17, list16);
	strcat(list17, ",1");
	check_value(TC_OPT_LIST, "1..64", list17, NULL);
	/* permutations: lists of 0..n-1, each once */
	check_value(TC_OPT_PERM, "auto|0..15", "auto", "auto");
	check_value(TC_OPT_PERM, "auto|0..15", "0", "0");
	check_value(TC_OPT_PERM, "auto|0..15", "2,0,01", "2,0,1");
	check_value(TC_OPT_PERM, "auto|0..15", "1,1", NULL);
	check_value(TC_OPT_PERM, "auto|0..15", "0,2", NULL);
	check_value(TC_OPT_PERM, "auto|0..15", "1", NULL);
	check_value(TC_OPT_PERM, "auto|0..15", "16", NULL);
	check_value(TC_OPT_PERM, "auto|0..15", "-1,0", NULL);
	check_value(TC_OPT_PERM, "auto|0..15", "auto,0", NULL);
	check_value(TC_OPT_PERM, "auto|0..15", "1,0,", NULL);
	check_value(TC_OPT_PERM, "auto|0..15", "15,14,13,12,11,10,9,8,7,6,5,4,3,2,1,0",
		"15,14,13,12,11,10,9,8,7,6,5,4,3,2,1,0");
	check_value(TC_OPT_PERM, "auto|0..15", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", NULL);
}

/* tc_kernel_stats refuses NULL (tests/test_cli.c checks its counts through
 * tcomp bench). */
static void kernel_stats_null(void **state)
{
	double f = 7, b = 7;
	(void)state;
	assert_int_equal(tc_kernel_stats(NULL, &f, &b), -1);
	assert_true(f == 7 && b == 7);
}

/* The schedule passes' options: values, canonical forms and errors. */
static void schedule_options(void **state)
{
	tc_options *o = tc_options_new();
	(void)state;
	assert_non_null(o);
	assert_int_equal(tc_options_parse(o, "order=off tile=32,008,1", ctx), 0);
	assert_string_equal(print_of(o), "target=cpu\norder=off\ncontract=on\nparallel=auto\nthreads=auto\nfusion=auto\ntile=32,8,1\nregtile=auto\nunroll=on\nunroll_inner=auto\nvector=auto\nfastmath=off\nvecreduce=on\nshare=on\ninline=on\nstream=auto\nmask=auto\npack=on\ninterchange=auto\nblock=auto\ngrid=auto\ngpu_arch=auto\nreduce=auto\nreduce_threads=auto\nreduce_map=auto\nshared=auto\nshared_tile=auto\nsizes=auto\ncpu=host\n");
	assert_int_equal(tc_options_parse(o, "regtile=6,064 unroll=off", ctx), 0);
	assert_string_equal(tc_options_get(o, "regtile"), "6,64");
	assert_string_equal(tc_options_get(o, "unroll"), "off");
	assert_int_equal(tc_options_parse(o, "regtile=none tile=auto", ctx), 0);
	assert_string_equal(tc_options_get(o, "regtile"), "none");
	assert_string_equal(tc_options_get(o, "tile"), "auto");
	expect_parse_error(o, "regtile=0", "option 'regtile' cannot be '0'");
	expect_parse_error(o, "regtile=1025", "option 'regtile' cannot be '1025'");
	expect_parse_error(o, "regtile=auto,4", "option 'regtile' cannot be 'auto,4'");
	expect_parse_error(o, "unroll=maybe", "option 'unroll' cannot be 'maybe'");
	assert_int_equal(tc_options_parse(o, "fusion=preserve3coincident", ctx), 0);
	assert_string_equal(tc_options_get(o, "fusion"), "preserve3coincident");
	expect_parse_error(o, "fusion=some", "option 'fusion' cannot be 'some'");
	assert_int_equal(tc_options_parse(o, "tile=none", ctx), 0);
	assert_string_equal(tc_options_get(o, "tile"), "none");
	expect_parse_error(o, "order=maybe", "option 'order' cannot be 'maybe'");
	expect_parse_error(o, "tile=0", "option 'tile' cannot be '0'");
	expect_parse_error(o, "tile=4,x", "option 'tile' cannot be '4,x'");
	expect_parse_error(o, "tile=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
		"option 'tile' cannot be");
	expect_parse_error(o, "tile=none,4", "option 'tile' cannot be 'none,4'");
	assert_string_equal(tc_options_get(o, "tile"), "none"); /* unchanged */
	/* interchange: auto or a permutation, and a message that says what is
	 * wrong with a list that is none */
	assert_int_equal(tc_options_parse(o, "interchange=02,0,1", ctx), 0);
	assert_string_equal(tc_options_get(o, "interchange"), "2,0,1");
	assert_int_equal(tc_options_parse(o, "interchange=0", ctx), 0);
	assert_string_equal(tc_options_get(o, "interchange"), "0");
	expect_parse_error(o, "interchange=1,1",
		"line 1: option 'interchange' cannot be '1,1': not a permutation (1 appears twice; "
		"allowed: a permutation of 0..N-1 as N comma-separated integers (N 1 to 16) in 0..15, "
		"or auto)");
	expect_parse_error(o, "interchange=0,2",
		"option 'interchange' cannot be '0,2': not a permutation (2 is beyond 0..1, the "
		"positions of 2 entries;");
	expect_parse_error(o, "interchange=3", "option 'interchange' cannot be '3': not a permutation");
	expect_parse_error(o, "interchange=16", "option 'interchange' cannot be '16' (allowed: a permutation");
	expect_parse_error(o, "interchange=-1", "option 'interchange' cannot be '-1' (allowed:");
	expect_parse_error(o, "interchange=1,x", "option 'interchange' cannot be '1,x' (allowed:");
	expect_parse_error(o, "interchange=auto,1", "option 'interchange' cannot be 'auto,1' (allowed:");
	expect_parse_error(o, "interchange=on", "option 'interchange' cannot be 'on' (allowed:");
	expect_parse_error(o, "interchange=1,,0", "option 'interchange' cannot be '1,,0' (allowed:");
	expect_parse_error(o, "interchange=", "option 'interchange' has no value");
	expect_parse_error(o, "interchange=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
		"option 'interchange' cannot be '0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16' (allowed:");
	assert_int_equal(tc_options_set(o, "interchange", "2,2,0", ctx), -1);
	assert_non_null(strstr(tc_context_error(ctx),
		"option 'interchange' cannot be '2,2,0': not a permutation (2 appears twice"));
	assert_string_equal(tc_options_get(o, "interchange"), "0"); /* unchanged */
	tc_options_free(o);
}

/* contract=on (the default) fuses each step of a sum reduction of
 * products: matmul then uses FMAs and is bit-identical to the sum in k
 * order with one rounding per step (s = fmaf(a, b, s)); contract=off has
 * no FMA and is bit-identical to the sum in k order with two roundings per
 * step. */
static void contract_option(void **state)
{
	enum { M = 37, K = 53, N = 29 };
	static float a[M * K], b[K * N], c[M * N];
	int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor C = {c, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	DLTensor *out[1] = {&C};
	tc_module *m;
	uint64_t r = 12345;
	int on, i, j, k;
	(void)state;
	for (i = 0; i < M * K; i++, r = r * 6364136223846793005ULL + 1)
		a[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2 - 1);
	for (i = 0; i < K * N; i++, r = r * 6364136223846793005ULL + 1)
		b[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2 - 1);
	m = tc_module_parse(ctx, "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
				 "  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n", "mm.tc");
	assert_non_null(m);
	for (on = 0; on < 2; on++) {
		tc_options *o = tc_options_new();
		tc_kernel *kr;
		char *text;
		assert_int_equal(tc_options_set(o, "contract", on ? "on" : "off", ctx), 0);
		kr = tc_compile(m, "mm", in, 2, o);
		if (!kr)
			fail_msg("%s", tc_context_error(ctx));
		for (i = 0; i < M * N; i++)
			c[i] = NAN;
		assert_int_equal(tc_kernel_run(kr, in, 2, out, 1), 0);
		for (i = 0; i < M; i++)
			for (j = 0; j < N; j++) {
				float s = 0;
				for (k = 0; k < K; k++)
					s = on ? fmaf(a[i * K + k], b[k * N + j], s)
					       : s + a[i * K + k] * b[k * N + j];
				if (memcmp(&c[i * N + j], &s, sizeof(s)))
					fail_msg("contract=%s: C[%d,%d] = %a, expected %a", on ? "on" : "off",
						i, j, (double)c[i * N + j], (double)s);
			}
		text = tc_kernel_emit(kr, "asm");
		assert_non_null(text);
		if (on != (strstr(text, "vfmadd") != NULL))
			fail_msg("contract=%s: the assembly %s FMA instructions", on ? "on" : "off",
				on ? "lacks" : "has");
		tc_string_free(text);
		tc_kernel_free(kr);
		tc_options_free(o);
	}
	tc_module_free(m);
}

/* The lines of text containing both a and b. */
static int count_lines_with(const char *text, const char *a, const char *b)
{
	int n = 0;
	while (text && *text) {
		const char *end = strchr(text, '\n');
		size_t len = end ? (size_t)(end - text) : strlen(text);
		char line[512];
		snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1),
			text);
		n += strstr(line, a) && strstr(line, b);
		text = end ? end + 1 : NULL;
	}
	return n;
}

/* The default register tile of a float32 matmul holds three quarters of
 * the vector registers: with contract=on its reduction loop is 24 FMAs on
 * zmm registers compiled for x86-64-v4 (AVX-512's 32 registers: 6 rows by
 * 4 vectors) and 12 on ymm for x86-64-v3 (AVX2's 16); with regtile=none
 * there are fewer on zmm (on ymm LLVM's loop vectoriser unrolls further).  Whatever the host: the code is emitted,
 * not run. */
static void register_tile_uses_vector_fmas(void **state)
{
	enum { M = 96, K = 64, N = 128 };
	static float a[M * K], b[K * N];
	int64_t sa[2] = {M, K}, sb[2] = {K, N};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	static const struct {
		const char *cpu, *reg;
		int fmas;
	} levels[2] = {{"x86-64-v4", "zmm", 24}, {"x86-64-v3", "ymm", 12}};
	int tiled, untiled, l;
	tc_module *m;
	(void)state;
	m = tc_module_parse(ctx, "def mm(float(M,K) A, float(K,N) B) -> (C) {\n"
				 "  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n", "mm.tc");
	assert_non_null(m);
	for (l = 0; l < 2; l++)
		for (int pass = 0; pass < 2; pass++) {
			tc_options *o = tc_options_new();
			tc_kernel *kr;
			char *text, opts[128];
			snprintf(opts, sizeof(opts), "cpu=%s contract=on%s", levels[l].cpu,
				pass ? " regtile=none tile=none" : "");
			assert_int_equal(tc_options_parse(o, opts, ctx), 0);
			kr = tc_compile(m, "mm", in, 2, o);
			if (!kr)
				fail_msg("%s", tc_context_error(ctx));
			text = tc_kernel_emit(kr, "asm");
			assert_non_null(text);
			*(pass ? &untiled : &tiled) = count_lines_with(text, "vfmadd", levels[l].reg);
			tc_string_free(text);
			tc_kernel_free(kr);
			tc_options_free(o);
			if (pass) {
				print_message("%s, vfmadd on %s: %d register-tiled, %d without\n",
					levels[l].cpu, levels[l].reg, tiled, untiled);
				assert_true(tiled >= levels[l].fmas);
				if (l == 0) /* AVX2's loop vectoriser unrolls more */
					assert_true(untiled < tiled);
			}
		}
	tc_module_free(m);
}

static tc_kernel *kernel_with(tc_module *m, const DLTensor *const *in, int nin,
	const char *opts);

/* Run kernel "k" of m on inputs with options text opts into out (poisoned
 * with NaN first); the emitted IR into ir (may be NULL). */
static void run_with_outs(tc_module *m, const DLTensor *const *in, int nin, DLTensor *out,
	int nout, const char *opts, char **ir)
{
	tc_options *o = tc_options_new();
	tc_kernel *k;
	DLTensor *outs[4];
	int64_t i, n;
	int j;
	assert_true(nout >= 1 && nout <= 4);
	for (j = 0; j < nout; j++) {
		outs[j] = &out[j];
		for (i = 0, n = 1; i < out[j].ndim; i++)
			n *= out[j].shape[i];
		for (i = 0; i < n; i++)
			((float *)out[j].data)[i] = NAN;
	}
	assert_int_equal(tc_options_parse(o, opts, ctx), 0);
	k = tc_compile(m, "k", in, nin, o);
	if (!k)
		fail_msg("%s: %s", opts, tc_context_error(ctx));
	if (tc_kernel_run(k, in, nin, outs, nout) != 0)
		fail_msg("%s: %s", opts, tc_context_error(ctx));
	tc_kernel_free(k);
	tc_options_free(o);
	if (ir) { /* for x86-64-v4, as kernel_with's texts */
		k = kernel_with(m, in, nin, opts);
		assert_non_null(*ir = tc_kernel_emit(k, "ir"));
		tc_kernel_free(k);
	}
}

static void run_with(tc_module *m, const DLTensor *const *in, int nin, DLTensor *out,
	const char *opts, char **ir)
{
	run_with_outs(m, in, nin, out, 1, opts, ir);
}

/* The kernel "k" of m compiled under options opts for the texts the tests
 * read (tcomp emit): for x86-64-v4 (cpu=x86-64-v4: AVX-512, 64-byte
 * vectors and 32 registers, a Zen 4 core's caches) whatever the host, as
 * the expected texts below were written for it; the runs check the host's
 * own code. */
static tc_kernel *kernel_with(tc_module *m, const DLTensor *const *in, int nin, const char *opts)
{
	tc_options *o = tc_options_new();
	tc_kernel *k;
	char text[512];
	snprintf(text, sizeof(text), "cpu=x86-64-v4 %s", opts);
	assert_int_equal(tc_options_parse(o, text, ctx), 0);
	k = tc_compile(m, "k", in, nin, o);
	if (!k)
		fail_msg("%s: %s", opts, tc_context_error(ctx));
	tc_options_free(o);
	return k;
}

/* k (compiled by kernel_with under opts) where the host runs x86-64-v4
 * code, else k freed and "k" of m compiled again under opts for the host:
 * a kernel whose text a test reads and which it then runs. */
static tc_kernel *for_the_host(tc_kernel *k, tc_module *m, const DLTensor *const *in, int nin,
	const char *opts)
{
	tc_options *o;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
		__builtin_cpu_supports("avx512vl"))
		return k;
	tc_kernel_free(k);
	o = tc_options_new();
	assert_int_equal(tc_options_parse(o, opts, ctx), 0);
	k = tc_compile(m, "k", in, nin, o);
	if (!k)
		fail_msg("%s: %s", opts, tc_context_error(ctx));
	tc_options_free(o);
	return k;
}

/* Stage stage of kernel k (tcomp emit --stage). */
static char *emitted(tc_kernel *k, const char *stage)
{
	char *text = tc_kernel_emit(k, stage);
	if (!text)
		fail_msg("emit %s: %s", stage, tc_context_error(ctx));
	return text;
}

/* Fill v[0..n) with values uniform in [lo, hi) from the generator *r
 * (a linear congruential one). */
static void fill_uniform(float *v, size_t n, uint64_t *r, double lo, double hi)
{
	size_t i;
	for (i = 0; i < n; i++, *r = *r * 6364136223846793005ULL + 1)
		v[i] = (float)(lo + (double)(*r >> 11) / 9007199254740992.0 * (hi - lo));
}

/* Stage stage of the kernel compiled under options opts. */
static char *stage_of(tc_module *m, const DLTensor *const *in, int nin, const char *opts,
	const char *stage)
{
	tc_kernel *k = kernel_with(m, in, nin, opts);
	char *text = emitted(k, stage);
	tc_kernel_free(k);
	return text;
}

/* The cpu option: code for an x86-64 level whatever the host.  A matmul's
 * assembly for x86-64 has no ymm or zmm register, for x86-64-v3 ymm and
 * no zmm, for x86-64-v4 zmm; the baseline level runs on every x86-64 host
 * with the interpreter's result bit for bit (contract=on: fmaf's bits,
 * through a call where the level has no FMA instruction); x86-64-v4 runs
 * with the same result where the host has AVX-512 and is refused where it
 * has not, naming the level, the output left as it was and the kernel
 * still usable by nothing else; an unknown level is a parse error naming
 * the values. */
static void cpu_levels_compile_for_any_host(void **state)
{
	enum { M = 13, K = 29, N = 40 };
	static float a[M * K], b[K * N], c[3][M * N];
	static const struct {
		const char *cpu, *has, *lacks[2];
	} levels[] = {{"x86-64", "xmm", {"ymm", "zmm"}}, {"x86-64-v3", "ymm", {"zmm", NULL}},
		{"x86-64-v4", "zmm", {NULL, NULL}}};
	int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor C = {c[0], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
	DLTensor *out[1] = {&C};
	const DLTensor *in[2] = {&A, &B};
	int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
		     __builtin_cpu_supports("avx512vl");
	uint64_t r = 5;
	tc_options *o = tc_options_new();
	tc_module *m;
	tc_kernel *k;
	size_t l;
	int i;
	(void)state;
	for (i = 0; i < M * K; i++)
		a[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < K * N; i++)
		b[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(M,K) A, float(K,N) B) -> (C) {\n"
				 "  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n", "mm.tc");
	assert_non_null(m);
	run_with(m, in, 2, &(DLTensor){c[1], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0},
		"target=interp", NULL);
	for (l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
		char opts[64], *text;
		snprintf(opts, sizeof(opts), "cpu=%s", levels[l].cpu);
		assert_int_equal(tc_options_parse(o, opts, ctx), 0);
		k = tc_compile(m, "k", in, 2, o);
		if (!k)
			fail_msg("%s: %s", opts, tc_context_error(ctx));
		text = tc_kernel_emit(k, "asm");
		assert_non_null(text);
		if (!count_lines_with(text, "%", levels[l].has))
			fail_msg("%s: no %s register in the assembly", opts, levels[l].has);
		for (i = 0; i < 2; i++)
			if (levels[l].lacks[i] && count_lines_with(text, "%", levels[l].lacks[i]))
				fail_msg("%s: %s registers in the assembly", opts, levels[l].lacks[i]);
		tc_string_free(text);
		for (i = 0; i < M * N; i++)
			c[0][i] = NAN;
		if (l == 2 && !avx512) {
			assert_int_equal(tc_kernel_run(k, in, 2, out, 1), -1);
			assert_non_null(strstr(tc_context_error(ctx),
				"'k' was compiled with cpu=x86-64-v4, whose instructions this CPU ("));
			assert_non_null(strstr(tc_context_error(ctx), "compile with cpu=host"));
			for (i = 0; i < M * N; i++)
				assert_true(isnan(c[0][i]));
		} else {
			assert_int_equal(tc_kernel_run(k, in, 2, out, 1), 0);
			assert_memory_equal(c[0], c[1], sizeof(c[0]));
		}
		tc_kernel_free(k);
	}
	expect_parse_error(o, "cpu=znver3", "option 'cpu' cannot be 'znver3' (allowed: host|x86-64|");
	tc_options_free(o);
	tc_module_free(m);
}

/* Loops that LLVM's loop vectoriser vectorises (a pointwise def, no
 * register tile) use 64-byte vectors wherever the description says
 * AVX-512: for x86-64-v4, and for an AVX-512 host whose own CPU name
 * prefers 256-bit vectors (Intel's: codegen/llvm_jit.c adds
 * -prefer-256-bit to the host's features; softmax 128 x 1000 took 0.71-
 * 0.78x the time, docs/performance.md, "An Intel host"); the results the
 * interpreter's. */
static void avx512_loops_use_whole_vectors(void **state)
{
	enum { N = 1000 };
	static float x[N], y[2][N];
	int64_t sn[1] = {N};
	DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	const DLTensor *in[1] = {&X};
	int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		     __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
		     __builtin_cpu_supports("avx512vl");
	uint64_t r = 91;
	tc_module *m;
	char *text;
	int i, v;
	(void)state;
	fill_uniform(x, N, &r, -1, 1);
	m = tc_module_parse(ctx, "def k(float(N) X) -> (Y) { Y(i) = fmax(X(i) * 2.5 + 1, 0) }\n",
		"pw.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "cpu=x86-64-v4", "asm");
	if (!count_lines_with(text, "%", "zmm"))
		fail_msg("cpu=x86-64-v4: no zmm register in the assembly:\n%s", text);
	tc_string_free(text);
	text = stage_of(m, in, 1, "cpu=host", "llvm");
	if (strstr(text, "+avx512f") && !strstr(text, "-prefer-256-bit"))
		fail_msg("an AVX-512 host's features without -prefer-256-bit");
	tc_string_free(text);
	if (avx512) {
		text = stage_of(m, in, 1, "cpu=host", "asm");
		if (!count_lines_with(text, "%", "zmm"))
			fail_msg("AVX-512 host: no zmm register in the assembly:\n%s", text);
		tc_string_free(text);
	}
	for (v = 0; v < 2; v++) {
		DLTensor Y = {y[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
		for (i = 0; i < N; i++)
			y[v][i] = NAN;
		run_with(m, in, 1, &Y, v ? "target=interp" : "cpu=host", NULL);
	}
	for (i = 0; i < N; i++) {
		assert_false(isnan(y[0][i]));
		assert_memory_equal(&y[0][i], &y[1][i], sizeof(float));
	}
	tc_module_free(m);
}

/* The contract option's rule (ir/ir.h, tc_ir_fma_of): x * y - z,
 * z - x * y and x * y + z * x round once, the left product fused when
 * both sides are products, and a product read back from a temporary does
 * not fuse (it was rounded when stored).  The compiled code (also without
 * vector instructions, and with the temporary inlined or not), the
 * interpreter under the same option and the C stage agree bit for bit with
 * fmaf; contract=off rounds every operation. */
static void contract_rule_is_the_same_everywhere(void **state)
{
	enum { N = 203 };
	static float x[N], y[N], z[N], out[4][N];
	static const char *const opts[] = {"", "vector=1", "inline=off", "target=interp",
		"contract=off", "contract=off target=interp"};
	int64_t sn[1] = {N};
	DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	DLTensor Y = {y, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	DLTensor Z = {z, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	DLTensor O[4];
	const DLTensor *in[3] = {&X, &Y, &Z};
	uint64_t r = 77;
	tc_module *m;
	char *text;
	size_t v;
	int i, j;
	(void)state;
	for (i = 0; i < N; i++) {
		x[i] = (float)tu_rand_unit(&r) * 2 - 1;
		y[i] = (float)tu_rand_unit(&r) * 2 - 1;
		z[i] = (float)tu_rand_unit(&r) * 2 - 1;
	}
	for (j = 0; j < 4; j++)
		O[j] = (DLTensor){out[j], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	m = tc_module_parse(ctx, "def k(float(N) X, float(N) Y, float(N) Z) -> (P, Q, R, S) {\n"
				 "  P(i) = X(i) * Y(i) - Z(i)\n"
				 "  Q(i) = Z(i) - X(i) * Y(i)\n"
				 "  R(i) = X(i) * Y(i) + Z(i) * X(i)\n"
				 "  T(i) = X(i) * Z(i)\n"
				 "  S(i) = T(i) + Y(i)\n}\n", "fma.tc");
	assert_non_null(m);
	for (v = 0; v < sizeof(opts) / sizeof(opts[0]); v++) {
		int on = !strstr(opts[v], "contract=off");
		run_with_outs(m, in, 3, O, 4, opts[v], NULL);
		for (i = 0; i < N; i++) {
			float want[4], p = x[i] * z[i];
			want[0] = on ? fmaf(x[i], y[i], -z[i]) : x[i] * y[i] - z[i];
			want[1] = on ? fmaf(-x[i], y[i], z[i]) : z[i] - x[i] * y[i];
			want[2] = on ? fmaf(x[i], y[i], z[i] * x[i]) : x[i] * y[i] + z[i] * x[i];
			want[3] = p + y[i];
			for (j = 0; j < 4; j++)
				if (memcmp(&out[j][i], &want[j], sizeof(float)))
					fail_msg("%s: output %d [%d] = %a, expected %a", opts[v], j, i,
						(double)out[j][i], (double)want[j]);
		}
	}
	text = stage_of(m, in, 3, "", "c");
	assert_non_null(strstr(text, "fmaf("));
	tc_string_free(text);
	text = stage_of(m, in, 3, "contract=off", "c");
	assert_null(strstr(text, "fmaf("));
	tc_string_free(text);
	tc_module_free(m);
}

static char *ir_of(tc_module *m, const DLTensor *const *in, int nin, const char *opts)
{
	return stage_of(m, in, nin, opts, "ir");
}

/* Run m's k on in (nin inputs) under each of the nv option sets opts, its
 * float32 output of shape shape[0..ndim) into row v of y (rows of the
 * output's size): no NaN in row 0, rows 1 .. nexact-1 bit for bit row 0,
 * the others (the interpreter's, whose sums run in another order) within
 * rel of row 0. */
static void run_variants(tc_module *m, const DLTensor *const *in, int nin, int ndim,
	int64_t *shape, float *y, const char *const *opts, int nv, int nexact, float rel)
{
	int64_t n = 1, i;
	int v;
	for (v = 0; v < ndim; v++)
		n *= shape[v];
	for (v = 0; v < nv; v++) {
		DLTensor Y = {y + v * n, {kDLCPU, 0}, ndim, {kDLFloat, 32, 1}, shape, NULL, 0};
		run_with(m, in, nin, &Y, opts[v], NULL);
	}
	for (i = 0; i < n; i++) {
		assert_false(isnan(y[i]));
		for (v = 1; v < nv; v++)
			if (v < nexact)
				assert_memory_equal(&y[i], &y[v * n + i], sizeof(float));
			else
				assert_true(fabsf(y[i] - y[v * n + i]) <= rel * fabsf(y[v * n + i]) + 1e-30f);
	}
}

/* Row buffers (polyhedral/contract.c; share=row): softmax's shared
 * exponentials live in one row per thread on the stack once the rows are
 * fused (an alloca in
 * the kernel, or in the outlined parallel loop when rows run on threads),
 * bit for bit the results of share=off; where a row is still needed after
 * its loop (a sum over all rows comes between), the temporary keeps its
 * workspace region, with the same results. */
static void row_buffers(void **state)
{
	enum { N = 300, D = 200, V = 5 };
	static float x[N * D], y[V][N * D];
	int64_t sx[2] = {N, D};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	const DLTensor *in[1] = {&X};
	static const char *const opts[V] = {"vecreduce=off parallel=off share=row",
		"vecreduce=off parallel=on threads=2 share=row", "vecreduce=off share=off parallel=off",
		"vecreduce=off share=off parallel=on threads=2", "target=interp"};
	uint64_t r = 77;
	char *text;
	tc_module *m;
	int i;
	(void)state;
	for (i = 0; i < N * D; i++)
		x[i] = (float)tu_rand_unit(&r) * 8 - 4;
	m = tc_module_parse(ctx, "def k(float(N,D) I) -> (O) {\n"
				 "  mx(n) max=! I(n,r_d)\n"
				 "  sm(n) +=! exp(I(n,r_d) - mx(n))\n"
				 "  O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n}\n", "softmax.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, opts[0], "llvm");
	assert_non_null(strstr(text, "%O_shared = alloca [200 x float], align 64"));
	assert_null(strstr(text, ".par0"));
	tc_string_free(text);
	text = stage_of(m, in, 1, opts[1], "llvm");
	{ /* in the outlined loop, not in the kernel */
		const char *par = strstr(text, "define internal void @tc_k.par0");
		assert_non_null(par);
		assert_non_null(strstr(par, "%O_shared = alloca [200 x float], align 64"));
		assert_true(strstr(text, "%O_shared = alloca") > par);
	}
	tc_string_free(text);
	/* the rows not fused: no row buffer (and, fusion min, no temporary) */
	text = stage_of(m, in, 1, "fusion=min share=row", "llvm");
	assert_null(strstr(text, "alloca ["));
	tc_string_free(text);
	text = stage_of(m, in, 1, "", "llvm"); /* share=on: into O */
	assert_null(strstr(text, "alloca ["));
	tc_string_free(text);
	run_variants(m, in, 1, 2, sx, y[0], opts, V, V - 1, 1e-6f);
	tc_module_free(m);

	/* every row's exponentials are read again after the total over all
	 * rows: no row buffer, the workspace region (untouched until this
	 * kernel runs) holds them */
	m = tc_module_parse(ctx, "def k(float(N,D) I) -> (O) {\n"
				 "  sm(n) +=! exp(I(n,r_d))\n"
				 "  tot +=! sm(r_n)\n"
				 "  O(n,d) = exp(I(n,d)) / tot\n}\n", "total.tc");
	assert_non_null(m);
	text = ir_of(m, in, 1, opts[0]);
	assert_non_null(strstr(text, "O_shared[n, d] = exp(I[n, d])"));
	tc_string_free(text);
	text = stage_of(m, in, 1, opts[0], "llvm");
	assert_null(strstr(text, "alloca ["));
	tc_string_free(text);
	run_variants(m, in, 1, 2, sx, y[0], opts, V, V - 1, 1e-5f);
	tc_module_free(m);
}

/* Inlining: layer norm's centred temporary is computed again where it is
 * read (its tensor and statement disappear from the IR), results bit for
 * bit those of inline=off and of the interpreter; temporaries that would
 * be recomputed per reduction step, that call a builtin, or whose operand
 * changes before the read stay stored. */
static void inlining_cheap_temporaries(void **state)
{
	enum { N = 37, D = 301 };
	static float x[N * D], g[D], bt[D], y[3][N * D], a[N * 8], b[8 * 5], c[2][N * 5];
	static const char *const opts[3] = {"vecreduce=off", "vecreduce=off inline=off",
		"target=interp"};
	int64_t sx[2] = {N, D}, sd[1] = {D}, sa[2] = {N, 8}, sb[2] = {8, 5}, sc[2] = {N, 5},
		sn[1] = {N};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor G = {g, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sd, NULL, 0};
	DLTensor Bt = {bt, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sd, NULL, 0};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor A1 = {a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	DLTensor C;
	const DLTensor *in[3] = {&X, &G, &Bt}, *ab[2] = {&A, &B}, *a1[1] = {&A1};
	uint64_t r = 17;
	char *text;
	tc_module *m;
	int i, j;
	(void)state;
	for (i = 0; i < N * D; i++)
		x[i] = (float)tu_rand_unit(&r) * 4 - 1;
	for (i = 0; i < D; i++) {
		g[i] = (float)tu_rand_unit(&r) + 0.5f;
		bt[i] = (float)tu_rand_unit(&r) * 2 - 1;
	}
	for (i = 0; i < N * 8; i++)
		a[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < 8 * 5; i++)
		b[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(N,D) X, float(D) G, float(D) Bt) -> (Y) {\n"
				 "  mean(n) +=! X(n,r_d)\n"
				 "  mean(n) = mean(n) / D\n"
				 "  xc(n,d) = X(n,d) - mean(n)\n"
				 "  var(n) +=! xc(n,r_d) * xc(n,r_d)\n"
				 "  var(n) = var(n) / D\n"
				 "  Y(n,d) = xc(n,d) * rsqrt(var(n) + 0.00001) * G(d) + Bt(d)\n}\n",
		"layernorm.tc");
	assert_non_null(m);
	text = ir_of(m, in, 3, "");
	assert_null(strstr(text, "temp   xc"));
	assert_non_null(strstr(text, "(X[n, r_d] - mean[n]) * (X[n, r_d] - mean[n])"));
	tc_string_free(text);
	text = ir_of(m, in, 3, "inline=off");
	assert_non_null(strstr(text, "temp   xc"));
	tc_string_free(text);
	run_variants(m, in, 3, 2, sx, y[0], opts, 3, 3, 0);
	tc_module_free(m);

	/* read once per step of a reduction over j: T stays */
	m = tc_module_parse(ctx, "def k(float(M,J) A, float(J,K) B) -> (C) {\n"
				 "  T(i,j) = A(i,j) * 2\n"
				 "  C(i,k) +=! T(i,r_j) * B(r_j,k)\n}\n", "t.tc");
	assert_non_null(m);
	text = ir_of(m, ab, 2, "");
	assert_non_null(strstr(text, "temp   T"));
	tc_string_free(text);
	for (i = 0; i < 2; i++) {
		C = (DLTensor){c[i], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
		run_with(m, ab, 2, &C, i ? "target=interp" : "vecreduce=off", NULL);
	}
	assert_memory_equal(c[0], c[1], sizeof(c[0]));
	tc_module_free(m);

	/* a builtin call, and an operand written again before the read */
	m = tc_module_parse(ctx, "def k(float(N) A) -> (O) {\n"
				 "  E(i) = exp(A(i))\n"
				 "  w(i) = A(i) * 3\n"
				 "  t(i) = w(i) + 1\n"
				 "  w(i) = w(i) * 2\n"
				 "  O(i) = t(i) + w(i) + E(i)\n}\n", "e.tc");
	assert_non_null(m);
	text = ir_of(m, a1, 1, "");
	assert_non_null(strstr(text, "temp   E"));
	assert_non_null(strstr(text, "temp   t"));
	tc_string_free(text);
	for (i = 0; i < 2; i++) {
		C = (DLTensor){c[i], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
		run_with(m, a1, 1, &C, i ? "target=interp" : "", NULL);
	}
	for (j = 0; j < N; j++) /* exp within 2 ulp of libm's */
		assert_true(fabsf(c[0][j] - c[1][j]) <= 4e-7f * fabsf(c[1][j]));
	tc_module_free(m);
}

/* Sharing: softmax's exponentials are computed once, into O, and read back
 * by the sum and the division, bit for bit the results of share=off; an
 * expression whose operand changes between the two statements is not
 * shared, and one without a builtin call neither. */
static void sharing_expensive_subexpressions(void **state)
{
	enum { N = 29, D = 77 };
	static float x[N * D], y[4][N * D];
	int64_t sx[2] = {N, D};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Y;
	const DLTensor *in[1] = {&X};
	static const char *const opts[4] = {"vecreduce=off", "vecreduce=off share=off",
		"vecreduce=off share=row", "target=interp"};
	uint64_t r = 31;
	char *text;
	tc_module *m;
	int i, v;
	(void)state;
	for (i = 0; i < N * D; i++)
		x[i] = (float)tu_rand_unit(&r) * 8 - 4;
	m = tc_module_parse(ctx, "def k(float(N,D) I) -> (O) {\n"
				 "  mx(n) max=! I(n,r_d)\n"
				 "  sm(n) +=! exp(I(n,r_d) - mx(n))\n"
				 "  O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n}\n", "softmax.tc");
	assert_non_null(m);
	text = ir_of(m, in, 1, "");
	assert_non_null(strstr(text, "O[n, d] = exp((I[n, d] - mx[n]))"));
	assert_non_null(strstr(text, "sm[n] +=! O[n, r_d]"));
	assert_non_null(strstr(text, "O[n, d] = (O[n, d] / sm[n])"));
	tc_string_free(text);
	/* share=row: into a temporary (a row buffer, see row_buffers) */
	text = ir_of(m, in, 1, "share=row");
	assert_non_null(strstr(text, "temp   O_shared: float32(N, D)"));
	assert_non_null(strstr(text, "O_shared[n, d] = exp((I[n, d] - mx[n]))"));
	assert_non_null(strstr(text, "sm[n] +=! O_shared[n, r_d]"));
	assert_non_null(strstr(text, "O[n, d] = (O_shared[n, d] / sm[n])"));
	tc_string_free(text);
	/* ... except with the rows not fused (fusion min): into O */
	text = ir_of(m, in, 1, "share=row fusion=min");
	assert_null(strstr(text, "O_shared"));
	assert_non_null(strstr(text, "sm[n] +=! O[n, r_d]"));
	tc_string_free(text);
	text = ir_of(m, in, 1, "share=off");
	assert_null(strstr(text, "+=! O["));
	tc_string_free(text);
	run_variants(m, in, 1, 2, sx, y[0], opts, 4, 3, 1e-6f);
	tc_module_free(m);

	m = tc_module_parse(ctx, "def k(float(N,D) I) -> (O) {\n"
				 "  mx(n) max=! I(n,r_d)\n"
				 "  sm(n) +=! exp(I(n,r_d) - mx(n))\n"
				 "  mx(n) = mx(n) + 1\n"
				 "  O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n}\n", "clobbered.tc");
	assert_non_null(m);
	text = ir_of(m, in, 1, "");
	assert_null(strstr(text, "+=! O["));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		Y = (DLTensor){y[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
		run_with(m, in, 1, &Y, v ? "target=interp" : "", NULL);
	}
	for (i = 0; i < N * D; i++)
		assert_true(fabsf(y[0][i] - y[1][i]) <= 1e-6f * fabsf(y[1][i]) + 1e-30f);
	tc_module_free(m);

	m = tc_module_parse(ctx, "def k(float(N,D) I) -> (O) {\n"
				 "  sm(n) +=! I(n,r_d) * 2\n"
				 "  O(n,d) = I(n,d) * 2 / sm(n)\n}\n", "cheap.tc");
	assert_non_null(m);
	text = ir_of(m, in, 1, "");
	assert_null(strstr(text, "+=! O["));
	tc_string_free(text);
	tc_module_free(m);
}

/* Dot products: fully connected 128 -> 10 (rows of 10 outputs, shorter
 * than a vector; both operands read along the reduction) gets the
 * reduction innermost, alone in its loop, with the init and the bias +
 * ReLU around it and no register tile; its sums vectorise (vecreduce);
 * results within a reordered sum's tolerance of the interpreter's.  With
 * vecreduce=off the register tile stays. */
static void dot_product_contractions(void **state)
{
	enum { B = 37, I = 128, O = 10 };
	static float in_[B * I], w[O * I], bias[O], out[2][B * O];
	int64_t si[2] = {B, I}, sw[2] = {O, I}, sb[1] = {O}, so[2] = {B, O};
	DLTensor In = {in_, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor W = {w, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0};
	DLTensor Bs = {bias, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor Out;
	const DLTensor *in[3] = {&In, &W, &Bs};
	uint64_t r = 41;
	char *text;
	tc_module *m;
	tc_kernel *k;
	int i, v;
	(void)state;
	for (i = 0; i < B * I; i++)
		in_[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < O * I; i++)
		w[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < O; i++)
		bias[i] = (float)tu_rand_unit(&r) - 0.5f;
	m = tc_module_parse(ctx, "def k(float(B,I) In, float(O,I) W, float(O) Bias) -> (Out) {\n"
				 "  T(b,o) +=! In(b,r_i) * W(o,r_i)\n"
				 "  Out(b,o) = fmax(T(b,o) + Bias(o), 0)\n}\n", "fc.tc");
	assert_non_null(m);
	k = kernel_with(m, in, 3, "");
	text = emitted(k, "ast");
	assert_null(strstr(text, "tc_regtile"));
	assert_true(tu_contains(text, "    S0_init(c0, c1);\n"
				      "    for (int c2 = 0; c2 <= 127; c2 += 1)\n"
				      "      S0(c0, c1, c2);\n"
				      "    S1(c0, c1);\n"));
	tc_string_free(text);
	text = emitted(k, "llvm");
	assert_non_null(strstr(text, "reassoc float @llvm.vector.reduce.fadd"));
	tc_string_free(text);
	tc_kernel_free(k);
	text = stage_of(m, in, 3, "vecreduce=off", "ast");
	assert_non_null(strstr(text, "tc_regtile"));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		Out = (DLTensor){out[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, so, NULL, 0};
		run_with(m, in, 3, &Out, v ? "target=interp" : "", NULL);
	}
	for (i = 0; i < B * O; i++) {
		assert_false(isnan(out[0][i]));
		assert_true(fabsf(out[0][i] - out[1][i]) <= 1e-5f * fabsf(out[1][i]) + 1e-6f * I);
	}
	tc_module_free(m);
}

/* Operand panels in registers (polyhedral/order.c): a contraction over 13
 * terms into rows of one vector (a Kronecker factor's shape) gets its
 * reduction innermost, alone in its loop, and no register tile; rows of
 * two vectors (a panel of 26 vectors, more than the accumulators) keep the
 * register tile.  Results bit-identical with the interpreter's, on random
 * inputs and poisoned outputs (the terms keep their order). */
static void operand_panels_in_registers(void **state)
{
	enum { M = 7, N = 13, N1 = 5, DMAX = 32 };
	static float x[M * N * N1], w[DMAX * N], y[2][M * N1 * DMAX];
	int64_t sx[3] = {M, N, N1}, sw[2][2] = {{16, N}, {DMAX, N}};
	int64_t sy[2][3] = {{M, N1, 16}, {M, N1, DMAX}};
	DLTensor X = {x, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor W, Y;
	const DLTensor *in[2] = {&X, &W};
	uint64_t r = 43;
	char *text;
	tc_module *m;
	int c, i, v;
	(void)state;
	for (i = 0; i < M * N * N1; i++)
		x[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < DMAX * N; i++)
		w[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(M,N,N1) X, float(D,N) W) -> (Y) {\n"
				 "  Y(m,n1,d) +=! X(m,r_n,n1) * W(d,r_n)\n}\n", "panel.tc");
	assert_non_null(m);
	for (c = 0; c < 2; c++) {
		W = (DLTensor){w, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw[c], NULL, 0};
		text = stage_of(m, in, 2, "", "ast");
		if (c == 0) {
			assert_null(strstr(text, "tc_regtile"));
			assert_non_null(strstr(text, "for (int c3 = 0; c3 <= 12; c3 += 1)\n"));
		} else
			assert_non_null(strstr(text, "tc_regtile"));
		tc_string_free(text);
		for (v = 0; v < 2; v++) {
			Y = (DLTensor){y[v], {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sy[c], NULL, 0};
			run_with(m, in, 2, &Y, v ? "target=interp" : "", NULL);
		}
		for (i = 0; i < M * N1 * (int)sy[c][2]; i++) {
			assert_false(isnan(y[0][i]));
			assert_memory_equal(&y[0][i], &y[1][i], sizeof(float));
		}
	}
	tc_module_free(m);
}

/* Streaming stores: a 4 MiB output written once per element gets
 * vmovntps (and an sfence) under stream=auto, for every vector store of
 * the streaming copy also with AVX2's half-line vectors, none under
 * stream=off, and
 * the results are right with the output 64-byte aligned (the streaming
 * copy of the loop nest) and not (the plain copy); a reduction's output
 * is never streamed, nor an output whose rows are no whole number of
 * cache lines; vector stores of two whole lines are streamed. */
static void streaming_stores(void **state)
{
	enum { N = 1024, D = 1024 };
	float *x = aligned_alloc(64, (size_t)N * D * sizeof(float));
	float *y = aligned_alloc(64, ((size_t)N * D + 16) * sizeof(float));
	int64_t sx[2] = {N, D}, ss[1] = {N};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Y, S;
	const DLTensor *in[1] = {&X};
	static float rs[N];
	uint64_t r = 23;
	char *text;
	tc_module *m;
	int64_t i;
	int off;
	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	for (i = 0; i < N * D; i++)
		x[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(N,D) X) -> (Y) { Y(n,d) = X(n,d) * 3 + 1 }\n", "s.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "stream=on", "asm");
	assert_non_null(strstr(text, "vmovntps"));
	assert_non_null(strstr(text, "sfence"));
	tc_string_free(text);
	for (off = 0; off < 2; off++) { /* aligned, then 4 bytes off */
		Y = (DLTensor){y + off, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
		run_with(m, in, 1, &Y, "stream=on", NULL);
		for (i = 0; i < N * D; i++)
			if (y[off + i] != fmaf(x[i], 3, 1)) /* contract=on: one rounding */
				fail_msg("element %lld (offset %d): %g, expected %g", (long long)i, off,
					(double)y[off + i], (double)fmaf(x[i], 3, 1));
	}
	text = stage_of(m, in, 1, "stream=off", "asm");
	assert_null(strstr(text, "vmovnt"));
	tc_string_free(text);
	/* AVX2's 32-byte vectors: both halves of every line streamed (once
	 * only the 64-byte aligned first half was, and the plain store of the
	 * second half to the streamed line cost 75x on a Zen 3); the aligned
	 * stores are the streaming copy's, the plain copy's are vmovups */
	text = stage_of(m, in, 1, "cpu=x86-64-v3 stream=on", "asm");
	assert_true(count_lines_with(text, "vmovntps", "%ymm") > 0);
	assert_int_equal(count_lines_with(text, "vmovaps\t%ymm", "("), 0);
	tc_string_free(text);
	tc_module_free(m);
	m = tc_module_parse(ctx, "def k(float(N,D) X) -> (S) { S(n) +=! X(n,r_d) }\n", "r.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "stream=on", "asm");
	assert_null(strstr(text, "vmovnt"));
	tc_string_free(text);
	S = (DLTensor){rs, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, ss, NULL, 0};
	run_with(m, in, 1, &S, "", NULL);
	for (i = 0; i < N; i++) {
		float want = 0;
		int64_t j;
		for (j = 0; j < D; j++)
			want += x[i * D + j];
		assert_true(fabsf(rs[i] - want) <= 1e-6f * D);
	}
	tc_module_free(m);
	/* an output the kernel reads back (a residual stream read by its
	 * norm): left in the caches for its reader, not streamed */
	m = tc_module_parse(ctx, "def k(float(N,D) X) -> (H, S) {\n"
		"  H(n,d) = X(n,d) * 3 + 1\n  S(n) +=! H(n,r_d) * H(n,r_d)\n}\n", "h.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "stream=on", "asm");
	assert_null(strstr(text, "vmovnt"));
	tc_string_free(text);
	{
		DLTensor HS[2] = {{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0},
			{rs, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, ss, NULL, 0}};
		run_with_outs(m, in, 1, HS, 2, "", NULL);
	}
	for (i = 0; i < N; i++) {
		double want = 0;
		int64_t j;
		for (j = 0; j < D; j++) {
			float h = fmaf(x[i * D + j], 3, 1); /* contract=on */
			if (y[i * D + j] != h)
				fail_msg("H element %lld: %g, expected %g", (long long)(i * D + j),
					(double)y[i * D + j], (double)h);
			want += (double)h * h;
		}
		assert_true(fabs(rs[i] - want) <= 1e-5 * want);
	}
	tc_module_free(m);
	/* rows of 1000 floats (4000 bytes, no whole number of cache lines):
	 * not streamed on any target, since a row's last vector would stream
	 * part of a line the next row's plain store fills (1.45x the time of
	 * not streaming, softmax's backward on a Zen 5); the results as
	 * before */
	{
		enum { D2 = 1000 };
		int64_t s2[2] = {N, D2};
		DLTensor X2 = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
		const DLTensor *in2[1] = {&X2};
		static const char *const cpus[2] = {"stream=on", "cpu=x86-64-v3 stream=on"};
		m = tc_module_parse(ctx, "def k(float(N,D) X) -> (Y) { Y(n,d) = X(n,d) * 3 + 1 }\n",
			"s2.tc");
		assert_non_null(m);
		for (off = 0; off < 2; off++) {
			text = stage_of(m, in2, 1, cpus[off], "asm");
			assert_null(strstr(text, "vmovnt"));
			tc_string_free(text);
		}
		memset(y, 0xff, (size_t)N * D2 * sizeof(float)); /* NaN: poisoned */
		Y = (DLTensor){y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
		run_with(m, in2, 1, &Y, "stream=on", NULL);
		for (i = 0; i < N * D2; i++)
			if (y[i] != fmaf(x[i], 3, 1))
				fail_msg("element %lld of rows of %d: %g, expected %g", (long long)i, D2,
					(double)y[i], (double)fmaf(x[i], 3, 1));
		tc_module_free(m);
	}
	/* each element written twice side by side (an upsampling, as max-pool's
	 * data gradient writes its rows): the vectoriser stores the pairs as
	 * <32 x float>, 128 bytes aligned to 64, two whole lines, streamed
	 * (they were not: only stores aligned to their whole size were); right
	 * aligned and 4 bytes off */
	{
		enum { D2 = 512 };
		int64_t s2[2] = {N, D2}, s3[2] = {N, 2 * D2};
		DLTensor X2 = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
		const DLTensor *in2[1] = {&X2};
		m = tc_module_parse(ctx, "def k(float(N,D) X) -> (Y) {\n"
			"  Y(n,d) = X(n,d/2) * 3 where d in 0:2*D\n}\n", "u.tc");
		assert_non_null(m);
		text = stage_of(m, in2, 1, "stream=on", "asm");
		assert_true(count_lines_with(text, "vmovntps", "%zmm") > 0);
		assert_non_null(strstr(text, "sfence"));
		tc_string_free(text);
		for (off = 0; off < 2; off++) {
			memset(y, 0xff, ((size_t)N * D + 16) * sizeof(float)); /* NaN: poisoned */
			Y = (DLTensor){y + off, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s3, NULL, 0};
			run_with(m, in2, 1, &Y, "stream=on", NULL);
			for (i = 0; i < N * 2 * D2; i++)
				if (y[off + i] != x[i / 2] * 3)
					fail_msg("upsampled element %lld (offset %d): %g, expected %g",
						(long long)i, off, (double)y[off + i], (double)(x[i / 2] * 3));
		}
		tc_module_free(m);
	}
	/* a transpose the user writes whose output takes 4 MiB: its full 16 x
	 * 16 squares transposed in registers in the streaming copy too (they
	 * were element-wise moves there: 4096 x 2048 took 4.4 times as long),
	 * each output row's vectors streamed; the partial squares of the last
	 * 6 rows moved element by element; for AVX-512 and AVX2 (2 x 2 squares
	 * of 8), on one thread and two, aligned and 4 bytes off, bit for bit */
	{
		enum { NB = 1040, KB = 1030 }; /* T: 1030 rows of 1040 floats, 65 lines */
		int64_t sb[2] = {NB, KB}, st[2] = {KB, NB};
		float *b = aligned_alloc(64, (size_t)NB * KB * sizeof(float));
		float *t = aligned_alloc(64, ((size_t)NB * KB + 16) * sizeof(float));
		DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
		const DLTensor *inb[1] = {&B};
		static const char *const topts[3] = {"stream=on", "threads=2 stream=on", "cpu=x86-64-v3 stream=on"};
		static const char *const regs[3] = {"%zmm", "%zmm", "%ymm"};
		int o, k, n;
		assert_non_null(b);
		assert_non_null(t);
		for (i = 0; i < (int64_t)NB * KB; i++)
			b[i] = (float)tu_rand_unit(&r) * 2 - 1;
		int scaled;
		for (scaled = 0; scaled < 2; scaled++) {
		m = tc_module_parse(ctx, scaled ? "def k(float(N,K) B) -> (T) { T(k,n) = B(n,k) * 2 - 1 }\n"
						: "def k(float(N,K) B) -> (T) { T(k,n) = B(n,k) }\n", "t.tc");
		assert_non_null(m);
		for (o = 0; o < 3; o++) {
			text = stage_of(m, inb, 1, topts[o], "asm");
			if (count_lines_with(text, "vmovntp", regs[o]) < 16)
				fail_msg("%s: a transposed square's 16 rows streamed expected", topts[o]);
			assert_non_null(strstr(text, "sfence"));
			tc_string_free(text);
			text = stage_of(m, inb, 1, topts[o], "llvm");
			if (!strstr(text, o < 2 ? "<16 x i32> <i32 0, i32 16, i32 2, i32 18, i32 4"
						: "<8 x i32> <i32 0, i32 8, i32 2, i32 10, i32 4"))
				fail_msg("%s: the transposing shuffles expected in the LLVM IR", topts[o]);
			tc_string_free(text);
			for (off = 0; off < 2; off++) {
				memset(t, 0xff, ((size_t)NB * KB + 16) * sizeof(float)); /* NaN */
				Y = (DLTensor){t + off, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, st, NULL, 0};
				run_with(m, inb, 1, &Y, topts[o], NULL);
				for (k = 0; k < KB; k++)
					for (n = 0; n < NB; n++) {
						float want = b[(int64_t)n * KB + k];
						if (scaled) /* contract=on: one rounding */
							want = fmaf(want, 2, -1);
						if (memcmp(&t[off + (int64_t)k * NB + n], &want, sizeof(float)))
							fail_msg("%s, offset %d, scaled %d: T(%d,%d) = %g, expected %g",
								topts[o], off, scaled, k, n,
								(double)t[off + (int64_t)k * NB + n], (double)want);
					}
			}
		}
		tc_module_free(m);
		}
		free(b);
		free(t);
	}
	free(x);
	free(y);
}

/* Streaming stores under stream=auto follow the last-level cache
 * (codegen/llvm_loop.c, choose_streamed), here an x86-64 level's (a Zen
 * 4 CCD's 32 MiB, whatever the host): an output of 4 MiB computed from a
 * row and a column of 4 KiB (the kernel's tensors: 4 MiB, less than a
 * quarter of the L3) is stored plainly, and streamed under stream=on;
 * one computed from an input of 8 MiB (16 MiB in all) is streamed; the
 * results are right each way. */
static void streaming_follows_the_last_level_cache(void **state)
{
	enum { N = 2048, D = 1024 };
	float *x = aligned_alloc(64, (size_t)N * D * sizeof(float));
	float *y = aligned_alloc(64, (size_t)N * D * sizeof(float));
	int64_t sd[1] = {D}, sn[1] = {N / 2}, sy[2] = {N / 2, D}, sx[2] = {N, D};
	DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sd, NULL, 0};
	DLTensor Z = {x + D, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	DLTensor X2 = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0}, Y;
	const DLTensor *in[2] = {&X, &Z}, *in2[1] = {&X2};
	static const char *const opts[2] = {"cpu=x86-64-v3 stream=auto", "cpu=x86-64-v3 stream=on"};
	uint64_t r = 41;
	tc_module *m;
	char *text;
	int64_t i;
	int o;
	(void)state;
	assert_true(x && y);
	for (i = 0; i < (int64_t)N * D; i++)
		x[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(D) X, float(N) Z) -> (Y) { Y(n,d) = X(d) * Z(n) }\n",
		"small.tc");
	assert_non_null(m);
	for (o = 0; o < 2; o++) {
		text = stage_of(m, in, 2, opts[o], "asm");
		if (o)
			assert_true(count_lines_with(text, "vmovntps", "%ymm") > 0);
		else
			assert_null(strstr(text, "vmovnt"));
		tc_string_free(text);
		Y = (DLTensor){y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0};
		run_with(m, in, 2, &Y, opts[o], NULL);
		for (i = 0; i < (int64_t)N / 2 * D; i++)
			if (y[i] != x[i % D] * x[D + i / D])
				fail_msg("%s: element %lld: %g, expected %g", opts[o], (long long)i,
					(double)y[i], (double)(x[i % D] * x[D + i / D]));
	}
	tc_module_free(m);
	m = tc_module_parse(ctx, "def k(float(N,D) X) -> (Y) { Y(n,d) = X(n,d) * 3 }\n", "big.tc");
	assert_non_null(m);
	text = stage_of(m, in2, 1, opts[0], "asm");
	assert_true(count_lines_with(text, "vmovntps", "%ymm") > 0);
	tc_string_free(text);
	Y = (DLTensor){y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	run_with(m, in2, 1, &Y, opts[0], NULL);
	for (i = 0; i < (int64_t)N * D; i++)
		if (y[i] != x[i] * 3)
			fail_msg("element %lld: %g, expected %g", (long long)i, (double)y[i],
				(double)(x[i] * 3));
	tc_module_free(m);
	free(x);
	free(y);
}

/* A rewrite of ir/pack.c checked on one def: its inputs random, each
 * output compiled under pack=on and pack=off and run with the interpreter
 * (outputs poisoned first), all three bit-identical; the IR under pack=on
 * has (or, "!x", lacks) each of want, and the AST has rows. */
typedef struct pack_case {
	const char *text;
	int nin, nout;
	int64_t shapes[5][5]; /* inputs, then outputs */
	int ranks[5];
	const char *want[3]; /* in the IR under pack=on ("!x": not) */
	const char *rows;    /* the register tile's rows loop (after tc_unroll) and
			      * its lanes (polyhedral/ast.c's point loops), or NULL */
} pack_case;

/* check_pack_case with options cpu before each run's and text's (NULL:
 * the texts for x86-64-v4, the runs for the host) and vector, when not
 * NULL, in the LLVM IR under pack=on. */
static void check_pack_case_on(const pack_case *cc, int c, uint64_t *r, const char *cpu,
	const char *vector)
{
	static const char *const base[3] = {"pack=on", "pack=off", "target=interp"};
	char opts[3][160];
	DLTensor t[3][5];
	const DLTensor *in[3];
	float *data[3][5];
	int64_t n[5];
	char *ir = NULL;
	int i, j, v;
	tc_module *m = tc_module_parse(ctx, cc->text, "pack.tc");
	assert_non_null(m);
	for (j = 0; j < cc->nin + cc->nout; j++) {
		for (i = 0, n[j] = 1; i < cc->ranks[j]; i++)
			n[j] *= cc->shapes[j][i];
		for (v = 0; v < 3; v++) {
			data[v][j] = malloc((size_t)n[j] * sizeof(float));
			assert_non_null(data[v][j]);
			t[v][j] = (DLTensor){data[v][j], {kDLCPU, 0}, cc->ranks[j],
				{kDLFloat, 32, 1}, (int64_t *)cc->shapes[j], NULL, 0};
		}
		if (j < cc->nin) {
			for (i = 0; i < n[j]; i++)
				data[0][j][i] = (float)tu_rand_unit(r) * 2 - 1;
			in[j] = &t[0][j];
		}
	}
	for (v = 0; v < 3; v++) {
		snprintf(opts[v], sizeof(opts[v]), "%s %s", cpu ? cpu : "", base[v]);
		run_with_outs(m, in, cc->nin, &t[v][cc->nin], cc->nout, opts[v],
			v || cpu ? NULL : &ir);
	}
	if (cpu)
		ir = stage_of(m, in, cc->nin, opts[0], "ir");
	if (vector) {
		char *llvm = stage_of(m, in, cc->nin, opts[0], "llvm");
		if (!strstr(llvm, vector))
			fail_msg("case %d: %s expected in the LLVM IR", (int)c, vector);
		tc_string_free(llvm);
	}
	if (cc->rows) {
		char *ast = stage_of(m, in, cc->nin, cpu ? cpu : "", "ast");
		if (!strstr(ast, cc->rows))
			fail_msg("case %d: %s expected in the AST:\n%s", (int)c, cc->rows, ast);
		tc_string_free(ast);
	}
	for (i = 0; i < 3 && cc->want[i]; i++)
		if ((cc->want[i][0] == '!') != !strstr(ir, cc->want[i] + (cc->want[i][0] == '!')))
			fail_msg("case %d: %s expected in the IR:\n%s", (int)c, cc->want[i], ir);
	tc_string_free(ir);
	for (j = cc->nin; j < cc->nin + cc->nout; j++)
		for (i = 0; i < n[j]; i++) {
			assert_false(isnan(data[0][j][i]));
			assert_memory_equal(&data[0][j][i], &data[1][j][i], sizeof(float));
			assert_memory_equal(&data[0][j][i], &data[2][j][i], sizeof(float));
		}
	for (j = 0; j < cc->nin + cc->nout; j++)
		for (v = 0; v < 3; v++)
			free(data[v][j]);
	tc_module_free(m);
}

static void check_pack_case(const pack_case *cc, int c, uint64_t *r)
{
	check_pack_case_on(cc, c, r, NULL, NULL);
}

/* A case of packing_in_panels: a pack_case, the options before each run's
 * and text's, and what the LLVM IR has (or NULL). */
typedef struct panel_case {
	pack_case pc;
	const char *cpu, *vector;
} panel_case;

/* Packing copies in panels (ir/pack.c, "Panels"), for x86-64-v3 (AVX2:
 * panels of 16 floats, register tiles of 6 rows by 2 vectors): B of a
 * matmul whose rows are 256 floats or more and whose output has 64 rows
 * or more, copied although it is read along its rows already, the
 * transposed B of A * B^T, a batch matmul's B (rank 3: the panels' rows
 * are (b, k)), and odd sizes (partial register tiles, a reduction of 301);
 * the register tile's vector code reads the panels (llvm.fmuladd on
 * <8 x float>).  With register tiles of 24 columns the tiles' vectors are
 * not proven to sit within a panel (origins 24 * c), so the reads are
 * scalar code, computing each element's place.  Left alone: rows of 250
 * (no whole panels) and of 128 floats, and an output of 40 rows.  Every
 * result bit-identical with pack=off and with the interpreter, on random
 * inputs and poisoned outputs. */
static void packing_in_panels(void **state)
{
	static const panel_case cases[] = {
		{{"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
			2, 1, {{70, 301}, {301, 256}, {70, 256}}, {2, 2, 2},
			{"B_packed: float32(K, N) in panels of 16 columns", NULL}, NULL},
			"cpu=x86-64-v3", "fmuladd.v8f32"},
		{{"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
			2, 1, {{67, 300}, {300, 272}, {67, 272}}, {2, 2, 2},
			{"in panels of 16 columns", NULL}, NULL},
			"cpu=x86-64-v3 regtile=4,24", NULL},
		{{"def k(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,r_k) * B(n,r_k) }",
			2, 1, {{70, 37}, {256, 37}, {70, 256}}, {2, 2, 2},
			{"B_packed: float32(K, N) in panels of 16 columns", NULL}, NULL},
			"cpu=x86-64-v3", "fmuladd.v8f32"},
		{{"def k(float(B,M,K) A, float(B,K,N) X) -> (C) { C(b,m,n) +=! A(b,m,r_k) * X(b,r_k,n) }",
			2, 1, {{3, 33, 40}, {3, 40, 256}, {3, 33, 256}}, {3, 3, 3},
			{"X_packed: float32(B, K, N) in panels of 16 columns", NULL}, NULL},
			"cpu=x86-64-v3", "fmuladd.v8f32"},
		{{"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
			2, 1, {{70, 30}, {30, 250}, {70, 250}}, {2, 2, 2}, {"!_packed", NULL}, NULL},
			"cpu=x86-64-v3", NULL},
		{{"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
			2, 1, {{70, 30}, {30, 128}, {70, 128}}, {2, 2, 2}, {"!_packed", NULL}, NULL},
			"cpu=x86-64-v3", NULL},
		{{"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
			2, 1, {{40, 30}, {30, 256}, {40, 256}}, {2, 2, 2}, {"!_packed", NULL}, NULL},
			"cpu=x86-64-v3", NULL},
	};
	uint64_t r = 61;
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		check_pack_case_on(&cases[c].pc, (int)c, &r, cases[c].cpu, cases[c].vector);
}

/* Packing copies as vector code (codegen/llvm_loop.c, "copies as vector
 * code"): B copied into panels for x86-64-v3 (16 floats), row by row and
 * transposed (A * B^T), in whole squares of 16, the register tiles' rows
 * 70 = 11 x 6 + 4 (a piece of 6 rows and a piece of 4, run 2 rows at a
 * time).  Every statement in a loop is then vector code, so the module
 * gets the lighter pass pipeline (the !tc.vector_code metadata), and the
 * tiles' sums start from zero in registers (codegen/llvm_loop.c,
 * init_in_registers: no vector of zeros is stored in the optimised IR).
 * Results bit-identical with pack=off and the interpreter, on random
 * inputs and poisoned outputs (under vecreduce=off: pack=off's reduction
 * along B's rows in A * B^T is vectorised across k otherwise). */
static void packing_copies_as_vector_code(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }",
			2, 1, {{70, 320}, {320, 256}, {70, 256}}, {2, 2, 2},
			{"B_packed: float32(K, N) in panels of 16 columns", NULL}, NULL},
		{"def k(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,r_k) * B(n,r_k) }",
			2, 1, {{70, 320}, {256, 320}, {70, 256}}, {2, 2, 2},
			{"B_packed: float32(K, N) in panels of 16 columns", NULL}, NULL},
	};
	uint64_t r = 67;
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int64_t (*sh)[5] = (int64_t (*)[5])cases[c].shapes;
		static float a[70 * 320], b[320 * 256];
		DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh[0], NULL, 0};
		DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh[1], NULL, 0};
		const DLTensor *in[2] = {&A, &B};
		tc_module *m = tc_module_parse(ctx, cases[c].text, "vc.tc");
		char *llvm;
		assert_non_null(m);
		check_pack_case_on(&cases[c], (int)c, &r, "cpu=x86-64-v3 vecreduce=off",
			"!tc.vector_code");
		llvm = stage_of(m, in, 2, "cpu=x86-64-v3 vecreduce=off", "llvm");
		if (strstr(llvm, "store <8 x float> zeroinitializer"))
			fail_msg("case %d: the tiles' zeros stored:\n%s", (int)c, llvm);
		tc_string_free(llvm);
		tc_module_free(m);
	}
}

/* A convolution written channels last (ir/pack.c): one whose output
 * channels fill two vectors (or one, with short rows or a strided window)
 * reduces into a temporary O_cl with the channels last and copies it
 * back, folded into a following epilogue on the same output (the bias); the weights are packed with the channels last.  Strided
 * windows, grouped convolutions with two epilogue statements and rows of 7
 * (under half a vector), a copy read by another output; left alone: 4
 * channels, and 16 channels per group (one vector) with rows of 13, which
 * keep their rows as vectors (the register tile's rows then 11 of h), and
 * 8 channels with rows of 26 (4 rows of f by 2 of h, vectors of 8), and 16
 * channels per group with 12 rows of h (2 rows of f by 6 of h).  Two
 * phases of a strided convolution's data gradient, whose weights are read
 * at multiples of the taps (2*j+1): each packed from its own read.
 * Results are
 * bit-identical with pack=off and with the interpreter, on random inputs
 * and poisoned outputs. */
static void packing_convolutions_channels_last(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,2*h+r_kh,2*w+r_kw) * W1(f,r_c,r_kh,r_kw)\n"
		 "  O(n,f,h,w) = O(n,f,h,w) + B(f)\n}\n",
			3, 1, {{2, 3, 11, 21}, {19, 3, 3, 3}, {19}, {2, 19, 5, 10}}, {4, 4, 1, 4},
			{"temp   O_cl: float32(N, floor((H - KH) / 2) + 1, floor((W - KW) / 2) + 1, F)",
				"O[n, f, h, w] = (O_cl[n, h, w, f] + B[f])",
				"W1_packed[r_c, r_kh, r_kw, f] = W1[f, r_c, r_kh, r_kw]"}, NULL},
		{"def k(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1, float(G,F) B) -> (O) {\n"
		 "  O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw)\n"
		 "  O(n,g,f,h,w) = O(n,g,f,h,w) + B(g,f)\n"
		 "  O(n,g,f,h,w) = fmax(O(n,g,f,h,w), 0)\n}\n",
			3, 1, {{1, 2, 3, 6, 9}, {2, 16, 3, 3, 3}, {2, 16}, {1, 2, 16, 4, 7}},
			{5, 5, 2, 5},
			{"O[n, g, f, h, w] = (O_cl[n, g, h, w, f] + B[g, f])",
				"O[n, g, f, h, w] = fmax(O[n, g, f, h, w], 0",
				"W1_packed[g, r_c, r_kh, r_kw, f] = W1[g, f, r_c, r_kh, r_kw]"}, NULL},
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O, P) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n"
		 "  P(n,f,h,w) = O(n,f,h,w) * B(f)\n}\n",
			3, 2, {{1, 4, 5, 18}, {32, 4, 2, 3}, {32}, {1, 32, 4, 16}, {1, 32, 4, 16}},
			{4, 4, 1, 4, 4}, {"O[n, f, h, w] = O_cl[n, h, w, f]", "P[n, f, h, w] = (O[n, f, h, w]"}, NULL},
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n"
		 "  O(n,f,h,w) = O(n,f,h,w) + B(f)\n}\n",
			3, 1, {{1, 3, 6, 9}, {4, 3, 3, 3}, {4}, {1, 4, 4, 7}}, {4, 4, 1, 4},
			{"!O_cl", "!W1_packed"}, NULL},
		{"def k(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1, float(G,F) B) -> (O) {\n"
		 "  O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw)\n"
		 "  O(n,g,f,h,w) = O(n,g,f,h,w) + B(g,f)\n}\n",
			3, 1, {{2, 3, 5, 13, 15}, {3, 16, 5, 3, 3}, {3, 16}, {2, 3, 16, 11, 13}},
			{5, 5, 2, 5}, {"!O_cl", "!W1_packed"},
			/* 11 rows of h (8 of f: regtile.c, rows of a convolution) */
			"// tc_unroll\n                  for (int tc_p6 = 0; tc_p6 <= 10; tc_p6 += 1) {\n"
			"                    // tc_unrolled\n"
			"                    for (int tc_p7 = 0; tc_p7 <= 7; tc_p7 += 1)"},
		{"def k(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1, float(G,F) B) -> (O) {\n"
		 "  O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw)\n"
		 "  O(n,g,f,h,w) = O(n,g,f,h,w) + B(g,f)\n}\n",
			3, 1, {{1, 2, 3, 28, 28}, {2, 8, 3, 3, 3}, {2, 8}, {1, 2, 8, 26, 26}},
			{5, 5, 2, 5}, {"!O_cl", "!W1_packed"},
			/* 4 rows of f by 2 of h, 8 lanes (26 = 3 x 8 + 2, not 16 + 10) */
			"// tc_unroll\n                  for (int tc_p4 = 0; tc_p4 <= 3; tc_p4 += 1)\n"
			"                    for (int tc_p5 = 0; tc_p5 <= 1; tc_p5 += 1) {\n"
			"                      // tc_unrolled\n"
			"                      for (int tc_p6 = 0; tc_p6 <= 7; tc_p6 += 1)"},
		{"def k(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1, float(G,F) B) -> (O) {\n"
		 "  O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw)\n"
		 "  O(n,g,f,h,w) = O(n,g,f,h,w) + B(g,f)\n}\n",
			3, 1, {{2, 3, 5, 14, 15}, {3, 16, 5, 3, 3}, {3, 16}, {2, 3, 16, 12, 13}},
			{5, 5, 2, 5}, {"!O_cl", "!W1_packed"},
			/* 2 rows of f by 6 of h (of 12), by 8 lanes */
			"// tc_unroll\n                    for (int tc_p5 = 0; tc_p5 <= 1; tc_p5 += 1)\n"
			"                      for (int tc_p6 = 0; tc_p6 <= 5; tc_p6 += 1) {\n"
			"                        // tc_unrolled\n"
			"                        for (int tc_p7 = 0; tc_p7 <= 7; tc_p7 += 1)"},
		/* phases of a stride-2 convolution's data gradient (docs/language.md
		 * 14): weights read at multiples of the taps, packed with the
		 * channels last over the taps' ranges, one copy per phase */
		{"def k(float(N,F,OH,OW) D, float(F,C,KH,KW) W1) -> (T, U) {\n"
		 "  T(n,c,a,b) +=! pad(D(n,f,a-j,b-i), 0.0) * W1(f,c,2*j+1,2*i)\n"
		 "    where a in 0:OH+1, b in 0:OW, j in 0:KH/2, i in 0:(KW+1)/2\n"
		 "  U(n,c,a,b) +=! pad(D(n,f,a-j,b-i), 0.0) * W1(f,c,2*j,2*i)\n"
		 "    where a in 0:OH+1, b in 0:OW, j in 0:(KH+1)/2, i in 0:(KW+1)/2\n}\n",
			2, 2, {{2, 33, 5, 9}, {33, 32, 3, 3}, {2, 32, 6, 9}, {2, 32, 6, 9}}, {4, 4, 4, 4},
			{"temp   W1_packed: float32(F, floor(KH / 2), floor((KW + 1) / 2), C)",
				"W1_packed[f, j, i, c] = W1[f, c, ((2:int32 * j) + 1:int32), (2:int32 * i)]",
				"W1_packed1[f, j, i, c] = W1[f, c, (2:int32 * j), (2:int32 * i)]"},
			NULL},
	};
	uint64_t r = 11;
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		check_pack_case(&cases[c], (int)c, &r);
}

/* The channels-last temporary of a convolution (ir/pack.c) as a row
 * buffer (polyhedral/contract.c): its copy back reads each output row
 * right after the register tiles wrote it, so O_cl lives one row (W' x F)
 * per thread on the stack, an alloca in the outlined parallel loop.  Odd
 * sizes (partial register tiles: 37 channels, rows of 27) at 3 threads,
 * rows too long for the target's rowbuf_bytes (260 x 64 floats: 65 KiB)
 * at one, which keep the workspace region, and one image without a bias
 * at 2 (the rows' own loop parallel under parallel=on, which the
 * register tiles of 1 x 40 x 6 x 28 would not get from parallel=auto; a
 * plain copy back), each within
 * rounding of the interpreter's results (whose sums run in another
 * order), on random inputs and poisoned outputs
 * (packing_convolutions_channels_last compares the row buffer at one
 * thread with pack=off, bit for bit).  One compile a case: a
 * convolution's takes a second or two. */
static void conv_channels_last_row_buffer(void **state)
{
	static const struct {
		const char *text;
		int rank, nin;
		int64_t in[3][5], out[5];
		const char *alloca; /* in the LLVM IR, or NULL: none */
		const char *opts[2]; /* compiled code under each; then the interpreter */
	} cases[] = {
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n"
		 "  O(n,f,h,w) = O(n,f,h,w) + B(f)\n}\n",
			4, 3, {{3, 5, 7, 29}, {37, 5, 3, 3}, {37}}, {3, 37, 5, 27},
			"%O_cl = alloca [999 x float], align 64", {"threads=3", NULL}},
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n"
		 "  O(n,f,h,w) = O(n,f,h,w) + B(f)\n}\n",
			4, 3, {{2, 3, 4, 262}, {64, 3, 3, 3}, {64}}, {2, 64, 2, 260}, NULL,
			{"threads=1", NULL}},
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
			4, 2, {{1, 5, 8, 30}, {40, 5, 3, 3}}, {1, 40, 6, 28},
			"%O_cl = alloca [1120 x float], align 64", {"threads=2 parallel=on", NULL}},
	};
	enum { NV = 3 };
	uint64_t r = 23;
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		DLTensor t[3], Y;
		const DLTensor *in[3];
		DLTensor *out[1] = {&Y};
		float *data[3], *y;
		int64_t n, i, no = 1;
		int j, v, ranks[3] = {cases[c].rank, cases[c].rank, cases[c].rank - 3};
		tc_module *m = tc_module_parse(ctx, cases[c].text, "conv.tc");
		assert_non_null(m);
		for (j = 0; j < cases[c].nin; j++) {
			for (i = 0, n = 1; i < ranks[j]; i++)
				n *= cases[c].in[j][i];
			assert_non_null(data[j] = malloc((size_t)n * sizeof(float)));
			for (i = 0; i < n; i++)
				data[j][i] = (float)tu_rand_unit(&r) * 2 - 1;
			t[j] = (DLTensor){data[j], {kDLCPU, 0}, ranks[j], {kDLFloat, 32, 1},
				(int64_t *)cases[c].in[j], NULL, 0};
			in[j] = &t[j];
		}
		for (i = 0; i < cases[c].rank; i++)
			no *= cases[c].out[i];
		assert_non_null(y = malloc((size_t)(no * NV) * sizeof(float)));
		for (v = 0; v < NV; v++) {
			const char *o = v < 2 ? cases[c].opts[v] : "target=interp";
			tc_kernel *k;
			if (!o)
				continue;
			k = kernel_with(m, in, cases[c].nin, o);
			if (v < 2) { /* the row buffer, with threads in the outlined loop */
				char *text = emitted(k, "llvm");
				const char *at = cases[c].alloca ? strstr(text, cases[c].alloca) : NULL;
				if (cases[c].alloca && !at)
					fail_msg("case %d, %s: %s expected in the LLVM IR", (int)c, o,
						cases[c].alloca);
				if (!cases[c].alloca)
					assert_null(strstr(text, "%O_cl = alloca"));
				if (at && strcmp(o, "threads=1")) {
					const char *par = strstr(text, "define internal void @tc_k.par");
					assert_non_null(par);
					assert_true(at > par);
				}
				tc_string_free(text);
			}
			Y = (DLTensor){y + v * no, {kDLCPU, 0}, cases[c].rank, {kDLFloat, 32, 1},
				(int64_t *)cases[c].out, NULL, 0};
			for (i = 0; i < no; i++)
				y[v * no + i] = NAN;
			k = for_the_host(k, m, in, cases[c].nin, o);
			if (tc_kernel_run(k, in, cases[c].nin, out, 1) != 0)
				fail_msg("%s: %s", o, tc_context_error(ctx));
			tc_kernel_free(k);
		}
		for (i = 0; i < no; i++) {
			assert_false(isnan(y[i]));
			if (cases[c].opts[1])
				assert_memory_equal(&y[i], &y[no + i], sizeof(float));
			assert_true(fabsf(y[i] - y[(NV - 1) * no + i]) <=
				1e-4f * (fabsf(y[(NV - 1) * no + i]) + 1));
		}
		free(y);
		for (j = 0; j < cases[c].nin; j++)
			free(data[j]);
		tc_module_free(m);
	}
}

/* Short output rows (ir/pack.c): a contraction whose output rows are
 * shorter than a vector, with another left-hand index walking an operand's
 * last dimension (the weight gradient dW(i,h) +=! X(r_b,i) * dH(r_b,h) of
 * 7 or 10 units), reduces into a temporary with that index last and copies
 * it back; a batched one, one whose output an epilogue reads, odd sizes
 * (partial register tiles) and two left alone (rows a vector long; no
 * operand walking another index last: a fully connected layer of 10
 * units).  Results are bit-identical with pack=off and with the
 * interpreter, on random inputs and poisoned outputs. */
static void packing_short_rows_last(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(B,I) X, float(B,H) dH) -> (dW) { dW(i,h) +=! X(r_b,i) * dH(r_b,h) }\n",
			2, 1, {{37, 53}, {37, 7}, {53, 7}}, {2, 2, 2},
			{"temp   dW_cl: float32(H, I)", "dW[i, h] = dW_cl[h, i]"}, NULL},
		{"def k(float(B,I) X, float(B,H) dH) -> (dW) { dW(i,h) +=! X(r_b,i) * dH(r_b,h) }\n",
			2, 1, {{128, 128}, {128, 10}, {128, 10}}, {2, 2, 2}, {"dW[i, h] = dW_cl[h, i]"}, NULL},
		{"def k(float(G,B,I) X, float(G,B,H) dH) -> (dW) {\n"
		 "  dW(g,i,h) +=! X(g,r_b,i) * dH(g,r_b,h)\n  dW(g,i,h) = dW(g,i,h) * 0.5\n}\n",
			2, 1, {{3, 19, 41}, {3, 19, 5}, {3, 41, 5}}, {3, 3, 3},
			{"dW[g, i, h] = dW_cl[g, h, i]", "temp   dW_cl: float32(G, H, I)"}, NULL},
		{"def k(float(B,I) X, float(B,H) dH) -> (dW) { dW(i,h) +=! X(r_b,i) * dH(r_b,h) }\n",
			2, 1, {{9, 20}, {9, 16}, {20, 16}}, {2, 2, 2}, {"!dW_cl"}, NULL},
		{"def k(float(B,I) X, float(H,I) W) -> (T) { T(b,h) +=! X(b,r_i) * W(h,r_i) }\n",
			2, 1, {{30, 40}, {10, 40}, {30, 10}}, {2, 2, 2}, {"!T_cl"}, NULL},
	};
	uint64_t r = 29;
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		check_pack_case(&cases[c], (int)c, &r);
}

/* Register tile rows of a contraction's short row member
 * (polyhedral/regtile.c, even_rows): batch matmul's 26 rows in two tiles
 * of 13, not 12 + 12 + 2, with a partial column tile (21 = 16 + 5 lanes);
 * 27 rows of 2 vectors in three of 9; 25 rows (no even split in three or
 * fewer) keep 12 + 12 + 1.  Results bit-identical with pack=off and with the interpreter
 * on random inputs and poisoned outputs.  With mask=on, so that no host
 * takes the first case's rows of 21 whole (regtile_whole_rows_...). */
static void regtile_even_rows_of_short_members(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(B,N,M) X, float(B,M,K) Y) -> (Z) { Z(b,n,k) +=! X(b,n,r_m) * Y(b,r_m,k) }\n",
			2, 1, {{3, 26, 19}, {3, 19, 21}, {3, 26, 21}}, {3, 3, 3}, {"!Y_"},
			"// tc_unroll\n            for (int tc_p2 = 0; tc_p2 <= 12; tc_p2 += 1) {\n"},
		{"def k(float(N,M) X, float(M,K) Y) -> (Z) { Z(n,k) +=! X(n,r_m) * Y(r_m,k) }\n",
			2, 1, {{27, 33}, {33, 40}, {27, 40}}, {2, 2, 2}, {NULL},
			"for (int tc_p1 = 0; tc_p1 <= 8; tc_p1 += 1) {\n"},
		{"def k(float(N,M) X, float(M,K) Y) -> (Z) { Z(n,k) +=! X(n,r_m) * Y(r_m,k) }\n",
			2, 1, {{25, 33}, {33, 40}, {25, 40}}, {2, 2, 2}, {NULL},
			"for (int tc_p1 = 0; tc_p1 <= 11; tc_p1 += 1) {\n"},
	};
	uint64_t r = 31;
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		check_pack_case_on(&cases[c], (int)c, &r, "mask=on", NULL);
}

/* Register tiles of whole rows (polyhedral/regtile.c, whole_row): where
 * 512-bit vectors take no masked rest (x86-64-v4, the Zen 4), a batch
 * matmul's rows of 21 columns longer than a vector are one tile's columns
 * (16 + 4 + 1 lanes, three registers a row, so 8 rows), not a tile of 16
 * and a partial one of 5 (13 rows each, as with mask=on); the same tile
 * (regtile=8,21, on any host) gives the interpreter's and pack=off's
 * results bit for bit on random inputs and poisoned outputs. */
static void regtile_whole_rows_without_masked_rest(void **state)
{
	static const pack_case whole = {
		"def k(float(B,N,M) X, float(B,M,K) Y) -> (Z) { Z(b,n,k) +=! X(b,n,r_m) * Y(b,r_m,k) }\n",
		2, 1, {{3, 26, 19}, {3, 19, 21}, {3, 26, 21}}, {3, 3, 3}, {NULL},
		"// tc_unroll\n        for (int tc_p2 = 0; tc_p2 <= 7; tc_p2 += 1) {\n"};
	int64_t sx[3] = {3, 26, 19}, sy[3] = {3, 19, 21};
	float x[3 * 26 * 19] = {0}, y[3 * 19 * 21] = {0};
	DLTensor X = {x, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Y = {y, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sy, NULL, 0};
	const DLTensor *in[2] = {&X, &Y};
	uint64_t r = 37;
	tc_module *m = tc_module_parse(ctx, whole.text, "whole.tc");
	char *ast;
	(void)state;
	assert_non_null(m);
	ast = stage_of(m, in, 2, "cpu=x86-64-v4", "ast");
	if (!strstr(ast, whole.rows) || !strstr(ast, "tc_p3 <= 20; tc_p3 += 1)\n"))
		fail_msg("8 rows of 21 columns expected in the AST:\n%s", ast);
	tc_string_free(ast);
	ast = stage_of(m, in, 2, "cpu=x86-64-v4 mask=on", "ast");
	if (!strstr(ast, "tc_p2 <= 12; tc_p2 += 1)") || !strstr(ast, "tc_p3 <= 15; tc_p3 += 1)") ||
		strstr(ast, "tc_p3 <= 20;"))
		fail_msg("13 rows of 16 and of 5 columns expected with mask=on:\n%s", ast);
	tc_string_free(ast);
	tc_module_free(m);
	check_pack_case_on(&whole, 0, &r, "regtile=8,21", NULL);
}

/* The register tile's rows loops (the line after each "// tc_unroll") in
 * ast: how many, and how many of them have bounds that are no constants
 * (a min or max: the scalar path).  A piece of one row has no loop (the
 * mark tc_unrolled follows at once), which counts as constant. */
static void rows_loops(const char *ast, int *n, int *varying)
{
	const char *at = ast;
	*n = *varying = 0;
	while ((at = strstr(at, "// tc_unroll\n"))) {
		const char *line = at + strlen("// tc_unroll\n"), *end = strchr(line, '\n');
		char text[256];
		snprintf(text, sizeof(text), "%.*s", end ? (int)(end - line) : 0, line);
		++*n;
		*varying += strstr(text, "min(") || strstr(text, "max(");
		at = line;
	}
}

/* The interpreter's result of the padded 3x3 convolution of one image
 * (x: c x h x w, wt: f x c x 3 x 3, o: f x h x w): each output the
 * fused multiply-add of its taps inside the image in the order of the
 * reduction indices (r_c, r_kh, r_kw), from 0; the taps in the padding
 * are skipped (ir/lower.c's guard), so the bits are the interpreter's. */
static void conv3x3_same(const float *x, const float *wt, float *o, int c, int h, int w, int f)
{
	int fi, y, z, ci, kh, kw;
	for (fi = 0; fi < f; fi++)
		for (y = 0; y < h; y++)
			for (z = 0; z < w; z++) {
				float acc = 0;
				for (ci = 0; ci < c; ci++)
					for (kh = 0; kh < 3; kh++)
						for (kw = 0; kw < 3; kw++) {
							int yy = y + kh - 1, zz = z + kw - 1;
							if (yy < 0 || yy >= h || zz < 0 || zz >= w)
								continue;
							acc = fmaf(x[((size_t)ci * h + yy) * w + zz],
								wt[((fi * c + ci) * 3 + kh) * 3 + kw], acc);
						}
				o[((size_t)fi * h + y) * w + z] = acc;
			}
}

/* A padded convolution whose output takes 4 MiB, streamed (written once
 * by the copy back from the channels-last temporary: codegen/README.md,
 * Streaming stores), on the host: the kernel's two copies of the loop
 * nest, both over the pieces of polyhedral/regtile.c's isolation, equal
 * the interpreter bit for bit, the streaming copy (the output 64-byte
 * aligned; its tiles are LLVM's vectorisers', not vector code) and the
 * plain one (4 bytes off).  The reference is conv3x3_same below, not the
 * interpreter: its 19 M multiply-adds took the interpreter 18 s of the
 * suite's time (40 s under the sanitizers). */
static void padded_convolution_streamed(uint64_t *r)
{
	enum { C = 2, H = 128, W = 128, F = 64 };
	int64_t si[4] = {1, C, H, W}, sw[4] = {F, C, 3, 3}, so[4] = {1, F, H, W};
	float *x = malloc((size_t)C * H * W * sizeof(float)), *wt = malloc((size_t)F * C * 9 *
		sizeof(float));
	float *y = aligned_alloc(64, ((size_t)F * H * W + 16) * sizeof(float));
	float *want = malloc((size_t)F * H * W * sizeof(float));
	DLTensor I = {x, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor Wt = {wt, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sw, NULL, 0}, O;
	const DLTensor *in[2] = {&I, &Wt};
	tc_module *m = tc_module_parse(ctx, "def k(float(N,C,H,W) I, float(F,C,3,3) Wt) -> (O) {\n"
		"  O(n,f,h,w) +=! pad(I(n, r_c, h + r_kh - 1, w + r_kw - 1), 0.0) * Wt(f, r_c, r_kh, r_kw)\n"
		"    where h in 0:H, w in 0:W\n}\n", "pad.tc");
	int64_t i;
	int k, off;
	assert_non_null(m);
	assert_true(x && wt && y && want);
	for (i = 0; i < C * H * W; i++)
		x[i] = (float)tu_rand_unit(r) * 2 - 1;
	for (i = 0; i < F * C * 9; i++)
		wt[i] = (float)tu_rand_unit(r) * 2 - 1;
	for (k = 0; k < 2; k++) { /* the two copies, behind the test of O's alignment */
		char *text = stage_of(m, in, 2, k ? "cpu=x86-64-v3 stream=on" : "stream=on", "llvm");
		assert_non_null(strstr(text, "llvm.x86.sse.sfence")); /* ends the streaming copy */
		tc_string_free(text);
	}
	conv3x3_same(x, wt, want, C, H, W, F);
	for (off = 0; off < 2; off++) { /* aligned (the streaming copy), then 4 bytes off */
		O = (DLTensor){y + off, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, so, NULL, 0};
		run_with(m, in, 2, &O, "stream=on", NULL);
		for (i = 0; i < F * H * W; i++)
			if (memcmp(&y[off + i], &want[i], sizeof(float)))
				fail_msg("element %lld (offset %d): %g, expected %g", (long long)i, off,
					(double)y[off + i], (double)want[i]);
	}
	tc_module_free(m);
	free(x);
	free(wt);
	free(y);
	free(want);
}

/* A padded convolution (tests/corpus/pad.tc, conv_same): the pad's
 * bounds restrict the statement's domain, so its register tiles are built
 * by isl with the full tiles isolated (polyhedral/regtile.c,
 * isolate_full_tiles).  The tiles of output columns that reach no padding
 * are one piece of constant rows, and the border tiles' taps that reach
 * every row another (kw >= 1 at the left border, kw <= 1 at the right
 * one), the others pieces of constant rows too: no rows loop bounded by a
 * min or max (before, every tile's rows ran from max(0, 1 - w0 - kw)), on
 * AVX-512 and AVX2 alike.  So every piece is vector code: the optimised IR
 * for x86-64-v4 and x86-64-v3 has vector fused multiply-adds and no scalar
 * one (with 64 output channels LLVM's vectorisers had left 65 of AVX2's
 * scalar, and at 8x64x56x56 the kernel took about 8x the valid
 * convolution's time).  The host's code equals pack=off's and the
 * interpreter's bit for bit.  14 columns (tiles of 3 rows and a partial
 * one of 2 on AVX2; of 6, 6 and 2 on AVX-512), 13 with 32 channels (12
 * and 1 on AVX-512: no interior tile; the partial tile's one row inside
 * its taps' loop keeps LLVM's vectoriser, which leaves it scalar there,
 * as a box domain's last row does: codegen/README.md), and the stride-2
 * form (conv_s2_same); then a streamed output
 * (padded_convolution_streamed). */
static void padded_convolution_tiles_of_constant_rows(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(N,C,H,W) I, float(F,C,3,3) Wt) -> (O) {\n"
		 "  O(n,f,h,w) +=! pad(I(n, r_c, h + r_kh - 1, w + r_kw - 1), 0.0) * Wt(f, r_c, r_kh, r_kw)\n"
		 "    where h in 0:H, w in 0:W\n}\n",
			2, 1, {{2, 5, 6, 14}, {64, 5, 3, 3}, {2, 64, 6, 14}}, {4, 4, 4},
			{"temp   O_cl", "guard:"}, NULL},
		{"def k(float(N,C,H,W) I, float(F,C,3,3) Wt) -> (O) {\n"
		 "  O(n,f,h,w) +=! pad(I(n, r_c, h + r_kh - 1, w + r_kw - 1), 0.0) * Wt(f, r_c, r_kh, r_kw)\n"
		 "    where h in 0:H, w in 0:W\n}\n",
			2, 1, {{1, 3, 5, 13}, {32, 3, 3, 3}, {1, 32, 5, 13}}, {4, 4, 4},
			{"temp   O_cl", "guard:"}, NULL},
		{"def k(float(N,C,H,W) I, float(F,C,3,3) Wt) -> (O) {\n"
		 "  O(n,f,h,w) +=! pad(I(n, r_c, 2*h + r_kh - 1, 2*w + r_kw - 1), 0.0) * Wt(f, r_c, r_kh, r_kw)\n"
		 "    where h in 0:(H+1)/2, w in 0:(W+1)/2\n}\n",
			2, 1, {{1, 4, 7, 27}, {32, 4, 3, 3}, {1, 32, 4, 14}}, {4, 4, 4},
			{"temp   O_cl", "guard:"}, NULL},
	};
	static const char *const cpus[2] = {"", "cpu=x86-64-v3"}; /* kernel_with's v4, then v3 */
	uint64_t r = 37;
	size_t c;
	int k;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		tc_module *m = tc_module_parse(ctx, cases[c].text, "pad.tc");
		DLTensor t[2];
		const DLTensor *in[2];
		assert_non_null(m);
		for (k = 0; k < 2; k++) { /* shapes only: emit reads no data */
			t[k] = (DLTensor){NULL, {kDLCPU, 0}, 4, {kDLFloat, 32, 1},
				(int64_t *)cases[c].shapes[k], NULL, 0};
			in[k] = &t[k];
		}
		for (k = 0; k < 2; k++) {
			char *ast = stage_of(m, in, 2, cpus[k], "ast");
			char *ll = stage_of(m, in, 2, cpus[k], "llvm");
			const char *vec = k ? "llvm.fmuladd.v8f32(" : "llvm.fmuladd.v16f32(";
			int n, varying;
			rows_loops(ast, &n, &varying);
			print_message("case %d %s: %d rows loops, %d not constant; %d %s, %d scalar\n",
				(int)c, k ? "x86-64-v3" : "x86-64-v4", n, varying,
				count_lines_with(ll, vec, vec), vec,
				count_lines_with(ll, "llvm.fmuladd.f32(", "llvm.fmuladd.f32("));
			if (n < 3 || varying)
				fail_msg("case %d, %s: rows loops of constant bounds expected:\n%s",
					(int)c, cpus[k], ast);
			assert_true(count_lines_with(ll, vec, vec) > 0);
			if (c != 1 || k) /* case 1's partial tile of one row on AVX-512 */
				assert_int_equal(count_lines_with(ll, "llvm.fmuladd.f32(",
					"llvm.fmuladd.f32("), 0);
			tc_string_free(ast);
			tc_string_free(ll);
		}
		tc_module_free(m);
		check_pack_case(&cases[c], (int)c, &r);
	}
	padded_convolution_streamed(&r);
}

/* Convolutions with windows of every size get the scheduler's loop nest
 * and a register tile: with a 2 x 2 window the isl scheduler failed on
 * the dependences of the sum (pieces whose rational points run
 * backwards) and the def ran in textual order, untiled (12x the time);
 * with 1 x 2 and 2 x 3 windows it merged the channel and tap loops into
 * one (2 * r_c + r_kh).  The reduction's dependences on itself are now
 * given to it in lexicographic form (polyhedral/poly.c,
 * tc_poly_lex_updates).  Poolings whose windows stride along the
 * vectorised loop (2 * w + r_kw) get no register tile (its vectors would
 * be gathers; polyhedral/regtile.c, strided_pooling) and a max over a
 * window keeps its taps innermost, as a sum does (order.c).  Results equal
 * pack=off's and the interpreter's bit for bit. */
/* The mask option (tc_target.masked_rest): a register tile's row whose
 * length is not a whole number of vectors ends in one full-width vector
 * under a lane mask, and a convolution's tile then spans the whole row
 * (rows of 14, 26 and 54 outputs; a matmul's partial tile of 21 columns).
 * With mask=on, on any host (16-lane vectors with AVX-512, 8 with AVX2),
 * the vector code has masked loads and stores and the results equal
 * pack=off's and the interpreter's bit for bit, the output poisoned
 * first, also for tiles of rows of two members (f and h) in either order
 * of a step; mask=off has no masked access. */
static void masked_rows(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(N,G,C,H,W) I, float(G,F,C,3,3) W1, float(G,F) B) -> (O) {\n"
		 "  O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw)\n"
		 "  O(n,g,f,h,w) = O(n,g,f,h,w) + B(g,f)\n}\n",
			3, 1, {{2, 2, 16, 5, 16}, {2, 16, 16, 3, 3}, {2, 16}, {2, 2, 16, 3, 14}},
			{5, 5, 2, 5}, {NULL}, NULL},
		{"def k(float(N,G,C,H,W) I, float(G,F,C,3,3) W1) -> (O) {\n"
		 "  O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw)\n}\n",
			2, 1, {{1, 2, 8, 4, 28}, {2, 8, 8, 3, 3}, {1, 2, 8, 2, 26}}, {5, 5, 5},
			{NULL}, NULL},
		{"def k(float(N,G,C,H,W) I, float(G,F,C,3,3) W1) -> (O) {\n"
		 "  O(n,g,f,h,w) +=! I(n,g,r_c,h+r_kh,w+r_kw) * W1(g,f,r_c,r_kh,r_kw)\n}\n",
			2, 1, {{1, 2, 4, 4, 56}, {2, 4, 4, 3, 3}, {1, 2, 4, 2, 54}}, {5, 5, 5},
			{NULL}, NULL},
		{"def k(float(M,K) A, float(K,N) B) -> (C) {\n  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n",
			2, 1, {{7, 9}, {9, 21}, {7, 21}}, {2, 2, 2}, {NULL}, NULL},
	};
	uint64_t r = 43;
	size_t c;
	int j;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const pack_case *pc = &cases[c];
		tc_module *m = tc_module_parse(ctx, pc->text, "masked.tc");
		DLTensor t[3];
		const DLTensor *in[3];
		char *ll;
		assert_non_null(m);
		for (j = 0; j < pc->nin; j++) { /* shapes only: emit reads no data */
			t[j] = (DLTensor){NULL, {kDLCPU, 0}, pc->ranks[j], {kDLFloat, 32, 1},
				(int64_t *)pc->shapes[j], NULL, 0};
			in[j] = &t[j];
		}
		ll = stage_of(m, in, pc->nin, "mask=off", "llvm");
		if (strstr(ll, "@llvm.masked."))
			fail_msg("case %d: no masked access expected under mask=off", (int)c);
		tc_string_free(ll);
		tc_module_free(m);
		check_pack_case_on(pc, (int)c, &r, "mask=on", "@llvm.masked.load.v");
	}
	/* rows of f and h in one tile, f's copies innermost in a step (2 rows
	 * of f, fewer than the 3 of h: codegen/llvm_loop.c, vtile_step) and
	 * outermost (4 of f, 2 of h by 2 vectors) */
	check_pack_case_on(&cases[0], 4, &r, "mask=on regtile=1,1,2,3,16", "@llvm.masked.load.v");
	check_pack_case_on(&cases[1], 5, &r, "mask=on regtile=1,1,4,2,32", "@llvm.masked.load.v");
}

/* Transposing copies (ir/pack.c's B_packed of A * B^T) in squares of a
 * vector's lanes, transposed in registers (codegen/llvm_loop.c,
 * "transposing copies"): 16 floats with AVX-512, 2 x 2 squares of 8 with
 * AVX2 and for float64; sizes that are a whole number of 16 x 16 tiles
 * and sizes with partial tiles (the full ones are generated apart:
 * polyhedral/schedule.c, isolate_full_squares), one of them large enough
 * for the copy to run on the pool's threads (its parallel loop split in
 * two); a transpose the user writes, read by a later statement, and one
 * after a statement writing the same tensor (left to the scheduler: it
 * cannot run first).  The shuffles' first stage is in the LLVM IR but for
 * the last, and the results equal
 * pack=off's and the interpreter's bit for bit (float64: every element
 * against the interpreter's, the outputs poisoned first). */
static void transposing_copies_in_registers(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(M,K) A, float(N,K) B) -> (C) {\n  C(m,n) +=! A(m,r_k) * B(n,r_k)\n}\n",
			2, 1, {{37, 48}, {80, 48}, {37, 80}}, {2, 2, 2}, {NULL}, NULL},
		{"def k(float(M,K) A, float(N,K) B) -> (C) {\n  C(m,n) +=! A(m,r_k) * B(n,r_k)\n}\n",
			2, 1, {{21, 40}, {50, 40}, {21, 50}}, {2, 2, 2}, {NULL}, NULL},
		{"def k(float(M,K) A, float(N,K) B) -> (C) {\n  C(m,n) +=! A(m,r_k) * B(n,r_k)\n}\n",
			2, 1, {{70, 200}, {210, 200}, {70, 210}}, {2, 2, 2}, {NULL}, NULL},
		/* transposes the user writes (ir/pack.c, user_transpose) */
		{"def k(float(N,K) B) -> (T, U) {\n  T(k,n) = B(n,k)\n  U(k,n) = T(k,n) * 2.0\n}\n",
			1, 2, {{100, 80}, {80, 100}, {80, 100}}, {2, 2, 2}, {NULL}, NULL},
		{"def k(float(N,K) B) -> (float(K,N) T) {\n  T(k,n) = 1.0\n  T(k,n) = B(n,k)\n}\n",
			1, 1, {{48, 32}, {32, 48}}, {2, 2}, {NULL}, NULL},
		/* computed from transposed reads and constants (ir/pack.c,
		 * transposed_terms), squares and partial squares */
		{"def k(float(N,K) B, float(N,K) C, float(N) D) -> (T, U) {\n"
		 "  T(k,n) = B(n,k) * 2 + C(n,k) * D(n)\n  U(k,n) = -(B(n,k) / C(n,k)) - 1.5\n}\n",
			3, 2, {{100, 80}, {100, 80}, {100}, {80, 100}, {80, 100}}, {2, 2, 1, 2, 2},
			{NULL}, NULL},
		/* fmax and min: transposed in registers too (the scalar code's
		 * rule on vectors); fabs, which the vector code does not take: in
		 * square tiles, moved element by element */
		{"def k(float(N,K) B, float(N,K) C) -> (T) {\n"
		 "  T(k,n) = fmax(B(n,k), 0) * min(C(n,k), B(n,k))\n}\n",
			2, 1, {{100, 80}, {100, 80}, {80, 100}}, {2, 2, 2}, {NULL},
			"for (int c3 = 0; c3 <= 15; c3 += 1)\n        S0(c0 + c2, c1 + c3);"},
		{"def k(float(N,K) B, float(N,K) C) -> (T) {\n"
		 "  T(k,n) = fabs(B(n,k)) - C(n,k)\n}\n",
			2, 1, {{100, 80}, {100, 80}, {80, 100}}, {2, 2, 2}, {NULL},
			"for (int c3 = 0; c3 <= 15; c3 += 1)\n        S0(c0 + c2, c1 + c3);"},
	};
	static const char *const mask16 = "<16 x i32> <i32 0, i32 16, i32 2, i32 18, i32 4";
	static const char *const mask8 = "<8 x i32> <i32 0, i32 8, i32 2, i32 10, i32 4";
	enum { M = 19, N = 48, K = 32 };
	static double a[M * K], b[N * K], c[2][M * N];
	int64_t sa[2] = {M, K}, sb[2] = {N, K}, sc[2] = {M, N};
	static const char *const opts64[2] = {"", "target=interp"};
	uint64_t r = 47;
	size_t cs;
	int i, v;
	tc_module *m;
	(void)state;
	for (cs = 0; cs < sizeof(cases) / sizeof(cases[0]); cs++) { /* texts x86-64-v4 */
		/* the large one under vecreduce=off: pack=off's reduction along
		 * B's rows is vectorised across k otherwise (codegen/README.md,
		 * vecreduce), not in the interpreter's order */
		check_pack_case_on(&cases[cs], (int)cs, &r, cs == 2 ? "vecreduce=off" : NULL,
			cs < 4 || cs == 5 || cs == 6 ? mask16 : NULL);
		check_pack_case_on(&cases[cs], (int)cs, &r,
			cs == 2 ? "cpu=x86-64-v3 vecreduce=off" : "cpu=x86-64-v3",
			cs < 4 || cs == 5 || cs == 6 ? mask8 : NULL);
	}
	m = tc_module_parse(ctx, "def k(double(M,K) A, double(N,K) B) -> (C) {\n"
				 "  C(m,n) +=! A(m,r_k) * B(n,r_k)\n}\n", "t64.tc");
	assert_non_null(m);
	for (i = 0; i < M * K; i++)
		a[i] = tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < N * K; i++)
		b[i] = tu_rand_unit(&r) * 2 - 1;
	{
		DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, sa, NULL, 0};
		DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, sb, NULL, 0};
		const DLTensor *in[2] = {&A, &B};
		char *ll = stage_of(m, in, 2, "", "llvm");
		if (!strstr(ll, mask8))
			fail_msg("float64: %s expected in the LLVM IR", mask8);
		tc_string_free(ll);
		for (v = 0; v < 2; v++) {
			DLTensor C = {c[v], {kDLCPU, 0}, 2, {kDLFloat, 64, 1}, sc, NULL, 0};
			DLTensor *out[1] = {&C};
			tc_options *o = tc_options_new();
			tc_kernel *k;
			for (i = 0; i < M * N; i++)
				c[v][i] = NAN;
			assert_int_equal(tc_options_parse(o, opts64[v], ctx), 0);
			k = v ? tc_compile(m, "k", in, 2, o) : for_the_host(kernel_with(m, in, 2, ""), m,
				in, 2, "");
			if (!k)
				fail_msg("%s", tc_context_error(ctx));
			assert_int_equal(tc_kernel_run(k, in, 2, out, 1), 0);
			tc_kernel_free(k);
			tc_options_free(o);
		}
		for (i = 0; i < M * N; i++)
			assert_memory_equal(&c[0][i], &c[1][i], sizeof(double));
	}
	tc_module_free(m);
}

/* A large pointwise write fused with a register-tiled contraction whose
 * tile puts another loop innermost is scheduled apart (fusion.c,
 * misordered_cb): in the per-sample backward of a layer, d_W1(b,h,i) =
 * d_A(b,h) * X(b,i) shared d_A's nest, h innermost, and wrote its 52 MB a
 * row apart each step (3.4x slower at one thread).  Checked on the AST:
 * the innermost loop around d_W1's statement walks its last subscript. */
static void fused_writes_keep_their_stride_1_loop(void **state)
{
	static const char *text =
		"def k(float(B,I) X, float(K,H) W2, float(B,H) A, float(B,K) d_Z) -> (float(B,H,I) d_W1) {\n"
		"  d_A(b,r_h) +=! d_Z(b, k) * W2(k, r_h)\n"
		"  d_W1(b,h,r_i) = (A(b, h) >= 0 ? d_A(b, h) : 0.0) * X(b, r_i)\n"
		"}\n";
	static int64_t sx[2] = {32, 200}, sw[2] = {10, 64}, sa[2] = {32, 64}, sz[2] = {32, 10};
	DLTensor t[4] = {{NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0},
		{NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0},
		{NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0},
		{NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sz, NULL, 0}};
	const DLTensor *in[4] = {&t[0], &t[1], &t[2], &t[3]};
	tc_module *m = tc_module_parse(ctx, text, "sample.tc");
	char *ast, *call, *loop, var[16], args[128];
	(void)state;
	assert_non_null(m);
	ast = stage_of(m, in, 4, "", "ast");
	/* d_W1 is the second statement: S1(c.., c.., c..) */
	assert_non_null(call = strstr(ast, "S1("));
	assert_int_equal(sscanf(call, "S1(%127[^)])", args), 1);
	/* the nearest loop above it */
	for (loop = call; loop > ast && strncmp(loop, "for (int ", 9); loop--)
		;
	assert_int_equal(sscanf(loop, "for (int %15[a-z0-9]", var), 1);
	if (!strstr(strrchr(args, ','), var))
		fail_msg("d_W1's innermost loop %s does not walk its last subscript (%s):\n%s", var,
			args, ast);
	tc_string_free(ast);
	tc_module_free(m);
}

static void windows_of_every_size(void **state)
{
	static const pack_case convs[] = {
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
			2, 1, {{2, 5, 9, 20}, {32, 5, 2, 2}, {2, 32, 8, 19}}, {4, 4, 4},
			{"temp   O_cl"}, NULL},
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
			2, 1, {{2, 5, 9, 20}, {32, 5, 1, 2}, {2, 32, 9, 19}}, {4, 4, 4},
			{"temp   O_cl"}, NULL},
		{"def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
		 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
			2, 1, {{2, 5, 9, 20}, {32, 5, 2, 3}, {2, 32, 8, 18}}, {4, 4, 4},
			{"temp   O_cl"}, NULL},
	};
	static const pack_case pools[] = {
		{"def k(float(N,C,H,W) I) -> (O) {\n"
		 "  O(n,c,h,w) max=! I(n,c,2*h+r_kh,2*w+r_kw) where r_kh in 0:2, r_kw in 0:2\n}\n",
			1, 1, {{2, 3, 9, 40}, {2, 3, 4, 20}}, {4, 4}, {NULL}, NULL},
		{"def k(float(N,C,H,W) I) -> (O) {\n"
		 "  O(n,c,h,w) max=! pad(I(n, c, 2*h + r_kh - 1, 2*w + r_kw - 1), -3.4e38)\n"
		 "    where h in 0:(H+1)/2, w in 0:(W+1)/2, r_kh in 0:3, r_kw in 0:3\n}\n",
			1, 1, {{2, 3, 9, 40}, {2, 3, 5, 20}}, {4, 4}, {NULL}, NULL},
	};
	/* kernel_with's v4, then v3; parallel=on: these convolutions are too
	 * small for parallel=auto to share (register tiles count a lane's worth
	 * each), and the test asks for a parallel nest above the tiles */
	static const char *const cpus[2] = {"parallel=on", "cpu=x86-64-v3 parallel=on"};
	uint64_t r = 41;
	size_t c;
	int k, j;
	(void)state;
	for (c = 0; c < sizeof(convs) / sizeof(convs[0]) + sizeof(pools) / sizeof(pools[0]); c++) {
		int pool = c >= sizeof(convs) / sizeof(convs[0]);
		const pack_case *pc = pool ? &pools[c - sizeof(convs) / sizeof(convs[0])] : &convs[c];
		tc_module *m = tc_module_parse(ctx, pc->text, "window.tc");
		DLTensor t[2];
		const DLTensor *in[2];
		assert_non_null(m);
		for (j = 0; j < pc->nin; j++) { /* shapes only: emit reads no data */
			t[j] = (DLTensor){NULL, {kDLCPU, 0}, 4, {kDLFloat, 32, 1},
				(int64_t *)pc->shapes[j], NULL, 0};
			in[j] = &t[j];
		}
		for (k = 0; k < 2; k++) {
			char *ast = stage_of(m, in, pc->nin, cpus[k], "ast");
			print_message("case %d %s: tc_parallel %d, tc_regtile %d\n", (int)c,
				k ? "x86-64-v3" : "x86-64-v4", !!strstr(ast, "tc_parallel"),
				!!strstr(ast, "tc_regtile"));
			if (!pool && (!strstr(ast, "tc_parallel") || !strstr(ast, "tc_regtile")))
				fail_msg("case %d, %s: a parallel, register-tiled nest expected:\n%s",
					(int)c, cpus[k], ast);
			if (pool && strstr(ast, "tc_regtile"))
				fail_msg("case %d, %s: no register tile expected:\n%s", (int)c,
					cpus[k], ast);
			/* a pooling's innermost loop, just above S0, runs over the
			 * window's taps (2 or 3 of them) */
			if (pool) {
				char taps[64];
				const char *at, *next = NULL;
				snprintf(taps, sizeof(taps), "c5 <= %d; c5 += 1)\n", c == 3 ? 1 : 2);
				if ((at = strstr(ast, taps)))
					for (next = strchr(at, '\n') + 1; *next == ' '; next++)
						;
				if (!next || strncmp(next, "S0(", 3))
					fail_msg("case %d, %s: the taps innermost expected:\n%s",
						(int)c, cpus[k], ast);
			}
			tc_string_free(ast);
		}
		tc_module_free(m);
		check_pack_case(pc, (int)c, &r);
	}
}

/* Packing: an input read with the reduction as its stride-1 dimension (B
 * in A(m,r_k) * B(n,r_k), a fully connected layer's weights) is copied
 * into a temporary whose stride-1 dimension is the output's, first; its
 * name avoids the kernel's own names; rows shorter than a vector register
 * are left alone; results are bit-identical with and without packing and
 * with the interpreter (contract off), and the packed contraction gets the
 * register tile's vector FMAs. */
static void packing_transposed_operands(void **state)
{
	enum { M = 37, K = 53, N = 70, NS = 10 };
	static float a[M * K], b[N * K], bias[N], c[3][M * N];
	int64_t sa[2] = {M, K}, sb[2] = {N, K}, sbias[1] = {N}, sc[2] = {M, N};
	int64_t sbs[2] = {NS, K}, scs[2] = {M, NS}, sbiass[1] = {NS};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor Bias = {bias, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sbias, NULL, 0};
	DLTensor C[3];
	const DLTensor *in[3] = {&A, &B, &Bias};
	static const char *const opts[3] = {"pack=on", "pack=off", "target=interp"};
	uint64_t r = 7;
	char *ir = NULL, *asm_text;
	int i, v;
	tc_module *m;
	(void)state;
	for (i = 0; i < M * K; i++)
		a[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < N * K; i++)
		b[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < N; i++)
		bias[i] = (float)tu_rand_unit(&r) - 0.5f;
	/* fully connected + bias + ReLU, with an input already named B_packed */
	m = tc_module_parse(ctx, "def k(float(M,K) A, float(N,K) B, float(N) B_packed) -> (C) {\n"
				 "  T(m,n) +=! A(m,r_k) * B(n,r_k)\n"
				 "  C(m,n) = fmax(T(m,n) + B_packed(n), 0)\n}\n", "fc.tc");
	assert_non_null(m);
	for (v = 0; v < 3; v++) {
		C[v] = (DLTensor){c[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
		run_with(m, in, 3, &C[v], opts[v], v ? NULL : &ir);
		if (!v) {
			assert_non_null(strstr(ir, "temp   B_packed1: float32(K, N)"));
			assert_non_null(strstr(ir, "B_packed1[r_k, n] = B[n, r_k]"));
			assert_non_null(strstr(ir, "(A[m, r_k] * B_packed1[r_k, n])"));
			tc_string_free(ir);
		}
	}
	for (i = 0; i < M * N; i++) {
		assert_false(isnan(c[0][i]));
		assert_memory_equal(&c[0][i], &c[1][i], sizeof(float));
		assert_memory_equal(&c[0][i], &c[2][i], sizeof(float));
	}
	/* rows of 10 floats (40 bytes) are shorter than a vector: no copy */
	B.shape = sbs;
	Bias.shape = sbiass;
	C[0] = (DLTensor){c[0], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, scs, NULL, 0};
	run_with(m, in, 3, &C[0], "pack=on", &ir);
	assert_null(strstr(ir, "B_packed1"));
	tc_string_free(ir);
	tc_module_free(m);
	m = tc_module_parse(ctx, "def k(float(M,K) A, float(N,K) B) -> (C) {\n"
				 "  C(m,n) +=! A(m,r_k) * B(n,r_k)\n}\n", "nt.tc");
	assert_non_null(m);
	for (v = 0; v < 2; v++) {
		tc_options *o = tc_options_new();
		tc_kernel *k;
		int64_t sb2[2] = {128, 64}, sa2[2] = {96, 64};
		DLTensor A2 = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa2, NULL, 0};
		DLTensor B2 = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb2, NULL, 0};
		const DLTensor *in2[2] = {&A2, &B2};
		int fmas;
		assert_int_equal(tc_options_parse(o, v ? "cpu=x86-64-v4 contract=on pack=off"
						       : "cpu=x86-64-v4 contract=on", ctx), 0);
		k = tc_compile(m, "k", in2, 2, o);
		assert_non_null(k);
		asm_text = tc_kernel_emit(k, "asm");
		assert_non_null(asm_text);
		fmas = count_lines_with(asm_text, "vfmadd", "zmm");
		print_message("A*B^T, pack=%s: %d vfmadd on zmm\n", v ? "off" : "on", fmas);
		if (!v)
			assert_true(fmas >= 24);
		tc_string_free(asm_text);
		tc_kernel_free(k);
		tc_options_free(o);
	}
	tc_module_free(m);
}

/* Packing a broadcast operand read across its rows (ir/pack.c, "broadcast
 * operands"): the weight gradient's X(r_b,i), whose rows of 1024 floats
 * put every step of the reduction on another page, is copied with the
 * reduction last (X_packed[i, r_b]); so are a batched one (the batch index
 * first) and one with two reductions (both last, in order).  Left alone:
 * rows of 1000 floats (4000 bytes: under a page) and an output of 200
 * columns (under BCAST_MIN_COLS_BYTES: the copy would not repay).  Results
 * bit-identical with pack=off and with the interpreter, on random inputs
 * and poisoned outputs. */
static void packing_broadcast_operands_across_rows(void **state)
{
	static const pack_case cases[] = {
		{"def k(float(B,I) X, float(B,H) dH) -> (dW) { dW(i,h) +=! X(r_b,i) * dH(r_b,h) }",
			2, 1, {{17, 1024}, {17, 256}, {1024, 256}}, {2, 2, 2},
			{"temp   X_packed: float32(I, B)", "X_packed[i, r_b] = X[r_b, i]",
				"(X_packed[i, r_b] * dH[r_b, h])"}, NULL},
		{"def k(float(G,B,I) X, float(G,B,H) dH) -> (dW) {\n"
		 "  dW(g,i,h) +=! X(g,r_b,i) * dH(g,r_b,h)\n}\n",
			2, 1, {{2, 17, 1024}, {2, 17, 256}, {2, 1024, 256}}, {3, 3, 3},
			{"temp   X_packed: float32(G, I, B)", "X_packed[g, i, r_b] = X[g, r_b, i]",
				NULL}, NULL},
		{"def k(float(A,B,I) X, float(A,B,H) dH) -> (dW) {\n"
		 "  dW(i,h) +=! X(r_a,r_b,i) * dH(r_a,r_b,h)\n}\n",
			2, 1, {{2, 17, 1024}, {2, 17, 256}, {1024, 256}}, {3, 3, 2},
			{"X_packed[i, r_a, r_b] = X[r_a, r_b, i]", NULL}, NULL},
		{"def k(float(B,I) X, float(B,H) dH) -> (dW) { dW(i,h) +=! X(r_b,i) * dH(r_b,h) }",
			2, 1, {{17, 1000}, {17, 256}, {1000, 256}}, {2, 2, 2}, {"!_packed", NULL},
			NULL},
		{"def k(float(B,I) X, float(B,H) dH) -> (dW) { dW(i,h) +=! X(r_b,i) * dH(r_b,h) }",
			2, 1, {{17, 1024}, {17, 200}, {1024, 200}}, {2, 2, 2}, {"!_packed", NULL},
			NULL},
	};
	uint64_t r = 83;
	size_t c;
	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		check_pack_case(&cases[c], (int)c, &r);
}

/* A convolution into a temporary, then its bias into the output
 * (T(n,f,h,w) +=! ...; O(n,f,h,w) = T(n,f,h,w) + B(f), as bench/grad.tc
 * writes it): at these sizes the isl scheduler fuses the bias under the
 * reduction's first member, apart from the channels-last copy back, and
 * the reduction's other members, below that sequence, never joined the
 * band, so the nest had no register tile (8x64x56x56: 461 ms against 7.2
 * for the in-place form).  The fusion pass now counts such a nest as
 * untiled and keeps the statements apart: the default code has register
 * tiles, and every variant computes the interpreter's result. */
static void conv_then_bias_keeps_register_tiles(void **state)
{
	enum { N = 2, C = 16, H = 30, W = 30, F = 32, OH = H - 2, OW = W - 2 };
	static float img[N * C * H * W], wt[F * C * 9], bias[F], out[3][N * F * OH * OW];
	int64_t si[4] = {N, C, H, W}, sw[4] = {F, C, 3, 3}, sb[1] = {F}, so[4] = {N, F, OH, OW};
	DLTensor I = {img, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor W1 = {wt, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sw, NULL, 0};
	DLTensor B = {bias, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sb, NULL, 0};
	const DLTensor *in[3] = {&I, &W1, &B};
	static const char *const opts[3] = {"", "fusion=min", "target=interp"};
	uint64_t r = 41;
	char *text;
	int i;
	tc_module *m;
	(void)state;
	for (i = 0; i < N * C * H * W; i++)
		img[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < F * C * 9; i++)
		wt[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < F; i++)
		bias[i] = (float)tu_rand_unit(&r) * 2 - 1;
	memset(out, 0xff, sizeof(out)); /* NaN: poisoned */
	m = tc_module_parse(ctx, "def k(float(N,C,H,W) I, float(F,C,KH,KW) W1, float(F) B) -> (O) {\n"
				 "  T(n,f,h,w) +=! I(n,c,h+kh,w+kw) * W1(f,c,kh,kw)\n"
				 "  O(n,f,h,w) = T(n,f,h,w) + B(f)\n}\n",
		"convbias.tc");
	assert_non_null(m);
	text = stage_of(m, in, 3, "", "c");
	assert_true(tu_contains(text, "// tc_regtile"));
	tc_string_free(text);
	run_variants(m, in, 3, 4, so, out[0], opts, 3, 2, 1e-5f);
	tc_module_free(m);
}

/* Y and X (n x d, drawn in turn element by element) and G (d) of the
 * column-sum tests below, uniform in [-1, 1). */
static void rows_inputs(float *y, float *x, float *g, int n, int d, uint64_t *rng)
{
	int i;
	for (i = 0; i < n * d; i++) {
		y[i] = (float)tu_rand_unit(rng) * 2 - 1;
		x[i] = (float)tu_rand_unit(rng) * 2 - 1;
	}
	for (i = 0; i < d; i++)
		g[i] = (float)tu_rand_unit(rng) * 2 - 1;
}

/* Nests that read the same rows (polyhedral/fusion.c, tc_poly_fuse_reuse):
 * a row sum R and two column sums CG, CB of Y.  With two threads the column
 * sums share one nest (their statements under the same loops, split into
 * a chunk of columns per thread); made for one thread, all three share the
 * loop over Y's rows, one pass over Y and X (Y and X take more than half
 * an L2: smaller data stays in cache between the nests, and the nests
 * stay apart).  Every variant gives the interpreter's results within a
 * sum's tolerance (outputs poisoned). */
static void nests_share_loops_over_the_same_rows(void **state)
{
	enum { N = 2000, D = 300, V = 4 }; /* Y: 2.4 MB, more than half an L2 */
	static float y[N * D], x[N * D], g[D], r[V][N], cg[V][D], cb[V][D];
	int64_t sy[2] = {N, D}, sg[1] = {D}, sr[1] = {N};
	DLTensor Y = {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0};
	DLTensor G = {g, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0};
	const DLTensor *in[3] = {&Y, &X, &G};
	static const char *const opts[V] = {"target=interp", "threads=1", "threads=2",
		"fusion=min threads=1"};
	uint64_t rng = 5;
	char *text;
	tc_module *m;
	int v, i;
	(void)state;
	rows_inputs(y, x, g, N, D, &rng);
	m = tc_module_parse(ctx, "def k(float(N,D) Y, float(N,D) X, float(D) G) -> (R, CG, CB) {\n"
				 "  R(n) +=! Y(n,d) * X(n,d) * G(d)\n"
				 "  CG(d) +=! Y(n,d) * X(n,d)\n"
				 "  CB(d) +=! Y(n,d)\n}\n",
		"reuse.tc");
	assert_non_null(m);
	/* two threads: CG and CB summed in partial sums over two chunks of
	 * 1000 rows (ir/partial.c), which share the rows' loop with R, one
	 * chunk a thread */
	text = stage_of(m, in, 3, "threads=2", "ast");
	assert_true(tu_contains(text, "// tc_parallel\n  for (int c0 = 0; c0 <= 1; c0 += 1)\n"
				      "    for (int c1 = 1000 * c0; c1 <= 1000 * c0 + 999; c1 += 1) {\n"));
	assert_true(tu_contains(text, "S0(c1, c2);"));
	assert_true(tu_contains(text, "S1(c0, c2, -1000 * c0 + c1);"));
	assert_true(tu_contains(text, "S3(c0, c2, -1000 * c0 + c1);"));
	tc_string_free(text);
	/* without vecreduce, the column sums in the interpreter's order: CG
	 * and CB share their loops */
	text = stage_of(m, in, 3, "threads=2 vecreduce=off", "ast");
	assert_true(tu_contains(text, "S1(c2, c1);"));
	assert_true(tu_contains(text, "S2(c2, c1);"));
	tc_string_free(text);
	text = stage_of(m, in, 3, "threads=1", "ast");
	/* one loop over the rows, around all three */
	assert_int_equal(count_lines_with(text, "for (int c0 = 0; c0 <= 1999; c0 += 1)", ""), 1);
	assert_true(tu_contains(text, "S1(c1, c0);"));
	assert_true(tu_contains(text, "S2(c1, c0);"));
	assert_true(tu_contains(text, "S0(c0, c1);"));
	tc_string_free(text);
	for (v = 0; v < V; v++) {
		DLTensor O[3] = {{r[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sr, NULL, 0},
			{cg[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0},
			{cb[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0}};
		run_with_outs(m, in, 3, O, 3, opts[v], NULL);
		for (i = 0; i < N; i++)
			assert_true(fabsf(r[v][i] - r[0][i]) <= 1e-4f * (1 + fabsf(r[0][i])));
		for (i = 0; i < D; i++) {
			assert_true(fabsf(cg[v][i] - cg[0][i]) <= 1e-4f * (1 + fabsf(cg[0][i])));
			assert_true(fabsf(cb[v][i] - cb[0][i]) <= 1e-4f * (1 + fabsf(cb[0][i])));
		}
	}
	tc_module_free(m);
}

/* Every nest's contraction gets its cache blocks (tile.c, tc_poly_each_band),
 * not only the first nest's: two matmuls of 13 x 1024 x 256 in one def
 * both sum in blocks of KC (128 at x86-64-v4) of the 1024 (where the
 * second's register tiles ran the whole reduction); the results within a
 * sum's reordering bound of sums in C, on one and two threads. */
static void every_nest_gets_cache_blocks(void **state)
{
	enum { M = 13, K = 1024, N = 256, V = 2 };
	static float a[M * K], b[K * N], c[M * K], d[K * N], o1[V][M * N], o2[V][M * N];
	static const char *const opts[V] = {"threads=1", "threads=2"};
	int64_t sa[2] = {M, K}, sb[2] = {K, N}, so[2] = {M, N};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor C = {c, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor D = {d, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	const DLTensor *in[4] = {&A, &B, &C, &D};
	uint64_t rng = 31;
	char *text;
	tc_module *m;
	int v, i, j, k;
	(void)state;
	fill_uniform(a, M * K, &rng, -1, 1);
	fill_uniform(c, M * K, &rng, -1, 1);
	fill_uniform(b, K * N, &rng, -1, 1);
	fill_uniform(d, K * N, &rng, -1, 1);
	m = tc_module_parse(ctx, "def k(float(M,K) A, float(K,N) B, float(M,K) C, float(K,N) D) -> (O1, O2) {\n"
				 "  O1(m,n) +=! A(m,r_k) * B(r_k,n)\n"
				 "  O2(m,n) +=! C(m,r_k) * D(r_k,n)\n}\n",
		"two.tc");
	assert_non_null(m);
	text = stage_of(m, in, 4, "threads=1", "ast");
	assert_true(tu_contains(text, "S0(6 * c3, 64 * c5, 128 * c1);"));
	assert_true(tu_contains(text, "S1(6 * c3, 64 * c5, 128 * c1);"));
	tc_string_free(text);
	for (v = 0; v < V; v++) {
		DLTensor O[2] = {{o1[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, so, NULL, 0},
			{o2[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, so, NULL, 0}};
		run_with_outs(m, in, 4, O, 2, opts[v], NULL);
		for (i = 0; i < M; i++)
			for (j = 0; j < N; j++) {
				double s1 = 0, s2 = 0, b1 = 0, b2 = 0, bound = 2.0 * K * ldexp(1, -24);
				for (k = 0; k < K; k++) {
					s1 += (double)a[i * K + k] * b[k * N + j];
					s2 += (double)c[i * K + k] * d[k * N + j];
					b1 += fabs((double)a[i * K + k] * b[k * N + j]);
					b2 += fabs((double)c[i * K + k] * d[k * N + j]);
				}
				if (!(fabs(o1[v][i * N + j] - s1) <= bound * b1) ||
					!(fabs(o2[v][i * N + j] - s2) <= bound * b2))
					fail_msg("%s: (%d,%d): %.9g %.9g against %.9g %.9g", opts[v], i, j,
						o1[v][i * N + j], o2[v][i * N + j], s1, s2);
			}
	}
	tc_module_free(m);
}

/* A column sum alone (a bias gradient, DB(d) +=! Y(n,d)) on several
 * threads: rows of 300 floats (1200 bytes) are too short to split among
 * the threads by columns (each thread's part of a row under two 4 KiB
 * pages, ir/partial.c, short_rows), so the sum too goes in partial sums
 * over chunks of rows, the chunks the parallel loop (fusion.c,
 * lone_partials); rows of 4096 floats are split by columns as before.
 * Results within the reordering bound of docs/language.md 6.8, against
 * the interpreter's, on 1, 2 and 3 threads. */
static void column_sum_alone_in_chunks(void **state)
{
	enum { N = 2301, D = 300, V = 4 }; /* Y: 2.8 MB, more than half an L2 */
	static float y[N * D], db[V][D];
	static const char *const opts[V] = {"target=interp", "threads=2", "threads=3", "threads=1"};
	int64_t sy[2] = {N, D}, sg[1] = {D}, swide[2] = {300, 4096};
	DLTensor Y = {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0};
	const DLTensor *in[1] = {&Y};
	uint64_t rng = 29;
	char *text;
	tc_module *m;
	int v, i, n;
	(void)state;
	fill_uniform(y, N * D, &rng, -1, 1);
	m = tc_module_parse(ctx, "def k(float(N,D) Y) -> (DB) {\n  DB(d) +=! Y(n,d)\n}\n", "colsum.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "threads=2", "ir");
	assert_true(tu_contains(text, "temp   DB_part: float32(2, D)"));
	tc_string_free(text);
	text = stage_of(m, in, 1, "threads=2", "ast");
	assert_true(tu_contains(text, "  // tc_parallel\n  for (int c0 = 0; c0 <= 1; c0 += 1)\n"
				      "    for (int c1 = 1151 * c0; c1 <= min(2300, 1151 * c0 + 1150); c1 += 1)\n"));
	tc_string_free(text);
	for (v = 0; v < V; v++) {
		DLTensor O = {db[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0};
		run_with_outs(m, in, 1, &O, 1, opts[v], NULL);
		for (i = 0; i < D; i++) {
			double sb = 0, bound = 2.0 * N * ldexp(1, -24);
			for (n = 0; n < N; n++)
				sb += fabs((double)y[n * D + i]);
			if (!(fabs((double)db[v][i] - db[0][i]) <= bound * sb))
				fail_msg("%s: column %d: %.9g against %.9g", opts[v], i, db[v][i], db[0][i]);
		}
	}
	Y.shape = swide; /* rows of 16 KiB: by columns, no partial sums */
	text = stage_of(m, in, 1, "threads=2", "ir");
	assert_null(strstr(text, "_part"));
	tc_string_free(text);
	tc_module_free(m);
}

/* Column sums on several threads in partial sums over chunks of rows
 * (ir/partial.c): each thread sums its chunk of rows into its own partial
 * sums, in the loop over the rows that the rows' statements share, and the
 * chunks' sums are added after.  2301 rows: on two threads the last chunk
 * is one row short (1151 + 1150).  Results: max= exact, the sums within
 * the reordering bound of docs/language.md 6.8 (2 n eps S); with
 * vecreduce=off or one thread nothing is rewritten and the results are
 * the interpreter's bits. */
static void partial_sums_per_thread(void **state)
{
	enum { N = 2301, D = 300, V = 5 }; /* Y: 2.8 MB, more than half an L2 */
	static float y[N * D], x[N * D], g[D], dx[V][N * D], dg[V][D], db[V][D], mx[V][D];
	static const char *const opts[V] = {"target=interp", "threads=2", "threads=3",
		"threads=2 vecreduce=off", "threads=1"};
	int64_t sy[2] = {N, D}, sg[1] = {D};
	DLTensor Y = {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0};
	DLTensor G = {g, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0};
	const DLTensor *in[3] = {&Y, &X, &G};
	uint64_t rng = 17;
	char *text;
	tc_module *m;
	int v, i, n;
	(void)state;
	rows_inputs(y, x, g, N, D, &rng);
	m = tc_module_parse(ctx, "def k(float(N,D) Y, float(N,D) X, float(D) G) -> (DX, DG, DB, MX) {\n"
				 "  s(n) +=! Y(n,d) * G(d)\n"
				 "  DX(n,d) = Y(n,d) * G(d) - s(n) / D * X(n,d)\n"
				 "  DG(d) +=! Y(n,d) * X(n,d)\n"
				 "  DB(d) +=! Y(n,d)\n"
				 "  MX(d) max=! X(n,d)\n}\n",
		"partial.tc");
	assert_non_null(m);
	text = stage_of(m, in, 3, "threads=2", "ir");
	assert_true(tu_contains(text, "temp   DG_part: float32(2, D)"));
	assert_true(tu_contains(text, "temp   MX_part: float32(2, D)"));
	assert_true(tu_contains(text, "DB[d] +=! DB_part[n_t, d]"));
	tc_string_free(text);
	/* one chunk of rows a thread, the rows' statements in its loop */
	text = stage_of(m, in, 3, "threads=2", "ast");
	assert_true(tu_contains(text, "  // tc_parallel\n  for (int c0 = 0; c0 <= 1; c0 += 1) {\n"));
	assert_true(tu_contains(text, "for (int c1 = 1151 * c0; c1 <= min(2300, 1151 * c0 + 1150); c1 += 1) {\n"));
	assert_true(tu_contains(text, "S1(c1, c2 - 299);"));
	assert_true(tu_contains(text, "S2(c0, c2, -1151 * c0 + c1);"));
	assert_int_equal(count_lines_with(text, "tc_parallel", ""), 1);
	tc_string_free(text);
	text = stage_of(m, in, 3, "threads=3", "ast");
	assert_true(tu_contains(text, "for (int c1 = 767 * c0; c1 <= 767 * c0 + 766; c1 += 1) {\n"));
	tc_string_free(text);
	for (v = 3; v < V; v++) {
		text = stage_of(m, in, 3, opts[v], "ir");
		assert_null(strstr(text, "_part"));
		tc_string_free(text);
	}
	for (v = 0; v < V; v++) {
		DLTensor O[4] = {{dx[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0},
			{dg[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0},
			{db[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0},
			{mx[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sg, NULL, 0}};
		for (i = 0; i < D; i++) /* poisoned */
			dg[v][i] = db[v][i] = mx[v][i] = NAN;
		run_with_outs(m, in, 3, O, 4, opts[v], NULL);
		if (memcmp(mx[v], mx[0], sizeof(mx[0])))
			fail_msg("%s: max= differs from the interpreter's", opts[v]);
		for (i = 0; i < D; i++) {
			double sg_ = 0, sb = 0, bound = 2.0 * N * ldexp(1, -24);
			for (n = 0; n < N; n++) {
				sg_ += fabs((double)y[n * D + i] * x[n * D + i]);
				sb += fabs((double)y[n * D + i]);
			}
			if (!(fabs((double)dg[v][i] - dg[0][i]) <= bound * sg_) ||
				!(fabs((double)db[v][i] - db[0][i]) <= bound * sb))
				fail_msg("%s: column %d: DG %.9g against %.9g, DB %.9g against %.9g", opts[v],
					i, dg[v][i], dg[0][i], db[v][i], db[0][i]);
		}
		for (i = 0; i < N * D; i++)
			if (!(fabsf(dx[v][i] - dx[0][i]) <= 1e-4f * (1 + fabsf(dx[0][i]))))
				fail_msg("%s: DX[%d] %.9g against %.9g", opts[v], i, dx[v][i], dx[0][i]);
		if (v >= 3 && (memcmp(dg[v], dg[0], sizeof(dg[0])) || memcmp(db[v], db[0], sizeof(db[0]))))
			fail_msg("%s: the column sums are not the interpreter's bits", opts[v]);
	}
	/* the partial sums changed the order: not the interpreter's bits */
	assert_true(memcmp(dg[1], dg[0], sizeof(dg[0])) != 0);
	tc_module_free(m);
	/* a column sum that reads what the def computes (R, the rows' sums)
	 * keeps every column sum of the def whole, CB too (the isl scheduler
	 * took seconds on such partial sums: ir/partial.c) */
	m = tc_module_parse(ctx, "def k(float(N,D) Y, float(N,D) X, float(D) G) -> (R, CG, CB) {\n"
				 "  R(n) +=! Y(n,d) * G(d)\n"
				 "  CG(d) +=! X(n,d) * R(n)\n"
				 "  CB(d) +=! Y(n,d)\n}\n",
		"computed.tc");
	assert_non_null(m);
	text = stage_of(m, in, 3, "threads=2", "ir");
	assert_null(strstr(text, "_part"));
	tc_string_free(text);
	tc_module_free(m);
}

/* A large output written once, in a nest that, made for one thread, shares
 * its loop over the rows with a column sum: still streamed (LLVM merged the
 * streaming copy's load of the output's pointer with the plain copy's and
 * dropped its alignment, and with it every non-temporal store, until the
 * streaming copy's load became volatile); the results right in both
 * copies (the output aligned, then 4 bytes off). */
static void streaming_stores_in_a_fused_nest(void **state)
{
	enum { N = 1024, D = 1024 };
	float *y = aligned_alloc(64, (size_t)N * D * sizeof(float));
	float *o = aligned_alloc(64, ((size_t)N * D + 16) * sizeof(float));
	static float cb[D];
	int64_t sy[2] = {N, D}, sc[1] = {D};
	DLTensor Y = {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0};
	const DLTensor *in[1] = {&Y};
	uint64_t rng = 9;
	char *text;
	tc_module *m;
	int64_t i, j;
	int off;
	(void)state;
	assert_true(y && o);
	for (i = 0; i < N * D; i++)
		y[i] = (float)tu_rand_unit(&rng) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(N,D) Y) -> (O, CB) {\n"
				 "  O(n,d) = Y(n,d) * 3 + 1\n"
				 "  CB(d) +=! Y(n,d)\n}\n",
		"sf.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "threads=1", "ast");
	assert_int_equal(count_lines_with(text, "for (int c0 = 0; c0 <= 1023; c0 += 1)", ""), 1);
	tc_string_free(text);
	text = stage_of(m, in, 1, "threads=1 stream=on", "asm");
	assert_non_null(strstr(text, "vmovntps"));
	tc_string_free(text);
	for (off = 0; off < 2; off++) {
		DLTensor O[2] = {{o + off, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sy, NULL, 0},
			{cb, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sc, NULL, 0}};
		run_with_outs(m, in, 1, O, 2, "threads=1 stream=on", NULL);
		for (i = 0; i < N * D; i++)
			if (o[off + i] != fmaf(y[i], 3, 1))
				fail_msg("O element %lld (offset %d): %g, expected %g", (long long)i, off,
					(double)o[off + i], (double)fmaf(y[i], 3, 1));
		for (j = 0; j < D; j++) {
			double want = 0;
			for (i = 0; i < N; i++)
				want += y[i * D + j];
			assert_true(fabs(cb[j] - want) <= 1e-4 * (1 + fabs(want)));
		}
	}
	tc_module_free(m);
	free(y);
	free(o);
}

/* A row reduction that a pass over the same row follows in its nest
 * (softmax's backward: the dot product, then d_X over the row) keeps its
 * vector loop rolled (llvm.loop.unroll.disable; LLVM would unroll a row of
 * 1000 in full, the slower nest: codegen/llvm_loop.c loop_hints); the same
 * reduction alone, and the nest over rows too short for 4 trips of the
 * vector loop, are left to LLVM.  Results: the interpreter's within a
 * float32 tolerance (the sums reordered), on one thread and two. */
static void rolled_reduction_before_a_row_pass(void **state)
{
	enum { N = 24, C = 1000, S = 40 };
	static float p[N * C], dp[N * C], dx[2][N * C];
	int64_t sp[2] = {N, C}, ss[2] = {N, S};
	DLTensor P = {p, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sp, NULL, 0};
	DLTensor dP = {dp, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sp, NULL, 0};
	DLTensor Ps = {p, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ss, NULL, 0};
	DLTensor dPs = {dp, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ss, NULL, 0};
	const DLTensor *in[2] = {&P, &dP}, *ins[2] = {&Ps, &dPs};
	DLTensor X[2];
	static const char *const opts[] = {"threads=1", "threads=2"};
	uint64_t rng = 17;
	tc_module *fused, *alone;
	char *text;
	size_t i, v;
	(void)state;
	for (i = 0; i < N * C; i++) {
		p[i] = (float)tu_rand_unit(&rng);
		dp[i] = (float)tu_rand_unit(&rng) * 2 - 1;
	}
	fused = tc_module_parse(ctx, "def k(float(N,C) P, float(N,C) d_P) -> (d_X) {\n"
				     "  dot(n) +=! d_P(n,c) * P(n,c)\n"
				     "  d_X(n,c) = P(n,c) * (d_P(n,c) - dot(n))\n}\n",
		"smb.tc");
	alone = tc_module_parse(ctx, "def k(float(N,C) P, float(N,C) d_P) -> (dot) {\n"
				     "  dot(n) +=! d_P(n,c) * P(n,c)\n}\n",
		"dot.tc");
	assert_true(fused && alone);
	text = stage_of(fused, in, 2, "threads=1", "llvm");
	assert_int_equal(count_lines_with(text, "!\"llvm.loop.unroll.disable\"", ""), 1);
	tc_string_free(text);
	text = stage_of(alone, in, 2, "threads=1", "llvm");
	assert_null(strstr(text, "llvm.loop.unroll.disable"));
	tc_string_free(text);
	text = stage_of(fused, ins, 2, "threads=1", "llvm");
	assert_null(strstr(text, "llvm.loop.unroll.disable"));
	tc_string_free(text);
	for (v = 0; v < 2; v++)
		X[v] = (DLTensor){dx[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sp, NULL, 0};
	run_with(fused, in, 2, &X[1], "target=interp", NULL);
	for (v = 0; v < 2; v++) {
		for (i = 0; i < N * C; i++)
			dx[0][i] = NAN;
		run_with(fused, in, 2, &X[0], opts[v], NULL);
		for (i = 0; i < N * C; i++)
			if (!(fabsf(dx[0][i] - dx[1][i]) <= 1e-4f * (1 + fabsf(dx[1][i]))))
				fail_msg("%s: d_X[%zu] = %g, the interpreter's %g", opts[v], i,
					(double)dx[0][i], (double)dx[1][i]);
	}
	tc_module_free(fused);
	tc_module_free(alone);
}

/* A temporary that one iteration of the row loop writes and reads back
 * (T, kept by inline=off; derived backward defs make such temporaries:
 * layer norm's d_xc, which inlining keeps as it is read twice) lives in a
 * row buffer on the stack, not in a workspace region as large as X; the
 * results are the interpreter's bit for bit (sums in order). */
static void plain_temporaries_in_row_buffers(void **state)
{
	enum { N = 50, D = 1000 }; /* rows LLVM does not unroll into registers */
	static float x[N * D], out[3][N * D];
	int64_t sx[2] = {N, D};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	const DLTensor *in[1] = {&X};
	static const char *const opts[3] = {"inline=off vecreduce=off parallel=off",
		"inline=off vecreduce=off", "target=interp"};
	uint64_t rng = 13;
	char *text;
	tc_module *m;
	int i;
	(void)state;
	for (i = 0; i < N * D; i++)
		x[i] = (float)tu_rand_unit(&rng) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(N,D) X) -> (O) {\n"
				 "  T(n,d) = X(n,d) * 2.0\n"
				 "  S(n) +=! T(n,d) * T(n,d)\n"
				 "  O(n,d) = T(n,d) - S(n)\n}\n",
		"rb.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "inline=off", "llvm"); /* T not folded into its readers */
	assert_true(tu_contains(text, "%T = alloca [1000 x float]"));
	tc_string_free(text);
	run_variants(m, in, 1, 2, sx, out[0], opts, 3, 3, 0);
	tc_module_free(m);
}

/* A convolution's weight gradient d_W1(f,c,kh,kw) +=! d_O(n,f,h,w) *
 * I(n,c,h+kh,w+kw): its reduction over n, h and w streams d_O's rows from
 * beyond the L2, so the register tile takes rows of c (all 8, sharing each
 * 16-lane d_O vector), not of kw (3: 13.2 against 7.8 ms at 8x64x56x56), and
 * no cache tiles of 1 for c and kh (tile.c: a window of 4096 points is no
 * kernel window); the result within a long sum's tolerance of the
 * interpreter's.  With 64 channels (tile.c, image_tiles) the reduction goes
 * in blocks of rows of h (2 of 54 at x86-64-v4's KC of 128) inside tiles of
 * 6 channels, the parallel loop, and the taps (kh, kw) inside the blocks,
 * the register tile still rows of c (the reduction's blocks counted as the
 * reduction); with 8 channels and two threads the taps stay the parallel
 * loop, untiled (one tile of rows would leave a thread idle). */
static void weight_gradient_rows(void **state)
{
	enum { N = 8, C = 8, H = 66, W = 66, F = 16 };
	static float img[N * C * H * W], dout[N * F * (H - 2) * (W - 2)], out[2][F * C * 9];
	int64_t si[4] = {N, C, H, W}, sd[4] = {N, F, H - 2, W - 2}, sw[4] = {F, C, 3, 3};
	DLTensor I = {img, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor dO = {dout, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sd, NULL, 0};
	const DLTensor *in[2] = {&I, &dO};
	static const char *const opts[2] = {"", "target=interp"};
	uint64_t rng = 17;
	char *text;
	tc_module *m;
	int i;
	(void)state;
	for (i = 0; i < N * C * H * W; i++)
		img[i] = (float)tu_rand_unit(&rng);
	for (i = 0; i < N * F * (H - 2) * (W - 2); i++)
		dout[i] = (float)tu_rand_unit(&rng);
	m = tc_module_parse(ctx, "def k(float(N,C,H,W) I, float(N,F,OH,OW) d_O) -> "
				 "(float(F,C,3,3) d_W1) {\n"
				 "  d_W1(f,c,kh,kw) +=! d_O(n,f,h,w) * I(n,c,h+kh,w+kw) "
				 "where kh in 0:3, kw in 0:3\n}\n",
		"wg.tc");
	assert_non_null(m);
	text = stage_of(m, in, 2, "cpu=x86-64-v4", "ast");
	assert_true(tu_contains(text, "// tc_unroll\n"));
	assert_true(tu_contains(text, "for (int tc_p3 = 0; tc_p3 <= 7; tc_p3 += 1)"));
	assert_true(tu_contains(text, "S1(tc_o0 + tc_p3, tc_o1, tc_o2, "));
	tc_string_free(text);
	text = stage_of(m, in, 2, "threads=2", "ast");
	assert_true(tu_contains(text, "// tc_parallel\n  for (int c1 = 0; c1 <= 8; c1 += 1) {"));
	tc_string_free(text);
	run_variants(m, in, 2, 4, sw, out[0], opts, 2, 1, 2e-4f);
	/* 64 channels: compiled only */
	si[1] = sd[1] = 64;
	si[2] = si[3] = 56;
	sd[2] = sd[3] = 54;
	text = stage_of(m, in, 2, "threads=2", "ast");
	assert_true(tu_contains(text, "// tc_parallel\n  for (int c0 = 0; c0 <= 10; c0 += 1) {"));
	assert_true(tu_contains(text, "for (int c1 = 0; c1 <= 7; c1 += 1)\n"
				      "      for (int c2 = 0; c2 <= 26; c2 += 1)\n"
				      "        for (int c6 = 0; c6 <= 2; c6 += 1)\n"
				      "          for (int c7 = 0; c7 <= 2; c7 += 1) {\n"
				      "            // tc_regtile\n"
				      "            S1(6 * c0, c6, c7, 0, c1, 2 * c2, 0);"));
	assert_true(tu_contains(text, "for (int tc_p3 = 0; tc_p3 <= 5; tc_p3 += 1)"));
	tc_string_free(text);
	tc_module_free(m);
}

/* A padded convolution's weight gradient on two threads, in cache blocks
 * of the reduction (tile.c, image_tiles) whose register tiles isl isolates
 * (the pad's guard): the parallel pass's balancing of the tiles of input
 * channels would move that anchored subtree under a new band, which isl
 * refuses ("cannot delete band node with anchored subtree": an internal
 * error), so it leaves the band as it is; the results, every 97th weight,
 * against sums in C. */
static void padded_weight_gradient_on_two_threads(void **state)
{
	enum { N = 2, C = 64, H = 56, W = 56, F = 64 };
	static float img[N * C * H * W], dout[N * F * H * W], dw[F * C * 9];
	int64_t si[4] = {N, C, H, W}, sd[4] = {N, F, H, W}, sw[4] = {F, C, 3, 3};
	DLTensor I = {img, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor dO = {dout, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sd, NULL, 0};
	DLTensor O = {dw, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sw, NULL, 0};
	const DLTensor *in[2] = {&I, &dO};
	uint64_t rng = 37;
	char *text;
	tc_module *m;
	int i, n, h, w;
	(void)state;
	fill_uniform(img, N * C * H * W, &rng, -1, 1);
	fill_uniform(dout, N * F * H * W, &rng, -1, 1);
	m = tc_module_parse(ctx, "def k(float(N,C,H,W) I, float(N,F,H,W) d_O) -> (float(F,C,3,3) d_W1) {\n"
				 "  d_W1(f,c,kh,kw) +=! d_O(n,f,h,w) * pad(I(n,c,h+kh-1,w+kw-1), 0.0) "
				 "where kh in 0:3, kw in 0:3, h in 0:H, w in 0:W\n}\n",
		"wgpad.tc");
	assert_non_null(m);
	text = stage_of(m, in, 2, "threads=2", "ast");
	assert_true(tu_contains(text, "// tc_parallel\n"));
	tc_string_free(text);
	run_with_outs(m, in, 2, &O, 1, "threads=2", NULL);
	for (i = 0; i < F * C * 9; i += 97) {
		int f = i / (C * 9), c = i / 9 % C, kh = i / 3 % 3, kw = i % 3;
		double sum = 0, abs = 0, bound = 2.0 * N * H * W * ldexp(1, -24);
		for (n = 0; n < N; n++)
			for (h = 0; h < H; h++)
				for (w = 0; w < W; w++) {
					int y = h + kh - 1, x = w + kw - 1;
					double t = y < 0 || y >= H || x < 0 || x >= W ? 0.0 :
						(double)dout[((n * F + f) * H + h) * W + w] *
						img[((n * C + c) * H + y) * W + x];
					sum += t;
					abs += fabs(t);
				}
		if (!(fabs(dw[i] - sum) <= bound * abs))
			fail_msg("d_W1[%d] %.9g against %.9g", i, dw[i], sum);
	}
	tc_module_free(m);
}

/* A read at a third of the innermost loop's rate, X(n, x / 3) (as
 * max-pooling's backward reads d_O(n,c,x/2,x1/2)): the order pass splits
 * the loop over x into x / 3 and x % 3, the second innermost and unrolled
 * (polyhedral/order.c, split_rate), the last group of 3 partial (149 =
 * 3 x 49 + 2); the results bit for bit the interpreter's and those of
 * order=off, which leaves the loop whole. */
static void reads_at_a_fraction_of_the_rate(void **state)
{
	enum { N = 37, W = 50, V = 149 };
	static float x[N * W], z[N * V], out[3][N * V];
	int64_t sx[2] = {N, W}, sz[2] = {N, V};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Z = {z, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sz, NULL, 0};
	const DLTensor *in[2] = {&X, &Z};
	static const char *const opts[3] = {"", "order=off", "target=interp"};
	uint64_t rng = 23;
	char *text;
	tc_module *m;
	int i;
	(void)state;
	for (i = 0; i < N * W; i++)
		x[i] = (float)tu_rand_unit(&rng) * 2 - 1;
	for (i = 0; i < N * V; i++)
		z[i] = (float)tu_rand_unit(&rng) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(N,W) X, float(N,V) Z) -> (O) {\n"
				 "  O(n,x) = X(n, x / 3) * 2.0 + float(x % 3) + Z(n,x) where x in 0:V\n}\n",
		"rate.tc");
	assert_non_null(m);
	text = stage_of(m, in, 2, "", "ast");
	assert_true(tu_contains(text, "// tc_unroll\n"));
	assert_true(tu_contains(text, "S0(c0, 3 * c1 + c2);"));
	tc_string_free(text);
	text = stage_of(m, in, 2, "order=off", "ast");
	assert_null(strstr(text, "tc_unroll"));
	tc_string_free(text);
	run_variants(m, in, 2, 2, sz, out[0], opts, 3, 3, 0);
	tc_module_free(m);
}

/* The hoist repair moves the statements a band runs once per outer
 * iteration one at a time when they cannot move together: in the derived
 * layer-norm backward the init of d_mean(n) (a sum the second loop makes)
 * and d_var(n) (which reads d_rstd, the first loop's sum) sat in the
 * band's first loop as "if (c1 == 255) d_mean = 0", which kept the loop
 * from being vectorised (4096 x 1024, one thread: 1.86 -> 1.14 ms).  The
 * init now comes before the loops; the results are the interpreter's
 * within a sum's tolerance. */
static void hoist_one_statement_at_a_time(void **state)
{
	enum { N = 300, D = 256 };
	static float x[N * D], xc[N * D], dy[N * D], g[D], bt[D], var[N], rstd[N];
	static float dx[2][N * D], dg[2][D], dbt[2][D];
	int64_t s2[2] = {N, D}, sd[1] = {D}, sn[1] = {N};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
	DLTensor G = {g, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sd, NULL, 0};
	DLTensor Bt = {bt, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sd, NULL, 0};
	DLTensor XC = {xc, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
	DLTensor Var = {var, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	DLTensor Rstd = {rstd, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sn, NULL, 0};
	DLTensor dY = {dy, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
	const DLTensor *in[7] = {&X, &G, &Bt, &XC, &Var, &Rstd, &dY};
	static const char *const opts[2] = {"target=interp", ""};
	uint64_t rng = 29;
	char *text;
	tc_module *m;
	int v, i;
	(void)state;
	for (i = 0; i < N * D; i++) {
		x[i] = (float)tu_rand_unit(&rng) * 2 - 1;
		xc[i] = (float)tu_rand_unit(&rng) * 2 - 1;
		dy[i] = (float)tu_rand_unit(&rng) * 2 - 1;
	}
	for (i = 0; i < D; i++) {
		g[i] = (float)tu_rand_unit(&rng) * 2 - 1;
		bt[i] = (float)tu_rand_unit(&rng) * 2 - 1;
	}
	for (i = 0; i < N; i++) {
		var[i] = (float)tu_rand_unit(&rng) + 0.5f;
		rstd[i] = 1 / sqrtf(var[i] + 1e-5f);
	}
	/* tcomp grad bench/grad.tc -e layernorm --saves, the backward def */
	m = tc_module_parse(ctx, "def k(float32(N,D) X, float32(D) G, float32(D) Bt, float32(N,D) xc, "
				 "float32(N) var, float32(N) rstd, float32(N,D) d_Y) -> "
				 "(float32(N,D) d_X, float32(D) d_G, float32(D) d_Bt) {\n"
				 "  d_rstd(n) +=! d_Y(n, d) * (xc(n, d) * G(d))\n"
				 "  d_G(d) +=! d_Y(n, d) * (xc(n, d) * rstd(n))\n"
				 "  d_Bt(d) +=! d_Y(n, d)\n"
				 "  d_var(n) = -(d_rstd(n) * (rstd(n) / (2.0 * (var(n) + 1e-05))))\n"
				 "  d_xc(n,d) = (d_Y(n, d) * (rstd(n) * G(d))) + (d_var(n) * ((xc(n, d) + "
				 "xc(n, d)) / float32(D)))\n"
				 "  d_mean(n) +=! -d_xc(n, d)\n"
				 "  d_X(n,d) = d_xc(n, d) + (d_mean(n) / float32(D)) where d in 0:D\n}\n",
		"lngrad.tc");
	assert_non_null(m);
	text = stage_of(m, in, 7, "", "ast");
	assert_null(strstr(text, "if (c1 == 255)"));
	assert_true(tu_contains(text, "S5_init(c0);\n"));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor O[3] = {{dx[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0},
			{dg[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sd, NULL, 0},
			{dbt[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sd, NULL, 0}};
		run_with_outs(m, in, 7, O, 3, opts[v], NULL);
	}
	for (i = 0; i < N * D; i++)
		assert_true(fabsf(dx[1][i] - dx[0][i]) <= 1e-4f * (1 + fabsf(dx[0][i])));
	for (i = 0; i < D; i++) {
		assert_true(fabsf(dg[1][i] - dg[0][i]) <= 1e-4f * (1 + fabsf(dg[0][i])));
		assert_true(fabsf(dbt[1][i] - dbt[0][i]) <= 1e-4f * (1 + fabsf(dbt[0][i])));
	}
	tc_module_free(m);
}

/* conv2d: the isl scheduler splits the reduction over (r_c, r_kh, r_kw)
 * into nested bands with the stride-1 w outside two reduction loops; the
 * merge pass joins them so the register tile applies (rows of output
 * channels sharing each input vector), and the result stays bit-identical
 * to the interpreter's; tile sizes that would reorder the sum (r_c in
 * tiles of 2 outside r_kh and r_kw) make tcomp schedule again without
 * merging, with the same result. */
static void conv2d_merged_bands(void **state)
{
	enum { C = 5, H = 9, W = 40, F = 10, KH = 3, KW = 3, OH = H - KH + 1, OW = W - KW + 1 };
	static float img[C * H * W], wt[F * C * KH * KW], out[3][F * OH * OW];
	int64_t si[4] = {1, C, H, W}, sw[4] = {F, C, KH, KW}, so[4] = {1, F, OH, OW};
	DLTensor I = {img, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor W1 = {wt, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sw, NULL, 0};
	const DLTensor *in[2] = {&I, &W1};
	static const char *const opts[3] = {"", "tile=4,2,2,3,2", "target=interp"};
	uint64_t r = 11;
	char *text;
	int i;
	tc_module *m;
	(void)state;
	for (i = 0; i < C * H * W; i++)
		img[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < F * C * KH * KW; i++)
		wt[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
				 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
		"conv.tc");
	assert_non_null(m);
	run_variants(m, in, 2, 4, so, out[0], opts, 3, 3, 0);
	{ /* the default schedule: the reduction loops outside the 10 rows of
	   * f, a loop between the tc_unroll and tc_unrolled marks (the code
	   * generator unrolls it),
	   * w innermost (S0 takes n, f, h, w, r_c, r_kh, r_kw); the register
	   * tile's point loops as polyhedral/ast.c builds them (offsets from
	   * the tile's origin tc_o0 ...) */
		text = stage_of(m, in, 2, "", "ast");
		assert_true(tu_contains(text, "// tc_regtile"));
		assert_true(tu_contains(text, "for (int tc_p2 = 0; tc_p2 <= 2; tc_p2 += 1) {\n"
					      "              // tc_unroll\n"
					      "              for (int tc_p3 = 0; tc_p3 <= 9; tc_p3 += 1) {\n"
					      "                // tc_unrolled\n"
					      "                for (int tc_p5 = 0; tc_p5 <= 31; tc_p5 += 1)\n"
					      "                  S0(tc_o0, tc_o1 + tc_p3, tc_o2, tc_o3 + tc_p5, "
					      "tc_o4 + tc_p0, tc_o5 + tc_p1, tc_o6 + tc_p2);"));
		tc_string_free(text);
	}
	tc_module_free(m);
}

/* interchange: matmul's band, (m, r_k, n) after the order pass, in every
 * order, with cache tiles (given, automatic, none) and register tiles
 * (given, automatic, none; they apply when the innermost member stays
 * parallel) in five combinations, computes the interpreter's result bit for bit (vecreduce off:
 * each element still sums in k order, since the reduction is the band's
 * only non-parallel member) and within a reordered sum's tolerance with
 * vecreduce on; the AST has the loops in the order asked for, cache-tile
 * loops included; a list longer than the band changes nothing; and in
 * conv2d's merged band, an order that would reorder the sum (r_c and r_kh
 * swapped) is refused by the dependence check while one that moves a
 * parallel member applies, both with the interpreter's result. */
static void interchange_orders_the_tiled_band(void **state)
{
	enum { M = 37, K = 53, N = 70 };
	enum { C = 5, H = 9, W = 40, F = 10, KH = 3, KW = 3, OH = H - KH + 1, OW = W - KW + 1 };
	static float a[M * K], b[K * N], c[2][M * N];
	static float img[C * H * W], wt[F * C * KH * KW], out[2][F * OH * OW];
	static const char *const perms[] = {"auto", "0", "1,0", "0,2,1", "1,0,2", "1,2,0", "2,0,1",
		"2,1,0", "0,1,2,3"};
	static const char *const tiles[] = {"tile=auto regtile=auto", "tile=none regtile=none",
		"tile=16,8,32 regtile=3,16", "tile=none regtile=auto", "tile=16,8,32 regtile=none"};
	int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
	int64_t si[4] = {1, C, H, W}, sw[4] = {F, C, KH, KW}, so[4] = {1, F, OH, OW};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor I = {img, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor W1 = {wt, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sw, NULL, 0};
	DLTensor Cr, Ct, Or, Ot;
	const DLTensor *in[2] = {&A, &B}, *cin[2] = {&I, &W1};
	char opts[160], *text, *base;
	uint64_t r = 13;
	size_t p, t, i;
	tc_module *m;
	(void)state;
	for (i = 0; i < M * K; i++)
		a[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < K * N; i++)
		b[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(M,K) A, float(K,N) B) -> (C) {\n"
				 "  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n", "mm.tc");
	assert_non_null(m);
	Cr = (DLTensor){c[1], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
	Ct = (DLTensor){c[0], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
	run_with(m, in, 2, &Cr, "target=interp", NULL);
	for (p = 0; p < sizeof(perms) / sizeof(perms[0]); p++)
		for (t = 0; t < sizeof(tiles) / sizeof(tiles[0]); t++) {
			snprintf(opts, sizeof(opts), "interchange=%s %s vecreduce=off", perms[p],
				tiles[t]);
			run_with(m, in, 2, &Ct, opts, NULL);
			for (i = 0; i < M * N; i++)
				if (memcmp(&c[0][i], &c[1][i], sizeof(float)))
					fail_msg("%s: C[%zu] = %a, the interpreter's %a", opts, i,
						(double)c[0][i], (double)c[1][i]);
		}
	for (p = 0; p < sizeof(perms) / sizeof(perms[0]); p++) {
		snprintf(opts, sizeof(opts), "interchange=%s tile=auto regtile=none", perms[p]);
		run_with(m, in, 2, &Ct, opts, NULL);
		for (i = 0; i < M * N; i++)
			if (!(fabsf(c[0][i] - c[1][i]) <= 1e-5f * K))
				fail_msg("%s: C[%zu] = %a, the interpreter's %a", opts, i,
					(double)c[0][i], (double)c[1][i]);
	}

	/* the loops in the order asked for: S0 takes (m, n, r_k) */
	base = stage_of(m, in, 2, "tile=none regtile=none", "ast");
	assert_true(tu_contains(base, "for (int c0 = 0; c0 <= 36; c0 += 1)\n"
				      "  for (int c1 = 0; c1 <= 52; c1 += 1)\n"
				      "    for (int c2 = 0; c2 <= 69; c2 += 1) {"));
	assert_true(tu_contains(base, "S0(c0, c2, c1);"));
	text = stage_of(m, in, 2, "tile=none regtile=none interchange=2,0,1", "ast");
	assert_true(tu_contains(text, "for (int c0 = 0; c0 <= 69; c0 += 1)\n"
				      "  for (int c1 = 0; c1 <= 36; c1 += 1) {"));
	assert_true(tu_contains(text, "for (int c2 = 0; c2 <= 52; c2 += 1)\n"
				      "      S0(c1, c0, c2);"));
	tc_string_free(text);
	text = stage_of(m, in, 2, "tile=none regtile=none interchange=1,0", "ast");
	assert_true(tu_contains(text, "for (int c0 = 0; c0 <= 52; c0 += 1)\n"
				      "  for (int c1 = 0; c1 <= 36; c1 += 1)\n"
				      "    for (int c2 = 0; c2 <= 69; c2 += 1) {"));
	assert_true(tu_contains(text, "S0(c1, c2, c0);"));
	tc_string_free(text);
	text = stage_of(m, in, 2, "tile=none regtile=none interchange=0,1,2,3", "ast");
	assert_string_equal(text, base); /* longer than the band: as is */
	tc_string_free(text);
	tc_string_free(base);
	/* cache-tile loops follow: sizes 16, 8, 32 for (n, r_k, m) */
	text = stage_of(m, in, 2, "tile=16,8,32 regtile=none interchange=2,1,0", "ast");
	assert_true(tu_contains(text, "for (int c0 = 0; c0 <= 69; c0 += 16)\n"
				      "  for (int c1 = 0; c1 <= 52; c1 += 8)\n"
				      "    for (int c2 = 0; c2 <= 36; c2 += 32)"));
	tc_string_free(text);
	tc_module_free(m);

	/* conv2d's merged band (f, h, r_c, r_kh, r_kw, w) */
	for (i = 0; i < C * H * W; i++)
		img[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < F * C * KH * KW; i++)
		wt[i] = (float)tu_rand_unit(&r) * 2 - 1;
	m = tc_module_parse(ctx, "def k(float(N,C,H,W) I, float(F,C,KH,KW) W1) -> (O) {\n"
				 "  O(n,f,h,w) +=! I(n,r_c,h+r_kh,w+r_kw) * W1(f,r_c,r_kh,r_kw)\n}\n",
		"conv.tc");
	assert_non_null(m);
	Or = (DLTensor){out[1], {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, so, NULL, 0};
	Ot = (DLTensor){out[0], {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, so, NULL, 0};
	run_with(m, cin, 2, &Or, "target=interp", NULL);
	base = stage_of(m, cin, 2, "tile=none regtile=none", "ast");
	text = stage_of(m, cin, 2, "tile=none regtile=none interchange=0,1,3,2", "ast");
	assert_string_equal(text, base); /* r_kh before r_c: refused */
	tc_string_free(text);
	text = stage_of(m, cin, 2, "tile=none regtile=none interchange=0,1,2,3,5,4", "ast");
	assert_string_not_equal(text, base); /* w before r_kw */
	assert_true(tu_contains(text, "for (int c5 = 0; c5 <= 2; c5 += 1)\n"
				      "            S0(0, c0, c1, c4, c2, c3, c5);"));
	tc_string_free(text);
	tc_string_free(base);
	for (p = 0; p < 4; p++) {
		static const char *const conv_opts[4] = {"interchange=0,1,3,2",
			"interchange=0,1,2,3,5,4 regtile=none", "interchange=2,0,1",
			"interchange=1,0 tile=4,2,2,3,2"};
		snprintf(opts, sizeof(opts), "%s vecreduce=off", conv_opts[p]);
		run_with(m, cin, 2, &Ot, opts, NULL);
		for (i = 0; i < F * OH * OW; i++)
			if (memcmp(&out[0][i], &out[1][i], sizeof(float)))
				fail_msg("%s: O[%zu] = %a, the interpreter's %a", opts, i,
					(double)out[0][i], (double)out[1][i]);
	}
	tc_module_free(m);
}

/* The assembly of kernel "k" of m compiled with options text opts (for
 * x86-64-v4, as kernel_with's). */
static char *asm_with(tc_module *m, const DLTensor *const *in, int nin, const char *opts)
{
	return stage_of(m, in, nin, opts, "asm");
}

/* Lines of packed float32 multiplies (vmulps, or an FMA: contract=on,
 * the default) on register kind reg ("" any). */
static int packed_muls(const char *text, const char *reg)
{
	return count_lines_with(text, "mulps", reg) + count_lines_with(text, "madd132ps", reg) +
		count_lines_with(text, "madd213ps", reg) + count_lines_with(text, "madd231ps", reg);
}

/* vector and unroll_inner: with vecreduce off every value gives the
 * interpreter's results bit for bit (contract off too: neither option may
 * reorder a float operation) for a pointwise kernel of 1000 elements
 * (vector remainders), a matmul with partial register tiles and a row sum
 * (an in-order float reduction, which must not get a width); with
 * vecreduce on (the default) the row sum is vectorised and stays within
 * float32 rounding of the interpreter's; and the assembly has the width
 * asked for:
 * vector=1 no vector register at all (not even the SLP vectoriser's
 * packing of the register tile's rows), vector=4 packed multiplies on xmm
 * only, vector=8 on ymm (AVX2 hosts), vector=16 on zmm (AVX-512 hosts). */
static void vector_and_unroll_inner_options(void **state)
{
	enum { N = 1000, M = 37, K = 53, P = 70 };
	static float x[N], y[N], z[2][N], a[M * K], b[K * P], c[2][M * P], s[2][M];
	static const char *const opts[] = {"vector=1", "vector=2", "vector=4", "vector=8",
		"vector=16", "vector=64", "unroll_inner=1", "unroll_inner=2", "unroll_inner=8",
		"vector=8 unroll_inner=4", "vector=4 unroll_inner=8", "vector=1 unroll_inner=2",
		"vector=16 unroll_inner=2 parallel=on", "vector=8 regtile=3,24 unroll=off"};
	int64_t sx[1] = {N}, sa[2] = {M, K}, sb[2] = {K, P}, sc[2] = {M, P}, ss[1] = {M};
	DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Y = {y, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sb, NULL, 0};
	DLTensor Z[2], C[2], S[2];
	const DLTensor *pin[2] = {&X, &Y}, *min[2] = {&A, &B}, *sin_[1] = {&A};
	tc_module *pw, *mm, *rs;
	uint64_t r = 21;
	size_t i, v;
	char *text;
	(void)state;
	for (i = 0; i < N; i++) {
		x[i] = (float)tu_rand_unit(&r) * 4 - 2;
		y[i] = (float)tu_rand_unit(&r) * 4 - 2;
	}
	for (i = 0; i < M * K; i++)
		a[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < K * P; i++)
		b[i] = (float)tu_rand_unit(&r) * 2 - 1;
	pw = tc_module_parse(ctx, "def k(float(N) X, float(N) Y) -> (Z) { Z(i) = X(i) * Y(i) + X(i) }\n",
		"pw.tc");
	mm = tc_module_parse(ctx, "def k(float(M,K) A, float(K,N) B) -> (C) {\n"
				  "  C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n", "mm.tc");
	rs = tc_module_parse(ctx, "def k(float(M,K) A) -> (S) { S(m) +=! A(m,r_k) }\n", "rs.tc");
	assert_true(pw && mm && rs);
	for (v = 0; v < 2; v++) {
		Z[v] = (DLTensor){z[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sx, NULL, 0};
		C[v] = (DLTensor){c[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
		S[v] = (DLTensor){s[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, ss, NULL, 0};
	}
	run_with(pw, pin, 2, &Z[1], "target=interp", NULL);
	run_with(mm, min, 2, &C[1], "target=interp", NULL);
	run_with(rs, sin_, 1, &S[1], "target=interp", NULL);
	for (v = 0; v < sizeof(opts) / sizeof(opts[0]); v++) {
		char text[128];
		snprintf(text, sizeof(text), "%s vecreduce=off", opts[v]);
		run_with(rs, sin_, 1, &S[0], opts[v], NULL); /* vecreduce on */
		for (i = 0; i < M; i++)
			if (!(fabsf(s[0][i] - s[1][i]) <= 1e-5f * (fabsf(s[1][i]) + 1)))
				fail_msg("%s: row sum S[%zu] = %a, the interpreter's %a", opts[v], i,
					(double)s[0][i], (double)s[1][i]);
		run_with(pw, pin, 2, &Z[0], text, NULL);
		run_with(mm, min, 2, &C[0], text, NULL);
		run_with(rs, sin_, 1, &S[0], text, NULL);
		for (i = 0; i < N; i++)
			if (memcmp(&z[0][i], &z[1][i], sizeof(float)))
				fail_msg("%s: pointwise Z[%zu] = %a, the interpreter's %a", text, i,
					(double)z[0][i], (double)z[1][i]);
		for (i = 0; i < M * P; i++)
			if (memcmp(&c[0][i], &c[1][i], sizeof(float)))
				fail_msg("%s: matmul C[%zu] = %a, the interpreter's %a", text, i,
					(double)c[0][i], (double)c[1][i]);
		for (i = 0; i < M; i++)
			if (memcmp(&s[0][i], &s[1][i], sizeof(float)))
				fail_msg("%s: row sum S[%zu] = %a, the interpreter's %a", text, i,
					(double)s[0][i], (double)s[1][i]);
	}

	text = asm_with(pw, pin, 2, "vector=1");
	assert_int_equal(packed_muls(text, ""), 0);
	assert_int_equal(count_lines_with(text, "ymm", ""), 0);
	assert_int_equal(count_lines_with(text, "zmm", ""), 0);
	tc_string_free(text);
	text = asm_with(mm, min, 2, "vector=1");
	assert_int_equal(packed_muls(text, ""), 0);
	tc_string_free(text);
	text = asm_with(pw, pin, 2, "vector=4");
	assert_true(packed_muls(text, "xmm") > 0);
	assert_int_equal(packed_muls(text, "ymm") + packed_muls(text, "zmm"), 0);
	tc_string_free(text);
	text = asm_with(pw, pin, 2, "vector=8");
	assert_true(packed_muls(text, "ymm") > 0);
	assert_int_equal(packed_muls(text, "zmm"), 0);
	tc_string_free(text);
	text = asm_with(mm, min, 2, "vector=8");
	assert_true(packed_muls(text, "ymm") >= 24); /* the register tile's 6 x 4 */
	assert_int_equal(packed_muls(text, "zmm"), 0);
	tc_string_free(text);
	text = asm_with(pw, pin, 2, "vector=16");
	assert_true(packed_muls(text, "zmm") > 0);
	tc_string_free(text);
	tc_module_free(pw);
	tc_module_free(mm);
	tc_module_free(rs);
}

/* The distance in units in the last place between floats a and b of the
 * same sign. */
static int64_t ulps(float a, float b)
{
	int32_t ia, ib;
	memcpy(&ia, &a, sizeof(ia));
	memcpy(&ib, &b, sizeof(ib));
	return ia > ib ? (int64_t)ia - ib : (int64_t)ib - ia;
}

/* float32 exp is an inline polynomial under the default options (a libm
 * call would keep loops scalar): within 2 ulp of libm's expf on random
 * arguments over its whole range, subnormal results included, +inf above
 * it, 0 below, NaN for NaN.  softmax's max and sum reductions and its exps
 * vectorise (vecreduce=on, the default; no libm call is left), the result
 * stays within a float32 tolerance of the interpreter's, and the max is the
 * interpreter's exactly; vecreduce=off keeps a sum's order bit for bit,
 * and fastmath divides by a reciprocal. */
static void inline_exp_and_vector_reductions(void **state)
{
	enum { N = 4000, R = 37, D = 301 };
	static float x[N], y[N], sm_in[R * D], sm_out[2][R * D], red[3][2 * R];
	static const float edge[] = {89.0f, 1000.0f, INFINITY, -104.0f, -1000.0f, -INFINITY, NAN,
		0.0f, -0.0f, 88.7f, -87.0f, -88.0f, -100.0f, -103.9f,
		/* 2^128 and 2^-126 (n = 128, -126) */
		88.38f, 88.5f, 88.72f, 88.7228f, -87.3f, -87.34f, -87.4f};
	int64_t sx[1] = {N}, ss[2] = {R, D}, sr[1] = {R};
	DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Y = {y, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor SI = {sm_in, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ss, NULL, 0};
	DLTensor SO[2], RO[3][2];
	const DLTensor *in[1] = {&X}, *sin_[1] = {&SI};
	static const char *const red_opts[3] = {"target=interp", "vecreduce=off", ""};
	uint64_t r = 5;
	int64_t worst = 0;
	int i, j, e = (int)(sizeof(edge) / sizeof(edge[0])), sub = 0;
	char *text;
	tc_module *m;
	(void)state;
	for (i = 0; i < N; i++)
		x[i] = i < e ? edge[i] : (float)(tu_rand_unit(&r) * 193.0 - 104.0);
	m = tc_module_parse(ctx, "def k(float(N) X) -> (Y) { Y(i) = exp(X(i)) }\n", "exp.tc");
	assert_non_null(m);
	run_with(m, in, 1, &Y, "", NULL);
	assert_true(isinf(y[0]) && y[0] > 0 && isinf(y[1]) && isinf(y[2]));
	assert_true(y[3] == 0 && y[4] == 0 && y[5] == 0);
	assert_true(isnan(y[6]));
	assert_true(y[7] == 1 && y[8] == 1);
	for (i = 9; i < N; i++) {
		int64_t d = ulps(y[i], expf(x[i]));
		sub += y[i] > 0 && y[i] < FLT_MIN;
		if (d > worst)
			worst = d;
	}
	print_message("inline exp: worst %lld ulp over %d arguments in [-104, 89], %d subnormal\n",
		(long long)worst, N - 9, sub);
	assert_true(worst <= 2);
	assert_true(sub > 100);
	text = stage_of(m, in, 1, "", "llvm");
	assert_null(strstr(text, "@expf"));
	assert_non_null(strstr(text, "<16 x float>"));
	tc_string_free(text);
	tc_module_free(m);

	for (i = 0; i < R * D; i++)
		sm_in[i] = (float)(tu_rand_unit(&r) * 20 - 10);
	m = tc_module_parse(ctx, "def k(float(N,D) I) -> (O) {\n"
				 "  mx(n) max=! I(n,r_d)\n"
				 "  sm(n) +=! exp(I(n,r_d) - mx(n))\n"
				 "  O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n}\n", "softmax.tc");
	assert_non_null(m);
	for (i = 0; i < 2; i++) {
		SO[i] = (DLTensor){sm_out[i], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ss, NULL, 0};
		run_with(m, sin_, 1, &SO[i], i ? "target=interp" : "", NULL);
	}
	for (i = 0; i < R * D; i++)
		assert_true(fabsf(sm_out[0][i] - sm_out[1][i]) <= 1e-5f * sm_out[1][i] + 1e-30f);
	text = stage_of(m, sin_, 1, "", "llvm");
	assert_null(strstr(text, "@llvm.exp"));
	assert_null(strstr(text, "@expf"));
	assert_non_null(strstr(text, "@llvm.vector.reduce.fmax"));
	assert_non_null(strstr(text, "reassoc float @llvm.vector.reduce.fadd"));
	tc_string_free(text);
	text = stage_of(m, sin_, 1, "fastmath=on", "llvm");
	assert_non_null(strstr(text, "nsz arcp <16 x float>"));
	tc_string_free(text);
	tc_module_free(m);

	/* the max exactly (a NaN in a row and one at a row's start ignored),
	 * the sum in the interpreter's order with vecreduce=off and within
	 * a reordered sum's tolerance with it on */
	sm_in[5] = NAN;
	sm_in[D] = NAN;
	m = tc_module_parse(ctx, "def k(float(N,D) I) -> (mx, sm) {\n"
				 "  mx(n) max=! I(n,r_d)\n"
				 "  sm(n) +=! I(n,r_d) * 3\n}\n", "red.tc");
	assert_non_null(m);
	for (i = 0; i < 3; i++) {
		for (j = 0; j < 2; j++)
			RO[i][j] = (DLTensor){red[i] + j * R, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sr,
				NULL, 0};
		run_with_outs(m, sin_, 1, RO[i], 2, red_opts[i], NULL);
	}
	for (i = 0; i < R; i++) {
		assert_false(isnan(red[0][i]));
		assert_memory_equal(&red[1][i], &red[0][i], sizeof(float));
		assert_memory_equal(&red[2][i], &red[0][i], sizeof(float));
		if (i > 1) {
			assert_memory_equal(&red[1][R + i], &red[0][R + i], sizeof(float));
			assert_true(fabsf(red[2][R + i] - red[0][R + i]) <= 1e-6f * 3 * 10 * D);
		}
	}
	tc_module_free(m);
}

/* The fusion strategies give softmax's six statements (two inits, two
 * reductions, the shared exponentials, the division: see ir/share.c) one
 * loop nest (max, and auto, which keeps it), several nests that are
 * all parallel (preserve3coincident) or one nest per statement (min), and
 * the same results: the division's exp and quotient are computed the same
 * way in every schedule. */
static void fusion_strategies(void **state)
{
	enum { N = 23, D = 37 };
	static float in_[N * D], out_[4][N * D];
	int64_t si[2] = {N, D};
	DLTensor I = {in_, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, si, NULL, 0};
	const DLTensor *in[1] = {&I};
	static const char *const kinds[] = {"max", "preserve3coincident", "min", "auto"};
	int nests[4], i;
	uint64_t r = 99;
	tc_module *m;
	(void)state;
	for (i = 0; i < N * D; i++, r = r * 6364136223846793005ULL + 1)
		in_[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 8 - 4);
	m = tc_module_parse(ctx, "def softmax(float(N,D) I) -> (O) {\n"
				 "  mx(n) max=! I(n,r_d)\n"
				 "  sm(n) +=! exp(I(n,r_d) - mx(n))\n"
				 "  O(n,d) = exp(I(n,d) - mx(n)) / sm(n)\n}\n", "sm.tc");
	assert_non_null(m);
	for (int k = 0; k < 4; k++) {
		DLTensor O = {out_[k], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, si, NULL, 0};
		DLTensor *out[1] = {&O};
		tc_options *o = tc_options_new();
		tc_kernel *kr;
		char *text;
		const char *at;
		assert_int_equal(tc_options_set(o, "fusion", kinds[k], ctx), 0);
		/* every nest marked, however small (nests are counted by mark) */
		assert_int_equal(tc_options_set(o, "parallel", "on", ctx), 0);
		/* sums in one order, so that the schedules' results compare bit
		 * for bit (vectorised sums split differently per schedule) */
		assert_int_equal(tc_options_set(o, "vecreduce", "off", ctx), 0);
		kr = tc_compile(m, "softmax", in, 1, o);
		if (!kr)
			fail_msg("%s", tc_context_error(ctx));
		for (i = 0; i < N * D; i++)
			out_[k][i] = NAN;
		assert_int_equal(tc_kernel_run(kr, in, 1, out, 1), 0);
		text = tc_kernel_emit(kr, "ast");
		assert_non_null(text);
		for (nests[k] = 0, at = text; (at = strstr(at, "// tc_parallel")); at++)
			nests[k]++;
		tc_string_free(text);
		tc_kernel_free(kr);
		tc_options_free(o);
	}
	/* preserve3coincident fuses as far as no parallel loop is lost: here
	 * (statements of at most two dimensions, scheduled a component at a
	 * time, see polyhedral/poly.c) nothing is, so as far as max */
	assert_int_equal(nests[0], 1);
	assert_true(nests[1] >= 1 && nests[1] < 6);
	assert_int_equal(nests[2], 6);
	/* auto keeps max's nest: fusing cost no parallel loop and skewed none */
	assert_int_equal(nests[3], 1);
	for (i = 0; i < N * D; i++) {
		assert_false(isnan(out_[0][i]));
		assert_true(out_[0][i] == out_[1][i] && out_[0][i] == out_[2][i] &&
			out_[0][i] == out_[3][i]);
	}
	tc_module_free(m);
}


/* Rows 0 .. nv-1 of y (stride floats apart), n elements each: no NaN in
 * row 0 (the interpreter's), every other row within 1e-5 (relative, plus
 * 1e-5 absolute) of it. */
static void expect_rows_near(const float *y, size_t stride, size_t n, int nv)
{
	size_t i;
	int v;
	for (i = 0; i < n; i++) {
		assert_false(isnan(y[i]));
		for (v = 1; v < nv; v++)
			assert_true(fabsf(y[v * stride + i] - y[i]) <= 1e-5f * (1 + fabsf(y[i])));
	}
}

/* Fusion auto: a statement that a fused band walks in steps of 2 (the
 * arg-max pass of a 2 x 2 max-pool's gradient, fused by isl into the loops
 * over the input's elements as S0(h / 2) under a test h % 2 == 0) is a
 * cost, so the nest is scheduled again: the two statements in nests of
 * their own, no test on the loop iterators left (max: the fused nest, as
 * isl made it).  Both agree bit for bit with the interpreter on random
 * data (the maximum's gradient goes to one element per window). */
static void fusion_auto_splits_strided_statements(void **state)
{
	enum { N = 2, C = 3, H = 6, W = 10 };
	static float x[N * C * H * W], o[N * C * (H / 2) * (W / 2)], d[N * C * (H / 2) * (W / 2)];
	static float g[3][N * C * H * W];
	static const char *const opts[3] = {"", "fusion=max", "target=interp"};
	int64_t sx[4] = {N, C, H, W}, so[4] = {N, C, H / 2, W / 2};
	DLTensor X = {x, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor O = {o, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, so, NULL, 0};
	DLTensor D = {d, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, so, NULL, 0};
	const DLTensor *in[3] = {&X, &O, &D};
	uint64_t r = 29;
	char *text;
	tc_module *m;
	int i, v;
	(void)state;
	for (i = 0; i < N * C * H * W; i++)
		x[i] = (float)tu_rand_unit(&r) * 2 - 1;
	for (i = 0; i < N * C * (H / 2) * (W / 2); i++) {
		int n = i / (C * (H / 2) * (W / 2)), c = i / ((H / 2) * (W / 2)) % C;
		int h = i / (W / 2) % (H / 2), w = i % (W / 2), kh, kw;
		float mx = -INFINITY;
		for (kh = 0; kh < 2; kh++)
			for (kw = 0; kw < 2; kw++)
				mx = fmaxf(mx, x[((n * C + c) * H + 2 * h + kh) * W + 2 * w + kw]);
		o[i] = mx;
		d[i] = (float)tu_rand_unit(&r) + 0.5f;
	}
	m = tc_module_parse(ctx,
		"def k(float(N,C,H,W) I, float(N,C,H / 2,W / 2) O, float(N,C,H / 2,W / 2) d_O) -> (float(N,C,H,W) d_I) {\n"
		"  argmax_O(n,c,h,w) min=! I(n, c, (2 * h) + kh, (2 * w) + kw) == O(n, c, h, w) ?"
		" (int64(kh) * 2) + int64(kw) : 9223372036854775807 where kh in 0:2, kw in 0:2\n"
		"  d_I(n,c,x,x1) +=! (((x - (2 * h)) >= 0) && ((x - (2 * h)) < 2)) && "
		"(((x1 - (2 * w)) >= 0) && ((x1 - (2 * w)) < 2)) ? "
		"(((int64(x - (2 * h)) * 2) + int64(x1 - (2 * w))) == argmax_O(n, c, h, w) ? "
		"d_O(n, c, h, w) : 0.0) : 0.0 where h in 0:H / 2, w in 0:W / 2\n}\n", "mpg.tc");
	assert_non_null(m);
	text = stage_of(m, in, 3, "", "ast");
	assert_null(strstr(text, "% 2 == 0"));
	tc_string_free(text);
	text = stage_of(m, in, 3, "fusion=max", "ast");
	assert_non_null(strstr(text, "% 2 == 0"));
	tc_string_free(text);
	for (v = 0; v < 3; v++) {
		DLTensor G = {g[v], {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sx, NULL, 0};
		run_with(m, in, 3, &G, opts[v], NULL);
	}
	for (i = 0; i < N * C * H * W; i++) {
		assert_false(isnan(g[2][i]));
		assert_memory_equal(&g[0][i], &g[2][i], sizeof(float));
		assert_memory_equal(&g[1][i], &g[2][i], sizeof(float));
	}
	tc_module_free(m);
}

/* Fusion auto (the default): isl's clustering fuses the seven statements
 * of a small network's backward pass into nests whose loops walk b + h and
 * h + k, none of them parallel; auto schedules that nest's statements
 * again (preserve3coincident), so that no loop is skewed and every nest
 * with loops starts with a parallel one, and leaves the nests fusion cost
 * nothing alone.  The four outputs agree with the interpreter's on random
 * data under max and auto (int64 labels in range). */
static void fusion_auto_refits_costly_nests(void **state)
{
	enum { B = 32, I = 40, H = 24, K = 10 };
	static float x[B * I], hd[B * H], pr[B * K], w2[H * K];
	static float outs[3][I * H + H + H * K + K];
	static int64_t y[B];
	int64_t sx[2] = {B, I}, sh[2] = {B, H}, sp[2] = {B, K}, sy[1] = {B}, sw[2] = {H, K};
	int64_t s1[2] = {I, H}, s2[1] = {H}, s3[2] = {H, K}, s4[1] = {K};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Hd = {hd, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh, NULL, 0};
	DLTensor P = {pr, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sp, NULL, 0};
	DLTensor Y = {y, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, sy, NULL, 0};
	DLTensor W2 = {w2, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0};
	const DLTensor *in[5] = {&X, &Hd, &P, &Y, &W2};
	static const char *const opts[] = {"target=interp", "fusion=max", "fusion=auto"};
	const size_t n = sizeof(outs[0]) / sizeof(float);
	uint64_t r = 7;
	size_t i;
	int v;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(x, sizeof(x) / sizeof(float), &r, -1, 1);
	fill_uniform(hd, sizeof(hd) / sizeof(float), &r, -1, 1);
	fill_uniform(pr, sizeof(pr) / sizeof(float), &r, 0, 1);
	fill_uniform(w2, sizeof(w2) / sizeof(float), &r, -1, 1);
	for (i = 0; i < B; i++, r = r * 6364136223846793005ULL + 1)
		y[i] = (int64_t)((r >> 33) % K);
	m = tc_module_parse(ctx, TU_MLP_BWD, "bwd.tc");
	assert_non_null(m);
	/* the pathology auto repairs: max's loops over b + h and h + k */
	text = stage_of(m, in, 5, "fusion=max", "schedule");
	assert_non_null(strstr(text, "(h + k)"));
	tc_string_free(text);
	text = stage_of(m, in, 5, "fusion=auto", "schedule");
	assert_null(strstr(text, "(h + k)"));
	assert_null(strstr(text, "(b + h)"));
	tc_string_free(text);
	/* with parallel=on, the nests auto scheduled again start with parallel
	 * loops (dL's, dW2's, dH's), where max's fused nest had none */
	text = stage_of(m, in, 5, "fusion=max parallel=on", "ast");
	v = count_lines_with(text, "// tc_parallel", "");
	tc_string_free(text);
	text = stage_of(m, in, 5, "fusion=auto parallel=on", "ast");
	assert_true(count_lines_with(text, "// tc_parallel", "") >= v + 3);
	tc_string_free(text);
	for (v = 0; v < 3; v++) {
		DLTensor o[4] = {
			{outs[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s1, NULL, 0},
			{outs[v] + I * H, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, s2, NULL, 0},
			{outs[v] + I * H + H, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s3, NULL, 0},
			{outs[v] + I * H + H + H * K, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, s4, NULL, 0},
		};
		run_with_outs(m, in, 5, o, 4, opts[v], NULL);
	}
	expect_rows_near(outs[0], n, n, 3);
	tc_module_free(m);
}

/* The parallel loops of C stage text whose nest's first assignment writes
 * no packing copy (a tensor named *_packed). */
static int parallel_nests_but_copies(const char *text)
{
	const char *at = text;
	int n = 0;
	while ((at = strstr(at, "// tc_parallel"))) {
		const char *eq = strstr(at, "] = "), *lhs;
		at += strlen("// tc_parallel");
		if (!eq)
			break;
		for (lhs = eq; lhs > at && lhs[-1] != '\n'; lhs--)
			;
		lhs = strstr(lhs, "_packed[");
		n += !lhs || lhs > eq;
	}
	return n;
}

/* The three-factor Kronecker product as three chained contractions, its
 * inputs w0, w1, w2 and x (of n0 ... bytes) filled with random values. */
static tc_module *kron_module(float *w0, size_t n0, float *w1, size_t n1, float *w2, size_t n2,
	float *x, size_t nx, uint64_t *r)
{
	tc_module *m;
	fill_uniform(w0, n0 / sizeof(float), r, -1, 1);
	fill_uniform(w1, n1 / sizeof(float), r, -1, 1);
	fill_uniform(w2, n2 / sizeof(float), r, -1, 1);
	fill_uniform(x, nx / sizeof(float), r, -1, 1);
	m = tc_module_parse(ctx,
		"def k(float(D0,N0) W0, float(D1,N1) W1, float(D2,N2) W2, float(M,N0,N1,N2) X)"
		" -> (Y) {\n"
		"  XW0(m,n1,n2,d0) +=! X(m,r_n0,n1,n2) * W0(d0,r_n0)\n"
		"  XW1(m,n2,d0,d1) +=! XW0(m,r_n1,n2,d0) * W1(d1,r_n1)\n"
		"  Y(m,d0,d1,d2) +=! XW1(m,r_n2,d0,d1) * W2(d2,r_n2)\n}\n", "kron.tc");
	assert_non_null(m);
	return m;
}

/* Fusion auto and a chain of contractions (the three-factor Kronecker
 * product): isl's clustering puts all three under one loop over m, in
 * register tiles, which fusion's measure counts as chained
 * (contractions reuse their operands from registers and cache; sharing a
 * loop with the next contraction gains little and ran 1.7x slower at
 * 256 x 16^3), so auto schedules them again, one nest each.  The results
 * agree with the interpreter's under max and auto, on random data. */
static void fusion_auto_splits_chained_contractions(void **state)
{
	enum { M = 3, N0 = 5, N1 = 6, N2 = 7, D0 = 16, D1 = 17, D2 = 18 };
	static float w0[D0 * N0], w1[D1 * N1], w2[D2 * N2], x[M * N0 * N1 * N2];
	static float outs[3][M * D0 * D1 * D2];
	int64_t s0[2] = {D0, N0}, s1[2] = {D1, N1}, s2[2] = {D2, N2}, sx[4] = {M, N0, N1, N2};
	int64_t sy[4] = {M, D0, D1, D2};
	DLTensor W0 = {w0, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s0, NULL, 0};
	DLTensor W1 = {w1, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s1, NULL, 0};
	DLTensor W2 = {w2, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
	DLTensor X = {x, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sx, NULL, 0};
	const DLTensor *in[4] = {&W0, &W1, &W2, &X};
	static const char *const opts[] = {"target=interp", "fusion=max", "fusion=auto"};
	const size_t n = sizeof(outs[0]) / sizeof(float);
	uint64_t r = 19;
	int v;
	char *text;
	tc_module *m;
	(void)state;
	m = kron_module(w0, sizeof(w0), w1, sizeof(w1), w2, sizeof(w2), x, sizeof(x), &r);
	/* max: one nest (one parallel loop over m); auto: a nest per contraction
	 * (the packing copies of W1 and W2, 17 and 18 columns in two
	 * transposing tiles of 16, are parallel loops of their own under
	 * parallel=on, not counted) */
	text = stage_of(m, in, 4, "fusion=max parallel=on", "c");
	assert_int_equal(parallel_nests_but_copies(text), 1);
	tc_string_free(text);
	text = stage_of(m, in, 4, "fusion=auto parallel=on", "c");
	assert_int_equal(parallel_nests_but_copies(text), 3);
	tc_string_free(text);
	text = stage_of(m, in, 4, "fusion=auto parallel=on mask=on", "ast");
	/* the second and third in register tiles; the first (rows of 16 from 5
	 * terms) keeps its operand panel in registers instead (order.c); with
	 * mask=on, so that no host takes the rows of 17 and 18 whole (a mark
	 * above the init and one above the sums: regtile.c, whole_row) */
	assert_int_equal(count_lines_with(text, "// tc_regtile", ""), 2);
	tc_string_free(text);
	for (v = 0; v < 3; v++) {
		DLTensor Y = {outs[v], {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sy, NULL, 0};
		run_with(m, in, 4, &Y, opts[v], NULL);
	}
	expect_rows_near(outs[0], n, n, 3);
	tc_module_free(m);
	/* row reductions over a batch of rows (softmax's max and sum, two
	 * left-hand indices each) read every element once: not chained, so
	 * auto keeps their fused row loop (counted as chained, they were split
	 * into 4 parallel nests; min makes 6) */
	m = tc_module_parse(ctx, "def k(float(Z,S,T) X) -> (P) {\n"
		"  mx(z,i) max=! X(z,i,r_j)\n  sm(z,i) +=! exp(X(z,i,r_j) - mx(z,i))\n"
		"  P(z,i,j) = exp(X(z,i,j) - mx(z,i)) / sm(z,i)\n}\n", "sm.tc");
	assert_non_null(m);
	{
		int64_t sxs[3] = {M, N1, N0 * N2}; /* x's elements */
		DLTensor Xs = {x, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sxs, NULL, 0};
		const DLTensor *ins[1] = {&Xs};
		text = stage_of(m, ins, 1, "fusion=auto parallel=on", "ast");
		assert_true(count_lines_with(text, "// tc_parallel", "") <= 3);
		tc_string_free(text);
		for (v = 0; v < 3; v++) {
			DLTensor Ps = {outs[v], {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sxs, NULL, 0};
			run_with(m, ins, 1, &Ps, opts[v], NULL);
		}
		expect_rows_near(outs[0], n, (size_t)(M * N1 * N0 * N2), 3);
	}
	tc_module_free(m);
}

/* Fusion auto and a chain of contractions whose operand panels the order
 * pass holds in registers (each factor sums at most a vector's lanes of
 * terms into rows of 16: polyhedral/band.c, tc_poly_panel_var): no
 * register tile, so not chained; auto keeps isl's one loop over m, whose
 * temporaries per m stay in L1 (at 256 x 16^3 0.91 ms against 1.36 as
 * three nests; docs/performance.md).  The same def with one factor of 17
 * rows (a register tile) is split as above.  The results agree with the
 * interpreter's on random data. */
static void fusion_auto_keeps_operand_panels_fused(void **state)
{
	enum { M = 3, N0 = 5, N1 = 6, N2 = 7, D = 16 };
	static float w0[D * N0], w1[D * N1], w2[D * N2], x[M * N0 * N1 * N2];
	static float outs[2][M * D * D * D];
	int64_t s0[2] = {D, N0}, s1[2] = {D, N1}, s2[2] = {D, N2}, sx[4] = {M, N0, N1, N2};
	int64_t sy[4] = {M, D, D, D};
	DLTensor W0 = {w0, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s0, NULL, 0};
	DLTensor W1 = {w1, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s1, NULL, 0};
	DLTensor W2 = {w2, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
	DLTensor X = {x, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sx, NULL, 0};
	const DLTensor *in[4] = {&W0, &W1, &W2, &X};
	static const char *const opts[] = {"target=interp", "fusion=auto"};
	const size_t n = sizeof(outs[0]) / sizeof(float);
	uint64_t r = 23;
	int v;
	char *text;
	tc_module *m;
	(void)state;
	m = kron_module(w0, sizeof(w0), w1, sizeof(w1), w2, sizeof(w2), x, sizeof(x), &r);
	text = stage_of(m, in, 4, "fusion=auto parallel=on", "c");
	assert_int_equal(parallel_nests_but_copies(text), 1);
	tc_string_free(text);
	text = stage_of(m, in, 4, "fusion=auto parallel=on", "ast");
	assert_int_equal(count_lines_with(text, "// tc_regtile", ""), 0);
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor Y = {outs[v], {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sy, NULL, 0};
		run_with(m, in, 4, &Y, opts[v], NULL);
	}
	expect_rows_near(outs[0], n, n, 2);
	tc_module_free(m);
}

/* parallel=auto and register tiles (polyhedral/parallel.c,
 * too_small_to_share): a tile's instances count a vector's lanes' worth
 * each (vector code), so the weight gradient 128 x 128 x 10 (163840
 * instances, 10240 vector steps) runs on one thread, and 128 x 1024 x 10
 * still shares; fully connected 128 x 128 x 10 as dot products (no
 * register tile) shares; and a small tiled nest after a nest that shares
 * shares too (the pool runs anyway).  The unshared weight gradient's
 * results are the interpreter's. */
static void parallel_auto_counts_register_tiles_by_lanes(void **state)
{
	enum { B = 128, I = 128, H = 10 };
	static float x[B * 1024], dh[B * H], outs[2][1024 * H];
	int64_t sx[2] = {B, I}, sh[2] = {B, H}, sw[2] = {I, H}, sx2[2] = {B, 1024};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor X2 = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx2, NULL, 0};
	DLTensor dH = {dh, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh, NULL, 0};
	const DLTensor *in[2] = {&X, &dH}, *in2[2] = {&X2, &dH};
	static const char *const opts[2] = {"threads=2", "target=interp"};
	uint64_t r = 29;
	tc_module *m;
	char *text;
	int v;
	(void)state;
	fill_uniform(x, sizeof(x) / sizeof(float), &r, -1, 1);
	fill_uniform(dh, sizeof(dh) / sizeof(float), &r, -1, 1);
	m = tc_module_parse(ctx, "def k(float(B,I) X, float(B,H) dH) -> (dW) {\n"
		"  dW(i,h) +=! X(r_b,i) * dH(r_b,h)\n}\n", "wg.tc");
	assert_non_null(m);
	text = stage_of(m, in, 2, "threads=2", "ast");
	assert_int_equal(count_lines_with(text, "// tc_regtile", ""), 1);
	assert_int_equal(count_lines_with(text, "// tc_parallel", ""), 0);
	tc_string_free(text);
	text = stage_of(m, in2, 2, "threads=2", "ast");
	assert_int_equal(count_lines_with(text, "// tc_parallel", ""), 1);
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor W = {outs[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0};
		run_with(m, in, 2, &W, opts[v], NULL);
	}
	expect_rows_near(outs[0], 1024 * H, (size_t)(I * H), 2);
	tc_module_free(m);
	/* the same instances as dot products: no tile, shared */
	m = tc_module_parse(ctx, "def k(float(B,I) X, float(H,I) W) -> (T) {\n"
		"  T(b,h) +=! X(b,r_i) * W(h,r_i)\n}\n", "fc.tc");
	assert_non_null(m);
	{
		int64_t sw2[2] = {H, I};
		DLTensor Wt = {dh, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw2, NULL, 0};
		const DLTensor *inf[2] = {&X, &Wt};
		text = stage_of(m, inf, 2, "threads=2", "ast");
		assert_int_equal(count_lines_with(text, "// tc_regtile", ""), 0);
		assert_int_equal(count_lines_with(text, "// tc_parallel", ""), 1);
		tc_string_free(text);
	}
	tc_module_free(m);
	/* after a nest that shares: shared */
	m = tc_module_parse(ctx, "def k(float(B,I) X, float(I,G) W1, float(G,H) W2) -> (L) {\n"
		"  Hd(b,g) +=! X(b,r_i) * W1(r_i,g)\n"
		"  L(b,h) +=! Hd(b,r_g) * W2(r_g,h)\n}\n", "two.tc");
	assert_non_null(m);
	{
		static float w1[1024 * 128], w2[128 * H];
		int64_t s1[2] = {1024, 128}, s2[2] = {128, H};
		DLTensor W1 = {w1, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s1, NULL, 0};
		DLTensor W2 = {w2, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0};
		const DLTensor *in3[3] = {&X2, &W1, &W2};
		text = stage_of(m, in3, 3, "threads=2", "ast");
		assert_true(count_lines_with(text, "// tc_regtile", "") >= 2);
		assert_int_equal(count_lines_with(text, "// tc_parallel", ""), 2);
		tc_string_free(text);
	}
	tc_module_free(m);
}

/* A parallel mark above the weight gradient's register tiles: its 51
 * rows are 4 register tiles of 12 and a tile of 3 (51 has no even split
 * in 4 or 5 tiles: polyhedral/regtile.c, even_rows).  When isl isolated the
 * full tiles, the marked loop was a block of two pieces, whose loop piece
 * runs on the pool (codegen/llvm_loop.c, block_node), where the whole
 * block ran on the calling thread; now the tile's point loops are built
 * apart (polyhedral/ast.c) and the marked loop steps over every tile, full
 * or partial, on the pool (an outlined body).  The results are the
 * interpreter's. */
static void parallel_mark_above_a_block(void **state)
{
	enum { B = 16, I = 51, H = 24, K = 10 };
	static float x[B * I], hd[B * H], dl[B * K], w2[H * K], outs[2][I * H + B * H];
	int64_t sx[2] = {B, I}, sh[2] = {B, H}, sl[2] = {B, K}, sw[2] = {H, K};
	int64_t s1[2] = {I, H}, s2[2] = {B, H};
	DLTensor X = {x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor Hd = {hd, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh, NULL, 0};
	DLTensor dL = {dl, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sl, NULL, 0};
	DLTensor W2 = {w2, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0};
	const DLTensor *in[4] = {&X, &Hd, &dL, &W2};
	/* mask=on: no host takes the rows of 24 whole (regtile.c, whole_row) */
	static const char *const opts[] = {"target=interp", "threads=2 parallel=on mask=on"};
	uint64_t r = 11;
	int v;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(x, sizeof(x) / sizeof(float), &r, -1, 1);
	fill_uniform(hd, sizeof(hd) / sizeof(float), &r, -1, 1);
	fill_uniform(dl, sizeof(dl) / sizeof(float), &r, -1, 1);
	fill_uniform(w2, sizeof(w2) / sizeof(float), &r, -1, 1);
	m = tc_module_parse(ctx,
		"def k(float(B,I) X, float(B,H) Hd, float(B,K) dL, float(H,K) W2) -> (dW1, dH) {\n"
		"  dH(b,h) +=! dL(b,k) * W2(h,k)\n"
		"  dH(b,h) = Hd(b,h) > 0 ? dH(b,h) : 0.0\n"
		"  dW1(i,h) +=! X(b,i) * dH(b,h)\n}\n", "dw1.tc");
	assert_non_null(m);
	text = stage_of(m, in, 4, opts[1], "ast");
	/* the tile loops run over the 5 tiles' indices, origins 12 * c0 */
	assert_non_null(strstr(text, "// tc_parallel\n  for (int c0 = 0; c0 <= 4; c0 += 1)"));
	assert_non_null(strstr(text, "S3_init(12 * c0, 16 * c2);"));
	tc_string_free(text);
	text = stage_of(m, in, 4, opts[1], "llvm");
	assert_non_null(strstr(text, "define internal void @tc_k.par0("));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor o[2] = {
			{outs[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s1, NULL, 0},
			{outs[v] + I * H, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, s2, NULL, 0},
		};
		run_with_outs(m, in, 4, o, 2, opts[v], NULL);
	}
	expect_rows_near(outs[0], sizeof(outs[0]) / sizeof(float), sizeof(outs[0]) / sizeof(float), 2);
	tc_module_free(m);
}

/* A parallel band whose first member has few values (a weight gradient's
 * 64 input channels in 11 register tiles of 6 rows) takes the next
 * coincident members with it at two threads, one loop over all 99 tiles
 * (polyhedral/parallel.c, balance_members: 11 tiles left one thread 6
 * of them), and keeps the 11 at one thread.  The results at both are the
 * interpreter's. */
static void parallel_loop_over_balanced_members(void **state)
{
	enum { C = 64, F = 64, H = 12, OH = 10 };
	static float x[C * H * H], d[F * OH * OH], outs[3][F * C * 9];
	int64_t sx[4] = {1, C, H, H}, sd[4] = {1, F, OH, OH}, so[4] = {F, C, 3, 3};
	DLTensor X = {x, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor D = {d, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sd, NULL, 0};
	const DLTensor *in[2] = {&X, &D};
	static const char *const opts[] = {"target=interp", "threads=2 parallel=on",
		"threads=1 parallel=on"};
	uint64_t r = 7;
	int v;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(x, C * H * H, &r, -1, 1);
	fill_uniform(d, F * OH * OH, &r, -1, 1);
	m = tc_module_parse(ctx,
		"def k(float(N,C,H,W) I, float(N,F,OH,OW) d_O) -> (float(F,C,3,3) d_W1) {\n"
		"  d_W1(f,c,kh,kw) +=! d_O(n,f,h,w) * I(n,c,h + kh,w + kw) where kh in 0:3, kw in 0:3\n"
		"}\n", "dw.tc");
	assert_non_null(m);
	text = stage_of(m, in, 2, opts[1], "ast");
	assert_non_null(strstr(text, "// tc_parallel\n  for (int c0 = 0; c0 <= 98; c0 += 1)"));
	tc_string_free(text);
	text = stage_of(m, in, 2, opts[2], "ast");
	assert_null(strstr(text, "c0 <= 98"));
	tc_string_free(text);
	for (v = 0; v < 3; v++) {
		DLTensor O = {outs[v], {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, so, NULL, 0};
		memset(outs[v], 0xff, sizeof(outs[v])); /* NaN: poisoned */
		run_with_outs(m, in, 2, &O, 1, opts[v], NULL);
	}
	expect_rows_near(outs[0], sizeof(outs[0]) / sizeof(float), F * C * 9, 3);
	tc_module_free(m);
}

/* Short rows as one loop (polyhedral/collapse.c): a bias gradient's sum
 * over rows of 54 and an update of rows of 10 each run one innermost
 * loop over the whole plane (2916 and 1280 elements), which the
 * vectoriser walks with plain vector loads and stores (no gathers or
 * scatters: it had vectorised across rows, 54 and 10 elements apart);
 * a read of the rows transposed keeps its two loops.  The results are
 * the interpreter's (the sum to rounding, the update bit for bit). */
static void short_rows_as_one_loop(void **state)
{
	enum { N = 2, F = 8, H = 54, R = 128, K = 10 };
	static float d[N * F * H * H], db[2][F], w[R * K], g[R * K], wn[2][R * K];
	static float x[F * H * H], y[2][F * H * H];
	int64_t sd[4] = {N, F, H, H}, sb[1] = {F}, sw[2] = {R, K}, sx[3] = {F, H, H};
	DLTensor D = {d, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, sd, NULL, 0};
	DLTensor Wt = {w, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0};
	DLTensor G = {g, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0};
	DLTensor X = {x, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sx, NULL, 0};
	const DLTensor *in1[1] = {&D}, *in2[2] = {&Wt, &G}, *in3[1] = {&X};
	static const char *const opts[] = {"target=interp", ""};
	uint64_t r = 11;
	int v;
	size_t i;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(d, N * F * H * H, &r, -1, 1);
	fill_uniform(w, R * K, &r, -1, 1);
	fill_uniform(g, R * K, &r, -1, 1);
	fill_uniform(x, F * H * H, &r, -1, 1);
	m = tc_module_parse(ctx, "def k(float(N,F,H,W) d_O) -> (d_B) {\n"
		"  d_B(f) +=! d_O(n,f,h,w)\n}\n", "db.tc");
	assert_non_null(m);
	text = stage_of(m, in1, 1, "", "ast");
	assert_non_null(strstr(text, "c2 <= 2915"));
	tc_string_free(text);
	text = stage_of(m, in1, 1, "", "asm");
	assert_null(strstr(text, "gather"));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor B = {db[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sb, NULL, 0};
		memset(db[v], 0xff, sizeof(db[v])); /* NaN: poisoned */
		run_with(m, in1, 1, &B, opts[v], NULL);
	}
	for (i = 0; i < F; i++)
		assert_true(fabsf(db[1][i] - db[0][i]) <= 1e-5f * N * H * H);
	tc_module_free(m);
	m = tc_module_parse(ctx, "def k(float(R,K) W, float(R,K) dW) -> (Wn) {\n"
		"  Wn(r,k) = W(r,k) - 0.01 * dW(r,k)\n}\n", "sgd.tc");
	assert_non_null(m);
	text = stage_of(m, in2, 2, "", "ast");
	assert_non_null(strstr(text, "c0 <= 1279"));
	tc_string_free(text);
	text = stage_of(m, in2, 2, "", "asm");
	assert_null(strstr(text, "scatter"));
	assert_null(strstr(text, "gather"));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor O = {wn[v], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sw, NULL, 0};
		memset(wn[v], 0xff, sizeof(wn[v]));
		run_with(m, in2, 2, &O, opts[v], NULL);
	}
	assert_memory_equal(wn[0], wn[1], sizeof(wn[0]));
	tc_module_free(m);
	/* the rows read transposed: h and w are no row of X's, two loops */
	m = tc_module_parse(ctx, "def k(float(F,H,W) X) -> (Y) {\n"
		"  Y(f,h,w) = X(f,w,h) * 2\n}\n", "t.tc");
	assert_non_null(m);
	text = stage_of(m, in3, 1, "", "ast");
	assert_null(strstr(text, "<= 2915"));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor O = {y[v], {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sx, NULL, 0};
		memset(y[v], 0xff, sizeof(y[v]));
		run_with(m, in3, 1, &O, opts[v], NULL);
	}
	assert_memory_equal(y[0], y[1], sizeof(y[0]));
	tc_module_free(m);
}

/* ?: with both sides safe to evaluate (reads in bounds at every point,
 * no call, no division by a non-constant) is a select: the pooling
 * backward's d_O read needs no masked load (it had 37, and its scalar
 * rests branched on which element is the maximum).  A side that would
 * read outside its tensor, or divide by a size that is 0, stays behind
 * its branch: no error, the interpreter's results. */
static void speculated_sides(void **state)
{
	enum { N = 4, H = 56, OH = 28 };
	static float x[N * H * H], o[N * OH * OH], d[N * OH * OH], y[2][N * H * H];
	static float a[64], q[2][64];
	int64_t sx[3] = {N, H, H}, so[3] = {N, OH, OH}, sa[1] = {37};
	DLTensor X = {x, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sx, NULL, 0};
	DLTensor O = {o, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, so, NULL, 0};
	DLTensor D = {d, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, so, NULL, 0};
	DLTensor A = {a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sa, NULL, 0};
	const DLTensor *in[3] = {&X, &O, &D}, *ina[1] = {&A};
	static const char *const opts[] = {"target=interp", ""};
	uint64_t r = 13;
	int v, n, i, j;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(x, N * H * H, &r, -1, 1);
	fill_uniform(d, N * OH * OH, &r, -1, 1);
	fill_uniform(a, 64, &r, -1, 1);
	for (n = 0; n < N; n++) /* O: each window's maximum, so that I == O holds */
		for (i = 0; i < OH; i++)
			for (j = 0; j < OH; j++) {
				float mx = -INFINITY;
				for (v = 0; v < 4; v++)
					mx = fmaxf(mx, x[(n * H + 2 * i + v / 2) * H + 2 * j + v % 2]);
				o[(n * OH + i) * OH + j] = mx;
			}
	m = tc_module_parse(ctx, "def k(float(N,H,W) I, float(N,OH,OW) O, float(N,OH,OW) d_O)"
		" -> (float(N,H,W) d_I) {\n"
		"  d_I(n,y,x) = I(n,y,x) == O(n,y/2,x/2) ? d_O(n,y/2,x/2) : 0.0\n}\n", "p.tc");
	assert_non_null(m);
	text = stage_of(m, in, 3, "", "llvm");
	assert_null(strstr(text, "masked.load"));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor Y = {y[v], {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sx, NULL, 0};
		memset(y[v], 0xff, sizeof(y[v])); /* NaN: poisoned */
		run_with(m, in, 3, &Y, opts[v], NULL);
	}
	assert_memory_equal(y[0], y[1], sizeof(y[0]));
	tc_module_free(m);
	/* the derived backward's arg-max (tcomp grad of a 2 x 2 max-pool): its
	 * condition the data decides, its selects marked !unpredictable (a
	 * conditional move, not a branch) and of int32 positions (x86 has no
	 * 8-bit conditional move) */
	m = tc_module_parse(ctx, "def k(float(N,H,W) I, float(N,OH,OW) O, float(N,OH,OW) d_O)"
		" -> (float(N,H,W) d_I) {\n"
		"  argmax_O(n,h,w) min=! I(n,2*h+kh,2*w+kw) == O(n,h,w) ? int32(kh) * 2 + int32(kw)"
		" : 2147483647 where kh in 0:2, kw in 0:2\n"
		"  d_I(n,x,x1) = (x / 2 < H / 2) && (x1 / 2 < W / 2) ? (int32(x % 2) * 2 + int32(x1 % 2)"
		" == argmax_O(n,x / 2,x1 / 2) ? d_O(n,x / 2,x1 / 2) : 0.0) : 0.0\n}\n", "a.tc");
	assert_non_null(m);
	text = stage_of(m, in, 3, "", "llvm");
	assert_non_null(strstr(text, "select i1 %"));
	assert_true(count_lines_with(text, "select i1", "!unpredictable") > 0);
	assert_int_equal(count_lines_with(text, "select i1", "i8 "), 0);
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor Y = {y[v], {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sx, NULL, 0};
		memset(y[v], 0xff, sizeof(y[v]));
		run_with(m, in, 3, &Y, opts[v], NULL);
	}
	assert_memory_equal(y[0], y[1], sizeof(y[0]));
	tc_module_free(m);
	/* sides that must not run: a read past the end, a division by N - 37 */
	m = tc_module_parse(ctx, "def k(float(N) A) -> (Q) {\n"
		"  Q(i) = i + 1 < N ? A(i + 1) : (N == 37 ? 2.0 : float(int32(i) / int32(N - 37)))"
		" where i in 0:N\n}\n", "s.tc");
	assert_non_null(m);
	for (v = 0; v < 2; v++) {
		int64_t sq[1] = {37};
		DLTensor Q = {q[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sq, NULL, 0};
		memset(q[v], 0xff, sizeof(q[v]));
		run_with(m, ina, 1, &Q, opts[v], NULL);
	}
	for (i = 0; i < 37; i++)
		assert_true(q[1][i] == (i + 1 < 37 ? a[i + 1] : 2.0f) && q[0][i] == q[1][i]);
	tc_module_free(m);
}

/* A parallel band whose first member takes one value (the batch of 4
 * heads in one cache tile of 4): isl's AST has no loop for it, and the
 * parallel pass marks the next member's loop instead (polyhedral/
 * parallel.c), where the nest had run on one thread.  The results are the
 * interpreter's. */
static void parallel_past_a_single_iteration(void **state)
{
	enum { Z = 4, S = 100, D = 16 };
	static float q[Z * S * D], k[Z * S * D], vv[Z * S * D], outs[2][Z * S * D];
	int64_t sh[3] = {Z, S, D};
	DLTensor Q = {q, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sh, NULL, 0};
	DLTensor K = {k, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sh, NULL, 0};
	DLTensor V = {vv, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sh, NULL, 0};
	const DLTensor *in[3] = {&Q, &K, &V};
	static const char *const opts[] = {"target=interp", "threads=2 parallel=on"};
	uint64_t r = 5;
	int v;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(q, Z * S * D, &r, -1, 1);
	fill_uniform(k, Z * S * D, &r, -1, 1);
	fill_uniform(vv, Z * S * D, &r, -1, 1);
	m = tc_module_parse(ctx,
		"def k(float(Z,S,D) Q, float(Z,S,D) K, float(Z,S,D) V) -> (O) {\n"
		"  Sc(z,i,j) +=! Q(z,i,r_d) * K(z,j,r_d)\n"
		"  Sc(z,i,j) = Sc(z,i,j) / sqrt(D)\n"
		"  mx(z,i) max=! Sc(z,i,r_j)\n"
		"  sm(z,i) +=! exp(Sc(z,i,r_j) - mx(z,i))\n"
		"  P(z,i,j) = exp(Sc(z,i,j) - mx(z,i)) / sm(z,i)\n"
		"  O(z,i,d) +=! P(z,i,r_j) * V(z,r_j,d)\n}\n", "att.tc");
	assert_non_null(m);
	text = stage_of(m, in, 3, opts[1], "ast");
	assert_non_null(strstr(text, "// tc_parallel\n  for (int c1 = 0;"));
	tc_string_free(text);
	for (v = 0; v < 2; v++) {
		DLTensor O = {outs[v], {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sh, NULL, 0};
		run_with_outs(m, in, 3, &O, 1, opts[v], NULL);
	}
	expect_rows_near(outs[0], sizeof(outs[0]) / sizeof(float), Z * S * D, 2);
	tc_module_free(m);
}

/* A column sum (the bias gradient, dB(h) +=! dH(r_b,h)) runs its
 * reduction's loop outermost and the columns inner; its band's first
 * member carries the sum, so no loop of it was parallel, and it ran on one
 * thread at any thread count.  With more than one thread the parallel pass
 * puts a loop over one chunk of columns per thread above it (whole
 * vectors: 203 columns at 2 threads are 112 + 91, at 3 threads 80 + 80 +
 * 43), marked parallel; each column still sums in the interpreter's order,
 * so the results are its own bit for bit.  (With vecreduce=off: else rows
 * this short go in partial sums over chunks of rows instead,
 * column_sum_alone_in_chunks.) */
static void parallel_chunks_of_a_column_sum(void **state)
{
	/* 1.9 MB of input: more than half of any L2, so no column register
	 * tile (column_register_tile below) but rows of 4 inside the chunks
	 * (column_sum_rows_unrolled), the init in a nest of its own */
	enum { B = 2301, H = 203 };
	static float dh[B * H], outs[4][H];
	static const char *const opts[] = {"target=interp", "threads=1",
		"threads=2 parallel=on vecreduce=off", "threads=3 parallel=on vecreduce=off"};
	int64_t sh[2] = {B, H}, so[1] = {H};
	DLTensor DH = {dh, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh, NULL, 0};
	const DLTensor *in[1] = {&DH};
	uint64_t r = 9;
	size_t v;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(dh, B * H, &r, -1, 1);
	m = tc_module_parse(ctx, "def k(float(B,H) dH) -> (dB) { dB(h) +=! dH(r_b,h) }\n", "bg.tc");
	assert_non_null(m);
	text = stage_of(m, in, 1, "threads=1", "ast");
	assert_null(strstr(text, "tc_parallel"));
	tc_string_free(text);
	text = stage_of(m, in, 1, opts[2], "ast");
	assert_non_null(strstr(text, "// tc_parallel\n  for (int c0 = 0; c0 <= 1; c0 += 1)\n"));
	assert_non_null(strstr(text, "c2 <= min(202, 112 * c0 + 111)"));
	tc_string_free(text);
	text = stage_of(m, in, 1, opts[3], "ast");
	assert_non_null(strstr(text, "// tc_parallel\n  for (int c0 = 0; c0 <= 2; c0 += 1)\n"));
	tc_string_free(text);
	for (v = 0; v < 4; v++) {
		DLTensor O = {outs[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, so, NULL, 0};
		run_with_outs(m, in, 1, &O, 1, opts[v], NULL);
		if (v && memcmp(outs[v], outs[0], sizeof(outs[0])))
			fail_msg("%s: the column sums differ from the interpreter's", opts[v]);
	}
	tc_module_free(m);
}

/* A column sum and a vector times a matrix whose input fits half the L2
 * (41 x 203 floats, 33 kB) keep a strip of 8 vectors of sums in registers
 * while the reduction runs (regtile.c, column_sizes); the results are the
 * interpreter's, bit for bit, at 1 to 3 threads, partial strip included. */
static void column_register_tile(void **state)
{
	enum { B = 41, H = 203 };
	static float dh[B * H], x[B], outs[4][H];
	static const char *const opts[] = {"target=interp", "threads=1", "threads=2 parallel=on",
		"threads=3 parallel=on"};
	static const char *const defs[] = {"def k(float(B,H) dH) -> (dB) { dB(h) +=! dH(r_b,h) }\n",
		"def k(float(B,H) dH, float(B) X) -> (dB) { dB(h) +=! X(r_b) * dH(r_b,h) }\n"};
	int64_t sh[2] = {B, H}, sx[1] = {B}, so[1] = {H};
	DLTensor DH = {dh, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh, NULL, 0};
	DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sx, NULL, 0};
	const DLTensor *in[2] = {&DH, &X};
	uint64_t r = 13;
	size_t v, d;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(dh, B * H, &r, -1, 1);
	fill_uniform(x, B, &r, -1, 1);
	for (d = 0; d < 2; d++) {
		m = tc_module_parse(ctx, defs[d], "col.tc");
		assert_non_null(m);
		text = stage_of(m, in, (int)d + 1, "threads=1", "ast");
		assert_non_null(strstr(text, "// tc_regtile"));
		assert_non_null(strstr(text, "for (int tc_p1 = 0; tc_p1 <= 127; tc_p1 += 1)"));
		tc_string_free(text);
		for (v = 0; v < 4; v++) {
			DLTensor O = {outs[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, so, NULL, 0};
			memset(outs[v], 0xff, sizeof(outs[v]));
			run_with_outs(m, in, (int)d + 1, &O, 1, opts[v], NULL);
			if (v && memcmp(outs[v], outs[0], sizeof(outs[0])))
				fail_msg("%s, %s: the sums differ from the interpreter's", defs[d],
					opts[v]);
		}
		tc_module_free(m);
	}
}

/* A column sum whose input is more than half of any L2 (1023 x 517
 * floats, 2.1 MB) runs its reduction's rows 4 at a time inside the loop
 * over the columns, unrolled (regtile.c, column_rows): a bias gradient, a
 * vector times a matrix (fmaf sums) and a sum over two reduced
 * dimensions, each with a partial tile of 3 rows; with unroll=off the
 * rows stay a plain nest.  The results are the interpreter's, bit for bit,
 * at 1 and 2 threads (vecreduce=off: chunks of columns, the rows inside
 * them; default: partial sums over chunks of rows). */
static void column_sum_rows_unrolled(void **state)
{
	enum { B = 1023, H = 517 };
	static float dh[B * H], x[B], outs[5][H];
	static const char *const opts[] = {"target=interp", "threads=1", "threads=1 unroll=off",
		"threads=2 parallel=on vecreduce=off", "threads=2 parallel=on"};
	static const char *const defs[] = {"def k(float(B,H) dH) -> (dB) { dB(h) +=! dH(r_b,h) }\n",
		"def k(float(B,H) dH, float(B) X) -> (dB) { dB(h) +=! X(r_b) * dH(r_b,h) }\n",
		"def k(float(A,B,H) dH) -> (dB) { dB(h) +=! dH(r_a,r_b,h) }\n"};
	static const char *const tiles[] = {"for (int c0 = 4; c0 <= 1016; c0 += 4)",
		"for (int c0 = 4; c0 <= 1016; c0 += 4)", "for (int c1 = 0; c1 <= 336; c1 += 4)"};
	int64_t sh[2] = {B, H}, sh3[3] = {3, B / 3, H}, sx[1] = {B}, so[1] = {H};
	DLTensor DH = {dh, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sh, NULL, 0};
	DLTensor DH3 = {dh, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, sh3, NULL, 0};
	DLTensor X = {x, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sx, NULL, 0};
	const DLTensor *in[2] = {&DH, &X}, *in3[1] = {&DH3};
	uint64_t r = 17;
	size_t v, d;
	int i, b;
	char *text;
	tc_module *m;
	(void)state;
	fill_uniform(dh, B * H, &r, -1, 1);
	fill_uniform(x, B, &r, -1, 1);
	for (d = 0; d < 3; d++) {
		const DLTensor *const *args = d == 2 ? in3 : in;
		int nin = d == 1 ? 2 : 1;
		m = tc_module_parse(ctx, defs[d], "rows.tc");
		assert_non_null(m);
		text = stage_of(m, args, nin, "threads=1", "ast");
		if (!strstr(text, "// tc_unroll\n") || !strstr(text, tiles[d]))
			fail_msg("%s: rows of 4 unrolled expected in the AST:\n%s", defs[d], text);
		tc_string_free(text);
		text = stage_of(m, args, nin, "threads=1 unroll=off", "ast");
		assert_null(strstr(text, "tc_unroll"));
		tc_string_free(text);
		for (v = 0; v < 5; v++) {
			DLTensor O = {outs[v], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, so, NULL, 0};
			memset(outs[v], 0xff, sizeof(outs[v]));
			run_with_outs(m, args, nin, &O, 1, opts[v], NULL);
			if (v && v < 4 && memcmp(outs[v], outs[0], sizeof(outs[0])))
				fail_msg("%s, %s: the sums differ from the interpreter's", defs[d],
					opts[v]);
		}
		/* partial sums round in another order (docs/language.md): within
		 * the bound of any order, B rounding errors of the sum of the
		 * terms' magnitudes */
		for (i = 0; i < H; i++) {
			double mag = 0;
			for (b = 0; b < B; b++)
				mag += fabs((double)dh[b * H + i] * (d == 1 ? x[b] : 1.0f));
			if (!(fabs((double)outs[4][i] - outs[0][i]) <= B * FLT_EPSILON * mag))
				fail_msg("%s, %s: column %d: %.9g against %.9g", defs[d], opts[4], i,
					outs[4][i], outs[0][i]);
		}
		tc_module_free(m);
	}
}

/* Contractions whose columns the tile pass cuts into blocks, at odd sizes
 * (partial column, reduction and row blocks, partial register tiles) on 1
 * to 3 threads: A * B^T (B packed first) and A * B are the fmaf sums in k
 * order (contract=on), bit for bit.  (Packing B per KC x NC block inside
 * the column blocks, OpenBLAS's order, was measured and not kept:
 * docs/performance.md, "B's blocks packed inside the cache tiles".) */
static void column_blocks_at_odd_sizes(void **state)
{
	enum { M = 37, K = 301, N = 1601 };
	static float a[M * K], b[N * K], c[M * N], want[2][M * N];
	static const char *const opts[3] = {"threads=1", "threads=2 parallel=on",
		"threads=3 parallel=on"};
	static const char *const defs[2] = {
		"def k(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,r_k) * B(n,r_k) }\n",
		"def k(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }\n"};
	int64_t sa[2] = {M, K}, sbt[2] = {N, K}, sb[2] = {K, N}, sc[2] = {M, N};
	DLTensor A = {a, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sa, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sbt, NULL, 0};
	DLTensor C = {c, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, sc, NULL, 0};
	const DLTensor *in[2] = {&A, &B};
	uint64_t r = 15;
	int d, v, i, j, k;
	tc_module *m;
	(void)state;
	fill_uniform(a, M * K, &r, -1, 1);
	fill_uniform(b, N * K, &r, -1, 1);
	for (i = 0; i < M; i++)
		for (j = 0; j < N; j++) {
			float nt = 0, nn = 0;
			for (k = 0; k < K; k++) {
				nt = fmaf(a[i * K + k], b[j * K + k], nt);
				nn = fmaf(a[i * K + k], b[k * N + j], nn);
			}
			want[0][i * N + j] = nt;
			want[1][i * N + j] = nn;
		}
	for (d = 0; d < 2; d++) {
		B.shape = d ? sb : sbt;
		m = tc_module_parse(ctx, defs[d], "blocks.tc");
		assert_non_null(m);
		for (v = 0; v < 3; v++) {
			run_with(m, in, 2, &C, opts[v], NULL);
			for (i = 0; i < M * N; i++)
				if (memcmp(&c[i], &want[d][i], sizeof(float)))
					fail_msg("%s, %s: C[%d] = %a, expected %a", d ? "A * B" : "A * B^T",
						opts[v], i, (double)c[i], (double)want[d][i]);
		}
		tc_module_free(m);
	}
}

/* A depthwise convolution of 3 x 3 taps keeps its taps innermost and no
 * register tile (order.c, window_sum); one of 7 x 7 (49 taps, past
 * MAX_TAPS) gets the register tile; both give the interpreter's bits at 1
 * and 2 threads, odd sizes. */
static void depthwise_taps_innermost(void **state)
{
	enum { N = 2, C = 5, H = 19, W = 23 };
	static float in[N * C * H * W], w3[C * 9], w7[C * 49], b[C], outs[3][N * C * H * W];
	static const char *const opts[] = {"target=interp", "threads=1", "threads=2 parallel=on"};
	int64_t si[4] = {N, C, H, W}, sb[1] = {C}, s3[3] = {C, 3, 3}, s7[3] = {C, 7, 7};
	DLTensor I = {in, {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, si, NULL, 0};
	DLTensor W3 = {w3, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, s3, NULL, 0};
	DLTensor W7 = {w7, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, s7, NULL, 0};
	DLTensor B = {b, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, sb, NULL, 0};
	uint64_t r = 21;
	int k, v;
	tc_module *m;
	(void)state;
	fill_uniform(in, N * C * H * W, &r, -1, 1);
	fill_uniform(w3, C * 9, &r, -1, 1);
	fill_uniform(w7, C * 49, &r, -1, 1);
	fill_uniform(b, C, &r, -1, 1);
	m = tc_module_parse(ctx,
		"def k(float(N,C,H,W) I, float(C,KH,KW) W1, float(C) B) -> (O) {\n"
		"    O(n,c,h,w) +=! I(n,c,h+r_kh,w+r_kw) * W1(c,r_kh,r_kw)\n"
		"    O(n,c,h,w) = O(n,c,h,w) + B(c)\n"
		"}\n", "dw.tc");
	assert_non_null(m);
	for (k = 0; k < 2; k++) {
		const DLTensor *ins[3] = {&I, k ? &W7 : &W3, &B};
		int64_t so[4] = {N, C, H - (k ? 6 : 2), W - (k ? 6 : 2)};
		size_t n = (size_t)(so[0] * so[1] * so[2] * so[3]) * sizeof(float);
		char *text = stage_of(m, ins, 3, "threads=1", "ast");
		if (k)
			assert_non_null(strstr(text, "// tc_regtile"));
		else {
			assert_null(strstr(text, "// tc_regtile"));
			assert_non_null(strstr(text, "for (int c4 = 0; c4 <= 2; c4 += 1)\n"
						     "          for (int c5 = 0; c5 <= 2; c5 += 1)\n"
						     "            S0(c0, c1, c2, c3, c4, c5);"));
		}
		tc_string_free(text);
		for (v = 0; v < 3; v++) {
			DLTensor O = {outs[v], {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, so, NULL, 0};
			memset(outs[v], 0xff, sizeof(outs[v]));
			run_with(m, ins, 3, &O, opts[v], NULL);
			if (v && memcmp(outs[v], outs[0], n))
				fail_msg("%d x %d taps, %s: differs from the interpreter", k ? 7 : 3,
					k ? 7 : 3, opts[v]);
		}
	}
	tc_module_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fusion_strategies),
		cmocka_unit_test(fusion_auto_refits_costly_nests),
		cmocka_unit_test(fusion_auto_splits_strided_statements),
		cmocka_unit_test(fusion_auto_splits_chained_contractions),
		cmocka_unit_test(fusion_auto_keeps_operand_panels_fused),
		cmocka_unit_test(parallel_mark_above_a_block),
		cmocka_unit_test(parallel_auto_counts_register_tiles_by_lanes),
		cmocka_unit_test(parallel_past_a_single_iteration),
		cmocka_unit_test(parallel_loop_over_balanced_members),
		cmocka_unit_test(short_rows_as_one_loop),
		cmocka_unit_test(speculated_sides),
		cmocka_unit_test(parallel_chunks_of_a_column_sum),
		cmocka_unit_test(column_register_tile),
		cmocka_unit_test(column_sum_rows_unrolled),
		cmocka_unit_test(register_tile_uses_vector_fmas),
		cmocka_unit_test(cpu_levels_compile_for_any_host),
		cmocka_unit_test(avx512_loops_use_whole_vectors),
		cmocka_unit_test(packing_transposed_operands),
		cmocka_unit_test(packing_broadcast_operands_across_rows),
		cmocka_unit_test(column_blocks_at_odd_sizes),
		cmocka_unit_test(packing_convolutions_channels_last),
		cmocka_unit_test(packing_in_panels),
		cmocka_unit_test(packing_copies_as_vector_code),
		cmocka_unit_test(conv_channels_last_row_buffer),
		cmocka_unit_test(packing_short_rows_last),
		cmocka_unit_test(regtile_even_rows_of_short_members),
		cmocka_unit_test(regtile_whole_rows_without_masked_rest),
		cmocka_unit_test(padded_convolution_tiles_of_constant_rows),
		cmocka_unit_test(windows_of_every_size),
		cmocka_unit_test(masked_rows),
		cmocka_unit_test(transposing_copies_in_registers),
		cmocka_unit_test(fused_writes_keep_their_stride_1_loop),
		cmocka_unit_test(inlining_cheap_temporaries),
		cmocka_unit_test(sharing_expensive_subexpressions),
		cmocka_unit_test(row_buffers),
		cmocka_unit_test(dot_product_contractions),
		cmocka_unit_test(operand_panels_in_registers),
		cmocka_unit_test(streaming_stores),
		cmocka_unit_test(streaming_follows_the_last_level_cache),
		cmocka_unit_test(conv2d_merged_bands),
		cmocka_unit_test(conv_then_bias_keeps_register_tiles),
		cmocka_unit_test(nests_share_loops_over_the_same_rows),
		cmocka_unit_test(partial_sums_per_thread),
		cmocka_unit_test(column_sum_alone_in_chunks),
		cmocka_unit_test(every_nest_gets_cache_blocks),
		cmocka_unit_test(streaming_stores_in_a_fused_nest),
		cmocka_unit_test(rolled_reduction_before_a_row_pass),
		cmocka_unit_test(plain_temporaries_in_row_buffers),
		cmocka_unit_test(weight_gradient_rows),
		cmocka_unit_test(padded_weight_gradient_on_two_threads),
		cmocka_unit_test(reads_at_a_fraction_of_the_rate),
		cmocka_unit_test(hoist_one_statement_at_a_time),
		cmocka_unit_test(depthwise_taps_innermost),
		cmocka_unit_test(interchange_orders_the_tiled_band),
		cmocka_unit_test(inline_exp_and_vector_reductions),
		cmocka_unit_test(vector_and_unroll_inner_options),
		cmocka_unit_test(schedule_options),
		cmocka_unit_test(contract_option),
		cmocka_unit_test(contract_rule_is_the_same_everywhere),
		cmocka_unit_test(defaults_print_every_option),
		cmocka_unit_test(parse_print_round_trip),
		cmocka_unit_test(copy_keeps_settings_and_is_independent),
		cmocka_unit_test(target_values_are_the_backends),
		cmocka_unit_test(comments_and_separators),
		cmocka_unit_test(errors_name_the_option_and_line),
		cmocka_unit_test(failed_parse_leaves_options_unchanged),
		cmocka_unit_test(describe_lists_every_option),
		cmocka_unit_test(value_kinds),
		cmocka_unit_test(kernel_stats_null),
	};
	const char *filter = getenv("TC_TEST_FILTER");
	if (filter && *filter) /* one test or a pattern: TC_TEST_FILTER=column_* */
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests(tests, setup, teardown);
}
