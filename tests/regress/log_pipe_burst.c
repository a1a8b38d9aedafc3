/* log_pipe_burst.c - a burst of lines into a stderr pipe lost all past the 16th.
 *
 * What happened: to write to a pipe on fd 2 without waiting and without a file description
 * of its own for the program's pipe, timebox wrote each line into a pipe of its own and
 * moved it into fd 2 with splice(SPLICE_F_NONBLOCK). A spliced buffer takes one of the
 * pipe's 16 slots by itself and is never merged into, so 16 lines the reader had not taken
 * yet filled a pipe holding 2 KB: wget's 18 quick retries, each refused by the retry window
 * with a line, lost 2 or 3 of them to a reader (Python's communicate) that read a moment
 * later, and two threads' lines at once lost one to the relay's busy flag. The sequence: a
 * child whose stderr is a pipe nobody reads until it exits; a read cut at its deadline,
 * then 30 retries to the same destination, each refused with an event=reject line -> the
 * pipe holds all 30 lines (6 KB of its 64 KB), as 30 writes of the program's own would.
 */
#include <sys/wait.h>

#include "regress.h"

#define RETRIES 30

static int child(int port)
{
	char c = 'x';
	int fd = tbr_connect(port);

	if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != -1 || errno != ETIMEDOUT)
		return 2;
	close(fd);
	for (int i = 0; i < RETRIES; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		int s = socket(AF_INET, SOCK_STREAM, 0);

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0 || errno != ETIMEDOUT)
			return 3;
		close(s);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static char buf[65536];
	int port, lfd, p[2], status, lines = 0;
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=200ms", "TIMEBOX_RETRY_WINDOW=10s",
			 "TIMEBOX_LOG_RATE=0", NULL);
	lfd = tbr_listen(&port);
	TBR_CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		if (dup2(p[1], 2) != 2)
			_exit(4);
		_exit(child(port));
	}
	close(p[1]);
	/* Nothing is read before the child ends: its lines wait in the pipe. */
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	while ((r = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = '\0';
	for (char *q = buf; (q = strstr(q, "event=reject")) != NULL; q++)
		lines++;
	TBR_CHECK(lines == RETRIES, "the pipe holds %d of the %d reject lines: \"%s\"", lines,
		  RETRIES, buf);
	close(lfd);
	return 0;
}
