/* test_logfmt.c - the log lines as written: logfmt quoting, JSON escaping, the timeout
 * line's timers, the suppressed count after the rate limit. log.c is compiled in here, its
 * sink and the statistics replaced by captures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "../../shim/log.c"

static char out[8192];
static size_t out_n;

int tb_sink_open(const struct tb_settings *s, const char **why)
{
	(void)s;
	*why = NULL;
	return TB_LOG_STDERR;
}

bool tb_sink_write(int target, const char *line, size_t n)
{
	(void)target;
	if (out_n + n < sizeof(out)) {
		memcpy(out + out_n, line, n);
		out_n += n;
		out[out_n] = '\0';
	}
	return true;
}

void tb_sink_fd_moved(int from, int to)
{
	(void)from, (void)to;
}

void tb_sink_stderr_replaced(void)
{
}

void tb_sink_fork_child(void)
{
}

__thread int tb_thread_tid = 77; /* tb_tid() reads it (thread.h) */

int tb_tid_slow(void)
{
	return tb_thread_tid;
}

int tb_pid(void)
{
	return (int)getpid(); /* as the library's, once it has set up */
}

void tb_stats_wake(void)
{
}


static void open_with(enum tb_log_format f, int rate)
{
	struct tb_settings s;

	tb_settings_init(&s);
	s.log_format = f;
	s.log_rate = rate;
	tb_log_open(&s);
	tb_log_lend(tb_stats_wake); /* as the statistics do at start-up */
	out_n = 0;
	out[0] = '\0';
}

static struct tb_dest d80(void)
{
	return dest_v4("10.0.0.5", 80);
}

static void test_timeout_line_has_the_timers(void **state)
{
	struct tb_dest d = d80();
	struct tb_log_timers t = { 12, 3, -1, 2515, 485, "api.example" };

	(void)state;
	open_with(TB_LOG_FORMAT_LOGFMT, 0);
	tb_log_timeout_with(TB_PHASE_FIRST_BYTE, &d, 7, 2500 * MS, 2500 * MS, 99, &t);
	assert_non_null(strstr(out, "timebox: event=timeout phase=first_byte dest=10.0.0.5:80 "
				    "fd=7 elapsed_ms=2500 limit_ms=2500 host=api.example "
				    "gate_ms=12 connect_ms=3 first_byte_ms=-1 total_ms=2515 "
				    "budget_ms=485 pid="));
	assert_non_null(strstr(out, " tid=99\n"));
}

/* The expirer takes the timers while the socket cannot be reused: the line uses those; a
 * line without them says so with -1. */
static void test_timeout_line_with_timers_taken_at_the_cut(void **state)
{
	struct tb_dest d = d80();
	struct tb_log_timers t = { -1, 4, 20, 320, -1, "" };

	(void)state;
	open_with(TB_LOG_FORMAT_LOGFMT, 0);
	tb_log_timeout_with(TB_PHASE_READ, &d, 7, 300 * MS, 300 * MS, 99, &t);
	assert_non_null(strstr(out, "fd=7 elapsed_ms=300 limit_ms=300 gate_ms=-1 connect_ms=4 "
				    "first_byte_ms=20 total_ms=320 budget_ms=-1 pid="));
	out_n = 0;
	tb_log_timeout_with(TB_PHASE_READ, &d, 7, 300 * MS, 300 * MS, 99, NULL);
	assert_non_null(strstr(out, "gate_ms=-1 connect_ms=-1 first_byte_ms=-1 total_ms=300 "));
}

static void test_gate_timeout_without_a_socket(void **state)
{
	struct tb_dest d = d80();

	(void)state;
	open_with(TB_LOG_FORMAT_LOGFMT, 0);
	tb_log_timeout(TB_PHASE_GATE, &d, 4, 300 * MS, 300 * MS, 0);
	assert_non_null(strstr(out, "gate_ms=300 connect_ms=-1 first_byte_ms=-1 total_ms=300 "
				    "budget_ms=-1"));
}

static void test_logfmt_quotes_what_needs_it(void **state)
{
	struct tb_dest d = d80();

	(void)state;
	open_with(TB_LOG_FORMAT_LOGFMT, 0);
	tb_log_reject(TB_PHASE_GATE, &d, 3, "a b=\"c\"\\");
	assert_non_null(strstr(out, " reason=\"a b=\\\"c\\\"\\\\\" "));
	out_n = 0;
	tb_log_config_error("TIMEBOX_X", "v\x01", "bad", "ignored");
	assert_non_null(strstr(out, "value=\"v?\""));
}

static void test_json_escapes_and_types(void **state)
{
	struct tb_dest d = d80();

	(void)state;
	open_with(TB_LOG_FORMAT_JSON, 0);
	tb_log_reject(TB_PHASE_GATE, &d, 3, "q\"\\\n");
	assert_non_null(strstr(out, "{\"src\":\"timebox\",\"event\":\"reject\",\"phase\":\"gate\","
				    "\"dest\":\"10.0.0.5:80\",\"fd\":3,"
				    "\"reason\":\"q\\\"\\\\\\u000a\",\"pid\":"));
	assert_int_equal(out[out_n - 2], '}');
	assert_int_equal(out[out_n - 1], '\n');
}

static void test_json_error_body_becomes_members(void **state)
{
	(void)state;
	open_with(TB_LOG_FORMAT_JSON, 0);
	tb_log_error("event=error what=stats_thread error=\"cannot start \\\"it\\\"\"");
	assert_non_null(strstr(out, "{\"src\":\"timebox\",\"event\":\"error\","
				    "\"what\":\"stats_thread\",\"error\":\"cannot start \\\"it\\\"\""));
}

static void test_rate_limit_then_one_suppressed_line(void **state)
{
	struct tb_dest d = d80();
	int lines = 0;
	const char *p, *sup;
	long count;

	(void)state;
	open_with(TB_LOG_FORMAT_LOGFMT, 3);
	for (int i = 0; i < 10; i++)
		tb_log_reject(TB_PHASE_GATE, &d, 3, "full");
	tb_log_flush_suppressed();
	for (p = out; (p = strstr(p, "event=reject")) != NULL; p++)
		lines++;
	sup = strstr(out, "event=suppressed count=");
	assert_non_null(sup);
	count = strtol(sup + strlen("event=suppressed count="), NULL, 10);
	/* The ten may straddle a second of the real clock: at most two windows' worth. */
	assert_true(lines >= 3 && lines <= 6);
	assert_int_equal(lines + count, 10);
	out_n = 0;
	out[0] = '\0';
	tb_log_flush_suppressed();
	assert_int_equal(out_n, 0); /* reported once */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timeout_line_has_the_timers),
		cmocka_unit_test(test_timeout_line_with_timers_taken_at_the_cut),
		cmocka_unit_test(test_gate_timeout_without_a_socket),
		cmocka_unit_test(test_logfmt_quotes_what_needs_it),
		cmocka_unit_test(test_json_escapes_and_types),
		cmocka_unit_test(test_json_error_body_becomes_members),
		cmocka_unit_test(test_rate_limit_then_one_suppressed_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
