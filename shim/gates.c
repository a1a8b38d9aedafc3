/* gates.c - the table of gates and the wait at a full one.
 * Lookup is lock-free (open addressing over atomic pointers, insert under a mutex: only the
 * first connect to a destination takes it). Waiting is a futex on the waiter's own word, so
 * a release wakes exactly the thread it hands the slot to. */
#include "gates.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "futex.h"
#include "gate_shared.h"
#include "log.h"

#define TABLE_SIZE 4096 /* destinations with a gate, per process */

static _Atomic(struct tb_gate *) table[TABLE_SIZE];
/* The gates in the order they were made, for those who visit them all (the stats thread
 * every second, fork): a scan of the whole table read its 32 KiB, which backs them on a
 * kernel that maps no zero page for a read of memory never written. count: release, after
 * the gate is stored. */
static _Atomic(struct tb_gate *) made[TABLE_SIZE];
static atomic_uint made_count;
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool table_full;          /* said once: later destinations go ungated */
static atomic_ulong ungated_connects;   /* connects that found no room in the table */

static unsigned hash_dest(const struct tb_dest *d)
{
	uint32_t h = 2166136261u;
	const uint8_t *p = d->addr;

	for (int i = 0; i < (d->family == AF_INET ? 4 : 16); i++)
		h = (h ^ p[i]) * 16777619u;
	h = (h ^ d->port) * 16777619u;
	return h & (TABLE_SIZE - 1);
}

/* Under insert_lock. */
static void made_one(struct tb_gate *g)
{
	unsigned n = atomic_load_explicit(&made_count, memory_order_relaxed);

	atomic_store_explicit(&made[n], g, memory_order_relaxed);
	atomic_store_explicit(&made_count, n + 1, memory_order_release);
}

struct tb_gate *tb_gates_get(const struct tb_dest *d, const struct tb_settings *set)
{
	unsigned i = hash_dest(d);
	struct tb_gate *g = NULL;

	for (unsigned n = 0; n < TABLE_SIZE; n++, i = (i + 1) & (TABLE_SIZE - 1)) {
		g = atomic_load_explicit(&table[i], memory_order_acquire);
		if (g == NULL)
			break;
		if (tb_dest_equal(&g->dest, d))
			return g;
	}
	if (g != NULL)
		goto full; /* entries are never removed: a table seen full stays full */
	pthread_mutex_lock(&insert_lock);
	i = hash_dest(d);
	for (unsigned n = 0; n < TABLE_SIZE; n++, i = (i + 1) & (TABLE_SIZE - 1)) {
		g = atomic_load_explicit(&table[i], memory_order_acquire);
		if (g != NULL && tb_dest_equal(&g->dest, d))
			goto out;
		if (g == NULL) {
			g = malloc(sizeof(*g));
			if (g != NULL) {
				tb_gate_init(g, d, set->max_conns, set->max_pending);
				if (set->gate_shared)
					g->shared = tb_shared_gate_open(d, set);
				atomic_store_explicit(&table[i], g, memory_order_release);
				made_one(g);
			}
			goto out;
		}
	}
	pthread_mutex_unlock(&insert_lock);
full:
	/* The table is fixed so that lookups stay lock-free; past it, ungated beats failing. */
	atomic_fetch_add_explicit(&ungated_connects, 1, memory_order_relaxed);
	if (!atomic_exchange(&table_full, true))
		tb_log_error("event=error what=gate_table error=\"more than 4096 destinations\" "
			     "effect=\"connects to further destinations are not gated (counted in "
			     "the exit summary)\"");
	return NULL;
out:
	pthread_mutex_unlock(&insert_lock);
	return g;
}

int tb_gates_acquire(struct tb_gate *g, const struct tb_settings *set, bool nonblock, int fd,
		     int64_t call_start, int64_t call_deadline, enum tb_phase *phase,
		     int *slot_fd)
{
	struct tb_gate_waiter w;
	struct tb_expiry bound;
	int64_t begin;
	int err;

	*slot_fd = -1;
	if (g->shared != NULL) {
		int got;

		tb_shared_gate_in_hand(1);
		got = tb_shared_gate_acquire(g->shared, set, nonblock, fd, call_start,
					     call_deadline, phase, slot_fd);
		if (got != 0)
			tb_shared_gate_in_hand(-1);
		return got;
	}
	if (tb_gate_try_acquire(g))
		return 0;
	if (nonblock && set->gate_nonblocking == TB_GATE_NB_FAIL) {
		atomic_fetch_add_explicit(&g->rejected, 1, memory_order_relaxed);
		tb_log_reject(TB_PHASE_GATE, &g->dest, fd, "full");
		errno = EAGAIN;
		return -1;
	}
	switch (tb_gate_enqueue(g, &w)) {
	case TB_GATE_TOOK:
		return 0;
	case TB_GATE_REJECTED:
		tb_log_reject(TB_PHASE_GATE, &g->dest, fd, "max_pending");
		errno = EAGAIN;
		return -1;
	case TB_GATE_QUEUED:
		break;
	}
	begin = tb_now();
	bound = tb_gate_wait_bound(begin, set->acquire_ns, call_deadline);
	for (;;) {
		if (atomic_load(&w.granted))
			return 0;
		err = tb_futex_wait_until(&w.granted, 0, bound.at, false);
		if (atomic_load(&w.granted))
			return 0;
		if (err == ETIMEDOUT && tb_now() < bound.at)
			continue; /* a clock edge: never give up early */
		if (err != ETIMEDOUT && err != EINTR)
			continue;
		if (!tb_gate_cancel(g, &w))
			return 0; /* the slot was handed over as we gave up: keep it */
		if (err == EINTR) {
			errno = EINTR;
			return -1;
		}
		atomic_fetch_add_explicit(&g->timed_out, 1, memory_order_relaxed);
		*phase = bound.phase;
		return tb_gate_timed_out(&g->dest, fd, set, bound.phase, begin, call_start,
					 call_deadline);
	}
}

void tb_gates_release(struct tb_gate *g, int slot_fd)
{
	struct tb_gate_waiter *w;

	if (g->shared != NULL) {
		if (slot_fd >= 0)
			tb_shared_gate_release(g->shared, slot_fd);
		return;
	}
	w = tb_gate_release(g);
	/* The waiter may already have seen `granted` and returned, its stack reused: a wake
	 * on that address is at worst a spurious wake-up, which every futex user tolerates. */
	if (w != NULL)
		tb_futex_wake_one(&w->granted, false);
}

void tb_gates_resize(struct tb_gate *g, int max)
{
	atomic_uint *woken[32];
	int k;

	if (g->shared != NULL)
		return; /* a shared gate keeps its size (lint max-conns-auto-shared) */
	do {
		k = tb_gate_resize(g, max, woken, 32);
		for (int i = 0; i < k; i++)
			tb_futex_wake_one(woken[i], false);
	} while (k == 32);
}

void tb_gates_fork_child(void)
{
	pthread_mutex_init(&insert_lock, NULL);
	tb_shared_gate_fork_child();
	for (unsigned i = 0, n = atomic_load(&made_count); i < n; i++)
		tb_gate_fork_child(atomic_load_explicit(&made[i], memory_order_relaxed));
}

void tb_gates_in_hand(const struct tb_gate *g, int delta)
{
	if (g == NULL || g->shared != NULL)
		tb_shared_gate_in_hand(delta);
}

void tb_gates_fork_held(struct tb_gate *g, int slot_fd)
{
	tb_gate_fork_held(g);
	if (g->shared != NULL)
		tb_shared_gate_fork_held(slot_fd);
}

void tb_gates_fork_unheld(void)
{
	tb_shared_gate_fork_unheld();
}

void tb_gates_each(void (*fn)(void *ctx, const struct tb_dest *d,
			      const struct tb_gate_counts *c), void *ctx)
{
	unsigned n = atomic_load_explicit(&made_count, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct tb_gate *g = atomic_load_explicit(&made[i], memory_order_relaxed);
		struct tb_gate_counts c;

		c.max = atomic_load_explicit(&g->max, memory_order_relaxed);
		if (g->shared != NULL) {
			tb_shared_gate_counts(g->shared, &c.leased, &c.pending);
			tb_shared_gate_stats(g->shared, &c.acquired, &c.timed_out, &c.rejected);
		} else {
			c.leased = atomic_load(&g->leased);
			c.pending = atomic_load(&g->pending);
			c.acquired = atomic_load(&g->acquired);
			c.timed_out = atomic_load(&g->timed_out);
			c.rejected = atomic_load(&g->rejected);
		}
		fn(ctx, &g->dest, &c);
	}
}

static void summary_line(void *ctx, const struct tb_dest *d, const struct tb_gate_counts *c)
{
	(void)ctx;
	tb_log_gate(d, c->leased, c->pending, c->max, c->acquired, c->timed_out, c->rejected);
}

void tb_gates_summary(void)
{
	tb_gates_each(summary_line, NULL);
	if (atomic_load(&ungated_connects) > 0) {
		char body[160];

		snprintf(body, sizeof(body), "event=error what=gate_table error=\"more than %d "
			 "destinations\" ungated_connects=%lu", TABLE_SIZE,
			 atomic_load(&ungated_connects));
		tb_log_error(body);
	}
}
