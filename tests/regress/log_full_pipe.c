/* log_full_pipe.c - a full stderr pipe stops every cut after the first.
 *
 * What happened: the watchdog wrote each expiry's line to stderr with a blocking write.
 * When stderr is a pipe nobody reads (a supervisor that stalled, a `| less` left open)
 * and the pipe is full, that write never returns: the watchdog thread is stuck in it and
 * no other socket of the process is ever cut again. The sequence: stderr = a full pipe;
 * TIMEBOX_READ_TIMEOUT=300ms; three stalled reads one after another -> each must fail
 * with ETIMEDOUT on time (never early, at most 300 ms + slack), their lines dropped and
 * counted; once the pipe is drained, the next line is preceded by event=suppressed
 * count=3.
 */
#include "log_stalled.h"

int main(int argc, char **argv)
{
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=300ms", NULL };
	static char ctl_log[4096], err[65536 + 4096];
	int errp[2], ctl[2], go[2], status, flags;
	size_t filled = 0, got = 0;
	char chunk[4096];
	pid_t pid;

	(void)argc;
	if (tbs_role() != NULL)
		return stalled_child();
	TBR_CHECK(pipe2(errp, O_CLOEXEC) == 0 && pipe2(ctl, O_CLOEXEC) == 0 &&
			  pipe2(go, O_CLOEXEC) == 0,
		  "pipe: %s", strerror(errno));
	/* Fill stderr's pipe to the last byte, then make it blocking again, as a stderr is. */
	memset(chunk, '.', sizeof(chunk));
	flags = fcntl(errp[1], F_GETFL);
	fcntl(errp[1], F_SETFL, flags | O_NONBLOCK);
	for (size_t step = sizeof(chunk); step > 0; step /= 2) {
		ssize_t n;

		while ((n = write(errp[1], chunk, step)) > 0)
			filled += (size_t)n;
	}
	fcntl(errp[1], F_SETFL, flags);
	printf("stderr pipe filled with %zu bytes\n", filled);
	fflush(stdout);

	pid = fork();
	TBR_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* The runner of the child, so that this process can talk to it meanwhile. */
		status = tbs_run(argv, "child", vars, (const int[3]){ errp[1], ctl[1], go[0] },
				 NULL, 0, 30000, NULL);
		_exit(status == TBS_HUNG ? 99 : WIFEXITED(status) ? WEXITSTATUS(status) : 98);
	}
	close(ctl[1]);
	close(go[0]);
	close(errp[1]);
	relay_until(ctl[0], "ready\n", ctl_log, sizeof(ctl_log));
	printf("%s", ctl_log);
	TBR_CHECK(strstr(ctl_log, "ready\n") != NULL, "the cuts did not all happen on time");
	/* Drain the filler: the pipe has room again. */
	fcntl(errp[0], F_SETFL, O_NONBLOCK);
	while (got < filled) {
		struct pollfd p = { errp[0], POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, 5000) <= 0)
			break;
		n = read(errp[0], err, sizeof(err) - 1);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	TBR_CHECK(got == filled, "drained %zu of %zu bytes: timebox wrote into the full pipe?",
		  got, filled);
	TBR_CHECK(write(go[1], "g", 1) == 1, "go");
	relay_until(ctl[0], "cut 4", ctl_log, sizeof(ctl_log));
	waitpid(pid, &status, 0);
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: %s\n%s",
		  tbs_describe(status), ctl_log);
	fcntl(errp[0], F_SETFL, 0);
	got = 0;
	for (ssize_t n; (n = read(errp[0], err + got, sizeof(err) - 1 - got)) > 0;)
		got += (size_t)n;
	err[got] = '\0';
	printf("%s\nstderr after the drain:\n%s", strstr(ctl_log, "cut 4"), err);
	TBR_CHECK(strstr(err, "timebox: event=suppressed count=3") != NULL &&
			  strstr(err, "event=timeout") != NULL,
		  "expected the count of dropped lines, then the fourth cut's line");
	return 0;
}
