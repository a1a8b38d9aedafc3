/* log_fd2_socket.c - timebox writes its log line into the program's connection.
 *
 * What happened: a daemon closes fds 0-2 and opens its connections; the first lands on
 * fd 2. timebox wrote each line to fd 2 as if it were still stderr: the peer of that
 * connection received "DATAtimebox: event=timeout ..." - a corrupt request, a protocol
 * error, or log text leaking to a remote party. The sequence: stderr is a socket at
 * start-up (as under systemd: lines reach it); the program closes fd 2, connects a socket
 * that gets fd 2, sends DATA; another socket's read is cut (a line to log), then fd 2's
 * own read is cut -> the peer of fd 2 receives exactly DATA, then the end of the stream.
 */
#include <poll.h>

#include "spawn.h"

/* The child writes its findings to stdout: fd 2 is a connection. */
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

/* A stalled call on fd: must be cut with ETIMEDOUT. */
static void stalled_read(int fd)
{
	char c;

	errno = 0;
	CHILD_CHECK(read(fd, &c, 1) == -1 && errno == ETIMEDOUT, "read: %s",
		    tbt_errno_name(errno));
}

static int child(void)
{
	int port, lfd = tbr_listen(&port), other, peer, peer_other;
	char buf[1024], c = 'x';
	size_t got = 0;
	ssize_t n;

	/* While stderr is still the start-up socket, a line reaches it. */
	other = tbr_connect(port);
	peer_other = accept(lfd, NULL, NULL);
	CHILD_CHECK(write(other, &c, 1) == 1, "write");
	stalled_read(other);
	close(other);
	close(peer_other);

	close(2);
	CHILD_CHECK(tbr_connect(port) == 2, "the connection should get fd 2");
	peer = accept(lfd, NULL, NULL);
	CHILD_CHECK(write(2, "DATA", 4) == 4, "write DATA");
	other = tbr_connect(port);
	peer_other = accept(lfd, NULL, NULL);
	CHILD_CHECK(write(other, &c, 1) == 1, "write");
	stalled_read(other); /* logged: where to? */
	stalled_read(2);     /* logged, and fd 2 is shut down */
	while (got < sizeof(buf) - 1) {
		struct pollfd p = { peer, POLLIN, 0 };

		CHILD_CHECK(poll(&p, 1, 5000) == 1, "the peer saw no end of stream");
		n = read(peer, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	CHILD_CHECK(strcmp(buf, "DATA") == 0, "the peer of fd 2 received \"%s\"", buf);
	printf("child: the peer of fd 2 received exactly \"%s\"\n", buf);
	close(peer);
	close(peer_other);
	close(other);
	close(lfd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=200ms", NULL };
	char lines[4096];
	int sp[2], status;
	ssize_t n;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	TBR_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socketpair");
	fflush(stdout);
	status = tbs_run(argv, "child", vars, (const int[3]){ sp[1], -1, -1 }, NULL, 0, 10000,
			 NULL);
	close(sp[1]);
	TBR_CHECK(status == 0, "the program %s", tbs_describe(status));
	n = read(sp[0], lines, sizeof(lines) - 1);
	lines[n > 0 ? n : 0] = '\0';
	printf("the start-up stderr socket received:\n%s", lines);
	TBR_CHECK(strstr(lines, "event=timeout") != NULL && strchr(lines, '\n') ==
			  lines + strlen(lines) - 1,
		  "exactly the first cut's line, sent while fd 2 was still stderr");
	return 0;
}
