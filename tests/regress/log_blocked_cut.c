/* log_blocked_cut.c - a blocked log write held up the cut, and close() spun behind it.
 *
 * What happened: the watchdog wrote the expiry's log line before shutting the socket
 * down, while holding `busy` (the flag that makes close() wait for it). With stderr a
 * pipe nobody reads (a full pipe, a stalled collector), the write blocked: the stalled read
 * was never cut, and the program's close() of that socket spun in sched_yield for ever.
 * The sequence: stderr is a full pipe; a thread reads a silent socket (read timeout 500 ms)
 * -> the read must fail with ETIMEDOUT at its limit, and close() of the socket must return
 * at once. (Whether the watchdog itself may block on the log is the log's own concern.)
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "regress.h"

#define SAVED_STDERR 100
#define PIPE_READ 101

struct op {
	int fd;
	ssize_t r;
	int err;
	double ended;
	atomic_int done;
};

static void *read_it(void *arg)
{
	struct op *o = arg;
	char c;

	o->r = read(o->fd, &c, 1);
	o->err = errno;
	o->ended = tbt_now_ms();
	atomic_store(&o->done, 1);
	return NULL;
}

static void *close_it(void *arg)
{
	struct op *o = arg;

	o->r = close(o->fd);
	o->ended = tbt_now_ms();
	atomic_store(&o->done, 1);
	return NULL;
}

static bool wait_done(struct op *o, double until)
{
	while (!atomic_load(&o->done) && tbt_now_ms() < until)
		tbt_sleep_ms(10);
	return atomic_load(&o->done);
}

/* Before the library is loaded: stderr becomes a pipe, filled to the brim. */
static void full_stderr(void)
{
	int p[2], fl;
	char junk[4096];

	if (getenv("TBR_CHILD") != NULL)
		return;
	memset(junk, 'j', sizeof(junk));
	TBR_CHECK(dup2(2, SAVED_STDERR) == SAVED_STDERR && pipe(p) == 0, "pipe");
	TBR_CHECK(dup2(p[0], PIPE_READ) == PIPE_READ, "dup2");
	fl = fcntl(p[1], F_GETFL);
	fcntl(p[1], F_SETFL, fl | O_NONBLOCK);
	while (write(p[1], junk, sizeof(junk)) > 0)
		;
	while (write(p[1], junk, 1) > 0)
		;
	fcntl(p[1], F_SETFL, fl);
	dup2(p[1], 2);
	close(p[0]);
	close(p[1]);
}

int main(int argc, char **argv)
{
	struct op rd = { 0 }, cl = { 0 };
	pthread_t tr, tc;
	int port, lfd;
	double t0;
	bool cut, closed;

	(void)argc;
	full_stderr();
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=500ms", "TIMEBOX_LOG=stderr", NULL);
	lfd = tbr_listen(&port);
	rd.fd = cl.fd = tbr_connect(port);
	t0 = tbt_now_ms();
	pthread_create(&tr, NULL, read_it, &rd);
	cut = wait_done(&rd, t0 + 500 + 2000);
	if (cut)
		pthread_join(tr, NULL);
	pthread_create(&tc, NULL, close_it, &cl);
	closed = wait_done(&cl, tbt_now_ms() + 1000);
	/* Our own messages go to the real stderr again; the full pipe stays where the
	 * library writes, so a stuck log write stays stuck until the end. */
	dup2(SAVED_STDERR, 2);
	TBR_CHECK(cut, "the read was not cut within 2 s of its 500 ms limit (log blocked)");
	printf("read returned %zd (%s) after %.0f ms\n", rd.r, tbt_errno_name(rd.err),
	       rd.ended - t0);
	TBR_CHECK(rd.r == -1 && rd.err == ETIMEDOUT, "read returned %zd %s", rd.r,
		  tbt_errno_name(rd.err));
	TBR_CHECK(rd.ended - t0 >= 500, "cut early at %.0f ms", rd.ended - t0);
	TBR_CHECK(closed, "close() did not return within 1 s (spinning behind the log)");
	pthread_join(tc, NULL);
	printf("close returned %zd after %.1f ms\n", cl.r, cl.ended - rd.ended);
	/* Unblock whatever still writes to the pipe before exiting. */
	fcntl(PIPE_READ, F_SETFL, O_NONBLOCK);
	{
		char buf[4096];

		while (read(PIPE_READ, buf, sizeof(buf)) > 0)
			;
	}
	close(lfd);
	return 0;
}
