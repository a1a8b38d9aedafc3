/* init.c - start-up and fork: read the TIMEBOX_* variables once, set up the fd table and
 * the log, and keep a forked child consistent. No thread is started here (see watchdog.c). */
#include "init.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "configure.h"
#include "env.h"
#include "fdtable.h"
#include "gates.h"
#include "log.h"
#include "real.h"
#include "watchdog.h"

struct tb_settings tb_cfg;
atomic_bool tb_governing;
struct tb_budget tb_proc_budget;

static __thread struct tb_budget thread_budget __attribute__((tls_model("initial-exec")));
static __thread int thread_tid __attribute__((tls_model("initial-exec")));
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

extern char **environ;

struct tb_budget *tb_budget_here(void)
{
	return tb_cfg.scope == TB_SCOPE_PROCESS ? &tb_proc_budget : &thread_budget;
}

int tb_tid(void)
{
	if (thread_tid == 0)
		thread_tid = (int)syscall(SYS_gettid);
	return thread_tid;
}

static const char *get_env(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static void report(void *ctx, const char *name, const char *value, const char *why)
{
	const bool *strict = ctx;

	tb_log_config_error(name, value, why,
			    *strict ? "refusing to run (TIMEBOX_STRICT)" : "setting ignored");
}

/* The child starts with no watchdog and no call under way: a pre-fork worker's first call
 * is its own, not the remainder of whatever its parent thread was doing. */
static void fork_child(void)
{
	thread_tid = 0; /* the child's thread has a tid of its own */
	memset(&thread_budget, 0, sizeof(thread_budget));
	tb_wd_fork_child();
	tb_gates_fork_child();
}

static void at_exit(void)
{
	tb_gates_summary();
}

static void init_once_fn(void)
{
	const char *strict_text = getenv("TIMEBOX_STRICT");
	struct tb_settings scratch;
	bool strict = false, file_strict;
	int errors;

	tb_real_bind();
	/* setuid/setgid/capability programs: an unprivileged user must not be able to steer a
	 * privileged process through its environment. Stay inert and silent. */
	if (getauxval(AT_SECURE))
		return;
	/* Strictness first: it decides what the other errors say they do. */
	tb_settings_init(&scratch);
	if (strict_text != NULL &&
	    tb_env_apply(&scratch, tb_env_find("TIMEBOX_STRICT", 0), strict_text, NULL, NULL) == 0)
		strict = scratch.strict;
	errors = tb_env_load(&tb_cfg, get_env, NULL, report, &strict);
	errors += tb_env_check_unknown(environ, report, &strict);
	errors += tb_configure(&tb_cfg, strict || tb_cfg.strict, &file_strict);
	if (errors > 0 && (strict || tb_cfg.strict || file_strict))
		_exit(2);
	if (!tb_settings_any_limit(&tb_cfg) && !tb_configure_any_limit())
		return;
	if (tb_fdtable_init() < 0) {
		tb_log_error("event=error what=fd_table error=\"cannot map the fd table; "
			     "timebox is inactive\"");
		return;
	}
	tb_log_open(&tb_cfg);
	{
		/* Shared-gate slot locks live at fds >= 512 (and a rule may ask for a shared
		 * gate). Growing the kernel's fd table once the program has threads costs an RCU
		 * grace period (~10 ms) inside a connect: grow it now, while the process is still
		 * single-threaded. It costs the process a few KB. */
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC), high;

		high = fd >= 0 ? tb_real.fcntl(fd, F_DUPFD_CLOEXEC, 512) : -1;
		if (high >= 0)
			tb_real.close(high);
		if (fd >= 0)
			tb_real.close(fd);
	}
	tb_budget_open_process(&tb_proc_budget, &tb_cfg, tb_now());
	pthread_atfork(NULL, NULL, fork_child);
	if (tb_cfg.log_level == TB_LOG_LEVEL_INFO)
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
