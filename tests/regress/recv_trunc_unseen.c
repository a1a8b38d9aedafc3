/* recv_trunc_unseen.c - recv(MSG_TRUNC) on a framed connection crashed the program.
 *
 * What happened: on TCP, recv(fd, buf, n, MSG_TRUNC) (and recvfrom, recvmsg, __recv_chk,
 * __recvfrom_chk) discards up to n queued bytes without copying them and returns how many
 * it discarded: the program skips a body it does not want, and buf may be far smaller than
 * n (one byte here). timebox's framing parsed buf[0..r) as the bytes received: past the
 * end of the buffer (SIGSEGV when the next page is not mapped), or stale bytes taken for
 * the response. The sequence, with TIMEBOX_READ_TIMEOUT=300ms and a keep-alive HTTP/1.1
 * server (Content-Length: 1000): send a request, read the 38-byte header section
 * normally, then discard the body with each call in turn and MSG_TRUNC|MSG_WAITALL into a
 * 1-byte buffer that ends where a PROT_NONE page begins. Natively each returns 1000; the
 * response is complete, so the connection rests: a poll for 700 ms returns 0 (timebox must
 * not cut it after 300 ms). Then a second request whose whole response (headers too) is
 * discarded the same way: natively the count; timebox cannot follow unseen headers, so
 * that connection is no longer framed - and the call still returns the count. A peek
 * (MSG_PEEK|MSG_TRUNC) before the first discard returns the count too and moves nothing.
 *
 * The fix: bytes moved under MSG_TRUNC are unseen by the framing (counted inside a body
 * it is skipping, as sendfile's are; anywhere else framing gives up for that connection).
 */
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>

#include "regress.h"

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);

#define BODY 1000
static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
static int lfd;

static void crashed(int sig)
{
	static const char msg[] = "FAIL: the program crashed (SIGSEGV) in a MSG_TRUNC receive\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

/* Each connection: answer every request (up to an empty line) with head + BODY bytes. */
static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	char req[1024], resp[sizeof(head) + BODY];
	size_t have = 0;

	memcpy(resp, head, sizeof(head) - 1);
	memset(resp + sizeof(head) - 1, 'x', BODY);
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

static void *acceptor(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_t t;
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		pthread_create(&t, NULL, serve, (void *)(intptr_t)c);
		pthread_detach(t);
	}
}

/* The body (or the whole response) discarded by call `how` into the 1-byte buffer b. */
static ssize_t discard(int how, int fd, char *b, size_t n)
{
	int fl = MSG_TRUNC | MSG_WAITALL;
	struct iovec iov = { .iov_base = b, .iov_len = n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	switch (how) {
	case 0:
		return recv(fd, b, n, fl);
	case 1:
		return recvfrom(fd, b, n, fl, NULL, NULL);
	case 2:
		return recvmsg(fd, &m, fl);
	case 3:
		return __recv_chk(fd, b, n, n, fl);
	default:
		return __recvfrom_chk(fd, b, n, n, fl, NULL, NULL);
	}
}

static const char *const names[] = { "recv", "recvfrom", "recvmsg", "__recv_chk",
				     "__recvfrom_chk" };

int main(int argc, char **argv)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	long page = sysconf(_SC_PAGESIZE);
	char *map, *one, hdr[sizeof(head)];
	pthread_t t;
	int port;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	signal(SIGSEGV, crashed);
	signal(SIGBUS, crashed);
	map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0);
	TBR_CHECK(map != MAP_FAILED, "mmap: %s", strerror(errno));
	TBR_CHECK(mprotect(map + page, (size_t)page, PROT_NONE) == 0, "mprotect: %s",
		  strerror(errno));
	one = map + page - 1; /* one byte, then a page that faults */
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, acceptor, NULL);

	for (int how = 0; how < 5; how++) {
		struct pollfd p;
		double t0, ms;
		ssize_t r;
		int fd = tbr_connect(port), n;

		TBR_CHECK(send(fd, req, sizeof(req) - 1, 0) == (ssize_t)sizeof(req) - 1, "send");
		r = recv(fd, hdr, sizeof(head) - 1, MSG_WAITALL);
		TBR_CHECK(r == (ssize_t)sizeof(head) - 1, "%s: header read %zd %s", names[how], r,
			  strerror(errno));
		if (how == 0) {
			/* A peek is never fed (the bytes will be read again): with MSG_TRUNC too. */
			r = recv(fd, one, BODY, MSG_PEEK | MSG_TRUNC | MSG_WAITALL);
			TBR_CHECK(r == BODY, "recv(MSG_PEEK|MSG_TRUNC): %zd (%s)", r,
				  r < 0 ? strerror(errno) : "-");
		}
		r = discard(how, fd, one, BODY);
		TBR_CHECK(r == BODY, "%s: body discarded %zd (%s), natively %d", names[how], r,
			  r < 0 ? strerror(errno) : "-", BODY);

		/* The response is complete: the connection rests, nothing may cut it. */
		p.fd = fd;
		p.events = POLLIN;
		t0 = tbt_now_ms();
		n = poll(&p, 1, 700);
		ms = tbt_now_ms() - t0;
		TBR_CHECK(n == 0, "%s: the resting connection was cut after %.0f ms (poll %d, "
			  "revents %#x): its body was not counted", names[how], ms, n, p.revents);

		/* The whole next response unseen: counted as natively, framing cannot follow. */
		TBR_CHECK(send(fd, req, sizeof(req) - 1, 0) == (ssize_t)sizeof(req) - 1, "send 2");
		r = discard(how, fd, one, sizeof(head) - 1 + BODY);
		TBR_CHECK(r == (ssize_t)(sizeof(head) - 1 + BODY), "%s: response discarded %zd (%s)",
			  names[how], r, r < 0 ? strerror(errno) : "-");
		close(fd);
	}
	return 0;
}
