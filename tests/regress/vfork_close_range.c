/* vfork_close_range.c - a vfork child's close_range must not untrack the parent's sockets.
 *
 * What happened: a vfork child shares its parent's memory. CPython >= 3.10's
 * subprocess.run() (and JDK's VFORK launch mechanism) vforks and calls close_range(3, ~0U, 0)
 * in the child before exec. timebox's close_range hook ran its bookkeeping there, on the
 * parent's fd table, socket pool and gates: the parent's governed socket was untracked and
 * its gate slot given back while the connection stayed open. The parent's stalled read was
 * never cut again, and a second connect passed a gate of one slot.
 * The sequence: connect (max_conns 1, read timeout 500 ms) to a peer that never answers;
 * vfork, the child calls close_range(3, ~0U, 0) and _exits; a second connect must wait at
 * the gate and time out; the first socket's read must still be cut at 500 ms. Then the same
 * with posix_spawn (which clones the same way), whose child closes every fd >= 3.
 */
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "regress.h"

extern char **environ;

/* A second connect to the same destination: the gate (one slot) is held by the first. */
static void check_gate_full(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	double t0 = tbt_now_ms();
	int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	int err = errno;

	TBR_CHECK(r == -1 && err == ETIMEDOUT,
		  "a second connect passed a full gate of one slot (r=%d errno %s)", r,
		  tbt_errno_name(err));
	TBR_CHECK(tbt_now_ms() - t0 >= 200, "the gate wait ended early (%.0f ms)",
		  tbt_now_ms() - t0);
	close(fd);
}

/* The stalled read must be cut at its read timeout: never early, well before 5 s. */
static void check_read_cut(int fd)
{
	char c;
	double t0 = tbt_now_ms(), took;
	ssize_t r;

	tbr_hang_guard(5, "the read was never cut (blocked 5 s)");
	r = read(fd, &c, 1);
	alarm(0);
	took = tbt_now_ms() - t0;
	TBR_CHECK(r == -1 && errno == ETIMEDOUT, "read returned %zd errno %s", r,
		  tbt_errno_name(errno));
	TBR_CHECK(took >= 500 && took < 2000, "cut after %.0f ms (limit 500 ms)", took);
	fprintf(stderr, "read cut after %.0f ms\n", took);
}

int main(int argc, char **argv)
{
	posix_spawn_file_actions_t fa;
	static char true_name[] = "true";
	char *true_argv[] = { true_name, NULL };
	int port, lfd, fd, status;
	pid_t pid;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=500ms", "TIMEBOX_MAX_CONNS=1",
			 "TIMEBOX_ACQUIRE_TIMEOUT=200ms", NULL);
	lfd = tbr_listen(&port); /* the kernel completes handshakes; nobody ever answers */

	fd = tbr_connect(port);
	pid = vfork();
	if (pid == 0) {
		close_range(3, ~0U, 0);
		_exit(0);
	}
	TBR_CHECK(pid > 0, "vfork: %s", strerror(errno));
	TBR_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status), "vfork child");
	check_gate_full(port);
	check_read_cut(fd);
	close(fd);

	fd = tbr_connect(port);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	TBR_CHECK(posix_spawnp(&pid, "true", &fa, NULL, true_argv, environ) == 0,
		  "posix_spawnp true");
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "posix_spawn child");
	posix_spawn_file_actions_destroy(&fa);
	check_gate_full(port);
	check_read_cut(fd);
	close(fd);
	close(lfd);
	return 0;
}
