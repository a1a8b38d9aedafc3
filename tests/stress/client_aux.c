/* client_aux.c - the stress client's helpers: closers that close or dup2 over an fd another
 * thread waits on, the hang watchdog, the library thread's CPU time, fds, the summary. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"

#define NCLOSERS 3

struct closer {
	pthread_t th;
	struct worker w;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct worker *target;
	int64_t at;
};
static struct closer closers[NCLOSERS];
static atomic_int closing, hang_stop;
static pid_t own[4096];
static atomic_int nown;
static pid_t before[64];
static int nbefore;
static int64_t wd_cpu_start_ns;

int cfg_from_env(void)
{
	const char *c = getenv("STRESS_CFG"), *o = getenv("STRESS_OUT");
	unsigned long long seed;
	int *p = cfg.ports;

	if (c == NULL || o == NULL ||
	    sscanf(c, "%d %d %llu %u %u %u %u %u %d %d %d %d %d %d %d %d", &cfg.threads, &cfg.secs,
		   &seed, &cfg.connect_ms, &cfg.read_ms, &cfg.write_ms, &cfg.deadline_ms,
		   &cfg.slack_ms, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7]) != 16)
		return -1;
	cfg.seed = seed;
	snprintf(cfg.out_rec, sizeof(cfg.out_rec), "%s.rec", o);
	snprintf(cfg.out_sum, sizeof(cfg.out_sum), "%s.sum", o);
	return 0;
}

void register_own_thread(void)
{
	int i = atomic_fetch_add(&nown, 1);

	if (i < 4096)
		own[i] = (pid_t)syscall(SYS_gettid);
}

static char task_state(pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "re");
	if (f == NULL)
		return '?';
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	return p && p[1] ? p[2] : '?';
}

/* Hands w's next wait to a free closer; false when all are busy. */
bool closer_push(struct worker *w)
{
	for (int i = 0; i < NCLOSERS; i++) {
		struct closer *c = &closers[i];
		bool ok = false;

		pthread_mutex_lock(&c->mu);
		if (c->target == NULL && atomic_load(&w->closer_busy) == 0) {
			atomic_store(&w->wait_state, WS_PENDING);
			atomic_store(&w->closer_busy, 1);
			c->target = w;
			c->at = now_ns() + (int64_t)rnd(&w->rng, cfg.read_ms / 8,
							cfg.read_ms * 3 / 2) * 1000000;
			pthread_cond_signal(&c->cv);
			ok = true;
		}
		pthread_mutex_unlock(&c->mu);
		if (ok)
			return true;
	}
	return false;
}

/* Waits for the target to sleep in its one read (or to be done with it), then takes the fd
 * away - close, close_range or dup2 - and at once makes a healthy call on the same number. */
static void *closer_main(void *arg)
{
	struct closer *c = arg;

	register_own_thread();
	c->w.tid = (pid_t)syscall(SYS_gettid);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (c->target == NULL && !atomic_load(&closing))
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->target == NULL)
			break;
		struct worker *t = c->target;
		int fd, how = (int)rnd(&c->w.rng, 0, 2);

		pthread_mutex_unlock(&c->mu);
		while (atomic_load(&t->wait_state) == WS_PENDING)
			usleep(1000);
		if (atomic_load(&t->wait_state) == WS_NONE)
			goto next; /* the call failed before its read: nothing to take away */
		fd = t->waited_num;
		while (now_ns() < c->at || (atomic_load(&t->wait_state) == WS_READING &&
					    task_state(t->tid) != 'S'))
			usleep(2000);
		atomic_fetch_add(&cnt.closes_waited[how], 1);
		if (how == 2) {
			call(&c->w, K_NORMAL, (int)rnd(&c->w.rng, 0, F_PPOLL), M_REUSE_DUP2, fd);
		} else {
			if (how == 0)
				close(fd);
			else
				close_range((unsigned)fd, (unsigned)fd, 0);
			call(&c->w, K_NORMAL, (int)rnd(&c->w.rng, 0, F_PPOLL), M_PLAIN, fd);
		}
		while (atomic_load(&t->wait_state) == WS_READING) /* its record is its own */
			usleep(1000);
next:
		atomic_store(&t->closer_busy, 0);
		pthread_mutex_lock(&c->mu);
		c->target = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

void closers_start(void)
{
	for (int i = 0; i < NCLOSERS; i++) {
		pthread_mutex_init(&closers[i].mu, NULL);
		pthread_cond_init(&closers[i].cv, NULL);
		closers[i].w.rng = cfg.seed ^ (0xc105e0ull + (uint64_t)i);
		closers[i].w.side_fd = -1;
		pthread_create(&closers[i].th, NULL, closer_main, &closers[i]);
	}
}

void closers_stop(void)
{
	atomic_store(&closing, 1);
	for (int i = 0; i < NCLOSERS; i++) {
		pthread_mutex_lock(&closers[i].mu);
		pthread_cond_signal(&closers[i].cv);
		pthread_mutex_unlock(&closers[i].mu);
		pthread_join(closers[i].th, NULL);
	}
}

/* Every thread's stacks, by gdb (outside the library), on stderr. */
static void dump_stacks(void)
{
	char pid[16];
	pid_t g;

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	g = fork();
	if (g == 0) {
		unsetenv("LD_PRELOAD");
		dup2(2, 1);
		execlp("gdb", "gdb", "-p", pid, "-batch", "-ex", "thread apply all bt", (char *)NULL);
		_exit(127);
	}
	if (g > 0)
		waitpid(g, NULL, 0);
}

static void check_one(struct worker *w, const char *who, int i, int64_t now)
{
	int64_t since = atomic_load(&w->busy_since), bound = atomic_load(&w->bound_ns);

	if (since == 0 || now - since <= bound)
		return;
	fprintf(stderr, "stress: HANG: %s %d (tid %d) in %s for %lld ms (bound %lld ms)\n", who,
		i, (int)w->tid, w->what, (long long)((now - since) / 1000000),
		(long long)(bound / 1000000));
	FILE *f = fopen(cfg.out_sum, "we"); /* the parent's table says why we abort */

	if (f != NULL) {
		fprintf(f, "hang 1\n");
		fclose(f);
	}
	dump_stacks();
	abort();
}

void *hang_watchdog(void *spawners)
{
	struct worker *sp = spawners;

	register_own_thread();
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	while (!atomic_load(&hang_stop)) {
		int64_t now = now_ns();

		for (int i = 0; i < nworkers; i++)
			check_one(&workers[i], "worker", i, now);
		for (int i = 0; i < NCLOSERS; i++)
			check_one(&closers[i].w, "closer", i, now);
		for (int i = 0; i < 2; i++)
			check_one(&sp[i], "spawner", i, now);
		usleep(100000);
	}
	return NULL;
}

void stop_hang_watchdog(pthread_t th)
{
	atomic_store(&hang_stop, 1);
	pthread_join(th, NULL);
}

static int list_tasks(pid_t *out, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && n < max)
			out[n++] = (pid_t)atoi(e->d_name);
	if (d)
		closedir(d);
	return n;
}

void note_tasks_before(void)
{
	nbefore = list_tasks(before, 64);
	register_own_thread();
}

/* CPU ticks of the threads that are neither ours nor there before main (the library's
 * watchdog); *start_s gets the earliest one's start in seconds since boot. */
static long lib_ticks(double *start_s)
{
	pid_t t[8192];
	int n = list_tasks(t, 8192);
	long ticks = 0, hz = sysconf(_SC_CLK_TCK);

	*start_s = 0;
	for (int i = 0; i < n; i++) {
		bool mine = false;
		char path[64], buf[1024], *p;
		unsigned long ut, st;
		unsigned long long start;
		FILE *f;

		for (int j = 0; j < nbefore; j++)
			mine |= before[j] == t[i];
		for (int j = 0; j < atomic_load(&nown) && j < 4096; j++)
			mine |= own[j] == t[i];
		for (int j = 0; j < nworkers; j++)
			mine |= workers[j].tid == t[i];
		if (mine)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)t[i]);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		if (p == NULL ||
		    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d "
				  "%*d %*d %*d %llu", &ut, &st, &start) != 3)
			continue;
		ticks += (long)(ut + st);
		if (*start_s == 0 || (double)start / (double)hz < *start_s)
			*start_s = (double)start / (double)hz;
	}
	return ticks;
}

static double uptime_s(void)
{
	double up = 0;
	FILE *f = fopen("/proc/uptime", "re");

	if (f) {
		if (fscanf(f, "%lf", &up) != 1)
			up = 0;
		fclose(f);
	}
	return up;
}

void warm_up(void)
{
	static struct worker w0 = { .side_fd = -1 };

	w0.rng = cfg.seed;
	call(&w0, K_NORMAL, F_RW, M_PLAIN, -1);
	call(&w0, K_STALL, F_RW, M_PLAIN, -1);
	wd_cpu_start_ns = now_ns();
}

unsigned long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned long n = 0;

	while (d && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			n++;
	if (d)
		closedir(d);
	return n;
}

/* The library's thread over the whole run, then over 3 s with resting connections. */
void idle_window(void)
{
	struct worker w = { .side_fd = -1, .rng = cfg.seed ^ 77 };
	double start, hz = (double)sysconf(_SC_CLK_TCK);
	long t0 = lib_ticks(&start), t1;
	int fds[8];

	cnt.wd_cpu_run = start > 0 ? 100.0 * (double)t0 / hz / (uptime_s() - start) : -1;
	for (int i = 0; i < 8; i++) /* answered, left open: resting in a pool */
		fds[i] = open_resting(&w);
	t0 = lib_ticks(&start);
	sleep(3);
	t1 = lib_ticks(&start);
	cnt.wd_cpu_idle = 100.0 * (double)(t1 - t0) / hz / 3.0;
	for (int i = 0; i < 8; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

int write_summary(int rec_fd)
{
	FILE *f = fopen(cfg.out_sum, "we");

	for (int i = 0; i < nworkers; i++) {
		struct crec r = { .conn_id = workers[i].side_id, .kind = K_SIDE,
				  .bytes = workers[i].side_sent, .t_close = now_ns() };

		if (write(rec_fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
			cnt.rec_lost++;
	}
	if (f == NULL)
		return 2;
#define P(name, v) fprintf(f, "%s %llu\n", name, (unsigned long long)(v))
	P("threads", cnt.threads);
	for (int k = 0; k < NKIND; k++)
		fprintf(f, "calls.%d %lu\n", k, (unsigned long)cnt.calls[k]);
	P("signals.restart", cnt.signals[0]);
	P("signals.norestart", cnt.signals[1]);
	P("side.eagain", cnt.side_err[0]);
	P("side.etimedout", cnt.side_err[1]);
	P("side.other", cnt.side_err[2]);
	P("side.sent", cnt.side_sent);
	P("forks", cnt.forks);
	P("fork_execs", cnt.fork_execs);
	P("vforks", cnt.vforks[0]);
	P("pyspawns", cnt.vforks[1]);
	P("spawns", cnt.spawns);
	P("child_fail", cnt.child_fail);
	P("side_retries", cnt.side_retries);
	P("fd_reuse", cnt.fd_reuse);
	P("dups", cnt.dups);
	P("waited.close", cnt.closes_waited[0]);
	P("waited.close_range", cnt.closes_waited[1]);
	P("waited.dup2", cnt.closes_waited[2]);
	P("bytes", cnt.bytes);
	P("corrupt", cnt.corrupt);
	P("eintr_ok", cnt.eintr_ok);
	P("eintr_spurious", cnt.eintr_spurious);
	P("eagain_checks", cnt.eagain_checks);
	P("eagain_bad", cnt.eagain_bad);
	P("setup_fail", cnt.setup_fail);
	P("rec_lost", cnt.rec_lost);
	P("fds_before", cnt.fds_before);
	P("fds_after", cnt.fds_after);
	fprintf(f, "wd_cpu_run %.2f\nwd_cpu_idle %.2f\n", cnt.wd_cpu_run, cnt.wd_cpu_idle);
	fclose(f);
	return 0;
}
