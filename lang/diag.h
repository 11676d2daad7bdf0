/* Source files and diagnostics.
 *
 * A tc_source holds the text of one .tc file and its line table.  A tc_diags
 * accumulates errors and warnings, each at a tc_loc, and renders them as
 *
 *   file:line:col: error: message
 *     source line
 *     ^~~~~
 *
 * Ownership: a tc_source is the caller's (tc_source_new, tc_source_free)
 * and owns copies of its name and text.  A tc_diags struct is the caller's
 * (usually on the stack) and owns its messages until tc_diags_clear; it
 * borrows its source, which must outlive it. */
#ifndef TC_DIAG_H
#define TC_DIAG_H

#include "util.h"

/* A source location: byte offset and length of the culprit in the text,
 * with 1-based line and column of its start.  line == 0 means "no location". */
typedef struct tc_loc {
	int off, len;
	int line, col;
} tc_loc;

/* The text of one source file and where its lines start; owns every
 * pointer in it. */
typedef struct tc_source {
	char *name; /* file name used in messages */
	char *text; /* NUL-terminated contents */
	size_t size;
	int nlines;
	int *line_off; /* byte offset of the start of each line (0-based index) */
} tc_source;

/* Copy name (NULL: "<input>") and text[0..size) and index its lines.  NULL
 * on allocation failure. */
__tc_give tc_source *tc_source_new(const char *name, __tc_keep const char *text, size_t size);
/* Free src and its copies (NULL: nothing). */
void tc_source_free(__tc_take tc_source *src);
/* Location of byte range [off, off+len). */
tc_loc tc_source_loc(__tc_keep const tc_source *src, int off, int len);
/* The smallest location covering a and b. */
tc_loc tc_loc_join(tc_loc a, tc_loc b);

/* How bad a diagnostic is. */
typedef enum tc_severity {
	TC_SEV_ERROR,   /* the program is rejected */
	TC_SEV_WARNING, /* accepted, but probably not what was meant */
	TC_SEV_NOTE,    /* attached to the previous diagnostic */
} tc_severity;

/* One diagnostic; msg is owned by the tc_diags holding it. */
typedef struct tc_diag {
	tc_severity sev;
	tc_loc loc;
	char *msg;
} tc_diag;

/* A list of diagnostics about one source (which may be NULL for run-time
 * errors with no location). */
typedef struct tc_diags {
	const tc_source *src;
	tc_diag *v;
	int n, cap;
	int nerrors, nwarnings;
	int oom; /* an allocation failed while recording */
	int limit; /* stop recording errors past this many (0: 100) */
} tc_diags;

/* Make d an empty list about src (NULL: none; borrowed: it must outlive d). */
void tc_diags_init(__tc_keep tc_diags *d, __tc_keep const tc_source *src);
/* Free d's messages and empty it (d itself and its source stay). */
void tc_diags_clear(__tc_keep tc_diags *d);
/* Record a diagnostic of severity sev at loc (line 0: none), its message
 * formatted from fmt; out of memory is recorded in d->oom. */
void tc_diag_add(__tc_keep tc_diags *d, tc_severity sev, tc_loc loc, const char *fmt, ...)
	TC_PRINTF(4, 5);
void tc_diag_vadd(__tc_keep tc_diags *d, tc_severity sev, tc_loc loc, const char *fmt,
	va_list ap);
#define tc_error(d, loc, ...) tc_diag_add(d, TC_SEV_ERROR, loc, __VA_ARGS__)
#define tc_warning(d, loc, ...) tc_diag_add(d, TC_SEV_WARNING, loc, __VA_ARGS__)
#define tc_note(d, loc, ...) tc_diag_add(d, TC_SEV_NOTE, loc, __VA_ARGS__)
/* Free a message buffer, noting in d whether building it ran out of memory
 * (the diagnostic made from it is then incomplete). */
void tc_buf_free_diag(__tc_keep tc_buf *b, __tc_keep tc_diags *d);
/* Render diagnostics of the given severities (bit mask of 1 << sev) into b. */
void tc_diags_render(__tc_keep const tc_diags *d, unsigned sev_mask, __tc_keep tc_buf *b);
/* Render one message at a location in src (src may be NULL). */
void tc_diag_render_one(__tc_keep const tc_source *src, tc_severity sev, tc_loc loc,
	const char *msg, __tc_keep tc_buf *b);

#endif
