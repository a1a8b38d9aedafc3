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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "gate_regress.h"
#include "delaylib.h"

/* The gate's wait is timebox's one futex wait (futex.h), made through syscall(). */
static const char delay_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <fcntl.h>\n#include <stdarg.h>\n"
	"#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n#include <unistd.h>\n"
	"#include <linux/futex.h>\n#include <sys/prctl.h>\n#include <sys/syscall.h>\n"
	"static int named(const char *n)\n"
	"{\n"
	"	char b[16] = \"\";\n"
	"	prctl(PR_GET_NAME, b);\n"
	"	return strcmp(b, n) == 0;\n"
	"}\n"
	"static int held;\n"
	"long syscall(long n, ...)\n"
	"{\n"
	"	static long (*real)(long, ...);\n"
	"	struct timespec t = { 0, 500 * 1000000L };\n"
	"	const char *mark;\n"
	"	long a[6], r;\n"
	"	va_list ap;\n"
	"	va_start(ap, n);\n"
	"	for (int i = 0; i < 6; i++)\n"
	"		a[i] = va_arg(ap, long);\n"
	"	va_end(ap);\n"
	"	if (!real)\n"
	"		real = (long (*)(long, ...))dlsym(RTLD_NEXT, \"syscall\");\n"
	"	r = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);\n"
	"	if (n == SYS_futex && (a[1] & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET &&\n"
	"	    *(unsigned *)a[0] != 0 && named(\"tbr-conn\") && !held++) {\n"
	"		if ((mark = getenv(\"TBR_MARK\")) != 0)\n"
	"			close(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));\n"
	"		nanosleep(&t, 0);\n"
	"	}\n"
	"	return r;\n"
	"}\n";

static int port;
static atomic_int t_tid;
static int t_fd, t_err;
static double t_ms;

static void *connecting(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "tbr-conn");
	atomic_store(&t_tid, (int)syscall(SYS_gettid));
	t_fd = tbg_connect(port, &t_err, &t_ms);
	return NULL;
}

int main(int argc, char **argv)
{
	static char mark[64], mark_env[96];
	struct stat st;
	pthread_t t;
	int lfd, fd, err, status;
	double until, ms;
	pid_t pid;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		snprintf(mark, sizeof(mark), "/tmp/tbr-gate-fork-hand-%d", (int)getpid());
		snprintf(mark_env, sizeof(mark_env), "TBR_MARK=%s", mark);
		putenv(mark_env);
		tbr_add_preload(delay_c);
	}
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=1s", NULL);
	tbr_remove_built();
	snprintf(mark, sizeof(mark), "%s", getenv("TBR_MARK"));
	unlink(mark);
	tbr_hang_guard(10, "the story hung");
	lfd = tbr_listen(&port);
	fd = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd >= 0, "connect: %s", tbt_errno_name(err));
	TBR_CHECK(pthread_create(&t, NULL, connecting, NULL) == 0, "pthread_create");
	until = tbt_now_ms() + 5000;
	while ((atomic_load(&t_tid) == 0 || !tbr_thread_sleeping(atomic_load(&t_tid))) &&
	       tbt_now_ms() < until)
		tbt_sleep_ms(1);
	TBR_CHECK(tbt_now_ms() < until, "thread T never waited at the gate");
	close(fd); /* the slot passes to T */
	until = tbt_now_ms() + 5000;
	while (stat(mark, &st) != 0 && tbt_now_ms() < until)
		tbt_sleep_ms(1);
	TBR_CHECK(stat(mark, &st) == 0, "thread T was never handed the slot");
	unlink(mark);
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
	pthread_join(t, NULL);
	TBR_CHECK(t_fd >= 0, "thread T: connect: %s", tbt_errno_name(t_err));
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
	printf("parent: thread T connected after %.0f ms at the gate\n", t_ms);
	close(lfd);
	return 0;
}
