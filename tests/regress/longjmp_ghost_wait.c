/* longjmp_ghost_wait.c - a governed read that a signal handler jumps out of (the alarm() +
 * siglongjmp timeout idiom) leaves no waiter behind, whichever jump the handler uses.
 *
 * What happened: a blocked governed read records itself as a waiter on its socket and
 * takes the record back when the read returns. A handler that siglongjmp()s out of the read
 * skips that; the record was ended only when the same thread next waited from a frame at or
 * above the abandoned one. A program that, after the jump, lets the socket rest - no
 * governed wait on that thread, or the next one from a deeper frame - kept a ghost waiter:
 * the watchdog saw a read waiting on a silent socket, cut it at the read timeout, and the
 * next healthy exchange failed with ETIMEDOUT. Natively it succeeds.
 * The sequence, read_timeout 1s, an echo server that never answers "stall":
 * (a) four threads, one per jump (siglongjmp, longjmp, _longjmp, __longjmp_chk): each sends
 *     "stall" and blocks in read; SIGUSR1's handler jumps out; the thread then waits on a
 *     pipe (no governed wait). The sockets rest 1.5 s; each thread exchanges "ping" -> must
 *     work.
 * (b) a handler that runs while its thread is blocked in a governed read does a setjmp and
 *     longjmp of its own and returns (SA_RESTART): the read goes on and returns the answer
 *     the server sends 300 ms later, as natively.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "regress.h"

/* Not declared by <setjmp.h> under this name: FORTIFY builds reach it through a redirect. */
extern void __longjmp_chk(sigjmp_buf env, int val) __attribute__((noreturn));

#define NJUMPS 4

static int port;
static int go[2]; /* one byte per thread: the rest is over, exchange now */

/* Echoes each line back, except lines starting with "stall" (no answer) and "late"
 * (answered 300 ms later). Line by line: "stall\n" and "ping\n" may arrive in one read. */
static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];
	size_t have = 0;
	ssize_t n;

	while ((n = read(fd, buf + have, sizeof(buf) - have)) > 0) {
		char *line = buf, *nl;

		have += (size_t)n;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf))) != NULL) {
			size_t len = (size_t)(nl - line) + 1;

			if (strncmp(line, "late", 4) == 0)
				tbt_sleep_ms(300); /* the peer's own pace, not a synchronisation */
			if (strncmp(line, "stall", 5) != 0 && write(fd, line, len) != (ssize_t)len)
				goto out;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf))
			break;
	}
out:
	close(fd);
	return NULL;
}

struct jumper {
	const char *name;
	void (*jump)(sigjmp_buf, int);
	pthread_t t;
	atomic_int tid, jumped, result; /* result: 0 running, 1 ok, 2 failed */
	char why[128];
};

static void do_siglongjmp(sigjmp_buf b, int v) { siglongjmp(b, v); }
static void do_longjmp(sigjmp_buf b, int v) { longjmp(b, v); }
static void do_ulongjmp(sigjmp_buf b, int v) { _longjmp(b, v); }
static void do_longjmp_chk(sigjmp_buf b, int v) { __longjmp_chk(b, v); }

static struct jumper jumpers[NJUMPS] = {
	{ .name = "siglongjmp", .jump = do_siglongjmp },
	{ .name = "longjmp", .jump = do_longjmp },
	{ .name = "_longjmp", .jump = do_ulongjmp },
	{ .name = "__longjmp_chk", .jump = do_longjmp_chk },
};
static __thread struct jumper *self;
static __thread sigjmp_buf here;

static void on_usr1(int sig)
{
	(void)sig;
	self->jump(here, 1);
}

static void *jump_out(void *arg)
{
	struct jumper *j = arg;
	volatile int fd;
	char buf[16], c;
	ssize_t r;

	self = j;
	fd = tbr_connect(port);
	if (write(fd, "stall\n", 6) != 6) {
		snprintf(j->why, sizeof(j->why), "write stall: %s", tbt_errno_name(errno));
		goto fail;
	}
	if (sigsetjmp(here, 1) == 0) {
		atomic_store(&j->tid, (int)syscall(SYS_gettid));
		r = read(fd, buf, sizeof(buf));
		snprintf(j->why, sizeof(j->why), "the stalled read returned %zd", r);
		goto fail;
	}
	atomic_store(&j->jumped, 1);
	/* The socket rests: this thread waits on a pipe, in no governed wait. */
	if (read(go[0], &c, 1) != 1) {
		snprintf(j->why, sizeof(j->why), "read go: %s", tbt_errno_name(errno));
		goto fail;
	}
	if (write(fd, "ping\n", 5) != 5) {
		snprintf(j->why, sizeof(j->why), "write ping after the rest: %s",
			 tbt_errno_name(errno));
		goto fail;
	}
	r = read(fd, buf, sizeof(buf));
	if (r != 5) {
		snprintf(j->why, sizeof(j->why), "read ping after the rest returned %zd %s", r,
			 tbt_errno_name(errno));
		goto fail;
	}
	close(fd);
	atomic_store(&j->result, 1);
	return NULL;
fail:
	atomic_store(&j->result, 2);
	return NULL;
}

static jmp_buf nested;
static atomic_int nested_ran;

static int main_tid;
static pthread_t main_thread;

/* Signals the main thread once it blocks in its read. */
static void *kick(void *arg)
{
	(void)arg;
	while (!tbr_thread_sleeping(main_tid))
		sched_yield();
	pthread_kill(main_thread, SIGUSR2);
	return NULL;
}

static void local_jump(int sig)
{
	(void)sig;
	if (setjmp(nested) == 0)
		longjmp(nested, 1);
	atomic_store(&nested_ran, 1);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	pthread_t kicker;
	int lfd, fd;
	char buf[16];
	ssize_t r;
	double t0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, echo);
	TBR_CHECK(pipe(go) == 0, "pipe: %s", strerror(errno));

	/* (a) jump out of a blocked read, then rest */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < NJUMPS; i++) {
		struct jumper *j = &jumpers[i];

		TBR_CHECK(pthread_create(&j->t, NULL, jump_out, j) == 0, "pthread_create");
		while (atomic_load(&j->result) == 0 &&
		       (atomic_load(&j->tid) == 0 || !tbr_thread_sleeping(atomic_load(&j->tid))))
			sched_yield();
		TBR_CHECK(atomic_load(&j->result) == 0, "%s: %s", j->name, j->why);
		pthread_kill(j->t, SIGUSR1);
		while (atomic_load(&j->result) == 0 && !atomic_load(&j->jumped))
			sched_yield();
		TBR_CHECK(atomic_load(&j->result) == 0, "%s: %s", j->name, j->why);
	}
	tbt_sleep_ms(1500); /* the rest: longer than the read timeout */
	TBR_CHECK(write(go[1], "xxxx", NJUMPS) == NJUMPS, "write go");
	for (int i = 0; i < NJUMPS; i++) {
		pthread_join(jumpers[i].t, NULL);
		TBR_CHECK(atomic_load(&jumpers[i].result) == 1, "(a) %s: %s", jumpers[i].name,
			  jumpers[i].why);
	}
	fprintf(stderr, "(a) a jump out of a read, then a 1.5 s rest: ok\n");

	/* (b) a handler's own setjmp/longjmp inside a blocked read */
	sa.sa_handler = local_jump;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR2, &sa, NULL);
	fd = tbr_connect(port);
	TBR_CHECK(write(fd, "late\n", 5) == 5, "write late: %s", tbt_errno_name(errno));
	main_tid = (int)syscall(SYS_gettid);
	main_thread = pthread_self();
	TBR_CHECK(pthread_create(&kicker, NULL, kick, NULL) == 0, "pthread_create");
	t0 = tbt_now_ms();
	r = read(fd, buf, sizeof(buf));
	TBR_CHECK(r == 5 && memcmp(buf, "late\n", 5) == 0,
		  "(b) the read around the handler returned %zd %s after %.0f ms", r,
		  tbt_errno_name(errno), tbt_now_ms() - t0);
	pthread_join(kicker, NULL);
	TBR_CHECK(atomic_load(&nested_ran), "(b) the handler's own longjmp did not land");
	close(fd);
	fprintf(stderr, "(b) a handler's own longjmp inside a read: ok\n");
	return 0;
}
