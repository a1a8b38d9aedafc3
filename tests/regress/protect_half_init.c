/* protect_half_init.c - a shared breaker page left half-initialised held every later
 * process's first connect to the destination for 100,000 sched_yield()s.
 *
 * What happened: with TIMEBOX_GATE_SHARED, a destination's breaker, retry budget and
 * adaptive gate live in one page of a file (protect-<ip>_<port>) that the first process to
 * use it initialises: it sets `ready` to 1, writes the page, then sets 2. A process killed
 * in between left 1 for good. Every later process's first connect to that destination then
 * called sched_yield() 100,000 times waiting for an initialiser that was dead, and only
 * then went on with a breaker of its own; the file was never repaired. The wait was 0.13 s
 * on an idle CPU and 145 s (one connect) when the CPU was shared with one busy thread:
 * each sched_yield() gives the CPU away for a whole time slice. No deadline bounds it.
 * The sequence: a protect file whose `ready` is 1, as a killed initialiser leaves it; the
 * process runs on one CPU beside a busy thread of its own; one connect must return within
 * 2 s (natively: under a millisecond), and the page must be taken over (ready 2).
 */
#include <sched.h>

#include "gate_regress.h"

static atomic_int stop;

static void *busy(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		;
	return NULL;
}

int main(int argc, char **argv)
{
	static char xdg_env[128];
	char path[512];
	uint32_t ready = 1;
	double ms;
	int port, lfd, fd, err;
	cpu_set_t cpu;
	pthread_t t;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
		tbr_preload_self(argv, "TIMEBOX_BREAKER=1", "TIMEBOX_GATE_SHARED=1", xdg_env,
				 NULL);
	}
	lfd = tbr_listen(&port);
	snprintf(path, sizeof(path), "%s/timebox", getenv("XDG_RUNTIME_DIR"));
	TBR_CHECK(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", path,
		  strerror(errno));
	snprintf(path, sizeof(path), "%s/timebox/protect-127.0.0.1_%d",
		 getenv("XDG_RUNTIME_DIR"), port);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	TBR_CHECK(fd >= 0 && ftruncate(fd, 4096) == 0 && pwrite(fd, &ready, 4, 0) == 4,
		  "the half-written file %s: %s", path, strerror(errno));
	close(fd);
	CPU_ZERO(&cpu);
	CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &cpu);
	if (sched_setaffinity(0, sizeof(cpu), &cpu) != 0)
		tbr_skip("cannot pin to one CPU");
	TBR_CHECK(pthread_create(&t, NULL, busy, NULL) == 0, "pthread_create");
	tbr_hang_guard(20, "connect still waiting for a dead initialiser after 20 s");
	fd = tbg_connect(port, &err, &ms);
	alarm(0);
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	TBR_CHECK(fd >= 0, "connect: %s", tbt_errno_name(err));
	TBR_CHECK(ms < 2000, "connect took %.0f ms (want < 2000)", ms);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	TBR_CHECK(fd >= 0 && pread(fd, &ready, 4, 0) == 4, "read %s", path);
	TBR_CHECK(ready == 2, "the page was left half-written (ready %u): no process shares "
		  "the breaker", ready);
	close(fd);
	close(lfd);
	tbg_cleanup(NULL);
	return 0;
}
