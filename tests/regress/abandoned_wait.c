/* abandoned_wait.c - a wait that the program leaves by siglongjmp or pthread_cancel does not
 * outlive it.
 *
 * What happened: a blocked governed read counts itself as a waiter on the socket and
 * uncounts itself when the real read returns. A SIGALRM handler that siglongjmp()s out of
 * the read (the classic alarm() timeout), or pthread_cancel() of the reading thread,
 * skipped the uncounting: the socket kept one waiter forever. The watchdog then saw a wait
 * that never ended on an idle socket and cut it at the read timeout, and the next healthy
 * exchange on it failed with ETIMEDOUT.
 * The sequence, read_timeout 4s (room for a loaded machine, under a sanitizer, to cancel the reader in time), an echo server that never answers "stall":
 * (a) send "stall"; read; SIGALRM after 200 ms jumps out; exchange "ping" (works); stay
 *     idle 4.5 s; exchange "ping" again -> must work.
 * (b) thread T sends "stall" and blocks in read; T is cancelled and joined; the main thread
 *     exchanges "ping" on T's socket, stays idle 4.5 s, exchanges again -> must work.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/time.h>

#include "regress.h"

static int lfd, port;
static sigjmp_buf jump;
static atomic_int reader_tid;

/* Echoes each line back, except lines starting with "stall", which get no answer. Line by
 * line: on a loaded machine "stall\n" and the next "ping\n" can arrive in one read. */
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

static void *server(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0)
			return NULL;
		pthread_create(&t, NULL, echo, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

static void exchange(int fd, const char *when)
{
	char buf[16];
	ssize_t r;

	TBR_CHECK(write(fd, "ping\n", 5) == 5, "%s: write: %s", when, tbt_errno_name(errno));
	r = read(fd, buf, sizeof(buf));
	TBR_CHECK(r == 5, "%s: read returned %zd %s", when, r, tbt_errno_name(errno));
}

static void on_alarm(int sig)
{
	(void)sig;
	siglongjmp(jump, 1);
}

static void *reader(void *arg)
{
	int fd = *(int *)arg;
	char buf[16];

	atomic_store(&reader_tid, (int)syscall(SYS_gettid));
	if (write(fd, "stall\n", 6) != 6)
		return NULL;
	if (read(fd, buf, sizeof(buf)) >= 0)
		fprintf(stderr, "the stalled read returned\n");
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	struct itimerval it = { .it_value = { 0, 200000 } };
	pthread_t srv, t;
	volatile int fd;
	int tfd;
	char buf[16];

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=4s", NULL);
	lfd = tbr_listen(&port);
	pthread_create(&srv, NULL, server, NULL);

	/* (a) siglongjmp out of a blocked read */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	fd = tbr_connect(port);
	TBR_CHECK(write(fd, "stall\n", 6) == 6, "write: %s", tbt_errno_name(errno));
	if (sigsetjmp(jump, 1) == 0) {
		setitimer(ITIMER_REAL, &it, NULL);
		if (read(fd, buf, sizeof(buf)) >= 0)
			TBR_CHECK(0, "the stalled read returned");
	}
	exchange(fd, "(a) right after the jump");
	tbt_sleep_ms(4500);
	exchange(fd, "(a) after 4.5 s idle");
	close(fd);
	fprintf(stderr, "(a) siglongjmp: ok\n");

	/* (b) pthread_cancel of a thread blocked in a read */
	tfd = tbr_connect(port);
	pthread_create(&t, NULL, reader, &tfd);
	while (atomic_load(&reader_tid) == 0 || !tbr_thread_sleeping(atomic_load(&reader_tid)))
		sched_yield();
	pthread_cancel(t);
	pthread_join(t, NULL);
	exchange(tfd, "(b) right after the cancel");
	tbt_sleep_ms(4500);
	exchange(tfd, "(b) after 4.5 s idle");
	close(tfd);
	fprintf(stderr, "(b) pthread_cancel: ok\n");
	return 0;
}
