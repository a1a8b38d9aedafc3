/* stdio_fgets_eagain_errno.c - fgets on a non-blocking socket FILE that returned a partial
 * line hid the EAGAIN that ended it.
 *
 * What happened: on a non-blocking socket, glibc's fgets that has read part of a line when
 * the next read fails with EAGAIN returns the part, and leaves errno EAGAIN and the
 * stream's error flag set: the only way the program can tell the line is incomplete and
 * wait for the rest (a line without its newline may also be the last one, before EOF).
 * The governed fgets put back the errno from before the call whenever it returned a line,
 * so the program saw a partial line with errno untouched - a last line, by that sign.
 * errno now stays as the reads left it, as in glibc, and a complete line leaves it as it
 * was.
 * The sequence: a non-blocking socket; the peer sends "abc" and stays open; once it is
 * readable, fgets must return "abc" with errno EAGAIN and the error flag set; after
 * clearerr, the peer sends "def\n", and fgets returns it with errno untouched.
 */
#include <poll.h>

#include "regress.h"

/* Until fd is readable (5 s at most). */
static void readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	TBR_CHECK(poll(&p, 1, 5000) == 1, "the peer's bytes never arrived");
}

int main(int argc, char **argv)
{
	int lfd, port, sock, peer;
	char buf[64], *got;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=2s", NULL);
	tbr_hang_guard(15, "an fgets on a non-blocking socket never returned");
	lfd = tbr_listen(&port);
	sock = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	fcntl(sock, F_SETFL, O_NONBLOCK);
	f = fdopen(sock, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));

	TBR_CHECK(write(peer, "abc", 3) == 3, "write: %s", strerror(errno));
	readable(sock);
	errno = 0;
	got = fgets(buf, sizeof(buf), f);
	TBR_CHECK(got != NULL && strcmp(buf, "abc") == 0, "fgets returned %s",
		  got != NULL ? buf : "NULL");
	TBR_CHECK(errno == EAGAIN, "the partial line's errno is %s, natively EAGAIN",
		  tbt_errno_name(errno));
	TBR_CHECK(ferror(f), "the error flag is clear");

	clearerr(f);
	TBR_CHECK(write(peer, "def\n", 4) == 4, "write: %s", strerror(errno));
	readable(sock);
	errno = EINTR; /* a marker: a complete line leaves errno as it was */
	got = fgets(buf, sizeof(buf), f);
	TBR_CHECK(got != NULL && strcmp(buf, "def\n") == 0, "fgets returned %s",
		  got != NULL ? buf : "NULL");
	TBR_CHECK(errno == EINTR, "a complete line left errno %s", tbt_errno_name(errno));
	TBR_CHECK(!ferror(f), "the error flag is set");
	fclose(f);
	close(peer);
	close(lfd);
	return 0;
}
