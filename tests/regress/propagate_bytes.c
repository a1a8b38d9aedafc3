/* propagate_bytes.c - the header propagation puts into outbound requests changes no byte of
 * the program's and keeps its counts exact, whichever call sends them.
 *
 * What must hold: with TIMEBOX_PROPAGATE=1 and a deadline, every HTTP/1.x request sent on a
 * governed socket carries "X-Deadline-Ms: <ms left>" right after its request line, and
 * nothing else changes: the peer receives exactly the program's bytes plus that one line,
 * no byte twice, none lost, and the program is told counts that sum to its own total (a
 * write of N reports at most N). The risks are in the accounting: the header is bytes the
 * program never wrote, so a partial send can stop inside it, before it or after it; writev
 * splits the request line over pieces; sendmsg with MSG_MORE sends the head in two calls;
 * a non-blocking socket with a small send buffer takes a few KB per call.
 * The sequence: a recording server on 127.0.0.1 (one thread per connection, reading to
 * EOF); the program sends one request per connection through write, writev with the
 * request line in four pieces, sendmsg with MSG_MORE then the body, a blocking 2 MB write
 * against a slow reader with SO_SNDBUF 4 KB, and the same non-blocking in 1000-byte writes
 * driven by poll. The server's bytes are compared with the program's, header removed.
 * Then the kernel's short counts are forced where they matter (a second preload library,
 * after timebox, lets a scripted number of bytes through each sendmsg): blocking, the send
 * stops inside the header - the program is told the request line's bytes, as after a
 * signal, and its next write finishes the header first; non-blocking, the next call moves
 * only the header's rest - EAGAIN, never 0, and the call after sends the program's bytes;
 * and a write whose kernel call takes only owed header bytes on a blocking socket goes on
 * until its own bytes went (never 0).
 */
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "regress.h"
#include "delaylib.h"

/* Preloaded after timebox: the n-th sendmsg since PB_SCRIPT last changed takes at most the
 * n-th number of PB_SCRIPT bytes ("22,4": 22, then 4, then all). */
static const char short_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdlib.h>\n#include <string.h>\n"
	"#include <sys/socket.h>\n"
	"ssize_t sendmsg(int fd, const struct msghdr *m, int fl)\n"
	"{\n"
	"	static ssize_t (*real)(int, const struct msghdr *, int);\n"
	"	static char last[64];\n"
	"	static int idx;\n"
	"	const char *s = getenv(\"PB_SCRIPT\"), *p;\n"
	"	struct iovec v[64];\n"
	"	struct msghdr c = *m;\n"
	"	size_t left, k = 0;\n"
	"	if (real == NULL)\n"
	"		real = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, \"sendmsg\");\n"
	"	if (s == NULL)\n"
	"		return real(fd, m, fl);\n"
	"	if (strcmp(s, last) != 0) {\n"
	"		strncpy(last, s, sizeof(last) - 1);\n"
	"		idx = 0;\n"
	"	}\n"
	"	p = s;\n"
	"	for (int i = 0; i < idx && p != NULL; i++)\n"
	"		if ((p = strchr(p, ',')) != NULL)\n"
	"			p++;\n"
	"	idx++;\n"
	"	if (p == NULL || *p == '\\0')\n"
	"		return real(fd, m, fl);\n"
	"	left = strtoul(p, NULL, 10);\n"
	"	for (size_t i = 0; i < m->msg_iovlen && left > 0 && k < 64; i++, k++) {\n"
	"		v[k] = m->msg_iov[i];\n"
	"		if (v[k].iov_len > left)\n"
	"			v[k].iov_len = left;\n"
	"		left -= v[k].iov_len;\n"
	"	}\n"
	"	c.msg_iov = v;\n"
	"	c.msg_iovlen = k;\n"
	"	return real(fd, &c, fl);\n"
	"}\n";

#define CASES 8
#define LINE 19 /* "GET /one HTTP/1.1\r\n" */
#define BIG (2 << 20)

static struct rec {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *buf;
	size_t len, cap;
	int done, slow;
} recs[CASES];
static int next_case;

/* One connection: everything until EOF into recs[k]. */
static void *record(void *arg)
{
	int c = (int)(intptr_t)arg, k;
	struct rec *r;
	struct timespec pace = { 0, 200000 };
	char b[8192];
	ssize_t n;

	TBR_CHECK(read(c, &k, sizeof(k)) == (ssize_t)sizeof(k), "case number");
	r = &recs[k];
	while ((n = read(c, b, r->slow ? 2048 : sizeof(b))) > 0) {
		if (r->len + (size_t)n > r->cap) {
			r->cap = (r->len + (size_t)n) * 2;
			r->buf = realloc(r->buf, r->cap);
			TBR_CHECK(r->buf != NULL, "realloc");
		}
		memcpy(r->buf + r->len, b, (size_t)n);
		r->len += (size_t)n;
		if (r->slow)
			nanosleep(&pace, NULL); /* a slow reader: the sender's buffer fills */
	}
	close(c);
	pthread_mutex_lock(&r->mu);
	r->done = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* The connection of case k: its number goes first, over a raw socket call the library
 * cannot see (the 4 bytes are not part of the stream the planner follows: see below). */
static int open_case(int port, int k, int sndbuf)
{
	int fd = tbr_connect(port);
	struct iovec v = { &k, sizeof(k) };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };

	recs[k].slow = sndbuf > 0;
	if (sndbuf > 0)
		TBR_CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) == 0,
			  "SO_SNDBUF");
	/* Through the kernel directly: the planner must see the request line first. */
	TBR_CHECK(syscall(SYS_sendmsg, fd, &m, 0) == (long)sizeof(k), "case number sent");
	return fd;
}

/* Closes the case's sending side and waits for its server to have read everything; then
 * checks what it received against the program's bytes `want` (len bytes). */
static void check_case(int fd, int k, const char *want, size_t len, const char *what)
{
	struct rec *r = &recs[k];
	const char *got, *eol = memchr(want, '\n', len), *v;
	size_t line, hdr;
	long ms;

	TBR_CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown");
	pthread_mutex_lock(&r->mu);
	while (!r->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	close(fd);
	got = r->buf;
	TBR_CHECK(eol != NULL, "%s: the request has a line end", what);
	line = (size_t)(eol - want) + 1;
	TBR_CHECK(r->len > len, "%s: %zu bytes received for %zu sent: no header", what, r->len,
		  len);
	TBR_CHECK(memcmp(got, want, line) == 0, "%s: the request line changed", what);
	v = got + line;
	TBR_CHECK(r->len - line > 15 && memcmp(v, "X-Deadline-Ms: ", 15) == 0,
		  "%s: no X-Deadline-Ms after the request line: %.40s", what, v);
	ms = strtol(v + 15, NULL, 10);
	TBR_CHECK(ms > 0 && ms <= 5000, "%s: X-Deadline-Ms: %ld (deadline 5 s)", what, ms);
	hdr = (size_t)((const char *)memchr(v, '\n', r->len - line) - v) + 1;
	TBR_CHECK(r->len == len + hdr, "%s: %zu bytes received, %zu sent + %zu of header: bytes "
		  "lost or sent twice", what, r->len, len, hdr);
	TBR_CHECK(memcmp(got + line + hdr, want + line, len - line) == 0,
		  "%s: the program's bytes after the request line changed", what);
	printf("%s: %zu bytes + \"%.*s\"\n", what, len, (int)hdr - 2, v);
}

static char *big_request(size_t *len)
{
	char *b = malloc(BIG + 128);
	int h;

	TBR_CHECK(b != NULL, "malloc");
	h = snprintf(b, 128, "PUT /big HTTP/1.1\r\nHost: big\r\nContent-Length: %d\r\n\r\n", BIG);
	for (size_t i = 0; i < BIG; i++)
		b[h + i] = (char)('a' + i % 26);
	*len = (size_t)h + BIG;
	return b;
}

int main(int argc, char **argv)
{
	static const char req1[] = "GET /one HTTP/1.1\r\nHost: one\r\n\r\n";
	static const char post[] = "POST /three HTTP/1.1\r\nHost: three\r\nContent-Length: 5\r\n";
	static const char body[] = "\r\nhello";
	char want[256], *big;
	static char p0[] = "GE", p1[] = "T /two HTT", p2[] = "P/1.1\r", p3[] = "\nHost: two\r\n\r\n";
	struct iovec parts[4] = { { p0, 2 }, { p1, 10 }, { p2, 6 }, { p3, 15 } };
	struct iovec v;
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	size_t len, sum;
	ssize_t r;
	int port, lfd, fd;

	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(short_c);
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=5s", "TIMEBOX_PROPAGATE=1", NULL);
	tbr_remove_built();
	(void)argc;
	for (int i = 0; i < CASES; i++) {
		pthread_mutex_init(&recs[i].mu, NULL);
		pthread_cond_init(&recs[i].cv, NULL);
	}
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, record);

	/* 1. write */
	fd = open_case(port, next_case, 0);
	r = write(fd, req1, strlen(req1));
	TBR_CHECK(r == (ssize_t)strlen(req1), "write: %zd of %zu (%s)", r, strlen(req1),
		  strerror(errno));
	check_case(fd, next_case++, req1, strlen(req1), "write");

	/* 2. writev, the request line in four pieces */
	fd = open_case(port, next_case, 0);
	r = writev(fd, parts, 4);
	TBR_CHECK(r == 33, "writev: %zd of 33 (%s)", r, strerror(errno));
	check_case(fd, next_case++, "GET /two HTTP/1.1\r\nHost: two\r\n\r\n", 33, "writev");

	/* 3. sendmsg with MSG_MORE, then the blank line and the body */
	fd = open_case(port, next_case, 0);
	v.iov_base = (void *)post;
	v.iov_len = strlen(post);
	r = sendmsg(fd, &m, MSG_MORE);
	TBR_CHECK(r == (ssize_t)strlen(post), "sendmsg MSG_MORE: %zd (%s)", r, strerror(errno));
	v.iov_base = (void *)body;
	v.iov_len = strlen(body);
	r = sendmsg(fd, &m, 0);
	TBR_CHECK(r == (ssize_t)strlen(body), "sendmsg: %zd (%s)", r, strerror(errno));
	snprintf(want, sizeof(want), "%s%s", post, body);
	check_case(fd, next_case++, want, strlen(want), "sendmsg+MSG_MORE");

	/* 4. one blocking write of 2 MB against a slow reader, 4 KB send buffer */
	big = big_request(&len);
	fd = open_case(port, next_case, 4096);
	r = write(fd, big, len);
	TBR_CHECK(r == (ssize_t)len, "blocking write: %zd of %zu (%s)", r, len, strerror(errno));
	check_case(fd, next_case++, big, len, "blocking write, slow reader");

	/* 5. non-blocking, 1000-byte writes, poll between: short counts must sum exactly */
	fd = open_case(port, next_case, 4096);
	TBR_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	for (sum = 0; sum < len;) {
		size_t want_n = len - sum < 1000 ? len - sum : 1000;
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		r = write(fd, big + sum, want_n);
		if (r < 0 && errno == EAGAIN) {
			TBR_CHECK(poll(&p, 1, 5000) == 1, "poll for POLLOUT");
			continue;
		}
		TBR_CHECK(r > 0 && (size_t)r <= want_n, "non-blocking write: %zd of %zu (%s)", r,
			  want_n, strerror(errno));
		sum += (size_t)r;
	}
	TBR_CHECK(fcntl(fd, F_SETFL, 0) == 0, "blocking again");
	check_case(fd, next_case++, big, len, "non-blocking writes, slow reader");
	free(big);

	/* 6. blocking, the kernel stops inside the header: the request line, then the rest */
	fd = open_case(port, next_case, 0);
	setenv("PB_SCRIPT", "22,4", 1);
	r = write(fd, req1, strlen(req1));
	TBR_CHECK(r == LINE, "blocking write cut inside the header: told %zd (%s)", r,
		  strerror(errno));
	r = write(fd, req1 + LINE, strlen(req1) - LINE);
	TBR_CHECK(r == (ssize_t)strlen(req1) - LINE, "the rest: %zd (%s)", r, strerror(errno));
	unsetenv("PB_SCRIPT");
	check_case(fd, next_case++, req1, strlen(req1), "blocking, cut inside the header");

	/* 7. non-blocking: the request line; then only the header's rest goes: EAGAIN; then the program's */
	fd = open_case(port, next_case, 0);
	TBR_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	setenv("PB_SCRIPT", "24,4", 1);
	r = write(fd, req1, strlen(req1));
	TBR_CHECK(r == LINE, "non-blocking write cut inside the header: told %zd (%s)", r,
		  strerror(errno));
	errno = 0;
	r = write(fd, req1 + LINE, strlen(req1) - LINE);
	TBR_CHECK(r == -1 && errno == EAGAIN, "only header bytes went: %zd (%s), not -1 EAGAIN",
		  r, strerror(errno));
	r = write(fd, req1 + LINE, strlen(req1) - LINE);
	TBR_CHECK(r == (ssize_t)strlen(req1) - LINE, "then the program's: %zd (%s)", r,
		  strerror(errno));
	unsetenv("PB_SCRIPT");
	TBR_CHECK(fcntl(fd, F_SETFL, 0) == 0, "blocking again");
	check_case(fd, next_case++, req1, strlen(req1), "non-blocking, EAGAIN on header bytes");

	/* 8. blocking, the request line alone, then a write whose first kernel call takes only
	 * owed header bytes: it goes on, and reports its own count (never 0) */
	fd = open_case(port, next_case, 0);
	setenv("PB_SCRIPT", "19,5", 1);
	r = write(fd, req1, LINE);
	TBR_CHECK(r == LINE, "the request line: %zd (%s)", r, strerror(errno));
	r = write(fd, req1 + LINE, strlen(req1) - LINE);
	TBR_CHECK(r == (ssize_t)strlen(req1) - LINE, "after owed header bytes: told %zd (%s)", r,
		  strerror(errno));
	unsetenv("PB_SCRIPT");
	check_case(fd, next_case++, req1, strlen(req1), "blocking, owed header bytes first");
	return 0;
}
