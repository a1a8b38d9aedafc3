/* gate_shared_eintr.c - a signal did not end a wait at a shared gate.
 *
 * What happened: a handler that runs while a thread waits at the gate ends the wait with
 * EINTR, as a blocking connect() would (programs bound their own connects with alarm()).
 * The gate of one process kept that promise; the shared gate's wait loop ignored the
 * interrupted futex wait and went on waiting until acquire_timeout. The sequence:
 * TIMEBOX_GATE_SHARED=1, max_conns 1, acquire_timeout 3s; hold the slot; install a SIGALRM
 * handler without SA_RESTART and arm a 200 ms repeating timer; connect again -> must return -1 EINTR
 * after >= 200 ms and well before 3 s. The gate must still work afterwards.
 */
#include <sys/time.h>

#include "gate_regress.h"

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

int main(int argc, char **argv)
{
	static char xdg_env[128];
	struct sigaction sa = { .sa_handler = on_alarm };
	/* Repeating: a signal that lands while the waiter is between two system calls of its
	 * wait loop (a loaded machine preempts it there) runs the handler unseen, as it would
	 * just before a native connect() began to sleep; the next one ends the wait. */
	struct itimerval it = { .it_interval = { 0, 200000 }, .it_value = { 0, 200000 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	double ms, t0;
	int port, lfd, fd1, fd2, err;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
				 "TIMEBOX_ACQUIRE_TIMEOUT=3s", xdg_env, NULL);
	}
	lfd = tbr_listen(&port);
	fd1 = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd1 >= 0, "first connect: %s", tbt_errno_name(err));
	sigemptyset(&sa.sa_mask);
	TBR_CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
	/* Timed from before the timer is armed: the connect's own timing starts after, and a
	 * preemption between the two made an interrupted wait of 200 ms read as 199. */
	t0 = tbt_now_ms();
	setitimer(ITIMER_REAL, &it, NULL);
	fd2 = tbg_connect(port, &err, &ms);
	ms = tbt_now_ms() - t0;
	setitimer(ITIMER_REAL, &off, NULL);
	TBR_CHECK(fd2 < 0 && err == EINTR && ms >= 200 && ms < 1500,
		  "connect at a full shared gate, SIGALRM after 200 ms: fd %d %s after %.0f ms "
		  "(alarms %d; want EINTR after >= 200 ms)", fd2, tbt_errno_name(err), ms,
		  (int)alarms);
	close(fd1);
	fd2 = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd2 >= 0 && ms < 1000, "connect after the slot came back: %s after %.0f ms",
		  tbt_errno_name(err), ms);
	close(fd2);
	close(lfd);
	tbg_cleanup(NULL);
	return 0;
}
