/* watchdog.h - the one thread per process that cuts waits at their expiry.
 * The hot path only stores an expiry in the socket; the watchdog files and re-files lazily. */
#ifndef TB_WATCHDOG_H
#define TB_WATCHDOG_H

#include <stdint.h>

#include "sock.h"

/*
 * A wait on s now expires at `at`. If the watchdog already holds s at or before `at`,
 * nothing is done (it re-files when it wakes); otherwise s is queued for it, and it is woken
 * (one futex system call) only when it sleeps past `at`. Starts the thread on first use.
 * Lock-free; safe from any thread.
 */
void tb_wd_arm(struct tb_sock *s, int64_t at);

/*
 * A thread starts waiting on `side` of s through fd at `now`: the wait is recorded in the
 * socket (tb_sock_wait_record) and, unless it is already due or never expires, the watchdog
 * is told (tb_wd_arm). Returns the wait's expiry; when it is already due (at <= now) the
 * caller must end the wait and decide (queued data, or expire). Every hook that blocks on a
 * governed socket begins its wait here: the socket layer itself knows nothing of the thread.
 */
static inline __attribute__((always_inline)) struct tb_expiry
tb_wd_wait_begin(struct tb_sock *s, enum tb_side side, int fd, int64_t now)
{
	bool watched;
	struct tb_expiry e = tb_sock_wait_record(s, side, fd, now, &watched);

	if (!watched && e.at > now && e.at != TB_NEVER)
		tb_wd_arm(s, e.at);
	return e;
}

/*
 * Starts the thread unless it runs. Called by connect when a socket becomes governed, so
 * that the first wait - perhaps in a signal handler, where pthread_create is not safe -
 * finds it running. Not async-signal-safe itself (a mutex, pthread_create).
 */
void tb_wd_start(void);

/* Runs fn on the watchdog's thread, soon and off the caller's time: the watchdog is
 * started first when it does not run, and when it cannot run fn runs here. One job at a
 * time (the statistics thread's start, stats.c); a fork child forgets it. Not
 * async-signal-safe (tb_wd_start). */
void tb_wd_run_soon(void (*fn)(void));

/* In a forked child: the thread did not survive fork; forget its queues (see init.c). */
void tb_wd_fork_child(void);

#endif
