/* stats_seg.h - the layout of a governed process's statistics segment (`stats-<pid>` in the
 * per-user timebox directory), written by the library and read by `timebox stats`. */
#ifndef TB_STATS_SEG_H
#define TB_STATS_SEG_H

#include <stdatomic.h>
#include <stdint.h>

#include "hist.h"
#include "settings.h"

#define TB_STATS_MAGIC UINT64_C(0x3173746174736274) /* "tbstats1", little-endian */
#define TB_STATS_VERSION 5
#define TB_STATS_DESTS 32 /* destinations with their own row; later ones count as "other" */
#define TB_STATS_TEXT 64

enum tb_stats_hist { TB_HIST_CONNECT, TB_HIST_FIRST_BYTE, TB_HIST_CALL, TB_HIST_COUNT };

/* The kinds of `event=notice` (docs/observability.md): where timebox chose to stop
 * governing something on a connection rather than risk cutting a healthy program. Each is
 * counted per destination; the line itself goes out only at log_level = info, once per
 * process. Names: tb_notice_name (stats_prom.h). */
enum tb_notice { TB_NOTICE_TLS_ANSWERED_WAIT, TB_NOTICE_FRAMING_RAW, TB_NOTICE_COUNT };

/*
 * One destination. `state` goes 0 -> 1 (claimed by the writer that fills dest/host/max) ->
 * 2 (published, release); a reader skips rows not at 2. Counters are relaxed atomics added
 * to by any thread of the process; gauges (leased, pending) are refreshed by the library's
 * stats thread from the gate when a reader asks (see `wake`) and at each stats interval.
 */
struct tb_stats_dest {
	_Atomic uint32_t state;
	_Atomic uint32_t host_ready;    /* host is written (release), once */
	int32_t max;                    /* the gate's size; 0: no gate */
	uint32_t pad;
	char dest[TB_STATS_TEXT];       /* "127.0.0.1:8080" */
	char host[TB_STATS_TEXT];       /* the learned hostname, or "" */
	_Atomic uint64_t calls;         /* calls begun: governed connects, and each later
					 * request on a kept-alive connection */
	_Atomic uint64_t completed;     /* calls that ended with a response (EOF or next request) */
	_Atomic uint64_t cuts[TB_PHASE_COUNT];
	_Atomic uint64_t rejects;       /* refused at the gate (full, max_pending) */
	_Atomic int64_t leased, pending; /* gauges */
	_Atomic uint64_t acquired, gate_timed_out;
	struct tb_hist hist[TB_HIST_COUNT];
	_Atomic uint64_t notices[TB_NOTICE_COUNT]; /* connections per notice kind */
	_Atomic uint64_t not_sent;      /* requests not sent: the thread's request budget was
					 * spent (a connect or send refused, shim/request.h) */
	/* The downstream's protection (shim/protect.c), copied by the stats thread. */
	_Atomic uint32_t protect;       /* 1: a breaker, a retry budget or an auto gate */
	_Atomic uint32_t breaker_state; /* enum tb_breaker_state (policy/breaker.h) */
	_Atomic uint64_t breaker_opened, breaker_refused, retries, retry_refused;
	_Atomic int32_t auto_limit;     /* the adaptive gate's size; 0: not auto */
	uint32_t pad2;
	_Atomic int64_t min_rtt_us, rtt_us; /* its latencies: the floor, the last sample */
};

struct tb_stats_seg {
	uint64_t magic;
	uint32_t version;
	int32_t pid;
	int64_t started;                /* CLOCK_REALTIME seconds */
	char comm[TB_STATS_TEXT];       /* the program's name */
	_Atomic uint32_t ndests;        /* rows claimed (<= TB_STATS_DESTS) */
	_Atomic uint32_t wake;          /* a reader adds 1 and futex-wakes it: refresh now */
	_Atomic uint32_t refreshed;     /* the stats thread adds 1 after each refresh */
	_Atomic uint32_t rows_allocated; /* rows 0..n-1 have their pages; the rest is a hole,
					  * touched by no one (a fault allocates on tmpfs) */
	_Atomic uint64_t other_calls;   /* calls to destinations past the table */
	_Atomic uint64_t arrived_spent; /* inbound requests whose deadline header said 0 */
	struct tb_stats_dest d[TB_STATS_DESTS];
};

#endif
