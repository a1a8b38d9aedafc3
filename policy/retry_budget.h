/* retry_budget.h - Finagle's retry budget for one destination: allowed iff
 * retries_in_window + 1 <= floor_per_s * window_s + pct/100 * first_attempts_in_window.
 * Pure code: `now` is passed in, no pointer inside; the caller holds the lock. */
#ifndef TB_RETRY_BUDGET_H
#define TB_RETRY_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "settings.h"
#include "window.h"

#define TB_RETRY_WINDOW_MIN (100 * TB_NS_PER_MS)
#define TB_RETRY_PCT_MAX 1000

struct tb_retry_cfg { int pct; int floor_per_s; int64_t window_ns; };

/* From a rule's settings: pct in 0..TB_RETRY_PCT_MAX (0: the budget is off), floor >= 0, a
 * window of at least TB_RETRY_WINDOW_MIN. */
void tb_retry_cfg_from(struct tb_retry_cfg *c, const struct tb_settings *s);

struct tb_retry_budget { struct tb_window win; /* a = first attempts, b = retries */
			 uint64_t retries_total, refused_total; };

void tb_retry_init(struct tb_retry_budget *r, const struct tb_retry_cfg *c);

/* A first attempt (a connect that is no retry) went: it earns pct/100 of a retry. */
void tb_retry_first(struct tb_retry_budget *r, const struct tb_retry_cfg *c, int64_t now);

/*
 * A retry asks: true (and counted in the window and retries_total) when within the budget,
 * false (refused_total + 1, nothing counted in the window: a refused retry loads nobody)
 * otherwise. With pct 0 the budget is off: always true. @unittest test_retry_budget.c
 */
bool tb_retry_allow(struct tb_retry_budget *r, const struct tb_retry_cfg *c, int64_t now);

/* The retries the window allows at `now` in hundredths of a retry (the budget's right side,
 * floor_per_s * window + pct * first attempts / 100, times 100), for stats and tests. */
uint64_t tb_retry_allowance_x100(struct tb_retry_budget *r, const struct tb_retry_cfg *c,
				 int64_t now);

#endif
