/* fdtable.h - fd number -> governed socket, one atomic pointer per fd.
 * An untracked fd costs one bounds check and one load; the table is backed lazily by mmap. */
#ifndef TB_FDTABLE_H
#define TB_FDTABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct tb_sock;

extern _Atomic(struct tb_sock *) *tb_fdtab;
extern atomic_int tb_fd_cap;     /* 0 until tb_fdtable_init: nothing is tracked */
extern atomic_int tb_fd_hiwater; /* highest fd ever tracked, -1 when none */
extern atomic_int tb_fd_internal_hiwater; /* highest fd ever marked internal, -1 when none */

/* Sizes the table from RLIMIT_NOFILE (capped) and maps it. Idempotent. Returns 0 or -1. */
int tb_fdtable_init(void);

/* The socket fd refers to, or NULL. The acquire pairs with tb_fd_set's release so the
 * caller sees the socket fully initialised; the one on the capacity with tb_fdtable_init's
 * store, so a thread that sees the table sized also sees it mapped (threads a preloaded
 * constructor started call in while timebox initialises). Both are plain loads on x86. */
static inline struct tb_sock *tb_fd_sock(int fd)
{
	if ((unsigned)fd >= (unsigned)atomic_load_explicit(&tb_fd_cap, memory_order_acquire))
		return NULL;
	return atomic_load_explicit(&tb_fdtab[fd], memory_order_acquire);
}

/* Points fd at s (NULL untracks). Returns false when fd is outside the table. */
bool tb_fd_set(int fd, struct tb_sock *s);

/* Untracks fd and returns what it referred to (one caller wins a race to close). */
struct tb_sock *tb_fd_take(int fd);

/* Untracks fd only if it still refers to s: for a slot found stale, which a concurrent close
 * or connect may have changed meanwhile. Returns true when this call untracked it. */
bool tb_fd_take_if(int fd, struct tb_sock *s);

/* Points fd at s (NULL untracks) and stores in *old what it referred to before, which the
 * caller now owns. Returns false, changing nothing, when fd is outside the table. */
bool tb_fd_swap(int fd, struct tb_sock *s, struct tb_sock **old);

/* Internal fds (the log file, gate slot locks): the program's close, close_range and
 * dup2 must not take them from us. */
void tb_fd_mark_internal(int fd);
void tb_fd_unmark_internal(int fd);
bool tb_fd_is_internal(int fd);

/*
 * A copy of fd (close-on-exec) out of the program's way: at a number >= TB_INTERNAL_FD_MIN,
 * or, when the fd limit is lower, as high below it as one is free; never 0-2. Returns it,
 * or -1 when no such number is free. Marks nothing. errno is preserved.
 */
int tb_fd_dup_internal(int fd);

/*
 * Takes one of timebox's own new fds out of the program's way: moves it where
 * tb_fd_dup_internal puts it, closing the original, and marks the result internal. When no
 * such number is free, an fd above 2 stays where it is (marked all the same), and one in
 * 0-2 is closed: the caller gets -1 (errno EMFILE) and goes without the feature that needed
 * it - the program's 0-2 are never kept (tests/regress/fd_limit_low_std). Returns the fd to
 * use from now on. errno is preserved unless -1 is returned.
 */
int tb_fd_move_internal(int fd);

#endif
