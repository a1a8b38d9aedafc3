/* regress.h - what the regression programs share: run self under the library with the
 * environment a story needs, a loopback listener, and checks that fail the program.
 *
 * A regression program is one real defect, told in the comment that opens it. It runs
 * itself under LD_PRELOAD (tbr_preload_self re-executes /proc/self/exe with the library
 * and the story's TIMEBOX_* variables), and exits 0 when the defect is absent, 1 when it is
 * present, 77 when it cannot run here (with the reason on stderr). tests/regress/run.sh
 * runs each under a time limit: a hang is a failure too. */
#ifndef TB_REGRESS_H
#define TB_REGRESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../e2e/tbtest.h"

#define TBR_SKIP 77

/* Older headers lack the zero-copy send's names (Linux 4.14). */
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

/* Fails the program with a message naming the file and line. */
#define TBR_CHECK(cond, ...)                                                                \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
			fprintf(stderr, __VA_ARGS__);                                       \
			fputc('\n', stderr);                                                \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static inline void tbr_skip(const char *why)
{
	fprintf(stderr, "SKIP: %s\n", why);
	exit(TBR_SKIP);
}

/*
 * Unless already done, re-executes this program with LD_PRELOAD = $TBR_PRELOAD (the runner
 * sets it: the sanitizer runtime if any, then the library) and each "NAME=value" of the
 * NULL-terminated list set. Every TIMEBOX_* variable of the caller's environment is removed
 * first, so a story sees exactly its own settings. Returns in the re-executed program.
 */
static inline void tbr_preload_self(char **argv, ...)
{
	extern char **environ;
	const char *lib = getenv("TBR_PRELOAD");
	va_list ap;
	const char *kv;

	if (getenv("TBR_CHILD") != NULL)
		return;
	if (lib == NULL || *lib == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	for (int i = 0; environ[i] != NULL;) {
		if (strncmp(environ[i], "TIMEBOX_", 8) == 0) {
			char name[256];
			size_t n = strcspn(environ[i], "=");

			snprintf(name, sizeof(name), "%.*s", (int)n, environ[i]);
			unsetenv(name);
			continue;
		}
		i++;
	}
	va_start(ap, argv);
	while ((kv = va_arg(ap, const char *)) != NULL)
		putenv((char *)kv);
	va_end(ap);
	setenv("LD_PRELOAD", lib, 1);
	setenv("TBR_CHILD", "1", 1);
	execv("/proc/self/exe", argv);
	perror("execv /proc/self/exe");
	exit(1);
}

/*
 * ThreadSanitizer's suppression of a race the story makes on purpose (the program closes a
 * number another thread's call is on: the story's point, not a race of the library's).
 * Before tbr_preload_self: writes `rule` ("race:FUNCTION\n") to a new file and returns the
 * TSAN_OPTIONS setting naming it, one of the story's variables (with run.sh's
 * die_after_fork=0, which it replaces). In the re-executed program tbr_tsan_rule_remove
 * deletes the file: the sanitizer has read it at start-up.
 */
#define TBR_TSAN_SUPP "/tmp/tbr-tsan-supp-"

static inline const char *tbr_tsan_rule(const char *rule)
{
	static char supp[] = TBR_TSAN_SUPP "XXXXXX", env[128];
	ssize_t len = (ssize_t)strlen(rule);
	int fd = mkstemp(supp);

	TBR_CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	TBR_CHECK(write(fd, rule, (size_t)len) == len, "write");
	close(fd);
	snprintf(env, sizeof(env), "TSAN_OPTIONS=die_after_fork=0:suppressions=%s", supp);
	return env;
}

static inline void tbr_tsan_rule_remove(void)
{
	const char *opts = getenv("TSAN_OPTIONS");

	if (opts != NULL && strstr(opts, TBR_TSAN_SUPP) != NULL)
		unlink(strstr(opts, TBR_TSAN_SUPP));
}

/* The program's close of a number another of its threads is making a call on (a close
 * ThreadSanitizer cannot order after that call, which may never return): the story's
 * point, not a race of the library's - tbr_tsan_rule("race:tbr_close_under_call\n"). */
static __attribute__((noinline, unused)) void tbr_close_under_call(int fd)
{
	close(fd);
	__asm__ volatile("" ::: "memory"); /* not a tail call: the frame stays for the rule */
}

/* A TCP listener on 127.0.0.1 with an ephemeral port, stored in *port. Exits on failure. */
static inline int tbr_listen(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	TBR_CHECK(fd >= 0, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	TBR_CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
	TBR_CHECK(listen(fd, 128) == 0, "listen: %s", strerror(errno));
	TBR_CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname");
	*port = ntohs(a.sin_port);
	return fd;
}

/* A listener on 127.0.0.1 (its address in *a) whose accept queue is full: SYNs to it are
 * dropped from now on, so a connect blocks as against a blackholed peer. */
static inline int tbr_listen_dropping_syns(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	TBR_CHECK(bind(lfd, (struct sockaddr *)a, sizeof(*a)) == 0 && listen(lfd, 0) == 0 &&
		  getsockname(lfd, (struct sockaddr *)a, &len) == 0, "listener");
	for (int i = 0; i < 16; i++) { /* fill the accept queue */
		struct pollfd p = { .events = POLLOUT };

		p.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (connect(p.fd, (struct sockaddr *)a, sizeof(*a)) < 0 && errno == EINPROGRESS &&
		    poll(&p, 1, 100) == 0) /* this one hangs: the queue is full */
			break;
	}
	return lfd;
}

/* A blocking TCP connection to 127.0.0.1:port (governed when the library governs). */
static inline int tbr_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	TBR_CHECK(fd >= 0, "socket: %s", strerror(errno));
	TBR_CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s",
		  strerror(errno));
	return fd;
}

/* A program's next connection after it closed fd `closed`: a connect to port (the listener
 * lfd), its peer's end accepted into *peer. Returns the new fd, or -1 having said so when
 * it did not get the closed number (the kernel gives the lowest free one): then the story
 * has nothing to show. */
static inline int tbr_reconnect_on(int lfd, int port, int closed, int *peer)
{
	int fd = tbr_connect(port);

	if (fd != closed) {
		printf("the new connection got fd %d, not %d: nothing to show\n", fd, closed);
		return -1;
	}
	*peer = accept(lfd, NULL, NULL);
	TBR_CHECK(*peer >= 0, "accept: %s", strerror(errno));
	return fd;
}

/* A read of one byte of fd, whose peer never writes, with fd's own SO_RCVTIMEO at 2 s: a
 * governed socket's read_timeout cuts it first (ETIMEDOUT), an ungoverned socket's runs to
 * the 2 s (EAGAIN). Returns recv's result, its errno in *err, its time in *ms. */
static inline int tbr_read_silent(int fd, int *err, double *ms)
{
	struct timeval rcv = { 2, 0 };
	double t0;
	char c;
	int r;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
	t0 = tbt_now_ms();
	errno = 0;
	r = (int)recv(fd, &c, 1, 0);
	*err = errno;
	*ms = tbt_now_ms() - t0;
	return r;
}

/*
 * The story's own bound on a call that must return: if the process is still running `secs`
 * seconds from now, SIGALRM writes "FAIL: <why>" to stderr and ends it with status 1 (a
 * hang is a failure, never a wait for the test runner's timeout). alarm(0) cancels it. It
 * replaces SIGALRM's action; `why` must outlive the guard (a literal).
 */
static const char *tbr_hang_why;

static inline void tbr_hang_fired(int sig)
{
	static const char head[] = "FAIL: ";
	const char *why = tbr_hang_why;

	(void)sig;
	(void)!write(2, head, sizeof(head) - 1);
	(void)!write(2, why, strlen(why));
	(void)!write(2, "\n", 1);
	_exit(1);
}

static inline void tbr_hang_guard(unsigned secs, const char *why)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = tbr_hang_fired;
	sigemptyset(&sa.sa_mask);
	tbr_hang_why = why;
	sigaction(SIGALRM, &sa, NULL);
	alarm(secs);
}

/* True once thread tid of this process sleeps (state S in /proc): blocked in a call. */
static inline int tbr_thread_sleeping(int tid)
{
	char path[64], buf[256], *p;
	FILE *f;
	int s = 0;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL)
		s = p[2] == 'S';
	fclose(f);
	return s;
}

/* Waits up to `ms` milliseconds until the thread whose id *tid holds (0 until the thread
 * stored it) sleeps in a call; true if it did. */
static inline int tbr_wait_sleeping(atomic_int *tid, double ms)
{
	double until = tbt_now_ms() + ms;

	while ((atomic_load(tid) == 0 || !tbr_thread_sleeping(atomic_load(tid))) &&
	       tbt_now_ms() < until)
		tbt_sleep_ms(1);
	return tbt_now_ms() < until;
}

/* True when thread tid of this process is in a futex wait (a gate's, a lock's), from /proc:
 * x86_64's system call numbers. */
static inline int tbr_thread_in_futex(int tid)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	return atoi(buf) == 202; /* SYS_futex on x86_64 */
}

/*
 * A thread that blocks in epoll_wait on `ep` until a registered fd is ready (the test writes a
 * pipe it registered): tbr_epoll_waiter_start returns once the thread sleeps in the kernel
 * (10 s at most, else the test fails); tbr_epoll_waiter_join after the test woke it.
 */
struct tbr_epoll_waiter {
	pthread_t t;
	int ep;
	atomic_int tid;
};

static inline void *tbr_epoll_waiter_main(void *arg)
{
	struct tbr_epoll_waiter *w = arg;
	struct epoll_event got[4];
	int r;

	atomic_store(&w->tid, (int)syscall(SYS_gettid));
	while ((r = epoll_wait(w->ep, got, 4, -1)) == 0 || (r < 0 && errno == EINTR))
		;
	return NULL;
}

static inline void tbr_epoll_waiter_start(struct tbr_epoll_waiter *w, int ep)
{
	double until = tbt_now_ms() + 10000;

	w->ep = ep;
	atomic_store(&w->tid, 0);
	TBR_CHECK(pthread_create(&w->t, NULL, tbr_epoll_waiter_main, w) == 0, "pthread_create");
	while (tbt_now_ms() < until &&
	       (atomic_load(&w->tid) == 0 || !tbr_thread_sleeping(atomic_load(&w->tid)))) {
		struct timespec ms = { 0, 1000000 };

		nanosleep(&ms, NULL);
	}
	TBR_CHECK(tbr_thread_sleeping(atomic_load(&w->tid)), "the waiter never blocked");
}

/* The waiter still sleeps in epoll_wait. */
static inline int tbr_epoll_waiter_sleeping(struct tbr_epoll_waiter *w)
{
	return tbr_thread_sleeping(atomic_load(&w->tid));
}

static inline void tbr_epoll_waiter_join(struct tbr_epoll_waiter *w)
{
	pthread_join(w->t, NULL);
}

struct tbr_server {
	int lfd;
	void *(*per_conn)(void *);
};

static inline void *tbr_accept_loop(void *arg)
{
	struct tbr_server *sv = arg;

	for (;;) {
		pthread_t t;
		int c = accept(sv->lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		TBR_CHECK(pthread_create(&t, NULL, sv->per_conn, (void *)(intptr_t)c) == 0,
			  "pthread_create");
		pthread_detach(t);
	}
}

/* A server on lfd: every connection it accepts is served by per_conn((void *)(intptr_t)fd)
 * on a thread of its own, which closes the fd. Runs until the program exits. */
static inline void tbr_serve_each(int lfd, void *(*per_conn)(void *))
{
	static struct tbr_server sv;
	pthread_t t;

	sv.lfd = lfd;
	sv.per_conn = per_conn;
	TBR_CHECK(pthread_create(&t, NULL, tbr_accept_loop, &sv) == 0, "pthread_create");
	pthread_detach(t);
}

/* A peer for an upload: accepts one connection on lfd and reads `step` bytes every
 * `pause_ms` ms until end of file. With step 0 it reads nothing until a byte arrives on
 * the pipe `done` (a stalled peer), then closes. Run it as a thread. */
struct tbr_drain {
	int lfd, step, pause_ms, done;
};

static inline void *tbr_drainer(void *arg)
{
	struct tbr_drain *d = arg;
	int c = accept(d->lfd, NULL, NULL);
	struct timespec ts = { 0, (long)d->pause_ms * 1000000 };
	static __thread char b[65536];
	ssize_t n;

	if (c >= 0 && d->step == 0 && read(d->done, b, 1) < 0)
		perror("read");
	while (c >= 0 && d->step > 0 && (n = read(c, b, (size_t)d->step)) > 0)
		nanosleep(&ts, NULL);
	if (c >= 0)
		close(c);
	return NULL;
}

/* A per-connection server body for tbr_serve_each: echoes every chunk until end of file. */
static inline void *tbr_echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n)
			break;
	close(fd);
	return NULL;
}

/* A hang detector: fails the program (exit 1) when *done has not moved for 5 s, naming
 * `what` and *done of total. */
struct tbr_watch {
	atomic_int *done;
	int total;
	const char *what;
};

static inline void *tbr_watcher(void *arg)
{
	const struct tbr_watch *wt = arg;
	int last = -1;

	for (;;) {
		int now;

		tbt_sleep_ms(5000);
		now = atomic_load(wt->done);
		if (now == last) {
			fprintf(stderr, "FAIL: no %s ended for 5 s (at %d of %d): the thread "
				"hangs\n", wt->what, now, wt->total);
			_exit(1);
		}
		last = now;
	}
	return NULL;
}

static inline void tbr_watch(atomic_int *done, int total, const char *what)
{
	static struct tbr_watch wt;
	pthread_t t;

	wt = (struct tbr_watch){ done, total, what };
	TBR_CHECK(pthread_create(&t, NULL, tbr_watcher, &wt) == 0, "pthread_create");
	pthread_detach(t);
}

/* The process's resident size in kB (VmRSS). */
static inline long tbr_rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	TBR_CHECK(f != NULL, "/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VmRSS:", 6) == 0)
			kb = atol(line + 6);
	fclose(f);
	return kb;
}

/* The process's mapped size in bytes (VmSize), or 0. */
static inline unsigned long long tbr_vm_size(void)
{
	static char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	const char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "VmSize:");
	return p != NULL ? strtoull(p + 7, NULL, 10) * 1024 : 0;
}

#endif

