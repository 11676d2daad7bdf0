/* Source files and located diagnostics. */
#include "diag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__tc_give tc_source *tc_source_new(const char *name, __tc_keep const char *text, size_t size)
{
	tc_source *src = tc_calloc(1, sizeof(*src));
	size_t i;
	int n = 1, k = 0;

	if (!src)
		return NULL;
	src->name = tc_strdup(name ? name : "<input>");
	src->text = tc_strndup(text, size);
	src->size = size;
	for (i = 0; i < size; i++)
		if (text[i] == '\n')
			n++;
	src->line_off = tc_malloc((size_t)n * sizeof(int));
	if (!src->name || !src->text || !src->line_off) {
		tc_source_free(src);
		return NULL;
	}
	src->nlines = n;
	src->line_off[k++] = 0;
	for (i = 0; i < size; i++)
		if (text[i] == '\n')
			src->line_off[k++] = (int)i + 1;
	return src;
}

void tc_source_free(__tc_take tc_source *src)
{
	if (!src)
		return;
	tc_free(src->name);
	tc_free(src->text);
	tc_free(src->line_off);
	tc_free(src);
}

tc_loc tc_source_loc(__tc_keep const tc_source *src, int off, int len)
{
	tc_loc loc;
	int lo = 0, hi = src->nlines - 1;

	while (lo < hi) { /* last line whose start is <= off */
		int mid = (lo + hi + 1) / 2;
		if (src->line_off[mid] <= off)
			lo = mid;
		else
			hi = mid - 1;
	}
	loc.off = off;
	loc.len = len;
	loc.line = lo + 1;
	loc.col = off - src->line_off[lo] + 1;
	return loc;
}

tc_loc tc_loc_join(tc_loc a, tc_loc b)
{
	tc_loc r;
	int end;
	if (!a.line)
		return b;
	if (!b.line)
		return a;
	r = a.off <= b.off ? a : b;
	end = a.off + a.len > b.off + b.len ? a.off + a.len : b.off + b.len;
	r.len = end - r.off;
	return r;
}

void tc_diags_init(__tc_keep tc_diags *d, __tc_keep const tc_source *src)
{
	memset(d, 0, sizeof(*d));
	d->src = src;
}

void tc_diags_clear(__tc_keep tc_diags *d)
{
	int i;
	for (i = 0; i < d->n; i++)
		tc_free(d->v[i].msg);
	tc_free(d->v);
	d->v = NULL;
	d->n = d->cap = d->nerrors = d->nwarnings = d->oom = 0;
}

void tc_diag_vadd(__tc_keep tc_diags *d, tc_severity sev, tc_loc loc, const char *fmt,
	va_list ap)
{
	tc_buf b;
	int limit = d->limit ? d->limit : 100;

	if (sev == TC_SEV_ERROR)
		d->nerrors++;
	else if (sev == TC_SEV_WARNING)
		d->nwarnings++;
	if (sev == TC_SEV_ERROR && d->nerrors > limit)
		return;
	if (d->n == d->cap) {
		int cap = d->cap ? 2 * d->cap : 8;
		tc_diag *v = tc_realloc(d->v, (size_t)cap * sizeof(*v));
		if (!v) {
			d->oom = 1;
			return;
		}
		d->v = v;
		d->cap = cap;
	}
	tc_buf_init(&b);
	tc_buf_vprintf(&b, fmt, ap);
	d->v[d->n].msg = tc_buf_take(&b);
	if (!d->v[d->n].msg) {
		d->oom = 1;
		return;
	}
	d->v[d->n].sev = sev;
	d->v[d->n].loc = loc;
	d->n++;
}

void tc_diag_add(__tc_keep tc_diags *d, tc_severity sev, tc_loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tc_diag_vadd(d, sev, loc, fmt, ap);
	va_end(ap);
}

static const char *sev_name(tc_severity sev)
{
	switch (sev) {
	case TC_SEV_ERROR: return "error";
	case TC_SEV_WARNING: return "warning";
	default: return "note";
	}
}

/* Print the source line of loc with a caret under its first character and
 * '~' under the rest of the culprit (up to the end of the line).  Tabs in the
 * prefix are kept so the caret lines up in a terminal. */
static void render_line(const tc_source *src, tc_loc loc, tc_buf *b)
{
	const char *line, *end;
	int i, start, n;

	if (loc.line < 1 || loc.line > src->nlines)
		return;
	line = src->text + src->line_off[loc.line - 1];
	end = strchr(line, '\n');
	if (!end)
		end = src->text + src->size;
	if (end > line && end[-1] == '\r')
		end--;
	tc_buf_puts(b, "  ");
	tc_buf_putn(b, line, (size_t)(end - line));
	tc_buf_puts(b, "\n  ");
	start = loc.col - 1;
	if (start > end - line)
		start = (int)(end - line);
	/* one column per character: UTF-8 continuation bytes take none */
	for (i = 0; i < start; i++)
		if (((unsigned char)line[i] & 0xC0) != 0x80)
			tc_buf_putc(b, line[i] == '\t' ? '\t' : ' ');
	tc_buf_putc(b, '^');
	n = loc.len;
	if (start + n > end - line)
		n = (int)(end - line) - start;
	for (i = 1; i < n; i++)
		if (((unsigned char)line[start + i] & 0xC0) != 0x80)
			tc_buf_putc(b, '~');
	tc_buf_putc(b, '\n');
}

void tc_diag_render_one(__tc_keep const tc_source *src, tc_severity sev, tc_loc loc,
	const char *msg, __tc_keep tc_buf *b)
{
	if (src && loc.line)
		tc_buf_printf(b, "%s:%d:%d: %s: %s\n", src->name, loc.line,
			loc.col, sev_name(sev), msg);
	else if (src)
		tc_buf_printf(b, "%s: %s: %s\n", src->name, sev_name(sev), msg);
	else
		tc_buf_printf(b, "%s: %s\n", sev_name(sev), msg);
	if (src && loc.line)
		render_line(src, loc, b);
}

/* Groups (a diagnostic and the notes after it) are rendered in order of
 * source position; those without a location come after, in their order. */
typedef struct group {
	const tc_diag *g;
	int index;
} group;

static int group_cmp(const void *pa, const void *pb)
{
	const group *a = pa, *b = pb;
	if (!a->g->loc.line != !b->g->loc.line)
		return a->g->loc.line ? -1 : 1;
	if (a->g->loc.line && a->g->loc.off != b->g->loc.off)
		return a->g->loc.off < b->g->loc.off ? -1 : 1;
	return a->index - b->index;
}

void tc_diags_render(__tc_keep const tc_diags *d, unsigned sev_mask, __tc_keep tc_buf *b)
{
	int i, k, n = 0;
	group *groups = tc_malloc((size_t)(d->n + 1) * sizeof(group));

	if (!groups) {
		b->oom = 1;
		return;
	}
	for (i = 0; i < d->n; i++)
		if (d->v[i].sev != TC_SEV_NOTE || !i) {
			groups[n].g = &d->v[i];
			groups[n++].index = i;
		}
	qsort(groups, (size_t)n, sizeof(group), group_cmp);
	for (k = 0; k < n; k++) {
		if (!(sev_mask & (1u << groups[k].g->sev)))
			continue; /* and its notes */
		for (i = groups[k].index; i < d->n && (i == groups[k].index ||
				d->v[i].sev == TC_SEV_NOTE); i++)
			tc_diag_render_one(d->src, d->v[i].sev, d->v[i].loc, d->v[i].msg, b);
	}
	tc_free(groups);
	if (d->nerrors > (d->limit ? d->limit : 100))
		tc_buf_printf(b, "error: too many errors (%d), stopped reporting\n",
			d->nerrors);
	if (d->oom)
		tc_buf_puts(b, "error: out of memory while reporting errors\n");
}

void tc_buf_free_diag(__tc_keep tc_buf *b, __tc_keep tc_diags *d)
{
	if (b->oom)
		d->oom = 1;
	tc_buf_free(b);
}
