/* waits.c - the per-thread record of waits under way: the slow paths (waits.h has the
 * contract and the fast paths). Every step is safe against a handler on the same thread. */
#include "waits.h"

#include <errno.h>
#include <pthread.h>

#include "clock.h"
#include "libc_compat.h"
#include "thread.h"

__thread struct tb_waits tb_waits_tls __attribute__((tls_model("initial-exec")));

static pthread_key_t gone_key;
static bool have_key;

static void end_rec(struct tb_wait_rec *r)
{
	if (atomic_exchange_explicit(&r->open, 0, memory_order_relaxed))
		tb_sock_wait_end(r->s, (enum tb_side)r->side, tb_now(), false, r->gen);
}

unsigned tb_waits_reap(uintptr_t sp)
{
	struct tb_waits *w = &tb_waits_tls;
	unsigned t = w->top;

	while (t > 0 && w->rec[t - 1].sp < sp + TB_WAITS_SLACK) {
		end_rec(&w->rec[t - 1]);
		w->top = --t;
		atomic_signal_fence(memory_order_seq_cst);
	}
	return t;
}

void tb_waits_leave_slow(unsigned base)
{
	struct tb_waits *w = &tb_waits_tls;
	unsigned t = w->top;

	while (t > base)
		end_rec(&w->rec[--t]);
	atomic_signal_fence(memory_order_seq_cst);
	if (w->top > base)
		w->top = base;
}

/* A vfork child runs on its parent's thread and memory: what it jumps over is its own
 * frames, and the parent's record stays the parent's. */
void tb_waits_abandon_slow(void)
{
	int saved = errno;

	if (!tb_foreign_process())
		tb_waits_leave_slow(0);
	errno = saved;
}

void tb_waits_arm_exit(void)
{
	tb_waits_tls.keyed = true;
	/* Any non-NULL value: the destructor only needs to run. For the first keys
	 * pthread_setspecific is a store into the thread's descriptor: no allocation. */
	if (have_key)
		pthread_setspecific(gone_key, &tb_waits_tls);
}

/* pthread_cancel (or pthread_exit from a handler inside a hook's wait) unwound the thread
 * past its hooks: end what it left open. Runs in the exiting thread. */
static void thread_gone(void *unused)
{
	(void)unused;
	tb_waits_leave_slow(0);
}

/* The child's record is a copy of the forking thread's; the watchdog's reset already set
 * every count to zero, so nothing in it may be ended again. */
static void fork_child(void)
{
	for (unsigned i = 0; i < TB_WAITS_MAX; i++)
		atomic_store_explicit(&tb_waits_tls.rec[i].open, 0, memory_order_relaxed);
	tb_waits_tls.top = 0;
}

/* A key and an atfork handler: no thread, no allocation worth the name. */
__attribute__((constructor)) static void waits_init(void)
{
	have_key = pthread_key_create(&gone_key, thread_gone) == 0;
	tb_atfork(NULL, NULL, fork_child);
}
