/* keepalive_poll_rests.c - an answered keep-alive connection was cut in a poll loop.
 *
 * What happened: after a response, the system-call rules take the connection for one
 * whose answer is still being read (phase read, and the call's deadline), so a program
 * that keeps an idle HTTP/1.1 connection in its poll set while it waits for other work
 * had the connection cut at read_timeout: poll woke up with POLLIN, and the next read
 * failed with ETIMEDOUT on a healthy connection. The sequence, with
 * TIMEBOX_READ_TIMEOUT=500ms and TIMEBOX_DEADLINE=500ms: connect; send a GET; read the whole
 * response (Content-Length: 3); poll(POLLIN) on the idle connection for 1.5 s -> must time
 * out with 0 (no cut: nothing is outstanding); then a second GET on the same connection ->
 * its response is read as usual.
 */
#include <poll.h>
#include <pthread.h>

#include "regress.h"

static int lfd;

/* Answers every request (a header section) with a 3-byte body, keeping the connection. */
static void *server(void *arg)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
	char buf[4096];
	size_t have = 0;
	int c = accept(lfd, NULL, NULL);

	(void)arg;
	while (c >= 0) {
		ssize_t r = recv(c, buf + have, sizeof(buf) - 1 - have, 0);
		char *end;

		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = '\0';
		while ((end = strstr(buf, "\r\n\r\n")) != NULL) {
			size_t used = (size_t)(end + 4 - buf);

			if (send(c, ok, sizeof(ok) - 1, MSG_NOSIGNAL) < 0)
				goto out;
			memmove(buf, buf + used, have - used + 1);
			have -= used;
		}
	}
out:
	if (c >= 0)
		close(c);
	return NULL;
}

/* One GET and its whole response. Returns 0, or -1 with errno. */
static int fetch(int fd)
{
	static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[256];
	size_t got = 0;

	if (write(fd, get, sizeof(get) - 1) != (ssize_t)(sizeof(get) - 1))
		return -1;
	while (got < 3 || memcmp(buf + got - 3, "ok\n", 3) != 0) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - got);

		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct pollfd p;
	pthread_t t;
	int port, fd, n;
	double t0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=500ms", "TIMEBOX_DEADLINE=500ms",
			 "TIMEBOX_LOG=off", NULL);
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, server, NULL) == 0, "pthread_create");
	fd = tbr_connect(port);
	TBR_CHECK(fetch(fd) == 0, "first GET: %s", strerror(errno));
	p.fd = fd;
	p.events = POLLIN;
	t0 = tbt_now_ms();
	n = poll(&p, 1, 1500);
	TBR_CHECK(n == 0, "poll on the idle connection returned %d (revents %#x) after %.0f ms: "
		  "the resting connection was cut", n, (unsigned)p.revents, tbt_now_ms() - t0);
	TBR_CHECK(fetch(fd) == 0, "second GET on the same connection: %s", strerror(errno));
	close(fd); /* the server sees EOF and ends */
	pthread_join(t, NULL);
	return 0;
}
