/* eagain_spin.c - with on_timeout = eagain a cut socket ends the program's loop instead of
 * spinning it.
 *
 * What happened: every call on a cut socket said EAGAIN. A non-blocking client (curl,
 * psql, mariadb, wget, openssl, ruby) takes EAGAIN for "nothing yet" and polls again; the
 * shut-down socket is always readable, so it looped at 100 % CPU forever. Now only the
 * first report of the expiry on a socket is EAGAIN (what a program with SO_RCVTIMEO
 * expects); every later call on it fails with ETIMEDOUT.
 * The sequence: read_timeout 250ms, on_timeout eagain, a server that never answers.
 * (a) non-blocking, curl's loop: poll(POLLIN, 1000) then recv until something else than
 *     EAGAIN -> one EAGAIN, then ETIMEDOUT, no earlier than 250 ms, a handful of turns.
 * (b) blocking: read -> EAGAIN (>= 250 ms); read again -> ETIMEDOUT at once; write too.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>

#include "regress.h"

static int lfd;

static void *silent_server(void *arg)
{
	(void)arg;
	for (;;)
		if (accept(lfd, NULL, NULL) < 0)
			return NULL;
}

int main(int argc, char **argv)
{
	char buf[64];
	pthread_t t;
	int port, fd, eagains = 0, turns = 0, err;
	double t0, ms;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=250ms", "TIMEBOX_ON_TIMEOUT=eagain", NULL);
	alarm(20); /* a spinning loop fails the program rather than hang it */
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, silent_server, NULL);

	/* (a) curl's loop */
	fd = tbr_connect(port);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	TBR_CHECK(send(fd, "GET\n", 4, 0) == 4, "send: %s", tbt_errno_name(errno));
	t0 = tbt_now_ms();
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		turns++;
		TBR_CHECK(turns < 1000, "still looping after %d turns, %d EAGAIN", turns, eagains);
		if (poll(&p, 1, 1000) == 0)
			continue;
		r = recv(fd, buf, sizeof(buf), 0);
		err = errno;
		if (r < 0 && err == EAGAIN) {
			eagains++;
			continue;
		}
		break;
	}
	ms = tbt_now_ms() - t0;
	fprintf(stderr, "(a) recv %zd %s after %.0f ms, %d turns, %d EAGAIN\n", r,
		tbt_errno_name(r < 0 ? err : 0), ms, turns, eagains);
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "the loop ended with %zd %s", r,
		  tbt_errno_name(err));
	TBR_CHECK(eagains == 1, "%d EAGAIN reports, expected one", eagains);
	TBR_CHECK(ms >= 250 && ms < 250 + 1500, "ended after %.0f ms", ms);
	close(fd);

	/* (b) a blocking reader that expects SO_RCVTIMEO */
	fd = tbr_connect(port);
	TBR_CHECK(write(fd, "GET\n", 4) == 4, "write: %s", tbt_errno_name(errno));
	t0 = tbt_now_ms();
	r = read(fd, buf, sizeof(buf));
	err = errno;
	ms = tbt_now_ms() - t0;
	fprintf(stderr, "(b) read %zd %s after %.0f ms\n", r, tbt_errno_name(err), ms);
	TBR_CHECK(r == -1 && err == EAGAIN, "first read: %zd %s", r, tbt_errno_name(err));
	TBR_CHECK(ms >= 250, "cut after %.0f ms", ms);
	r = read(fd, buf, sizeof(buf));
	err = errno;
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "second read: %zd %s", r, tbt_errno_name(err));
	r = write(fd, "x", 1);
	err = errno;
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "write after: %zd %s", r, tbt_errno_name(err));
	close(fd);
	return 0;
}
