/* test_request.c - the thread's request budget (shim/request.c): the API's nesting by the
 * smaller deadline, the inbound request's open/tighten/close, and which deadline binds a call. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "../../shim/request.c"

/* The statistics are the library's; here only counted. */
static int arrived_spent;

void tb_stats_arrived_spent(void)
{
	arrived_spent++;
}

void tb_log_error(const char *body)
{
	(void)body;
}

static void reset(void)
{
	tb_req_fork_child();
	arrived_spent = 0;
}

/* What a deadline `d` leaves, in ms, against the real monotonic clock. */
static int64_t left_ms(int64_t d)
{
	return (d - tb_now()) / MS;
}

static void test_no_deadline(void **state)
{
	struct tb_settings s;
	struct tb_req_tag tag;
	int64_t start = -7;

	(void)state;
	reset();
	tb_settings_init(&s);
	assert_true(tb_req_deadline() == TB_NEVER);
	assert_int_equal(tb_req_remaining_ms(), -1);
	assert_true(tb_req_bound(&s, &tag, &start) == TB_NEVER);
	assert_int_equal(start, -7); /* left alone */
	tb_req_api_end();            /* an end without a begin: nothing */
	assert_true(tb_req_deadline() == TB_NEVER);
}

/* begin(1000) inside begin(300) keeps the 300; end restores the outer level, then none. */
static void test_api_nests_by_the_smaller(void **state)
{
	int64_t outer;

	(void)state;
	reset();
	assert_int_equal(tb_req_api_begin(300), 0);
	outer = tb_req_deadline();
	assert_true(left_ms(outer) <= 300 && left_ms(outer) >= 200);
	assert_true(tb_req_remaining_ms() <= 300 && tb_req_remaining_ms() >= 200);
	assert_int_equal(tb_req_api_begin(1000), 0);
	assert_true(tb_req_deadline() == outer);
	assert_int_equal(tb_req_api_begin(100), 0); /* a smaller one tightens */
	assert_true(tb_req_deadline() < outer);
	tb_req_api_end();
	assert_true(tb_req_deadline() == outer);
	tb_req_api_end();
	assert_true(tb_req_deadline() == outer);
	tb_req_api_end();
	assert_true(tb_req_deadline() == TB_NEVER);
	assert_int_equal(tb_req_remaining_ms(), -1);
}

static void test_api_refuses_negative(void **state)
{
	(void)state;
	reset();
	errno = 0;
	assert_int_equal(tb_req_api_begin(-1), -1);
	assert_int_equal(errno, EINVAL);
	assert_true(tb_req_deadline() == TB_NEVER);
	assert_int_equal(tb_req_api_begin(0), 0); /* 0: already spent */
	assert_int_equal(tb_req_remaining_ms(), 0);
	tb_req_api_end();
	assert_int_equal(tb_req_api_begin(9223372036854775807L), 0); /* saturates: no deadline in practice */
	assert_true(tb_req_deadline() == TB_NEVER);
	tb_req_api_end();
}

/* Past the stack's 16 levels, begins are counted and still tighten; every end matches its
 * begin, and ending an overflowed level restores the 16th level's deadline. */
static void test_api_deeper_than_the_stack(void **state)
{
	int64_t at16 = 0;

	(void)state;
	reset();
	for (int i = 0; i < 20; i++) {
		assert_int_equal(tb_req_api_begin(10000 - 100 * i), 0);
		if (i == 15)
			at16 = tb_req_deadline();
	}
	assert_true(tb_req_deadline() < at16); /* the 20th level's 8,100 ms */
	for (int i = 0; i < 4; i++) {
		tb_req_api_end();
		assert_true(tb_req_deadline() == at16);
	}
	for (int i = 0; i < 15; i++) {
		tb_req_api_end();
		assert_true(tb_req_deadline() != TB_NEVER);
	}
	tb_req_api_end();
	assert_true(tb_req_deadline() == TB_NEVER);
}

/* An inbound head opens the budget; its header only ever tightens it; 0 is counted as
 * arrived spent; the response closes it, and a new head replaces it (keep-alive). */
static void test_inbound_open_tighten_close(void **state)
{
	struct tb_settings s;
	struct tb_req_tag tag;
	int64_t start = 0;

	(void)state;
	reset();
	tb_settings_init(&s);
	s.scope = TB_SCOPE_REQUEST;
	tb_req_inbound_tighten_ns(100 * MS, TB_REQ_HDR_CONFIGURED, "100"); /* not open: nothing */
	assert_true(tb_req_deadline() == TB_NEVER);
	tb_req_inbound_open(T0, 1 * S);
	assert_true(tb_req_deadline() == T0 + 1 * S);
	assert_true(tb_req_bound(&s, &tag, &start) == T0 + 1 * S);
	assert_int_equal(tag.source, TB_REQ_SRC_SCOPE);
	assert_true(start == T0);
	tb_req_inbound_tighten_ns(2 * S, TB_REQ_HDR_CONFIGURED, "2000"); /* never extends */
	assert_true(tb_req_deadline() == T0 + 1 * S);
	tb_req_inbound_tighten_ns(-1, TB_REQ_HDR_CONFIGURED, ""); /* none */
	assert_true(tb_req_deadline() == T0 + 1 * S);
	tb_req_inbound_tighten_ns(200 * MS, TB_REQ_HDR_ENVOY, "200");
	assert_true(tb_req_deadline() == T0 + 200 * MS);
	assert_true(tb_req_bound(&s, &tag, &start) == T0 + 200 * MS);
	assert_int_equal(tag.source, TB_REQ_SRC_HEADER);
	assert_int_equal(tag.header, TB_REQ_HDR_ENVOY);
	assert_string_equal(tag.value, "200");
	assert_int_equal(arrived_spent, 0);
	{ /* propagate.h's result, as the inbound wiring passes it */
		struct tb_prop_deadline d = { .ns = 150 * MS, .source = TB_PROP_SRC_HEADER };

		memcpy(d.value, "150m", 5);
		tb_req_inbound_tighten(&d);
		assert_true(tb_req_deadline() == T0 + 150 * MS);
		assert_true(tb_req_bound(&s, &tag, &start) == T0 + 150 * MS);
		assert_int_equal(tag.header, TB_REQ_HDR_CONFIGURED);
		assert_string_equal(tag.value, "150m");
		d.ns = -1; /* none found */
		tb_req_inbound_tighten(&d);
		assert_true(tb_req_deadline() == T0 + 150 * MS);
	}
	tb_req_inbound_tighten_ns(0, TB_REQ_HDR_CONFIGURED, "0");
	assert_true(tb_req_deadline() == T0);
	assert_int_equal(arrived_spent, 1);
	tb_req_inbound_close();
	assert_true(tb_req_deadline() == TB_NEVER);
	/* The next request on the connection: a budget of its own. */
	tb_req_inbound_open(T0 + 5 * S, 0); /* no deadline of the settings' */
	assert_true(tb_req_deadline() == TB_NEVER);
	tb_req_inbound_tighten_ns(300 * MS, TB_REQ_HDR_CONFIGURED, "300");
	assert_true(tb_req_deadline() == T0 + 5 * S + 300 * MS);
	tb_req_inbound_open(T0 + 6 * S, 1 * S); /* replaces, not nested */
	assert_true(tb_req_deadline() == T0 + 7 * S);
	tb_req_inbound_close();
	tb_req_inbound_close(); /* twice: nothing */
	assert_true(tb_req_deadline() == TB_NEVER);
}

/* The API nests inside an inbound request by the smaller deadline; a rule's scope = call
 * keeps only the API's, and the inbound close leaves the API's level in force. */
static void test_api_inside_a_request(void **state)
{
	struct tb_settings in_req, call;
	struct tb_req_tag tag;
	int64_t start = 0, now = tb_now(), api;

	(void)state;
	reset();
	tb_settings_init(&in_req);
	in_req.scope = TB_SCOPE_REQUEST;
	tb_settings_init(&call);
	tb_req_inbound_open(now, 100 * MS);
	assert_int_equal(tb_req_api_begin(10000), 0);
	api = api_top();
	assert_true(tb_req_deadline() == now + 100 * MS); /* the request's is smaller */
	assert_true(tb_req_bound(&in_req, &tag, &start) == now + 100 * MS);
	assert_int_equal(tag.source, TB_REQ_SRC_SCOPE);
	assert_true(tb_req_bound(&call, &tag, &start) == api);
	assert_int_equal(tag.source, TB_REQ_SRC_API);
	tb_req_inbound_close();
	assert_true(tb_req_deadline() == api);
	assert_true(tb_req_bound(&in_req, &tag, &start) == api);
	tb_req_api_end();
	assert_true(tb_req_deadline() == TB_NEVER);
}

static void *begin_and_exit(void *arg)
{
	struct tb_req_state **slot = arg;

	assert_int_equal(tb_req_api_begin(500), 0);
	*slot = tb_req_cur;
	return NULL; /* exits with its level still open: the key's destructor gives it back */
}

/* A thread's state is its own, and given back to the pool when the thread exits. */
static void test_slot_given_back_at_thread_exit(void **state)
{
	struct tb_req_state *slot = NULL;
	pthread_t t;

	(void)state;
	reset();
	assert_int_equal(pthread_create(&t, NULL, begin_and_exit, &slot), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_non_null(slot);
	assert_true(slot != tb_req_cur);
	assert_false(atomic_load(&taken[slot - pool]));
	assert_true(tb_req_deadline() == TB_NEVER); /* the other thread's level is not ours */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_deadline),
		cmocka_unit_test(test_api_nests_by_the_smaller),
		cmocka_unit_test(test_api_refuses_negative),
		cmocka_unit_test(test_api_deeper_than_the_stack),
		cmocka_unit_test(test_inbound_open_tighten_close),
		cmocka_unit_test(test_api_inside_a_request),
		cmocka_unit_test(test_slot_given_back_at_thread_exit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
