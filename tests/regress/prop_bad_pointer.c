/* prop_bad_pointer.c - a send with a bad pointer on a propagating socket killed the
 * program with SIGSEGV, where natively the call fails with EFAULT.
 *
 * What happened: with TIMEBOX_PROPAGATE=1, write, send, writev, sendto and sendmsg on a
 * governed socket go through the planner (prop_io.c tb_pout_send), which reads the
 * program's iovec array (to sum its lengths) and its bytes (to find the request line)
 * before any system call has looked at them. The plain send paths leave that to the kernel,
 * which fails a bad buffer or iovec array with EFAULT (hooks_io.c: "a program's bad pointer
 * is its EFAULT"). The sequence: TIMEBOX_PROPAGATE=1, TIMEBOX_DEADLINE=5s; in a child per
 * case, a governed connection, then write(fd, NULL, 10), writev(fd, NULL, 1), sendmsg with
 * msg_iov NULL and msg_iovlen 1, writev with one iovec {NULL, 10}, send(fd, NULL, 10) ->
 * each child died of SIGSEGV, where natively each call returns -1 EFAULT. Now a NULL array
 * or a NULL buffer with bytes takes the plain path, whose kernel call says EFAULT. (A
 * non-NULL bad address is still read by the planner: checking it costs a system call.)
 */
#include <sys/uio.h>
#include <sys/wait.h>

#include "regress.h"

static int port;

static void one(int k)
{
	struct iovec bad = { NULL, 10 };
	struct msghdr m = { 0 };
	void *volatile nil = NULL; /* hidden from the compiler's own checks */
	int fd = tbr_connect(port);
	ssize_t r = 0;

	errno = 0;
	switch (k) {
	case 0: r = write(fd, nil, 10); break;
	case 1: r = writev(fd, nil, 1); break;
	case 2: m.msg_iovlen = 1; r = sendmsg(fd, &m, 0); break;
	case 3: r = writev(fd, &bad, 1); break;
	case 4: r = send(fd, nil, 10, 0); break;
	}
	TBR_CHECK(r == -1 && errno == EFAULT, "case %d: %zd (%s), not -1 EFAULT", k, r,
		  strerror(errno));
	_exit(0);
}

int main(int argc, char **argv)
{
	static const char *const what[] = {
		"write(fd, NULL, 10)", "writev(fd, NULL, 1)", "sendmsg, msg_iov NULL",
		"writev, {NULL, 10}", "send(fd, NULL, 10)",
	};
	int bad = 0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_PROPAGATE=1", "TIMEBOX_DEADLINE=5s", NULL);
	tbr_listen(&port);
	for (int k = 0; k < 5; k++) {
		pid_t p = fork();
		int st;

		TBR_CHECK(p >= 0, "fork: %s", strerror(errno));
		if (p == 0)
			one(k);
		TBR_CHECK(waitpid(p, &st, 0) == p, "waitpid");
		if (WIFSIGNALED(st)) {
			fprintf(stderr, "%s: killed by signal %d\n", what[k], WTERMSIG(st));
			bad++;
		} else if (WEXITSTATUS(st) != 0) {
			bad++;
		} else {
			printf("%s: -1 EFAULT, as natively\n", what[k]);
		}
	}
	TBR_CHECK(bad == 0, "%d of 5 bad-pointer sends did not fail with EFAULT", bad);
	return 0;
}
