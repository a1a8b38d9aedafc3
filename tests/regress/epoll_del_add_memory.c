/*
 * epoll_del_add_memory - an event loop that switched sockets by DEL and ADD grew without
 * bound.
 *
 * timebox mirrors each epoll instance's governed registrations in an open-addressing
 * table that its waits read without a lock. A DEL leaves a tombstone, and each ADD took a
 * new slot, so every few dozen switches the table was rehashed into a new array; the old
 * one was retired - a waiter might still be reading it - and freed only when the epoll fd
 * was closed. redis's ae event loop (redis-benchmark, and every hiredis client on it)
 * switches a socket between reading and writing by EPOLL_CTL_DEL and EPOLL_CTL_ADD: a
 * million switches on twenty sockets left 53 MB behind. An ADD now takes its own fd's
 * tombstone back, and a retired array is freed as soon as no waiter can be reading it.
 *
 * The program registers twenty governed sockets, then deletes and adds them again 300,000
 * times (and as many times under numbers that change, so that rehashes still happen), and
 * fails when its resident memory grew by more than 4 MB (it grew by 32). Under a sanitizer
 * the loop runs but the size is not judged: the sanitizer's allocator keeps freed blocks.
 */
#include <fcntl.h>
#include <sys/epoll.h>

#include "regress.h"

#define SOCKS 20
#define ROUNDS 300000

int main(int argc, char **argv)
{
	const char *san = getenv("TB_SANITIZE");
	int lport, lfd, ep, fds[SOCKS], extra;
	struct epoll_event ev = { .events = EPOLLIN };
	long before, after;

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
	extra = tbr_connect(lport);
	before = tbr_rss_kb();
	for (int k = 0; k < ROUNDS; k++) {
		int fd = fds[k % SOCKS], other;

		ev.data.fd = fd;
		ev.events = k % 2 ? EPOLLIN : EPOLLOUT;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0, "DEL: %s", strerror(errno));
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "ADD: %s", strerror(errno));
		/* A number that changes (900 of them in turn): its ADD finds no tombstone of its
		 * own, and the table still rehashes now and then. */
		other = fcntl(extra, F_DUPFD_CLOEXEC, 100 + k % 900);
		TBR_CHECK(other >= 0, "F_DUPFD: %s", strerror(errno));
		ev.data.fd = other;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, other, &ev) == 0, "ADD: %s", strerror(errno));
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, other, NULL) == 0, "DEL: %s", strerror(errno));
		close(other);
	}
	after = tbr_rss_kb();
	fprintf(stderr, "resident memory %ld kB before the switches, %ld kB after\n", before, after);
	close(lfd);
	if (san == NULL || *san == '\0')
		TBR_CHECK(after - before <= 4096, "grew by %ld kB", after - before);
	return 0;
}
