/*
 * sendcheck.c - what a governed blocking send must keep of libc's send, now that timebox
 * makes the send that cannot block as its system call (real.h, tb_real_send_nowait).
 *
 * usage: sendcheck MODE
 *
 *   cancel  A thread connected to our own listener on 127.0.0.1 gets a cancellation
 *           request while it has cancellation disabled, enables it, and calls send(): a
 *           cancellation point acts on a pending request before the call, so the thread
 *           ends there and nothing is sent. Prints "canceled=1 bytes=0" (natively too).
 *   count   Sends 10 one-byte messages on such a socket, then reads the counter of
 *           sendwrap.so (tests/e2e/lib/sendwrap.c), a library preloaded after timebox that
 *           wraps send: every send must still reach it. Prints "sends=10 wrapped=N".
 *   nbcancel  As cancel, on a non-blocking socket (whose reads and sends cannot block, so
 *           timebox makes them as their system calls too), once for read() and once for
 *           send(): each is still a cancellation point. Prints
 *           "read: canceled=1 bytes=0 send: canceled=1 bytes=0".
 *   nbcount As count, on a non-blocking socket, and the 10 bytes echoed back are read one
 *           read() and one recv() at a time: every call reaches sendwrap.so. Prints
 *           "sends=10 wrapped=10 reads=10 rwrapped=10".
 *
 *   gather  writev (then sendmsg) of 3 MB in 100 pieces of uneven sizes through a 64 KB
 *           send buffer to a reader that takes 16 KB at a time: the try moves what fits
 *           and the rest goes out under a wait. Prints "writev=N sendmsg=N same=1" when
 *           each call returned every byte and the reader got them all, in order.
 *   stall   writev of 3 MB to a reader that never reads: the call blocks once the buffers
 *           are full, so a write timeout must cut it. Prints "rc=R errno=E ms=X".
 *
 * The socket is governed under any TIMEBOX_* limit (127.0.0.1 is a destination like any
 * other). Exit 0 when the run completed (the test compares the output), 2 on setup errors.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int listener, client_fd, server_fd;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: the thread disabled cancellation; 2: the request is pending */

static void die(const char *what)
{
	fprintf(stderr, "sendcheck: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void pair(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	if ((listener = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    bind(listener, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(listener, 1) < 0 ||
	    getsockname(listener, (struct sockaddr *)&a, &len) < 0)
		die("listener");
	if ((client_fd = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(client_fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	if ((server_fd = accept(listener, NULL, NULL)) < 0)
		die("accept");
}

static void set_stage(int s)
{
	pthread_mutex_lock(&lock);
	stage = s;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void await_stage(int s)
{
	pthread_mutex_lock(&lock);
	while (stage < s)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

/* The thread's call: send(), or (arg non-NULL) read() of the byte the server sent. */
static void *sender(void *arg)
{
	char c;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	set_stage(1);
	await_stage(2);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL); /* not a cancellation point */
	/* Each is one: the pending request ends the thread here. */
	if (arg != NULL)
		(void)!read(client_fd, &c, 1);
	else
		send(client_fd, "x", 1, 0);
	return NULL;
}

static void nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl");
}

/* One cancelled call; `rd`: a read of the byte the server sent (what it left unread is
 * counted), otherwise a send (what reached the server is counted). */
static void cancel_one(bool rd, const char *label)
{
	pthread_t t;
	void *ret;
	char c;
	ssize_t got;

	stage = 0;
	if (rd && send(server_fd, "z", 1, 0) != 1)
		die("send");
	if (pthread_create(&t, NULL, sender, rd ? (void *)1 : NULL) != 0)
		die("pthread_create");
	await_stage(1);
	pthread_cancel(t);
	set_stage(2);
	pthread_join(t, &ret);
	if (rd) { /* the byte is still there: the read never ran */
		struct pollfd p = { .fd = client_fd, .events = POLLIN };

		got = poll(&p, 1, 1000) == 1 && recv(client_fd, &c, 1, MSG_DONTWAIT) == 1 ? 0 : 1;
	} else {
		got = recv(server_fd, &c, 1, MSG_DONTWAIT);
	}
	printf("%scanceled=%d bytes=%zd", label, ret == PTHREAD_CANCELED,
	       got < 0 ? (ssize_t)0 : got);
}

static int cancel_mode(bool nb)
{
	pair();
	if (!nb) {
		cancel_one(false, "");
		printf("\n");
		return 0;
	}
	nonblocking(client_fd);
	cancel_one(true, "read: ");
	cancel_one(false, " send: ");
	printf("\n");
	return 0;
}

static int count_mode(void)
{
	unsigned *wrapped;
	char buf[16];
	size_t got = 0;

	pair();
	for (int i = 0; i < 10; i++)
		if (send(client_fd, "y", 1, 0) != 1)
			die("send");
	while (got < 10) {
		ssize_t n = recv(server_fd, buf, sizeof(buf), 0);

		if (n <= 0)
			die("recv");
		got += (size_t)n;
	}
	wrapped = dlsym(RTLD_DEFAULT, "sendwrap_calls");
	printf("sends=10 wrapped=%d\n", wrapped != NULL ? (int)*wrapped : -1);
	return 0;
}

static int nbcount_mode(void)
{
	unsigned *wrapped, *rwrapped;
	char buf[16];
	int reads = 0;

	pair();
	nonblocking(client_fd);
	for (int i = 0; i < 10; i++)
		if (send(client_fd, "y", 1, 0) != 1)
			die("send");
	if (write(server_fd, "0123456789", 10) != 10) /* not send: only the client's count */
		die("write");
	while (reads < 10) { /* one byte per call, read() and recv() in turn */
		struct pollfd p = { .fd = client_fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 5000) != 1)
			die("poll");
		n = reads % 2 ? recv(client_fd, buf, 1, 0) : read(client_fd, buf, 1);
		if (n != 1)
			die("read");
		reads++;
	}
	wrapped = dlsym(RTLD_DEFAULT, "sendwrap_calls");
	rwrapped = dlsym(RTLD_DEFAULT, "readwrap_calls");
	printf("sends=10 wrapped=%d reads=%d rwrapped=%d\n", wrapped != NULL ? (int)*wrapped : -1,
	       reads, rwrapped != NULL ? (int)*rwrapped : -1);
	return 0;
}

#define GATHER_PIECES 100
#define GATHER_BYTES (3u << 20)

static unsigned char *gather_buf;
static size_t reader_got, reader_bad;

/* The byte at offset i of the gathered stream. */
static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 2654435761u >> 13);
}

static void *reader(void *arg)
{
	size_t want = (size_t)(uintptr_t)arg;
	unsigned char buf[16384];

	while (reader_got < want) {
		ssize_t n = recv(server_fd, buf, sizeof(buf), 0);

		if (n <= 0)
			break;
		for (ssize_t k = 0; k < n; k++)
			reader_bad += buf[k] != pattern(reader_got + (size_t)k);
		reader_got += (size_t)n;
	}
	return NULL;
}

/* The stream's bytes in GATHER_PIECES pieces of uneven sizes, from offset `from`. */
static void pieces(struct iovec *v, size_t from)
{
	size_t off = 0;

	for (int i = 0; i < GATHER_PIECES; i++) {
		size_t len = i + 1 < GATHER_PIECES ? (GATHER_BYTES / GATHER_PIECES) / 2 +
							     (size_t)(i * 7919) % (GATHER_BYTES / GATHER_PIECES)
						   : GATHER_BYTES - off;

		v[i].iov_base = gather_buf + from + off;
		v[i].iov_len = len;
		off += len;
	}
}

static void small_buffers(void)
{
	int small = 65536;

	setsockopt(client_fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(server_fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
}

static int gather_mode(void)
{
	struct iovec v[GATHER_PIECES];
	struct msghdr m = { .msg_iov = v, .msg_iovlen = GATHER_PIECES };
	pthread_t t;
	ssize_t w, sm;

	pair();
	small_buffers();
	gather_buf = malloc(2 * GATHER_BYTES);
	if (gather_buf == NULL)
		die("malloc");
	for (size_t i = 0; i < 2 * GATHER_BYTES; i++)
		gather_buf[i] = pattern(i);
	pthread_create(&t, NULL, reader, (void *)(uintptr_t)(2 * GATHER_BYTES));
	pieces(v, 0);
	w = writev(client_fd, v, GATHER_PIECES);
	pieces(v, GATHER_BYTES);
	sm = sendmsg(client_fd, &m, 0);
	pthread_join(t, NULL);
	printf("writev=%zd sendmsg=%zd same=%d\n", w, sm,
	       reader_got == 2 * GATHER_BYTES && reader_bad == 0);
	return 0;
}

static int stall_mode(void)
{
	struct iovec v[GATHER_PIECES];
	struct timespec a, b;
	ssize_t w;
	int err;

	pair();
	small_buffers();
	gather_buf = calloc(1, 2 * GATHER_BYTES);
	if (gather_buf == NULL)
		die("calloc");
	pieces(v, 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	w = writev(client_fd, v, GATHER_PIECES);
	err = errno;
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("rc=%zd errno=%s ms=%.0f\n", w, w < 0 ? strerror(err) : "-",
	       (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "gather") == 0)
		return gather_mode();
	if (argc == 2 && strcmp(argv[1], "stall") == 0)
		return stall_mode();
	if (argc == 2 && strcmp(argv[1], "cancel") == 0)
		return cancel_mode(false);
	if (argc == 2 && strcmp(argv[1], "nbcancel") == 0)
		return cancel_mode(true);
	if (argc == 2 && strcmp(argv[1], "count") == 0)
		return count_mode();
	if (argc == 2 && strcmp(argv[1], "nbcount") == 0)
		return nbcount_mode();
	fprintf(stderr, "usage: sendcheck cancel|count|gather|stall\n");
	return 2;
}
