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
 *
 * The socket is governed under any TIMEBOX_* limit (127.0.0.1 is a destination like any
 * other). Exit 0 when the run completed (the test compares the output), 2 on setup errors.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

static void *sender(void *arg)
{
	(void)arg;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	set_stage(1);
	await_stage(2);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL); /* not a cancellation point */
	send(client_fd, "x", 1, 0); /* is one: the pending request ends the thread here */
	return NULL;
}

static int cancel_mode(void)
{
	pthread_t t;
	void *ret;
	char c;
	ssize_t got;

	pair();
	if (pthread_create(&t, NULL, sender, NULL) != 0)
		die("pthread_create");
	await_stage(1);
	pthread_cancel(t);
	set_stage(2);
	pthread_join(t, &ret);
	got = recv(server_fd, &c, 1, MSG_DONTWAIT);
	printf("canceled=%d bytes=%zd\n", ret == PTHREAD_CANCELED, got < 0 ? (ssize_t)0 : got);
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

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "cancel") == 0)
		return cancel_mode();
	if (argc == 2 && strcmp(argv[1], "count") == 0)
		return count_mode();
	fprintf(stderr, "usage: sendcheck cancel|count\n");
	return 2;
}
