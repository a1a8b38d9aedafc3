/* server.c - the stress driver's fault server: one listener per downstream kind on
 * 127.0.0.1, a thread per connection, and a log of what each connection really did. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stress.h"

static struct srec *slog;
static int listeners[NKIND];
static int fillers[64], nfillers;

struct srec *server_log(void)
{
	return slog;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int read_full(int fd, void *b, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)b + got, n - got);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static int send_full(int fd, const void *b, size_t n)
{
	size_t off = 0;

	while (off < n) {
		ssize_t r = send(fd, (const char *)b + off, n - off, MSG_NOSIGNAL);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += (size_t)r;
	}
	return 0;
}

/* Sends the response payload [off, off+n) of `seed`. */
static int send_payload(int fd, uint64_t seed, uint64_t off, size_t n)
{
	unsigned char buf[16384];

	while (n > 0) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);

		fill(seed, off, buf, k);
		if (send_full(fd, buf, k) < 0)
			return -1;
		off += k;
		n -= k;
	}
	return 0;
}

/* Waits for the client's end of the stream (or end_ms), and says when it came. */
static void await_eof(int fd, struct srec *r, uint32_t end_ms)
{
	int64_t end = end_ms ? now_ns() + (int64_t)end_ms * 1000000 : 0;
	char buf[4096];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = end ? (int)((end - now_ns()) / 1000000) : -1;

		if (end && left <= 0)
			return; /* a bounded stall: the server ends it */
		if (poll(&p, 1, left) <= 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n > 0) {
			r->side_bytes += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		r->t_eof = now_ns();
		r->eof_kind = n == 0 ? 1 : 2;
		return;
	}
}

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg, kind = -1;
	struct srec dummy = { 0 }, *r = &dummy;
	int64_t t_acc = now_ns(), last;
	struct req q;
	uint64_t h = FNV0;

	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	getsockname(fd, (struct sockaddr *)&me, &len);
	for (int k = 0; k < NKIND; k++) {
		struct sockaddr_in a;
		socklen_t l = sizeof(a);

		if (getsockname(listeners[k], (struct sockaddr *)&a, &l) == 0 &&
		    a.sin_port == me.sin_port)
			kind = k;
	}
	if (read_full(fd, &q, sizeof(q)) < 0 || q.magic != REQ_MAGIC || (int)q.kind != kind)
		goto out;
	if (q.conn_id < MAX_CONNS_LOG)
		r = &slog[q.conn_id];
	r->kind = (uint8_t)kind;
	r->t_accept = t_acc;
	r->seen = 1;
	last = now_ns();
	switch (kind) {
	case K_NORMAL:
	case K_SINK:
		for (uint32_t got = 0; got < q.upload_len;) {
			unsigned char buf[16384];
			size_t k = q.upload_len - got;
			ssize_t n;

			if (kind == K_SINK && k > q.chunk)
				k = q.chunk;
			if (k > sizeof(buf))
				k = sizeof(buf);
			n = read(fd, buf, k);
			if (n <= 0)
				goto eof;
			h = fnv(h, buf, (size_t)n);
			got += (uint32_t)n;
			float gap = (float)(now_ns() - last) / 1e6f;
			if (gap > r->max_gap_ms)
				r->max_gap_ms = gap;
			if (kind == K_SINK)
				sleep_ms(q.gap_ms);
			last = now_ns();
		}
		sleep_ms(q.delay_ms);
		if ((float)(now_ns() - last) / 1e6f > r->max_gap_ms)
			r->max_gap_ms = (float)(now_ns() - last) / 1e6f;
		r->t_first = now_ns();
		if (send_full(fd, &h, sizeof(h)) < 0 || send_payload(fd, q.seed, 0, q.resp_len) < 0)
			goto eof;
		break;
	case K_DRIP:
	case K_STREAM:
	case K_RESET:
		sleep_ms(q.delay_ms);
		for (uint32_t i = 0, off = 0; i < q.n; i++) {
			uint32_t k = i + 1 == q.n ? q.resp_len - off : q.resp_len / q.n;
			float gap = (float)(now_ns() - last) / 1e6f;

			if (gap > r->max_gap_ms)
				r->max_gap_ms = gap;
			if (r->t_first == 0)
				r->t_first = now_ns();
			if (send_payload(fd, q.seed, off, k) < 0)
				goto eof;
			last = now_ns();
			off += k;
			if (kind == K_RESET && i + 1 >= q.n / 2) {
				struct linger lg = { 1, 0 };

				setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				r->t_done = now_ns();
				r->done = 1;
				goto out;
			}
			if (i + 1 < q.n)
				sleep_ms(q.gap_ms);
		}
		break;
	case K_STALL:
		await_eof(fd, r, q.end_ms);
		goto out;
	case K_SIDE:
		break;
	}
	r->t_done = now_ns();
	r->done = 1;
eof:
	await_eof(fd, r, 0);
out:
	close(fd);
	return NULL;
}

static void *acceptor(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	pthread_attr_t at;

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 128 * 1024);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (fd < 0) {
			if (errno == EBADF || errno == EINVAL)
				return NULL;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS)
				sleep_ms(10);
			continue;
		}
		while (pthread_create(&t, &at, serve, (void *)(intptr_t)fd) != 0)
			sleep_ms(5);
	}
}

static int listen_on(int backlog, int rcvbuf, int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (rcvbuf)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, backlog) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* A listener never accepted whose queue we fill ourselves: Linux then drops further SYNs,
 * and a client's connect() hangs as behind a firewall (the fault server's method). */
static int blackhole(int *port)
{
	int lfd = listen_on(0, 0, port);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	while (lfd >= 0 && nfillers < 64) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		fillers[nfillers++] = fd;
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			continue;
		if (errno != EINPROGRESS || poll(&p, 1, 200) == 0)
			return lfd; /* this handshake stays pending: the queue is full */
	}
	return -1;
}

int server_start(int ports[NKIND])
{
	slog = mmap(NULL, MAX_CONNS_LOG * sizeof(*slog), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (slog == MAP_FAILED)
		return -1;
	for (int k = 0; k < NKIND; k++) {
		pthread_t t;

		listeners[k] = k == K_BLACKHOLE ? blackhole(&ports[k]) :
			       listen_on(4096, k == K_SINK ? 16384 : 0, &ports[k]);
		if (listeners[k] < 0)
			return -1;
		if (k != K_BLACKHOLE &&
		    pthread_create(&t, NULL, acceptor, (void *)(intptr_t)listeners[k]) != 0)
			return -1;
	}
	return 0;
}

void server_stop(void)
{
	for (int k = 0; k < NKIND; k++)
		shutdown(listeners[k], SHUT_RDWR);
	for (int i = 0; i < nfillers; i++)
		close(fillers[i]);
}
