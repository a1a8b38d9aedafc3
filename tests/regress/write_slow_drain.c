/* write_slow_drain.c - a healthy slow upload was cut as a write stall.
 *
 * What happened: whether a blocked send made progress was judged by comparing samples of
 * its unsent queue (SIOCOUTQ). A sender blocked on a full buffer keeps the queue at the
 * same full level while the peer drains it steadily, so equal samples read as "nothing
 * moved". An 8 MB blocking send() to a peer draining ~1.3 MB/s (natively: completes) was
 * cut at write_timeout = 800 ms with about 1 MB sent.
 * The sequence: a peer with a small receive buffer reads 64 KB every 50 ms; the client
 * send()s 8 MB in one blocking call -> all 8 MB must be sent. Then a peer that reads
 * nothing: the send must still be cut (a short count, then ETIMEDOUT), never before 800 ms.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "regress.h"

#define TOTAL (8 << 20)

struct peer {
	int lfd;
	bool drain;
	atomic_int stop;
	long got;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	static char buf[64 << 10];
	int c = accept(p->lfd, NULL, NULL);

	TBR_CHECK(c >= 0, "accept: %s", strerror(errno));
	while (p->drain && !atomic_load(&p->stop) && p->got < TOTAL) {
		ssize_t r = recv(c, buf, sizeof(buf), 0);

		if (r <= 0)
			break;
		p->got += r;
		tbt_sleep_ms(50);
	}
	while (!atomic_load(&p->stop))
		tbt_sleep_ms(10);
	close(c);
	return NULL;
}

/* Sends 8 MB in one call to a peer that drains (or not). Returns the call's result. */
static ssize_t upload(bool drain, double *secs, int *err)
{
	static char data[TOTAL];
	struct peer p = { .drain = drain };
	int rcvbuf = 32 << 10, sndbuf = 64 << 10, port, fd;
	pthread_t t;
	double t0;
	ssize_t r;

	p.lfd = tbr_listen(&port);
	/* Set on the listener so the accepted socket starts small (the window follows). */
	setsockopt(p.lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	TBR_CHECK(pthread_create(&t, NULL, peer_main, &p) == 0, "pthread_create");
	fd = tbr_connect(port);
	/* A fixed send buffer (as many programs set): a blocked sender refills it to the same
	 * level after each drain, so the unsent queue looks constant while data flows. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	t0 = tbt_now_ms();
	r = send(fd, data, TOTAL, 0);
	*err = errno;
	/* A cut send that had moved some bytes returns their count; the next one says why. */
	if (r > 0 && r < TOTAL && send(fd, data, 1, MSG_NOSIGNAL) < 0) {
		*err = errno;
		r = -1;
	}
	*secs = (tbt_now_ms() - t0) / 1e3;
	atomic_store(&p.stop, 1);
	close(fd);
	pthread_join(t, NULL);
	close(p.lfd);
	return r;
}

int main(int argc, char **argv)
{
	double secs;
	int err;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=800ms", NULL);
	r = upload(true, &secs, &err);
	printf("draining peer: send returned %zd (%s) after %.2f s\n", r,
	       r < 0 ? tbt_errno_name(err) : "ok", secs);
	TBR_CHECK(r == TOTAL, "a steadily drained upload was cut: %zd %s after %.2f s", r,
		  tbt_errno_name(err), secs);
	r = upload(false, &secs, &err);
	printf("stalled peer: send returned %zd (%s) after %.2f s\n", r,
	       r < 0 ? tbt_errno_name(err) : "ok", secs);
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "a stalled upload returned %zd %s", r,
		  tbt_errno_name(err));
	TBR_CHECK(secs >= 0.8, "cut early: %.3f s", secs);
	TBR_CHECK(secs < 0.8 + 1.5, "cut late: %.3f s", secs);
	return 0;
}
