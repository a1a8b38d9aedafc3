/* log_pipe_fd_number.c - timebox's log line takes the fd number the program is reopening.
 *
 * What happened: to write a line into a stderr pipe without waiting, timebox opened
 * /proc/self/fd/2 for each line (a non-blocking description of the same pipe) and closed
 * it after the write. That open took the lowest free fd number for a moment. A program
 * thread that redirects with the classic close(1); open(...) - expecting the open to
 * return 1, as it does natively - got another number whenever a line was being written
 * meanwhile, and fd 1 was left closed (its output lost) once timebox closed its copy. The
 * sequence: stderr is a pipe; one stalled read is cut first (whatever timebox sets up for
 * its lines, it does now); then a thread repeats close(1); open("/dev/null") while 100
 * other stalled reads are cut and logged -> every open returns 1.
 */
#include <fcntl.h>
#include <stdatomic.h>

#include "spawn.h"

#define READERS 100

static atomic_int stop, started;
static int conns[READERS];

static void *stalled_read(void *arg)
{
	char c;
	int fd = conns[(intptr_t)arg];

	atomic_fetch_add(&started, 1);
	if (read(fd, &c, 1) != -1 || errno != ETIMEDOUT)
		_exit(3);
	return NULL;
}

/* The program's redirect, again and again: natively the open always returns 1. */
static void *reopen_stdout(void *arg)
{
	long *wrong = arg;

	while (!atomic_load(&stop)) {
		int fd;

		close(1);
		fd = open("/dev/null", O_WRONLY);
		if (fd != 1) {
			(*wrong)++;
			if (fd >= 0)
				close(fd);
		}
	}
	return NULL;
}

static int child(void)
{
	int port, lfd = tbr_listen(&port), peers[READERS], one, one_peer;
	pthread_t readers[READERS], loop;
	long wrong = 0;
	char c = 'x';

	/* The first line: anything timebox opens once for its lines is opened here. */
	one = tbr_connect(port);
	one_peer = accept(lfd, NULL, NULL);
	if (write(one, &c, 1) != 1 || read(one, &c, 1) != -1 || errno != ETIMEDOUT)
		return 3;
	for (int i = 0; i < READERS; i++) {
		conns[i] = tbr_connect(port);
		peers[i] = accept(lfd, NULL, NULL);
		if (write(conns[i], &c, 1) != 1)
			return 3;
	}
	pthread_create(&loop, NULL, reopen_stdout, &wrong);
	for (intptr_t i = 0; i < READERS; i++)
		pthread_create(&readers[i], NULL, stalled_read, (void *)i);
	for (int i = 0; i < READERS; i++)
		pthread_join(readers[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(loop, NULL);
	dprintf(2, "child: %ld of the program's reopens of fd 1 got another number\n", wrong);
	(void)one_peer;
	(void)peers;
	return wrong == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=300ms", "TIMEBOX_LOG_RATE=off", NULL };
	char lines[65536];
	int status;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	fflush(stdout);
	status = tbs_run(argv, "child", vars, (const int[3]){ -1, -1, -1 }, lines,
			 sizeof(lines), 30000, NULL);
	printf("%s", strstr(lines, "child:") != NULL ? strstr(lines, "child:") : lines);
	TBR_CHECK(status == 0, "the program %s", tbs_describe(status));
	return 0;
}
