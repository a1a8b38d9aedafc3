/* test_hist.c - the log-linear histogram: bucket edges, quantiles never below the truth and
 * within the bucket's precision, merge, and the `le` counts Prometheus is given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "hist.h"

static struct tb_hist h;

static void reset(void)
{
	memset(&h, 0, sizeof(h));
}

static void test_every_value_lies_in_its_bucket(void **state)
{
	(void)state;
	for (uint64_t v = 0; v < 5000000; v = v < 100 ? v + 1 : v + v / 7 + 1) {
		unsigned i = tb_hist_index(v);

		assert_true(i < TB_HIST_BUCKETS);
		assert_true(tb_hist_lower(i) <= v);
		assert_true(v < tb_hist_upper(i));
	}
	assert_int_equal(tb_hist_index(UINT64_MAX), TB_HIST_BUCKETS - 1);
	assert_true(tb_hist_upper(TB_HIST_BUCKETS - 1) == UINT64_MAX);
}

static void test_buckets_are_contiguous_and_growing(void **state)
{
	(void)state;
	for (unsigned i = 0; i + 2 < TB_HIST_BUCKETS; i++) {
		assert_true(tb_hist_upper(i) == tb_hist_lower(i + 1));
		assert_true(tb_hist_lower(i) < tb_hist_lower(i + 1));
		/* precision: a bucket is at most 1/8 of its lower edge wide (exact below 8 us) */
		if (tb_hist_lower(i) >= 8)
			assert_true(tb_hist_upper(i) - tb_hist_lower(i) <= tb_hist_lower(i) / 8);
	}
}

static void test_quantiles_of_a_known_spread(void **state)
{
	struct tb_hist_snap s;

	(void)state;
	reset();
	for (int i = 1; i <= 1000; i++)
		tb_hist_record(&h, (int64_t)i * MS); /* 1 ms .. 1 s */
	tb_hist_snapshot(&h, &s);
	assert_int_equal(s.count, 1000);
	assert_int_equal(s.sum_us, 500500 * 1000ull);
	int64_t p50 = tb_hist_quantile(&s, 0.5), p99 = tb_hist_quantile(&s, 0.99);

	assert_true(p50 >= 500000 && p50 <= 500000 * 9 / 8);
	assert_true(p99 >= 990000 && p99 <= 990000 * 9 / 8);
	assert_true(tb_hist_quantile(&s, 1.0) >= 1000000);
}

static void test_empty_histogram_has_no_quantile(void **state)
{
	struct tb_hist_snap s;

	(void)state;
	reset();
	tb_hist_snapshot(&h, &s);
	assert_int_equal(tb_hist_quantile(&s, 0.5), -1);
	assert_int_equal(tb_hist_count_le(&s, 1000), 0);
}

static void test_negative_and_huge_values_are_kept(void **state)
{
	struct tb_hist_snap s;

	(void)state;
	reset();
	tb_hist_record(&h, -5);
	tb_hist_record(&h, INT64_MAX);
	tb_hist_snapshot(&h, &s);
	assert_int_equal(s.count, 2);
	assert_int_equal(s.bucket[0], 1);
	assert_int_equal(s.bucket[TB_HIST_BUCKETS - 1], 1);
}

static void test_merge_adds_everything(void **state)
{
	struct tb_hist_snap a, b;

	(void)state;
	reset();
	tb_hist_record(&h, 3 * MS);
	tb_hist_snapshot(&h, &a);
	reset();
	tb_hist_record(&h, 300 * MS);
	tb_hist_record(&h, 300 * MS);
	tb_hist_snapshot(&h, &b);
	tb_hist_merge(&a, &b);
	assert_int_equal(a.count, 3);
	assert_int_equal(a.sum_us, 603000);
	assert_true(tb_hist_quantile(&a, 0.34) >= 300000);
	assert_true(tb_hist_quantile(&a, 0.33) < 300000);
}

static void test_le_counts_at_powers_of_two_are_exact(void **state)
{
	struct tb_hist_snap s;

	(void)state;
	reset();
	tb_hist_record(&h, 1023 * 1000);  /* 1023 us */
	tb_hist_record(&h, 1024 * 1000);  /* 1024 us */
	tb_hist_record(&h, 1025 * 1000);
	tb_hist_snapshot(&h, &s);
	assert_int_equal(tb_hist_count_le(&s, 1023), 1);
	assert_int_equal(tb_hist_count_le(&s, 2047), 3);
	assert_int_equal(tb_hist_count_le(&s, 1000000000), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_value_lies_in_its_bucket),
		cmocka_unit_test(test_buckets_are_contiguous_and_growing),
		cmocka_unit_test(test_quantiles_of_a_known_spread),
		cmocka_unit_test(test_empty_histogram_has_no_quantile),
		cmocka_unit_test(test_negative_and_huge_values_are_kept),
		cmocka_unit_test(test_merge_adds_everything),
		cmocka_unit_test(test_le_counts_at_powers_of_two_are_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
