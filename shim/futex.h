/* futex.h - the library's one futex wait (until an absolute CLOCK_MONOTONIC time) and wake,
 * for a word private to the process (watchdog, gates) or in a shared mapping (shared gates). */
#ifndef TB_FUTEX_H
#define TB_FUTEX_H

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "settings.h" /* TB_NEVER, TB_NS_PER_S */

/*
 * Sleeps while *word == val, until `at` (absolute CLOCK_MONOTONIC ns; TB_NEVER: no bound).
 * `shared`: the word lives in a mapping other processes use, so the kernel must key it by
 * page rather than by this process's address space. FUTEX_WAIT_BITSET takes the absolute
 * time, an hrtimer: no drift from recomputing a relative timeout after every wake-up.
 * Returns 0 when woken or when *word no longer held val, else ETIMEDOUT or EINTR (a
 * signal handler ran). A spurious 0 is possible: callers look at their word again.
 * errno is preserved.
 */
static inline int tb_futex_wait_until(atomic_uint *word, unsigned val, int64_t at, bool shared)
{
	struct timespec ts, *tsp = NULL;
	int saved = errno, err = 0;

	if (at != TB_NEVER) {
		ts.tv_sec = (time_t)(at / TB_NS_PER_S);
		ts.tv_nsec = (long)(at % TB_NS_PER_S);
		tsp = &ts;
	}
	if (syscall(SYS_futex, word, FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG), val,
		    tsp, NULL, FUTEX_BITSET_MATCH_ANY) != 0 && errno != EAGAIN)
		err = errno;
	errno = saved;
	return err;
}

/* Wakes one thread sleeping on word (same `shared` as its wait). A wake that finds no one,
 * or a waiter that has already left, is harmless. errno is preserved. */
static inline void tb_futex_wake_one(atomic_uint *word, bool shared)
{
	int saved = errno;

	syscall(SYS_futex, word, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), 1, NULL, NULL, 0);
	errno = saved;
}

/* Wakes every thread sleeping on word (same `shared` as their wait). errno is preserved. */
static inline void tb_futex_wake_all(atomic_uint *word, bool shared)
{
	int saved = errno;

	syscall(SYS_futex, word, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), INT32_MAX, NULL,
		NULL, 0);
	errno = saved;
}

#endif
