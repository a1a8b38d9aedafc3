/* test_plan.c - `timebox plan`'s simulator: the seed's bench answers (the teaser, questions 4
 * and 5), the kernel's defaults, the gate, the retry window and the downstream's syntax. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "unit.h"

#include "plan.h"

static struct tb_plan plan; /* large: one for every test, each run clears it */

/* An input with no limit, a handshake of 1 ms (the seed's bench), and `down`. */
static void input(struct tb_plan_input *in, const char *down)
{
	const char *why = NULL;

	memset(in, 0, sizeof(*in));
	tb_settings_init(&in->set);
	in->dest = dest_v4("127.0.0.1", 8080);
	in->rtt_ns = 1 * MS;
	if (tb_downstream_parse(down, &in->down, &why) != 0)
		fail_msg("%s: %s", down, why);
}

static const struct tb_plan *run(struct tb_plan_input *in)
{
	tb_settings_finish(&in->set);
	assert_int_equal(tb_plan_run(in, &plan), 0);
	return &plan;
}

static const struct tb_plan_event *last_event(const struct tb_plan *p)
{
	assert_true(p->nevents > 0);
	return &p->ev[p->nevents - 1];
}

static size_t count_events(const struct tb_plan *p, enum tb_plan_what what)
{
	size_t n = 0;

	for (size_t i = 0; i < p->nevents; i++)
		n += p->ev[i].what == what;
	return n;
}

/* The teaser: first byte after 20 ms, then 1 byte every 150 ms, 20 of them; read 250 ms and
 * no deadline. Every gap is under 250 ms: the read timeout never fires, ~3 s in all. */
static void test_seed_teaser(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "first=20ms,drip=150ms/20");
	in.set.read_ns = 250 * MS;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_OK);
	assert_int_equal(p->end, 1 * MS + 20 * MS + 20 * 150 * MS); /* 3021 ms */
	assert_int_equal(p->executed, 1);
	assert_int_equal(p->attempts, 1);
	assert_int_equal(p->err, 0);
	assert_int_equal(p->fired, -1);
	assert_int_equal(count_events(p, TB_EV_EXPIRED), 0);
	/* 21 bytes: 3 shown, 16 elided into one line, the last 2 shown */
	assert_int_equal(count_events(p, TB_EV_BYTE), 5);
	assert_int_equal(count_events(p, TB_EV_BYTES), 1);
	assert_int_equal(last_event(p)->what, TB_EV_RESPONSE);
}

/* Question 4: read 250 ms, the downstream stuck 1.2 s, 2 retries, no deadline:
 * 250 + 1 + 250 + 1 + 250 = 752 ms, and the downstream executed the request 3 times. */
static void test_seed_q4_read_timeouts(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "stall=1200ms");
	in.set.read_ns = 250 * MS;
	in.set.acquire_ns = 50 * MS;
	in.retries = 2;
	in.reuse = true; /* the seed's first attempt has a pooled connection */
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_FAILED);
	assert_int_equal(p->end, 752 * MS);
	assert_int_equal(p->executed, 3);
	assert_int_equal(p->attempts, 3);
	assert_int_equal(p->err, ETIMEDOUT);
	assert_int_equal(p->fired, TB_PHASE_FIRST_BYTE);
	assert_int_equal(count_events(p, TB_EV_EXPIRED), 3);

	/* A program that connects anew for its first attempt too: one more handshake. */
	input(&in, "stall=1200ms");
	in.set.read_ns = 250 * MS;
	in.retries = 2;
	p = run(&in);
	assert_int_equal(p->end, 753 * MS);
	assert_int_equal(p->executed, 3);
}

/* Question 4 with a 300 ms deadline: ~300 ms and 2 executions. The deadline covers the
 * retries; once it has passed, the third attempt fails at once, sending nothing. */
static void test_seed_q4_deadline(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "stall=1200ms");
	in.set.read_ns = 250 * MS;
	in.set.deadline_ns = 300 * MS;
	in.set.retry_window_ns = -1;
	in.retries = 2;
	in.reuse = true;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_FAILED);
	assert_int_equal(p->end, 300 * MS);
	assert_int_equal(p->executed, 2);
	assert_int_equal(p->attempts, 3);
	assert_int_equal(p->fired, TB_PHASE_DEADLINE);
	assert_int_equal(last_event(p)->what, TB_EV_REFUSED);
	assert_int_equal(last_event(p)->at, 300 * MS);
	assert_int_equal(p->ev[2].what, TB_EV_EXPIRED);
	assert_int_equal(p->ev[2].phase, TB_PHASE_FIRST_BYTE);
	assert_int_equal(p->ev[2].at, 250 * MS);
}

/* retry_window = 0: the attempt after the deadline opens a fresh budget and waits again. */
static void test_no_retry_window_opens_a_fresh_budget(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "stall=1200ms");
	in.set.read_ns = 250 * MS;
	in.set.deadline_ns = 300 * MS;
	in.set.retry_window_ns = 0;
	in.retries = 2;
	p = run(&in);
	assert_int_equal(p->executed, 3);
	assert_int_equal(p->end, 300 * MS + 1 * MS + 250 * MS);
	assert_int_equal(p->fired, TB_PHASE_FIRST_BYTE);
}

/* Question 5, a pooled connection whose peer lost power: no limit, the request is never
 * acknowledged, tcp_retries2 = 15 gives up after ~924.6 s. */
static void test_seed_q5_reused_connection(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "down");
	in.reuse = true;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_FAILED);
	assert_int_equal(p->end, 924600 * MS);
	assert_int_equal(p->kernel, TB_KERNEL_RETRIES2);
	assert_int_equal(p->err, ETIMEDOUT);
	assert_int_equal(p->executed, 0);
}

/* Question 5, a new connection: the SYN goes unanswered, tcp_syn_retries = 6: ~127 s. */
static void test_seed_q5_new_connection(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "down");
	p = run(&in);
	assert_int_equal(p->end, 127 * S);
	assert_int_equal(p->kernel, TB_KERNEL_SYN);
	assert_int_equal(p->err, ETIMEDOUT);
	assert_int_equal(p->executed, 0);

	/* With a connect limit, timebox ends it first. */
	input(&in, "down");
	in.set.connect_ns = 100 * MS;
	p = run(&in);
	assert_int_equal(p->end, 100 * MS);
	assert_int_equal(p->kernel, TB_KERNEL_NONE);
	assert_int_equal(p->fired, TB_PHASE_CONNECT);
}

/* A blackhole completes the handshake and drops the request: first_byte ends it. */
static void test_blackhole(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "blackhole");
	in.set.first_byte_ns = 2 * S;
	p = run(&in);
	assert_int_equal(p->end, 1 * MS + 2 * S);
	assert_int_equal(p->fired, TB_PHASE_FIRST_BYTE);
	assert_int_equal(p->executed, 0);

	input(&in, "blackhole");
	p = run(&in);
	assert_int_equal(p->end, 1 * MS + 924600 * MS);
	assert_int_equal(p->kernel, TB_KERNEL_RETRIES2);
}

/* Experiment A: a 1 s read timeout never fires on a 400 ms drip; a 1500 ms deadline does. */
static void test_experiment_a(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "first=0ms,drip=400ms/10");
	in.set.read_ns = 1 * S;
	in.rtt_ns = 0;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_OK);
	assert_int_equal(p->end, 4000 * MS);

	input(&in, "first=0ms,drip=400ms/10");
	in.set.read_ns = 1 * S;
	in.set.deadline_ns = 1500 * MS;
	in.set.retry_window_ns = -1;
	in.rtt_ns = 0;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_FAILED);
	assert_int_equal(p->end, 1500 * MS);
	assert_int_equal(p->fired, TB_PHASE_DEADLINE);
	assert_int_equal(p->executed, 1);
}

/* A drip without first=: the first byte comes after one interval, so read must cover it. */
static void test_drip_without_first(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "drip=150ms/20");
	in.set.read_ns = 100 * MS;
	in.rtt_ns = 0;
	p = run(&in);
	assert_int_equal(p->end, 100 * MS);
	assert_int_equal(p->fired, TB_PHASE_FIRST_BYTE);

	input(&in, "drip=150ms/20");
	in.set.read_ns = 200 * MS;
	in.rtt_ns = 0;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_OK);
	assert_int_equal(p->end, 3000 * MS);
}

/* slow-gate: every slot busy for 800 ms. acquire_timeout ends the wait; without it the
 * connect goes through at 800 ms. Without max_conns there is no gate to wait at. */
static void test_slow_gate(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "slow-gate=800ms,ok=50ms");
	in.set.max_conns = 5;
	in.set.acquire_ns = 50 * MS;
	p = run(&in);
	assert_int_equal(p->end, 50 * MS);
	assert_int_equal(p->fired, TB_PHASE_GATE);
	assert_int_equal(p->executed, 0);

	input(&in, "slow-gate=800ms,ok=50ms");
	in.set.max_conns = 5;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_OK);
	assert_int_equal(p->end, 800 * MS + 1 * MS + 50 * MS);
	assert_int_equal(count_events(p, TB_EV_GATE_SLOT), 1);

	/* A retry after the slots came back takes one at once. */
	input(&in, "slow-gate=800ms,ok=50ms");
	in.set.max_conns = 2;
	in.set.acquire_ns = 50 * MS;
	in.retries = 1;
	in.backoff_ns = 1 * S;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_OK);
	assert_int_equal(p->end, 50 * MS + 1 * S + 1 * MS + 50 * MS);

	input(&in, "slow-gate=800ms");
	p = run(&in);
	assert_true(p->gate_ignored);
	assert_int_equal(p->end, 1 * MS);

	/* The deadline bounds the gate wait too. */
	input(&in, "slow-gate=800ms");
	in.set.max_conns = 1;
	in.set.deadline_ns = 300 * MS;
	in.set.retry_window_ns = -1;
	p = run(&in);
	assert_int_equal(p->end, 300 * MS);
	assert_int_equal(p->fired, TB_PHASE_DEADLINE);
}

static void test_on_timeout_eagain(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "stall");
	in.set.read_ns = 250 * MS;
	in.set.on_timeout = TB_ON_TIMEOUT_EAGAIN;
	p = run(&in);
	assert_int_equal(p->err, EAGAIN);
}

/* A stall without an end and no limit: nothing ends the wait. */
static void test_stall_forever(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "stall");
	in.retries = 3;
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_FOREVER);
	assert_true(p->end == TB_NEVER);
	assert_int_equal(p->attempts, 1);
	assert_int_equal(last_event(p)->what, TB_EV_FOREVER);
}

/* A long drip stays a short timeline. */
static void test_long_drip_is_elided(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "drip=1ms/1000000");
	p = run(&in);
	assert_int_equal(p->outcome, TB_PLAN_OK);
	assert_true(p->nevents < 12);
	assert_int_equal(p->end, 1 * MS + 1000000 * MS);
}

static void test_parse_downstream(void **state)
{
	static const char *const bad[] = {
		"", "ok", "ok=50", "stall=", "drip=150ms", "drip=150ms/0", "drip=0ms/3",
		"drip=150ms/x", "first=20ms", "first=20ms,ok=1ms", "down=1s", "ok=1ms,stall=2ms",
		"ok=1ms,", ",ok=1ms", "bogus", "slow-gate",
	};
	struct tb_downstream d;
	const char *why;

	(void)state;
	assert_int_equal(tb_downstream_parse("first=20ms,drip=150ms/20", &d, &why), 0);
	assert_int_equal(d.kind, TB_DOWN_DRIP);
	assert_int_equal(d.first_ns, 20 * MS);
	assert_int_equal(d.interval_ns, 150 * MS);
	assert_int_equal(d.bytes, 20);
	assert_int_equal(tb_downstream_parse("stall", &d, &why), 0);
	assert_int_equal(d.answer_ns, -1);
	assert_int_equal(tb_downstream_parse("slow-gate=800ms", &d, &why), 0);
	assert_int_equal(d.kind, TB_DOWN_OK);
	assert_int_equal(d.answer_ns, 0);
	assert_int_equal(d.gate_busy_ns, 800 * MS);
	assert_int_equal(tb_downstream_parse("down", &d, &why), 0);
	assert_int_equal(d.kind, TB_DOWN_DOWN);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		if (tb_downstream_parse(bad[i], &d, &why) != -1)
			fail_msg("accepted '%s'", bad[i]);
		assert_non_null(why);
	}
}

static void test_retries_out_of_range(void **state)
{
	struct tb_plan_input in;

	(void)state;
	input(&in, "ok=1ms");
	in.retries = TB_PLAN_MAX_RETRIES + 1;
	assert_int_equal(tb_plan_run(&in, &plan), -1);
}

static char prot[TB_PLAN_PROTECTION_MAX][TB_PLAN_LINE_MAX];

static void has_text(const char *line, const char *fragment)
{
	if (strstr(line, fragment) == NULL)
		fail_msg("'%s' lacks '%s'", line, fragment);
}

/* Off by default: nothing is told. */
static void test_protection_off(void **state)
{
	struct tb_settings s;

	(void)state;
	tb_settings_init(&s);
	s.deadline_ns = 300 * MS;
	tb_settings_finish(&s);
	assert_int_equal(tb_plan_protection(&s, prot, TB_PLAN_PROTECTION_MAX), 0);
}

/* breaker = on: Envoy's 5 in a row, Hystrix's 50 % of 20 in 10 s, 30 s x n up to 300 s. */
static void test_protection_breaker_defaults(void **state)
{
	struct tb_settings s;

	(void)state;
	tb_settings_init(&s);
	s.breaker = 1;
	tb_settings_finish(&s);
	assert_int_equal(tb_plan_protection(&s, prot, TB_PLAN_PROTECTION_MAX), 2);
	has_text(prot[0], "breaker: opens after 5 consecutive failures, or 50% of >= 20 calls "
			  "in 10s");
	has_text(prot[0], "refuses connects at once with ECONNREFUSED, nothing sent, for 30s, "
			  "1m, 90s, ... up to 5m; then 1 probe:");
	has_text(prot[1], "failures: connect refused");
	has_text(prot[1], "HTTP 502, 503, 504");
}

/* One mode, a short cap, a slow-call limit, another errno, 5xx, several probes. */
static void test_protection_breaker_settings(void **state)
{
	struct tb_settings s;

	(void)state;
	tb_settings_init(&s);
	s.breaker_rate = 25;
	s.breaker_min_calls = 40;
	s.breaker_window_ns = 30 * S;
	s.breaker_open_ns = 10 * S;
	s.breaker_open_max_ns = 20 * S;
	s.breaker_probes = 40; /* clamped to the 16 a half-open breaker lets through */
	s.breaker_slow_ns = 800 * MS;
	s.breaker_errno = EHOSTUNREACH;
	s.breaker_http = TB_BREAKER_HTTP_5XX;
	tb_settings_finish(&s);
	assert_int_equal(tb_plan_protection(&s, prot, TB_PLAN_PROTECTION_MAX), 2);
	has_text(prot[0], "opens after 25% failures of >= 40 calls in 30s;");
	has_text(prot[0], "with EHOSTUNREACH, nothing sent, for 10s, 20s; then 16 probes:");
	has_text(prot[1], "any HTTP 5xx; a first response byte later than 800ms");
	/* no growth when the cap is the first opening */
	s.breaker_open_max_ns = 10 * S;
	s.breaker_failures = 3;
	s.breaker_http = TB_BREAKER_HTTP_OFF;
	assert_int_equal(tb_plan_protection(&s, prot, TB_PLAN_PROTECTION_MAX), 2);
	has_text(prot[0], "opens after 3 consecutive failures, or 25% of >= 40 calls in 30s;");
	has_text(prot[0], "for 10s each time;");
	assert_null(strstr(prot[1], "HTTP"));
}

/* Finagle's budget: 20 % of first attempts plus 10 a second over 10 s; and the auto gate. */
static void test_protection_budget_and_gate(void **state)
{
	struct tb_settings s;

	(void)state;
	tb_settings_init(&s);
	s.retry_budget = 20;
	s.max_conns_auto = true;
	s.max_conns_floor = 4;
	s.max_conns_ceiling = 64;
	tb_settings_finish(&s);
	assert_int_equal(s.max_conns, 64);
	assert_int_equal(tb_plan_protection(&s, prot, TB_PLAN_PROTECTION_MAX), 2);
	has_text(prot[0], "retry budget: a retry (the thread's next connect there within 10s of "
			  "a failure) goes while retries stay within 20% of the first attempts of "
			  "the last 10s, plus 10 a second (100 in the window)");
	has_text(prot[0], "fails at once with ECONNREFUSED");
	has_text(prot[1], "gate: sizes itself between 4 and 64 connections, from 20,");
	has_text(prot[1], "at its ceiling, 64");
	/* the start is clamped into [floor, ceiling]; max bounds what is written */
	s.max_conns_ceiling = 8;
	s.max_conns_floor = 2;
	assert_int_equal(tb_plan_protection(&s, prot, 1), 2);
	has_text(prot[0], "retry budget:");
	assert_int_equal(tb_plan_protection(&s, prot, 2), 2);
	has_text(prot[1], "between 2 and 8 connections, from 8,");
}

/* The timeline plays the gate at its ceiling: a slow-gate waits at it like a fixed one. */
static void test_protection_auto_gate_played_at_ceiling(void **state)
{
	struct tb_plan_input in;
	const struct tb_plan *p;

	(void)state;
	input(&in, "slow-gate=800ms,ok=50ms");
	in.set.max_conns_auto = true;
	in.set.max_conns_ceiling = 4;
	in.set.acquire_ns = 100 * MS;
	p = run(&in);
	assert_int_equal(in.set.max_conns, 4);
	assert_false(p->gate_ignored);
	assert_int_equal(count_events(p, TB_EV_GATE_WAIT), 1);
	assert_int_equal(p->outcome, TB_PLAN_FAILED);
	assert_int_equal(p->fired, TB_PHASE_GATE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed_teaser),
		cmocka_unit_test(test_seed_q4_read_timeouts),
		cmocka_unit_test(test_seed_q4_deadline),
		cmocka_unit_test(test_no_retry_window_opens_a_fresh_budget),
		cmocka_unit_test(test_seed_q5_reused_connection),
		cmocka_unit_test(test_seed_q5_new_connection),
		cmocka_unit_test(test_blackhole),
		cmocka_unit_test(test_experiment_a),
		cmocka_unit_test(test_drip_without_first),
		cmocka_unit_test(test_slow_gate),
		cmocka_unit_test(test_on_timeout_eagain),
		cmocka_unit_test(test_stall_forever),
		cmocka_unit_test(test_long_drip_is_elided),
		cmocka_unit_test(test_parse_downstream),
		cmocka_unit_test(test_retries_out_of_range),
		cmocka_unit_test(test_protection_off),
		cmocka_unit_test(test_protection_breaker_defaults),
		cmocka_unit_test(test_protection_breaker_settings),
		cmocka_unit_test(test_protection_budget_and_gate),
		cmocka_unit_test(test_protection_auto_gate_played_at_ceiling),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
