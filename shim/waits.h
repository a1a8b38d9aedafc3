/* waits.h - the waits each thread has under way, recorded per thread so that a wait the
 * program leaves without returning through the hook (siglongjmp, pthread_cancel) is ended. */
#ifndef TB_WAITS_H
#define TB_WAITS_H

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
 * entries stay open. The next group the thread opens ends every open entry whose frame is
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
#define TB_WAITS_MAX 64
#define TB_WAITS_SLACK 512

/* Opens a group at frame sp, ending the abandoned waits first. Returns the group's base. */
unsigned tb_waits_enter(uintptr_t sp);

/* Records a wait that began on (s, side) at generation gen in the group opened at sp.
 * Returns its index, or -1 when the record is full (the caller still ends it itself). */
int tb_waits_add(struct tb_sock *s, enum tb_side side, uint32_t gen, uintptr_t sp);

/* The hook's call returned: takes entry i back. True when the caller must end the wait
 * (tb_sock_wait_end); false when it was already ended for it (see above). */
bool tb_waits_take(int i, struct tb_sock *s, enum tb_side side);

/* Closes the group opened with base: ends waits recorded above it by code that ran nested
 * in the call (a handler that jumped out of its own wait). */
void tb_waits_leave(unsigned base);

#endif
