/* log_broken_pipe.c - timebox's own log line kills the program when stderr is a broken pipe.
 *
 * What happened: a program whose stderr is a pipe nobody reads any more (the reader exited:
 * `prog 2>&1 | head -1`, a supervisor restarted) never writes to stderr itself, so it runs
 * fine natively. Under timebox, the first expiry logged from one of the program's own
 * threads raised SIGPIPE there and the program died with status 141. The sequence: stderr
 * = a pipe with its read end closed; TIMEBOX_DEADLINE=200ms; a call that stalls (cut by
 * the watchdog, logged), then a retry inside the retry window (refused and logged by the
 * program's own thread) -> the program must exit with its own status. And a SIGPIPE the
 * program already had pending (blocked) must stay pending; one timebox caused must not.
 */
#include <signal.h>

#include "spawn.h"

/* The child's stderr is broken: it reports on stdout. */
#define CHILD_CHECK(cond, ...)                                                              \
	do {                                                                                \
		if (!(cond)) {                                                              \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);              \
			printf(__VA_ARGS__);                                                \
			printf("\n");                                                       \
			fflush(stdout);                                                     \
			_exit(1);                                                           \
		}                                                                           \
	} while (0)

/* A connect to the destination whose deadline has passed: refused, and logged by us. */
static void refused_retry(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	errno = 0;
	CHILD_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == -1 && errno == ETIMEDOUT,
		    "the retry inside the window: %s", tbt_errno_name(errno));
	close(fd);
}

static bool sigpipe_pending(void)
{
	sigset_t p;

	sigpending(&p);
	return sigismember(&p, SIGPIPE);
}

/* The program: exits 7 unless something kills it first. */
static int child(void)
{
	struct timespec zero = { 0, 0 };
	sigset_t pipe_set;
	char c = 'x';
	int port, lfd = tbr_listen(&port), fd = tbr_connect(port);

	CHILD_CHECK(write(fd, &c, 1) == 1, "write: %s", strerror(errno));
	CHILD_CHECK(read(fd, &c, 1) == -1 && errno == ETIMEDOUT, "read: %s",
		    tbt_errno_name(errno));
	close(fd);
	refused_retry(port); /* the program's own thread logs: SIGPIPE killed it here */

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipe_set, NULL);
	refused_retry(port);
	CHILD_CHECK(!sigpipe_pending(), "timebox left the program a SIGPIPE of its own");
	raise(SIGPIPE);
	refused_retry(port);
	CHILD_CHECK(sigpipe_pending(), "timebox took the program's pending SIGPIPE");
	CHILD_CHECK(sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE, "sigtimedwait");
	close(lfd);
	printf("child: three lines logged into a broken pipe, still alive\n");
	return 7;
}

int main(int argc, char **argv)
{
	const char *vars[] = { "TIMEBOX_DEADLINE=200ms", "TIMEBOX_RETRY_WINDOW=30s", NULL };
	int p[2], status;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	TBR_CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	close(p[0]); /* the reader is gone */
	fflush(stdout);
	status = tbs_run(argv, "child", vars, (const int[3]){ p[1], -1, -1 }, NULL, 0, 10000,
			 NULL);
	close(p[1]);
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7,
		  "the program's own status is 7; it %s", tbs_describe(status));
	printf("stderr a broken pipe: the program exited 7, its own status\n");
	return 0;
}
