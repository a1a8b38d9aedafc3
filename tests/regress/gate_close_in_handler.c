/* gate_close_in_handler.c - close() of a gated socket in a signal handler hung its
 * thread, and then every thread that connected to the destination.
 *
 * What happened: a gate of one process (max_conns) keeps its waiters in a queue under a
 * mutex (policy/gate.c), taken by a connect that finds the gate full. Closing a socket
 * gives its slot back, and when someone waits the release takes that mutex to hand the
 * slot over. close() is async-signal-safe, and limitations.md says a close of a governed
 * socket in a handler is safe; but a handler that closed one while its own thread was
 * inside the queue's mutex (queueing at the full gate, or giving up its wait) waited for a
 * mutex its thread would never release: the thread hung in tb_gate_release under
 * tb_gate_enqueue, and so did every later connect to the destination (they queue under
 * the same mutex).
 * The sequence: max_conns 1, acquire_timeout 1ms. A helper thread keeps the one slot: it
 * connects (waiting at the gate) and hands the socket over; four threads connect in a
 * loop, mostly queueing at the full gate and giving up under the mutex, each with a 100 us
 * interval timer of its own whose handler closes the handed-over socket. For 10 s every
 * thread must keep going (a watcher fails the program when one makes no progress for
 * 3 s). The race is narrow (a few instructions under the mutex): before the fix, runs
 * hung after 1 to 10 s.
 */
#include <sys/time.h>

#include "regress.h"

static int port;
static atomic_int handed = -1;
#define THREADS 4

static atomic_long progress[THREADS], closes;
static atomic_int done;

static void close_in_handler(int sig)
{
	int saved = errno, fd = atomic_exchange(&handed, -1);

	(void)sig;
	if (fd >= 0) {
		close(fd);
		atomic_fetch_add(&closes, 1);
	}
	errno = saved;
}

static int try_connect(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	TBR_CHECK(fd >= 0, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	TBR_CHECK(errno == ETIMEDOUT || errno == EINTR, "connect: %s", strerror(errno));
	close(fd);
	return -1;
}

/* Keeps the gate's one slot taken: a socket for the handler to close, again and again. */
static void *keep_slot(void *arg)
{
	const struct timespec pause = { 0, 10000 };

	(void)arg;
	for (;;) {
		int fd;

		if (atomic_load(&handed) >= 0) {
			nanosleep(&pause, NULL);
			continue;
		}
		fd = try_connect();
		if (fd >= 0)
			atomic_store(&handed, fd);
	}
	return NULL;
}

/* Connects in a loop for 10 s, interrupted every 100 us by its own timer. */
static void *connect_loop(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct sigevent ev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM };
	struct itimerspec every = { { 0, 100000 }, { 0, 100000 } };
	sigset_t alrm;
	timer_t timer;
	double end;

	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	TBR_CHECK(timer_create(CLOCK_MONOTONIC, &ev, &timer) == 0, "timer_create: %s",
		  strerror(errno));
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	timer_settime(timer, 0, &every, NULL);
	for (end = tbt_now_ms() + 10000; tbt_now_ms() < end;) {
		int fd = try_connect();

		if (fd >= 0)
			close(fd);
		atomic_fetch_add(&progress[me], 1);
	}
	timer_delete(timer);
	return NULL;
}

static void *watch(void *arg)
{
	long last[THREADS] = { -1, -1, -1, -1 };

	(void)arg;
	for (;;) {
		sleep(3);
		for (int i = 0; i < THREADS && !atomic_load(&done); i++) {
			long now = atomic_load(&progress[i]);

			if (now == last[i]) {
				fprintf(stderr, "FAIL: thread %d made no progress for 3 s (%ld "
					"connects, %ld closes in the handlers)\n", i, now,
					atomic_load(&closes));
				_exit(1);
			}
			last[i] = now;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	sigset_t alrm;
	pthread_t t[THREADS], k, w;
	long total = 0;
	int lfd;

	(void)argc;
	/* The handler closes an fd another thread made and handed over (an atomic exchange
	 * in a signal handler, whose order ThreadSanitizer does not follow): that close is the
	 * story's point, not a race of the library's. */
	if (getenv("TBR_CHILD") == NULL)
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=1ms",
				 "TIMEBOX_LOG_RATE=1", tbr_tsan_rule("race:close_in_handler\n"), NULL);
	tbr_tsan_rule_remove();
	/* Only the connecting threads take SIGALRM, each from its own timer. */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = close_in_handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, tbr_echo);
	TBR_CHECK(pthread_create(&k, NULL, keep_slot, NULL) == 0, "pthread_create");
	TBR_CHECK(pthread_create(&w, NULL, watch, NULL) == 0, "pthread_create");
	for (int i = 0; i < THREADS; i++)
		TBR_CHECK(pthread_create(&t[i], NULL, connect_loop, (void *)(intptr_t)i) == 0,
			  "pthread_create");
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		total += atomic_load(&progress[i]);
	}
	atomic_store(&done, 1);
	fprintf(stderr, "%ld connects, %ld closes in the handlers\n", total, atomic_load(&closes));
	TBR_CHECK(atomic_load(&closes) > 0, "the handler never closed a socket");
	return 0;
}
