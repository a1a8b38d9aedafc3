/* stats_close_after_response.c - a call that the program closes after its complete response
 * is counted done, with its duration.
 *
 * What happened: the statistics counted a call done when a new request followed its
 * response on the same connection, or when the program read the peer's EOF. A client that
 * opens a connection per request and closes it once the response is in - Python's
 * http.client then close(), curl, wget, most legacy code - against an HTTP/1.1 server that
 * frames its responses with Content-Length does neither: `timebox stats` showed CALLS 491,
 * DONE 0, CALL_P50 and CALL_P99 "-", and `timebox suggest` left max_conns off. A close
 * after a complete response ends the call (DESIGN's scope=call rule), and now counts it.
 * The sequence, read_timeout 5s, three local servers:
 * (a) HTTP/1.1, Content-Length: 20 times connect, GET, read the whole response, close
 *     -> DONE 20, a CALL_P50. Then 5 times the same, closed after half of the body
 *     -> still DONE 20 (those responses were not complete).
 * (b) a line protocol (raw): 20 times connect, "ping", read the answer, close -> DONE 20;
 *     then 5 times closed after the request, before reading anything -> still DONE 20.
 */
#include <pthread.h>
#include <stdbool.h>

#include "regress.h"

#define CALLS 20
#define CUT_SHORT 5

static const char body[] = "0123456789";

/* Reads until the peer closes. */
static void until_eof(int fd)
{
	char buf[512];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

/* One request per connection; the response has a 10-byte body, framed by Content-Length. */
static void *http_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char req[1024], resp[128];
	size_t have = 0;
	ssize_t n;
	int len;

	while (have < sizeof(req) - 1 && (n = read(fd, req + have, sizeof(req) - 1 - have)) > 0) {
		have += (size_t)n;
		req[have] = '\0';
		if (strstr(req, "\r\n\r\n") != NULL)
			break;
	}
	len = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
		       sizeof(body) - 1, body);
	if (write(fd, resp, (size_t)len) != len)
		perror("write");
	until_eof(fd);
	return NULL;
}

/* A line in, "pong\n" out. */
static void *line_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char c;

	while (read(fd, &c, 1) == 1 && c != '\n')
		;
	if (write(fd, "pong\n", 5) != 5)
		perror("write");
	until_eof(fd);
	return NULL;
}

struct server {
	int lfd;
	void *(*per_conn)(void *);
};

/* tbr_serve_each serves one listener per program: two here. */
static void *accept_loop(void *arg)
{
	struct server *sv = arg;
	int c;

	while ((c = accept(sv->lfd, NULL, NULL)) >= 0) {
		pthread_t t;

		TBR_CHECK(pthread_create(&t, NULL, sv->per_conn, (void *)(intptr_t)c) == 0,
			  "pthread_create");
		pthread_detach(t);
	}
	return NULL;
}

/* Reads exactly n bytes. */
static void read_n(int fd, char *buf, size_t n)
{
	size_t have = 0;

	while (have < n) {
		ssize_t r = read(fd, buf + have, n - have);

		TBR_CHECK(r > 0, "read returned %zd %s after %zu of %zu bytes", r,
			  tbt_errno_name(errno), have, n);
		have += (size_t)r;
	}
}

static void http_call(int port, bool whole)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
	char buf[128];
	size_t want = strlen(head) + (whole ? sizeof(body) - 1 : 5);
	int fd = tbr_connect(port);

	TBR_CHECK(write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1), "write: %s",
		  tbt_errno_name(errno));
	read_n(fd, buf, want);
	TBR_CHECK(memcmp(buf, head, strlen(head)) == 0, "not the response expected");
	close(fd);
}

static void line_call(int port, bool answer)
{
	char buf[8];
	int fd = tbr_connect(port);

	TBR_CHECK(write(fd, "ping\n", 5) == 5, "write: %s", tbt_errno_name(errno));
	if (answer)
		read_n(fd, buf, 5);
	close(fd);
}

/* DONE and CALL_P50 of 127.0.0.1:port in `timebox stats PID`; false when there is no row. */
static bool done_shown(const char *launcher, int port, long *done, char *p50, size_t p50len)
{
	char cmd[600], line[512], dest[64];
	bool found = false;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "LD_PRELOAD= '%s' stats %d", launcher, (int)getpid());
	snprintf(dest, sizeof(dest), "127.0.0.1:%d", port);
	p = popen(cmd, "r");
	TBR_CHECK(p != NULL, "popen: %s", strerror(errno));
	while (fgets(line, sizeof(line), p) != NULL) {
		char d[64], host[64], leased[16], pending[16], avail[16], max[16], rej[16];
		char cuts[64], fb50[16], fb99[16], c50[16];
		long calls, dn;

		printf("  %s", line);
		/* DEST HOST LEASED PENDING AVAIL MAX CALLS DONE REJECT CUTS FB_P50 FB_P99
		 * CALL_P50 CALL_P99 */
		if (sscanf(line, "%63s %63s %15s %15s %15s %15s %ld %ld %15s %63s %15s %15s %15s", d,
			   host, leased, pending, avail, max, &calls, &dn, rej, cuts, fb50, fb99,
			   c50) == 13 && strcmp(d, dest) == 0) {
			*done = dn;
			snprintf(p50, p50len, "%s", c50);
			found = true;
		}
	}
	pclose(p);
	return found;
}

int main(int argc, char **argv)
{
	static char launcher[512];
	static struct server hsv, lsv;
	pthread_t ht, lt;
	int hport, lport;
	long hdone = -1, ldone = -1;
	char hp50[16] = "", lp50[16] = "";

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		const char *pre = getenv("TBR_PRELOAD");
		const char *lib = pre ? strstr(pre, "/lib/libtimebox.so") : NULL;
		const char *start = lib;

		if (lib == NULL)
			tbr_skip("TBR_PRELOAD names no libtimebox.so");
		while (start > pre && start[-1] != ' ')
			start--;
		snprintf(launcher, sizeof(launcher), "%.*s/bin/timebox", (int)(lib - start), start);
		setenv("TBR_LAUNCHER", launcher, 1);
	}
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=5s", NULL);
	snprintf(launcher, sizeof(launcher), "%s", getenv("TBR_LAUNCHER"));
	hsv.lfd = tbr_listen(&hport);
	hsv.per_conn = http_conn;
	lsv.lfd = tbr_listen(&lport);
	lsv.per_conn = line_conn;
	TBR_CHECK(pthread_create(&ht, NULL, accept_loop, &hsv) == 0, "pthread_create");
	TBR_CHECK(pthread_create(&lt, NULL, accept_loop, &lsv) == 0, "pthread_create");

	for (int i = 0; i < CALLS; i++)
		http_call(hport, true);
	for (int i = 0; i < CUT_SHORT; i++)
		http_call(hport, false);
	for (int i = 0; i < CALLS; i++)
		line_call(lport, true);
	for (int i = 0; i < CUT_SHORT; i++)
		line_call(lport, false);

	TBR_CHECK(done_shown(launcher, hport, &hdone, hp50, sizeof(hp50)), "no row for (a)");
	TBR_CHECK(done_shown(launcher, lport, &ldone, lp50, sizeof(lp50)), "no row for (b)");
	printf("(a) HTTP, %d closed after the response, %d before its end: DONE %ld, "
	       "CALL_P50 %s\n", CALLS, CUT_SHORT, hdone, hp50);
	printf("(b) raw, %d closed after the answer, %d before it: DONE %ld, CALL_P50 %s\n",
	       CALLS, CUT_SHORT, ldone, lp50);
	TBR_CHECK(hdone == CALLS && strcmp(hp50, "-") != 0,
		  "(a) calls closed after a complete response were not counted done");
	TBR_CHECK(ldone == CALLS && strcmp(lp50, "-") != 0,
		  "(b) calls closed after their answer were not counted done");
	return 0;
}
