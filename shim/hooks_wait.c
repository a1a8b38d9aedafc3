/* hooks_wait.c - poll, ppoll, select, pselect (and FORTIFY's __poll_chk/__ppoll_chk).
 * A governed socket in the set is marked as waited on for the duration of the call, so the
 * watchdog can cut it; the program's own timeout is left exactly as it asked. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/select.h>

#include "clock.h"
#include "fdtable.h"
#include "hooks.h"
#include "libc_compat.h"
#include "real.h"
#include "sock.h"
#include "thread.h"
#include "waits.h"
#include "watchdog.h"
#include "xfer.h"

#ifdef __GLIBC__
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
		const sigset_t *ss, size_t fdslen);
#endif

/* Governed sockets marked per call, at most. Beyond this many in one set the rest are left
 * unmarked (they are still cut if another thread waits on them): no allocation here. */
#define WAITSET_MAX 64

struct waitset {
	int n;
	bool entered;      /* a group is open in the thread's record of waits (waits.h) */
	unsigned base;
	unsigned added;    /* entries the group added to the record */
	uintptr_t sp;      /* the hook's frame address */
	struct {
		struct tb_sock *s;
		int index;       /* in the pollfd array; -1 for select */
		uint32_t gen;
		uint8_t waiting; /* 1 << side for each side whose wait began */
		short rec[2];    /* each side's entry in the record, -1 none; set while waiting */
	} e[WAITSET_MAX];
};

/* Marks the waits for one governed fd. A wait that is already due is settled here: a read
 * side with data queued is left unmarked (the call returns at once anyway); otherwise the
 * socket is expired now, and its shutdown makes the real call return at once. Inlined into
 * each hook, as its counterpart unmark: a poll of one socket is on the path of every
 * exchange of a client with timeouts of its own (curl, libpq). */
static inline __attribute__((always_inline)) void
mark(struct waitset *ws, struct tb_sock *s, int fd, int index, bool rd, bool wr, int64_t now)
{
	uint32_t w = tb_sock_word(s);
	int64_t unused;
	int k;

	if (TB_ST(w) != TB_ST_OPEN) {
		if (TB_ST(w) != TB_ST_CONNECTING)
			return;
		/* The handshake may be over without the program having been told (a
		 * server-speaks-first client polls POLLIN for the banner): then this is a
		 * wait for the first byte, not for the handshake. */
		tb_xfer_confirm_open(s, fd);
		w = tb_sock_word(s);
		if (TB_ST(w) == TB_ST_CONNECTING) {
			rd = false;
			wr = true; /* the handshake: one wait, on the connect phase */
		}
	}
	if (rd && !tb_xfer_polled_read_governed(s, TB_ST_GEN(w)))
		rd = false;
	if ((!rd && !wr) || ws->n == WAITSET_MAX)
		return;
	if (!ws->entered) {
		/* Before any wait_begin: abandoned waits must not hold their counts. */
		ws->base = tb_waits_enter(ws->sp);
		ws->entered = true;
	}
	k = ws->n++;
	ws->e[k].s = s;
	ws->e[k].index = index;
	ws->e[k].gen = TB_ST_GEN(w);
	ws->e[k].waiting = 0;
	for (int side = TB_RD; side <= TB_WR; side++) {
		struct tb_expiry e;
		int i;

		if (!(side == TB_RD ? rd : wr))
			continue;
		e = tb_wd_wait_begin(s, (enum tb_side)side, fd, now);
		if (e.at > now) {
			ws->e[k].waiting |= (uint8_t)(1u << side);
			i = tb_waits_add(s, (enum tb_side)side, TB_ST_GEN(w), ws->sp);
			ws->e[k].rec[side] = (short)i;
			ws->added += i >= 0;
			continue;
		}
		tb_sock_wait_end(s, (enum tb_side)side, now, false, TB_ST_GEN(w));
		if (side == TB_RD && tb_sock_rd_ready(fd))
			continue;
		tb_sock_expire(s, TB_ST_GEN(w), (enum tb_side)side, e.phase, fd, true, now,
			       &unused);
	}
}

/* poll's verdict on a CONNECTING socket: writable, or readable (a server that speaks first),
 * without an error or hang-up, means the handshake is done. */
static void note_connected(struct tb_sock *s, short re)
{
	if ((re & (POLLOUT | POLLIN)) && !(re & (POLLERR | POLLHUP | POLLNVAL)))
		tb_sock_set_open(s);
}

/* A poll that did not wait (timeout 0) marks nothing, but its answer is how many programs
 * (lftp: poll(POLLOUT, 0) then SO_ERROR) learn that a non-blocking connect completed. */
static void note_polled(const struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++) {
		struct tb_sock *s;

		if (fds[i].revents == 0 || (s = tb_fd_sock(fds[i].fd)) == NULL)
			continue;
		if (TB_ST(tb_sock_word(s)) == TB_ST_CONNECTING)
			note_connected(s, fds[i].revents);
	}
}

static inline __attribute__((always_inline)) void
unmark(struct waitset *ws, const struct pollfd *fds, int64_t now)
{
	for (int k = 0; k < ws->n; k++) {
		struct tb_sock *s = ws->e[k].s;

		for (int side = TB_RD; side <= TB_WR; side++)
			if ((ws->e[k].waiting & (1u << side)) &&
			    tb_waits_take(ws->e[k].rec[side], s, (enum tb_side)side))
				tb_sock_wait_end(s, (enum tb_side)side, now, false, ws->e[k].gen);
		if (fds != NULL && ws->e[k].index >= 0)
			note_connected(s, fds[ws->e[k].index].revents);
	}
	if (ws->entered)
		tb_waits_leave(ws->base, ws->added);
}

/* A wait set with nothing marked yet, for the hook whose frame is sp. */
static inline void waitset_init(struct waitset *ws, uintptr_t sp)
{
	ws->n = 0;
	ws->entered = false;
	ws->added = 0;
	ws->sp = sp;
}

/* Inlined into poll and ppoll: the hook's frame is the one the record of waits names. */
static inline __attribute__((always_inline)) int
poll_common(struct pollfd *fds, nfds_t nfds, const struct timespec *ts, const sigset_t *ss,
	    int timeout_ms, bool is_ppoll)
{
	struct waitset ws;
	int64_t now = 0;
	bool waits = is_ppoll ? (ts == NULL || ts->tv_sec != 0 || ts->tv_nsec != 0)
			      : timeout_ms != 0;
	int *errp = tb_errp(); /* looked up once */
	int r, err, saved = *errp;

	waitset_init(&ws, (uintptr_t)__builtin_frame_address(0));
	if (waits && atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed) >= 0) {
		for (nfds_t i = 0; i < nfds; i++) {
			struct tb_sock *s = tb_fd_sock(fds[i].fd);

			if (s == NULL)
				continue;
			if (now == 0)
				now = tb_now();
			mark(&ws, s, fds[i].fd, (int)i, fds[i].events & (POLLIN | POLLPRI | POLLRDHUP),
			     fds[i].events & POLLOUT, now);
		}
	}
	if (ws.n == 0) {
		if (waits || atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed) < 0) {
			if (is_ppoll)
				return tb_real.ppoll(fds, nfds, ts, ss);
			return tb_real.poll(fds, nfds, timeout_ms);
		}
		r = is_ppoll ? tb_real.ppoll(fds, nfds, ts, ss) : tb_real.poll(fds, nfds, 0);
		if (r > 0)
			note_polled(fds, nfds); /* keeps errno: nothing here fails */
		return r;
	}
	if (ws.n >= 2)
		tb_thread_mark_multiplexed(); /* two calls at once: an event loop (thread.h) */
	*errp = saved;
	r = is_ppoll ? tb_real.ppoll(fds, nfds, ts, ss) : tb_real.poll(fds, nfds, timeout_ms);
	err = r < 0 ? *errp : saved;
	unmark(&ws, r > 0 ? fds : NULL, tb_now());
	*errp = err;
	return r;
}

TB_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll_common(fds, nfds, NULL, NULL, timeout, false);
}

#ifdef __GLIBC__ /* FORTIFY entry points: musl has none */
TB_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return poll(fds, nfds, timeout);
}
#endif

TB_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
		    const sigset_t *ss)
{
	return poll_common(fds, nfds, ts, ss, 0, true);
}

#ifdef __GLIBC__ /* FORTIFY entry points: musl has none */
TB_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
			  const sigset_t *ss, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return ppoll(fds, nfds, ts, ss);
}
#endif

/* select's sets: mark governed fds present in the read or write set. */
static void mark_sets(struct waitset *ws, int nfds, fd_set *rd, fd_set *wr)
{
	int hi = atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed);
	int64_t now = 0;

	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	if (hi + 1 < nfds)
		nfds = hi + 1;
	for (int fd = 0; fd < nfds; fd++) {
		bool r = rd != NULL && FD_ISSET(fd, rd);
		bool w = wr != NULL && FD_ISSET(fd, wr);
		struct tb_sock *s;

		if (!r && !w)
			continue;
		s = tb_fd_sock(fd);
		if (s == NULL)
			continue;
		if (now == 0)
			now = tb_now();
		mark(ws, s, fd, -1, r, w, now);
	}
	if (ws->n >= 2)
		tb_thread_mark_multiplexed(); /* two calls at once: an event loop (thread.h) */
}

/* select's verdict on CONNECTING sockets: readable or writable, but a failed connect is
 * both too, so the kernel is asked (tb_xfer_confirm_open). Also after a select that did
 * not wait, for the programs that learn the handshake's end from one. */
static void note_selected(int nfds, fd_set *rd, fd_set *wr)
{
	int hi = atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed);

	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	if (hi + 1 < nfds)
		nfds = hi + 1;
	for (int fd = 0; fd < nfds; fd++) {
		struct tb_sock *s;

		if (!(rd != NULL && FD_ISSET(fd, rd)) && !(wr != NULL && FD_ISSET(fd, wr)))
			continue;
		s = tb_fd_sock(fd);
		if (s != NULL && TB_ST(tb_sock_word(s)) == TB_ST_CONNECTING)
			tb_xfer_confirm_open(s, fd);
	}
}

static void unmark_sets(struct waitset *ws, int nfds, int r, fd_set *rd, fd_set *wr)
{
	unmark(ws, NULL, tb_now());
	if (r > 0)
		note_selected(nfds, rd, wr);
}

TB_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	struct waitset ws;
	int r, err, saved = errno;

	waitset_init(&ws, (uintptr_t)__builtin_frame_address(0));
	if (tv == NULL || tv->tv_sec != 0 || tv->tv_usec != 0)
		mark_sets(&ws, nfds, rd, wr);
	if (ws.n == 0) {
		r = tb_real.select(nfds, rd, wr, ex, tv);
		if (r > 0 && atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed) >= 0)
			note_selected(nfds, rd, wr); /* keeps errno */
		return r;
	}
	errno = saved;
	r = tb_real.select(nfds, rd, wr, ex, tv);
	err = r < 0 ? errno : saved;
	unmark_sets(&ws, nfds, r, rd, wr);
	errno = err;
	return r;
}

TB_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
		      const sigset_t *ss)
{
	struct waitset ws;
	int r, err, saved = errno;

	waitset_init(&ws, (uintptr_t)__builtin_frame_address(0));
	if (ts == NULL || ts->tv_sec != 0 || ts->tv_nsec != 0)
		mark_sets(&ws, nfds, rd, wr);
	if (ws.n == 0) {
		r = tb_real.pselect(nfds, rd, wr, ex, ts, ss);
		if (r > 0 && atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed) >= 0)
			note_selected(nfds, rd, wr); /* keeps errno */
		return r;
	}
	errno = saved;
	r = tb_real.pselect(nfds, rd, wr, ex, ts, ss);
	err = r < 0 ? errno : saved;
	unmark_sets(&ws, nfds, r, rd, wr);
	errno = err;
	return r;
}
