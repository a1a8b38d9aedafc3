/* fd_limit_low_std.c - timebox keeps fds 0-2 for good under a low fd limit.
 *
 * What happened: timebox moves each of its own fds (the log file, the statistics segment,
 * the gate directory) to a number >= 512 and shields it from the program's close(). With
 * `ulimit -n 256` no number >= 512 exists: the move failed, the fd stayed at the low number
 * the kernel gave it, and the program's close() of that number returned 0 without closing.
 * A program started with fds 0-2 closed (daemons started by some supervisors, `prog <&-
 * >&- 2>&-`) that opens /dev/null three times expects 0, 1 and 2 and natively gets them;
 * under timebox it got 1, 2, 3. The sequence: RLIMIT_NOFILE 256, fds 0-2 closed at exec,
 * TIMEBOX_LOG=<file>, a read timeout; the program opens /dev/null x3 (expects 0, 1, 2),
 * closes them, makes a governed connection whose read is cut (the log line is written),
 * closes its sockets, and opens /dev/null x3 again -> 0, 1, 2 each time, and the log file
 * holds the line (the feature moved to a number below the limit instead).
 */
#include <fcntl.h>
#include <sys/resource.h>

#include "spawn.h"

#define REPORT 3 /* the child's only way to speak: fds 0-2 are closed */

#define CHILD_CHECK(cond, ...)                                                              \
	do {                                                                                \
		if (!(cond)) {                                                              \
			dprintf(REPORT, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
			dprintf(REPORT, __VA_ARGS__);                                       \
			dprintf(REPORT, "\n");                                              \
			_exit(1);                                                           \
		}                                                                           \
	} while (0)

/* Opens /dev/null three times: natively the program gets 0, 1 and 2. */
static void std_fds_free(const char *when)
{
	int got[3];

	for (int i = 0; i < 3; i++)
		got[i] = open("/dev/null", O_RDWR);
	CHILD_CHECK(got[0] == 0 && got[1] == 1 && got[2] == 2,
		    "%s: /dev/null opened as %d, %d, %d (expected 0, 1, 2)", when, got[0], got[1],
		    got[2]);
	for (int i = 0; i < 3; i++)
		CHILD_CHECK(close(i) == 0 && fcntl(i, F_GETFD) == -1, "close(%d) left it open", i);
}

static int child(const char *log)
{
	int port, lfd, fd, peer;
	char c = 'x', buf[4096];
	ssize_t n;

	std_fds_free("at start-up");
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	CHILD_CHECK(write(fd, &c, 1) == 1, "write");
	errno = 0;
	CHILD_CHECK(read(fd, &c, 1) == -1 && errno == ETIMEDOUT, "read: %s",
		    tbt_errno_name(errno));
	close(fd);
	close(peer);
	close(lfd);
	std_fds_free("after a governed call and its cut");
	fd = open(log, O_RDONLY);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	buf[n > 0 ? n : 0] = '\0';
	CHILD_CHECK(strstr(buf, "event=timeout") != NULL, "the log file holds \"%s\"", buf);
	dprintf(REPORT, "child: 0, 1 and 2 were the program's each time; the log has the line\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *lib = getenv("TBR_PRELOAD");
	char dir[256], log[300], env_log[320], buf[4096];
	struct rlimit rl = { 256, 256 };
	int rep[2], status = -1;
	size_t got = 0;
	pid_t pid;

	(void)argc;
	if (tbs_role() != NULL)
		return child(getenv("TBS_LOG"));
	if (lib == NULL || *lib == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	tbs_tmpdir(dir, sizeof(dir));
	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(env_log, sizeof(env_log), "TIMEBOX_LOG=%s", log);
	TBR_CHECK(pipe2(rep, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || dup2(rep[1], REPORT) != REPORT)
			_exit(126);
		close(0);
		close(1);
		close(2);
		putenv(env_log);
		putenv((char *)"TIMEBOX_READ_TIMEOUT=200ms");
		setenv("TBS_LOG", log, 1);
		setenv("LD_PRELOAD", lib, 1);
		setenv("TBR_CHILD", "1", 1);
		setenv("TBS_ROLE", "child", 1);
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	close(rep[1]);
	for (;;) {
		struct pollfd p = { rep[0], POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, 20000) != 1) {
			kill(pid, SIGKILL);
			break;
		}
		n = read(rep[0], buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	waitpid(pid, &status, 0);
	printf("%s", buf);
	unlink(log);
	rmdir(dir);
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the program %s",
		  tbs_describe(status));
	return 0;
}
