/* tcomp autotune: tune a def's mapping options for given input shapes with
 * tc_autotune, showing progress, and print the best options in the
 * --options file format. */
#include "cli.h"
#include "npy.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const autotune_usage =
	"usage: tcomp autotune FILE.tc [-e NAME] --shape T=1024x1024 ... [--in T=FILE.npy ...]\n"
	"                      [--generations G]\n"
	"                      [--population P] [--elites E] [--mutation RATE] [--threads N]\n"
	"                      [--jobs J]\n"
	"                      [--timeout S] [--seed N] [--runs R] [--min-time S]\n"
	"                      [--cutoff X]\n"
	"                      [--final-candidates K] [--final-rounds R]\n"
	"                      [--final-time S] [--final-warmup S]\n"
	"                      [--cache PATH | --no-cache] [--options FILE]\n"
	"                      [--option NAME=VALUE ...] [--quiet]\n"
	"\n"
	"Search the mapping options of the def NAME (optional when the file has one\n"
	"def) for the fastest kernel at the given input shapes, with a genetic\n"
	"search (see autotune/README.md): every candidate is compiled and run in a\n"
	"child process on random inputs (as tcomp bench makes them; --in: on a\n"
	"file's data), checked\n"
	"against the first correct candidate's result, and timed alone (median of\n"
	"timed runs after warm-up).  A candidate that fails to compile, crashes,\n"
	"runs past the time limit or computes a wrong result is recorded as failed\n"
	"and the search goes on.  Progress goes to stderr: a status line on a\n"
	"terminal, a line per candidate otherwise.  Ctrl-C stops the search and\n"
	"keeps the best found so far.\n"
	"\n"
	"Then the final stage: the K best distinct correct configurations of the\n"
	"search and the defaults are compiled again and timed in turn, R rounds\n"
	"(the first after a warm-up of at least --final-warmup seconds, past slow\n"
	"first runs; each round at least --runs runs taking --final-time seconds,\n"
	"with the stack at another offset in its page, since some kernels' speed\n"
	"depends on it), and the one with the least median of its round medians\n"
	"wins.  The defaults are kept unless another is faster by more than 2%\n"
	"and in more than half of the rounds: then the speedup is 1.00x.  The\n"
	"final stage also runs after Ctrl-C; a second Ctrl-C ends it and keeps\n"
	"the search's best.  Every re-timing goes into the kernel cache, and the\n"
	"choice becomes the cache's best for these shapes.\n"
	"\n"
	"At the end the best options are printed to stdout in the --options file\n"
	"format, after comment lines with the best and default times and the\n"
	"speedup, so that\n"
	"  tcomp autotune k.tc -e mm --shape A=512x512 --shape B=512x512 > mm.opts\n"
	"  tcomp bench k.tc -e mm --shape A=512x512 --shape B=512x512 --options mm.opts\n"
	"times the tuned kernel.\n"
	"\n"
	"  -e, --entry NAME    the def to tune\n"
	"  --shape T=SHAPE     shape of input T: 1024x1024, 64, or scalar\n"
	"  --in T=FILE         input T from a .npy file (its shape and values; its\n"
	"                      dtype the def's): the candidates run on that data,\n"
	"                      the --shape inputs on random values (as above);\n"
	"                      for kernels whose speed depends on their data\n"
	"  --generations G     generations of the search (default 5)\n"
	"  --population P      candidates per generation (default 20)\n"
	"  --elites E          best candidates carried into the next generation (default 2)\n"
	"  --mutation RATE     chance that a child's option is redrawn (default 0.15)\n"
	"  --threads N         the kernels' thread count, as in tcomp bench: the\n"
	"                      option threads fixed to N (without it, threads is\n"
	"                      searched)\n"
	"  --jobs J            candidates compiling at once (default: one per CPU)\n"
	"  --timeout S         limit on one candidate's runs, in seconds (default 10)\n"
	"  --compile-timeout S  limit on one candidate's compile, in seconds\n"
	"                      (default 120)\n"
	"  --seed N            seed of the search's random choices (N >= 1; default:\n"
	"                      from the clock): the same seed makes the same choices\n"
	"  --runs R            at least R timed runs per candidate (default 5) ...\n"
	"  --min-time S        ... taking at least S seconds in all (default 0.1)\n"
	"  --cutoff X          a candidate more than X times slower than the best so\n"
	"                      far is cut short, and only those within X times the\n"
	"                      defaults go to the final stage (X >= 1; default 3)\n"
	"  --final-candidates K  configurations of the search re-timed with the\n"
	"                      defaults in the final stage (default 3; 0: no final\n"
	"                      stage, the search's best is printed)\n"
	"  --final-rounds R    rounds of the final stage (default 5)\n"
	"  --final-time S      at least S seconds of timed runs per configuration\n"
	"                      and round (default 0.2)\n"
	"  --final-warmup S    warm-up of at least S seconds before a configuration's\n"
	"                      first round (default 0.5)\n"
	"  --cache PATH        the kernel cache to take seeds from and record every\n"
	"                      candidate in (default: $TCOMP_CACHE, else\n"
	"                      $XDG_CACHE_HOME/tcomp/kernels.sqlite, else\n"
	"                      ~/.cache/tcomp/kernels.sqlite)\n"
	"  --no-cache          neither read nor write the cache\n"
	"  --options FILE      fixed options (see tcomp run --help): every option the\n"
	"                      file or --option sets is kept as given, the others\n"
	"                      are searched; target and contract are never searched;\n"
	"                      with --option target=cuda-emu the GPU mapping options\n"
	"                      are searched (block, grid, fusion, order, inline,\n"
	"                      share; the CPU's code options fixed) and candidates\n"
	"                      run in the emulator: its times check the machinery,\n"
	"                      they say nothing of a GPU; with target=cuda each\n"
	"                      candidate's process opens the CUDA driver, copies\n"
	"                      the inputs to the GPU and times with CUDA events\n"
	"                      (this process never opens the driver: a probe\n"
	"                      process reads the GPU's name and compute capability,\n"
	"                      which fix gpu_arch unless it is given)\n"
	"  --option N=V        fix one option (repeatable)\n"
	"  --quiet             no progress output\n"
	"\n"
	"A training step (README \"Training\"): --train FWD,LOSS tunes every kernel\n"
	"of the step tc_model_build makes of the forward def FWD and the loss def\n"
	"LOSS (forward with saves, loss, the two backward defs, the update), one\n"
	"after the other with the settings above, each on the model's buffers after\n"
	"a step on random data; the cache then serves each to tc_model_build.\n"
	"Under mpirun the step's kernels are a batch (below): whole kernels go to\n"
	"the ranks, on random inputs of their shapes.\n"
	"  --train FWD,LOSS    the model's forward and loss defs\n"
	"  --params A,B,...    the forward def's inputs that are parameters; --shape\n"
	"                      gives their shapes and those of the data inputs\n"
	"  --optimizer O       sgd (default), momentum or adam: the update tuned\n"
	"  --ensemble K        an ensemble of K models (tc_model_ensemble): --shape\n"
	"                      gives one model's parameter shapes\n"
	"\n"
	"Many kernels: --batch FILE tunes every kernel FILE lists, a line each:\n"
	"  KERNEL.tc [-e NAME] --shape T=SHAPE ... [--option N=V ...] [--threads N]\n"
	"(# starts a comment; a relative KERNEL.tc is read from FILE's folder; the\n"
	"--option and --threads of a line add to those of the command line).  Every\n"
	"line is loaded first (an error names its line and nothing is tuned); then\n"
	"the kernels are tuned one after another, or under mpirun one per rank at a\n"
	"time, largest first, each searched and re-timed on its rank, with one\n"
	"progress display for the batch; a summary per kernel goes to stdout.\n"
	"\n"
	"Tuning at scale (README): started by mpirun with N ranks, rank 0 runs the\n"
	"search, the final stage and the cache, and ranks 1..N-1 compile and time\n"
	"each generation's candidates, --jobs at once each (default: the CPUs the\n"
	"rank may use), one timing at a time per rank.  Bind ranks that share a\n"
	"machine to disjoint cores; with mpirun --enable-recovery a rank that dies\n"
	"costs only its candidates, which go to the others.  Rank 0's first line\n"
	"names its process: kill -INT PID stops the run as Ctrl-C does in one\n"
	"process (mpirun's own Ctrl-C leaves the ranks a second; what they measured\n"
	"is in the cache already).\n"
	"  mpirun -n 5 --map-by ppr:1:node tcomp autotune k.tc -e mm --shape ...\n";


static volatile sig_atomic_t interrupted;

/* Counts: the first Ctrl-C stops the search, a second the final stage. */
static void on_sigint(int sig)
{
	(void)sig;
	interrupted = interrupted + 1;
}

/* Ctrl-C sets interrupted while a search runs (the previous action in
 * *old); no SA_RESTART: waits return early. */
static void catch_sigint(struct sigaction *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, old);
	/* mpirun passes a Ctrl-C on to its ranks as SIGTERM */
	if (mpi_world_size() > 1)
		sigaction(SIGTERM, &sa, NULL);
}

/* A rank other than 0 of a distributed run: serve candidates until rank 0
 * ends the run; the exit status. */
static int serve(tc_tune_transport *t, int jobs)
{
	tc_context *ctx = tc_context_new();
	struct sigaction old;
	int rc;
	if (!ctx)
		return EXIT_INTERNAL;
	catch_sigint(&old);
	rc = tc_tune_serve(ctx, t, jobs, &interrupted);
	sigaction(SIGINT, &old, NULL);
	if (rc < 0)
		fprintf(stderr, "tcomp: rank %d: %s\n", t->rank, tc_context_error(ctx));
	tc_context_free(ctx);
	mpi_end(rc > 0 ? rc : 0, rc < 0 ? EXIT_INTERNAL : 0);
	return rc < 0 ? EXIT_INTERNAL : 0;
}

#define MAX_FINAL 65 /* 64 final candidates and the defaults */

/* One configuration of the final stage, for the summary. */
typedef struct final_row {
	char opts[1024];
	tc_tune_status status;
	double median_s;
	int chosen, defaults;
} final_row;

typedef struct view {
	int tty, quiet;
	const char *prefix; /* "kernel 2/5 mlp_grad: " when tuning a step, else "" */
	int shown; /* a status line is on the terminal */
	int nfinal;
	final_row final[MAX_FINAL];
} view;

/* "1.23 ms", "45.6 us", "2.01 s". */
static const char *fmt_time(double s, char *buf, size_t n)
{
	if (!isfinite(s))
		snprintf(buf, n, "-");
	else if (s >= 1)
		snprintf(buf, n, "%.3g s", s);
	else if (s >= 1e-3)
		snprintf(buf, n, "%.3g ms", s * 1e3);
	else
		snprintf(buf, n, "%.3g us", s * 1e6);
	return buf;
}

static const char *fmt_duration(double s, char *buf, size_t n)
{
	if (!isfinite(s) || s < 0)
		snprintf(buf, n, "?");
	else if (s < 60)
		snprintf(buf, n, "%.0fs", s);
	else
		snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
	return buf;
}

static const char *status_word(tc_tune_status st)
{
	switch (st) {
	case TC_TUNE_OK: return "ok";
	case TC_TUNE_CUT: return "cut (slow)";
	case TC_TUNE_COMPILE_ERROR: return "compile error";
	case TC_TUNE_RUN_ERROR: return "run error";
	case TC_TUNE_CRASH: return "crashed";
	case TC_TUNE_TIMEOUT: return "timed out";
	case TC_TUNE_WRONG: return "wrong result";
	}
	return "?";
}

/* The options text on one line: "a=1;b=2". */
static void one_line(const char *text, char *buf, size_t n)
{
	size_t i;
	snprintf(buf, n, "%s", text);
	for (i = 0; buf[i]; i++)
		if (buf[i] == '\n')
			buf[i] = buf[i + 1] ? ';' : 0;
}

static int progress(void *user, const tc_tune_progress *p)
{
	view *v = user;
	char best[32], med[32], last[32], eta[32], el[32];
	static char opts[2048];
	if (v->quiet)
		return 0;
	if (p->final_round) {
		fmt_time(p->last->median_s, last, sizeof(last));
		fmt_duration(p->eta_s, eta, sizeof(eta));
		if (v->tty) {
			fprintf(stderr, "\r\033[K%sfinal stage: round %d/%d, %d/%d re-timed, eta %s",
				v->prefix, p->final_round, p->final_rounds, p->done, p->planned, eta);
			v->shown = 1;
		} else {
			one_line(p->last->options, opts, sizeof(opts));
			fprintf(stderr, "%sfinal round %d/%d  re-timing %d/%d  %s %s  eta %s  %s%s%s\n",
				v->prefix, p->final_round, p->final_rounds, p->done, p->planned,
				status_word(p->last->status), last, eta, opts,
				*p->last->message ? "  # " : "", p->last->message);
		}
		fflush(stderr);
		return 0;
	}
	fmt_time(p->best_s, best, sizeof(best));
	fmt_time(p->gen_median_s, med, sizeof(med));
	fmt_time(p->last->median_s, last, sizeof(last));
	fmt_duration(p->eta_s, eta, sizeof(eta));
	fmt_duration(p->elapsed_s, el, sizeof(el));
	if (v->tty) {
		int width = 20, filled = p->planned ? p->done * width / p->planned : 0, i;
		fprintf(stderr, "\r\033[K%sgen %d/%d [", v->prefix, p->generation + 1,
			p->generations);
		for (i = 0; i < width; i++)
			fputc(i < filled ? '#' : '.', stderr);
		fprintf(stderr, "] %d/%d  best %s  gen median %s  failed %d  %s, eta %s", p->done,
			p->planned, best, med, p->failed, el, eta);
		v->shown = 1;
	} else {
		one_line(p->last->options, opts, sizeof(opts));
		char comp[32];
		fmt_time(p->last->compile_s > 0 ? p->last->compile_s : INFINITY, comp, sizeof(comp));
		fprintf(stderr, "%sgen %d/%d  candidate %d/%d  %s %s  compile %s  best %s  eta %s  "
			"%s%s%s\n", v->prefix, p->generation + 1, p->generations, p->done, p->planned,
			status_word(p->last->status), last, comp, best, eta, opts,
			*p->last->message ? "  # " : "", p->last->message);
	}
	fflush(stderr);
	return 0;
}

/* Failed candidates get a line of their own on a terminal too. */
static void record(void *user, const tc_tune_candidate *c)
{
	view *v = user;
	char opts[2048];
	const char *nl;
	if (c->final && v->nfinal < MAX_FINAL) { /* for the summary */
		final_row *f = &v->final[v->nfinal++];
		one_line(c->options, f->opts, sizeof(f->opts));
		f->status = c->status;
		f->median_s = c->median_s;
		f->chosen = c->chosen;
		f->defaults = c->index == 0; /* the first candidate is the defaults */
	}
	if (v->quiet || !v->tty || c->status == TC_TUNE_OK || c->status == TC_TUNE_CUT)
		return;
	one_line(c->options, opts, sizeof(opts));
	nl = strchr(c->message, '\n');
	fprintf(stderr, "\r\033[Kcandidate %d %s: %.*s\n  %s\n", c->index, status_word(c->status),
		nl ? (int)(nl - c->message) : (int)strlen(c->message), c->message, opts);
}

/* The comment lines after "# tcomp autotune ...": best and default times,
 * the speedup, the final stage's table, the search's counts. */
static void print_summary(const tc_tune_report *rep, const view *v, int final_candidates)
{
	char t1[32], t2[32], el[32];
	int i;
	printf("\n# best %s, defaults %s", fmt_time(rep->best_s, t1, sizeof(t1)),
		fmt_time(rep->default_s, t2, sizeof(t2)));
	if (rep->defaults_won) {
		double other = INFINITY;
		for (i = 0; i < v->nfinal; i++)
			if (!v->final[i].defaults && v->final[i].status == TC_TUNE_OK &&
				v->final[i].median_s < other)
				other = v->final[i].median_s;
		printf(": 1.00x speedup over the defaults (kept: %s)", other < rep->default_s
			? "no other was faster by more than 2% in most rounds of the final stage"
			: "they were the fastest in the final stage");
	} else if (isfinite(rep->default_s) && rep->best_s > 0)
		printf(": %.2fx speedup over the defaults", rep->default_s / rep->best_s);
	printf("\n");
	if (rep->final_measured) {
		printf("# final stage: %d configurations timed in turn over %d rounds "
			"(median of the round medians; * the choice):\n",
			rep->final_measured, rep->final_rounds);
		for (i = 0; i < v->nfinal; i++)
			printf("#  %c %-10s %s%s\n", v->final[i].chosen ? '*' : ' ',
				v->final[i].status == TC_TUNE_OK ? fmt_time(v->final[i].median_s, t1,
					sizeof(t1)) : status_word(v->final[i].status),
				v->final[i].defaults ? "(defaults) " : "", v->final[i].opts);
		printf("# search: best %s, defaults %s\n", fmt_time(rep->search_best_s, t1,
			sizeof(t1)), fmt_time(rep->search_default_s, t2, sizeof(t2)));
	} else if (rep->final_stopped) {
		printf("# final stage stopped: the search's best\n");
	} else if (final_candidates) {
		printf("# no final stage: fewer than two correct configurations\n");
	}
	printf("# %d candidates (%d failed, %d cut short) in %d generations, %s%s\n",
		rep->measured, rep->failed, rep->cut, rep->generations,
		fmt_duration(rep->elapsed_s, el, sizeof(el)), rep->stopped ? "; stopped early" : "");
}

static double parse_seconds(const char *opt, const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v > 0) || v > 1e6)
		die_usage(autotune_usage, "%s needs a positive number of seconds", opt);
	return v;
}

/* Whether name is in the comma-separated list. */
static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = list; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* ---- tcomp autotune --batch FILE ---- */

#define MAX_JOBS 4096

/* One line of a batch file, loaded. */
typedef struct batch_line {
	int line;
	char *text;       /* the line (malloc'd; words point into it) */
	const char *file; /* the .tc file as written */
	char *path;       /* resolved against the batch file's folder (malloc'd) */
	const char *entry;
	tc_module *m;
	tc_options *base;
	DLTensor dl[64];
	int64_t dims[64][8];
	const DLTensor *in[64];
	int n_in;
} batch_line;

/* The progress display of a batch (--batch, or a step's kernels over the
 * ranks): job i is jobs[i].entry, from lines[i] of the batch file (lines
 * NULL: a step's kernel). */
typedef struct batch_view {
	view *v;
	const tc_tune_job *jobs;
	const batch_line *lines;
} batch_view;

static int batch_progress(void *user, const tc_tune_batch_progress *bp)
{
	batch_view *bv = user;
	view *v = bv->v;
	const char *entry = bv->jobs[bp->job].entry;
	char eta[32], last[32], best[32], el[32], line[32] = "";
	static char opts[2048];
	if (v->quiet)
		return 0;
	fmt_duration(bp->eta_s, eta, sizeof(eta));
	fmt_duration(bp->elapsed_s, el, sizeof(el));
	if (bv->lines)
		snprintf(line, sizeof(line), " (line %d)", bv->lines[bp->job].line);
	if (!bp->p) { /* the job finished: a line of its own */
		fprintf(stderr, "%skernel %d/%d %s%s finished; %d/%d done, %d running, %s, "
			"eta %s\n", v->shown ? "\r\033[K" : "", bp->job + 1, bp->jobs, entry, line,
			bp->finished, bp->jobs, bp->running, el, eta);
		v->shown = 0;
		fflush(stderr);
		return 0;
	}
	fmt_time(bp->p->last ? bp->p->last->median_s : INFINITY, last, sizeof(last));
	fmt_time(bp->p->best_s, best, sizeof(best));
	if (v->tty) {
		fprintf(stderr, "\r\033[K[%d/%d kernels, %d running, eta %s] kernel %d %s: %s %d/%d  "
			"best %s", bp->finished, bp->jobs, bp->running, eta, bp->job + 1, entry,
			bp->p->final_round ? "final" : "gen", bp->p->done, bp->p->planned, best);
		v->shown = 1;
	} else {
		one_line(bp->p->last ? bp->p->last->options : "", opts, sizeof(opts));
		fprintf(stderr, "kernel %d/%d %s: %s %d/%d  %s %s  best %s  batch eta %s  %s\n",
			bp->job + 1, bp->jobs, entry, bp->p->final_round ? "final" : "candidate",
			bp->p->done, bp->p->planned, bp->p->last ? status_word(bp->p->last->status) : "",
			last, best, eta, opts);
	}
	fflush(stderr);
	return 0;
}

/* The result of a job of a batch: its times, its rank, its choice (freed
 * here). */
static void print_job(tc_tune_job *jb)
{
	char t1[32], t2[32], line[2048], *o;
	if (!jb->ok) {
		printf("# not tuned: %s\n", jb->message);
		return;
	}
	printf("# best %s, defaults %s", fmt_time(jb->report.best_s, t1, sizeof(t1)),
		fmt_time(jb->report.default_s, t2, sizeof(t2)));
	if (isfinite(jb->report.default_s) && jb->report.best_s > 0)
		printf(": %.2fx", jb->report.default_s / jb->report.best_s);
	printf("; %d candidates (%d failed) on rank %d\n", jb->report.measured, jb->report.failed,
		jb->rank);
	if ((o = tc_options_print(jb->best))) {
		one_line(o, line, sizeof(line));
		printf("# the choice: %s\n", line);
	}
	tc_string_free(o);
	tc_options_free(jb->best);
	jb->best = NULL;
}

/* A batch-file error at line: the message, exit 1. */
static void batch_die(const char *bfile, int line, const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "tcomp: error: %s:%d: ", bfile, line);
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	exit(EXIT_USER);
}

/* Load line l (its words in argv[0..argc)) of batch file bfile: the def,
 * its options (base, then the line's --option and --threads) and shapes. */
static void batch_load(tc_context *ctx, const char *bfile, batch_line *l, int argc, char **argv,
	const tc_options *base)
{
	static const struct option lopts[] = {CLI_ENTRY, CLI_SHAPE,
		{"option", required_argument, NULL, OPT_OPTION},
		{"threads", required_argument, NULL, OPT_THREADS}, CLI_END};
	binding shapes[64];
	int nshapes = 0, c, n_out;
	const char *slash = strrchr(bfile, '/');
	char line[16];
	snprintf(line, sizeof(line), "%d", l->line);
	if (!(l->base = tc_options_copy(base)))
		exit(EXIT_INTERNAL);
	optind = 0; /* glibc: start over on this argv */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "e:", lopts, NULL)) != -1) {
		const char *eq;
		switch (c) {
		case OPT_ENTRY: l->entry = optarg; break;
		case OPT_SHAPE:
			if (nshapes == 64 || !(eq = strchr(optarg, '=')) || eq == optarg)
				batch_die(bfile, l->line, "expected --shape T=SHAPE but found '%s'%s", optarg, "");
			shapes[nshapes].name = strndup(optarg, (size_t)(eq - optarg));
			shapes[nshapes].path = eq + 1;
			shapes[nshapes].used = 0;
			if (parse_shape(eq + 1, l->dims[0]) < 0)
				batch_die(bfile, l->line, "bad shape '%s'%s (write it as 1024x1024, 64, or "
					"scalar)", eq + 1, "");
			nshapes++;
			break;
		case OPT_OPTION:
		case OPT_THREADS: {
			char name[64];
			const char *val = optarg;
			if (c == OPT_OPTION) {
				if (!(eq = strchr(optarg, '=')) || eq == optarg || (size_t)(eq - optarg) >= sizeof(name))
					batch_die(bfile, l->line, "expected --option NAME=VALUE but found '%s'%s",
						optarg, "");
				snprintf(name, sizeof(name), "%.*s", (int)(eq - optarg), optarg);
				val = eq + 1;
			} else {
				snprintf(name, sizeof(name), "threads");
			}
			if (tc_options_set(l->base, name, val, ctx) < 0)
				batch_die(bfile, l->line, "%s%s", error_text(ctx), "");
			break;
		}
		default:
			batch_die(bfile, l->line, "unknown or incomplete argument '%s'%s (a line takes "
				"FILE.tc, -e NAME, --shape T=SHAPE, --option N=V and --threads N)",
				argv[optind - 1], "");
		}
	}
	if (optind != argc - 1)
		batch_die(bfile, l->line, "%s%s", optind >= argc ? "no .tc file" : "more than one .tc file", "");
	l->file = argv[optind];
	if (l->file[0] != '/' && slash) { /* relative to the batch file's folder */
		size_t n = (size_t)(slash - bfile) + 1 + strlen(l->file) + 1;
		if (!(l->path = malloc(n)))
			exit(EXIT_INTERNAL);
		snprintf(l->path, n, "%.*s/%s", (int)(slash - bfile), bfile, l->file);
	} else if (!(l->path = strdup(l->file))) {
		exit(EXIT_INTERNAL);
	}
	if (!(l->m = tc_module_load(ctx, l->path))) {
		fprintf(stderr, "tcomp: %s:%d: %s\n", bfile, l->line, tc_context_error(ctx));
		exit(fail_status(ctx));
	}
	if (!l->entry) {
		if (tc_module_num_defs(l->m) != 1)
			batch_die(bfile, l->line, "'%s' has several defs: choose one with -e NAME%s",
				l->file, "");
		l->entry = tc_module_def_name(l->m, 0);
	}
	if (tc_module_def_arity(l->m, l->entry, &l->n_in, &n_out) < 0)
		batch_die(bfile, l->line, "%s%s", error_text(ctx), "");
	if (l->n_in > 64)
		batch_die(bfile, l->line, "'%s' has more than 64 inputs%s", l->entry, "");
	if (bind_shapes(l->m, l->entry, l->n_in, shapes, nshapes, l->dl, l->dims, l->in,
		    autotune_usage) < 0) {
		fprintf(stderr, "tcomp: (%s:%d)\n", bfile, l->line);
		exit(EXIT_USER);
	}
	bindings_free(shapes, nshapes);
}

/* tcomp autotune --batch FILE: load every line first (an error names its
 * line and nothing is tuned), tune them all (tc_autotune_batch: over the
 * ranks under mpirun), print a summary per kernel; the exit status (1 if
 * any kernel was not tuned). */
static int tune_batch(tc_context *ctx, const char *bfile, const tc_options *base,
	tc_tune_settings *set, view *v)
{
	char *text = read_text(bfile), *p, *next;
	batch_line *lines = calloc(MAX_JOBS, sizeof(batch_line));
	tc_tune_job *jobs = calloc(MAX_JOBS, sizeof(tc_tune_job));
	batch_view bv;
	int n = 0, lineno = 0, failed, i, status = 0;
	char t1[32];
	double t0 = now_s();
	if (!text) {
		fprintf(stderr, "tcomp: error: cannot read %s: %s\n", bfile, strerror(errno));
		free(lines);
		free(jobs);
		return EXIT_USER;
	}
	if (!lines || !jobs)
		exit(EXIT_INTERNAL);
	for (p = text; p; p = next) {
		char *words[256], *w, *s2 = NULL, *hash;
		int nw = 0;
		if ((next = strchr(p, '\n')))
			*next++ = 0;
		lineno++;
		if ((hash = strchr(p, '#')))
			*hash = 0;
		lines[n].line = lineno;
		words[nw++] = (char *)"autotune";
		for (w = strtok_r(p, " \t\r", &s2); w && nw < 255; w = strtok_r(NULL, " \t\r", &s2))
			words[nw++] = w;
		if (nw == 1)
			continue;
		if (n == MAX_JOBS)
			batch_die(bfile, lineno, "more than %s kernels%s", "4096", "");
		batch_load(ctx, bfile, &lines[n], nw, words, base);
		jobs[n].m = lines[n].m;
		jobs[n].entry = lines[n].entry;
		jobs[n].inputs = lines[n].in;
		jobs[n].n_inputs = lines[n].n_in;
		jobs[n].base = lines[n].base;
		n++;
	}
	if (!n) {
		fprintf(stderr, "tcomp: error: %s lists no kernels (a line: FILE.tc -e NAME --shape "
			"T=SHAPE ...)\n", bfile);
		status = EXIT_USER;
		goto out;
	}
	bv.v = v;
	bv.jobs = jobs;
	bv.lines = lines;
	failed = tc_autotune_batch(ctx, jobs, n, set, batch_progress, &bv);
	if (v->shown)
		fputs("\n", stderr);
	fputs(tc_context_warnings(ctx), stderr);
	if (failed < 0) {
		status = report(ctx);
		goto out;
	}
	printf("# tcomp autotune --batch %s: %d kernels\n", bfile, n);
	for (i = 0; i < n; i++) {
		tc_tune_job *jb = &jobs[i];
		printf("#\n# kernel %d/%d (line %d): %s -e %s", i + 1, n, lines[i].line, lines[i].file,
			jb->entry);
		for (int k = 0; k < jb->n_inputs; k++) {
			printf(" --shape %s=", tc_module_tensor_name(jb->m, jb->entry, k));
			if (!lines[i].dl[k].ndim)
				printf("scalar");
			for (int d = 0; d < lines[i].dl[k].ndim; d++)
				printf("%s%lld", d ? "x" : "", (long long)lines[i].dl[k].shape[d]);
		}
		printf("\n");
		print_job(jb);
	}
	printf("#\n# %d of %d kernels tuned in %s%s\n", n - failed, n,
		fmt_duration(now_s() - t0, t1, sizeof(t1)), interrupted ? "; stopped early" : "");
	status = failed ? EXIT_USER : 0;
out:
	for (i = 0; i < n; i++) {
		free(lines[i].path);
		tc_options_free(lines[i].base);
		tc_module_free(lines[i].m);
	}
	free(lines);
	free(jobs);
	free(text);
	return status;
}

/* ---- tcomp autotune --train FWD,LOSS ---- */

/* The kernels of md's step (nk of them) as one batch over the ranks
 * (mpirun): whole kernels to the serving ranks, largest first, on random
 * inputs of their shapes (tc_autotune_batch, as --batch does); a summary
 * per kernel, the times of those tuned added to *def and *best.  The
 * number of kernels not tuned, or -1 with the error in ctx. */
static int tune_step_ranks(tc_context *ctx, tc_model *md, int nk, const tc_options *base,
	tc_tune_settings *set, view *v, double *def, double *best)
{
	tc_tune_job *jobs = calloc((size_t)nk + 1, sizeof(*jobs));
	batch_view bv = {v, jobs, NULL};
	int k, failed = -1;
	if (!jobs)
		exit(EXIT_INTERNAL);
	for (k = 0; k < nk; k++) {
		if (tc_model_kernel(md, k, &jobs[k].m, &jobs[k].entry, &jobs[k].inputs,
			    &jobs[k].n_inputs) < 0)
			goto out;
		jobs[k].base = base;
	}
	failed = tc_autotune_batch(ctx, jobs, nk, set, batch_progress, &bv);
	if (v->shown)
		fputs("\n", stderr);
	v->shown = 0;
	for (k = 0; failed >= 0 && k < nk; k++) {
		printf("#\n# kernel %d/%d: %s\n", k + 1, nk, jobs[k].entry);
		if (jobs[k].ok) {
			*def += jobs[k].report.default_s;
			*best += jobs[k].report.best_s;
		}
		print_job(&jobs[k]);
	}
out:
	free(jobs);
	return failed;
}

/* tcomp autotune --train FWD,LOSS: build the model (parameters: the
 * --params names, the other --shape names data), take a step on random data
 * in [0, 1) (labels 0), then tune each kernel of the step in turn and print
 * a summary per kernel; the exit status. */
static int tune_step(tc_context *ctx, const char *file, const char *train, const char *params,
	const char *optimizer, int64_t ensemble, binding *shapes, int nshapes,
	const tc_options *base, tc_tune_settings *set, view *v)
{
	char fwd[256], prefix[300], t1[32], t2[32];
	const char *comma = strchr(train, ',');
	tc_module *m = NULL;
	tc_model *md = NULL;
	tc_optimizer opt;
	double total_def = 0, total_best = 0;
	int status = EXIT_USER, nk, untuned = 0;
	uint64_t seed = 1;
	if (!comma || comma == train || !comma[1] || strchr(comma + 1, ',') ||
		(size_t)(comma - train) >= sizeof(fwd))
		die_usage(autotune_usage, "--train needs FWD,LOSS (two def names) but found '%s'", train);
	snprintf(fwd, sizeof(fwd), "%.*s", (int)(comma - train), train);
	if (!strcmp(optimizer, "sgd"))
		tc_optimizer_init(&opt, TC_OPT_SGD, 0.01);
	else if (!strcmp(optimizer, "momentum"))
		tc_optimizer_init(&opt, TC_OPT_MOMENTUM, 0.01);
	else if (!strcmp(optimizer, "adam"))
		tc_optimizer_init(&opt, TC_OPT_ADAM, 0.001);
	else
		die_usage(autotune_usage, "--optimizer needs sgd, momentum or adam but found '%s'",
			optimizer);
	if (!(m = tc_module_load(ctx, file)) || !(md = tc_model_new(m, fwd, comma + 1)))
		goto fail;
	for (int i = 0; i < nshapes; i++) {
		int64_t dims[8];
		int nd = parse_shape(shapes[i].path, dims);
		tc_init init = {TC_INIT_UNIFORM, -0.1, 0.1, 0, 0};
		if (nd < 0)
			die_usage(autotune_usage, "--shape needs T=4x5 or T=scalar but found '%s'",
				shapes[i].path);
		if ((in_list(params, shapes[i].name)
			    ? tc_model_param(md, shapes[i].name, nd, dims, &init)
			    : tc_model_input(md, shapes[i].name, nd, dims)) < 0)
			goto fail;
	}
	if ((ensemble && tc_model_ensemble(md, ensemble) < 0) || tc_model_build(md, &opt, base, 1) < 0)
		goto fail;
	for (int i = 0; i < nshapes; i++) { /* random data, then a step */
		DLTensor *t = tc_model_tensor(md, shapes[i].name);
		int64_t n = 1;
		if (in_list(params, shapes[i].name) || t->dtype.code != kDLFloat)
			continue;
		for (int d = 0; d < t->ndim; d++)
			n *= t->shape[d];
		for (int64_t e = 0; e < n; e++) {
			double x = (double)((seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 11) * 0x1p-53;
			if (t->dtype.bits == 32)
				((float *)t->data)[e] = (float)x;
			else if (t->dtype.bits == 64)
				((double *)t->data)[e] = x;
		}
	}
	if (tc_model_step(md, NULL) < 0)
		goto fail;
	nk = tc_model_num_kernels(md);
	printf("# tcomp autotune %s --train %s --params %s --optimizer %s", file, train, params,
		optimizer);
	if (ensemble)
		printf(" --ensemble %lld", (long long)ensemble);
	for (int i = 0; i < nshapes; i++)
		printf(" --shape %s=%s", shapes[i].name, shapes[i].path);
	printf("\n");
	if (set->transport && set->transport->size > 1) { /* over the ranks */
		int failed = tune_step_ranks(ctx, md, nk, base, set, v, &total_def, &total_best);
		if (failed < 0)
			goto fail;
		nk = 0; /* nothing more to tune */
		untuned = failed;
	}
	for (int k = 0; k < nk && !interrupted; k++) {
		tc_module *km;
		const char *entry;
		const DLTensor *const *in;
		tc_tune_report rep;
		tc_options *best = NULL;
		char *text;
		int n_in;
		if (tc_model_kernel(md, k, &km, &entry, &in, &n_in) < 0)
			goto fail;
		snprintf(prefix, sizeof(prefix), "kernel %d/%d %s: ", k + 1, nk, entry);
		v->prefix = prefix;
		v->nfinal = 0;
		if (tc_autotune(km, entry, in, n_in, base, set, &best, &rep) < 0) {
			if (v->shown)
				fputs("\n", stderr);
			fprintf(stderr, "tcomp: %s%s", prefix, tc_context_error(ctx));
			status = fail_status(ctx);
			goto out;
		}
		if (v->shown)
			fputs("\n", stderr);
		v->shown = 0;
		printf("#\n# kernel %d/%d: %s", k + 1, nk, entry);
		print_summary(&rep, v, set->final_candidates);
		if ((text = tc_options_print(best))) {
			char line[2048];
			one_line(text, line, sizeof(line));
			printf("# the choice: %s\n", line);
		}
		tc_string_free(text);
		tc_options_free(best);
		total_def += rep.default_s;
		total_best += rep.best_s;
	}
	printf("#\n# the step: defaults %s, tuned %s (%.2fx)%s\n",
		fmt_time(total_def, t1, sizeof(t1)), fmt_time(total_best, t2, sizeof(t2)),
		total_best > 0 ? total_def / total_best : 0,
		interrupted ? "; stopped early" : "");
	status = untuned ? EXIT_USER : 0; /* the ranks' batch may leave some untuned */
	goto out;
fail:
	status = report(ctx);
out:
	tc_model_free(md);
	tc_module_free(m);
	return status;
}

int cmd_autotune(int argc, __tc_keep char **argv)
{
	const char *file = NULL, *entry = NULL;
	binding shapes[64];
	int nshapes = 0, nin = 0, i, n_in = 0, n_out = 0, status = 0;
	binding ins[64];        /* --in T=FILE */
	tc_npy arrays[64];      /* their data */
	int from_file[64];      /* input i: its index in ins, or -1 */
	int64_t dims[64][8];
	DLTensor dl[64];
	const DLTensor *in_ptrs[64];
	tc_tune_settings set;
	tc_tune_report rep;
	tc_context *ctx;
	tc_options *base, *best = NULL;
	opt_args oa = {0};
	tc_module *m = NULL;
	char *text = NULL;
	const char *train = NULL, *params = NULL, *optimizer = "sgd", *batch = NULL;
	int64_t ensemble = 0;
	view v = {0};
	struct sigaction old;
	tc_tune_transport transport;

	enum { OPT_GENERATIONS = OPT_COMMAND, OPT_POPULATION, OPT_ELITES, OPT_JOBS, OPT_RUNS,
		OPT_SEED, OPT_TIMEOUT, OPT_MIN_TIME, OPT_FINAL_CANDIDATES, OPT_FINAL_ROUNDS,
		OPT_FINAL_TIME, OPT_FINAL_WARMUP, OPT_CUTOFF, OPT_MUTATION, OPT_QUIET, OPT_TRAIN,
		OPT_PARAMS, OPT_OPTIMIZER, OPT_ENSEMBLE, OPT_COMPILE_TIMEOUT, OPT_BATCH, OPT_IN };
	static const struct option longopts[] = {CLI_HELP, CLI_ENTRY, CLI_SHAPE, CLI_MAPPING,
		CLI_TARGET, {"cache", required_argument, NULL, OPT_CACHE},
		{"no-cache", no_argument, NULL, OPT_NO_CACHE},
		{"generations", required_argument, NULL, OPT_GENERATIONS},
		{"population", required_argument, NULL, OPT_POPULATION},
		{"elites", required_argument, NULL, OPT_ELITES},
		{"jobs", required_argument, NULL, OPT_JOBS},
		{"runs", required_argument, NULL, OPT_RUNS},
		{"seed", required_argument, NULL, OPT_SEED},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"compile-timeout", required_argument, NULL, OPT_COMPILE_TIMEOUT},
		{"min-time", required_argument, NULL, OPT_MIN_TIME},
		{"final-candidates", required_argument, NULL, OPT_FINAL_CANDIDATES},
		{"final-rounds", required_argument, NULL, OPT_FINAL_ROUNDS},
		{"final-time", required_argument, NULL, OPT_FINAL_TIME},
		{"final-warmup", required_argument, NULL, OPT_FINAL_WARMUP},
		{"cutoff", required_argument, NULL, OPT_CUTOFF},
		{"mutation", required_argument, NULL, OPT_MUTATION},
		{"quiet", no_argument, NULL, OPT_QUIET},
		{"train", required_argument, NULL, OPT_TRAIN},
		{"params", required_argument, NULL, OPT_PARAMS},
		{"optimizer", required_argument, NULL, OPT_OPTIMIZER},
		{"ensemble", required_argument, NULL, OPT_ENSEMBLE},
		{"batch", required_argument, NULL, OPT_BATCH},
		{"in", required_argument, NULL, OPT_IN}, CLI_END};
	int c;

	if (wants_help(argc, argv)) {
		fputs(autotune_usage, stdout);
		return 0;
	}
	tc_tune_settings_init(&set);
	memset(arrays, 0, sizeof(arrays));
	while ((c = cli_next_opt(argc, argv, "he:", longopts, autotune_usage)) != -1) {
		const char *val = optarg;
		char name[32] = "";
		char *end;
		int k;
		/* the option's name for messages: --runs */
		for (k = 0; longopts[k].name; k++)
			if (longopts[k].val == c)
				snprintf(name, sizeof(name), "--%s", longopts[k].name);
		if (take_entry_arg(&entry, shapes, &nshapes, c, val, autotune_usage) ||
			take_opt_arg(&oa, c, val, autotune_usage)) /* --threads too */
			continue;
		switch (c) {
		case OPT_GENERATIONS: set.generations = (int)parse_count(name, val, 1, autotune_usage); break;
		case OPT_POPULATION: set.population = (int)parse_count(name, val, 1, autotune_usage); break;
		case OPT_ELITES: set.elites = (int)parse_count(name, val, 0, autotune_usage); break;
		case OPT_JOBS: set.threads = (int)parse_count(name, val, 1, autotune_usage); break;
		case OPT_RUNS: set.runs = (int)parse_count(name, val, 1, autotune_usage); break;
		case OPT_SEED: set.seed = (uint64_t)parse_count(name, val, 1, autotune_usage); break;
		case OPT_TIMEOUT: set.timeout_s = parse_seconds(name, val); break;
		case OPT_COMPILE_TIMEOUT: set.compile_timeout_s = parse_seconds(name, val); break;
		case OPT_MIN_TIME: set.min_time_s = parse_seconds(name, val); break;
		case OPT_FINAL_CANDIDATES:
			set.final_candidates = (int)parse_count(name, val, 0, autotune_usage);
			break;
		case OPT_FINAL_ROUNDS:
			set.final_rounds = (int)parse_count(name, val, 1, autotune_usage);
			break;
		case OPT_FINAL_TIME: set.final_time_s = parse_seconds(name, val); break;
		case OPT_FINAL_WARMUP: set.final_warmup_s = parse_seconds(name, val); break;
		case OPT_CUTOFF:
			set.cutoff = strtod(val, &end);
			if (end == val || *end || !(set.cutoff >= 1 && set.cutoff <= 1e9))
				die_usage(autotune_usage, "--cutoff needs a factor of at least 1 but found '%s'",
					val);
			break;
		case OPT_MUTATION:
			set.mutation_rate = strtod(val, &end);
			if (end == val || *end || !(set.mutation_rate >= 0 && set.mutation_rate <= 1))
				die_usage(autotune_usage, "--mutation needs a rate in [0, 1] but found '%s'",
					val);
			break;
		case OPT_CACHE: set.cache_path = val; break;
		case OPT_NO_CACHE: set.use_cache = 0; break;
		case OPT_QUIET: v.quiet = 1; break;
		case OPT_TRAIN: train = val; break;
		case OPT_BATCH: batch = val; break;
		case OPT_IN:
			if (nin == 64)
				die_usage(autotune_usage, "%s", "too many --in");
			ins[nin++] = parse_binding(val, autotune_usage);
			break;
		case OPT_PARAMS: params = val; break;
		case OPT_OPTIMIZER: optimizer = val; break;
		case OPT_ENSEMBLE:
			ensemble = strtoll(val, &end, 10);
			if (end == val || *end || ensemble < 1 || ensemble > 1000000)
				die_usage(autotune_usage, "--ensemble needs a number of models of at least 1 but found '%s'",
					val);
			break;
		}
	}
	for (i = optind; i < argc; i++) {
		if (!file)
			file = argv[i];
		else
			die_usage(autotune_usage, "unexpected argument '%s'", argv[i]);
	}
	if (batch && (file || entry || nshapes || nin || train))
		die_usage(autotune_usage, "%s", "--batch FILE lists the kernels: no FILE.tc, -e, "
			"--shape, --in or --train with it");
	if (train && nin)
		die_usage(autotune_usage, "%s", "--train tunes a step on random data: no --in");
	if (!file && !batch)
		die_usage(autotune_usage, "%s", "autotune needs a FILE.tc");
	if (set.elites > set.population)
		die_usage(autotune_usage, "%s", "--elites cannot exceed --population");
	if (set.final_candidates > 64)
		die_usage(autotune_usage, "%s", "--final-candidates can be at most 64");
	if (set.final_rounds > 100)
		die_usage(autotune_usage, "%s", "--final-rounds can be at most 100");
	if (mpi_world_size() > 1) {
		if (!mpi_built()) {
			fprintf(stderr, "tcomp: error: started by an MPI launcher with %d ranks, but this "
				"tcomp was built without MPI: install libopenmpi-dev (make setup) and "
				"rebuild, or run one process\n", mpi_world_size());
			return EXIT_USER;
		}
		if (mpi_start(&argc, &argv, &transport) < 0) {
			fprintf(stderr, "tcomp: error: MPI_Init failed\n");
			return EXIT_INTERNAL;
		}
		if (transport.rank > 0) {
			opt_args_free(&oa);
			bindings_free(shapes, nshapes);
			bindings_free(ins, nin);
			return serve(&transport, set.threads);
		}
		set.transport = &transport;
	}
	ctx = tc_context_new();
	if (!ctx)
		return EXIT_INTERNAL;
	base = build_options(&oa, ctx);
	opt_args_free(&oa);
	if ((train || params) && (!train || !params || entry))
		die_usage(autotune_usage, "%s", train && params ? "--train tunes a step: no -e"
			: "--train FWD,LOSS and --params A,B,... go together");
	if (ensemble && !train)
		die_usage(autotune_usage, "%s", "--ensemble goes with --train");
	v.prefix = "";
	v.tty = isatty(2);
	if (set.transport && !v.quiet) { /* mpirun passes a Ctrl-C on late (README) */
		char host[256] = "";
		gethostname(host, sizeof(host) - 1);
		fprintf(stderr, "tcomp: rank 0 is process %ld on %s: `kill -INT %ld` stops the run "
			"and keeps the best (mpirun's Ctrl-C leaves the ranks 1 s)\n", (long)getpid(),
			host, (long)getpid());
	}
	set.progress = progress;
	set.record = record;
	set.user = &v;
	set.stop = &interrupted;
	if (batch) {
		catch_sigint(&old);
		status = tune_batch(ctx, batch, base, &set, &v);
		sigaction(SIGINT, &old, NULL);
		goto done;
	}
	if (train) {
		catch_sigint(&old);
		status = tune_step(ctx, file, train, params, optimizer, ensemble, shapes, nshapes,
			base, &set, &v);
		sigaction(SIGINT, &old, NULL);
		goto done;
	}
	m = load_entry(ctx, file, &entry, autotune_usage, &status);
	if (!m)
		goto done;
	if (tc_module_def_arity(m, entry, &n_in, &n_out) < 0) {
		status = report(ctx);
		goto done;
	}
	if (n_in > 64) {
		fprintf(stderr, "tcomp: error: '%s' has more than 64 inputs\n", entry);
		status = EXIT_USER;
		goto done;
	}
	if (bind_inputs(m, entry, n_in, shapes, nshapes, ins, nin, arrays, from_file, dl, dims,
		    in_ptrs, autotune_usage) < 0) {
		status = EXIT_USER;
		goto done;
	}
	for (i = 0; i < n_in; i++) /* the others: tc_autotune's random values */
		if (from_file[i] >= 0)
			dl[i].data = arrays[from_file[i]].data;
	catch_sigint(&old);
	i = tc_autotune(m, entry, in_ptrs, n_in, base, &set, &best, &rep);
	sigaction(SIGINT, &old, NULL);
	if (v.shown)
		fputs("\n", stderr);
	if (i < 0) {
		status = report(ctx);
		goto done;
	}
	fputs(tc_context_warnings(ctx), stderr);
	if (!(text = tc_options_print(best))) {
		status = EXIT_INTERNAL;
		goto done;
	}
	printf("# tcomp autotune %s -e %s", file, entry);
	for (i = 0; i < n_in; i++) {
		int d;
		if (from_file[i] >= 0) {
			printf(" --in %s=%s", ins[from_file[i]].name, ins[from_file[i]].path);
			continue;
		}
		printf(" --shape %s=", tc_module_tensor_name(m, entry, i));
		if (!dl[i].ndim)
			printf("scalar");
		for (d = 0; d < dl[i].ndim; d++)
			printf("%s%lld", d ? "x" : "", (long long)dl[i].shape[d]);
	}
	print_summary(&rep, &v, set.final_candidates);
	fputs(text, stdout);
done:
	if (set.transport) {
		int *measured = calloc((size_t)transport.size, sizeof(int));
		int lost = tc_tune_dismiss(set.transport, measured);
		if (measured && !v.quiet) {
			int jobs = batch || train; /* whole kernels went to the ranks */
			fprintf(stderr, "tcomp: %s by rank:", jobs ? "kernels tuned" : "candidates measured");
			for (i = 0; i < transport.size; i++)
				fprintf(stderr, " %d", measured[i]);
			fprintf(stderr, "%s\n", jobs ? "" : " (rank 0: the reference)");
		}
		free(measured);
		if (lost)
			fprintf(stderr, "tcomp: warning: %d of the %d ranks %s given up during the run\n",
				lost, transport.size - 1, lost == 1 ? "was" : "were");
		mpi_end(lost, status);
	}
	tc_string_free(text);
	bindings_free(shapes, nshapes);
	bindings_free(ins, nin);
	for (i = 0; i < nin; i++)
		tc_npy_free(&arrays[i]);
	tc_options_free(best);
	tc_options_free(base);
	tc_module_free(m);
	tc_context_free(ctx);
	return status;
}
