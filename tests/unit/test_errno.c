/* test_errno.c - errno discipline of the pure modules: the hooks call them between the real
 * call and the return to the program, so none of them may touch errno, on success or on a
 * refusal (STYLE: success and pass-through leave the caller's errno as it was). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "budget.h"
#include "duration.h"
#include "env.h"
#include "gate.h"
#include "phase.h"
#include "settings.h"

#define SENTINEL 12345

static const char *get_nothing(const char *name, void *ctx)
{
	(void)name;
	(void)ctx;
	return NULL;
}

static void ignore_error(void *ctx, const char *name, const char *value, const char *why)
{
	(void)ctx;
	(void)name;
	(void)value;
	(void)why;
}

static void test_parsers_leave_errno(void **state)
{
	int64_t ns;
	const char *why;
	char buf[TB_DURATION_TEXT_MAX];
	struct tb_settings s;

	(void)state;
	errno = SENTINEL;
	assert_int_equal(tb_duration_parse("250ms", &ns, &why), 0);
	assert_int_equal(tb_duration_parse("250", &ns, &why), -1);            /* no unit */
	assert_int_equal(tb_duration_parse("99999999999h", &ns, &why), -1);   /* overflow */
	tb_duration_format(1500 * MS, buf, sizeof(buf));
	tb_env_load(&s, get_nothing, NULL, ignore_error, NULL);
	assert_int_equal(tb_env_apply(&s, tb_env_find("TIMEBOX_READ_TIMEOUT", 0), "junk",
				      ignore_error, NULL), -1);
	assert_int_equal(errno, SENTINEL);
}

static void test_budget_and_phases_leave_errno(void **state)
{
	struct tb_settings s;
	struct tb_budget b;
	struct tb_dest d = dest_v4("127.0.0.1", 8080);
	struct tb_idle c = { 0, 0 };
	int64_t start, deadline;

	(void)state;
	tb_settings_init(&s);
	s.read_ns = 250 * MS;
	s.deadline_ns = 300 * MS;
	tb_settings_finish(&s);
	memset(&b, 0, sizeof(b));
	errno = SENTINEL;
	assert_int_equal(tb_budget_step(&b, &s, &d, T0, &start, &deadline), TB_STEP_GO);
	tb_budget_on_failure(&b, &s);
	tb_budget_on_expired(&b, &s, &d, TB_PHASE_DEADLINE, deadline);
	assert_int_equal(tb_budget_step(&b, &s, &d, T0 + 310 * MS, &start, &deadline),
			 TB_STEP_RETRY_WINDOW);
	tb_idle_wait_begin(&c, T0);
	tb_idle_wait_end(&c, T0 + 100 * MS);
	(void)tb_expiry_pick(TB_PHASE_READ, tb_idle_expiry(&c, s.read_ns), T0 + 300 * MS);
	assert_int_equal(errno, SENTINEL);
}

static void test_gate_leaves_errno(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w;
	struct tb_dest d = dest_v4("127.0.0.1", 8080);

	(void)state;
	tb_gate_init(&g, &d, 1, 0);
	errno = SENTINEL;
	assert_true(tb_gate_try_acquire(&g));
	assert_false(tb_gate_try_acquire(&g));
	assert_int_equal(tb_gate_enqueue(&g, &w), TB_GATE_QUEUED);
	assert_ptr_equal(tb_gate_release(&g), &w);
	assert_null(tb_gate_release(&g));
	assert_int_equal(errno, SENTINEL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parsers_leave_errno),
		cmocka_unit_test(test_budget_and_phases_leave_errno),
		cmocka_unit_test(test_gate_leaves_errno),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
