/* close_range_double_close.c - close_range(fd, fd) must close only what is open when it is
 * called, never an fd another thread opens meanwhile.
 *
 * What happens: close_range() of a range holding a governed socket closes that socket on its
 * own first (shim/hooks_fd.c close_span: tb_real.close(fd), "before the slot goes back") and
 * then calls the real close_range over the whole range. Between the two, the number is free:
 * a socket(), pipe(), accept() or dup() of another thread gets it, and the real close_range
 * closes that new fd under its owner. The owner then reads another thread's connection
 * (make stress: "corrupt bytes", EAGAIN from a blocking readv, EBADF, EOF on a stalled
 * connection, the same fd number in two threads at once; a few per 200,000 calls at 200
 * threads, where a closer calls close_range(fd, fd, 0) on a socket another thread reads).
 * The sequence, made deterministic: a second preload library (this file built with
 * -DDELAY_LIB) holds the real close_range 200 ms, as a preemption would; thread A calls
 * close_range(N, N, 0) on a governed socket N; 100 ms later the main thread opens a pipe and
 * gets N; after A returns, the pipe must still be open.
 *
 * The fix: close_range detaches the governed fds of the range while they are still open,
 * closes the range with the real call, and only then lets their sockets go.
 */
#include <fcntl.h>
#include <pthread.h>
#include <time.h>

#include "regress.h"
#include "delaylib.h"

/* The delaying library, built at run time and preloaded after timebox. */
static const char delay_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <time.h>\n"
	"int close_range(unsigned first, unsigned last, int flags)\n"
	"{\n"
	"	static int (*real)(unsigned, unsigned, int);\n"
	"	struct timespec ts = { 0, 200 * 1000000 };\n"
	"	if (real == NULL)\n"
	"		real = (int (*)(unsigned, unsigned, int))dlsym(RTLD_NEXT, \"close_range\");\n"
	"	nanosleep(&ts, NULL); /* descheduled just before the system call */\n"
	"	return real(first, last, flags);\n"
	"}\n";

static int victim;

static void *closer(void *arg)
{
	(void)arg;
	TBR_CHECK(close_range((unsigned)victim, (unsigned)victim, 0) == 0, "close_range: %s",
		  strerror(errno));
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec ts = { 0, 100 * 1000000 };
	int port, lfd, p[2];
	pthread_t t;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(delay_c);
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	tbr_remove_built();
	lfd = tbr_listen(&port);
	victim = tbr_connect(port); /* governed */
	pthread_create(&t, NULL, closer, NULL);
	nanosleep(&ts, NULL);
	TBR_CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	pthread_join(t, NULL);
	if (p[0] != victim && p[1] != victim) {
		printf("the pipe got %d and %d: fd %d was still open when it was made\n", p[0], p[1],
		       victim);
		return 0;
	}
	TBR_CHECK(fcntl(p[0], F_GETFD) >= 0 && fcntl(p[1], F_GETFD) >= 0,
		  "close_range(%d, %d) closed the pipe (%d, %d) another thread opened after it "
		  "began", victim, victim, p[0], p[1]);
	printf("the pipe (%d, %d) is open\n", p[0], p[1]);
	close(lfd);
	return 0;
}
