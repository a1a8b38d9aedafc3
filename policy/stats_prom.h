/* stats_prom.h - a statistics segment as Prometheus text (exposition format 0.0.4).
 * Pure code: reads the segment, writes into the caller's buffer. */
#ifndef TB_STATS_PROM_H
#define TB_STATS_PROM_H

#include <stdbool.h>
#include <stddef.h>

#include "stats_seg.h"

/* The `le` edges of the exported histograms: 2^k microseconds, k = FIRST..LAST, +Inf. */
#define TB_PROM_LE_FIRST 7  /* 128 us */
#define TB_PROM_LE_LAST 26  /* 67 s */

/* One destination's numbers, copied out of the segment (rows of one destination merged). */
struct tb_stats_row {
	char dest[TB_STATS_TEXT];
	char host[TB_STATS_TEXT];
	long max, leased, pending;
	unsigned long long calls, completed, rejects, acquired, cuts[TB_PHASE_COUNT];
	unsigned long long notices[TB_NOTICE_COUNT];
	unsigned long long not_sent;
	/* The downstream's protection: `protect` set when any applies. */
	bool protect;
	unsigned long long breaker_state; /* enum tb_breaker_state */
	unsigned long long breaker_opened, breaker_refused, retries, retry_refused;
	long long auto_limit, min_rtt_us, rtt_us;
	struct tb_hist_snap hist[TB_HIST_COUNT];
};

/* "tls_answered_wait", "framing_raw": the `what` of the notice's line; NULL out of range. */
const char *tb_notice_name(enum tb_notice k);

/* Copies the published rows of seg into rows (at most TB_STATS_DESTS), merging rows that
 * name the same destination. Returns how many. */
int tb_stats_rows(const struct tb_stats_seg *seg, struct tb_stats_row *rows);

/*
 * Writes the metrics of rows into buf (len bytes, NUL-terminated when len > 0). Returns the
 * length the whole text needs (without the NUL), like snprintf: a result >= len means buf
 * was too small. `pid` > 0 adds a pid label (a view over several processes).
 */
size_t tb_stats_prom(const struct tb_stats_row *rows, int n, int pid, char *buf, size_t len);

/* The process's own counters (not a destination's), appended after tb_stats_prom's text
 * into buf (len bytes). Same return as tb_stats_prom. */
size_t tb_stats_prom_process(const struct tb_stats_seg *seg, int pid, char *buf, size_t len);

#endif
