/* xfer.c - one transfer on a governed socket, before and after the real call.
 * The hot path: no lock, no allocation, no system call unless something expires. */
#include "xfer.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "budget.h"
#include "clock.h"
#include "fdtable.h"
#include "hooks.h"
#include "log.h"
#include "real.h"
#include "stale.h"
#include "waits.h"
#include "watchdog.h"
#include "thread.h"

/*
 * Reports the socket's expiry to the calling thread: -1 and errno. With on_timeout=eagain
 * only the first report on a socket says EAGAIN (what a program with SO_RCVTIMEO expects
 * from the read that timed out); every later one says ETIMEDOUT. A non-blocking program
 * takes EAGAIN for "nothing yet" and polls again, and a shut-down socket is always
 * readable: EAGAIN forever would spin it at 100 % CPU. EOF would end the loop too, but a
 * close-delimited body would then pass for complete; ETIMEDOUT is an error every program
 * ends a transfer on. `tell_budget`: the first report also tells the thread's budget.
 */
static int deliver(struct tb_sock *s, bool tell_budget)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	uint32_t w = tb_sock_word(s);
	bool first = !atomic_exchange(&s->delivered, true);

	tb_sock_await_log(s); /* before the program sees the error, and perhaps exits on it */
	if (first && tell_budget)
		tb_budget_on_expired(tb_budget_here(), set, &s->dest, TB_ST_PHASE(w),
				     atomic_load_explicit(&s->call_deadline, memory_order_relaxed));
	errno = first && set->on_timeout == TB_ON_TIMEOUT_EAGAIN ? EAGAIN : ETIMEDOUT;
	return -1;
}

int tb_xfer_timed_out(struct tb_sock *s)
{
	return deliver(s, true);
}

int tb_xfer_refuse(struct tb_sock *s, int fd, int step, int64_t now)
{
	uint32_t w = tb_sock_word(s);
	int64_t unused;

	if (step == TB_STEP_RETRY_WINDOW) {
		tb_log_reject(TB_PHASE_DEADLINE, &s->dest, fd, "retry_window");
		tb_sock_mark_expired(s, TB_ST_GEN(w), TB_PHASE_DEADLINE, fd);
	} else {
		tb_sock_expire(s, TB_ST_GEN(w), TB_WR, TB_PHASE_DEADLINE, fd, true, now, &unused);
	}
	/* The budget already knows (tb_budget_step told it): do not tell it twice. */
	return deliver(s, false);
}

void tb_xfer_confirm_open(struct tb_sock *s, int fd)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	int saved = errno;

	if (TB_ST(tb_sock_word(s)) != TB_ST_CONNECTING)
		return;
	if (getpeername(fd, (struct sockaddr *)&peer, &len) == 0)
		tb_sock_set_open(s);
	errno = saved;
}

int tb_xfer_begin(struct tb_xfer *x, struct tb_sock *s, int fd, enum tb_side side,
		  bool dontwait)
{
	uint32_t w = tb_sock_word(s);
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	bool blocking;
	int64_t now, unused;
	uintptr_t sp;
	struct tb_expiry e;

	x->s = s;
	x->fd = fd;
	x->side = side;
	x->gen = TB_ST_GEN(w);
	x->waited = false;
	x->sigpipe = false;
	x->saved_errno = errno;
	if (TB_UNLIKELY(TB_ST(w) == TB_ST_EXPIRED)) {
		/* An EXPIRED slot may be stale: the program closed the fd where we could not
		 * see it and the number now names something else. */
		if (!tb_stale_check(fd, s)) {
			x->s = NULL;
			errno = x->saved_errno;
			return 0;
		}
		return tb_xfer_timed_out(s);
	}
	blocking = !dontwait && !atomic_load_explicit(&s->nonblock, memory_order_relaxed);
	if (side == TB_RD && !blocking)
		return 0;
	now = tb_now();
	if (side == TB_WR && set->deadline_ns > 0) {
		int64_t start, deadline;
		int step = tb_budget_step(tb_budget_here(), set, &s->dest, now, &start, &deadline);

		tb_sock_set_call(s, start, deadline); /* refused: the call that expired */
		if (step != TB_STEP_GO)
			return tb_xfer_refuse(s, fd, step, now);
	}
	if (!blocking)
		return 0;
	/* Before wait_begin: an abandoned wait on this socket must not hold its count. */
	sp = (uintptr_t)__builtin_frame_address(0);
	x->rec_base = tb_waits_enter(sp);
	e = tb_wd_wait_begin(s, side, fd, now);
	if (TB_LIKELY(e.at > now)) {
		x->rec = tb_waits_add(s, side, x->gen, sp);
		x->waited = true;
		return 0;
	}
	/* The wait begins after its expiry: fail at once, unless the data is already here. */
	tb_sock_wait_end(s, side, now, false, x->gen);
	if (side == TB_RD && tb_sock_rd_ready(fd)) {
		errno = x->saved_errno;
		return 0;
	}
	tb_sock_expire(s, TB_ST_GEN(w), side, e.phase, fd, true, now, &unused);
	return tb_xfer_timed_out(s);
}

ssize_t tb_xfer_end(struct tb_xfer *x, ssize_t r)
{
	struct tb_sock *s = x->s;
	const struct tb_settings *set;
	int err = errno;

	if (x->waited) {
		/* Unless the wait was ended for us (a nested handler judged it abandoned). */
		x->waited = tb_waits_take(x->rec, x->s, x->side);
		tb_waits_leave(x->rec_base, x->rec >= 0);
	}
	if (s != NULL && TB_ST_GEN(tb_sock_word(s)) != x->gen)
		s = NULL; /* closed (and perhaps reused) while we were in the call */
	if (s == NULL) {
		if (r < 0 && err == EPIPE && x->sigpipe)
			raise(SIGPIPE);
		errno = err;
		return r;
	}
	set = atomic_load_explicit(&s->set, memory_order_relaxed);
	if (r > 0) {
		if (x->waited)
			tb_sock_wait_end(s, x->side, 0, true, x->gen);
		tb_sock_progress(s, x->side);
		tb_sock_set_open(s);
		if (x->side == TB_RD)
			tb_budget_on_response(tb_budget_here(), set);
		errno = x->saved_errno;
		return r;
	}
	if (x->waited)
		tb_sock_wait_end(s, x->side, tb_now(), false, x->gen);
	if (TB_ST(tb_sock_word(s)) == TB_ST_EXPIRED)
		return tb_xfer_timed_out(s);
	if (r == 0) {
		errno = x->saved_errno;
		return 0;
	}
	if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)
		tb_budget_on_failure(tb_budget_here(), set);
	if (err == EPIPE && x->sigpipe)
		raise(SIGPIPE);
	errno = err;
	return r;
}

void tb_xfer_abandon_stale(struct tb_xfer *x)
{
	struct tb_sock *s = x->s;

	/* The wait began on s; end it before s can go back to the pool. The budget is not
	 * told: nothing was attempted on the socket. */
	if (s != NULL && TB_ST_GEN(tb_sock_word(s)) == x->gen) {
		if (x->waited)
			tb_sock_wait_end(s, x->side, tb_now(), false, x->gen);
		tb_stale_drop(x->fd, s);
	}
	x->s = NULL;
	errno = x->saved_errno;
}
