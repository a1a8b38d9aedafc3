/* big_tls_watchdog.c - a program with a large thread-local buffer got no watchdog: its
 * waits were never cut.
 *
 * What happened: a regression program that kept a 64 KiB `__thread` buffer printed
 * `event=error what=watchdog_thread error="cannot start the watchdog thread; waits are
 * unbounded"` at every governed connect, and its stalled send hung until the runner killed
 * it. glibc places a thread's static TLS - every initial-exec `__thread` variable of the
 * program and its libraries - at the top of the thread's stack, and pthread_create
 * refuses (EINVAL) a stack too small to hold it. timebox started its watchdog with a
 * 64 KiB stack and its statistics thread with 256 KiB: a program with more thread-local
 * data than that (a large per-thread scratch buffer is common in servers and in
 * interpreters) lost both, silently for its waits.
 * The sequence: this program has 256 KiB of `__thread` data; with a read timeout of
 * 300 ms it reads from a peer that never answers: the read must be cut with ETIMEDOUT,
 * never before 300 ms, and timebox's log must not report a thread it could not start.
 *
 * The fix: when pthread_create refuses the stack size, the thread is started again with
 * the system's default stack (shim/service.c), which glibc sizes to hold the TLS.
 */
#include <fcntl.h>

#include "regress.h"

static __thread char scratch[256 << 10];

int main(int argc, char **argv)
{
	static char log_kv[80], log[16384];
	int lfd, port, fd, peer, lf;
	double t0, ms;
	ssize_t r, n = 0;
	char c;

	(void)argc;
	/* exec keeps the pid: the re-executed program finds its log by it */
	snprintf(log_kv, sizeof(log_kv), "TIMEBOX_LOG=/tmp/tbr-big-tls-%d.log", (int)getpid());
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", log_kv, NULL);
	scratch[0] = 1; /* the buffer is the program's: it must stay where it is */
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	t0 = tbt_now_ms();
	r = read(fd, &c, 1);
	ms = tbt_now_ms() - t0;
	printf("read from a silent peer: %zd %s after %.0f ms\n", r,
	       r < 0 ? tbt_errno_name(errno) : "", ms);
	TBR_CHECK(r == -1 && errno == ETIMEDOUT, "the stalled read was not cut: %zd", r);
	TBR_CHECK(ms >= 300 && ms < 300 + 1500, "cut after %.0f ms (limit 300)", ms);
	TBR_CHECK(scratch[0] == 1, "the program's thread-local data changed");
	close(fd);
	close(peer);
	close(lfd);
	lf = open(log_kv + strlen("TIMEBOX_LOG="), O_RDONLY | O_CLOEXEC);
	TBR_CHECK(lf >= 0, "the log %s: %s", log_kv, strerror(errno));
	for (ssize_t k; (k = read(lf, log + n, sizeof(log) - 1 - (size_t)n)) > 0;)
		n += k;
	close(lf);
	unlink(log_kv + strlen("TIMEBOX_LOG="));
	log[n] = '\0';
	TBR_CHECK(strstr(log, "phase=first_byte") != NULL, "no cut in the log:\n%s", log);
	TBR_CHECK(strstr(log, "_thread") == NULL, "a thread did not start:\n%s", log);
	return 0;
}
