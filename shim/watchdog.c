/* watchdog.c - the expiry thread: a min-heap of sockets keyed by when to look at them next.
 * Entries are re-filed lazily: a socket whose waits keep moving its expiry later costs the
 * hot path no system call; the watchdog finds the newer expiry when the old one comes due. */
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "clock.h"
#include "futex.h"
#include "log.h"
#include "service.h"
#include "sock.h"

/* When a due wait is not cut (see tb_sock_expire), look again this much later at most. */
#define QUEUED_RECHECK_NS (10 * TB_NS_PER_MS)

struct entry {
	int64_t at;
	struct tb_sock *s;
};

/*
 * Cuts that shut only the reading half (tb_sock_expire_first) owe the peer a FIN. A program
 * told ETIMEDOUT nearly always closes the socket, and its close() sends the FIN in its own
 * thread's time; the watchdog sends it only when the socket is still open this long after
 * the cut, and no other cut is due. A FIN costs a cut's worth of CPU on loopback, and with
 * 1,000 waits cut at once, the watchdog's FINs took the CPU from the woken threads (on a
 * shared 2-core machine, the last thread returned 17 ms after its cut, all cuts on time).
 */
#define FIN_GRACE_NS (50 * TB_NS_PER_MS)

/* The owed cuts, in the order they were made (so by `at`). The watchdog's own, like the
 * heap. */
struct owed {
	int64_t at; /* when to send the FIN */
	struct tb_sock *s;
	uint32_t gen;
};

/*
 * The watchdog's state, in one place so that its layout is ours: the fields every wait that
 * tells the watchdog reads or swaps (tb_wd_arm) lie a cache line apart from the ones the
 * watchdog writes at every filing and cut. Laid out by the linker as separate variables,
 * heap_len and incoming shared a line.
 */
static struct {
	/* Read by every wait that tells the watchdog (tb_wd_arm). */
	_Atomic(struct tb_sock *) incoming;
	atomic_uint futex_word;
	atomic_int started;
	_Atomic(void (*)(void)) job; /* to run on the watchdog's thread (tb_wd_run_soon) */
	_Atomic int64_t next_wake; /* 0 while awake and about to look at incoming */
	pthread_mutex_t start_lock;
	/* The watchdog thread's own, written at every filing. */
	_Alignas(64) struct entry *heap;
	size_t heap_len, heap_cap;
	struct owed *owed; /* like the heap */
	size_t owed_head, owed_len, owed_cap;
} wd __attribute__((aligned(64))) = {
	.next_wake = TB_NEVER,
	.start_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void heap_swap(size_t a, size_t b)
{
	struct entry t = wd.heap[a];

	wd.heap[a] = wd.heap[b];
	wd.heap[b] = t;
}

static void heap_push(int64_t at, struct tb_sock *s)
{
	size_t i;

	if (wd.heap_len == wd.heap_cap) {
		size_t cap = wd.heap_cap ? wd.heap_cap * 2 : 256;
		struct entry *h = realloc(wd.heap, cap * sizeof(*h));

		if (h == NULL) {
			/* Cannot file it: the wait goes unbounded rather than crash the host. */
			atomic_store(&s->wd_filed_at, 0);
			return;
		}
		wd.heap = h;
		wd.heap_cap = cap;
	}
	i = wd.heap_len++;
	wd.heap[i].at = at;
	wd.heap[i].s = s;
	while (i > 0 && wd.heap[(i - 1) / 2].at > wd.heap[i].at) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static struct entry heap_pop(void)
{
	struct entry top = wd.heap[0];
	size_t i = 0;

	wd.heap[0] = wd.heap[--wd.heap_len];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < wd.heap_len && wd.heap[l].at < wd.heap[m].at)
			m = l;
		if (r < wd.heap_len && wd.heap[r].at < wd.heap[m].at)
			m = r;
		if (m == i)
			break;
		heap_swap(i, m);
		i = m;
	}
	return top;
}

/* Notes that s (generation gen), cut at `now`, owes the rest of its cut; done at once when
 * it cannot be noted. */
static void owe_rest(struct tb_sock *s, uint32_t gen, int64_t now)
{
	if (wd.owed_head == wd.owed_len) {
		wd.owed_head = wd.owed_len = 0;
	} else if (wd.owed_len == wd.owed_cap && wd.owed_head > 0) {
		memmove(wd.owed, wd.owed + wd.owed_head,
			(wd.owed_len - wd.owed_head) * sizeof(*wd.owed));
		wd.owed_len -= wd.owed_head;
		wd.owed_head = 0;
	}
	if (wd.owed_len == wd.owed_cap) {
		size_t cap = wd.owed_cap ? wd.owed_cap * 2 : 256;
		struct owed *o = realloc(wd.owed, cap * sizeof(*o));

		if (o == NULL) {
			tb_sock_cut_rest(s, gen);
			return;
		}
		wd.owed = o;
		wd.owed_cap = cap;
	}
	wd.owed[wd.owed_len].at = tb_at_after(now, FIN_GRACE_NS);
	wd.owed[wd.owed_len].s = s;
	wd.owed[wd.owed_len].gen = gen;
	wd.owed_len++;
}

static void file_at(struct tb_sock *s, int64_t at)
{
	atomic_store(&s->wd_filed_at, at);
	heap_push(at, s);
}

/* What the watchdog does with a socket after looking at it. */
enum verdict {
	V_FILE,    /* file it again for `at` */
	V_DROP,    /* nothing to look at: unfile it (then make sure no wait began meanwhile) */
	V_GIVE_UP, /* no fd of it can be verified: stop governing it, never look again */
};

/*
 * One side of s with waiters, at `now`: when to look at it next, or the verdict that ends
 * the socket's filing. A due wait is recomputed first (the hot path may have moved it
 * later since it stored `expiry`); if still due, tb_sock_expire decides - it may cut, or
 * say when to look again (data queued, a send still draining, bytes arriving unseen).
 */
static enum verdict side_next(struct tb_sock *s, enum tb_side side, uint32_t w, int64_t now,
			      int64_t *at, int64_t *seen)
{
	struct tb_side_state *sd = &s->side[side];
	int64_t dl;

	*at = *seen = atomic_load_explicit(&sd->expiry, memory_order_relaxed);
	if (*at > now) {
		/* Not due: a blocked send is looked at meanwhile (progress it cannot report). */
		if (side == TB_WR && TB_ST(w) == TB_ST_OPEN) {
			int64_t look = tb_sock_sample_acked(s, now);

			if (look < *at)
				*at = look;
		}
		return V_FILE;
	}
	{
		struct tb_expiry e = tb_sock_expiry(s, side);

		if (e.at > now) { /* moved since it was stored */
			*at = e.at;
		} else {
			int64_t recheck = tb_at_after(now, QUEUED_RECHECK_NS);
			int rc = tb_sock_expire_first(s, TB_ST_GEN(w), side, e.phase, now,
						      &recheck);

			if (rc == -2)
				return V_GIVE_UP;
			if (rc == 2)
				owe_rest(s, TB_ST_GEN(w), now);
			if (rc != 0)
				return V_DROP; /* cut, or the socket changed under us */
			*at = recheck;
		}
	}
	/* Not cut: never sleep past the call's deadline. */
	dl = atomic_load_explicit(&s->call_deadline, memory_order_relaxed);
	if (dl < *at && dl > now)
		*at = dl;
	return V_FILE;
}

/* Nobody waits on s: between two exchanges of a busy keep-alive socket, keeping it filed
 * one more linger period spares the next wait a wake-up call. Returns when to look again,
 * or 0 to drop it. */
static int64_t linger_until(struct tb_sock *s, int64_t now)
{
	int64_t last = atomic_load_explicit(&s->side[TB_RD].wait_begin, memory_order_relaxed);
	int64_t lastw = atomic_load_explicit(&s->side[TB_WR].wait_begin, memory_order_relaxed);
	int64_t linger = tb_settings_min_limit(atomic_load_explicit(&s->set,
								    memory_order_relaxed));

	if (linger <= 0)
		linger = TB_NS_PER_S;
	if (lastw > last)
		last = lastw;
	return now - last < linger ? tb_at_after(now, linger) : 0;
}

#define TB_SEEN_NONE INT64_MIN

/* Looks at s as a whole: the verdict, and for V_FILE when to look next. seen[side]: the
 * stored expiry it read of each side with waiters, TB_SEEN_NONE for a side without. */
static enum verdict next_look(struct tb_sock *s, int64_t now, int64_t *at, int64_t seen[2])
{
	uint32_t w = tb_sock_word(s);
	int64_t soonest = TB_NEVER;
	bool waiting = false;

	seen[TB_RD] = seen[TB_WR] = TB_SEEN_NONE;
	if (TB_ST(w) == TB_ST_FREE || TB_ST(w) == TB_ST_EXPIRED)
		return V_DROP;
	for (int side = TB_RD; side <= TB_WR; side++) {
		int64_t side_at;
		enum verdict v;

		if (atomic_load(&s->side[side].waiters) == 0)
			continue;
		waiting = true;
		v = side_next(s, (enum tb_side)side, w, now, &side_at, &seen[side]);
		if (v != V_FILE)
			return v;
		if (side_at < soonest)
			soonest = side_at;
	}
	if (!waiting)
		soonest = linger_until(s, now);
	if (soonest == 0 || soonest == TB_NEVER)
		return V_DROP;
	*at = soonest;
	return V_FILE;
}

/* Takes s out of the heap. Returns true when a wait may have begun meanwhile without
 * queueing s (it read wd_filed_at before we cleared it): s must be looked at once more.
 * Pairs with tb_sock_wait_record (waiters then wd_filed_at; here the reverse, seq_cst). */
static bool unfile(struct tb_sock *s)
{
	uint32_t w;

	atomic_store(&s->wd_filed_at, 0);
	if (atomic_load(&s->side[TB_RD].waiters) == 0 &&
	    atomic_load(&s->side[TB_WR].waiters) == 0)
		return false;
	w = tb_sock_word(s);
	return TB_ST(w) != TB_ST_FREE && TB_ST(w) != TB_ST_EXPIRED;
}

/*
 * Files s for `at`, then looks at the waits' stored expiries once the filing is visible:
 * a wait that began while the watchdog looked at s (after it read that side) saw the old
 * filing, at or before its expiry, and told nobody - yet `at` was computed without it, and
 * may lie past it (a lingering socket is filed a whole linger period on, and a wait that
 * begins then may end at a call's deadline much sooner). A wait stores its expiry before
 * it is counted, then reads wd_filed_at (rule 5); here the reverse: so either the wait sees
 * the new filing and tells the watchdog itself, or its expiry is seen here. An expiry the
 * look already read (`seen`) was accounted for: only another one is a wait it missed.
 */
static void file_checked(struct tb_sock *s, int64_t at, const int64_t seen[2])
{
	int64_t soonest = at;

	file_at(s, at);
	for (int side = TB_RD; side <= TB_WR; side++) {
		int64_t e;

		if (atomic_load(&s->side[side].waiters) == 0)
			continue;
		e = atomic_load_explicit(&s->side[side].expiry, memory_order_relaxed);
		if (e != seen[side] && e < soonest)
			soonest = e;
	}
	if (soonest < at)
		file_at(s, soonest); /* the first filing is superseded (look_due skips it) */
}

/*
 * Looks at one socket at `now`: cut a due wait, or file it again for the earliest future
 * expiry of its waits, or (nobody waits) keep it a little while if it was busy lately, else
 * drop it. A second look after unfiling is enough: a wait that reads wd_filed_at after the
 * first unfile sees 0 and queues the socket itself. Never loops beyond that: a socket that
 * cannot be acted on is given up, not retried (it used to spin a core here).
 */
static void evaluate(struct tb_sock *s, int64_t now)
{
	for (int pass = 0; pass < 2; pass++) {
		int64_t at = 0, seen[2];

		switch (next_look(s, now, &at, seen)) {
		case V_FILE:
			file_checked(s, at, seen);
			return;
		case V_GIVE_UP:
			atomic_store(&s->wd_filed_at, 0);
			return;
		case V_DROP:
			if (!unfile(s))
				return;
			break;
		}
	}
}

static void drain_incoming(int64_t now)
{
	struct tb_sock *s = atomic_exchange_explicit(&wd.incoming, NULL, memory_order_acquire);

	while (s != NULL) {
		/* Relaxed: the exchange above (acquire) pairs with the push's release CAS. */
		struct tb_sock *next = atomic_load_explicit(&s->incoming_next,
							    memory_order_relaxed);

		atomic_store(&s->in_incoming, false);
		evaluate(s, now);
		s = next;
	}
}

/* Looks at every socket whose time has come, the clock read again when the heap's top is
 * not due at the `now` of the loop: the sockets that came due during a batch of cuts are
 * cut in it. */
static void look_due(int64_t now)
{
	while (wd.heap_len > 0) {
		struct entry e;

		if (wd.heap[0].at > now && wd.heap[0].at > (now = tb_now()))
			return;
		e = heap_pop();
		if (atomic_load(&e.s->wd_filed_at) != e.at)
			continue; /* superseded by a later filing */
		evaluate(e.s, now);
	}
}

/* Completes the cuts owed whose time has come (tb_sock_cut_rest), oldest first, while no
 * other cut is due. Returns true when it stopped for a cut that came due or a wait that was
 * queued, with such cuts still owed; at least one is completed per call, so none waits
 * forever. */
static bool complete_owed(int64_t now)
{
	while (wd.owed_head < wd.owed_len && wd.owed[wd.owed_head].at <= now) {
		struct owed o = wd.owed[wd.owed_head++];

		tb_sock_cut_rest(o.s, o.gen);
		now = tb_now();
		if (wd.owed_head < wd.owed_len && wd.owed[wd.owed_head].at <= now &&
		    ((wd.heap_len > 0 && wd.heap[0].at <= now) ||
		     atomic_load(&wd.incoming) != NULL))
			return true;
	}
	return false;
}

/* When the watchdog must look next: the heap's top, or the oldest FIN owed. */
static int64_t next_due(void)
{
	int64_t at = wd.heap_len > 0 ? wd.heap[0].at : TB_NEVER;

	if (wd.owed_head < wd.owed_len && wd.owed[wd.owed_head].at < at)
		at = wd.owed[wd.owed_head].at;
	return at;
}

static void run_job(void)
{
	void (*fn)(void) = atomic_exchange(&wd.job, NULL);

	if (fn != NULL)
		fn();
}

static void *wd_main(void *arg)
{
	(void)arg;
	/* Fire as close to the expiry as the kernel allows: the default 50 us slack would be
	 * added to every cut. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	for (;;) {
		unsigned seq = atomic_load(&wd.futex_word);
		int64_t now, wake;

		/* After seq: an asker stores the job, then bumps the word and wakes. */
		if (__builtin_expect(atomic_load_explicit(&wd.job, memory_order_relaxed) != NULL, 0))
			run_job();

		atomic_store(&wd.next_wake, 0);
		now = tb_now();
		drain_incoming(now);
		look_due(now);
		/* The cuts first, the FINs owed after them: a FIN costs most of a cut. */
		if (complete_owed(tb_now()))
			continue;
		wake = next_due();
		atomic_store(&wd.next_wake, wake);
		if (atomic_load(&wd.incoming) != NULL)
			continue;
		tb_futex_wait_until(&wd.futex_word, seq, wake, false);
	}
	return NULL;
}

/* Every signal stays blocked while start_lock is held: a handler that connects would ask for
 * the watchdog again on this thread and wait for itself (regress/connect_in_handler_wd_start).
 * A signal that arrives meanwhile is delivered once the watchdog runs. */
void tb_wd_start(void)
{
	sigset_t all, old;

	if (atomic_load(&wd.started))
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_mutex_lock(&wd.start_lock);
	if (atomic_load(&wd.started))
		goto out;
	if (tb_service_start(wd_main, 64 * 1024, "timebox-wd"))
		atomic_store(&wd.started, 1);
	else
		tb_log_error("event=error what=watchdog_thread "
			     "error=\"cannot start the watchdog thread; waits are unbounded\"");
out:
	pthread_mutex_unlock(&wd.start_lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void tb_wd_run_soon(void (*fn)(void))
{
	atomic_store(&wd.job, fn);
	if (!atomic_load(&wd.started)) {
		tb_wd_start();
		if (!atomic_load(&wd.started)) {
			run_job(); /* no watchdog: here */
			return;
		}
	}
	/* Woken even when this call started it: another thread may have started it a moment
	 * before, and its first look at `job` came before the store above. */
	atomic_fetch_add(&wd.futex_word, 1);
	tb_futex_wake_one(&wd.futex_word, false);
}

void tb_wd_arm(struct tb_sock *s, int64_t at)
{
	int64_t filed = atomic_load(&s->wd_filed_at);
	struct tb_sock *head;

	if (filed != 0 && filed <= at)
		return;
	if (!atomic_exchange(&s->in_incoming, true)) {
		head = atomic_load(&wd.incoming);
		do {
			atomic_store_explicit(&s->incoming_next, head, memory_order_relaxed);
		} while (!atomic_compare_exchange_weak_explicit(&wd.incoming, &head, s,
								 memory_order_release,
								 memory_order_relaxed));
	}
	if (__builtin_expect(!atomic_load_explicit(&wd.started, memory_order_relaxed), 0))
		tb_wd_start();
	if (at < atomic_load(&wd.next_wake)) {
		atomic_fetch_add(&wd.futex_word, 1);
		tb_futex_wake_one(&wd.futex_word, false);
	}
}

/* Each field is read before it is written: a fork child that writes a page copies it, and
 * an idle socket's entry has nothing to clear. */
#define CLEAR(field) \
	do { \
		if (atomic_load_explicit(&(field), memory_order_relaxed)) \
			atomic_store(&(field), 0); \
	} while (0)

static void reset_sock(struct tb_sock *s)
{
	unsigned own = tb_sock_busy_own(s);

	CLEAR(s->wd_filed_at);
	CLEAR(s->in_incoming);
	/* The parent's threads' expiries are gone; the forking thread's own (it forked from a
	 * handler above it) goes on here, and drops its count when it ends. */
	if (atomic_load_explicit(&s->busy, memory_order_relaxed) != own)
		atomic_store(&s->busy, own);
	CLEAR(s->log_pending); /* the parent writes its own lines */
	CLEAR(s->side[TB_RD].waiters);
	CLEAR(s->side[TB_WR].waiters);
}

#undef CLEAR

void tb_wd_fork_child(void)
{
	pthread_mutex_init(&wd.start_lock, NULL);
	atomic_store(&wd.started, 0);
	atomic_store(&wd.job, NULL);
	atomic_store(&wd.incoming, NULL);
	atomic_store(&wd.next_wake, TB_NEVER);
	wd.heap_len = 0;
	wd.owed_head = wd.owed_len = 0; /* the parent's watchdog completes its own cuts */
	tb_sock_noted_fork_child();
	tb_sock_fork_child();
	tb_sock_foreach(reset_sock);
}
