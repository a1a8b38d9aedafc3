/* client.h - the stress client's shared state: its settings, counters and threads
 * (client.c calls; client_aux.c closers, watchdog, /proc measurements, summary). */
#ifndef TB_STRESS_CLIENT_H
#define TB_STRESS_CLIENT_H

#include <pthread.h>
#include <sys/types.h>

#include "stress.h"

enum family { F_RW, F_SR, F_V, F_MSG, F_POLL, F_SELECT, F_PPOLL, F_WAITALL, F_PEEK, NFAM };
enum mode { M_PLAIN, M_DUP, M_DUP2, M_WAITED, M_REUSE_DUP2, M_CHILD };
enum { WS_PENDING, WS_READING, WS_RETURNED, WS_NONE };

struct cfg {
	int threads, secs, ports[NKIND];
	uint64_t seed;
	uint32_t connect_ms, read_ms, write_ms, deadline_ms, slack_ms;
	char out_rec[256], out_sum[256];
};

struct worker {
	pthread_t th;
	pid_t tid;
	uint64_t rng;
	_Atomic int64_t busy_since, bound_ns; /* the hang watchdog's view */
	const char *what;
	int side_fd;                          /* what this thread's handlers send on */
	uint64_t side_id, side_sent;
	atomic_uint norestart;                /* handlers without SA_RESTART run so far */
	/* M_WAITED, handed to a closer: the fd of the one read, and where the call is.
	 * The closer owns the fd once the state is past WS_PENDING (unless WS_NONE). */
	atomic_int wait_state, closer_busy;
	int waited_num;
	uint64_t side_last;                   /* when a handler last sent on side_fd (ns) */
	bool tainted;                         /* the last call failed: its deadline lives on */
	int64_t chain_start;
	int64_t last_cut[NKIND];              /* retry_window: that destination may fail fast */
};

struct counters {
	atomic_ulong calls[NKIND], signals[2], side_err[3], forks, fork_execs, vforks[2], spawns,
		child_fail, fd_reuse, side_retries, dups, closes_waited[3], bytes, corrupt, eintr_ok,
		eintr_spurious, eagain_checks, eagain_bad, setup_fail, rec_lost;
	unsigned long threads, side_sent, fds_before, fds_after;
	double wd_cpu_run, wd_cpu_idle;
};

extern struct cfg cfg;
extern struct counters cnt;
extern struct worker *workers;
extern int nworkers;

extern atomic_int stopping;

void set_self(struct worker *w);
void *signaller(void *arg);
void *spawner(void *arg);
void watch(struct worker *w, const char *what, int64_t bound_ms);
void unwatch(struct worker *w);
void call(struct worker *w, int kind, int fam, int mode, int want_fd);
uint64_t next_conn_id(void);
int cfg_from_env(void);
int open_resting(struct worker *w);
bool closer_push(struct worker *w);
void closers_start(void);
void closers_stop(void);
void *hang_watchdog(void *spawners);
void stop_hang_watchdog(pthread_t th);
void register_own_thread(void);
void note_tasks_before(void);
void warm_up(void);
unsigned long count_fds(void);
void idle_window(void);
int write_summary(int rec_fd);

#endif
