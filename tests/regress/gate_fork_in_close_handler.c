/* gate_fork_in_close_handler.c - a child forked by a signal handler that interrupted its
 * thread's close of a connection got one gate slot more than max_conns.
 *
 * What happened: a fork child counts its gates' slots from the sockets an fd of its own
 * names (gate_fork_closing): a socket whose close was under way at the fork is not
 * counted, since the closing thread does not exist in the child. But when the thread that
 * forks is the closing one - a handler run between the kernel's close and the slot's
 * return - the close goes on in the child, and it gave back the slot the child's gate had
 * never counted: the gate's count fell below its true value, and with max_conns = 1 the
 * child held two connections to the destination at once. Now a slot the child does not
 * count is taken from its socket there, so the close gives nothing back.
 * The sequence (max_conns 1, acquire_timeout 500 ms), with a second preload (delaylib.h)
 * raising SIGUSR1 right after the kernel's close of the program's socket, where a signal
 * can land: the handler forks. The child, once the close has returned, connects (A, at
 * once) and connects again while A is open (B): B must wait acquire_timeout and fail with
 * ETIMEDOUT, as every second connection does. (Natively there is no gate.)
 */
#include <signal.h>

#include "gate_regress.h"
#include "delaylib.h"

/* The program's socket is below 512 (timebox's own fds are at 512 or above, real.h). */
static const char delay_c[] = TBR_DELAY_HEAD
	"#include <signal.h>\n"
	"static int raised;\n"
	"int close(int fd)\n"
	"{\n"
	"	static int (*real)(int);\n"
	"	struct stat st;\n"
	"	int sock, r;\n"
	"	if (!real)\n"
	"		real = (int (*)(int))dlsym(RTLD_NEXT, \"close\");\n"
	"	sock = fd > 2 && fd < 512 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);\n"
	"	r = real(fd);\n"
	"	if (sock && getenv(\"TBR_RAISE\") != 0 && !raised++)\n"
	"		raise(SIGUSR1);\n"
	"	return r;\n"
	"}\n";

static volatile pid_t forked = -1;

static void on_usr1(int sig)
{
	(void)sig;
	forked = fork();
}

/* In the child, after the interrupted close returned. */
static void child(int port)
{
	int a, b, err_a, err_b;
	double ms_a, ms_b;

	a = tbg_connect(port, &err_a, &ms_a);
	b = tbg_connect(port, &err_b, &ms_b);
	if (a < 0 || ms_a >= 400) {
		fprintf(stderr, "FAIL: child: first connect: fd %d %s after %.0f ms (want a slot "
			"at once)\n", a, tbt_errno_name(err_a), ms_a);
		_exit(1);
	}
	if (b >= 0 || err_b != ETIMEDOUT || ms_b < 500 || ms_b > 5000) {
		fprintf(stderr, "FAIL: child: second connect while the first is open, max_conns "
			"1: fd %d %s after %.0f ms (want ETIMEDOUT after 500 ms)\n", b,
			tbt_errno_name(err_b), ms_b);
		_exit(1);
	}
	printf("child: first connect in %.0f ms, second refused after %.0f ms\n", ms_a, ms_b);
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	int lfd, fd, err, port;
	double ms;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(delay_c);
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=500ms",
			 "TBR_RAISE=1", NULL);
	tbr_remove_built();
	tbr_hang_guard(20, "the story hung");
	sigemptyset(&sa.sa_mask);
	TBR_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	lfd = tbr_listen(&port);
	fd = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd >= 0, "connect: %s", tbt_errno_name(err));
	close(fd); /* the handler forks inside it */
	TBR_CHECK(forked >= 0, "the handler did not fork (fork: %s)", strerror(errno));
	if (forked == 0)
		child(port);
	TBR_CHECK(tbg_wait(forked) == 0, "the child failed");
	fd = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd >= 0 && ms < 400, "parent: connect after the close: fd %d %s after %.0f ms",
		  fd, tbt_errno_name(err), ms);
	close(fd);
	close(lfd);
	return 0;
}
