/* stats.c - this process's counters and latency histograms in a shared-memory segment,
 * the per-socket timers of a call, and the thread that refreshes gauges and the stats file. */
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "configure.h"
#include "fdtable.h"
#include "gate_file.h"
#include "gates.h"
#include "hooks.h"
#include "log.h"
#include "protect.h"
#include "real.h"
#include "service.h"
#include "stats_prom.h"
#include "stats_seg.h"

/* Sockets with timers: the pool's first indexes (a process with more governed sockets open
 * at once than this still counts calls and cuts, without latencies for the rest). */
#define CALLS_MAX 65536

/* The timers of the call under way on one socket (indexed by the socket's pool index).
 * Written by the threads that use the socket (the last writer wins, like the socket's own
 * call times, sock.h rule 9), read by the watchdog at a cut: relaxed atomics. 0: not yet.
 * Every governed socket touches its entry, so it holds no copy of the socket's own: the
 * handshake starts at connect_start, and whether the call's completion was counted is the
 * socket's call_done. */
struct call {
	_Atomic(struct tb_stats_dest *) row; /* its destination's row; NULL: none */
	/* Call start to handshake start, with a gate; else -1. In ms, as the cut's line shows
	 * it (its only reader): half a word instead of a word of its own. */
	_Atomic int32_t gate_ms;
	/* The handshake's end, as ms after connect_start + 1, for the cut's line, its only
	 * reader besides "connected yet?" (the histogram takes the ns at the moment). */
	_Atomic int32_t connected_ms;
	_Atomic int64_t begin;       /* the call's start (gate wait included) */
	_Atomic int64_t req_at;      /* the first byte of the current request */
	_Atomic int64_t first_byte;  /* the first byte of its response */
	_Atomic int64_t last_rx;     /* the last response byte so far */
};

_Static_assert(sizeof(struct call) == 48, "struct call is 48 bytes for every socket");

enum { SEG_NONE, SEG_OPENING, SEG_READY, SEG_FAILED };

static atomic_int seg_state;
static struct tb_stats_seg *seg;
static struct call *calls;
/* `calls` once the segment is ready (release): the transfers' one load (call_of). */
static _Atomic(struct call *) calls_ready;
static struct tb_dest keys[TB_STATS_DESTS]; /* process-local: the row's tb_dest */
static char seg_name[32];
static char stats_path[TB_LOG_PATH_MAX];
static int64_t stats_interval = TB_STATS_INTERVAL_DEFAULT;

/*
 * The process's name as ps shows it (the main thread's comm), taken at start-up from the
 * main thread with prctl: reading /proc/self/comm at the first connect opened an fd, which
 * took the lowest free number for a moment - the one a program thread doing close(1);
 * open() was about to be given. Off the main thread, the name it was executed as.
 */
static char proc_name[TB_STATS_TEXT];

static void take_proc_name(void)
{
	char comm[17] = "";

	if (syscall(SYS_gettid) == getpid() && prctl(PR_GET_NAME, comm) == 0)
		snprintf(proc_name, sizeof(proc_name), "%s", comm);
	else
		snprintf(proc_name, sizeof(proc_name), "%.15s", program_invocation_short_name);
}

void tb_stats_configure(const struct tb_settings *s)
{
	take_proc_name();
	tb_log_lend(tb_stats_wake);
	snprintf(stats_path, sizeof(stats_path), "%s", s->stats_path);
	if (s->stats_interval_ns > 0)
		stats_interval = s->stats_interval_ns;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	/* Not FUTEX_PRIVATE: the word is in a file mapping that `timebox stats` maps too. */
	return syscall(SYS_futex, word, op, val, ts, NULL, 0);
}

/*
 * The segment's file is allocated as it is used: its head and first row when it is made,
 * each later row by the first to need it (fallocate on tmpfs zeroes every page it
 * allocates: the whole table, 196 KB, took ~60 us of a process's first connect, for rows
 * most processes never use). The rest of the file is a hole, and no one touches a row
 * before its pages are allocated - a fault on a tmpfs hole allocates a page, even a read's,
 * and on a full tmpfs that is SIGBUS: so a full tmpfs fails the allocation instead.
 * `rows_allocated` (in the head: a forked child shares the segment) only grows; fallocate
 * of pages already allocated changes nothing, so two that allocate a row at once are both
 * right. Readers (`timebox stats`, the stats file) read the rows below it only.
 */
static int seg_fd = -1;
static atomic_bool rows_full; /* an allocation failed: no more rows for this process */

static size_t row_end(int i)
{
	return offsetof(struct tb_stats_seg, d) + (size_t)(i + 1) * sizeof(struct tb_stats_dest);
}

/* Said once per process. Its caller restores the program's errno after it. */
static __attribute__((noinline, cold)) void rows_lost(int i, int err)
{
	char body[400];

	if (atomic_exchange(&rows_full, true))
		return;
	snprintf(body, sizeof(body), "event=error what=stats_segment path=%s/%s row=%d "
		 "error=\"cannot allocate: %s\" effect=\"calls to destinations without a row "
		 "are counted as other\"", tb_gate_file_dir(), seg_name, i, strerror(err));
	tb_log_error(body);
}

/* Rows 0..i allocated, or false (said once). errno is left as it was. */
static __attribute__((noinline)) bool rows_allocate(int i)
{
	uint32_t have = atomic_load(&seg->rows_allocated);
	off_t at;
	int saved = errno, rc;

	if (have > (uint32_t)i)
		return true; /* another claimer allocated it meanwhile */
	if (atomic_load_explicit(&rows_full, memory_order_relaxed))
		return false;
	at = (off_t)offsetof(struct tb_stats_seg, d[have]);
	while ((rc = fallocate(seg_fd, 0, at, (off_t)row_end(i) - at)) != 0 && errno == EINTR)
		; /* a signal of the program's during the allocation is not a full tmpfs */
	if (rc != 0) {
		rows_lost(i, errno);
		errno = saved;
		return false;
	}
	errno = saved;
	while (have < (uint32_t)i + 1 &&
	       !atomic_compare_exchange_weak(&seg->rows_allocated, &have, (uint32_t)i + 1))
		;
	return true;
}

/* A dest's row, created on first use; -1 when the table is full, or when no more pages can
 * be had for it (counted as other_calls). */
static int row_of(const struct tb_dest *d)
{
	for (int i = 0; i < TB_STATS_DESTS; i++) {
		struct tb_stats_dest *r = &seg->d[i];
		uint32_t st;

		if ((uint32_t)i >= atomic_load_explicit(&seg->rows_allocated, memory_order_acquire) &&
		    !rows_allocate(i))
			return -1;
		st = atomic_load_explicit(&r->state, memory_order_acquire);
		if (st == 2 && tb_dest_equal(&keys[i], d))
			return i;
		if (st != 0)
			continue; /* being filled by another thread: perhaps ours, then two rows */
		if (!atomic_compare_exchange_strong(&r->state, &st, 1))
			continue;
		keys[i] = *d;
		tb_dest_format(d, r->dest, sizeof(r->dest));
		atomic_fetch_add_explicit(&seg->ndests, 1, memory_order_relaxed);
		atomic_store_explicit(&r->state, 2, memory_order_release);
		return i;
	}
	return -1;
}

static void refresh_gate(void *ctx, const struct tb_dest *d, const struct tb_gate_counts *c)
{
	int i = row_of(d);

	(void)ctx;
	if (i < 0)
		return;
	seg->d[i].max = (int32_t)c->max;
	atomic_store_explicit(&seg->d[i].leased, c->leased, memory_order_relaxed);
	atomic_store_explicit(&seg->d[i].pending, c->pending, memory_order_relaxed);
	atomic_store_explicit(&seg->d[i].acquired, c->acquired, memory_order_relaxed);
	atomic_store_explicit(&seg->d[i].gate_timed_out, c->timed_out, memory_order_relaxed);
	atomic_store_explicit(&seg->d[i].rejects, c->rejected, memory_order_relaxed);
}

static void refresh_prot(void *ctx, const struct tb_dest *d, const struct tb_prot_counts *c)
{
	int i = row_of(d);
	struct tb_stats_dest *r;

	(void)ctx;
	if (i < 0)
		return;
	r = &seg->d[i];
	atomic_store_explicit(&r->breaker_state, c->breaker_state, memory_order_relaxed);
	atomic_store_explicit(&r->breaker_opened, c->breaker_opened, memory_order_relaxed);
	atomic_store_explicit(&r->breaker_refused, c->breaker_refused, memory_order_relaxed);
	atomic_store_explicit(&r->retries, c->retries, memory_order_relaxed);
	atomic_store_explicit(&r->retry_refused, c->retry_refused, memory_order_relaxed);
	atomic_store_explicit(&r->auto_limit, c->auto_limit, memory_order_relaxed);
	atomic_store_explicit(&r->min_rtt_us, c->min_rtt_ns / 1000, memory_order_relaxed);
	atomic_store_explicit(&r->rtt_us, c->rtt_ns / 1000, memory_order_relaxed);
	atomic_store_explicit(&r->protect, 1, memory_order_relaxed);
	if (c->auto_limit > 0)
		r->max = c->auto_limit; /* the gate's size is the one it chose */
}

/* The learned hostnames: looked up by the stats thread (it takes the names' lock, which a
 * hook must not wait for), once per row. */
static void refresh_hosts(void)
{
	int n = (int)atomic_load_explicit(&seg->rows_allocated, memory_order_acquire);

	for (int i = 0; i < n && i < TB_STATS_DESTS; i++) {
		struct tb_stats_dest *r = &seg->d[i];
		uint32_t st = atomic_load_explicit(&r->state, memory_order_acquire);
		char host[TB_STATS_TEXT];

		/* Rows are claimed first free first and never given back: past the first row
		 * never claimed there is none. Looking further read one page of the segment
		 * per row, 31 page faults at a process's first connect. */
		if (st == 0)
			break;
		if (st != 2 || atomic_load_explicit(&r->host_ready, memory_order_relaxed))
			continue;
		tb_configure_name_of(&keys[i], host, sizeof(host));
		if (host[0] == '\0')
			continue;
		memcpy(r->host, host, sizeof(r->host));
		atomic_store_explicit(&r->host_ready, 1, memory_order_release);
	}
}

/* The stats file, whole or not at all: a temporary next to it, then rename. */
static void write_file(void)
{
	static struct tb_stats_row rows[TB_STATS_DESTS];
	size_t need, cap = 1 << 16;
	char *buf = NULL, tmp[TB_LOG_PATH_MAX + 32];
	int n = tb_stats_rows(seg, rows), fd;
	ssize_t w;

	for (;;) {
		free(buf);
		buf = malloc(cap);
		if (buf == NULL)
			return;
		need = tb_stats_prom(rows, n, 0, buf, cap);
		if (need < cap)
			need += tb_stats_prom_process(seg, 0, buf + need, cap - need);
		if (need < cap)
			break;
		cap = need + 1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", stats_path, (int)getpid());
	/* Moved high and shielded like every fd of ours: a program that closes fds it does
	 * not know (a loop over every number, closefrom) while this write is under way must
	 * neither close it nor have its own next open get the number, which this thread would
	 * then write into and close (tests/regress/stats_tmp_fd_closed). */
	fd = tb_open_raw(AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0)
		fd = tb_fd_move_internal(fd);
	if (fd >= 0) {
		w = tb_real.write(fd, buf, need);
		tb_gate_file_close(fd);
		if (w == (ssize_t)need && rename(tmp, stats_path) == 0)
			goto out;
		unlink(tmp);
	}
out:
	free(buf);
}

/*
 * The stats thread: refreshes the gauges when a reader asks (futex on seg->wake), rewrites the
 * stats file when it is due, and reports held-back log lines a second after the first one.
 * Otherwise it sleeps: an idle governed process is not woken by it.
 */
/* The stats thread's refresh and file writes, and the last write at exit: one at a time
 * (they share the rows and the gauges they copy). Never taken on the I/O path. */
static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;

static void *stats_main(void *arg)
{
	int64_t next_file = 0, flush_at = 0;

	(void)arg;
	for (;;) {
		uint32_t asked = atomic_load(&seg->wake);
		int64_t now = tb_now(), wait = 3600 * TB_NS_PER_S;
		struct timespec ts;

		pthread_mutex_lock(&work_lock);
		tb_gates_each(refresh_gate, NULL);
		tb_prot_each(refresh_prot, NULL);
		refresh_hosts();
		if (!tb_log_suppressing()) {
			flush_at = 0;
		} else if (flush_at == 0) {
			flush_at = now + TB_NS_PER_S;
		} else if (now >= flush_at) {
			tb_log_flush_suppressed();
			flush_at = 0;
		}
		if (stats_path[0] != '\0' && now >= next_file) {
			write_file();
			next_file = now + stats_interval;
		}
		pthread_mutex_unlock(&work_lock);
		atomic_fetch_add(&seg->refreshed, 1);
		futex(&seg->refreshed, FUTEX_WAKE, INT_MAX, NULL);
		now = tb_now();
		if (stats_path[0] != '\0' && next_file - now < wait)
			wait = next_file - now;
		if (flush_at != 0 && flush_at - now < wait)
			wait = flush_at - now;
		if (wait < TB_NS_PER_MS)
			wait = TB_NS_PER_MS;
		ts.tv_sec = wait / TB_NS_PER_S;
		ts.tv_nsec = wait % TB_NS_PER_S;
		futex(&seg->wake, FUTEX_WAIT, asked, &ts);
	}
	return NULL;
}

void tb_stats_wake(void)
{
	int saved = errno;

	if (atomic_load_explicit(&seg_state, memory_order_acquire) != SEG_READY)
		return;
	atomic_fetch_add(&seg->wake, 1);
	futex(&seg->wake, FUTEX_WAKE, 1, NULL);
	errno = saved;
}

/* The process exits: the kernel closes what the program left open (wget never closes its
 * connection), and that close ends each call whose response is complete. */
static void close_at_exit(void)
{
	int hi = atomic_load(&tb_fd_hiwater);

	for (int fd = 0; fd <= hi; fd++) {
		struct tb_sock *s = tb_fd_sock(fd);

		if (s != NULL)
			tb_stats_closed(s);
	}
}

/* Removed at exit by the process that made it (not by a forked child sharing the map). */
static void remove_segment(void)
{
	char path[320];

	if (seg == NULL || seg->pid != getpid())
		return;
	close_at_exit();
	if (stats_path[0] != '\0') {
		pthread_mutex_lock(&work_lock);
		write_file();
		pthread_mutex_unlock(&work_lock);
	}
	snprintf(path, sizeof(path), "%s/%s", tb_gate_file_dir(), seg_name);
	unlink(path);
}

/*
 * The stats thread is wanted once the segment is ready, and started by the watchdog's
 * thread (the starter init.c names: tb_wd_run_soon): a thread's creation costs ~60-100 us here, and the program's
 * first connect, which starts the watchdog, no longer pays for a second one. Started by
 * the asker itself when no watchdog can run. Not waited for: a fork waits for its start-up
 * (service.h). A fork child keeps its parent's (the segment is shared).
 */
enum { THREAD_NONE, THREAD_WANTED, THREAD_STARTED };
static atomic_int thread_state;
static void (*_Atomic thread_starter)(void (*)(void));

void tb_stats_thread_starter(void (*run_soon)(void (*)(void)))
{
	atomic_store(&thread_starter, run_soon);
}

void tb_stats_thread_start(void)
{
	int st = THREAD_WANTED;

	if (atomic_load(&thread_state) != THREAD_WANTED ||
	    !atomic_compare_exchange_strong(&thread_state, &st, THREAD_STARTED))
		return;
	if (!tb_service_start(stats_main, 256 * 1024, "timebox-stats"))
		tb_log_error("event=error what=stats_thread error=\"cannot start the stats thread; "
			     "gauges and the stats file are not updated\"");
}

void tb_stats_fork_child(void)
{
	int st = THREAD_WANTED, seg_st = SEG_OPENING;

	/* Asked for in the parent, not started yet: the parent's watchdog starts it there. */
	atomic_compare_exchange_strong(&thread_state, &st, THREAD_STARTED);
	/* Forked while another thread made the segment: that thread is not here, and the mark
	 * would never change - every connect of the child waited for it (await_opening, 1 s).
	 * The child makes a segment of its own, as after an exec (regress
	 * stats_fork_while_opening). What the other thread had made so far stays behind. */
	if (atomic_compare_exchange_strong(&seg_state, &seg_st, SEG_NONE))
		atomic_store(&thread_state, THREAD_NONE);
}

/*
 * Another thread is creating the segment (a few file operations): wait for it, so that
 * the connects made meanwhile - every thread of a pool starting at once - are counted.
 * Polled every millisecond, bounded (1 s): a signal handler that connects while its own
 * thread is the one creating it must not wait for itself for good; it counts nothing.
 */
static bool await_opening(void)
{
	const struct timespec ms = { 0, TB_NS_PER_MS };
	int64_t until = tb_now() + TB_NS_PER_S;
	int st;

	while ((st = atomic_load_explicit(&seg_state, memory_order_acquire)) == SEG_OPENING &&
	       tb_now() < until)
		nanosleep(&ms, NULL);
	return st == SEG_READY;
}

/*
 * Creates the segment and the timers' table once, at the first governed connect; the
 * thread that wins does the work, the others wait for it (await_opening). Returns true
 * when the segment is ready.
 */
static bool ready(void)
{
	int st = atomic_load_explicit(&seg_state, memory_order_acquire);
	struct stat id;
	char why[160];
	int fd;
	void *p;

	if (TB_LIKELY(st == SEG_READY))
		return true;
	if (st == SEG_OPENING)
		return await_opening();
	if (st != SEG_NONE || !atomic_compare_exchange_strong(&seg_state, &st, SEG_OPENING))
		return st == SEG_OPENING && await_opening();
	snprintf(seg_name, sizeof(seg_name), "stats-%d", (int)getpid());
	fd = tb_gate_file_open(seg_name, &id, why, sizeof(why));
	if (fd < 0)
		goto fail;
	/* The segment is this copy's while it holds a write lock on its first byte (an OFD
	 * lock, kept for the process's life through fd). A second copy of the library in the
	 * same process (preloaded twice) finds it held and keeps no statistics of its own:
	 * emptying the file under the first copy's mapping would kill the program with SIGBUS
	 * at its next count. After an exec the former image's lock went with its fds. */
	{
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0,
				    .l_len = 1 };

		if (tb_real.fcntl(fd, F_OFD_SETLK, &fl) < 0) {
			tb_gate_file_close(fd);
			atomic_store(&seg_state, SEG_FAILED);
			return false;
		}
	}
	/* Emptied first: after an exec the same pid finds its former image's segment. */
	/* The whole size, a hole but for the head and the first row, allocated now (row_of
	 * allocates the others): on a full tmpfs (a container's small /dev/shm) a page never
	 * allocated would kill the program with SIGBUS at its first count instead of failing
	 * here. */
	/* Allocated before the file takes its whole size: `timebox stats` maps a file of that
	 * size, and a read of its head in a hole would allocate (SIGBUS on a full tmpfs). */
	if (ftruncate(fd, 0) < 0 || fallocate(fd, 0, 0, (off_t)row_end(0)) < 0 ||
	    ftruncate(fd, sizeof(struct tb_stats_seg)) < 0) {
		snprintf(why, sizeof(why), "cannot allocate: %s", strerror(errno));
		tb_gate_file_close(fd);
		goto fail;
	}
	p = mmap(NULL, sizeof(struct tb_stats_seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		tb_gate_file_close(fd); /* kept open otherwise: it holds the lock (above) */
	calls = mmap(NULL, CALLS_MAX * sizeof(struct call), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED || calls == MAP_FAILED) {
		snprintf(why, sizeof(why), "cannot map: %s", strerror(errno));
		if (p != MAP_FAILED) {
			munmap(p, sizeof(struct tb_stats_seg));
			tb_gate_file_close(fd);
		}
		if (calls != MAP_FAILED)
			munmap(calls, CALLS_MAX * sizeof(struct call));
		goto fail;
	}
	seg = p;
	seg_fd = fd;
	atomic_store(&seg->rows_allocated, 1);
	seg->version = TB_STATS_VERSION;
	seg->pid = (int32_t)getpid();
	seg->started = (int64_t)time(NULL);
	if (syscall(SYS_gettid) == getpid())
		take_proc_name(); /* on the main thread: its name now, as ps shows it */
	memcpy(seg->comm, proc_name, sizeof(seg->comm));
	atomic_store_explicit(&seg->magic, TB_STATS_MAGIC, memory_order_release);
	atexit(remove_segment);
	atomic_store_explicit(&seg_state, SEG_READY, memory_order_release);
	atomic_store_explicit(&calls_ready, calls, memory_order_release);
	atomic_store(&thread_state, THREAD_WANTED);
	{
		void (*run_soon)(void (*)(void)) = atomic_load(&thread_starter);

		if (run_soon != NULL)
			run_soon(tb_stats_thread_start);
		else
			tb_stats_thread_start();
	}
	return true;
fail: {
		char body[400];

		snprintf(body, sizeof(body), "event=error what=stats_segment path=%s/%s error=\"%s\" "
			 "effect=\"no statistics for this process\"", tb_gate_file_dir(), seg_name,
			 why);
		tb_log_error(body);
	}
	atomic_store(&seg_state, SEG_FAILED);
	return false;
}

static struct call *call_of(struct tb_sock *s)
{
	struct call *base = atomic_load_explicit(&calls_ready, memory_order_acquire);

	if (TB_UNLIKELY(base == NULL) || s->index >= CALLS_MAX)
		return NULL;
	return &base[s->index];
}

static struct tb_stats_dest *row_at(struct call *c)
{
	return atomic_load_explicit(&c->row, memory_order_relaxed);
}

#define ADD(field) atomic_fetch_add_explicit(&(field), 1, memory_order_relaxed)
#define LOAD(field) atomic_load_explicit(&(field), memory_order_relaxed)
#define STORE(field, v) atomic_store_explicit(&(field), (v), memory_order_relaxed)

static int32_t ms_clamped(int64_t ns)
{
	int64_t ms = ns / TB_NS_PER_MS;

	return ms > INT32_MAX ? INT32_MAX : (int32_t)ms;
}

/* An instant `to` kept as struct call's ms after `from`, plus one (0 stays "not yet"). */
static int32_t ms_mark(int64_t from, int64_t to)
{
	int32_t ms = to > from ? ms_clamped(to - from) : 0;

	return ms < INT32_MAX ? ms + 1 : INT32_MAX;
}

void tb_stats_call_begin(struct tb_sock *s, int64_t start)
{
	struct call *c;
	int64_t at;
	int i;

	if (!ready() || (c = call_of(s)) == NULL)
		return;
	i = row_of(&s->dest);
	at = LOAD(s->connect_start);
	STORE(c->row, i >= 0 ? &seg->d[i] : NULL);
	STORE(s->call_done, false);
	STORE(c->begin, start < at ? start : at);
	STORE(c->connected_ms, 0);
	STORE(c->req_at, 0);
	STORE(c->first_byte, 0);
	STORE(c->last_rx, 0);
	STORE(c->gate_ms, LOAD(s->has_slot) ? ms_clamped(at - LOAD(c->begin)) : -1);
	if (i >= 0)
		ADD(seg->d[i].calls);
	else
		ADD(seg->other_calls);
}

/* The handshake counts from connect_start, as the connect phase does: after timebox's own
 * start-up inside a process's first connect (tb_sock_connect_begins). */
static void connected_at(struct tb_sock *s, struct call *c, int64_t now)
{
	struct tb_stats_dest *r = row_at(c);
	int64_t at = LOAD(s->connect_start);

	STORE(c->connected_ms, ms_mark(at, now));
	if (r != NULL)
		tb_hist_record(&r->hist[TB_HIST_CONNECT], now - at);
}

void tb_stats_connected(struct tb_sock *s)
{
	struct call *c = call_of(s);

	if (c != NULL && LOAD(c->connected_ms) == 0)
		connected_at(s, c, tb_now());
}

/* A call ends: with EOF, or when a new request follows its response on the socket. */
static void complete(struct tb_sock *s, struct call *c)
{
	struct tb_stats_dest *r = row_at(c);
	int64_t end = LOAD(c->last_rx);

	if (LOAD(s->call_done) || end == 0 || r == NULL)
		return;
	STORE(s->call_done, true);
	ADD(r->completed);
	tb_hist_record(&r->hist[TB_HIST_CALL], end - LOAD(c->begin));
}

void tb_stats_sent(struct tb_sock *s, int64_t now)
{
	struct call *c = call_of(s);
	bool response = atomic_load_explicit(&s->got_bytes, memory_order_relaxed);

	if (c == NULL || (LOAD(c->req_at) != 0 && !response))
		return; /* more of the same request: nothing to time */
	if (LOAD(c->connected_ms) == 0)
		connected_at(s, c, now); /* a non-blocking connect: it completed by now */
	if (response) { /* a new request on the same connection: a new call */
		struct tb_stats_dest *row = row_at(c);

		complete(s, c);
		if (row != NULL)
			ADD(row->calls);
		STORE(s->call_done, false);
		STORE(c->begin, now);
		STORE(c->first_byte, 0);
		STORE(c->last_rx, 0);
	}
	STORE(c->req_at, now);
}

int64_t tb_stats_received(struct tb_sock *s, ssize_t r)
{
	struct call *c = call_of(s);
	int64_t now;

	if (c == NULL)
		return 0;
	if (r == 0) {
		complete(s, c);
		return 0;
	}
	now = tb_now();
	STORE(c->last_rx, now);
	if (LOAD(c->first_byte) == 0 && LOAD(c->req_at) != 0 &&
	    !atomic_load_explicit(&s->got_bytes, memory_order_relaxed)) {
		struct tb_stats_dest *row = row_at(c);

		STORE(c->first_byte, now);
		if (row != NULL)
			tb_hist_record(&row->hist[TB_HIST_FIRST_BYTE], now - LOAD(c->req_at));
	}
	return now;
}

void tb_stats_notice(struct tb_sock *s, enum tb_notice k)
{
	struct call *c = call_of(s);
	struct tb_stats_dest *r = c != NULL ? row_at(c) : NULL;

	if (r != NULL && (unsigned)k < TB_NOTICE_COUNT)
		ADD(r->notices[k]);
}

void tb_stats_not_sent(const struct tb_dest *d)
{
	int i;

	/* ready(), not seg: a refused connect may be the process's first (no segment yet). */
	if (!ready())
		return;
	i = row_of(d);
	if (i >= 0)
		ADD(seg->d[i].not_sent);
}

void tb_stats_arrived_spent(void)
{
	if (ready()) /* a server may read requests before its first outbound connect */
		ADD(seg->arrived_spent);
}

void tb_stats_closed(struct tb_sock *s)
{
	struct call *c = call_of(s);
	unsigned fs;
	bool answered;

	if (c == NULL)
		return;
	fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed) & TB_FS_STATE;
	if (fs == TB_FRAME_RESTING || fs == TB_FRAME_ANSWERED)
		answered = true; /* every response complete; TLS: application data came back */
	else if (fs == TB_FRAME_RAW || fs == TB_FRAME_UNKNOWN)
		answered = atomic_load_explicit(&s->got_bytes, memory_order_relaxed);
	else
		answered = false; /* a response cut short, or a session: no call ends here */
	if (answered)
		complete(s, c);
}

static int64_t ms_or_none(int64_t from, int64_t to)
{
	return from > 0 && to >= from ? (to - from) / TB_NS_PER_MS : -1;
}

/*
 * The timers go straight to the cutter's line: no thread-local storage here (the library's
 * static TLS must stay small enough for a dlopen() of it; glibc's surplus is a few hundred
 * bytes), and nothing kept per socket for a cut, which is rare.
 */
bool tb_stats_cut(struct tb_sock *s, enum tb_phase phase, struct tb_log_timers *t)
{
	struct call *c = call_of(s);
	struct tb_stats_dest *r;
	int64_t now, deadline;

	if (c == NULL)
		return false;
	r = row_at(c);
	if (r != NULL)
		ADD(r->cuts[phase]);
	now = tb_now();
	deadline = LOAD(s->call_deadline);
	t->gate_ms = LOAD(c->gate_ms);
	t->connect_ms = LOAD(c->connected_ms) - 1;
	t->first_byte_ms = ms_or_none(LOAD(c->req_at), LOAD(c->first_byte));
	t->total_ms = ms_or_none(LOAD(c->begin), now);
	t->budget_ms = deadline > 0 && deadline < TB_NEVER
			       ? (deadline > now ? (deadline - now) / TB_NS_PER_MS : 0)
			       : -1;
	t->host[0] = '\0';
	if (r != NULL && atomic_load_explicit(&r->host_ready, memory_order_acquire)) {
		memcpy(t->host, r->host, sizeof(t->host));
		t->host[sizeof(t->host) - 1] = '\0';
	}
	return true;
}
