/* log_stderr_moved.c - a program that moves its own stderr keeps timebox's lines.
 *
 * What happened: to keep log lines out of a connection that took fd 2 (log_fd2_socket.c),
 * timebox wrote only to the very object fd 2 was at start-up, so a daemon that redirects
 * its stderr to its log file (freopen, or dup2 of an opened file onto fd 2) lost every
 * timeout line - the one place an operator looks. The sequence: the program dup2's a file
 * onto fd 2, a stalled read is cut -> the file holds the event=timeout line.
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
	char path[] = "/tmp/tb-regress-stderr-XXXXXX", buf[4096] = "", c;
	int port, fd, out;
	pthread_t t;
	ssize_t r, n;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", NULL);
	out = mkstemp(path);
	TBR_CHECK(out >= 0, "mkstemp: %s", strerror(errno));
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, accept_and_stall, NULL);
	fd = tbr_connect(port);
	TBR_CHECK(dup2(out, 2) == 2, "dup2: %s", strerror(errno));
	r = read(fd, &c, 1);
	TBR_CHECK(r == -1 && errno == ETIMEDOUT, "read returned %zd errno %s", r,
		  tbt_errno_name(errno));
	n = pread(out, buf, sizeof(buf) - 1, 0);
	unlink(path);
	TBR_CHECK(n > 0 && strstr(buf, "event=timeout phase=first_byte") != NULL,
		  "the redirected stderr holds: \"%s\"", n > 0 ? buf : "");
	return 0;
}
