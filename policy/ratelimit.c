/* ratelimit.c - a one-second window limiter for log lines.
 * Pure code: no clock read here, `now` is the caller's. */
#include "ratelimit.h"

#define NS_PER_S INT64_C(1000000000)

void tb_rl_init(struct tb_ratelimit *rl, int rate)
{
	rl->rate = rate;
	atomic_store(&rl->window, -1);
	atomic_store(&rl->used, 0);
	atomic_store(&rl->suppressed, 0);
}

bool tb_rl_allow(struct tb_ratelimit *rl, int64_t now)
{
	int64_t sec = now / NS_PER_S;
	int64_t w = atomic_load_explicit(&rl->window, memory_order_relaxed);

	if (rl->rate <= 0)
		return true;
	/* The winner of the roll-over resets the count; an event that raced with it may be
	 * counted in the old window's number and lost to the new one: fewer lines, never more. */
	if (w != sec && atomic_compare_exchange_strong(&rl->window, &w, sec))
		atomic_store_explicit(&rl->used, 0, memory_order_relaxed);
	if (atomic_fetch_add_explicit(&rl->used, 1, memory_order_relaxed) < rl->rate)
		return true;
	atomic_fetch_add_explicit(&rl->suppressed, 1, memory_order_relaxed);
	return false;
}

uint64_t tb_rl_take_suppressed(struct tb_ratelimit *rl)
{
	return atomic_exchange_explicit(&rl->suppressed, 0, memory_order_relaxed);
}
