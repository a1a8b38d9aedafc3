/* propagate_inbound.c - a thread-per-request server under scope=request: each request's head
 * opens a budget its outbound call draws on, a deadline header tightens it, and the
 * downstream is told less than the server was.
 *
 * What must hold: TIMEBOX_SCOPE=request, TIMEBOX_PROPAGATE=1, TIMEBOX_DEADLINE=600ms. The
 * server reads a request from an accepted socket, calls a downstream that never answers,
 * and writes the response on the same keep-alive connection; the client sends four requests
 * on that one connection. (1) "X-Deadline-Ms: 300": the outbound call fails with ETIMEDOUT
 * at about 300 ms after the request was sent, never earlier, and the downstream receives an
 * X-Deadline-Ms below 300. (2) "x-envoy-expected-rq-timeout-ms: 200": about 200 ms, and the
 * budget is a fresh one (the first request's had already run out: a budget kept across the
 * response would fail the call at once). (3) No header: the settings' 600 ms. (4) A
 * malformed value ("-5") is ignored with one log line: 600 ms again, never less.
 * The client connects with a raw system call so that its own socket is not governed, and
 * its requests carry exactly the headers written here.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/syscall.h>

#include "regress.h"

static atomic_long down_ms[8]; /* the X-Deadline-Ms each downstream request carried */
static atomic_int down_n;
static int down_seen; /* heads the downstream has read, under mu */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads a request or response head (to its blank line) from c into b; returns its length,
 * 0 on EOF before any byte. Bytes past the head are not expected (one request at a time). */
static size_t read_head(int c, char *b, size_t cap)
{
	size_t len = 0;

	while (len + 1 < cap) {
		ssize_t n = recv(c, b + len, cap - 1 - len, 0);

		if (n <= 0)
			break;
		len += (size_t)n;
		b[len] = '\0';
		if (strstr(b, "\r\n\r\n") != NULL)
			return len;
	}
	TBR_CHECK(len == 0, "head cut short after %zu bytes: %.*s", len, (int)len, b);
	return 0;
}

/* The downstream: records the deadline it was sent, then never answers (until EOF). */
static void *downstream(void *arg)
{
	int c = (int)(intptr_t)arg, k = atomic_fetch_add(&down_n, 1);
	char b[4096], *h;

	if (read_head(c, b, sizeof(b)) > 0 && k < 8) {
		for (h = b; (h = strchr(h, '\n')) != NULL; h++)
			if (strncasecmp(h + 1, "X-Deadline-Ms:", 14) == 0)
				atomic_store(&down_ms[k], strtol(h + 15, NULL, 10));
	}
	pthread_mutex_lock(&mu);
	down_seen++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	while (recv(c, b, sizeof(b), 0) > 0)
		;
	close(c);
	return NULL;
}

static int down_port;

/* The downstream's accept loop (tbr_serve_each serves one listener per program). */
static void *down_accept(void *arg)
{
	int lfd = (int)(intptr_t)arg, c;
	pthread_t t;

	while ((c = accept(lfd, NULL, NULL)) >= 0) {
		TBR_CHECK(pthread_create(&t, NULL, downstream, (void *)(intptr_t)c) == 0, "thread");
		pthread_detach(t);
	}
	return NULL;
}

/* The server: per request, one outbound call; the response says how it ended. */
static void *server(void *arg)
{
	int c = (int)(intptr_t)arg;
	char b[4096], resp[256], body[64];

	while (read_head(c, b, sizeof(b)) > 0) {
		static const char req[] = "GET /inventory HTTP/1.1\r\nHost: inventory\r\n\r\n";
		int d = tbr_connect(down_port), err = 0;
		ssize_t r = write(d, req, strlen(req));

		if (r == (ssize_t)strlen(req)) {
			r = recv(d, b, sizeof(b), 0);
			err = r < 0 ? errno : 0;
		} else {
			err = errno;
		}
		close(d);
		snprintf(body, sizeof(body), "%d", err);
		snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
			 strlen(body), body);
		TBR_CHECK(write(c, resp, strlen(resp)) == (ssize_t)strlen(resp), "response");
	}
	close(c);
	return NULL;
}

/* One request on the client's connection: returns the time to its response, ms. */
static int64_t ask(int fd, const char *extra, int *err)
{
	char req[256], b[1024], *body;
	int64_t t0;

	snprintf(req, sizeof(req), "GET /order HTTP/1.1\r\nHost: order\r\n%s\r\n", extra);
	t0 = now_ms();
	TBR_CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "request");
	TBR_CHECK(read_head(fd, b, sizeof(b)) > 0, "a response");
	body = strstr(b, "\r\n\r\n") + 4;
	if (*body == '\0') /* the body came in a read of its own */
		TBR_CHECK(recv(fd, body, 16, 0) > 0, "the body");
	*err = atoi(body);
	return now_ms() - t0;
}

int main(int argc, char **argv)
{
	static const struct { const char *hdr; int64_t ms; const char *what; } cases[] = {
		{ "X-Deadline-Ms: 300\r\n", 300, "X-Deadline-Ms: 300" },
		{ "x-envoy-expected-rq-timeout-ms: 200\r\n", 200, "envoy 200" },
		{ "", 600, "no header (deadline 600ms)" },
		{ "X-Deadline-Ms: -5\r\n", 600, "malformed X-Deadline-Ms: -5" },
	};
	char logenv[128], logpath[96], line[512];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int port, fd, bad = 0;
	FILE *f;

	snprintf(logpath, sizeof(logpath), "/tmp/propagate_inbound.%d.log", (int)getpid());
	snprintf(logenv, sizeof(logenv), "TIMEBOX_LOG=%s", logpath);
	tbr_preload_self(argv, "TIMEBOX_SCOPE=request", "TIMEBOX_PROPAGATE=1",
			 "TIMEBOX_DEADLINE=600ms", logenv, NULL);
	(void)argc;
	unlink(logpath);
	pthread_t dt;

	TBR_CHECK(pthread_create(&dt, NULL, down_accept,
				 (void *)(intptr_t)tbr_listen(&down_port)) == 0, "thread");
	tbr_serve_each(tbr_listen(&port), server);

	fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons((uint16_t)port);
	TBR_CHECK(fd >= 0 && syscall(SYS_connect, fd, &a, sizeof(a)) == 0, "client connect: %s",
		  strerror(errno));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int err;
		int64_t ms = ask(fd, cases[i].hdr, &err);
		long told;

		pthread_mutex_lock(&mu);
		while (down_seen < (int)i + 1)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		told = atomic_load(&down_ms[i]);

		printf("%-30s outbound call ended after %lld ms (%s), downstream told %ld ms\n",
		       cases[i].what, (long long)ms, strerror(err), told);
		TBR_CHECK(err == ETIMEDOUT, "%s: the outbound call ended with %s", cases[i].what,
			  strerror(err));
		TBR_CHECK(ms >= cases[i].ms, "%s: ended after %lld ms: earlier than its budget",
			  cases[i].what, (long long)ms);
		TBR_CHECK(ms < cases[i].ms + 1500, "%s: ended after %lld ms", cases[i].what,
			  (long long)ms);
		TBR_CHECK(atomic_load(&down_n) == (int)i + 1, "downstream requests: %d",
			  atomic_load(&down_n));
		TBR_CHECK(told > 0 && told < cases[i].ms, "%s: the downstream was told %ld ms",
			  cases[i].what, told);
	}
	close(fd);
	f = fopen(logpath, "r");
	TBR_CHECK(f != NULL, "the log file %s: %s", logpath, strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, "event=bad_deadline_header") != NULL && strstr(line, "-5") != NULL)
			bad++;
	fclose(f);
	unlink(logpath);
	TBR_CHECK(bad == 1, "%d log lines for the malformed header (one expected)", bad);
	return 0;
}
