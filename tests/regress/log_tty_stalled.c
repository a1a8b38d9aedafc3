/* log_tty_stalled.c - stderr is a terminal with no room: the cuts go on, the lines wait.
 *
 * What it guards: a terminal stopped by ^S, or a pty whose reader stalled (a terminal
 * emulator frozen, `script` suspended), blocks its writers; the watchdog writing its line
 * there would stop every cut after the first (as log_full_pipe's pipe did). timebox writes a
 * line to a terminal only when poll says it has room, and knows stderr is a terminal from
 * one isatty taken with its identity, not one per line. The sequence: stderr = the slave
 * of a pty whose master nobody reads, its buffer full; TIMEBOX_READ_TIMEOUT=300ms; three
 * stalled reads one after another -> each must fail with ETIMEDOUT on time, their lines
 * dropped and counted; once the master is drained, the next line is preceded by
 * event=suppressed count=3.
 */
#include <termios.h>

#include "log_stalled.h"

int main(int argc, char **argv)
{
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=300ms", NULL };
	static char ctl_log[4096], err[65536 + 4096];
	int master, slave, filler, ctl[2], go[2], status;
	size_t filled = 0, got = 0;
	char chunk[4096];
	struct termios raw;
	pid_t pid;

	(void)argc;
	if (tbs_role() != NULL)
		return stalled_child();
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	TBR_CHECK(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0,
		  "posix_openpt: %s", strerror(errno));
	slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
	filler = open(ptsname(master), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	TBR_CHECK(slave >= 0 && filler >= 0, "open the pty's slave: %s", strerror(errno));
	TBR_CHECK(isatty(slave), "the slave is a terminal");
	TBR_CHECK(tcgetattr(slave, &raw) == 0, "tcgetattr: %s", strerror(errno));
	cfmakeraw(&raw); /* bytes as written: no output processing to count around */
	TBR_CHECK(tcsetattr(slave, TCSANOW, &raw) == 0, "tcsetattr: %s", strerror(errno));
	TBR_CHECK(pipe2(ctl, O_CLOEXEC) == 0 && pipe2(go, O_CLOEXEC) == 0,
		  "pipe: %s", strerror(errno));
	/* Fill the terminal to the last byte, through a non-blocking open of the slave. A pty
	 * makes room again while it moves what it took to the master's side: fill until it
	 * has stayed full for 200 ms. */
	memset(chunk, '.', sizeof(chunk));
	for (;;) {
		struct pollfd p = { filler, POLLOUT, 0 };

		for (size_t step = sizeof(chunk); step > 0; step /= 2) {
			ssize_t n;

			while ((n = write(filler, chunk, step)) > 0)
				filled += (size_t)n;
		}
		if (poll(&p, 1, 200) == 0)
			break;
	}
	close(filler);
	printf("terminal filled with %zu bytes\n", filled);
	fflush(stdout);
	TBR_CHECK(filled > 0, "nothing could be written to the terminal");

	pid = fork();
	TBR_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* The runner of the child, so that this process can talk to it meanwhile. */
		status = tbs_run(argv, "child", vars, (const int[3]){ slave, ctl[1], go[0] },
				 NULL, 0, 30000, NULL);
		_exit(status == TBS_HUNG ? 99 : WIFEXITED(status) ? WEXITSTATUS(status) : 98);
	}
	close(ctl[1]);
	close(go[0]);
	close(slave);
	relay_until(ctl[0], "ready\n", ctl_log, sizeof(ctl_log));
	printf("%s", ctl_log);
	TBR_CHECK(strstr(ctl_log, "ready\n") != NULL, "the cuts did not all happen on time");
	/* Drain the filler: the terminal has room again. */
	fcntl(master, F_SETFL, O_NONBLOCK);
	while (got < filled) {
		struct pollfd p = { master, POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, 5000) <= 0)
			break;
		n = read(master, err, sizeof(err) - 1);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	TBR_CHECK(got == filled, "drained %zu of %zu bytes: timebox wrote into the full "
		  "terminal?", got, filled);
	TBR_CHECK(write(go[1], "g", 1) == 1, "go");
	relay_until(ctl[0], "cut 4", ctl_log, sizeof(ctl_log));
	waitpid(pid, &status, 0);
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child: %s\n%s",
		  tbs_describe(status), ctl_log);
	got = 0;
	for (;;) {
		struct pollfd p = { master, POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, 500) <= 0 || (n = read(master, err + got,
							  sizeof(err) - 1 - got)) <= 0)
			break;
		got += (size_t)n;
	}
	err[got] = '\0';
	printf("%s\nthe terminal after the drain:\n%s", strstr(ctl_log, "cut 4"), err);
	TBR_CHECK(strstr(err, "timebox: event=suppressed count=3") != NULL &&
			  strstr(err, "event=timeout") != NULL,
		  "expected the count of dropped lines, then the fourth cut's line");
	return 0;
}
