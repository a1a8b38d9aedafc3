/* handler_nested_io.c - governed I/O from a signal handler that interrupted a governed wait
 * on the same thread neither ends the interrupted wait nor disturbs the thread's budget.
 *
 * What could go wrong: the thread's record of waits ends waits a siglongjmp abandoned, and
 * the thread's budget is updated without atomics. A handler that runs while the thread is
 * blocked in a read, and does an exchange of its own, must not take the blocked read for
 * abandoned (it would go uncut), and a handler that interrupts a budget update must not
 * leave it inconsistent.
 * (a) read_timeout 1s: socket A sends "stall" and blocks in read; 200 ms later SIGALRM's
 *     handler (SA_RESTART) exchanges "ping" on socket B. The read on A must still be cut
 *     at its read timeout: ETIMEDOUT, >= 1 s, and the handler's exchange must succeed.
 * (b) deadline 2s: 3000 exchanges on C while a 200 us interval timer's handler writes on
 *     socket D (drained by the server) every time it fires: every exchange and every write
 *     succeeds and nothing expires.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "regress.h"

static int lfd, port, hfd = -1;
static atomic_int handler_ok, handler_bad;

/* Echoes each chunk back, except chunks starting with "stall" (no answer) or "sink" (read
 * and dropped). */
static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (strncmp(buf, "stall", 5) != 0 && strncmp(buf, "sink", 4) != 0 &&
		    write(fd, buf, (size_t)n) != n)
			break;
	close(fd);
	return NULL;
}

static void exchange_in_handler(int sig)
{
	int saved = errno;
	char buf[8];

	(void)sig;
	if (write(hfd, "ping", 4) == 4 && read(hfd, buf, sizeof(buf)) == 4)
		atomic_fetch_add(&handler_ok, 1);
	else
		atomic_fetch_add(&handler_bad, 1);
	errno = saved;
}

static void write_in_handler(int sig)
{
	int saved = errno;

	(void)sig;
	if (write(hfd, "sink", 4) == 4)
		atomic_fetch_add(&handler_ok, 1);
	else
		atomic_fetch_add(&handler_bad, 1);
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct itimerval it = { .it_value = { 0, 200000 } };
	char buf[16];
	int a, c;
	double t0, ms;
	ssize_t r;
	int err;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", "TIMEBOX_DEADLINE=2s", NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, echo);

	/* (a) */
	a = tbr_connect(port);
	hfd = tbr_connect(port);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = exchange_in_handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	TBR_CHECK(write(a, "stall", 5) == 5, "write: %s", tbt_errno_name(errno));
	t0 = tbt_now_ms();
	setitimer(ITIMER_REAL, &it, NULL);
	r = read(a, buf, sizeof(buf));
	err = errno;
	ms = tbt_now_ms() - t0;
	fprintf(stderr, "(a) read %zd %s after %.0f ms; handler ok=%d bad=%d\n", r,
		tbt_errno_name(err), ms, atomic_load(&handler_ok), atomic_load(&handler_bad));
	TBR_CHECK(atomic_load(&handler_ok) == 1 && atomic_load(&handler_bad) == 0,
		  "the handler's exchange failed");
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "the interrupted read returned %zd %s", r,
		  tbt_errno_name(err));
	TBR_CHECK(ms >= 1000 && ms < 1000 + 1500, "cut after %.0f ms", ms);
	close(a);
	close(hfd);

	/* (b) */
	atomic_store(&handler_ok, 0);
	c = tbr_connect(port);
	hfd = tbr_connect(port);
	sa.sa_handler = write_in_handler;
	sigaction(SIGALRM, &sa, NULL);
	it.it_value.tv_usec = 200;
	it.it_interval.tv_usec = 200;
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < 3000; i++) {
		TBR_CHECK(write(c, "ping", 4) == 4, "exchange %d: write: %s", i,
			  tbt_errno_name(errno));
		r = read(c, buf, 4);
		TBR_CHECK(r == 4, "exchange %d: read %zd %s", i, r, tbt_errno_name(errno));
	}
	it.it_value.tv_usec = 0;
	it.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	fprintf(stderr, "(b) 3000 exchanges; handler writes ok=%d bad=%d\n",
		atomic_load(&handler_ok), atomic_load(&handler_bad));
	TBR_CHECK(atomic_load(&handler_bad) == 0, "a write from the handler failed");
	return 0;
}
