/* breaker.c - the circuit breaker's state machine: what opens it, how long it stays open,
 * who may probe. Pure code: no clock read here, `now` is the caller's. */
#include "breaker.h"

#define OPEN_MIN TB_NS_PER_MS
#define PROBE_TIMEOUT_MIN TB_NS_PER_S

void tb_breaker_cfg_from(struct tb_breaker_cfg *c, const struct tb_settings *s)
{
	c->failures = s->breaker_failures > 0 ? s->breaker_failures : 0;
	c->rate_pct = s->breaker_rate < 0 ? 0 : s->breaker_rate > 100 ? 100 : s->breaker_rate;
	/* A rate over 0 calls divides by nothing: at least one call before it counts. */
	c->min_calls = s->breaker_min_calls > 0 ? s->breaker_min_calls : 1;
	/* Ten buckets of 10 ms at least: below that the "rate" is the last burst's. */
	c->window_ns = s->breaker_window_ns > TB_BREAKER_WINDOW_MIN ? s->breaker_window_ns
								  : TB_BREAKER_WINDOW_MIN;
	/* An opening of 0 would turn half-open at the very next connect: no pause at all. */
	c->open_ns = s->breaker_open_ns > OPEN_MIN ? s->breaker_open_ns : OPEN_MIN;
	/* A cap below the first opening would shorten it (the lint says so): the cap starts there. */
	c->open_max_ns = s->breaker_open_max_ns > c->open_ns ? s->breaker_open_max_ns : c->open_ns;
	c->probes = s->breaker_probes < 1 ? 1
		    : s->breaker_probes > TB_BREAKER_PROBES_MAX ? TB_BREAKER_PROBES_MAX
								 : s->breaker_probes;
	/* A probe's answer may take as long as any call; a second is a floor for short openings,
	 * so that a slow but live probe is not doubled by another. */
	c->probe_timeout_ns = c->open_ns > PROBE_TIMEOUT_MIN ? c->open_ns : PROBE_TIMEOUT_MIN;
}

void tb_breaker_init(struct tb_breaker *b, const struct tb_breaker_cfg *c, int64_t now)
{
	b->state = TB_BREAKER_CLOSED;
	b->consecutive = 0;
	b->openings = 0;
	b->period = 0;
	b->since = now;
	b->open_until = 0;
	for (int i = 0; i < TB_BREAKER_PROBES_MAX; i++)
		b->probe_at[i] = 0;
	tb_window_init(&b->win, c->window_ns);
	b->why_failures = b->why_calls = 0;
	b->why = TB_BREAKER_WHY_NONE;
	b->opened_total = b->refused_total = 0;
}

int64_t tb_breaker_open_len(const struct tb_breaker_cfg *c, uint32_t n)
{
	if (n < 1)
		n = 1;
	/* n * open_ns could pass INT64_MAX long before n does: compare by division. */
	if (c->open_ns > 0 && (int64_t)n > c->open_max_ns / c->open_ns)
		return c->open_max_ns;
	return (int64_t)n * c->open_ns < c->open_max_ns ? (int64_t)n * c->open_ns : c->open_max_ns;
}

/* Every state change starts a new period: the tickets handed out before are stale. */
static void enter(struct tb_breaker *b, uint32_t state, int64_t now)
{
	b->state = state;
	b->period++;
	b->since = now;
	b->consecutive = 0;
	for (int i = 0; i < TB_BREAKER_PROBES_MAX; i++)
		b->probe_at[i] = 0;
}

static void open_for(struct tb_breaker *b, const struct tb_breaker_cfg *c, int64_t now,
		     uint32_t why, uint32_t failures, uint32_t calls)
{
	b->openings++;
	enter(b, TB_BREAKER_OPEN, now);
	b->open_until = now + tb_breaker_open_len(c, b->openings);
	b->why = why;
	b->why_failures = failures;
	b->why_calls = calls;
	b->opened_total++;
}

/* A probe's place is taken from its start; 0 marks a free place, so a clock at 0 is 1. */
static int take_probe(struct tb_breaker *b, const struct tb_breaker_cfg *c, int64_t now)
{
	int free_at = -1;

	for (int i = 0; i < c->probes; i++) {
		/* A probe that never told its outcome: its process died or its socket closed
		 * unused without a forget. Without this, one crash would keep the breaker
		 * half-open and refusing for ever. */
		if (b->probe_at[i] != 0 && now - b->probe_at[i] >= c->probe_timeout_ns)
			b->probe_at[i] = 0;
		if (b->probe_at[i] == 0 && free_at < 0)
			free_at = i;
	}
	if (free_at >= 0)
		b->probe_at[free_at] = now != 0 ? now : 1;
	return free_at;
}

enum tb_breaker_verdict tb_breaker_allow(struct tb_breaker *b, const struct tb_breaker_cfg *c,
					 int64_t now, struct tb_breaker_ticket *t,
					 enum tb_breaker_change *change)
{
	int slot;

	*change = TB_BREAKER_SAME;
	if (b->state == TB_BREAKER_OPEN && now >= b->open_until) {
		enter(b, TB_BREAKER_HALF_OPEN, now);
		*change = TB_BREAKER_HALF_OPENED;
	}
	t->period = b->period;
	t->probe = -1;
	switch (b->state) {
	case TB_BREAKER_CLOSED:
		return TB_BREAKER_PASS;
	case TB_BREAKER_HALF_OPEN:
		slot = take_probe(b, c, now);
		if (slot >= 0) {
			t->probe = (int8_t)slot;
			return TB_BREAKER_PROBE;
		}
		break;
	default:
		break;
	}
	b->refused_total++;
	return TB_BREAKER_REFUSE;
}

/* A closed breaker counts the call and opens when either mode's threshold is reached. The
 * rate is checked after a success too: the call that brings the window to min_calls may be
 * one, and the window's rate is what it is. */
static enum tb_breaker_change count_closed(struct tb_breaker *b, const struct tb_breaker_cfg *c,
					   int64_t now, bool failed)
{
	uint64_t calls, fails;

	tb_window_add(&b->win, now, 1, failed ? 1 : 0);
	if (failed) {
		if (b->consecutive < UINT32_MAX)
			b->consecutive++;
	} else {
		b->consecutive = 0;
	}
	tb_window_sum(&b->win, now, &calls, &fails);
	if (calls > UINT32_MAX)
		calls = UINT32_MAX;
	if (fails > UINT32_MAX)
		fails = UINT32_MAX;
	if (c->failures > 0 && b->consecutive >= (uint32_t)c->failures) {
		/* A run may be longer than the window holds (a slow trickle of failures): the
		 * log line's calls are never fewer than its failures. */
		uint32_t run = b->consecutive;

		open_for(b, c, now, TB_BREAKER_WHY_CONSECUTIVE, run,
			 calls > run ? (uint32_t)calls : run);
		return TB_BREAKER_OPENED;
	}
	if (c->rate_pct > 0 && calls >= (uint64_t)c->min_calls &&
	    fails * 100 >= (uint64_t)c->rate_pct * calls) {
		open_for(b, c, now, TB_BREAKER_WHY_RATE, (uint32_t)fails, (uint32_t)calls);
		return TB_BREAKER_OPENED;
	}
	return TB_BREAKER_SAME;
}

enum tb_breaker_change tb_breaker_record(struct tb_breaker *b, const struct tb_breaker_cfg *c,
					 int64_t now, const struct tb_breaker_ticket *t, bool failed)
{
	if (b->state == TB_BREAKER_CLOSED)
		return count_closed(b, c, now, failed);
	/* Open: every ticket is from before it opened, and the calls it refuses make none.
	 * Half-open: only this period's probes speak; a call let through while it was closed
	 * says how the downstream was then, not now. */
	if (b->state != TB_BREAKER_HALF_OPEN || t->period != b->period || t->probe < 0 ||
	    t->probe >= TB_BREAKER_PROBES_MAX)
		return TB_BREAKER_SAME;
	if (failed) {
		open_for(b, c, now, TB_BREAKER_WHY_PROBE_FAILED, 1, 1);
		return TB_BREAKER_REOPENED;
	}
	b->openings = 0;
	enter(b, TB_BREAKER_CLOSED, now);
	/* The failures that opened it are history: the closed breaker starts from none. */
	tb_window_clear(&b->win);
	b->why = TB_BREAKER_WHY_PROBE_PASSED;
	b->why_failures = 0;
	b->why_calls = 1;
	return TB_BREAKER_RECLOSED;
}

void tb_breaker_forget(struct tb_breaker *b, const struct tb_breaker_ticket *t)
{
	/* A probe that lost its place to the timeout and forgets late may free a later probe's
	 * place: one more probe than asked, once, which the timeout also allows. */
	if (b->state == TB_BREAKER_HALF_OPEN && t->period == b->period && t->probe >= 0 &&
	    t->probe < TB_BREAKER_PROBES_MAX)
		b->probe_at[t->probe] = 0;
}

const char *tb_breaker_state_name(uint32_t state)
{
	switch (state) {
	case TB_BREAKER_CLOSED:
		return "closed";
	case TB_BREAKER_OPEN:
		return "open";
	case TB_BREAKER_HALF_OPEN:
		return "half-open";
	}
	return "?";
}

const char *tb_breaker_reason_name(uint32_t why)
{
	switch (why) {
	case TB_BREAKER_WHY_CONSECUTIVE:
		return "consecutive";
	case TB_BREAKER_WHY_RATE:
		return "rate";
	case TB_BREAKER_WHY_PROBE_FAILED:
		return "probe_failed";
	case TB_BREAKER_WHY_PROBE_PASSED:
		return "probe_passed";
	}
	return "none";
}
