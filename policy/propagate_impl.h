/* propagate_impl.h - what the inbound parser (propagate.c) and the outbound planner
 * (propagate_out.c) share: byte classes, the configured name, the value syntax. */
#ifndef TB_PROPAGATE_IMPL_H
#define TB_PROPAGATE_IMPL_H

#include "propagate.h"

#define NONE UINT32_MAX

#define ENVOY TB_PROP_ENVOY_HEADER /* lower case */
#define ENVOY_LEN (sizeof(ENVOY) - 1)
#define HTTP1 "HTTP/1." /* a request line's version, before its minor digit */

/* RFC 9110's tchar: what a method and a field name are made of. */
static inline bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	switch (c) {
	case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
	case '-': case '.': case '^': case '_': case '`': case '|': case '~':
		return true;
	default:
		return false;
	}
}

static inline unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

static inline bool is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* The configured name's length; 0 when it cannot be a field name (empty, too long, not a
 * token): it then matches nothing and nothing is written. */
static inline unsigned name_len(const char *name)
{
	unsigned i;

	for (i = 0; name[i]; i++)
		if (i >= TB_PROP_HEADER_MAX - 1 || !is_tchar((unsigned char)name[i]))
			return 0;
	return i;
}

/* ---- values: `1000` (ms) or grpc-timeout's `<1..8 digits><H|M|S|m|u|n>` ---- */

enum { V_PRE, V_DIG, V_UNIT, V_POST, V_BAD };

static inline bool is_unit(unsigned char c)
{
	return c == 'H' || c == 'M' || c == 'S' || c == 'm' || c == 'u' || c == 'n';
}

/* One byte of a value (never CR or LF): the value's next state. Leading and trailing
 * whitespace is allowed; a unit only when `units` (the configured header). */
static inline uint8_t value_step(uint8_t vst, unsigned char c, bool units, uint32_t *num,
			  uint8_t *ndig, uint8_t *unit)
{
	switch (vst) {
	case V_PRE:
	case V_DIG:
		if (c >= '0' && c <= '9') {
			if (*ndig >= TB_PROP_DIGITS_MAX)
				return V_BAD; /* absurd, and grpc-timeout's own limit */
			*num = *num * 10 + (uint32_t)(c - '0');
			(*ndig)++;
			return V_DIG;
		}
		if (is_ows(c))
			return vst == V_PRE ? V_PRE : V_POST;
		if (vst == V_DIG && units && is_unit(c)) {
			*unit = c;
			return V_UNIT;
		}
		return V_BAD; /* a sign, a dot, a list, a word */
	case V_UNIT:
	case V_POST:
		return is_ows(c) ? V_POST : V_BAD;
	default:
		return V_BAD;
	}
}

/* A complete value's deadline in ns (capped at TB_PROP_NS_CAP), or -1: malformed/empty. */
static inline int64_t value_ns(uint8_t vst, uint32_t num, uint8_t unit)
{
	int64_t mult;

	if (vst != V_DIG && vst != V_UNIT && vst != V_POST)
		return -1;
	switch (unit) {
	case 'H': mult = INT64_C(3600000000000); break;
	case 'M': mult = INT64_C(60000000000); break;
	case 'S': mult = INT64_C(1000000000); break;
	case 'u': mult = 1000; break;
	case 'n': mult = 1; break;
	default: mult = 1000000; break; /* plain, or 'm' */
	}
	if ((int64_t)num > TB_PROP_NS_CAP / mult)
		return TB_PROP_NS_CAP;
	return (int64_t)num * mult;
}

/* Decimal digits of v into dst (no NUL); returns their count. */
static inline unsigned fmt_u32(char *dst, uint32_t v)
{
	char t[10];
	unsigned n = 0, i;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		dst[i] = t[n - 1 - i];
	return n;
}

#endif
