/* gate_shared.h - one gate per destination for every process that runs with the same
 * settings (TIMEBOX_GATE_SHARED): pre-fork servers whose cap is meant per service. */
#ifndef TB_GATE_SHARED_H
#define TB_GATE_SHARED_H

#include <stdbool.h>
#include <stdint.h>

#include "dest.h"
#include "phase.h"
#include "settings.h"

struct tb_shared_gate;

/* Opens (creating if needed) the shared gate of d for set's size. NULL on failure (the
 * destination then gets this process's own gate); the first failure in a process is logged
 * with its reason (full /dev/shm, a directory someone else owns, ...). */
struct tb_shared_gate *tb_shared_gate_open(const struct tb_dest *d, const struct tb_settings *set);

/*
 * Takes a slot for fd; same contract as tb_gates_acquire (EINTR included), and 1 when the
 * gate file cannot be opened (the connect then goes ungated; said once in the log). A gate
 * file deleted by someone else is re-created, and the process moves to it (slots held
 * through the deleted one still count until closed). On success *slot_fd is the fd
 * whose lock holds the slot: closing it (from every process holding a copy) gives the
 * slot back, and so does the death of every holder, with no one's help.
 */
int tb_shared_gate_acquire(struct tb_shared_gate *g, const struct tb_settings *set,
			   bool nonblock, int fd, int64_t call_start, int64_t call_deadline,
			   enum tb_phase *phase, int *slot_fd);

/* The end of a gate wait that ran out, for both kinds of gate: logs event=timeout (phase
 * gate, or deadline when the call's deadline was the nearer bound, with the elapsed time
 * counted from the matching start) and returns -1 with errno ETIMEDOUT. It lives here, below
 * the table of gates (gates.c), so that the two files depend one way only. */
int tb_gate_timed_out(const struct tb_dest *d, int fd, const struct tb_settings *set,
		      enum tb_phase phase, int64_t begin, int64_t call_start,
		      int64_t call_deadline);

/* Gives back the slot held through slot_fd (closes it) and wakes a waiter. */
void tb_shared_gate_release(struct tb_shared_gate *g, int slot_fd);

/* Counts slots held and callers waiting, across all processes, by probing the locks. */
void tb_shared_gate_counts(struct tb_shared_gate *g, long *leased, long *pending);

/* acquired, timed_out and rejected since the gate file was created (all processes). */
void tb_shared_gate_stats(struct tb_shared_gate *g, unsigned long *acquired,
			  unsigned long *timed_out, unsigned long *rejected);

/*
 * A slot's description is in hand from its open for a connect until its socket records it
 * (tb_sock_hold_slot) or it is closed, and again while a close takes it from its socket and
 * closes it: the callers bracket those moments with +1 and -1. A fork child inherits the
 * descriptions other threads had in hand, which no socket of its own holds: its copy would
 * keep the slot locked, for every process sharing the gate, after the parent closed the
 * connection - until the child exits or execs (regress/gate_shared_fork_waiter).
 */
void tb_shared_gate_in_hand(int delta);

/* Forked child: gives the child a use lock of its own on every gate file (so neither
 * process's exit removes a file the other still uses) and resets the locks. When another
 * thread had a description in hand, the child then closes every one no socket of its own
 * holds a slot through: tb_shared_gate_fork_held for each slot fd a socket holds, then
 * tb_shared_gate_fork_unheld. */
void tb_shared_gate_fork_child(void);
void tb_shared_gate_fork_held(int slot_fd);
void tb_shared_gate_fork_unheld(void);

#endif
