/* budget.c - the per-thread (or per-process) overall deadline.
 * See budget.h for the state machine; this file only moves between its states. */
#include "budget.h"

#include <sys/socket.h>

#include <stdatomic.h>
#include <string.h>

static int64_t add_sat(int64_t now, int64_t len)
{
	return tb_budget_add_sat(now, len);
}

/* A handler that interrupts an update on the same thread runs to completion before the
 * update resumes: so the nested one, not the interrupted one, must keep its hands off.
 * The signal fences keep the compiler from moving the budget's stores across the flag. */
static bool enter(struct tb_budget *b)
{
	if (b->busy)
		return false;
	b->busy = 1;
	atomic_signal_fence(memory_order_seq_cst);
	return true;
}

static void leave(struct tb_budget *b)
{
	atomic_signal_fence(memory_order_seq_cst);
	b->busy = 0;
}

static void close_call(struct tb_budget *b)
{
	b->open = false;
	b->saw_response = false;
	b->answered = false;
}

void tb_budget_open_process(struct tb_budget *b, const struct tb_settings *s, int64_t now)
{
	memset(b, 0, sizeof(*b));
	b->open = true;
	b->start = now;
	b->deadline = s->deadline_ns > 0 ? add_sat(now, s->deadline_ns) : TB_NEVER;
}

static inline __attribute__((always_inline)) int
step_locked(struct tb_budget *b, const struct tb_settings *s, const struct tb_dest *d,
	    int64_t now, int64_t *start, int64_t *deadline, bool continues);
static void expired_locked(struct tb_budget *b, const struct tb_settings *s,
			   const struct tb_dest *d, enum tb_phase phase, int64_t call_deadline);

static inline __attribute__((always_inline)) int step(struct tb_budget *b, const struct tb_settings *s, const struct tb_dest *d,
		int64_t now, int64_t *start, int64_t *deadline, bool continues)
{
	int rc;

	*start = now;
	*deadline = TB_NEVER;
	if (s->deadline_ns <= 0)
		return TB_STEP_GO;
	if (s->scope == TB_SCOPE_PROCESS) {
		/* Read-only: b->start was fixed before any thread could step. */
		*start = b->start;
		*deadline = add_sat(b->start, s->deadline_ns);
		return now < *deadline ? TB_STEP_GO : TB_STEP_EXPIRED;
	}
	if (!enter(b))
		return TB_STEP_GO;
	rc = step_locked(b, s, d, now, start, deadline, continues);
	leave(b);
	return rc;
}

int tb_budget_step(struct tb_budget *b, const struct tb_settings *s, const struct tb_dest *d,
		   int64_t now, int64_t *start, int64_t *deadline)
{
	return step(b, s, d, now, start, deadline, false);
}

int tb_budget_step_continue(struct tb_budget *b, const struct tb_settings *s,
			    const struct tb_dest *d, int64_t now, int64_t *start, int64_t *deadline)
{
	return step(b, s, d, now, start, deadline, true);
}

/* Inlined in each entry (their `continues` is a constant there): the hot path's step stays
 * one function, as it was before it had two callers. */
static inline __attribute__((always_inline)) int
step_locked(struct tb_budget *b, const struct tb_settings *s, const struct tb_dest *d,
	    int64_t now, int64_t *start, int64_t *deadline, bool continues)
{
	bool expired_now = false;

	if (continues)
		b->saw_response = false; /* what was read belongs to this call's exchange */
	else if (b->open && b->saw_response)
		close_call(b); /* the previous call was answered: this is the next one */
	/* A lookup after an answered one, with no destination stepped towards since, is the
	 * next call's, as a send after a response is. */
	if (b->open && b->answered && b->dest.family == 0 && d->family == 0)
		close_call(b);
	if (b->open && now >= b->deadline) {
		if (b->failed) {
			/* A retry after the deadline passed during the program's back-off: the
			 * thread learns it now, as if a wait had been cut at the deadline. */
			expired_now = true;
			expired_locked(b, s, &b->dest, TB_PHASE_DEADLINE, b->deadline);
		} else {
			close_call(b); /* nothing failed: the program was elsewhere; a new call */
		}
	}
	/* A call that lookups opened has no destination yet (family 0: every socket's has one):
	 * the first destination the thread steps towards is its own. The lookup is the first
	 * step of the call that connects to what it found, under the same deadline. */
	if (b->open && b->dest.family == 0 && d->family != 0) {
		b->dest = *d;
		b->answered = false;
	}
	/* A step towards another destination is another call - a write-only stream's send (a
	 * log shipper) opens a call that never gets an answer, and a request elsewhere must not
	 * inherit what is left of it - unless it retries a failed attempt on another address
	 * of the same service (same port: a replica behind the name). */
	if (b->open && !tb_dest_equal(d, &b->dest) &&
	    (!b->failed || d->port != b->dest.port || d->family == AF_UNIX))
		close_call(b);
	if (!b->open) {
		if (b->fastfail_until != 0 && now < b->fastfail_until &&
		    tb_dest_equal(d, &b->fastfail_dest)) {
			*start = b->fastfail_start;
			*deadline = b->fastfail_deadline;
			return expired_now ? TB_STEP_EXPIRED : TB_STEP_RETRY_WINDOW;
		}
		b->open = true;
		b->saw_response = false;
		b->failed = false;
		b->answered = false;
		b->start = now;
		b->deadline = add_sat(now, s->deadline_ns);
		b->dest = *d;
	}
	*start = b->start;
	*deadline = b->deadline;
	return TB_STEP_GO;
}

void tb_budget_on_response(struct tb_budget *b, const struct tb_settings *s)
{
	/* The hot path: one test, and the store only once per call. */
	if (s->scope != TB_SCOPE_PROCESS && b->open && !b->saw_response && enter(b)) {
		b->saw_response = true;
		leave(b);
	}
}

void tb_budget_on_answer(struct tb_budget *b, const struct tb_settings *s)
{
	if (s->scope != TB_SCOPE_PROCESS && b->open && b->dest.family == 0 && enter(b)) {
		b->answered = true;
		leave(b);
	}
}

static void failure_locked(struct tb_budget *b)
{
	b->saw_response = false;
	b->answered = false;
	b->failed = b->open;
}

void tb_budget_on_failure(struct tb_budget *b, const struct tb_settings *s)
{
	if (s->scope != TB_SCOPE_PROCESS && enter(b)) {
		failure_locked(b);
		leave(b);
	}
}

void tb_budget_on_close(struct tb_budget *b, const struct tb_settings *s)
{
	if (s->scope != TB_SCOPE_PROCESS && b->open && b->saw_response && enter(b)) {
		close_call(b);
		leave(b);
	}
}

static void expired_locked(struct tb_budget *b, const struct tb_settings *s,
			   const struct tb_dest *d, enum tb_phase phase, int64_t call_deadline)
{
	int64_t window;

	if (phase != TB_PHASE_DEADLINE) {
		failure_locked(b);
		return;
	}
	/* Cut before the call's own deadline: by the thread's request deadline (an inbound
	 * request's or the API's, shim/request.h), which the call drew on. The call ends with
	 * its request; no retry window, which would refuse the next request's calls. */
	if (b->open && call_deadline < b->deadline) {
		close_call(b);
		return;
	}
	window = tb_settings_retry_window(s);
	b->fastfail_dest = *d;
	b->fastfail_until = window > 0 && call_deadline < TB_NEVER ?
				    add_sat(call_deadline, window) : 0;
	b->fastfail_deadline = call_deadline;
	b->fastfail_start = call_deadline < TB_NEVER ? call_deadline - s->deadline_ns
						     : b->start;
	close_call(b);
}

void tb_budget_on_expired(struct tb_budget *b, const struct tb_settings *s,
			  const struct tb_dest *d, enum tb_phase phase, int64_t call_deadline)
{
	if (s->scope != TB_SCOPE_PROCESS && enter(b)) {
		expired_locked(b, s, d, phase, call_deadline);
		leave(b);
	}
}

int64_t tb_budget_remaining(const struct tb_budget *b, int64_t now)
{
	if (!b->open || b->deadline == TB_NEVER)
		return TB_NEVER;
	return b->deadline > now ? b->deadline - now : 0;
}
