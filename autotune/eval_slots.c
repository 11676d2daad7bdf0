/* The slots: the one engine through which the evaluator runs its children,
 * for the search (tc_tune_eval_measure) and for the final stage
 * (tc_tune_eval_retime) alike.
 *
 * A slot holds one forked child and the parent's end of its socket pair.
 * The engine forks children into slots (tc_tune_slots_spawn), hands one
 * the timing token (tc_tune_slots_go), polls the watched sockets with the
 * nearest deadline in mind (tc_tune_slots_poll) and turns what it found
 * into events, in slot order (tc_tune_slots_event): a whole message, a
 * death (socket closed without one), a deadline passed (killed), a timing
 * budget passed (killed).  Its callers decide what to spawn and when to
 * hand out GO, and what each event means for their candidates; they end a
 * slot (tc_tune_slots_end) when they are done with its child, and
 * tc_tune_slots_clear kills and reaps whatever is left, on success, error
 * or stop alike.
 *
 * Deadlines: compile_timeout_s from the fork, the caller's limit from GO;
 * a READY child has none.  The parent writes with MSG_NOSIGNAL (a dead
 * child is an error, not SIGPIPE).  Each child closes the parent's ends of
 * its siblings' sockets, so that it sees the end of its own when the
 * parent closes it or dies, and on Linux it is killed when the parent
 * dies (PR_SET_PDEATHSIG). */
#include "eval.h"

#include "../runtime/internal.h"
#include "../runtime/options.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

tc_stat tc_tune_slots_init(__tc_keep tc_tune_slots *S, __tc_keep tc_tune_eval *ev, int n,
	int watch_ready, sig_atomic_t stop0, __tc_keep const char *timing_what)
{
	int i;
	memset(S, 0, sizeof(*S));
	S->ev = ev;
	S->watch_ready = watch_ready;
	S->stop0 = stop0;
	S->timing_what = timing_what;
	S->sl = tc_calloc((size_t)n + 1, sizeof(tc_tune_slot));
	S->pf = tc_calloc((size_t)n + 1, sizeof(struct pollfd));
	S->pi = tc_calloc((size_t)n + 1, sizeof(int));
	if (!S->sl || !S->pf || !S->pi) {
		tc_rt_set_error(ev->m->ctx, "out of memory");
		tc_tune_slots_clear(S); /* n 0: no slot to end */
		return TC_ERR;
	}
	S->n = n;
	for (i = 0; i < n; i++)
		S->sl[i].fd = -1;
	return TC_OK;
}

void tc_tune_slots_end(__tc_keep tc_tune_slots *S, int i)
{
	tc_tune_slot *s = &S->sl[i];
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
	}
	s->pid = 0;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->state = TC_TUNE_SLOT_DONE;
}

void tc_tune_slots_clear(__tc_keep tc_tune_slots *S)
{
	int i;
	for (i = 0; S->sl && i < S->n; i++)
		if (S->sl[i].pid > 0 || S->sl[i].fd >= 0)
			tc_tune_slots_end(S, i);
	tc_free(S->sl);
	tc_free(S->pf);
	tc_free(S->pi);
	S->sl = NULL;
	S->pf = NULL;
	S->pi = NULL;
}

int tc_tune_slots_stopped(__tc_keep const tc_tune_slots *S)
{
	const tc_tune_eval *ev = S->ev;
	return ev->stop || (ev->set->stop && *ev->set->stop != S->stop0);
}

tc_stat tc_tune_slots_spawn(__tc_keep tc_tune_slots *S, int i, __tc_keep const tc_options *o,
	int index, tc_tune_fault fault, int final)
{
	tc_tune_slot *s = &S->sl[i];
	int sv[2], j;
	pid_t pid;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return TC_ERR;
	fflush(NULL); /* the child never flushes the parent's buffers (_exit) */
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return TC_ERR;
	}
	if (pid == 0) {
		close(sv[0]);
		for (j = 0; j < S->n; j++)
			if (S->sl[j].fd >= 0)
				close(S->sl[j].fd);
#ifdef __linux__
		prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
		tc_tune_child_main(S->ev, sv[1], o, fault, final);
	}
	close(sv[1]);
	s->state = TC_TUNE_SLOT_COMPILING;
	s->pid = pid;
	s->fd = sv[0];
	s->index = index;
	s->got = 0;
	s->limit = S->ev->set->compile_timeout_s;
	s->deadline = tc_tune_now() + s->limit;
	return TC_OK;
}

/* How the child of slot s, whose socket closed without a result, ended;
 * it is reaped. */
static void death_text(tc_tune_slot *s, char *buf, size_t len)
{
	int status = 0;
	if (waitpid(s->pid, &status, 0) < 0)
		snprintf(buf, len, "the candidate's process ended without a result");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "the candidate's process was killed by signal %d (%s)",
			WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "the candidate's process exited with status %d without a result",
			WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	s->pid = 0;
}

tc_stat tc_tune_slots_go(__tc_keep tc_tune_slots *S, int i, __tc_keep tc_tune_msg *go, double limit,
	double budget, __tc_keep char *text, size_t len)
{
	tc_tune_slot *s = &S->sl[i];
	go->type = TC_TUNE_MSG_GO;
	s->state = TC_TUNE_SLOT_TIMING;
	s->go_time = tc_tune_now();
	s->limit = limit;
	s->deadline = s->go_time + limit;
	s->budget = s->go_time + budget;
	if (tc_tune_msg_send(s->fd, go) < 0) {
		death_text(s, text, len);
		return TC_ERR;
	}
	return TC_OK;
}

/* Is slot s's socket polled? */
static int watched(const tc_tune_slots *S, const tc_tune_slot *s)
{
	return s->state == TC_TUNE_SLOT_COMPILING || s->state == TC_TUNE_SLOT_TIMING ||
		(s->state == TC_TUNE_SLOT_READY && S->watch_ready);
}

tc_stat tc_tune_slots_poll(__tc_keep tc_tune_slots *S)
{
	double first = INFINITY, now = tc_tune_now();
	int i, wait_ms;
	S->np = S->cur = 0;
	for (i = 0; i < S->n; i++) {
		tc_tune_slot *s = &S->sl[i];
		if (!watched(S, s))
			continue;
		S->pf[S->np].fd = s->fd;
		S->pf[S->np].events = POLLIN;
		S->pf[S->np].revents = 0;
		S->pi[S->np++] = i;
		if (s->state != TC_TUNE_SLOT_READY && s->deadline < first)
			first = s->deadline;
	}
	if (!S->np)
		return TC_OK;
	wait_ms = first == INFINITY ? 100 : (int)((first - now) * 1e3) + 1;
	wait_ms = wait_ms < 0 ? 0 : wait_ms > 100 ? 100 : wait_ms;
	if (poll(S->pf, (nfds_t)S->np, wait_ms) < 0 && errno != EINTR) {
		tc_rt_set_error(S->ev->m->ctx, "tc_autotune: poll: %s", strerror(errno));
		S->np = 0;
		return TC_ERR;
	}
	S->now = tc_tune_now();
	return TC_OK;
}

int tc_tune_slots_event(__tc_keep tc_tune_slots *S, __tc_keep tc_tune_slot_event *e)
{
	while (S->cur < S->np) {
		const struct pollfd *p = &S->pf[S->cur];
		tc_tune_slot *s = &S->sl[S->pi[S->cur]];
		double now = S->now;
		e->i = S->pi[S->cur++];
		if (p->revents) {
			ssize_t r = read(s->fd, (char *)&s->m + s->got, sizeof(s->m) - s->got);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0) { /* closed without a (whole) result */
				death_text(s, e->text, sizeof(e->text));
				e->what = TC_TUNE_SLOT_DIED;
				return 1;
			}
			s->got += (size_t)r;
			if (s->got < sizeof(s->m))
				continue;
			s->got = 0;
			s->m.text[sizeof(s->m.text) - 1] = 0;
			if (s->m.type == TC_TUNE_MSG_READY && s->state == TC_TUNE_SLOT_COMPILING)
				s->state = TC_TUNE_SLOT_READY;
			else if (s->m.type == TC_TUNE_MSG_DONE && s->state == TC_TUNE_SLOT_TIMING)
				s->state = TC_TUNE_SLOT_READY;
			e->what = TC_TUNE_SLOT_MESSAGE;
			return 1;
		}
		if (s->state == TC_TUNE_SLOT_TIMING && now > s->budget && now <= s->deadline) {
			kill(s->pid, SIGKILL);
			e->what = TC_TUNE_SLOT_SLOW;
			e->elapsed_s = now - s->go_time;
			return 1;
		}
		if (s->state != TC_TUNE_SLOT_READY && now > s->deadline) {
			kill(s->pid, SIGKILL);
			snprintf(e->text, sizeof(e->text), "%s took longer than %g s (killed)",
				s->state == TC_TUNE_SLOT_COMPILING ? "compiling" : S->timing_what,
				s->limit);
			e->what = TC_TUNE_SLOT_LATE;
			return 1;
		}
	}
	return 0;
}
