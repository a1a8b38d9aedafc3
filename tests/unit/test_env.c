/* test_env.c - tb_env_load, tb_env_apply, tb_env_find and tb_env_check_unknown over a fake
 * environment (an array), with every error captured instead of printed. */
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
#include "frame.h"
#include "settings.h"

static void test_nothing_set(void **state)
{
	static const char *const env[] = { "PATH=/bin", NULL };
	struct tb_settings s;
	struct errors e = load(&s, env);

	(void)state;
	assert_int_equal(e.count, 0);
	assert_false(tb_settings_any_limit(&s));
	assert_int_equal(s.first_byte_ns, 0);
	assert_int_equal(s.dns_ns, 0);
	assert_int_equal(tb_settings_retry_window(&s), 0);
	assert_int_equal(s.scope, TB_SCOPE_CALL);
	assert_int_equal(s.on_timeout, TB_ON_TIMEOUT_ETIMEDOUT);
	assert_int_equal(s.log_target, TB_LOG_STDERR);
	assert_false(s.strict);
}

static void test_every_variable(void **state)
{
	static const char *const env[] = {
		"TIMEBOX_CONNECT_TIMEOUT=1s",   "TIMEBOX_WRITE_TIMEOUT=2s",
		"TIMEBOX_FIRST_BYTE_TIMEOUT=3s", "TIMEBOX_READ_TIMEOUT=250ms",
		"TIMEBOX_DEADLINE=300ms",       "TIMEBOX_RETRY_WINDOW=1.5s",
		"TIMEBOX_SCOPE=process",        "TIMEBOX_ON_TIMEOUT=eagain",
		"TIMEBOX_LOG=/var/log/tb.log",  "TIMEBOX_STRICT=1",
		"TIMEBOX_PROTOCOL=postgres",
		NULL,
	};
	struct tb_settings s;
	struct errors e = load(&s, env);

	(void)state;
	assert_int_equal(e.count, 0);
	assert_int_equal(s.connect_ns, 1 * S);
	assert_int_equal(s.write_ns, 2 * S);
	assert_int_equal(s.first_byte_ns, 3 * S);
	assert_int_equal(s.read_ns, 250 * MS);
	assert_int_equal(s.deadline_ns, 300 * MS);
	assert_int_equal(tb_settings_retry_window(&s), 1500 * MS);
	assert_int_equal(s.scope, TB_SCOPE_PROCESS);
	assert_int_equal(s.on_timeout, TB_ON_TIMEOUT_EAGAIN);
	assert_int_equal(s.log_target, TB_LOG_FILE);
	assert_string_equal(s.log_path, "/var/log/tb.log");
	assert_true(s.strict);
	assert_int_equal(s.protocol, TB_PROTO_POSTGRES);
	assert_true(tb_settings_any_limit(&s));
	assert_int_equal(tb_settings_phase_limit(&s, TB_PHASE_CONNECT), 1 * S);
	assert_int_equal(tb_settings_phase_limit(&s, TB_PHASE_WRITE), 2 * S);
	assert_int_equal(tb_settings_phase_limit(&s, TB_PHASE_FIRST_BYTE), 3 * S);
	assert_int_equal(tb_settings_phase_limit(&s, TB_PHASE_READ), 250 * MS);
	assert_int_equal(tb_settings_phase_limit(&s, TB_PHASE_DEADLINE), 300 * MS);
	assert_int_equal(tb_settings_phase_limit(&s, TB_PHASE_GATE), 0);
}

static void test_first_byte_defaults_to_read(void **state)
{
	static const char *const env[] = { "TIMEBOX_READ_TIMEOUT=2s", NULL };
	static const char *const off[] = { "TIMEBOX_READ_TIMEOUT=2s",
					   "TIMEBOX_FIRST_BYTE_TIMEOUT=off", NULL };
	struct tb_settings s;

	(void)state;
	assert_int_equal(load(&s, env).count, 0);
	assert_int_equal(s.first_byte_ns, 2 * S);
	assert_int_equal(tb_settings_phase_limit(&s, TB_PHASE_FIRST_BYTE), 2 * S);
	/* an explicit off is kept: only "not set" follows read */
	assert_int_equal(load(&s, off).count, 0);
	assert_int_equal(s.first_byte_ns, 0);
}

/* Name resolution is part of segment (2) with the handshake: unset, it gets connect's limit. */
static void test_dns_defaults_to_connect(void **state)
{
	static const char *const follows[] = { "TIMEBOX_CONNECT_TIMEOUT=2s", NULL };
	static const char *const own[] = { "TIMEBOX_CONNECT_TIMEOUT=2s",
					   "TIMEBOX_DNS_TIMEOUT=300ms", NULL };
	static const char *const off[] = { "TIMEBOX_CONNECT_TIMEOUT=2s",
					   "TIMEBOX_DNS_TIMEOUT=off", NULL };
	static const char *const alone[] = { "TIMEBOX_DNS_TIMEOUT=1.5s", NULL };
	static const char *const bad[] = { "TIMEBOX_DNS_TIMEOUT=300", NULL };
	struct tb_settings s;
	struct errors e;

	(void)state;
	assert_int_equal(load(&s, follows).count, 0);
	assert_int_equal(s.dns_ns, 2 * S);
	assert_int_equal(load(&s, own).count, 0);
	assert_int_equal(s.dns_ns, 300 * MS);
	assert_int_equal(s.connect_ns, 2 * S);
	/* an explicit off is kept: only "not set" follows connect */
	assert_int_equal(load(&s, off).count, 0);
	assert_int_equal(s.dns_ns, 0);
	/* a lookup limit alone is a limit: the library must not stay inert */
	assert_int_equal(load(&s, alone).count, 0);
	assert_int_equal(s.dns_ns, 1500 * MS);
	assert_int_equal(s.connect_ns, 0);
	assert_true(tb_settings_any_limit(&s));
	/* it is not a socket phase: the linger of the watchdog ignores it */
	assert_int_equal(tb_settings_min_limit(&s), 0);
	e = load(&s, bad);
	assert_int_equal(e.count, 1);
	assert_string_equal(e.name[0], "TIMEBOX_DNS_TIMEOUT");
	assert_string_equal(e.value[0], "300");
	assert_int_equal(s.dns_ns, 0);
	assert_non_null(tb_env_find("--dns-timeout", 1));
	assert_string_equal(tb_env_find("--dns-timeout", 1)->name, "TIMEBOX_DNS_TIMEOUT");
}

static void test_retry_window_defaults_to_deadline(void **state)
{
	static const char *const env[] = { "TIMEBOX_DEADLINE=300ms", NULL };
	static const char *const zero[] = { "TIMEBOX_DEADLINE=300ms", "TIMEBOX_RETRY_WINDOW=0",
					    NULL };
	struct tb_settings s;

	(void)state;
	assert_int_equal(load(&s, env).count, 0);
	assert_int_equal(tb_settings_retry_window(&s), 300 * MS);
	assert_int_equal(load(&s, zero).count, 0);
	assert_int_equal(tb_settings_retry_window(&s), 0);
}

static void test_bad_values_reported_once_each(void **state)
{
	static const char *const env[] = {
		"TIMEBOX_READ_TIMEOUT=250",     "TIMEBOX_DEADLINE=-1s",
		"TIMEBOX_CONNECT_TIMEOUT=100ms", "TIMEBOX_SCOPE=thread",
		"TIMEBOX_ON_TIMEOUT=EAGAIN",    "TIMEBOX_LOG=relative.log",
		"TIMEBOX_STRICT=maybe",         NULL,
	};
	struct tb_settings s;
	struct errors e = load(&s, env);

	(void)state;
	assert_int_equal(e.count, 6);
	assert_string_equal(e.name[0], "TIMEBOX_READ_TIMEOUT");
	assert_string_equal(e.value[0], "250");
	assert_string_equal(e.why[0], "a duration needs a unit, e.g. 250ms");
	assert_string_equal(e.name[1], "TIMEBOX_DEADLINE");
	assert_string_equal(e.value[1], "-1s");
	assert_string_equal(e.name[2], "TIMEBOX_SCOPE");
	assert_string_equal(e.value[2], "thread");
	assert_string_equal(e.name[3], "TIMEBOX_ON_TIMEOUT");
	assert_string_equal(e.value[3], "EAGAIN");
	assert_string_equal(e.name[4], "TIMEBOX_LOG");
	assert_string_equal(e.value[4], "relative.log");
	assert_string_equal(e.name[5], "TIMEBOX_STRICT");
	assert_string_equal(e.value[5], "maybe");

	/* bad values leave their settings off (or at their default); good ones still apply */
	assert_int_equal(s.read_ns, 0);
	assert_int_equal(s.first_byte_ns, 0);
	assert_int_equal(s.deadline_ns, 0);
	assert_int_equal(s.connect_ns, 100 * MS);
	assert_int_equal(s.scope, TB_SCOPE_CALL);
	assert_int_equal(s.on_timeout, TB_ON_TIMEOUT_ETIMEDOUT);
	assert_int_equal(s.log_target, TB_LOG_STDERR);
	assert_false(s.strict);
}

static void test_empty_value_is_an_error(void **state)
{
	static const char *const env[] = { "TIMEBOX_DEADLINE=", NULL };
	struct tb_settings s;
	struct errors e = load(&s, env);

	(void)state;
	assert_int_equal(e.count, 1);
	assert_string_equal(e.value[0], "");
	assert_int_equal(s.deadline_ns, 0);
}

static void test_scope(void **state)
{
	struct tb_settings s;
	const char *why;

	(void)state;
	assert_null(apply(&s, "TIMEBOX_SCOPE", "call"));
	assert_int_equal(s.scope, TB_SCOPE_CALL);
	assert_null(apply(&s, "TIMEBOX_SCOPE", "process"));
	assert_int_equal(s.scope, TB_SCOPE_PROCESS);
	assert_null(apply(&s, "TIMEBOX_SCOPE", "request"));
	assert_int_equal(s.scope, TB_SCOPE_REQUEST);
	why = apply(&s, "TIMEBOX_SCOPE", "Call");
	assert_non_null(why);
	assert_non_null(strstr(why, "call, process or request"));
	assert_int_equal(s.scope, TB_SCOPE_CALL); /* the default stays */
}

/* TIMEBOX_PROPAGATE is a switch like the others; off by default. */
static void test_propagate(void **state)
{
	struct tb_settings s;

	(void)state;
	tb_settings_init(&s);
	assert_false(s.propagate);
	assert_null(apply(&s, "TIMEBOX_PROPAGATE", "1"));
	assert_true(s.propagate);
	assert_null(apply(&s, "TIMEBOX_PROPAGATE", "false"));
	assert_false(s.propagate);
	assert_null(apply(&s, "TIMEBOX_PROPAGATE", "true"));
	assert_true(s.propagate);
	assert_non_null(apply(&s, "TIMEBOX_PROPAGATE", "2"));
	assert_false(s.propagate);
}

/* The header is an HTTP token of 1..63 characters: a space, a colon, a control byte or a
 * 64th character would not make a header line (and could split one); refused, naming the
 * value, and the default kept. */
static void test_deadline_header(void **state)
{
	struct tb_settings s;
	const char *why;
	char longest[64], too_long[65];
	static const char *const bad[] = { "X Deadline", "X-Deadline:", "", "X\r\nY", "é", "a\"b",
					   "(x)", "x/y", "x@y", "x=y", NULL };

	(void)state;
	tb_settings_init(&s);
	assert_string_equal(s.deadline_header, "X-Deadline-Ms");
	assert_null(apply(&s, "TIMEBOX_DEADLINE_HEADER", "grpc-timeout"));
	assert_string_equal(s.deadline_header, "grpc-timeout");
	assert_null(apply(&s, "TIMEBOX_DEADLINE_HEADER", "x!#$%&'*+-.^_`|~9"));
	assert_string_equal(s.deadline_header, "x!#$%&'*+-.^_`|~9");
	memset(longest, 'a', 63);
	longest[63] = '\0';
	assert_null(apply(&s, "TIMEBOX_DEADLINE_HEADER", longest));
	assert_string_equal(s.deadline_header, longest);
	memset(too_long, 'b', 64);
	too_long[64] = '\0';
	why = apply(&s, "TIMEBOX_DEADLINE_HEADER", too_long);
	assert_non_null(why);
	assert_non_null(strstr(why, "1 to 63"));
	for (int i = 0; bad[i] != NULL; i++) {
		why = apply(&s, "TIMEBOX_DEADLINE_HEADER", bad[i]);
		if (why == NULL)
			fail_msg("'%s' accepted as a header name", bad[i]);
		assert_non_null(strstr(why, "header name"));
	}
	assert_string_equal(s.deadline_header, "X-Deadline-Ms"); /* the default stays */
}

static void test_on_timeout(void **state)
{
	struct tb_settings s;

	(void)state;
	assert_null(apply(&s, "TIMEBOX_ON_TIMEOUT", "eagain"));
	assert_int_equal(s.on_timeout, TB_ON_TIMEOUT_EAGAIN);
	assert_null(apply(&s, "TIMEBOX_ON_TIMEOUT", "etimedout"));
	assert_int_equal(s.on_timeout, TB_ON_TIMEOUT_ETIMEDOUT);
	assert_non_null(apply(&s, "TIMEBOX_ON_TIMEOUT", "ewouldblock"));
}

static void test_log(void **state)
{
	struct tb_settings s;
	char long_path[300];

	(void)state;
	assert_null(apply(&s, "TIMEBOX_LOG", "stderr"));
	assert_int_equal(s.log_target, TB_LOG_STDERR);
	assert_null(apply(&s, "TIMEBOX_LOG", "syslog"));
	assert_int_equal(s.log_target, TB_LOG_SYSLOG);
	assert_null(apply(&s, "TIMEBOX_LOG", "off"));
	assert_int_equal(s.log_target, TB_LOG_OFF);
	assert_null(apply(&s, "TIMEBOX_LOG", "/tmp/timebox.log"));
	assert_int_equal(s.log_target, TB_LOG_FILE);
	assert_string_equal(s.log_path, "/tmp/timebox.log");
	assert_non_null(apply(&s, "TIMEBOX_LOG", "tb.log"));
	assert_non_null(apply(&s, "TIMEBOX_LOG", ""));

	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[TB_LOG_PATH_MAX - 1] = '\0'; /* 255 bytes: the longest that fits */
	assert_null(apply(&s, "TIMEBOX_LOG", long_path));
	assert_int_equal(strlen(s.log_path), TB_LOG_PATH_MAX - 1);
	long_path[TB_LOG_PATH_MAX - 1] = 'a';
	long_path[TB_LOG_PATH_MAX] = '\0';
	assert_non_null(apply(&s, "TIMEBOX_LOG", long_path));
	assert_int_equal(s.log_target, TB_LOG_STDERR);
}

static void test_strict(void **state)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	struct tb_settings s;

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		assert_null(apply(&s, "TIMEBOX_STRICT", yes[i]));
		assert_true(s.strict);
		assert_null(apply(&s, "TIMEBOX_STRICT", no[i]));
		assert_false(s.strict);
	}
	assert_non_null(apply(&s, "TIMEBOX_STRICT", "2"));
	assert_non_null(apply(&s, "TIMEBOX_STRICT", ""));
}

static void test_find(void **state)
{
	(void)state;
	assert_ptr_equal(tb_env_find("TIMEBOX_READ_TIMEOUT", 0), tb_env_find("--read-timeout", 1));
	assert_null(tb_env_find("--read-timeout", 0));
	assert_null(tb_env_find("TIMEBOX_READ_TIMEOUT", 1));
	assert_null(tb_env_find("TIMEBOX_LIBRARY", 0)); /* the launcher's alone */
	assert_ptr_equal(tb_env_find("TIMEBOX_CONFIG", 0), tb_env_find("--config", 1));
	assert_null(tb_env_find(NULL, 0));
	for (const struct tb_env_var *v = tb_env_vars; v->name != NULL; v++) {
		assert_ptr_equal(tb_env_find(v->name, 0), v);
		assert_ptr_equal(tb_env_find(v->option, 1), v);
		assert_true(strncmp(v->name, "TIMEBOX_", 8) == 0);
		assert_true(strncmp(v->option, "--", 2) == 0);
		assert_non_null(v->help);
	}
}

static void test_check_unknown(void **state)
{
	/* envp holds writable strings (char *const *): -Wwrite-strings forbids literals there */
	static char entries[][64] = {
		"PATH=/bin",
		"TIMEBOX_READ_TIMOUT=1s", /* the typo */
		"TIMEBOX_READ_TIMEOUT=1s",
		"TIMEBOX_CONFIG=/etc/timebox.conf",
		"TIMEBOX_MAX_CONNS=5",
		"TIMEBOX_ACQUIRE_TIMEOUT=300ms",
		"TIMEBOX_MAX_PENDING=10",
		"TIMEBOX_GATE_SHARED=1",
		"TIMEBOX_GATE_NONBLOCKING=fail",
		"TIMEBOX_LOG_LEVEL=debug",
		"TIMEBOX_LIBRARY=/usr/lib/timebox/libtimebox.so",
		"TIMEBOX_FROBNICATE=yes",
		"TIMEBOXED=1", /* not our prefix */
	};
	enum { N = sizeof(entries) / sizeof(entries[0]) };
	char *env[N + 1];
	struct errors e;

	(void)state;
	for (size_t i = 0; i < N; i++)
		env[i] = entries[i];
	env[N] = NULL;
	memset(&e, 0, sizeof(e));
	assert_int_equal(tb_env_check_unknown(env, collect, &e), 2);
	assert_int_equal(e.count, 2);
	assert_string_equal(e.name[0], "TIMEBOX_READ_TIMOUT");
	assert_string_equal(e.value[0], "1s");
	assert_non_null(strstr(e.why[0], "did you mean TIMEBOX_READ_TIMEOUT?"));
	assert_string_equal(e.name[1], "TIMEBOX_FROBNICATE");
	assert_null(strstr(e.why[1], "did you mean"));
	assert_int_equal(tb_env_check_unknown(NULL, collect, &e), 0);
}

/*
 * tb_env_number on a variable without a field (TIMEBOX_SCOPE, TIMEBOX_LOG, ...) is -1, as its
 * contract says. Found by tests/fuzz/fuzz_env.c (corpus/env/regress_number_no_field): the
 * address s + TB_ENV_NO_FIELD was computed before the field was checked, a pointer overflow
 * that UBSan reports ("addition of unsigned offset ... overflowed") even though it was never
 * read. Under `make unit SANITIZE=undefined` the hook below makes that report fail the run.
 */
static void test_number_without_field(void **state)
{
	struct tb_settings s;
	int without = 0;

	(void)state;
	tb_settings_init(&s);
	for (const struct tb_env_var *v = tb_env_vars; v->name != NULL; v++) {
		if (v->field != TB_ENV_NO_FIELD)
			continue;
		assert_int_equal(tb_env_number(&s, v), -1);
		without++;
	}
	assert_true(without >= 6); /* gate_nonblocking, scope, on_timeout, log, log_level, config */
}

/* Read by the UBSan runtime when this test is built with SANITIZE=undefined: a report is a
 * failure, not a line in the output. Unused otherwise. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1";
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_set),
		cmocka_unit_test(test_every_variable),
		cmocka_unit_test(test_first_byte_defaults_to_read),
		cmocka_unit_test(test_dns_defaults_to_connect),
		cmocka_unit_test(test_retry_window_defaults_to_deadline),
		cmocka_unit_test(test_bad_values_reported_once_each),
		cmocka_unit_test(test_empty_value_is_an_error),
		cmocka_unit_test(test_scope),
		cmocka_unit_test(test_propagate),
		cmocka_unit_test(test_deadline_header),
		cmocka_unit_test(test_on_timeout),
		cmocka_unit_test(test_log),
		cmocka_unit_test(test_strict),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_check_unknown),
		cmocka_unit_test(test_number_without_field),
	};

	return cmocka_run_group_tests_name("env", tests, NULL, NULL);
}
