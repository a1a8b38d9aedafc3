/* test_lint.c - every lint rule of `timebox check`, each triggered and not triggered, from
 * configuration text through tb_config_parse (so the origins are the real ones). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "duration.h"
#include "lint.h"

#define MAXF 32

static struct tb_finding found[MAXF];

/* Lints text (a rule list or defaults); returns the number of findings. */
static size_t lint(const char *text, int64_t inbound_ns)
{
	int errors = 0;
	struct tb_config *c = tb_config_parse(text, "t.conf", NULL, NULL, NULL, &errors);
	size_t n;

	assert_non_null(c);
	assert_int_equal(errors, 0);
	memset(found, 0, sizeof(found));
	n = tb_lint_config(c, inbound_ns, found, MAXF);
	tb_config_free(c);
	return n;
}

/* The number of findings of `rule`. */
static int count(size_t n, const char *rule)
{
	int k = 0;

	for (size_t i = 0; i < n && i < MAXF; i++)
		k += strcmp(found[i].rule, rule) == 0;
	return k;
}

static const struct tb_finding *first(size_t n, const char *rule)
{
	for (size_t i = 0; i < n && i < MAXF; i++)
		if (strcmp(found[i].rule, rule) == 0)
			return &found[i];
	fail_msg("no %s finding", rule);
	return NULL;
}

static void has(const struct tb_finding *f, const char *fragment)
{
	if (strstr(f->message, fragment) == NULL && strstr(f->fix, fragment) == NULL)
		fail_msg("'%s' / '%s' lacks '%s'", f->message, f->fix, fragment);
}

static void test_clean(void **state)
{
	(void)state;
	assert_int_equal(lint("", 0), 0);
	assert_int_equal(lint("defaults = { connect_timeout = \"1s\"; };", 0), 0);
	assert_int_equal(lint("defaults = { read_timeout = \"250ms\"; deadline = \"1s\"; };", 0), 0);
}

static void test_no_deadline(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = {\n read_timeout = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NO_DEADLINE), 1);
	assert_int_equal(first(n, TB_LINT_NO_DEADLINE)->line, 2);
	assert_string_equal(first(n, TB_LINT_NO_DEADLINE)->scope, "defaults");
	has(first(n, TB_LINT_NO_DEADLINE), "read_timeout is 1s");
	/* Set to off on purpose (a stream): quiet. */
	n = lint("defaults = { read_timeout = \"1s\"; deadline = \"off\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NO_DEADLINE), 0);
	/* A rule inherits the defaults' problem: reported once, for the defaults. */
	n = lint("defaults = { read_timeout = \"1s\"; };\n"
		 "destinations = ( { match = \"*:80\"; connect_timeout = \"1s\"; } );", 0);
	assert_int_equal(count(n, TB_LINT_NO_DEADLINE), 1);
	/* ... but a rule with numbers of its own is reported on its own line. */
	n = lint("defaults = { read_timeout = \"1s\"; };\n"
		 "destinations = ( { match = \"*:80\"; read_timeout = \"2s\"; } );", 0);
	assert_int_equal(count(n, TB_LINT_NO_DEADLINE), 2);
	assert_string_equal(found[1].scope, "*:80");
	assert_int_equal(found[1].line, 2);
	/* enabled = false: nothing to lint. */
	n = lint("destinations = ( { match = \"*:80\"; read_timeout = \"2s\"; enabled = false; } );",
		 0);
	assert_int_equal(n, 0);
}

static void test_session(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { read_timeout = \"1s\"; deadline = \"2s\"; protocol = \"session\"; };", 0);
	assert_int_equal(count(n, TB_LINT_SESSION), 1);
	has(first(n, TB_LINT_SESSION), "every destination a session");
	n = lint("defaults = { read_timeout = \"1s\"; deadline = \"2s\"; };\n"
		 "destinations = ( { match = \"*:6379\"; protocol = \"session\"; } );", 0);
	assert_int_equal(count(n, TB_LINT_SESSION), 1);
	assert_string_equal(first(n, TB_LINT_SESSION)->scope, "*:6379");
	has(first(n, TB_LINT_SESSION), "the deadline 2s never applies");
	/* Without a deadline, or with the protocol detected: quiet. */
	n = lint("defaults = { read_timeout = \"1s\"; deadline = \"2s\"; };\n"
		 "destinations = ( { match = \"*:6379\"; protocol = \"session\"; "
		 "deadline = \"off\"; }, { match = \"*:80\"; protocol = \"http\"; } );", 0);
	assert_int_equal(count(n, TB_LINT_SESSION), 0);
}

static void test_retries(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { read_timeout = \"250ms\"; deadline = \"300ms\"; attempts = 3; };", 0);
	assert_int_equal(count(n, TB_LINT_RETRIES), 1);
	has(first(n, TB_LINT_RETRIES), "250ms x 3 attempts = 750ms");
	has(first(n, TB_LINT_RETRIES), "100ms or less");
	n = lint("defaults = { read_timeout = \"100ms\"; deadline = \"300ms\"; attempts = 3; };", 0);
	assert_int_equal(count(n, TB_LINT_RETRIES), 0);
	n = lint("defaults = { read_timeout = \"250ms\"; deadline = \"300ms\"; };", 0);
	assert_int_equal(count(n, TB_LINT_RETRIES), 0); /* attempts not given */
	n = lint("defaults = { read_timeout = \"1s\"; first_byte_timeout = \"200ms\";"
		 " deadline = \"500ms\"; attempts = 3; };", 0);
	has(first(n, TB_LINT_RETRIES), "first_byte_timeout 200ms");
}

static void test_phase_sum(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { acquire_timeout = \"50ms\"; connect_timeout = \"100ms\";"
		 " read_timeout = \"250ms\"; deadline = \"300ms\"; max_conns = 30; };", 0);
	assert_int_equal(count(n, TB_LINT_PHASE_SUM), 1);
	has(first(n, TB_LINT_PHASE_SUM), "= 400ms");
	n = lint("defaults = { acquire_timeout = \"20ms\"; connect_timeout = \"80ms\";"
		 " read_timeout = \"200ms\"; deadline = \"300ms\"; max_conns = 30; };", 0);
	assert_int_equal(n, 0);
}

static void test_never_fires(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { read_timeout = \"2s\"; deadline = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NEVER_FIRES), 1); /* read, not first_byte too */
	has(first(n, TB_LINT_NEVER_FIRES), "read_timeout 2s can never fire");
	n = lint("defaults = { connect_timeout = \"1s\"; write_timeout = \"1s\";"
		 " deadline = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NEVER_FIRES), 2);
	n = lint("defaults = { read_timeout = \"999ms\"; deadline = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NEVER_FIRES), 0);
}

/* dns_timeout is a phase like the others; one that only follows connect is reported as
 * connect, once. */
static void test_dns_never_fires(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { dns_timeout = \"2s\"; deadline = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NEVER_FIRES), 1);
	has(first(n, TB_LINT_NEVER_FIRES), "dns_timeout 2s can never fire");
	has(first(n, TB_LINT_NEVER_FIRES), "lower dns_timeout below the deadline");
	n = lint("defaults = { connect_timeout = \"2s\"; deadline = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NEVER_FIRES), 1);
	has(first(n, TB_LINT_NEVER_FIRES), "connect_timeout 2s can never fire");
	n = lint("defaults = { dns_timeout = \"300ms\"; connect_timeout = \"500ms\";"
		 " deadline = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_NEVER_FIRES), 0);
}

static void test_gate_wait(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { max_conns = 10; };", 0);
	assert_int_equal(count(n, TB_LINT_GATE_WAIT), 1);
	n = lint("defaults = { max_conns = 10; acquire_timeout = \"50ms\"; };", 0);
	assert_int_equal(count(n, TB_LINT_GATE_WAIT), 0);
	n = lint("defaults = { max_conns = 10; deadline = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_GATE_WAIT), 0);
}

static void test_littles_law(void **state)
{
	static const char fmt[] = "defaults = { max_conns = %d; acquire_timeout = \"50ms\";"
				  " expected_rps = 100; expected_p99 = \"200ms\"; };";
	char text[200];
	size_t n;

	(void)state;
	snprintf(text, sizeof(text), fmt, 10); /* 20 in flight: too small */
	n = lint(text, 0);
	assert_int_equal(count(n, TB_LINT_LITTLE), 1);
	has(first(n, TB_LINT_LITTLE), "max_conns = 30");
	has(first(n, TB_LINT_LITTLE), "queue");
	snprintf(text, sizeof(text), fmt, 30);
	assert_int_equal(lint(text, 0), 0);
	snprintf(text, sizeof(text), fmt, 60);
	assert_int_equal(lint(text, 0), 0);
	snprintf(text, sizeof(text), fmt, 61); /* more than twice 30: stops protecting */
	n = lint(text, 0);
	assert_int_equal(count(n, TB_LINT_LITTLE), 1);
	has(first(n, TB_LINT_LITTLE), "instead of protecting it");
	/* Without the expectations there is nothing to compare. */
	assert_int_equal(lint("defaults = { max_conns = 500; acquire_timeout = \"1s\"; };", 0), 0);
}

static void test_inbound(void **state)
{
	size_t n;
	static const char text[] = "defaults = { read_timeout = \"200ms\"; deadline = \"1s\"; };";

	(void)state;
	n = lint(text, 1000 * INT64_C(1000000));
	assert_int_equal(count(n, TB_LINT_INBOUND), 1);
	has(first(n, TB_LINT_INBOUND), "800ms");
	assert_int_equal(lint(text, 1500 * INT64_C(1000000)), 0);
	assert_int_equal(lint(text, 0), 0);
}

/* A request's budget: the defaults' deadline under scope = request, or --inbound. */
static void test_request_retries(void **state)
{
	size_t n;
	static const char text[] =
		"defaults = { scope = \"request\"; deadline = \"1s\"; };\n"
		"destinations = (\n"
		" { match = \"inventory:8080\"; deadline = \"400ms\"; attempts = 3; },\n"
		" { match = \"fits:80\"; deadline = \"500ms\"; attempts = 2; },\n"
		" { match = \"alone:80\"; deadline = \"400ms\"; scope = \"call\"; attempts = 3; }\n"
		");";
	static const char call_scope[] =
		"defaults = { deadline = \"1s\"; };\n"
		"destinations = ( { match = \"a:80\"; deadline = \"400ms\"; attempts = 3; } );";

	(void)state;
	n = lint(text, 0);
	assert_int_equal(count(n, TB_LINT_REQUEST_RETRIES), 1);
	assert_string_equal(first(n, TB_LINT_REQUEST_RETRIES)->scope, "inventory:8080");
	assert_int_equal(first(n, TB_LINT_REQUEST_RETRIES)->line, 3);
	has(first(n, TB_LINT_REQUEST_RETRIES), "deadline 400ms x 3 attempts = 1.2s is more than the 1s");
	has(first(n, TB_LINT_REQUEST_RETRIES), "the defaults' deadline, scope = request");
	has(first(n, TB_LINT_REQUEST_RETRIES), "only 2 attempts fit whole");
	has(first(n, TB_LINT_REQUEST_RETRIES), "not even sent");
	has(first(n, TB_LINT_REQUEST_RETRIES), "lower the deadline to 333ms");
	/* A smaller --inbound is the budget, for the opted-out rule too. */
	n = lint(text, 700 * INT64_C(1000000));
	assert_int_equal(count(n, TB_LINT_REQUEST_RETRIES), 3);
	for (size_t i = 0; i < n; i++)
		if (strcmp(found[i].rule, TB_LINT_REQUEST_RETRIES) == 0)
			has(&found[i], "(--inbound)");
	/* Without a request scope the defaults' deadline is no request's: only --inbound. */
	assert_int_equal(count(lint(call_scope, 0), TB_LINT_REQUEST_RETRIES), 0);
	n = lint(call_scope, 1000 * INT64_C(1000000));
	assert_int_equal(count(n, TB_LINT_REQUEST_RETRIES), 1);
	has(first(n, TB_LINT_REQUEST_RETRIES), "go on after the caller has given up");
	/* One attempt longer than the budget is deadline-exceeds-inbound's, not repeated. */
	n = lint("defaults = { deadline = \"2s\"; };\n"
		 "destinations = ( { match = \"a:80\"; attempts = 3; } );",
		 1000 * INT64_C(1000000));
	assert_int_equal(count(n, TB_LINT_REQUEST_RETRIES), 0);
	assert_int_equal(count(n, TB_LINT_INBOUND), 1);
	/* No attempts given: nothing to multiply. */
	assert_int_equal(lint("defaults = { scope = \"request\"; deadline = \"1s\"; };\n"
			      "destinations = ( { match = \"a:80\"; deadline = \"900ms\"; } );",
			      0),
			 0);
}

/* scope = call with propagate on under request-scoped defaults. */
static void test_propagate_outside_request(void **state)
{
	size_t n;
	static const char text[] =
		"defaults = { scope = \"request\"; propagate = true; deadline = \"1s\"; };\n"
		"destinations = (\n"
		" { match = \"long:80\"; scope = \"call\"; deadline = \"3s\"; },\n"
		" { match = \"short:6379\"; scope = \"call\"; deadline = \"50ms\"; },\n"
		" { match = \"none:80\"; scope = \"call\"; propagate = true; deadline = \"off\";\n"
		"   connect_timeout = \"1s\"; },\n"
		" { match = \"inherited:5432\"; scope = \"call\"; deadline = \"off\";\n"
		"   connect_timeout = \"1s\"; },\n"
		" { match = \"quiet:80\"; scope = \"call\"; propagate = false; deadline = \"3s\"; },\n"
		" { match = \"drawn:80\"; deadline = \"3s\"; }\n"
		");";

	(void)state;
	n = lint(text, 0);
	assert_int_equal(count(n, TB_LINT_PROPAGATE_CALL), 2);
	assert_string_equal(first(n, TB_LINT_PROPAGATE_CALL)->scope, "long:80");
	has(first(n, TB_LINT_PROPAGATE_CALL), "own deadline 3s, not what the inbound request has "
					      "left (at most 1s)");
	for (size_t i = 0; i < n; i++)
		if (strcmp(found[i].scope, "none:80") == 0 &&
		    strcmp(found[i].rule, TB_LINT_PROPAGATE_CALL) == 0)
			has(&found[i], "no header is ever sent");
	/* Without request-scoped defaults, scope = call is every call's: nothing to report. */
	assert_int_equal(count(lint("defaults = { propagate = true; deadline = \"1s\"; };\n"
				    "destinations = ( { match = \"a:80\"; deadline = \"3s\"; } );",
				    0),
			       TB_LINT_PROPAGATE_CALL),
			 0);
}

static void test_duration_text(void **state)
{
	char b[32];

	(void)state;
	assert_string_equal(tb_duration_format(0, b, sizeof(b)), "off");
	assert_string_equal(tb_duration_format(250 * INT64_C(1000000), b, sizeof(b)), "250ms");
	assert_string_equal(tb_duration_format(1500 * INT64_C(1000000), b, sizeof(b)), "1.5s");
	assert_string_equal(tb_duration_format(1250 * INT64_C(1000000), b, sizeof(b)), "1250ms");
	assert_string_equal(tb_duration_format(120 * INT64_C(1000000000), b, sizeof(b)), "2m");
	assert_string_equal(tb_duration_format(800 * INT64_C(1000), b, sizeof(b)), "800us");
	assert_string_equal(tb_duration_format(7, b, sizeof(b)), "7ns");
}

static void test_breaker_open_max(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = {\n deadline = \"1s\"; breaker = true;\n breaker_open = \"30s\";\n"
		 " breaker_open_max = \"10s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_OPEN_MAX), 1);
	has(first(n, TB_LINT_OPEN_MAX), "breaker_open_max 10s is shorter than breaker_open 30s");
	has(first(n, TB_LINT_OPEN_MAX), "\"5m\"");
	/* equal is a choice (no growth), and a breaker that is off says nothing */
	n = lint("defaults = { deadline = \"1s\"; breaker = true; breaker_open = \"30s\";"
		 " breaker_open_max = \"30s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_OPEN_MAX), 0);
	n = lint("defaults = { deadline = \"1s\"; breaker_open = \"30s\";"
		 " breaker_open_max = \"10s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_OPEN_MAX), 0);
}

static void test_breaker_probes(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { deadline = \"1s\"; breaker_failures = 5; breaker_probes = 40; };", 0);
	assert_int_equal(count(n, TB_LINT_PROBES), 1);
	has(first(n, TB_LINT_PROBES), "breaker_probes 40 is more than the 16");
	n = lint("defaults = { deadline = \"1s\"; breaker_failures = 5; breaker_probes = 16; };", 0);
	assert_int_equal(count(n, TB_LINT_PROBES), 0);
}

static void test_protection_blind_to_stalls(void **state)
{
	size_t n;

	(void)state;
	n = lint("destinations = ( {\n match = \"*:80\";\n breaker = true; } );", 0);
	assert_int_equal(count(n, TB_LINT_BLIND), 1);
	assert_string_equal(first(n, TB_LINT_BLIND)->scope, "*:80");
	has(first(n, TB_LINT_BLIND), "the breaker opens on refusals and resets only");
	n = lint("defaults = { retry_budget = \"20%\"; };", 0);
	assert_int_equal(count(n, TB_LINT_BLIND), 1);
	has(first(n, TB_LINT_BLIND), "counted as first attempts");
	/* any cut is a failure it sees; so is a slow call */
	n = lint("defaults = { breaker = true; read_timeout = \"1s\"; deadline = \"2s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_BLIND), 0);
	n = lint("defaults = { breaker = true; breaker_slow = \"1s\"; };", 0);
	assert_int_equal(count(n, TB_LINT_BLIND), 0);
	/* the adaptive gate alone needs no failure */
	n = lint("defaults = { max_conns = \"auto\"; acquire_timeout = \"50ms\"; };", 0);
	assert_int_equal(count(n, TB_LINT_BLIND), 0);
}

static void test_max_conns_auto(void **state)
{
	size_t n;

	(void)state;
	n = lint("defaults = { deadline = \"1s\";\n max_conns = \"auto\"; gate_shared = true; };", 0);
	assert_int_equal(count(n, TB_LINT_AUTO_SHARED), 1);
	has(first(n, TB_LINT_AUTO_SHARED), "the ceiling 1000");
	n = lint("defaults = { deadline = \"1s\"; max_conns = 30; gate_shared = true; };", 0);
	assert_int_equal(count(n, TB_LINT_AUTO_SHARED), 0);
	n = lint("defaults = { deadline = \"1s\"; max_conns = \"auto\"; max_conns_floor = 50;"
		 " max_conns_ceiling = 40; };", 0);
	assert_int_equal(count(n, TB_LINT_AUTO_BOUNDS), 1);
	has(first(n, TB_LINT_AUTO_BOUNDS), "lower max_conns_floor to 40");
	/* floor and ceiling without auto size nothing: quiet */
	n = lint("defaults = { deadline = \"1s\"; max_conns = 10; max_conns_floor = 50;"
		 " max_conns_ceiling = 40; };", 0);
	assert_int_equal(count(n, TB_LINT_AUTO_BOUNDS), 0);
	/* the adaptive gate is not held to Little's law, and its wait says what it is */
	n = lint("defaults = { max_conns = \"auto\"; expected_rps = 1000;"
		 " expected_p99 = \"1ms\"; };", 0);
	assert_int_equal(count(n, TB_LINT_LITTLE), 0);
	has(first(n, TB_LINT_GATE_WAIT), "max_conns is auto (3 to 1000)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),         cmocka_unit_test(test_no_deadline),
		cmocka_unit_test(test_retries),       cmocka_unit_test(test_phase_sum),
		cmocka_unit_test(test_never_fires),
		cmocka_unit_test(test_dns_never_fires),   cmocka_unit_test(test_gate_wait),
		cmocka_unit_test(test_littles_law),   cmocka_unit_test(test_inbound),
		cmocka_unit_test(test_duration_text),
		cmocka_unit_test(test_request_retries),
		cmocka_unit_test(test_propagate_outside_request),
		cmocka_unit_test(test_breaker_open_max),
		cmocka_unit_test(test_breaker_probes),
		cmocka_unit_test(test_protection_blind_to_stalls),
		cmocka_unit_test(test_max_conns_auto),
		cmocka_unit_test(test_session),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
