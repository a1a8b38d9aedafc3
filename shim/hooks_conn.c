/* hooks_conn.c - connect (where a socket becomes governed), socket/accept (which only clear
 * a stale slot), and getsockopt(SO_ERROR) (where a non-blocking connect learns its fate). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "budget.h"
#include "clock.h"
#include "configure.h"
#include "fdtable.h"
#include "gates.h"
#include "hooks.h"
#include "init.h"
#include "log.h"
#include "prop_io.h"
#include "protect.h"
#include "real.h"
#include "request.h"
#include "sock.h"
#include "waits.h"
#include "stale.h"
#include "thread.h"
#include "watchdog.h"
#include "xfer.h"
#include "stats.h"

/* A slot still set for a new fd means its previous socket was closed where we could not
 * see it (glibc-internal close in fclose, a raw syscall): forget it before reuse. */
static void forget_stale(int fd)
{
	struct tb_sock *s = tb_foreign_process() ? NULL : tb_fd_take(fd);

	if (s != NULL)
		tb_sock_unref(s);
}

/*
 * Decides whether fd, about to connect to sa, is governed: a SOCK_STREAM socket to an
 * AF_INET/AF_INET6 address (or an AF_UNIX one a rule names), with some limit configured for
 * it by the rule that matches (first match wins) or the defaults. Returns the settings that
 * govern it (immutable, owned by the configuration) and fills *d, *ino and *nonblock;
 * NULL when the socket is left alone.
 */
static const struct tb_settings *governable(int fd, const struct sockaddr *sa, socklen_t len,
					    struct tb_dest *d, uint64_t *ino, bool *nonblock)
{
	const struct tb_settings *set;
	int type = 0, fl;
	socklen_t tl = sizeof(type);
	struct stat st;

	if (!atomic_load_explicit(&tb_governing, memory_order_relaxed))
		return NULL;
	set = tb_configure_governing(sa, len, d);
	if (set == NULL)
		return NULL;
	if (tb_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM)
		return NULL;
	if (tb_fstat_raw(fd, &st) < 0)
		return NULL;
	fl = tb_real.fcntl(fd, F_GETFL);
	if (fl < 0)
		return NULL;
	*ino = (uint64_t)st.st_ino;
	*nonblock = (fl & O_NONBLOCK) != 0;
	return set;
}

/*
 * A connection timebox cannot govern goes on natively, and the log says so once per
 * process and cause (tests/regress/sock_pool_oom.c): no memory for the socket or its
 * framing (each pool grows by an mmap; regress/frame_pool_oom.c), or a number past the fd table (sized from the hard RLIMIT_NOFILE at
 * start-up). Later ones are as ungoverned, and silent.
 */
static void say_ungoverned(int fd, bool no_memory)
{
	static atomic_bool said[2];
	char body[240];

	if (atomic_exchange(&said[no_memory], true))
		return;
	if (no_memory)
		snprintf(body, sizeof(body), "event=error what=sock_pool fd=%d error=\"no memory "
			 "for a governed socket or its framing; this connection and any other "
			 "that finds none are not governed\"", fd);
	else
		snprintf(body, sizeof(body), "event=error what=fd_table fd=%d error=\"the number "
			 "is past the fd table (RLIMIT_NOFILE raised after start-up); sockets "
			 "numbered so high are not governed\"", fd);
	tb_log_error(body);
}

/*
 * The real connect on a governed socket, marked as a wait when it blocks so the watchdog can
 * cut the handshake. `saved` is the caller's errno, given back on success. `sp` is the frame
 * address of the exported hook (the thread's record of waits, waits.h).
 */
static int connect_marked(struct tb_sock *s, int fd, const struct sockaddr *sa, socklen_t len,
			  int saved, uintptr_t sp)
{
	bool blocking = !atomic_load_explicit(&s->nonblock, memory_order_relaxed);
	uint32_t gen = TB_ST_GEN(tb_sock_word(s));
	int64_t now, unused;
	struct tb_expiry e;
	unsigned base = 0;
	int r, err, rec = -1;

	if (TB_ST(tb_sock_word(s)) == TB_ST_EXPIRED)
		return tb_xfer_timed_out(s);
	if (blocking) {
		now = tb_now();
		base = tb_waits_enter(sp);
		e = tb_wd_wait_begin(s, TB_WR, fd, now);
		if (e.at <= now) {
			tb_sock_wait_end(s, TB_WR, now, false, gen);
			tb_sock_expire(s, TB_ST_GEN(tb_sock_word(s)), TB_WR, e.phase, fd, true,
				       now, &unused);
			return tb_xfer_timed_out(s);
		}
		rec = tb_waits_add(s, TB_WR, gen, sp);
	}
	errno = saved;
	r = tb_real.connect(fd, sa, len);
	err = errno;
	if (blocking) {
		bool mine = tb_waits_take(rec, s, TB_WR);

		tb_waits_leave(base, rec >= 0);
		if (mine)
			tb_sock_wait_end(s, TB_WR, tb_now(), false, gen);
	}
	if (TB_ST(tb_sock_word(s)) == TB_ST_EXPIRED) {
		if (TB_ST_PHASE(tb_sock_word(s)) == TB_PHASE_CONNECT ||
		    TB_ST_PHASE(tb_sock_word(s)) == TB_PHASE_DEADLINE)
			tb_sock_release_slot(s); /* the handshake never completed */
		return tb_xfer_timed_out(s);
	}
	if (r == 0 || err == EISCONN) {
		tb_sock_set_open(s);
		tb_stats_connected(s);
	} else if (err != EINPROGRESS && err != EALREADY && err != EINTR) {
		const struct tb_settings *set = atomic_load(&s->set);

		tb_sock_release_slot(s); /* refused, unreachable: the slot was never used */
		tb_budget_on_failure(tb_budget_here(), set);
		if (TB_UNLIKELY(set->protects))
			tb_prot_failed(s, TB_PROT_REFUSED);
	}
	errno = r == 0 ? saved : err;
	return r;
}

/*
 * The connect of a thread with a request deadline (request.h): the call's deadline becomes
 * the smaller of its own (*deadline) and the request's, and a connect after the request's
 * has passed is refused at once (returns TB_STEP_REFUSED_REQUEST, logged here: no SYN is
 * sent for a caller that has given up). *by_request and *tag tell the request's deadline
 * applies.
 */
#define TB_STEP_REFUSED_REQUEST (-100)
static __attribute__((noinline)) int connect_request(const struct tb_settings *set,
						     const struct tb_dest *d, int fd, int64_t now,
						     int64_t *deadline, struct tb_req_tag *tag,
						     bool *by_request)
{
	int64_t start, r = tb_req_bound(set, tag, &start);

	if (r == TB_NEVER || r > *deadline)
		return TB_STEP_GO;
	*deadline = r;
	*by_request = true;
	if (now < r)
		return TB_STEP_GO;
	tb_stats_not_sent(d);
	tb_log_timeout_budget(TB_PHASE_DEADLINE, d, fd, now - start, r - start, 0, NULL, tag);
	return TB_STEP_REFUSED_REQUEST;
}

static int connect_governed(int fd, const struct sockaddr *sa, socklen_t len, uintptr_t sp)
{
	struct tb_dest d;
	uint64_t ino;
	bool nonblock;
	struct tb_sock *s;
	struct tb_budget *b;
	const struct tb_settings *set;
	struct tb_gate *gate = NULL;
	int64_t now, start, deadline;
	int step, saved = errno, slot_fd = -1, got;
	struct tb_req_tag req;
	struct tb_prot_ticket prot = { 0 };
	bool by_request = false;

	set = governable(fd, sa, len, &d, &ino, &nonblock);
	if (set == NULL) {
		errno = saved;
		return tb_real.connect(fd, sa, len);
	}
	now = tb_now();
	b = tb_budget_here();
	if (TB_UNLIKELY(tb_thread_multiplexed) && set->scope != TB_SCOPE_PROCESS) {
		/* An event loop's connection is a call of its own (thread.h): a fresh deadline,
		 * no retry window - it is not a retry of the request another socket lost. */
		start = now;
		deadline = set->deadline_ns > 0 ? tb_budget_add_sat(now, set->deadline_ns) : TB_NEVER;
		step = TB_STEP_GO;
	} else {
		step = tb_budget_step(b, set, &d, now, &start, &deadline);
	}
	if (step == TB_STEP_GO && TB_UNLIKELY(tb_req_deadline() != TB_NEVER))
		step = connect_request(set, &d, fd, now, &deadline, &req, &by_request);
	if (step != TB_STEP_GO) {
		if (step == TB_STEP_RETRY_WINDOW)
			tb_log_reject(TB_PHASE_DEADLINE, &d, fd, "retry_window");
		else if (step == TB_STEP_EXPIRED)
			tb_log_timeout(TB_PHASE_DEADLINE, &d, fd, now - start, deadline - start, 0);
		errno = set->on_timeout == TB_ON_TIMEOUT_EAGAIN ? EAGAIN : ETIMEDOUT;
		return -1;
	}
	/* The breaker and the retry budget refuse before the gate: a connect that will not be
	 * made takes no slot and waits for none. */
	if (TB_UNLIKELY(set->protects) && tb_prot_admit(set, &d, fd, now, &prot) < 0)
		return -1;
	if (set->max_conns > 0 && (gate = tb_gates_get(&d, set)) != NULL) {
		enum tb_phase phase = TB_PHASE_GATE;

		if (TB_UNLIKELY(set->max_conns_auto))
			tb_prot_gate(&prot, gate);

		tb_stale_sweep_gate(gate); /* full: first take back slots of sockets closed unseen */
		got = tb_gates_acquire(gate, set, nonblock, fd, start, deadline, &phase, &slot_fd);
		if (got > 0)
			gate = NULL; /* the shared gate is out of reach: ungated */
		if (got < 0) {
			int err = errno;

			if (err == ETIMEDOUT) {
				tb_budget_on_expired(b, set, &d, phase, deadline);
				if (set->on_timeout == TB_ON_TIMEOUT_EAGAIN)
					err = EAGAIN;
			} else if (err != EINTR) {
				tb_budget_on_failure(b, set);
			}
			tb_prot_drop(&prot); /* the gate is ours, not the downstream's failure */
			errno = err;
			return -1;
		}
		now = tb_now(); /* the handshake starts after the wait */
	}
	s = tb_sock_new(fd, set, &d, ino, nonblock, now);
	if (s == NULL || !tb_fd_set(fd, s)) {
		say_ungoverned(fd, s == NULL);
		if (s != NULL)
			tb_sock_unref(s);
		if (gate != NULL) {
			tb_gates_release(gate, slot_fd);
			tb_gates_in_hand(gate, -1);
		}
		tb_prot_drop(&prot);
		errno = saved;
		return tb_real.connect(fd, sa, len); /* ungoverned, not broken */
	}
	if (TB_UNLIKELY(prot.entry != 0))
		tb_prot_bind(s, &prot);
	if (gate != NULL) {
		tb_sock_hold_slot(s, gate, slot_fd);
		tb_gates_in_hand(gate, -1); /* the socket holds it now */
	}
	if (TB_UNLIKELY(set->propagate))
		tb_pout_connected(fd, s); /* its state is mapped here, never on the data path */
	tb_sock_set_call(s, start, deadline);
	if (by_request)
		tb_sock_set_request(s, deadline, &req);
	tb_stats_call_begin(s, start);
	/* Now rather than at the first wait, which may come inside a signal handler. */
	tb_wd_start();
	/* The statistics segment and timebox's threads are started by a process's first
	 * connect: the handshake's clock starts after them (regress/first_connect_startup). */
	tb_sock_connect_begins(s, tb_now());
	return connect_marked(s, fd, sa, len, saved, sp);
}

/* Is s still the socket fd names? A slot may outlive a close the hooks never saw (glibc's
 * fclose, a raw syscall) and the number now name a new socket; the inode tells. */
static bool same_socket(struct tb_sock *s, int fd)
{
	struct stat st;

	return tb_fstat_raw(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       (uint64_t)st.st_ino == atomic_load_explicit(&s->ino, memory_order_relaxed);
}

TB_EXPORT int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct tb_sock *s;
	int saved = errno;
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);

	tb_init();
	if (TB_UNLIKELY(tb_foreign_process())) /* a vfork child: its parent's tables, not its own */
		return tb_real.connect(fd, sa, len);
	s = tb_fd_sock(fd);
	if (s != NULL) {
		uint32_t st = TB_ST(tb_sock_word(s));

		if (same_socket(s, fd)) {
			errno = saved;
			if (st == TB_ST_CONNECTING || st == TB_ST_EXPIRED)
				return connect_marked(s, fd, sa, len, saved, sp);
			/* Connecting an established socket again ("expect EISCONN"): the
			 * kernel answers; its state and its gate slot are untouched. */
			return tb_real.connect(fd, sa, len);
		}
		forget_stale(fd);
		errno = saved;
	}
	return connect_governed(fd, sa, len, sp);
}

TB_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = tb_real.socket(domain, type, protocol);

	if (fd >= 0 && TB_UNLIKELY(tb_fd_sock(fd) != NULL))
		forget_stale(fd);
	return fd;
}

TB_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *alen)
{
	int nfd = tb_real.accept(fd, addr, alen);

	if (nfd >= 0 && TB_UNLIKELY(tb_fd_sock(nfd) != NULL))
		forget_stale(nfd);
	if (nfd >= 0 && TB_UNLIKELY(tb_default_settings.scope == TB_SCOPE_REQUEST))
		tb_pin_accepted(nfd);
	return nfd;
}

TB_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags)
{
	int nfd = tb_real.accept4(fd, addr, alen, flags);

	if (nfd >= 0 && TB_UNLIKELY(tb_fd_sock(nfd) != NULL))
		forget_stale(nfd);
	if (nfd >= 0 && TB_UNLIKELY(tb_default_settings.scope == TB_SCOPE_REQUEST))
		tb_pin_accepted(nfd);
	return nfd;
}

TB_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct tb_sock *s = tb_fd_sock(fd);
	int r, saved;

	if (TB_LIKELY(s == NULL) || level != SOL_SOCKET || name != SO_ERROR)
		return tb_real.getsockopt(fd, level, name, val, len);
	saved = errno;
	if (TB_ST(tb_sock_word(s)) == TB_ST_EXPIRED && val != NULL && len != NULL &&
	    *len >= (socklen_t)sizeof(int)) {
		/* The program asks why its connect or transfer failed: because it timed out.
		 * Reporting it here also tells the thread's budget (once). */
		tb_xfer_timed_out(s);
		*(int *)val = ETIMEDOUT;
		*len = sizeof(int);
		errno = saved;
		return 0;
	}
	r = tb_real.getsockopt(fd, level, name, val, len);
	if (r != 0 || val == NULL || TB_ST(tb_sock_word(s)) != TB_ST_CONNECTING)
		return r;
	if (*(int *)val != 0) {
		const struct tb_settings *set = atomic_load(&s->set);

		tb_sock_release_slot(s); /* a non-blocking connect that failed */
		tb_budget_on_failure(tb_budget_here(), set);
		if (TB_UNLIKELY(set->protects))
			tb_prot_failed(s, TB_PROT_REFUSED);
	} else {
		/* 0 is also what a connect still under way says: ask the kernel. */
		tb_xfer_confirm_open(s, fd);
		errno = saved;
	}
	return r;
}
