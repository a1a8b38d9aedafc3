/* sock.h - one governed socket: its call deadline, the waits on each side, its expiry.
 * Shared by every fd that refers to it (dup, fork); lives in a pool that is never unmapped. */
#ifndef TB_SOCK_H
#define TB_SOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "dest.h"
#include "phase.h"
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
	_Atomic int64_t idle_ns;   /* see struct tb_idle */
	_Atomic int64_t wait_begin;
	_Atomic int64_t expiry;    /* of the wait under way; read by the watchdog */
};

struct tb_sock {
	atomic_uint state;
	atomic_uint refs;         /* fds referring to it */
	atomic_int fd;            /* the fd last waited on: the one the watchdog shuts down */
	atomic_int waiter_tid;    /* the thread that last waited: the one the log names */
	atomic_uint busy;         /* the watchdog is acting on `fd`: close waits for it */
	atomic_bool nonblock;     /* O_NONBLOCK of the open file description */
	atomic_bool got_bytes;    /* response bytes since the last send: phase read */
	atomic_bool delivered;    /* the expiry has been reported to a thread's budget */
	atomic_bool has_slot;     /* holds a slot of `gate`, given back once */
	_Atomic uint64_t ino;     /* identity: st_ino of the socket */
	_Atomic(const struct tb_settings *) set;
	struct tb_dest dest;      /* written before publication, read under `busy` */
	int slot_fd;              /* a shared gate's lock fd, or -1 */
	_Atomic int64_t connect_start;
	_Atomic int64_t call_start;
	_Atomic int64_t call_deadline;
	struct tb_side_state side[2];
	struct tb_gate *gate;     /* the gate whose slot it holds (tb_sock_release_slot) */
	/* watchdog bookkeeping (watchdog.c) */
	_Atomic int64_t wd_filed_at;  /* 0: not in the watchdog's heap */
	struct tb_sock *incoming_next;
	_Atomic int64_t wr_outq_at;   /* when the watchdog last looked at SIOCOUTQ */
	_Atomic int64_t wr_moved_at;  /* when a look last saw the queue move (or the wait began) */
	atomic_int wr_outq;           /* SIOCOUTQ seen at the last look, -1 none */
	/* pool bookkeeping */
	uint32_t index;
	atomic_uint free_next;
	atomic_bool in_incoming;
};

/*
 * Takes a socket from the pool for `fd`, in state CONNECTING with one reference.
 * Returns NULL when memory is exhausted (the fd then stays ungoverned).
 */
struct tb_sock *tb_sock_new(int fd, const struct tb_settings *set, const struct tb_dest *d,
			    uint64_t ino, bool nonblock, int64_t now);

void tb_sock_ref(struct tb_sock *s);

/* The socket holds a slot of gate g (taken in connect before the handshake). */
void tb_sock_hold_slot(struct tb_sock *s, struct tb_gate *g, int slot_fd);

/* Gives the slot back, once: when the last fd is closed, or when the connect failed. */
void tb_sock_release_slot(struct tb_sock *s);

/* A shared-gate slot fd was moved from `from` to `to` (the program dup2'ed over it). */
void tb_sock_slot_fd_moved(int from, int to);

/* Drops one fd's reference; the last one returns the socket to the pool. Waits while the
 * watchdog is acting on it, so the fd number cannot be reused under the watchdog. */
void tb_sock_unref(struct tb_sock *s);

static inline uint32_t tb_sock_word(struct tb_sock *s)
{
	return atomic_load_explicit(&s->state, memory_order_acquire);
}

/* CONNECTING -> OPEN once the handshake is seen complete. */
void tb_sock_set_open(struct tb_sock *s);

/* The call under way on this socket starts/ends at these times (TB_NEVER: no deadline). */
void tb_sock_set_call(struct tb_sock *s, int64_t start, int64_t deadline);

/* The expiry of a wait on `side` that began at its wait_begin, from the current state. */
struct tb_expiry tb_sock_expiry(struct tb_sock *s, enum tb_side side);

/*
 * A thread starts waiting on `side` through `fd` at `now`. Returns the wait's expiry; when
 * it is already due (at <= now) the caller must end the wait and decide (queued data, or
 * expire). Otherwise the watchdog is told (no system call unless it sleeps past `at`).
 */
struct tb_expiry tb_sock_wait_begin(struct tb_sock *s, enum tb_side side, int fd, int64_t now);

/* The wait ends at `now`; with `progress` bytes moved (the silence count restarts). `gen` is
 * the generation the wait began on: a socket closed under a blocked reader (and perhaps
 * reused) is not touched. */
void tb_sock_wait_end(struct tb_sock *s, enum tb_side side, int64_t now, bool progress,
		      uint32_t gen);

/* Bytes moved on `side` outside a wait. Sent bytes start the first_byte phase. */
void tb_sock_progress(struct tb_sock *s, enum tb_side side);

/*
 * Expires the socket (generation `gen`) for `phase` at `now`: marks it, shuts it down so
 * every waiter wakes and no late response can be read, logs one line, counts it.
 * `fd` is the caller's own fd when `own_fd`; otherwise (the watchdog) s->fd is used after
 * checking under `busy` that it still refers to this very socket (generation and inode).
 * The cut is skipped, returning 0 and a time to look again in *recheck, when the peer is
 * not the one stalling: read side, data is already queued (a slow program is not a slow
 * peer); write side, the unsent queue (SIOCOUTQ) moved since the last look, or there was no
 * earlier look during this wait (a blocked send makes progress the hot path cannot see).
 * Returns 1 when expired, -1 when the socket changed (closed, reused, already expired).
 */
int tb_sock_expire(struct tb_sock *s, uint32_t gen, enum tb_side side, enum tb_phase phase,
		   int fd, bool own_fd, int64_t now, int64_t *recheck);

/* Marks the socket (generation `gen`) expired for `phase` and shuts `fd` down, without
 * logging: for steps refused before they began. Returns true when this call marked it. */
bool tb_sock_mark_expired(struct tb_sock *s, uint32_t gen, enum tb_phase phase, int fd);

/* The watchdog looks at a blocked send's unsent queue (SIOCOUTQ) before its expiry, every
 * write_timeout/8: a queue that moved is progress the hot path cannot see from inside the
 * blocked call. Returns when to look next. */
int64_t tb_sock_sample_outq(struct tb_sock *s, int64_t now);

/* True when a read on fd would return at once (data, EOF or a pending error). */
bool tb_sock_rd_ready(int fd);

/* Calls fn on every pool entry (fork child reset). */
void tb_sock_foreach(void (*fn)(struct tb_sock *s));

/* Counters of expiries per phase, for the exit summary and later for `timebox stats`. */
extern atomic_ulong tb_expiries[TB_PHASE_COUNT];

#endif
