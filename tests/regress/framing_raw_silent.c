/* framing_raw_silent.c - framing that stopped following a connection did so without a word.
 *
 * What happened: when the bytes of a connection framed as HTTP (or TLS, PostgreSQL, Redis)
 * stopped making sense to its framing - a response with two Content-Length headers, more
 * than 32 pipelined requests, a header section past its bound, two transfers at once - the
 * connection went back to the system-call rules (raw) for good, as designed, and nothing
 * said so. An operator then saw an idle pooled connection cut by read_timeout, or a
 * multi-turn exchange restart its deadline, with no hint that timebox had stopped seeing
 * where its calls begin and end. docs/design.md promised "log it once".
 * The sequence, with TIMEBOX_READ_TIMEOUT=2s, log_level = info and a log file: a connection whose first
 * bytes look like no known protocol ("HELO x") -> raw from the start, no line; then two
 * HTTP/1.1 exchanges each answered with two Content-Length headers -> exactly one line,
 * `event=notice what=framing_raw`, naming the first of them and protocol=http. Every
 * exchange reads its bytes as natively.
 *
 * The fix: the transfer that makes framing give up (or that overlaps another) logs the
 * notice once per process, when the connection's protocol had been recognised.
 */
#include <fcntl.h>
#include <pthread.h>

#include "regress.h"

static int lfd;

static const char twice[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nok\n";

/* For each connection: reads one request (up to an empty line, or a line for the first),
 * answers it and closes. */
static void *server(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3; i++) {
		char buf[1024];
		size_t have = 0;
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		while (have < sizeof(buf) - 1) {
			ssize_t r = recv(c, buf + have, sizeof(buf) - 1 - have, 0);

			if (r <= 0)
				break;
			have += (size_t)r;
			buf[have] = '\0';
			if (strstr(buf, i == 0 ? "\r\n" : "\r\n\r\n") != NULL)
				break;
		}
		if (i == 0)
			send(c, "250 ok\r\n", 8, MSG_NOSIGNAL);
		else
			send(c, twice, sizeof(twice) - 1, MSG_NOSIGNAL);
		close(c);
	}
	return NULL;
}

/* Sends `req` on a new connection and reads `want` bytes of answer. */
static void exchange(int port, const char *req, size_t want, int *fdp)
{
	char buf[256];
	size_t got = 0;
	int fd = tbr_connect(port);

	TBR_CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "write: %s",
		  strerror(errno));
	while (got < want) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - got);

		TBR_CHECK(r > 0, "read after %zu of %zu bytes: %zd %s", got, want, r,
			  r < 0 ? strerror(errno) : "(end of file)");
		got += (size_t)r;
	}
	*fdp = fd;
}

/* The log file's text, in a static buffer. */
static const char *read_log(const char *path)
{
	static char log[16384];
	ssize_t n = 0;
	int lf = open(path, O_RDONLY | O_CLOEXEC);

	TBR_CHECK(lf >= 0, "the log %s: %s", path, strerror(errno));
	for (ssize_t k; (k = read(lf, log + n, sizeof(log) - 1 - (size_t)n)) > 0;)
		n += k;
	close(lf);
	log[n] = '\0';
	return log;
}

int main(int argc, char **argv)
{
	static char log_kv[80];
	static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *path, *log;
	int port, fds[3], lines = 0;
	char want[64];
	pthread_t t;

	(void)argc;
	/* exec keeps the pid: the re-executed program finds its log by it */
	snprintf(log_kv, sizeof(log_kv), "TIMEBOX_LOG=/tmp/tbr-framing-raw-%d.log", (int)getpid());
	/* Notices go out at log_level = info only (regress/notices_quiet). */
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=2s", "TIMEBOX_LOG_LEVEL=info", log_kv, NULL);
	path = log_kv + strlen("TIMEBOX_LOG=");
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, server, NULL) == 0, "pthread_create");
	exchange(port, "HELO x\r\n", 8, &fds[0]);
	log = read_log(path);
	TBR_CHECK(strstr(log, "what=framing_raw") == NULL,
		  "a connection raw from its first bytes was reported:\n%s", log);
	exchange(port, get, sizeof(twice) - 1, &fds[1]);
	exchange(port, get, sizeof(twice) - 1, &fds[2]);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	pthread_join(t, NULL);
	log = read_log(path);
	unlink(path);
	printf("log:\n%s", log);
	for (const char *p = log; (p = strstr(p, "what=framing_raw")) != NULL; p++)
		lines++;
	TBR_CHECK(lines == 1, "%d lines say framing stopped (want 1)", lines);
	snprintf(want, sizeof(want), "fd=%d ", fds[1]);
	TBR_CHECK(strstr(log, want) != NULL && strstr(log, "protocol=http ") != NULL &&
		  strstr(log, "reason=unframed ") != NULL,
		  "the line does not name fd %d, protocol=http and reason=unframed", fds[1]);
	return 0;
}
