/* gates.h - this process's gates, one per destination: lookup, the bounded wait, release.
 * The state machine is gate.c; this file adds the table, the futex wait and the log. */
#ifndef TB_GATES_H
#define TB_GATES_H

#include <stdbool.h>
#include <stdint.h>

#include "dest.h"
#include "gate.h"
#include "settings.h"

/* The gate of destination d, created on first use with set's size. NULL when the table is
 * full (4,096 destinations per process: the first ungated destination is logged, and the
 * exit summary counts the ungated connects) or memory is short: the destination then goes
 * ungated rather than failing. */
struct tb_gate *tb_gates_get(const struct tb_dest *d, const struct tb_settings *set);

/*
 * Takes a slot for a connect on fd, waiting at most until the bound of tb_gate_wait_bound
 * (acquire_timeout, the call's deadline). A non-blocking connect waits too, unless
 * gate_nonblocking = fail. Returns 0 with a slot held. Otherwise -1 with errno:
 * ETIMEDOUT (the wait ran out; *phase says whether acquire_timeout or the deadline bound
 * it; logged as event=timeout), EAGAIN (refused at once: the queue is full, or a
 * non-blocking connect with gate_nonblocking = fail; logged as event=reject), or EINTR (a
 * signal handler ran: the program's own alarm-based timeouts keep working).
 * *slot_fd is -1, or with a shared gate the fd whose lock holds the slot. It is 1 when a
 * shared gate could not be reached and the connect goes ungated (no slot to give back).
 */
int tb_gates_acquire(struct tb_gate *g, const struct tb_settings *set, bool nonblock, int fd,
		     int64_t call_start, int64_t call_deadline, enum tb_phase *phase,
		     int *slot_fd);

/* Gives a slot back, waking exactly the oldest waiter if there is one. slot_fd is what
 * tb_gates_acquire stored (-1 for a gate of this process alone). */
void tb_gates_release(struct tb_gate *g, int slot_fd);

/* An adaptive gate's new size (max_conns = "auto", protect.c): waiters that now fit are
 * woken. A shared gate keeps its size. */
void tb_gates_resize(struct tb_gate *g, int max);

/* Forked child: the waiting threads did not survive; empty every queue and free every
 * slot, which the caller then counts back from the sockets (tb_sock_slots_fork_child,
 * through tb_gates_fork_held), then tb_gates_fork_unheld closes the shared gates' slot
 * descriptions the child inherited from threads that had them in hand. */
void tb_gates_fork_child(void);
void tb_gates_fork_held(struct tb_gate *g, int slot_fd);
void tb_gates_fork_unheld(void);

/*
 * A shared gate's slot is in hand (tb_shared_gate_in_hand) between a successful
 * tb_gates_acquire, which counts it, and its record by the socket (tb_sock_hold_slot) or
 * its release: the caller then calls this with -1. A close brackets its taking of the slot
 * from the socket and the release with +1 and -1. Nothing for a gate of the process's own;
 * g NULL: an fd that may be a slot's (a move out of the program's way) counts too.
 */
void tb_gates_in_hand(const struct tb_gate *g, int delta);

/* One event=gate line per destination (leased, pending, max, acquired, timed_out,
 * rejected), and one line counting connects left ungated by a full table if any: printed
 * at exit when TIMEBOX_LOG_LEVEL=info. */
void tb_gates_summary(void);

/* The numbers of one gate, as tb_gates_each reports them. */
struct tb_gate_counts {
	long leased, pending, max;
	unsigned long acquired, timed_out, rejected;
};

/* Calls fn once per gate of this process with its current numbers (the exit summary and the
 * statistics read them the same way). Lock-free; the numbers are relaxed reads. */
void tb_gates_each(void (*fn)(void *ctx, const struct tb_dest *d,
			      const struct tb_gate_counts *c), void *ctx);

#endif
