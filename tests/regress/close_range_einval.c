/* close_range_einval.c - a close_range() that fails closes nothing, yet timebox let
 * the governed sockets of its range go.
 *
 * What happens: close_range(lo, hi, flags) detaches every governed fd of the range from the
 * fd table and drops its socket (shim/hooks_fd.c close_span) whatever the real call
 * answers. When the kernel refuses the call (EINVAL: a flag it does not know, as a program
 * probing for a newer flag falls back on; ENOMEM under CLOSE_RANGE_UNSHARE), nothing is
 * closed: the fds stay open and in use, but timebox no longer governs them - their socket
 * went back to the pool, its gate slot was given back while the connection lives (max_conns
 * exceeded), and a wait on it has no limit any more. dup2/dup3 over a governed fd already
 * track the fd again when the real call fails; close_range did not.
 *
 * The sequence: read_timeout 300 ms; a governed connection to a silent peer;
 * close_range(fd, fd, 1u << 30) fails with EINVAL (natively too, and the fd stays open);
 * then recv() on the fd must fail with ETIMEDOUT about 300 ms later, as it did before the
 * call. It blocked (the guard ends it after 3 s).
 */
#include <fcntl.h>

#include "regress.h"

int main(int argc, char **argv)
{
	int port, lfd, fd, r, err;
	char c;
	double t0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	lfd = tbr_listen(&port);
	fd = tbr_connect(port); /* governed; the peer never answers */
	errno = 0;
	r = close_range((unsigned)fd, (unsigned)fd, 1u << 30);
	TBR_CHECK(r < 0 && errno == EINVAL, "close_range with an unknown flag: %d (%s)", r,
		  strerror(errno));
	TBR_CHECK(fcntl(fd, F_GETFD) >= 0, "fd %d closed by a failed close_range", fd);
	tbr_hang_guard(3, "recv() on a governed socket blocked past read_timeout after a "
			  "close_range() that failed (the socket is no longer governed)");
	t0 = tbt_now_ms();
	r = (int)recv(fd, &c, 1, 0);
	err = errno;
	alarm(0);
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "recv: %d (%s) after %.0f ms", r, strerror(err),
		  tbt_now_ms() - t0);
	printf("recv timed out after %.0f ms: the socket is still governed\n", tbt_now_ms() - t0);
	close(fd);
	close(lfd);
	return 0;
}
