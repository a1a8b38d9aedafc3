/* test_phase.c - idle accounting summed across the program's own waits, the moment a wait
 * expires, and the choice between a phase limit and the call's deadline, on a simulated clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "phase.h"

/* One wait of the program from `from` to `to` during which the peer stays silent. */
static void silent_wait(struct tb_idle *c, int64_t from, int64_t to)
{
	tb_idle_wait_begin(c, from);
	tb_idle_wait_end(c, to);
}

static void test_single_wait(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	tb_idle_wait_begin(&c, T0);
	assert_int_equal(tb_idle_expiry(&c, 250 * MS), T0 + 250 * MS);
	assert_int_equal(tb_idle_silence(&c, true, T0 + 100 * MS), 100 * MS);
	tb_idle_wait_end(&c, T0 + 100 * MS);
	assert_int_equal(c.idle_ns, 100 * MS);
}

/* curl-style poll loop: three 100 ms slices with no data, then a fourth wait. */
static void test_sums_across_waits(void **state)
{
	struct tb_idle c;
	const int64_t limit = 1 * S;

	(void)state;
	memset(&c, 0, sizeof(c));
	silent_wait(&c, T0, T0 + 100 * MS);
	silent_wait(&c, T0 + 100 * MS, T0 + 200 * MS);
	silent_wait(&c, T0 + 200 * MS, T0 + 300 * MS);
	assert_int_equal(c.idle_ns, 300 * MS);

	tb_idle_wait_begin(&c, T0 + 300 * MS);
	assert_int_equal(tb_idle_expiry(&c, limit), T0 + 300 * MS + (limit - 300 * MS));
}

/* Time the program spends between its waits is not the peer's silence. */
static void test_gaps_between_waits_not_counted(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	silent_wait(&c, T0, T0 + 100 * MS);
	silent_wait(&c, T0 + 5 * S, T0 + 5 * S + 100 * MS); /* busy 4.9 s in between */
	assert_int_equal(c.idle_ns, 200 * MS);
	tb_idle_wait_begin(&c, T0 + 9 * S);
	assert_int_equal(tb_idle_expiry(&c, 250 * MS), T0 + 9 * S + 50 * MS);
	assert_int_equal(tb_idle_silence(&c, false, T0 + 9 * S + 40 * MS), 200 * MS);
	assert_int_equal(tb_idle_silence(&c, true, T0 + 9 * S + 40 * MS), 240 * MS);
}

static void test_progress_resets(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	silent_wait(&c, T0, T0 + 200 * MS);
	tb_idle_progress(&c);
	assert_int_equal(c.idle_ns, 0);
	tb_idle_wait_begin(&c, T0 + 210 * MS);
	assert_int_equal(tb_idle_expiry(&c, 250 * MS), T0 + 460 * MS);
	assert_int_equal(tb_idle_silence(&c, false, T0 + 300 * MS), 0);
}

/* Four 1 s polls on a read limit of 2 s: the limit fires inside the third poll. */
static void test_slices_longer_than_limit(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	tb_idle_wait_begin(&c, T0);
	assert_int_equal(tb_idle_expiry(&c, 2 * S), T0 + 2 * S);
	tb_idle_wait_end(&c, T0 + 1 * S);
	tb_idle_wait_begin(&c, T0 + 1 * S);
	assert_int_equal(tb_idle_expiry(&c, 2 * S), T0 + 2 * S);
	tb_idle_wait_end(&c, T0 + 2 * S - 1);
	tb_idle_wait_begin(&c, T0 + 2 * S);
	assert_int_equal(tb_idle_expiry(&c, 2 * S), T0 + 2 * S + 1);
}

static void test_already_over_expires_at_begin(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	silent_wait(&c, T0, T0 + 400 * MS);
	tb_idle_wait_begin(&c, T0 + 1 * S);
	assert_int_equal(tb_idle_expiry(&c, 250 * MS), T0 + 1 * S); /* never before begin */
	/* exactly at the limit: also at begin */
	memset(&c, 0, sizeof(c));
	silent_wait(&c, T0, T0 + 250 * MS);
	tb_idle_wait_begin(&c, T0 + 2 * S);
	assert_int_equal(tb_idle_expiry(&c, 250 * MS), T0 + 2 * S);
}

static void test_limit_off(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	silent_wait(&c, T0, T0 + 10 * S);
	tb_idle_wait_begin(&c, T0 + 10 * S);
	assert_int_equal(tb_idle_expiry(&c, 0), TB_NEVER);
	assert_int_equal(tb_idle_expiry(&c, -1), TB_NEVER);
}

static void test_end_before_begin_ignored(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	silent_wait(&c, T0, T0 + 100 * MS);
	silent_wait(&c, T0 + 200 * MS, T0 + 200 * MS); /* a wait that found data at once */
	silent_wait(&c, T0 + 300 * MS, T0 + 299 * MS); /* a clock read out of order */
	assert_int_equal(c.idle_ns, 100 * MS);
	tb_idle_wait_begin(&c, T0 + 400 * MS);
	assert_int_equal(tb_idle_silence(&c, true, T0 + 399 * MS), 100 * MS);
}

static void test_silence(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(tb_idle_silence(&c, false, T0), 0);
	silent_wait(&c, T0, T0 + 70 * MS);
	/* no wait under way: only ended waits count, however late `now` is */
	assert_int_equal(tb_idle_silence(&c, false, T0 + 70 * MS), 70 * MS);
	assert_int_equal(tb_idle_silence(&c, false, T0 + 100 * S), 70 * MS);
	tb_idle_wait_begin(&c, T0 + 1 * S);
	assert_int_equal(tb_idle_silence(&c, true, T0 + 1 * S), 70 * MS);
	assert_int_equal(tb_idle_silence(&c, true, T0 + 1 * S + 30 * MS), 100 * MS);
	assert_int_equal(tb_idle_silence(&c, false, T0 + 1 * S + 30 * MS), 70 * MS);
}

static void test_no_overflow_near_never(void **state)
{
	struct tb_idle c;

	(void)state;
	memset(&c, 0, sizeof(c));
	tb_idle_wait_begin(&c, TB_NEVER - 10);
	assert_int_equal(tb_idle_expiry(&c, 250 * MS), TB_NEVER);
	assert_int_equal(tb_idle_expiry(&c, TB_NEVER), TB_NEVER);
	assert_int_equal(tb_idle_expiry(&c, 10), TB_NEVER);
	assert_int_equal(tb_idle_expiry(&c, 9), TB_NEVER - 1);

	memset(&c, 0, sizeof(c));
	tb_idle_wait_begin(&c, T0);
	assert_int_equal(tb_idle_expiry(&c, TB_NEVER), TB_NEVER);
	assert_int_equal(tb_idle_expiry(&c, TB_NEVER - T0), TB_NEVER);
	assert_int_equal(tb_idle_expiry(&c, TB_NEVER - T0 - 1), TB_NEVER - 1);
	silent_wait(&c, T0, T0 + 1 * S);
	tb_idle_wait_begin(&c, T0 + 1 * S);
	assert_int_equal(tb_idle_expiry(&c, TB_NEVER), TB_NEVER);
}

static void test_pick(void **state)
{
	struct tb_expiry e;

	(void)state;
	/* the deadline comes first */
	e = tb_expiry_pick(TB_PHASE_READ, T0 + 250 * MS, T0 + 200 * MS);
	assert_int_equal(e.at, T0 + 200 * MS);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
	/* a tie is reported as the deadline */
	e = tb_expiry_pick(TB_PHASE_FIRST_BYTE, T0 + 300 * MS, T0 + 300 * MS);
	assert_int_equal(e.at, T0 + 300 * MS);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
	/* the phase comes first */
	e = tb_expiry_pick(TB_PHASE_CONNECT, T0 + 100 * MS, T0 + 100 * MS + 1);
	assert_int_equal(e.at, T0 + 100 * MS);
	assert_int_equal(e.phase, TB_PHASE_CONNECT);
	/* no deadline */
	e = tb_expiry_pick(TB_PHASE_WRITE, T0 + 5 * S, TB_NEVER);
	assert_int_equal(e.at, T0 + 5 * S);
	assert_int_equal(e.phase, TB_PHASE_WRITE);
	/* no phase limit */
	e = tb_expiry_pick(TB_PHASE_READ, TB_NEVER, T0 + 5 * S);
	assert_int_equal(e.at, T0 + 5 * S);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
	/* nothing bounds the wait */
	e = tb_expiry_pick(TB_PHASE_READ, TB_NEVER, TB_NEVER);
	assert_int_equal(e.at, TB_NEVER);
}

/* Seed question 4's read side: read 250 ms inside a 300 ms deadline, then the retry. */
static void test_pick_with_idle(void **state)
{
	struct tb_idle c;
	struct tb_expiry e;

	(void)state;
	memset(&c, 0, sizeof(c));
	tb_idle_wait_begin(&c, T0);
	e = tb_expiry_pick(TB_PHASE_READ, tb_idle_expiry(&c, 250 * MS), T0 + 300 * MS);
	assert_int_equal(e.at, T0 + 250 * MS);
	assert_int_equal(e.phase, TB_PHASE_READ);

	memset(&c, 0, sizeof(c)); /* a new socket for the retry */
	tb_idle_wait_begin(&c, T0 + 251 * MS);
	e = tb_expiry_pick(TB_PHASE_READ, tb_idle_expiry(&c, 250 * MS), T0 + 300 * MS);
	assert_int_equal(e.at, T0 + 300 * MS);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_wait),
		cmocka_unit_test(test_sums_across_waits),
		cmocka_unit_test(test_gaps_between_waits_not_counted),
		cmocka_unit_test(test_progress_resets),
		cmocka_unit_test(test_slices_longer_than_limit),
		cmocka_unit_test(test_already_over_expires_at_begin),
		cmocka_unit_test(test_limit_off),
		cmocka_unit_test(test_end_before_begin_ignored),
		cmocka_unit_test(test_silence),
		cmocka_unit_test(test_no_overflow_near_never),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_pick_with_idle),
	};

	return cmocka_run_group_tests_name("phase", tests, NULL, NULL);
}
