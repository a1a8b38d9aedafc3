/* epoll_oneshot_past_64.c - past 64 governed one-shot registrations, a one-shot that
 * fired was still taken for armed, and its idle connection was cut.
 *
 * What happened: a one-shot registration watches nothing once its event has been handed
 * back (the kernel disables it until EPOLL_CTL_MOD). timebox follows that by matching the
 * events a wait returned to the registrations it kept for the call, and disarming those -
 * but it keeps at most 64 per call (EPSET_MAX). The one-shots past the 64th fired and were
 * never disarmed: every later epoll_wait marked them as read waits, and their connections,
 * idle with nothing waiting for them (the program had read its responses and not re-armed
 * them yet: a connection pool, a worker still busy with the response), were cut at their
 * read timeout. Natively, and with 64 or fewer, nothing happens to them.
 * The sequence: 70 connections, a request sent on each, each registered
 * EPOLLIN|EPOLLONESHOT; every peer answers; one epoll_wait returns the 70 events and each
 * response is read; the loop then waits 1500 ms on the instance (an idle pipe) with
 * TIMEBOX_READ_TIMEOUT=300ms -> no connection is cut (recv gives EAGAIN on each).
 */
#include <fcntl.h>
#include <sys/epoll.h>

#include "regress.h"

#define N 70

int main(int argc, char **argv)
{
	struct epoll_event ev, out[128];
	int port, lfd, ep, pipefd[2], c[N], p[N], n, n2, got = 0, cut = 0;
	char buf[16];

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	lfd = tbr_listen(&port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0 && pipe(pipefd) == 0, "epoll/pipe: %s", strerror(errno));
	ev.events = EPOLLIN;
	ev.data.u64 = UINT64_MAX;
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev) == 0, "epoll_ctl pipe");
	for (int i = 0; i < N; i++) {
		c[i] = tbr_connect(port);
		p[i] = accept(lfd, NULL, NULL);
		TBR_CHECK(p[i] >= 0 && fcntl(c[i], F_SETFL, O_NONBLOCK) == 0 &&
			  write(c[i], "GET\n", 4) == 4, "connection %d: %s", i, strerror(errno));
		ev.events = EPOLLIN | EPOLLONESHOT;
		ev.data.u64 = (uint64_t)i;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c[i], &ev) == 0, "epoll_ctl %d", i);
	}
	for (int i = 0; i < N; i++)
		TBR_CHECK(write(p[i], "OK\n", 3) == 3, "answer %d", i);
	for (int i = 0; i < N; i++) { /* every answer is here: one wait returns them all */
		struct pollfd q = { .fd = c[i], .events = POLLIN };

		TBR_CHECK(poll(&q, 1, 5000) == 1, "answer %d never arrived", i);
	}

	n = epoll_wait(ep, out, 128, 1000);
	for (int i = 0; i < n; i++)
		if (out[i].data.u64 < N && read(c[out[i].data.u64], buf, sizeof(buf)) > 0)
			got++;
	TBR_CHECK(n == N && got == N, "the first wait returned %d events, %d responses read",
		  n, got);
	n2 = epoll_wait(ep, out, 128, 1500); /* every one-shot fired: the pipe alone is armed */
	for (int i = 0; i < N; i++)
		if (recv(c[i], buf, 1, 0) < 0 && errno == ETIMEDOUT)
			cut++;
	printf("the second wait returned %d; %d of %d idle connections were cut\n", n2, cut, N);
	TBR_CHECK(n2 == 0, "nothing should have happened on the instance");
	TBR_CHECK(cut == 0, "connections whose one-shot had fired were cut");
	return 0;
}
