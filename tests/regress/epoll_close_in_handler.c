/* epoll_close_in_handler.c - a signal handler's close() of a governed socket hung for
 * good when it interrupted its own thread's epoll_ctl.
 *
 * What happened: close() of a governed socket drops its number from every epoll instance
 * timebox follows (tb_epset_forget_fd), taking each instance's spin lock. epoll_ctl takes
 * the same lock while it records a registration (an EPOLL_CTL_MOD: a few instructions, on
 * every read/write switch of an event loop). close() is async-signal-safe: a handler may
 * call it whatever its thread was doing. A handler that closed a governed socket while its
 * thread was inside that section spun on a lock its own interrupted thread held: the
 * thread never ran again (sched_yield forever, a busy hang).
 * The sequence: a governed socket X registered in an instance; the main thread switches
 * X's registration with EPOLL_CTL_MOD in a loop; another thread signals it every few
 * microseconds for 8 s, and the handler closes a dup of X (dup and close, both
 * async-signal-safe) -> the loop keeps going (natively it does), never stalls for 2 s.
 */
#include <sys/epoll.h>

#include "regress.h"

static int x;
static atomic_int closed;
static atomic_long mods;
static pthread_t main_thread;

static void close_next(int sig)
{
	(void)sig;
	int saved = errno, d = dup(x);

	if (d >= 0 && close(d) == 0)
		atomic_fetch_add(&closed, 1);
	errno = saved;
}

static void *signaller(void *arg)
{
	long last = -1;
	double start = tbt_now_ms(), since = start;

	(void)arg;
	for (;;) {
		long m;

		for (int i = 0; i < 100; i++) {
			pthread_kill(main_thread, SIGUSR1);
			for (volatile int k = 0; k < 2000; k++)
				;
		}
		m = atomic_load(&mods);
		if (m != last) {
			last = m;
			since = tbt_now_ms();
		} else if (tbt_now_ms() - since >= 2000) {
			printf("the epoll_ctl loop stopped after %ld MODs, %d closes in the handler\n",
			       m, atomic_load(&closed));
			fflush(stdout);
			TBR_CHECK(0, "a close() in a signal handler hung its thread");
		}
		if (tbt_now_ms() - start >= 8000) {
			printf("%ld MODs, %d closes in the handler\n", m, atomic_load(&closed));
			fflush(stdout);
			_exit(0);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 1 };
	struct sigaction sa;
	int port, lfd, px, ep;
	pthread_t t;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=60s", NULL);
	lfd = tbr_listen(&port);
	x = tbr_connect(port);
	px = accept(lfd, NULL, NULL);
	TBR_CHECK(px >= 0, "accept: %s", strerror(errno));
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, x, &ev) == 0, "epoll: %s",
		  strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = close_next;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	main_thread = pthread_self();
	TBR_CHECK(pthread_create(&t, NULL, signaller, NULL) == 0, "pthread_create");
	for (long i = 0;; i++) {
		ev.events = (i & 1) ? EPOLLIN : EPOLLIN | EPOLLOUT;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, x, &ev) == 0, "MOD: %s", strerror(errno));
		atomic_fetch_add(&mods, 1);
	}
}
