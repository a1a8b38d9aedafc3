/* log_stderr_freopen.c - a daemon that moves its stderr with freopen keeps timebox's lines.
 *
 * What happened: to keep log lines out of a data file that a daemon opened after closing
 * fds 0-2 (log_fd2_data_file.c), timebox writes to fd 2 only while it is the start-up
 * stderr or an object the program put there itself with dup2, dup3 or dup. glibc's freopen
 * puts the new file on fd 2 with its own internal dup3, which no hook sees, so a daemon that
 * redirects its stderr to its log file the commonest way - freopen(log, "a", stderr) - lost
 * every timeout line. The sequence: freopen a file onto stderr, a stalled read is cut -> the
 * file holds the event=timeout line (as the program's own fprintf(stderr) lines).
 */
#include <fcntl.h>
#include <pthread.h>

#include "regress.h"

static int lfd;

static void *accept_and_stall(void *arg)
{
	(void)arg;
	int c = accept(lfd, NULL, NULL);

	tbt_sleep_ms(3000);
	close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	char path[] = "/tmp/tb-regress-freopen-XXXXXX", buf[4096] = "", c;
	int port, fd, tmp;
	pthread_t t;
	ssize_t r, n;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", NULL);
	tmp = mkstemp(path);
	TBR_CHECK(tmp >= 0, "mkstemp: %s", strerror(errno));
	close(tmp);
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, accept_and_stall, NULL);
	fd = tbr_connect(port);
	f = freopen(path, "a", stderr);
	TBR_CHECK(f == stderr && fileno(f) == 2, "freopen: %s", strerror(errno));
	fprintf(stderr, "program: before\n");
	fflush(stderr);
	r = read(fd, &c, 1);
	TBR_CHECK(r == -1 && errno == ETIMEDOUT, "read returned %zd errno %s", r,
		  tbt_errno_name(errno));
	fprintf(stderr, "program: after\n");
	fflush(stderr);
	tmp = open(path, O_RDONLY);
	TBR_CHECK(tmp >= 0, "open %s: %s", path, strerror(errno));
	n = read(tmp, buf, sizeof(buf) - 1);
	unlink(path);
	TBR_CHECK(n > 0 && strstr(buf, "program: before\n") != NULL &&
			  strstr(buf, "program: after\n") != NULL,
		  "the program's own lines are missing: \"%s\"", n > 0 ? buf : "");
	TBR_CHECK(strstr(buf, "event=timeout phase=first_byte") != NULL,
		  "the freopen'd stderr holds no timeout line: \"%s\"", buf);
	return 0;
}
