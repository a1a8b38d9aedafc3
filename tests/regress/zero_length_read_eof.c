/* zero_length_read_eof.c - a read that asked for no bytes was taken for the peer's
 * close, and the circuit breaker opened on a healthy server.
 *
 * What happened: read(fd, buf, 0), readv(fd, iov, 0) and recv(fd, buf, 0, 0) return 0
 * with the connection open: the program asked for nothing. On a governed socket every
 * read's 0 reaches tb_xfer_end as end of file (recvmmsg's message of 0 bytes likewise) (xfer.c end_no_bytes): the framing ends the
 * response there, and with a breaker on, a request "closed unanswered" is a failed call
 * (tb_prot_eof, last=reset). The sequence: TIMEBOX_DEADLINE=5s, TIMEBOX_BREAKER_FAILURES=3;
 * a healthy HTTP server; ten times: connect, send a request, a zero-length read (read,
 * readv with no iovec, recv of 0, recvmmsg of one empty message, in turn), then read the
 * 200 answer -> after three the
 * breaker opened (event=breaker state=open last=reset) and the next connects failed with
 * ECONNREFUSED, where natively all ten succeed.
 */
#include <sys/syscall.h>
#include <sys/uio.h>

#include "regress.h"

/* A healthy server: answers each request (one per read) with a 200. */
static void *http(void *arg)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	int c = (int)(intptr_t)arg;
	char b[4096];

	while (syscall(SYS_read, c, b, sizeof(b)) > 0) {
		struct timespec think = { 0, 10 * 1000 * 1000 };

		nanosleep(&think, NULL);
		if (syscall(SYS_write, c, ok, strlen(ok)) < 0)
			break;
	}
	close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	int port;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=5s", "TIMEBOX_BREAKER_FAILURES=3", NULL);
	tbr_serve_each(tbr_listen(&port), http);
	for (int i = 0; i < 10; i++) {
		int fd = tbr_connect(port); /* checks connect() == 0: ECONNREFUSED before the fix */
		char b[256];
		struct iovec v = { b, sizeof(b) }, none = { b, 0 };
		struct mmsghdr mm = { .msg_hdr = { .msg_iov = &none, .msg_iovlen = 1 } };
		ssize_t z, r;

		TBR_CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "request %d", i);

		switch (i % 4) {
		case 0: z = read(fd, b, 0); break;
		case 1: z = readv(fd, &v, 0); break;
		case 2: z = recv(fd, b, 0, 0); break;
		default:
			z = recvmmsg(fd, &mm, 1, 0, NULL);
			z = z == 1 ? (ssize_t)mm.msg_len : z < 0 ? -1 : 99;
			break;
		}
		TBR_CHECK(z == 0, "call %d: a zero-length read returned %zd (%s)", i, z,
			  strerror(errno));
		r = read(fd, b, sizeof(b));
		TBR_CHECK(r == 40, "call %d: the answer: %zd (%s)", i, r, strerror(errno));
		close(fd);
	}
	printf("ten calls with a zero-length read each: the breaker stayed closed\n");
	return 0;
}
