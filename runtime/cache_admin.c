/* The text of tcomp cache list and show (runtime/cache_ops.h): the kernel
 * cache's keys and runs, as the storage (runtime/cache.h) iterates them,
 * laid out for a reader.
 *
 * Owns: tc_cache_list and tc_cache_show, and how they print a key, a run,
 * a target's CPU and multi-line options.
 * Must not know: SQL (rows come from tc_cache_each_summary, _each_entry
 * and _each_run), modules, code generation. */
#include "cache_ops.h"

#include <string.h>

/* The CPU part of a target "triple;cpu;features". */
static void put_cpu(tc_buf *b, const char *target)
{
	const char *p = strchr(target, ';'), *q;
	if (!p) {
		tc_buf_puts(b, target);
		return;
	}
	q = strchr(p + 1, ';');
	tc_buf_putn(b, p + 1, q ? (size_t)(q - p - 1) : strlen(p + 1));
}

/* text on one line: newlines become "; " (for list and show). */
static void put_one_line(tc_buf *b, const char *text)
{
	const char *p;
	for (p = text; *p; p++) {
		if (*p == '\n') {
			if (p[1])
				tc_buf_puts(b, "; ");
		} else
			tc_buf_putc(b, *p);
	}
}

/* text with each line indented by ind, ending in a newline. */
static void put_indented(tc_buf *b, const char *text, const char *ind)
{
	const char *p = text, *e;
	while (*p) {
		e = strchr(p, '\n');
		if (!e)
			e = p + strlen(p);
		tc_buf_puts(b, ind);
		tc_buf_putn(b, p, (size_t)(e - p));
		tc_buf_putc(b, '\n');
		p = *e ? e + 1 : e;
	}
}

/* One line of list: a key and its summary. */
static int list_entry(void *user, __tc_keep const tc_cache_entry *e)
{
	tc_buf *b = user;
	tc_buf_printf(b, "%-16s  %-12s %-24s ", e->hash, e->entry, *e->shapes ? e->shapes : "-");
	if (e->has_best)
		tc_buf_printf(b, "%10.4g ", e->best_ms);
	else
		tc_buf_printf(b, "%10s ", "-");
	if (e->has_default)
		tc_buf_printf(b, "%10.4g ", e->default_ms);
	else
		tc_buf_printf(b, "%10s ", "-");
	if (e->has_best && e->has_default && e->best_ms > 0)
		tc_buf_printf(b, "%7.2fx ", e->default_ms / e->best_ms);
	else
		tc_buf_printf(b, "%8s ", "-");
	tc_buf_printf(b, "%5d %6d  %s ", e->runs, e->failed, e->version);
	put_cpu(b, e->target);
	if (e->objects)
		tc_buf_puts(b, " +code");
	tc_buf_putc(b, '\n');
	return 0;
}

int tc_cache_list(__tc_keep tc_cache *c, __tc_keep tc_buf *b)
{
	int n;
	if (!c)
		return -1;
	tc_buf_printf(b, "%-16s  %-12s %-24s %10s %10s %8s %5s %6s  %s\n", "hash", "entry",
		"shapes", "best_ms", "default_ms", "speedup", "runs", "failed", "version cpu");
	if ((n = tc_cache_each_summary(c, list_entry, b)) < 0)
		return -1;
	if (!n)
		tc_buf_printf(b, "(no entries in %s)\n", tc_cache_path(c));
	return 0;
}

/* What show's callbacks share: the cache (for the runs of each key) and
 * the text. */
typedef struct show_state {
	tc_cache *c;
	tc_buf *b;
	int n; /* keys shown so far */
} show_state;

/* One run of a key in show. */
static int show_run(void *user, __tc_keep const tc_cache_run_row *r)
{
	tc_buf *b = user;
	if (!strcmp(r->status, "ok"))
		tc_buf_printf(b, "    #%-6lld median %10.4g ms  min %10.4g ms", (long long)r->id,
			r->median_ms, r->min_ms);
	else
		tc_buf_printf(b, "    #%-6lld failed%37s", (long long)r->id, "");
	tc_buf_printf(b, "  %s UTC  run %s%s\n      ", r->at, *r->run_id ? r->run_id : "-",
		r->is_default ? "  (defaults)" : "");
	put_one_line(b, r->options);
	tc_buf_putc(b, '\n');
	return 0;
}

/* One key in show, with its runs. */
static int show_entry(void *user, __tc_keep const tc_cache_entry *e)
{
	show_state *s = user;
	tc_buf *b = s->b;
	tc_buf_printf(b, "%s%s %s@%s\n", s->n ? "\n" : "", e->hash, e->entry, e->shapes);
	tc_buf_printf(b, "  inputs   %s  shapes %s  strides %s\n", e->types, e->shapes,
		e->strides);
	tc_buf_printf(b, "  target   %s\n", e->target);
	tc_buf_printf(b, "  version  tcomp %s, first recorded %s UTC\n", e->version, e->created);
	tc_buf_printf(b, "  kernel\n");
	put_indented(b, e->canonical, "    ");
	tc_buf_printf(b, "  runs (best first):\n");
	if (tc_cache_each_run(s->c, e->id, show_run, b) < 0)
		return -1;
	s->n++;
	return 0;
}

int tc_cache_show(__tc_keep tc_cache *c, const char *what, __tc_keep tc_buf *b)
{
	show_state s = {c, b, 0};
	if (!c)
		return -1;
	return tc_cache_each_entry(c, what, show_entry, &s);
}
