/* window.c - the rolling count of two numbers over ten buckets.
 * Pure code: no clock read here, `now` is the caller's. */
#include "window.h"

#include <stdbool.h>

void tb_window_init(struct tb_window *w, int64_t len_ns)
{
	w->bucket_ns = len_ns / TB_WINDOW_BUCKETS;
	if (w->bucket_ns < 1)
		w->bucket_ns = 1;
	w->newest = 0;
	w->newest_start = 0;
	tb_window_clear(w);
}

void tb_window_clear(struct tb_window *w)
{
	for (int i = 0; i < TB_WINDOW_BUCKETS; i++)
		w->a[i] = w->b[i] = 0;
	w->sum_a = w->sum_b = 0;
}

/* A window in a shared segment that another process zeroed and has not yet initialised
 * must not divide by zero inside the program's connect. */
static int64_t len_of(const struct tb_window *w)
{
	return w->bucket_ns > 0 ? w->bucket_ns : 1;
}

static int64_t bucket_of(const struct tb_window *w, int64_t now)
{
	int64_t len = len_of(w), i;

	/* Floor division: a monotonic clock is positive, but a window must not count a
	 * negative time (a test's, a caller's "0 - x") in the bucket of a positive one. */
	i = now / len;
	return now - i * len < 0 ? i - 1 : i; /* one division per call, not two */
}

static int slot_of(int64_t idx)
{
	if (idx >= 0) /* every monotonic time: one remainder, not two */
		return (int)(idx % TB_WINDOW_BUCKETS);
	return (int)(((idx % TB_WINDOW_BUCKETS) + TB_WINDOW_BUCKETS) % TB_WINDOW_BUCKETS);
}

/* Moves the newest bucket up to idx (`now`'s), clearing the buckets it passes: they hold
 * counts of one window ago. */
static void advance(struct tb_window *w, int64_t idx)
{
	if (idx <= w->newest)
		return;
	if (idx - w->newest >= TB_WINDOW_BUCKETS) {
		tb_window_clear(w);
	} else {
		for (int64_t i = w->newest + 1; i <= idx; i++) {
			int k = slot_of(i);

			w->sum_a -= w->a[k];
			w->sum_b -= w->b[k];
			w->a[k] = 0;
			w->b[k] = 0;
		}
	}
	w->newest = idx;
	w->newest_start = idx * len_of(w);
}

static uint32_t add_sat(uint32_t x, uint32_t y)
{
	return x > UINT32_MAX - y ? UINT32_MAX : x + y;
}

/* Is `now` in the newest bucket? Nearly every call's is: no division, no bucket cleared. */
static inline __attribute__((always_inline)) bool in_newest(const struct tb_window *w, int64_t now)
{
	return now >= w->newest_start &&
	       (uint64_t)now - (uint64_t)w->newest_start < (uint64_t)len_of(w);
}

static inline __attribute__((always_inline)) void add_to(struct tb_window *w, int slot,
							 uint32_t a, uint32_t b)
{
	uint32_t was = w->a[slot];

	w->a[slot] = add_sat(was, a);
	w->sum_a += w->a[slot] - was;
	was = w->b[slot];
	w->b[slot] = add_sat(was, b);
	w->sum_b += w->b[slot] - was;
}

/* A `now` past the newest bucket, or before it. */
static __attribute__((noinline)) void add_elsewhere(struct tb_window *w, int64_t now, uint32_t a,
						    uint32_t b)
{
	int64_t idx = bucket_of(w, now);

	advance(w, idx);
	if (w->newest - idx >= TB_WINDOW_BUCKETS)
		return;
	add_to(w, slot_of(idx), a, b);
}

void tb_window_add(struct tb_window *w, int64_t now, uint32_t a, uint32_t b)
{
	if (in_newest(w, now))
		add_to(w, slot_of(w->newest), a, b);
	else
		add_elsewhere(w, now, a, b);
}

static __attribute__((noinline)) void advance_to(struct tb_window *w, int64_t now)
{
	advance(w, bucket_of(w, now));
}

void tb_window_sum(struct tb_window *w, int64_t now, uint64_t *a, uint64_t *b)
{
	if (!in_newest(w, now))
		advance_to(w, now);
	*a = w->sum_a;
	*b = w->sum_b;
}

void tb_window_repair(struct tb_window *w)
{
	uint64_t sa = 0, sb = 0;

	for (int i = 0; i < TB_WINDOW_BUCKETS; i++) {
		sa += w->a[i];
		sb += w->b[i];
	}
	w->sum_a = sa;
	w->sum_b = sb;
	w->newest_start = w->newest * len_of(w);
}
