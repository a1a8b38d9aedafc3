/* plan_protect.c - `timebox plan`'s account of the downstream's protection: the breaker, the
 * retry budget and the adaptive gate of a destination, told in the plan's words. Pure text. */
#include "plan.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "breaker.h"
#include "duration.h"
#include "env.h"

/* The openings the breaker would need to reach its cap, shown before "...". */
#define OPENINGS_SHOWN 3

#define D(ns, b) tb_duration_format((ns), (b), sizeof(b))

/* The n-th consecutive opening's length: min(n x open, open_max), as Envoy grows it. */
static int64_t opening(const struct tb_settings *s, int64_t n)
{
	if (s->breaker_open_ns > 0 && n > s->breaker_open_max_ns / s->breaker_open_ns)
		return s->breaker_open_max_ns;
	return n * s->breaker_open_ns < s->breaker_open_max_ns ? n * s->breaker_open_ns
							       : s->breaker_open_max_ns;
}

/* "30s, 1m, 1m30s, ... up to 5m" or "30s each time" (open_max <= open). */
static void openings_text(const struct tb_settings *s, char *buf, size_t len)
{
	char d[TB_DURATION_TEXT_MAX];
	size_t used = 0;

	if (s->breaker_open_max_ns <= s->breaker_open_ns) {
		snprintf(buf, len, "%s each time", D(s->breaker_open_max_ns, d));
		return;
	}
	buf[0] = '\0';
	for (int64_t n = 1; n <= OPENINGS_SHOWN && used < len; n++) {
		int64_t l = opening(s, n);

		used += (size_t)snprintf(buf + used, len - used, "%s%s", n > 1 ? ", " : "",
					 D(l, d));
		if (l >= s->breaker_open_max_ns)
			return; /* the cap is reached within what is shown */
	}
	if (used < len)
		snprintf(buf + used, len - used, ", ... up to %s", D(s->breaker_open_max_ns, d));
}

static void breaker_line(const struct tb_settings *s, char *line, size_t len)
{
	char when[160], grows[120], d[TB_DURATION_TEXT_MAX];
	const char *err = tb_env_errno_name(s->breaker_errno);
	int probes = s->breaker_probes < TB_BREAKER_PROBES_MAX ? s->breaker_probes : TB_BREAKER_PROBES_MAX;

	if (s->breaker_failures > 0 && s->breaker_rate > 0)
		snprintf(when, sizeof(when), "%d consecutive failures, or %d%% of >= %d calls in %s",
			 s->breaker_failures, s->breaker_rate, s->breaker_min_calls,
			 D(s->breaker_window_ns, d));
	else if (s->breaker_failures > 0)
		snprintf(when, sizeof(when), "%d consecutive failures", s->breaker_failures);
	else
		snprintf(when, sizeof(when), "%d%% failures of >= %d calls in %s", s->breaker_rate,
			 s->breaker_min_calls, D(s->breaker_window_ns, d));
	openings_text(s, grows, sizeof(grows));
	snprintf(line, len,
		 "breaker: opens after %s; then refuses connects at once with %s, nothing sent, "
		 "for %s; then %d probe%s: a success closes it, a failure opens it again",
		 when, err != NULL ? err : "ECONNREFUSED", grows, probes, probes == 1 ? "" : "s");
}

static void failures_line(const struct tb_settings *s, char *line, size_t len)
{
	char d[TB_DURATION_TEXT_MAX], slow[80] = "";
	static const char *const http[] = {
		[TB_BREAKER_HTTP_GATEWAY] = "; HTTP 502, 503, 504",
		[TB_BREAKER_HTTP_5XX] = "; any HTTP 5xx",
		[TB_BREAKER_HTTP_OFF] = "",
	};

	if (s->breaker_slow_ns > 0)
		snprintf(slow, sizeof(slow), "; a first response byte later than %s",
			 D(s->breaker_slow_ns, d));
	snprintf(line, len,
		 "failures: connect refused, unreachable or timed out; reset; every cut "
		 "(a phase limit or the deadline)%s%s",
		 s->breaker_http <= TB_BREAKER_HTTP_OFF ? http[s->breaker_http] : "", slow);
}

static void budget_line(const struct tb_settings *s, char *line, size_t len)
{
	char d[TB_DURATION_TEXT_MAX];
	const char *err = tb_env_errno_name(s->breaker_errno);
	/* the floor over the whole window, as Finagle's minRetriesPerSec x ttl */
	long long floor = (long long)s->retry_budget_floor * (s->retry_budget_window_ns / TB_NS_PER_S);

	snprintf(line, len,
		 "retry budget: a retry (the thread's next connect there within %s of a failure) "
		 "goes while retries stay within %d%% of the first attempts of the last %s, plus "
		 "%d a second (%lld in the window); past it a retry fails at once with %s, "
		 "nothing sent",
		 D(s->retry_budget_window_ns, d), s->retry_budget,
		 D(s->retry_budget_window_ns, d), s->retry_budget_floor, floor,
		 err != NULL ? err : "ECONNREFUSED");
}

static void gate_line(const struct tb_settings *s, char *line, size_t len)
{
	int start = TB_MAX_CONNS_AUTO_START;

	if (start < s->max_conns_floor)
		start = s->max_conns_floor;
	if (start > s->max_conns_ceiling)
		start = s->max_conns_ceiling;
	snprintf(line, len,
		 "gate: sizes itself between %d and %d connections, from %d, as the calls' "
		 "latency says (limit x minRTT x 1.1 / RTT + sqrt(limit)); the plan plays it "
		 "at its ceiling, %d",
		 s->max_conns_floor, s->max_conns_ceiling, start, s->max_conns_ceiling);
}

size_t tb_plan_protection(const struct tb_settings *s, char (*lines)[TB_PLAN_LINE_MAX],
			  size_t max)
{
	char scratch[TB_PLAN_LINE_MAX];
	size_t n = 0;

#define LINE(fn)                                                                   \
	do {                                                                       \
		fn(s, n < max ? lines[n] : scratch, TB_PLAN_LINE_MAX);            \
		n++;                                                               \
	} while (0)
	if (tb_settings_breaker_on(s)) {
		LINE(breaker_line);
		LINE(failures_line);
	}
	if (tb_settings_retry_budget_on(s))
		LINE(budget_line);
	if (s->max_conns_auto)
		LINE(gate_line);
#undef LINE
	return n;
}
