/* waits.h - the waits each thread has under way, recorded per thread so that a wait the
 * program leaves without returning through the hook (siglongjmp, pthread_cancel) is ended. */
#ifndef TB_WAITS_H
#define TB_WAITS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sock.h"

/*
 * The record is a small stack in thread-local storage (initial-exec: no allocation, no
 * system call). A hook that waits opens a group at its frame address `sp`
 * (__builtin_frame_address(0)), adds one entry per socket side it marked, and when the real
 * call returns takes its entries back and leaves the group.
 *
 * Abandoned waits: a siglongjmp out of a signal handler skips the hook's return, and its
 * entries stay open. The jump itself ends them: the longjmp family is hooked
 * (hooks_jump.c, tb_waits_abandon), because a thread can be inside a recorded wait only
 * while it is blocked in it, so a jump on a thread with open entries is a handler leaving
 * them. A handler that does a setjmp and longjmp of its own while its thread is blocked in a
 * wait ends that wait too: it goes on uncut (as natively), never cut wrongly.
 * Jumps that do not pass through the hook (a static longjmp inside another library) are
 * caught later: the next group the thread opens ends every open entry whose frame is
 * not above its own (within TB_WAITS_SLACK bytes): that frame is gone. A signal handler
 * that waits while the thread it interrupted is inside a wait runs below the kernel's
 * signal frame (over a kilobyte: saved registers and FPU state), so the interrupted wait is
 * above it and stays open. pthread_cancel unwinds the thread and ends it: a thread-specific
 * key's destructor ends whatever it left open. A forked child starts with an empty record
 * (the watchdog's reset already cleared every count).
 * Limits: a wait abandoned deep in the stack is ended only when the thread next waits from
 * a frame at or above it, or exits; a handler on an alternate stack above the thread's own
 * (sigaltstack) may take the interrupted wait for an abandoned one and end it early, which
 * leaves that wait uncut, never cut wrongly; past TB_WAITS_MAX entries nothing is recorded.
 */
/* 62, not 64: the record is most of the library's static TLS, and a dlopen of the library
 * gets only what glibc keeps spare (regress/dlopen_library; under ASan's runtime the spare
 * is smaller still: 8 bytes more for the epoll mirror's count of what a thread holds
 * exhausted it). 62 nested waits (a wait in a handler that interrupted a wait...) is as
 * good as 64. */
#define TB_WAITS_MAX 62
#define TB_WAITS_SLACK 512

struct tb_wait_rec {
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
 * One struct, so that the hot path computes one thread-local address.
 */
struct tb_waits {
	unsigned top;
	bool keyed;  /* the thread-exit destructor is armed for this thread */
	struct tb_wait_rec rec[TB_WAITS_MAX];
};

extern __thread struct tb_waits tb_waits_tls
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The slow paths (waits.c). */
unsigned tb_waits_reap(uintptr_t sp);
void tb_waits_leave_slow(unsigned base);
void tb_waits_arm_exit(void);
void tb_waits_abandon_slow(void);

/* The calling thread is about to longjmp: ends every wait it has recorded (see above).
 * errno is left as it was. One thread-local load when there is none, as in a program that
 * uses longjmp for its errors (Lua, Ruby, Perl's die) outside any wait. */
static inline void tb_waits_abandon(void)
{
	if (__builtin_expect(tb_waits_tls.top != 0, 0))
		tb_waits_abandon_slow();
}

/* Opens a group at frame sp, ending the abandoned waits first. Returns the group's base. */
static inline unsigned tb_waits_enter(uintptr_t sp)
{
	struct tb_waits *w = &tb_waits_tls;
	unsigned t = w->top;

	if (__builtin_expect(t == 0 || w->rec[t - 1].sp >= sp + TB_WAITS_SLACK, 1))
		return t;
	return tb_waits_reap(sp);
}

/* Records a wait that began on (s, side) at generation gen in the group opened at sp.
 * Returns its index, or -1 when the record is full (the caller still ends it itself). */
static inline int tb_waits_add(struct tb_sock *s, enum tb_side side, uint32_t gen,
			       uintptr_t sp)
{
	struct tb_waits *w = &tb_waits_tls;
	unsigned i = w->top;
	struct tb_wait_rec *r;

	if (__builtin_expect(i >= TB_WAITS_MAX, 0))
		return -1;
	r = &w->rec[i];
	atomic_store_explicit(&r->open, 0, memory_order_relaxed);
	r->sp = UINTPTR_MAX;
	atomic_signal_fence(memory_order_seq_cst);
	w->top = i + 1;
	atomic_signal_fence(memory_order_seq_cst);
	r->s = s;
	r->side = (uint8_t)side;
	r->gen = gen;
	r->sp = sp;
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&r->open, 1, memory_order_relaxed);
	if (__builtin_expect(w->top <= i, 0))
		w->top = i + 1; /* a handler that ran in between left top below us */
	if (__builtin_expect(!w->keyed, 0))
		tb_waits_arm_exit();
	return (int)i;
}

/* The hook's call returned: takes entry i back. True when the caller must end the wait
 * (tb_sock_wait_end); false when it was already ended for it (see above). */
static inline bool tb_waits_take(int i, struct tb_sock *s, enum tb_side side)
{
	struct tb_wait_rec *r;

	if (i < 0)
		return true;
	r = &tb_waits_tls.rec[i];
	/* Not ours any more: ended for us, and the slot reused by a handler since. */
	if (r->s != s || r->side != (uint8_t)side)
		return false;
	return atomic_exchange_explicit(&r->open, 0, memory_order_relaxed) != 0;
}

/* Closes the group opened with base, whose own entries were taken back: ends waits
 * recorded above them by code that ran nested in the call (a handler that jumped out of
 * its own wait). `n`: how many entries the group added. */
static inline void tb_waits_leave(unsigned base, unsigned n)
{
	struct tb_waits *w = &tb_waits_tls;

	if (__builtin_expect(w->top == base + n, 1)) {
		atomic_signal_fence(memory_order_seq_cst);
		w->top = base;
		return;
	}
	tb_waits_leave_slow(base);
}

#endif
