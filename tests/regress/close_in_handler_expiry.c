/* close_in_handler_expiry.c - a signal handler that closed a socket while its own thread
 * was expiring that socket hung the thread for good.
 *
 * What happened: an expiry (the cut of a socket whose limit has passed) runs under the
 * socket's `busy` count, and close() waits for `busy` to drop before it gives the number
 * back to the kernel, so that the number cannot name another file under the cut. Most
 * expiries are the watchdog's, but a program's own thread expires a socket itself when its
 * wait begins past the limit (a poll() after the first-byte limit fell while the thread
 * was busy elsewhere, or its deadline did). The old way to bound a call - an alarm() whose handler closes the
 * socket - lands in that expiry when the alarm and the limit fall together: the handler's
 * close waited for a `busy` that only its own interrupted thread could drop. The program
 * hung in sched_yield.
 * The sequence: a deadline of 3 ms; 1,000 times, each on a thread of its own: connect to a
 * server that never answers, send a request, spin 3.5 ms (the deadline passes while the
 * thread waits on nothing), then poll() for the answer - its wait begins past the deadline
 * and the thread expires the socket itself - while a 20 us interval timer's handler closes
 * the socket at its next tick. Every poll must return (the socket cut, or
 * closed under it), and the handler must have closed sockets during poll() (a watcher
 * thread fails the program when no round ends for 5 s).
 *
 * The fix: close() does not wait for an expiry its own thread holds below the handler:
 * it marks that expiry, which then leaves the number alone.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "regress.h"

#define ROUNDS 1000

static atomic_int victim = -1, in_poll, closed_in_poll, rounds, cut_early;

static void *silent(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	return NULL;
}

static void close_in_handler(int sig)
{
	int saved = errno;
	int fd = atomic_exchange(&victim, -1);

	(void)sig;
	if (fd >= 0) {
		if (atomic_load(&in_poll))
			atomic_fetch_add(&closed_in_poll, 1);
		close(fd);
	}
	errno = saved;
}

static void spin_ms(double ms)
{
	double until = tbt_now_ms() + ms;

	while (tbt_now_ms() < until)
		;
}

/* One round, on a thread of its own (a cut call's next connect on the same thread would be
 * its retry, past the deadline): the only thread that takes SIGALRM while it runs. */
static void *round_thread(void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(intptr_t)arg),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd, mine;
	sigset_t alrm;
	struct pollfd p;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	TBR_CHECK(fd >= 0, "socket: %s", tbt_errno_name(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || write(fd, "GET", 3) != 3) {
		/* The deadline fell first (a slow machine, a sanitizer): no round. */
		TBR_CHECK(errno == ETIMEDOUT, "connect or write: %s", tbt_errno_name(errno));
		atomic_fetch_add(&cut_early, 1);
		close(fd);
		return NULL;
	}
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	spin_ms(3.5); /* past the deadline, waiting on nothing: the poll's wait expires it */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	atomic_store(&in_poll, 1);
	atomic_store(&victim, fd);
	poll(&p, 1, 50); /* cut (end of file), or closed under it (POLLNVAL) */
	atomic_store(&in_poll, 0);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	mine = atomic_exchange(&victim, -1);
	if (mine >= 0)
		close(mine);
	return NULL;
}

int main(int argc, char **argv)
{
	struct itimerval it = { .it_value = { 0, 20 }, .it_interval = { 0, 20 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa;
	sigset_t alrm;
	int lfd, port;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=3ms", "TIMEBOX_LOG=off", NULL);
	/* Every thread starts with SIGALRM blocked; a round unblocks it around its poll(). */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, silent);
	tbr_watch(&rounds, ROUNDS, "round");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = close_in_handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < ROUNDS; i++) {
		pthread_t t;

		TBR_CHECK(pthread_create(&t, NULL, round_thread, (void *)(intptr_t)port) == 0,
			  "pthread_create");
		pthread_join(t, NULL);
		atomic_store(&rounds, i + 1);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	fprintf(stderr, "%d rounds (%d cut before their poll); the handler closed %d sockets "
		"during poll()\n", ROUNDS, atomic_load(&cut_early), atomic_load(&closed_in_poll));
	TBR_CHECK(atomic_load(&closed_in_poll) > 0, "the handler never closed during poll()");
	return 0;
}
