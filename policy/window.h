/* window.h - a rolling count of two numbers (calls and failures, first attempts and retries)
 * over a window of TB_WINDOW_BUCKETS buckets. Pure code: `now` is passed in, no pointer inside
 * (it may live in shared memory; the caller holds the lock). */
#ifndef TB_WINDOW_H
#define TB_WINDOW_H

#include <stdint.h>

#define TB_WINDOW_BUCKETS 10

/*
 * Bucket i % TB_WINDOW_BUCKETS holds the counts of the times in [i * bucket_ns, (i+1) * bucket_ns).
 * The window is the newest bucket and the nine before it: between 9 and 10 bucket lengths of
 * the past, Hystrix's rolling window. Zeroed then tb_window_init'd, it counts nothing.
 */
struct tb_window {
	int64_t bucket_ns;      /* window length / TB_WINDOW_BUCKETS (>= 1) */
	int64_t newest;         /* index (now / bucket_ns) of the newest bucket */
	int64_t newest_start;   /* newest * bucket_ns: a `now` in that bucket needs no division */
	uint64_t sum_a, sum_b;  /* the sums of a[] and b[], kept as they change */
	uint32_t a[TB_WINDOW_BUCKETS], b[TB_WINDOW_BUCKETS]; /* two counts per bucket */
};

/* An empty window of len_ns (a length below TB_WINDOW_BUCKETS ns gives buckets of 1 ns). */
void tb_window_init(struct tb_window *w, int64_t len_ns);

/*
 * Adds a and b at `now` (each count saturates at UINT32_MAX). A `now` older than the newest
 * bucket (another thread read the clock first and took the lock last) counts in its own
 * bucket while that is still in the window, and is dropped when it is not.
 * @unittest test_breaker.c (test_window_*)
 */
void tb_window_add(struct tb_window *w, int64_t now, uint32_t a, uint32_t b);

/* The sums over the window at `now`; buckets older than the window are dropped (cleared).
 * No loop over the buckets: the sums are kept as counts are added and dropped. */
void tb_window_sum(struct tb_window *w, int64_t now, uint64_t *a, uint64_t *b);

/* Every count to 0; the length stays. */
void tb_window_clear(struct tb_window *w);

/* The kept sums and bucket start taken again from the counts: for a window whose last
 * update may have stopped half-way (a process that died holding its lock). */
void tb_window_repair(struct tb_window *w);

#endif
