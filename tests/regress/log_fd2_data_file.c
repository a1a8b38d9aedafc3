/* log_fd2_data_file.c - timebox's log line written into the program's data file.
 *
 * What happened: a daemon closes fd 2 (with 0 and 1, to detach) and opens its data files;
 * one lands on fd 2. Only a socket on fd 2 was compared with the start-up stderr: a regular
 * file, a FIFO or a character device was written to whatever it now was, so the data file
 * got "timebox: event=timeout ..." between the program's own records. Natively the file
 * holds exactly the program's records. The sequence: stderr is a pipe at start-up; a
 * stalled read is cut (its line reaches the pipe); the program closes fd 2 and opens a data
 * file there, writes REC1, a second read is cut, writes REC2 -> the file holds exactly
 * "REC1\nREC2\n"; the same with a FIFO on fd 2 (it must stay empty); the start-up pipe got
 * the first line only.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "spawn.h"

/* The child's stderr is not its own any more: it reports on stdout. */
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

/* A connection whose peer never answers, read until cut. */
static void stalled_read(int lfd, int port)
{
	int fd = tbr_connect(port), peer = accept(lfd, NULL, NULL);
	char c = 'x';

	CHILD_CHECK(write(fd, &c, 1) == 1, "write");
	errno = 0;
	CHILD_CHECK(read(fd, &c, 1) == -1 && errno == ETIMEDOUT, "read: %s",
		    tbt_errno_name(errno));
	close(fd);
	close(peer);
}

static int child(const char *dir)
{
	char data[256], fifo[256], buf[4096];
	int port, lfd = tbr_listen(&port), fd;
	ssize_t n;

	stalled_read(lfd, port); /* fd 2 is still the start-up pipe: the line goes there */

	snprintf(data, sizeof(data), "%s/records", dir);
	close(2);
	fd = open(data, O_RDWR | O_CREAT | O_APPEND, 0600);
	CHILD_CHECK(fd == 2, "the data file should get fd 2, got %d", fd);
	CHILD_CHECK(write(2, "REC1\n", 5) == 5, "write REC1");
	stalled_read(lfd, port);
	CHILD_CHECK(write(2, "REC2\n", 5) == 5, "write REC2");
	n = pread(2, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	CHILD_CHECK(strcmp(buf, "REC1\nREC2\n") == 0, "the data file on fd 2 holds \"%s\"", buf);

	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	CHILD_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
	close(2);
	fd = open(fifo, O_RDWR | O_NONBLOCK);
	CHILD_CHECK(fd == 2, "the FIFO should get fd 2, got %d", fd);
	stalled_read(lfd, port);
	n = read(2, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	CHILD_CHECK(n < 0 && errno == EAGAIN, "the FIFO on fd 2 received \"%s\"", buf);
	printf("child: the data file holds exactly its records, the FIFO nothing\n");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=200ms", NULL };
	char dir[256], path[300], lines[4096], *first;
	int status;

	(void)argc;
	if (tbs_role() != NULL)
		return child(getenv("TBS_DIR"));
	tbs_tmpdir(dir, sizeof(dir));
	setenv("TBS_DIR", dir, 1);
	fflush(stdout);
	status = tbs_run(argv, "child", vars, (const int[3]){ -1, -1, -1 }, lines,
			 sizeof(lines), 20000, NULL);
	printf("the start-up stderr pipe received:\n%s", lines);
	snprintf(path, sizeof(path), "%s/records", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/fifo", dir);
	unlink(path);
	rmdir(dir);
	TBR_CHECK(status == 0, "the program %s", tbs_describe(status));
	first = strstr(lines, "event=timeout");
	TBR_CHECK(first != NULL && strstr(first + 1, "event=timeout") == NULL,
		  "exactly the first cut's line, written while fd 2 was still stderr");
	return 0;
}
