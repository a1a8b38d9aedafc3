/* log_stalled.h - what the regression programs about a stderr with no room share: a child
 * that makes three stalled reads (each must be cut on time), says "ready", waits for the
 * parent's go on fd 4 and makes a fourth; its diagnostics go to the control pipe on fd 3
 * (stderr is full); and the parent's reading of that pipe. */
#ifndef TB_LOG_STALLED_H
#define TB_LOG_STALLED_H

#include <poll.h>

#include "spawn.h"

#define LIMIT_MS 300
#define SLACK_MS 1500

/* Diagnostics go to the control pipe (fd 3): stderr is full. */
static void say(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0 && write(3, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0)
		_exit(3);
}

/* One stalled call: must be cut on time. Returns 0, or 1 after saying why. */
static int stalled_read(int port, int n)
{
	char c = 'x';
	int fd = tbr_connect(port);
	double start, took;
	ssize_t r;

	if (write(fd, &c, 1) != 1)
		return say("FAIL write: %s\n", strerror(errno)), 1;
	start = tbt_now_ms();
	r = read(fd, &c, 1);
	took = tbt_now_ms() - start;
	close(fd);
	if (r != -1 || errno != ETIMEDOUT || took < LIMIT_MS || took > LIMIT_MS + SLACK_MS)
		return say("FAIL cut %d: read returned %zd %s after %.0f ms\n", n, r,
			   tbt_errno_name(errno), took), 1;
	say("cut %d after %.0f ms\n", n, took);
	return 0;
}

static int stalled_child(void)
{
	int port, lfd = tbr_listen(&port);
	char go;

	for (int i = 1; i <= 3; i++)
		if (stalled_read(port, i) != 0)
			return 1;
	say("ready\n");
	if (read(4, &go, 1) != 1) /* the parent drains the pipe, then says go */
		return say("FAIL no go\n"), 1;
	if (stalled_read(port, 4) != 0)
		return 1;
	close(lfd);
	return 0;
}

/* Reads the control pipe until `want` is seen or it closes. */
static void relay_until(int fd, const char *want, char *log, size_t len)
{
	size_t got = strlen(log);

	while (strstr(log, want) == NULL && strstr(log, "FAIL") == NULL) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, 10000) <= 0)
			break;
		n = read(fd, log + got, len - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		log[got] = '\0';
	}
}

#endif
