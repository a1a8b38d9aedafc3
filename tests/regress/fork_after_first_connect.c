/* fork_after_first_connect.c - a fork right after the first governed connect hung the child.
 *
 * What happened: the first governed connect starts timebox's threads (the watchdog, the
 * statistics thread), and pthread_create returned before the new thread had finished
 * starting. A sanitizer's runtime allocates during that start (ASan: pthread_getattr_np,
 * then a free into its quarantine, under its allocator's lock). A program that forks right
 * after its first connect could copy that lock held by the half-started thread; in the
 * child, the first wait starts the child's own watchdog, whose start-up then waited for
 * the lock for ever, and so did the parent in waitpid. Under SANITIZE=address the e2e test
 * test_forked_child_is_governed (errnocheck fork: connect, send, fork) hung in 21 of 150
 * runs. glibc resets its own malloc locks in a fork child, so a plain build did not hang;
 * any runtime or allocator without that care had the same hazard.
 * The sequence, 30 times (10 under ThreadSanitizer, whose start-up takes a second), each in
 * a fresh process (the race is at a process's first connect): connect to a peer that never
 * answers, send, fork at once; the child's read must be cut at the read timeout (300 ms),
 * and the child must exit within 5 s.
 *
 * The fix: a fork waits (100 ms at most) until every thread timebox started is past its
 * start-up (tb_service_fork_prepare, shim/service.c); first the creator itself waited,
 * which cost every process's first connect that wait, forking or not.
 */
#include <signal.h>
#include <sys/wait.h>

#include "regress.h"

static int lfd;

/* Accepts and holds every connection, silent. */
static void *hold(void *arg)
{
	(void)arg;
	while (accept(lfd, NULL, NULL) >= 0)
		;
	return NULL;
}

/* One round, in a fresh process: the first governed connect, a send, a fork. */
static int round_once(int port)
{
	int fd = tbr_connect(port), st;
	pid_t pid;

	TBR_CHECK(send(fd, "x", 1, 0) == 1, "send: %s", strerror(errno));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		char c;
		ssize_t r = read(fd, &c, 1);

		_exit(r == -1 && errno == ETIMEDOUT ? 0 : 3);
	}
	TBR_CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	TBR_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's read was not cut "
		  "(status %#x)", (unsigned)st);
	return 0;
}

int main(int argc, char **argv)
{
	const char *pre = getenv("TBR_PRELOAD");
	char portstr[16], *args[4];
	pthread_t t;
	int port, rounds = pre != NULL && strstr(pre, "libtsan") != NULL ? 10 : 30;

	if (argc == 3 && strcmp(argv[1], "round") == 0)
		return round_once(atoi(argv[2]));
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", "TIMEBOX_LOG=off", NULL);
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, hold, NULL) == 0, "pthread_create");
	snprintf(portstr, sizeof(portstr), "%d", port);
	args[0] = argv[0];
	args[1] = (char *)"round";
	args[2] = portstr;
	args[3] = NULL;
	for (int i = 0; i < rounds; i++) {
		double t0 = tbt_now_ms();
		pid_t pid = fork();
		int st = 0;

		TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			setpgid(0, 0);
			execv("/proc/self/exe", args);
			_exit(127);
		}
		while (waitpid(pid, &st, WNOHANG) == 0) {
			if (tbt_now_ms() - t0 > 5000) {
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				TBR_CHECK(0, "round %d: hung for 5 s after a fork that followed the "
					  "first connect", i + 1);
			}
			tbt_sleep_ms(10);
		}
		TBR_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d: status %#x", i + 1,
			  (unsigned)st);
	}
	printf("%d rounds: every child cut at its read timeout and ended\n", rounds);
	return 0;
}
