/* prop_nonblock_iov.c - a non-blocking writev of more than 64 pieces on a propagating
 * socket was told a short count although the socket's buffer took everything natively.
 *
 * What happened: with TIMEBOX_PROPAGATE=1 the planner (prop_io.c tb_pout_send) sends the
 * program's pieces 64 at a time. A blocking call goes on round after round; a non-blocking
 * one (O_NONBLOCK, or MSG_DONTWAIT) returned after the first round whatever it moved, as if
 * the kernel had stopped there: the program was told 409 of its 1225 bytes, where natively
 * one writev with room in the socket's buffer takes all 1225. A program that reads a short
 * count as "the buffer is full" waits for POLLOUT it did not need to, and one that checks
 * n == total after a poll says the peer is slow. The sequence: TIMEBOX_PROPAGATE=1,
 * TIMEBOX_DEADLINE=5s; a request of 200 pieces (the head, then 199 six-byte pieces) by
 * writev on an O_NONBLOCK socket, then by sendmsg(MSG_DONTWAIT) on a blocking one -> 409
 * of 1225 each time. Now a non-blocking call goes on while the kernel takes whole rounds.
 */
#include <fcntl.h>
#include <sys/uio.h>

#include "regress.h"

#define PIECES 200

int main(int argc, char **argv)
{
	static char req[] = "GET /many HTTP/1.1\r\nHost: many\r\n\r\n";
	static char body[PIECES][8];
	struct iovec v[PIECES];
	struct msghdr m = { .msg_iov = v, .msg_iovlen = PIECES };
	size_t total = strlen(req);
	int port, fd;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_PROPAGATE=1", "TIMEBOX_DEADLINE=5s", NULL);
	tbr_listen(&port); /* the kernel's accept queue holds the connections: 1 KB fits */
	v[0].iov_base = req;
	v[0].iov_len = strlen(req);
	for (int i = 1; i < PIECES; i++) {
		snprintf(body[i], sizeof(body[i]), "%06d", i);
		v[i].iov_base = body[i];
		v[i].iov_len = 6;
		total += 6;
	}

	fd = tbr_connect(port);
	TBR_CHECK(fcntl(fd, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	r = writev(fd, v, PIECES);
	TBR_CHECK(r == (ssize_t)total, "non-blocking writev of %d pieces: %zd of %zu (%s)",
		  PIECES, r, total, r < 0 ? strerror(errno) : "short");
	close(fd);

	fd = tbr_connect(port);
	r = sendmsg(fd, &m, MSG_DONTWAIT);
	TBR_CHECK(r == (ssize_t)total, "sendmsg(MSG_DONTWAIT) of %d pieces: %zd of %zu (%s)",
		  PIECES, r, total, r < 0 ? strerror(errno) : "short");
	close(fd);
	printf("non-blocking sends of %d pieces: all %zu bytes, as natively\n", PIECES, total);
	return 0;
}
