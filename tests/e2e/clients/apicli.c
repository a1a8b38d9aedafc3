/*
 * apicli.c - a program built against include/timebox.h's deadline API, which runs the same
 * with and without the library preloaded (the header resolves the API at run time).
 *
 * usage: apicli --port N [--stall-ms S]
 *
 * Steps, each printed as a logfmt line "step=NAME rc=R errno=E ms=X remaining=M":
 *   none       remaining_ms() before any begin (-1 both ways)
 *   begin300   begin(300)
 *   begin1000  begin(1000) nested inside: the deadline stays the outer 300 ms
 *   read       GET /stall?ms=S (default 1500) and one read of the answer, inside both levels;
 *              ms counts from begin300. Preloaded: fails with ETIMEDOUT at the 300 ms.
 *              Natively: the answer arrives after S ms.
 *   end1000    end(): the outer level again (remaining is what is left of its 300 ms)
 *   spent      a new connection and GET /ok inside the spent outer level: preloaded, the
 *              connect or the send fails at once with ETIMEDOUT (nothing sent)
 *   end300     end(): no deadline (remaining -1)
 *   after      GET /ok again: succeeds both ways
 * Exit 0 when every call returned (the caller judges the lines), 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../../include/timebox.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double t0;

static void say(const char *step, long rc, int err)
{
	printf("step=%s rc=%ld errno=%s ms=%.1f remaining=%ld\n", step, rc,
	       err ? strerrorname_np(err) : "0", now_ms() - t0, timebox_remaining_ms());
	fflush(stdout);
}

/* Connects and sends a GET of path; returns the fd, or -1 with errno (the fd closed). */
static int get(int port, const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char req[256];
	int fd = socket(AF_INET, SOCK_STREAM, 0), n, err;

	if (fd < 0)
		return -1;
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || send(fd, req, (size_t)n, 0) != n) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/* One read of the answer on fd: its byte count, or -1 with errno. */
static long answer(int fd)
{
	char buf[4096];

	return (long)read(fd, buf, sizeof(buf));
}

int main(int argc, char **argv)
{
	int port = 0, stall = 1500, fd;
	char path[64];
	long rc;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--port") == 0)
			port = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--stall-ms") == 0)
			stall = atoi(argv[i + 1]);
	}
	if (port <= 0) {
		fprintf(stderr, "usage: apicli --port N [--stall-ms S]\n");
		return 2;
	}
	t0 = now_ms();
	say("none", 0, 0);
	t0 = now_ms();
	rc = timebox_deadline_begin(300);
	say("begin300", rc, rc < 0 ? errno : 0);
	rc = timebox_deadline_begin(1000);
	say("begin1000", rc, rc < 0 ? errno : 0);
	snprintf(path, sizeof(path), "/stall?ms=%d", stall);
	fd = get(port, path);
	rc = fd < 0 ? -1 : answer(fd);
	say("read", rc, rc < 0 ? errno : 0);
	if (fd >= 0)
		close(fd);
	timebox_deadline_end();
	say("end1000", 0, 0);
	fd = get(port, "/ok");
	rc = fd < 0 ? -1 : answer(fd);
	say("spent", rc, rc < 0 ? errno : 0);
	if (fd >= 0)
		close(fd);
	timebox_deadline_end();
	say("end300", 0, 0);
	fd = get(port, "/ok");
	rc = fd < 0 ? -1 : answer(fd);
	say("after", rc, rc < 0 ? errno : 0);
	if (fd >= 0)
		close(fd);
	return 0;
}
