/* gate_fork_closing.c - a child forked while another thread closed a connection found the
 * gate full: every connect of the child to that destination waited, then failed.
 *
 * What happened: a close takes the fd out of timebox's table, closes it in the kernel, and
 * only then gives the socket's gate slot back (tb_sock_unref). The child of a fork counts
 * its gates' slots again from the sockets that hold one (gate_fork_slot_in_hand): a socket
 * whose close was under way in another thread at the fork still held its slot, so it was
 * counted - but that thread does not exist in the child, and no fd of the child names the
 * socket, so nothing there ever gave the slot back. With max_conns = 1 every connect of the
 * child to that destination waited acquire_timeout at the gate and failed with ETIMEDOUT
 * (phase=gate), for the child's whole life, though it had no connection open. A pre-fork
 * server whose threads close connections while it forks workers is that case. Now a socket
 * counts in the child only while one of the child's fds names it.
 * The sequence (max_conns 1, acquire_timeout 1 s), with a second preload (delaylib.h)
 * holding the closing thread 500 ms right after the kernel's close, where a preemption
 * would: thread T connects and closes; while it is held, the program forks. The child
 * connects to the same destination: it must get the slot at once. (Natively there is no
 * gate: every connect succeeds at once.)
 */
#include "gate_regress.h"
#include "delaylib.h"

/* The program's socket is below 512 (timebox's own fds are at 512 or above, real.h). */
static const char delay_c[] = TBR_DELAY_HEAD
	"static int held;\n"
	"int close(int fd)\n"
	"{\n"
	"	static int (*real)(int);\n"
	"	struct timespec t = { 0, 500 * 1000000L };\n"
	"	struct stat st;\n"
	"	const char *mark;\n"
	"	int sock, r;\n"
	"	if (!real)\n"
	"		real = (int (*)(int))dlsym(RTLD_NEXT, \"close\");\n"
	"	sock = fd > 2 && fd < 512 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);\n"
	"	r = real(fd);\n"
	"	if (sock && named(\"tbr-close\") && !held++) {\n"
	"		if ((mark = getenv(\"TBR_MARK\")) != 0)\n"
	"			real(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));\n"
	"		nanosleep(&t, 0);\n"
	"	}\n"
	"	return r;\n"
	"}\n";

static struct tbg_connecter t = { .close_after = true }; /* thread T */

int main(int argc, char **argv)
{
	int lfd, fd, err, port;
	const char *mark;
	double ms;
	pid_t pid;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		tbr_mark_name("/tmp/tbr-gate-fork-closing-local-");
		tbr_add_preload(delay_c);
	}
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=1s", NULL);
	tbr_remove_built();
	mark = tbr_mark_path();
	tbr_hang_guard(20, "the story hung");
	lfd = tbr_listen(&port);
	tbg_connecter_start(&t, port, "tbr-close");
	TBR_CHECK(tbr_mark_wait(mark, 5000), "thread T never closed its socket (connect: %s)",
		  tbt_errno_name(t.err));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		fd = tbg_connect(port, &err, &ms);
		if (fd < 0 || ms >= 500) {
			fprintf(stderr, "FAIL: child: connect with no connection of its own open: "
				"fd %d %s after %.0f ms (want a slot at once)\n", fd,
				tbt_errno_name(err), ms);
			_exit(1);
		}
		printf("child: connected in %.0f ms\n", ms);
		fflush(stdout);
		_exit(0);
	}
	pthread_join(t.t, NULL);
	TBR_CHECK(tbg_wait(pid) == 0, "the child failed");
	fd = tbg_connect(port, &err, &ms); /* the parent's slot came back with T's close */
	TBR_CHECK(fd >= 0 && ms < 500, "parent: connect after T's close: fd %d %s after %.0f ms",
		  fd, tbt_errno_name(err), ms);
	printf("parent: connected again in %.0f ms\n", ms);
	close(fd);
	close(lfd);
	return 0;
}
