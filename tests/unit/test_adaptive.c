/* test_adaptive.c - the gate that sizes itself: the gradient controller's arithmetic, its
 * minRTT re-measure, its floor and ceiling, and its convergence on simulated downstreams (one
 * that serves 8 at a time, one that is fast and wide), against a fixed gate and against the
 * other algorithms tried (Envoy's default p50, AIMD, Netflix's Gradient2): the comparison the
 * issue asks for is printed by test_compare_algorithms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "unit.h"

#include "adaptive.h"

static struct tb_adaptive_cfg cfg(int floor, int ceiling)
{
	struct tb_settings s;
	struct tb_adaptive_cfg c;

	tb_settings_init(&s);
	s.max_conns_floor = floor;
	s.max_conns_ceiling = ceiling;
	tb_adaptive_cfg_from(&c, &s);
	return c;
}

/* n calls of rtt each, ending at `now` with `inflight` in flight. */
static void samples(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now, int n,
		    int64_t rtt, int inflight)
{
	for (int i = 0; i < n; i++)
		tb_adaptive_sample(a, c, now, rtt, inflight);
}

/* One window: n calls sent at *now (after the window began) answered rtt later, then time up
 * to the window's end; *now moves there. Returns whether the limit (in thousandths) changed. */
static bool window(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t *now, int n,
		   int64_t rtt, int inflight)
{
	int64_t end = a->window_start + c->sample_ns, before = a->limit_milli;

	if (*now < a->window_start)
		*now = a->window_start;
	samples(a, c, *now + rtt, n, rtt, inflight);
	if (end < *now + rtt)
		end = *now + rtt;
	tb_adaptive_tick(a, c, end);
	*now = end;
	return a->limit_milli != before;
}

/* Through the first measure: 25 calls of `rtt` at the floor, sent at `now`. */
static void measured(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now,
		     int64_t rtt)
{
	tb_adaptive_init(a, c, now);
	assert_true(a->measuring);
	assert_int_equal(tb_adaptive_limit(a), c->floor);
	samples(a, c, now + rtt, c->min_rtt_samples - 1, rtt, c->floor);
	assert_true(a->measuring);
	assert_true(tb_adaptive_sample(a, c, now + rtt, rtt, c->floor));
	assert_false(a->measuring);
}

static void test_first_measure_then_initial_limit(void **state)
{
	struct tb_adaptive_cfg c = cfg(1, 1000);
	struct tb_adaptive a;

	(void)state;
	measured(&a, &c, T0, 10 * MS);
	assert_int_equal(tb_adaptive_limit(&a), TB_ADAPTIVE_INITIAL);
	/* The bucket's mean: exact for equal values. */
	assert_int_equal(a.min_rtt, 10 * MS);
	assert_int_equal(a.measures_total, 1);
}

static void test_gradient_arithmetic(void **state)
{
	struct tb_adaptive_cfg c = cfg(1, 1000);
	struct tb_adaptive a;
	int64_t now = T0;

	(void)state;
	measured(&a, &c, now, 10 * MS);
	/* A window at twice minRTT x 1.1: gradient 0.5, 20 -> 10 + sqrt(10) = 13.16, a fall
	 * taken whole. */
	samples(&a, &c, a.window_start + 22 * MS, 20, 22 * MS, 20);
	assert_int_equal(tb_adaptive_limit(&a), 20); /* the window is not over */
	assert_true(tb_adaptive_tick(&a, &c, a.window_start + 100 * MS));
	assert_int_equal(a.limit_milli, 13162);
	assert_int_equal(tb_adaptive_limit(&a), 13);
	assert_int_equal(a.last_sample_rtt, 22 * MS);
	/* A window at minRTT: gradient 1.1 (the buffer), 13.16 -> 14.48 + 3.81 = 18.28, of
	 * which a rise takes 20 %: 14.19. */
	assert_true(window(&a, &c, &now, 20, 10 * MS, 13));
	assert_int_equal(a.limit_milli, 14186);
	/* Ten times minRTT: the gradient stops at 0.5 (14.19 -> 7.09 + 2.66). */
	assert_true(window(&a, &c, &now, 20, 100 * MS, 14));
	assert_int_equal(a.limit_milli, 9756);
	/* Calls sent before the window began were let in by the previous limit: not counted. */
	samples(&a, &c, now + 20 * MS, 50, 30 * MS, 9);
	assert_int_equal(a.samples, 0);
	/* Fewer calls than TB_ADAPTIVE_WINDOW_MIN: the window waits for more; the call that
	 * completes the count ends it. */
	samples(&a, &c, now + 10 * MS, TB_ADAPTIVE_WINDOW_MIN - 1, 10 * MS, 10);
	assert_false(tb_adaptive_tick(&a, &c, now + 500 * MS));
	assert_true(tb_adaptive_sample(&a, &c, now + 500 * MS, 10 * MS, 10));
	assert_int_equal(a.limit_milli, 10606);
	assert_int_equal(a.updates_total, 4);
}

static void test_sample_is_p90(void **state)
{
	struct tb_adaptive_cfg c = cfg(1, 1000);
	struct tb_adaptive a;
	int64_t now = T0;

	(void)state;
	measured(&a, &c, now, 10 * MS);
	now = a.window_start;
	samples(&a, &c, now + 20 * MS, 80, 10 * MS, 20);
	samples(&a, &c, now + 20 * MS, 20, 20 * MS, 20);
	tb_adaptive_tick(&a, &c, now + 100 * MS);
	assert_int_equal(a.last_sample_rtt, 20 * MS);
	assert_true(tb_adaptive_limit(&a) < 20);
}

static void test_unused_limit_does_not_grow(void **state)
{
	struct tb_adaptive_cfg c = cfg(1, 1000);
	struct tb_adaptive a;
	int64_t now = T0;

	(void)state;
	measured(&a, &c, now, 10 * MS);
	/* 9 in flight under a limit of 20: no news about 25. */
	assert_false(window(&a, &c, &now, 50, 10 * MS, 9));
	assert_int_equal(tb_adaptive_limit(&a), 20);
	assert_int_equal(a.updates_total, 1);
	assert_true(window(&a, &c, &now, 50, 10 * MS, 10));
	assert_true(tb_adaptive_limit(&a) > 20);
}

static void test_remeasure_restores(void **state)
{
	struct tb_adaptive_cfg c = cfg(2, 1000);
	struct tb_adaptive a;
	int64_t now = T0, due;
	int before;

	(void)state;
	measured(&a, &c, now, 10 * MS);
	due = a.next_measure;
	assert_int_equal(due, T0 + 10 * MS + c.min_rtt_every_ns);
	for (int i = 0; i < 30; i++)
		window(&a, &c, &now, 50, 10 * MS, tb_adaptive_limit(&a));
	before = tb_adaptive_limit(&a);
	assert_true(before > 40);
	assert_false(tb_adaptive_tick(&a, &c, due - 1) && a.measuring);
	before = tb_adaptive_limit(&a);
	assert_true(tb_adaptive_tick(&a, &c, due));
	assert_true(a.measuring);
	assert_int_equal(tb_adaptive_limit(&a), 2);
	/* Calls that started before the drop: not counted, whatever in flight. */
	samples(&a, &c, due + MS, 100, 80 * MS, 30);
	samples(&a, &c, due + MS, 100, 80 * MS, 1);
	assert_true(a.measuring);
	assert_int_equal(a.samples, 0);
	/* Nor calls that end with more in flight than the floor. */
	samples(&a, &c, due + 20 * MS, 10, 15 * MS, 3);
	assert_int_equal(a.samples, 0);
	/* The downstream became slower for good: the new minRTT replaces the old. */
	samples(&a, &c, due + 20 * MS, c.min_rtt_samples - 1, 15 * MS, 2);
	assert_true(tb_adaptive_sample(&a, &c, due + 20 * MS, 15 * MS, 1));
	assert_false(a.measuring);
	assert_int_equal(tb_adaptive_limit(&a), before);
	assert_int_equal(a.min_rtt, 15 * MS);
	assert_int_equal(a.measures_total, 2);
	assert_int_equal(a.next_measure, due + 20 * MS + c.min_rtt_every_ns);
}

/* A destination that goes quiet during a re-measure does not keep its floor for ever. */
static void test_remeasure_without_calls_ends(void **state)
{
	struct tb_adaptive_cfg c = cfg(1, 1000);
	struct tb_adaptive a;
	int64_t due;

	(void)state;
	measured(&a, &c, T0, 10 * MS);
	due = a.next_measure;
	tb_adaptive_tick(&a, &c, due);
	assert_true(a.measuring);
	assert_false(tb_adaptive_tick(&a, &c, due + tb_adaptive_measure_max(&c) - 1));
	assert_true(tb_adaptive_tick(&a, &c, due + tb_adaptive_measure_max(&c)));
	assert_false(a.measuring);
	assert_int_equal(tb_adaptive_limit(&a), 20);
	assert_int_equal(a.min_rtt, 10 * MS);
	/* The very first measure, with no calls at all, waits: there is no minRTT to use. */
	tb_adaptive_init(&a, &c, T0);
	assert_false(tb_adaptive_tick(&a, &c, T0 + 100 * S));
	assert_true(a.measuring);
}

static void test_floor_and_ceiling_hold(void **state)
{
	struct tb_adaptive_cfg c = cfg(4, 30);
	struct tb_adaptive a;
	int64_t now = T0;

	(void)state;
	measured(&a, &c, now, 10 * MS);
	/* Within the 30 s before the re-measure, which would take 1 s as the new normal. */
	for (int i = 0; i < 20; i++) {
		window(&a, &c, &now, 20, 1 * S, tb_adaptive_limit(&a));
		assert_true(tb_adaptive_limit(&a) >= 4);
	}
	assert_int_equal(tb_adaptive_limit(&a), 4);
	for (int i = 0; i < 200; i++) {
		window(&a, &c, &now, 20, 1 * MS, tb_adaptive_limit(&a));
		assert_true(tb_adaptive_limit(&a) <= 30);
	}
	assert_int_equal(tb_adaptive_limit(&a), 30);

	c = cfg(0, -5);
	assert_int_equal(c.floor, 1);
	assert_int_equal(c.ceiling, 1);
	c = cfg(50, 10);
	assert_int_equal(c.ceiling, 50);
	c = cfg(1, 5);
	tb_adaptive_init(&a, &c, T0);
	assert_int_equal(a.saved_limit, 5); /* the initial 20, clamped */
}

/* Windows a controller takes to climb from 20 to 200 on a flat latency (every slot used),
 * then to fall below 20 when the latency goes 10x. */
static void follow(int grow, int *up, int *down)
{
	struct tb_adaptive_cfg c = cfg(1, 1000);
	struct tb_adaptive a;
	int64_t now = T0;

	c.grow_pct = grow;
	measured(&a, &c, now, 10 * MS);
	for (*up = 0; tb_adaptive_limit(&a) < 200 && *up < 1000; ++*up)
		window(&a, &c, &now, 20, 10 * MS, tb_adaptive_limit(&a));
	for (*down = 0; tb_adaptive_limit(&a) >= 20 && *down < 1000; ++*down)
		window(&a, &c, &now, 20, 100 * MS, tb_adaptive_limit(&a));
}

/* The smoothed rise's price: a recovered downstream gets its concurrency back in seconds,
 * not in a second; the fall stays Envoy's. */
static void test_follows_the_downstream(void **state)
{
	int up, down, envoy_up, envoy_down;

	(void)state;
	follow(20, &up, &down);
	follow(100, &envoy_up, &envoy_down);
	printf("windows of 100 ms from 20 to 200: %d (Envoy's full step %d); from 200 to below 20 "
	       "at 10x the latency: %d (%d)\n", up, envoy_up, down, envoy_down);
	assert_true(down <= 10);
	assert_true(down <= envoy_down + 1);
	assert_true(up <= 100);
}

/* ---- the simulation ---- */

enum model { SICK8, SICK8_FIFO, HEALTHY };

#define CLIENTS 50
#define SIM_LEN (120 * S)
#define STEADY_FROM (20 * S)

static uint64_t rng = 88172645463325252ull;

static double jitter(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return 0.9 + 0.2 * (double)(rng >> 11) / (double)(1ull << 53);
}

/* A controller under test: the kept one through policy/adaptive.c, the others here. */
struct ctl {
	const char *name;
	struct tb_adaptive a;
	struct tb_adaptive_cfg c;
	int fixed; /* > 0: a fixed gate of this size */
	int kind;  /* 0 gradient (adaptive.c), 1 AIMD, 2 Gradient2 */
	double est, long_rtt; /* AIMD, Gradient2 */
	int64_t min_rtt, win_start;
	int64_t win[8192];
	int win_n, win_inflight;
};

static int ctl_limit(const struct ctl *k)
{
	if (k->fixed)
		return k->fixed;
	if (k->kind == 0)
		return tb_adaptive_limit(&k->a);
	return (int)k->est;
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return a < b ? -1 : a > b;
}

/* A window's verdict for AIMD (p90 against twice the lowest call seen) and Gradient2 (the
 * mean against a long average, Netflix's defaults: tolerance 1.5, queue 4, smoothing 0.2). */
static void other_window(struct ctl *k, int64_t now)
{
	double sample;

	if (k->win_n < TB_ADAPTIVE_WINDOW_MIN || now - k->win_start < 100 * MS)
		return;
	if (k->kind == 1) {
		qsort(k->win, (size_t)k->win_n, sizeof(k->win[0]), cmp_i64);
		sample = (double)k->win[(k->win_n * 9 + 9) / 10 - 1];
		if (sample > 2.0 * (double)k->min_rtt)
			k->est = k->est * 0.9;
		else if (k->win_inflight * 2 >= (int)k->est)
			k->est += 1;
	} else {
		double sum = 0, g, next;

		for (int i = 0; i < k->win_n; i++)
			sum += (double)k->win[i];
		sample = sum / k->win_n;
		if (k->long_rtt == 0)
			k->long_rtt = sample;
		else
			k->long_rtt = k->long_rtt * (1 - 2.0 / 601) + sample * 2.0 / 601;
		if (k->long_rtt / sample > 2)
			k->long_rtt *= 0.95;
		if (k->win_inflight * 2 >= (int)k->est) {
			g = 1.5 * k->long_rtt / sample;
			g = g < 0.5 ? 0.5 : g > 1.0 ? 1.0 : g;
			next = k->est * g + 4;
			k->est = k->est * 0.8 + next * 0.2;
		}
	}
	if (k->est < k->c.floor)
		k->est = k->c.floor;
	if (k->est > k->c.ceiling)
		k->est = k->c.ceiling;
	k->win_n = 0;
	k->win_inflight = 0;
	k->win_start = now;
}

static void ctl_sample(struct ctl *k, int64_t now, int64_t rtt, int inflight)
{
	if (k->fixed)
		return;
	if (k->kind == 0) {
		tb_adaptive_sample(&k->a, &k->c, now, rtt, inflight);
		return;
	}
	if (k->min_rtt == 0 || rtt < k->min_rtt)
		k->min_rtt = rtt;
	if (k->win_n < 8192)
		k->win[k->win_n++] = rtt;
	if (inflight > k->win_inflight)
		k->win_inflight = inflight;
	other_window(k, now);
}

static void ctl_tick(struct ctl *k, int64_t now)
{
	if (!k->fixed && k->kind == 0)
		tb_adaptive_tick(&k->a, &k->c, now);
}

struct result {
	double limit_med, limit_min, inflight_avg;
	int64_t rtt_p99, caller_p99;
	uint64_t calls;
	int limit_low_unmeasured; /* the lowest limit outside minRTT measures, after warm-up */
	double measuring_share;
};

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* The downstream's latency for a call sent with `inflight` in flight (itself included). */
static int64_t latency(enum model m, int inflight, int64_t base)
{
	int per = m == HEALTHY ? 200 : 8;
	int64_t waves = (inflight + per - 1) / per;

	return (int64_t)((double)(base * (m == HEALTHY ? 1 : waves)) * jitter()) +
	       (m == HEALTHY && waves > 1 ? base * waves : 0);
}

/*
 * 50 clients in a closed loop (each sends its next call when the last one answered) through a
 * gate whose size the controller sets, waiting in arrival order, for SIM_LEN. SICK8: latency
 * is base x ceil(inflight / 8) (it serves 8 at a time: each 8 more in flight add a base);
 * SICK8_FIFO: 8 workers and a queue in front; HEALTHY: flat up to 200 in flight. +/-10 %
 * jitter on every call. Measured from STEADY_FROM on.
 */
static struct result simulate(struct ctl *k, enum model m, int64_t base)
{
	int64_t done[CLIENTS], sent[CLIENTS], issued[CLIENTS], worker_free[8] = { 0 };
	int queue[CLIENTS], qhead = 0, qlen = 0, inflight = 0;
	size_t cap = 4000000, n = 0, nl = 0;
	int64_t *rtts = malloc(cap * sizeof(int64_t)), *callers = malloc(cap * sizeof(int64_t));
	double *limits = malloc(SIM_LEN / (10 * MS) * sizeof(double));
	double inflight_area = 0;
	int64_t now = T0, next_probe = T0, measuring_ns = 0;
	struct result r = { 0 };

	assert_non_null(rtts);
	assert_non_null(callers);
	assert_non_null(limits);
	r.limit_low_unmeasured = 1 << 30;
	for (int i = 0; i < 8; i++)
		worker_free[i] = T0;
	for (int i = 0; i < CLIENTS; i++) {
		done[i] = TB_NEVER;
		issued[i] = T0;
		queue[(qhead + qlen++) % CLIENTS] = i;
	}
	while (now < T0 + SIM_LEN) {
		int who = -1;
		int64_t next = TB_NEVER;

		/* The gate lets waiters in while the limit allows. */
		while (qlen > 0 && inflight < ctl_limit(k)) {
			int c = queue[qhead];

			qhead = (qhead + 1) % CLIENTS;
			qlen--;
			inflight++;
			sent[c] = now;
			if (m == SICK8_FIFO) {
				int w = 0;

				for (int i = 1; i < 8; i++)
					if (worker_free[i] < worker_free[w])
						w = i;
				worker_free[w] = (worker_free[w] > now ? worker_free[w] : now) +
						 (int64_t)((double)base * jitter());
				done[c] = worker_free[w];
			} else {
				done[c] = now + latency(m, inflight, base);
			}
		}
		for (int i = 0; i < CLIENTS; i++)
			if (done[i] < next) {
				next = done[i];
				who = i;
			}
		/* Time-sampled views every 10 ms: the limit and whether a measure is on. */
		while (next_probe <= next && next_probe < T0 + SIM_LEN) {
			ctl_tick(k, next_probe);
			if (next_probe - T0 >= STEADY_FROM) {
				bool meas = !k->fixed && k->kind == 0 && k->a.measuring;

				limits[nl++] = ctl_limit(k);
				if (meas)
					measuring_ns += 10 * MS;
				else if (ctl_limit(k) < r.limit_low_unmeasured)
					r.limit_low_unmeasured = ctl_limit(k);
			}
			next_probe += 10 * MS;
		}
		if (next - T0 >= STEADY_FROM)
			inflight_area += (double)inflight * (double)(next - now);
		now = next;
		done[who] = TB_NEVER;
		ctl_sample(k, now, now - sent[who], inflight);
		inflight--;
		if (now - T0 >= STEADY_FROM && n < cap) {
			rtts[n] = now - sent[who];
			callers[n++] = now - issued[who];
		}
		issued[who] = now;
		queue[(qhead + qlen++) % CLIENTS] = who;
	}
	qsort(rtts, n, sizeof(int64_t), cmp_i64);
	qsort(callers, n, sizeof(int64_t), cmp_i64);
	qsort(limits, nl, sizeof(double), cmp_double);
	r.calls = n;
	r.rtt_p99 = rtts[n * 99 / 100];
	r.caller_p99 = callers[n * 99 / 100];
	r.limit_med = limits[nl / 2];
	r.limit_min = limits[0];
	r.inflight_avg = inflight_area / (double)(SIM_LEN - STEADY_FROM);
	r.measuring_share = (double)measuring_ns / (double)(SIM_LEN - STEADY_FROM);
	free(rtts);
	free(callers);
	free(limits);
	return r;
}

static struct ctl *new_ctl(const char *name, int kind, int fixed, int pct, int grow)
{
	struct ctl *k = calloc(1, sizeof(*k));

	assert_non_null(k);
	k->name = name;
	k->kind = kind;
	k->fixed = fixed;
	k->c = cfg(1, 1000);
	if (pct)
		k->c.sample_pct = pct;
	if (grow)
		k->c.grow_pct = grow;
	tb_adaptive_init(&k->a, &k->c, T0);
	k->est = TB_ADAPTIVE_INITIAL;
	k->win_start = T0;
	return k;
}

static struct result run(const char *name, int kind, int fixed, int pct, int grow,
			 enum model m, int64_t base)
{
	struct ctl *k = new_ctl(name, kind, fixed, pct, grow);
	struct result r;

	rng = 88172645463325252ull;
	r = simulate(k, m, base);
	free(k);
	return r;
}

/* The downstream that serves 8 at a time, 50 clients: the limit settles near 8. The band
 * 6..16: the gradient's buffer (10 %) and its sqrt(limit) headroom keep the limit a few above
 * the 8 the downstream serves in one wave (a limit of 8 grows to 8 x 1.1 + 3 = 11, whose
 * queued calls bring it back), and a second wave (16) doubles the latency, the gradient's
 * floor of 0.5 at once. */
static void test_settles_near_capacity(void **state)
{
	struct result g = run("gradient", 0, 0, 0, 0, SICK8, 10 * MS);
	struct result f = run("fixed 100", 0, 100, 0, 0, SICK8, 10 * MS);

	(void)state;
	printf("serves 8 at a time, 50 clients: gradient limit %.0f (lowest %.0f) in flight %.1f "
	       "rtt p99 %lld ms caller p99 %lld ms; fixed 100: in flight %.1f rtt p99 %lld ms "
	       "caller p99 %lld ms\n", g.limit_med, g.limit_min, g.inflight_avg,
	       (long long)(g.rtt_p99 / MS), (long long)(g.caller_p99 / MS), f.inflight_avg,
	       (long long)(f.rtt_p99 / MS), (long long)(f.caller_p99 / MS));
	assert_true(g.limit_med >= 6 && g.limit_med <= 16);
	assert_true(g.inflight_avg >= 5 && g.inflight_avg <= 16);
	assert_true(g.rtt_p99 < f.rtt_p99);
	assert_true(g.limit_min >= 1);
}

/*
 * The same with 8 workers and a FIFO queue in front: the queue moves from the downstream to
 * the gate. Each call's RTT drops to about its service time; the caller's own latency (gate
 * wait included) cannot drop in a closed loop, where it is clients / throughput (Little's
 * law) with or without a gate, and must not grow.
 */
static void test_fifo_queue_moves_to_the_gate(void **state)
{
	struct result g = run("gradient", 0, 0, 0, 0, SICK8_FIFO, 10 * MS);
	struct result f = run("fixed 100", 0, 100, 0, 0, SICK8_FIFO, 10 * MS);

	(void)state;
	printf("8 workers + FIFO, 50 clients: gradient limit %.0f in flight %.1f rtt p99 %lld ms "
	       "caller p99 %lld ms; fixed 100: in flight %.1f rtt p99 %lld ms caller p99 %lld "
	       "ms\n", g.limit_med, g.inflight_avg, (long long)(g.rtt_p99 / MS),
	       (long long)(g.caller_p99 / MS), f.inflight_avg, (long long)(f.rtt_p99 / MS),
	       (long long)(f.caller_p99 / MS));
	assert_true(g.limit_med >= 6 && g.limit_med <= 16);
	assert_true(g.rtt_p99 * 2 < f.rtt_p99);
	assert_true((double)g.caller_p99 <= (double)f.caller_p99 * 1.05);
}

/* A fast, wide downstream with 50 clients: the gate never holds them back, but for the minRTT
 * re-measure's moments at the floor (what the algorithm costs; bounded below). */
static void test_healthy_never_throttled(void **state)
{
	struct result g = run("gradient", 0, 0, 0, 0, HEALTHY, 5 * MS);

	(void)state;
	printf("healthy, 50 clients: gradient limit %.0f, lowest outside minRTT measures %d, in "
	       "flight %.1f, measuring %.2f %% of the time\n", g.limit_med,
	       g.limit_low_unmeasured, g.inflight_avg, 100 * g.measuring_share);
	assert_true(g.limit_low_unmeasured >= CLIENTS);
	assert_true(g.measuring_share < 0.01);
	assert_true(g.inflight_avg > CLIENTS * 0.97);
}

static void row(const char *name, int kind, int fixed, int pct, int grow)
{
	struct result s = run(name, kind, fixed, pct, grow, SICK8, 10 * MS);
	struct result q = run(name, kind, fixed, pct, grow, SICK8_FIFO, 10 * MS);
	struct result h = run(name, kind, fixed, pct, grow, HEALTHY, 5 * MS);

	double secs = (double)(SIM_LEN - STEADY_FROM) / (double)S;

	printf("| %-14s | %5.0f %5.1f %4.0f %5lld %6lld | %5.0f %5.1f %4.0f %5lld %6lld | %5.0f %4d "
	       "%5.1f %6lld |\n", name, s.limit_med, s.inflight_avg, (double)s.calls / secs,
	       (long long)(s.rtt_p99 / MS), (long long)(s.caller_p99 / MS), q.limit_med,
	       q.inflight_avg, (double)q.calls / secs, (long long)(q.rtt_p99 / MS),
	       (long long)(q.caller_p99 / MS), h.limit_med,
	       h.limit_low_unmeasured == 1 << 30 ? 0 : h.limit_low_unmeasured, h.inflight_avg,
	       (long long)(h.caller_p99 / MS));
}

/* The issue: "compare the algorithms you try and say which you kept and why". The same
 * simulated downstreams for each; the kept one is the first row (policy/adaptive.c). */
static void test_compare_algorithms(void **state)
{
	(void)state;
	printf("50 clients, closed loop, %lld s simulated (steady state from %lld s); limit = "
	       "median, inflt = mean in flight, /s = calls answered per second, p99 in ms (rtt: "
	       "request to answer, call: with the gate's wait), low = lowest limit outside "
	       "minRTT measures\n", (long long)(SIM_LEN / S), (long long)(STEADY_FROM / S));
	printf("|                | 8 at a time, 10 ms x ceil(n/8) | 8 workers + FIFO, 10 ms      "
	       "| healthy, 5 ms flat to 200 |\n");
	printf("| algorithm      | limit inflt   /s rtt99 call99 | limit inflt   /s rtt99 call99 "
	       "| limit  low inflt call99 |\n");
	row("grad p90 +20%", 0, 0, 90, 20);
	row("grad p90 Envoy", 0, 0, 90, 100);
	row("grad p50 Envoy", 0, 0, 50, 100);
	row("grad p50 +20%", 0, 0, 50, 20);
	row("AIMD", 1, 0, 0, 0);
	row("Gradient2", 2, 0, 0, 0);
	row("fixed 100", 0, 100, 0, 0);
	row("fixed 8", 0, 8, 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_measure_then_initial_limit),
		cmocka_unit_test(test_gradient_arithmetic),
		cmocka_unit_test(test_sample_is_p90),
		cmocka_unit_test(test_unused_limit_does_not_grow),
		cmocka_unit_test(test_remeasure_restores),
		cmocka_unit_test(test_remeasure_without_calls_ends),
		cmocka_unit_test(test_floor_and_ceiling_hold),
		cmocka_unit_test(test_follows_the_downstream),
		cmocka_unit_test(test_settles_near_capacity),
		cmocka_unit_test(test_fifo_queue_moves_to_the_gate),
		cmocka_unit_test(test_healthy_never_throttled),
		cmocka_unit_test(test_compare_algorithms),
	};

	return cmocka_run_group_tests_name("adaptive", tests, NULL, NULL);
}
