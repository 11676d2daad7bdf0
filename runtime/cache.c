/* The kernel cache's storage (see cache.h): an SQLite database of measured
 * mapping options per kernel specialisation, and opaque object rows.
 *
 * Owns: the file (location, opening, the schema and its checks, WAL and
 * transactions), recording runs under a key, the best/near/seed lookups,
 * object rows (stored with a checksum, returned only intact), the rows
 * management iterates and imports, pruning, and c's error and warnings.
 * Entry points: everything declared in cache.h.
 * Must not know: modules and contexts (runtime/internal.h), the IR,
 * code generation, LLVM, JSON, or how text is presented; it compiles
 * nothing.  It reads the option table (runtime/options.h) only to check
 * options text and put it in canonical form; runtime/cache_check.c checks
 * an imported row's key.
 *
 * Schema (TC_CACHE_SCHEMA_VERSION 1):
 *   meta(name PRIMARY KEY, value)       application = 'tcomp kernel cache',
 *                                       schema_version = '1'
 *   kernels(id, hash, canonical, entry, types, shapes, strides, target,
 *           version, created)           one row per key, UNIQUE over the key
 *   runs(id, kernel_id, options, median_ms, min_ms, status, run_id, at)
 *                                       every measured candidate
 *   objects(kernel_id, options, tcomp_version, llvm_version, symbol,
 *           def_hash, sites, code, checksum, at)
 *                                       object rows (optional): bytes for
 *                                       the options of a run, their symbol
 *                                       and def hash, and an FNV-1a checksum
 *                                       of it all; llvm_version holds the
 *                                       caller's object version
 * Times are milliseconds; 'at' and 'created' are Unix seconds.
 *
 * Every write is one BEGIN IMMEDIATE transaction (the writer lock is taken
 * up front, so two writers never deadlock upgrading a read lock), retried
 * while the database is busy beyond the busy timeout. */
#include "cache.h"

#include "cache_check.h"
#include "options.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define APPLICATION "tcomp kernel cache"
#define BUSY_TIMEOUT_MS 10000

/* SQL: is a run of the runs table the autotuner's final choice, or one of
 * its final re-timings (run ids ending in TC_CACHE_CHOSEN, TC_CACHE_FINAL)?
 * Ordering by CHOSEN DESC first makes the chosen runs a key's best. */
#define CHOSEN "(coalesce(run_id, '') LIKE '%" TC_CACHE_CHOSEN "')"
#define RETIMED "(" CHOSEN " OR coalesce(run_id, '') LIKE '%" TC_CACHE_FINAL "')"

struct tc_cache {
	sqlite3 *db;
	char *path;
	tc_cache_mode mode;
	int read_only;    /* TC_CACHE_WRITE asked, but the file is read-only:
			   * opened for reading, writes refused (tc_cache_writable) */
	char *error;
	int error_lost;   /* the last error's text could not be made (memory) */
	int in_write;     /* between begin_write and commit or rollback */
	tc_buf warnings;
	char *opt_msg;    /* why the last options text checked did not parse */
	char *why;        /* why tc_cache_import_row refused its last row */
};

/* ---- messages ---- */

/* Replace *slot by a message made with printf's rules (NULL when out of
 * memory). */
static void set_message(char **slot, const char *fmt, va_list ap)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_buf_vprintf(&b, fmt, ap);
	tc_free(*slot);
	*slot = tc_buf_take(&b);
}

void tc_cache_set_error(__tc_keep tc_cache *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_message(&c->error, fmt, ap);
	va_end(ap);
	c->error_lost = !c->error;
}

/* A message without its "error: " prefix and trailing newline. */
static void put_message(tc_buf *b, const char *m)
{
	size_t n;
	if (!strncmp(m, "error: ", 7))
		m += 7;
	n = strlen(m);
	while (n && m[n - 1] == '\n')
		n--;
	tc_buf_putn(b, m, n);
}

void tc_cache_set_error_msg(__tc_keep tc_cache *c, const char *prefix, const char *message)
{
	tc_buf b;
	tc_buf_init(&b);
	tc_buf_puts(&b, prefix);
	put_message(&b, message);
	tc_free(c->error);
	c->error = tc_buf_take(&b);
	c->error_lost = !c->error;
}

static void db_error(tc_cache *c, const char *what)
{
	tc_cache_set_error(c, "kernel cache '%s': cannot %s: %s", c->path, what,
		sqlite3_errmsg(c->db));
}

void tc_cache_warn(__tc_keep tc_cache *c, const char *fmt, ...)
{
	va_list ap;
	tc_buf_printf(&c->warnings, "warning: kernel cache '%s': ", c->path);
	va_start(ap, fmt);
	tc_buf_vprintf(&c->warnings, fmt, ap);
	va_end(ap);
	tc_buf_putc(&c->warnings, '\n');
}

int tc_cache_writable(__tc_keep tc_cache *c)
{
	if (c->mode == TC_CACHE_WRITE)
		return 0;
	if (c->read_only)
		tc_cache_set_error(c, "kernel cache '%s' is read-only (the file cannot be "
				      "written); lookups work, nothing is recorded", c->path);
	else
		tc_cache_set_error(c, "kernel cache '%s' is open for reading only", c->path);
	return -1;
}

int tc_cache_is_read_only(__tc_keep const tc_cache *c)
{
	return c && c->read_only;
}

const char *tc_cache_error(__tc_keep const tc_cache *c)
{
	if (c && c->error_lost)
		return "out of memory";
	return c && c->error ? c->error : "";
}

const char *tc_cache_warnings(__tc_keep const tc_cache *c)
{
	return c && c->warnings.s ? c->warnings.s : "";
}

const char *tc_cache_path(__tc_keep const tc_cache *c)
{
	return c ? c->path : NULL;
}

/* ---- location ---- */

__tc_give char *tc_cache_default_path(void)
{
	const char *v = getenv("TCOMP_CACHE");
	tc_buf b;
	if (v && *v)
		return tc_strdup(v);
	tc_buf_init(&b);
	if ((v = getenv("XDG_CACHE_HOME")) && *v == '/')
		tc_buf_printf(&b, "%s/tcomp/kernels.sqlite", v);
	else if ((v = getenv("HOME")) && *v)
		tc_buf_printf(&b, "%s/.cache/tcomp/kernels.sqlite", v);
	else
		return NULL;
	return tc_buf_take(&b);
}

/* ---- opening and the schema ---- */

static const char *const schema_sql =
	"CREATE TABLE meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);"
	"CREATE TABLE kernels("
	" id INTEGER PRIMARY KEY, hash TEXT NOT NULL, canonical TEXT NOT NULL,"
	" entry TEXT NOT NULL, types TEXT NOT NULL, shapes TEXT NOT NULL,"
	" strides TEXT NOT NULL, target TEXT NOT NULL, version TEXT NOT NULL,"
	" created REAL NOT NULL,"
	" UNIQUE(hash, entry, types, shapes, strides, target, version));"
	"CREATE TABLE runs("
	" id INTEGER PRIMARY KEY, kernel_id INTEGER NOT NULL REFERENCES kernels(id),"
	" options TEXT NOT NULL, median_ms REAL, min_ms REAL,"
	" status TEXT NOT NULL CHECK(status IN ('ok', 'failed')), run_id TEXT,"
	" at REAL NOT NULL);"
	"CREATE INDEX runs_by_kernel ON runs(kernel_id, status, median_ms);"
	"CREATE TABLE objects("
	" kernel_id INTEGER NOT NULL REFERENCES kernels(id), options TEXT NOT NULL,"
	" tcomp_version TEXT NOT NULL, llvm_version TEXT NOT NULL, symbol TEXT NOT NULL,"
	" def_hash TEXT NOT NULL, sites BLOB NOT NULL, code BLOB NOT NULL,"
	" checksum TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY(kernel_id, options));"
	"INSERT INTO meta VALUES('application', '" APPLICATION "');"
	"INSERT INTO meta VALUES('schema_version', '1');";

static double now_unix(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* SQL function tc_canonical_options(text): the options text as this tcomp
 * prints it (options the text lacks at their defaults, so a run recorded
 * before an option was added still compares equal to the defaults), or
 * NULL when it does not parse. */
static void sql_canonical_options(sqlite3_context *sc, int argc, sqlite3_value **argv)
{
	const unsigned char *text = sqlite3_value_text(argv[0]);
	tc_options *o = tc_options_new();
	char *r = NULL, *msg = NULL;
	(void)argc;
	if (o && text && tc_rt_options_parse(o, (const char *)text, &msg) == 0)
		r = tc_options_print(o);
	tc_free(msg);
	tc_options_free(o);
	if (r) {
		sqlite3_result_text(sc, r, -1, SQLITE_TRANSIENT);
		tc_free(r);
	} else
		sqlite3_result_null(sc);
}

/* Run sql (no results); -1 with the error recorded as "cannot what". */
static int exec(tc_cache *c, const char *sql, const char *what)
{
	if (sqlite3_exec(c->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		db_error(c, what);
		return -1;
	}
	return 0;
}

/* Switch to WAL mode.  SQLite does not call the busy handler when the
 * switch meets another connection that is creating the file (two tuners
 * starting at once on a new cache): retried every 10 ms for up to the busy
 * timeout. */
static int set_wal(tc_cache *c)
{
	struct timespec ts = {0, 10000000};
	int tries, rc = SQLITE_BUSY;
	for (tries = 0; tries <= BUSY_TIMEOUT_MS / 10 && (rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
		tries++) {
		if (tries)
			nanosleep(&ts, NULL);
		rc = sqlite3_exec(c->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
	}
	if (rc != SQLITE_OK) {
		db_error(c, "switch to WAL mode");
		return -1;
	}
	return 0;
}

/* A write whose COMMIT and then ROLLBACK failed (out of memory: SQLite
 * could not even prepare them) leaves its transaction open, and later reads
 * would see its rows: end it before anything else reads or writes. */
static void settle(tc_cache *c)
{
	if (!c->in_write && !sqlite3_get_autocommit(c->db))
		sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

/* BEGIN IMMEDIATE, retried while another writer holds the lock beyond the
 * busy timeout (a tuner writing a long import). */
static int begin_write(tc_cache *c)
{
	int tries, rc = SQLITE_BUSY;
	settle(c);
	for (tries = 0; tries < 5 && (rc == SQLITE_BUSY || rc == SQLITE_LOCKED); tries++)
		rc = sqlite3_exec(c->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		db_error(c, "start a write");
		return -1;
	}
	c->in_write = 1;
	return 0;
}

static int commit(tc_cache *c)
{
	c->in_write = 0;
	if (sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		db_error(c, "commit");
		sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
		return -1;
	}
	return 0;
}

static void rollback(tc_cache *c)
{
	c->in_write = 0;
	sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
}

/* A prepared statement, or NULL with the error recorded. */
static sqlite3_stmt *prepare(tc_cache *c, const char *sql)
{
	sqlite3_stmt *st = NULL;
	settle(c);
	if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) {
		db_error(c, "read");
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);
	return s ? (const char *)s : "";
}

/* Column i as text; NULL for NULL. */
static const char *col_text_or_null(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* The number of tables in the database, or -1 (a file that is not a
 * database, or corrupt: the error is recorded). */
static int count_tables(tc_cache *c)
{
	sqlite3_stmt *st = prepare(c, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
	int n = -1;
	if (!st)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	else
		db_error(c, "read");
	sqlite3_finalize(st);
	return n;
}

/* Check the meta table: 1 ours and current, 0 no meta table, -1 foreign,
 * newer or unreadable (error recorded). */
static int check_meta(tc_cache *c)
{
	sqlite3_stmt *st;
	char *app = NULL, *ver = NULL;
	int r = -1, rc;
	if (sqlite3_prepare_v2(c->db, "SELECT name, value FROM meta", -1, &st, NULL) != SQLITE_OK) {
		const char *m = sqlite3_errmsg(c->db);
		sqlite3_finalize(st);
		if (strstr(m, "no such table"))
			return 0;
		db_error(c, "read");
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = col_text(st, 0), *value = col_text(st, 1);
		if (!strcmp(name, "application") && !app)
			app = tc_strdup(value);
		else if (!strcmp(name, "schema_version") && !ver)
			ver = tc_strdup(value);
	}
	if (rc != SQLITE_DONE)
		db_error(c, "read");
	else if (!app || strcmp(app, APPLICATION))
		tc_cache_set_error(c,
			"'%s' is an SQLite database but not a tcomp kernel cache; it is not used",
			c->path);
	else if (!ver || strcmp(ver, "1"))
		tc_cache_set_error(c,
			"kernel cache '%s' has schema version %s but this tcomp (%s) reads "
			"version %d (%s); it is not used: use another --cache or TCOMP_CACHE",
			c->path, ver ? ver : "(none)", TCOMP_VERSION, TC_CACHE_SCHEMA_VERSION,
			ver && atoi(ver) > TC_CACHE_SCHEMA_VERSION ? "written by a newer tcomp"
								  : "not readable here");
	else
		r = 1;
	sqlite3_finalize(st);
	tc_free(app);
	tc_free(ver);
	return r;
}

/* What the database holds: 1 a current tcomp kernel cache, 0 no tables at
 * all, -1 another program's database, a newer schema or unreadable (error
 * recorded).  The meta table and the table count are two reads: when the
 * first finds no meta table and the second finds tables, another tcomp
 * process may have created the schema in between (its commit holds both),
 * so the meta table is read once more before the file is called foreign. */
static int classify(tc_cache *c)
{
	int m = check_meta(c), n;
	if (m != 0)
		return m;
	if ((n = count_tables(c)) <= 0)
		return n;
	if ((m = check_meta(c)) != 0)
		return m;
	tc_cache_set_error(c,
		"'%s' is an SQLite database but not a tcomp kernel cache; it is not used", c->path);
	return -1;
}

/* Make sure the schema is there (write mode: create it in an empty
 * database).  0 ok, 1 empty database (read mode), -1 error. */
static int setup_schema(tc_cache *c)
{
	int m = classify(c);
	if (m != 0)
		return m == 1 ? 0 : -1;
	if (c->mode == TC_CACHE_READ)
		return 1;
	if (begin_write(c) < 0)
		return -1;
	/* another writer may have created it meanwhile; inside the write
	 * transaction nothing changes between the two reads */
	if ((m = classify(c)) != 0) {
		rollback(c);
		return m == 1 ? 0 : -1;
	}
	if (exec(c, schema_sql, "create the schema") < 0) {
		rollback(c);
		return -1;
	}
	return commit(c);
}

/* Can this process write the file at path?  A file without any write
 * permission bit counts as read-only even for root (who could write it):
 * its owner made it read-only, and tcomp honours that. */
static int file_writable(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) < 0)
		return 1; /* absent: created */
	return (sb.st_mode & 0222) && access(path, W_OK) == 0;
}

/* Before a writer touches an existing file: 0 when it is a current tcomp
 * kernel cache or an empty database, -1 (error recorded) when it is
 * another program's database, a newer schema or unreadable.  Reads only. */
static int check_foreign(tc_cache *c)
{
	return classify(c) < 0 ? -1 : 0;
}

/* Does the file start like an SQLite database?  1 yes, 0 empty, -1 no
 * (error recorded), -2 absent. */
static int sniff(tc_cache *c)
{
	static const char magic[16] = "SQLite format 3";
	char head[16];
	size_t n;
	struct stat sb;
	FILE *fp;
	if (stat(c->path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		tc_cache_set_error(c, "kernel cache '%s' is not a regular file; it is not used",
			c->path);
		return -1;
	}
	if (!(fp = fopen(c->path, "rb"))) {
		if (errno == ENOENT)
			return -2;
		tc_cache_set_error(c, "cannot open kernel cache '%s': %s", c->path,
			strerror(errno));
		return -1;
	}
	n = fread(head, 1, sizeof(head), fp);
	fclose(fp);
	if (n == 0)
		return 0;
	if (n < sizeof(head) || memcmp(head, magic, sizeof(head))) {
		tc_cache_set_error(c, "'%s' is not an SQLite database (not a tcomp kernel cache); "
				      "it is not used", c->path);
		return -1;
	}
	return 1;
}

__tc_give tc_cache *tc_cache_open(const char *path, tc_cache_mode mode, __tc_give char **msg)
{
	tc_cache *c = tc_calloc(1, sizeof(*c));
	int s, rc, flags;

	if (msg)
		*msg = NULL;
	if (!c)
		goto oom;
	c->mode = mode;
	tc_buf_init(&c->warnings);
	c->path = path ? tc_strdup(path) : tc_cache_default_path();
	if (!c->path) {
		if (path)
			goto oom;
		tc_cache_set_error(c, "%s", "no kernel cache location: set TCOMP_CACHE or HOME");
		goto error;
	}
	s = sniff(c);
	if (s == -1)
		goto error;
	if (s == -2 && mode == TC_CACHE_READ)
		goto quiet;
	if (s == 0 && mode == TC_CACHE_READ)
		goto quiet; /* empty: nothing to read (or a writer is creating it) */
	if (mode == TC_CACHE_WRITE && tc_make_parent_dirs(c->path) < 0) {
		tc_cache_set_error(c, "cannot create the directory of kernel cache '%s': %s",
			c->path, strerror(errno));
		goto error;
	}
	if (mode == TC_CACHE_WRITE && s == 1 && !file_writable(c->path)) {
		/* a read-only file: read it, refuse writes (tc_cache_writable) */
		c->mode = mode = TC_CACHE_READ;
		c->read_only = 1;
	}
	flags = mode == TC_CACHE_READ ? SQLITE_OPEN_READONLY
				      : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	rc = sqlite3_open_v2(c->path, &c->db, flags | SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc != SQLITE_OK) {
		tc_cache_set_error(c, "cannot open kernel cache '%s': %s", c->path,
			c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		goto error;
	}
	if (mode == TC_CACHE_WRITE && sqlite3_db_readonly(c->db, "main") == 1) {
		/* SQLite could only open it for reading (permissions) */
		c->mode = mode = TC_CACHE_READ;
		c->read_only = 1;
	}
	sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
	sqlite3_create_function(c->db, "tc_canonical_options", 1,
		SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, sql_canonical_options, NULL, NULL);
	/* The file is checked before anything is written to it (WAL mode is a
	 * write): another program's database is refused untouched. */
	if (mode == TC_CACHE_WRITE && s == 1 && check_foreign(c) < 0)
		goto invalid;
	if (mode == TC_CACHE_WRITE &&
		(set_wal(c) < 0 ||
			exec(c, "PRAGMA synchronous = NORMAL", "set synchronous mode") < 0))
		goto invalid;
	rc = setup_schema(c);
	if (rc == 1 && c->read_only) {
		tc_cache_set_error(c, "kernel cache '%s' is empty and read-only; it is not used",
			c->path);
		goto error;
	}
	if (rc == 1)
		goto quiet;
	if (rc < 0)
		goto invalid;
	return c;
invalid:
	/* SQLite's own words for a damaged file, with what tcomp does about it */
	if (c->error && !strstr(c->error, "it is not used")) {
		char *e = c->error;
		c->error = NULL;
		tc_cache_set_error(c,
			"%s; the file is damaged or not a tcomp kernel cache and is not used", e);
		tc_free(e);
	}
	goto error;
oom:
	if (msg)
		*msg = tc_strdup("out of memory opening the kernel cache");
	tc_cache_close(c);
	return NULL;
quiet:
	tc_cache_close(c);
	return NULL;
error:
	if (msg)
		*msg = tc_strdup(c->error ? c->error : "cannot open the kernel cache");
	tc_cache_close(c);
	return NULL;
}

void tc_cache_close(__tc_take tc_cache *c)
{
	if (!c)
		return;
	if (c->db)
		sqlite3_close_v2(c->db);
	tc_free(c->opt_msg);
	tc_free(c->why);
	tc_buf_free(&c->warnings);
	tc_free(c->error);
	tc_free(c->path);
	tc_free(c);
}

/* ---- keys ---- */

void tc_cache_key_clear(__tc_keep tc_cache_key *key)
{
	if (!key)
		return;
	tc_free(key->canonical);
	tc_free(key->entry);
	tc_free(key->types);
	tc_free(key->shapes);
	tc_free(key->strides);
	tc_free(key->target);
	tc_free(key->version);
	memset(key, 0, sizeof(*key));
}

/* ---- options ---- */

/* Parse text into o as user input is; 0, or -1 with the reason in *why
 * (borrowed from c, valid until the next call). */
static int parse_options(tc_cache *c, tc_options *o, const char *text, const char **why)
{
	tc_free(c->opt_msg);
	c->opt_msg = NULL;
	if (tc_rt_options_parse(o, text, &c->opt_msg) == 0)
		return 0;
	*why = c->opt_msg ? c->opt_msg : "out of memory";
	return -1;
}

/* text checked as user input and in canonical print form, or NULL with the
 * reason in *why (borrowed from c). */
static char *canonical_options(tc_cache *c, const char *text, const char **why)
{
	tc_options *o = tc_options_new();
	char *r = NULL;
	*why = "out of memory";
	if (!o)
		return NULL;
	if (parse_options(c, o, text ? text : "", why) == 0)
		r = tc_options_print(o);
	tc_options_free(o);
	return r;
}

/* The options text of the defaults (print form), or NULL. */
static char *default_options(void)
{
	tc_options *o = tc_options_new();
	char *r = o ? tc_options_print(o) : NULL;
	tc_options_free(o);
	return r;
}

/* ---- recording ---- */

/* The id of key's row, created when absent (inside a write transaction);
 * -1 on error. */
static int64_t kernel_row(tc_cache *c, const tc_cache_key *key, const char *canonical)
{
	sqlite3_stmt *st;
	int64_t id = -1;
	st = prepare(c, "INSERT INTO kernels(hash, canonical, entry, types, shapes, strides, "
			"target, version, created) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
			"ON CONFLICT DO NOTHING");
	if (!st)
		return -1;
	sqlite3_bind_text(st, 1, key->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, canonical, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, key->entry, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, key->types, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, key->shapes, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, key->strides, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, key->target, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, key->version, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 9, now_unix());
	if (sqlite3_step(st) != SQLITE_DONE) {
		db_error(c, "write");
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	st = prepare(c, "SELECT id FROM kernels WHERE hash = ?1 AND entry = ?2 AND types = ?3 "
			"AND shapes = ?4 AND strides = ?5 AND target = ?6 AND version = ?7");
	if (!st)
		return -1;
	sqlite3_bind_text(st, 1, key->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key->entry, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, key->types, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, key->shapes, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, key->strides, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, key->target, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, key->version, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = sqlite3_column_int64(st, 0);
	else
		db_error(c, "read");
	sqlite3_finalize(st);
	return id;
}

/* Insert one run of kernel row kid (inside a write transaction). */
static int insert_run(tc_cache *c, int64_t kid, const char *options, double median,
	double min, int ok, const char *run_id, double at)
{
	sqlite3_stmt *st = prepare(c, "INSERT INTO runs(kernel_id, options, median_ms, min_ms, "
				      "status, run_id, at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
	int r = 0;
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, kid);
	sqlite3_bind_text(st, 2, options, -1, SQLITE_STATIC);
	if (ok && isfinite(median) && isfinite(min)) {
		sqlite3_bind_double(st, 3, median);
		sqlite3_bind_double(st, 4, min);
	}
	sqlite3_bind_text(st, 5, ok ? "ok" : "failed", -1, SQLITE_STATIC);
	if (run_id)
		sqlite3_bind_text(st, 6, run_id, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 7, at);
	if (sqlite3_step(st) != SQLITE_DONE) {
		db_error(c, "write");
		r = -1;
	}
	sqlite3_finalize(st);
	return r;
}

int tc_cache_record(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep const tc_cache_run *run)
{
	const char *why;
	char *opts = NULL;
	int64_t kid;
	int st = -1;

	if (!c || !key || !run)
		return -1;
	if (tc_cache_writable(c) < 0)
		return -1;
	if (run->ok && !(run->median_ms >= 0 && run->min_ms >= 0 && isfinite(run->median_ms))) {
		tc_cache_set_error(c, "a measured run needs finite non-negative times "
				      "(median %g ms, min %g ms)", run->median_ms, run->min_ms);
		return -1;
	}
	if (!(opts = canonical_options(c, run->options, &why))) {
		tc_cache_set_error_msg(c, "cannot record options that do not parse: ", why);
		return -1;
	}
	if (begin_write(c) < 0)
		goto done;
	if ((kid = kernel_row(c, key, key->canonical)) < 0 ||
		insert_run(c, kid, opts, run->median_ms, run->min_ms, run->ok, run->run_id,
			now_unix()) < 0) {
		rollback(c);
		goto done;
	}
	st = commit(c);
done:
	tc_free(opts);
	return st;
}

/* ---- lookups ---- */

void tc_cache_hit_clear(__tc_keep tc_cache_hit *hit)
{
	if (!hit)
		return;
	tc_options_free(hit->options);
	tc_free(hit->text);
	tc_free(hit->shapes);
	tc_free(hit->target);
	memset(hit, 0, sizeof(*hit));
}

/* The best valid ok run of kernel row kid into hit: 1 found, 0 none, -1
 * error.  Rows whose options do not parse are skipped with a warning. */
static int best_of(tc_cache *c, int64_t kid, const char *shapes, tc_cache_hit *hit)
{
	sqlite3_stmt *st = prepare(c, "SELECT options, median_ms, min_ms, id FROM runs "
				      "WHERE kernel_id = ?1 AND status = 'ok' AND median_ms >= 0 "
				      "ORDER BY " CHOSEN " DESC, median_ms, id");
	int rc, r = 0;
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, kid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *text = col_text(st, 0), *why;
		tc_options *o = tc_options_new();
		if (!o) {
			tc_cache_set_error(c, "%s", "out of memory");
			r = -1;
			break;
		}
		if (parse_options(c, o, text, &why) < 0) {
			tc_cache_warn(c, "run %lld has invalid options (%s); it is ignored",
				(long long)sqlite3_column_int64(st, 3), why);
			tc_options_free(o);
			continue;
		}
		memset(hit, 0, sizeof(*hit));
		hit->options = o;
		hit->text = tc_options_print(o);
		hit->shapes = tc_strdup(shapes);
		hit->median_ms = sqlite3_column_double(st, 1);
		hit->min_ms = sqlite3_column_double(st, 2);
		hit->kernel_id = kid;
		if (!hit->text || !hit->shapes) {
			tc_cache_hit_clear(hit);
			tc_cache_set_error(c, "%s", "out of memory");
			r = -1;
		} else
			r = 1;
		break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		db_error(c, "read");
		r = -1;
	}
	sqlite3_finalize(st);
	return r;
}

/* Bind the fields of key that nearby shapes share (?1..?5: hash, entry,
 * types, target, version). */
static void bind_family(sqlite3_stmt *st, const tc_cache_key *key)
{
	sqlite3_bind_text(st, 1, key->hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key->entry, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, key->types, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, key->target, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, key->version, -1, SQLITE_STATIC);
}

/* Does a row's canonical text match the key's?  (Guards against a hash
 * collision and against edited rows.) */
static int same_kernel(tc_cache *c, const tc_cache_key *key, const char *canonical, int64_t kid)
{
	if (!strcmp(canonical, key->canonical))
		return 1;
	tc_cache_warn(c, "entry %lld has hash %s but another kernel text; it is ignored",
		(long long)kid, key->hash);
	return 0;
}

int tc_cache_lookup(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_cache_hit *hit)
{
	sqlite3_stmt *st;
	int rc, r = 0;
	if (!c || !key || !hit)
		return -1;
	memset(hit, 0, sizeof(*hit));
	st = prepare(c, "SELECT id, canonical FROM kernels WHERE hash = ?1 AND entry = ?2 AND "
			"types = ?3 AND target = ?4 AND version = ?5 AND shapes = ?6 AND "
			"strides = ?7");
	if (!st)
		return -1;
	bind_family(st, key);
	sqlite3_bind_text(st, 6, key->shapes, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, key->strides, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		int64_t kid = sqlite3_column_int64(st, 0);
		if (same_kernel(c, key, col_text(st, 1), kid))
			r = best_of(c, kid, key->shapes, hit);
	} else if (rc != SQLITE_DONE) {
		db_error(c, "read");
		r = -1;
	}
	sqlite3_finalize(st);
	return r;
}

/* Parse "64x32,32x48" into at most max extents; the number of extents, or
 * -1 if malformed.  *ninputs receives the number of ','-separated parts. */
static int parse_shapes(const char *s, int64_t *out, int max, int *ninputs)
{
	int n = 0;
	*ninputs = 1;
	while (*s) {
		char *end;
		long long v;
		if (*s == ',') {
			(*ninputs)++;
			s++;
			continue;
		}
		if (*s == 'x') {
			s++;
			continue;
		}
		errno = 0;
		v = strtoll(s, &end, 10);
		if (end == s || errno || v < 0 || n == max)
			return -1;
		out[n++] = v;
		s = end;
	}
	return n;
}

/* The distance between two shape lists (see tc_cache_lookup_near), or
 * -1 if they are not comparable. */
static double shape_distance(const char *a, const char *b)
{
	int64_t x[256], y[256];
	int na, nb, ia, ib, i;
	double d = 0;
	na = parse_shapes(a, x, 256, &ia);
	nb = parse_shapes(b, y, 256, &ib);
	if (na < 0 || na != nb || ia != ib)
		return -1;
	for (i = 0; i < na; i++) {
		if (x[i] == y[i])
			continue;
		if (!x[i] || !y[i])
			return -1;
		d += fabs(log((double)x[i] / (double)y[i]));
	}
	return d;
}

/* Do shapes and strides texts parse, with as many inputs and extents? */
static int same_structure(const char *shapes, const char *strides)
{
	int64_t x[256], y[256];
	int ia, ib, na = parse_shapes(shapes, x, 256, &ia), nb = parse_shapes(strides, y, 256, &ib);
	return na >= 0 && na == nb && ia == ib;
}

/* A nearby entry. */
typedef struct near_row {
	int64_t kid;
	double distance, best;
	char *shapes, *target;
} near_row;

static int near_cmp(const void *pa, const void *pb)
{
	const near_row *a = pa, *b = pb;
	if (a->distance != b->distance)
		return a->distance < b->distance ? -1 : 1;
	if (a->best != b->best)
		return a->best < b->best ? -1 : 1;
	return a->kid < b->kid ? -1 : a->kid > b->kid;
}

static void near_rows_free(near_row *v, int n)
{
	while (n) {
		n--;
		tc_free(v[n].shapes);
		tc_free(v[n].target);
	}
	tc_free(v);
}

/* The other shapes of key's family with an ok run, nearest first; with
 * other_cpu, instead every shape (the same ones too) of the family on
 * another target of the same triple: the same architecture, another CPU
 * name or feature string. */
static int near_rows(tc_cache *c, const tc_cache_key *key, int other_cpu, near_row **rows,
	int *n)
{
	sqlite3_stmt *st;
	near_row *v = NULL;
	int cap = 0, rc;
	*rows = NULL;
	*n = 0;
	st = prepare(c, other_cpu
		? "SELECT k.id, k.shapes, k.canonical, min(r.median_ms), k.target FROM kernels k "
		  "JOIN runs r ON r.kernel_id = k.id AND r.status = 'ok' AND "
		  "r.median_ms >= 0 WHERE k.hash = ?1 AND k.entry = ?2 AND k.types = ?3 "
		  "AND k.target <> ?4 AND instr(?4, ';') > 1 AND "
		  "substr(k.target, 1, instr(?4, ';')) = substr(?4, 1, instr(?4, ';')) "
		  "AND k.version = ?5 AND ?6 = ?6 GROUP BY k.id"
		: "SELECT k.id, k.shapes, k.canonical, min(r.median_ms), k.target FROM kernels k "
		  "JOIN runs r ON r.kernel_id = k.id AND r.status = 'ok' AND "
		  "r.median_ms >= 0 WHERE k.hash = ?1 AND k.entry = ?2 AND k.types = ?3 "
		  "AND k.target = ?4 AND k.version = ?5 AND k.shapes <> ?6 GROUP BY k.id");
	if (!st)
		return -1;
	bind_family(st, key);
	sqlite3_bind_text(st, 6, key->shapes, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t kid = sqlite3_column_int64(st, 0);
		double dist = shape_distance(key->shapes, col_text(st, 1));
		if (dist < 0 || !same_kernel(c, key, col_text(st, 2), kid))
			continue;
		if (*n == cap) {
			near_row *w = tc_realloc(v, (size_t)(cap = cap * 2 + 8) * sizeof(*v));
			if (!w)
				break;
			v = w;
		}
		v[*n].kid = kid;
		v[*n].distance = dist;
		v[*n].best = sqlite3_column_double(st, 3);
		v[*n].shapes = tc_strdup(col_text(st, 1));
		v[*n].target = tc_strdup(col_text(st, 4));
		if (!v[*n].shapes || !v[*n].target) {
			tc_free(v[*n].shapes);
			tc_free(v[*n].target);
			break;
		}
		(*n)++;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		if (rc == SQLITE_ROW)
			tc_cache_set_error(c, "%s", "out of memory");
		else
			db_error(c, "read");
		near_rows_free(v, *n);
		*n = 0;
		return -1;
	}
	if (*n)
		qsort(v, (size_t)*n, sizeof(*v), near_cmp);
	*rows = v;
	return 0;
}

/* The best entry of the nearest kernel row of key: of this CPU, or
 * (other_cpu) of another CPU of the same triple, whose target then goes
 * into hit->target.  1 found, 0 none, -1 error. */
static int lookup_nearest(tc_cache *c, const tc_cache_key *key, int other_cpu, tc_cache_hit *hit)
{
	near_row *v;
	int n, i, r = 0;
	if (!c || !key || !hit)
		return -1;
	memset(hit, 0, sizeof(*hit));
	if (near_rows(c, key, other_cpu, &v, &n) < 0)
		return -1;
	for (i = 0; i < n && r == 0; i++) {
		r = best_of(c, v[i].kid, v[i].shapes, hit);
		if (r != 1)
			continue;
		hit->distance = v[i].distance;
		if (other_cpu && !(hit->target = tc_strdup(v[i].target))) {
			tc_cache_hit_clear(hit);
			tc_cache_set_error(c, "%s", "out of memory");
			r = -1;
		}
	}
	near_rows_free(v, n);
	return r;
}

int tc_cache_lookup_near(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_cache_hit *hit)
{
	return lookup_nearest(c, key, 0, hit);
}

int tc_cache_lookup_other_cpu(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	__tc_keep tc_cache_hit *hit)
{
	return lookup_nearest(c, key, 1, hit);
}

/* Append the distinct valid ok options of kernel row kid, best first, to
 * texts (at most max in all). */
static int seeds_of(tc_cache *c, int64_t kid, int max, char **texts, int *n)
{
	sqlite3_stmt *st = prepare(c, "SELECT options, max(" CHOSEN ") AS ch, "
				      "min(median_ms) AS m FROM runs "
				      "WHERE kernel_id = ?1 AND status = 'ok' AND median_ms >= 0 "
				      "GROUP BY options ORDER BY ch DESC, m");
	int rc, i;
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, kid);
	while (*n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *why;
		char *t = canonical_options(c, col_text(st, 0), &why);
		int dup = 0;
		if (!t) {
			tc_cache_warn(c,
				"a run of entry %lld has invalid options; it is not a seed",
				(long long)kid);
			continue;
		}
		for (i = 0; i < *n && !dup; i++)
			dup = !strcmp(texts[i], t);
		if (dup)
			tc_free(t);
		else
			texts[(*n)++] = t;
	}
	sqlite3_finalize(st);
	return 0;
}

int tc_cache_seeds(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key, int max,
	__tc_give char ***texts, int *n)
{
	tc_cache_hit hit;
	near_row *v = NULL;
	char **t;
	int nv = 0, i, r, other;
	*texts = NULL;
	*n = 0;
	if (!c || !key || max <= 0)
		return c && key ? 0 : -1;
	if (!(t = tc_calloc((size_t)max, sizeof(char *)))) {
		tc_cache_set_error(c, "%s", "out of memory");
		return -1;
	}
	/* the exact key's row */
	r = tc_cache_lookup(c, key, &hit);
	if (r == 1)
		r = seeds_of(c, hit.kernel_id, max, t, n);
	tc_cache_hit_clear(&hit);
	/* then the nearest shapes, then other CPUs of the same architecture */
	for (other = 0; other < 2 && r >= 0; other++) {
		r = near_rows(c, key, other, &v, &nv);
		for (i = 0; r >= 0 && i < nv && *n < max; i++)
			r = seeds_of(c, v[i].kid, max, t, n);
		near_rows_free(v, nv);
		v = NULL;
		nv = 0;
	}
	if (r < 0) {
		while (*n)
			tc_free(t[--*n]);
		tc_free(t);
		return -1;
	}
	*texts = t;
	return 0;
}

/* ---- object rows ---- */

void tc_cache_object_row_clear(__tc_keep tc_cache_object_row *row)
{
	if (!row)
		return;
	tc_free(row->symbol);
	tc_free(row->def_hash);
	tc_free(row->sites);
	tc_free(row->code);
	memset(row, 0, sizeof(*row));
}

/* The checksum of an object row, as 16 hex digits into out. */
static void object_checksum(char out[17], const char *tv, const char *lv, const char *symbol,
	const char *def_hash, const void *sites, size_t nsites, const void *code, size_t ncode)
{
	uint64_t h = TC_HASH_INIT;
	h = tc_hash_bytes(h, tv, strlen(tv) + 1);
	h = tc_hash_bytes(h, lv, strlen(lv) + 1);
	h = tc_hash_bytes(h, symbol, strlen(symbol) + 1);
	h = tc_hash_bytes(h, def_hash, strlen(def_hash) + 1);
	h = tc_hash_bytes(h, sites, nsites);
	h = tc_hash_bytes(h, code, ncode);
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

int tc_cache_object_put(__tc_keep tc_cache *c, __tc_keep const tc_cache_key *key,
	const char *options, const char *object_version, __tc_keep const tc_cache_object_row *row)
{
	sqlite3_stmt *st = NULL;
	char sum[17];
	int64_t kid;
	int r = -1;

	if (!c || !key || !options || !object_version || !row)
		return -1;
	if (tc_cache_writable(c) < 0)
		return -1;
	object_checksum(sum, TCOMP_VERSION, object_version, row->symbol, row->def_hash,
		row->sites, row->sites_size, row->code, row->code_size);
	if (begin_write(c) < 0)
		return -1;
	if ((kid = kernel_row(c, key, key->canonical)) < 0 ||
		!(st = prepare(c, "INSERT OR REPLACE INTO objects(kernel_id, options, tcomp_version, "
				  "llvm_version, symbol, def_hash, sites, code, checksum, at) "
				  "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"))) {
		rollback(c);
		return -1;
	}
	sqlite3_bind_int64(st, 1, kid);
	sqlite3_bind_text(st, 2, options, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, TCOMP_VERSION, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, object_version, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, row->symbol, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, row->def_hash, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 7, row->sites, (int)row->sites_size, SQLITE_STATIC);
	sqlite3_bind_blob(st, 8, row->code, (int)row->code_size, SQLITE_STATIC);
	sqlite3_bind_text(st, 9, sum, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 10, now_unix());
	if (sqlite3_step(st) != SQLITE_DONE) {
		db_error(c, "write");
		rollback(c);
	} else
		r = commit(c);
	sqlite3_finalize(st);
	return r;
}

/* A copy of n bytes (at least one byte allocated, so an empty blob is not
 * NULL), or NULL when out of memory. */
static void *copy_bytes(const void *p, size_t n)
{
	void *q = tc_malloc(n ? n : 1);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

int tc_cache_object_get(__tc_keep tc_cache *c, int64_t kernel_id, const char *options,
	const char *object_version, __tc_keep tc_cache_object_row *row)
{
	sqlite3_stmt *st;
	char sum[17];
	int rc, r = 0;
	memset(row, 0, sizeof(*row));
	if (!c || !options || !object_version)
		return -1;
	st = prepare(c, "SELECT tcomp_version, llvm_version, symbol, def_hash, sites, code, "
			"checksum FROM objects WHERE kernel_id = ?1 AND options = ?2");
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, kernel_id);
	sqlite3_bind_text(st, 2, options, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *tv = col_text(st, 0), *lv = col_text(st, 1);
		const void *sites = sqlite3_column_blob(st, 4), *code;
		size_t nsites = (size_t)sqlite3_column_bytes(st, 4), ncode;
		code = sqlite3_column_blob(st, 5);
		ncode = (size_t)sqlite3_column_bytes(st, 5);
		object_checksum(sum, tv, lv, col_text(st, 2), col_text(st, 3), sites ? sites : "",
			nsites, code ? code : "", ncode);
		if (strcmp(tv, TCOMP_VERSION) || strcmp(lv, object_version))
			r = 0; /* another tcomp's or another object version's: none usable */
		else if (strcmp(sum, col_text(st, 6)) || !code || !ncode)
			tc_cache_warn(c, "the object code of entry %lld fails its checksum; "
					 "compiling from the options", (long long)kernel_id);
		else if (!(row->code = copy_bytes(code, ncode)) ||
			 !(row->sites = copy_bytes(sites, nsites)) ||
			 !(row->symbol = tc_strdup(col_text(st, 2))) ||
			 !(row->def_hash = tc_strdup(col_text(st, 3)))) {
			tc_cache_object_row_clear(row);
			tc_cache_set_error(c, "%s", "out of memory");
			r = -1;
		} else {
			row->code_size = ncode;
			row->sites_size = nsites;
			r = 1;
		}
	} else if (rc != SQLITE_DONE) {
		db_error(c, "read");
		r = -1;
	}
	sqlite3_finalize(st);
	return r;
}

/* ---- management: rows to iterate, rows to import ---- */

/* Step st to its end, handing each row to fill(c, st, user) (which calls
 * the caller's callback); the number of rows, or -1 (a database error is
 * recorded as "cannot read"; a callback's stop keeps its error).  st is
 * finalized. */
static int each(tc_cache *c, sqlite3_stmt *st, int (*fill)(sqlite3_stmt *, void *), void *user)
{
	int rc, n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (fill(st, user) < 0) {
			sqlite3_finalize(st);
			return -1;
		}
		n++;
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		db_error(c, "read");
		return -1;
	}
	return n;
}

/* The caller's callback (the one its iterator takes) and its argument, as
 * the fill functions below receive them, with the defaults' options text
 * for tc_cache_run_row.is_default. */
typedef struct each_call {
	tc_cache_entry_fn entry;
	tc_cache_run_fn run;
	tc_cache_row_fn row;
	void *user;
	const char *def;
	int64_t *last; /* tc_cache_each_row_after: the last run's id */
} each_call;

/* A key's row from st's columns: id, hash, entry, types, shapes, strides,
 * target, version, canonical, created, and for tc_cache_each_summary then
 * best, default, runs, failed and objects. */
static int fill_entry(sqlite3_stmt *st, void *call)
{
	each_call *ec = call;
	tc_cache_entry e;
	memset(&e, 0, sizeof(e));
	e.id = sqlite3_column_int64(st, 0);
	e.hash = col_text(st, 1);
	e.entry = col_text(st, 2);
	e.types = col_text(st, 3);
	e.shapes = col_text(st, 4);
	e.strides = col_text(st, 5);
	e.target = col_text(st, 6);
	e.version = col_text(st, 7);
	e.canonical = col_text(st, 8);
	e.created = col_text(st, 9);
	if (sqlite3_column_count(st) > 10) {
		e.has_best = sqlite3_column_type(st, 10) != SQLITE_NULL;
		e.best_ms = sqlite3_column_double(st, 10);
		e.has_default = sqlite3_column_type(st, 11) != SQLITE_NULL;
		e.default_ms = sqlite3_column_double(st, 11);
		e.runs = sqlite3_column_int(st, 12);
		e.failed = sqlite3_column_int(st, 13);
		e.objects = sqlite3_column_int(st, 14);
	}
	return ec->entry(ec->user, &e);
}

int tc_cache_each_summary(__tc_keep tc_cache *c, tc_cache_entry_fn fn, __tc_keep void *user)
{
	char *def = default_options();
	each_call ec = {.entry = fn, .user = user};
	sqlite3_stmt *st;
	int n;
	if (!c || !def) {
		if (c)
			tc_cache_set_error(c, "out of memory");
		tc_free(def);
		return -1;
	}
	st = prepare(c,
		"SELECT k.id, k.hash, k.entry, '', k.shapes, '', k.target, k.version, '', '',"
		" (SELECT median_ms FROM runs WHERE kernel_id = k.id AND status = 'ok'"
		"  AND median_ms >= 0 ORDER BY " CHOSEN " DESC, median_ms, id LIMIT 1),"
		" (SELECT median_ms FROM runs WHERE kernel_id = k.id AND status = 'ok'"
		"  AND median_ms >= 0 AND tc_canonical_options(options) = ?1"
		"  ORDER BY " RETIMED " DESC, median_ms, id LIMIT 1),"
		" (SELECT count(*) FROM runs WHERE kernel_id = k.id),"
		" (SELECT count(*) FROM runs WHERE kernel_id = k.id AND status = 'failed'),"
		" (SELECT count(*) FROM objects WHERE kernel_id = k.id)"
		" FROM kernels k ORDER BY k.entry, k.hash, k.shapes, k.id");
	if (!st) {
		tc_free(def);
		return -1;
	}
	sqlite3_bind_text(st, 1, def, -1, SQLITE_STATIC);
	n = each(c, st, fill_entry, &ec);
	tc_free(def);
	return n;
}

int tc_cache_each_entry(__tc_keep tc_cache *c, const char *what, tc_cache_entry_fn fn,
	__tc_keep void *user)
{
	each_call ec = {.entry = fn, .user = user};
	sqlite3_stmt *st;
	if (!c)
		return -1;
	st = prepare(c, "SELECT id, hash, entry, types, shapes, strides, target, version, "
			"canonical, datetime(created, 'unixepoch') FROM kernels WHERE ?1 IS NULL "
			"OR hash = ?1 OR entry = ?1 OR entry || '@' || shapes = ?1 "
			"ORDER BY entry, hash, shapes, id");
	if (!st)
		return -1;
	if (what)
		sqlite3_bind_text(st, 1, what, -1, SQLITE_STATIC);
	return each(c, st, fill_entry, &ec);
}

static int fill_run(sqlite3_stmt *st, void *call)
{
	each_call *ec = call;
	tc_cache_run_row r;
	r.id = sqlite3_column_int64(st, 0);
	r.options = col_text(st, 1);
	r.median_ms = sqlite3_column_double(st, 2);
	r.min_ms = sqlite3_column_double(st, 3);
	r.status = col_text(st, 4);
	r.run_id = col_text(st, 5);
	r.at = col_text(st, 6);
	r.is_default = !strcmp(col_text(st, 7), ec->def);
	return ec->run(ec->user, &r);
}

int tc_cache_each_run(__tc_keep tc_cache *c, int64_t kernel_id, tc_cache_run_fn fn,
	__tc_keep void *user)
{
	char *def = default_options();
	each_call ec = {.run = fn, .user = user, .def = def};
	sqlite3_stmt *st;
	int n;
	if (!c || !def) {
		if (c)
			tc_cache_set_error(c, "out of memory");
		tc_free(def);
		return -1;
	}
	st = prepare(c, "SELECT id, options, median_ms, min_ms, status, run_id, "
			"datetime(at, 'unixepoch'), tc_canonical_options(options) FROM runs "
			"WHERE kernel_id = ?1 ORDER BY status DESC, " CHOSEN " DESC, median_ms, id");
	if (!st) {
		tc_free(def);
		return -1;
	}
	sqlite3_bind_int64(st, 1, kernel_id);
	n = each(c, st, fill_run, &ec);
	tc_free(def);
	return n;
}

static int fill_row(sqlite3_stmt *st, void *call)
{
	each_call *ec = call;
	tc_cache_row r;
	r.hash = col_text_or_null(st, 0);
	r.entry = col_text_or_null(st, 1);
	r.types = col_text_or_null(st, 2);
	r.shapes = col_text_or_null(st, 3);
	r.strides = col_text_or_null(st, 4);
	r.target = col_text_or_null(st, 5);
	r.version = col_text_or_null(st, 6);
	r.canonical = col_text_or_null(st, 7);
	r.options = col_text_or_null(st, 8);
	r.status = col_text_or_null(st, 9);
	r.run_id = col_text_or_null(st, 10);
	r.has_median = sqlite3_column_type(st, 11) != SQLITE_NULL;
	r.median_ms = sqlite3_column_double(st, 11);
	r.has_min = sqlite3_column_type(st, 12) != SQLITE_NULL;
	r.min_ms = sqlite3_column_double(st, 12);
	r.has_at = sqlite3_column_type(st, 13) != SQLITE_NULL;
	r.at = sqlite3_column_double(st, 13);
	if (ec->last) /* the runs come in id order */
		*ec->last = sqlite3_column_int64(st, 14);
	return ec->row(ec->user, &r);
}

/* The rows of runs with an id after *after (NULL: every run, in key
 * order), *after then the last id given. */
static int each_row(tc_cache *c, int64_t *after, tc_cache_row_fn fn, void *user)
{
	each_call ec = {.row = fn, .user = user, .last = after};
	sqlite3_stmt *st;
	if (!c)
		return -1;
#define ROWS "SELECT k.hash, k.entry, k.types, k.shapes, k.strides, k.target, k.version, " \
	"k.canonical, r.options, r.status, r.run_id, r.median_ms, r.min_ms, r.at, r.id " \
	"FROM runs r JOIN kernels k ON k.id = r.kernel_id "
	st = prepare(c, after ? ROWS "WHERE r.id > ?1 ORDER BY r.id" : ROWS "ORDER BY k.id, r.id");
#undef ROWS
	if (!st)
		return -1;
	if (after)
		sqlite3_bind_int64(st, 1, *after);
	return each(c, st, fill_row, &ec);
}

int tc_cache_each_row(__tc_keep tc_cache *c, tc_cache_row_fn fn, __tc_keep void *user)
{
	return each_row(c, NULL, fn, user);
}

int tc_cache_each_row_after(__tc_keep tc_cache *c, int64_t *after, tc_cache_row_fn fn,
	__tc_keep void *user)
{
	return after ? each_row(c, after, fn, user) : -1;
}

int tc_cache_import_begin(__tc_keep tc_cache *c)
{
	if (!c || tc_cache_writable(c) < 0)
		return -1;
	return begin_write(c);
}

int tc_cache_import_end(__tc_keep tc_cache *c, int commit_it)
{
	if (!c)
		return -1;
	if (commit_it)
		return commit(c);
	rollback(c);
	return 0;
}

/* Is there a run like row already under key row kid (opts: row's options
 * in canonical form)? */
static int run_exists(tc_cache *c, int64_t kid, const char *opts, const tc_cache_row *row,
	int ok)
{
	sqlite3_stmt *st = prepare(c, "SELECT 1 FROM runs WHERE kernel_id = ?1 AND options = ?2 "
				      "AND status = ?3 AND run_id IS ?4 AND median_ms IS ?5 AND "
				      "min_ms IS ?6 AND at = ?7");
	int r;
	if (!st)
		return -1;
	sqlite3_bind_int64(st, 1, kid);
	sqlite3_bind_text(st, 2, opts, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, row->status, -1, SQLITE_STATIC);
	if (row->run_id)
		sqlite3_bind_text(st, 4, row->run_id, -1, SQLITE_STATIC);
	if (ok) {
		sqlite3_bind_double(st, 5, row->median_ms);
		sqlite3_bind_double(st, 6, row->min_ms);
	}
	sqlite3_bind_double(st, 7, row->has_at ? row->at : 0);
	r = sqlite3_step(st);
	sqlite3_finalize(st);
	if (r == SQLITE_ROW)
		return 1;
	if (r == SQLITE_DONE)
		return 0;
	db_error(c, "read");
	return -1;
}

/* Refuse a row: *why = the message (borrowed from c); returns 0. */
static int refuse(tc_cache *c, const char **why, const char *fmt, ...) TC_PRINTF(3, 4);
static int refuse(tc_cache *c, const char **why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_message(&c->why, fmt, ap);
	va_end(ap);
	*why = c->why ? c->why : "out of memory";
	return 0;
}

int tc_cache_import_row(__tc_keep tc_cache *c, __tc_keep const tc_cache_row *row,
	const char **why)
{
	tc_cache_key key;
	const char *msg;
	char *opts = NULL, hash[17];
	int64_t kid;
	int ok, r;

	if (!c || !row)
		return -1;
	if (!row->hash || !row->entry || !row->types || !row->shapes || !row->strides ||
		!row->target || !row->version || !row->canonical || !row->options || !row->status)
		return refuse(c, why, "%s", "a field of the key or run is missing");
	ok = !strcmp(row->status, "ok");
	if (!ok && strcmp(row->status, "failed"))
		return refuse(c, why, "status \"%s\" is neither ok nor failed", row->status);
	if (ok && (!row->has_median || !row->has_min || !(row->median_ms >= 0) ||
			  !(row->min_ms >= 0)))
		return refuse(c, why, "%s", "an ok run needs median_ms and min_ms >= 0");
	snprintf(hash, sizeof(hash), "%016llx",
		(unsigned long long)tc_hash_bytes(TC_HASH_INIT, row->canonical,
			strlen(row->canonical)));
	if (strcmp(hash, row->hash))
		return refuse(c, why, "hash %s does not match the kernel text (%s)", row->hash,
			hash);
	{
		char bad[256];
		if (tc_cache_check_key(row->entry, row->types, row->shapes, row->strides,
			    row->target, row->version, bad, sizeof(bad)) < 0)
			return refuse(c, why, "%s", bad);
	}
	if (!same_structure(row->shapes, row->strides))
		return refuse(c, why, "%s", "malformed shapes or strides");
	if ((row->has_median && !isfinite(row->median_ms)) ||
		(row->has_min && !isfinite(row->min_ms)) || (ok && row->min_ms > row->median_ms))
		return refuse(c, why, "%s", "times must be finite, min_ms at most median_ms");
	if (row->has_at && !(row->at >= 0 && row->at < 1e11))
		return refuse(c, why, "%s", "\"at\" is not a time (Unix seconds)");
	if (!(opts = canonical_options(c, row->options, &msg))) {
		tc_buf b;
		if (!strcmp(msg, "out of memory")) { /* not the row's fault: an error */
			tc_cache_set_error(c, "out of memory");
			return -1;
		}
		tc_buf_init(&b);
		put_message(&b, msg);
		refuse(c, why, "invalid options (%s)", b.s ? b.s : "?");
		tc_buf_free(&b);
		return 0;
	}
	memcpy(key.hash, hash, sizeof(hash));
	key.canonical = (char *)row->canonical;
	key.entry = (char *)row->entry;
	key.types = (char *)row->types;
	key.shapes = (char *)row->shapes;
	key.strides = (char *)row->strides;
	key.target = (char *)row->target;
	key.version = (char *)row->version;
	r = -1;
	if ((kid = kernel_row(c, &key, key.canonical)) < 0)
		goto done;
	if ((r = run_exists(c, kid, opts, row, ok)) != 0) {
		r = r > 0 ? 2 : -1;
		goto done;
	}
	r = insert_run(c, kid, opts, ok ? row->median_ms : NAN, ok ? row->min_ms : NAN, ok,
		    row->run_id, row->has_at ? row->at : now_unix()) < 0 ? -1 : 1;
done:
	tc_free(opts);
	return r;
}

/* ---- pruning ---- */

int tc_cache_prune(__tc_keep tc_cache *c, __tc_keep const tc_cache_prune_opts *o, int *removed)
{
	sqlite3_stmt *st;
	char *def = default_options();
	int n = 0;
	if (removed)
		*removed = 0;
	if (!c || !o || !def) {
		if (c && o)
			tc_cache_set_error(c, "out of memory");
		tc_free(def);
		return -1;
	}
	if (tc_cache_writable(c) < 0) {
		tc_free(def);
		return -1;
	}
	if (begin_write(c) < 0) {
		tc_free(def);
		return -1;
	}
	if (o->other_versions) {
		if (!(st = prepare(c, "DELETE FROM runs WHERE kernel_id IN (SELECT id FROM kernels "
				      "WHERE version <> ?1)")))
			goto error;
		sqlite3_bind_text(st, 1, TCOMP_VERSION, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_finalize(st);
			goto write_error;
		}
		sqlite3_finalize(st);
		n += sqlite3_changes(c->db);
	}
	if (o->failed) {
		if (exec(c, "DELETE FROM runs WHERE status = 'failed'", "delete failed runs") < 0)
			goto error;
		n += sqlite3_changes(c->db);
	}
	if (o->older_than_s > 0) {
		if (!(st = prepare(c, "DELETE FROM runs WHERE at < ?1")))
			goto error;
		sqlite3_bind_double(st, 1, now_unix() - o->older_than_s);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_finalize(st);
			goto write_error;
		}
		sqlite3_finalize(st);
		n += sqlite3_changes(c->db);
	}
	if (o->all_but_best) {
		/* keep each key's best ok run and the defaults run list shows */
		if (!(st = prepare(c,
			      "DELETE FROM runs WHERE id NOT IN ("
			      " SELECT (SELECT id FROM runs r WHERE r.kernel_id = k.id AND"
			      "  r.status = 'ok' AND r.median_ms >= 0"
			      "  ORDER BY " CHOSEN " DESC, r.median_ms, r.id LIMIT 1) FROM kernels k"
			      " UNION SELECT (SELECT id FROM runs r WHERE r.kernel_id = k.id AND"
			      "  r.status = 'ok' AND r.median_ms >= 0 AND"
			      "  tc_canonical_options(r.options) = ?1"
			      "  ORDER BY " RETIMED " DESC, r.median_ms, r.id"
			      "  LIMIT 1) FROM kernels k)")))
			goto error;
		sqlite3_bind_text(st, 1, def, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			sqlite3_finalize(st);
			goto write_error;
		}
		sqlite3_finalize(st);
		n += sqlite3_changes(c->db);
	}
	if (exec(c, "DELETE FROM objects WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE "
		    "r.kernel_id = objects.kernel_id AND r.options = objects.options AND "
		    "r.status = 'ok');"
		    "DELETE FROM kernels WHERE id NOT IN (SELECT kernel_id FROM runs)",
		    "delete empty entries") < 0)
		goto error;
	if (commit(c) < 0)
		goto done_error;
	exec(c, "VACUUM", "vacuum"); /* best effort: another reader may hold it */
	tc_free(def);
	if (removed)
		*removed = n;
	return 0;
write_error:
	db_error(c, "delete");
error:
	rollback(c);
done_error:
	tc_free(def);
	return -1;
}
