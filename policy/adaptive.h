/* adaptive.h - the gate that sizes itself (max_conns = "auto"): Envoy's gradient controller.
 * The limit follows the destination's latency: it grows while calls take no longer than the
 * minimum RTT plus a buffer, and shrinks as a queue makes them slower. Pure code: `now` is
 * passed in, no pointer inside; the caller holds the lock. */
#ifndef TB_ADAPTIVE_H
#define TB_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "settings.h"

#define TB_ADAPTIVE_INITIAL 20 /* the first limit, clamped to [floor, ceiling] */

struct tb_adaptive_cfg { int floor, ceiling; int64_t sample_ns; /* 100 ms: a window of samples */
			 int buffer_pct; /* 10: minRTT x 1.1 is "no queue" */
			 int64_t min_rtt_every_ns; /* 30 s: re-measure minRTT at the floor */
			 int min_rtt_samples; /* 25 */
			 int sample_pct; /* 90: a window's RTT is this percentile of its calls */
			 int grow_pct; /* 20: the share of a rise taken per window (100: Envoy's) */ };

/* From a rule's settings: floor >= 1, floor <= ceiling <= TB_MAX_CONNS_LIMIT, and the
 * controller's constants (100 ms, 10 %, 30 s, 25 samples, p90, 20 % of a rise). */
void tb_adaptive_cfg_from(struct tb_adaptive_cfg *c, const struct tb_settings *s);

/* A latency histogram of one window: log-linear buckets of 1.024 us units, 4 per power of two
 * (~19 % wide), each with the sum of its values so that a percentile reads the mean of its
 * bucket rather than its edge. Up to ~17 s; longer calls share the last bucket. */
#define TB_ADAPTIVE_SUB 4
#define TB_ADAPTIVE_BUCKETS (24 * TB_ADAPTIVE_SUB)

struct tb_adaptive {
	int32_t limit;           /* what the gate lets in flight now: limit_milli / 1000 */
	int64_t limit_milli;     /* the limit in thousandths: it grows by fractions */
	int32_t saved_limit;     /* measuring: the limit to restore */
	uint32_t measuring;      /* minRTT is being measured at the floor */
	int32_t window_inflight; /* the most in flight seen in this window */
	int64_t min_rtt, last_sample_rtt; /* ns; 0 before the first measure / window */
	int64_t window_start;    /* the sample window's or the measure's start */
	int64_t next_measure;    /* when minRTT is measured again */
	uint32_t samples;        /* in the histogram */
	uint32_t hist_n[TB_ADAPTIVE_BUCKETS];
	uint64_t hist_sum[TB_ADAPTIVE_BUCKETS]; /* ns */
	uint64_t updates_total, measures_total; /* counters: windows that set the limit, minRTTs */
};

/* Starts by measuring minRTT: the limit is the floor until min_rtt_samples calls came back,
 * then clamp(TB_ADAPTIVE_INITIAL, floor, ceiling). */
void tb_adaptive_init(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now);

/*
 * One call's latency (request sent -> first response byte), with the number in flight when it
 * ended. Returns true when the limit changed (read it with tb_adaptive_limit). At each window's
 * end (sample_ns and at least TB_ADAPTIVE_WINDOW_MIN calls): gradient = clamp(minRTT x
 * (1 + buffer) / sampleRTT, 0.5, 2), next = limit x gradient + sqrt(limit x gradient);
 * a fall is taken whole, a rise at grow_pct, and a limit twice the window's use does not grow;
 * clamped to [floor, ceiling].
 * @unittest test_adaptive.c
 */
#define TB_ADAPTIVE_WINDOW_MIN 10
bool tb_adaptive_sample(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now,
			int64_t rtt_ns, int inflight);

/* Time passing with no samples may also change it: a measure with no calls ends after
 * tb_adaptive_measure_max (with what it has), and a re-measure falls due. */
bool tb_adaptive_tick(struct tb_adaptive *a, const struct tb_adaptive_cfg *c, int64_t now);

int tb_adaptive_limit(const struct tb_adaptive *a);

/* The longest a minRTT measure lasts when calls are few: max(min_rtt_every / 10, 10 windows). */
int64_t tb_adaptive_measure_max(const struct tb_adaptive_cfg *c);

#endif
