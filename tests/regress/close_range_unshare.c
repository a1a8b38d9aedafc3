/* close_range_unshare.c - close_range(CLOSE_RANGE_UNSHARE) and unshare(CLONE_FILES) in a
 * single-threaded program closed nothing: the peer never saw the connection end.
 *
 * What happened: timebox's own threads (the watchdog, the statistics thread, the resolvers)
 * share the program's fd table. A program with one thread of its own asks for a table of
 * its own - close_range(fd, fd, CLOSE_RANGE_UNSHARE), or unshare(CLONE_FILES) and then
 * close(fd) - which natively changes nothing (the kernel copies the table only when
 * another thread shares it) and closes the connection: the peer reads its end at once.
 * Under timebox the kernel saw the table shared, gave the caller a copy and closed the fd
 * there only: timebox's threads kept the original, and with it the connection open - the
 * peer waited (poll found nothing in 1 s), and the watchdog's identity checks looked at a
 * table the program no longer used. Conversely, with another thread of the program alive
 * the copy is made natively too, and the connection stays open in the other thread's
 * table: there timebox untracked it all the same, and a read of that thread's on a silent
 * peer was never cut.
 *
 * The sequence: read_timeout 200 ms; the parent's governed wait starts timebox's threads,
 * then each case runs in a fork child (whose own threads timebox starts again), after a
 * governed wait of its own: (1) close_range(fd, fd, CLOSE_RANGE_UNSHARE) on a healthy
 * connection - the peer must read its end within 1 s, and a governed wait after it is
 * still cut; (2) the same with unshare(CLONE_FILES) and close(fd); (3) a second program
 * thread alive (blocked on a pipe), close_range(fd, fd, CLOSE_RANGE_UNSHARE) in the main
 * thread: the peer sees no end (natively neither), and the other thread still exchanges
 * bytes on fd and its read of a silent peer is cut at 200 ms.
 *
 * What fixed it: timebox counts its live threads; when no thread of the program's but the
 * caller's shares the table, CLOSE_RANGE_UNSHARE and CLONE_FILES are dropped (the native
 * result: nothing copied), and close_range closes in place, untracking what it closes.
 * Otherwise the flag goes through and close_range untracks nothing (shim/hooks_fd.c).
 */
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>

#include "regress.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

static int port, lfd;

/* The process's thread count (/proc/self/status), or -1. */
static int threads(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

/* A governed recv from a silent peer: cut at read_timeout (the watchdog runs). */
static void governed_wait(const char *when)
{
	int fd = tbr_connect(port), peer = accept(lfd, NULL, NULL), r, err;
	double t0 = tbt_now_ms();
	char c;

	r = (int)recv(fd, &c, 1, 0);
	err = errno;
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "%s: recv from a silent peer: %d (%s) after %.0f ms",
		  when, r, strerror(err), tbt_now_ms() - t0);
	close(fd);
	close(peer);
}

/* The peer of a connection the program closed reads its end within a second. */
static void peer_sees_end(int peer, const char *how)
{
	struct pollfd p = { .fd = peer, .events = POLLIN };
	int r = poll(&p, 1, 1000);
	char c;

	TBR_CHECK(r == 1 && read(peer, &c, 1) == 0,
		  "%s: the peer saw no end of the connection in 1 s (poll %d): the fd stayed "
		  "open in the table timebox's threads share", how, r);
}

static void case_close_range(void)
{
	int fd, peer;

	governed_wait("before close_range");
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(close_range((unsigned)fd, (unsigned)fd, CLOSE_RANGE_UNSHARE) == 0,
		  "close_range: %s", strerror(errno));
	TBR_CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF, "fd %d still open", fd);
	peer_sees_end(peer, "close_range(CLOSE_RANGE_UNSHARE)");
	close(peer);
	governed_wait("after close_range");
}

static void case_unshare(void)
{
	int fd, peer;

	governed_wait("before unshare");
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(unshare(CLONE_FILES) == 0, "unshare(CLONE_FILES): %s", strerror(errno));
	TBR_CHECK(close(fd) == 0, "close: %s", strerror(errno));
	peer_sees_end(peer, "unshare(CLONE_FILES) and close");
	close(peer);
	governed_wait("after unshare");
}

/* The other thread of case 3: blocked on a pipe until told to use the connection. */
static int go[2], conn;
static atomic_int other_tid;

static void *other_main(void *arg)
{
	char c, buf[4];
	int r, err;
	double t0;

	(void)arg;
	atomic_store(&other_tid, (int)syscall(SYS_gettid));
	TBR_CHECK(read(go[0], &c, 1) == 1, "pipe read");
	TBR_CHECK(send(conn, "ping", 4, 0) == 4, "other thread: send: %s", strerror(errno));
	TBR_CHECK(recv(conn, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "pong", 4) == 0,
		  "other thread: recv: %s", strerror(errno));
	t0 = tbt_now_ms();
	r = (int)recv(conn, &c, 1, 0);
	err = errno;
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "other thread: recv from a silent peer: %d (%s) "
		  "after %.0f ms", r, strerror(err), tbt_now_ms() - t0);
	return NULL;
}

static void case_other_thread(void)
{
	struct pollfd p = { .events = POLLIN };
	pthread_t t;
	char buf[4];
	int peer;

	governed_wait("before the thread");
	conn = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(pipe(go) == 0, "pipe");
	pthread_create(&t, NULL, other_main, NULL);
	while (atomic_load(&other_tid) == 0 || !tbr_thread_sleeping(atomic_load(&other_tid)))
		sched_yield();
	TBR_CHECK(close_range((unsigned)conn, (unsigned)conn, CLOSE_RANGE_UNSHARE) == 0,
		  "close_range: %s", strerror(errno));
	p.fd = peer;
	TBR_CHECK(poll(&p, 1, 100) == 0, "the peer saw the connection end: the other thread "
		  "still holds it");
	TBR_CHECK(write(go[1], "g", 1) == 1, "pipe write");
	TBR_CHECK(recv(peer, buf, 4, MSG_WAITALL) == 4 && memcmp(buf, "ping", 4) == 0,
		  "peer: recv");
	TBR_CHECK(send(peer, "pong", 4, 0) == 4, "peer: send");
	pthread_join(t, NULL);
	close(peer);
}

static int run(void (*fn)(void), const char *name)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		tbr_hang_guard(4, "a governed read was never cut: its socket is no longer "
				  "governed");
		fn();
		_exit(0);
	}
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("%s: as natively\n", name);
		return 0;
	}
	fprintf(stderr, "FAIL: %s (status %#x)\n", name, status);
	return 1;
}

int main(int argc, char **argv)
{
	int fails = 0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", NULL);
	/* Natively the table is the program's alone only without a runtime thread (a
	 * sanitizer's): with one, the copy is made natively too. Nothing of timebox's yet. */
	if (threads() != 1)
		tbr_skip("another thread shares the fd table at start-up (a sanitizer's runtime?)");
#ifdef SYS_close_range
	errno = 0;
	if (syscall(SYS_close_range, ~0U - 1, ~0U - 1, CLOSE_RANGE_UNSHARE) != 0)
		tbr_skip(errno == ENOSYS ? "no close_range (kernel before 5.9)"
					 : "close_range refuses CLOSE_RANGE_UNSHARE");
#else
	tbr_skip("no close_range in this C library's headers");
#endif
	lfd = tbr_listen(&port);
	governed_wait("in the parent"); /* timebox's threads run here, not in the children */
	TBR_CHECK(threads() > 1, "no watchdog thread after a governed wait");
	fails += run(case_close_range, "close_range(CLOSE_RANGE_UNSHARE), one thread");
	fails += run(case_unshare, "unshare(CLONE_FILES) and close, one thread");
	fails += run(case_other_thread, "close_range(CLOSE_RANGE_UNSHARE), two threads");
	return fails != 0;
}
