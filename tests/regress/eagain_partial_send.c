/* eagain_partial_send.c - under on_timeout = eagain, a send cut as its wait began said ETIMEDOUT.
 *
 * What happened: with TIMEBOX_ON_TIMEOUT=eagain the first report of an expiry on a socket
 * is EAGAIN (what a program written for SO_SNDTIMEO expects from the send that timed out),
 * every later one ETIMEDOUT. A blocking send is tried first without blocking; when the
 * socket's buffer takes only part (or none) of it, the rest is sent under a wait begun
 * then. When that wait began past the call's deadline, the expiry was reported there - the
 * "first" report used up - and then swallowed: with some bytes sent, the send returned
 * their count and the next send said ETIMEDOUT; with none, the same send's end reported
 * it a second time, ETIMEDOUT. The program never saw its EAGAIN.
 * The sequence, made deterministic: TIMEBOX_DEADLINE=200ms, on_timeout=eagain, a peer that
 * never reads; a second preload library puts 400 ms after timebox's first non-blocking try
 * of a blocking send, as a preemption would. (1) An 8 MB send: part of it is taken, the
 * send returns the count; the next send must fail with EAGAIN, the one after with
 * ETIMEDOUT. (2) On another destination, the buffer filled first: the blocking send must
 * fail with EAGAIN, the next with ETIMEDOUT.
 */
#include <signal.h>

#include "regress.h"
#include "delaylib.h"

/* Preloaded after timebox: once per EPS_DELAY set, 400 ms after a non-blocking send. */
static const char delay_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdlib.h>\n"
	"#include <sys/socket.h>\n#include <time.h>\n"
	"ssize_t send(int fd, const void *b, size_t n, int fl)\n"
	"{\n"
	"	static ssize_t (*real)(int, const void *, size_t, int);\n"
	"	struct timespec ts = { 0, 400 * 1000000 };\n"
	"	ssize_t r;\n"
	"	if (real == NULL)\n"
	"		real = (ssize_t (*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, \"send\");\n"
	"	r = real(fd, b, n, fl);\n"
	"	if ((fl & MSG_DONTWAIT) && getenv(\"EPS_DELAY\") != NULL) {\n"
	"		unsetenv(\"EPS_DELAY\");\n"
	"		nanosleep(&ts, NULL); /* descheduled after the try */\n"
	"	}\n"
	"	return r;\n"
	"}\n";

#define BIG (8 << 20)

/* A connection to a peer that accepts and never reads; the listener stays open. */
static int stuck_peer(int *peer)
{
	int port, lfd = tbr_listen(&port), fd = tbr_connect(port);

	*peer = accept(lfd, NULL, NULL);
	TBR_CHECK(*peer >= 0, "accept: %s", strerror(errno));
	return fd;
}

static void expect_fail(int fd, const char *what, int want)
{
	char b[100] = { 0 };
	ssize_t r;

	errno = 0;
	r = send(fd, b, sizeof(b), 0);
	TBR_CHECK(r < 0 && errno == want, "%s: %zd, errno %s (want %s)", what, r,
		  tbt_errno_name(errno), tbt_errno_name(want));
}

int main(int argc, char **argv)
{
	static char big[BIG];
	int fd, peer1, peer2;
	ssize_t r;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(delay_c);
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=200ms", "TIMEBOX_ON_TIMEOUT=eagain", NULL);
	tbr_remove_built();
	signal(SIGPIPE, SIG_IGN);

	/* (1) part of the send taken, then the wait begins past the deadline */
	fd = stuck_peer(&peer1);
	setenv("EPS_DELAY", "1", 1);
	r = send(fd, big, sizeof(big), 0);
	TBR_CHECK(r > 0 && r < BIG, "the 8 MB send returned %zd (%s): want part of it", r,
		  r < 0 ? tbt_errno_name(errno) : "-");
	printf("partial send: %zd bytes\n", r);
	expect_fail(fd, "the send after the partial one (the first report)", EAGAIN);
	expect_fail(fd, "the next send (a later report)", ETIMEDOUT);
	close(fd);

	/* (2) nothing taken: the buffer is full before the blocking send */
	fd = stuck_peer(&peer2);
	while (send(fd, big, sizeof(big), MSG_DONTWAIT) > 0)
		;
	TBR_CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "filling the buffer: %s",
		  tbt_errno_name(errno));
	setenv("EPS_DELAY", "1", 1);
	expect_fail(fd, "the blocking send on a full buffer (the first report)", EAGAIN);
	expect_fail(fd, "the next send (a later report)", ETIMEDOUT);
	close(fd);
	close(peer1);
	close(peer2);
	return 0;
}
