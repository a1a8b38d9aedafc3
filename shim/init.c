/* init.c - start-up and fork: read the settings once (configure.c), set up the fd table and
 * the log, and keep every lock and table consistent across fork. No thread starts here. */
#include "init.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "configure.h"
#include "fdtable.h"
#include "gates.h"
#include "libc_compat.h"
#include "log.h"
#include "protect.h"
#include "real.h"
#include "request.h"
#include "service.h"
#include "sock.h"
#include "stats.h"
#include "thread.h"
#include "watchdog.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static bool fork_handlers;

/*
 * Fork. A lock another thread holds at fork() stays held in the child by a thread that does
 * not exist there. The learned-names table is taken before fork and let go on both sides,
 * so the child gets it whole and unlocked (a fork while a resolver thread was learning hung
 * the child's first connect). The other locks guard tables that are consistent at every
 * instant (one atomic store publishes an entry), and the child re-initialises them
 * (gates, watchdog; sock.c's pool growth). pthread_once (this file, real.c, the resolver
 * hooks) is fork-safe in glibc: a once interrupted by fork runs again in the child.
 */
static void fork_prepare(void)
{
	tb_configure_fork_prepare();
	/* No thread of ours half-started (service.h). After the names' lock, as a creation
	 * is never made under it: the child makes its mutex anew, and the thread sanitizer,
	 * which takes it for still held there, saw the child's first creation take the two
	 * in the other order. */
	tb_service_fork_prepare();
}

static void fork_parent(void)
{
	tb_configure_fork_parent();
	tb_service_fork_parent();
}

/* The child starts with no watchdog and no call under way: a pre-fork worker's first call
 * is its own, not the remainder of whatever its parent thread was doing. */
static void fork_child(void)
{
	tb_thread_fork_child(); /* first: tells this process from a vfork child again */
	tb_service_fork_child();
	tb_stats_fork_child();
	tb_req_fork_child();    /* the request was the parent's: its caller waits on the parent */
	tb_configure_fork_child();
	tb_wd_fork_child();
	tb_gates_fork_child();
	tb_sock_slots_fork_child(); /* the gates' slots the child's sockets hold */
	tb_gates_fork_unheld();     /* and the shared ones no socket of the child holds */
	tb_prot_fork_child();
	tb_log_fork_child();
}

static void register_fork_handlers(void)
{
	if (!fork_handlers && tb_atfork(fork_prepare, fork_parent, fork_child) == 0)
		fork_handlers = true;
}

static void at_exit(void)
{
	tb_gates_summary();
}

/* Our own fds live at TB_INTERNAL_FD_MIN and above (the log file, shared-gate slot locks).
 * Growing the kernel's fd table once the program has threads costs an RCU grace period
 * (~10 ms) inside a connect: grow it now, while the process is still single-threaded, by
 * one dup there and back. It costs the process a few KB. */
static void grow_kernel_fd_table(void)
{
	int fd = tb_open_raw(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 0), high;

	high = fd >= 0 ? tb_real.fcntl(fd, F_DUPFD_CLOEXEC, TB_INTERNAL_FD_MIN) : -1;
	if (high >= 0)
		tb_real.close(high);
	if (fd >= 0)
		tb_real.close(fd);
}

/*
 * A build preloaded into a process of the other libc: the musl build by hand into a glibc
 * program (it names no libc, so glibc's loader takes it), or the glibc build into a musl
 * one, should a musl loader ever take it. Its hooks would run on a libc whose structures it
 * was not compiled for: it stays inert (every hook forwards, nothing is tracked) and says
 * so once, by a raw write (the log is not open). Only glibc exports gnu_get_libc_version.
 */
static bool libc_mismatch(void)
{
	bool on_glibc = dlsym(RTLD_DEFAULT, "gnu_get_libc_version") != NULL;
#ifdef __GLIBC__
	static const char why[] = "timebox: inactive: this library is built for glibc but the "
				  "program runs on musl; preload libtimebox-musl.so instead "
				  "(timebox run picks the right one)\n";
	bool built_for_glibc = true;
#else
	static const char why[] = "timebox: inactive: this library is built for musl but the "
				  "program runs on glibc; preload libtimebox.so instead "
				  "(timebox run picks the right one)\n";
	bool built_for_glibc = false;
#endif

	if (on_glibc == built_for_glibc)
		return false;
	syscall(SYS_write, 2, why, sizeof(why) - 1);
	return true;
}

static void init_once_fn(void)
{
	tb_real_bind();
	/* setuid/setgid/capability programs: an unprivileged user must not be able to steer a
	 * privileged process through its environment. Stay inert and silent. */
	if (getauxval(AT_SECURE))
		return;
	if (libc_mismatch())
		return;
	if (!tb_configure())
		_exit(2);
	if (tb_configure_learning())
		register_fork_handlers(); /* the resolver hooks learn even when nothing is governed */
	if (!tb_settings_any_limit(&tb_default_settings) && !tb_configure_any_limit())
		return;
	if (tb_fdtable_init() < 0) {
		tb_log_error("event=error what=fd_table error=\"cannot map the fd table; "
			     "timebox is inactive\"");
		return;
	}
	tb_log_open(&tb_default_settings);
	tb_stats_configure(&tb_default_settings);
	/* The stats thread is started by the watchdog's (the layer above the statistics). */
	tb_stats_thread_starter(tb_wd_run_soon);
	grow_kernel_fd_table();
	tb_budget_open_process(&tb_proc_budget, &tb_default_settings, tb_now());
	/* Only a governing process records its id: elsewhere nothing is tracked, and
	 * tb_foreign_process() answers without a system call. */
	tb_thread_setup(tb_default_settings.scope);
	register_fork_handlers();
	if (tb_default_settings.log_level == TB_LOG_LEVEL_INFO)
		atexit(at_exit);
	atomic_store(&tb_governing, true);
}

void tb_init(void)
{
	pthread_once(&init_once, init_once_fn);
}

__attribute__((constructor)) static void tb_constructor(void)
{
	tb_init();
}
