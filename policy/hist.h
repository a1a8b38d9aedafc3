/* hist.h - a latency histogram of fixed size: log-linear buckets (HdrHistogram's layout, 8
 * sub-buckets per power of two, ~12 % precision), counted in microseconds. Pure code. */
#ifndef TB_HIST_H
#define TB_HIST_H

#include <stdatomic.h>
#include <stdint.h>

#define TB_HIST_SUB_BITS 3
#define TB_HIST_SUB (1u << TB_HIST_SUB_BITS)
/* Values up to 2^31 us (~36 minutes) have their own bucket; larger ones share the last. */
#define TB_HIST_MAX_EXP 31
#define TB_HIST_BUCKETS ((TB_HIST_MAX_EXP - TB_HIST_SUB_BITS + 2) * TB_HIST_SUB)

/*
 * Recorded into by any thread, lock-free (a relaxed add per field), and read by another
 * process through shared memory: a reader sees each counter whole but the set of them not
 * at one instant, which a monitoring view tolerates (the sum may run ahead of a bucket).
 */
struct tb_hist {
	_Atomic uint64_t sum_us;
	_Atomic uint64_t bucket[TB_HIST_BUCKETS];
};

/* A copy to compute on: plain numbers. */
struct tb_hist_snap {
	uint64_t count;
	uint64_t sum_us;
	uint64_t bucket[TB_HIST_BUCKETS];
};

/*
 * The bucket of a value in microseconds: exact below 8 us, then 8 per power of two. Without
 * a branch: with e the top bit of us | 8 (3 below 16 us), the bucket is (e - 3) * 8 plus the
 * value's top four bits (us >> (e - 3), in 8..15; below 8 us the value itself). Values past
 * 2^32 - 1 share its bucket, the last one.
 */
static inline unsigned tb_hist_index(uint64_t us)
{
	uint64_t v = us < ((uint64_t)1 << (TB_HIST_MAX_EXP + 1)) ? us
				 : ((uint64_t)1 << (TB_HIST_MAX_EXP + 1)) - 1;
	unsigned e = 63u - (unsigned)__builtin_clzll(v | TB_HIST_SUB);

	return (e - TB_HIST_SUB_BITS) * TB_HIST_SUB + (unsigned)(v >> (e - TB_HIST_SUB_BITS));
}

/* Records one value (ns, negative taken as 0): an index and two relaxed adds, no lock (the
 * count is the buckets' sum, computed by the reader). Always inline: a dozen instructions,
 * on every governed exchange. */
static inline __attribute__((always_inline)) void tb_hist_record(struct tb_hist *h, int64_t ns)
{
	uint64_t us = ns > 0 ? (uint64_t)ns / 1000u : 0;

	atomic_fetch_add_explicit(&h->bucket[tb_hist_index(us)], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}

/* The smallest value (us) of bucket i, and the first value past it. */
uint64_t tb_hist_lower(unsigned i);
uint64_t tb_hist_upper(unsigned i);

/* Copies h into *out (relaxed loads); count is the buckets' sum. */
void tb_hist_snapshot(const struct tb_hist *h, struct tb_hist_snap *out);

/* Adds src into dst (several processes or destinations into one view). */
void tb_hist_merge(struct tb_hist_snap *dst, const struct tb_hist_snap *src);

/*
 * The q-quantile (0 < q <= 1) in microseconds: the upper edge of the bucket holding the
 * value of rank ceil(q * count), i.e. never below the true value and at most ~12.5 % above
 * it. -1 when the histogram is empty. @unittest test_hist.c
 */
int64_t tb_hist_quantile(const struct tb_hist_snap *h, double q);

/* Observations <= le_us (le_us a bucket edge: a power of two or tb_hist_upper() - 1
 * counts exactly; otherwise the buckets wholly below it). For Prometheus' `le`. */
uint64_t tb_hist_count_le(const struct tb_hist_snap *h, uint64_t le_us);

#endif
