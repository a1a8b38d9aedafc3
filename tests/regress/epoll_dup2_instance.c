/* epoll_dup2_instance.c - an epoll fd number that dup2 gave to another instance kept
 * the registrations of the instance it replaced.
 *
 * What happened: timebox's record of an epoll instance is keyed by the epoll fd's number,
 * and only close() and epoll_create drop it. dup2 (or dup3) of another epoll fd onto that
 * number closes the old instance - the kernel forgets its registrations - but the record
 * stayed under the number: every epoll_wait on the number, now the new instance, marked
 * the old instance's governed sockets as waited on, and cut them at their read timeout
 * although nothing waited for them (they are in no instance the program waits on). A
 * program that swaps its loop's instance in place (a forked child making its own instance
 * under the inherited number, so that code holding the number stays valid) gets its
 * connections shut down - in the fork case, connections it shares with its parent.
 * The sequence: A connected, request sent, registered EPOLLIN in ep1; ep2 made, an idle
 * pipe registered in it; dup2(ep2, ep1); close(ep2); epoll_wait(ep1, 1200 ms) with
 * TIMEBOX_READ_TIMEOUT=300ms -> nothing happens, and a recv on A afterwards gives EAGAIN
 * (natively), not ETIMEDOUT.
 */
#include <fcntl.h>
#include <sys/epoll.h>

#include "regress.h"

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int port, lfd, a, pa, ep1, ep2, pipefd[2], n;
	char c;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	lfd = tbr_listen(&port);
	a = tbr_connect(port);
	pa = accept(lfd, NULL, NULL);
	TBR_CHECK(pa >= 0 && write(a, "GET\n", 4) == 4, "A: %s", strerror(errno));
	TBR_CHECK(fcntl(a, F_SETFL, O_NONBLOCK) == 0, "fcntl A");
	ep1 = epoll_create1(0);
	ev.data.fd = a;
	TBR_CHECK(ep1 >= 0 && epoll_ctl(ep1, EPOLL_CTL_ADD, a, &ev) == 0, "epoll_ctl A: %s",
		  strerror(errno));

	ep2 = epoll_create1(0);
	TBR_CHECK(ep2 >= 0 && pipe(pipefd) == 0, "epoll/pipe: %s", strerror(errno));
	ev.data.fd = pipefd[0];
	TBR_CHECK(epoll_ctl(ep2, EPOLL_CTL_ADD, pipefd[0], &ev) == 0, "epoll_ctl pipe");
	TBR_CHECK(dup2(ep2, ep1) == ep1 && close(ep2) == 0, "dup2: %s", strerror(errno));

	n = epoll_wait(ep1, &out, 1, 1200);
	r = recv(a, &c, 1, 0);
	printf("epoll_wait returned %d; recv on the socket of the replaced instance returned "
	       "%zd (%s)\n", n, r, r < 0 ? tbt_errno_name(errno) : "-");
	TBR_CHECK(n == 0, "nothing should have happened on the instance");
	TBR_CHECK(r < 0 && errno == EAGAIN, "A was cut although nothing waited for it");
	return 0;
}
