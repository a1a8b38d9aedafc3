/* fuzz_duration.c - libFuzzer target for tb_duration_parse and tb_duration_format: the input
 * is a duration's text, checked against a slower reference reading and printed back. */
#include <stdbool.h>

#include "duration.h"
#include "fuzz.h"

#define SENTINEL INT64_C(-7)

/*
 * An independent reading of the documented grammar, in 128-bit arithmetic: DIGITS
 * ["." DIGITS] UNIT, "off", or a bare number whose value is zero; exact or refused; at
 * most INT64_MAX ns, written in at most TB_DURATION_TEXT_LONGEST characters. Returns true
 * and sets *ns when the text is a duration.
 */
static bool reference(const char *s, int64_t *ns)
{
	static const struct {
		const char *name;
		__int128 ns;
	} units[] = { { "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
		      { "m", (__int128)60 * 1000000000 }, { "h", (__int128)3600 * 1000000000 } };
	const char *p = s, *ip, *fp = NULL;
	size_t ilen, flen = 0;
	__int128 whole = 0, frac = 0, pow10 = 1, unit = 0, v;
	bool nonzero = false;

	if (strlen(s) > TB_DURATION_TEXT_LONGEST)
		return false;
	if (strcmp(s, "off") == 0) {
		*ns = 0;
		return true;
	}
	for (ip = p; *p >= '0' && *p <= '9'; p++)
		nonzero |= *p != '0';
	ilen = (size_t)(p - ip);
	if (ilen == 0)
		return false;
	if (*p == '.') {
		for (fp = ++p; *p >= '0' && *p <= '9'; p++)
			nonzero |= *p != '0';
		flen = (size_t)(p - fp);
		if (flen == 0)
			return false;
	}
	if (*p == '\0') { /* no unit: only a zero */
		if (nonzero)
			return false;
		*ns = 0;
		return true;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(p, units[i].name) == 0)
			unit = units[i].ns;
	if (unit == 0)
		return false;
	/* Leading zeros of the whole part and trailing zeros of the fraction change nothing. */
	while (ilen > 1 && *ip == '0')
		ip++, ilen--;
	while (flen > 0 && fp[flen - 1] == '0')
		flen--;
	if (ilen > 20)
		return false; /* above 1e20 of any unit: too long */
	/* A fraction ending in a non-zero digit is a whole number of ns only when 2^flen or
	 * 5^flen divides the unit; no unit (at most 3.6e12 ns) has a factor 2^14 or 5^14. */
	if (flen > 13)
		return false;
	for (size_t i = 0; i < ilen; i++)
		whole = whole * 10 + (ip[i] - '0');
	for (size_t i = 0; i < flen; i++) {
		frac = frac * 10 + (fp[i] - '0');
		pow10 *= 10;
	}
	if (frac * unit % pow10 != 0)
		return false;
	v = whole * unit + frac * unit / pow10;
	if (v > INT64_MAX)
		return false;
	*ns = (int64_t)v;
	return true;
}

/* format(ns) parses back to ns, and a short buffer gets a NUL-terminated prefix of it. */
static void check_format(int64_t ns, size_t short_len)
{
	char full[TB_DURATION_TEXT_MAX], part[TB_DURATION_TEXT_MAX];
	int64_t back = SENTINEL;
	const char *why = NULL;

	memset(full, 'x', sizeof(full));
	tb_duration_format(ns, full, sizeof(full));
	FUZZ_CHECK(memchr(full, '\0', sizeof(full)) != NULL, "%lld: no NUL", (long long)ns);
	FUZZ_CHECK(strlen(full) < sizeof(full) - 1, "%lld: text fills the buffer", (long long)ns);
	if (ns < 0) {
		FUZZ_CHECK(strcmp(full, "unset") == 0, "%lld gave '%s'", (long long)ns, full);
	} else {
		FUZZ_CHECK(tb_duration_parse(full, &back, &why) == 0, "%lld gave '%s': %s",
			   (long long)ns, full, why);
		FUZZ_CHECK(back == ns, "%lld gave '%s', read back as %lld", (long long)ns, full,
			   (long long)back);
	}
	short_len %= sizeof(part);
	if (short_len == 0)
		return;
	memset(part, 'x', sizeof(part));
	tb_duration_format(ns, part, short_len);
	FUZZ_CHECK(memchr(part, '\0', short_len) != NULL, "%lld in %zu bytes: no NUL",
		   (long long)ns, short_len);
	FUZZ_CHECK(strncmp(part, full, strlen(part)) == 0 && part[short_len] == 'x',
		   "%lld in %zu bytes: '%s' is not a prefix of '%s'", (long long)ns, short_len,
		   part, full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	int64_t ns = SENTINEL, want = SENTINEL;
	const char *why = NULL;
	bool ok = tb_duration_parse(text, &ns, &why) == 0;
	bool ref_ok = reference(text, &want);

	FUZZ_CHECK(ok == ref_ok, "'%s': parser says %s (%s), reference says %s", text,
		   ok ? "ok" : "error", ok ? "-" : why, ref_ok ? "ok" : "error");
	if (ok) {
		FUZZ_CHECK(ns == want, "'%s' gave %lld, reference %lld", text, (long long)ns,
			   (long long)want);
		check_format(ns, size);
	} else {
		FUZZ_CHECK(ns == SENTINEL, "'%s' refused but *out_ns changed", text);
		FUZZ_CHECK(why != NULL && strlen(why) > 10, "'%s' refused without a sentence",
			   text);
	}
	/* The input's first 8 bytes as a value: every value prints and reads back. */
	if (size >= 8) {
		int64_t v;

		memcpy(&v, data, sizeof(v));
		check_format(v, size > 8 ? data[8] : 0);
	}
	free(text);
	return 0;
}
