/* settings.c - defaults and derived values of struct tb_settings.
 * Plain data helpers: no I/O, no allocation, safe in any context. */
#include "settings.h"

#include <errno.h>
#include <string.h>

void tb_settings_init(struct tb_settings *s)
{
	memset(s, 0, sizeof(*s));
	s->first_byte_ns = -1;
	s->dns_ns = -1;
	s->retry_window_ns = -1;
	s->scope = TB_SCOPE_CALL;
	s->on_timeout = TB_ON_TIMEOUT_ETIMEDOUT;
	s->log_target = TB_LOG_STDERR;
	s->log_rate = TB_LOG_RATE_DEFAULT;
	s->stats_interval_ns = TB_STATS_INTERVAL_DEFAULT;
	memcpy(s->deadline_header, TB_PROP_HEADER_DEFAULT, sizeof(TB_PROP_HEADER_DEFAULT));
	s->breaker_failures = s->breaker_rate = -1;
	s->breaker_min_calls = TB_BREAKER_MIN_CALLS_DEFAULT;
	s->breaker_window_ns = TB_BREAKER_WINDOW_DEFAULT;
	s->breaker_open_ns = TB_BREAKER_OPEN_DEFAULT;
	s->breaker_open_max_ns = TB_BREAKER_OPEN_MAX_DEFAULT;
	s->breaker_probes = 1;
	s->breaker_errno = ECONNREFUSED;
	s->breaker_http = TB_BREAKER_HTTP_GATEWAY;
	s->retry_budget_floor = TB_RETRY_BUDGET_FLOOR_DEFAULT;
	s->retry_budget_window_ns = TB_RETRY_BUDGET_WINDOW_DEFAULT;
	s->max_conns_floor = TB_MAX_CONNS_FLOOR_DEFAULT;
	s->max_conns_ceiling = TB_MAX_CONNS_CEILING_DEFAULT;
}

/* RFC 9110 tchar: "!#$%&'*+-.^_`|~", digits and letters. */
static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool tb_settings_header_ok(const char *name)
{
	size_t n = 0;

	for (; name[n] != '\0'; n++)
		if (n >= TB_PROP_HEADER_MAX - 1 || !is_tchar((unsigned char)name[n]))
			return false;
	return n > 0;
}

/*
 * The breaker's switch over its two modes: off wins over any mode's value, whatever layer
 * set it; on gives a mode left unset its anchor's value unless the other mode has one (a
 * mode given alone is what was asked for; one turned off stays off). Leaves the switch at
 * 0, so that finishing again changes nothing.
 */
static void finish_breaker(struct tb_settings *s)
{
	if (s->breaker < 0) {
		s->breaker_failures = s->breaker_rate = 0;
	} else if (s->breaker > 0 && s->breaker_failures <= 0 && s->breaker_rate <= 0) {
		if (s->breaker_failures < 0)
			s->breaker_failures = TB_BREAKER_FAILURES_DEFAULT;
		if (s->breaker_rate < 0)
			s->breaker_rate = TB_BREAKER_RATE_DEFAULT;
	}
	if (s->breaker_failures < 0)
		s->breaker_failures = 0;
	if (s->breaker_rate < 0)
		s->breaker_rate = 0;
	s->breaker = 0;
}

/* The shorter of two limits that are set (> 0), TB_NEVER when neither is. */
static int64_t shortest(int64_t a, int64_t b)
{
	if (a <= 0)
		return b > 0 ? b : TB_NEVER;
	return b > 0 && b < a ? b : a;
}

/*
 * Only first_byte and dns are resolved here. retry_window stays "not set" on purpose: its default
 * follows the deadline, and tb_settings_retry_window() computes it on demand so a later
 * change of the deadline (a per-destination rule) carries the window along.
 */
void tb_settings_finish(struct tb_settings *s)
{
	if (s->first_byte_ns < 0)
		s->first_byte_ns = s->read_ns;
	if (s->dns_ns < 0)
		s->dns_ns = s->connect_ns;
	finish_breaker(s);
	/* The adaptive gate's size moves up to the ceiling: that is the most it holds open. */
	if (s->max_conns_auto)
		s->max_conns = s->max_conns_ceiling;
	if (s->observe) {
		/* Tracked (the statistics need it) but bounded by nothing. The gate stays, at a
		 * size no program reaches, because its leased gauge is the only count of the
		 * connections a program holds open at once: `timebox suggest` sizes max_conns no
		 * lower than that. A shared gate would cost a file per destination: not here. */
		s->dns_ns = s->connect_ns = s->write_ns = 0;
		s->first_byte_ns = s->read_ns = s->deadline_ns = s->acquire_ns = 0;
		s->retry_window_ns = -1;
		s->max_conns = TB_MAX_CONNS_LIMIT;
		s->max_pending = 0;
		s->gate_shared = false;
		s->strict = false;
		/* Never refused: no breaker, no retry budget, and a gate that does not move. */
		s->breaker_failures = s->breaker_rate = 0;
		s->breaker_slow_ns = 0;
		s->retry_budget = 0;
		s->max_conns_auto = false;
	}
	s->protects = tb_settings_breaker_on(s) || tb_settings_retry_budget_on(s) ||
		      s->max_conns_auto;
	s->wait_floor_ns[0] = shortest(s->first_byte_ns, s->read_ns);
	s->wait_floor_ns[1] = shortest(s->write_ns, 0);
}

bool tb_settings_any_limit(const struct tb_settings *s)
{
	return s->dns_ns > 0 || s->connect_ns > 0 || s->write_ns > 0 || s->first_byte_ns > 0 || s->read_ns > 0 ||
	       s->deadline_ns > 0 || s->max_conns > 0 || s->max_conns_auto ||
	       tb_settings_breaker_on(s) || tb_settings_retry_budget_on(s);
}

bool tb_settings_breaker_on(const struct tb_settings *s)
{
	return s->breaker_failures > 0 || s->breaker_rate > 0;
}

bool tb_settings_retry_budget_on(const struct tb_settings *s)
{
	return s->retry_budget > 0;
}

int64_t tb_settings_retry_window(const struct tb_settings *s)
{
	return s->retry_window_ns < 0 ? s->deadline_ns : s->retry_window_ns;
}

/*
 * An unfinished first_byte falls back to read here too, so callers get the same answer
 * before and after tb_settings_finish().
 */
int64_t tb_settings_phase_limit(const struct tb_settings *s, enum tb_phase phase)
{
	switch (phase) {
	case TB_PHASE_CONNECT:
		return s->connect_ns;
	case TB_PHASE_WRITE:
		return s->write_ns;
	case TB_PHASE_FIRST_BYTE:
		return s->first_byte_ns < 0 ? s->read_ns : s->first_byte_ns;
	case TB_PHASE_READ:
		return s->read_ns;
	case TB_PHASE_DEADLINE:
		return s->deadline_ns;
	case TB_PHASE_GATE:
		return s->acquire_ns;
	case TB_PHASE_COUNT:
		break;
	}
	return 0;
}

int64_t tb_settings_min_limit(const struct tb_settings *s)
{
	const int64_t v[] = { s->connect_ns, s->write_ns,
			      tb_settings_phase_limit(s, TB_PHASE_FIRST_BYTE), s->read_ns,
			      s->deadline_ns };
	int64_t m = 0;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (v[i] > 0 && (m == 0 || v[i] < m))
			m = v[i];
	return m;
}

const char *tb_phase_name(enum tb_phase phase)
{
	static const char *const names[TB_PHASE_COUNT] = {
		[TB_PHASE_GATE] = "gate",
		[TB_PHASE_CONNECT] = "connect",
		[TB_PHASE_WRITE] = "write",
		[TB_PHASE_FIRST_BYTE] = "first_byte",
		[TB_PHASE_READ] = "read",
		[TB_PHASE_DEADLINE] = "deadline",
	};

	if ((unsigned)phase >= TB_PHASE_COUNT)
		return "unknown";
	return names[phase];
}
