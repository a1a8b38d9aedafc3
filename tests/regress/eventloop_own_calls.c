/* eventloop_own_calls.c - an event loop's requests shared one deadline and one retry window.
 *
 * What happened: the deadline is kept per thread, for a thread that makes one call at a
 * time: a connect or a send opens the thread's call, later steps to the same destination
 * continue it until response bytes are read, and after a cut at the deadline further
 * attempts to that destination fail at once for retry_window. An event loop (Node.js,
 * asyncio, libuv, libevent) makes many calls at once on one thread. Node 20's fetch with
 * deadline 2 s: a request sent while another awaited its answer inherited the other's
 * deadline (a healthy 1 s request begun 1.5 s into a 1.8 s one was cut after 0.5 s), and
 * after one request was cut at its deadline every other request to that service failed at
 * once for 2 s ("reason=retry_window"), though none was a retry.
 * The sequence, one thread waiting in epoll, deadline 2 s, read timeout 5 s, a server that
 * answers each line "<ms>\n" with "ok\n" after that many ms: connection 1 asks for 1200;
 * 1 s later connection 2 asks for 1500 -> both answered (at ~1.2 s and ~2.5 s). Then
 * connection 3 asks for 5000 -> cut at its deadline (ETIMEDOUT, not before 2 s); at once
 * connection 4 asks for 10 -> answered.
 *
 * The fix: a thread that registers a governed socket with epoll, or waits on two or more
 * at once in poll or select, is an event loop; there each socket carries its own call (a
 * connect opens one, a send that begins a request opens the next), and nothing is refused
 * by the thread's retry window.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "regress.h"

static int lfd;

/* One connection: answers each line "<ms>\n" with "ok\n" after that many ms. */
static void *serve_one(void *arg)
{
	int c = (int)(intptr_t)arg;
	char line[32];
	size_t n = 0;

	for (;;) {
		ssize_t r = recv(c, line + n, 1, 0);

		if (r <= 0)
			break;
		if (line[n] != '\n' && n + 1 < sizeof(line)) {
			n++;
			continue;
		}
		line[n] = '\0';
		n = 0;
		tbt_sleep_ms(atoi(line));
		if (send(c, "ok\n", 3, MSG_NOSIGNAL) != 3)
			break;
	}
	close(c);
	return NULL;
}

struct req {
	int fd;
	double sent_ms, done_ms;
	int err; /* 0: answered "ok" */
	bool done;
};

/* Connects, registers with the loop and sends "<ms>\n". A refused connect ends the
 * request at once, with its errno. */
static void start(int ep, int port, struct req *q, int ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct epoll_event ev = { .events = EPOLLIN };
	char line[32];
	int n = snprintf(line, sizeof(line), "%d\n", ms);

	q->done = false;
	q->err = 0;
	q->sent_ms = tbt_now_ms();
	q->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	TBR_CHECK(q->fd >= 0, "socket: %s", strerror(errno));
	if (connect(q->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		q->err = errno;
		q->done = true;
		q->done_ms = tbt_now_ms();
		return;
	}
	ev.data.ptr = q;
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, q->fd, &ev) == 0, "epoll_ctl: %s", strerror(errno));
	q->sent_ms = tbt_now_ms();
	TBR_CHECK(send(q->fd, line, (size_t)n, 0) == n, "send: %s", strerror(errno));
}

/* Runs the loop for up to `ms` or until every request of qs is done. */
static void run_loop(int ep, struct req **qs, int nq, double ms)
{
	double end = tbt_now_ms() + ms;

	for (;;) {
		struct epoll_event evs[4];
		int pending = 0, left = (int)(end - tbt_now_ms()), n;

		for (int i = 0; i < nq; i++)
			pending += !qs[i]->done;
		if (pending == 0 || left <= 0)
			return;
		n = epoll_wait(ep, evs, 4, left);
		TBR_CHECK(n >= 0 || errno == EINTR, "epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			struct req *q = evs[i].data.ptr;
			char buf[8];
			ssize_t r = recv(q->fd, buf, sizeof(buf), 0);

			q->done_ms = tbt_now_ms();
			q->done = true;
			q->err = r == 3 && memcmp(buf, "ok\n", 3) == 0 ? 0 : r < 0 ? errno : EPROTO;
			epoll_ctl(ep, EPOLL_CTL_DEL, q->fd, NULL);
		}
	}
}

static void expect_ok(const char *name, struct req *q, double at_least)
{
	double ms = q->done_ms - q->sent_ms;

	printf("%s: %s after %.0f ms\n", name, q->done ? (q->err ? strerror(q->err) : "ok") :
						       "no answer", ms);
	TBR_CHECK(q->done && q->err == 0, "%s: a healthy request failed: %s after %.0f ms", name,
		  q->done ? strerror(q->err) : "no answer", ms);
	TBR_CHECK(ms >= at_least, "%s: answered after %.0f ms, before the server's %.0f ms", name,
		  ms, at_least);
}

int main(int argc, char **argv)
{
	struct req r1, r2, r3, r4;
	struct req *both[2] = { &r1, &r2 };
	int port, ep;
	double ms;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=2s", "TIMEBOX_READ_TIMEOUT=5s", "TIMEBOX_LOG=off",
			 NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, serve_one);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0, "epoll_create1: %s", strerror(errno));

	/* Two requests at once: the second must not inherit the first's deadline. */
	start(ep, port, &r1, 1200);
	run_loop(ep, both, 1, 1000);
	start(ep, port, &r2, 1500);
	run_loop(ep, both, 2, 8000);
	expect_ok("request 1 (1,200 ms)", &r1, 1200);
	expect_ok("request 2 (1,500 ms, sent 1 s later)", &r2, 1500);

	/* A request cut at its deadline, then another: not a retry, not refused. */
	start(ep, port, &r3, 5000);
	both[0] = &r3;
	run_loop(ep, both, 1, 8000);
	ms = r3.done_ms - r3.sent_ms;
	printf("request 3 (5,000 ms): %s after %.0f ms\n", r3.err ? strerror(r3.err) : "ok", ms);
	TBR_CHECK(r3.done && r3.err == ETIMEDOUT && ms >= 1990, "request 3 was not cut at its "
		  "deadline: %s after %.0f ms", r3.done ? strerror(r3.err) : "no answer", ms);
	start(ep, port, &r4, 10);
	both[0] = &r4;
	run_loop(ep, both, 1, 8000);
	expect_ok("request 4 (10 ms, right after the cut)", &r4, 10);
	return 0;
}
