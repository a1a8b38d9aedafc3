/* notices_quiet.c - healthy programs got timebox lines on their stderr.
 *
 * What happened: DESIGN's rule is that nothing is printed unless something expires or is
 * misconfigured, yet a healthy program got `event=notice` lines on stderr: `npm view
 * express version` (Node, TLS, a healthy registry) printed what=tls_answered_wait, and a
 * client that discards a response with recv(MSG_TRUNC) (or, before stdio_read_framed,
 * reads it with fgets) printed what=framing_raw. Cron mails stderr; scripts parse it. A
 * notice is a limitation, not a fault: it belongs in the docs, in `timebox stats` and at
 * log_level = info. The sequence, in a child under the library with a read timeout of
 * 2 s and the log on stderr: (1) a TLS-looking exchange (records as a TLS 1.2 handshake
 * has them, dummy bodies), a request record and its answer, then poll(POLLIN, 50 ms) on
 * the answered connection; (2) an HTTP GET sent with write() whose whole response is
 * discarded with recv(MSG_TRUNC). At the default level the child's stderr must be empty
 * and `timebox stats` must count one notice of each kind (NOTICES 1/0 and 0/1); at
 * log_level = info each notice is one line.
 *
 * The fix: notices are counted per destination every time, and written only at
 * log_level = info (once per process per kind).
 */
#include <poll.h>
#include <stdbool.h>

#include "regress.h"
#include "spawn.h"

enum { CCS = 20, HS = 22, APP = 23 };

static int lfd_tls, lfd_http;

/* The flights of a TLS 1.2 full handshake, then a request and its answer (type, length). */
static const unsigned c1[] = { HS, 512, 0 };
static const unsigned s1[] = { HS, 89, HS, 2400, HS, 333, HS, 4, 0 };
static const unsigned c2[] = { HS, 70, CCS, 1, HS, 40, 0 };
static const unsigned s2[] = { HS, 202, CCS, 1, HS, 40, 0 };
static const unsigned c3[] = { APP, 120, 0 };
static const unsigned s3[] = { APP, 300, 0 };
static const unsigned *const client_flights[] = { c1, c2, c3 };
static const unsigned *const server_flights[] = { s1, s2, s3 };


/* Appends records of (type, length) pairs, dummy bodies; returns the total length. */
static size_t recs(char *out, const unsigned *spec)
{
	size_t n = 0;

	for (; spec[0] != 0; spec += 2) {
		bool hello = n == 0 && spec == c1; /* record version 1.0, as clients send it */

		out[n++] = (char)spec[0];
		out[n++] = 3;
		out[n++] = hello ? 1 : 3;
		out[n++] = (char)(spec[1] >> 8);
		out[n++] = (char)(spec[1] & 0xff);
		memset(out + n, 0x40 + (int)spec[0], spec[1]);
		n += spec[1];
	}
	return n;
}

/* The bytes are dropped, into the calling thread's own buffer: the client and the servers
 * receive at once, and the library reads each buffer it frames. */
static void recv_all(int fd, size_t n)
{
	char sink[8192];

	while (n > 0) {
		ssize_t r = recv(fd, sink, n < sizeof(sink) ? n : sizeof(sink), 0);

		TBR_CHECK(r > 0, "recv: %zd %s", r, strerror(errno));
		n -= (size_t)r;
	}
}

static void send_all(int fd, const char *b, size_t n)
{
	TBR_CHECK(send(fd, b, n, MSG_NOSIGNAL) == (ssize_t)n, "send: %s", strerror(errno));
}

static void *tls_server(void *arg)
{
	static char out[8192];
	int c = accept(lfd_tls, NULL, NULL);

	(void)arg;
	for (int i = 0; i < 3 && c >= 0; i++) {
		recv_all(c, recs(out, client_flights[i]));
		send_all(c, out, recs(out, server_flights[i]));
	}
	if (c >= 0)
		(void)!recv(c, out, sizeof(out), 0); /* until the client closes */
	return NULL;
}

static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

static void *http_server(void *arg)
{
	char req[512];
	int c = accept(lfd_http, NULL, NULL);

	(void)arg;
	if (c >= 0 && recv(c, req, sizeof(req), 0) > 0)
		send_all(c, resp, sizeof(resp) - 1);
	if (c >= 0)
		(void)!recv(c, req, sizeof(req), 0); /* until the client closes */
	return NULL;
}

/* The NOTICES column of `timebox stats` for our destination on port `port`. */
static void stats_column(int port, char *out, size_t len)
{
	char cmd[600], line[512], dest[32];
	const char *lib = getenv("TBR_PRELOAD"), *so = lib != NULL ? strrchr(lib, ' ') : NULL;
	FILE *p;

	so = so != NULL ? so + 1 : lib;
	TBR_CHECK(so != NULL && strlen(so) > 18, "TBR_PRELOAD %s", lib ? lib : "unset");
	/* build/lib/libtimebox.so -> build/bin/timebox */
	snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD %.*s/../bin/timebox stats %d",
		 (int)(strlen(so) - strlen("/libtimebox.so")), so, (int)getpid());
	snprintf(dest, sizeof(dest), "127.0.0.1:%d ", port);
	snprintf(out, len, "(no row)");
	p = popen(cmd, "r");
	TBR_CHECK(p != NULL, "popen: %s", strerror(errno));
	while (fgets(line, sizeof(line), p) != NULL) {
		char *last;

		if (strncmp(line, dest, strlen(dest)) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		last = strrchr(line, ' ');
		last = last != NULL ? last + 1 : line;
		snprintf(out, len, "%.*s", (int)(len - 1), last);
	}
	pclose(p);
}

static int client(void)
{
	static char out[8192];
	static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct pollfd p;
	pthread_t ts, th;
	int port_tls, port_http, fd, n;
	char col[64];
	char one;
	ssize_t r;

	lfd_tls = tbr_listen(&port_tls);
	lfd_http = tbr_listen(&port_http);
	pthread_create(&ts, NULL, tls_server, NULL);
	pthread_create(&th, NULL, http_server, NULL);

	/* (1) an answered TLS connection waited on in poll */
	fd = tbr_connect(port_tls);
	for (int i = 0; i < 3; i++) {
		send_all(fd, out, recs(out, client_flights[i]));
		recv_all(fd, recs(out, server_flights[i]));
	}
	p.fd = fd;
	p.events = POLLIN;
	n = poll(&p, 1, 50);
	TBR_CHECK(n == 0, "poll on the answered connection: %d", n);

	/* (2) a response discarded unseen */
	{
		int h = tbr_connect(port_http);

		TBR_CHECK(write(h, get, sizeof(get) - 1) == (ssize_t)sizeof(get) - 1, "write");
		r = recv(h, &one, sizeof(resp) - 1, MSG_TRUNC | MSG_WAITALL);
		TBR_CHECK(r == (ssize_t)sizeof(resp) - 1, "recv(MSG_TRUNC): %zd", r);
		stats_column(port_tls, col, sizeof(col));
		TBR_CHECK(strcmp(col, "1/0") == 0, "NOTICES of the TLS destination: %s (want 1/0)",
			  col);
		stats_column(port_http, col, sizeof(col));
		TBR_CHECK(strcmp(col, "0/1") == 0, "NOTICES of the HTTP destination: %s (want 0/1)",
			  col);
		close(h);
	}
	close(fd);
	pthread_join(ts, NULL);
	pthread_join(th, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const quiet[] = { "TIMEBOX_READ_TIMEOUT=2s", NULL };
	static const char *const info[] = { "TIMEBOX_READ_TIMEOUT=2s", "TIMEBOX_LOG_LEVEL=info",
					     NULL };
	static char err[16384];
	const int fds[3] = { -1, -1, -1 };
	int st;

	(void)argc;
	if (tbs_role() != NULL)
		return client();
	st = tbs_run(argv, "client", quiet, fds, err, sizeof(err), 20000, NULL);
	TBR_CHECK(strstr(err, "timebox:") == NULL,
		  "a healthy client's stderr at the default level:\n%s", err);
	TBR_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the client: %s\n%s", tbs_describe(st),
		  err);
	TBR_CHECK(err[0] == '\0', "a healthy client's stderr at the default level:\n%s", err);

	st = tbs_run(argv, "client", info, fds, err, sizeof(err), 20000, NULL);
	TBR_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the client at info: %s\n%s",
		  tbs_describe(st), err);
	printf("at log_level = info:\n%s", err);
	TBR_CHECK(strstr(err, "event=notice what=tls_answered_wait ") != NULL,
		  "no tls_answered_wait notice at info");
	TBR_CHECK(strstr(err, "event=notice what=framing_raw ") != NULL &&
		  strstr(err, " reason=unseen ") != NULL, "no framing_raw reason=unseen at info");
	return 0;
}
