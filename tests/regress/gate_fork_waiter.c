/* gate_fork_waiter.c - fork while a thread waits at the gate.
 *
 * The story: a process forks (a pre-fork server spawning a worker, a program running a
 * helper) while one of its threads waits at a full gate. The waiter's queue entry lives on
 * that thread's stack; the child has the memory but not the thread. A child that kept the
 * queue would hand its first free slot to a waiter that does not exist there and then
 * wait for ever itself; a lock held at the moment of the fork would deadlock it. The
 * sequence: max_conns 1, acquire_timeout 3s; thread A holds the slot, thread B waits at
 * the gate (seen in futex in /proc); fork. The child closes its copy of A's socket and
 * connects: it must get the slot at once. The parent closes A's socket: B must get the
 * slot at once.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "gate_regress.h"

static int port;
static struct tbg_connecter b; /* thread B */

int main(int argc, char **argv)
{
	double ms, t0;
	int lfd, fd_a, err;
	pid_t pid;

	(void)argc;
#if !defined(__x86_64__)
	tbr_skip("reads the futex system call number of x86_64 from /proc");
#endif
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=3s", NULL);
	lfd = tbr_listen(&port);
	fd_a = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd_a >= 0, "connect A: %s", tbt_errno_name(err));
	tbg_connecter_start(&b, port, NULL);
	t0 = tbt_now_ms();
	while (atomic_load(&b.tid) == 0 || !tbr_thread_in_futex(atomic_load(&b.tid))) {
		TBR_CHECK(tbt_now_ms() - t0 < 2000, "thread B never waited at the gate");
		sched_yield();
	}
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int fd;

		close(fd_a);
		fd = tbg_connect(port, &err, &ms);
		TBR_CHECK(fd >= 0 && ms < 1000, "child: connect after closing its copy of the "
			  "only socket: fd %d %s after %.0f ms (want a slot at once)", fd,
			  tbt_errno_name(err), ms);
		_exit(0);
	}
	err = tbg_wait(pid);
	TBR_CHECK(err == 0, "the forked child failed or hung (exit %d)", err);
	t0 = tbt_now_ms();
	close(fd_a);
	pthread_join(b.t, NULL);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(b.fd >= 0 && ms < 1000, "parent: waiter B after A closed: fd %d %s, %.0f ms "
		  "after the close (want the slot at once)", b.fd, tbt_errno_name(b.err), ms);
	close(b.fd);
	close(lfd);
	return 0;
}
