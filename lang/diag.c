/* Source files and located diagnostics. */
#include "diag.h"

#include <stdio.h>
#include <string.h>

tc_source *tc_source_new(const char *name, const char *text, size_t size)
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

void tc_source_free(tc_source *src)
{
	if (!src)
		return;
	tc_free(src->name);
	tc_free(src->text);
	tc_free(src->line_off);
	tc_free(src);
}

tc_loc tc_source_loc(const tc_source *src, int off, int len)
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

void tc_diags_init(tc_diags *d, const tc_source *src)
{
	memset(d, 0, sizeof(*d));
	d->src = src;
}

void tc_diags_clear(tc_diags *d)
{
	int i;
	for (i = 0; i < d->n; i++)
		tc_free(d->v[i].msg);
	tc_free(d->v);
	d->v = NULL;
	d->n = d->cap = d->nerrors = d->nwarnings = d->oom = 0;
}

void tc_diag_vadd(tc_diags *d, tc_severity sev, tc_loc loc, const char *fmt,
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

void tc_diag_add(tc_diags *d, tc_severity sev, tc_loc loc, const char *fmt, ...)
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
	for (i = 0; i < start; i++)
		tc_buf_putc(b, line[i] == '\t' ? '\t' : ' ');
	tc_buf_putc(b, '^');
	n = loc.len;
	if (start + n > end - line)
		n = (int)(end - line) - start;
	for (i = 1; i < n; i++)
		tc_buf_putc(b, '~');
	tc_buf_putc(b, '\n');
}

void tc_diag_render_one(const tc_source *src, tc_severity sev, tc_loc loc,
	const char *msg, tc_buf *b)
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

void tc_diags_render(const tc_diags *d, unsigned sev_mask, tc_buf *b)
{
	int i;
	int shown = 0; /* whether the diagnostic a note belongs to was shown */
	for (i = 0; i < d->n; i++) {
		const tc_diag *g = &d->v[i];
		if (g->sev == TC_SEV_NOTE ? !shown : !(sev_mask & (1u << g->sev))) {
			if (g->sev != TC_SEV_NOTE)
				shown = 0;
			continue;
		}
		if (g->sev != TC_SEV_NOTE)
			shown = 1;
		tc_diag_render_one(d->src, g->sev, g->loc, g->msg, b);
	}
	if (d->nerrors > (d->limit ? d->limit : 100))
		tc_buf_printf(b, "error: too many errors (%d), stopped reporting\n",
			d->nerrors);
	if (d->oom)
		tc_buf_puts(b, "error: out of memory while reporting errors\n");
}

void tc_buf_free_diag(tc_buf *b, tc_diags *d)
{
	if (b->oom)
		d->oom = 1;
	tc_buf_free(b);
}
