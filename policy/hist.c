/* hist.c - the log-linear histogram's edges, snapshot, merge and quantiles.
 * Pure code: recording is inline in hist.h, everything here works on copies. */
#include "hist.h"

uint64_t tb_hist_lower(unsigned i)
{
	unsigned e;

	if (i < TB_HIST_SUB)
		return i;
	if (i >= TB_HIST_BUCKETS)
		i = TB_HIST_BUCKETS - 1;
	e = i / TB_HIST_SUB + TB_HIST_SUB_BITS - 1;
	return ((uint64_t)TB_HIST_SUB + i % TB_HIST_SUB) << (e - TB_HIST_SUB_BITS);
}

/* The last bucket holds everything above it: its upper edge is "infinity". */
uint64_t tb_hist_upper(unsigned i)
{
	if (i + 1 >= TB_HIST_BUCKETS)
		return UINT64_MAX;
	return tb_hist_lower(i + 1);
}

void tb_hist_snapshot(const struct tb_hist *h, struct tb_hist_snap *out)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < TB_HIST_BUCKETS; i++) {
		out->bucket[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
		n += out->bucket[i];
	}
	out->count = n;
	out->sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}

void tb_hist_merge(struct tb_hist_snap *dst, const struct tb_hist_snap *src)
{
	for (unsigned i = 0; i < TB_HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum_us += src->sum_us;
}

int64_t tb_hist_quantile(const struct tb_hist_snap *h, double q)
{
	uint64_t rank, seen = 0;

	if (h->count == 0)
		return -1;
	if (q <= 0)
		q = 1e-9;
	if (q > 1)
		q = 1;
	rank = (uint64_t)(q * (double)h->count);
	if ((double)rank < q * (double)h->count)
		rank++;
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < TB_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t up = tb_hist_upper(i);

			return up == UINT64_MAX ? (int64_t)tb_hist_lower(i) : (int64_t)(up - 1);
		}
	}
	return (int64_t)tb_hist_lower(TB_HIST_BUCKETS - 1);
}

uint64_t tb_hist_count_le(const struct tb_hist_snap *h, uint64_t le_us)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < TB_HIST_BUCKETS; i++) {
		uint64_t up = tb_hist_upper(i);

		if (up != UINT64_MAX && up - 1 <= le_us)
			n += h->bucket[i];
		else
			break;
	}
	return n;
}
