/* recv_waitall_drip.c - recv(MSG_WAITALL) on a steady stream was cut as silence.
 *
 * What happened: before cutting a read-side wait, timebox asked whether data was queued
 * (recv MSG_PEEK). Under MSG_WAITALL the kernel moves each arriving byte into the caller's
 * buffer at once, so nothing is ever queued, and no progress is seen until the buffer is
 * full. A peer sending 1 byte every 100 ms, read timeout 1 s, recv(30, MSG_WAITALL):
 * natively 30 bytes at ~3 s; under timebox cut at 1 s.
 * The sequence: the drip above -> 30 bytes. Then a peer that sends 5 bytes and stops:
 * the recv is cut (the 5 bytes, then ETIMEDOUT), never earlier than 1 s after the last byte.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>

#include "regress.h"

struct drip {
	int lfd;
	int count;
	double last_ms; /* when the last byte went out */
};

static void *drip_main(void *arg)
{
	struct drip *d = arg;
	int one = 1, c = accept(d->lfd, NULL, NULL);
	char buf[1];

	TBR_CHECK(c >= 0, "accept: %s", strerror(errno));
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (int i = 0; i < d->count; i++) {
		tbt_sleep_ms(100);
		if (send(c, "x", 1, MSG_NOSIGNAL) != 1)
			break; /* the client gave up */
		d->last_ms = tbt_now_ms();
	}
	/* Hold the connection open until the client is done with it. */
	(void)recv(c, buf, 1, 0);
	close(c);
	return NULL;
}

static ssize_t waitall(int count, double *took_ms, double *after_last_ms, int *err)
{
	struct drip d = { .count = count };
	char buf[30];
	pthread_t t;
	double t0;
	ssize_t r;
	int port, fd;

	d.lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, drip_main, &d) == 0, "pthread_create");
	fd = tbr_connect(port);
	t0 = tbt_now_ms();
	r = recv(fd, buf, sizeof(buf), MSG_WAITALL);
	*err = errno;
	*took_ms = tbt_now_ms() - t0;
	/* A cut recv that had bytes returns their count; the next one says why. */
	if (r > 0 && r < (ssize_t)sizeof(buf) && recv(fd, buf, 1, 0) < 0) {
		*err = errno;
		r = -1;
	}
	*after_last_ms = tbt_now_ms() - d.last_ms;
	close(fd);
	pthread_join(t, NULL);
	close(d.lfd);
	return r;
}

int main(int argc, char **argv)
{
	double took, after;
	int err;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	r = waitall(30, &took, &after, &err);
	printf("drip of 30 bytes: recv returned %zd (%s) after %.0f ms\n", r,
	       r < 0 ? tbt_errno_name(err) : "ok", took);
	TBR_CHECK(r == 30, "a steady stream was cut: %zd %s at %.0f ms", r, tbt_errno_name(err),
		  took);
	r = waitall(5, &took, &after, &err);
	printf("5 bytes then silence: recv returned %zd (%s) after %.0f ms, %.0f ms after "
	       "the last byte\n", r, r < 0 ? tbt_errno_name(err) : "ok", took, after);
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "a stalled stream returned %zd %s", r,
		  tbt_errno_name(err));
	TBR_CHECK(after >= 1000, "cut early: %.0f ms after the last byte", after);
	TBR_CHECK(after < 1000 + 1500, "cut late: %.0f ms after the last byte", after);
	return 0;
}
