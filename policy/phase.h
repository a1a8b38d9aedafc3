/* phase.h - which phase bounds a wait, and when it expires. Pure: every function takes `now`.
 * "Phases measure the peer, not the program": idle time is summed only while a thread waits. */
#ifndef TB_PHASE_H
#define TB_PHASE_H

#include <stdbool.h>
#include <stdint.h>

#include "settings.h"

/*
 * One direction of a socket, seen from the program: how long the peer has been silent
 * (read side) or has accepted nothing (write side) while the program waited, summed over
 * every wait since the last byte moved. SO_TIMEOUT semantics, but across the program's own
 * poll loops: four 1 s polls count 4 s of silence.
 */
struct tb_idle {
	int64_t idle_ns;    /* silence summed over waits that have ended */
	int64_t wait_begin; /* start of the wait under way */
};

/* A wait starts / ends at `now`; bytes moved (the peer spoke, or took our bytes). */
void tb_idle_wait_begin(struct tb_idle *c, int64_t now);
void tb_idle_wait_end(struct tb_idle *c, int64_t now);
void tb_idle_progress(struct tb_idle *c);

/* Silence so far: ended waits plus, when `waiting`, the wait under way. */
int64_t tb_idle_silence(const struct tb_idle *c, bool waiting, int64_t now);

/* The moment a wait that began at c->wait_begin exceeds `limit_ns` of silence
 * (TB_NEVER when limit_ns is 0). Never earlier than c->wait_begin. */
int64_t tb_idle_expiry(const struct tb_idle *c, int64_t limit_ns);

/* What one wait is bounded by: the earliest of its phase limit and the call's deadline. */
struct tb_expiry {
	int64_t at;          /* absolute, TB_NEVER when nothing bounds the wait */
	enum tb_phase phase; /* the phase that fires at `at` */
};

/*
 * Chooses between a phase expiry and the call's deadline. The deadline wins ties: a call
 * cut at its deadline is reported as such even when a phase limit happens to coincide.
 */
struct tb_expiry tb_expiry_pick(enum tb_phase phase, int64_t phase_at, int64_t call_deadline);

#endif
