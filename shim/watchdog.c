/* watchdog.c - the expiry thread: a min-heap of sockets keyed by when to look at them next.
 * Entries are re-filed lazily: a socket whose waits keep moving its expiry later costs the
 * hot path no system call; the watchdog finds the newer expiry when the old one comes due. */
#include "watchdog.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "sock.h"

/* When a due wait is not cut (see tb_sock_expire), look again this much later at most. */
#define QUEUED_RECHECK_NS (10 * TB_NS_PER_MS)

struct entry {
	int64_t at;
	struct tb_sock *s;
};

static struct entry *heap;
static size_t heap_len, heap_cap;

static _Atomic(struct tb_sock *) incoming;
static atomic_uint futex_word;
static _Atomic int64_t next_wake = TB_NEVER; /* 0 while awake and about to look at incoming */
static atomic_int started;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

static void heap_swap(size_t a, size_t b)
{
	struct entry t = heap[a];

	heap[a] = heap[b];
	heap[b] = t;
}

static void heap_push(int64_t at, struct tb_sock *s)
{
	size_t i;

	if (heap_len == heap_cap) {
		size_t cap = heap_cap ? heap_cap * 2 : 256;
		struct entry *h = realloc(heap, cap * sizeof(*h));

		if (h == NULL) {
			/* Cannot file it: the wait goes unbounded rather than crash the host. */
			atomic_store(&s->wd_filed_at, 0);
			return;
		}
		heap = h;
		heap_cap = cap;
	}
	i = heap_len++;
	heap[i].at = at;
	heap[i].s = s;
	while (i > 0 && heap[(i - 1) / 2].at > heap[i].at) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static struct entry heap_pop(void)
{
	struct entry top = heap[0];
	size_t i = 0;

	heap[0] = heap[--heap_len];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < heap_len && heap[l].at < heap[m].at)
			m = l;
		if (r < heap_len && heap[r].at < heap[m].at)
			m = r;
		if (m == i)
			break;
		heap_swap(i, m);
		i = m;
	}
	return top;
}

static void file_at(struct tb_sock *s, int64_t at)
{
	atomic_store(&s->wd_filed_at, at);
	heap_push(at, s);
}

/*
 * Looks at one socket at `now`: cut a due wait, or file it again for the earliest future
 * expiry of its waits, or (nobody waits) keep it a little while if it was busy lately, else
 * drop it. Dropping clears wd_filed_at first and then re-reads the waiters: a wait that began
 * meanwhile either sees 0 and queues the socket itself, or is seen here (seq_cst both sides).
 */
static void evaluate(struct tb_sock *s, int64_t now)
{
	for (;;) {
		uint32_t w = tb_sock_word(s);
		uint32_t gen = TB_ST_GEN(w);
		int64_t soonest = TB_NEVER;
		bool waiting = false;

		if (TB_ST(w) == TB_ST_FREE || TB_ST(w) == TB_ST_EXPIRED)
			goto drop;
		for (int side = TB_RD; side <= TB_WR; side++) {
			struct tb_side_state *sd = &s->side[side];
			int64_t at;

			if (atomic_load(&sd->waiters) == 0)
				continue;
			waiting = true;
			at = atomic_load_explicit(&sd->expiry, memory_order_relaxed);
			if (at <= now) {
				struct tb_expiry e = tb_sock_expiry(s, (enum tb_side)side);
				int64_t recheck = now + QUEUED_RECHECK_NS;

				if (e.at > now) { /* moved since it was stored */
					at = e.at;
				} else {
					if (tb_sock_expire(s, gen, (enum tb_side)side, e.phase, -1,
							   false, now, &recheck) != 0)
						goto drop;
					at = recheck;
				}
				{
					int64_t dl = atomic_load_explicit(&s->call_deadline,
									  memory_order_relaxed);

					if (dl < at && dl > now)
						at = dl;
				}
			} else if (side == TB_WR && TB_ST(w) == TB_ST_OPEN) {
				int64_t look = tb_sock_sample_outq(s, now);

				if (look < at)
					at = look;
			}
			if (at < soonest)
				soonest = at;
		}
		if (waiting) {
			if (soonest != TB_NEVER)
				file_at(s, soonest);
			else
				goto drop;
			return;
		}
		{
			/* Between two exchanges of a busy keep-alive socket nobody waits; keeping it
			 * filed one more linger period spares the next wait a wake-up call. */
			int64_t last = atomic_load_explicit(&s->side[TB_RD].wait_begin,
							    memory_order_relaxed);
			int64_t lastw = atomic_load_explicit(&s->side[TB_WR].wait_begin,
							     memory_order_relaxed);

			int64_t linger = tb_settings_min_limit(atomic_load_explicit(
				&s->set, memory_order_relaxed));

			if (linger <= 0)
				linger = TB_NS_PER_S;
			if (lastw > last)
				last = lastw;
			if (now - last < linger) {
				file_at(s, now + linger);
				return;
			}
		}
drop:
		atomic_store(&s->wd_filed_at, 0);
		if (atomic_load(&s->side[TB_RD].waiters) == 0 &&
		    atomic_load(&s->side[TB_WR].waiters) == 0)
			return;
		w = tb_sock_word(s);
		if (TB_ST(w) == TB_ST_FREE || TB_ST(w) == TB_ST_EXPIRED)
			return;
	}
}

static void drain_incoming(int64_t now)
{
	struct tb_sock *s = atomic_exchange(&incoming, NULL);

	while (s != NULL) {
		struct tb_sock *next = s->incoming_next;

		atomic_store(&s->in_incoming, false);
		evaluate(s, now);
		s = next;
	}
}

static void futex_wait_until(atomic_uint *word, unsigned val, int64_t at)
{
	struct timespec ts, *tsp = NULL;

	if (at != TB_NEVER) {
		ts.tv_sec = at / TB_NS_PER_S;
		ts.tv_nsec = at % TB_NS_PER_S;
		tsp = &ts;
	}
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time: an hrtimer, no drift
	 * from recomputing relative timeouts. */
	syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, val, tsp, NULL,
		FUTEX_BITSET_MATCH_ANY);
}

static void *wd_main(void *arg)
{
	(void)arg;
	/* Fire as close to the expiry as the kernel allows: the default 50 us slack would be
	 * added to every cut. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	for (;;) {
		unsigned seq = atomic_load(&futex_word);
		int64_t now, wake;

		atomic_store(&next_wake, 0);
		now = tb_now();
		drain_incoming(now);
		while (heap_len > 0 && heap[0].at <= now) {
			struct entry e = heap_pop();

			if (atomic_load(&e.s->wd_filed_at) != e.at)
				continue; /* superseded by a later filing */
			evaluate(e.s, now);
		}
		wake = heap_len > 0 ? heap[0].at : TB_NEVER;
		atomic_store(&next_wake, wake);
		if (atomic_load(&incoming) != NULL)
			continue;
		futex_wait_until(&futex_word, seq, wake);
	}
	return NULL;
}

static void start(void)
{
	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;

	pthread_mutex_lock(&start_lock);
	if (atomic_load(&started))
		goto out;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	/* The host's signals are for the host's threads: block them all in ours. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&tid, &attr, wd_main, NULL) == 0)
		atomic_store(&started, 1);
	else
		tb_log_error("event=error what=watchdog_thread "
			     "error=\"cannot start the watchdog thread; waits are unbounded\"");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
out:
	pthread_mutex_unlock(&start_lock);
}

void tb_wd_arm(struct tb_sock *s, int64_t at)
{
	int64_t filed = atomic_load(&s->wd_filed_at);
	struct tb_sock *head;

	if (filed != 0 && filed <= at)
		return;
	if (!atomic_exchange(&s->in_incoming, true)) {
		head = atomic_load(&incoming);
		do {
			s->incoming_next = head;
		} while (!atomic_compare_exchange_weak(&incoming, &head, s));
	}
	if (__builtin_expect(!atomic_load_explicit(&started, memory_order_relaxed), 0))
		start();
	if (at < atomic_load(&next_wake)) {
		atomic_fetch_add(&futex_word, 1);
		syscall(SYS_futex, &futex_word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
	}
}

static void reset_sock(struct tb_sock *s)
{
	atomic_store(&s->wd_filed_at, 0);
	atomic_store(&s->in_incoming, false);
	atomic_store(&s->busy, 0);
	atomic_store(&s->side[TB_RD].waiters, 0);
	atomic_store(&s->side[TB_WR].waiters, 0);
}

void tb_wd_fork_child(void)
{
	pthread_mutex_init(&start_lock, NULL);
	atomic_store(&started, 0);
	atomic_store(&incoming, NULL);
	atomic_store(&next_wake, TB_NEVER);
	heap_len = 0;
	tb_sock_foreach(reset_sock);
}
