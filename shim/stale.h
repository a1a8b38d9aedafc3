/* stale.h - fd slots whose socket was closed where the hooks could not see (a raw close
 * system call, a close inside libc): noticed on slow paths only, and dropped. */
#ifndef TB_STALE_H
#define TB_STALE_H

#include <stdbool.h>
#include <stdint.h>

struct tb_gate;
struct tb_sock;

/*
 * Does fd still name socket s? One fstat: the same socket inode. When it does not, fd is
 * untracked (unless a concurrent close or connect changed the slot first, or this is a
 * vfork child, which must change nothing of its parent's) and s loses that reference, its
 * gate slot going back with the last one. Returns true when fd is still s. For a caller
 * that just read s from fd's slot: the generation is read here.
 */
bool tb_stale_check(int fd, struct tb_sock *s);

/* The same, for a call that began on s at generation gen: looked at and taken under
 * `busy`, so that a close and a new connect cannot give the number and the pool entry to
 * another socket between the look and the take; a generation that moved is not s (false,
 * and the new socket's slot is left alone). */
bool tb_stale_check_gen(int fd, struct tb_sock *s, uint32_t gen);

/* fd no longer names s (a call that began on s at generation gen found so): untracks it,
 * under `busy`, if it still points at s at that generation and does not name it (a
 * concurrent close or connect that changed the slot first wins). A vfork child changes
 * nothing: it sees its own fd table through its parent's slots, and what differs there
 * says nothing about the parent's. */
void tb_stale_drop(int fd, struct tb_sock *s, uint32_t gen);

/*
 * Before a connect waits at gate g: when g (this process's own gate) is full, checks every
 * fd that holds one of its slots and drops the stale ones, which gives their slots back.
 * No system call unless the gate is full; one fstat per holder when it is.
 */
void tb_stale_sweep_gate(struct tb_gate *g);

#endif
