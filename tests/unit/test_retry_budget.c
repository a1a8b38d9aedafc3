/* test_retry_budget.c - Finagle's retry budget on a simulated clock: the arithmetic (a share
 * of the window's first attempts plus a floor per second), the window's expiry, and the load a
 * client that retries every failure 3 times puts on a downstream that always fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "retry_budget.h"

static struct tb_retry_cfg cfg(int pct, int floor_per_s, int64_t window_ns)
{
	struct tb_settings s;
	struct tb_retry_cfg c;

	tb_settings_init(&s);
	s.retry_budget = pct;
	s.retry_budget_floor = floor_per_s;
	s.retry_budget_window_ns = window_ns;
	tb_retry_cfg_from(&c, &s);
	return c;
}

/* Retries allowed in a row at `now` until the first refusal. */
static int allowed_now(struct tb_retry_budget *r, const struct tb_retry_cfg *c, int64_t now)
{
	int n = 0;

	while (tb_retry_allow(r, c, now) && n < 1000000)
		n++;
	return n;
}

static void test_share_of_first_attempts(void **state)
{
	struct tb_retry_cfg c = cfg(20, 0, 10 * S);
	struct tb_retry_budget r;

	(void)state;
	tb_retry_init(&r, &c);
	for (int i = 0; i < 100; i++)
		tb_retry_first(&r, &c, T0 + i * MS);
	assert_int_equal(allowed_now(&r, &c, T0 + S), 20);
	assert_int_equal(r.retries_total, 20);
	assert_int_equal(r.refused_total, 1);
	/* 5 more first attempts earn exactly one more retry. */
	for (int i = 0; i < 4; i++)
		tb_retry_first(&r, &c, T0 + S);
	assert_false(tb_retry_allow(&r, &c, T0 + S));
	tb_retry_first(&r, &c, T0 + S);
	assert_true(tb_retry_allow(&r, &c, T0 + S));
	assert_false(tb_retry_allow(&r, &c, T0 + S));
}

static void test_fraction_allows_whole_retries_only(void **state)
{
	struct tb_retry_cfg c = cfg(20, 0, 10 * S);
	struct tb_retry_budget r;

	(void)state;
	tb_retry_init(&r, &c);
	/* 7 first attempts at 20 % are 1.4 retries: one. */
	for (int i = 0; i < 7; i++)
		tb_retry_first(&r, &c, T0);
	assert_int_equal(tb_retry_allowance_x100(&r, &c, T0), 140);
	assert_int_equal(allowed_now(&r, &c, T0), 1);
}

static void test_floor_per_second(void **state)
{
	struct tb_retry_cfg c = cfg(20, 10, 10 * S);
	struct tb_retry_budget r;

	(void)state;
	tb_retry_init(&r, &c);
	/* Nothing sent: the floor alone, 10/s over a 10 s window. */
	assert_int_equal(allowed_now(&r, &c, T0), 100);
	tb_retry_init(&r, &c);
	for (int i = 0; i < 100; i++)
		tb_retry_first(&r, &c, T0);
	assert_int_equal(allowed_now(&r, &c, T0), 120);
	/* A floor over a window of 1.5 s: 1.5 retries, one. */
	c = cfg(20, 1, 1500 * MS);
	tb_retry_init(&r, &c);
	assert_int_equal(allowed_now(&r, &c, T0), 1);
}

static void test_floor_zero(void **state)
{
	struct tb_retry_cfg c = cfg(20, 0, 10 * S);
	struct tb_retry_budget r;

	(void)state;
	tb_retry_init(&r, &c);
	assert_false(tb_retry_allow(&r, &c, T0));
	tb_retry_first(&r, &c, T0);
	assert_false(tb_retry_allow(&r, &c, T0)); /* 0.2 of a retry */
	assert_int_equal(r.refused_total, 2);
	assert_int_equal(r.retries_total, 0);
}

static void test_window_expiry(void **state)
{
	struct tb_retry_cfg c = cfg(20, 0, 10 * S);
	struct tb_retry_budget r;

	(void)state;
	tb_retry_init(&r, &c);
	for (int i = 0; i < 100; i++)
		tb_retry_first(&r, &c, T0);
	assert_int_equal(allowed_now(&r, &c, T0), 20);
	/* The first attempts and the retries both leave the window: nothing earned, nothing
	 * spent. */
	assert_false(tb_retry_allow(&r, &c, T0 + 11 * S));
	for (int i = 0; i < 50; i++)
		tb_retry_first(&r, &c, T0 + 11 * S);
	assert_int_equal(allowed_now(&r, &c, T0 + 11 * S), 10);
}

static void test_off_allows_all(void **state)
{
	struct tb_retry_cfg c = cfg(0, 0, 10 * S);
	struct tb_retry_budget r;

	(void)state;
	tb_retry_init(&r, &c);
	for (int i = 0; i < 1000; i++)
		assert_true(tb_retry_allow(&r, &c, T0));
	assert_int_equal(r.retries_total, 1000);
}

static void test_cfg_clamps(void **state)
{
	struct tb_retry_cfg c = cfg(5000, -3, 0);

	(void)state;
	assert_int_equal(c.pct, TB_RETRY_PCT_MAX);
	assert_int_equal(c.floor_per_s, 0);
	assert_int_equal(c.window_ns, TB_RETRY_WINDOW_MIN);
}

/*
 * The pitfall 4 on a simulated clock: a client sends 50 requests a second for 60 s to
 * a downstream that fails every one, and retries each failure up to 3 times at once. The load
 * is the attempts the downstream sees per first attempt: 4 without a budget, at most 1.25
 * with 20 %. Returns the ratio.
 */
static double storm(const struct tb_retry_cfg *c, bool budget)
{
	struct tb_retry_budget r;
	uint64_t firsts = 0, attempts = 0;

	tb_retry_init(&r, c);
	for (int64_t now = T0; now < T0 + 60 * S; now += 20 * MS) {
		tb_retry_first(&r, c, now);
		firsts++;
		attempts++;
		for (int retry = 0; retry < 3; retry++) {
			/* A refused retry fails at once, with nothing sent: the client's next
			 * retry asks again, as a program's retry loop would. */
			if (budget && !tb_retry_allow(&r, c, now))
				continue;
			attempts++;
		}
	}
	return (double)attempts / (double)firsts;
}

static void test_retry_storm_load(void **state)
{
	struct tb_retry_cfg c = cfg(20, 0, 10 * S);
	struct tb_retry_cfg small_floor = cfg(20, 1, 10 * S);
	double without = storm(&c, false), with = storm(&c, true);
	double with_floor = storm(&small_floor, true);
	/* The default floor of 10/s is 10 of these 50 requests' retries a second on top: a
	 * client this slow meets the floor before the share (the e2e test sets a small one). */
	struct tb_retry_cfg default_floor = cfg(20, 10, 10 * S);
	double with_default_floor = storm(&default_floor, true);

	(void)state;
	printf("retry storm, 50 requests/s for 60 s, 3 retries each, downstream always failing:\n"
	       "  load without a budget %.3fx, with 20 %% floor 0 %.3fx, with 20 %% floor 1/s "
	       "%.3fx, with 20 %% floor 10/s %.3fx\n", without, with, with_floor,
	       with_default_floor);
	assert_true(without > 3.99 && without < 4.01);
	assert_true(with <= 1.25);
	assert_true(with >= 1.15); /* the budget is spent, not merely refused */
	assert_true(with_floor <= 1.25);
	assert_true(with_default_floor > 1.35 && with_default_floor <= 1.41);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_share_of_first_attempts),
		cmocka_unit_test(test_fraction_allows_whole_retries_only),
		cmocka_unit_test(test_floor_per_second),
		cmocka_unit_test(test_floor_zero),
		cmocka_unit_test(test_window_expiry),
		cmocka_unit_test(test_off_allows_all),
		cmocka_unit_test(test_cfg_clamps),
		cmocka_unit_test(test_retry_storm_load),
	};

	return cmocka_run_group_tests_name("retry_budget", tests, NULL, NULL);
}
