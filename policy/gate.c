/* gate.c - the gate's state machine: a counter of leased slots for the fast path, and a FIFO
 * of waiters behind a mutex for the slow path. A released slot is handed to the oldest
 * waiter directly (the counter stays up), so late arrivals can never overtake the queue. */
#include "gate.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

void tb_gate_init(struct tb_gate *g, const struct tb_dest *d, int max, int max_pending)
{
	memset(g, 0, sizeof(*g));
	g->dest = *d;
	atomic_init(&g->max, max);
	g->max_pending = max_pending;
	pthread_mutex_init(&g->lock, NULL);
}

/*
 * The queue's lock, held with every signal blocked. close() is async-signal-safe, and a
 * handler that closes a gated socket gives its slot back through tb_gate_release, which
 * takes this lock when someone waits: had the handler interrupted its own thread inside
 * the lock (queueing at the full gate, giving up, handing a slot over), the thread would
 * wait for itself for good, and every later connect to the destination behind it
 * (regress/gate_close_in_handler). Only the slow paths take it, next to a futex call.
 */
static void queue_lock(struct tb_gate *g, sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
	pthread_mutex_lock(&g->lock);
}

static void queue_unlock(struct tb_gate *g, const sigset_t *old)
{
	pthread_mutex_unlock(&g->lock);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static bool take_free_slot(struct tb_gate *g)
{
	int l = atomic_load(&g->leased);

	while (l < atomic_load_explicit(&g->max, memory_order_relaxed))
		if (atomic_compare_exchange_weak(&g->leased, &l, l + 1))
			return true;
	return false;
}

bool tb_gate_try_acquire(struct tb_gate *g)
{
	if (atomic_load(&g->pending) != 0)
		return false;
	if (!take_free_slot(g))
		return false;
	atomic_fetch_add_explicit(&g->acquired, 1, memory_order_relaxed);
	return true;
}

enum tb_gate_result tb_gate_enqueue(struct tb_gate *g, struct tb_gate_waiter *w)
{
	sigset_t mask;
	enum tb_gate_result r;

	queue_lock(g, &mask);
	if (g->head == NULL && take_free_slot(g)) {
		atomic_fetch_add_explicit(&g->acquired, 1, memory_order_relaxed);
		r = TB_GATE_TOOK;
		goto out;
	}
	if (g->max_pending > 0 && atomic_load(&g->pending) >= g->max_pending) {
		atomic_fetch_add_explicit(&g->rejected, 1, memory_order_relaxed);
		r = TB_GATE_REJECTED;
		goto out;
	}
	/* Announce the wait before looking at the counter once more: a release that
	 * decremented it before seeing pending > 0 left a slot that is ours to take. */
	atomic_fetch_add(&g->pending, 1);
	if (g->head == NULL && take_free_slot(g)) {
		atomic_fetch_sub(&g->pending, 1);
		atomic_fetch_add_explicit(&g->acquired, 1, memory_order_relaxed);
		r = TB_GATE_TOOK;
		goto out;
	}
	atomic_store(&w->granted, 0);
	w->next = NULL;
	w->prev = g->tail;
	if (g->tail != NULL)
		g->tail->next = w;
	else
		g->head = w;
	g->tail = w;
	r = TB_GATE_QUEUED;
out:
	queue_unlock(g, &mask);
	return r;
}

static void unlink_waiter(struct tb_gate *g, struct tb_gate_waiter *w)
{
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		g->head = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	else
		g->tail = w->prev;
	w->next = w->prev = NULL;
}

struct tb_gate_waiter *tb_gate_release(struct tb_gate *g)
{
	sigset_t mask;
	struct tb_gate_waiter *w = NULL;

	atomic_fetch_sub(&g->leased, 1);
	/* seq_cst pair with tb_gate_enqueue: it raises pending then reads leased. */
	if (atomic_load(&g->pending) == 0)
		return NULL;
	queue_lock(g, &mask);
	if (g->head != NULL && take_free_slot(g)) {
		w = g->head;
		unlink_waiter(g, w);
		atomic_fetch_sub(&g->pending, 1);
		atomic_fetch_add_explicit(&g->acquired, 1, memory_order_relaxed);
		atomic_store(&w->granted, 1);
	}
	queue_unlock(g, &mask);
	return w;
}

int tb_gate_resize(struct tb_gate *g, int max, atomic_uint **woken, int n)
{
	sigset_t mask;
	struct tb_gate_waiter *w;
	int k = 0;

	atomic_store(&g->max, max);
	/* seq_cst pair with tb_gate_enqueue, as in tb_gate_release: a waiter that raised
	 * pending before we stored max either sees the new max or is seen here. */
	if (atomic_load(&g->pending) == 0)
		return 0;
	queue_lock(g, &mask);
	while (k < n && g->head != NULL && take_free_slot(g)) {
		w = g->head;
		unlink_waiter(g, w);
		atomic_fetch_sub(&g->pending, 1);
		atomic_fetch_add_explicit(&g->acquired, 1, memory_order_relaxed);
		atomic_store(&w->granted, 1);
		woken[k++] = &w->granted;
	}
	queue_unlock(g, &mask);
	return k;
}

bool tb_gate_cancel(struct tb_gate *g, struct tb_gate_waiter *w)
{
	sigset_t mask;
	bool removed = false;

	queue_lock(g, &mask);
	if (!atomic_load(&w->granted)) {
		unlink_waiter(g, w);
		atomic_fetch_sub(&g->pending, 1);
		removed = true;
	}
	queue_unlock(g, &mask);
	return removed;
}

void tb_gate_fork_child(struct tb_gate *g)
{
	pthread_mutex_init(&g->lock, NULL);
	g->head = g->tail = NULL;
	atomic_store(&g->pending, 0);
	atomic_store(&g->leased, 0);
}

void tb_gate_fork_held(struct tb_gate *g)
{
	atomic_fetch_add(&g->leased, 1);
}

struct tb_expiry tb_gate_wait_bound(int64_t now, int64_t acquire_ns, int64_t call_deadline)
{
	int64_t at = TB_NEVER;

	if (acquire_ns > 0 && now < TB_NEVER - acquire_ns)
		at = now + acquire_ns;
	return tb_expiry_pick(TB_PHASE_GATE, at, call_deadline);
}

int tb_gate_file_name(const struct tb_dest *d, int max, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char dest[TB_DEST_STRLEN];
	int n;

	if (d->family == AF_UNIX) {
		for (int i = 0; i < 16; i++) {
			dest[2 * i] = hex[d->addr[i] >> 4];
			dest[2 * i + 1] = hex[d->addr[i] & 0xf];
		}
		dest[32] = '\0';
		n = snprintf(buf, len, "gate-unix-%s-max%d", dest, max);
	} else if (d->family == AF_INET || d->family == AF_INET6) {
		/* ':' and brackets out of file names: tools split on them. */
		tb_dest_format(d, dest, sizeof(dest));
		for (char *p = dest; *p; p++)
			if (*p == ':' || *p == '[' || *p == ']')
				*p = '_';
		n = snprintf(buf, len, "gate-%s-max%d", dest, max);
	} else {
		return -1;
	}
	return n > 0 && (size_t)n < len ? 0 : -1;
}
