/* sigpipe.h - SIGPIPE held back around a write that libc makes out of our sight (stdio's own
 * write or writev): it cannot ask for MSG_NOSIGNAL, and a cut makes it fail with EPIPE. */
#ifndef TB_SIGPIPE_H
#define TB_SIGPIPE_H

#include <signal.h>
#include <stdbool.h>

struct tb_sigpipe {
	bool blocked; /* SIGPIPE blocked by tb_sigpipe_hold */
	bool pending; /* ... and it was pending already before */
	sigset_t old_mask;
};

/*
 * Blocks SIGPIPE in the calling thread for the write that follows: the watchdog's cut (a
 * shutdown) makes a blocked write fail with EPIPE, and a program that never ignored SIGPIPE
 * would die of a timeout instead of seeing ETIMEDOUT. Two system calls; errno kept.
 */
void tb_sigpipe_hold(struct tb_sigpipe *p);

/*
 * Restores the mask. `ours`: the write failed because the socket was cut, and a SIGPIPE it
 * raised is consumed (unless one was pending before the write: that one is the program's).
 * Otherwise a pending SIGPIPE - a genuine EPIPE, the peer closed - is delivered as the
 * mask is restored, as the kernel would have delivered it. errno kept.
 */
void tb_sigpipe_release(struct tb_sigpipe *p, bool ours);

#endif
