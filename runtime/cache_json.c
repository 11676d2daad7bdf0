/* tcomp cache export and import (runtime/cache_ops.h): every run of the
 * kernel cache with its key as one JSON object per line, so results can
 * be shared between machines and between tcomp versions.
 *
 * Owns: the line format (json_fields, in the order written), the JSON
 * writer (byte for byte what every tcomp has written: strings escaped as
 * put_json_string does, numbers as %.17g, null for none), and reading such
 * lines back: the warnings naming a bad line and the counts of tcomp cache
 * import.  Lines are parsed by SQLite's JSON functions (json_valid,
 * json_type, json_each, -> and ->>) in a private in-memory database, never
 * by hand; that database holds no data and is not the cache file.
 * Entry points: tc_cache_export, tc_cache_import.
 * Must not know: the cache's tables (rows go through runtime/cache.h:
 * tc_cache_each_row, tc_cache_import_*), modules, code generation. */
#include "cache_ops.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The fields of a line, in the order export writes them (import reads
 * them by name, in any order; others are ignored).  The first NTEXT are
 * strings (or null), the rest numbers (or null); import needs the first
 * NNEEDED. */
static const char *const json_fields[] = {"hash", "entry", "types", "shapes", "strides",
	"target", "version", "canonical", "options", "status", "run_id", "median_ms", "min_ms",
	"at"};
#define NJSON ((int)(sizeof(json_fields) / sizeof(json_fields[0])))
#define NTEXT 11
#define NNEEDED 10

/* ---- writing ---- */

static void put_json_string(tc_buf *b, const char *s)
{
	const unsigned char *p;
	tc_buf_putc(b, '"');
	for (p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			tc_buf_printf(b, "\\%c", *p);
		else if (*p == '\n')
			tc_buf_puts(b, "\\n");
		else if (*p == '\t')
			tc_buf_puts(b, "\\t");
		else if (*p < 0x20)
			tc_buf_printf(b, "\\u%04x", *p);
		else
			tc_buf_putc(b, (char)*p);
	}
	tc_buf_putc(b, '"');
}

static void put_json_double(tc_buf *b, int has, double v)
{
	if (!has)
		tc_buf_puts(b, "null");
	else
		tc_buf_printf(b, "%.17g", v);
}

/* One line of the export: the fields of row r, in json_fields' order. */
static int export_row(void *user, __tc_keep const tc_cache_row *r)
{
	const char *text[NTEXT] = {r->hash, r->entry, r->types, r->shapes, r->strides, r->target,
		r->version, r->canonical, r->options, r->status, r->run_id};
	tc_buf *b = user;
	int i;
	tc_buf_putc(b, '{');
	for (i = 0; i < NJSON; i++) {
		tc_buf_printf(b, "%s\"%s\":", i ? "," : "", json_fields[i]);
		if (i == NTEXT)
			put_json_double(b, r->has_median, r->median_ms);
		else if (i == NTEXT + 1)
			put_json_double(b, r->has_min, r->min_ms);
		else if (i == NTEXT + 2)
			put_json_double(b, r->has_at, r->at);
		else if (!text[i])
			tc_buf_puts(b, "null");
		else
			put_json_string(b, text[i]);
	}
	tc_buf_puts(b, "}\n");
	return 0;
}

int tc_cache_export(__tc_keep tc_cache *c, __tc_keep tc_buf *b)
{
	if (!c)
		return -1;
	return tc_cache_each_row(c, export_row, b) < 0 ? -1 : 0;
}

int tc_cache_export_after(__tc_keep tc_cache *c, int64_t *after, __tc_keep tc_buf *b)
{
	if (!c)
		return -1;
	return tc_cache_each_row_after(c, after, export_row, b) < 0 ? -1 : 0;
}

/* ---- reading ---- */

/* SQLite as the JSON parser of import: a private in-memory database and
 * two statements over a line bound to ?1. */
typedef struct json_reader {
	sqlite3 *db;
	sqlite3_stmt *valid; /* json_valid(?1) */
	sqlite3_stmt *read;  /* of a valid line: json_type(?1); nonzero if a
			      * member is not a string, number or null, or a
			      * string holds a \u0000; then each field's value:
			      * a string's text, a number's text as written,
			      * NULL for null or absent */
} json_reader;

static void json_reader_close(json_reader *jr)
{
	sqlite3_finalize(jr->valid);
	sqlite3_finalize(jr->read);
	sqlite3_close(jr->db);
	memset(jr, 0, sizeof(*jr));
}

/* Open jr; 0, or -1 with the error recorded in c. */
static int json_reader_open(tc_cache *c, json_reader *jr)
{
	tc_buf sql;
	int i;
	memset(jr, 0, sizeof(*jr));
	tc_buf_init(&sql);
	/* a \u0000 (after the escaped backslashes go): SQLite would cut the
	 * string there */
	tc_buf_puts(&sql, "SELECT json_type(?1), (SELECT count(*) FROM json_each(?1) WHERE type "
			  "NOT IN ('text', 'integer', 'real', 'null')) + "
			  "instr(replace(?1, '\\\\', ''), '\\u0000')");
	for (i = 0; i < NJSON; i++)
		tc_buf_printf(&sql,
			", CASE json_type(?1, '$.%s') WHEN 'text' THEN ?1 ->> '$.%s' "
			"WHEN 'integer' THEN ?1 -> '$.%s' WHEN 'real' THEN ?1 -> '$.%s' END",
			json_fields[i], json_fields[i], json_fields[i], json_fields[i]);
	if (sql.oom || sqlite3_open_v2(":memory:", &jr->db,
			       SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK ||
		sqlite3_prepare_v2(jr->db, "SELECT json_valid(?1)", -1, &jr->valid, NULL) !=
			SQLITE_OK ||
		sqlite3_prepare_v2(jr->db, sql.s, -1, &jr->read, NULL) != SQLITE_OK) {
		tc_cache_set_error(c, "cannot read JSON lines: %s",
			jr->db && !sql.oom ? sqlite3_errmsg(jr->db) : "out of memory");
		tc_buf_free(&sql);
		json_reader_close(jr);
		return -1;
	}
	tc_buf_free(&sql);
	return 0;
}

/* Is the n bytes at p valid JSON?  1 yes, 0 no, -1 error. */
static int is_json(json_reader *jr, const char *p, size_t n)
{
	int r = -1;
	sqlite3_bind_text(jr->valid, 1, p, (int)n, SQLITE_STATIC);
	if (sqlite3_step(jr->valid) == SQLITE_ROW)
		r = sqlite3_column_int(jr->valid, 0) != 0;
	sqlite3_reset(jr->valid);
	return r;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++;
	return p;
}

/* Why the line p..end, not valid JSON, is skipped: "not a JSON object"
 * when it does not start as one; "text after the object" when it starts
 * with a whole object (some prefix ending in '}' is valid JSON: tried from
 * the end, at most 64 of them, as a complete object mostly ends a line);
 * else "malformed field". */
static const char *why_invalid(json_reader *jr, const char *p, const char *end)
{
	const char *q;
	int tries = 0;
	p = skip_ws(p, end);
	if (p == end || *p != '{')
		return "not a JSON object";
	for (q = end; q > p + 1 && tries < 64; q--) {
		if (q[-1] != '}')
			continue;
		tries++;
		if (is_json(jr, p, (size_t)(q - p)) == 1)
			return "text after the object";
	}
	return "malformed field";
}

/* Read the line p..end into v (each field's text, NULL if absent or null;
 * borrowed from jr->read, valid until it is reset): 1 read, 0 not a line of
 * fields (*why says why), -1 error (recorded in c). */
static int json_read_line(tc_cache *c, json_reader *jr, const char *p, const char *end,
	const char *v[NJSON], const char **why)
{
	int i, rc, r = is_json(jr, p, (size_t)(end - p));
	if (r == 0) {
		/* json_valid also says 0 when it runs out of memory (SQLite 3.40
		 * swallows that); json_type fails on malformed JSON and reports
		 * a memory failure as SQLITE_NOMEM */
		sqlite3_bind_text(jr->read, 1, p, (int)(end - p), SQLITE_STATIC);
		rc = sqlite3_step(jr->read);
		sqlite3_reset(jr->read);
		if (rc == SQLITE_NOMEM) {
			tc_cache_set_error(c, "cannot read JSON lines: out of memory");
			return -1;
		}
		if (rc != SQLITE_ROW) {
			*why = why_invalid(jr, p, end);
			return 0;
		}
		r = 1; /* valid after all: json_valid's memory failed */
	}
	sqlite3_bind_text(jr->read, 1, p, (int)(end - p), SQLITE_STATIC);
	if (r < 0 || sqlite3_step(jr->read) != SQLITE_ROW) {
		tc_cache_set_error(c, "cannot read JSON lines: %s", sqlite3_errmsg(jr->db));
		return -1;
	}
	if (strcmp((const char *)sqlite3_column_text(jr->read, 0), "object")) {
		*why = "not a JSON object";
		return 0;
	}
	*why = "malformed field"; /* true, false, an array or object, or a \u0000 */
	if (sqlite3_column_int(jr->read, 1))
		return 0;
	for (i = 0; i < NJSON; i++) {
		v[i] = (const char *)sqlite3_column_text(jr->read, 2 + i);
		if (!v[i] && sqlite3_errcode(jr->db) == SQLITE_NOMEM) { /* not the line's fault */
			tc_cache_set_error(c, "cannot read JSON lines: out of memory");
			return -1;
		}
		/* a NUL inside, should an SQLite keep what \u0000 decodes to */
		if (v[i] && (size_t)sqlite3_column_bytes(jr->read, 2 + i) != strlen(v[i]))
			return 0;
	}
	return 1;
}

/* The run of fields v as a row: strings borrowed from v, numbers read as
 * strtod reads them (also from a string: "1.5"). */
static void row_of(const char *v[NJSON], tc_cache_row *row)
{
	row->hash = v[0];
	row->entry = v[1];
	row->types = v[2];
	row->shapes = v[3];
	row->strides = v[4];
	row->target = v[5];
	row->version = v[6];
	row->canonical = v[7];
	row->options = v[8];
	row->status = v[9];
	row->run_id = v[10];
	row->has_median = v[11] != NULL;
	row->median_ms = v[11] ? strtod(v[11], NULL) : 0;
	row->has_min = v[12] != NULL;
	row->min_ms = v[12] ? strtod(v[12], NULL) : 0;
	row->has_at = v[13] != NULL;
	row->at = v[13] ? strtod(v[13], NULL) : 0;
}

/* Check and add line lineno (p..end): 1 added, 2 already present, 0
 * skipped (warning given), -1 error. */
static int import_line(tc_cache *c, json_reader *jr, int lineno, const char *p,
	const char *end)
{
	const char *v[NJSON], *why;
	tc_cache_row row;
	int i, r = json_read_line(c, jr, p, end, v, &why);
	if (r == 0)
		tc_cache_warn(c, "import line %d: %s; skipped", lineno, why);
	for (i = 0; r == 1 && i < NNEEDED; i++)
		if (!v[i]) {
			tc_cache_warn(c, "import line %d: no \"%s\"; the line is skipped", lineno,
				json_fields[i]);
			r = 0;
		}
	for (i = NTEXT; r == 1 && i < NJSON; i++) {
		char *end;
		if (!v[i])
			continue;
		strtod(v[i], &end);
		if (end == v[i] || *end) { /* "1.5abc", "", "fast" */
			tc_cache_warn(c, "import line %d: \"%s\" is not a number; skipped", lineno,
				json_fields[i]);
			r = 0;
		}
	}
	if (r == 1) {
		row_of(v, &row);
		r = tc_cache_import_row(c, &row, &why);
		if (r == 0)
			tc_cache_warn(c, "import line %d: %s; skipped", lineno, why);
	}
	sqlite3_reset(jr->read);
	return r;
}

int tc_cache_import(__tc_keep tc_cache *c, const char *text, int *added, int *present,
	int *skipped)
{
	const char *p = text, *end;
	json_reader jr;
	int lineno = 0, na = 0, np = 0, ns = 0, r = 0;
	if (added)
		*added = 0;
	if (present)
		*present = 0;
	if (skipped)
		*skipped = 0;
	if (!c || !text)
		return -1;
	if (tc_cache_import_begin(c) < 0)
		return -1;
	if (json_reader_open(c, &jr) < 0) {
		tc_cache_import_end(c, 0);
		return -1;
	}
	for (; *p && r >= 0; p = *end ? end + 1 : end) {
		end = strchr(p, '\n');
		if (!end)
			end = p + strlen(p);
		lineno++;
		if (skip_ws(p, end) == end)
			continue;
		r = import_line(c, &jr, lineno, p, end);
		if (r == 1)
			na++;
		else if (r == 2)
			np++;
		else if (r == 0)
			ns++;
	}
	json_reader_close(&jr);
	if (r < 0) {
		tc_cache_import_end(c, 0);
		return -1;
	}
	if (tc_cache_import_end(c, 1) < 0)
		return -1;
	if (added)
		*added = na;
	if (present)
		*present = np;
	if (skipped)
		*skipped = ns;
	return 0;
}
