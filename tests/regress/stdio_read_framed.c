/* stdio_read_framed.c - a response read through a FILE was unseen: the connection stopped resting.
 *
 * What happened: a client that sends its request with write() and reads the response with
 * fdopen + fgets (and fread for the body) - the shape of many small C clients - had its
 * HTTP connection framed from the request, but glibc fills the FILE's buffer with its own
 * read, which no hook sees: timebox told the framing "1 unseen byte" for each refill. In
 * the header section that is something framing cannot follow, so it gave up: the
 * connection became raw, a `framing_raw` notice said "unframed" of a well-formed response,
 * and the complete response no longer let the connection rest - a keep-alive connection
 * then waited on (poll) between requests was cut by read_timeout. The sequence, with
 * TIMEBOX_READ_TIMEOUT=300ms: write a GET; the server answers "HTTP/1.1 200 OK",
 * Content-Length: 5, "hello" and keeps the connection open; fgets the lines up to the
 * blank one, fread the 5 bytes; poll(POLLIN, 700 ms) must return 0, as natively (the
 * response is complete); then a second exchange on the same connection works the same.
 * No framing_raw line at log_level=info.
 *
 * The fix: a refill of the FILE's buffer (glibc's __uflow, under the governed fgets,
 * getline, fread, getc and fscanf) feeds the framing the bytes it put in the buffer.
 */
#include <fcntl.h>
#include <poll.h>

#include "regress.h"

static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
static int lfd;

/* One connection: every request (up to an empty line) gets resp. */
static void *server(void *arg)
{
	char req[1024];
	size_t have = 0;
	int c = accept(lfd, NULL, NULL);

	(void)arg;
	if (c < 0)
		return NULL;
	for (;;) {
		ssize_t r = recv(c, req + have, sizeof(req) - 1 - have, 0);
		char *end;

		if (r <= 0)
			break;
		have += (size_t)r;
		req[have] = '\0';
		while ((end = strstr(req, "\r\n\r\n")) != NULL) {
			size_t used = (size_t)(end + 4 - req);

			send(c, resp, sizeof(resp) - 1, MSG_NOSIGNAL);
			memmove(req, req + used, have - used + 1);
			have -= used;
		}
	}
	close(c);
	return NULL;
}

static const char *read_log(const char *path)
{
	static char log[16384];
	ssize_t n = 0;
	int lf = open(path, O_RDONLY | O_CLOEXEC);

	if (lf < 0)
		return "";
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
	char line[256], body[8];
	pthread_t t;
	int port, fd;
	FILE *f;

	(void)argc;
	snprintf(log_kv, sizeof(log_kv), "TIMEBOX_LOG=/tmp/tbr-stdio-framed-%d.log", (int)getpid());
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", "TIMEBOX_LOG_LEVEL=info", log_kv,
			 NULL);
	path = log_kv + strlen("TIMEBOX_LOG=");
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, server, NULL) == 0, "pthread_create");
	fd = tbr_connect(port);
	f = fdopen(fd, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	for (int round = 0; round < 2; round++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double t0, ms;
		int n;

		TBR_CHECK(write(fd, get, sizeof(get) - 1) == (ssize_t)sizeof(get) - 1, "write: %s",
			  strerror(errno));
		do {
			TBR_CHECK(fgets(line, sizeof(line), f) != NULL, "round %d: fgets: %s", round,
				  strerror(errno));
		} while (strcmp(line, "\r\n") != 0);
		TBR_CHECK(fread(body, 1, 5, f) == 5 && memcmp(body, "hello", 5) == 0,
			  "round %d: fread of the body: %s", round, strerror(errno));
		t0 = tbt_now_ms();
		n = poll(&p, 1, 700);
		ms = tbt_now_ms() - t0;
		TBR_CHECK(n == 0, "round %d: the resting connection was cut after %.0f ms (poll %d, "
			  "revents %#x): the response read by fgets was not seen complete",
			  round, ms, n, p.revents);
	}
	fclose(f);
	pthread_join(t, NULL);
	log = read_log(path);
	unlink(path);
	TBR_CHECK(strstr(log, "framing_raw") == NULL, "framing gave up:\n%s", log);
	return 0;
}
