/* test_breaker.c - the circuit breaker walked on a simulated clock: what opens it (a run of
 * failures, a failure rate over enough calls), what does not (a healthy downstream's odd
 * failure), half-open probes, the growth of openings and its cap; and the rolling window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "breaker.h"
#include "window.h"

static struct tb_breaker_cfg cfg(int failures, int rate, int min_calls)
{
	struct tb_settings s;
	struct tb_breaker_cfg c;

	tb_settings_init(&s);
	s.breaker_failures = failures;
	s.breaker_rate = rate;
	s.breaker_min_calls = min_calls;
	s.breaker_window_ns = 10 * S;
	s.breaker_open_ns = 30 * S;
	s.breaker_open_max_ns = 300 * S;
	s.breaker_probes = 1;
	tb_breaker_cfg_from(&c, &s);
	return c;
}

/* One call from its connect to its outcome at `now`; returns the change the outcome made.
 * The connect must pass (closed). */
static enum tb_breaker_change call(struct tb_breaker *b, const struct tb_breaker_cfg *c,
				   int64_t now, bool failed)
{
	struct tb_breaker_ticket t;
	enum tb_breaker_change ch;

	if (tb_breaker_allow(b, c, now, &t, &ch) != TB_BREAKER_PASS)
		fail_msg("connect at %lld: not passed (state %s)", (long long)now,
			 tb_breaker_state_name(b->state));
	assert_int_equal(ch, TB_BREAKER_SAME);
	return tb_breaker_record(b, c, now, &t, failed);
}

static enum tb_breaker_verdict ask(struct tb_breaker *b, const struct tb_breaker_cfg *c,
				   int64_t now, struct tb_breaker_ticket *t,
				   enum tb_breaker_change *ch)
{
	return tb_breaker_allow(b, c, now, t, ch);
}

/* Opens b at `now` with c->failures failures in a row. */
static void open_it(struct tb_breaker *b, const struct tb_breaker_cfg *c, int64_t now)
{
	for (int i = 1; i < c->failures; i++)
		assert_int_equal(call(b, c, now, true), TB_BREAKER_SAME);
	assert_int_equal(call(b, c, now, true), TB_BREAKER_OPENED);
}

static void test_consecutive_opens_at_n_not_before(void **state)
{
	struct tb_breaker_cfg c = cfg(5, 0, 20);
	struct tb_breaker b;
	struct tb_breaker_ticket t;
	enum tb_breaker_change ch;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(call(&b, &c, T0 + i * MS, true), TB_BREAKER_SAME);
	assert_int_equal(b.state, TB_BREAKER_CLOSED);
	assert_int_equal(b.consecutive, 4);
	assert_int_equal(call(&b, &c, T0 + 4 * MS, true), TB_BREAKER_OPENED);
	assert_int_equal(b.state, TB_BREAKER_OPEN);
	assert_int_equal(b.why, TB_BREAKER_WHY_CONSECUTIVE);
	assert_string_equal(tb_breaker_reason_name(b.why), "consecutive");
	assert_int_equal(b.why_failures, 5);
	assert_int_equal(b.why_calls, 5);
	assert_int_equal(b.opened_total, 1);
	assert_int_equal(b.open_until, T0 + 4 * MS + 30 * S);
	/* Open: refused until open_until, counted. */
	assert_int_equal(ask(&b, &c, T0 + 5 * MS, &t, &ch), TB_BREAKER_REFUSE);
	assert_int_equal(ask(&b, &c, T0 + 4 * MS + 30 * S - 1, &t, &ch), TB_BREAKER_REFUSE);
	assert_int_equal(ch, TB_BREAKER_SAME);
	assert_int_equal(b.refused_total, 2);
}

static void test_success_resets_the_run(void **state)
{
	struct tb_breaker_cfg c = cfg(5, 0, 20);
	struct tb_breaker b;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	for (int round = 0; round < 100; round++) {
		for (int i = 0; i < 4; i++)
			assert_int_equal(call(&b, &c, T0 + round * S, true), TB_BREAKER_SAME);
		assert_int_equal(call(&b, &c, T0 + round * S, false), TB_BREAKER_SAME);
		assert_int_equal(b.consecutive, 0);
	}
	assert_int_equal(b.state, TB_BREAKER_CLOSED);
	assert_int_equal(b.opened_total, 0);
}

static void test_rate_needs_min_calls(void **state)
{
	struct tb_breaker_cfg c = cfg(0, 50, 20);
	struct tb_breaker b;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	/* 19 calls, all failed: 100 % but fewer than min_calls. */
	for (int i = 0; i < 19; i++)
		assert_int_equal(call(&b, &c, T0 + i * MS, true), TB_BREAKER_SAME);
	assert_int_equal(b.state, TB_BREAKER_CLOSED);
	/* The 20th, a success, makes 19 of 20 = 95 % over min_calls: it opens. */
	assert_int_equal(call(&b, &c, T0 + 19 * MS, false), TB_BREAKER_OPENED);
	assert_int_equal(b.why, TB_BREAKER_WHY_RATE);
	assert_int_equal(b.why_failures, 19);
	assert_int_equal(b.why_calls, 20);
}

static void test_rate_at_threshold_exactly(void **state)
{
	struct tb_breaker_cfg c = cfg(0, 50, 20);
	struct tb_breaker b;
	int64_t now = T0;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	/* Alternating, starting with a success: after 2k calls k failed (50 %). At call 20
	 * (10 failures of 20) the rate reaches 50 %: open, not at 19 (9 of 19 = 47 %). */
	for (int i = 1; i <= 19; i++)
		assert_int_equal(call(&b, &c, now += MS, i % 2 == 0), TB_BREAKER_SAME);
	assert_int_equal(call(&b, &c, now += MS, true), TB_BREAKER_OPENED);
	assert_int_equal(b.why_failures, 10);
	assert_int_equal(b.why_calls, 20);
}

static void test_rate_below_threshold_stays_closed(void **state)
{
	struct tb_breaker_cfg c = cfg(0, 50, 20);
	struct tb_breaker b;
	int64_t now = T0;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	/* 2 failures out of 5 calls = 40 %, for a minute. */
	for (int i = 0; i < 6000; i++)
		assert_int_equal(call(&b, &c, now += 10 * MS, i % 5 < 2), TB_BREAKER_SAME);
}

/* The "healthy downstream with occasional single failures": 1 failure in 20 calls,
 * 10 minutes of 100 calls a second, both modes on (5 in a row, 50 %). */
static void test_occasional_failures_never_open(void **state)
{
	struct tb_breaker_cfg c = cfg(5, 50, 20);
	struct tb_breaker b;
	int64_t now = T0;
	uint32_t x = 12345;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	for (int i = 0; i < 60000; i++) {
		/* Pseudo-random single failures, about one in 20, never two in a row. */
		x = x * 1103515245u + 12345u;
		bool failed = (x >> 16) % 20 == 0 && b.consecutive == 0;

		assert_int_equal(call(&b, &c, now += 10 * MS, failed), TB_BREAKER_SAME);
	}
	assert_int_equal(b.state, TB_BREAKER_CLOSED);
	assert_int_equal(b.opened_total, 0);
	assert_int_equal(b.refused_total, 0);
}

static void test_window_expiry_drops_old_failures(void **state)
{
	struct tb_breaker_cfg c = cfg(0, 50, 20);
	struct tb_breaker b;
	uint64_t calls, fails;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	/* 15 failures, then 11 s of nothing: a window of 10 s no longer holds them. */
	for (int i = 0; i < 15; i++)
		assert_int_equal(call(&b, &c, T0 + i * MS, true), TB_BREAKER_SAME);
	tb_window_sum(&b.win, T0 + 11 * S, &calls, &fails);
	assert_int_equal(calls, 0);
	assert_int_equal(fails, 0);
	/* 10 more (a 50 % rate, 10 of 20, had the old ones stayed) opens nothing. */
	for (int i = 0; i < 5; i++)
		assert_int_equal(call(&b, &c, T0 + 11 * S + i * MS, true), TB_BREAKER_SAME);
	for (int i = 0; i < 5; i++)
		assert_int_equal(call(&b, &c, T0 + 11 * S + (5 + i) * MS, false), TB_BREAKER_SAME);
	assert_int_equal(b.state, TB_BREAKER_CLOSED);
}

static void test_half_open_success_closes(void **state)
{
	struct tb_breaker_cfg c = cfg(5, 50, 20);
	struct tb_breaker b;
	struct tb_breaker_ticket t, t2;
	enum tb_breaker_change ch;
	uint64_t calls, fails;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	open_it(&b, &c, T0);
	assert_int_equal(ask(&b, &c, T0 + 30 * S, &t, &ch), TB_BREAKER_PROBE);
	assert_int_equal(ch, TB_BREAKER_HALF_OPENED);
	assert_int_equal(b.state, TB_BREAKER_HALF_OPEN);
	assert_int_equal(t.probe, 0);
	/* One probe at a time: the next connect is refused. */
	assert_int_equal(ask(&b, &c, T0 + 30 * S + MS, &t2, &ch), TB_BREAKER_REFUSE);
	assert_int_equal(ch, TB_BREAKER_SAME);
	assert_int_equal(tb_breaker_record(&b, &c, T0 + 31 * S, &t, false), TB_BREAKER_RECLOSED);
	assert_int_equal(b.state, TB_BREAKER_CLOSED);
	assert_int_equal(b.openings, 0);
	assert_int_equal(b.consecutive, 0);
	tb_window_sum(&b.win, T0 + 31 * S, &calls, &fails);
	assert_int_equal(calls + fails, 0);
	assert_string_equal(tb_breaker_reason_name(b.why), "probe_passed");
	/* Closed again: the next opening is a first one (30 s, not 60). */
	open_it(&b, &c, T0 + 40 * S);
	assert_int_equal(b.open_until, T0 + 70 * S);
}

static void test_half_open_failure_reopens_longer_capped(void **state)
{
	struct tb_breaker_cfg c = cfg(5, 0, 20);
	struct tb_breaker b;
	struct tb_breaker_ticket t;
	enum tb_breaker_change ch;
	int64_t now = T0;
	/* Envoy: 30 s x n, capped at 300 s. */
	int64_t want[] = { 30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300 };

	(void)state;
	tb_breaker_init(&b, &c, T0);
	open_it(&b, &c, now);
	assert_int_equal(b.open_until - now, 30 * S);
	for (unsigned n = 1; n < sizeof(want) / sizeof(want[0]); n++) {
		now = b.open_until;
		assert_int_equal(ask(&b, &c, now - 1, &t, &ch), TB_BREAKER_REFUSE);
		assert_int_equal(ask(&b, &c, now, &t, &ch), TB_BREAKER_PROBE);
		assert_int_equal(ch, TB_BREAKER_HALF_OPENED);
		now += 100 * MS;
		assert_int_equal(tb_breaker_record(&b, &c, now, &t, true), TB_BREAKER_REOPENED);
		assert_int_equal(b.state, TB_BREAKER_OPEN);
		assert_int_equal(b.openings, n + 1);
		if (b.open_until - now != want[n] * S)
			fail_msg("opening %u lasts %lld ms, want %lld s", n + 1,
				 (long long)((b.open_until - now) / MS), (long long)want[n]);
		assert_string_equal(tb_breaker_reason_name(b.why), "probe_failed");
	}
	assert_int_equal(b.opened_total, sizeof(want) / sizeof(want[0]));
	assert_int_equal(tb_breaker_open_len(&c, 0), 30 * S);
	assert_int_equal(tb_breaker_open_len(&c, UINT32_MAX), 300 * S);
}

static void test_probes_counted(void **state)
{
	struct tb_settings s;
	struct tb_breaker_cfg c;
	struct tb_breaker b;
	struct tb_breaker_ticket t[5];
	enum tb_breaker_change ch;
	int64_t at = T0 + 30 * S;

	(void)state;
	tb_settings_init(&s);
	s.breaker_failures = 5;
	s.breaker_min_calls = 20;
	s.breaker_window_ns = 10 * S;
	s.breaker_open_ns = 30 * S;
	s.breaker_open_max_ns = 300 * S;
	s.breaker_probes = 3;
	tb_breaker_cfg_from(&c, &s);
	tb_breaker_init(&b, &c, T0);
	open_it(&b, &c, T0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ask(&b, &c, at + i, &t[i], &ch), TB_BREAKER_PROBE);
		assert_int_equal(t[i].probe, i);
	}
	assert_int_equal(ask(&b, &c, at + 3, &t[3], &ch), TB_BREAKER_REFUSE);
	assert_int_equal(t[3].probe, -1);
	/* A probe whose socket closed unanswered gives its place back. */
	tb_breaker_forget(&b, &t[1]);
	assert_int_equal(ask(&b, &c, at + 4, &t[4], &ch), TB_BREAKER_PROBE);
	assert_int_equal(t[4].probe, 1);
	assert_int_equal(ask(&b, &c, at + 5, &t[3], &ch), TB_BREAKER_REFUSE);
	/* The first success closes it; the other probes' outcomes are stale. */
	assert_int_equal(tb_breaker_record(&b, &c, at + S, &t[2], false), TB_BREAKER_RECLOSED);
	assert_int_equal(tb_breaker_record(&b, &c, at + S, &t[0], true), TB_BREAKER_SAME);
	assert_int_equal(b.consecutive, 1); /* counted as a closed call, stale or not */
	assert_int_equal(b.state, TB_BREAKER_CLOSED);

	s.breaker_probes = 99;
	tb_breaker_cfg_from(&c, &s);
	assert_int_equal(c.probes, TB_BREAKER_PROBES_MAX);
	s.breaker_probes = 0;
	tb_breaker_cfg_from(&c, &s);
	assert_int_equal(c.probes, 1);
}

/* A process that took the probe and died never records nor forgets: after probe_timeout the
 * place goes to another, so the breaker is not stuck half-open. */
static void test_lost_probe_frees_after_timeout(void **state)
{
	struct tb_breaker_cfg c = cfg(5, 0, 20);
	struct tb_breaker b;
	struct tb_breaker_ticket lost, t;
	enum tb_breaker_change ch;
	int64_t at = T0 + 30 * S;

	(void)state;
	assert_int_equal(c.probe_timeout_ns, 30 * S);
	tb_breaker_init(&b, &c, T0);
	open_it(&b, &c, T0);
	assert_int_equal(ask(&b, &c, at, &lost, &ch), TB_BREAKER_PROBE);
	assert_int_equal(ask(&b, &c, at + c.probe_timeout_ns - 1, &t, &ch), TB_BREAKER_REFUSE);
	assert_int_equal(ask(&b, &c, at + c.probe_timeout_ns, &t, &ch), TB_BREAKER_PROBE);
	assert_int_equal(tb_breaker_record(&b, &c, at + c.probe_timeout_ns + MS, &t, false),
			 TB_BREAKER_RECLOSED);
}

/* Calls let through while closed end after the breaker opened and turned half-open: their
 * outcomes say how the downstream was, and never decide the probe's question. */
static void test_stale_tickets_do_not_decide(void **state)
{
	struct tb_breaker_cfg c = cfg(5, 0, 20);
	struct tb_breaker b;
	struct tb_breaker_ticket old[3], probe, t;
	enum tb_breaker_change ch;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ask(&b, &c, T0, &old[i], &ch), TB_BREAKER_PASS);
	open_it(&b, &c, T0 + MS);
	/* Open: an old call's success neither closes nor counts. */
	assert_int_equal(tb_breaker_record(&b, &c, T0 + 2 * MS, &old[0], false), TB_BREAKER_SAME);
	assert_int_equal(b.state, TB_BREAKER_OPEN);
	assert_int_equal(ask(&b, &c, T0 + 31 * S, &probe, &ch), TB_BREAKER_PROBE);
	/* Half-open: an old success does not close it, an old failure does not reopen it. */
	assert_int_equal(tb_breaker_record(&b, &c, T0 + 31 * S, &old[1], false), TB_BREAKER_SAME);
	assert_int_equal(tb_breaker_record(&b, &c, T0 + 31 * S, &old[2], true), TB_BREAKER_SAME);
	assert_int_equal(b.state, TB_BREAKER_HALF_OPEN);
	/* An old ticket's forget frees no probe place. */
	tb_breaker_forget(&b, &old[0]);
	assert_int_equal(ask(&b, &c, T0 + 31 * S, &t, &ch), TB_BREAKER_REFUSE);
	/* A probe of an earlier half-open period is stale too. */
	assert_int_equal(tb_breaker_record(&b, &c, T0 + 32 * S, &probe, true), TB_BREAKER_REOPENED);
	assert_int_equal(ask(&b, &c, b.open_until, &t, &ch), TB_BREAKER_PROBE);
	assert_int_equal(tb_breaker_record(&b, &c, b.open_until, &probe, false), TB_BREAKER_SAME);
	assert_int_equal(b.state, TB_BREAKER_HALF_OPEN);
	assert_int_equal(tb_breaker_record(&b, &c, b.open_until, &t, false), TB_BREAKER_RECLOSED);
}

static void test_off_never_opens(void **state)
{
	struct tb_breaker_cfg c = cfg(0, 0, 20);
	struct tb_breaker b;

	(void)state;
	tb_breaker_init(&b, &c, T0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(call(&b, &c, T0 + i * MS, true), TB_BREAKER_SAME);
	assert_int_equal(b.state, TB_BREAKER_CLOSED);
}

static void test_cfg_clamps(void **state)
{
	struct tb_settings s;
	struct tb_breaker_cfg c;

	(void)state;
	tb_settings_init(&s);
	s.breaker_rate = 250;
	s.breaker_min_calls = 0;
	s.breaker_window_ns = 0;
	s.breaker_open_ns = 5 * S;
	s.breaker_open_max_ns = 2 * S;
	tb_breaker_cfg_from(&c, &s);
	assert_int_equal(c.rate_pct, 100);
	assert_int_equal(c.min_calls, 1);
	assert_int_equal(c.window_ns, TB_BREAKER_WINDOW_MIN);
	assert_int_equal(c.open_max_ns, 5 * S);
	assert_int_equal(c.probe_timeout_ns, 5 * S);
	s.breaker_open_ns = 0;
	tb_breaker_cfg_from(&c, &s);
	assert_true(c.open_ns > 0);
	assert_int_equal(c.probe_timeout_ns, S);
	assert_string_equal(tb_breaker_state_name(TB_BREAKER_HALF_OPEN), "half-open");
	assert_string_equal(tb_breaker_state_name(TB_BREAKER_OPEN), "open");
	assert_string_equal(tb_breaker_state_name(TB_BREAKER_CLOSED), "closed");
}

static void test_window_rolls(void **state)
{
	struct tb_window w;
	uint64_t a, b;

	(void)state;
	tb_window_init(&w, 10 * S);
	assert_int_equal(w.bucket_ns, S);
	tb_window_add(&w, T0, 3, 1);
	tb_window_add(&w, T0 + 5 * S, 2, 2);
	tb_window_sum(&w, T0 + 9 * S, &a, &b);
	assert_int_equal(a, 5);
	assert_int_equal(b, 3);
	/* T0's bucket leaves the window when the newest is 10 buckets later. */
	tb_window_sum(&w, T0 + 10 * S, &a, &b);
	assert_int_equal(a, 2);
	assert_int_equal(b, 2);
	/* A late add (an older now) still in the window counts; one older than it does not. */
	tb_window_add(&w, T0 + 6 * S, 1, 0);
	tb_window_add(&w, T0 - S, 100, 100);
	tb_window_sum(&w, T0 + 10 * S, &a, &b);
	assert_int_equal(a, 3);
	assert_int_equal(b, 2);
	tb_window_sum(&w, T0 + 100 * S, &a, &b);
	assert_int_equal(a + b, 0);
	tb_window_add(&w, T0 + 100 * S, 7, 0);
	tb_window_clear(&w);
	tb_window_sum(&w, T0 + 100 * S, &a, &b);
	assert_int_equal(a, 0);
	tb_window_init(&w, 3);
	assert_int_equal(w.bucket_ns, 1);
	/* Zeroed, not initialised (a fresh shared segment): counts, does not fault. */
	memset(&w, 0, sizeof(w));
	tb_window_add(&w, T0, 1, 1);
	tb_window_sum(&w, T0, &a, &b);
	assert_int_equal(a, 1);
}

/* The sums of the buckets, counted the long way. */
static void sums_by_loop(const struct tb_window *w, uint64_t *a, uint64_t *b)
{
	*a = *b = 0;
	for (int i = 0; i < TB_WINDOW_BUCKETS; i++) {
		*a += w->a[i];
		*b += w->b[i];
	}
}

/* The kept sums are the buckets' sums after any sequence of adds, late adds, saturating
 * adds, jumps of the clock and clears; a window whose sums were left wrong (an update that
 * stopped half-way in a process that died) is put right by tb_window_repair. */
static void test_window_kept_sums_match_the_counts(void **state)
{
	struct tb_window w;
	int64_t now = T0;
	uint32_t x = 88172645u;
	uint64_t a, b, la, lb;

	(void)state;
	tb_window_init(&w, 10 * S);
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		switch (x % 16) {
		case 0: /* a jump: within a bucket, across some, past the window */
			now += (int64_t)(x >> 8) % (3 * S);
			break;
		case 1:
			now += 15 * S;
			break;
		case 2: /* a late add, perhaps older than the window */
			tb_window_add(&w, now - (int64_t)(x >> 8) % (12 * S), 1, x & 1);
			break;
		case 3: /* a count at its cap */
			tb_window_add(&w, now, UINT32_MAX, UINT32_MAX / 2);
			break;
		case 4:
			if ((x >> 8) % 64 == 0)
				tb_window_clear(&w);
			break;
		default:
			now += (int64_t)(x >> 8) % (50 * MS);
			tb_window_add(&w, now, 1, (x >> 4) & 1);
			break;
		}
		tb_window_sum(&w, now, &a, &b);
		sums_by_loop(&w, &la, &lb);
		assert_true(a == la && b == lb);
	}
	w.sum_a += 7;
	w.sum_b = 0;
	w.newest_start = 0;
	tb_window_repair(&w);
	tb_window_sum(&w, now, &a, &b);
	sums_by_loop(&w, &la, &lb);
	assert_true(a == la && b == lb);
	assert_true(w.newest_start == w.newest * w.bucket_ns);
}

/* Random connects, outcomes, forgets and lost tickets on a clock that jumps: whatever the
 * order, the breaker's invariants hold. */
static void test_random_walk_invariants(void **state)
{
	struct tb_settings s;
	struct tb_breaker_cfg c;
	struct tb_breaker b;
	struct tb_breaker_ticket out[64];
	int nout = 0, changes[TB_BREAKER_REOPENED + 1] = { 0 };
	int64_t now = T0;
	uint32_t x = 2463534242u;

	(void)state;
	tb_settings_init(&s);
	s.breaker_failures = 3;
	s.breaker_rate = 40;
	s.breaker_min_calls = 10;
	s.breaker_window_ns = 2 * S;
	s.breaker_open_ns = 500 * MS;
	s.breaker_open_max_ns = 2 * S;
	s.breaker_probes = 3;
	tb_breaker_cfg_from(&c, &s);
	tb_breaker_init(&b, &c, now);
	for (int i = 0; i < 200000; i++) {
		enum tb_breaker_change ch;
		int busy = 0;

		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		now += (x >> 8) % 50 * MS;
		switch (x % 4) {
		case 0:
		case 1:
			if (nout < 64) {
				enum tb_breaker_verdict v = tb_breaker_allow(&b, &c, now, &out[nout], &ch);

				if (v == TB_BREAKER_PROBE)
					assert_int_equal(b.state, TB_BREAKER_HALF_OPEN);
				if (v == TB_BREAKER_PASS)
					assert_int_equal(b.state, TB_BREAKER_CLOSED);
				if (v != TB_BREAKER_REFUSE)
					nout++;
			}
			break;
		default:
			if (nout > 0) {
				int k = (int)((x >> 4) % (uint32_t)nout);

				if ((x >> 12) % 8 == 0)
					tb_breaker_forget(&b, &out[k]);
				else if ((x >> 12) % 8 != 1) /* 1: lost, never told */
					changes[tb_breaker_record(&b, &c, now, &out[k],
								  (x >> 16) % 3 == 0)]++;
				out[k] = out[--nout];
			}
			break;
		}
		assert_true(b.state <= TB_BREAKER_HALF_OPEN);
		for (int p = 0; p < TB_BREAKER_PROBES_MAX; p++)
			if (b.probe_at[p] != 0) {
				assert_true(p < c.probes);
				assert_int_equal(b.state, TB_BREAKER_HALF_OPEN);
				busy++;
			}
		assert_true(busy <= c.probes);
		if (b.state == TB_BREAKER_CLOSED) {
			assert_int_equal(b.openings, 0);
		} else {
			assert_true(b.openings >= 1);
		}
		if (b.state == TB_BREAKER_OPEN)
			assert_true(b.open_until - b.since <= c.open_max_ns);
	}
	/* The walk made every change. */
	printf("random walk: opened %d reclosed %d reopened %d\n", changes[TB_BREAKER_OPENED],
	       changes[TB_BREAKER_RECLOSED], changes[TB_BREAKER_REOPENED]);
	assert_true(changes[TB_BREAKER_OPENED] > 10);
	assert_true(changes[TB_BREAKER_RECLOSED] > 10);
	assert_true(changes[TB_BREAKER_REOPENED] > 10);
	assert_true(b.opened_total > 10);
	assert_true(b.refused_total > 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_consecutive_opens_at_n_not_before),
		cmocka_unit_test(test_success_resets_the_run),
		cmocka_unit_test(test_rate_needs_min_calls),
		cmocka_unit_test(test_rate_at_threshold_exactly),
		cmocka_unit_test(test_rate_below_threshold_stays_closed),
		cmocka_unit_test(test_occasional_failures_never_open),
		cmocka_unit_test(test_window_expiry_drops_old_failures),
		cmocka_unit_test(test_half_open_success_closes),
		cmocka_unit_test(test_half_open_failure_reopens_longer_capped),
		cmocka_unit_test(test_probes_counted),
		cmocka_unit_test(test_lost_probe_frees_after_timeout),
		cmocka_unit_test(test_stale_tickets_do_not_decide),
		cmocka_unit_test(test_off_never_opens),
		cmocka_unit_test(test_cfg_clamps),
		cmocka_unit_test(test_window_rolls),
		cmocka_unit_test(test_window_kept_sums_match_the_counts),
		cmocka_unit_test(test_random_walk_invariants),
	};

	return cmocka_run_group_tests_name("breaker", tests, NULL, NULL);
}
