/* framing_oob.c - a governed client's urgent byte, and its error queue, were taken for
 * bytes of the response: a call's deadline stopped before the response was whole, and an
 * answered call's went on and cut the idle connection.
 *
 * What happened: each read on a governed socket feeds the bytes it moved to the socket's
 * framing, which follows HTTP responses and ends the call's deadline when the last one is
 * complete (xfer.c framed_end_in, CALL_ENDS). Only MSG_PEEK kept a read out of it
 * (hooks_io.c governed_recv, governed_recvfrom, governed_recvmsg): recv with MSG_OOB, which
 * returns TCP's urgent byte (the kernel takes it out of the stream, SO_OOBINLINE off), and
 * recvmsg with MSG_ERRQUEUE, which returns the socket's own sent packet when it timestamps
 * its sends, were fed as response bytes. TIMEBOX_DEADLINE=500ms. (1) A client timestamping
 * its sends reads its error queue while awaiting a response "Content-Length: 2", reads the
 * response whole and keeps the connection for its next request: the framing had found the
 * packet malformed and given the connection up (raw), the answered call's deadline went on
 * running, and the idle connection was cut at 500 ms. (2) A response "Content-Length: 2"
 * whose first body byte 'a' is followed by an urgent '!', and whose second never comes: the
 * client reads to the mark, takes '!' with recv(MSG_OOB) (sockatmark) and reads on for the
 * last byte. The framing had counted '!' as that byte, judged the response whole and
 * cleared the call's deadline: the read waited for ever where it must end with ETIMEDOUT at
 * 500 ms. Such reads are no longer fed to the framing (nor to an inbound request's head
 * parser, regress/propagate_inbound_oob).
 */
#include <linux/net_tstamp.h>
#include <stdbool.h>
#include <sys/ioctl.h>

#include "regress.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The server: a request for /stall gets a response whose last body byte never comes (an
 * urgent byte before it), any other one a whole response. EOF waited. */
static void *server(void *arg)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\na";
	int c = (int)(intptr_t)arg;
	char b[1024];
	ssize_t r;

	while ((r = recv(c, b, sizeof(b) - 1, 0)) > 0) {
		b[r] = '\0';
		TBR_CHECK(send(c, head, strlen(head), 0) == (ssize_t)strlen(head), "response");
		if (strstr(b, "/stall") == NULL) {
			TBR_CHECK(send(c, "b", 1, 0) == 1, "response");
			continue;
		}
		TBR_CHECK(send(c, "!", 1, MSG_OOB) == 1, "urgent byte");
		while (recv(c, b, sizeof(b), 0) > 0)
			;
	}
	close(c);
	return NULL;
}

/*
 * (1) A client that timestamps its sends reads its error queue (its own request's packet)
 * while awaiting a response "Content-Length: 2", then reads the response whole and keeps
 * the connection for its next request. The framing had taken the packet for the response,
 * found it malformed and given the connection up (raw): its answered call's deadline went
 * on running, and the idle connection was cut at it. It must stay open: no event for 1 s.
 */
static void errqueue_case(int port)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	int fd = tbr_connect(port), ts = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	char data[2048], ctl[512], b[1024];
	struct iovec v = { data, sizeof(data) };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	struct pollfd p = { .fd = fd, .events = 0 };
	size_t len = 0;
	int got = 0, ev;
	ssize_t r;

	TBR_CHECK(setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &ts, sizeof(ts)) == 0,
		  "SO_TIMESTAMPING: %s", strerror(errno));
	TBR_CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "request");
	TBR_CHECK(poll(&p, 1, 2000) == 1 && (p.revents & POLLERR), "no transmit timestamp");
	for (;;) {
		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		r = recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (r < 0)
			break;
		got += r > 0;
	}
	TBR_CHECK(errno == EAGAIN, "recvmsg(MSG_ERRQUEUE): %s", strerror(errno));
	if (got == 0) {
		printf("(1) not checked: no error-queue message carried bytes here "
		       "(net.core.tstamp_allow_data)\n");
		close(fd);
		return;
	}
	while (len < 4 || strstr(b, "\r\n\r\nab") == NULL) {
		r = recv(fd, b + len, sizeof(b) - 1 - len, 0);
		TBR_CHECK(r > 0, "response: %zd (%s)", r, strerror(errno));
		len += (size_t)r;
		b[len] = '\0';
	}
	p.events = POLLIN;
	ev = poll(&p, 1, 1000);
	printf("(1) after the error queue (%d messages) and the whole response, the idle "
	       "connection saw %s\n", got, ev == 0 ? "nothing for 1 s" : "an event");
	TBR_CHECK(ev == 0, "the idle connection saw revents 0x%x (cut at the call's deadline)",
		  (unsigned)p.revents);
	close(fd);
}

int main(int argc, char **argv)
{
	static const char req[] = "GET /stall HTTP/1.1\r\nHost: x\r\n\r\n";
	struct pollfd p = { .events = POLLPRI };
	char b[1024], u;
	int port, fd, err;
	size_t len = 0;
	ssize_t r;
	int64_t t0, ms;

	tbr_preload_self(argv, "TIMEBOX_DEADLINE=500ms", NULL);
	(void)argc;
	tbr_hang_guard(8, "the read of the missing body byte was never cut at the deadline");
	tbr_serve_each(tbr_listen(&port), server);
	errqueue_case(port); /* first: the other case's cut opens a retry window */
	t0 = now_ms(); /* the call's deadline runs from its connect */
	fd = tbr_connect(port);
	TBR_CHECK(write(fd, req, strlen(req)) == (ssize_t)strlen(req), "request");
	p.fd = fd;
	TBR_CHECK(poll(&p, 1, 2000) == 1 && (p.revents & POLLPRI), "no urgent data arrived");
	while (sockatmark(fd) != 1) { /* the head and 'a', up to the mark */
		r = recv(fd, b + len, sizeof(b) - 1 - len, 0);
		TBR_CHECK(r > 0, "response: %zd (%s)", r, strerror(errno));
		len += (size_t)r;
	}
	b[len] = '\0';
	TBR_CHECK(strstr(b, "\r\n\r\na") != NULL && strstr(b, "\r\n\r\na")[5] == '\0',
		  "read before the mark: %s", b);
	TBR_CHECK(recv(fd, &u, 1, MSG_OOB) == 1 && u == '!', "recv(MSG_OOB): %s", strerror(errno));
	r = recv(fd, b, sizeof(b), 0); /* the body's last byte: never sent */
	err = errno;
	ms = now_ms() - t0;
	printf("(2) the read of the last body byte returned %zd (%s) after %lld ms\n", r,
	       r < 0 ? strerror(err) : "-", (long long)ms);
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "the read returned %zd (%s)", r, strerror(err));
	TBR_CHECK(ms >= 499 && ms < 2500, "cut after %lld ms (deadline 500 ms)", (long long)ms);
	close(fd);
	return 0;
}
