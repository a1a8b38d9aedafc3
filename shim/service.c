/* service.c - timebox's own threads: detached, signals blocked, named, small stacks when
 * the program's thread-local storage leaves room for them. */
#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>

#include "clock.h"
#include "futex.h"
#include "thread.h"

/* What a new thread runs, and its name (see tb_service_start). */
struct launch {
	void *(*fn)(void *);
	const char *name;
};

/* Threads created whose start-up is not over (they have not run fn yet): a fork waits for
 * them (tb_service_fork_prepare). `launch_lock` is held around each creation, and by a
 * fork from its prepare handler to its parent and child handlers: no creation begins
 * after the fork looked at `starting` - the statistics thread is started by the
 * watchdog's, at a moment the program does not choose. */
static atomic_uint starting;
static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;

static void *trampoline(void *arg)
{
	struct launch *l = arg;
	void *(*fn)(void *) = l->fn;
	void *r;

	/* Named by itself: one prctl on this thread's own time. Named by the creator
	 * (pthread_setname_np on another thread), it was an open, a write and a close of
	 * /proc/self/task/<tid>/comm inside the program's first connect. */
	prctl(PR_SET_NAME, l->name);
	if (atomic_fetch_sub(&starting, 1) == 1)
		tb_futex_wake_all(&starting, false);
	tb_thread_service = true; /* created with every signal blocked (tb_service_start) */
	r = fn(NULL);
	tb_thread_own_ended(); /* the last thing it does (thread.h) */
	return r;
}

static int start(pthread_t *tid, struct launch *l, size_t stack)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (stack != 0)
		pthread_attr_setstacksize(&attr, stack);
	rc = pthread_create(tid, &attr, trampoline, l);
	pthread_attr_destroy(&attr);
	return rc;
}

/* Launch records, static: the creator returns without waiting for the thread to read its
 * record. A process starts two threads at most (a fork waits until they are past their start-up,
 * record read), so a record is never reused before its thread has read it. */
#define LAUNCH_SLOTS 8
static struct launch launches[LAUNCH_SLOTS];
static atomic_uint launch_next;

bool tb_service_start(void *(*fn)(void *), size_t stack, const char *name)
{
	struct launch *l = &launches[atomic_fetch_add(&launch_next, 1) % LAUNCH_SLOTS];
	pthread_t tid;
	sigset_t all, old;
	int rc;

	l->fn = fn;
	l->name = name; /* a literal: the thread reads it after its creator returned */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_mutex_lock(&launch_lock);
	atomic_fetch_add(&starting, 1);
	rc = start(&tid, l, stack);
	if (rc == EINVAL) /* the program's static TLS does not fit in `stack` */
		rc = start(&tid, l, 0);
	if (rc == 0)
		tb_thread_own_started();
	else if (atomic_fetch_sub(&starting, 1) == 1)
		tb_futex_wake_all(&starting, false);
	pthread_mutex_unlock(&launch_lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0;
}

/*
 * A fork waits until every thread started is past its start-up (the C library's, and a
 * sanitizer's runtime's, which allocates), so that the child never copies a lock such a
 * start held half-way: under ASan the child's own watchdog then hung in the allocator.
 * Bounded (100 ms), as the creator's own wait.
 */
void tb_service_fork_prepare(void)
{
	int64_t until = 0;
	unsigned n;

	pthread_mutex_lock(&launch_lock); /* let go by the parent and child handlers */
	while ((n = atomic_load(&starting)) != 0) {
		if (until == 0)
			until = tb_now() + 100 * TB_NS_PER_MS;
		else if (tb_now() >= until)
			return;
		tb_futex_wait_until(&starting, n, until, false);
	}
}

void tb_service_fork_parent(void)
{
	pthread_mutex_unlock(&launch_lock);
}

/* The parent's threads do not exist in the child; the lock is the forking thread's. */
void tb_service_fork_child(void)
{
	atomic_store(&starting, 0);
	pthread_mutex_unlock(&launch_lock);
}
