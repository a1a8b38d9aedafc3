/* gate.h - the per-destination gate: at most `max` open sockets, waiters served in arrival
 * order, a bounded queue. The state machine only; waiting and waking live in gates.c. */
#ifndef TB_GATE_H
#define TB_GATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dest.h"
#include "phase.h"

struct tb_shared_gate;

/* One caller waiting at a full gate; lives on the caller's stack while it waits. */
struct tb_gate_waiter {
	struct tb_gate_waiter *next;
	struct tb_gate_waiter *prev;
	atomic_uint granted; /* 0 while waiting, 1 once a slot was handed over (a futex word) */
};

struct tb_gate {
	struct tb_dest dest;
	atomic_int max;   /* slots; an adaptive gate (max_conns = "auto") changes it */
	int max_pending;  /* waiters allowed; 0: no limit */
	atomic_int leased;
	atomic_int pending;
	pthread_mutex_t lock; /* the queue; never held across a wait or a system call */
	struct tb_gate_waiter *head, *tail;
	atomic_ulong acquired, timed_out, rejected;
	struct tb_shared_gate *shared; /* set: slots live in the shared gate (gate_shared.c) */
};

enum tb_gate_result { TB_GATE_TOOK, TB_GATE_QUEUED, TB_GATE_REJECTED };

void tb_gate_init(struct tb_gate *g, const struct tb_dest *d, int max, int max_pending);

/*
 * The fast path: takes a slot when one is free and nobody waits (waiters come first).
 * Lock-free, no system call. Returns true when a slot was taken.
 */
bool tb_gate_try_acquire(struct tb_gate *g);

/*
 * The slow path, after tb_gate_try_acquire failed: takes a free slot if the queue is empty,
 * otherwise queues w at the tail (TB_GATE_QUEUED: wait until w->granted or cancel), or
 * refuses when max_pending callers already wait.
 */
enum tb_gate_result tb_gate_enqueue(struct tb_gate *g, struct tb_gate_waiter *w);

/*
 * Gives a slot back. When somebody waits, the slot passes straight to the oldest waiter,
 * which is returned (the caller wakes exactly that one); NULL otherwise.
 * Without waiters this is one atomic decrement and a load: no lock, no system call.
 */
struct tb_gate_waiter *tb_gate_release(struct tb_gate *g);

/*
 * An adaptive gate's new size. Growing it hands new slots to waiters, oldest first, at most
 * `n`: their `granted` words are stored in woken[] for the caller to wake (as after
 * tb_gate_release, a wake may land on a waiter already gone: a spurious wake-up). Returns
 * how many; call again while it returns n. Shrinking takes nothing back: sockets close as
 * their calls end, and none opens until fewer than `max` are open.
 */
int tb_gate_resize(struct tb_gate *g, int max, atomic_uint **woken, int n);

/* A waiter gives up (timeout, signal). Returns true when it was removed from the queue;
 * false when a slot had already been handed to it (it then owns the slot). */
bool tb_gate_cancel(struct tb_gate *g, struct tb_gate_waiter *w);

/*
 * Re-initialises the gate in a forked child: the waiting threads did not survive, and
 * neither did the slots other threads held between the gate and their socket's record of
 * it (a connect under way, a close giving one back). Every slot is free: the caller counts
 * back, with tb_gate_fork_held, each slot a socket of the child holds. As the queue, a
 * fork from a signal handler above the forking thread's own gate step is not followed: a
 * slot it had in hand is freed too.
 */
void tb_gate_fork_child(struct tb_gate *g);
void tb_gate_fork_held(struct tb_gate *g);

/*
 * How long a caller may wait at `now`: until acquire_ns (0: unbounded) has passed, or the
 * call's deadline, whichever is first (phase TB_PHASE_GATE or TB_PHASE_DEADLINE).
 */
struct tb_expiry tb_gate_wait_bound(int64_t now, int64_t acquire_ns, int64_t call_deadline);

/*
 * The file name of the shared gate of d with max slots: "gate-127.0.0.1_8080-max5",
 * "gate-__1__8080-max5" for [::1]:8080, and for a unix socket "gate-unix-<32 hex digits>-max5"
 * from the 128-bit hash of its path (the destination keeps only that hash), so two paths
 * never share a gate. Returns 0, or -1 when buf is too short or d has no family.
 * @unittest test_gate.c: test_file_name_*
 */
int tb_gate_file_name(const struct tb_dest *d, int max, char *buf, size_t len);

#endif
