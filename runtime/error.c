/* Errors of the library (error.h): each thread keeps a list of (context,
 * message) for the contexts whose last call on that thread failed. */
#include "error.h"

#include "internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>

/* Errors are kept per thread and per context: each thread has a list of
 * (context, message) for the contexts whose last call on that thread failed.
 * A context is identified by its address and a serial number, so a new
 * context at the address of a freed one does not see the old messages. */
typedef struct error_entry {
	const tc_context *ctx;
	uint64_t serial;
	char *msg;
	tc_error_kind kind;
	struct error_entry *next;
} error_entry;

static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;
static int error_key_ok;
static uint64_t context_serial;
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t tc_rt_error_serial(void)
{
	uint64_t s;
	pthread_mutex_lock(&serial_lock);
	s = ++context_serial;
	pthread_mutex_unlock(&serial_lock);
	return s;
}

static void error_list_free(void *p)
{
	error_entry *e = p, *next;
	for (; e; e = next) {
		next = e->next;
		tc_free(e->msg);
		tc_free(e);
	}
}

static void error_key_init(void)
{
	error_key_ok = pthread_key_create(&error_key, error_list_free) == 0;
}

/* The calling thread's entry for ctx (NULL if it has none). */
static error_entry *thread_err(const tc_context *ctx)
{
	error_entry *e;
	pthread_once(&error_once, error_key_init);
	if (!error_key_ok)
		return NULL;
	for (e = pthread_getspecific(error_key); e; e = e->next)
		if (e->ctx == ctx && e->serial == ctx->serial)
			return e;
	return NULL;
}

void tc_rt_error_forget(__tc_keep const tc_context *ctx)
{
	error_entry **pe, *e;
	pthread_once(&error_once, error_key_init);
	if (!error_key_ok)
		return;
	e = pthread_getspecific(error_key);
	for (pe = &e; *pe; pe = &(*pe)->next)
		if ((*pe)->ctx == ctx && (*pe)->serial == ctx->serial) {
			error_entry *dead = *pe;
			*pe = dead->next;
			tc_free(dead->msg);
			tc_free(dead);
			break;
		}
	pthread_setspecific(error_key, e);
}

/* ---- errors ---- */

/* The context (and its serial) whose last error on this thread could not
 * be stored for want of memory: tc_context_error then says "out of
 * memory" (a static text), as SQLite's sqlite3_errmsg does, rather than
 * nothing or an older message. */
static _Thread_local const tc_context *oom_ctx;
static _Thread_local uint64_t oom_serial;

static const char oom_message[] = "error: out of memory\n";

static void set_error_oom(tc_context *ctx);

/* Make msg (owned) of kind the calling thread's error for ctx; NULL
 * clears it. */
static void set_error_str(tc_context *ctx, char *msg, tc_error_kind kind)
{
	error_entry *e;
	if (oom_ctx == ctx)
		oom_ctx = NULL;
	if (!msg) {
		tc_rt_error_forget(ctx);
		return;
	}
	e = thread_err(ctx);
	if (!e && error_key_ok && (e = tc_calloc(1, sizeof(*e)))) {
		e->ctx = ctx;
		e->serial = ctx->serial;
		e->next = pthread_getspecific(error_key);
		if (pthread_setspecific(error_key, e) != 0) {
			tc_free(e);
			e = NULL;
		}
	}
	if (!e) { /* out of memory: the message is lost */
		tc_free(msg);
		set_error_oom(ctx);
		return;
	}
	tc_free(e->msg);
	e->msg = msg;
	e->kind = kind;
}

/* The message for ctx could not be made: forget the older one and say
 * "out of memory". */
static void set_error_oom(tc_context *ctx)
{
	tc_rt_error_forget(ctx);
	oom_ctx = ctx;
	oom_serial = ctx->serial;
}

void tc_rt_clear_error(__tc_keep tc_context *ctx)
{
	set_error_str(ctx, NULL, TC_ERROR_NONE);
}

/* The kind of an error recorded by tc_rt_set_error from its format (the
 * literal text of the call site, not the message made from it): the
 * library's convention is that a failed allocation reports "out of memory"
 * and a broken invariant "internal error: ...", so the kind is decided
 * here, once, where the message is recorded. */
static tc_error_kind kind_of_format(const char *fmt)
{
	if (!strncmp(fmt, "out of memory", 13))
		return TC_ERROR_NOMEM;
	if (strstr(fmt, "internal error"))
		return TC_ERROR_INTERNAL;
	return TC_ERROR_USER;
}

static void set_error_va(tc_context *ctx, tc_error_kind kind, const char *fmt, va_list ap)
{
	tc_buf b;
	char *msg;
	tc_buf_init(&b);
	tc_buf_puts(&b, "error: ");
	tc_buf_vprintf(&b, fmt, ap);
	tc_buf_putc(&b, '\n');
	if (b.oom)
		kind = TC_ERROR_NOMEM;
	msg = tc_buf_take(&b);
	if (msg)
		set_error_str(ctx, msg, kind);
	else
		set_error_oom(ctx);
}

void tc_rt_set_error(__tc_keep tc_context *ctx, const char *fmt, ...)
{
	va_list ap;
	if (!ctx)
		return;
	va_start(ap, fmt);
	set_error_va(ctx, kind_of_format(fmt), fmt, ap);
	va_end(ap);
}

tc_error_kind tc_context_error_kind(const tc_context *ctx)
{
	const error_entry *e;
	if (!ctx)
		return TC_ERROR_USER;
	if (oom_ctx == ctx && oom_serial == ctx->serial)
		return TC_ERROR_NOMEM;
	e = thread_err(ctx);
	return e && e->msg ? e->kind : TC_ERROR_NONE;
}

/* Record rendered diagnostics as the context's error. */
void tc_rt_set_error_diags(__tc_keep tc_context *ctx, __tc_keep const tc_diags *d)
{
	tc_buf b;
	tc_error_kind kind = TC_ERROR_USER;
	char *msg;
	int i;
	if (!ctx)
		return;
	tc_buf_init(&b);
	tc_diags_render(d, 1u << TC_SEV_ERROR | 1u << TC_SEV_WARNING, &b);
	if (!d->nerrors && !d->oom)
		tc_buf_puts(&b, "error: out of memory\n");
	if (!d->nerrors || d->oom || b.oom)
		kind = TC_ERROR_NOMEM;
	for (i = 0; i < d->n && kind == TC_ERROR_USER; i++)
		if (d->v[i].sev == TC_SEV_ERROR && d->v[i].msg &&
			strstr(d->v[i].msg, "internal error"))
			kind = TC_ERROR_INTERNAL; /* the convention of kind_of_format */
	msg = tc_buf_take(&b);
	if (msg)
		set_error_str(ctx, msg, kind);
	else
		set_error_oom(ctx);
}

const char *tc_context_error(const tc_context *ctx)
{
	const error_entry *e;
	if (!ctx)
		return "error: no context (NULL)\n";
	e = thread_err(ctx);
	if (e && e->msg)
		return e->msg;
	return oom_ctx == ctx && oom_serial == ctx->serial ? oom_message : "";
}

