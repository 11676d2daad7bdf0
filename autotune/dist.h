/* What the distributed tuner's files share (not for the tests): the
 * messages between ranks (types, writing and reading them), and rank 0's
 * knowledge of the other ranks across runs (tc_tune_transport.state).
 *
 *   dist.c   the ranks' state and hellos, the messages' shared parts, and
 *            a search's generations spread over the ranks
 *            (tc_tune_dist_measure, tc_tune_dismiss)
 *   batch.c  whole jobs spread over the ranks (tc_autotune_batch)
 *   serve.c  a rank that serves both (tc_tune_serve)
 *
 * autotune/README.md ("Distributed evaluation") gives the protocol.
 * Messages are a 4-byte magic and a type, then fixed fields in the
 * senders' byte order (the ranks must share it: HELLO carries a mark).
 * Ownership: a tc_buf being written is the caller's until msg_send frees
 * it; a reader borrows its data; get_str's strings are the caller's
 * (tc_free). */
#ifndef TC_TUNE_DIST_H
#define TC_TUNE_DIST_H

#include "eval.h"

#include <stdint.h>
#include <string.h>

#define MAGIC 0x44544354u /* "TCTD" */
#define BYTE_ORDER_MARK 0x01020304u
#define HELLO_WAIT_S 60.0 /* ranks that have not said hello by then are given up */
#define ANSWER_SLACK_S 10.0
/* why a rank whose transport says it is gone (a message of length 0) is
 * given up */
#define GONE "its transport says it is gone"

enum {
	MSG_HELLO = 1,
	MSG_SETUP,
	MSG_SETUP_FAILED,
	MSG_BATCH,
	MSG_RESULT,
	MSG_BATCH_DONE,
	MSG_CANCEL,
	MSG_QUIT,
	MSG_JOB,
	MSG_PROGRESS,
	MSG_JOB_DONE,
};

/* ---- writing and reading messages ---- */

static inline void put(tc_buf *b, const void *p, size_t n)
{
	tc_buf_putn(b, p, n);
}

static inline void put_u32(tc_buf *b, uint32_t v)
{
	put(b, &v, sizeof(v));
}

static inline void put_i64(tc_buf *b, int64_t v)
{
	put(b, &v, sizeof(v));
}

static inline void put_f64(tc_buf *b, double v)
{
	put(b, &v, sizeof(v));
}

static inline void put_bytes(tc_buf *b, const void *p, size_t n)
{
	put_i64(b, (int64_t)n);
	put(b, p, n);
}

static inline void put_str(tc_buf *b, const char *s)
{
	put_bytes(b, s, strlen(s));
}

static inline void msg_begin(tc_buf *b, uint32_t type)
{
	tc_buf_init(b);
	put_u32(b, MAGIC);
	put_u32(b, type);
}

/* Send b to rank to and free it: 0, -1 (out of memory or not sent). */
static inline tc_stat msg_send(const tc_tune_transport *t, int to, tc_buf *b)
{
	tc_stat st = TC_ERR;
	if (!b->oom)
		st = t->send(t->user, to, b->s, b->len) == 0 ? TC_OK : TC_ERR;
	tc_buf_free(b);
	return st;
}

/* A message being read; bad once anything was missing. */
typedef struct reader {
	const unsigned char *p;
	size_t n, at;
	int bad;
} reader;

static inline const void *get(reader *r, size_t n)
{
	const void *p;
	if (r->bad || n > r->n - r->at) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->at;
	r->at += n;
	return p;
}

static inline uint32_t get_u32(reader *r)
{
	uint32_t v = 0;
	const void *p = get(r, sizeof(v));
	if (p)
		memcpy(&v, p, sizeof(v));
	return v;
}

static inline int64_t get_i64(reader *r)
{
	int64_t v = 0;
	const void *p = get(r, sizeof(v));
	if (p)
		memcpy(&v, p, sizeof(v));
	return v;
}

static inline double get_f64(reader *r)
{
	double v = 0;
	const void *p = get(r, sizeof(v));
	if (p)
		memcpy(&v, p, sizeof(v));
	return v;
}

static inline const void *get_bytes(reader *r, size_t *n)
{
	int64_t len = get_i64(r);
	if (len < 0) {
		r->bad = 1;
		len = 0;
	}
	*n = (size_t)len;
	return get(r, (size_t)len);
}

/* A string field, copied (NULL when bad or out of memory). */
static inline char *get_str(reader *r)
{
	size_t n;
	const char *p = get_bytes(r, &n);
	char *s;
	if (!p || !(s = tc_malloc(n + 1)))
		return NULL;
	memcpy(s, p, n);
	s[n] = 0;
	return s;
}

/* Start reading message data[0..len): its type, 0 when it is not one. */
static inline uint32_t msg_open(reader *r, const void *data, size_t len)
{
	r->p = data;
	r->n = len;
	r->at = 0;
	r->bad = 0;
	if (get_u32(r) != MAGIC)
		return 0;
	return get_u32(r);
}

/* CPUs this process may run on. */

/* What rank 0 knows of a rank (index: the rank). */
typedef struct tc_tune_rank {
	int hello;      /* said hello */
	int lost;       /* given up: its messages are ignored */
	int jobs;       /* candidates it compiles at once */
	unsigned setup; /* the run it is set up for (0: none) */
	unsigned failed_setup; /* the run it could not set up */
	int busy;       /* holds a batch (until its BATCH_DONE) */
	int measured;   /* candidates it measured (rank 0: those measured here) */
	double heard;   /* when it last sent something, or was sent a batch */
	char host[128];
	char machine[256];
} tc_tune_rank;

/* The state of rank 0 across runs (tc_tune_transport.state). */
typedef struct tc_tune_ranks {
	int size;
	unsigned runs; /* runs set up so far */
	int hellos_awaited;
	tc_tune_rank *r;
	char machine[256];
} tc_tune_ranks;

/* The CPU's machine text ("triple;cpu;features"), or "". */

/* The CPU's machine text ("triple;cpu;features", the kernel cache key's
 * part), or "", into buf[n]. */
void tc_tune_machine(__tc_keep char *buf, size_t n);
/* Rank 0's state of t's ranks, made at the first call (NULL when out of
 * memory). */
tc_tune_ranks *tc_tune_ranks_state(__tc_keep tc_tune_transport *t);
/* Give rank r up (a warning in ctx says why): its messages are ignored
 * from then on. */
void tc_tune_give_up(__tc_keep tc_context *ctx, __tc_keep tc_tune_ranks *ms, int r,
	const char *why);
/* Take rank r's HELLO (the rest of the message in rd): version and byte
 * order checked, jobs, host and machine noted. */
void tc_tune_take_hello(__tc_keep tc_context *ctx, __tc_keep tc_tune_ranks *ms, int r,
	__tc_keep reader *rd);
/* Wait for every rank's hello (the first time only; a minute at most:
 * silent ranks are given up).  -1 when the transport failed. */
tc_stat tc_tune_await_hellos(__tc_keep tc_context *ctx, __tc_keep tc_tune_transport *t,
	__tc_keep tc_tune_ranks *ms);
/* Send a message of type with one field, run (CANCEL, QUIT). */
void tc_tune_send_plain(__tc_keep const tc_tune_transport *t, int r, uint32_t type, uint32_t run);

/* Fields of a batch's JOB and JOB_DONE. */
/* A tensor's dtype and shape (SETUP, JOB): written; read into x (zeroed, on
 * the CPU, its shape in shape[8]), the number of elements returned
 * (negative extents count 0; a rank over 8 makes rd bad). */
void tc_tune_put_tensor(__tc_keep tc_buf *b, __tc_keep const DLTensor *x);
int64_t tc_tune_get_tensor(__tc_keep reader *rd, __tc_keep DLTensor *x, __tc_keep int64_t *shape);
void tc_tune_put_settings(__tc_keep tc_buf *b, __tc_keep const tc_tune_settings *s);
void tc_tune_get_settings(__tc_keep reader *rd, __tc_keep tc_tune_settings *s);
void tc_tune_put_report(__tc_keep tc_buf *b, __tc_keep const tc_tune_report *r);
void tc_tune_get_report(__tc_keep reader *rd, __tc_keep tc_tune_report *r);

#endif
