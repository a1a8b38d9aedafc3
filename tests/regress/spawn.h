/* spawn.h - for stories about what the library does at start-up or to its stderr: run this
 * program again under the library as a child, with chosen fds, and wait with a time limit.
 *
 * The parent stays outside the library (run.sh starts it without LD_PRELOAD), so it can
 * watch a child that hangs, is killed by a signal, or writes where it should not. */
#ifndef TB_REGRESS_SPAWN_H
#define TB_REGRESS_SPAWN_H

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "regress.h"

#define TBS_HUNG (-1)

/*
 * Runs argv[0] again as a child under $TBR_PRELOAD with TBR_CHILD=1, TBS_ROLE=role, every
 * TIMEBOX_* variable of ours removed and each "NAME=value" of vars (NULL-terminated) set.
 * The child's fd 2, 3 and 4 are fds[0..2] (-1: fd 2 becomes a pipe captured into out, of
 * outlen bytes, NUL-terminated; fds 3 and 4 are then closed). Waits at most limit_ms, then
 * kills the child. Returns its wait status, or TBS_HUNG when it had to be killed; *took_ms
 * (may be NULL) is how long it ran.
 */
static inline int tbs_run(char **argv, const char *role, const char *const *vars,
			  const int fds[3], char *out, size_t outlen, long limit_ms,
			  double *took_ms)
{
	extern char **environ;
	const char *lib = getenv("TBR_PRELOAD");
	double start = tbt_now_ms(), deadline = start + (double)limit_ms;
	int cap[2] = { -1, -1 }, status = 0, pidfd;
	bool reaped = false;
	size_t got = 0;
	pid_t pid;

	if (lib == NULL || *lib == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	if (out != NULL && outlen > 0)
		out[0] = '\0';
	if (fds[0] < 0)
		TBR_CHECK(pipe2(cap, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int want[3] = { fds[0] >= 0 ? fds[0] : cap[1], fds[1], fds[2] };

		/* Above 9 first, so that placing one cannot overwrite another. */
		for (int i = 0; i < 3; i++)
			if (want[i] >= 0)
				want[i] = fcntl(want[i], F_DUPFD_CLOEXEC, 10);
		for (int i = 0; i < 3; i++) {
			if (want[i] >= 0)
				dup2(want[i], 2 + i);
			else if (i > 0)
				close(2 + i);
		}
		for (int i = 0; environ[i] != NULL;) {
			if (strncmp(environ[i], "TIMEBOX_", 8) == 0) {
				char name[256];

				snprintf(name, sizeof(name), "%.*s", (int)strcspn(environ[i], "="),
					 environ[i]);
				unsetenv(name);
				continue;
			}
			i++;
		}
		for (int i = 0; vars != NULL && vars[i] != NULL; i++)
			putenv((char *)vars[i]);
		setenv("LD_PRELOAD", lib, 1);
		setenv("TBR_CHILD", "1", 1);
		setenv("TBS_ROLE", role, 1);
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	if (cap[1] >= 0)
		close(cap[1]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		struct pollfd p[2] = { { reaped ? -1 : pidfd, POLLIN, 0 }, { cap[0], POLLIN, 0 } };
		double left;
		int wait_ms;

		if (!reaped && waitpid(pid, &status, WNOHANG) == pid)
			reaped = true;
		if (reaped && cap[0] < 0)
			break;
		left = deadline - tbt_now_ms();
		wait_ms = left <= 0 ? 0 : (int)left + 1;
		if (left <= 0) {
			if (!reaped) {
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
				status = TBS_HUNG;
			}
			break;
		}
		if (pidfd < 0 && wait_ms > 10)
			wait_ms = 10; /* no pidfd here: look again soon */
		if (poll(p, 2, wait_ms) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			char buf[4096];
			ssize_t n = read(cap[0], buf, sizeof(buf));

			if (n <= 0) {
				close(cap[0]);
				cap[0] = -1;
			} else if (out != NULL && got + 1 < outlen) {
				size_t k = (size_t)n < outlen - 1 - got ? (size_t)n : outlen - 1 - got;

				memcpy(out + got, buf, k);
				got += k;
				out[got] = '\0';
			}
		}
	}
	if (cap[0] >= 0)
		close(cap[0]);
	if (pidfd >= 0)
		close(pidfd);
	if (took_ms != NULL)
		*took_ms = tbt_now_ms() - start;
	return status;
}

/* The role this process plays: NULL in the parent. */
static inline const char *tbs_role(void)
{
	return getenv("TBR_CHILD") != NULL ? getenv("TBS_ROLE") : NULL;
}

/* "exit 3", "signal 13", "hung": a wait status for a message. */
static inline const char *tbs_describe(int status)
{
	static char buf[32];

	if (status == TBS_HUNG)
		return "hung (killed at the time limit)";
	if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, sizeof(buf), "exit %d", WEXITSTATUS(status));
	return buf;
}

/* A private directory under $TMPDIR (or /tmp) for the story's files, into dir (len bytes). */
static inline void tbs_tmpdir(char *dir, size_t len)
{
	const char *base = getenv("TMPDIR");

	snprintf(dir, len, "%s/tbregress.XXXXXX", base != NULL && *base ? base : "/tmp");
	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
}

#endif
