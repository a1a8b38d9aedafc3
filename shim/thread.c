/* thread.c - per-thread and per-process identity: the cached tid, the thread's budget, the
 * process budget, and the process id that tells a vfork child from the process itself. */
#include "thread.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct tb_budget tb_proc_budget;

__thread struct tb_budget tb_thread_budget __attribute__((tls_model("initial-exec")));
__thread int tb_thread_tid __attribute__((tls_model("initial-exec")));
__thread bool tb_thread_multiplexed __attribute__((tls_model("initial-exec")));
__thread bool tb_thread_service __attribute__((tls_model("initial-exec")));
bool tb_process_scope;
/* The process timebox set up: 0 until tb_thread_setup. A vfork child reads its parent's. */
static atomic_int self_pid;

void tb_thread_setup(enum tb_scope scope)
{
	tb_process_scope = scope == TB_SCOPE_PROCESS;
	atomic_store(&self_pid, (int)syscall(SYS_getpid));
}

/* First call of a thread (tb_tid): one gettid() for its lifetime. */
int tb_tid_slow(void)
{
	tb_thread_tid = (int)syscall(SYS_gettid);
	return tb_thread_tid;
}

int tb_pid(void)
{
	int pid = atomic_load_explicit(&self_pid, memory_order_relaxed);

	return pid != 0 ? pid : (int)syscall(SYS_getpid);
}

bool tb_foreign_process(void)
{
	int pid = atomic_load_explicit(&self_pid, memory_order_relaxed);

	/* The raw system call: glibc's getpid() has not cached since 2.25, but say so. */
	return pid != 0 && (int)syscall(SYS_getpid) != pid;
}

void tb_thread_fork_child(void)
{
	tb_thread_tid = 0; /* the child's thread has a tid of its own */
	memset(&tb_thread_budget, 0, sizeof(tb_thread_budget));
	if (atomic_load(&self_pid) != 0)
		atomic_store(&self_pid, (int)syscall(SYS_getpid));
}
