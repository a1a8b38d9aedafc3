/* env_value.c - the values of TIMEBOX_* variables that are whole numbers (counts,
 * percentages) or names of a closed set (errnos, breaker_http), and the gate's size. */
#include <errno.h>
#include <string.h>

#include "duration.h"
#include "env.h"
#include "env_impl.h"

static const char E_COUNT[] = "a count is a whole number from 1 to 1000000, or 0/off for none";
static const char E_GATE_SIZE[] =
	"a gate's size is a whole number from 1 to 1000000, auto, or 0/off for none";
static const char E_PERIOD[] = "this setting cannot be off: give a duration longer than 0";
static const char E_POSITIVE[] = "a whole number from 1 to 1000000";
static const char E_NUMBER[] = "a whole number from 0 to 1000000";
static const char E_PERCENT[] =
	"a percentage is a whole number from 1 to 100 (\"50%\" or 50), or 0/off for none";
static const char E_SHARE[] =
	"a share is a whole percentage from 1 to 1000 (\"20%\" or 20), or 0/off for none";
static const char E_ERRNO[] =
	"an errno is ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, EAGAIN or ECONNRESET";
static const char E_BREAKER_HTTP[] = "breaker_http is gateway (502, 503, 504), 5xx or off";

/* The errnos a refused connect may report: each is one that clients already read as "that
 * destination is down, try another" (docs/breaker.md). */
static const struct {
	const char *name, *lower;
	int err;
} errnos[] = {
	{ "ECONNREFUSED", "econnrefused", ECONNREFUSED }, { "ETIMEDOUT", "etimedout", ETIMEDOUT },
	{ "EHOSTUNREACH", "ehostunreach", EHOSTUNREACH }, { "ENETUNREACH", "enetunreach", ENETUNREACH },
	{ "EAGAIN", "eagain", EAGAIN },                   { "ECONNRESET", "econnreset", ECONNRESET },
};

static const char *const breaker_http_names[] = {
	[TB_BREAKER_HTTP_GATEWAY] = "gateway",
	[TB_BREAKER_HTTP_5XX] = "5xx",
	[TB_BREAKER_HTTP_OFF] = "off",
};

const char *tb_env_errno_name(int err)
{
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].err == err)
			return errnos[i].name;
	return NULL;
}

const char *tb_env_breaker_http_name(unsigned kind)
{
	return kind <= TB_BREAKER_HTTP_OFF ? breaker_http_names[kind] : "?";
}

/* A whole number 1..max, or "0"/"off" for none. Returns 0 or -1. */
static int parse_upto(const char *text, long max, int *out)
{
	long v = 0;

	if (strcmp(text, "off") == 0 || strcmp(text, "0") == 0) {
		*out = 0;
		return 0;
	}
	if (*text < '1' || *text > '9')
		return -1;
	for (; *text >= '0' && *text <= '9'; text++) {
		v = v * 10 + (*text - '0');
		if (v > max)
			return -1;
	}
	if (*text != '\0')
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_count(const char *text, int *out)
{
	return parse_upto(text, TB_MAX_CONNS_LIMIT, out);
}

/* "50%" or "50" (a percentage up to max), or "0"/"off" for none. Returns 0 or -1. */
static int parse_percent(const char *text, long max, int *out)
{
	char digits[16];
	size_t len = strlen(text);

	if (len == 0 || len >= sizeof(digits))
		return -1;
	memcpy(digits, text, len + 1);
	if (digits[len - 1] == '%') {
		digits[len - 1] = '\0';
		if (strcmp(digits, "off") == 0)
			return -1; /* "off%" is neither */
	}
	return parse_upto(digits, max, out);
}

/* An errno name of the table, all capitals or all lower case. Returns 0 or -1. */
static int parse_errno(const char *text, int *out)
{
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (strcmp(text, errnos[i].name) == 0 || strcmp(text, errnos[i].lower) == 0) {
			*out = errnos[i].err;
			return 0;
		}
	return -1;
}

/* The kinds of whole numbers: a count (0/off none), 1.., 0.., a percentage, a share. */
const char *tb_env_apply_whole(int *field, enum tb_env_kind kind, const char *value)
{
	int n;

	switch (kind) {
	case TB_ENV_COUNT:
		return parse_count(value, &n) == 0 ? (*field = n, NULL) : E_COUNT;
	case TB_ENV_POSITIVE:
		return parse_count(value, &n) == 0 && n >= 1 ? (*field = n, NULL) : E_POSITIVE;
	case TB_ENV_NUMBER:
		return parse_count(value, &n) == 0 ? (*field = n, NULL) : E_NUMBER;
	case TB_ENV_PERCENT:
		return parse_percent(value, 100, &n) == 0 ? (*field = n, NULL) : E_PERCENT;
	case TB_ENV_SHARE:
		return parse_percent(value, 1000, &n) == 0 ? (*field = n, NULL) : E_SHARE;
	default:
		return "internal error: not a number setting";
	}
}

const char *tb_env_apply_value(struct tb_settings *s, const struct tb_env_var *var,
			       const char *value)
{
	const char *why = NULL;
	int64_t ns;

	switch (var->kind) {
	case TB_ENV_GATE_SIZE: {
		int *field = tb_env_member(s, var, TB_ENV_GATE_SIZE), n;

		if (field == NULL) {
			why = "internal error: no setting for this variable";
		} else if (strcmp(value, "auto") == 0) {
			s->max_conns_auto = true;
			*field = s->max_conns_ceiling; /* tb_settings_finish does it again */
		} else if (parse_count(value, &n) == 0) {
			s->max_conns_auto = false;
			*field = n;
		} else {
			why = E_GATE_SIZE;
		}
		return why;
	}
	case TB_ENV_PERIOD: {
		int64_t *field = tb_env_member(s, var, TB_ENV_PERIOD);

		if (field == NULL)
			why = "internal error: no setting for this variable";
		else if (tb_duration_parse(value, &ns, &why) < 0)
			return why;
		else if (ns <= 0)
			why = E_PERIOD;
		else
			*field = ns;
		return why;
	}
	case TB_ENV_ERRNO: {
		int e;

		if (parse_errno(value, &e) == 0)
			s->breaker_errno = e;
		else
			why = E_ERRNO;
		return why;
	}
	case TB_ENV_BREAKER_HTTP:
		why = E_BREAKER_HTTP;
		for (unsigned k = 0; k <= TB_BREAKER_HTTP_OFF; k++)
			if (strcmp(value, breaker_http_names[k]) == 0) {
				s->breaker_http = (uint8_t)k;
				why = NULL;
			}
		return why;
	default:
		return "internal error: not a value of this kind";
	}
}
