/* epoll_del_through_dup.c - a registration deleted through a copy of the epoll fd was
 * still taken for armed under the original number, and its idle connection was cut.
 *
 * What happened: timebox keeps each epoll instance's registrations under the number of the
 * fd they were made through. A program that removed a socket through a dup of that fd
 * (same kernel instance) changed a number timebox had no record of, so the DEL was
 * dropped: every later epoll_wait on the original number marked the socket as a read wait,
 * though the kernel no longer watched it for that instance, and after read_timeout of
 * silence the connection was cut (the next exchange failed with ETIMEDOUT). Natively the
 * socket, no longer registered, was simply left alone. A DEL or MOD through a number with
 * no record now forgets the socket's registrations everywhere: unmarked, never cut wrongly.
 * The sequence (TIMEBOX_READ_TIMEOUT=300ms): a connection answered once, registered for
 * EPOLLIN through E, deleted through dup(E); the program waits 1,000 ms on E for a pipe;
 * then the connection must make an exchange.
 */
#include <sys/epoll.h>

#include "regress.h"

int main(int argc, char **argv)
{
	struct epoll_event ev, out[4];
	int port, lfd, c, p, ep, ep2, pipefd[2], n;
	char buf[8];

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	lfd = tbr_listen(&port);
	c = tbr_connect(port);
	p = accept(lfd, NULL, NULL);
	TBR_CHECK(p >= 0 && write(c, "a", 1) == 1 && read(p, buf, 1) == 1 &&
		  write(p, "b", 1) == 1 && read(c, buf, 1) == 1, "the first exchange: %s",
		  strerror(errno));
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0 && pipe(pipefd) == 0, "epoll/pipe: %s", strerror(errno));
	ev.events = EPOLLIN;
	ev.data.fd = c;
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) == 0, "ADD: %s", strerror(errno));
	ep2 = dup(ep);
	TBR_CHECK(ep2 >= 0 && epoll_ctl(ep2, EPOLL_CTL_DEL, c, NULL) == 0, "DEL through the "
		  "copy: %s", strerror(errno));
	ev.data.fd = pipefd[0];
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev) == 0, "ADD pipe");
	n = epoll_wait(ep, out, 4, 1000); /* the pipe stays silent: 1 s with c unwatched */
	TBR_CHECK(n == 0, "epoll_wait returned %d (want 0: nothing is watched but a pipe)", n);
	errno = 0;
	TBR_CHECK(write(c, "c", 1) == 1 && read(p, buf, 1) == 1 && write(p, "d", 1) == 1 &&
		  read(c, buf, 1) == 1, "the exchange after the wait failed: %s (the connection "
		  "was cut while no wait watched it)", strerror(errno));
	printf("the connection deleted through a copy of the instance was left alone\n");
	return 0;
}
