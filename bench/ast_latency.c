/* The isl AST build alone: the step of a compile that costs most at matmul
 * (docs/performance.md, "Compile latency"), timed apart from the rest so
 * that changes to the schedule tree's shape (tile expressions, isolate
 * options, marks) can be tried on the text of a tree without rebuilding
 * tcomp.  It reads a schedule tree as `tcomp emit --stage schedule` prints
 * it, builds its AST as tc_poly_ast does (the context: the sizes the
 * domain fixes) and reports thread CPU time.
 *
 *   bench_ast FILE [REPEATS] [--no-isolate] [--no-marks] [--print]
 *
 *   --no-isolate  drop every band's AST build options (the isolated full
 *                 register tiles) before building
 *   --no-marks    delete every mark node (tc_regtile, tc_unroll, ...)
 *   --print       print the last AST as C
 *
 * One line: median, min and max over REPEATS builds (default 5), each from
 * a fresh copy of the tree in one isl context.  Exit status 1 when the
 * file cannot be read or parsed, 2 when the build fails. */
#include <isl/ast.h>
#include <isl/ast_build.h>
#include <isl/ctx.h>
#include <isl/options.h>
#include <isl/schedule.h>
#include <isl/schedule_node.h>
#include <isl/set.h>
#include <isl/space.h>
#include <isl/union_set.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

/* The whole of file path as a string (the caller frees it), or NULL. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
		(s = malloc((size_t)n + 1)) != NULL) {
		if (fread(s, 1, (size_t)n, f) != (size_t)n) {
			free(s);
			s = NULL;
		} else
			s[n] = 0;
	}
	fclose(f);
	return s;
}

typedef struct strip {
	int isolate, marks;
} strip;

/* Drop what s asks for at node n (isl_schedule_map_schedule_node_bottom_up). */
static isl_schedule_node *strip_node(isl_schedule_node *n, void *user)
{
	strip *s = user;
	enum isl_schedule_node_type t = isl_schedule_node_get_type(n);
	if (s->isolate && t == isl_schedule_node_band) {
		isl_union_set *none = isl_union_set_empty(isl_space_params_alloc(
			isl_schedule_node_get_ctx(n), 0));
		n = isl_schedule_node_band_set_ast_build_options(n, none);
	}
	if (s->marks && t == isl_schedule_node_mark)
		n = isl_schedule_node_delete(n);
	return n;
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	int reps = 5, print = 0, i, st = 0;
	strip s = {0, 0};
	double *t;
	char *text;
	isl_ctx *ctx;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-isolate"))
			s.isolate = 1;
		else if (!strcmp(argv[i], "--no-marks"))
			s.marks = 1;
		else if (!strcmp(argv[i], "--print"))
			print = 1;
		else if (!path)
			path = argv[i];
		else if ((reps = atoi(argv[i])) < 1)
			reps = 1;
	}
	if (!path) {
		fprintf(stderr, "usage: bench_ast FILE [REPEATS] [--no-isolate] [--no-marks] "
			"[--print]\n");
		return 1;
	}
	if (!(text = slurp(path))) {
		fprintf(stderr, "bench_ast: cannot read %s\n", path);
		return 1;
	}
	t = calloc((size_t)reps, sizeof(*t));
	ctx = isl_ctx_alloc();
	if (!t || !ctx) {
		fprintf(stderr, "bench_ast: out of memory\n");
		free(text);
		free(t);
		isl_ctx_free(ctx);
		return 2;
	}
	isl_options_set_on_error(ctx, ISL_ON_ERROR_CONTINUE);
	for (i = 0; i < reps && !st; i++) {
		isl_schedule *sched = isl_schedule_read_from_str(ctx, text);
		isl_ast_build *build;
		isl_ast_node *ast;
		double t0;
		if (!sched) {
			fprintf(stderr, "bench_ast: %s is not a schedule tree\n", path);
			st = 1;
			break;
		}
		if (s.isolate || s.marks)
			sched = isl_schedule_map_schedule_node_bottom_up(sched, strip_node, &s);
		t0 = bench_cpu_ms();
		/* the context tc_poly_ast builds from: the sizes the domain fixes */
		build = isl_ast_build_from_context(
			isl_union_set_params(isl_schedule_get_domain(sched)));
		ast = isl_ast_build_node_from_schedule(build, sched);
		t[i] = bench_cpu_ms() - t0;
		isl_ast_build_free(build);
		if (!ast) {
			fprintf(stderr, "bench_ast: isl cannot build the AST\n");
			st = 2;
		} else if (print && i == reps - 1) {
			char *c = isl_ast_node_to_C_str(ast);
			if (c)
				fputs(c, stdout);
			free(c);
		}
		isl_ast_node_free(ast);
	}
	if (!st) {
		bench_sort(t, reps);
		printf("isl AST build: median %.2f ms  min %.2f ms  max %.2f ms (%d builds, "
			"thread CPU time)\n", t[reps / 2], t[0], t[reps - 1], reps);
	}
	free(text);
	free(t);
	isl_ctx_free(ctx);
	return st;
}
