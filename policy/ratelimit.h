/* ratelimit.h - at most N events per second, lock-free, and the count of those refused.
 * Pure code: `now` (ns, monotonic) is passed in. Used for log lines. */
#ifndef TB_RATELIMIT_H
#define TB_RATELIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * A fixed one-second window: the first `rate` events of a window pass, the others are
 * counted as suppressed. Zero-initialised, it is a valid limiter of rate 0 (= no limit)
 * until tb_rl_init. Threads race on the window's roll-over with a CAS; the loser's event
 * counts in the new window, so a window never lets more than `rate` through.
 */
struct tb_ratelimit {
	int rate;                 /* events per second; 0: no limit */
	_Atomic int64_t window;   /* the window's second (now / 1 s), or -1 before any */
	atomic_int used;          /* events taken in the window */
	_Atomic uint64_t suppressed; /* refused and not yet reported */
};

void tb_rl_init(struct tb_ratelimit *rl, int rate);

/* True when an event may go out at `now`; false counts it as suppressed. @unittest
 * test_ratelimit.c */
bool tb_rl_allow(struct tb_ratelimit *rl, int64_t now);

/* The suppressed count since the last call, reset to 0 (to report it in one line). */
uint64_t tb_rl_take_suppressed(struct tb_ratelimit *rl);

#endif
