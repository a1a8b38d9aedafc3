/* gate_shared_fork_waiter.c - a long-lived child forked while a thread waited at a shared
 * gate kept that thread's slot locked after its connection was closed.
 *
 * What happened: a shared gate's slot is a lock on the gate file, held through an open file
 * description of the connect's own (slot_fd); the kernel drops it when the last fd of that
 * description closes. A thread that waits at a full shared gate already has its description
 * open, and the slot it gets later is locked through it. A child forked meanwhile inherits
 * that fd, and no socket of the child owns it: nothing there ever closes it. When the
 * parent closed its connection, the slot stayed locked by the child's copy: with
 * max_conns = 1 the next connect of the parent (and of every process sharing the gate)
 * waited acquire_timeout and failed with ETIMEDOUT (phase=gate), until the child exited or
 * exec'd - for a pre-fork server's worker, its whole life. Natively the connection was gone.
 * The same held for a slot taken but not yet recorded by its socket, and one a close had
 * taken from its socket but not yet closed. Now the child closes every shared-gate
 * description no socket of its own holds a slot through (tb_shared_gate_fork_unheld).
 * The sequence (TIMEBOX_GATE_SHARED=1, max_conns 1, acquire_timeout 1 s): the main thread
 * holds A; thread B connects and waits at the gate; fork: the child closes what it
 * inherited and stays alive; the parent closes A (B gets the slot), then B's socket, and
 * connects again: it must get the slot at once.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "gate_regress.h"

static int port;
static struct tbg_connecter b; /* thread B */

/* The worker: closes every fd it inherited but its end of the pipe (as a daemon does),
 * says so, and lives until the parent closes the pipe. */
static void worker(int rd, int wr)
{
	char c;

	for (int fd = 3; fd < 1024; fd++)
		if (fd != rd && fd != wr)
			close(fd);
	TBR_CHECK(write(wr, "r", 1) == 1, "child: write: %s", strerror(errno));
	close(wr);
	while (read(rd, &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

int main(int argc, char **argv)
{
	static char xdg_env[128];
	int lfd, fd_a, fd_c, err, up[2], down[2];
	double ms, t0;
	char c;
	pid_t pid;

	(void)argc;
#if !defined(__x86_64__)
	tbr_skip("reads the futex system call number of x86_64 from /proc");
#endif
	if (getenv("TBR_CHILD") == NULL) {
		snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
				 "TIMEBOX_ACQUIRE_TIMEOUT=1s", xdg_env, NULL);
	}
	tbr_hang_guard(20, "the story hung");
	lfd = tbr_listen(&port);
	fd_a = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd_a >= 0, "connect A: %s", tbt_errno_name(err));
	tbg_connecter_start(&b, port, NULL);
	t0 = tbt_now_ms();
	while (atomic_load(&b.tid) == 0 || !tbr_thread_in_futex(atomic_load(&b.tid))) {
		TBR_CHECK(tbt_now_ms() - t0 < 900, "thread B never waited at the gate");
		sched_yield();
	}
	TBR_CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		worker(down[0], up[1]);
	close(up[1]);
	close(down[0]);
	TBR_CHECK(read(up[0], &c, 1) == 1, "the child never said it was ready");
	close(fd_a); /* the slot passes to B */
	pthread_join(b.t, NULL);
	TBR_CHECK(b.fd >= 0, "thread B: connect: %s after %.0f ms", tbt_errno_name(b.err), b.ms);
	close(b.fd); /* no connection to the destination is left open anywhere */
	fd_c = tbg_connect(port, &err, &ms);
	close(down[1]); /* the worker may go */
	err = fd_c >= 0 ? 0 : err;
	TBR_CHECK(tbg_wait(pid) == 0, "the child failed");
	TBR_CHECK(fd_c >= 0 && ms < 500, "parent: connect with no connection open, a worker "
		  "alive: fd %d %s after %.0f ms (want a slot at once)", fd_c, tbt_errno_name(err),
		  ms);
	printf("parent: connected again in %.0f ms with the worker alive\n", ms);
	close(fd_c);
	close(lfd);
	tbg_cleanup(NULL);
	return 0;
}
