/* stale.h - fd slots whose socket was closed where the hooks could not see (a raw close
 * system call, a close inside libc): noticed on slow paths only, and dropped. */
#ifndef TB_STALE_H
#define TB_STALE_H

#include <stdbool.h>

struct tb_gate;
struct tb_sock;
struct tb_xfer;

/*
 * Does fd still name socket s? One fstat: the same socket inode. When it does not, fd is
 * untracked (unless a concurrent close or connect changed the slot first, or this is a
 * vfork child, which must change nothing of its parent's) and s loses that reference, its
 * gate slot going back with the last one. Returns true when fd is still s.
 */
bool tb_stale_check(int fd, struct tb_sock *s);

/*
 * A transfer begun on x->fd found the fd is no socket at all (a send standing in for the
 * program's write failed with ENOTSOCK): the slot is stale. Ends the transfer's wait, drops
 * the slot, and restores the caller's errno, so the hook can make the program's own call.
 */
void tb_stale_abandon(struct tb_xfer *x);

/*
 * Before a connect waits at gate g: when g (this process's own gate) is full, checks every
 * fd that holds one of its slots and drops the stale ones, which gives their slots back.
 * No system call unless the gate is full; one fstat per holder when it is.
 */
void tb_stale_sweep_gate(struct tb_gate *g);

#endif
