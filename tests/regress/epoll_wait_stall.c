/* epoll_wait_stall.c - a program waiting in epoll_wait on a stalled response was never cut.
 *
 * What happened: event loops (libuv/Node.js, asyncio, libevent, ae) read non-blocking
 * sockets and wait in epoll_wait, which timebox did not interpose: no wait was ever visible
 * on the socket, so its read timeout never fired and the loop waited as long as the server
 * stalled. The sequence: connect (governed), send a request, make the socket non-blocking,
 * register EPOLLIN, epoll_wait(-1) with a 300 ms read timeout, while the peer never answers
 * -> epoll_wait must return at 300 ms (not before), and the recv that follows fail with
 * ETIMEDOUT.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>

#include "regress.h"

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int port, lfd, fd, peer, ep, n, err;
	double t0, t;
	char c;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(write(fd, "GET\n", 4) == 4, "write: %s", strerror(errno));
	TBR_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "fcntl");
	ep = epoll_create1(EPOLL_CLOEXEC);
	ev.data.fd = fd;
	TBR_CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll: %s",
		  strerror(errno));
	/* The runner's time limit ends a hang; a 3 s alarm says so sooner and clearly. */
	tbr_hang_guard(3, "epoll_wait still waiting after 3 s: never cut");
	t0 = tbt_now_ms();
	n = epoll_wait(ep, &out, 1, -1);
	t = tbt_now_ms() - t0;
	r = recv(fd, &c, 1, 0);
	err = errno;
	printf("epoll_wait returned %d after %.0f ms; recv returned %zd (%s)\n", n, t, r,
	       r < 0 ? tbt_errno_name(err) : "-");
	TBR_CHECK(n == 1, "epoll_wait should report the cut socket");
	TBR_CHECK(t >= 300, "cut early: %.0f ms < 300 ms", t);
	TBR_CHECK(t < 300 + 1000, "cut late: %.0f ms", t);
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "recv after the cut should fail with ETIMEDOUT");
	return 0;
}
