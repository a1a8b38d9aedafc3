/* idle_thread.c - preloaded into a native run by make bench: starts one thread that never
 * runs again, so that the program is multi-threaded and nothing else changes.
 *
 * A process with a second thread pays for it on every system call: the kernel takes a
 * reference on each file it looks up (a process whose file table is its own does not), and
 * glibc's cancellation points switch asynchronous cancellation on and off around each
 * call. timebox's watchdog is such a thread, so a native run with this library is the
 * floor that any library keeping a helper thread can reach; the epoll workload reports
 * timebox against it as well as against plain native. */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static void *idle_main(void *arg)
{
	(void)arg;
	for (;;)
		pause(); /* every signal is blocked in this thread: it never wakes */
	return NULL;
}

__attribute__((constructor)) static void idle_start(void)
{
	sigset_t all, old;
	pthread_t t;

	/* Created with every signal blocked: the program's signals go to its own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, idle_main, NULL) == 0)
		pthread_detach(t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
