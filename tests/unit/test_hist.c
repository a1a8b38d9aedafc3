/* test_hist.c - the log-linear histogram: bucket edges, quantiles never below the truth and
 * within the bucket's precision, merge, and the `le` counts Prometheus is given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "hist.h"
#include "stats_prom.h"

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

/* Both edges of every bucket, and the values past the last edge (the index is computed
 * without branches: its corners are the edges). */
static void test_every_edge_lies_in_its_bucket(void **state)
{
	(void)state;
	for (unsigned i = 0; i + 1 < TB_HIST_BUCKETS; i++) {
		assert_int_equal(tb_hist_index(tb_hist_lower(i)), i);
		assert_int_equal(tb_hist_index(tb_hist_upper(i) - 1), i);
	}
	assert_int_equal(tb_hist_index(tb_hist_lower(TB_HIST_BUCKETS - 1)), TB_HIST_BUCKETS - 1);
	for (unsigned b = 32; b < 64; b++) {
		assert_int_equal(tb_hist_index((uint64_t)1 << b), TB_HIST_BUCKETS - 1);
		assert_int_equal(tb_hist_index(((uint64_t)1 << b) - 1), TB_HIST_BUCKETS - 1);
	}
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

/* Counter snapshots: the rows of a segment (two rows of one destination merged, a row not
 * yet published skipped, a row past those allocated never read) and their Prometheus text. */
static struct tb_stats_seg seg;
static struct tb_stats_row rows[TB_STATS_DESTS];

static void fill(int i, const char *dest, uint64_t calls, int64_t fb_ms)
{
	struct tb_stats_dest *d = &seg.d[i];

	snprintf(d->dest, sizeof(d->dest), "%s", dest);
	atomic_store(&d->calls, calls);
	atomic_store(&d->completed, calls - 1);
	atomic_store(&d->cuts[TB_PHASE_READ], 1);
	atomic_store(&d->notices[TB_NOTICE_FRAMING_RAW], 1);
	atomic_store(&d->leased, 3);
	atomic_store(&d->pending, 2);
	d->max = 5;
	tb_hist_record(&d->hist[TB_HIST_FIRST_BYTE], fb_ms * MS);
	atomic_store(&d->state, 2);
}

static void test_rows_merge_one_destination(void **state)
{
	int n;

	(void)state;
	memset(&seg, 0, sizeof(seg));
	fill(0, "10.0.0.1:80", 10, 5);
	fill(1, "10.0.0.2:443", 4, 50);
	fill(2, "10.0.0.1:80", 6, 500); /* a second row of the first: two threads raced */
	fill(3, "10.9.9.9:1", 1, 1);
	atomic_store(&seg.d[3].state, 1);  /* being filled: not shown */
	fill(4, "10.8.8.8:1", 1, 1);       /* past rows_allocated: a hole, never read */
	atomic_store(&seg.rows_allocated, 4);
	n = tb_stats_rows(&seg, rows);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0].dest, "10.0.0.1:80");
	assert_int_equal(rows[0].calls, 16);
	assert_int_equal(rows[0].completed, 14);
	assert_int_equal(rows[0].cuts[TB_PHASE_READ], 2);
	assert_int_equal(rows[0].notices[TB_NOTICE_FRAMING_RAW], 2);
	assert_int_equal(rows[0].notices[TB_NOTICE_TLS_ANSWERED_WAIT], 0);
	assert_int_equal(rows[0].leased, 3); /* gauges: the first row's, not a sum */
	assert_int_equal(rows[0].hist[TB_HIST_FIRST_BYTE].count, 2);
	assert_true(tb_hist_quantile(&rows[0].hist[TB_HIST_FIRST_BYTE], 1.0) >= 500000);
}

static void test_prom_text(void **state)
{
	static char buf[1 << 17];
	size_t need;
	int n;

	(void)state;
	memset(&seg, 0, sizeof(seg));
	fill(0, "10.0.0.1:80", 10, 5);
	atomic_store(&seg.rows_allocated, 1);
	snprintf(seg.d[0].host, sizeof(seg.d[0].host), "a\"b");
	n = tb_stats_rows(&seg, rows);
	need = tb_stats_prom(rows, n, 42, NULL, 0);
	assert_true(need > 1000 && need < sizeof(buf));
	assert_int_equal(tb_stats_prom(rows, n, 42, buf, sizeof(buf)), need);
	assert_int_equal(strlen(buf), need);
	assert_non_null(strstr(buf, "# TYPE timebox_calls_total counter\n"
				    "timebox_calls_total{dest=\"10.0.0.1:80\",host=\"a\\\"b\","
				    "pid=\"42\"} 10\n"));
	assert_non_null(strstr(buf, ",phase=\"read\"} 1\n"));
	assert_non_null(strstr(buf, "# TYPE timebox_notices_total counter\n"));
	assert_non_null(strstr(buf, "timebox_notices_total{dest=\"10.0.0.1:80\",host=\"a\\\"b\","
				    "pid=\"42\",what=\"framing_raw\"} 1\n"));
	assert_non_null(strstr(buf, ",what=\"tls_answered_wait\"} 0\n"));
	assert_non_null(strstr(buf, "timebox_gate_pending{dest=\"10.0.0.1:80\",host=\"a\\\"b\","
				    "pid=\"42\"} 2\n"));
	/* 5 ms lies above the 4.096 ms edge and below the 8.192 ms one */
	assert_non_null(strstr(buf, "le=\"0.004096\"} 0\n"));
	assert_non_null(strstr(buf, "le=\"0.008192\"} 1\n"));
	assert_non_null(strstr(buf, "le=\"+Inf\"} 1\n"));
	assert_non_null(strstr(buf, "timebox_first_byte_seconds_count{"));
	/* a buffer too small: truncated, NUL-terminated, the needed length still returned */
	assert_int_equal(tb_stats_prom(rows, n, 42, buf, 100), need);
	assert_int_equal(strlen(buf), 99);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_value_lies_in_its_bucket),
		cmocka_unit_test(test_every_edge_lies_in_its_bucket),
		cmocka_unit_test(test_buckets_are_contiguous_and_growing),
		cmocka_unit_test(test_quantiles_of_a_known_spread),
		cmocka_unit_test(test_empty_histogram_has_no_quantile),
		cmocka_unit_test(test_negative_and_huge_values_are_kept),
		cmocka_unit_test(test_merge_adds_everything),
		cmocka_unit_test(test_le_counts_at_powers_of_two_are_exact),
		cmocka_unit_test(test_rows_merge_one_destination),
		cmocka_unit_test(test_prom_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
