/* vfork_python.c - python's subprocess.run() must leave the parent's sockets governed.
 *
 * What happened: CPython >= 3.10 starts children with vfork and, in the child, closes every
 * fd >= 3 with close_range before exec. The child shares the parent's memory, so timebox's
 * close_range hook untracked the parent's sockets and handed back their gate slots. After
 * one subprocess.run(["true"]) the parent's stalled recv was never cut, and a second
 * connect passed a gate of one slot while the first connection was still open.
 * The sequence, in a real python3 under the library: connect (max_conns 1, read timeout
 * 500 ms) to a peer that never answers; subprocess.run(["true"]); a second connect must time
 * out at the gate; recv on the first must fail with ETIMEDOUT at 500 ms.
 */
#include <sys/wait.h>

#include "regress.h"

static const char script[] =
	"import errno, signal, socket, subprocess, sys, time\n"
	"if sys.version_info < (3, 10):\n"
	"    print('SKIP: python %d.%d does not vfork' % sys.version_info[:2]); sys.exit(77)\n"
	"signal.alarm(5)\n"
	"port = int(sys.argv[1])\n"
	"s = socket.create_connection(('127.0.0.1', port))\n"
	"subprocess.run(['true'], check=True)\n"
	"t = time.monotonic()\n"
	"try:\n"
	"    socket.create_connection(('127.0.0.1', port))\n"
	"    print('FAIL: a second connect passed a full gate of one slot'); sys.exit(1)\n"
	"except OSError as e:\n"
	"    if e.errno != errno.ETIMEDOUT:\n"
	"        print('FAIL: second connect: %r' % e); sys.exit(1)\n"
	"t = time.monotonic()\n"
	"try:\n"
	"    s.recv(1)\n"
	"    print('FAIL: recv returned'); sys.exit(1)\n"
	"except OSError as e:\n"
	"    took = (time.monotonic() - t) * 1000\n"
	"    if e.errno != errno.ETIMEDOUT or took < 500 or took > 2000:\n"
	"        print('FAIL: recv after %.0f ms: %r' % (took, e)); sys.exit(1)\n"
	"    print('recv cut after %.0f ms' % took)\n";

int main(int argc, char **argv)
{
	char portarg[16];
	int port, lfd, status;
	pid_t pid;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=500ms", "TIMEBOX_MAX_CONNS=1",
			 "TIMEBOX_ACQUIRE_TIMEOUT=200ms", NULL);
	if (access("/usr/bin/python3", X_OK) != 0)
		tbr_skip("no /usr/bin/python3");
	lfd = tbr_listen(&port); /* the kernel completes handshakes; nobody ever answers */
	snprintf(portarg, sizeof(portarg), "%d", port);
	pid = fork();
	if (pid == 0) {
		close(lfd);
		execl("/usr/bin/python3", "python3", "-c", script, portarg, (char *)NULL);
		_exit(127);
	}
	TBR_CHECK(pid > 0, "fork: %s", strerror(errno));
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	if (WIFEXITED(status) && WEXITSTATUS(status) == TBR_SKIP)
		tbr_skip("python3 older than 3.10 does not vfork");
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "python3 exited with status %#x (signal 14: the recv was never cut)", status);
	close(lfd);
	return 0;
}
