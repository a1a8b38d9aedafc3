/* stale_slots.c - closes the hooks never see must not leave a slot behind for a new file.
 *
 * What happened: after closefrom() (not interposed) or a raw syscall(SYS_close), the fd
 * table still named the dead socket. When open() reused the number, write() on the new file
 * was made as send(MSG_NOSIGNAL) and failed with ENOTSOCK; the dead socket's gate slot stayed
 * taken, so with max_conns = 1 the next connect waited at the gate although nothing was
 * open; dup() onto a stale number kept the old reference (the slot leaked for good); and
 * closefrom() also closed timebox's own log file, so later timeouts went unreported.
 * The sequences (max_conns 1, acquire 300 ms, read 300 ms, log to a file):
 *   raw close of a governed fd, open() reuses the number -> connect gets the slot at once;
 *   the same, then write() on the new file -> writes, as without timebox;
 *   dup, raw close of the copy, dup again onto that number, close both -> connect gets it;
 *   closefrom(fd) -> open() reuses the number, write works, connect gets the slot, and a
 *   later read timeout is still logged.
 */
#include <fcntl.h>
#include <sys/syscall.h>

#include "regress.h"

static int port;

static int connect_now(const char *what)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	double t0 = tbt_now_ms();
	int r = connect(fd, (struct sockaddr *)&a, sizeof(a));

	TBR_CHECK(r == 0, "%s: connect waited %.0f ms at the gate and failed: %s", what,
		  tbt_now_ms() - t0, tbt_errno_name(errno));
	return fd;
}

static int reuse_number(int expect)
{
	int f = open("/dev/null", O_WRONLY | O_CLOEXEC);

	TBR_CHECK(f == expect, "open returned %d, expected the freed number %d", f, expect);
	return f;
}

static void write_file(int f)
{
	errno = 0;
	TBR_CHECK(write(f, "x", 1) == 1, "write on a file that reused a socket's number: %s",
		  tbt_errno_name(errno));
}

int main(int argc, char **argv)
{
	static char log_env[128];
	char log_path[] = "/tmp/tb_stale_log_XXXXXX";
	char buf[4096], c;
	int lfd, fd, f, copy;
	ssize_t n;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		int lf = mkstemp(log_path);

		TBR_CHECK(lf >= 0, "mkstemp: %s", strerror(errno));
		close(lf);
		snprintf(log_env, sizeof(log_env), "TIMEBOX_LOG=%s", log_path);
	}
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=300ms",
			 "TIMEBOX_READ_TIMEOUT=300ms", log_env, NULL);
	lfd = tbr_listen(&port); /* the kernel completes handshakes; nobody ever answers */

	/* A raw close, then the number reused by open(): the gate must not stay full. */
	fd = connect_now("first");
	syscall(SYS_close, fd);
	f = reuse_number(fd);
	fd = connect_now("after a raw close");
	close(fd);
	close(f);

	/* The same, then a write on the new file. */
	fd = connect_now("first");
	syscall(SYS_close, fd);
	f = reuse_number(fd);
	write_file(f);
	close(f);
	fd = connect_now("after a raw close and a write");
	close(fd);

	/* dup onto a stale number must not keep the old reference. */
	fd = connect_now("first");
	copy = dup(fd);
	TBR_CHECK(copy > fd, "dup: %s", strerror(errno));
	syscall(SYS_close, copy);
	TBR_CHECK(dup(fd) == copy, "dup did not reuse %d", copy);
	close(fd);
	close(copy);
	fd = connect_now("after dup onto a stale number");
	close(fd);

	/* closefrom: the socket goes, the log stays. */
	fd = connect_now("first");
	closefrom((unsigned)fd);
	f = reuse_number(fd);
	write_file(f);
	fd = connect_now("after closefrom");
	errno = 0;
	n = read(fd, &c, 1);
	TBR_CHECK(n == -1 && errno == ETIMEDOUT, "read returned %zd errno %s", n,
		  tbt_errno_name(errno));
	close(fd);
	close(f);
	close(lfd);

	f = open(getenv("TIMEBOX_LOG"), O_RDONLY);
	n = f >= 0 ? read(f, buf, sizeof(buf) - 1) : -1;
	buf[n > 0 ? n : 0] = '\0';
	close(f);
	unlink(getenv("TIMEBOX_LOG"));
	TBR_CHECK(strstr(buf, "event=timeout") != NULL,
		  "the read timeout after closefrom was not logged (log: \"%s\")", buf);
	return 0;
}
