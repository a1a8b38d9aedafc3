/* epoll_reused_number.c - an epoll registration must not pass to a socket that reuses the
 * number of one closed unseen.
 *
 * The kernel keys a registration by open file description and drops it when the file
 * closes; timebox's record of it is keyed by fd number. A number closed where the hooks
 * cannot see (a raw close system call, as some runtimes make) and then reused by a new
 * governed socket that is NOT registered would, if matched by number alone, make every
 * epoll_wait on that instance a visible wait on the new socket - which is then cut at its
 * read timeout although nothing waits for it (it is not even in the kernel's set).
 * The sequence: A connected, request sent, registered EPOLLIN; raw close(A); B connected
 * on the same number, request sent, not registered; epoll_wait(1200 ms) on the instance
 * (which also watches an idle pipe), read timeout 300 ms -> B is not cut: a recv on it
 * afterwards gives EAGAIN, and timebox logs no timeout.
 */
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

#include "regress.h"

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	int port, lfd, a, b, pa, pb, ep, pipefd[2], n;
	char c;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	lfd = tbr_listen(&port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0 && pipe(pipefd) == 0, "epoll/pipe: %s", strerror(errno));
	ev.data.fd = pipefd[0];
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev) == 0, "epoll_ctl pipe");

	a = tbr_connect(port);
	pa = accept(lfd, NULL, NULL);
	TBR_CHECK(pa >= 0 && write(a, "GET\n", 4) == 4, "A: %s", strerror(errno));
	ev.data.fd = a;
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == 0, "epoll_ctl A");
	TBR_CHECK(syscall(SYS_close, a) == 0, "raw close A");

	b = tbr_connect(port);
	if (b != a)
		tbr_skip("the new socket did not reuse the closed number");
	pb = accept(lfd, NULL, NULL);
	TBR_CHECK(pb >= 0 && write(b, "GET\n", 4) == 4, "B: %s", strerror(errno));
	TBR_CHECK(fcntl(b, F_SETFL, O_NONBLOCK) == 0, "fcntl B");

	n = epoll_wait(ep, &out, 1, 1200);
	r = recv(b, &c, 1, 0);
	printf("epoll_wait returned %d; recv on the unregistered socket returned %zd (%s)\n", n,
	       r, r < 0 ? tbt_errno_name(errno) : "-");
	TBR_CHECK(n == 0, "nothing should have happened on the instance");
	TBR_CHECK(r < 0 && errno == EAGAIN, "B was cut although nothing waited for it");
	return 0;
}
