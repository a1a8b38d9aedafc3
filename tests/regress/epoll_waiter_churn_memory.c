/*
 * epoll_waiter_churn_memory - a thread blocked in epoll_wait kept every array the mirror
 * retired while other threads changed the registrations.
 *
 * timebox mirrors each epoll instance's governed registrations in an open-addressing
 * table that its waits read without a lock; a rehash (growth, or dropping tombstones)
 * retires the old array, which a waiter may still be reading. Retired arrays were freed
 * only when the instance's references fell to the table's own - and a waiter holds one for
 * its whole epoll_wait. In a thread pool sharing one epoll fd a thread is nearly always
 * blocked in it, so while other threads added and deleted sockets under numbers that keep
 * changing (a proxy's outbound connections taking numbers among its inbound ones: a rehash
 * every few dozen), nothing was ever freed until the epoll fd closed. Now only a scan of
 * the table under way (a few microseconds, never the blocking call) keeps them.
 *
 * The program registers twenty governed sockets (read interest, a silent peer), lets a
 * thread block in epoll_wait on the instance (until it sleeps there), then adds and deletes
 * a governed socket under a number that changes (900 in turn) 300,000 times, and fails
 * when its resident memory grew by more than 4 MB (it grew by 14 MB). Under a sanitizer
 * the loop runs but the size is not judged: the sanitizer's allocator keeps freed blocks.
 */
#include <fcntl.h>
#include <sys/epoll.h>

#include "regress.h"

#define SOCKS 20
#define ROUNDS 300000

static int ep;

int main(int argc, char **argv)
{
	const char *san = getenv("TB_SANITIZE");
	int lport, lfd, fds[SOCKS], extra, wake[2];
	struct epoll_event ev = { .events = EPOLLIN };
	long before, after;
	struct tbr_epoll_waiter w;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=5s", "TIMEBOX_CONNECT_TIMEOUT=5s", NULL);
	lfd = tbr_listen(&lport);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0, "epoll_create1: %s", strerror(errno));
	for (int i = 0; i < SOCKS; i++) {
		fds[i] = tbr_connect(lport);
		ev.data.fd = fds[i];
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) == 0, "ADD: %s", strerror(errno));
	}
	TBR_CHECK(pipe2(wake, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	ev.data.fd = wake[0];
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, wake[0], &ev) == 0, "ADD: %s", strerror(errno));
	extra = tbr_connect(lport);
	tbr_epoll_waiter_start(&w, ep);

	before = tbr_rss_kb();
	for (int k = 0; k < ROUNDS; k++) {
		/* A number that changes (900 of them in turn): its ADD finds no tombstone of its
		 * own, and the table rehashes every few dozen. */
		int other = fcntl(extra, F_DUPFD_CLOEXEC, 100 + k % 900);

		TBR_CHECK(other >= 0, "F_DUPFD: %s", strerror(errno));
		ev.data.fd = other;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, other, &ev) == 0, "ADD: %s", strerror(errno));
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, other, NULL) == 0, "DEL: %s", strerror(errno));
		close(other);
	}
	after = tbr_rss_kb();
	fprintf(stderr, "resident memory %ld kB before the churn, %ld kB after (a thread blocked "
		"in epoll_wait throughout: %s)\n", before, after,
		tbr_epoll_waiter_sleeping(&w) ? "yes" : "no");
	TBR_CHECK(write(wake[1], "x", 1) == 1, "wake the waiter: %s", strerror(errno));
	tbr_epoll_waiter_join(&w);
	close(lfd);
	if (san == NULL || *san == '\0')
		TBR_CHECK(after - before <= 4096, "grew by %ld kB", after - before);
	return 0;
}
