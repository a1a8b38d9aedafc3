/* duration.c - parsing and printing of human durations ("250ms", "1.5s", "off").
 * Exact integer arithmetic in nanoseconds: no floating point, no locale, no allocation. */
#include "duration.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct unit {
	const char *name;
	int64_t ns;
};

/* Largest first: tb_duration_format writes a value in the largest unit that fits it. */
static const struct unit units[] = {
	{ "h", INT64_C(3600000000000) },
	{ "m", INT64_C(60000000000) },
	{ "s", INT64_C(1000000000) },
	{ "ms", INT64_C(1000000) },
	{ "us", INT64_C(1000) },
	{ "ns", INT64_C(1) },
};
#define N_UNITS (sizeof(units) / sizeof(units[0]))
#define SECOND_NS INT64_C(1000000000) /* the largest unit written with a decimal */

/* One sentence per mistake, so a user (and a test) can tell them apart. */
static const char E_EMPTY[] = "a duration is empty; write e.g. 250ms, or off";
static const char E_BLANK[] = "a duration must not contain blanks";
static const char E_NEGATIVE[] = "a duration cannot be negative";
static const char E_NOT_NUMBER[] = "a duration starts with a digit, e.g. 0.5s";
static const char E_NO_UNIT[] = "a duration needs a unit, e.g. 250ms";
static const char E_FRACTION[] = "a fraction needs digits after the point, e.g. 1.5s";
static const char E_UNIT[] = "unknown unit; use ns, us, ms, s, m or h";
static const char E_AFTER_NUMBER[] = "unexpected character after the number, e.g. 1.5s not 1,5s";
static const char E_AFTER_UNIT[] =
	"unexpected characters after the unit; write one number and one unit, e.g. 1500ms";
static const char E_TOO_LONG[] = "a duration is too long; the longest is 2562047h";
static const char E_SUB_NS[] = "a duration cannot be finer than 1ns";
static const char E_TEXT_LONG[] = "a duration is written in at most 64 characters";

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_letter(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The unit spelled by the `len` bytes at `s`, or NULL. */
static const struct unit *find_unit(const char *s, size_t len)
{
	for (size_t i = 0; i < N_UNITS; i++)
		if (strlen(units[i].name) == len && memcmp(units[i].name, s, len) == 0)
			return &units[i];
	return NULL;
}

/*
 * The fraction digits `frac` (len digits) times `unit_ns`, in whole nanoseconds.
 * Returns -1 when the product is not a whole number: we refuse sub-nanosecond precision
 * rather than round it, so that every accepted text means exactly one value. Horner's rule
 * from the last digit keeps the exact value as an integer y (the result times 10); once a
 * division by ten leaves a remainder the sum can never become whole again, so that is the
 * only test needed. y stays below 10 * unit_ns, far from overflow.
 */
static int64_t fraction_ns(const char *frac, size_t len, int64_t unit_ns)
{
	int64_t y = 0;

	for (size_t i = len; i-- > 0;) {
		if (y % 10 != 0)
			return -1;
		y = (frac[i] - '0') * unit_ns + y / 10;
	}
	if (y % 10 != 0)
		return -1;
	return y / 10;
}

/*
 * Grammar: DIGITS [ "." DIGITS ] UNIT, or "off"; a number whose value is zero may omit
 * the unit ("0"). Every other text gets the most specific sentence we can give.
 */
int tb_duration_parse(const char *text, int64_t *out_ns, const char **why)
{
	const char *p, *int_start, *frac_start = NULL, *unit_start;
	size_t int_len, frac_len = 0, unit_len;
	const struct unit *unit;
	int64_t whole = 0, frac;
	bool zero = true;

	if (text == NULL || text[0] == '\0') {
		*why = E_EMPTY;
		return -1;
	}
	for (p = text; *p != '\0'; p++) {
		if (is_blank(*p)) {
			*why = E_BLANK;
			return -1;
		}
	}
	/* The same value must mean the same thing from every source: the configuration file
	 * refuses any text of 320 bytes or more, the environment has no such bound, so without
	 * one here "000...0250ms" of 330 bytes was a limit in TIMEBOX_READ_TIMEOUT and an error
	 * in the file. No real duration needs more than "2562047h" or "0.000000001s". */
	if ((size_t)(p - text) > TB_DURATION_TEXT_LONGEST) {
		*why = E_TEXT_LONG;
		return -1;
	}
	if (strcmp(text, "off") == 0) {
		*out_ns = 0;
		return 0;
	}
	if (text[0] == '-') {
		*why = E_NEGATIVE;
		return -1;
	}
	if (!is_digit(text[0])) {
		*why = E_NOT_NUMBER;
		return -1;
	}

	for (p = int_start = text; is_digit(*p); p++)
		zero = zero && *p == '0';
	int_len = (size_t)(p - int_start);
	if (*p == '.') {
		frac_start = ++p;
		for (; is_digit(*p); p++)
			zero = zero && *p == '0';
		frac_len = (size_t)(p - frac_start);
		if (frac_len == 0) {
			*why = E_FRACTION;
			return -1;
		}
	}
	for (unit_start = p; is_letter(*p); p++)
		;
	unit_len = (size_t)(p - unit_start);

	if (unit_len == 0) {
		if (*p != '\0') {
			*why = E_AFTER_NUMBER;
			return -1;
		}
		if (!zero) {
			*why = E_NO_UNIT;
			return -1;
		}
		*out_ns = 0;
		return 0;
	}
	unit = find_unit(unit_start, unit_len);
	if (unit == NULL) {
		*why = E_UNIT;
		return -1;
	}
	if (*p != '\0') {
		*why = E_AFTER_UNIT;
		return -1;
	}

	frac = fraction_ns(frac_start, frac_len, unit->ns);
	if (frac < 0) {
		*why = E_SUB_NS;
		return -1;
	}
	for (size_t i = 0; i < int_len; i++) {
		int d = int_start[i] - '0';

		if (whole > (INT64_MAX - d) / 10) {
			*why = E_TOO_LONG;
			return -1;
		}
		whole = whole * 10 + d;
	}
	if (whole > INT64_MAX / unit->ns || whole * unit->ns > INT64_MAX - frac) {
		*why = E_TOO_LONG;
		return -1;
	}
	*out_ns = whole * unit->ns + frac;
	return 0;
}

/*
 * How an operator would write `ns`: a whole number of the largest unit that divides it
 * ("2m", "250ms", "90s"); else one decimal of a unit from seconds down, when the value is
 * at least one of it ("1.5s", "2.5ms", "1.5us"); else nanoseconds. "1.25s" is written
 * "1250ms" and "0.1s" "100ms": a number with more than one decimal, or below one, reads
 * worse than the next unit down. Every text is exact, so tb_duration_parse reads it back
 * to the same value. 0 gives "off" and a negative value (the settings' "not set") "unset".
 */
char *tb_duration_format(int64_t ns, char *buf, size_t len)
{
	if (len == 0)
		return buf;
	if (ns == 0) {
		snprintf(buf, len, "off");
		return buf;
	}
	if (ns < 0) {
		snprintf(buf, len, "unset");
		return buf;
	}
	for (size_t i = 0; i < N_UNITS; i++) {
		const struct unit *u = &units[i];
		int64_t rem = ns % u->ns;

		if (rem == 0) {
			snprintf(buf, len, "%lld%s", (long long)(ns / u->ns), u->name);
			return buf;
		}
		/* rem < u->ns <= 3.6e12: rem * 10 cannot overflow. */
		if (u->ns <= SECOND_NS && ns > u->ns && rem * 10 % u->ns == 0) {
			snprintf(buf, len, "%lld.%lld%s", (long long)(ns / u->ns),
				 (long long)(rem * 10 / u->ns), u->name);
			return buf;
		}
	}
	return buf; /* not reached: every value is a whole number of ns */
}
