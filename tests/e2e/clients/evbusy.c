/*
 * evbusy.c - an event loop that never blocks, with a stalled connection in it: four
 * connections to a listener of its own that never answers, one (A) with a request sent and
 * registered for EPOLLIN, the others (B) registered for EPOLLOUT, level-triggered, which
 * are always ready - so every epoll_wait(-1) returns at once with several events, as in a
 * loop kept busy by its other sockets. The loop goes on until A reports something, or until LIMIT_MS.
 *
 * usage: evbusy [LIMIT_MS]   (default 3000)
 *
 * Prints "a_after_ms=N recv=R errno=NAME waits=W a_fd=FD": when A reported, what a recv on
 * A then returned. Exit 0 when A reported, 1 when it never did (or a step failed).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READY 3 /* the B connections */

static void die(const char *step)
{
	fprintf(stderr, "evbusy: %s: %s\n", step, strerror(errno));
	exit(1);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int connect_to(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)) != 0)
		die("connect");
	return fd;
}

int main(int argc, char **argv)
{
	double limit = argc > 1 ? atof(argv[1]) : 3000, t0;
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	struct epoll_event ev, out[READY + 1];
	long waits = 0;
	char buf[64];
	int lfd, fa, ep;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 4) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &len) != 0)
		die("listen");
	fa = connect_to(&a);
	if (send(fa, "ping", 4, 0) != 4)
		die("send");
	ep = epoll_create1(0);
	if (ep < 0 || fcntl(fa, F_SETFL, O_NONBLOCK) != 0)
		die("epoll");
	ev.events = EPOLLIN;
	ev.data.fd = fa;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fa, &ev) != 0)
		die("epoll");
	for (int i = 0; i < READY; i++) {
		int fb = connect_to(&a);

		ev.events = EPOLLOUT;
		ev.data.fd = fb;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fb, &ev) != 0)
			die("epoll");
	}
	t0 = now_ms();
	while (now_ms() - t0 < limit) {
		int n = epoll_wait(ep, out, READY + 1, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		waits++;
		for (int i = 0; i < n; i++) {
			ssize_t r;

			if (out[i].data.fd != fa)
				continue;
			r = recv(fa, buf, sizeof(buf), 0);
			printf("a_after_ms=%.1f recv=%zd errno=%s waits=%ld a_fd=%d\n", now_ms() - t0,
			       r, r < 0 ? strerrorname_np(errno) : "0", waits, fa);
			return 0;
		}
	}
	printf("a_after_ms=never waits=%ld\n", waits);
	return 1;
}
