/* test_duration.c - tb_duration_parse and tb_duration_format: every accepted form, every
 * refusal with its own sentence, and format/parse round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "duration.h"

static void expect_ok(const char *text, int64_t want)
{
	int64_t got = -12345;
	const char *why = NULL;

	if (tb_duration_parse(text, &got, &why) != 0)
		fail_msg("'%s' refused: %s", text, why);
	if (got != want)
		fail_msg("'%s' gave %lld ns, want %lld", text, (long long)got, (long long)want);
}

/* Returns the sentence, after checking that *out_ns was left untouched. */
static const char *expect_error(const char *text)
{
	int64_t got = -12345;
	const char *why = NULL;

	if (tb_duration_parse(text, &got, &why) == 0)
		fail_msg("'%s' accepted as %lld ns", text, (long long)got);
	assert_int_equal(got, -12345);
	assert_non_null(why);
	assert_true(strlen(why) > 10);
	return why;
}

static void test_units(void **state)
{
	(void)state;
	expect_ok("7ns", 7);
	expect_ok("800us", 800000);
	expect_ok("250ms", 250 * MS);
	expect_ok("3s", 3 * S);
	expect_ok("2m", 120 * S);
	expect_ok("1h", 3600 * S);
	expect_ok("0ms", 0);
	expect_ok("007s", 7 * S);
}

static void test_fractions(void **state)
{
	(void)state;
	expect_ok("1.5s", 1500 * MS);
	expect_ok("0.25ms", 250000);
	expect_ok("0.5m", 30 * S);
	expect_ok("1.25h", 4500 * S);
	expect_ok("1.000000001s", S + 1);
	expect_ok("2.500000000000s", 2500 * MS); /* trailing zeros are exact */
	expect_ok("0.001us", 1);
	/* 0.00000000005m = 3 ns exactly, although the digit sits below the nanosecond place */
	expect_ok("0.00000000005m", 3);
}

static void test_off_and_zero(void **state)
{
	(void)state;
	expect_ok("off", 0);
	expect_ok("0", 0);
	expect_ok("00", 0);
	expect_ok("0.0", 0);
}

static void test_limits(void **state)
{
	(void)state;
	expect_ok("9223372036854775807ns", INT64_MAX);
	expect_ok("9223372036.854775807s", INT64_MAX);
	expect_ok("2562047h", INT64_C(2562047) * 3600 * S);
	expect_ok("153722867m", INT64_C(153722867) * 60 * S);
}

static void test_errors_each_distinct(void **state)
{
	const char *why[] = {
		expect_error(""),                      /* empty */
		expect_error(" 250ms"),                /* blanks */
		expect_error("-5s"),                   /* negative */
		expect_error("abc"),                   /* no number */
		expect_error("250"),                   /* bare number */
		expect_error("1.s"),                   /* fraction without digits */
		expect_error("5sec"),                  /* unknown unit */
		expect_error("1,5s"),                  /* junk after the number */
		expect_error("1s500ms"),               /* junk after the unit */
		expect_error("9223372036854775808ns"), /* overflow */
		expect_error("1.5ns"),                 /* finer than 1 ns */
		expect_error("0000000000000000000000000000000000000000000000000000000000000250ms"),
	};
	size_t n = sizeof(why) / sizeof(why[0]);

	(void)state;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(why[i], why[j]) == 0)
				fail_msg("errors %zu and %zu share '%s'", i, j, why[i]);
	assert_string_equal(why[4], "a duration needs a unit, e.g. 250ms");
}

static void test_errors_by_kind(void **state)
{
	const char *empty = expect_error(""), *blank = expect_error(" 250ms");
	const char *neg = expect_error("-5s"), *nonum = expect_error("abc");
	const char *bare = expect_error("250"), *unit = expect_error("5sec");
	const char *after_unit = expect_error("1s500ms"), *big = expect_error("2562048h");
	const char *subns = expect_error("1.5ns");

	(void)state;
	assert_ptr_equal(expect_error(NULL), empty);
	assert_ptr_equal(expect_error("250ms "), blank);
	assert_ptr_equal(expect_error("2 s"), blank);
	assert_ptr_equal(expect_error("\t1s"), blank);
	assert_ptr_equal(expect_error("   "), blank);
	assert_ptr_equal(expect_error("-0"), neg);
	assert_ptr_equal(expect_error("-"), neg);
	assert_ptr_equal(expect_error("+5s"), nonum);
	assert_ptr_equal(expect_error(".5s"), nonum);
	assert_ptr_equal(expect_error("ms"), nonum);
	assert_ptr_equal(expect_error("OFF"), nonum);
	assert_ptr_equal(expect_error("1.5"), bare);
	assert_ptr_equal(expect_error("1"), bare);
	assert_ptr_equal(expect_error("5S"), unit);
	assert_ptr_equal(expect_error("5MS"), unit);
	assert_ptr_equal(expect_error("3d"), unit);
	assert_ptr_equal(expect_error("5sx"), unit);
	assert_ptr_equal(expect_error("250ms;"), after_unit);
	assert_ptr_equal(expect_error("1s."), after_unit);
	assert_ptr_equal(expect_error("9223372036.854775808s"), big);
	assert_ptr_equal(expect_error("99999999999999999999999999s"), big);
	assert_ptr_equal(expect_error("153722868m"), big);
	assert_ptr_equal(expect_error("0.0000000001s"), subns);
	assert_ptr_equal(expect_error("0.0001us"), subns);
	assert_ptr_equal(expect_error("0.000000000001h"), subns);
}

/* A text of more than 64 characters is refused whatever it spells: the configuration file
 * cannot carry 320 bytes or more, and the environment must not accept what the file refuses
 * (fuzz_config found "000...0.000...ms" of 330 bytes taken from one and refused by the other). */
static void test_long_text(void **state)
{
	char text[400];
	const char *why;

	(void)state;
	memset(text, '0', sizeof(text));
	memcpy(text + 64 - 5, "250ms", 6); /* 64 characters: the longest taken */
	assert_int_equal(strlen(text), 64);
	expect_ok(text, 250 * MS);
	memset(text, '0', sizeof(text));
	memcpy(text + 65 - 5, "250ms", 6);
	why = expect_error(text);
	assert_string_equal(why, "a duration is written in at most 64 characters");
	memset(text, '0', sizeof(text));
	text[1] = '.';
	memcpy(text + 330 - 2, "ms", 3);
	assert_ptr_equal(expect_error(text), why);
	assert_ptr_equal(expect_error("0000000000000000000000000000000000000000000000000000000000000000off"),
			 why);
}

static void expect_format(int64_t ns, const char *want)
{
	char buf[TB_DURATION_TEXT_MAX];

	assert_ptr_equal(tb_duration_format(ns, buf, sizeof(buf)), buf);
	assert_string_equal(buf, want);
}

static void test_format(void **state)
{
	(void)state;
	expect_format(0, "off");
	expect_format(-1, "unset");
	expect_format(1, "1ns");
	expect_format(250 * MS, "250ms");
	expect_format(1500 * MS, "1.5s");
	expect_format(100 * MS, "100ms");
	expect_format(90 * S, "90s");
	expect_format(120 * S, "2m");
	expect_format(3600 * S, "1h");
	expect_format(5400 * S, "90m");
	expect_format(1800 * S, "30m");
	expect_format(150 * 3600 * S, "150h");
	expect_format(6 * S, "6s");
	expect_format(36 * S, "36s");
	expect_format(360 * S, "6m");
	expect_format(250000, "250us");
	expect_format(1500, "1.5us");
	expect_format(S + 1, "1000000001ns");
	expect_format(INT64_MAX, "9223372036854775807ns");
}

static void test_format_truncates(void **state)
{
	char buf[4];

	(void)state;
	tb_duration_format(250 * MS, buf, sizeof(buf));
	assert_string_equal(buf, "250");
	assert_ptr_equal(tb_duration_format(1, buf, 0), buf);
}

static void test_round_trip(void **state)
{
	static const int64_t values[] = {
		1, 999, 1000, 1001, 250 * MS, 1500 * MS, 90 * S, 5400 * S, S + 1,
		INT64_C(123456789012345), INT64_MAX, INT64_MAX - 1, 60 * S - 1,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		char buf[TB_DURATION_TEXT_MAX];

		expect_ok(tb_duration_format(values[i], buf, sizeof(buf)), values[i]);
	}
	/* and text -> value -> the same canonical text */
	expect_format(1500 * MS, "1.5s");
	expect_ok("1.5s", 1500 * MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_units),
		cmocka_unit_test(test_fractions),
		cmocka_unit_test(test_off_and_zero),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_errors_each_distinct),
		cmocka_unit_test(test_errors_by_kind),
		cmocka_unit_test(test_long_text),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_format_truncates),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests_name("duration", tests, NULL, NULL);
}
