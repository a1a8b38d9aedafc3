/* budget.h - a thread's overall deadline (scope=call) or the process's (scope=process).
 * Pure state machine driven by the hooks' events; every function takes `now`. */
#ifndef TB_BUDGET_H
#define TB_BUDGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dest.h"
#include "settings.h"

/*
 * scope=call: the budget opens at the thread's first governed operation (connect, or a send)
 * and bounds everything the thread does on governed sockets until the call completes: the
 * thread sends again after reading response bytes (the next request), or closes a socket
 * after a response, or steps towards another destination (a write-only stream's sends
 * never complete a call: another request must not inherit their deadline) - except a retry
 * after a failed attempt towards another address with the same port (a replica of the
 * same service behind its name), and except the first destination after name lookups (a
 * lookup steps towards no destination: the call it opens is the connect's that follows; a
 * lookup after an answered one opens a call of its own, tb_budget_on_answer). Failed
 * attempts (refused, reset, a phase timeout) leave it open, so the
 * program's own retries spend the same deadline. When an expiry at the deadline has been
 * delivered, the budget closes and further attempts to the same destination fail at once
 * until `retry_window` has passed since the deadline. A step that comes after the deadline
 * when no wait was cut is the deadline's expiry only for a call that has failed attempts (a
 * retry after the program's own back-off); otherwise it starts a new call: a pool's
 * pre-opened connection, or a write-only stream between writes, is never cut for the time
 * the program spent elsewhere.
 *
 * scope=process: one budget opened at start-up (tb_budget_open_process) that never closes.
 * Each socket's call deadline is the process's start plus the deadline of the settings that
 * govern it (a rule's own deadline, or the defaults'), which is what `timebox check
 * --explain` shows.
 *
 * Signal handlers: a thread's budget may be used by a handler that interrupted the same
 * thread in the middle of an update. `busy` marks an update under way; a nested update sees
 * it and leaves the budget alone (a step goes ahead without a deadline, an event is
 * dropped), so the interrupted update finishes on consistent state. Only the thread that
 * owns the budget writes it (scope=process steps only read it).
 */
struct tb_budget {
	bool open;
	bool saw_response;    /* response bytes read since the thread's last send */
	bool failed;          /* an attempt of this call failed: later steps are retries */
	bool answered;        /* lookups opened the call and the last one was answered */
	int64_t start;        /* when the call opened */
	int64_t deadline;     /* absolute; TB_NEVER without a deadline */
	struct tb_dest dest;  /* where the call began */
	struct tb_dest fastfail_dest;
	int64_t fastfail_until; /* attempts to fastfail_dest fail until then (0: none) */
	int64_t fastfail_start;    /* the expired call that set the window: its start */
	int64_t fastfail_deadline; /* ... and its deadline (for the log) */
	unsigned char busy;   /* an update is under way on this thread (see above) */
};

/* Opens the process-wide budget at `now` (scope=process). */
void tb_budget_open_process(struct tb_budget *b, const struct tb_settings *s, int64_t now);

enum tb_step {
	TB_STEP_GO = 0,            /* go ahead within *start .. *deadline */
	TB_STEP_EXPIRED = -1,      /* a retry after the deadline passed unseen: its expiry */
	TB_STEP_RETRY_WINDOW = -2, /* an attempt after an expired deadline, inside retry_window */
};

/*
 * A governed operation begins a step of a call (connect, or a send) towards `d`.
 * Returns TB_STEP_GO and stores the call's start and deadline (TB_NEVER when there is none);
 * otherwise the attempt must fail at once, sending nothing (see enum tb_step), and *start
 * and *deadline are those of the call whose deadline expired (what the log line reports:
 * elapsed = now - *start, limit = *deadline - *start). They are set on every return.
 * scope=process: the call is the process, started at tb_budget_open_process's `now`, and
 * its deadline is that start plus s->deadline_ns (s: the socket's own settings).
 * A step nested in an update under way (a signal handler) goes ahead without a deadline.
 * @unittest test_budget.c: test_expired_step_reports_its_call, test_scope_process_rule_deadline,
 * test_nested_update_leaves_budget_alone
 */
int tb_budget_step(struct tb_budget *b, const struct tb_settings *s, const struct tb_dest *d,
		   int64_t now, int64_t *start, int64_t *deadline);

/* now + len, saturated at TB_NEVER: "2562047h" is a valid duration and means "never". */
static inline int64_t tb_budget_add_sat(int64_t now, int64_t len)
{
	return len >= TB_NEVER - now ? TB_NEVER : now + len;
}

/*
 * tb_budget_step, with its most frequent case inline: scope=call, the thread's previous call
 * was answered (a send after response bytes on a kept-alive connection) and no retry window
 * can refuse the step - which then only opens the next call, towards d, at now. Any other
 * case (and a step nested in an update under way) is tb_budget_step's. Same contract, same
 * state afterwards: the hot path's step without a function call or a destination compare.
 */
static inline int tb_budget_step_next(struct tb_budget *b, const struct tb_settings *s,
				      const struct tb_dest *d, int64_t now, int64_t *start,
				      int64_t *deadline)
{
	if (s->deadline_ns > 0 && s->scope != TB_SCOPE_PROCESS && !b->busy) {
		/* Marked busy before anything is read, as every update (see struct tb_budget). */
		b->busy = 1;
		atomic_signal_fence(memory_order_seq_cst);
		if (b->open && b->saw_response &&
		    (now >= b->fastfail_until || b->fastfail_until == 0)) {
			/* As tb_budget_step: the answered call closes, and the next one opens. */
			b->saw_response = false;
			b->failed = false;
			b->start = now;
			b->deadline = tb_budget_add_sat(now, s->deadline_ns);
			b->dest = *d;
			*start = now;
			*deadline = b->deadline;
			atomic_signal_fence(memory_order_seq_cst);
			b->busy = 0;
			return TB_STEP_GO;
		}
		atomic_signal_fence(memory_order_seq_cst);
		b->busy = 0;
	}
	return tb_budget_step(b, s, d, now, start, deadline);
}

/*
 * tb_budget_step for a send that the protocol says continues the call under way (a TLS
 * handshake flight, PostgreSQL authentication, a pipelined request): response bytes read
 * since the last send do not close the call (they were a handshake's or an earlier
 * pipelined answer's), and the call's answer is still to come. Everything else as
 * tb_budget_step (a call whose deadline passed unseen with nothing failed still gives way to
 * a new one: a pool's connection, opened and left idle, is not cut for the time it waited).
 * @unittest test_budget.c: test_continued_step_keeps_the_call
 */
int tb_budget_step_continue(struct tb_budget *b, const struct tb_settings *s,
			    const struct tb_dest *d, int64_t now, int64_t *start, int64_t *deadline);

/* Response bytes were read (the call has an answer; the next send starts a new call). */
void tb_budget_on_response(struct tb_budget *b, const struct tb_settings *s);

/*
 * A step towards no destination (a name lookup) got its answer. As a response ends a call
 * at the thread's next send, the answer ends the call that lookups opened at the thread's
 * next lookup, which opens a call of its own; the first destination stepped towards still
 * takes the call over (the lookup was its first step). A lookup retried after one that
 * failed joins the call, so the program's retries spend one deadline.
 * @unittest test_budget.c: test_answered_lookup_ends_its_call
 */
void tb_budget_on_answer(struct tb_budget *b, const struct tb_settings *s);

/* An attempt failed without an expiry at the deadline (refused, reset, phase timeout). */
void tb_budget_on_failure(struct tb_budget *b, const struct tb_settings *s);

/* A governed socket is closed by the thread: after a response this ends the call. */
void tb_budget_on_close(struct tb_budget *b, const struct tb_settings *s);

/*
 * An expiry was delivered to the thread on a socket to `d`. When `phase` is the deadline the
 * budget closes and `d` enters its retry window (deadline + retry_window); other phases are
 * failed attempts and leave the budget open. A deadline earlier than the open call's own
 * (`call_deadline` < its deadline: a request's, shim/request.h) closes the call without a
 * retry window.
 * @unittest test_budget.c: test_request_cut_leaves_no_retry_window
 */
void tb_budget_on_expired(struct tb_budget *b, const struct tb_settings *s,
			  const struct tb_dest *d, enum tb_phase phase, int64_t call_deadline);

/* Remaining time of the open budget at `now` (0 when spent), or TB_NEVER without one. */
int64_t tb_budget_remaining(const struct tb_budget *b, int64_t now);

#endif
