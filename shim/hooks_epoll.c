/* hooks_epoll.c - epoll_create, epoll_create1, epoll_ctl, epoll_wait, epoll_pwait,
 * epoll_pwait2. A thread in epoll_wait visibly waits on the governed sockets registered in
 * that instance, for the direction their phase needs, exactly as poll's waiters do. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>

#include "clock.h"
#include "epoll_set.h"
#include "fdtable.h"
#include "hooks.h"
#include "libc_compat.h"
#include "real.h"
#include "sock.h"
#include "thread.h"
#include "waits.h"
#include "watchdog.h"
#include "xfer.h"

#ifndef EPOLLRDHUP
#define EPOLLRDHUP 0x2000
#endif

int epoll_pwait2(int epfd, struct epoll_event *ev, int maxev, const struct timespec *ts,
		 const sigset_t *ss);

/* Governed registrations looked at per call, at most: no allocation in epoll_wait. Beyond
 * this many in one instance the rest are left unmarked (still cut when another thread
 * waits on them, or when the program's own read or write blocks). */
#define EPSET_MAX 64

/* How long a marking wait's settlement stands: within it, a wait that finds events ready
 * marks nothing (see wait_governed). A loop that never blocks still has its registrations
 * settled this often: a deadline passed unseen is cut at most this late. */
#define SETTLED_NS 10000000

struct epwait {
	int n;
	bool waits;        /* the call may block: mark */
	bool entered;      /* a group is open in the thread's record of waits (waits.h) */
	bool full;         /* EPSET_MAX kept: the scan may have stopped short */
	unsigned base;
	uintptr_t sp;
	int64_t now;
	int64_t first_due; /* the earliest expiry of a wait marked, or now for one left due */
	struct {
		struct tb_sock *s;
		uint64_t tag, data;
		uint32_t events, gen;
		int fd;
		bool connecting, marked[2];
		short rec[2];
	} e[EPSET_MAX];
};

/* The identity an entry is registered under: a pool entry reused for another socket has
 * another generation, so a number closed unseen and reused never inherits a registration. */
static uint64_t sock_tag(struct tb_sock *s, uint32_t w)
{
	return (uint64_t)s->index << 32 | TB_ST_GEN(w);
}

/* Starts the wait on one side of e[k]. A wait already due is settled now, as poll's is: a
 * read side with data queued is left alone; otherwise the socket is cut, and the cut makes
 * the real call return at once. */
static void mark_side(struct epwait *ws, int k, enum tb_side side)
{
	struct tb_sock *s = ws->e[k].s;
	uint32_t gen = ws->e[k].gen;
	struct tb_expiry ex;
	int64_t unused;

	if (!ws->entered) {
		/* Before any wait_begin: abandoned waits must not hold their counts. */
		ws->base = tb_waits_enter(ws->sp);
		ws->entered = true;
	}
	ex = tb_wd_wait_begin(s, side, ws->e[k].fd, ws->now);
	if (ex.at < ws->first_due)
		ws->first_due = ex.at > ws->now ? ex.at : ws->now;
	if (ex.at > ws->now) {
		ws->e[k].marked[side] = true;
		ws->e[k].rec[side] = (short)tb_waits_add(s, side, gen, ws->sp);
		return;
	}
	tb_sock_wait_end(s, side, ws->now, false, gen);
	if (side == TB_RD && tb_sock_rd_ready(ws->e[k].fd))
		return;
	tb_sock_expire(s, gen, side, ex.phase, ws->e[k].fd, true, ws->now, &unused);
}

/*
 * One registration of the instance (lock-free scan). Kept when it names the governed
 * socket it was registered for and is either to be marked (a call that may block) or to be
 * matched against the results (a handshake under way, a one-shot that may fire).
 * Directions: the handshake waits on the connect phase whatever was asked; an open socket
 * waits for reading when EPOLLIN is asked, and for writing when EPOLLOUT is asked level-
 * triggered only: edge-triggered loops (mio, some libevent users) keep EPOLLOUT armed for
 * good, and a write wait on a socket with nothing to send would be cut as a stalled upload.
 */
static bool take(void *ctx, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	struct epwait *ws = ctx;
	struct tb_sock *s = tb_fd_sock(fd);
	uint32_t w;
	bool rd, wr, connecting;
	int k;

	if (s == NULL || events == 0)
		return true;
	w = tb_sock_word(s);
	if (sock_tag(s, w) != tag)
		return true; /* the number now names another socket */
	if (TB_ST(w) != TB_ST_OPEN && TB_ST(w) != TB_ST_CONNECTING)
		return true;
	connecting = TB_ST(w) == TB_ST_CONNECTING;
	if (connecting && ws->waits) {
		/* A handshake over unseen (a server-speaks-first client asks for EPOLLIN):
		 * then this is a wait for the first byte. One system call, while connecting. */
		tb_xfer_confirm_open(s, fd);
		w = tb_sock_word(s);
		connecting = TB_ST(w) == TB_ST_CONNECTING;
	}
	rd = !connecting && (events & (EPOLLIN | EPOLLPRI | EPOLLRDHUP)) &&
	     tb_xfer_polled_read_governed(s, TB_ST_GEN(w));
	wr = connecting || ((events & EPOLLOUT) && !(events & EPOLLET));
	if (!ws->waits && !connecting && !(events & EPOLLONESHOT))
		return true;
	if (ws->waits && !rd && !wr && !(events & EPOLLONESHOT))
		return true;
	k = ws->n++;
	ws->e[k].s = s;
	ws->e[k].tag = tag;
	ws->e[k].data = data;
	ws->e[k].events = events;
	ws->e[k].gen = TB_ST_GEN(w);
	ws->e[k].fd = fd;
	ws->e[k].connecting = connecting;
	ws->e[k].marked[TB_RD] = ws->e[k].marked[TB_WR] = false;
	ws->e[k].rec[TB_RD] = ws->e[k].rec[TB_WR] = -1;
	if (ws->waits && rd)
		mark_side(ws, k, TB_RD);
	if (ws->waits && wr)
		mark_side(ws, k, TB_WR);
	ws->full = ws->n == EPSET_MAX;
	return !ws->full;
}

/* The results of a call, for disarming the one-shots past those kept (finish). */
struct fired {
	struct tb_epset *set;
	const struct epoll_event *ev;
	int r;
};

static bool disarm_fired(void *ctx, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	const struct fired *f = ctx;

	if (!(events & EPOLLONESHOT))
		return true;
	for (int i = 0; i < f->r; i++)
		if (f->ev[i].data.u64 == data) {
			tb_epset_disarm(f->set, fd, tag);
			break;
		}
	return true;
}

/* The event the call returned for e[k], matched by the program's epoll_data (what it
 * registered is all the kernel hands back), or NULL. Two registrations may carry the same
 * data (0 when the program never sets it, one pointer for both fds of a connection), and
 * registrations timebox does not follow are not known here: the event found may be
 * another fd's. So it is a hint, never a verdict on this socket (see finish). */
static const struct epoll_event *result_of(const struct epwait *ws, int k,
					   const struct epoll_event *ev, int r)
{
	for (int i = 0; i < r; i++)
		if (ev[i].data.u64 == ws->e[k].data)
			return &ev[i];
	return NULL;
}

/*
 * After the call: ends the waits; a handshake that may be done (an event out or in, no
 * error, under its data) is asked of the kernel (getpeername, once per connection), since
 * the event may be another fd's with equal data: taken on trust, it ended the connect
 * phase of a handshake still under way (regress/epoll_shared_data_connect). A one-shot
 * whose data came back watches nothing more: when that event was another fd's, the
 * socket's waits in epoll_wait go unmarked until the program re-arms it (never cut
 * wrongly; docs/limitations.md).
 */
static void finish(struct epwait *ws, struct tb_epset *set, const struct epoll_event *ev, int r)
{
	int64_t now = ws->entered ? tb_now() : 0;
	int added = 0;

	for (int k = 0; k < ws->n; k++) {
		struct tb_sock *s = ws->e[k].s;
		const struct epoll_event *got;

		for (int side = TB_RD; side <= TB_WR; side++) {
			added += ws->e[k].rec[side] >= 0;
			if (ws->e[k].marked[side] &&
			    tb_waits_take(ws->e[k].rec[side], s, (enum tb_side)side))
				tb_sock_wait_end(s, (enum tb_side)side, now, false, ws->e[k].gen);
		}
		if (r <= 0 || (!ws->e[k].connecting && !(ws->e[k].events & EPOLLONESHOT)))
			continue;
		got = result_of(ws, k, ev, r);
		if (got == NULL)
			continue;
		if (ws->e[k].connecting && (got->events & (EPOLLOUT | EPOLLIN)) &&
		    !(got->events & (EPOLLERR | EPOLLHUP)) && tb_fd_sock(ws->e[k].fd) == s)
			tb_xfer_confirm_open(s, ws->e[k].fd);
		if ((ws->e[k].events & EPOLLONESHOT) && set != NULL)
			tb_epset_disarm(set, ws->e[k].fd, ws->e[k].tag);
	}
	if (ws->entered)
		tb_waits_leave(ws->base, (unsigned)added);
	/* One-shots the scan did not reach fired too: taken for armed, they were marked in
	 * every later wait while the kernel watched nothing for them, and their idle
	 * connections cut (regress/epoll_oneshot_past_64). */
	if (ws->full && r > 0 && set != NULL &&
	    atomic_load_explicit(&set->oneshots, memory_order_relaxed) != 0) {
		struct fired f = { set, ev, r };

		tb_epset_scan(set, disarm_fired, &f);
	}
}

enum wait_kind { W_WAIT, W_PWAIT, W_PWAIT2 };

static int call_real(enum wait_kind kind, int epfd, struct epoll_event *ev, int maxev, int ms,
		     const struct timespec *ts, const sigset_t *ss)
{
	switch (kind) {
	case W_WAIT:
		return tb_real.epoll_wait(epfd, ev, maxev, ms);
	case W_PWAIT:
		return tb_real.epoll_pwait(epfd, ev, maxev, ms, ss);
	default:
		return tb_real.epoll_pwait2(epfd, ev, maxev, ts, ss);
	}
}

/*
 * Whether a call that may block can first ask the kernel without blocking (wait_governed).
 * Only where the two calls cannot differ but in time: no signal mask (an unreadable one
 * fails natively with EFAULT before anything is looked at) and a valid timeout (an invalid
 * one fails with EINVAL), and no one-shot registration (whose firing must be matched to
 * disarm it, finish). And only while the last marking wait's settlement stands: every wait
 * due by then was settled by it, and a loop that always finds events ready is settled
 * again every SETTLED_NS.
 */
static bool may_ask_first(const struct tb_epset *set, enum wait_kind kind,
			  const struct timespec *ts, const sigset_t *ss, int64_t now)
{
	if (ss != NULL || (kind == W_PWAIT2 && ts != NULL &&
			   (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)))
		return false;
	return atomic_load_explicit(&set->busy, memory_order_relaxed) &&
	       now < atomic_load_explicit(&set->settled_until, memory_order_relaxed) &&
	       atomic_load_explicit(&set->oneshots, memory_order_relaxed) == 0;
}

/* Whether the loop is under load, from what its wait returned: a loop that gets one event
 * per wait mostly blocks, and asking the kernel first would only cost it one more system
 * call per wait. Stored only when it changes (the instance is shared by its waiters). */
static void note_load(struct tb_epset *set, int r)
{
	bool busy = r > 1;

	if (atomic_load_explicit(&set->busy, memory_order_relaxed) != busy)
		atomic_store_explicit(&set->busy, busy, memory_order_relaxed);
}

/*
 * An event loop under load finds events ready nearly every time it waits (64 connections,
 * 30 exchanges per epoll_wait in make bench), and marking each registration - its wait
 * begun, recorded, ended - cost more than the exchanges themselves. A call that returns
 * without blocking was no wait, just as a zero-timeout call is none: so the kernel is asked
 * first with a zero timeout, which returns what the call itself would have returned at once (events
 * ready are handed back before the kernel looks at signals or the timeout), and only when
 * nothing is ready are the registrations marked and the call made as asked. One more
 * epoll_wait when the loop does block: so only in a loop whose last wait returned more
 * than one event (note_load).
 */
static TB_SLOW int wait_governed(struct tb_epset *set, enum wait_kind kind, int epfd,
				 struct epoll_event *ev, int maxev, int ms,
				 const struct timespec *ts, const sigset_t *ss)
{
	struct epwait ws;
	int r, err, saved = errno;

	tb_thread_mark_multiplexed(); /* the registering thread may not be the waiting one */
	/* A call that cannot block (timeout 0: a busy loop) is not charged as a wait. */
	ws.waits = kind == W_PWAIT2 ? (ts == NULL || ts->tv_sec != 0 || ts->tv_nsec != 0)
				    : ms != 0;
	ws.now = tb_now();
	if (ws.waits && may_ask_first(set, kind, ts, ss, ws.now)) {
		r = tb_real.epoll_wait(epfd, ev, maxev, 0);
		note_load(set, r);
		if (r != 0) {
			/* Events, or the error the call itself would have failed with. */
			err = r < 0 ? errno : saved;
			tb_epset_put_ref(set);
			errno = err;
			return r;
		}
		errno = saved;
	}
	ws.n = 0;
	ws.entered = false;
	ws.full = false;
	ws.sp = (uintptr_t)__builtin_frame_address(0);
	ws.first_due = TB_NEVER;
	tb_epset_scan(set, take, &ws);
	if (ws.waits)
		atomic_store_explicit(&set->settled_until,
				      ws.first_due < ws.now + SETTLED_NS ? ws.first_due
									 : ws.now + SETTLED_NS,
				      memory_order_relaxed);
	/* No reference held across the call: a handler that leaves it with siglongjmp, or a
	 * pthread_cancel, would never give it back, and the instance would outlive its close
	 * (regress/epoll_jump_ref_leak). Taken again after, for the one-shots. */
	tb_epset_put_ref(set);
	errno = saved;
	r = call_real(kind, epfd, ev, maxev, ms, ts, ss);
	err = r < 0 ? errno : saved;
	set = tb_epset_get(epfd); /* NULL when closed meanwhile: nothing to disarm */
	if (set != NULL)
		note_load(set, r);
	finish(&ws, set, ev, r);
	tb_epset_put_ref(set);
	errno = err;
	return r;
}

static int wait_common(enum wait_kind kind, int epfd, struct epoll_event *ev, int maxev,
		       int ms, const struct timespec *ts, const sigset_t *ss)
{
	struct tb_epset *set;

	/* Pass-through first: no governed socket ever, or an instance with none registered. */
	if (TB_LIKELY(atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed) < 0) ||
	    (set = tb_epset_get(epfd)) == NULL)
		return call_real(kind, epfd, ev, maxev, ms, ts, ss);
	if (atomic_load_explicit(&set->live, memory_order_relaxed) == 0) {
		tb_epset_put_ref(set);
		return call_real(kind, epfd, ev, maxev, ms, ts, ss);
	}
	return wait_governed(set, kind, epfd, ev, maxev, ms, ts, ss);
}

TB_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int maxev, int timeout)
{
	return wait_common(W_WAIT, epfd, ev, maxev, timeout, NULL, NULL);
}

TB_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int maxev, int timeout,
			  const sigset_t *ss)
{
	return wait_common(W_PWAIT, epfd, ev, maxev, timeout, NULL, ss);
}

TB_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int maxev,
			   const struct timespec *ts, const sigset_t *ss)
{
	return wait_common(W_PWAIT2, epfd, ev, maxev, 0, ts, ss);
}

/* A new instance: whatever was recorded under its number belonged to one closed unseen
 * (close_range, a raw close system call). */
static int created(int epfd)
{
	int saved = errno;

	if (epfd >= 0 && tb_epset_known(epfd) && !tb_foreign_process())
		tb_epset_drop(epfd);
	errno = saved;
	return epfd;
}

TB_EXPORT int epoll_create(int size)
{
	return created(tb_real.epoll_create(size));
}

TB_EXPORT int epoll_create1(int flags)
{
	return created(tb_real.epoll_create1(flags));
}

/* epoll_ctl succeeded on a governed socket: follow it. A failure to record (memory) leaves
 * the registration unfollowed - unprotected, never wrongly cut. */
static TB_SLOW void ctl_governed(int epfd, int op, int fd, const struct epoll_event *ev,
				 struct tb_sock *s)
{
	struct tb_epset *set;
	int saved = errno;
	uint64_t tag;

	/* No vfork check here (a getpid system call): the instance is the kernel's, and a
	 * vfork child reaches it through the fd it inherited, so what the child adds or
	 * deletes the parent's own instance now holds or no longer holds, and the table
	 * follows it - as F_SETFL's copy of O_NONBLOCK follows the shared file description.
	 * Event loops that switch a socket between reading and writing by DEL and ADD (redis's
	 * ae) paid four system calls per request for it (tests/regress/epoll_del_add_getpid.c). */
	if (tb_epset_init(atomic_load(&tb_fd_cap)) != 0)
		goto out;
	set = tb_epset_get(epfd);
	/* A DEL or MOD through a number with no record is made through a copy of an
	 * instance's fd (dup) or on a registration made before the socket was governed: the
	 * instance it changes may be one recorded under another number, whose record would
	 * keep marking what the kernel no longer watches (regress/epoll_del_through_dup).
	 * fd's registrations are forgotten everywhere: unmarked, never wrongly cut. */
	if (set == NULL && op != EPOLL_CTL_ADD)
		tb_epset_forget_fd(fd);
	if (op == EPOLL_CTL_DEL) {
		if (set != NULL) {
			tb_epset_del(set, fd);
			tb_epset_put_ref(set);
		}
		goto out;
	}
	if (ev == NULL) {
		tb_epset_put_ref(set);
		goto out;
	}
	tb_thread_mark_multiplexed(); /* an event loop: its sockets carry their own calls */
	tag = sock_tag(s, tb_sock_word(s));
	if (set == NULL && (set = tb_epset_get_or_make(epfd)) == NULL)
		goto out;
	tb_epset_put(set, fd, ev->events, tag, ev->data.u64);
	tb_epset_put_ref(set);
out:
	errno = saved;
}

TB_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = tb_real.epoll_ctl(epfd, op, fd, ev);
	struct tb_sock *s;

	if (r != 0 || TB_LIKELY((s = tb_fd_sock(fd)) == NULL))
		return r;
	/* A MOD of a registration the instance holds, as event loops make twice per exchange,
	 * rewrites it here: nothing on this path can change errno, nor needs the table made. */
	if (op == EPOLL_CTL_MOD && ev != NULL) {
		tb_thread_mark_multiplexed();
		if (tb_epset_modify(epfd, fd, ev->events, sock_tag(s, tb_sock_word(s)),
				    ev->data.u64))
			return 0;
	}
	ctl_governed(epfd, op, fd, ev, s);
	return 0;
}

/* A forked child: locks held by the parent's other threads are free. */
__attribute__((constructor)) static void epoll_atfork(void)
{
	tb_atfork(NULL, NULL, tb_epset_fork_child);
}
