/* wd_stale_fd_spin.c - the watchdog looped forever on a socket whose recorded fd was gone.
 *
 * What happened: a socket remembered the fd of the last wait on it, through any of its fds,
 * and the watchdog cut through that fd after checking it still named the socket. When the
 * check failed, the socket was dropped from the heap, seen still waited on, and evaluated
 * again - forever: one core at 100 %, and no other socket of the process was ever cut.
 * Two sequences lead there:
 *  (a) threads A and C block reading fd; thread B polls dup(fd) for 100 ms, then closes
 *      the dup. The recorded fd is the closed dup; at A's expiry the check fails.
 *  (b) a governed socket is closed where the hooks cannot see it (syscall(SYS_close)); a
 *      pipe() gets its number, and a blocking read of the pipe goes through the stale slot.
 * Expected: in (a) A and C are cut at their 1 s limit; in (b) the pipe read gets its byte
 * (written at 3 s) as it would natively; in both, an unrelated stalled socket is still cut at its limit, and
 * the process uses almost no CPU while everything waits.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "regress.h"

#define LIMIT_MS 1000.0

struct reader {
	int fd;
	bool use_poll;
	long delay_ms;
	double started, ended;
	ssize_t r;
	int err;
	atomic_int done;
};

static double t0;

static void *read_it(void *arg)
{
	struct reader *rd = arg;
	char buf[16];

	tbt_sleep_ms(rd->delay_ms);
	rd->started = tbt_now_ms() - t0;
	if (rd->use_poll) {
		struct pollfd p = { .fd = rd->fd, .events = POLLIN };

		rd->r = poll(&p, 1, -1);
		/* A cut socket polls readable; the read then says why. */
		if (rd->r > 0)
			rd->r = read(rd->fd, buf, sizeof(buf));
	} else {
		rd->r = read(rd->fd, buf, sizeof(buf));
	}
	rd->err = errno;
	rd->ended = tbt_now_ms() - t0;
	atomic_store(&rd->done, 1);
	return NULL;
}

static void start_reader(pthread_t *t, struct reader *rd, int fd, bool use_poll, long delay)
{
	memset(rd, 0, sizeof(*rd));
	rd->fd = fd;
	rd->use_poll = use_poll;
	rd->delay_ms = delay;
	TBR_CHECK(pthread_create(t, NULL, read_it, rd) == 0, "pthread_create");
}

/* Waits until rd finished or `until_ms` (since t0) passed. */
static bool finished_by(struct reader *rd, double until_ms)
{
	while (!atomic_load(&rd->done) && tbt_now_ms() - t0 < until_ms)
		tbt_sleep_ms(10);
	return atomic_load(&rd->done);
}

static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 + ru.ru_stime.tv_sec * 1e3 +
	       ru.ru_stime.tv_usec / 1e3;
}

static void check_cut(const char *who, struct reader *rd, double limit_from)
{
	TBR_CHECK(finished_by(rd, limit_from + LIMIT_MS + 1500),
		  "%s: not cut %.0f ms after its limit (the watchdog is stuck)", who, 1500.0);
	TBR_CHECK(rd->r == -1 && rd->err == ETIMEDOUT, "%s: returned %zd %s", who, rd->r,
		  tbt_errno_name(rd->err));
	TBR_CHECK(rd->ended >= limit_from + LIMIT_MS, "%s: cut early at %.0f ms", who,
		  rd->ended);
	TBR_CHECK(rd->ended < limit_from + LIMIT_MS + 1000, "%s: cut late at %.0f ms", who,
		  rd->ended);
	printf("%s: cut at %.0f ms (wait began at %.0f ms)\n", who, rd->ended, rd->started);
}

/* (a) the recorded fd is a dup that was closed while A and C still wait. */
static void dup_closed(int port)
{
	pthread_t ta, tc, tu;
	struct reader a, c, u;
	int fd = tbr_connect(port), ufd = tbr_connect(port), d;
	struct pollfd p;
	double cpu0 = cpu_ms();

	t0 = tbt_now_ms();
	start_reader(&ta, &a, fd, false, 0);
	start_reader(&tc, &c, fd, true, 0);
	start_reader(&tu, &u, ufd, false, 300);
	tbt_sleep_ms(50);
	d = dup(fd);
	TBR_CHECK(d >= 0, "dup: %s", strerror(errno));
	p.fd = d;
	p.events = POLLIN;
	TBR_CHECK(poll(&p, 1, 100) == 0, "poll on the dup returned early");
	close(d);
	/* One silence for the side: it began with whichever of A and C waited first. */
	check_cut("(a) reader A", &a, a.started < c.started ? a.started : c.started);
	check_cut("(a) poller C", &c, a.started < c.started ? a.started : c.started);
	check_cut("(a) unrelated socket", &u, u.started);
	pthread_join(ta, NULL);
	pthread_join(tc, NULL);
	pthread_join(tu, NULL);
	printf("(a) process CPU while waiting: %.0f ms\n", cpu_ms() - cpu0);
	TBR_CHECK(cpu_ms() - cpu0 < 400, "(a) %.0f ms of CPU: something spins",
		  cpu_ms() - cpu0);
	close(fd);
	close(ufd);
}

static void *write_later(void *arg)
{
	int wfd = *(int *)arg;

	tbt_sleep_ms(3000);
	TBR_CHECK(write(wfd, "p", 1) == 1, "write to the pipe: %s", strerror(errno));
	return NULL;
}

/* (b) a stale slot: the socket's number now names a pipe that is read with blocking. */
static void stale_slot(int port)
{
	pthread_t tw, tu;
	struct reader u;
	int fd = tbr_connect(port), ufd = tbr_connect(port), pfd[2];
	char c;
	ssize_t r;
	double cpu0 = cpu_ms(), took;

	TBR_CHECK(syscall(SYS_close, fd) == 0, "SYS_close: %s", strerror(errno));
	TBR_CHECK(pipe(pfd) == 0, "pipe: %s", strerror(errno));
	if (pfd[0] != fd)
		tbr_skip("the pipe did not get the closed socket's number");
	t0 = tbt_now_ms();
	start_reader(&tu, &u, ufd, false, 300);
	TBR_CHECK(pthread_create(&tw, NULL, write_later, &pfd[1]) == 0, "pthread_create");
	r = read(pfd[0], &c, 1);
	took = tbt_now_ms() - t0;
	TBR_CHECK(r == 1 && c == 'p', "(b) the pipe read returned %zd %s", r,
		  tbt_errno_name(errno));
	printf("(b) the pipe read returned its byte at %.0f ms\n", took);
	check_cut("(b) unrelated socket", &u, u.started);
	pthread_join(tw, NULL);
	pthread_join(tu, NULL);
	printf("(b) process CPU while waiting: %.0f ms\n", cpu_ms() - cpu0);
	TBR_CHECK(cpu_ms() - cpu0 < 400, "(b) %.0f ms of CPU: something spins",
		  cpu_ms() - cpu0);
	close(pfd[0]);
	close(pfd[1]);
	close(ufd);
}

int main(int argc, char **argv)
{
	int port, lfd;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	lfd = tbr_listen(&port);
	dup_closed(port);
	stale_slot(port);
	close(lfd);
	return 0;
}
