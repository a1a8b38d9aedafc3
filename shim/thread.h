/* thread.h - who is calling: the thread's kernel id, the budget that bounds its governed
 * operations, and whether this is the process timebox set up or a vfork child borrowing it. */
#ifndef TB_THREAD_H
#define TB_THREAD_H

#include <errno.h>
#include <stdbool.h>

#include "budget.h"
#include "settings.h"

extern struct tb_budget tb_proc_budget; /* scope=process */

/* At start-up of a governing process: the scope that picks the budget, and this process's
 * id (until then tb_budget_here() is the thread's budget and nothing is foreign). */
void tb_thread_setup(enum tb_scope scope);

/* Per-thread state, read inline on the hot path (thread.c owns it). */
extern __thread struct tb_budget tb_thread_budget
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
extern __thread int tb_thread_tid __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern __thread bool tb_thread_multiplexed
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
/* One of timebox's own threads (service.c): every signal blocked for its whole life. */
extern __thread bool tb_thread_service
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
extern __thread int *tb_thread_errp
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
extern bool tb_process_scope;

int tb_tid_slow(void);

/* The calling thread's kernel id, cached per thread (one gettid() per thread lifetime). */
static inline int tb_tid(void)
{
	return tb_thread_tid != 0 ? tb_thread_tid : tb_tid_slow();
}

/* The calling thread's errno. libc gives its address only through a call
 * (__errno_location), which every transfer would make; it is fixed for the thread's life
 * (a vfork child runs on its parent's thread, and finds the same), so it is kept. */
static inline int *tb_errp(void)
{
	int *p = tb_thread_errp;

	if (__builtin_expect(p == NULL, 0))
		p = tb_thread_errp = &errno;
	return p;
}

/*
 * The calling thread runs an event loop: it registered a governed socket with epoll, or
 * waited on two or more at once in poll or select. Its requests interleave - one begins
 * while another awaits its answer - so none is a retry of another, and none may inherit
 * another's deadline or be refused by another's retry window: each of its sockets carries
 * its own call (xfer.c, step_own; hooks_conn.c). Never cleared: a thread that multiplexed
 * once may do so again at any time.
 */
static inline void tb_thread_mark_multiplexed(void)
{
	if (!tb_thread_multiplexed)
		tb_thread_multiplexed = true;
}

/* The budget that bounds the calling thread's governed operations. */
static inline struct tb_budget *tb_budget_here(void)
{
	return tb_process_scope ? &tb_proc_budget : &tb_thread_budget;
}

/*
 * True in a process that shares timebox's memory without being the one it set up: a vfork
 * child (CPython's subprocess, posix_spawn, JDK's VFORK launch) runs on its parent's fd
 * table, pool, gates and budgets, and must change none of them. Costs one getpid system
 * call: for the slow paths that change that state (close, dup*, connect), never read/write.
 * A child of fork() is set up again by tb_thread_fork_child and is not foreign.
 */
bool tb_foreign_process(void);

/*
 * This process's id for a log line, without a system call: the one timebox set up (kept
 * across fork by tb_thread_fork_child). In a vfork child it is the parent's, as the tid
 * tb_tid() caches is the parent thread's: such a child runs on its parent's memory.
 */
int tb_pid(void);

/*
 * timebox's own threads (the watchdog, the statistics thread, the resolvers) share the
 * program's fd table, so the kernel takes a table a single-threaded program owns alone for
 * shared: close_range(CLOSE_RANGE_UNSHARE) and unshare(CLONE_FILES) would copy it and
 * leave the connections open in the copy timebox's threads keep (hooks_fd.c). Each of them
 * is counted once pthread_create has returned it, and counted out as the last thing it
 * does: a thread not yet, or no longer, counted is taken for the program's, never the
 * other way round.
 */
void tb_thread_own_started(void);
void tb_thread_own_ended(void);

/*
 * True when every thread of the process but the caller is one of timebox's (/proc/self/stat
 * against the count above): the table the caller uses is then the program's alone, as far
 * as the program can tell. False when in doubt (no /proc). A few system calls: for the
 * calls that unshare the fd table only.
 */
bool tb_thread_program_alone(void);

/* In a forked child: a new process id, a new tid, no call under way on this thread, and
 * none of timebox's threads (they stayed in the parent). */
void tb_thread_fork_child(void);

#endif
