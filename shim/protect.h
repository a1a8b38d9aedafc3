/* protect.h - the downstream's protection at run time (docs/breaker.md): per destination, a
 * circuit breaker, a retry budget and the gate that sizes itself. The state machines are
 * policy/breaker.h, retry_budget.h and adaptive.h; this file adds the table, the lock, the
 * log lines, the statistics and the sockets' outcomes.
 *
 * Nothing here is on the path of a program without these settings: every hook below is
 * reached only behind `set->protects` (settings.h), one load of the socket's settings. */
#ifndef TB_PROTECT_H
#define TB_PROTECT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "breaker.h"
#include "dest.h"
#include "settings.h"

struct tb_sock;
struct tb_gate;

/* What a connect was admitted with: the destination's entry, and the breaker's ticket. */
struct tb_prot_ticket {
	uint32_t entry;                /* index + 1 in the table; 0: not protected */
	struct tb_breaker_ticket bt;
};

/*
 * A governed connect to d asks, before the gate and before any SYN: 0 to go ahead (t is
 * filled: pass it to tb_prot_bind, or tb_prot_drop when the connect does not happen), or -1
 * with errno = set->breaker_errno when the breaker is open (or half-open with its probes
 * out), or when the connect is a retry past the retry budget. A refusal is logged
 * (event=reject reason=breaker|retry_budget, once per opening or per second with the count)
 * and counted in the statistics. A table full, or no memory: the connect goes ahead
 * unprotected (said once).
 */
int tb_prot_admit(const struct tb_settings *set, const struct tb_dest *d, int fd, int64_t now,
		  struct tb_prot_ticket *t);

/* The connect admitted with t goes on through gate g (NULL: ungated): with max_conns =
 * "auto" the gate takes the destination's current size. */
void tb_prot_gate(const struct tb_prot_ticket *t, struct tb_gate *g);

/* The connect admitted with t is now socket s: its outcomes are the call's. */
void tb_prot_bind(struct tb_sock *s, const struct tb_prot_ticket *t);

/* The connect admitted with t never began (the gate refused it, the socket went
 * ungoverned): a probe's place is given back. */
void tb_prot_drop(const struct tb_prot_ticket *t);

/* Why a call failed, as its log line and docs/breaker.md name it. */
enum tb_prot_fail {
	TB_PROT_REFUSED,   /* connect refused, unreachable */
	TB_PROT_CUT,       /* a phase timeout or the deadline (any phase) */
	TB_PROT_RESET,     /* reset, broken pipe, or closed before any answer */
	TB_PROT_HTTP,      /* a 502/503/504 (or 5xx) answer, as the framing reads it */
	TB_PROT_SLOW,      /* the first byte came later than breaker_slow */
};

/* The call under way on s failed. Once per call; later outcomes of the same call are
 * ignored. */
void tb_prot_failed(struct tb_sock *s, enum tb_prot_fail why);

/* A change of the breaker's state, for its line: taken where nothing may block, written
 * after (tb_prot_say). */
struct tb_prot_note {
	const void *entry;  /* NULL: nothing to say */
	int ch;
	const char *reason; /* the breaker's: consecutive, rate, probe_failed, ... */
	const char *last;   /* the failure that decided it (timeout, reset, ...), or NULL */
	uint64_t failures, calls;
	int64_t for_ns;
};

/* tb_prot_failed(s, TB_PROT_CUT) for the expirer, before its cut wakes the waiter (whose
 * retry then finds the breaker as this failure left it), under `busy`: the line a change
 * needs is kept in *n for tb_prot_say once `busy` is dropped. */
void tb_prot_cut(struct tb_sock *s, struct tb_prot_note *n);
void tb_prot_say(const struct tb_prot_note *n);

/* A read on s saw EOF: a request sent and not answered fails its call (the downstream
 * closed on it). */
void tb_prot_eof(struct tb_sock *s);

/* The errors of a transfer that tell the connection broke (reset, broken pipe, the
 * kernel's own timeout): the downstream's failure, not the program's misuse. */
static inline bool tb_prot_is_reset(int err)
{
	return err == ECONNRESET || err == EPIPE || err == ECONNABORTED || err == ETIMEDOUT ||
	       err == EHOSTUNREACH || err == ENETUNREACH;
}

/* A request began on s at `now` (its first bytes were sent): the clock of its latency. A
 * new request after an answered one starts a new call. */
void tb_prot_sent(struct tb_sock *s, int64_t now);

/* The first byte of the answer came at `now` (the transfer's clock reading after the read;
 * 0: none was taken, read it here): the call succeeded (or is slow), and its latency is
 * the adaptive gate's sample. */
void tb_prot_answered(struct tb_sock *s, int64_t now);

/* The framing read a final HTTP status of 5xx (`gateway`: 502, 503 or 504). */
void tb_prot_http_status(struct tb_sock *s, bool gateway);

/* The last fd of s is being closed: a call with no outcome leaves none (a probe's place
 * is given back). */
void tb_prot_closed(struct tb_sock *s);

/* For `timebox stats`: calls fn with each protected destination's numbers. */
struct tb_prot_counts {
	uint32_t breaker_state;        /* enum tb_breaker_state */
	uint64_t breaker_opened, breaker_refused, retries, retry_refused;
	int32_t auto_limit;            /* 0: not auto */
	int64_t min_rtt_ns, rtt_ns;
};
void tb_prot_each(void (*fn)(void *ctx, const struct tb_dest *d,
			     const struct tb_prot_counts *c), void *ctx);

/* Forked child: locks re-initialised; the parent's calls in flight are not the child's. */
void tb_prot_fork_child(void);

#endif
