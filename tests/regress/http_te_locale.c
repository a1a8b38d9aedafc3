/* http_te_locale.c - a TRANSFER-ENCODING header in capitals, in a program with a Turkish
 * locale.
 *
 * What happened: HTTP framing's whole-line path (frame_http_lines.c) compared header
 * names with strncasecmp, which folds case by the program's locale. In tr_TR the capital
 * of 'i' is not 'I', so in a program that had called setlocale(LC_ALL, "") under
 * LANG=tr_TR.UTF-8 "TRANSFER-ENCODING: chunked" was some other header: the chunked
 * response had no length, framing took it for a body running to the connection's end, and
 * the idle keep-alive connection the program then watched with poll looked like a stalled
 * body - cut at the read timeout, where natively (and for the byte-at-a-time parser, which
 * folds ASCII only) the poll just times out and the next request on the connection is
 * answered. The sequence: a Turkish locale (built with localedef into a temporary
 * directory when the system has none compiled), a keep-alive server that answers every
 * request with a chunked response whose header names are in capitals, a 200 ms read
 * timeout; request 1 and its whole response, poll(POLLIN, 500 ms) on the idle connection:
 * must return 0; request 2: its response must come back.
 */
#include <ctype.h>
#include <locale.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>

#include "regress.h"

static const char response[] = "HTTP/1.1 200 OK\r\nTRANSFER-ENCODING: chunked\r\n"
			       "CONTENT-TYPE: text/plain\r\n\r\n5\r\nhello\r\n0\r\n\r\n";

/* Answers each request (a head ending in an empty line) of each connection. */
static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	size_t have = 0;

	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		char *end;

		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		while ((end = strstr(buf, "\r\n\r\n")) != NULL) {
			size_t used = (size_t)(end + 4 - buf);

			if (write(fd, response, sizeof(response) - 1) < 0)
				return NULL;
			memmove(buf, buf + used, have - used);
			have -= used;
			buf[have] = '\0';
		}
	}
	close(fd);
	return NULL;
}

/* One request on fd and its whole response (up to the last chunk's CRLF). */
static void exchange(int fd, int which)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: regress\r\n\r\n";
	char buf[512];
	size_t got = 0;

	TBR_CHECK(write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1),
		  "request %d: write: %s", which, strerror(errno));
	while (got < sizeof(response) - 1) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);

		TBR_CHECK(n > 0, "request %d: read returned %zd (%s) after %zu of %zu bytes",
			  which, n, n < 0 ? strerror(errno) : "EOF", got, sizeof(response) - 1);
		got += (size_t)n;
	}
}

/* A Turkish locale in LOCPATH (a temporary directory) unless one is installed. */
static void turkish_locale(void)
{
	static char dir[] = "/tmp/tbr-locale-XXXXXX";
	char cmd[256];

	if (setlocale(LC_ALL, "tr_TR.UTF-8") != NULL)
		return;
	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd), "localedef -i tr_TR -f UTF-8 %s/tr_TR.UTF-8 >/dev/null 2>&1",
		 dir);
	if (system(cmd) != 0 || setenv("LOCPATH", dir, 1) != 0 ||
	    setlocale(LC_ALL, "tr_TR.UTF-8") == NULL)
		tbr_skip("no tr_TR.UTF-8 locale, and localedef cannot build one (Debian: locales)");
}

int main(int argc, char **argv)
{
	struct pollfd p;
	int port, lfd, fd, r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", NULL);
	turkish_locale();
	/* tolower, not strncasecmp: a sanitizer's runtime replaces strncasecmp with one that
	 * folds ASCII whatever the locale. */
	if (tolower('I') == 'i')
		tbr_skip("this tr_TR.UTF-8 folds 'I' to 'i': it cannot show the story");
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, serve);
	fd = tbr_connect(port);
	exchange(fd, 1);
	p.fd = fd;
	p.events = POLLIN;
	p.revents = 0;
	r = poll(&p, 1, 500);
	TBR_CHECK(r == 0, "poll on the idle connection returned %d (revents %#x): cut as a "
		  "stalled body", r, (unsigned)p.revents);
	exchange(fd, 2);
	printf("ok\n");
	return 0;
}
