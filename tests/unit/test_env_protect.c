/* test_env_protect.c - the TIMEBOX_* variables of the downstream's protection (the breaker,
 * the retry budget, max_conns = auto): defaults, every value, the breaker's switch, observe,
 * and every bad value refused with its sentence. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "env_fake.h"

#include "env.h"
#include "settings.h"

/* The protection is off by default, with the anchors' numbers ready for when it is on. */
static void test_protection_defaults(void **state)
{
	static const char *const env[] = { "PATH=/bin", NULL };
	struct tb_settings s;

	(void)state;
	assert_int_equal(load(&s, env).count, 0);
	assert_false(tb_settings_breaker_on(&s));
	assert_false(tb_settings_retry_budget_on(&s));
	assert_false(s.max_conns_auto);
	assert_int_equal(s.max_conns, 0);
	assert_int_equal(s.breaker_min_calls, 20);
	assert_int_equal(s.breaker_window_ns, 10 * S);
	assert_int_equal(s.breaker_open_ns, 30 * S);
	assert_int_equal(s.breaker_open_max_ns, 300 * S);
	assert_int_equal(s.breaker_probes, 1);
	assert_int_equal(s.breaker_slow_ns, 0);
	assert_int_equal(s.breaker_errno, ECONNREFUSED);
	assert_int_equal(s.breaker_http, TB_BREAKER_HTTP_GATEWAY);
	assert_int_equal(s.retry_budget_floor, 10);
	assert_int_equal(s.retry_budget_window_ns, 10 * S);
	assert_int_equal(s.max_conns_floor, TB_MAX_CONNS_FLOOR_DEFAULT);
	assert_int_equal(s.max_conns_ceiling, 1000);
}

static void test_protection_variables(void **state)
{
	static const char *const env[] = {
		"TIMEBOX_BREAKER_FAILURES=7",      "TIMEBOX_BREAKER_RATE=40%",
		"TIMEBOX_BREAKER_MIN_CALLS=50",    "TIMEBOX_BREAKER_WINDOW=30s",
		"TIMEBOX_BREAKER_OPEN=5s",         "TIMEBOX_BREAKER_OPEN_MAX=1m",
		"TIMEBOX_BREAKER_PROBES=3",        "TIMEBOX_BREAKER_SLOW=800ms",
		"TIMEBOX_BREAKER_ERRNO=EHOSTUNREACH", "TIMEBOX_BREAKER_HTTP=5xx",
		"TIMEBOX_RETRY_BUDGET=20",         "TIMEBOX_RETRY_BUDGET_FLOOR=0",
		"TIMEBOX_RETRY_BUDGET_WINDOW=1m",  NULL,
	};
	struct tb_settings s;

	(void)state;
	assert_int_equal(load(&s, env).count, 0);
	assert_true(tb_settings_breaker_on(&s));
	assert_true(tb_settings_any_limit(&s)); /* nothing else is set */
	assert_int_equal(s.breaker_failures, 7);
	assert_int_equal(s.breaker_rate, 40);
	assert_int_equal(s.breaker_min_calls, 50);
	assert_int_equal(s.breaker_window_ns, 30 * S);
	assert_int_equal(s.breaker_open_ns, 5 * S);
	assert_int_equal(s.breaker_open_max_ns, 60 * S);
	assert_int_equal(s.breaker_probes, 3);
	assert_int_equal(s.breaker_slow_ns, 800 * MS);
	assert_int_equal(s.breaker_errno, EHOSTUNREACH);
	assert_int_equal(s.breaker_http, TB_BREAKER_HTTP_5XX);
	assert_true(tb_settings_retry_budget_on(&s));
	assert_int_equal(s.retry_budget, 20);
	assert_int_equal(s.retry_budget_floor, 0);
	assert_int_equal(s.retry_budget_window_ns, 60 * S);
	assert_non_null(tb_env_find("--breaker-open-max", 1));
	assert_string_equal(tb_env_find("--retry-budget", 1)->name, "TIMEBOX_RETRY_BUDGET");
}

/* breaker = on gives the modes not set their anchors' values; off wins over everything. */
static void test_breaker_switch(void **state)
{
	static const char *const on[] = { "TIMEBOX_BREAKER=on", NULL };
	static const char *const on_rate[] = { "TIMEBOX_BREAKER=1", "TIMEBOX_BREAKER_RATE=30", NULL };
	static const char *const alone[] = { "TIMEBOX_BREAKER_FAILURES=3", NULL };
	static const char *const off[] = { "TIMEBOX_BREAKER=off", "TIMEBOX_BREAKER_FAILURES=3",
					   "TIMEBOX_BREAKER_RATE=30%", NULL };
	static const char *const consecutive_off[] = { "TIMEBOX_BREAKER=on",
						       "TIMEBOX_BREAKER_FAILURES=off", NULL };
	struct tb_settings s;

	(void)state;
	assert_int_equal(load(&s, on).count, 0);
	assert_true(tb_settings_breaker_on(&s));
	assert_int_equal(s.breaker_failures, 5);
	assert_int_equal(s.breaker_rate, 50);
	assert_true(tb_settings_any_limit(&s));
	assert_int_equal(load(&s, on_rate).count, 0);
	assert_int_equal(s.breaker_failures, 0); /* a mode given: the other stays off */
	assert_int_equal(s.breaker_rate, 30);
	assert_int_equal(load(&s, alone).count, 0);
	assert_true(tb_settings_breaker_on(&s));
	assert_int_equal(s.breaker_failures, 3);
	assert_int_equal(s.breaker_rate, 0);
	assert_int_equal(load(&s, off).count, 0);
	assert_false(tb_settings_breaker_on(&s));
	assert_int_equal(s.breaker_failures, 0);
	assert_int_equal(s.breaker_rate, 0);
	assert_false(tb_settings_any_limit(&s));
	assert_int_equal(load(&s, consecutive_off).count, 0);
	assert_int_equal(s.breaker_failures, 0);
	assert_int_equal(s.breaker_rate, 50);
	/* finishing twice changes nothing (timebox plan finishes what the config finished) */
	tb_settings_finish(&s);
	assert_int_equal(s.breaker_rate, 50);
}

/* max_conns = auto: the gate is present, sized up to the ceiling. */
static void test_max_conns_auto(void **state)
{
	static const char *const env[] = { "TIMEBOX_MAX_CONNS=auto", "TIMEBOX_MAX_CONNS_FLOOR=4",
					   "TIMEBOX_MAX_CONNS_CEILING=64", NULL };
	static const char *const fixed[] = { "TIMEBOX_MAX_CONNS=12", NULL };
	struct tb_settings s;

	(void)state;
	assert_int_equal(load(&s, env).count, 0);
	assert_true(s.max_conns_auto);
	assert_int_equal(s.max_conns, 64);
	assert_int_equal(s.max_conns_floor, 4);
	assert_true(tb_settings_any_limit(&s));
	tb_settings_finish(&s);
	assert_int_equal(s.max_conns, 64);
	assert_int_equal(load(&s, fixed).count, 0);
	assert_false(s.max_conns_auto);
	assert_int_equal(s.max_conns, 12);
	/* a later number wins over auto, and auto over a number */
	assert_null(apply(&s, "TIMEBOX_MAX_CONNS", "auto"));
	assert_true(s.max_conns_auto);
	assert_int_equal(tb_env_apply(&s, tb_env_find("TIMEBOX_MAX_CONNS", 0), "3", NULL, NULL), 0);
	assert_false(s.max_conns_auto);
	assert_int_equal(s.max_conns, 3);
}

/* An observed program is never refused: no breaker, no budget, no moving gate. */
static void test_observe_clears_protection(void **state)
{
	static const char *const env[] = { "TIMEBOX_OBSERVE=1", "TIMEBOX_BREAKER=on",
					   "TIMEBOX_BREAKER_SLOW=1s", "TIMEBOX_RETRY_BUDGET=10%",
					   "TIMEBOX_MAX_CONNS=auto", NULL };
	struct tb_settings s;

	(void)state;
	assert_int_equal(load(&s, env).count, 0);
	assert_false(tb_settings_breaker_on(&s));
	assert_int_equal(s.breaker_slow_ns, 0);
	assert_false(tb_settings_retry_budget_on(&s));
	assert_false(s.max_conns_auto);
	assert_int_equal(s.max_conns, TB_MAX_CONNS_LIMIT);
}

static void test_protection_bad_values(void **state)
{
	static const struct {
		const char *name, *value, *why;
	} bad[] = {
		{ "TIMEBOX_BREAKER", "maybe", "a switch is" },
		{ "TIMEBOX_BREAKER_FAILURES", "-1", "a count is" },
		{ "TIMEBOX_BREAKER_RATE", "101", "from 1 to 100" },
		{ "TIMEBOX_BREAKER_RATE", "50%%", "from 1 to 100" },
		{ "TIMEBOX_BREAKER_RATE", "0.5", "from 1 to 100" },
		{ "TIMEBOX_BREAKER_RATE", "off%", "from 1 to 100" },
		{ "TIMEBOX_BREAKER_RATE", "%", "from 1 to 100" },
		{ "TIMEBOX_BREAKER_MIN_CALLS", "0", "from 1 to" },
		{ "TIMEBOX_BREAKER_MIN_CALLS", "off", "from 1 to" },
		{ "TIMEBOX_BREAKER_WINDOW", "off", "cannot be off" },
		{ "TIMEBOX_BREAKER_WINDOW", "0", "cannot be off" },
		{ "TIMEBOX_BREAKER_OPEN", "30", "needs a unit" },
		{ "TIMEBOX_BREAKER_OPEN_MAX", "0s", "cannot be off" },
		{ "TIMEBOX_BREAKER_PROBES", "0", "from 1 to" },
		{ "TIMEBOX_BREAKER_SLOW", "fast", "" },
		{ "TIMEBOX_BREAKER_ERRNO", "EPERM", "ECONNREFUSED, ETIMEDOUT" },
		{ "TIMEBOX_BREAKER_ERRNO", "Econnrefused", "ECONNREFUSED, ETIMEDOUT" },
		{ "TIMEBOX_BREAKER_ERRNO", "111", "ECONNREFUSED, ETIMEDOUT" },
		{ "TIMEBOX_BREAKER_HTTP", "502", "gateway (502, 503, 504), 5xx or off" },
		{ "TIMEBOX_RETRY_BUDGET", "1001%", "from 1 to 1000" },
		{ "TIMEBOX_RETRY_BUDGET_FLOOR", "-3", "from 0 to" },
		{ "TIMEBOX_RETRY_BUDGET_WINDOW", "off", "cannot be off" },
		{ "TIMEBOX_MAX_CONNS", "automatic", "auto, or 0/off" },
		{ "TIMEBOX_MAX_CONNS_CEILING", "0", "from 1 to" },
		{ "TIMEBOX_MAX_CONNS_FLOOR", "1000001", "from 1 to" },
	};
	struct tb_settings s, fresh;

	(void)state;
	tb_settings_init(&fresh);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = apply(&s, bad[i].name, bad[i].value);

		assert_non_null(why);
		if (strstr(why, bad[i].why) == NULL)
			fail_msg("%s=%s: '%s' lacks '%s'", bad[i].name, bad[i].value, why, bad[i].why);
		/* refused: the settings are as they were */
		assert_memory_equal(&s, &fresh, sizeof(s));
	}
}

static void test_protection_good_spellings(void **state)
{
	struct tb_settings s;

	(void)state;
	assert_null(apply(&s, "TIMEBOX_BREAKER_RATE", "100%"));
	assert_int_equal(s.breaker_rate, 100);
	assert_null(apply(&s, "TIMEBOX_BREAKER_RATE", "0%"));
	assert_int_equal(s.breaker_rate, 0);
	assert_null(apply(&s, "TIMEBOX_BREAKER_RATE", "off"));
	assert_null(apply(&s, "TIMEBOX_RETRY_BUDGET", "1000%"));
	assert_int_equal(s.retry_budget, 1000);
	assert_null(apply(&s, "TIMEBOX_BREAKER_ERRNO", "etimedout"));
	assert_int_equal(s.breaker_errno, ETIMEDOUT);
	assert_null(apply(&s, "TIMEBOX_BREAKER_ERRNO", "ECONNRESET"));
	assert_int_equal(s.breaker_errno, ECONNRESET);
	assert_string_equal(tb_env_errno_name(ECONNRESET), "ECONNRESET");
	assert_null(tb_env_errno_name(EPERM));
	assert_null(apply(&s, "TIMEBOX_BREAKER_HTTP", "off"));
	assert_int_equal(s.breaker_http, TB_BREAKER_HTTP_OFF);
	assert_string_equal(tb_env_breaker_http_name(TB_BREAKER_HTTP_5XX), "5xx");
	assert_null(apply(&s, "TIMEBOX_BREAKER_PROBES", "16"));
	assert_int_equal(s.breaker_probes, 16);
	assert_null(apply(&s, "TIMEBOX_BREAKER_SLOW", "off"));
	assert_int_equal(s.breaker_slow_ns, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_protection_defaults),
		cmocka_unit_test(test_protection_variables),
		cmocka_unit_test(test_breaker_switch),
		cmocka_unit_test(test_max_conns_auto),
		cmocka_unit_test(test_observe_clears_protection),
		cmocka_unit_test(test_protection_bad_values),
		cmocka_unit_test(test_protection_good_spellings),
	};

	return cmocka_run_group_tests_name("env_protect", tests, NULL, NULL);
}
