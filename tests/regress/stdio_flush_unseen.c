/* stdio_flush_unseen.c - a socket written through a FILE * (fprintf + fflush) waited unseen.
 *
 * What happened: glibc's stdio empties a FILE's buffer with its own internal write, which
 * no LD_PRELOAD hook sees, so a flush to a peer that stopped reading blocked for ever,
 * write timeout or not. The sequence: connect (write timeout 400 ms, SIGPIPE ignored as
 * network programs do); the peer never reads; the program writes 64 KiB lines with fprintf
 * and fflush until the socket buffers are full. The blocked flush must fail within the
 * limit with ETIMEDOUT and ferror set.
 */
#include <signal.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static char chunk[65536];
	int port, lfd, fd, peer, r = 0, i;
	double t0 = 0, ms;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=400ms", NULL);
	signal(SIGPIPE, SIG_IGN);
	tbr_hang_guard(15, "the flush to a peer that never reads never returned");
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	f = fdopen(fd, "w");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	memset(chunk, 'x', sizeof(chunk) - 2);
	chunk[sizeof(chunk) - 2] = '\n';
	/* Loopback buffers hold a few MiB at most: 512 chunks (32 MiB) must block. */
	for (i = 0; i < 512 && r >= 0; i++) {
		t0 = tbt_now_ms();
		errno = 0;
		r = fprintf(f, "%s", chunk);
		if (r >= 0)
			r = fflush(f) == 0 ? 0 : -1;
	}
	ms = tbt_now_ms() - t0;
	TBR_CHECK(r < 0 && errno == ETIMEDOUT, "write %d: r %d errno %s", i, r,
		  tbt_errno_name(errno));
	TBR_CHECK(ferror(f), "ferror not set");
	TBR_CHECK(ms >= 400 && ms < 2500, "cut after %.1f ms (limit 400)", ms);
	fclose(f);
	close(peer);
	close(lfd);
	return 0;
}
