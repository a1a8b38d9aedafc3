/* suggest.h - `timebox suggest`'s arithmetic: limits chosen from one destination's measured
 * latencies and rate (the seed's rules), each with the reason written next to it. Pure code. */
#ifndef TB_SUGGEST_H
#define TB_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"

/*
 * A latency distribution as buckets [lo, hi) in microseconds, in increasing order, with their
 * counts: the segment's log-linear histogram (~12 % wide buckets) or a stats file's
 * Prometheus buckets (powers of two). Plain numbers, copied.
 */
struct tb_dist {
	unsigned n;
	uint64_t total;
	uint64_t lo[TB_HIST_BUCKETS], hi[TB_HIST_BUCKETS], count[TB_HIST_BUCKETS];
};

/* The empty distribution. */
void tb_dist_init(struct tb_dist *d);

/* Appends the bucket [lo_us, hi_us) holding count values (ignored when full, empty, or not
 * after the previous bucket). */
void tb_dist_add(struct tb_dist *d, uint64_t lo_us, uint64_t hi_us, uint64_t count);

/* The non-empty buckets of a histogram snapshot. */
void tb_dist_from_hist(struct tb_dist *d, const struct tb_hist_snap *h);

/*
 * The q-quantile (0 < q <= 1) in ns, interpolated linearly inside the bucket that holds the
 * value of rank q * total (Prometheus' histogram_quantile does the same, so a dashboard and
 * this agree). -1 when empty. @unittest test_suggest.c quantile_*
 */
int64_t tb_dist_quantile_ns(const struct tb_dist *d, double q);

/* Calls below this make the p99.9 unknown: the seed's upper factor (2) is used. */
#define TB_SUGGEST_TAIL_CALLS 1000
/* Fewer calls than this: the p99 is little more than the slowest call, and says so. */
#define TB_SUGGEST_FEW_CALLS 100
/* The connect limit's floor: the seed's same-datacentre round trip (about 100 ms). */
#define TB_SUGGEST_CONNECT_FLOOR_NS (100 * INT64_C(1000000))
/* The wait for a slot at a full gate: the seed's "tens of milliseconds" (its example's 50). */
#define TB_SUGGEST_ACQUIRE_NS (50 * INT64_C(1000000))

#define TB_SUGGEST_TEXT 64
#define TB_SUGGEST_WHY 360
#define TB_SUGGEST_WARNINGS 6

/* What was measured for one destination. */
struct tb_suggest_in {
	char dest[TB_SUGGEST_TEXT]; /* "127.0.0.1:8080" as the statistics spell it */
	char host[TB_SUGGEST_TEXT]; /* its learned hostname, or "" */
	struct tb_dist connect, first_byte, call;
	uint64_t calls;   /* calls begun */
	double qps;       /* calls per second; < 0: unknown (no time base) */
	long leased;      /* connections open when read (the gate's gauge); < 0: unknown */
	bool coarse;      /* from a stats file: the buckets are powers of two */
};

struct tb_suggest_opts {
	int64_t budget_ns; /* the most this call may take, from the caller; 0: not given */
};

/* One value chosen: 0 means "left off", why says where the value came from. */
struct tb_suggest_value {
	int64_t ns;
	char why[TB_SUGGEST_WHY];
};

struct tb_suggestion {
	bool usable;      /* some response was measured: a rule is written */
	char skipped[TB_SUGGEST_WHY]; /* why not, when !usable */
	int64_t connect_p99, fb_p99, fb_p999, call_p99, call_p999; /* ns; -1: not measured */
	double fb_factor, call_factor;
	struct tb_suggest_value connect, first_byte, read, deadline, acquire;
	int max_conns;    /* 0: left off */
	double little;    /* qps x call p99: the calls in flight (Little's law); < 0 unknown */
	char why_max_conns[TB_SUGGEST_WHY];
	int nwarnings;
	char warning[TB_SUGGEST_WARNINGS][TB_SUGGEST_WHY];
};

/*
 * Chooses the limits of one destination:
 *   first_byte_timeout = f x the first-byte p99, read_timeout = f x the call's p99 (a gap
 *   between two chunks is never longer than its call), f in the seed's 1.5-2: the smallest
 *   that also covers the observed p99.9 (2 when fewer than TB_SUGGEST_TAIL_CALLS);
 *   connect_timeout = f x the handshake p99, at least TB_SUGGEST_CONNECT_FLOOR_NS;
 *   max_conns = ceil(qps x call p99 x 1.5) (Little's law), never below the connections the
 *   program held open (`leased`), with acquire_timeout TB_SUGGEST_ACQUIRE_NS;
 *   deadline = the budget, or without one 2 x read + connect + acquire (one attempt and a
 *   retry, the lint's own formula).
 * Within a budget, a phase limit that cannot fire before the deadline is left off, and
 * acquire + connect shrink until acquire + connect + first_byte fit, so that `timebox check`
 * finds nothing; what the budget cannot hold becomes a warning ("change the call, not the
 * timeout"). Every value is rounded up to the millisecond (shrunk ones down).
 * @unittest test_suggest.c
 */
void tb_suggest(const struct tb_suggest_in *in, const struct tb_suggest_opts *o,
		struct tb_suggestion *out);

/*
 * Writes the configuration file (libconfig, timebox.conf(5)) for n destinations into buf
 * (len bytes, NUL-terminated when len > 0), a comment on every value. `source` names what
 * was read ("pid 1234 (python3)"), `qps_from` how the rate was measured. Returns the length
 * the whole text needs, like snprintf.
 */
size_t tb_suggest_render(const struct tb_suggest_in *in, const struct tb_suggestion *s,
			 size_t n, const struct tb_suggest_opts *o, const char *source,
			 const char *qps_from, char *buf, size_t len);

#endif
