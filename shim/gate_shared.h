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

/* Opens (creating if needed) the shared gate of d for set's size. NULL on failure, after
 * one log line saying why (the destination then gets this process's own gate). */
struct tb_shared_gate *tb_shared_gate_open(const struct tb_dest *d, const struct tb_settings *set);

/*
 * Takes a slot for fd; same contract as tb_gates_acquire, and 1 when the gate file cannot
 * be opened (the connect then goes ungated). On success *slot_fd is the fd
 * whose lock holds the slot: closing it (from every process holding a copy) gives the
 * slot back, and so does the death of every holder, with no one's help.
 */
int tb_shared_gate_acquire(struct tb_shared_gate *g, const struct tb_settings *set,
			   bool nonblock, int fd, int64_t call_start, int64_t call_deadline,
			   enum tb_phase *phase, int *slot_fd);

/* Gives back the slot held through slot_fd (closes it) and wakes a waiter. */
void tb_shared_gate_release(struct tb_shared_gate *g, int slot_fd);

/* Counts slots held and callers waiting, across all processes, by probing the locks. */
void tb_shared_gate_counts(struct tb_shared_gate *g, long *leased, long *pending);

void tb_shared_gate_stats(struct tb_shared_gate *g, unsigned long *acquired,
			  unsigned long *timed_out, unsigned long *rejected);

#endif
