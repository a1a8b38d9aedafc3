/*
 * evcli.c - an event-loop client written on raw epoll, the way libuv and libevent drive
 * sockets: non-blocking connect, EPOLLOUT until connected and while sending, EPOLLIN while
 * receiving (an EPOLL_CTL_MOD at each switch), epoll_wait with a short timeout standing in
 * for a loop's timers. Either one HTTP/1.0 GET, or (--echo N) N echo exchanges.
 *
 * usage: evcli [--et] [--oneshot] [--slice MS] [--echo N [--size B]] PORT [PATH]
 *
 *   --et        edge-triggered registrations (EPOLLET)
 *   --oneshot   one-shot registrations (EPOLLONESHOT), re-armed by MOD each time
 *   --slice MS  epoll_wait timeout in ms (default -1: none); the loop just waits again
 *   --echo N    N exchanges of B bytes (default 64) against an echo server, on one
 *               connection; prints "exchanges=N secs=S" and the body is not printed
 *
 * GET: prints the response (headers and body) to stdout. Any failure prints
 * "evcli: STEP: strerror(errno)" to stderr and exits 1 (STEP: connect, send, recv, epoll).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint32_t mode_flags;
static int slice_ms = -1;

static void die(const char *step)
{
	fprintf(stderr, "evcli: %s: %s\n", step, strerror(errno));
	exit(1);
}

/* Registers (or re-registers) fd for `events` plus the mode's flags. */
static void want(int ep, int fd, uint32_t events, bool *added)
{
	struct epoll_event ev = { .events = events | mode_flags, .data.fd = fd };

	if (epoll_ctl(ep, *added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0)
		die("epoll");
	*added = true;
}

/* Waits until fd reports something (slices of slice_ms, like a loop with a timer). */
static uint32_t await(int ep)
{
	struct epoll_event ev;

	for (;;) {
		int n = epoll_wait(ep, &ev, 1, slice_ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll");
		if (n == 1)
			return ev.events;
	}
}

/* Sends all of buf, waiting for EPOLLOUT whenever the socket is full. */
static void send_all(int ep, int fd, const char *buf, size_t len, bool *added)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN)
			die("send");
		want(ep, fd, EPOLLOUT, added);
		await(ep);
	}
}

/* Reads into buf until `len` bytes (len > 0) or EOF (len == 0: prints what comes).
 * Returns the bytes read. Edge-triggered: reads until EAGAIN before waiting again. */
static size_t recv_some(int ep, int fd, char *buf, size_t cap, size_t len, bool *added)
{
	size_t got = 0;

	want(ep, fd, EPOLLIN, added);
	for (;;) {
		ssize_t n = recv(fd, buf + (len ? got : 0), len ? len - got : cap, 0);

		if (n > 0) {
			if (len == 0)
				fwrite(buf, 1, (size_t)n, stdout);
			got += (size_t)n;
			if (len != 0 && got == len)
				return got;
			continue;
		}
		if (n == 0) {
			if (len != 0) {
				errno = ECONNRESET;
				die("recv");
			}
			return got;
		}
		if (errno != EAGAIN)
			die("recv");
		if (mode_flags & EPOLLONESHOT)
			want(ep, fd, EPOLLIN, added); /* re-arm */
		await(ep);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	long echo = 0, size = 64;
	const char *path = "/";
	bool added = false;
	char buf[65536];
	int i, fd, ep, err;
	socklen_t elen = sizeof(err);

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--et") == 0)
			mode_flags |= EPOLLET;
		else if (strcmp(argv[i], "--oneshot") == 0)
			mode_flags |= EPOLLONESHOT;
		else if (strcmp(argv[i], "--slice") == 0 && i + 1 < argc)
			slice_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "--echo") == 0 && i + 1 < argc)
			echo = atol(argv[++i]);
		else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
			size = atol(argv[++i]);
		else
			break;
	}
	if (i >= argc || size <= 0 || size > (long)sizeof(buf)) {
		fprintf(stderr, "usage: evcli [--et] [--oneshot] [--slice MS] [--echo N "
				"[--size B]] PORT [PATH]\n");
		return 2;
	}
	sa.sin_port = htons((uint16_t)atoi(argv[i]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (i + 1 < argc)
		path = argv[i + 1];

	ep = epoll_create1(EPOLL_CLOEXEC);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (ep < 0 || fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS)
		die("connect");
	want(ep, fd, EPOLLOUT, &added);
	await(ep);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
		errno = err;
		die("connect");
	}

	if (echo > 0) {
		struct timespec t0, t1;

		memset(buf, 'x', (size_t)size);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (long k = 0; k < echo; k++) {
			send_all(ep, fd, buf, (size_t)size, &added);
			recv_some(ep, fd, buf, sizeof(buf), (size_t)size, &added);
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("exchanges=%ld secs=%.3f\n", echo,
		       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	} else {
		int n = snprintf(buf, sizeof(buf), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
				 path);

		send_all(ep, fd, buf, (size_t)n, &added);
		recv_some(ep, fd, buf, sizeof(buf), 0, &added);
	}
	close(fd);
	close(ep);
	return 0;
}
