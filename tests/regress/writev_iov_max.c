/* writev_iov_max.c - writev with more than IOV_MAX entries on a governed socket.
 *
 * What happened: the governed writev is made as sendmsg(MSG_NOSIGNAL) (to keep a cut from
 * raising SIGPIPE), and sendmsg refuses msg_iovlen > IOV_MAX with EMSGSIZE, where writev
 * itself says EINVAL. A program that checks for EINVAL (and retries with fewer buffers)
 * saw an errno it never gets natively. The sequence: connect to a listener with a read
 * timeout set, writev(fd, iov, IOV_MAX + 1) -> must be -1 EINVAL, as without timebox.
 */
#include <limits.h>
#include <sys/uio.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static struct iovec iov[IOV_MAX + 1];
	char byte = 'x';
	int port, lfd, fd;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	for (int i = 0; i <= IOV_MAX; i++) {
		iov[i].iov_base = &byte;
		iov[i].iov_len = 1;
	}
	errno = 0;
	r = writev(fd, iov, IOV_MAX + 1);
	TBR_CHECK(r == -1 && errno == EINVAL, "writev(IOV_MAX + 1) returned %zd errno %s",
		  r, tbt_errno_name(errno));
	/* And the ordinary case still works. */
	r = writev(fd, iov, 4);
	TBR_CHECK(r == 4, "writev(4) returned %zd errno %s", r, tbt_errno_name(errno));
	close(fd);
	close(lfd);
	return 0;
}
