/* write_probe_drain.c - a send to a peer that reads small pieces steadily through a small
 * receive buffer was cut by write_timeout, though the peer never paused for long.
 *
 * What happened (make stress, the slow-drain downstream, 1 run in 4 under SANITIZE=
 * undefined): a blocked send's progress is the count of bytes the peer acknowledged
 * (write_steady_drain.c). A receiver with a small buffer that reads a few KiB at a time
 * frees space in steps too small to announce: its window stays zero until about half the
 * buffer is free, and the sender learns that the window reopened only from its own
 * zero-window probes, sent at the retransmission timeout and doubled while the window
 * stays shut (200, 400, 800 ms on loopback). The acknowledged count then stands still for
 * 400-600 ms while the peer reads 1 KiB every 20 ms, and a write_timeout of 300 ms cut an
 * upload that completes natively. From the sender, a stalled peer and this one look alike
 * until the next probe is answered: a stalled peer answers it with a window still shut,
 * this one with a window open.
 * The sequence: TIMEBOX_WRITE_TIMEOUT=300ms; SO_SNDBUF 16 KiB on the client, SO_RCVBUF
 * 16 KiB on the peer; the peer reads `step` bytes every `pause` ms; the client sends
 * 128 KiB in one blocking send. Any ETIMEDOUT is the defect. Then a peer that reads
 * nothing: the send must still be cut, never before 300 ms and well before the deadline
 * the test allows (2 s).
 *
 * The fix: at the limit with nothing acknowledged, the cut waits for the peer's answer to
 * a probe sent after the limit (TCP_INFO's tcpi_last_ack_recv) - or for the kernel's own
 * verdict that the peer does not answer (unanswered probes or retransmissions) - bounded
 * by one more write_timeout (at least 1 s).
 */
#include <pthread.h>
#include <stdbool.h>

#include "regress.h"

static int client(int port)
{
	int snd = 16384, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
	TBR_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s",
		  strerror(errno));
	return fd;
}

int main(int argc, char **argv)
{
	static const int steps[][2] = { { 1024, 20 }, { 2048, 40 }, { 4096, 100 } };
	static char data[128 << 10];
	int cut = 0, rcv = 16384;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=300ms", NULL);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) + 1; i++) {
		bool stalled = i == sizeof(steps) / sizeof(steps[0]);
		struct tbr_drain d = { .step = stalled ? 0 : steps[i][0],
				   .pause_ms = stalled ? 0 : steps[i][1] };
		int port, fd, err, done[2];
		pthread_t t;
		double t0, ms;
		ssize_t n;

		TBR_CHECK(pipe(done) == 0, "pipe: %s", strerror(errno));
		d.done = done[0];
		d.lfd = tbr_listen(&port);
		setsockopt(d.lfd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
		pthread_create(&t, NULL, tbr_drainer, &d);
		fd = client(port);
		t0 = tbt_now_ms();
		n = send(fd, data, sizeof(data), MSG_NOSIGNAL);
		err = errno;
		if (stalled && n >= 0 && n < (ssize_t)sizeof(data)) {
			/* cut after some bytes went: the short count, then the error */
			printf("peer reads nothing: send gave %zd, then ", n);
			n = send(fd, data, sizeof(data), MSG_NOSIGNAL);
			err = errno;
		}
		ms = tbt_now_ms() - t0;
		if (stalled) {
			printf("peer reads nothing: send gave %zd %s after %.0f ms\n", n,
			       n < 0 ? tbt_errno_name(err) : "", ms);
			TBR_CHECK(n < 0 && err == ETIMEDOUT, "a stalled upload returned %zd %s", n,
				  tbt_errno_name(err));
			TBR_CHECK(ms >= 300, "cut early: %.0f ms (limit 300)", ms);
			TBR_CHECK(ms < 2000, "cut late: %.0f ms (limit 300)", ms);
		} else {
			printf("peer reads %5d bytes every %3d ms: send gave %zd after %.0f ms%s%s\n",
			       d.step, d.pause_ms, n, ms, n < 0 ? ": " : "",
			       n < 0 ? tbt_errno_name(err) : "");
			cut += n != (ssize_t)sizeof(data);
		}
		close(fd);
		TBR_CHECK(write(done[1], "x", 1) == 1, "write: %s", strerror(errno));
		pthread_join(t, NULL);
		close(d.lfd);
		close(done[0]);
		close(done[1]);
	}
	TBR_CHECK(cut == 0, "%d healthy uploads of 128 KiB cut while the peer read steadily", cut);
	return 0;
}
