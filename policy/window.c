/* window.c - the rolling count of two numbers over ten buckets.
 * Pure code: no clock read here, `now` is the caller's. */
#include "window.h"

void tb_window_init(struct tb_window *w, int64_t len_ns)
{
	w->bucket_ns = len_ns / TB_WINDOW_BUCKETS;
	if (w->bucket_ns < 1)
		w->bucket_ns = 1;
	w->newest = 0;
	tb_window_clear(w);
}

void tb_window_clear(struct tb_window *w)
{
	for (int i = 0; i < TB_WINDOW_BUCKETS; i++)
		w->a[i] = w->b[i] = 0;
}

static int64_t bucket_of(const struct tb_window *w, int64_t now)
{
	/* A window in a shared segment that another process zeroed and has not yet
	 * initialised must not divide by zero inside the program's connect. */
	int64_t len = w->bucket_ns > 0 ? w->bucket_ns : 1;
	/* Floor division: a monotonic clock is positive, but a window must not count a
	 * negative time (a test's, a caller's "0 - x") in the bucket of a positive one. */
	int64_t i = now / len;

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
			w->a[slot_of(i)] = 0;
			w->b[slot_of(i)] = 0;
		}
	}
	w->newest = idx;
}

static uint32_t add_sat(uint32_t x, uint32_t y)
{
	return x > UINT32_MAX - y ? UINT32_MAX : x + y;
}

void tb_window_add(struct tb_window *w, int64_t now, uint32_t a, uint32_t b)
{
	int64_t idx = bucket_of(w, now);
	int slot;

	advance(w, idx);
	if (w->newest - idx >= TB_WINDOW_BUCKETS)
		return;
	slot = slot_of(idx);
	w->a[slot] = add_sat(w->a[slot], a);
	w->b[slot] = add_sat(w->b[slot], b);
}

void tb_window_sum(struct tb_window *w, int64_t now, uint64_t *a, uint64_t *b)
{
	uint64_t sa = 0, sb = 0;

	advance(w, bucket_of(w, now));
	for (int i = 0; i < TB_WINDOW_BUCKETS; i++) {
		sa += w->a[i];
		sb += w->b[i];
	}
	*a = sa;
	*b = sb;
}
