/* log.h - timebox's only output: one logfmt line per expiry or misconfiguration.
 * Lines are built without malloc or stdio, so they can be written from any hook. */
#ifndef TB_LOG_H
#define TB_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dest.h"
#include "settings.h"

/* The call's timers of a timeout line (-1: a phase the call did not reach). */
struct tb_log_timers {
	int64_t gate_ms, connect_ms, first_byte_ms, total_ms, budget_ms;
	char host[64];
};

/*
 * The statistics sit above the log and lend it `held_back`, registered once at start-up
 * before any thread runs (a pointer, so that the log never calls up into them): told when
 * a line is first held back by the rate limit, so that the count is reported a second
 * later even if no other line comes. NULL: none.
 */
void tb_log_lend(void (*held_back)(void));

/*
 * Opens the target chosen by s (stderr, syslog, off, a file; see log_sink.h), in s's
 * format (logfmt or JSON) and rate (log_rate lines per second; then one suppressed count).
 * When it cannot, says why on stderr and logs there. Called once, at start-up.
 *
 * No line ever blocks its caller: a line the target cannot take at once (a full pipe or
 * socket, a broken pipe, no syslog daemon, an fd 2 that is no longer the program's stderr
 * of start-up) is dropped and counted, and the next line that goes out is preceded by
 * "event=suppressed count=N".
 */
void tb_log_open(const struct tb_settings *s);

/* event=timeout phase=... dest=... fd=... elapsed_ms=... limit_ms=... [host=...] gate_ms=...
 * connect_ms=... first_byte_ms=... total_ms=... budget_ms=... pid=... tid=...
 * `tid` is the program's thread whose wait was cut, not the watchdog's. No timers: only the
 * thread that cut the socket has them (tb_stats_cut, then tb_log_timeout_with); -1 marks a
 * phase not reached (HAProxy's convention). Subject to the rate limit (log_rate). */
void tb_log_timeout(enum tb_phase phase, const struct tb_dest *d, int fd, int64_t elapsed_ns,
		    int64_t limit_ns, int tid);

/* event=timeout phase=dns name=... elapsed_ms=... limit_ms=... pid=... tid=...: a name
 * lookup given up (or refused after the call's deadline). */
void tb_log_dns_timeout(const char *name, int64_t elapsed_ns, int64_t limit_ns);

/* event=reject phase=... dest=... fd=... reason=...: an attempt failed before it began. */
void tb_log_reject(enum tb_phase phase, const struct tb_dest *d, int fd, const char *reason);

/* What a configuration error does under TIMEBOX_STRICT. */
#define TB_EFFECT_REFUSE "refusing to run (TIMEBOX_STRICT)"

/* event=config_error name=... value="..." error="..." effect=... (always to stderr) */
void tb_log_config_error(const char *name, const char *value, const char *why,
			 const char *effect);

/* event=config_error file="..." line=N name=KEY value="..." error="..." effect="..." pid tid:
 * a problem of the configuration file (line 0 and key NULL: of the whole file). */
void tb_log_config_file_error(const char *file, int line, const char *key, const char *value,
			      const char *why, const char *effect);

/* event=config_error file="..." error="N more problems": past the ones reported. */
void tb_log_config_more(const char *file, int count);

/* event=gate dest=... leased=... pending=... max=... acquired=... timed_out=... rejected=... */
void tb_log_gate(const struct tb_dest *d, long leased, long pending, long max,
		 unsigned long acquired, unsigned long timed_out, unsigned long rejected);

/* A preformatted logfmt body; "timebox: " and the newline are added (in JSON, the body's
 * pairs become the object's members). Rate limited. */
void tb_log_error(const char *body);

/* Writes "event=suppressed count=N" now when lines were dropped or rate-limited since the
 * last report (the stats thread calls it every second; it also runs at exit). */
void tb_log_flush_suppressed(void);

/* True when lines were held back or dropped and not reported yet. */
bool tb_log_suppressing(void);

/* The log fd moved (dup2 over it by the program): follow it (to = -1: it could not move). */
void tb_log_fd_moved(int from, int to);

/* The program put a new object on fd 2 with dup2/dup3/dup: its stderr from now on (not a
 * socket; see log_sink.h). Call only in the process timebox set up, not a vfork child. */
void tb_log_stderr_replaced(void);

/* In a forked child (init.c's fork handler). */
void tb_log_fork_child(void);

/* tb_log_timeout with the timers already taken (t; NULL: none known). For the expirer,
 * which takes note and timers while the socket cannot be closed and reused under it. */
void tb_log_timeout_with(enum tb_phase phase, const struct tb_dest *d, int fd,
			 int64_t elapsed_ns, int64_t limit_ns, int tid,
			 const struct tb_log_timers *t);

struct tb_req_tag;
/* tb_log_timeout_with for a call cut (or refused) at the thread's request deadline: the
 * line also says where that budget came from (`budget=api`, `budget=request`, or
 * `budget=header header=X-Deadline-Ms value=1000`; request.h). */
void tb_log_timeout_budget(enum tb_phase phase, const struct tb_dest *d, int fd,
			   int64_t elapsed_ns, int64_t limit_ns, int tid,
			   const struct tb_log_timers *t, const struct tb_req_tag *tag);

/* event=breaker dest=... state=open|half-open|closed reason=... [last=KIND] failures=N
 * calls=N [for_ms=N]: one line per change of a destination's circuit breaker (protect.c). Never
 * rate limited: changes are rare, each one matters. */
void tb_log_breaker(const struct tb_dest *d, const char *state, const char *reason,
		    const char *last, uint64_t failures, uint64_t calls, int64_t for_ns);

/* event=reject phase=connect dest=... fd=... reason=breaker|retry_budget refused=N
 * [open_ms_left=N]: connects refused at once, nothing sent; `count` is how many since the
 * destination's last such line (one per opening, or per second). left_ns < 0: omitted. */
void tb_log_refused(const struct tb_dest *d, int fd, const char *reason, uint64_t count,
		    int64_t left_ns);

/* event=gate_size dest=... max=N min_rtt_us=N rtt_us=N: an adaptive gate changed its size
 * (written at TIMEBOX_LOG_LEVEL=info only; the caller decides). */
void tb_log_adaptive(const struct tb_dest *d, int limit, int64_t min_rtt_ns, int64_t rtt_ns);

#endif
