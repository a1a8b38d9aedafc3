/* thread.c - per-thread and per-process identity: the cached tid, the thread's budget, the
 * process budget, and the process id that tells a vfork child from the process itself. */
#include "thread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "real.h"

struct tb_budget tb_proc_budget;

__thread struct tb_budget tb_thread_budget __attribute__((tls_model("initial-exec")));
__thread int tb_thread_tid __attribute__((tls_model("initial-exec")));
__thread bool tb_thread_multiplexed __attribute__((tls_model("initial-exec")));
__thread bool tb_thread_service __attribute__((tls_model("initial-exec")));
__thread int *tb_thread_errp __attribute__((tls_model("initial-exec")));
bool tb_process_scope;
/* The process timebox set up: 0 until tb_thread_setup. A vfork child reads its parent's. */
static atomic_int self_pid;
/* timebox's threads started and ended in this process (tb_thread_own_started): two counts
 * that only grow, so that one look can bound from below how many were alive at an instant. */
static atomic_uint own_started, own_ended;

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

void tb_thread_own_started(void)
{
	atomic_fetch_add(&own_started, 1);
}

void tb_thread_own_ended(void)
{
	atomic_fetch_add(&own_ended, 1);
}

/* The process's thread count (field 20 of /proc/self/stat, after the name's closing
 * parenthesis: the name may hold spaces and parentheses), or -1. */
static long process_threads(void)
{
	char buf[1024], *p;
	long n;
	int fd = tb_open_raw(AT_FDCWD, "/proc/self/stat", O_RDONLY | O_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	n = (long)syscall(SYS_read, fd, buf, sizeof(buf) - 1);
	tb_real.close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	for (int field = 2; p != NULL && field < 20; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL)
		return -1;
	n = strtol(p + 1, &p, 10);
	return *p == ' ' ? n : -1;
}

bool tb_thread_program_alone(void)
{
	/* Started before the kernel's count, ended after it: ours alive at that instant are
	 * at least started - ended, whatever starts and ends around it (the watchdog starts
	 * the statistics thread; resolvers end when idle). */
	unsigned started = atomic_load(&own_started);
	int saved = errno;
	long all = process_threads();
	unsigned ended = atomic_load(&own_ended);
	long own = started > ended ? (long)(started - ended) : 0;

	errno = saved; /* no /proc: the caller's call goes on, its errno untouched */
	return all > 0 && all - own <= 1;
}

void tb_thread_fork_child(void)
{
	atomic_store(&own_started, 0); /* none of timebox's threads is copied by fork */
	atomic_store(&own_ended, 0);
	tb_thread_tid = 0; /* the child's thread has a tid of its own */
	memset(&tb_thread_budget, 0, sizeof(tb_thread_budget));
	if (atomic_load(&self_pid) != 0)
		atomic_store(&self_pid, (int)syscall(SYS_getpid));
}
