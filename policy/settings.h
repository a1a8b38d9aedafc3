/* settings.h - the limits and options that govern one destination.
 * Plain data shared by the env parser, the launcher and the runtime; no behaviour here. */
#ifndef TB_SETTINGS_H
#define TB_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#define TB_NS_PER_MS INT64_C(1000000)
#define TB_NS_PER_S INT64_C(1000000000)
#define TB_NEVER INT64_MAX /* an expiry that never comes */

/* Phases, in the order of a call (DESIGN §3). The names are the log's `phase=` values. */
enum tb_phase {
	TB_PHASE_GATE,
	TB_PHASE_CONNECT,
	TB_PHASE_WRITE,
	TB_PHASE_FIRST_BYTE,
	TB_PHASE_READ,
	TB_PHASE_DEADLINE,
	TB_PHASE_COUNT
};

/* scope=request: an inbound request's head opens a budget on the thread that read it (see
 * shim/request.h); the thread's outbound calls draw on it. */
enum tb_scope { TB_SCOPE_CALL, TB_SCOPE_PROCESS, TB_SCOPE_REQUEST };
enum tb_on_timeout { TB_ON_TIMEOUT_ETIMEDOUT, TB_ON_TIMEOUT_EAGAIN };
enum tb_log_target { TB_LOG_STDERR, TB_LOG_SYSLOG, TB_LOG_OFF, TB_LOG_FILE };
enum tb_log_level { TB_LOG_LEVEL_WARN, TB_LOG_LEVEL_INFO };
enum tb_log_format { TB_LOG_FORMAT_LOGFMT, TB_LOG_FORMAT_JSON };
/* A non-blocking connect at a full gate: wait the bounded time (default), or fail at once. */
enum tb_gate_nonblocking { TB_GATE_NB_WAIT, TB_GATE_NB_FAIL };

#define TB_MAX_CONNS_LIMIT 1000000

/* HTTP answers the breaker counts as failures, where the framing sees them (docs/breaker.md). */
enum tb_breaker_http { TB_BREAKER_HTTP_GATEWAY, TB_BREAKER_HTTP_5XX, TB_BREAKER_HTTP_OFF };

/*
 * The anchors' defaults: Envoy's outlier detection (consecutive_5xx = 5, base_ejection_time
 * 30 s growing by one base per consecutive ejection up to max_ejection_time 300 s), Hystrix's
 * rate (50 % of at least 20 calls in 10 s), Finagle's RetryBudget (10 retries/s over a 10 s
 * ttl; its 20 % is no default here: the budget is off unless given).
 */
#define TB_BREAKER_FAILURES_DEFAULT 5
#define TB_BREAKER_RATE_DEFAULT 50
#define TB_BREAKER_MIN_CALLS_DEFAULT 20
#define TB_BREAKER_WINDOW_DEFAULT (10 * TB_NS_PER_S)
#define TB_BREAKER_OPEN_DEFAULT (30 * TB_NS_PER_S)
#define TB_BREAKER_OPEN_MAX_DEFAULT (300 * TB_NS_PER_S)
#define TB_RETRY_BUDGET_FLOOR_DEFAULT 10
#define TB_RETRY_BUDGET_WINDOW_DEFAULT (10 * TB_NS_PER_S)
#define TB_MAX_CONNS_CEILING_DEFAULT 1000
/* The adaptive gate's floor, where it also measures its minRTT: Envoy's min_concurrency. A
 * floor of 1 would serialise the measure's calls (25 of them, every 30 s). */
#define TB_MAX_CONNS_FLOOR_DEFAULT 3
/* The adaptive gate's first limit, clamped to [floor, ceiling] (docs/breaker.md). */
#define TB_MAX_CONNS_AUTO_START 20

#define TB_LOG_PATH_MAX 256
/* The propagated deadline's header name: a token of 1..63 characters, and its NUL. */
#ifndef TB_PROP_HEADER_MAX
#define TB_PROP_HEADER_MAX 64
#endif
#define TB_PROP_HEADER_DEFAULT "X-Deadline-Ms"
#define TB_LOG_RATE_DEFAULT 100
#define TB_STATS_INTERVAL_DEFAULT (10 * TB_NS_PER_S)

/*
 * Every duration is in nanoseconds; 0 means "no limit". retry_window_ns < 0 means
 * "not set": it then defaults to the deadline's length (tb_settings_retry_window).
 * first_byte_ns < 0 means "not set": it then defaults to read_ns (tb_settings_finish).
 * dns_ns < 0 means "not set": it then defaults to connect_ns (tb_settings_finish). Name
 * resolution is not a phase of a socket (no enum tb_phase value): it bounds getaddrinfo and
 * gethostbyname* before any socket exists, and only the defaults' value applies.
 */
struct tb_settings {
	int64_t dns_ns;           /* name resolution (phase dns) */
	int64_t connect_ns;
	int64_t write_ns;
	int64_t first_byte_ns;
	int64_t read_ns;
	int64_t deadline_ns;
	int64_t retry_window_ns;
	int64_t acquire_ns;       /* bound on the wait at a full gate; 0: unbounded */
	int max_conns;            /* the gate: open sockets per destination; 0: no gate */
	int max_pending;          /* callers allowed to wait at a full gate; 0: no limit */
	bool gate_shared;         /* one gate per destination for every process */
	enum tb_gate_nonblocking gate_nonblocking;
	enum tb_scope scope;
	enum tb_on_timeout on_timeout;
	enum tb_log_target log_target;
	char log_path[TB_LOG_PATH_MAX];
	enum tb_log_level log_level;
	enum tb_log_format log_format;
	int log_rate;             /* log lines per second per process; 0: no limit */
	char stats_path[TB_LOG_PATH_MAX]; /* the Prometheus file to keep written, or "" */
	int64_t stats_interval_ns; /* how often stats_path is rewritten */
	bool strict;
	/* Measure, govern nothing (TIMEBOX_OBSERVE): tb_settings_finish turns every limit off
	 * and makes the gate too large to fill, so sockets are tracked and counted only. */
	bool observe;
	/* enum tb_proto (frame.h): what a socket speaks; auto (0, the default) detects it.
	 * A forced `session` also makes read_ns the session's inactivity limit. */
	uint8_t protocol;
	/* Deadlines across a call chain (docs/propagation.md): read the deadline an inbound
	 * request head carries, and write the remaining one into outbound HTTP/1.x requests. */
	bool propagate;
	char deadline_header[TB_PROP_HEADER_MAX]; /* default TB_PROP_HEADER_DEFAULT */
	/* `breaker = on|off` until tb_settings_finish (1 on, -1 off, 0 not said), which turns
	 * it into the two modes below and resets it to 0; breaker_failures and breaker_rate
	 * are -1 ("not set") until then, so that `on` can tell a mode left unset from one
	 * turned off. */
	int8_t breaker;
	/* The downstream's protection (docs/breaker.md). */
	int breaker_failures;
	int breaker_rate;
	int breaker_min_calls;
	int64_t breaker_window_ns;
	int64_t breaker_open_ns;
	int64_t breaker_open_max_ns;
	int breaker_probes;
	int64_t breaker_slow_ns;
	int breaker_errno;
	uint8_t breaker_http;
	int retry_budget;
	int retry_budget_floor;
	int64_t retry_budget_window_ns;
	bool max_conns_auto;
	int max_conns_floor;
	int max_conns_ceiling;
	/* Derived by tb_settings_finish: any of the three above applies. The hooks test this
	 * one byte before anything of shim/protect.c runs. */
	bool protects;
	/* Derived by tb_settings_finish: the shortest limit a wait on an open socket can have
	 * from its start, from the phases alone - reading (first_byte, read) [0] and writing
	 * (write) [1], the shim's sides; TB_NEVER when no phase of the side is limited. A
	 * wait that begins a fresh silence expires no earlier than this after its start, or
	 * at its call's deadline: the hot path's bound (sock.c, tb_sock_wait_record). */
	int64_t wait_floor_ns[2];
};

/* Built-in defaults: nothing limited, log to stderr (logfmt, 100 lines/s), scope=call; no
 * breaker, no retry budget, a fixed gate, with the anchors' values ready for when one is
 * turned on (TB_BREAKER_*_DEFAULT above). */
void tb_settings_init(struct tb_settings *s);

/* Resolves the "not set" markers (first_byte falls back to read, dns to connect, an unset
 * breaker mode is off) and the breaker's switch: `breaker = off` turns both of its modes
 * off, `on` gives a mode left unset its anchor's value (5 consecutive, 50 %) unless the
 * other mode has a value. With max_conns_auto, max_conns becomes the ceiling (every "gate
 * present" test stays max_conns > 0). Call after parsing; calling it again changes nothing.
 * With `observe` it also clears every limit, the gate's bounds, the breaker, the retry
 * budget, the adaptive gate and `strict`: what a setting said no longer applies (an
 * observed program is never cut, never refused).
 * @unittest test_env_protect.c: test_breaker_switch, test_observe_clears_protection */
void tb_settings_finish(struct tb_settings *s);

/* True when a phase limit (dns included), the deadline, a gate, the breaker or the retry
 * budget is set: otherwise nothing is governed. */
bool tb_settings_any_limit(const struct tb_settings *s);

/* The breaker is on (after tb_settings_finish): one of its two modes is set. */
bool tb_settings_breaker_on(const struct tb_settings *s);

/* The retry budget is on: retries are limited to a share of recent first attempts. */
bool tb_settings_retry_budget_on(const struct tb_settings *s);

/* The retry window in ns: the configured one, or the deadline's length when unset. */
int64_t tb_settings_retry_window(const struct tb_settings *s);

/* The limit of one phase in ns (0 = off); TB_PHASE_DEADLINE gives deadline_ns. */
int64_t tb_settings_phase_limit(const struct tb_settings *s, enum tb_phase phase);

/* The smallest limit that is set among the phases and the deadline, or 0 when none is. */
int64_t tb_settings_min_limit(const struct tb_settings *s);

/* True when `name` can be the propagated deadline's header: an HTTP token (RFC 9110
 * tchar) of 1..TB_PROP_HEADER_MAX-1 characters. */
bool tb_settings_header_ok(const char *name);

/* "gate", "connect", ... as written in logs and docs. */
const char *tb_phase_name(enum tb_phase phase);

#endif
