/* writev_nothing.c - a writev of no bytes on a governed socket whose sending side was shut
 * down killed the program with SIGPIPE.
 *
 * What happened: timebox makes a writev on a governed socket as a sendmsg, tried without
 * blocking first. Natively a writev whose pieces hold no byte (none at all, or all empty)
 * returns 0 before the socket is asked (the kernel's vfs_writev); a sendmsg has no such
 * shortcut and meets the socket's state: after shutdown(SHUT_WR) it failed with EPIPE,
 * and timebox raised the SIGPIPE the program's writev would have raised for it - which,
 * left at its default, ended the program (exit 141), where natively writev returned 0.
 * A writev with no piece now goes to libc as it is, and one whose pieces are all empty
 * returns 0 when the socket refused it.
 * The sequence: a connected socket, shutdown(SHUT_WR), SIGPIPE at its default;
 * writev(fd, NULL, 0) and writev(fd, {len 0}, 1) must each return 0.
 */
#include <sys/uio.h>

#include "regress.h"

int main(int argc, char **argv)
{
	struct iovec empty = { .iov_base = (void *)"x", .iov_len = 0 };
	int port, lfd, c, p;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=2s", NULL);
	signal(SIGPIPE, SIG_DFL);
	lfd = tbr_listen(&port);
	c = tbr_connect(port);
	p = accept(lfd, NULL, NULL);
	TBR_CHECK(p >= 0 && shutdown(c, SHUT_WR) == 0, "setup: %s", strerror(errno));
	errno = 0;
	r = writev(c, NULL, 0);
	TBR_CHECK(r == 0, "writev of no piece returned %zd (%s), want 0", r, strerror(errno));
	r = writev(c, &empty, 1);
	TBR_CHECK(r == 0, "writev of one empty piece returned %zd (%s), want 0", r,
		  strerror(errno));
	printf("writev of nothing after shutdown(SHUT_WR) returned 0, as natively\n");
	return 0;
}
