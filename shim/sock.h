/* sock.h - one governed socket: its call deadline, the waits on each side, its expiry.
 * Shared by every fd that refers to it (dup, fork); lives in a pool that is never unmapped. */
#ifndef TB_SOCK_H
#define TB_SOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dest.h"
#include "frame.h"
#include "phase.h"
#include "reqtag.h"
#include "settings.h"

struct tb_gate;

/* The state word: generation (bits 8-31) | expired phase (bits 4-7) | state (bits 0-3).
 * The generation changes each time a pool entry is reused, so a watchdog decision about an
 * older socket can never land on a newer one (compare-and-swap on the whole word). */
enum tb_sock_state { TB_ST_FREE = 0, TB_ST_CONNECTING = 1, TB_ST_OPEN = 2, TB_ST_EXPIRED = 3 };
#define TB_ST(w) ((w) & 0xfu)
#define TB_ST_PHASE(w) ((enum tb_phase)(((w) >> 4) & 0xfu))
#define TB_ST_GEN(w) ((w) >> 8)

enum tb_side { TB_RD = 0, TB_WR = 1 };

struct tb_side_state {
	atomic_uint waiters;       /* threads visibly waiting on this side */
	atomic_int waiter_tid;     /* hint: the thread that last waited on it, for the log line */
	_Atomic int64_t idle_ns;   /* see struct tb_idle */
	_Atomic int64_t wait_begin;
	_Atomic int64_t expiry;    /* of the wait under way; read by the watchdog */
};

/*
 * Concurrency rules. Threads of the program (the hooks) and the one watchdog thread share
 * every field; nothing here takes a lock. The rules:
 *
 * (1) `state` (generation | phase | state) changes only by compare-and-swap on the whole
 *     word, except in tb_sock_new and tb_sock_unref, which own the entry at that moment
 *     (popped from / about to be pushed on the free list). tb_sock_unref bumps the
 *     generation when the entry goes back to the pool, so a thread still inside a call on
 *     a number that was closed under it (it compares the generation it began with) never
 *     touches the free or reused entry.
 * (2) `dest`, `ino` and the rare record's `gate` and `slot_fd` are written before the
 *     socket is published in the fd table (tb_fd_set's release) and are read-only afterwards - except slot_fd, moved
 *     by tb_sock_slot_fd_moved when the program dup2()s over a gate lock (connect is done
 *     by then). A reader that may race with the socket's reuse (the watchdog, an expiry)
 *     reads them only while holding `busy`, and copies what it needs after.
 * (3) `busy` is a count of expiries under way (the watchdog's and a hook's own). It is
 *     raised before an fd of the socket is verified (fd_is_ours: table slot, generation,
 *     inode) and dropped right after the shutdown(); close(), close_range() and dup2 over
 *     a governed fd wait for it to be zero between untracking the number and giving it
 *     back to the kernel (Dekker: seq_cst on both sides). Nothing that can block - the
 *     log line above all - is done while it is raised. A signal handler that closes the
 *     socket above its own thread's expiry does not wait (that expiry cannot end first):
 *     it marks the expiry, which then leaves the number alone (tb_sock_quiesce).
 * (4) `fd` and each side's `waiter_tid` are hints, written by every wait (relaxed): the fd
 *     of the last wait through any fd of the socket, the thread of the last wait on the side. They are never trusted: the watchdog
 *     verifies `fd` under `busy`, and when it no longer names the socket, looks for another
 *     fd of it in the fd table; when none can be verified it stops governing the socket
 *     (drops it from its heap) instead of trying again.
 * (5) side[].waiters counts threads inside a wait (fetch_add in tb_sock_wait_record,
 *     fetch_sub in tb_sock_wait_end, both seq_cst). It pairs with `wd_filed_at`: a wait
 *     increments waiters then reads wd_filed_at; the watchdog clears wd_filed_at then
 *     re-reads waiters. So either the wait queues the socket itself, or the watchdog sees
 *     the wait - never neither.
 * (6) side[].idle_ns and wait_begin are written by the first waiter to arrive, the last to
 *     leave, any thread that moves bytes (the silence restarts for every waiter of that
 *     side), and the watchdog when TCP_INFO shows bytes the calls could not see. They are
 *     relaxed: the watchdog never acts on a stored expiry (side[].expiry, a hint stored by
 *     each wait) without recomputing it from them (tb_sock_expiry) first. A hint is never
 *     later than its wait's true expiry (the first wait of a fresh silence may store a bound
 *     below it: tb_sock_wait_record), and it is stored before the wait is counted.
 * (7) wd_filed_at, in_incoming, incoming_next, and the rare record's wr_seen, wr_seen_at,
 *     wr_moved_at belong to the watchdog (in_incoming / incoming_next are also written by the thread that pushes
 *     the socket on the incoming stack, before the push's release); the rare record's
 *     rd_acked_at to the expiry under `busy` (tb_sock_expire).
 * (8) `refs` counts fds in the table that refer to the socket; the last tb_sock_unref
 *     frees it. `has_slot` is exchanged to false exactly once (tb_sock_release_slot).
 * (9) `set`, `nonblock`, `got_bytes`, connect_start, call_start, call_deadline (and
 *     the rare record's req_deadline, req_tag) are relaxed
 *     atomics written by the hooks of any thread (fcntl, a transfer, a new call; the last
 *     writer wins, as for the program's own view of the socket) and read by the watchdog,
 *     which recomputes an expiry from them before acting. `delivered` is exchanged once.
 * (11) `frame` (the index and the framing it names) is written only by the thread
 *     holding `frame_flag` (0 free, 1 held, 2 abandoned for good), taken by
 *     compare-and-swap around one transfer's feed, never waited for: a thread that finds
 *     it held marks it abandoned, and the holder turns the framing RAW when it lets go (two
 *     threads moving bytes at once is full-duplex use that request/response framing cannot
 *     follow). Everyone else - the expiry, the watchdog, the next transfer's budget step -
 *     reads `frame_state` (TB_FS_*), the one byte the holder publishes (relaxed) after each
 *     feed. The framing comes from a pool of its own (tb_sock_new, unless the protocol is
 *     forced raw) and goes back to it when it turns RAW, by the holder
 *     (tb_sock_frame_over: `frame` becomes 0 under the flag, so the next holder finds
 *     none to feed), or at the free after the drain (rule 12). frame_state RAW never
 *     changes again, so a 0 `frame` is always RAW.
 * (12) `dest` and `frame` are rewritten in place when the entry is reused, and a thread may
 *     still be inside a call on a number the program closed under it. A call reads them
 *     only inside a section (tb_sock_enter/tb_sock_leave): `inuse` is raised, then the
 *     generation the call began on is checked (seq_cst both); the last tb_sock_unref bumps
 *     the generation, then waits for `inuse` to be zero before the entry goes back to the
 *     pool. So either the section sees the new generation and backs off, or the free waits
 *     for it (microseconds). A section left by a signal handler's siglongjmp (or a close
 *     from a handler that interrupted a section) never drains: after a bounded wait the
 *     entry is retired - never reused - instead of freed.
 * (13) The rare record (struct tb_sock_rare) follows the rules of the fields it holds, as
 *     if they were in the socket; it is reused with its entry and never freed. A field a
 *     reused entry may have left set is cleared by tb_sock_new, which owns the entry then
 *     (rule 1), and only when the record was written (tb_sock_rare_mut marks it, in a
 *     bitmap of its own): a socket that never uses the record never backs it, not even by
 *     reading it.
 * (10) The expiry's log line belongs to the one thread whose claim (the CAS to EXPIRED)
 *     succeeded: it takes the line's fields into a note of its own (its stack: an expiry is
 *     rare, and the socket keeps nothing for it) under `busy`, sets log_pending, cuts, drops
 *     `busy`, writes the line and clears log_pending (release), waking any thread that
 *     marked it awaited and sleeps on it (tb_sock_await_log: a CAS from pending to
 *     awaited). The watchdog's note may instead go to a slot of sock_expire.c's table, and
 *     log_pending then names the slot (release, before the cut): whichever thread first
 *     moves it from noted to pending (acquire) - the watchdog after its cut, the woken
 *     thread or the last close in tb_sock_await_log - copies the note, frees the slot,
 *     writes the line and clears log_pending as above. The claim shows before
 *     log_pending does: a thread that finds the socket expired and log_pending clear
 *     waits (bounded) for `busy` to drop, then looks again.
 */
/* frame_state, the framing as the runtime reads it: enum tb_frame_state in the low bits, and
 * two answers of the framing taken at the last feed (frame.h). */
#define TB_FS_STATE 0x7u
#define TB_FS_BEGUN 0x10u  /* AWAITING and tb_frame_answer_begun: `read`, not `first_byte` */
#define TB_FS_STARTS 0x20u /* tb_frame_send_starts_call: the next send begins a new call */
#define TB_FS_NOTED 0x40u  /* xfer.c: the connection's tls_answered_wait notice was counted
			    * (set by any thread, kept by each publish) */
#define TB_FS_PLAIN 0x80u  /* prop_io.c: the connection is not HTTP, no deadline header ever
			    * goes in it: its sends take the plain path (set by any thread,
			    * kept by each publish; a bit lost to a publish is set again) */

struct tb_sock {
	atomic_uint state;
	atomic_uint refs;         /* fds referring to it */
	atomic_int fd;            /* hint: the fd last waited on (rule 4) */
	atomic_uint log_pending;  /* the expiry's line is being written; a futex (rule 10) */
	atomic_uint busy;         /* expiries under way: close waits for 0 (rule 3) */
	atomic_uint inuse;        /* calls reading dest/frame: reuse waits for 0 (rule 12) */
	atomic_bool nonblock;     /* O_NONBLOCK of the open file description */
	atomic_bool got_bytes;    /* response bytes since the last send: phase read */
	atomic_bool delivered;    /* the expiry has been reported to a thread's budget */
	atomic_bool has_slot;     /* holds a slot of the rare record's gate, given back once */
	/* framing (rule 11): its entry in the framings' pool + 1; 0: raw (from the start, or
	 * framing is over). tb_sock_framing reads it. */
	uint32_t frame;
	_Atomic uint64_t ino;     /* identity: st_ino of the socket */
	_Atomic(const struct tb_settings *) set;
	struct tb_dest dest;      /* written before publication (rule 2) */
	/* Bytes here, which words would leave as holes. */
	atomic_bool in_incoming;   /* on the watchdog's incoming stack (rule 7) */
	atomic_uchar frame_state;  /* TB_FS_*, published by the I/O path after each feed (rule 11) */
	atomic_uchar frame_flag;   /* 0 free, 1 a transfer is feeding, 2 abandoned */
	/* The statistics' (stats.c): the call's completion was counted. Here, in what would be
	 * a hole, rather than a word of stats' own per socket; relaxed, as rule 9. */
	atomic_bool call_done;
	_Atomic int64_t connect_start;
	_Atomic int64_t call_start;
	/* At offset 88: GCC then indexes a side with one lea (at 72 or 96 it adds first:
	 * one instruction more per wait, measured with callgrind). */
	struct tb_side_state side[2];
	_Atomic int64_t call_deadline;
	/* watchdog bookkeeping (watchdog.c, sock_expire.c) */
	_Atomic int64_t wd_filed_at;  /* 0: not in the watchdog's heap */
	_Atomic(struct tb_sock *) incoming_next;
	/* pool bookkeeping */
	uint32_t index;
	atomic_uint free_next;
};

/* What a governed socket costs (docs/design.md, "What the hot path costs"): a pool chunk of
 * 512 is 23 pages exactly. */
_Static_assert(sizeof(struct tb_sock) <= 184, "struct tb_sock grew past 184 bytes");

/*
 * What few sockets use (rule 13): one record per pool entry, in a mapping of its own beside
 * the entry's chunk (tb_sock_rare), never unmapped either. An idle socket, or one that only
 * exchanges bytes, never touches it, so its pages are never backed: 0 in every field is
 * "nothing recorded". tb_sock_new clears only a record that the entry's earlier socket
 * wrote (its mark), without reading the others.
 */
struct tb_sock_rare {
	/* The request deadline (request.h) the last step clamped call_deadline to (0: none),
	 * and where it came from (struct tb_req_tag, 16 bytes): the cut's line names the
	 * budget when call_deadline is still that one. Relaxed, as call_deadline (rule 9); a
	 * torn tag only garbles a log note. Only with a request deadline. */
	_Atomic int64_t req_deadline;
	_Atomic uint64_t req_tag[2];
	/* The gate whose slot it holds (tb_sock_release_slot), read only while has_slot.
	 * Atomic (relaxed): a connect at a full gate reads it through the fd table while the
	 * entry may be reused under it (tb_stale_sweep_gate; regress/gate_sweep_reuse). */
	_Atomic(struct tb_gate *) gate;
	int slot_fd;                  /* a shared gate's lock fd, or -1; read only while has_slot */
	/* The watchdog's looks at a wait (sock_expire.c, rule 7): only a blocked send, or a
	 * first-byte wait reaching its limit, is looked at. */
	_Atomic uint64_t wr_seen;     /* bytes acknowledged (TCP_INFO) at the last look */
	_Atomic int64_t wr_seen_at;   /* when the watchdog last looked */
	_Atomic int64_t wr_moved_at;  /* when a look last saw it move (or the wait began) */
	_Atomic int64_t rd_acked_at;  /* when a first-byte look last counted an acknowledgement */
};

/* The rare record of s (struct tb_sock_rare), to read; tb_sock_rare_mut to write any field
 * that tb_sock_new clears (it marks the record as written: only marked records are
 * cleared, and an unmarked one holds 0 in each of those fields). */
struct tb_sock_rare *tb_sock_rare(const struct tb_sock *s);
struct tb_sock_rare *tb_sock_rare_mut(const struct tb_sock *s);

/* The framings' pool (sock.c): an entry is the framing, the free list's link and its own
 * index, 512 to a chunk (72-byte entries: 9 pages), never unmapped. */
#define TB_FRAME_CHUNK 512
#define TB_FRAME_MAX_CHUNKS 2048 /* 1M framed sockets */
struct tb_frame_entry {
	struct tb_frame f;
	uint32_t index;
	atomic_uint free_next;
};
extern struct tb_frame_entry *tb_frame_chunks[TB_FRAME_MAX_CHUNKS];

/* The framing of s, NULL when raw: read by the holder of frame_flag only (rule 11). Inline:
 * a framed transfer looks it up once. */
static inline struct tb_frame *tb_sock_framing(const struct tb_sock *s)
{
	uint32_t i = s->frame - 1;

	return s->frame != 0 ? &tb_frame_chunks[i / TB_FRAME_CHUNK][i % TB_FRAME_CHUNK].f : NULL;
}

/* start + d, saturated at TB_NEVER: an expiry never wraps into the past (the largest
 * duration, 2562047h, overflows int64 ns once the monotonic clock passes ~47 minutes). */
static inline int64_t tb_at_after(int64_t start, int64_t d)
{
	return start > TB_NEVER - d ? TB_NEVER : start + d;
}

/*
 * Takes a socket from the pool for `fd`, in state CONNECTING with one reference.
 * Returns NULL when memory is exhausted, for the socket or for the framing its protocol
 * needs (the fd then stays ungoverned).
 */
struct tb_sock *tb_sock_new(int fd, const struct tb_settings *set, const struct tb_dest *d,
			    uint64_t ino, bool nonblock, int64_t now);

void tb_sock_ref(struct tb_sock *s);

/*
 * A reference on s, which the fd table named a moment ago, unless its last fd was closed
 * since (false: s must not be touched). Taken inside a section (rule 12): the entry can
 * neither go back to the pool nor be reused between the look and the count, so a true
 * return holds a live socket whose `ino` stays put. For a copy of an fd that another
 * thread may be closing (dup*, F_DUPFD), which must check that inode.
 */
bool tb_sock_ref_live(struct tb_sock *s);

/* Framing is over for s (RAW): its framing goes back to the pool and `frame` becomes 0.
 * By the holder of frame_flag (rule 11), or by the last tb_sock_unref. */
void tb_sock_frame_over(struct tb_sock *s);

/* The socket holds a slot of gate g (taken in connect before the handshake). */
void tb_sock_hold_slot(struct tb_sock *s, struct tb_gate *g, int slot_fd);

/* Gives the slot back, once: when the last fd is closed, or when the connect failed. */
void tb_sock_release_slot(struct tb_sock *s);

/* A shared-gate slot fd was moved from `from` to `to` (the program dup2'ed over it). */
void tb_sock_slot_fd_moved(int from, int to);

/* Drops one fd's reference; the last one returns the socket to the pool. Waits while the
 * watchdog is acting on it, so the fd number cannot be reused under the watchdog. */
void tb_sock_unref(struct tb_sock *s);

/* Waits while an expiry is under way on s (`busy`, rule 3) - unless it is this thread's
 * own, below a signal handler that closes s: that one cannot end before we return; it is
 * marked instead, and leaves the number alone. Microseconds at most. */
void tb_sock_quiesce(struct tb_sock *s);

static inline uint32_t tb_sock_word(struct tb_sock *s)
{
	return atomic_load_explicit(&s->state, memory_order_acquire);
}

/*
 * Enters a section of a call that began on generation `gen` and reads what a reuse
 * rewrites (dest, frame: rule 12). False when the socket was closed since (the caller must
 * not touch it); true: the caller calls tb_sock_leave when done.
 */
static inline bool tb_sock_enter(struct tb_sock *s, uint32_t gen)
{
	uint32_t w;

	atomic_fetch_add(&s->inuse, 1);
	w = atomic_load(&s->state);
	/* Not FREE: a call that looked the entry up after it was freed holds the free
	 * generation, and tb_sock_new writes under it. */
	if (TB_ST_GEN(w) == gen && TB_ST(w) != TB_ST_FREE)
		return true;
	atomic_fetch_sub(&s->inuse, 1);
	return false;
}

static inline void tb_sock_leave(struct tb_sock *s)
{
	atomic_fetch_sub(&s->inuse, 1);
}

/* Entries retired because a section never drained (rule 12): never reused. */
extern atomic_ulong tb_sock_retired;

/* CONNECTING -> OPEN once the handshake is seen complete. */
void tb_sock_set_open(struct tb_sock *s);

/* The call under way on this socket starts/ends at these times (TB_NEVER: no deadline). */
void tb_sock_set_call(struct tb_sock *s, int64_t start, int64_t deadline);

/* The step clamped the socket's call deadline to the thread's request deadline `deadline`
 * (request.h), whose source is `tag`: stored for the cut's log line. */
void tb_sock_set_request(struct tb_sock *s, int64_t deadline, const struct tb_req_tag *tag);

/* True when the socket's call deadline is the request's the last tb_sock_set_request
 * recorded, with its tag in *tag; false when the call's deadline is its own. */
bool tb_sock_request_tag(struct tb_sock *s, struct tb_req_tag *tag);

/* The handshake of s begins at `now`: the connect phase counts from here. Called once
 * timebox's own start-up inside the first connect (the statistics segment, its threads)
 * is over, so that the phase measures the peer, not timebox. */
void tb_sock_connect_begins(struct tb_sock *s, int64_t now);

/* The expiry of a wait on `side` that began at its wait_begin, from the current state. */
struct tb_expiry tb_sock_expiry(struct tb_sock *s, enum tb_side side);

/*
 * A thread starts waiting on `side` through `fd` at `now`. Returns the wait's expiry; when
 * it is already due (at <= now) the caller must end the wait and decide (queued data, or
 * expire). The watchdog is not told here: callers begin through tb_wd_wait_begin.
 * *watched is set true when the watchdog already looks at s no later than the wait's
 * expiry: then the expiry returned (and stored as the side's hint, rule 6) may be a bound
 * below the true one, always in the future, and the caller tells the watchdog nothing.
 */
struct tb_expiry tb_sock_wait_record(struct tb_sock *s, enum tb_side side, int fd, int64_t now,
				     bool *watched);

/* The wait ends at `now` (0: not read yet; only needed when progress restarts the silence
 * of other waiters); with `progress` bytes moved (the silence count restarts, for every
 * thread still waiting on that side too). `gen` is
 * the generation the wait began on: a socket closed under a blocked reader (and perhaps
 * reused) is not touched. */
void tb_sock_wait_end(struct tb_sock *s, enum tb_side side, int64_t now, bool progress,
		      uint32_t gen);

/*
 * A transfer moved bytes on `side` of s: with `waited`, its own wait (begun on generation
 * `gen`) ends as tb_sock_wait_end with progress would end it; the silence of the side
 * restarts (sent bytes start the first_byte phase), for every thread still waiting on an
 * affected side too; a CONNECTING socket is OPEN (tb_sock_set_open). One pass, for the
 * transfer's hot path.
 */
void tb_sock_moved(struct tb_sock *s, enum tb_side side, bool waited, uint32_t gen);

/*
 * Expires the socket (generation `gen`) for `phase` at `now`: marks it, shuts it down so
 * every waiter wakes and no late response can be read, then - after the cut, outside
 * `busy` - logs one line and counts it. Every path checks under `busy` that the fd it cuts
 * still names this very socket (fd table slot, generation, inode): `fd` is the caller's own
 * fd when `own_fd`; otherwise (the watchdog) s->fd, or another fd of s from the fd table.
 * The cut is skipped, returning 0 and a time to look again in *recheck, when the peer is
 * not the one stalling: read side, data is already queued (a slow program is not a slow
 * peer) or, in an idle phase, TCP_INFO shows data arriving during the wait that the call
 * consumed unseen (MSG_WAITALL); write side, the peer acknowledged bytes within the last
 * write_timeout, or there was no earlier look during this wait.
 * Returns 1 when expired, -1 when the socket changed (closed, reused, already expired, or
 * the own fd no longer names it), -2 (watchdog only) when no fd of the socket can be
 * verified: the caller stops governing it rather than try again.
 * errno is preserved.
 */
int tb_sock_expire(struct tb_sock *s, uint32_t gen, enum tb_side side, enum tb_phase phase,
		   int fd, bool own_fd, int64_t now, int64_t *recheck);

/*
 * The watchdog's expiry: tb_sock_expire through an fd of s (own_fd false), except that a
 * read-side cut while nobody waits to send shuts only the reading half, which wakes the
 * reader and ends reading, and returns 2: the caller owes tb_sock_cut_rest(s, gen), once
 * every cut due is made. Otherwise returns as tb_sock_expire. errno is preserved.
 */
int tb_sock_expire_first(struct tb_sock *s, uint32_t gen, enum tb_side side,
			 enum tb_phase phase, int64_t now, int64_t *recheck);

/* Completes a cut that tb_sock_expire_first left half made: shuts the writing half (the
 * FIN to the peer, a blocked send wakes), when the socket is still that expired generation
 * and an fd of it can be verified under `busy`; else nothing. errno is preserved. */
void tb_sock_cut_rest(struct tb_sock *s, uint32_t gen);

/* In a forked child, on the forking thread: the count of `busy` on s that this thread
 * holds (1 when it forked from a signal handler above its own expiry of s, which goes on
 * in the child and drops it), else 0. */
unsigned tb_sock_busy_own(const struct tb_sock *s);

/* The calling thread jumps (longjmp family) out of a signal handler: an expiry of its own
 * that the handler interrupted is abandoned, and its `busy` count dropped now - else every
 * close() of that socket would wait for it for ever. */
void tb_sock_busy_abandon(void);

/* In a forked child: the lines the parent's watchdog noted are the parent's to write. */
void tb_sock_noted_fork_child(void);

/*
 * Writes the expiry's log line when the watchdog noted it and has not begun writing it;
 * otherwise waits, 20 ms at most, for the expirer to write it, which it does right after
 * its cut (outside `busy`). Called before an expiry is reported to
 * the program, and by the last close: a program that exits on ETIMEDOUT must not lose the
 * line, yet a log sink that blocks must not hold the program for long. Preserves errno.
 */
void tb_sock_await_log(struct tb_sock *s);

/* Marks the socket (generation `gen`) expired for `phase` and shuts `fd` down, without
 * logging: for steps refused before they began. Returns true when this call marked it. */
bool tb_sock_mark_expired(struct tb_sock *s, uint32_t gen, enum tb_phase phase, int fd);

/* The watchdog looks at a blocked send's bytes acknowledged (TCP_INFO) before its expiry,
 * every write_timeout/8: acknowledged bytes are progress the hot path cannot see from
 * inside the blocked call. Returns when to look next. */
int64_t tb_sock_sample_acked(struct tb_sock *s, int64_t now);

/* True when a read on fd would return at once (data, EOF or a pending error). */
bool tb_sock_rd_ready(int fd);

/* In a forked child: the pool's growth lock may have been held by a thread that is gone. */
void tb_sock_fork_child(void);

/* In a forked child, after tb_gates_fork_child freed every slot: counts back in its gate
 * each slot a socket holds (regress/gate_fork_slot_in_hand). */
void tb_sock_slots_fork_child(void);

/* Calls fn on every pool entry (fork child reset). */
void tb_sock_foreach(void (*fn)(struct tb_sock *s));

/* Counters of expiries per phase, for the exit summary and later for `timebox stats`. */
extern atomic_ulong tb_expiries[TB_PHASE_COUNT];

/* The stale sweep's check (stale.c) of fd, which named s at generation gen in the fd table:
 * true when fd no longer names s's socket (closed where no hook saw it) and its slot was
 * taken (the caller drops the reference). Done under `busy`, so that a close under way
 * cannot hand the number, nor the entry, to another connect while it looks. */
bool tb_sock_take_if_stale(struct tb_sock *s, uint32_t gen, int fd);

/* The same look, for a call that holds s from fd's slot (tb_stale_check_gen): returns
 * whether fd still names s at generation gen; when it does not, *taken says that fd's
 * stale slot was taken (the caller drops the reference). A generation that moved is not
 * s: false, and nothing taken. */
bool tb_sock_check_slot(struct tb_sock *s, uint32_t gen, int fd, bool *taken);

/* Whether fd names s now: s still at generation gen, fd a socket with s's inode (one
 * fstat). Outside `busy` the answer may be stale at once: for a look that changes nothing
 * (a vfork child's), or the test under `busy` of the two above. */
bool tb_sock_names(struct tb_sock *s, uint32_t gen, int fd);

#endif
