/* tls_flight_deadline.c - each TLS handshake flight restarted the deadline.
 *
 * What happened: a send after response bytes was taken for the next call (the system-call
 * rule), so the client's second handshake flight, sent after reading the server's first,
 * opened a new call with a fresh deadline. `curl https` with a 1 s deadline against a server
 * 700 ms late on every flight was cut at 1,714 ms (TLS 1.3), or not at all (TLS 1.2: three
 * flights of 700 ms each, each under a fresh second). The sequence, with TIMEBOX_DEADLINE=1s
 * and the TLS record layer only (nothing inside a record is looked at): connect; send a
 * ClientHello record; the server answers a handshake record after 700 ms; send the
 * client's second flight (ChangeCipherSpec + a handshake record); the server answers after
 * another 700 ms. The connect, the handshake and the first request are one call: the second
 * read must fail with ETIMEDOUT at the deadline, 1 s after the connect (never earlier), not
 * at 1.4 s with the server's flight.
 */
#include <pthread.h>
#include <time.h>

#include "regress.h"

static int lfd;

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A TLS record: type, version 03 03, length, and `len` body bytes. */
static size_t record(unsigned char *out, unsigned char type, size_t len)
{
	out[0] = type;
	out[1] = 3;
	out[2] = 3;
	out[3] = (unsigned char)(len >> 8);
	out[4] = (unsigned char)len;
	memset(out + 5, 0x42, len);
	return 5 + len;
}

/* The server: reads each client flight, answers it 700 ms later with a handshake record. */
static void *server(void *arg)
{
	unsigned char buf[4096], rec[512];
	int c = accept(lfd, NULL, NULL);

	(void)arg;
	for (int flight = 0; flight < 2 && c >= 0; flight++) {
		size_t n = record(rec, 22, 100);

		if (recv(c, buf, sizeof(buf), 0) <= 0)
			break;
		sleep_ms(700);
		if (send(c, rec, n, MSG_NOSIGNAL) != (ssize_t)n)
			break;
	}
	sleep_ms(2000);
	if (c >= 0)
		close(c);
	return NULL;
}

/* Reads one 105-byte record; returns what the last read returned. */
static ssize_t read_record(int fd)
{
	unsigned char buf[105];
	size_t got = 0;
	ssize_t r = 1;

	while (got < sizeof(buf) && (r = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)r;
	return r;
}

int main(int argc, char **argv)
{
	unsigned char out[1024];
	pthread_t t;
	double t0, el;
	size_t n;
	ssize_t r;
	int port, fd;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=1s", "TIMEBOX_LOG=off", NULL);
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, server, NULL) == 0, "pthread_create");
	t0 = tbt_now_ms();
	fd = tbr_connect(port);
	n = record(out, 22, 200); /* ClientHello */
	TBR_CHECK(write(fd, out, n) == (ssize_t)n, "ClientHello: %s", strerror(errno));
	r = read_record(fd);
	TBR_CHECK(r > 0, "the server's first flight: %zd %s", r, strerror(errno));
	n = record(out, 20, 1);            /* ChangeCipherSpec */
	n += record(out + n, 22, 40);      /* Finished */
	TBR_CHECK(write(fd, out, n) == (ssize_t)n, "second flight: %s", strerror(errno));
	errno = 0;
	r = read_record(fd);
	el = tbt_now_ms() - t0;
	TBR_CHECK(r == -1 && errno == ETIMEDOUT,
		  "the server's second flight, 1.4 s after the connect, was read (%zd, %s, "
		  "%.0f ms): the second flight restarted the deadline", r, strerror(errno), el);
	TBR_CHECK(el >= 1000 && el < 1000 + 350, "cut after %.0f ms, want the 1 s deadline",
		  el);
	close(fd);
	return 0;
}
