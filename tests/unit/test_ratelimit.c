/* test_ratelimit.c - the log limiter on a simulated clock: the first N of a second pass, the
 * rest are counted once, a new second starts afresh, rate 0 means no limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "ratelimit.h"

static void test_first_n_of_a_second_pass(void **state)
{
	struct tb_ratelimit rl;
	int passed = 0;

	(void)state;
	tb_rl_init(&rl, 10);
	for (int i = 0; i < 1000; i++)
		passed += tb_rl_allow(&rl, T0 + i * (S / 1000) / 2); /* 1000 in half a second */
	assert_int_equal(passed, 10);
	assert_int_equal(tb_rl_take_suppressed(&rl), 990);
	assert_int_equal(tb_rl_take_suppressed(&rl), 0);
}

static void test_next_second_starts_afresh(void **state)
{
	struct tb_ratelimit rl;
	int passed = 0;

	(void)state;
	tb_rl_init(&rl, 3);
	for (int i = 0; i < 5; i++)
		passed += tb_rl_allow(&rl, T0 + 100 * MS);
	assert_int_equal(passed, 3);
	assert_true(tb_rl_allow(&rl, T0 + S + 1));
	assert_int_equal(tb_rl_take_suppressed(&rl), 2);
}

static void test_a_second_never_exceeds_the_rate(void **state)
{
	struct tb_ratelimit rl;

	(void)state;
	tb_rl_init(&rl, 100);
	for (int64_t sec = 0; sec < 5; sec++) {
		int passed = 0;

		for (int i = 0; i < 1000; i++)
			passed += tb_rl_allow(&rl, T0 + sec * S + i * MS);
		assert_int_equal(passed, 100);
	}
}

static void test_rate_zero_is_no_limit(void **state)
{
	struct tb_ratelimit rl;

	(void)state;
	tb_rl_init(&rl, 0);
	for (int i = 0; i < 10000; i++)
		assert_true(tb_rl_allow(&rl, T0));
	assert_int_equal(tb_rl_take_suppressed(&rl), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_n_of_a_second_pass),
		cmocka_unit_test(test_next_second_starts_afresh),
		cmocka_unit_test(test_a_second_never_exceeds_the_rate),
		cmocka_unit_test(test_rate_zero_is_no_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
