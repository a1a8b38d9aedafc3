/* real_unbound.c - a libc function that libc lacks left its table entry calling itself.
 *
 * What happened: glibc before 2.34 has no close_range, yet timebox exports it. At binding,
 * dlsym(RTLD_NEXT, "close_range") found nothing, the entry kept its boot stub, and the
 * boot stub "binds, then forwards through the table" - to itself. A program calling
 * close_range spun a core forever (the forward is a tail call: not even a stack overflow).
 * The sequence: libc lacks a name; the program calls it; expected the system call's own
 * answer (close_range: 0, or ENOSYS on an old kernel), never a loop.
 *
 * glibc here has every name, so this story does not run under the library: it builds the
 * binding code itself (shim/real.c) into this program with dlsym replaced by a lookup that
 * finds nothing, as on a libc that lacks the names, and calls the entries that have a
 * system call behind them, each in a child with a time limit.
 */
#include <poll.h>
#include <sys/select.h>
#include <sys/wait.h>

#define dlsym tbr_missing_dlsym
#include "../../shim/real.c"
#undef dlsym

#include "regress.h"

/* A libc without any of the names: every entry must fall back to its system call. */
void *tbr_missing_dlsym(void *handle, const char *name)
{
	(void)handle;
	(void)name;
	return NULL;
}

static void calls(void)
{
	struct pollfd pfd;
	struct timespec zero = { 0, 0 };
	fd_set rset;
	char byte = 'x';
	int p[2], d, r;

	TBR_CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	TBR_CHECK(tb_real.write(p[1], &byte, 1) == 1, "write: %s", strerror(errno));
	TBR_CHECK(tb_real.read(p[0], &byte, 1) == 1, "read: %s", strerror(errno));
	pfd = (struct pollfd){ .fd = p[0], .events = POLLIN };
	TBR_CHECK(tb_real.poll(&pfd, 1, 0) == 0, "poll: %s", strerror(errno));
	FD_ZERO(&rset);
	FD_SET(p[0], &rset);
	r = tb_real.pselect(p[0] + 1, &rset, NULL, NULL, &zero, NULL);
	TBR_CHECK(r == 0, "pselect returned %d errno %s", r, tbt_errno_name(errno));
	d = tb_real.fcntl64(p[0], F_DUPFD_CLOEXEC, 100);
	TBR_CHECK(d >= 100, "fcntl64(F_DUPFD_CLOEXEC) returned %d: %s", d, strerror(errno));
	TBR_CHECK(tb_real.dup2(p[0], d) == d, "dup2: %s", strerror(errno));
	r = tb_real.close_range((unsigned)d, (unsigned)d, 0);
	TBR_CHECK(r == 0 || (r == -1 && errno == ENOSYS), "close_range returned %d errno %s", r,
		  tbt_errno_name(errno));
	TBR_CHECK(tb_real.close(p[0]) == 0 && tb_real.close(p[1]) == 0, "close: %s",
		  strerror(errno));
}

int main(void)
{
	pid_t pid;
	int status;

	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		alarm(5); /* a looping entry is killed here */
		calls();
		_exit(0);
	}
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	TBR_CHECK(!WIFSIGNALED(status), "the calls were killed by signal %d (%s)",
		  WTERMSIG(status), WTERMSIG(status) == SIGALRM ? "an entry looped" : "crash");
	TBR_CHECK(WEXITSTATUS(status) == 0, "a call failed (exit %d)", WEXITSTATUS(status));
	return 0;
}
