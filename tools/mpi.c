/* The MPI transport of distributed tuning (README "Tuning at scale"):
 * `mpirun -n N tcomp autotune ...` runs the search on rank 0 and serves
 * candidates on the others (tc_tune_settings.transport, tc_tune_serve).
 * Built when CMake finds MPI (TCOMP_HAVE_MPI); without it, a tcomp started
 * by mpirun with several ranks says so instead of running N separate
 * searches that would write one cache at once. */
#define _DEFAULT_SOURCE /* usleep */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The size of the job that started this process, from the environment of
 * the common launchers (Open MPI, MPICH's Hydra and PMI, Slurm's srun
 * --mpi); 1 when none. */
int mpi_world_size(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
		"MPI_LOCALNRANKS", NULL};
	for (int i = 0; vars[i]; i++) {
		const char *v = getenv(vars[i]);
		if (v && atoi(v) > 1)
			return atoi(v);
	}
	return 1;
}

#ifdef TCOMP_HAVE_MPI
#include <mpi.h>

#define SEND_WAIT_S 60.0 /* a message not taken by then: the peer is gone */

typedef struct mpi_state {
	void *buf; /* the last message received */
	size_t cap;
} mpi_state;

static mpi_state state;

static double now(void)
{
	return MPI_Wtime();
}

/* Send without waiting forever: a rank that died or hangs never takes a
 * large message (MPI waits for the receiver), so after SEND_WAIT_S the
 * message is abandoned (its copy and request are left to MPI) and the
 * peer counts as gone. */
static int mpi_send(void *user, int to, const void *data, size_t len)
{
	MPI_Request req;
	void *copy;
	double t0 = now();
	int done = 0;
	(void)user;
	if (len > (size_t)INT32_MAX || !(copy = malloc(len ? len : 1)))
		return -1;
	memcpy(copy, data, len);
	if (MPI_Isend(copy, (int)len, MPI_BYTE, to, 0, MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
		free(copy);
		return -1;
	}
	while (!done) {
		if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return -1; /* the copy stays with the failed request */
		if (!done) {
			if (now() - t0 > SEND_WAIT_S)
				return -1;
			usleep(200);
		}
	}
	free(copy);
	return 0;
}

static int mpi_recv(void *user, double timeout_s, int *from, const void **data, size_t *len)
{
	double t0 = now();
	MPI_Status st;
	int flag = 0, count;
	(void)user;
	for (;;) {
		if (MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS)
			return -1;
		if (flag)
			break;
		if (now() - t0 >= timeout_s)
			return 0;
		usleep(500);
	}
	MPI_Get_count(&st, MPI_BYTE, &count);
	if ((size_t)count > state.cap) {
		void *b = realloc(state.buf, (size_t)count);
		if (!b)
			return -1;
		state.buf = b;
		state.cap = (size_t)count;
	}
	if (MPI_Recv(state.buf, count, MPI_BYTE, st.MPI_SOURCE, 0, MPI_COMM_WORLD,
		    MPI_STATUS_IGNORE) != MPI_SUCCESS)
		return -1;
	*from = st.MPI_SOURCE;
	*data = state.buf;
	*len = (size_t)count;
	return 1;
}

int mpi_start(int *argc, char ***argv, tc_tune_transport *t)
{
	int provided;
	if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
		return -1;
	/* a rank that dies is the search's to handle, not a reason to end the
	 * job (with mpirun --enable-recovery; see README) */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	memset(t, 0, sizeof(*t));
	MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &t->size);
	/* one GPU per rank: the i-th rank of a machine uses its GPU i (the
	 * candidates' processes open the driver; this one never does) unless
	 * the user chose with CUDA_VISIBLE_DEVICES */
	if (!getenv("CUDA_VISIBLE_DEVICES")) {
		MPI_Comm node;
		int local = 0;
		char dev[16];
		if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t->rank,
			    MPI_INFO_NULL, &node) == MPI_SUCCESS) {
			MPI_Comm_rank(node, &local);
			MPI_Comm_free(&node);
		}
		snprintf(dev, sizeof(dev), "%d", local);
		setenv("CUDA_VISIBLE_DEVICES", dev, 1);
	}
	t->send = mpi_send;
	t->recv = mpi_recv;
	return 0;
}

static volatile sig_atomic_t end_status;

static void finalize_too_long(int sig)
{
	(void)sig;
	_exit(end_status);
}

void mpi_end(int lost, int status)
{
	const char *recovery = getenv("OMPI_MCA_orte_enable_recovery");
	fflush(stdout);
	fflush(stderr);
	/* MPI_Finalize waits for every rank, and Open MPI's can wait for a dead
	 * one too, even under mpirun --enable-recovery: so when ranks were
	 * given up and the job survives dead ranks, end without it (mpirun
	 * takes that under --enable-recovery).  Otherwise finalize, but the
	 * result is out already: after 30 s end with the command's status. */
	if (lost && recovery && !strcmp(recovery, "1"))
		goto out;
	end_status = status;
	signal(SIGALRM, finalize_too_long);
	alarm(30);
	MPI_Finalize();
	alarm(0);
out:
	free(state.buf);
	state.buf = NULL;
	state.cap = 0;
}

int mpi_built(void)
{
	return 1;
}
#else
int mpi_start(int *argc, char ***argv, tc_tune_transport *t)
{
	(void)argc;
	(void)argv;
	(void)t;
	return -1;
}

void mpi_end(int lost, int status)
{
	(void)lost;
	(void)status;
}

int mpi_built(void)
{
	return 0;
}
#endif
