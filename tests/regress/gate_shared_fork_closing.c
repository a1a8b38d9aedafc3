/* gate_shared_fork_closing.c - a child forked while another thread closed a connection kept
 * that connection's shared gate slot locked.
 *
 * What happened: a close takes a shared gate's slot from its socket (has_slot), then closes
 * the description whose lock is the slot. A child forked between the two steps inherited
 * that description with no socket of its own holding it: nothing in the child ever closed
 * it, and the slot stayed locked for every process sharing the gate until the child exited
 * or exec'd. With max_conns = 1 the parent's next connect waited acquire_timeout and failed
 * with ETIMEDOUT (phase=gate) while its worker lived, though no connection was left open
 * anywhere. Now the close counts the slot in hand until it is closed, and the child closes
 * every inherited slot description no socket of its own holds (gate_shared_fork_waiter
 * tells the connect side).
 * The sequence (TIMEBOX_GATE_SHARED=1, max_conns 1, acquire_timeout 1 s), with a second
 * preload (delaylib.h) holding the closing thread 500 ms just before the slot's description
 * is closed, where a preemption would: thread T connects and closes; while it is held, the
 * program forks a worker that stays alive (it closes the program's fds it does not use);
 * once T's close returned, the parent connects again: it must get the slot at once.
 */
#include "gate_regress.h"
#include "delaylib.h"

/* The slot's description is timebox's own fd, at 512 or above (real.h). */
static const char delay_c[] = TBR_DELAY_HEAD
	"static int held;\n"
	"int close(int fd)\n"
	"{\n"
	"	static int (*real)(int);\n"
	"	struct timespec t = { 0, 500 * 1000000L };\n"
	"	const char *mark;\n"
	"	if (!real)\n"
	"		real = (int (*)(int))dlsym(RTLD_NEXT, \"close\");\n"
	"	if (fd >= 512 && named(\"tbr-close\") && !held++) {\n"
	"		if ((mark = getenv(\"TBR_MARK\")) != 0)\n"
	"			real(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));\n"
	"		nanosleep(&t, 0);\n"
	"	}\n"
	"	return real(fd);\n"
	"}\n";

static struct tbg_connecter t = { .close_after = true }; /* thread T */

/* The worker: closes the fds of the program's it has no use for (the listener, the
 * parent's ends of the pipes), says so, and lives until the parent closes its pipe. T's
 * socket is not among them: its close was made before the fork. */
static void worker(int lfd, const int up[2], const int down[2])
{
	char c;

	close(lfd);
	close(up[0]);
	close(down[1]);
	TBR_CHECK(write(up[1], "r", 1) == 1, "child: write: %s", strerror(errno));
	close(up[1]);
	while (read(down[0], &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

int main(int argc, char **argv)
{
	static char xdg_env[128];
	int lfd, fd, err, port, up[2], down[2];
	const char *mark;
	double ms;
	char c;
	pid_t pid;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		tbr_mark_name("/tmp/tbr-gate-fork-closing-");
		snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
		tbr_add_preload(delay_c);
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
				 "TIMEBOX_ACQUIRE_TIMEOUT=1s", xdg_env, NULL);
	}
	tbr_remove_built();
	mark = tbr_mark_path();
	tbr_hang_guard(20, "the story hung");
	lfd = tbr_listen(&port);
	tbg_connecter_start(&t, port, "tbr-close");
	TBR_CHECK(tbr_mark_wait(mark, 5000), "thread T never closed its slot (connect: %s)",
		  tbt_errno_name(t.err));
	TBR_CHECK(pipe(up) == 0 && pipe(down) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		worker(lfd, up, down);
	close(up[1]);
	close(down[0]);
	TBR_CHECK(read(up[0], &c, 1) == 1, "the child never said it was ready");
	pthread_join(t.t, NULL); /* T's close is done: no connection is open anywhere */
	fd = tbg_connect(port, &err, &ms);
	close(down[1]); /* the worker may go */
	TBR_CHECK(tbg_wait(pid) == 0, "the child failed");
	TBR_CHECK(fd >= 0 && ms < 500, "parent: connect with no connection open, a worker "
		  "alive: fd %d %s after %.0f ms (want a slot at once)", fd, tbt_errno_name(err),
		  ms);
	printf("parent: connected again in %.0f ms with the worker alive\n", ms);
	close(fd);
	close(lfd);
	tbg_cleanup(NULL);
	return 0;
}
