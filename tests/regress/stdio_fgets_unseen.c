/* stdio_fgets_unseen.c - a socket read through a FILE * (fdopen + fgets) waited unseen.
 *
 * What happened: glibc's stdio fills a FILE's buffer with its own internal read, which no
 * LD_PRELOAD hook sees. A program that wraps its socket in a FILE (tnftp's control channel,
 * SMTP and NNTP clients, in-house line protocols) waited on a stalled peer for ever, read
 * timeout or not. The sequence: connect (read timeout 400 ms), fdopen(fd, "r"); the peer
 * sends two lines and stalls. fgets returns line 1; the program is busy 600 ms (longer than
 * the timeout: a slow program, not a slow peer); fgets must return line 2 from the buffer;
 * the next fgets must fail within the limit: NULL, ETIMEDOUT, ferror set, feof clear.
 */
#include <signal.h>

#include "regress.h"

int main(int argc, char **argv)
{
	char line[128];
	int port, lfd, fd, peer;
	double t0, ms;
	FILE *f;
	char *r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=400ms", NULL);
	tbr_hang_guard(8, "fgets on the stalled socket never returned");
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(write(peer, "one\r\ntwo\r\n", 10) == 10, "peer write");
	f = fdopen(fd, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));

	r = fgets(line, sizeof(line), f);
	TBR_CHECK(r != NULL && !strcmp(line, "one\r\n"), "first line: %s", r ? line : "NULL");
	tbt_sleep_ms(600);
	r = fgets(line, sizeof(line), f);
	TBR_CHECK(r != NULL && !strcmp(line, "two\r\n"), "buffered line cut: %s errno %s",
		  r ? line : "NULL", tbt_errno_name(errno));

	t0 = tbt_now_ms();
	errno = 0;
	r = fgets(line, sizeof(line), f);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(r == NULL && errno == ETIMEDOUT, "stalled fgets: %s errno %s",
		  r ? line : "NULL", tbt_errno_name(errno));
	TBR_CHECK(ferror(f) && !feof(f), "ferror %d feof %d", ferror(f), feof(f));
	TBR_CHECK(ms >= 400 && ms < 1500, "cut after %.1f ms (limit 400)", ms);
	/* The error stays: a later read fails at once, as a stream in error does. */
	TBR_CHECK(fgetc(f) == EOF && errno == ETIMEDOUT, "later fgetc errno %s",
		  tbt_errno_name(errno));
	fclose(f);
	close(peer);
	close(lfd);
	return 0;
}
