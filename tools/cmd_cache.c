/* tcomp cache list|show|export|import|prune: manage the kernel cache (see
 * runtime/cache.h), and the --cache PATH / --no-cache arguments of run and
 * bench.
 *
 * The management commands use the library's internal cache modules
 * (runtime/cache_ops.h over the storage of runtime/cache.h) directly: they
 * administer a file, and the public API only needs to read it
 * (tc_compile).  list, show and export never create or modify the file;
 * import creates it; prune changes it only when it exists. */
#include "cli.h"

#include "../runtime/cache_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const cache_usage =
	"usage: tcomp cache list   [--cache PATH]\n"
	"       tcomp cache show   [WHAT] [--cache PATH]\n"
	"       tcomp cache export [--cache PATH] [-o FILE]\n"
	"       tcomp cache import FILE... [--cache PATH]\n"
	"       tcomp cache prune  [--other-versions] [--failed] [--older-than DAYS]\n"
	"                          [--keep-best] [--cache PATH]\n"
	"       tcomp cache path   [--cache PATH]\n"
	"\n"
	"The kernel cache holds the options the autotuner measured for each kernel,\n"
	"shape and machine; tc_compile (and tcomp run and bench) use the best\n"
	"entry for the same shapes, else for the nearest shapes: the autotuner's\n"
	"final choice (its run id ends in /chosen) when one was recorded, else the\n"
	"fastest measured.  It is one SQLite\n"
	"file: --cache PATH, else $TCOMP_CACHE, else\n"
	"$XDG_CACHE_HOME/tcomp/kernels.sqlite, else ~/.cache/tcomp/kernels.sqlite.\n"
	"A read-only file is read: list, show and export work, import and prune\n"
	"say it is read-only.  A file that is not a tcomp kernel cache is never\n"
	"modified.\n"
	"\n"
	"  list     one line per key: kernel hash, entry, input shapes, best median\n"
	"           time, the defaults' median time and the speedup of the best over\n"
	"           the defaults (when the defaults were measured), runs, failed\n"
	"           runs, tcomp version and CPU\n"
	"  show     every key (or those whose hash or entry is WHAT, or with\n"
	"           WHAT = ENTRY@SHAPES as list prints them) with its target, kernel\n"
	"           text and every run, best first\n"
	"  export   every run as one JSON object per line (the key with it), to\n"
	"           stdout or FILE: share tuned results with tcomp cache import\n"
	"  import   add the runs of exported JSON lines ('-' reads stdin); runs\n"
	"           already present are not added twice; every field is checked:\n"
	"           lines that do not parse, with a malformed key (entry, types,\n"
	"           shapes, strides, target, version), whose kernel text does not\n"
	"           match its hash, whose options are invalid or whose times are\n"
	"           not finite are skipped with a warning, and the exit status is\n"
	"           then 1 (the other lines are imported)\n"
	"  prune    delete runs: --other-versions (keys of another tcomp version),\n"
	"           --failed (failed runs), --older-than DAYS (runs recorded more\n"
	"           than DAYS ago), --keep-best (all but each key's best run and its\n"
	"           defaults run); without any, --other-versions --failed.  Keys left\n"
	"           without runs go too, then the file is compacted\n"
	"  path     print the path of the cache file\n";

/* Take --cache PATH, --no-cache or --cache-result-options (cli.h). */
int take_cache_arg(__tc_keep cache_args *ca, int code, const char *arg)
{
	if (code == OPT_CACHE)
		ca->path = arg;
	else if (code == OPT_NO_CACHE)
		ca->off = 1;
	else if (code == OPT_CACHE_RESULT_OPTIONS)
		ca->result_options = 1;
	else
		return 0;
	return 1;
}

/* Point ctx's compiles at the cache of ca (cli.h). */
void apply_cache_args(__tc_keep const cache_args *ca, __tc_keep tc_context *ctx)
{
	if (tc_context_set_cache(ctx, ca->off ? "" : ca->path) < 0 ||
		tc_context_set_cache_result_options(ctx, ca->result_options) < 0)
		exit(EXIT_INTERNAL);
}

/* The options of tcomp run or bench given --threads N and --target T
 * alone (cli.h). */
__tc_give tc_options *threads_cache_options(__tc_keep const cache_args *ca, __tc_keep tc_module *m,
	const char *entry, __tc_keep const DLTensor *const *in, int n_in,
	__tc_keep const tc_options *given, const char *n, const char **source)
{
	const char *target = tc_options_get(given, "target");
	char *path = NULL, *msg = NULL;
	tc_cache *c = NULL;
	tc_cache_key key;
	tc_cache_hit hit;
	tc_options *o = NULL;
	struct stat sb;
	int r = 0, have_key = 0;
	*source = n ? "default+threads" : "user"; /* --target T alone: as given */
	memset(&hit, 0, sizeof(hit));
	if (ca->off)
		goto done;
	path = ca->path ? tc_strdup(ca->path) : tc_cache_default_path();
	if (!path || stat(path, &sb) < 0) /* no cache */
		goto done;
	if (!(c = tc_cache_open(path, TC_CACHE_READ, &msg))) {
		if (msg) /* as tc_compile says it */
			fprintf(stderr, "warning: %s; using the default options\n", msg);
		goto done;
	}
	/* keyed for the target given (cuda-emu's entries are its own) */
	if (tc_cache_key_init_for(&key, m, entry, in, n_in, given, NULL) < 0)
		goto done; /* tc_compile will say why */
	have_key = 1;
	r = tc_cache_lookup(c, &key, &hit);
	if (r == 0)
		r = tc_cache_lookup_near(c, &key, &hit);
	if (r == 0)
		r = tc_cache_lookup_other_cpu(c, &key, &hit);
	if (r < 0)
		fprintf(stderr, "warning: %s; using the default options\n", tc_cache_error(c));
	fputs(tc_cache_warnings(c), stderr);
	if (r == 1 && !tc_cache_same_key_target(hit.options, given)) {
		/* a row recorded under this key for another target (before
		 * the key told cuda-emu from the CPU) */
		fprintf(stderr, "note: kernel cache '%s': the entry for '%s' (%s) was tuned for "
				"target=%s: not used for target=%s\n",
			path, entry, hit.shapes, tc_options_get(hit.options, "target"), target);
		r = 0;
	}
	if (r == 1 && (!n || !strcmp(tc_options_get(hit.options, "threads"), n)) &&
		tc_cache_keys_as_device(given, n_in ? in[0]->device.device_type : kDLCPU)) {
		*source = NULL; /* as tuned: tc_compile finds it itself */
	} else if (r == 1) {
		tc_buf what;
		int kept = 0;
		int same = !strcmp(tc_options_get(hit.options, "target"), target);
		tc_buf_init(&what);
		if (!(o = tc_options_copy(hit.options)) ||
			(n && tc_options_set(o, "threads", n, NULL) < 0) ||
			(!ca->result_options &&
				(kept = same ? tc_cache_keep_results_but_target(o, &what)
					     : tc_cache_keep_results(o, &what)) < 0) ||
			/* --target T (not the default): T, whatever the entry's */
			(strcmp(target, tc_options_get(NULL, "target")) &&
				tc_options_set(o, "target", target, NULL) < 0))
			exit(EXIT_INTERNAL);
		if (kept) /* as tc_compile says it */
			fprintf(stderr, "note: kernel cache '%s': the entry for '%s' (%s) sets %s, "
					"which change%s results: not applied (--cache-result-options)\n",
				path, entry, hit.shapes, what.s, kept == 1 ? "s" : "");
		tc_buf_free(&what);
		*source = hit.target ? (n ? "cache-other-cpu+threads" : "cache-other-cpu")
			: hit.distance > 0 || strcmp(hit.shapes, key.shapes)
			? (n ? "cache-near+threads" : "cache-near")
			: (n ? "cache+threads" : "cache");
	}
done:
	if (*source && !o && !(o = tc_options_copy(given)))
		exit(EXIT_INTERNAL);
	tc_cache_hit_clear(&hit);
	if (have_key)
		tc_cache_key_clear(&key);
	tc_cache_close(c);
	tc_free(msg);
	tc_free(path);
	return o;
}

/* Print what ctx's warnings gained since they were from chars long. */
void print_new_warnings(__tc_keep tc_context *ctx, size_t from)
{
	const char *w = tc_context_warnings(ctx);
	if (strlen(w) > from)
		fputs(w + from, stderr);
}

/* Open the cache of path (NULL: the default) for mode; NULL when there is
 * none to read (a note on stderr, *status 0) or it cannot be used (the
 * message, *status 1). */
static tc_cache *open_cache(const char *path, tc_cache_mode mode, int *status)
{
	char *msg = NULL, *p = path ? tc_strdup(path) : tc_cache_default_path();
	tc_cache *c;
	*status = 0;
	if (!p) {
		fprintf(stderr, "tcomp: error: no kernel cache location: set TCOMP_CACHE or HOME, "
				"or give --cache PATH\n");
		*status = EXIT_USER;
		return NULL;
	}
	c = tc_cache_open(p, mode, &msg);
	if (!c && msg) {
		fprintf(stderr, "tcomp: error: %s\n", msg);
		*status = EXIT_USER;
	} else if (!c)
		fprintf(stderr, "tcomp: note: no kernel cache at %s\n", p);
	tc_free(msg);
	tc_free(p);
	return c;
}

static void print_warnings(tc_cache *c)
{
	fputs(tc_cache_warnings(c), stderr);
}

static int write_out(const char *file, const char *text)
{
	FILE *fp = file ? fopen(file, "w") : stdout;
	if (!fp) {
		fprintf(stderr, "tcomp: error: cannot write '%s': %s\n", file ? file : "-",
			strerror(errno));
		return EXIT_USER;
	}
	fputs(text, fp);
	if (file && fclose(fp) != 0) {
		fprintf(stderr, "tcomp: error: cannot write '%s': %s\n", file ? file : "-",
			strerror(errno));
		return EXIT_USER;
	}
	return 0;
}

/* Read FILE ('-': stdin) whole; NULL with a message. */
static char *slurp(const char *file)
{
	FILE *fp = strcmp(file, "-") ? fopen(file, "rb") : stdin;
	char *s = NULL, buf[65536];
	size_t n, len = 0;
	if (!fp) {
		fprintf(stderr, "tcomp: error: cannot open '%s': %s\n", file, strerror(errno));
		return NULL;
	}
	while ((n = fread(buf, 1, sizeof(buf), fp)) > 0) {
		char *t = realloc(s, len + n + 1);
		if (!t) {
			free(s);
			s = NULL;
			break;
		}
		s = t;
		memcpy(s + len, buf, n);
		len += n;
	}
	if (fp != stdin)
		fclose(fp);
	if (!s && !(s = calloc(1, 1)))
		return NULL;
	s[len] = 0;
	return s;
}

/* tcomp cache ... */
int cmd_cache(int argc, __tc_keep char **argv)
{
	const char *sub, *out = NULL, *what = NULL, *files[64];
	tc_cache_prune_opts po = {0};
	cache_args ca = {0};
	int i, nfiles = 0, status = 0, any_prune = 0;
	tc_cache *c = NULL;
	tc_buf b;

	enum { OPT_OTHER_VERSIONS = OPT_COMMAND, OPT_FAILED, OPT_KEEP_BEST, OPT_OLDER_THAN };
	static const struct option longopts[] = {CLI_HELP, CLI_CACHE,
		{"other-versions", no_argument, NULL, OPT_OTHER_VERSIONS},
		{"failed", no_argument, NULL, OPT_FAILED},
		{"keep-best", no_argument, NULL, OPT_KEEP_BEST},
		{"older-than", required_argument, NULL, OPT_OLDER_THAN}, CLI_END};
	int opt, prune_opt = 0;

	if (wants_help(argc, argv)) {
		fputs(cache_usage, stdout);
		return 0;
	}
	while ((opt = cli_next_opt(argc, argv, "ho:", longopts, cache_usage)) != -1) {
		if (take_cache_arg(&ca, opt, optarg)) {
			if (ca.off || ca.result_options)
				die_usage(cache_usage, "%s", "--no-cache and --cache-result-options are "
							     "for tcomp run and bench");
		} else if (opt == OPT_OUTPUT)
			out = optarg;
		else if (opt == OPT_OTHER_VERSIONS)
			po.other_versions = prune_opt = 1;
		else if (opt == OPT_FAILED)
			po.failed = prune_opt = 1;
		else if (opt == OPT_KEEP_BEST)
			po.all_but_best = prune_opt = 1;
		else if (opt == OPT_OLDER_THAN) {
			char *end;
			double d = strtod(optarg, &end);
			if (end == optarg || *end || !(d >= 0) || d > 1e6)
				die_usage(cache_usage, "--older-than needs a number of days but found '%s'",
					optarg);
			po.older_than_s = d * 86400;
			prune_opt = 1;
		}
	}
	if (optind >= argc)
		die_usage(cache_usage, "%s", "cache needs a command: list, show, export, import, "
					     "prune or path");
	sub = argv[optind];
	if (strcmp(sub, "list") && strcmp(sub, "show") && strcmp(sub, "export") &&
		strcmp(sub, "import") && strcmp(sub, "prune") && strcmp(sub, "path"))
		die_usage(cache_usage, "unknown cache command '%s'", sub);
	if (out && strcmp(sub, "export"))
		die_usage(cache_usage, "%s", "-o is for tcomp cache export");
	if (prune_opt && strcmp(sub, "prune"))
		die_usage(cache_usage, "%s", "--other-versions, --failed, --keep-best and "
					     "--older-than are for tcomp cache prune");
	any_prune = prune_opt;
	for (i = optind + 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(sub, "import") && nfiles < 64)
			files[nfiles++] = a;
		else if (!strcmp(sub, "show") && !what)
			what = a;
		else
			die_usage(cache_usage, "unexpected argument '%s'", a);
	}
	if (!strcmp(sub, "import") && !nfiles)
		die_usage(cache_usage, "%s", "import needs a FILE (or - for stdin)");
	if (!strcmp(sub, "path")) {
		char *p = ca.path ? tc_strdup(ca.path) : tc_cache_default_path();
		if (!p) {
			fprintf(stderr, "tcomp: error: no kernel cache location: set TCOMP_CACHE or "
					"HOME\n");
			return EXIT_USER;
		}
		printf("%s\n", p);
		tc_free(p);
		return 0;
	}
	if (!strcmp(sub, "prune") && !any_prune)
		po.other_versions = po.failed = 1;
	if (!strcmp(sub, "prune")) { /* only an existing file: never create one */
		char *p = ca.path ? tc_strdup(ca.path) : tc_cache_default_path();
		struct stat sb;
		int known = p != NULL, there = known && stat(p, &sb) == 0;
		if (known && !there)
			fprintf(stderr, "tcomp: note: no kernel cache at %s\n", p);
		tc_free(p);
		if (!there)
			return known ? 0 : EXIT_USER;
	}
	c = open_cache(ca.path, !strcmp(sub, "import") ? TC_CACHE_WRITE
			  : !strcmp(sub, "prune")	 ? TC_CACHE_WRITE
							 : TC_CACHE_READ,
		&status);
	if (!c)
		return status;
	tc_buf_init(&b);
	if (!strcmp(sub, "list")) {
		if (tc_cache_list(c, &b) < 0)
			goto db_error;
		status = write_out(NULL, b.s ? b.s : "");
	} else if (!strcmp(sub, "show")) {
		int n = tc_cache_show(c, what, &b);
		if (n < 0)
			goto db_error;
		if (n == 0) {
			fprintf(stderr, "tcomp: error: no entry %s%s in %s\n", what ? "matches " : "",
				what ? what : "", tc_cache_path(c));
			status = EXIT_USER;
		} else
			status = write_out(NULL, b.s);
	} else if (!strcmp(sub, "export")) {
		if (tc_cache_export(c, &b) < 0)
			goto db_error;
		status = write_out(out, b.s ? b.s : "");
	} else if (!strcmp(sub, "import")) {
		int all_skipped = 0;
		for (i = 0; i < nfiles && !status; i++) {
			char *text = slurp(files[i]);
			int added, present, skipped;
			if (!text) {
				status = EXIT_USER;
				break;
			}
			if (tc_cache_import(c, text, &added, &present, &skipped) < 0) {
				free(text);
				goto db_error;
			}
			free(text);
			printf("%s: %d run%s added, %d already present, %d line%s skipped\n",
				files[i], added, added == 1 ? "" : "s", present, skipped,
				skipped == 1 ? "" : "s");
			all_skipped += skipped;
		}
		if (all_skipped) { /* the warnings below say which and why */
			print_warnings(c);
			fprintf(stderr, "tcomp: error: %d line%s skipped (the others were imported)\n",
				all_skipped, all_skipped == 1 ? " was" : "s were");
			tc_buf_free(&b);
			tc_cache_close(c);
			return EXIT_USER;
		}
	} else { /* prune */
		int removed;
		if (tc_cache_prune(c, &po, &removed) < 0)
			goto db_error;
		printf("%d run%s removed from %s\n", removed, removed == 1 ? "" : "s",
			tc_cache_path(c));
	}
	print_warnings(c);
	tc_buf_free(&b);
	tc_cache_close(c);
	return status;
db_error:
	print_warnings(c);
	fprintf(stderr, "tcomp: error: %s\n", tc_cache_error(c));
	tc_buf_free(&b);
	tc_cache_close(c);
	return EXIT_USER;
}
