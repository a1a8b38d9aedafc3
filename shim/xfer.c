/* xfer.c - one transfer on a governed socket, before and after the real call.
 * The hot path: no lock, no allocation, no system call unless something expires. */
#include "xfer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "budget.h"
#include "clock.h"
#include "configure.h"
#include "fdtable.h"
#include "hooks.h"
#include "log.h"
#include "protect.h"
#include "real.h"
#include "request.h"
#include "stale.h"
#include "waits.h"
#include "watchdog.h"
#include "thread.h"
#include "stats.h"

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
	if (first && tell_budget && tb_sock_enter(s, TB_ST_GEN(w))) {
		tb_budget_on_expired(tb_budget_here(), set, &s->dest, TB_ST_PHASE(w),
				     atomic_load_explicit(&s->call_deadline, memory_order_relaxed));
		tb_sock_leave(s);
	}
	errno = first && set->on_timeout == TB_ON_TIMEOUT_EAGAIN ? EAGAIN : ETIMEDOUT;
	return -1;
}

int tb_xfer_timed_out(struct tb_sock *s)
{
	return deliver(s, true);
}

/* Fails a step that the thread's budget refused (deadline spent, retry window): logs it,
 * marks the socket expired for the deadline and shuts it down. Returns -1, errno set.
 * Called inside a section (sock.h, rule 12), which it leaves. */
static int refuse(struct tb_sock *s, int fd, int step, int64_t now)
{
	uint32_t w = tb_sock_word(s);
	int64_t unused;

	if (step == TB_STEP_RETRY_WINDOW) {
		struct tb_dest d = s->dest; /* under the caller's section (sock.h, rule 12) */

		tb_sock_leave(s);
		tb_log_reject(TB_PHASE_DEADLINE, &d, fd, "retry_window");
		tb_sock_mark_expired(s, TB_ST_GEN(w), TB_PHASE_DEADLINE, fd);
	} else {
		tb_sock_leave(s);
		tb_sock_expire(s, TB_ST_GEN(w), TB_WR, TB_PHASE_DEADLINE, fd, true, now, &unused);
	}
	/* The budget already knows (tb_budget_step told it): do not tell it twice. */
	return deliver(s, false);
}

/*
 * A notice (`event=notice`) is a limitation, not a fault: the program is healthy and
 * timebox chose to stop governing something on one of its connections. DESIGN's rule is
 * that nothing is printed unless something expires or is misconfigured (cron mails
 * stderr, scripts parse it), so the kind is counted for the destination every time
 * (`timebox stats`, timebox_notices_total) and the line goes out only at log_level = info,
 * once per process per kind (`told`). log_level is the process's (a rule cannot set it):
 * read from the defaults, as the exit summary's is. True when the caller is to write the
 * line.
 */
static bool notice_wanted(struct tb_sock *s, enum tb_notice k, atomic_bool *told)
{
	tb_stats_notice(s, k);
	if (tb_default_settings.log_level != TB_LOG_LEVEL_INFO)
		return false;
	return !atomic_load_explicit(told, memory_order_relaxed) && !atomic_exchange(told, true);
}

static __attribute__((noinline, cold)) void note_tls_answered(struct tb_sock *s, uint32_t gen)
{
	static atomic_bool told;
	char dest[TB_DEST_STRLEN], body[512];

	/* Counted once per connection: the bit stays through later publishes (publish). */
	if (atomic_fetch_or_explicit(&s->frame_state, TB_FS_NOTED, memory_order_relaxed) &
	    TB_FS_NOTED)
		return;
	if (!notice_wanted(s, TB_NOTICE_TLS_ANSWERED_WAIT, &told) || !tb_sock_enter(s, gen))
		return;
	tb_dest_format(&s->dest, dest, sizeof(dest));
	tb_sock_leave(s);
	snprintf(body, sizeof(body), "event=notice what=tls_answered_wait dest=%s "
		 "effect=\"waits in poll, select and epoll on a TLS connection after its answer "
		 "are not governed (HTTP inside TLS is invisible: an idle pooled connection and a "
		 "stalled body look alike); blocking reads stay governed\"", dest);
	tb_log_error(body);
}

bool tb_xfer_polled_read_governed(struct tb_sock *s, uint32_t gen)
{
	unsigned fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed);

	if (TB_LIKELY((fs & TB_FS_STATE) != TB_FRAME_ANSWERED))
		return true;
	if (!(fs & TB_FS_NOTED))
		note_tls_answered(s, gen);
	return false;
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

/* A session's send: no step and no deadline (frame.h). */
static int step_session(struct tb_sock *s, int64_t now)
{
	if (atomic_load_explicit(&s->call_deadline, memory_order_relaxed) != TB_NEVER)
		tb_sock_set_call(s, now, TB_NEVER);
	return TB_STEP_GO;
}

/* step_call on a framed socket (its published state past RAW): out of line. */
static __attribute__((noinline)) int step_framed(struct tb_sock *s,
						      const struct tb_settings *set,
						      struct tb_budget *b, unsigned fs,
						      int64_t now)
{
	int64_t start, deadline;
	int step;

	switch (fs & TB_FS_STATE) {
	case TB_FRAME_SESSION:
		return step_session(s, now);
	case TB_FRAME_RESTING:
	case TB_FRAME_AWAITING:
	case TB_FRAME_ANSWERED:
		if (!(fs & TB_FS_STARTS)) {
			step = tb_budget_step_continue(b, set, &s->dest, now, &start, &deadline);
			break;
		}
		tb_budget_on_response(b, set); /* the previous call was answered */
		/* fall through */
	default:
		step = tb_budget_step(b, set, &s->dest, now, &start, &deadline);
		break;
	}
	tb_sock_set_call(s, start, deadline); /* refused: the call that expired */
	return step;
}

/* step_call on an unframed socket (raw, or not decided yet): the system-call rule. */
static inline __attribute__((always_inline)) int step_unframed(struct tb_sock *s,
							       const struct tb_settings *set,
							       int64_t now)
{
	int64_t start, deadline;
	int step = tb_budget_step_next(tb_budget_here(), set, &s->dest, now, &start, &deadline);

	tb_sock_set_call(s, start, deadline); /* refused: the call that expired */
	return step;
}

/*
 * step_call on an event loop's thread (tb_thread_mark_multiplexed): the socket carries its
 * own call. A send opens a new one when it begins a request - on a framed socket when the
 * framing says so, on an unframed one when response bytes were read since the last send
 * (the system-call rule, per socket) - and when the socket's call has none running (a
 * session's end, an answered framed call) or its deadline passed with nothing cut (the
 * program was busy with other sockets; a wait would have been cut). Otherwise the send
 * continues the socket's call, begun by its connect or its request's first send. Never
 * refused: the thread's retry window is for programs that make one call at a time.
 * Without a deadline, or with scope=process, the thread's budget as always.
 */
static __attribute__((noinline)) int step_own(struct tb_sock *s, const struct tb_settings *set,
					      unsigned fs, int64_t now)
{
	unsigned st = fs & TB_FS_STATE;
	int64_t deadline;
	bool starts;

	if (set->deadline_ns <= 0 || set->scope == TB_SCOPE_PROCESS)
		return st > TB_FRAME_RAW ? step_framed(s, set, tb_budget_here(), fs, now) :
					   step_unframed(s, set, now);
	if (st == TB_FRAME_SESSION)
		return step_session(s, now);
	if (st > TB_FRAME_RAW) /* resting, awaiting, answered: the framing knows */
		starts = (fs & TB_FS_STARTS) != 0;
	else
		starts = atomic_load_explicit(&s->got_bytes, memory_order_relaxed);
	deadline = atomic_load_explicit(&s->call_deadline, memory_order_relaxed);
	if (starts || deadline == TB_NEVER || now >= deadline)
		tb_sock_set_call(s, now, tb_budget_add_sat(now, set->deadline_ns));
	return TB_STEP_GO;
}

/*
 * The thread has a request deadline (request.h: an inbound request's, the API's): the call's
 * deadline becomes the smaller of its own and the request's, and a send after the request's
 * has passed is refused - nothing is sent (the downstream would work for a caller that has
 * given up). The call's start moves back to the request's then, so that the refusal's line
 * says how long the request has run and what it was given. Out of line: only a thread
 * inside a request comes here.
 */
static __attribute__((noinline)) int step_request(struct tb_sock *s, const struct tb_settings *set,
						  int64_t now)
{
	struct tb_req_tag tag;
	int64_t start;
	int64_t r = tb_req_bound(set, &tag, &start);

	if (r == TB_NEVER || r > atomic_load_explicit(&s->call_deadline, memory_order_relaxed))
		return TB_STEP_GO;
	tb_sock_set_request(s, r, &tag);
	if (now < r)
		return TB_STEP_GO;
	atomic_store_explicit(&s->call_start, start, memory_order_relaxed);
	tb_stats_not_sent(&s->dest); /* inside the caller's section (sock.h, rule 12) */
	return TB_STEP_EXPIRED;
}

/*
 * A send is a step of the thread's call (budget.h), as the framing sees it (frame.h): on a
 * session, no step and no deadline at all; a send that begins a new request on an answered
 * connection first closes the answered call; a framed send that does not (a handshake's next
 * flight, authentication, a pipelined request) continues the call under way, even though
 * bytes were read since the last send; unframed (raw, or not decided yet), the system-call
 * rule (any byte read since the last send answered the call). Sets the socket's call.
 * Unframed inline (the hot path); a framed socket's step is step_framed's.
 */
static inline __attribute__((always_inline)) int step_call(struct tb_sock *s,
							   const struct tb_settings *set,
							   int64_t now)
{
	unsigned fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed);
	int step;

	if (TB_UNLIKELY(tb_thread_multiplexed))
		step = step_own(s, set, fs, now);
	else if (TB_UNLIKELY((fs & TB_FS_STATE) > TB_FRAME_RAW))
		step = step_framed(s, set, tb_budget_here(), fs, now);
	else
		step = step_unframed(s, set, now);
	if (TB_UNLIKELY(tb_req_deadline() != TB_NEVER) && step == TB_STEP_GO)
		return step_request(s, set, now);
	return step;
}

/* The wait begins after its expiry: fail at once, unless the data is already here.
 * `report`: tell the thread now (tb_xfer_timed_out); otherwise -1 with errno untouched,
 * and the expiry is reported by whoever reports it next - with on_timeout=eagain only the
 * first report says EAGAIN, and it must be the one the program sees. */
static __attribute__((noinline, cold)) int wait_past_expiry(struct tb_xfer *x,
							     struct tb_sock *s, int fd,
							     enum tb_side side, int64_t now,
							     struct tb_expiry e, bool report)
{
	int64_t unused;

	tb_sock_wait_end(s, side, now, false, x->gen);
	if (side == TB_RD && tb_sock_rd_ready(fd)) {
		errno = x->saved_errno;
		return 0;
	}
	tb_sock_expire(s, x->gen, side, e.phase, fd, true, now, &unused);
	return report ? tb_xfer_timed_out(s) : -1;
}

/* The blocking part of a begin: the thread's wait record, the socket's wait, the watchdog;
 * or the expiry at once when the wait begins past it. Inlined: the record's frame address
 * is that of the function the begin is inlined into - the hook's governed body (LTO) or
 * tb_xfer_begin, tb_xfer_wait - below the exported hook (waits.h). */
static inline __attribute__((always_inline)) int
begin_wait(struct tb_xfer *x, struct tb_sock *s, int fd, enum tb_side side, int64_t now,
	   bool report)
{
	uintptr_t sp;
	struct tb_expiry e;

	/* Before wait_begin: an abandoned wait on this socket must not hold its count. */
	sp = (uintptr_t)__builtin_frame_address(0);
	x->rec_base = tb_waits_enter(sp);
	e = tb_wd_wait_begin(s, side, fd, now);
	if (TB_LIKELY(e.at > now)) {
		x->rec = tb_waits_add(s, side, x->gen, sp);
		x->waited = true;
		return 0;
	}
	return wait_past_expiry(x, s, fd, side, now, e, report);
}

/* An EXPIRED slot may be stale: the program closed the fd where we could not see it and
 * the number now names something else (then the call is the program's own) - or, since
 * the call began, another socket, with the same pool entry at a new generation: not ours
 * either, and its slot stays (regress/expired_stale_reuse). */
static __attribute__((noinline, cold)) int begin_expired(struct tb_xfer *x, struct tb_sock *s,
							  int fd)
{
	if (!tb_stale_check_gen(fd, s, x->gen)) {
		x->s = NULL;
		errno = x->saved_errno;
		return 0;
	}
	return tb_xfer_timed_out(s);
}

/* Inlined into each caller with link-time optimisation (the hooks' governed bodies): the
 * transfer's state then lives in registers, not in memory between two calls. */
__attribute__((always_inline)) inline int tb_xfer_begin(struct tb_xfer *x, struct tb_sock *s,
							 int fd, enum tb_side side, bool dontwait)
{
	uint32_t w = tb_sock_word(s);
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	bool blocking;
	int64_t now;

	x->s = s;
	x->fd = fd;
	x->side = side;
	x->gen = TB_ST_GEN(w);
	x->waited = false;
	x->sigpipe = false;
	x->peek = false;
	x->buf = NULL; /* the hook names what moves (tb_xfer_data); a caller that cannot (stdio's */
	x->iov = NULL; /* own reads and writes) leaves the bytes unseen by the framing */
	x->iovcnt = 0;
	x->errp = tb_errp(); /* one look-up of the thread's errno for the whole transfer */
	x->saved_errno = *x->errp;
	if (TB_UNLIKELY(TB_ST(w) == TB_ST_EXPIRED))
		return begin_expired(x, s, fd);
	x->can_block = !atomic_load_explicit(&s->nonblock, memory_order_relaxed);
	blocking = !dontwait && x->can_block;
	if (side == TB_RD && !blocking)
		return 0;
	now = x->now = tb_now();
	if (side == TB_WR && (set->deadline_ns > 0 || TB_UNLIKELY(tb_req_deadline() != TB_NEVER))) {
		int step;

		if (!tb_sock_enter(s, x->gen)) { /* closed under us: no longer ours to govern */
			x->s = NULL;
			errno = x->saved_errno;
			return 0;
		}
		step = step_call(s, set, now);
		if (step != TB_STEP_GO)
			return refuse(s, fd, step, now); /* leaves the section */
		tb_sock_leave(s);
	}
	if (!blocking)
		return 0;
	return begin_wait(x, s, fd, side, now, true);
}

int tb_xfer_wait(struct tb_xfer *x)
{
	struct tb_sock *s = x->s;

	if (s == NULL)
		return 0;
	if (TB_ST_GEN(tb_sock_word(s)) != x->gen) {
		x->s = NULL; /* closed under us: the rest is the program's own call */
		return 0;
	}
	/* Not reported here: the send may return the bytes it already moved, and the next
	 * call reports the cut; or it returns -1 and tb_xfer_end reports it, once. */
	return begin_wait(x, s, x->fd, x->side, tb_now(), false);
}


/* Publishes the framing's state for the expiry, the watchdog and the next step (sock.h, rule
 * 11); a framing that turned RAW goes back to its pool. Under frame_flag. */
static unsigned publish(struct tb_sock *s, const struct tb_frame *f)
{
	unsigned fs = (unsigned)tb_frame_state(f);

	if (fs == TB_FRAME_AWAITING && tb_frame_answer_begun(f))
		fs |= TB_FS_BEGUN;
	if (fs >= TB_FRAME_RESTING && tb_frame_send_starts_call(f))
		fs |= TB_FS_STARTS;
	if (fs == TB_FRAME_RAW)
		tb_sock_frame_over(s);
	fs |= atomic_load_explicit(&s->frame_state, memory_order_relaxed) &
	      (TB_FS_NOTED | TB_FS_PLAIN);
	atomic_store_explicit(&s->frame_state, (unsigned char)fs, memory_order_relaxed);
	return fs;
}

/*
 * Tells that framing stopped following a connection whose protocol it
 * had recognised (`was`): from here on the system-call rules tell its calls apart, and an
 * idle pooled connection of it may be cut as raw ones may (docs/limitations.md). `why`:
 * "unframed" (bytes it cannot follow: malformed, or past its bounds), "unseen" (bytes moved
 * where no hook could see them outside a body it was skipping: MSG_TRUNC, stdio's own
 * writes) or "overlap" (two transfers at once, whose order it cannot know). Counted per
 * connection, written only at log_level = info (notice_wanted). A connection that never looked like a
 * known protocol is raw from its first bytes and is not worth a line. Inside a section.
 */
static __attribute__((noinline, cold)) void note_framing_raw(struct tb_sock *s, int fd,
							     enum tb_proto was, const char *why)
{
	static atomic_bool told;
	char dest[TB_DEST_STRLEN], body[512];

	if (was == TB_PROTO_AUTO || was == TB_PROTO_RAW || was == TB_PROTO_SESSION)
		return;
	if (!notice_wanted(s, TB_NOTICE_FRAMING_RAW, &told))
		return;
	tb_dest_format(&s->dest, dest, sizeof(dest));
	snprintf(body, sizeof(body), "event=notice what=framing_raw dest=%s fd=%d protocol=%s "
		 "reason=%s effect=\"this connection's calls are told apart by the system-call "
		 "rules from here on (protocol raw), so an idle pooled connection may be cut; "
		 "set protocol for this destination in a rule to decide\"", dest,
		 fd, tb_proto_name(was), why);
	tb_log_error(body);
}

/* Framing is over for s: a transfer overlapped another (see rule 11), or nothing can be fed.
 * The caller holds the framing (its try-flag). */
static void __attribute__((noinline, cold)) abandon(struct tb_sock *s, int fd)
{
	const struct tb_frame *f = tb_sock_framing(s);
	enum tb_proto was;

	if (f == NULL)
		return; /* RAW already, and published */
	was = (enum tb_proto)f->proto;
	tb_sock_frame_over(s);
	atomic_store_explicit(&s->frame_state, TB_FRAME_RAW, memory_order_relaxed);
	note_framing_raw(s, fd, was, "overlap");
}

/* The bytes of x that moved (r of them, r == 0: the peer closed) through the framing f. */
static unsigned feed_bytes(struct tb_frame *f, const struct tb_xfer *x, size_t r)
{
	bool rd = x->side == TB_RD;
	unsigned ev = 0;

	if (x->buf != NULL || r == 0)
		return rd ? tb_frame_received(f, x->buf, r) : tb_frame_sent(f, x->buf, r);
	if (x->iov == NULL)
		return tb_frame_unseen(f, !rd, r);
	for (size_t i = 0; i < x->iovcnt && r > 0; i++) {
		size_t n = x->iov[i].iov_len < r ? x->iov[i].iov_len : r;

		if (n == 0)
			continue;
		ev |= rd ? tb_frame_received(f, x->iov[i].iov_base, n)
			 : tb_frame_sent(f, x->iov[i].iov_base, n);
		r -= n;
	}
	return ev;
}

/* feed's part under the try-flag: feeds and publishes. */
static unsigned feed_held(struct tb_sock *s, const struct tb_xfer *x, size_t r)
{
	struct tb_frame *f = tb_sock_framing(s);
	uint8_t was;
	unsigned ev;

	if (f == NULL)
		return 0; /* framing turned RAW since the caller looked: nothing to feed */
	was = f->proto;
	ev = feed_bytes(f, x, r);
	publish(s, f);
	if (TB_UNLIKELY(ev & TB_FRAME_EV_RAW))
		note_framing_raw(s, x->fd, (enum tb_proto)was,
				 x->buf == NULL && x->iov == NULL && r > 0 ? "unseen" : "unframed");
	return ev;
}

/*
 * Feeds a transfer to the socket's framing, under its try-flag (sock.h, rule 11), and
 * publishes the state. Returns the TB_FRAME_EV_* bits. `fs` is the state published before.
 */
static unsigned feed(struct tb_sock *s, const struct tb_xfer *x, size_t r)
{
	unsigned char fl = 0;
	unsigned ev;

	if (x->peek)
		return 0;
	if (!atomic_compare_exchange_strong(&s->frame_flag, &fl, 1)) {
		/* Another transfer is feeding (1): it turns RAW when it lets go. Or it just let go
		 * (0), and these bytes can no longer be fed in order: RAW now. */
		if (fl != 2 && atomic_exchange(&s->frame_flag, 2) == 0)
			abandon(s, x->fd);
		return 0;
	}
	ev = feed_held(s, x, r);
	fl = 1;
	if (!atomic_compare_exchange_strong(&s->frame_flag, &fl, 0))
		abandon(s, x->fd); /* another transfer overlapped this one */
	return ev;
}

/*
 * A transfer of r bytes (r == 0: a read saw EOF) on a socket being framed (`fs`: published
 * state before, not RAW): feeds it, then tells the budget what a read means. A framed call
 * is answered when its last response is complete (CALL_ENDS: the call's deadline no longer
 * runs on the socket), or - TLS - when application data came back (ANSWERED); a read
 * while awaiting is not an answer yet, and a session's reads are nobody's. Out of line: a
 * raw socket never comes here.
 */
static void framed_end_in(struct tb_sock *s, const struct tb_xfer *x, size_t r, unsigned fs)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	unsigned ev = feed(s, x, r);
	unsigned now_fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed);

	if (x->side != TB_RD)
		return;
	if (TB_UNLIKELY(ev & TB_FRAME_EV_5XX) && set->protects)
		tb_prot_http_status(s, (ev & TB_FRAME_EV_GATEWAY) != 0);
	switch (now_fs & TB_FS_STATE) {
	case TB_FRAME_RAW:
	case TB_FRAME_UNKNOWN:
		if (r > 0) /* the system-call rule */
			tb_budget_on_response(tb_budget_here(), set);
		return;
	case TB_FRAME_ANSWERED:
		if ((fs & TB_FS_STATE) != TB_FRAME_ANSWERED)
			tb_budget_on_response(tb_budget_here(), set);
		return;
	default:
		break;
	}
	if (ev & TB_FRAME_EV_CALL_ENDS) {
		tb_budget_on_response(tb_budget_here(), set);
		tb_sock_set_call(s, atomic_load_explicit(&s->call_start, memory_order_relaxed),
				 TB_NEVER);
	}
}

/* framed_end_in inside a section (sock.h, rule 12): the framing is rewritten on reuse. */
static __attribute__((noinline)) void framed_end(struct tb_sock *s, const struct tb_xfer *x,
						 size_t r, unsigned fs)
{
	if (!tb_sock_enter(s, x->gen))
		return; /* closed (and perhaps reused) under us: its framing is not ours */
	framed_end_in(s, x, r, fs);
	tb_sock_leave(s);
}

/* tb_xfer_end of a call that moved no bytes on s, still the socket the call began on: an
 * error, EOF, or an expiry during the call. `err`: errno as the call left it. */
static __attribute__((noinline)) ssize_t end_no_bytes(struct tb_xfer *x, struct tb_sock *s,
						      const struct tb_settings *set, ssize_t r,
						      int err)
{
	if (x->waited)
		tb_sock_wait_end(s, x->side, tb_now(), false, x->gen);
	if (TB_ST(tb_sock_word(s)) == TB_ST_EXPIRED)
		return tb_xfer_timed_out(s);
	if (r == 0) {
		unsigned fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed);

		/* The peer closed: a body delimited by EOF ends here. */
		if (x->side == TB_RD && (fs & TB_FS_STATE) != TB_FRAME_RAW)
			framed_end(s, x, 0, fs);
		if (TB_UNLIKELY(set->protects) && x->side == TB_RD)
			tb_prot_eof(s); /* a request closed unanswered fails its call */
		*x->errp = x->saved_errno;
		return 0;
	}
	if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
		tb_budget_on_failure(tb_budget_here(), set);
		if (TB_UNLIKELY(set->protects) && tb_prot_is_reset(err))
			tb_prot_failed(s, TB_PROT_RESET);
	}
	if (err == EPIPE && x->sigpipe)
		raise(SIGPIPE);
	*x->errp = err;
	return r;
}

/* Inlined into each caller with link-time optimisation, as tb_xfer_begin. */
__attribute__((always_inline)) inline ssize_t tb_xfer_end(struct tb_xfer *x, ssize_t r)
{
	struct tb_sock *s = x->s;
	const struct tb_settings *set;
	int err = *x->errp;
	int64_t rx_at = 0;

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
		*x->errp = err;
		return r;
	}
	set = atomic_load_explicit(&s->set, memory_order_relaxed);
	if (x->side == TB_RD) {
		if (r >= 0)
			rx_at = tb_stats_received(s, r);
	} else if (r > 0) {
		tb_stats_sent(s, x->now);
		if (TB_UNLIKELY(set->protects))
			tb_prot_sent(s, x->now);
	}
	if (r > 0) {
		unsigned fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed);

		tb_sock_moved(s, x->side, x->waited, x->gen);
		if (TB_UNLIKELY((fs & TB_FS_STATE) != TB_FRAME_RAW))
			framed_end(s, x, (size_t)r, fs);
		else if (x->side == TB_RD) /* unframed: any byte read answers the call */
			tb_budget_on_response(tb_budget_here(), set);
		/* After the framing: a 5xx status in these bytes has failed the call first. */
		if (TB_UNLIKELY(set->protects) && x->side == TB_RD)
			tb_prot_answered(s, rx_at); /* the statistics' clock reading, if any */
		*x->errp = x->saved_errno;
		return r;
	}
	return end_no_bytes(x, s, set, r, err);
}

void tb_xfer_abandon_stale(struct tb_xfer *x)
{
	struct tb_sock *s = x->s;

	/* The wait began on s; end it before s can go back to the pool. The budget is not
	 * told: nothing was attempted on the socket. The slot is taken under `busy`, at the
	 * generation the call began with: the number may have been closed and connected
	 * again since the send failed (regress/expired_stale_reuse). */
	if (s != NULL && TB_ST_GEN(tb_sock_word(s)) == x->gen) {
		if (x->waited)
			tb_sock_wait_end(s, x->side, tb_now(), false, x->gen);
		tb_stale_drop(x->fd, s, x->gen);
	}
	x->s = NULL;
	errno = x->saved_errno;
}
