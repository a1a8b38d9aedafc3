/* breaker.h - the circuit breaker of one destination: closed, open, half-open (Envoy's
 * consecutive failures, Hystrix's failure rate over a window, Envoy's growing openings).
 * Pure code: `now` is passed in, no pointer inside (it may live in shared memory between the
 * processes of a pre-fork server); the caller holds the lock around every call. */
#ifndef TB_BREAKER_H
#define TB_BREAKER_H

#include <stdbool.h>
#include <stdint.h>

#include "settings.h"
#include "window.h"

#define TB_BREAKER_PROBES_MAX 16  /* breaker_probes is clamped to this */

struct tb_breaker_cfg {
	int failures;  int rate_pct;  int min_calls;
	int64_t window_ns, open_ns, open_max_ns;
	int probes;
	int64_t probe_timeout_ns; /* a probe with no outcome after this is lost (its process died,
	                             its socket closed unused): its place goes to another */
};

/*
 * The breaker's numbers from a rule's settings: failures and rate_pct (0..100) as set (0 = that
 * mode off), min_calls >= 1, a window of at least TB_BREAKER_WINDOW_MIN, an opening of at least
 * 1 ms and open_max >= open, probes in 1..TB_BREAKER_PROBES_MAX, probe_timeout = max(open, 1 s).
 */
#define TB_BREAKER_WINDOW_MIN (100 * TB_NS_PER_MS)
void tb_breaker_cfg_from(struct tb_breaker_cfg *c, const struct tb_settings *s);

enum tb_breaker_state { TB_BREAKER_CLOSED, TB_BREAKER_OPEN, TB_BREAKER_HALF_OPEN };

/* Why the last change happened, for its log line (reason=...). */
enum tb_breaker_reason { TB_BREAKER_WHY_NONE, TB_BREAKER_WHY_CONSECUTIVE, TB_BREAKER_WHY_RATE,
			 TB_BREAKER_WHY_PROBE_FAILED, TB_BREAKER_WHY_PROBE_PASSED };

struct tb_breaker {
	uint32_t state;        /* enum tb_breaker_state */
	uint32_t consecutive;  /* failures in a row (closed) */
	uint32_t openings;     /* consecutive openings; 0 once it closes */
	uint32_t period;       /* +1 at every state change: a ticket of an older period is stale */
	int64_t since;         /* the current state's start */
	int64_t open_until;    /* open: when it turns half-open */
	int64_t probe_at[TB_BREAKER_PROBES_MAX]; /* half-open: when each probe went; 0 = free */
	struct tb_window win;  /* a = calls, b = failures (rate mode) */
	/* what the last change saw, for its log line */
	uint32_t why_failures, why_calls;
	uint32_t why;          /* enum tb_breaker_reason */
	uint64_t opened_total, refused_total; /* counters */
};

struct tb_breaker_ticket { uint32_t period; int8_t probe; /* probe slot index, -1 none */ };
enum tb_breaker_verdict { TB_BREAKER_PASS, TB_BREAKER_PROBE, TB_BREAKER_REFUSE };
enum tb_breaker_change { TB_BREAKER_SAME, TB_BREAKER_OPENED, TB_BREAKER_HALF_OPENED,
			 TB_BREAKER_RECLOSED, TB_BREAKER_REOPENED };

/* A closed breaker with nothing counted. */
void tb_breaker_init(struct tb_breaker *b, const struct tb_breaker_cfg *c, int64_t now);

/*
 * A connect asks. Closed: PASS. Open before open_until: REFUSE (refused_total + 1). At or past
 * open_until it turns half-open first (*change = TB_BREAKER_HALF_OPENED). Half-open: PROBE
 * while fewer than `probes` probes are out (a probe older than probe_timeout_ns no longer
 * counts), REFUSE otherwise. Fills *t with the period and the probe's slot (-1: not a probe).
 * @unittest test_breaker.c
 */
enum tb_breaker_verdict tb_breaker_allow(struct tb_breaker *b, const struct tb_breaker_cfg *c,
					 int64_t now, struct tb_breaker_ticket *t,
					 enum tb_breaker_change *change);

/*
 * The call of ticket t ended: failed or not. Closed: counts it (window and consecutive count;
 * a success resets the count) and opens on `failures` in a row or on a failure rate of at least
 * rate_pct over >= min_calls calls of the window (TB_BREAKER_OPENED). Half-open, a probe of
 * this period decides: success closes (TB_BREAKER_RECLOSED: openings, window and count to 0),
 * failure reopens for a longer time (TB_BREAKER_REOPENED). A stale ticket (older period)
 * counts in the window and the consecutive count only when closed, never decides half-open.
 * @unittest test_breaker.c
 */
enum tb_breaker_change tb_breaker_record(struct tb_breaker *b, const struct tb_breaker_cfg *c,
					 int64_t now, const struct tb_breaker_ticket *t, bool failed);

/* The ticket's socket ended with no outcome (closed before any answer or failure): a probe's
 * place is given back. Anything else: nothing to do. */
void tb_breaker_forget(struct tb_breaker *b, const struct tb_breaker_ticket *t);

/* The opening's length for the n-th consecutive opening: min(n * open_ns, open_max_ns); n 0
 * counts as the first. */
int64_t tb_breaker_open_len(const struct tb_breaker_cfg *c, uint32_t n);

const char *tb_breaker_state_name(uint32_t state); /* "closed", "open", "half-open" */
/* "consecutive", "rate", "probe_failed", "probe_passed", "none" */
const char *tb_breaker_reason_name(uint32_t why);

#endif
