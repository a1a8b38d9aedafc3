/* retry_budget.c - retries as a share of recent first attempts, plus a floor per second.
 * Pure code: no clock read here, `now` is the caller's. Integer arithmetic in hundredths of a
 * retry: 20 % of 7 first attempts is 1.4 retries, which allows one, and no rounding drifts. */
#include "retry_budget.h"

void tb_retry_cfg_from(struct tb_retry_cfg *c, const struct tb_settings *s)
{
	c->pct = s->retry_budget < 0 ? 0
		 : s->retry_budget > TB_RETRY_PCT_MAX ? TB_RETRY_PCT_MAX : s->retry_budget;
	c->floor_per_s = s->retry_budget_floor > 0 ? s->retry_budget_floor : 0;
	c->window_ns = s->retry_budget_window_ns > TB_RETRY_WINDOW_MIN ? s->retry_budget_window_ns
									: TB_RETRY_WINDOW_MIN;
}

void tb_retry_init(struct tb_retry_budget *r, const struct tb_retry_cfg *c)
{
	tb_window_init(&r->win, c->window_ns);
	r->retries_total = r->refused_total = 0;
}

void tb_retry_first(struct tb_retry_budget *r, const struct tb_retry_cfg *c, int64_t now)
{
	(void)c;
	tb_window_add(&r->win, now, 1, 0);
}

uint64_t tb_retry_allowance_x100(struct tb_retry_budget *r, const struct tb_retry_cfg *c,
				 int64_t now)
{
	uint64_t firsts, retries;
	/* Finagle's minRetriesPerSec is a reserve of floor * ttl tokens: over a window of
	 * 10 s, a floor of 10 is 100 retries, so a quiet destination can still be retried.
	 * In milliseconds: floor (< 2^31) * window_ms stays far from 2^64 for any window. */
	uint64_t window_ms = (uint64_t)c->window_ns / (uint64_t)TB_NS_PER_MS;
	uint64_t floor_x100 = (uint64_t)c->floor_per_s * window_ms / 10;

	tb_window_sum(&r->win, now, &firsts, &retries);
	return floor_x100 + (uint64_t)c->pct * firsts;
}

bool tb_retry_allow(struct tb_retry_budget *r, const struct tb_retry_cfg *c, int64_t now)
{
	uint64_t firsts, retries;

	if (c->pct <= 0) {
		r->retries_total++;
		return true;
	}
	tb_window_sum(&r->win, now, &firsts, &retries);
	if ((retries + 1) * 100 > tb_retry_allowance_x100(r, c, now)) {
		r->refused_total++;
		return false;
	}
	tb_window_add(&r->win, now, 0, 1);
	r->retries_total++;
	return true;
}
