/* epoll_shared_data_connect.c - another fd's event, registered with the same epoll_data,
 * ended a handshake's connect phase.
 *
 * What happened: epoll hands back only the program's epoll_data, so timebox matched the
 * results of epoll_wait to the registrations it follows by that value. A program may
 * register two fds with equal data (0 when it never sets it, or one pointer to the
 * connection object that owns both). When another fd with the same data was ready, a
 * socket whose handshake was still under way was taken for connected: its connect phase
 * ended, and a connect to a peer that drops SYNs was no longer cut by connect_timeout (its
 * next wait for EPOLLOUT counted as a write, which no limit bounded): the program waited
 * for the kernel's ~127 s instead of 500 ms.
 *
 * The sequence: TIMEBOX_CONNECT_TIMEOUT=500ms; a non-blocking connect to a listener whose
 * accept queue is full (SYNs dropped), registered for EPOLLOUT with data 0; a pipe, readable,
 * registered for EPOLLIN with data 0; epoll_wait returns the pipe's event at once; the pipe
 * is drained; the next epoll_wait (3 s) must return the socket's event at 500 ms (never
 * before) with SO_ERROR ETIMEDOUT.
 */
#include <fcntl.h>
#include <sys/epoll.h>

#include "regress.h"

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLOUT }, out[4];
	struct sockaddr_in a;
	int lfd, fd, ep, pipefd[2], n, err = 0;
	socklen_t el = sizeof(err);
	double t0, t;
	char c;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=500ms", NULL);
	lfd = tbr_listen_dropping_syns(&a);
	(void)lfd;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	t0 = tbt_now_ms();
	TBR_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == EINPROGRESS,
		  "connect: %s", strerror(errno));
	TBR_CHECK(pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) == 0 && write(pipefd[1], "x", 1) == 1,
		  "pipe");
	ep = epoll_create1(EPOLL_CLOEXEC);
	ev.data.u64 = 0;
	TBR_CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl: %s",
		  strerror(errno));
	ev.events = EPOLLIN;
	ev.data.u64 = 0;
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev) == 0, "epoll_ctl pipe");

	n = epoll_wait(ep, out, 4, 3000);
	TBR_CHECK(n == 1 && out[0].events == EPOLLIN, "the first wait returned %d (events %#x)", n,
		  n > 0 ? out[0].events : 0);
	TBR_CHECK(read(pipefd[0], &c, 1) == 1, "read pipe");

	n = epoll_wait(ep, out, 4, 3000);
	t = tbt_now_ms() - t0;
	TBR_CHECK(n == 1, "the handshake was not cut: epoll_wait returned %d after %.0f ms", n, t);
	TBR_CHECK(t >= 500, "cut early: %.0f ms", t);
	TBR_CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == ETIMEDOUT,
		  "SO_ERROR %d (%s)", err, strerror(err));
	return 0;
}
