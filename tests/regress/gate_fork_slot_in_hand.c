/* gate_fork_slot_in_hand.c - a child forked while another thread held a gate slot no socket
 * owned yet waited at its gate in every connect, then failed.
 *
 * What happened: connect takes its gate slot first, then makes the socket's entry and
 * records the slot in it (tb_sock_hold_slot); only a socket's close gives a slot back. The
 * child of a fork copies the gate's count of leased slots - its queue was emptied, the
 * waiting threads being gone - and the sockets: a slot taken by a thread between the two
 * steps, which does not exist in the child, was counted there with no socket to give it
 * back (and no stale socket for the full gate's sweep to find). With max_conns = 1 every
 * connect of the child to that destination waited acquire_timeout at the gate and failed
 * with ETIMEDOUT (phase=gate), for the child's whole life. A multi-threaded program that
 * forks a worker while one of its threads connects is that case. Now the child counts its
 * gates' slots again from the sockets that hold them (tb_sock_slots_fork_child).
 * The sequence (max_conns 1, acquire_timeout 1 s), with a second preload (delaylib.h)
 * holding the connecting thread 500 ms right after the gate gave it its slot, where a
 * preemption would: the main thread holds the slot; thread T connects and waits at the
 * gate; the main thread closes its socket, which hands the slot to T; while T is held, the
 * program forks. The child connects to the same destination: it must get the slot at once.
 */
#include <sys/wait.h>

#include "gate_regress.h"
#include "delaylib.h"

/* The gate's wait is timebox's one futex wait (futex.h), made through syscall(). */
static const char delay_c[] = TBR_DELAY_HEAD
	"#include <linux/futex.h>\n"
	"static int held;\n"
	TBR_DELAY_SYSCALL("n == SYS_futex && (a[1] & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET && "
			  "*(unsigned *)a[0] != 0 && named(\"tbr-conn\") && !held++");

static int port;
static struct tbg_connecter t; /* thread T */

int main(int argc, char **argv)
{
	const char *mark;
	int lfd, fd, err, status;
	double ms;
	pid_t pid;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		tbr_mark_name("/tmp/tbr-gate-fork-hand-");
		tbr_add_preload(delay_c);
	}
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=1s", NULL);
	tbr_remove_built();
	mark = tbr_mark_path();
	tbr_hang_guard(10, "the story hung");
	lfd = tbr_listen(&port);
	fd = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd >= 0, "connect: %s", tbt_errno_name(err));
	tbg_connecter_start(&t, port, "tbr-conn");
	TBR_CHECK(tbr_wait_sleeping(&t.tid, 5000), "thread T never waited at the gate");
	close(fd); /* the slot passes to T */
	TBR_CHECK(tbr_mark_wait(mark, 5000), "thread T was never handed the slot");
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		fd = tbg_connect(port, &err, &ms);
		if (fd < 0 || ms >= 500) {
			fprintf(stderr, "FAIL: child: connect with no socket of its own open: fd %d "
				"%s after %.0f ms (want a slot at once)\n", fd,
				tbt_errno_name(err), ms);
			_exit(1);
		}
		printf("child: connected in %.0f ms\n", ms);
		fflush(stdout);
		_exit(0);
	}
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	pthread_join(t.t, NULL);
	TBR_CHECK(t.fd >= 0, "thread T: connect: %s", tbt_errno_name(t.err));
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
	printf("parent: thread T connected after %.0f ms at the gate\n", t.ms);
	close(lfd);
	return 0;
}
