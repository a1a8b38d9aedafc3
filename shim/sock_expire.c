/* sock_expire.c - the act of expiring a governed socket: is the peer really the one
 * stalling, which fd still names the socket, then mark, cut, and log (in that order). */
#include "sock.h"

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fdtable.h"
#include "futex.h"
#include "thread.h"
#include "log.h"
#include "real.h"
#include "protect.h"
#include "stats.h"

/* tcpi_last_data_recv is kept in jiffies and reported in ms: allow one jiffy at HZ=100. */
#define JIFFY_NS (10 * TB_NS_PER_MS)
/* When a due read-side wait is not cut because data is queued, look again this soon. */
#define QUEUED_RECHECK_NS (10 * TB_NS_PER_MS)

/* poll, not recv(MSG_PEEK): a peek reports a pending error (ECONNRESET) by taking it, and
 * the program's own read that follows would then see a clean end of stream - a response
 * cut by a reset would pass for complete. poll reports it (POLLERR) and leaves it. */
bool tb_sock_rd_ready(int fd)
{
	int saved = errno;
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	bool ready = tb_real.poll(&p, 1, 0) == 1 && p.revents != 0 && !(p.revents & POLLNVAL);

	errno = saved;
	return ready;
}

/* TCP_INFO through the real getsockopt. Returns false when fd is not TCP, or when the
 * kernel's struct is too short to hold `need` bytes (kernels before 4.1 for bytes_acked). */
static bool tcp_info(int fd, struct tcp_info *ti, size_t need)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0, sizeof(*ti));
	if (tb_real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &len) < 0)
		return false;
	return len >= need;
}

/* fd's slot in the table names s. seq_cst: after the seq_cst raise of `busy`, this load
 * and close's (exchange of the slot, then load of busy) form the Dekker pair (rule 3). */
static bool slot_is(int fd, struct tb_sock *s)
{
	return fd >= 0 && fd < atomic_load_explicit(&tb_fd_cap, memory_order_acquire) &&
	       atomic_load(&tb_fdtab[fd]) == s;
}

/* Does fd still name this very socket (generation and inode)? Guards against an fd number
 * closed behind our back (fclose, a raw syscall) and reused. Under `busy` but for a vfork
 * child's look (sock.h). */
bool tb_sock_names(struct tb_sock *s, uint32_t gen, int fd)
{
	struct stat st;

	if (TB_ST_GEN(tb_sock_word(s)) != gen)
		return false;
	if (tb_fstat_raw(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	return (uint64_t)st.st_ino == atomic_load_explicit(&s->ino, memory_order_relaxed);
}

/* Under `busy`: fd's slot still points at s, and fd names it. */
static bool fd_is_ours(struct tb_sock *s, uint32_t gen, int fd)
{
	return slot_is(fd, s) && tb_sock_names(s, gen, fd);
}

/*
 * Under `busy`: an fd that names s, for the watchdog to act through. s->fd records the fd
 * of the last wait on s through any of its fds; when that one was closed (a dup) or names
 * something else now (a close the hooks never saw), another fd of s is searched for in the
 * fd table. Returns the fd (and records it), or -1 when none can be verified.
 */
static int find_fd(struct tb_sock *s, uint32_t gen)
{
	int fd = atomic_load(&s->fd);
	int hi = atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed);

	if (fd_is_ours(s, gen, fd))
		return fd;
	for (int i = 0; i <= hi; i++) {
		if (i == fd || tb_fd_sock(i) != s || !fd_is_ours(s, gen, i))
			continue;
		atomic_store(&s->fd, i);
		return i;
	}
	return -1;
}

/* After find_fd failed: a slot of the fd table that still points at s but names something
 * else is stale (the fd was closed where the hooks could not see it); it is untracked, so
 * that the object now behind that number is passed straight to libc. Checked and taken
 * under `busy` (tb_sock_take_if_stale): without it, the program could close the number and
 * a new connect get it, with the same pool entry, between the look and the take - which
 * then took the live socket (regress/wd_stale_slot_reuse). */
static void forget_stale_slot(struct tb_sock *s, uint32_t gen)
{
	if (tb_sock_take_if_stale(s, gen, atomic_load(&s->fd)))
		tb_sock_unref(s);
}

/* The silence of sd so far: the waits that ended, and the one under way if any. */
static int64_t rd_silence(struct tb_side_state *sd, int64_t now)
{
	struct tb_idle c = {
		atomic_load_explicit(&sd->idle_ns, memory_order_relaxed),
		atomic_load_explicit(&sd->wait_begin, memory_order_relaxed),
	};

	return tb_idle_silence(&c, atomic_load_explicit(&sd->waiters, memory_order_relaxed) != 0,
			       now);
}

/*
 * The read side's silence restarts `quiet` ago, when that is within the silence counted so
 * far - the waits that ended (a program's poll loop: idle_ns) and the one under way -
 * taken one jiffy late: never early. Returns true, with when to look again, when the wait
 * is then not due.
 */
static bool rd_restart_at(struct tb_sock *s, int64_t quiet, int64_t now, int64_t *recheck)
{
	struct tb_side_state *sd = &s->side[TB_RD];
	struct tb_expiry e;

	if (quiet + JIFFY_NS >= rd_silence(sd, now))
		return false; /* that was before the silence began */
	quiet = quiet > JIFFY_NS ? quiet - JIFFY_NS : 0;
	atomic_store_explicit(&sd->idle_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&sd->wait_begin, now - quiet, memory_order_relaxed);
	e = tb_sock_expiry(s, TB_RD);
	if (e.at <= now)
		return false;
	atomic_store_explicit(&sd->expiry, e.at, memory_order_relaxed);
	*recheck = e.at;
	return true;
}

/* What the read side's looks read of TCP_INFO: up to tcpi_last_ack_recv, which follows
 * tcpi_last_data_recv (both in every kernel's struct). */
#define RD_INFO_NEED (offsetof(struct tcp_info, tcpi_last_ack_recv) + sizeof(uint32_t))
_Static_assert(offsetof(struct tcp_info, tcpi_last_data_recv) <
		       offsetof(struct tcp_info, tcpi_last_ack_recv),
	       "tcpi_last_ack_recv follows tcpi_last_data_recv");

/*
 * Read side, at the would-be expiry of an idle phase: did bytes arrive that the program's
 * calls could not show? Under MSG_WAITALL (and stdio's unseen reads) the kernel moves
 * arriving bytes straight into the caller's buffer: nothing is queued, yet the peer is
 * talking. TCP_INFO's tcpi_last_data_recv says how long ago data last arrived; the
 * silence restarts then.
 */
static bool rd_heard_lately(struct tb_sock *s, const struct tcp_info *ti, int64_t now,
			    int64_t *recheck)
{
	return rd_restart_at(s, (int64_t)ti->tcpi_last_data_recv * TB_NS_PER_MS, now, recheck);
}

/*
 * First byte, at the would-be expiry: was the request still on its way? A program hands a
 * large request to the kernel at once (the send buffer grows to hold it) and waits for
 * the answer, which the peer cannot give before it has read the whole request: the clock
 * must not run while the kernel still delivers it (tests/regress/upload_first_byte.c:
 * curl -T cut at 2 s, answered natively at 3 s). So the wait counts from the peer's last
 * acknowledgement (TCP_INFO's tcpi_last_ack_recv) when that came within the silence: always
 * while bytes of ours are unacknowledged (SIOCOUTQ), and once per silence otherwise (the
 * last acknowledgement of the request may have come just before the look; an answer to a
 * keepalive probe must not extend the wait again and again). A peer that stopped taking
 * the request is cut that long after its last acknowledgement.
 */
static bool rd_request_in_flight(struct tb_sock *s, int fd, const struct tcp_info *ti,
				 int64_t now, int64_t *recheck)
{
	int64_t silent_since = now - rd_silence(&s->side[TB_RD], now);
	int q = 0;

	if (tb_real.ioctl(fd, SIOCOUTQ, &q) < 0)
		return false;
	if (q <= 0) {
		if (atomic_load_explicit(&tb_sock_rare(s)->rd_acked_at, memory_order_relaxed) >=
		    silent_since)
			return false; /* counted once in this silence already */
		atomic_store_explicit(&tb_sock_rare_mut(s)->rd_acked_at, now, memory_order_relaxed);
	}
	return rd_restart_at(s, (int64_t)ti->tcpi_last_ack_recv * TB_NS_PER_MS, now, recheck);
}

/* Where the peer's acceptance of our bytes stands: TCP_INFO's bytes acknowledged, or, for
 * a stream that is not TCP (AF_UNIX), the unsent queue. Returns false when neither works. */
static bool wr_position(int fd, uint64_t *pos)
{
	struct tcp_info ti;
	int q = 0;

	if (tcp_info(fd, &ti, offsetof(struct tcp_info, tcpi_bytes_acked) +
				      sizeof(ti.tcpi_bytes_acked))) {
		*pos = ti.tcpi_bytes_acked;
		return true;
	}
	if (tb_real.ioctl(fd, SIOCOUTQ, &q) < 0)
		return false;
	*pos = (uint64_t)(unsigned)q;
	return true;
}

/*
 * One look at how far the peer has accepted our bytes, through fd: notes when it moved.
 * A blocked sender refills its buffer to the same level after every drain, so the queue
 * level says nothing; the count of bytes acknowledged only grows while the peer reads.
 * The first look of a wait takes the wait's start as the last movement. Returns false when
 * the look failed.
 */
static bool look_acked(struct tb_sock *s, int fd, int64_t now)
{
	int64_t begin = atomic_load_explicit(&s->side[TB_WR].wait_begin, memory_order_relaxed);
	uint64_t pos;

	struct tb_sock_rare *r;

	if (!wr_position(fd, &pos))
		return false;
	r = tb_sock_rare_mut(s);
	if (atomic_load_explicit(&r->wr_seen_at, memory_order_relaxed) < begin)
		atomic_store_explicit(&r->wr_moved_at, begin, memory_order_relaxed);
	else if (pos != atomic_load_explicit(&r->wr_seen, memory_order_relaxed))
		atomic_store_explicit(&r->wr_moved_at, now, memory_order_relaxed);
	atomic_store_explicit(&r->wr_seen, pos, memory_order_relaxed);
	atomic_store_explicit(&r->wr_seen_at, now, memory_order_relaxed);
	return true;
}

static int64_t look_period(const struct tb_settings *set)
{
	return set->write_ns / 8 > TB_NS_PER_MS ? set->write_ns / 8 : TB_NS_PER_MS;
}

int64_t tb_sock_sample_acked(struct tb_sock *s, int64_t now)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);

	/* No `busy` here: the look only reads, and a stale fd can at worst make the watchdog
	 * believe the send progressed and give it one more period. */
	look_acked(s, atomic_load(&s->fd), now);
	return tb_at_after(now, look_period(set));
}

/*
 * Past the write limit with nothing acknowledged: has TCP itself confirmed the stall?
 * A receiver that frees its buffer in small reads keeps its window shut until about half
 * of it is free, and the sender hears of the reopening only from a window update or from
 * the answer to a zero-window probe, sent at the retransmission timeout and doubled while
 * the window stays shut (200, then 400 ms later on loopback). Under a reader taking 4 KiB
 * every 100 ms through a 16 KiB buffer the count stands still for half a second, and a
 * 300 ms limit cut an upload that completes natively. So the cut also waits for the
 * kernel's second probe to find the window still shut (tcpi_backoff counts the probes
 * since bytes last moved), for a retransmission outstanding (a peer that does not answer
 * at all), or for one more write_timeout, at least 1 s, whichever comes first: a limit
 * longer than the first two probe intervals is unchanged
 * (tests/regress/write_probe_drain.c). A stream that is not TCP has no probes: cut at the
 * limit. Returns true to cut; otherwise sets *recheck (one look period later).
 */
static bool stall_confirmed(const struct tb_settings *set, int fd, int64_t limit_at,
			    int64_t now, int64_t *recheck)
{
	int64_t grace = set->write_ns > TB_NS_PER_S ? set->write_ns : TB_NS_PER_S;
	int64_t until = tb_at_after(limit_at, grace);
	struct tcp_info ti;

	if (!tcp_info(fd, &ti, offsetof(struct tcp_info, tcpi_backoff) + sizeof(ti.tcpi_backoff)))
		return true;
	if (ti.tcpi_backoff >= 2 || ti.tcpi_retransmits > 0 || now >= until)
		return true;
	*recheck = tb_at_after(now, look_period(set));
	if (*recheck > until)
		*recheck = until;
	return false;
}

/* Write side, under `busy`, at the expiry: did the peer accept bytes within the last
 * write_timeout? Then the send is draining: not cut, looked at again when the limit would
 * pass since that movement. Without an earlier look in this wait, look again one period
 * later. Past the limit, stall_confirmed decides. */
static bool write_progressing(struct tb_sock *s, int fd, int64_t now, int64_t *recheck)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	int64_t begin = atomic_load_explicit(&s->side[TB_WR].wait_begin, memory_order_relaxed);
	bool first =
		atomic_load_explicit(&tb_sock_rare(s)->wr_seen_at, memory_order_relaxed) < begin;
	int64_t moved;

	if (!look_acked(s, fd, now))
		return false;
	if (first) {
		*recheck = tb_at_after(now, look_period(set));
		return true;
	}
	moved = atomic_load_explicit(&tb_sock_rare(s)->wr_moved_at, memory_order_relaxed);
	if (tb_at_after(moved, set->write_ns) > now) {
		*recheck = tb_at_after(moved, set->write_ns);
		return true;
	}
	return !stall_confirmed(set, fd, tb_at_after(moved, set->write_ns), now, recheck);
}

/* What the log line reports: the silence (or time) that exceeded the limit. */
static void measure(struct tb_sock *s, enum tb_side side, enum tb_phase phase, int64_t now,
		    int64_t *elapsed, int64_t *limit)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);

	switch (phase) {
	case TB_PHASE_CONNECT:
		*elapsed = now - atomic_load_explicit(&s->connect_start, memory_order_relaxed);
		break;
	case TB_PHASE_DEADLINE:
		*elapsed = now - atomic_load_explicit(&s->call_start, memory_order_relaxed);
		*limit = atomic_load_explicit(&s->call_deadline, memory_order_relaxed) -
			 atomic_load_explicit(&s->call_start, memory_order_relaxed);
		return;
	default: {
		struct tb_idle c = {
			atomic_load_explicit(&s->side[side].idle_ns, memory_order_relaxed),
			atomic_load_explicit(&s->side[side].wait_begin, memory_order_relaxed),
		};

		*elapsed = tb_idle_silence(&c, true, now);
		/* A blocked send's stall is counted from the peer's last acceptance, when seen. */
		if (phase == TB_PHASE_WRITE &&
		    atomic_load_explicit(&tb_sock_rare(s)->wr_seen_at, memory_order_relaxed) >=
			    c.wait_begin)
			*elapsed = now - atomic_load_explicit(&tb_sock_rare(s)->wr_moved_at,
							      memory_order_relaxed);
		break;
	}
	}
	*limit = tb_settings_phase_limit(set, phase);
}

/* Moves the socket (generation gen) to EXPIRED for phase; true when this call did it. */
static bool claim_expiry(struct tb_sock *s, uint32_t gen, enum tb_phase phase)
{
	uint32_t w = tb_sock_word(s);

	if (TB_ST_GEN(w) != gen || TB_ST(w) == TB_ST_EXPIRED || TB_ST(w) == TB_ST_FREE)
		return false;
	return atomic_compare_exchange_strong(&s->state, &w,
					      (w & ~0xffu) | (uint32_t)phase << 4 |
						      TB_ST_EXPIRED);
}

/* SHUT_RDWR wakes every waiter: a blocked recv returns 0, poll reports POLLHUP, a connect to
 * a silent peer returns. The fd stays open until the program closes it, and nothing the
 * peer sends later can be read through it. */
static void cut(int fd)
{
	shutdown(fd, SHUT_RDWR);
}

/*
 * The watchdog's cut of a reader: SHUT_RD alone wakes a blocked recv (it returns 0) and a
 * poll or epoll for input (POLLIN|POLLRDHUP), and nothing can be read through the fd any
 * more. It leaves the FIN to tb_sock_cut_rest: on loopback the kernel delivers the FIN to
 * the peer, and its acknowledgement back, inside the shutdown() call, half of a cut's
 * cost (about 7 of 10 us), and with 1,000 waits due together every cut waited for the
 * FINs of all the cuts before it. Only when nobody waits to send: a blocked send wakes
 * only when the writing half is shut.
 */
static bool cut_reader(struct tb_sock *s, int fd)
{
	if (atomic_load(&s->side[TB_WR].waiters) != 0)
		return false;
	shutdown(fd, SHUT_RD);
	return true;
}

/*
 * The cut of a handshake. shutdown() ends a connect() under way in the kernel, but not one
 * the thread has yet to enter: a thread preempted just before it, or one whose earlier
 * connect a signal interrupted (EINTR, the handshake going on in the background, which
 * connect_not_begun takes for begun) and that calls connect() again. That connect would
 * start a fresh handshake on the unconnected socket and, against a peer that drops SYNs,
 * block for the kernel's retries (make stress: a worker in connect 4.9 s after its cut).
 * The send timeout bounds every blocking connect the kernel begins after this - it is read
 * under the socket's lock, which the shutdown that follows takes too - and the socket is
 * dead for the program from now on (EXPIRED: every call on it fails with ETIMEDOUT).
 */
static void cut_connect(int fd)
{
	const struct timeval tiny = { 0, 1 };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tiny, sizeof(tiny));
	cut(fd);
}

/* The expiry under way on this thread, for a signal handler above it, which must not wait
 * for it (tb_sock_quiesce): its socket, and its taker's frame address | BUSY_CLOSED once
 * such a handler closed the socket. One, in two words: the library's thread-locals live in
 * the static TLS that a dlopen of it must find room in (regress/dlopen_library). A nested
 * expiry (a handler's own, above it) is not recorded; a record a siglongjmp abandoned is
 * told by its frame, at or below a later taker's. BUSY_OWED: the record's count is raised
 * and not yet dropped; whoever clears the bit (drop_busy, or tb_sock_busy_abandon when a
 * handler jumps out of the expiry) drops it, once. */
#define BUSY_CLOSED 1u
#define BUSY_OWED 2u
#define BUSY_FLAGS (BUSY_CLOSED | BUSY_OWED)
static __thread struct tb_sock *busy_sock __attribute__((tls_model("initial-exec")));
static __thread uintptr_t busy_sp __attribute__((tls_model("initial-exec")));

/* Raises `busy`: from here until drop_busy, close() of any fd of s waits before it gives
 * the number back to the kernel. Dekker with tb_fd_take + quiesce in close: either close
 * sees busy and waits, or we see its slot already cleared (fd_is_ours fails). The seq_cst
 * read-modify-write orders the raise before slot_is's seq_cst load (no fence: ThreadSanitizer
 * does not model fences). The record is written before the raise, so that a handler that
 * sees the raise also sees whose it is. True: the record is this expiry's (for drop_busy). */
static bool take_busy(struct tb_sock *s)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0) & ~(uintptr_t)BUSY_FLAGS;
	bool mine = busy_sock == NULL || (busy_sp & ~(uintptr_t)BUSY_FLAGS) <= sp;

	/* A handler between these stores finds no record and may write its own: once
	 * busy_sock is ours, none does, and a frame that is not ours is written again. */
	if (mine) {
		do {
			busy_sock = NULL;
			atomic_signal_fence(memory_order_seq_cst);
			busy_sp = sp;
			atomic_signal_fence(memory_order_seq_cst);
			busy_sock = s;
			atomic_signal_fence(memory_order_seq_cst);
		} while ((busy_sp & ~(uintptr_t)BUSY_FLAGS) != sp);
	}
	atomic_signal_fence(memory_order_seq_cst);
	atomic_fetch_add(&s->busy, 1);
	if (mine)
		__atomic_fetch_or(&busy_sp, BUSY_OWED, __ATOMIC_RELAXED);
	return mine;
}

static void drop_busy(struct tb_sock *s, bool mine)
{
	/* Atomic against a handler of this thread: its jump out may have dropped it. */
	if (mine && !(__atomic_fetch_and(&busy_sp, ~(uintptr_t)BUSY_OWED, __ATOMIC_RELAXED) &
		      BUSY_OWED))
		return;
	atomic_fetch_sub(&s->busy, 1);
	atomic_signal_fence(memory_order_seq_cst);
	if (mine)
		busy_sock = NULL;
}

/* A handler above this expiry (mine) closed its socket: the number is not ours to cut. */
static bool closed_above(bool mine)
{
	atomic_signal_fence(memory_order_seq_cst);
	return mine && (busy_sp & BUSY_CLOSED);
}

void tb_sock_quiesce(struct tb_sock *s)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);

	while (atomic_load(&s->busy) != 0) {
		/* A handler above this thread's own expiry of s: that one goes on only once we
		 * return. It sees the mark before it cuts (expire, tb_sock_mark_expired). Another
		 * thread's expiry (the watchdog's) may hold `busy` too: that one is waited for, as
		 * by any close, or its shutdown() lands on the number's next owner. */
		if (busy_sock == s && (busy_sp & ~(uintptr_t)BUSY_FLAGS) > sp) {
			busy_sp |= BUSY_CLOSED;
			if (atomic_load(&s->busy) <= 1)
				return;
		}
		sched_yield();
	}
}

unsigned tb_sock_busy_own(const struct tb_sock *s)
{
	return busy_sock == s && (busy_sp & BUSY_OWED) ? 1 : 0;
}

void tb_sock_busy_abandon(void)
{
	struct tb_sock *s = busy_sock;

	if (s == NULL ||
	    !(__atomic_fetch_and(&busy_sp, ~(uintptr_t)BUSY_OWED, __ATOMIC_RELAXED) & BUSY_OWED))
		return;
	busy_sp |= BUSY_CLOSED; /* should it go on after all (a jump inside the handler): no cut */
	atomic_fetch_sub(&s->busy, 1);
	atomic_signal_fence(memory_order_seq_cst);
	busy_sock = NULL;
}

bool tb_sock_check_slot(struct tb_sock *s, uint32_t gen, int fd, bool *taken)
{
	bool ours, b;

	/* Under `busy`, as an expiry: the number cannot be given back to the kernel by a close
	 * under way, nor the entry freed, while we look (sock.h, rule 3). Without it, a sweep
	 * that read the table before a close could find the entry reused by another thread's
	 * new connect on the same number, see the old inode, and take the live socket
	 * (regress/gate_sweep_reuse, regress/expired_stale_reuse). */
	*taken = false;
	b = take_busy(s);
	ours = fd_is_ours(s, gen, fd);
	if (!ours && slot_is(fd, s) && TB_ST_GEN(tb_sock_word(s)) == gen)
		*taken = tb_fd_take_if(fd, s);
	/* A generation that moved since the check: not the socket looked at. Give it back. */
	if (*taken && TB_ST_GEN(tb_sock_word(s)) != gen) {
		tb_fd_set(fd, s);
		*taken = false;
	}
	drop_busy(s, b);
	return ours;
}

bool tb_sock_take_if_stale(struct tb_sock *s, uint32_t gen, int fd)
{
	bool taken;

	tb_sock_check_slot(s, gen, fd, &taken);
	return taken;
}

bool tb_sock_mark_expired(struct tb_sock *s, uint32_t gen, enum tb_phase phase, int fd)
{
	bool done = false, b = take_busy(s);

	if (fd_is_ours(s, gen, fd) && claim_expiry(s, gen, phase)) {
		if (!closed_above(b))
			cut(fd);
		done = true;
	}
	drop_busy(s, b);
	return done;
}

/*
 * The connect hook arms the connect limit just before the kernel's connect(). A thread
 * preempted between the two leaves the socket unconnected (TCP_CLOSE) when the limit falls
 * due, and shutdown() of an unconnected socket does not stop the connect() that follows:
 * against a peer that drops SYNs it would block for the kernel's retries (~127 s). Such a
 * socket is looked at again 1 ms later, until the handshake has begun (SYN_SENT), which
 * the cut does end. A refused connect is TCP_CLOSE too, but its waiter is woken by the
 * refusal itself. Not TCP (AF_UNIX): no such window, cut at once.
 */
static bool connect_not_begun(int fd)
{
	struct tcp_info ti;

	return tcp_info(fd, &ti, offsetof(struct tcp_info, tcpi_state) + 1) &&
	       ti.tcpi_state == 7; /* TCP_CLOSE (include/net/tcp_states.h; linux/tcp.h does not name it) */
}

/* The log line of an expiry, taken under `busy` at the cut (sock.h, rule 10). */
struct tb_log_note {
	int64_t elapsed, limit;
	struct tb_dest dest;
	int fd, tid;
	enum tb_phase phase;
	bool by_request;        /* the call's deadline was the thread's request deadline */
	bool timed;             /* `timers` holds the call's timers */
	struct tb_req_tag req;  /* ... from where (request.h) */
	struct tb_log_timers timers;
};

static void write_note(const struct tb_log_note *n)
{
	const struct tb_log_timers *timers = n->timed ? &n->timers : NULL;

	if (n->by_request)
		tb_log_timeout_budget(n->phase, &n->dest, n->fd, n->elapsed, n->limit, n->tid,
				      timers, &n->req);
	else
		tb_log_timeout_with(n->phase, &n->dest, n->fd, n->elapsed, n->limit, n->tid,
				    timers);
}

/* A line is written with writes that never block (log_sink.c): the bound is for a writer
 * preempted in the middle of one, or one that never ends it (a thread cancelled there).
 * 20 ms was too short on a loaded machine: the watchdog, one thread among the dozens a batch
 * of cuts has just woken, was descheduled longer than that with a line in hand, and the cut
 * thread reported its error before the line was out. */
#define LOG_AWAIT_NS (500 * TB_NS_PER_MS)

/* log_pending: 0 written, LOG_PENDING being written, LOG_AWAITED being written and a thread
 * sleeps on it (the writer then wakes it), LOG_NOTED | slot << LOG_SLOT_SHIFT noted in that
 * slot of `noted`, not yet being written: the first to move it to LOG_PENDING writes it. */
enum { LOG_PENDING = 1, LOG_AWAITED = 2, LOG_NOTED = 4, LOG_SLOT_SHIFT = 3 };

/*
 * The watchdog's line is noted in a slot of `noted` at the cut, and written right after it
 * by the first of the watchdog and the woken thread (tb_sock_await_log) to take it. The
 * woken thread nearly always reaches its report before the line is out: it used to sleep
 * on log_pending until the watchdog had written the line and woken it - a second wake-up
 * for each thread cut, made from the watchdog's CPU between two cuts. Now it writes the
 * line itself, on its own CPU. A slot is the watchdog's to fill while FREE; whoever takes
 * the line frees it once the note is copied. When none is free the line is the
 * watchdog's, as before.
 */
#define NOTED_SLOTS 128

enum { SLOT_FREE, SLOT_NOTED };

struct noted {
	struct tb_log_note note;
};

static struct noted noted[NOTED_SLOTS];
/* Each slot's state, apart from the notes (512 bytes, not 23 KB): a fork child frees them
 * all, and storing into each slot faulted in six pages at every fork of every process. */
static atomic_uint noted_state[NOTED_SLOTS];

/* The socket whose line this thread is writing (or about to): a signal handler that closes
 * it in the middle must not wait for the line its own thread holds. */
static __thread struct tb_sock *line_of __attribute__((tls_model("initial-exec")));
static unsigned noted_next; /* the watchdog's: where to look for a free slot first */

/* The line is out: clears log_pending, and wakes whoever sleeps on it. */
static void log_written(struct tb_sock *s)
{
	if (atomic_exchange_explicit(&s->log_pending, 0, memory_order_release) == LOG_AWAITED)
		tb_futex_wake_all(&s->log_pending, false);
}

/* Watchdog: a free slot for a note, or NULL. */
static struct noted *noted_slot(void)
{
	for (unsigned i = 0; i < NOTED_SLOTS; i++) {
		struct noted *n = &noted[(noted_next + i) % NOTED_SLOTS];

		/* Acquire: pairs with the release that freed it, after its note was copied. */
		if (atomic_load_explicit(&noted_state[n - noted], memory_order_acquire) == SLOT_FREE) {
			noted_next = (noted_next + i + 1) % NOTED_SLOTS;
			return n;
		}
	}
	return NULL;
}

/* Takes the line of s noted as *v (LOG_NOTED and its slot) and writes it, when this
 * thread is the one that moved it to being written. Returns false when another thread
 * took it first, *v then reloaded. */
static bool take_noted(struct tb_sock *s, unsigned *v)
{
	struct noted *n = &noted[*v >> LOG_SLOT_SHIFT];
	struct tb_sock *outer;
	struct tb_log_note note;

	/* Acquire: pairs with the expirer's release, after it filled the slot. */
	if (!atomic_compare_exchange_strong_explicit(&s->log_pending, v, LOG_PENDING,
						     memory_order_acquire, memory_order_acquire))
		return false;
	note = n->note;
	atomic_store_explicit(&noted_state[n - noted], SLOT_FREE, memory_order_release);
	outer = line_of;
	line_of = s;
	write_note(&note);
	log_written(s);
	line_of = outer;
	return true;
}

void tb_sock_noted_fork_child(void)
{
	for (unsigned k = 0; k < NOTED_SLOTS; k++)
		if (atomic_load_explicit(&noted_state[k], memory_order_relaxed) != SLOT_FREE)
			atomic_store_explicit(&noted_state[k], SLOT_FREE, memory_order_relaxed);
}

/*
 * A line only noted the thread writes itself. One being written it waits for on a futex,
 * not by polling the flag: a 50 us nanosleep per look added 100 us to most cuts (the
 * timer's slack on top), with one more wake-up each that took the CPU from the cuts still
 * to make. The bound is for an expirer preempted in the middle of a line.
 */
void tb_sock_await_log(struct tb_sock *s)
{
	unsigned v;
	int saved = errno;
	int64_t until = 0;

	if (line_of == s)
		return; /* the line is this thread's own to finish, below a signal handler */
	/* The expiry shows before log_pending does: an expirer between its claim and the mark
	 * holds `busy` (measuring, noting), and a thread that saw the socket expired meanwhile
	 * (its own wait ended at the limit) would find no line to wait for. Wait for `busy` to
	 * drop - microseconds, unless the expirer was preempted - then look again: its release
	 * orders the mark before the drop. */
	v = atomic_load_explicit(&s->log_pending, memory_order_acquire);
	while (v == 0 && atomic_load(&s->busy) != 0) {
		if (until == 0)
			until = tb_at_after(tb_now(), LOG_AWAIT_NS);
		else if (tb_now() >= until)
			break;
		sched_yield();
		v = atomic_load_explicit(&s->log_pending, memory_order_acquire);
	}
	if (v == 0)
		v = atomic_load_explicit(&s->log_pending, memory_order_acquire);
	while (v != 0) {
		if (v & LOG_NOTED) {
			if (take_noted(s, &v))
				break;
			continue; /* v reloaded: taken meanwhile */
		}
		if (v == LOG_PENDING &&
		    !atomic_compare_exchange_weak_explicit(&s->log_pending, &v, LOG_AWAITED,
							   memory_order_acquire,
							   memory_order_acquire))
			continue; /* v reloaded: written meanwhile, or another waiter marked it */
		if (until == 0)
			until = tb_at_after(tb_now(), LOG_AWAIT_NS);
		if (tb_futex_wait_until(&s->log_pending, LOG_AWAITED, until, false) == ETIMEDOUT)
			break;
		v = atomic_load_explicit(&s->log_pending, memory_order_acquire);
	}
	errno = saved;
}

/* tb_sock_expire, and tb_sock_expire_first when `first`: a reader's cut may shut only the
 * reading half (returns 2). */
static int expire(struct tb_sock *s, uint32_t gen, enum tb_side side, enum tb_phase phase,
		  int fd, bool own_fd, int64_t now, int64_t *recheck, bool first)
{
	int saved = errno;
	int rc = -1;
	bool connecting, protects;
	struct tb_sock *outer = line_of;
	struct tb_log_note own;
	struct tb_log_note *note = &own;
	struct noted *slot = NULL;
	struct tb_prot_note prot = { .entry = NULL };
	struct tcp_info ti;
	bool busy;

	line_of = s;
	busy = take_busy(s);
	if (own_fd ? !fd_is_ours(s, gen, fd) : (fd = find_fd(s, gen)) < 0) {
		rc = own_fd ? -1 : -2;
		goto out;
	}
	if (side == TB_RD && phase != TB_PHASE_CONNECT && tb_sock_rd_ready(fd)) {
		*recheck = tb_at_after(now, QUEUED_RECHECK_NS); /* the waiter is about to wake */
		rc = 0;
		goto out;
	}
	/* One TCP_INFO for both looks: a system call fewer per cut in a storm of them. */
	if (side == TB_RD && (phase == TB_PHASE_READ || phase == TB_PHASE_FIRST_BYTE) &&
	    tcp_info(fd, &ti, RD_INFO_NEED) &&
	    (rd_heard_lately(s, &ti, now, recheck) ||
	     (phase == TB_PHASE_FIRST_BYTE && rd_request_in_flight(s, fd, &ti, now, recheck)))) {
		rc = 0;
		goto out;
	}
	if (side == TB_WR && phase == TB_PHASE_WRITE && !own_fd &&
	    write_progressing(s, fd, now, recheck)) {
		rc = 0;
		goto out;
	}
	if (phase == TB_PHASE_CONNECT && !own_fd && connect_not_begun(fd)) {
		*recheck = tb_at_after(now, TB_NS_PER_MS);
		rc = 0;
		goto out;
	}
	connecting = TB_ST(tb_sock_word(s)) == TB_ST_CONNECTING;
	if (!claim_expiry(s, gen, phase))
		goto out;
	/* The line is taken now, into a note (rule 10): once shut down, the waiter wakes and
	 * folds its wait into idle_ns, and once busy drops the program may close the socket,
	 * and past tb_sock_await_log's wait (a preempted expirer) the entry and its call's
	 * timers may already describe another connection. The watchdog's note goes to a slot,
	 * for the woken thread to write if it comes first (not when the breaker has its say
	 * after the line: that is the expirer's). */
	protects = atomic_load_explicit(&s->set, memory_order_relaxed)->protects;
	if (first && !protects && (slot = noted_slot()) != NULL)
		note = &slot->note;
	measure(s, side, phase, now, &note->elapsed, &note->limit);
	note->dest = s->dest;
	note->fd = fd;
	note->tid = own_fd ? tb_tid() : atomic_load_explicit(&s->side[side].waiter_tid,
								     memory_order_relaxed);
	note->phase = phase;
	note->by_request = phase == TB_PHASE_DEADLINE && tb_sock_request_tag(s, &note->req);
	atomic_fetch_add_explicit(&tb_expiries[phase], 1, memory_order_relaxed);
	note->timed = tb_stats_cut(s, phase, &note->timers);
	if (slot != NULL) {
		atomic_store_explicit(&noted_state[slot - noted], SLOT_NOTED, memory_order_relaxed);
		/* Release: whoever takes the line (acquire) reads the note filled above. */
		atomic_store_explicit(&s->log_pending,
				      LOG_NOTED | (unsigned)(slot - noted) << LOG_SLOT_SHIFT,
				      memory_order_release);
	} else {
		atomic_store_explicit(&s->log_pending, LOG_PENDING, memory_order_relaxed);
	}
	/* Before the cut wakes the waiter: its retry finds the breaker as this failure left
	 * it (a storm's threads are cut together, and reconnect at once). */
	if (__builtin_expect(protects, 0))
		tb_prot_cut(s, &prot);
	rc = 1;
	if (closed_above(busy))
		; /* a handler above us closed it (tb_sock_quiesce): its number is not ours */
	else if (connecting)
		cut_connect(fd);
	else if (first && side == TB_RD && cut_reader(s, fd))
		rc = 2;
	else
		cut(fd);
out:
	drop_busy(s, busy);
	if (rc >= 1 && slot != NULL) {
		unsigned v = LOG_NOTED | (unsigned)(slot - noted) << LOG_SLOT_SHIFT;

		take_noted(s, &v); /* unless the woken thread took it first */
	} else if (rc >= 1) {
		/* After the cut and outside `busy`: a log sink that blocks (a full pipe, a stalled
		 * syslog) must neither delay the cut nor hold up close() of this socket. The woken
		 * thread waits a little for the line before it reports the error (it might exit on
		 * it): tb_sock_await_log. */
		write_note(note);
		log_written(s);
		tb_prot_say(&prot); /* outside `busy`, as the line above */
	} else if (rc == -2) {
		forget_stale_slot(s, gen);
	}
	line_of = outer;
	errno = saved;
	return rc;
}

int tb_sock_expire(struct tb_sock *s, uint32_t gen, enum tb_side side, enum tb_phase phase,
		   int fd, bool own_fd, int64_t now, int64_t *recheck)
{
	return expire(s, gen, side, phase, fd, own_fd, now, recheck, false);
}

int tb_sock_expire_first(struct tb_sock *s, uint32_t gen, enum tb_side side,
			 enum tb_phase phase, int64_t now, int64_t *recheck)
{
	return expire(s, gen, side, phase, -1, false, now, recheck, true);
}

void tb_sock_cut_rest(struct tb_sock *s, uint32_t gen)
{
	int saved = errno;
	uint32_t w;
	int fd;
	bool b;

	/* Under `busy`, as the cut was: the fd may have been closed and its number reused
	 * since. A socket closed meanwhile had its FIN sent by the close. */
	b = take_busy(s);
	w = tb_sock_word(s);
	if (TB_ST_GEN(w) == gen && TB_ST(w) == TB_ST_EXPIRED && (fd = find_fd(s, gen)) >= 0 &&
	    !closed_above(b))
		shutdown(fd, SHUT_WR);
	drop_busy(s, b);
	errno = saved;
}
