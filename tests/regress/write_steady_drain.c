/* write_steady_drain.c - a blocked send to a peer that drains steadily must never be cut
 * by write_timeout.
 *
 * What happens: while a send is blocked, the watchdog looks at the unsent queue (SIOCOUTQ)
 * every write_timeout/8 and counts the stall from the queue's last *change of level*. A
 * writer with a small send buffer, feeding a peer that reads 4 KiB every few milliseconds,
 * refills the queue as fast as the peer takes it: the level is the same at most looks
 * although bytes flow all the time, and when it is the same at every look for a
 * write_timeout the upload is cut (`event=timeout phase=write`) in the middle of a
 * healthy transfer. The design asks for progress from what the kernel really moved (bytes
 * acknowledged, TCP_INFO), not from a queue level that stays constant under a steady drain.
 * Found by make stress: about 1 slow upload in 1,000 was cut with the server's longest
 * pause between reads at 4 ms for a write_timeout of 563 ms.
 * The sequence: TIMEBOX_WRITE_TIMEOUT=300ms; SO_SNDBUF 8 KiB on the client, SO_RCVBUF
 * 16 KiB on the peer; the peer reads `step` bytes every `pause` ms; the client sends 1 MiB
 * in one blocking send; repeated over a few drain rates. Any ETIMEDOUT is the defect.
 *
 * The fix: a blocked send's progress is the peer's acknowledged bytes (TCP_INFO's
 * tcpi_bytes_acked), which grow while the queue's level stays the same (write_slow_drain.c
 * tells the same story for one large send).
 */
#include <pthread.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static const int steps[][2] = { { 4096, 2 }, { 4096, 5 }, { 8192, 5 }, { 16384, 10 },
					{ 4096, 10 }, { 1024, 1 } };
	static char data[1 << 20];
	int cut = 0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=300ms", NULL);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct tbr_drain d = { .step = steps[i][0], .pause_ms = steps[i][1] };
		int port, rcv = 16384, snd = 8192, fd;
		pthread_t t;
		double t0;
		ssize_t n;

		d.lfd = tbr_listen(&port);
		setsockopt(d.lfd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
		pthread_create(&t, NULL, tbr_drainer, &d);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd));
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		TBR_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s",
			  strerror(errno));
		t0 = tbt_now_ms();
		n = send(fd, data, sizeof(data), MSG_NOSIGNAL);
		printf("peer reads %5d bytes every %2d ms: send gave %zd after %.0f ms%s%s\n",
		       d.step, d.pause_ms, n, tbt_now_ms() - t0, n < 0 ? ": " : "",
		       n < 0 ? strerror(errno) : "");
		cut += n != (ssize_t)sizeof(data);
		close(fd);
		pthread_join(t, NULL);
		close(d.lfd);
	}
	TBR_CHECK(cut == 0, "%d healthy uploads of 1 MiB cut while the peer drained", cut);
	return 0;
}
