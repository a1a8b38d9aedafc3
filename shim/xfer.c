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
#include "init.h"
#include "log.h"
#include "real.h"

int tb_xfer_timed_out(struct tb_sock *s)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	uint32_t w = tb_sock_word(s);

	tb_sock_await_log(s); /* before the program sees the error, and perhaps exits on it */
	if (!atomic_exchange(&s->delivered, true))
		tb_budget_on_expired(tb_budget_here(), set, &s->dest, TB_ST_PHASE(w),
				     atomic_load_explicit(&s->call_deadline, memory_order_relaxed));
	errno = set->on_timeout == TB_ON_TIMEOUT_EAGAIN ? EAGAIN : ETIMEDOUT;
	return -1;
}

int tb_xfer_refuse(struct tb_sock *s, int fd, int step, int64_t now)
{
	uint32_t w = tb_sock_word(s);
	int64_t unused;

	/* The budget already knows (tb_budget_step told it): do not tell it twice. */
	atomic_store(&s->delivered, true);
	if (step == TB_STEP_RETRY_WINDOW) {
		tb_log_reject(TB_PHASE_DEADLINE, &s->dest, fd, "retry_window");
		tb_sock_mark_expired(s, TB_ST_GEN(w), TB_PHASE_DEADLINE, fd);
	} else {
		tb_sock_expire(s, TB_ST_GEN(w), TB_WR, TB_PHASE_DEADLINE, fd, true, now, &unused);
	}
	return tb_xfer_timed_out(s);
}

/* An EXPIRED slot may be stale: the program closed the fd where we could not see it
 * (glibc's fclose, a raw syscall) and the number now names something else. */
static bool still_ours(struct tb_sock *s, int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    (uint64_t)st.st_ino == atomic_load_explicit(&s->ino, memory_order_relaxed))
		return true;
	if (tb_fd_take(fd) == s)
		tb_sock_unref(s);
	return false;
}

int tb_xfer_begin(struct tb_xfer *x, struct tb_sock *s, int fd, enum tb_side side,
		  bool dontwait)
{
	uint32_t w = tb_sock_word(s);
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	bool blocking;
	int64_t now, unused;
	struct tb_expiry e;

	x->s = s;
	x->fd = fd;
	x->side = side;
	x->gen = TB_ST_GEN(w);
	x->waited = false;
	x->sigpipe = false;
	x->saved_errno = errno;
	if (TB_UNLIKELY(TB_ST(w) == TB_ST_EXPIRED)) {
		if (!still_ours(s, fd)) {
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

		if (step != TB_STEP_GO)
			return tb_xfer_refuse(s, fd, step, now);
		tb_sock_set_call(s, start, deadline);
	}
	if (!blocking)
		return 0;
	e = tb_sock_wait_begin(s, side, fd, now);
	if (TB_LIKELY(e.at > now)) {
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
