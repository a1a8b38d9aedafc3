/* errqueue_not_eof.c - reading a governed socket's error queue was taken for the peer's
 * end of the connection, and the circuit breaker opened on a healthy downstream.
 *
 * What happened: a program that sends with MSG_ZEROCOPY learns that a buffer may be
 * reused from the socket's error queue: recvmsg(MSG_ERRQUEUE) returns the completion as a
 * control message, with no data - 0. With a data buffer in its msghdr (most programs pass
 * one), that 0 reached the transfer's end as a read that saw EOF: with the breaker on, a
 * call whose request was sent and whose response had not come yet was recorded as a
 * failure ("reset"), so five such calls in a row opened the breaker and the next connect
 * to the healthy server was refused. An error-queue read never blocks and moves none of
 * the stream's bytes: it is now the program's own call, not a transfer.
 * The sequence: TIMEBOX_BREAKER=on; eight calls on one connection, each a zerocopy request
 * whose completion the client reads from the error queue (with a 16-byte data buffer)
 * before it reads the answer; then a new connect must succeed and be answered.
 */
#include <poll.h>
#include <sys/uio.h>

#include "regress.h"

#define CALLS 8

/* Answers each request "q" with "a". */
static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	char b;

	while (read(c, &b, 1) == 1) {
		if (b == 'q' && write(c, "a", 1) != 1)
			break;
	}
	close(c);
	return NULL;
}

/* Waits for the error queue (POLLERR) and reads it with a data buffer, as a program
 * does; returns what recvmsg returned. */
static ssize_t read_completion(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };
	char data[16], ctl[256];
	struct iovec v = { data, sizeof(data) };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };

	TBR_CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLERR),
		  "no completion on the error queue in 5 s (revents %#x)", p.revents);
	return recvmsg(fd, &m, MSG_ERRQUEUE);
}

int main(int argc, char **argv)
{
	int port, fd, one = 1;
	char b;

	tbr_preload_self(argv, "TIMEBOX_BREAKER=on", "TIMEBOX_READ_TIMEOUT=5s", NULL);
	(void)argc;
	tbr_hang_guard(20, "the calls did not finish");
	tbr_serve_each(tbr_listen(&port), serve);
	fd = tbr_connect(port);
	if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0)
		tbr_skip("SO_ZEROCOPY is not supported here");
	for (int i = 0; i < CALLS; i++) {
		ssize_t r;

		TBR_CHECK(send(fd, "q", 1, MSG_ZEROCOPY) == 1, "send: %s", strerror(errno));
		r = read_completion(fd);
		TBR_CHECK(r == 0, "call %d: the error queue read returned %zd (%s), natively 0", i,
			  r, r < 0 ? strerror(errno) : "data");
		TBR_CHECK(read(fd, &b, 1) == 1 && b == 'a', "call %d: the answer: %s", i,
			  strerror(errno));
	}
	close(fd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	{
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		TBR_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0,
			  "after %d healthy calls that read their completions, a connect to the "
			  "same server failed: %s (the breaker took each for a reset)", CALLS,
			  strerror(errno));
	}
	TBR_CHECK(write(fd, "q", 1) == 1 && read(fd, &b, 1) == 1 && b == 'a',
		  "the call after them: %s", strerror(errno));
	close(fd);
	printf("%d zerocopy calls reading their completions: none taken for a reset\n", CALLS);
	return 0;
}
