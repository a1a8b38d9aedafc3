/* propagate_not_http_answered.c - a connection that did not begin with an HTTP request is
 * never written into, even after an answer, when a later message reads like a request.
 *
 * What happened: with TIMEBOX_PROPAGATE=1, the outbound planner started over at every
 * request, and on a connection it does not frame a "request" begins with the first send
 * after response bytes were read. A Redis inline client that sent PING, read +PONG, then
 * sent a command whose text reads like an HTTP/1.x request line ("GET / HTTP/1.1", a key
 * named "/") had an X-Deadline-Ms line written into its command - bytes the program never
 * wrote, in a protocol that has no headers. Each message of a non-HTTP connection was also
 * scanned again from its first byte: a raw exchange of 64 token bytes cost about 5,000
 * instructions more with propagation on (make bench, "What each feature costs").
 *
 * What must hold: the connection's first request decides. Not HTTP then, never looked at
 * again: the recording server receives exactly the program's bytes, each write reports its
 * whole count; and an HTTP connection still gets its header on every request after an
 * answer (the second case), so the verdict is per connection, not per process.
 */
#include <sys/syscall.h>

#include "regress.h"

static char got[2][4096];
static size_t got_len[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int finished[2];

/* Records connection k's bytes to EOF; answers each read with a short reply, as a server
 * answers each message (the client waits for it before its next one). */
static void *record(void *arg)
{
	int c = (int)(intptr_t)arg, k;
	ssize_t n;
	char buf[2048];

	TBR_CHECK(read(c, &k, sizeof(k)) == (ssize_t)sizeof(k) && (k == 0 || k == 1), "case");
	while ((n = read(c, buf, sizeof(buf))) > 0) {
		pthread_mutex_lock(&mu);
		TBR_CHECK(got_len[k] + (size_t)n <= sizeof(got[k]), "case %d: too many bytes", k);
		memcpy(got[k] + got_len[k], buf, (size_t)n);
		got_len[k] += (size_t)n;
		pthread_mutex_unlock(&mu);
		TBR_CHECK(write(c, "+OK\r\n", 5) == 5, "reply");
	}
	pthread_mutex_lock(&mu);
	finished[k] = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	close(c);
	return NULL;
}

/* Sends each message whole (the server reads it in one piece on loopback or in several:
 * either way the client waits for one reply per message it sent, after all its bytes). */
static void play(int port, int k, const char *const *msgs, int n)
{
	int fd = tbr_connect(port);
	char r[64];

	/* The case number through the kernel directly: not part of the stream. */
	TBR_CHECK(syscall(SYS_sendto, fd, &k, sizeof(k), 0, NULL, 0) == (long)sizeof(k), "case");
	for (int i = 0; i < n; i++) {
		size_t len = strlen(msgs[i]);

		TBR_CHECK(write(fd, msgs[i], len) == (ssize_t)len, "case %d message %d: %s", k,
			  i, strerror(errno));
		TBR_CHECK(read(fd, r, sizeof(r)) > 0, "case %d message %d: no reply", k, i);
	}
	shutdown(fd, SHUT_WR);
	pthread_mutex_lock(&mu);
	while (!finished[k])
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	close(fd);
}

int main(int argc, char **argv)
{
	static const char *const redis[] = { "PING\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n" };
	static const char *const http[] = { "GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
					    "GET /b HTTP/1.1\r\nHost: x\r\n\r\n" };
	char want[4096];
	size_t wl = 0;
	int port, lfd;

	tbr_preload_self(argv, "TIMEBOX_DEADLINE=5s", "TIMEBOX_PROPAGATE=1", NULL);
	(void)argc;
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, record);

	play(port, 0, redis, 2);
	for (int i = 0; i < 2; i++) {
		memcpy(want + wl, redis[i], strlen(redis[i]));
		wl += strlen(redis[i]);
	}
	TBR_CHECK(got_len[0] == wl && memcmp(got[0], want, wl) == 0,
		  "redis inline: %zu bytes received for %zu sent, or changed: '%.*s'", got_len[0],
		  wl, (int)got_len[0], got[0]);
	printf("redis inline then a request-looking command: %zu bytes unchanged\n", wl);

	play(port, 1, http, 2);
	got[1][got_len[1]] = '\0';
	TBR_CHECK(strstr(got[1], "GET /a HTTP/1.1\r\nX-Deadline-Ms: ") == got[1],
		  "http: the first request carries no header: '%s'", got[1]);
	TBR_CHECK(strstr(got[1], "GET /b HTTP/1.1\r\nX-Deadline-Ms: ") != NULL,
		  "http: the request after an answer carries no header: '%s'", got[1]);
	printf("http keep-alive: both requests carry the header\n");
	return 0;
}
