/* propagate_untouched.c - with propagation on, streams that are not HTTP/1.x requests pass
 * byte for byte: PostgreSQL, Redis, TLS.
 *
 * What must hold: TIMEBOX_PROPAGATE=1 puts a header only after a well-formed HTTP/1.x
 * request line. A PostgreSQL startup packet and query, Redis commands (RESP arrays, and an
 * inline command), and a TLS record whose payload happens to read like an HTTP request
 * must reach the peer exactly as the program wrote them, and each write reports its whole
 * count. The sequence: a recording server on 127.0.0.1 reads each connection to EOF; the
 * program writes each stream on a connection of its own (in two writes, the second after
 * the first has been received, as a client waits for an answer), and the recorded bytes
 * are compared with the program's.
 */
#include <sys/syscall.h>

#include "regress.h"

#define CASES 4

static struct rec {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char buf[4096];
	size_t len;
	int done;
} recs[CASES];

static void *record(void *arg)
{
	int c = (int)(intptr_t)arg, k;
	struct rec *r;
	ssize_t n;

	TBR_CHECK(read(c, &k, sizeof(k)) == (ssize_t)sizeof(k), "case number");
	r = &recs[k];
	for (;;) {
		n = read(c, r->buf + r->len, sizeof(r->buf) - r->len);
		pthread_mutex_lock(&r->mu);
		if (n > 0)
			r->len += (size_t)n;
		else
			r->done = 1;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		if (n <= 0)
			break;
	}
	close(c);
	return NULL;
}

/* Waits until case k's server has `len` bytes (or EOF). */
static void await_len(int k, size_t len)
{
	struct rec *r = &recs[k];

	pthread_mutex_lock(&r->mu);
	while (r->len < len && !r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

static void one_case(int port, int k, const char *what, const char *a, size_t alen,
		     const char *b, size_t blen)
{
	int fd = tbr_connect(port);
	struct rec *r = &recs[k];
	char all[2048];

	/* The case number through the kernel directly: not part of the stream. */
	TBR_CHECK(syscall(SYS_sendto, fd, &k, sizeof(k), 0, NULL, 0) == (long)sizeof(k), "case");
	TBR_CHECK(write(fd, a, alen) == (ssize_t)alen, "%s: first write (%s)", what,
		  strerror(errno));
	await_len(k, alen);
	TBR_CHECK(send(fd, b, blen, 0) == (ssize_t)blen, "%s: second write (%s)", what,
		  strerror(errno));
	shutdown(fd, SHUT_WR);
	await_len(k, sizeof(r->buf));
	close(fd);
	memcpy(all, a, alen);
	memcpy(all + alen, b, blen);
	TBR_CHECK(r->len == alen + blen && memcmp(r->buf, all, r->len) == 0,
		  "%s: %zu bytes received for %zu sent, or changed", what, r->len, alen + blen);
	printf("%s: %zu bytes unchanged\n", what, r->len);
}

int main(int argc, char **argv)
{
	static const char pg_start[] = "\0\0\0\x29\0\3\0\0user\0postgres\0database\0shop\0\0";
	static const char pg_query[] = "Q\0\0\0\x0dSELECT 1;\0";
	static const char resp1[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
	static const char resp2[] = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
	static const char inline1[] = "PING\r\n";
	static const char inline2[] = "SET key value\r\n";
	/* A TLS handshake record header, then bytes that look like a request. */
	static const char tls1[] = "\x16\x03\x01\x00\x20GET / HTTP/1.1\r\nHost: x\r\n\r\n\0\0\0\0\0";
	static const char tls2[] = "\x17\x03\x03\x00\x1bGET /b HTTP/1.1\r\nHost: y\r\n\r\n";
	int port, lfd;

	tbr_preload_self(argv, "TIMEBOX_DEADLINE=5s", "TIMEBOX_PROPAGATE=1", NULL);
	(void)argc;
	for (int i = 0; i < CASES; i++) {
		pthread_mutex_init(&recs[i].mu, NULL);
		pthread_cond_init(&recs[i].cv, NULL);
	}
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, record);
	one_case(port, 0, "postgresql", pg_start, sizeof(pg_start) - 1, pg_query,
		 sizeof(pg_query) - 1);
	one_case(port, 1, "redis resp", resp1, sizeof(resp1) - 1, resp2, sizeof(resp2) - 1);
	one_case(port, 2, "redis inline", inline1, sizeof(inline1) - 1, inline2,
		 sizeof(inline2) - 1);
	one_case(port, 3, "tls", tls1, sizeof(tls1) - 1, tls2, sizeof(tls2) - 1);
	return 0;
}
