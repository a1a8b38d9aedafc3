/* adaptive.c - Envoy's gradient controller for the gate's size, in integers.
 * Pure code: no clock read here, `now` is the caller's.
 *
 * Why p90 and not Envoy's default p50 (or the mean): a queue shows in the tail first. Against
 * a downstream that serves 8 at a time, a limit of 10 makes 2 calls in 10 wait; the median is
 * still the unqueued latency, so a p50 controller keeps growing until more than half the calls
 * wait, at twice the downstream's capacity. The 90th percentile sees the queue as soon as one
 * call in ten waits. A downstream's own tail (GC, a slow disk) is in minRTT as well, measured
 * with the same percentile, so it does not read as a queue. The comparison with p50, Envoy's
 * unsmoothed step, AIMD and Netflix's Gradient2 (which reads the mean against a long average
 * and, with no minimum to compare with, takes a standing queue for the norm) on the same
 * simulated downstreams is printed by tests/unit/test_adaptive.c.
 */
#include "adaptive.h"

#define G_ONE 1000 /* gradients in thousandths */
#define G_MIN 500
#define G_MAX 2000

void tb_adaptive_cfg_from(struct tb_adaptive_cfg *c, const struct tb_settings *s)
{
	c->floor = s->max_conns_floor > 0 ? s->max_conns_floor : 1;
	if (c->floor > TB_MAX_CONNS_LIMIT)
		c->floor = TB_MAX_CONNS_LIMIT;
	c->ceiling = s->max_conns_ceiling < c->floor ? c->floor
		     : s->max_conns_ceiling > TB_MAX_CONNS_LIMIT ? TB_MAX_CONNS_LIMIT
								 : s->max_conns_ceiling;
	/* Envoy's concurrency_update_interval: often enough to follow a downstream's change
	 * within a second, long enough to hold a few calls of a slow one. */
	c->sample_ns = 100 * TB_NS_PER_MS;
	c->buffer_pct = 10;
	c->min_rtt_every_ns = 30 * TB_NS_PER_S;
	c->min_rtt_samples = 25;
	c->sample_pct = 90;
	c->grow_pct = 20;
}

int64_t tb_adaptive_measure_max(const struct tb_adaptive_cfg *c)
{
	int64_t a = c->min_rtt_every_ns / 10, b = 10 * c->sample_ns;

	return a > b ? a : b;
}

static int clamp_limit(const struct tb_adaptive_cfg *c, int64_t v)
{
	return v < c->floor ? c->floor : v > c->ceiling ? c->ceiling : (int)v;
}

/* The limit from its thousandths, within [floor, ceiling]. */
static void set_milli(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t milli)
{
	int64_t lo = (int64_t)c->floor * 1000, hi = (int64_t)c->ceiling * 1000;

	a->limit_milli = milli < lo ? lo : milli > hi ? hi : milli;
	a->limit = (int32_t)(a->limit_milli / 1000);
}

static void hist_clear(struct tb_adaptive *a)
{
	for (int i = 0; i < TB_ADAPTIVE_BUCKETS; i++) {
		a->hist_n[i] = 0;
		a->hist_sum[i] = 0;
	}
	a->samples = 0;
	a->window_inflight = 0;
}

static int hist_index(int64_t rtt_ns)
{
	uint64_t v = rtt_ns > 0 ? (uint64_t)rtt_ns >> 10 : 0;
	int e, idx;

	if (v < TB_ADAPTIVE_SUB)
		return (int)v;
	e = 63 - __builtin_clzll(v);                 /* v's top bit, >= 2 */
	idx = (e - 1) * TB_ADAPTIVE_SUB + (int)((v >> (e - 2)) & (TB_ADAPTIVE_SUB - 1));
	return idx < TB_ADAPTIVE_BUCKETS ? idx : TB_ADAPTIVE_BUCKETS - 1;
}

static void hist_add(struct tb_adaptive *a, int64_t rtt_ns)
{
	int i = hist_index(rtt_ns);

	if (a->hist_n[i] == UINT32_MAX)
		return;
	a->hist_n[i]++;
	a->hist_sum[i] += rtt_ns > 0 ? (uint64_t)rtt_ns : 0;
	a->samples++;
}

/* The pct-th percentile of the histogram: the mean of the bucket that holds it. */
static int64_t hist_percentile(const struct tb_adaptive *a, int pct)
{
	uint64_t rank = ((uint64_t)a->samples * (uint64_t)pct + 99) / 100, seen = 0;

	if (rank < 1)
		rank = 1;
	for (int i = 0; i < TB_ADAPTIVE_BUCKETS; i++) {
		seen += a->hist_n[i];
		if (a->hist_n[i] && seen >= rank)
			return (int64_t)(a->hist_sum[i] / a->hist_n[i]);
	}
	return 0;
}

static int64_t isqrt(int64_t v)
{
	int64_t r = 0;

	/* Newton's steps from above; no libm in the library, and no floating point state
	 * to read across processes. */
	if (v <= 0)
		return 0;
	r = v;
	for (int64_t x = (r + 1) / 2; x < r; x = (x + v / x) / 2)
		r = x;
	return r;
}

static void window_start(struct tb_adaptive *a, int64_t now)
{
	a->window_start = now;
	hist_clear(a);
}

void tb_adaptive_init(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now)
{
	set_milli(a, c, (int64_t)c->floor * 1000);
	a->saved_limit = clamp_limit(c, TB_ADAPTIVE_INITIAL);
	a->measuring = 1;
	a->min_rtt = 0;
	a->last_sample_rtt = 0;
	a->next_measure = 0;
	a->updates_total = a->measures_total = 0;
	window_start(a, now);
}

int tb_adaptive_limit(const struct tb_adaptive *a)
{
	return a->limit;
}

static void measure_end(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now)
{
	/* The new minRTT replaces the old one, even when longer: a downstream that became
	 * slower for good (a bigger data set, a farther replica) is the new normal, and the
	 * old minimum would read every call as queued. */
	if (a->samples > 0) {
		a->min_rtt = hist_percentile(a, c->sample_pct);
		if (a->min_rtt < 1)
			a->min_rtt = 1;
		a->measures_total++;
	}
	a->measuring = 0;
	set_milli(a, c, (int64_t)a->saved_limit * 1000);
	a->next_measure = now + c->min_rtt_every_ns;
	window_start(a, now);
}

static void measure_start(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now)
{
	a->saved_limit = a->limit;
	set_milli(a, c, (int64_t)c->floor * 1000);
	a->measuring = 1;
	window_start(a, now);
}

/* The window's verdict: Envoy's gradient, clamped so that one window at most halves or
 * doubles the limit, and the square root of the limit as headroom for bursts (and to keep
 * probing upwards while latency stays flat). In thousandths of a call: a limit grows by
 * fractions. A rise is taken at grow_pct (20 %, Gradient2's smoothing) and a fall at once:
 * against a downstream that serves 8, Envoy's full step goes 8 -> 10 -> 7 -> 9 -> 6, half its
 * windows over capacity; the smoothed one spends one window in four or five at 9, and serves
 * ~10 % more calls (test_adaptive.c's table). The price: a recovered downstream gets from 20
 * to 200 in ~5 s instead of ~1 s. Backing off stays as fast as Envoy's (200 to below 20 in
 * 5 windows), for a downstream that falls ill. */
static void window_end(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now)
{
	int64_t rtt = hist_percentile(a, c->sample_pct), g, next, cur = a->limit_milli;

	if (rtt < 1)
		rtt = 1;
	a->last_sample_rtt = rtt;
	g = a->min_rtt * (100 + c->buffer_pct) * (G_ONE / 100) / rtt;
	g = g < G_MIN ? G_MIN : g > G_MAX ? G_MAX : g;
	next = cur * g / G_ONE;
	next += isqrt(next * 1000);
	if (next > cur) {
		/* Netflix's Gradient2 guard: a window that used less than half the limit says
		 * nothing about a larger one. Without it a healthy destination's limit climbs to
		 * the ceiling, and takes many windows to come down when it falls ill. */
		if ((int64_t)a->window_inflight * 2000 < cur)
			next = cur;
		else
			next = cur + (next - cur) * c->grow_pct / 100;
	}
	set_milli(a, c, next);
	a->updates_total++;
	window_start(a, now);
}

static void window_over(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now)
{
	if (now - a->window_start >= c->sample_ns && a->samples >= TB_ADAPTIVE_WINDOW_MIN)
		window_end(a, c, now);
}

/* What time alone decides: a measure that falls due or ends for want of calls, a window
 * that is over. */
static void roll(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now)
{
	if (a->measuring) {
		/* A destination with no calls keeps its floor only so long; a first measure
		 * with none at all waits for them (the floor lets the first calls go). */
		if (now - a->window_start >= tb_adaptive_measure_max(c) &&
		    (a->samples > 0 || a->min_rtt > 0))
			measure_end(a, c, now);
		return;
	}
	if (now >= a->next_measure) {
		measure_start(a, c, now);
		return;
	}
	window_over(a, c, now);
}

bool tb_adaptive_tick(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now)
{
	int32_t before = a->limit;

	roll(a, c, now);
	return a->limit != before;
}

bool tb_adaptive_sample(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now,
			int64_t rtt_ns, int inflight)
{
	int32_t before = a->limit;

	roll(a, c, now);
	if (a->measuring) {
		/* A call sent before the measure began, or that ended with more in flight than
		 * the floor, waited in the queue the measure is there to drain. */
		if (inflight <= a->limit && now - rtt_ns >= a->window_start)
			hist_add(a, rtt_ns);
		if (a->samples >= (uint32_t)c->min_rtt_samples)
			measure_end(a, c, now);
	} else if (now - rtt_ns >= a->window_start) {
		/* A window judges the limit it ran under: a call sent before it began was let
		 * in by the previous limit, and counting it would punish a fall twice (9 -> 7 for
		 * the queue at 9, then 7 -> 6 for the same queue's last calls). */
		hist_add(a, rtt_ns);
		if (inflight > a->window_inflight)
			a->window_inflight = inflight;
		/* The call that completes a window's count past its time ends it. */
		window_over(a, c, now);
	}
	return a->limit != before;
}
