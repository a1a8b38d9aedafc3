/* waits.c - the per-thread record of waits under way (see waits.h for the contract).
 * Every step is safe against a signal handler that interrupts it on the same thread. */
#include "waits.h"

#include <pthread.h>
#include <stdatomic.h>

#include "clock.h"

#define IE __attribute__((tls_model("initial-exec")))

struct wait_rec {
	struct tb_sock *s;
	uintptr_t sp;          /* frame of the hook that waits */
	uint32_t gen;
	uint8_t side;
	_Atomic uint8_t open;  /* still to be ended; exchanged to 0 by whoever ends it */
};

/*
 * Concurrency rules: only the owning thread reads or writes its record, but a signal
 * handler may run between any two of its instructions and use the record itself. So: an
 * entry is reserved (top moved past it, sp = UINTPTR_MAX so nobody takes it for abandoned)
 * before it is filled; `open` goes 1 only once the entry is complete; an entry is ended
 * by the one who exchanges `open` from 1 to 0. The signal fences keep the compiler from
 * reordering these stores; the hardware keeps a thread's own order.
 */
static __thread struct wait_rec recs[TB_WAITS_MAX] IE;
static __thread unsigned top IE;
static __thread bool keyed IE;

static pthread_key_t gone_key;
static bool have_key;

static void end_rec(struct wait_rec *r)
{
	if (atomic_exchange_explicit(&r->open, 0, memory_order_relaxed))
		tb_sock_wait_end(r->s, (enum tb_side)r->side, tb_now(), false, r->gen);
}

unsigned tb_waits_enter(uintptr_t sp)
{
	unsigned t = top;

	while (t > 0 && recs[t - 1].sp < sp + TB_WAITS_SLACK) {
		end_rec(&recs[t - 1]);
		top = --t;
		atomic_signal_fence(memory_order_seq_cst);
	}
	return t;
}

int tb_waits_add(struct tb_sock *s, enum tb_side side, uint32_t gen, uintptr_t sp)
{
	unsigned i = top;
	struct wait_rec *r;

	if (i >= TB_WAITS_MAX)
		return -1;
	r = &recs[i];
	atomic_store_explicit(&r->open, 0, memory_order_relaxed);
	r->sp = UINTPTR_MAX;
	atomic_signal_fence(memory_order_seq_cst);
	top = i + 1;
	atomic_signal_fence(memory_order_seq_cst);
	r->s = s;
	r->side = (uint8_t)side;
	r->gen = gen;
	r->sp = sp;
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&r->open, 1, memory_order_relaxed);
	if (top <= i)
		top = i + 1; /* a handler that ran in between left top below us */
	if (__builtin_expect(!keyed, 0) && have_key) {
		keyed = true;
		/* Any non-NULL value: the destructor only needs to run. */
		pthread_setspecific(gone_key, recs);
	}
	return (int)i;
}

bool tb_waits_take(int i, struct tb_sock *s, enum tb_side side)
{
	struct wait_rec *r;

	if (i < 0)
		return true;
	r = &recs[i];
	/* Not ours any more: ended for us, and the slot reused by a handler since. */
	if (r->s != s || r->side != (uint8_t)side)
		return false;
	return atomic_exchange_explicit(&r->open, 0, memory_order_relaxed) != 0;
}

void tb_waits_leave(unsigned base)
{
	unsigned t = top;

	while (t > base)
		end_rec(&recs[--t]);
	atomic_signal_fence(memory_order_seq_cst);
	if (top > base)
		top = base;
}

/* pthread_cancel (or pthread_exit inside a hook's wait, from a handler) unwound the
 * thread past its hooks: end what it left open. Runs in the exiting thread. */
static void thread_gone(void *unused)
{
	(void)unused;
	tb_waits_leave(0);
}

/* The child's record is a copy of the forking thread's; the watchdog's reset already set
 * every count to zero, so nothing in it may be ended again. */
static void fork_child(void)
{
	for (unsigned i = 0; i < TB_WAITS_MAX; i++)
		atomic_store_explicit(&recs[i].open, 0, memory_order_relaxed);
	top = 0;
}

__attribute__((constructor)) static void waits_init(void)
{
	have_key = pthread_key_create(&gone_key, thread_gone) == 0;
	pthread_atfork(NULL, NULL, fork_child);
}
