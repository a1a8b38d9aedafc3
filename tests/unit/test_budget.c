/* test_budget.c - the per-thread deadline state machine walked on a simulated clock: when a
 * budget opens, what carries it across retries, what closes it, the retry window, scope=process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "unit.h"

#include "budget.h"


static void settings(struct tb_settings *s, int64_t deadline_ns)
{
	tb_settings_init(s);
	s->deadline_ns = deadline_ns;
	tb_settings_finish(s);
}

struct step {
	int rc;
	int64_t start;
	int64_t deadline;
};

static struct step step(struct tb_budget *b, const struct tb_settings *s, const struct tb_dest *d,
			int64_t now)
{
	struct step r = { 99, -7, -7 };

	r.rc = tb_budget_step(b, s, d, now, &r.start, &r.deadline);
	return r;
}

/* A step that must go ahead within start .. deadline. */
static void expect_go(struct tb_budget *b, const struct tb_settings *s, const struct tb_dest *d,
		      int64_t now, int64_t start, int64_t deadline)
{
	struct step r = step(b, s, d, now);

	if (r.rc != TB_STEP_GO)
		fail_msg("step at %lld: rc %d, want GO", (long long)now, r.rc);
	if (r.start != start || r.deadline != deadline)
		fail_msg("step at %lld: start %lld deadline %lld, want %lld %lld", (long long)now,
			 (long long)r.start, (long long)r.deadline, (long long)start,
			 (long long)deadline);
}

static void expect_refused(struct tb_budget *b, const struct tb_settings *s,
			   const struct tb_dest *d, int64_t now, int want)
{
	struct step r = step(b, s, d, now);

	if (r.rc != want)
		fail_msg("step at %lld: rc %d, want %d", (long long)now, r.rc, want);
}

static void test_opens_at_first_step(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	assert_false(b.open);
	assert_int_equal(tb_budget_remaining(&b, T0), TB_NEVER);

	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	assert_true(b.open);
	assert_int_equal(b.start, T0);
	assert_int_equal(b.deadline, T0 + 300 * MS);
	assert_true(tb_dest_equal(&b.dest, &a));

	/* further steps of the same call keep the start and the deadline */
	expect_go(&b, &s, &a, T0 + 10 * MS, T0, T0 + 300 * MS);
	expect_go(&b, &s, &a, T0 + 299 * MS, T0, T0 + 300 * MS);
}

static void test_carries_across_failure(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_failure(&b, &s); /* refused, reset */
	expect_go(&b, &s, &a, T0 + 50 * MS, T0, T0 + 300 * MS);
	tb_budget_on_failure(&b, &s);
	tb_budget_on_close(&b, &s); /* closing a failed socket does not end the call */
	expect_go(&b, &s, &a, T0 + 100 * MS, T0, T0 + 300 * MS);
	assert_true(b.open);
}

/* A write-only stream (a log shipper) opens a call that no answer ever completes: a request
 * to another destination is a call of its own, not the rest of that one. A retry towards
 * another address after a failed attempt still spends the same deadline. */
static void test_other_destination_opens_a_new_call(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest logs = dest_v4("10.0.0.9", 514), a = dest_v4("10.0.0.1", 80),
		       a2 = dest_v4("10.0.0.2", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &logs, T0, T0, T0 + 300 * MS);
	expect_go(&b, &s, &a, T0 + 200 * MS, T0 + 200 * MS, T0 + 500 * MS);
	tb_budget_on_failure(&b, &s); /* refused: the retry goes to another address */
	expect_go(&b, &s, &a2, T0 + 250 * MS, T0 + 200 * MS, T0 + 500 * MS);
	/* the program gives up on that service and calls another one: a call of its own */
	tb_budget_on_failure(&b, &s);
	expect_go(&b, &s, &logs, T0 + 260 * MS, T0 + 260 * MS, T0 + 560 * MS);
}

/* A name lookup steps towards no destination (family 0): the call it opens is the call of
 * the connect that follows (and of a retried lookup before it), one deadline for both;
 * the destination after that is the call's, and another one is a call of its own. */
static void test_lookup_call_is_the_connects(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest lookup, a = dest_v4("10.0.0.1", 80), logs = dest_v4("10.0.0.9", 514);

	(void)state;
	memset(&lookup, 0, sizeof(lookup));
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &lookup, T0, T0, T0 + 300 * MS);
	expect_go(&b, &s, &lookup, T0 + 50 * MS, T0, T0 + 300 * MS);
	expect_go(&b, &s, &a, T0 + 100 * MS, T0, T0 + 300 * MS);
	assert_true(tb_dest_equal(&b.dest, &a));
	expect_go(&b, &s, &logs, T0 + 150 * MS, T0 + 150 * MS, T0 + 450 * MS);
}

static void test_answered_lookup_ends_its_call(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest lookup, a = dest_v4("10.0.0.1", 80);

	(void)state;
	memset(&lookup, 0, sizeof(lookup));
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	/* name after name, each answered: each lookup is a call of its own */
	expect_go(&b, &s, &lookup, T0, T0, T0 + 300 * MS);
	tb_budget_on_answer(&b, &s);
	expect_go(&b, &s, &lookup, T0 + 50 * MS, T0 + 50 * MS, T0 + 350 * MS);
	/* that one failed (nothing told): its retry joins it */
	expect_go(&b, &s, &lookup, T0 + 100 * MS, T0 + 50 * MS, T0 + 350 * MS);
	/* the retry was answered: the connect to what it found still takes the call over */
	tb_budget_on_answer(&b, &s);
	expect_go(&b, &s, &a, T0 + 150 * MS, T0 + 50 * MS, T0 + 350 * MS);
	assert_true(tb_dest_equal(&b.dest, &a));
	assert_false(b.answered);
	/* an answer while a destination holds the call changes nothing */
	tb_budget_on_answer(&b, &s);
	assert_false(b.answered);
	expect_go(&b, &s, &a, T0 + 200 * MS, T0 + 50 * MS, T0 + 350 * MS);
}

static void test_failure_after_response_keeps_call(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	/* a partial answer then a reset: the program's retry still belongs to the call */
	tb_budget_on_response(&b, &s);
	tb_budget_on_failure(&b, &s);
	expect_go(&b, &s, &a, T0 + 100 * MS, T0, T0 + 300 * MS);
}

static void test_response_then_step_opens_new_call(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_response(&b, &s);
	assert_true(b.open);
	/* the next request on a keep-alive connection */
	expect_go(&b, &s, &a, T0 + 200 * MS, T0 + 200 * MS, T0 + 500 * MS);
	/* and a response long after the old deadline does not make the new call late */
	tb_budget_on_response(&b, &s);
	expect_go(&b, &s, &a, T0 + 5 * S, T0 + 5 * S, T0 + 5 * S + 300 * MS);
}

/* A TLS handshake's second flight (or PostgreSQL authentication) follows a read of the
 * server's flight: the call goes on under its first deadline, and its answer is still due. */
static void test_continued_step_keeps_the_call(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 443);
	int64_t start, deadline;

	(void)state;
	settings(&s, 1000 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 1000 * MS); /* connect */
	tb_budget_on_response(&b, &s);                  /* ServerHello */
	assert_int_equal(tb_budget_step_continue(&b, &s, &a, T0 + 700 * MS, &start, &deadline),
			 TB_STEP_GO);
	assert_true(start == T0 && deadline == T0 + 1000 * MS);
	assert_false(b.saw_response); /* the answer is still to come */
	tb_budget_on_response(&b, &s);
	/* the answer came: the next request is a new call */
	expect_go(&b, &s, &a, T0 + 900 * MS, T0 + 900 * MS, T0 + 1900 * MS);
	/* an idle pool connection's first request, long after the connect's deadline */
	assert_int_equal(tb_budget_step_continue(&b, &s, &a, T0 + 9 * S, &start, &deadline),
			 TB_STEP_GO);
	assert_true(start == T0 + 9 * S && deadline == T0 + 10 * S);
}

static void test_response_then_close_opens_fresh(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_response(&b, &s);
	tb_budget_on_close(&b, &s);
	assert_false(b.open);
	assert_int_equal(tb_budget_remaining(&b, T0 + 100 * MS), TB_NEVER);
	expect_go(&b, &s, &a, T0 + 100 * MS, T0 + 100 * MS, T0 + 400 * MS);
}

static void test_response_ignored_when_closed(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	tb_budget_on_response(&b, &s);
	tb_budget_on_close(&b, &s);
	assert_false(b.open);
	assert_false(b.saw_response);
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	expect_go(&b, &s, &a, T0 + 1 * MS, T0, T0 + 300 * MS);
}

static void test_deadline_expiry_closes_and_fails_fast(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	s.retry_window_ns = 1 * S;
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	assert_false(b.open);

	expect_refused(&b, &s, &a, T0 + 300 * MS, TB_STEP_RETRY_WINDOW);
	expect_refused(&b, &s, &a, T0 + 301 * MS, TB_STEP_RETRY_WINDOW);
	expect_refused(&b, &s, &a, T0 + 1300 * MS - 1, TB_STEP_RETRY_WINDOW);
	/* a refused step opens nothing */
	assert_false(b.open);
	/* deadline + retry_window: fresh */
	expect_go(&b, &s, &a, T0 + 1300 * MS, T0 + 1300 * MS, T0 + 1600 * MS);
}

/* scope=request: the call drew on an inbound request's 100 ms (shim/request.h) and was cut
 * there, before its own 300 ms. The next request's call to the same destination goes ahead
 * at once, with a fresh deadline: no retry window from a deadline that was not the call's. */
static void test_request_cut_leaves_no_retry_window(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	s.scope = TB_SCOPE_REQUEST;
	s.retry_window_ns = 1 * S;
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 100 * MS);
	assert_false(b.open);
	expect_go(&b, &s, &a, T0 + 101 * MS, T0 + 101 * MS, T0 + 401 * MS);
	/* Its own deadline still opens the retry window, as in scope=call. */
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 401 * MS);
	expect_refused(&b, &s, &a, T0 + 402 * MS, TB_STEP_RETRY_WINDOW);
}

static void test_deadline_expiry_other_dest_fresh(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);
	struct tb_dest a_other_port = dest_v4("10.0.0.1", 81);
	struct tb_dest other = dest_v4("10.0.0.2", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	expect_go(&b, &s, &a_other_port, T0 + 301 * MS, T0 + 301 * MS, T0 + 601 * MS);
	tb_budget_on_response(&b, &s);
	tb_budget_on_close(&b, &s);
	expect_go(&b, &s, &other, T0 + 310 * MS, T0 + 310 * MS, T0 + 610 * MS);
	tb_budget_on_response(&b, &s);
	tb_budget_on_close(&b, &s);
	/* the first destination is still inside its window */
	expect_refused(&b, &s, &a, T0 + 320 * MS, TB_STEP_RETRY_WINDOW);
}

static void test_phase_expiry_keeps_open(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);
	enum tb_phase phases[] = { TB_PHASE_GATE, TB_PHASE_CONNECT, TB_PHASE_WRITE,
				   TB_PHASE_FIRST_BYTE, TB_PHASE_READ };

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		tb_budget_on_expired(&b, &s, &a, phases[i], T0 + 300 * MS);
		assert_true(b.open);
		expect_go(&b, &s, &a, T0 + (int64_t)(i + 1) * 10 * MS, T0, T0 + 300 * MS);
	}
}

/* Seed question 4: read 250 ms, deadline 300 ms, 2 retries, downstream stuck 1.2 s. */
static void test_seed_question_4(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("127.0.0.1", 8080);

	(void)state;
	settings(&s, 300 * MS);
	s.read_ns = 250 * MS;
	tb_settings_finish(&s);
	memset(&b, 0, sizeof(b));

	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);                  /* attempt 1 */
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_READ, T0 + 300 * MS); /* read cut at 250 */
	expect_go(&b, &s, &a, T0 + 251 * MS, T0, T0 + 300 * MS);        /* attempt 2 */
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	/* attempt 3 fails at once: the downstream saw the request twice */
	expect_refused(&b, &s, &a, T0 + 301 * MS, TB_STEP_RETRY_WINDOW);
	assert_int_equal(tb_budget_remaining(&b, T0 + 301 * MS), TB_NEVER);
}

static void test_seed_question_4_no_window(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("127.0.0.1", 8080);

	(void)state;
	settings(&s, 300 * MS);
	s.retry_window_ns = 0;
	memset(&b, 0, sizeof(b));

	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_READ, T0 + 300 * MS);
	expect_go(&b, &s, &a, T0 + 251 * MS, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	expect_go(&b, &s, &a, T0 + 301 * MS, T0 + 301 * MS, T0 + 601 * MS);
}

static void test_retry_window_default_is_deadline(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	assert_int_equal(s.retry_window_ns, -1);
	assert_int_equal(tb_settings_retry_window(&s), 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	expect_refused(&b, &s, &a, T0 + 600 * MS - 1, TB_STEP_RETRY_WINDOW);
	expect_go(&b, &s, &a, T0 + 600 * MS, T0 + 600 * MS, T0 + 900 * MS);
}

static void test_expired_while_nobody_waited(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);
	struct tb_dest other = dest_v4("10.0.0.2", 443);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_failure(&b, &s); /* refused: the program backs off, then retries */
	/* the back-off outlasted the deadline: the retry is the deadline's expiry */
	expect_refused(&b, &s, &a, T0 + 300 * MS, TB_STEP_EXPIRED);
	assert_false(b.open);
	/* that was the expiry: the next attempt is a retry inside the window */
	expect_refused(&b, &s, &a, T0 + 310 * MS, TB_STEP_RETRY_WINDOW);
	expect_go(&b, &s, &a, T0 + 600 * MS, T0 + 600 * MS, T0 + 900 * MS);

	/* the same, but the late step goes elsewhere: a fresh call */
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_failure(&b, &s);
	expect_go(&b, &s, &other, T0 + 400 * MS, T0 + 400 * MS, T0 + 700 * MS);
	/* and the destination whose call expired unseen is in its window */
	tb_budget_on_response(&b, &s);
	tb_budget_on_close(&b, &s);
	expect_refused(&b, &s, &a, T0 + 500 * MS, TB_STEP_RETRY_WINDOW);
	expect_go(&b, &s, &a, T0 + 600 * MS, T0 + 600 * MS, T0 + 900 * MS);
}

static void test_late_step_without_failure_is_a_new_call(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	/* a pool pre-opens a connection; the first request goes out 500 ms later */
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	expect_go(&b, &s, &a, T0 + 500 * MS, T0 + 500 * MS, T0 + 800 * MS);
	/* a write-only stream: each late write starts over, none is refused */
	expect_go(&b, &s, &a, T0 + 2 * S, T0 + 2 * S, T0 + 2 * S + 300 * MS);
	expect_go(&b, &s, &a, T0 + 2 * S + 100 * MS, T0 + 2 * S, T0 + 2 * S + 300 * MS);
}

static void test_expired_while_nobody_waited_no_window(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	s.retry_window_ns = 0;
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_failure(&b, &s);
	/* no window: a step after the deadline is a new attempt on a fresh budget */
	expect_go(&b, &s, &a, T0 + 350 * MS, T0 + 350 * MS, T0 + 650 * MS);
}

static void test_failed_call_retried_after_window_is_fresh(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS); /* window defaults to 300 ms */
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_failure(&b, &s); /* refused; the program gives up for now */
	/* an hour later it tries again: a new call, not the old call's expiry */
	expect_go(&b, &s, &a, T0 + 3600 * S, T0 + 3600 * S, T0 + 3600 * S + 300 * MS);
}

static void test_answered_call_never_late(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_response(&b, &s);
	/* the next request comes long after the answered call's deadline: a new call */
	expect_go(&b, &s, &a, T0 + 10 * S, T0 + 10 * S, T0 + 10 * S + 300 * MS);
}

static void test_scope_process(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);
	struct tb_dest other = dest_v4("10.0.0.2", 80);

	(void)state;
	settings(&s, 2 * S);
	s.scope = TB_SCOPE_PROCESS;
	memset(&b, 0xa5, sizeof(b));
	tb_budget_open_process(&b, &s, T0);
	assert_true(b.open);
	assert_int_equal(tb_budget_remaining(&b, T0 + 500 * MS), 1500 * MS);

	expect_go(&b, &s, &a, T0 + 100 * MS, T0, T0 + 2 * S);
	tb_budget_on_response(&b, &s);
	tb_budget_on_close(&b, &s);
	tb_budget_on_failure(&b, &s);
	expect_go(&b, &s, &a, T0 + 200 * MS, T0, T0 + 2 * S);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 2 * S);
	assert_true(b.open);
	expect_go(&b, &s, &other, T0 + 2 * S - 1, T0, T0 + 2 * S);
	expect_refused(&b, &s, &a, T0 + 2 * S, TB_STEP_EXPIRED);
	expect_refused(&b, &s, &other, T0 + 100 * S, TB_STEP_EXPIRED);
	assert_true(b.open);
	assert_int_equal(b.start, T0);
	assert_int_equal(b.deadline, T0 + 2 * S);
	assert_int_equal(tb_budget_remaining(&b, T0 + 3 * S), 0);
}

static void test_scope_process_no_deadline(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 0);
	s.scope = TB_SCOPE_PROCESS;
	tb_budget_open_process(&b, &s, T0);
	assert_int_equal(b.deadline, TB_NEVER);
	assert_int_equal(tb_budget_remaining(&b, T0 + 1000 * S), TB_NEVER);
	expect_go(&b, &s, &a, T0 + 1000 * S, T0 + 1000 * S, TB_NEVER);
}

static void test_no_deadline(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 0);
	s.read_ns = 250 * MS;
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, TB_NEVER);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_READ, TB_NEVER);
	expect_go(&b, &s, &a, T0 + 1000 * S, T0 + 1000 * S, TB_NEVER);
	assert_int_equal(tb_budget_remaining(&b, T0 + 1000 * S), TB_NEVER);
	/* a deadline expiry with no deadline (TB_NEVER) must not arm a window */
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, TB_NEVER);
	expect_go(&b, &s, &a, T0 + 2000 * S, T0 + 2000 * S, TB_NEVER);
}

static void test_remaining(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	assert_int_equal(tb_budget_remaining(&b, T0), TB_NEVER); /* nothing open */
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	assert_int_equal(tb_budget_remaining(&b, T0), 300 * MS);
	assert_int_equal(tb_budget_remaining(&b, T0 + 120 * MS), 180 * MS);
	assert_int_equal(tb_budget_remaining(&b, T0 + 300 * MS - 1), 1);
	assert_int_equal(tb_budget_remaining(&b, T0 + 300 * MS), 0);
	assert_int_equal(tb_budget_remaining(&b, T0 + 10 * S), 0);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	assert_int_equal(tb_budget_remaining(&b, T0 + 301 * MS), TB_NEVER);
}

/* "9223372036854775807ns" and "2562047h" are valid durations: as a deadline they must mean
 * "never", not wrap around into the past. */
static void test_huge_deadline_saturates(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, INT64_MAX);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, TB_NEVER);
	expect_go(&b, &s, &a, T0 + 1 * S, T0, TB_NEVER);
	assert_int_equal(tb_budget_remaining(&b, T0 + 1 * S), TB_NEVER);

	s.scope = TB_SCOPE_PROCESS;
	tb_budget_open_process(&b, &s, T0);
	assert_int_equal(b.deadline, TB_NEVER);
	expect_go(&b, &s, &a, T0 + 1 * S, T0, TB_NEVER);
}

/* A retry window too long to add to the deadline means "fail fast for good", not "no window". */
static void test_huge_retry_window_saturates(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	s.retry_window_ns = INT64_MAX;
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	expect_refused(&b, &s, &a, T0 + 301 * MS, TB_STEP_RETRY_WINDOW);
	expect_refused(&b, &s, &a, T0 + 3600 * S, TB_STEP_RETRY_WINDOW);
}

/* The retry that comes after the deadline passed during the program's back-off fails, and
 * says which call expired: the log line is built from *start and *deadline. */
static void test_expired_step_reports_its_call(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);
	struct step r;

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_failure(&b, &s);
	r = step(&b, &s, &a, T0 + 400 * MS);
	assert_int_equal(r.rc, TB_STEP_EXPIRED);
	assert_int_equal(r.start, T0);
	assert_int_equal(r.deadline, T0 + 300 * MS);
	/* inside the window: the same call is named */
	r = step(&b, &s, &a, T0 + 410 * MS);
	assert_int_equal(r.rc, TB_STEP_RETRY_WINDOW);
	assert_int_equal(r.start, T0);
	assert_int_equal(r.deadline, T0 + 300 * MS);
	/* a window set by a delivered expiry names its call too */
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	r = step(&b, &s, &a, T0 + 350 * MS);
	assert_int_equal(r.rc, TB_STEP_RETRY_WINDOW);
	assert_int_equal(r.start, T0);
	assert_int_equal(r.deadline, T0 + 300 * MS);
}

/* scope=process with a rule of its own: the socket's settings decide the deadline, counted
 * from the process's start (what `timebox check --explain` shows). */
static void test_scope_process_rule_deadline(void **state)
{
	struct tb_settings defaults, rule;
	struct tb_budget b;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&defaults, 5 * S);
	defaults.scope = TB_SCOPE_PROCESS;
	settings(&rule, 1 * S);
	rule.scope = TB_SCOPE_PROCESS;
	tb_budget_open_process(&b, &defaults, T0);
	expect_go(&b, &rule, &a, T0 + 500 * MS, T0, T0 + 1 * S);
	expect_go(&b, &defaults, &a, T0 + 1 * S, T0, T0 + 5 * S);
	expect_refused(&b, &rule, &a, T0 + 1 * S, TB_STEP_EXPIRED);
	{
		struct step r = step(&b, &rule, &a, T0 + 2 * S);

		assert_int_equal(r.start, T0);
		assert_int_equal(r.deadline, T0 + 1 * S);
	}
	/* a rule without a deadline has none, whatever the defaults say */
	settings(&rule, 0);
	rule.scope = TB_SCOPE_PROCESS;
	expect_go(&b, &rule, &a, T0 + 100 * S, T0 + 100 * S, TB_NEVER);
}

/* A signal handler that interrupts an update on the same thread finds it busy: it goes
 * ahead without a deadline and changes nothing, so the interrupted update finishes on the
 * state it started from. */
static void test_nested_update_leaves_budget_alone(void **state)
{
	struct tb_settings s;
	struct tb_budget b, before;
	struct tb_dest a = dest_v4("10.0.0.1", 80);

	(void)state;
	settings(&s, 300 * MS);
	memset(&b, 0, sizeof(b));
	expect_go(&b, &s, &a, T0, T0, T0 + 300 * MS);
	assert_int_equal(b.busy, 0);
	b.busy = 1; /* the thread is inside an update when the handler runs */
	before = b;
	expect_go(&b, &s, &a, T0 + 400 * MS, T0 + 400 * MS, TB_NEVER);
	tb_budget_on_failure(&b, &s);
	tb_budget_on_response(&b, &s);
	tb_budget_on_close(&b, &s);
	tb_budget_on_expired(&b, &s, &a, TB_PHASE_DEADLINE, T0 + 300 * MS);
	assert_memory_equal(&b, &before, sizeof(b));
	b.busy = 0;
	expect_go(&b, &s, &a, T0 + 100 * MS, T0, T0 + 300 * MS);
}

/* Two budgets that saw the same events hold the same state. */
static void expect_same_budget(const struct tb_budget *x, const struct tb_budget *y, int i)
{
	if (x->open != y->open || x->saw_response != y->saw_response || x->failed != y->failed ||
	    x->start != y->start || x->deadline != y->deadline ||
	    !tb_dest_equal(&x->dest, &y->dest) || x->busy != y->busy ||
	    x->fastfail_until != y->fastfail_until || x->fastfail_start != y->fastfail_start ||
	    x->fastfail_deadline != y->fastfail_deadline ||
	    (x->fastfail_until != 0 && !tb_dest_equal(&x->fastfail_dest, &y->fastfail_dest)))
		fail_msg("event %d: the budgets differ", i);
}

/* The hot path's inline step (tb_budget_step_next) is tb_budget_step: on a random walk of
 * every event - steps to the same destination, a replica, another one; responses, failures,
 * closes, expiries; time running past deadlines and retry windows; scope=call and process,
 * no deadline, a nested update - both return the same and leave the same state. */
static void test_step_next_is_step(void **state)
{
	struct tb_dest d[3] = { dest_v4("10.0.0.1", 80), dest_v4("10.0.0.2", 80),
				dest_v4("10.0.0.3", 443) };
	uint64_t x = 0x9e3779b97f4a7c15u;

	(void)state;
	for (int run = 0; run < 40; run++) {
		struct tb_settings s;
		struct tb_budget b1, b2;
		int64_t now = T0;

		settings(&s, run % 10 == 9 ? 0 : 300 * MS);
		memset(&b1, 0, sizeof(b1));
		if (run % 10 == 8) {
			s.scope = TB_SCOPE_PROCESS;
			tb_budget_open_process(&b1, &s, T0);
		}
		b2 = b1;
		for (int i = 0; i < 2000; i++) {
			const struct tb_dest *to;
			unsigned r;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			r = (unsigned)(x >> 32);
			to = &d[(r >> 8) % 8 < 6 ? 0 : (r >> 8) % 8 - 5];
			now += (int64_t)((r >> 12) % 4 == 0 ? (r >> 16) % 700 : (r >> 16) % 40) * MS;
			switch (r % 9) {
			case 0:
			case 1:
			case 2: {
				struct step s1 = { 99, -7, -7 }, s2 = { 99, -7, -7 };
				bool nested = (r >> 20) % 50 == 0;

				b1.busy = b2.busy = nested;
				s1.rc = tb_budget_step(&b1, &s, to, now, &s1.start, &s1.deadline);
				s2.rc = tb_budget_step_next(&b2, &s, to, now, &s2.start,
							    &s2.deadline);
				b1.busy = b2.busy = 0;
				if (s1.rc != s2.rc || s1.start != s2.start ||
				    s1.deadline != s2.deadline)
					fail_msg("run %d event %d: the steps differ", run, i);
				break;
			}
			case 3:
			case 4:
				tb_budget_on_response(&b1, &s);
				tb_budget_on_response(&b2, &s);
				break;
			case 5:
				tb_budget_on_failure(&b1, &s);
				tb_budget_on_failure(&b2, &s);
				break;
			case 6:
				tb_budget_on_close(&b1, &s);
				tb_budget_on_close(&b2, &s);
				break;
			case 7: {
				enum tb_phase ph = (r >> 20) % 2 ? TB_PHASE_DEADLINE : TB_PHASE_READ;

				tb_budget_on_expired(&b1, &s, to, ph, b1.deadline);
				tb_budget_on_expired(&b2, &s, to, ph, b2.deadline);
				break;
			}
			default: {
				int64_t st, dl;

				tb_budget_step_continue(&b1, &s, to, now, &st, &dl);
				tb_budget_step_continue(&b2, &s, to, now, &st, &dl);
				break;
			}
			}
			expect_same_budget(&b1, &b2, i);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opens_at_first_step),
		cmocka_unit_test(test_carries_across_failure),
		cmocka_unit_test(test_failure_after_response_keeps_call),
		cmocka_unit_test(test_other_destination_opens_a_new_call),
		cmocka_unit_test(test_lookup_call_is_the_connects),
		cmocka_unit_test(test_answered_lookup_ends_its_call),
		cmocka_unit_test(test_response_then_step_opens_new_call),
		cmocka_unit_test(test_continued_step_keeps_the_call),
		cmocka_unit_test(test_response_then_close_opens_fresh),
		cmocka_unit_test(test_response_ignored_when_closed),
		cmocka_unit_test(test_deadline_expiry_closes_and_fails_fast),
		cmocka_unit_test(test_request_cut_leaves_no_retry_window),
		cmocka_unit_test(test_deadline_expiry_other_dest_fresh),
		cmocka_unit_test(test_phase_expiry_keeps_open),
		cmocka_unit_test(test_seed_question_4),
		cmocka_unit_test(test_seed_question_4_no_window),
		cmocka_unit_test(test_retry_window_default_is_deadline),
		cmocka_unit_test(test_expired_while_nobody_waited),
		cmocka_unit_test(test_expired_while_nobody_waited_no_window),
		cmocka_unit_test(test_late_step_without_failure_is_a_new_call),
		cmocka_unit_test(test_failed_call_retried_after_window_is_fresh),
		cmocka_unit_test(test_answered_call_never_late),
		cmocka_unit_test(test_scope_process),
		cmocka_unit_test(test_scope_process_no_deadline),
		cmocka_unit_test(test_no_deadline),
		cmocka_unit_test(test_remaining),
		cmocka_unit_test(test_huge_deadline_saturates),
		cmocka_unit_test(test_huge_retry_window_saturates),
		cmocka_unit_test(test_expired_step_reports_its_call),
		cmocka_unit_test(test_scope_process_rule_deadline),
		cmocka_unit_test(test_nested_update_leaves_budget_alone),
		cmocka_unit_test(test_step_next_is_step),
	};

	return cmocka_run_group_tests_name("budget", tests, NULL, NULL);
}
