/* protect.c - the downstream's protection: the table of protected destinations, the connect's
 * admission, and each call's outcome (protect.h). One mutex per destination guards its
 * state machines; it is taken at a connect and once per call's outcome, never on the path of
 * a read or a write that is not a call's first answer byte. */
#include "protect.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "adaptive.h"
#include "clock.h"
#include "futex.h"
#include "gate_file.h"
#include "gate.h"
#include "gates.h"
#include "log.h"
#include "real.h"
#include "retry_budget.h"
#include "sock.h"
#include "thread.h"

#define TABLE_SIZE 1024  /* protected destinations per process */
#define MARKS 64         /* threads whose last call to a destination failed, per destination */
#define CALLS_MAX 65536  /* sockets followed (by pool index), as the statistics */
/* How long a failed call marks its thread's next connect to the destination as a retry.
 * Long enough for a program's own immediate and backed-off retries (100 ms .. 1.6 s), short
 * enough that a thread whose retries were refused makes a first attempt again soon: a
 * refused retry does not renew the mark, so no thread is locked out for a whole window. */
#define RETRY_MARK_NS (2 * TB_NS_PER_S)

/* A thread whose last call to the destination failed: its next connect there within
 * `until` is a retry (the program's own), which the retry budget bounds. */
struct mark {
	int tid;
	int64_t until;
};

/* What the processes of a pre-fork server share about a destination when its gate is
 * shared (gate_shared): one page of a file beside the gate files, under a robust,
 * process-shared mutex, so that a process that dies holding it leaves no breaker stuck
 * (the next locker takes it over), and a probe whose process died frees its place after
 * probe_timeout (breaker.c). Otherwise the same struct lives in the process's entry. */
struct prot_state {
	atomic_uint ready;             /* shared: 0 fresh, 1 initialising, 2 ready */
	uint32_t version;
	pthread_mutex_t lock;
	struct tb_breaker br;
	struct tb_retry_budget rb;
	struct tb_adaptive ad;
	struct mark marks[MARKS];
	int64_t marks_until;           /* no mark's `until` is later: a success looks for its
					* thread's mark only before then */
	uint32_t told_period;          /* the breaker period whose first refusal was logged */
	uint32_t pad;
	uint64_t refused_untold;       /* refusals since the last reject line */
	int64_t retry_told_at;         /* the last retry_budget line */
	uint64_t retry_untold;
	/* read lock-free by the statistics */
	atomic_uint state;             /* enum tb_breaker_state, published */
	atomic_int limit;              /* the adaptive gate's size; 0: not auto */
	atomic_ulong opened, refused, retries, retry_refused;
	_Atomic int64_t min_rtt, rtt;
};
#define STATE_VERSION 2 /* 2: the windows keep their sums (window.h) */
_Static_assert(sizeof(struct prot_state) <= TB_GATE_PAGE, "one page of a shared file");

struct entry {
	struct tb_dest dest;
	bool breaker_on, retry_on, auto_on;
	bool log_sizes;                /* log_level = info: each new adaptive size is a line */
	int refuse_errno;
	int64_t slow_ns;
	struct tb_breaker_cfg bc;
	struct tb_retry_cfg rc;
	struct tb_adaptive_cfg ac;
	struct prot_state *st;         /* &own, or the shared page */
	int fd;                        /* the shared file's use lock, or -1 */
	struct stat id;                /* ... and which file it is */
	char name[96];
	struct entry *next_shared;
	_Atomic(struct tb_gate *) gate;
	atomic_uint own_lock;          /* the lock of `own` (local_lock), own.lock unused */
	struct prot_state own;
};

/* One socket's call, by pool index: who it belongs to and how far it got. */
struct call {
	atomic_uint entry;             /* index + 1; 0: the socket is not protected */
	atomic_uint gen;               /* the socket's generation when bound */
	_Atomic uint64_t ticket;       /* period << 8 | (probe + 1) */
	_Atomic int64_t req_at;        /* the request's first bytes; 0: none yet */
	atomic_uint outcome;           /* 0: the call has none yet; 1: it has */
	atomic_int tid;                /* the thread that connected (its retry mark) */
};

static _Atomic(struct entry *) table[TABLE_SIZE];
/* The entries in the order they were made, for those who visit them all (the stats thread
 * every second, fork): a scan of the whole table read its 8 KiB, which backs them on a
 * kernel that maps no zero page for a read of memory never written. count: release, after
 * the entry is stored; written under insert_lock. */
static _Atomic(struct entry *) made[TABLE_SIZE];
static atomic_uint made_count;
static pthread_mutex_t insert_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct call *) calls;
static atomic_bool said_full, said_calls;

static unsigned hash_dest(const struct tb_dest *d)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < (d->family == AF_INET ? 4 : 16); i++)
		h = (h ^ d->addr[i]) * 16777619u;
	h = (h ^ d->port) * 16777619u;
	return h & (TABLE_SIZE - 1);
}

static void state_init(struct prot_state *st, const struct entry *e, bool shared, int64_t now)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	if (shared) {
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	}
	pthread_mutex_init(&st->lock, &a);
	pthread_mutexattr_destroy(&a);
	st->version = STATE_VERSION;
	tb_breaker_init(&st->br, &e->bc, now);
	tb_retry_init(&st->rb, &e->rc);
	tb_adaptive_init(&st->ad, &e->ac, now);
	st->told_period = UINT32_MAX;
	st->marks_until = 0;
	if (e->auto_on)
		atomic_store(&st->limit, tb_adaptive_limit(&st->ad));
}

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *shared_entries; /* the entries on a shared page, for exit and fork */
static atomic_bool said_shared;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* At exit, the last process using a destination's page removes its file (as the gate
 * files: gate_file.c). Try-locks only: exit() from a handler must not deadlock. */
static void remove_unused(void)
{
	if (pthread_mutex_trylock(&shared_lock) != 0)
		return;
	for (struct entry *e = shared_entries; e != NULL; e = e->next_shared)
		tb_gate_file_remove_if_unused(e->fd, e->name, &e->id);
	pthread_mutex_unlock(&shared_lock);
}

static void register_exit(void)
{
	atexit(remove_unused);
}

/* "protect-127.0.0.1_8080": the gate file's name for d without its size. */
static int shared_name(const struct tb_dest *d, char *buf, size_t len)
{
	char g[96];
	char *max;

	if (tb_gate_file_name(d, 0, g, sizeof(g)) < 0 || strncmp(g, "gate-", 5) != 0)
		return -1;
	max = strstr(g, "-max0");
	if (max != NULL)
		*max = '\0';
	return snprintf(buf, len, "protect-%s", g + 5) < (int)len ? 0 : -1;
}

/* The byte of a shared file whose write lock its page's initialiser holds (byte 0 is the
 * use lock, gate_file.h), and how long a live initialiser is waited for. */
#define INIT_BYTE 1
#define INIT_WAIT_NS (100 * TB_NS_PER_MS)

static int init_lock(int fd, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = INIT_BYTE,
			    .l_len = 1 };

	return tb_real.fcntl(fd, F_OFD_SETLK, &fl);
}

/* The shared page of e's destination, attached and initialised (by whoever is first);
 * NULL when it cannot be had (said once): the process then keeps its own. */
static struct prot_state *attach_shared(struct entry *e, int64_t now)
{
	char why[400] = "no file name for this destination";
	struct prot_state *st;
	void *page;

	if (shared_name(&e->dest, e->name, sizeof(e->name)) < 0)
		goto fail;
	e->fd = tb_gate_file_attach(e->name, &e->id, &page, why, sizeof(why));
	if (e->fd < 0)
		goto fail;
	st = page;
	/* The page is initialised under a lock on INIT_BYTE, which the kernel drops with its
	 * holder: a page whose initialiser was killed half-way is initialised again by the
	 * next process instead of being waited for. The wait for a live initialiser is
	 * microseconds; it is bounded by the clock (INIT_WAIT_NS): 100,000 sched_yield()s for
	 * a dead one took 145 s of a connect on a CPU shared with one busy thread
	 * (regress/protect_half_init). */
	for (int64_t until = tb_now() + INIT_WAIT_NS; atomic_load(&st->ready) != 2;) {
		const struct timespec pause = { 0, 500000 };

		if (init_lock(e->fd, F_WRLCK) == 0) {
			if (atomic_load(&st->ready) != 2) {
				atomic_store(&st->ready, 1);
				state_init(st, e, true, now);
				atomic_store(&st->ready, 2);
			}
			init_lock(e->fd, F_UNLCK);
			break;
		}
		if (tb_now() >= until)
			break;
		nanosleep(&pause, NULL);
	}
	if (atomic_load(&st->ready) != 2 || st->version != STATE_VERSION) {
		snprintf(why, sizeof(why), "the file is being initialised by a process that does "
			 "not finish, or was written by another version");
		tb_gate_file_close(e->fd);
		e->fd = -1;
		goto fail;
	}
	/* Reached only under insert_lock (entry_of), which a handler above it does not take. */
	pthread_mutex_lock(&shared_lock);
	e->next_shared = shared_entries;
	shared_entries = e;
	pthread_mutex_unlock(&shared_lock);
	pthread_once(&exit_once, register_exit);
	return st;
fail:
	if (!atomic_exchange(&said_shared, true)) {
		char body[700];

		snprintf(body, sizeof(body), "event=error what=protect_shared file=\"%s/%s\" "
			 "error=\"%s\" effect=\"this process keeps its own breaker and retry "
			 "budget for this destination (and for any other whose file fails too)\"",
			 tb_gate_file_dir(), e->name, why);
		tb_log_error(body);
	}
	return NULL;
}

static void entry_init(struct entry *e, const struct tb_dest *d, const struct tb_settings *set,
		       int64_t now)
{
	memset(e, 0, sizeof(*e));
	e->dest = *d;
	e->fd = -1;
	e->breaker_on = tb_settings_breaker_on(set);
	e->retry_on = tb_settings_retry_budget_on(set);
	e->auto_on = set->max_conns_auto;
	e->log_sizes = set->log_level == TB_LOG_LEVEL_INFO;
	e->refuse_errno = set->breaker_errno;
	e->slow_ns = set->breaker_slow_ns;
	tb_breaker_cfg_from(&e->bc, set);
	tb_retry_cfg_from(&e->rc, set);
	tb_adaptive_cfg_from(&e->ac, set);
	e->st = set->gate_shared ? attach_shared(e, now) : NULL;
	if (e->st == NULL) {
		e->st = &e->own;
		state_init(e->st, e, false, now);
	}
}

/* The locks this thread holds (HELD_*). A signal handler that makes a governed call of its
 * own comes back here; had it waited for a lock its own thread holds below it, the thread
 * would hang for good. It takes none of those: its call is left out (take fails). The
 * handler leaves the bits as it found them, so the interrupted |= and &= are safe. */
enum { HELD_INSERT = 1, HELD_ENTRY = 2 };
static __thread unsigned char held __attribute__((tls_model("initial-exec")));

enum { TAKE_NOT, TAKE_OK, TAKE_FROM_DEAD };

/* TAKE_NOT in a handler above its thread's own hold. TAKE_FROM_DEAD: a process that died
 * holding a shared lock left it to us. Its update may be half done, which the state
 * machines survive (counts, times; the windows' kept sums are taken again from their
 * counts, by the caller), and the breaker is never left stuck. */
static int take(pthread_mutex_t *m, unsigned bit)
{
	if (held & bit)
		return TAKE_NOT;
	held |= bit;
	atomic_signal_fence(memory_order_seq_cst);
	if (pthread_mutex_lock(m) == EOWNERDEAD) {
		pthread_mutex_consistent(m);
		return TAKE_FROM_DEAD;
	}
	return TAKE_OK;
}

static void give(pthread_mutex_t *m, unsigned bit)
{
	pthread_mutex_unlock(m);
	atomic_signal_fence(memory_order_seq_cst);
	held &= ~bit;
}

/* A shared page's state whose last update may have stopped half-way: what is kept beside
 * the counts is taken again from them. */
static __attribute__((noinline, cold)) void repair(struct prot_state *st)
{
	tb_window_repair(&st->br.win);
	tb_window_repair(&st->rb.win);
	for (int i = 0; i < MARKS; i++)
		if (st->marks[i].until > st->marks_until)
			st->marks_until = st->marks[i].until;
}

/*
 * The lock of a process's own state: 0 free, 1 held, 2 held and perhaps waited for (a futex
 * private to the process). A destination's lock is taken at every call's outcome, and a
 * pthread mutex's lock and unlock were 55 instructions of it; this one is a compare-and-swap
 * and an exchange when nobody waits. A shared page keeps its robust pthread mutex (a process
 * that dies holding it must leave it to the next).
 */
static void local_lock(atomic_uint *l)
{
	unsigned c = 0;

	if (atomic_compare_exchange_strong_explicit(l, &c, 1, memory_order_acquire,
						    memory_order_relaxed))
		return;
	if (c != 2)
		c = atomic_exchange_explicit(l, 2, memory_order_acquire);
	while (c != 0) {
		tb_futex_wait_until(l, 2, TB_NEVER, false);
		c = atomic_exchange_explicit(l, 2, memory_order_acquire);
	}
}

static void local_unlock(atomic_uint *l)
{
	if (atomic_exchange_explicit(l, 0, memory_order_release) == 2)
		tb_futex_wake_one(l, false);
}

/* The destination's lock; false in a handler that interrupted its thread's own update. */
static inline __attribute__((always_inline)) bool lock(struct entry *e)
{
	int t;

	if (e->st == &e->own) {
		if (held & HELD_ENTRY)
			return false;
		held |= HELD_ENTRY;
		atomic_signal_fence(memory_order_seq_cst);
		local_lock(&e->own_lock);
		return true;
	}
	t = take(&e->st->lock, HELD_ENTRY);
	if (__builtin_expect(t == TAKE_FROM_DEAD, 0))
		repair(e->st);
	return t != TAKE_NOT;
}

static inline __attribute__((always_inline)) void unlock(struct entry *e)
{
	if (e->st == &e->own) {
		local_unlock(&e->own_lock);
		atomic_signal_fence(memory_order_seq_cst);
		held &= ~HELD_ENTRY;
		return;
	}
	give(&e->st->lock, HELD_ENTRY);
}

/* The entry of d, created with set on first use; NULL when the table is full or memory
 * short (the destination then goes unprotected, said once). Lookup is lock-free. */
static struct entry *entry_of(const struct tb_dest *d, const struct tb_settings *set,
			      int64_t now, uint32_t *index)
{
	unsigned i = hash_dest(d);
	struct entry *e;

	for (unsigned n = 0; n < TABLE_SIZE; n++, i = (i + 1) & (TABLE_SIZE - 1)) {
		e = atomic_load_explicit(&table[i], memory_order_acquire);
		if (e == NULL)
			break;
		if (tb_dest_equal(&e->dest, d)) {
			*index = i + 1;
			return e;
		}
	}
	if (take(&insert_lock, HELD_INSERT) == TAKE_NOT) {
		*index = 0;
		return NULL; /* a handler, above this thread's own insertion: unprotected */
	}
	i = hash_dest(d);
	for (unsigned n = 0; n < TABLE_SIZE; n++, i = (i + 1) & (TABLE_SIZE - 1)) {
		e = atomic_load_explicit(&table[i], memory_order_acquire);
		if (e != NULL && tb_dest_equal(&e->dest, d))
			goto out;
		if (e == NULL) {
			e = malloc(sizeof(*e));
			if (e != NULL) {
				unsigned k = atomic_load_explicit(&made_count,
								  memory_order_relaxed);

				entry_init(e, d, set, now);
				atomic_store_explicit(&table[i], e, memory_order_release);
				atomic_store_explicit(&made[k], e, memory_order_relaxed);
				atomic_store_explicit(&made_count, k + 1, memory_order_release);
			}
			goto out;
		}
	}
	e = NULL;
out:
	give(&insert_lock, HELD_INSERT);
	if (e == NULL && !atomic_exchange(&said_full, true))
		tb_log_error("event=error what=protect_table error=\"more than 1024 protected "
			     "destinations, or no memory\" effect=\"connects to further "
			     "destinations have no breaker and no retry budget\"");
	*index = e != NULL ? i + 1 : 0;
	return e;
}

static struct entry *entry_at(uint32_t index)
{
	return index == 0 || index > TABLE_SIZE ? NULL
						: atomic_load_explicit(&table[index - 1],
								       memory_order_acquire);
}

/* The side table of calls, mapped on the first protected connect (64 K × 40 bytes of
 * address space; pages are touched only by the sockets that use them). */
static struct call *calls_table(void)
{
	struct call *c = atomic_load_explicit(&calls, memory_order_acquire);
	void *p;

	if (c != NULL)
		return c;
	p = mmap(NULL, CALLS_MAX * sizeof(struct call), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (!atomic_compare_exchange_strong(&calls, &c, (struct call *)p)) {
		munmap(p, CALLS_MAX * sizeof(struct call));
		return c;
	}
	return p;
}

/* The call of s when s is protected and still the socket it was bound as. */
static struct call *call_of(struct tb_sock *s, struct entry **e)
{
	struct call *base = atomic_load_explicit(&calls, memory_order_acquire), *c;

	if (base == NULL || s->index >= CALLS_MAX)
		return NULL;
	c = &base[s->index];
	if (atomic_load_explicit(&c->gen, memory_order_relaxed) != TB_ST_GEN(tb_sock_word(s)))
		return NULL;
	*e = entry_at(atomic_load_explicit(&c->entry, memory_order_relaxed));
	return *e != NULL ? c : NULL;
}

static uint64_t ticket_pack(const struct tb_breaker_ticket *t)
{
	return (uint64_t)t->period << 8 | (uint8_t)(t->probe + 1);
}

static struct tb_breaker_ticket ticket_unpack(uint64_t v)
{
	struct tb_breaker_ticket t = { .period = (uint32_t)(v >> 8),
				       .probe = (int8_t)((int)(v & 0xff) - 1) };

	return t;
}

/* Under e->lock: the thread's mark, or NULL. */
static struct mark *mark_of(struct entry *e, int tid, bool claim)
{
	unsigned h = (unsigned)tid * 2654435761u, i = h % MARKS;
	struct mark *oldest = &e->st->marks[i];

	for (unsigned n = 0; n < 8; n++, i = (i + 1) % MARKS) {
		if (e->st->marks[i].tid == tid)
			return &e->st->marks[i];
		if (e->st->marks[i].until < oldest->until)
			oldest = &e->st->marks[i];
	}
	if (!claim)
		return NULL;
	/* Eight places per thread: past them the oldest mark goes (a retry then counts as a
	 * first attempt: the budget errs towards letting it through). */
	oldest->tid = tid;
	return oldest;
}

static const char *change_state(enum tb_breaker_change ch)
{
	switch (ch) {
	case TB_BREAKER_OPENED:
	case TB_BREAKER_REOPENED:
		return "open";
	case TB_BREAKER_HALF_OPENED:
		return "half-open";
	case TB_BREAKER_RECLOSED:
		return "closed";
	default:
		return NULL;
	}
}


static void note_change(struct entry *e, enum tb_breaker_change ch, int64_t now,
			const char *last, struct tb_prot_note *n)
{
	n->ch = ch;
	n->entry = e;
	if (ch == TB_BREAKER_SAME)
		return;
	atomic_store_explicit(&e->st->state, e->st->br.state, memory_order_relaxed);
	n->failures = e->st->br.why_failures;
	n->calls = e->st->br.why_calls;
	n->for_ns = -1;
	n->reason = ch == TB_BREAKER_HALF_OPENED ? "open_elapsed" : tb_breaker_reason_name(e->st->br.why);
	n->last = ch == TB_BREAKER_HALF_OPENED ? NULL : last;
	if (ch == TB_BREAKER_OPENED || ch == TB_BREAKER_REOPENED) {
		atomic_fetch_add_explicit(&e->st->opened, 1, memory_order_relaxed);
		n->for_ns = e->st->br.open_until - now;
	}
}

static __attribute__((noinline)) void say_changed(const struct entry *e,
						 const struct tb_prot_note *n)
{
	const char *state = change_state((enum tb_breaker_change)n->ch);

	if (state != NULL)
		tb_log_breaker(&e->dest, state, n->reason, n->last, n->failures, n->calls,
			       n->for_ns);
}

/* Nearly every outcome changes nothing: tested here, inline. */
static inline void say_change(const struct entry *e, const struct tb_prot_note *n)
{
	if (n->ch != TB_BREAKER_SAME)
		say_changed(e, n);
}

void tb_prot_say(const struct tb_prot_note *n)
{
	if (n->entry != NULL)
		say_change(n->entry, n);
}

int tb_prot_admit(const struct tb_settings *set, const struct tb_dest *d, int fd, int64_t now,
		  struct tb_prot_ticket *t)
{
	struct tb_prot_note note = { .ch = TB_BREAKER_SAME };
	enum tb_breaker_verdict v = TB_BREAKER_PASS;
	const char *refused = NULL;
	uint64_t count = 0;
	int64_t left = -1;
	struct entry *e;
	bool tell = false;

	t->entry = 0;
	t->bt.period = 0;
	t->bt.probe = -1;
	e = entry_of(d, set, now, &t->entry);
	if (e == NULL)
		return 0;
	if (!lock(e)) {
		t->entry = 0; /* a handler, above this thread's own update: not counted */
		return 0;
	}
	if (e->breaker_on) {
		enum tb_breaker_change ch = TB_BREAKER_SAME;

		v = tb_breaker_allow(&e->st->br, &e->bc, now, &t->bt, &ch);
		note_change(e, ch, now, NULL, &note);
		if (v == TB_BREAKER_REFUSE) {
			refused = "breaker";
			atomic_fetch_add_explicit(&e->st->refused, 1, memory_order_relaxed);
			e->st->refused_untold++;
			if (e->st->told_period != e->st->br.period) { /* the first refusal of this period */
				e->st->told_period = e->st->br.period;
				tell = true;
				count = e->st->refused_untold;
				e->st->refused_untold = 0;
				left = e->st->br.state == TB_BREAKER_OPEN ? e->st->br.open_until - now : -1;
			}
		}
	}
	if (refused == NULL && e->retry_on) {
		struct mark *m = tb_thread_multiplexed ? NULL : mark_of(e, tb_tid(), false);

		if (m != NULL && m->until > now) {
			if (tb_retry_allow(&e->st->rb, &e->rc, now)) {
				atomic_fetch_add_explicit(&e->st->retries, 1, memory_order_relaxed);
			} else {
				refused = "retry_budget";
				atomic_fetch_add_explicit(&e->st->retry_refused, 1, memory_order_relaxed);
				e->st->retry_untold++;
				if (now - e->st->retry_told_at >= TB_NS_PER_S || e->st->retry_told_at == 0) {
					e->st->retry_told_at = now;
					tell = true;
					count = e->st->retry_untold;
					e->st->retry_untold = 0;
				}
				if (v == TB_BREAKER_PROBE)
					tb_breaker_forget(&e->st->br, &t->bt);
			}
		} else {
			tb_retry_first(&e->st->rb, &e->rc, now);
		}
	}
	if (e->auto_on && tb_adaptive_tick(&e->st->ad, &e->ac, now))
		atomic_store_explicit(&e->st->limit, tb_adaptive_limit(&e->st->ad), memory_order_relaxed);
	unlock(e);
	say_change(e, &note);
	if (refused == NULL)
		return 0;
	if (tell)
		tb_log_refused(d, fd, refused, count, left);
	t->entry = 0;
	errno = e->refuse_errno;
	return -1;
}

void tb_prot_gate(const struct tb_prot_ticket *t, struct tb_gate *g)
{
	struct entry *e = entry_at(t->entry);
	int limit;

	if (e == NULL || !e->auto_on || g == NULL)
		return;
	if (atomic_load_explicit(&e->gate, memory_order_relaxed) != g)
		atomic_store_explicit(&e->gate, g, memory_order_relaxed);
	limit = atomic_load_explicit(&e->st->limit, memory_order_relaxed);
	if (limit > 0 && limit != atomic_load_explicit(&g->max, memory_order_relaxed))
		tb_gates_resize(g, limit);
}

void tb_prot_bind(struct tb_sock *s, const struct tb_prot_ticket *t)
{
	struct call *base, *c;

	if (t->entry == 0)
		return;
	base = calls_table();
	if (base == NULL || s->index >= CALLS_MAX) {
		if (!atomic_exchange(&said_calls, true))
			tb_log_error("event=error what=protect_calls error=\"no memory, or more "
				     "than 65536 sockets\" effect=\"the outcomes of further "
				     "connections are not counted by the breaker\"");
		tb_prot_drop(t);
		return;
	}
	c = &base[s->index];
	atomic_store_explicit(&c->entry, 0, memory_order_relaxed);
	atomic_store_explicit(&c->ticket, ticket_pack(&t->bt), memory_order_relaxed);
	atomic_store_explicit(&c->req_at, 0, memory_order_relaxed);
	atomic_store_explicit(&c->outcome, 0, memory_order_relaxed);
	atomic_store_explicit(&c->tid, tb_tid(), memory_order_relaxed);
	atomic_store_explicit(&c->gen, TB_ST_GEN(tb_sock_word(s)), memory_order_relaxed);
	atomic_store_explicit(&c->entry, t->entry, memory_order_release);
}

void tb_prot_drop(const struct tb_prot_ticket *t)
{
	struct entry *e = entry_at(t->entry);

	if (e == NULL || t->bt.probe < 0 || !lock(e))
		return; /* no lock: the probe's place times out as a dead probe's does */
	tb_breaker_forget(&e->st->br, &t->bt);
	unlock(e);
}

/* The call's one outcome: failed, or answered with latency rtt (-1: unknown). */
static void record_at(struct entry *e, struct call *c, bool failed, const char *reason,
		      int64_t rtt, struct tb_prot_note *out, int64_t now)
{
	struct tb_prot_note note = { .ch = TB_BREAKER_SAME };
	struct tb_breaker_ticket t = ticket_unpack(atomic_load_explicit(&c->ticket,
									memory_order_relaxed));
	int tid = atomic_load_explicit(&c->tid, memory_order_relaxed);
	struct tb_gate *g = NULL;
	int limit = 0;
	int64_t min_rtt = 0;

	if (!lock(e)) {
		/* A handler, above this thread's own update: the outcome is not counted. */
		atomic_store_explicit(&c->ticket, ticket_pack(&(struct tb_breaker_ticket){
							  .period = t.period, .probe = -1 }),
				      memory_order_relaxed);
		if (out != NULL)
			*out = note;
		return;
	}
	if (e->breaker_on)
		note_change(e, tb_breaker_record(&e->st->br, &e->bc, now, &t, failed), now, reason,
			    &note);
	if (e->retry_on && tid > 0 && failed) {
		struct mark *m = mark_of(e, tid, true);

		m->until = tb_at_after(now, e->rc.window_ns < RETRY_MARK_NS ? e->rc.window_ns
									 : RETRY_MARK_NS);
		if (m->until > e->st->marks_until)
			e->st->marks_until = m->until;
	} else if (e->retry_on && tid > 0 && e->st->marks_until > now) {
		/* A success clears its thread's mark. Past marks_until no mark is live (a mark
		 * past its `until` marks nothing), and the eight places are not searched: the
		 * healthy destination's every outcome. */
		struct mark *m = mark_of(e, tid, false);

		if (m != NULL)
			m->until = 0;
	}
	if (e->auto_on && rtt >= 0) {
		g = atomic_load_explicit(&e->gate, memory_order_relaxed);
		if (tb_adaptive_sample(&e->st->ad, &e->ac, now, rtt,
				       g != NULL ? atomic_load(&g->leased) : 0)) {
			limit = tb_adaptive_limit(&e->st->ad);
			atomic_store_explicit(&e->st->limit, limit, memory_order_relaxed);
		}
		atomic_store_explicit(&e->st->rtt, rtt, memory_order_relaxed);
		min_rtt = e->st->ad.min_rtt;
		atomic_store_explicit(&e->st->min_rtt, min_rtt, memory_order_relaxed);
	}
	unlock(e);
	/* The probe's place is the ticket's no more, whatever the breaker made of it. */
	atomic_store_explicit(&c->ticket, ticket_pack(&(struct tb_breaker_ticket){
						  .period = t.period, .probe = -1 }),
			      memory_order_relaxed);
	if (out != NULL)
		*out = note;
	else
		say_change(e, &note);
	if (limit > 0) {
		/* The size as it is now: another thread's newer one may have been stored since. */
		if (g != NULL)
			tb_gates_resize(g, atomic_load_explicit(&e->st->limit, memory_order_relaxed));
		if (e->log_sizes)
			tb_log_adaptive(&e->dest, limit, min_rtt, rtt);
	}
}

/* record_at now. */
static void record(struct entry *e, struct call *c, bool failed, const char *reason,
		   int64_t rtt, struct tb_prot_note *out)
{
	record_at(e, c, failed, reason, rtt, out, tb_now());
}

static bool take_outcome(struct call *c)
{
	unsigned zero = 0;

	return atomic_compare_exchange_strong(&c->outcome, &zero, 1);
}

static const char *fail_reason(enum tb_prot_fail why)
{
	static const char *const names[] = {
		[TB_PROT_REFUSED] = "refused", [TB_PROT_CUT] = "timeout",
		[TB_PROT_RESET] = "reset", [TB_PROT_HTTP] = "http_status",
		[TB_PROT_SLOW] = "slow",
	};

	return (unsigned)why < sizeof(names) / sizeof(names[0]) ? names[why] : "failure";
}

void tb_prot_failed(struct tb_sock *s, enum tb_prot_fail why)
{
	struct entry *e;
	struct call *c = call_of(s, &e);

	if (c != NULL && take_outcome(c))
		record(e, c, true, fail_reason(why), -1, NULL);
}

void tb_prot_cut(struct tb_sock *s, struct tb_prot_note *n)
{
	struct entry *e;
	struct call *c = call_of(s, &e);

	n->entry = NULL;
	if (c != NULL && take_outcome(c))
		record(e, c, true, "timeout", -1, n);
}

void tb_prot_eof(struct tb_sock *s)
{
	struct entry *e;
	struct call *c = call_of(s, &e);

	if (c != NULL && atomic_load_explicit(&c->req_at, memory_order_relaxed) != 0 &&
	    take_outcome(c))
		record(e, c, true, "reset", -1, NULL);
}

void tb_prot_sent(struct tb_sock *s, int64_t now)
{
	struct entry *e;
	struct call *c = call_of(s, &e);

	if (c == NULL)
		return;
	if (atomic_load_explicit(&c->outcome, memory_order_relaxed) != 0) {
		/* The previous call has its outcome: these bytes begin the next one. */
		atomic_store_explicit(&c->req_at, now, memory_order_relaxed);
		atomic_store_explicit(&c->outcome, 0, memory_order_relaxed);
	} else if (atomic_load_explicit(&c->req_at, memory_order_relaxed) == 0) {
		atomic_store_explicit(&c->req_at, now, memory_order_relaxed);
	}
}

void tb_prot_answered(struct tb_sock *s, int64_t now)
{
	struct entry *e;
	struct call *c = call_of(s, &e);
	int64_t at, rtt;

	if (c == NULL || atomic_load_explicit(&c->outcome, memory_order_relaxed) != 0)
		return;
	at = atomic_load_explicit(&c->req_at, memory_order_relaxed);
	if (at == 0)
		return; /* bytes the peer sent first (a greeting): no request to answer yet */
	if (!take_outcome(c))
		return;
	if (now == 0)
		now = tb_now();
	rtt = now - at;
	if (e->slow_ns > 0 && rtt > e->slow_ns)
		record_at(e, c, true, "slow", rtt, NULL, now);
	else
		record_at(e, c, false, NULL, rtt, NULL, now);
}

void tb_prot_http_status(struct tb_sock *s, bool gateway)
{
	struct entry *e;
	struct call *c = call_of(s, &e);
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);

	if (c == NULL || set->breaker_http == TB_BREAKER_HTTP_OFF ||
	    (!gateway && set->breaker_http != TB_BREAKER_HTTP_5XX))
		return;
	if (take_outcome(c))
		record(e, c, true, "http_status", -1, NULL);
}

void tb_prot_closed(struct tb_sock *s)
{
	struct entry *e;
	struct call *c = call_of(s, &e);
	struct tb_breaker_ticket t;

	if (c == NULL)
		return;
	t = ticket_unpack(atomic_load_explicit(&c->ticket, memory_order_relaxed));
	atomic_store_explicit(&c->entry, 0, memory_order_relaxed);
	if (t.probe >= 0 && atomic_load_explicit(&c->outcome, memory_order_relaxed) == 0) {
		if (lock(e)) { /* or the probe's place times out as a dead probe's does */
			tb_breaker_forget(&e->st->br, &t);
			unlock(e);
		}
	}
}

void tb_prot_each(void (*fn)(void *ctx, const struct tb_dest *d,
			     const struct tb_prot_counts *c), void *ctx)
{
	unsigned n = atomic_load_explicit(&made_count, memory_order_acquire);

	for (unsigned i = 0; i < n; i++) {
		struct entry *e = atomic_load_explicit(&made[i], memory_order_relaxed);
		struct tb_prot_counts c;

		c.breaker_state = atomic_load_explicit(&e->st->state, memory_order_relaxed);
		c.breaker_opened = atomic_load_explicit(&e->st->opened, memory_order_relaxed);
		c.breaker_refused = atomic_load_explicit(&e->st->refused, memory_order_relaxed);
		c.retries = atomic_load_explicit(&e->st->retries, memory_order_relaxed);
		c.retry_refused = atomic_load_explicit(&e->st->retry_refused, memory_order_relaxed);
		c.auto_limit = atomic_load_explicit(&e->st->limit, memory_order_relaxed);
		c.min_rtt_ns = atomic_load_explicit(&e->st->min_rtt, memory_order_relaxed);
		c.rtt_ns = atomic_load_explicit(&e->st->rtt, memory_order_relaxed);
		fn(ctx, &e->dest, &c);
	}
}

void tb_prot_fork_child(void)
{
	held = 0; /* a fork from a handler above a locked update: the locks are new below */
	pthread_mutex_init(&insert_lock, NULL);
	pthread_mutex_init(&shared_lock, NULL);
	for (unsigned i = 0, n = atomic_load(&made_count); i < n; i++) {
		struct entry *e = atomic_load_explicit(&made[i], memory_order_relaxed);

		if (e->st == &e->own)
			atomic_store(&e->own_lock, 0);
	}
	/* A shared page stays shared (its mutex is robust, and the parent's threads that may
	 * hold it are not gone). The child takes a use lock of its own, so that neither's exit
	 * removes a file the other still uses. */
	for (struct entry *e = shared_entries; e != NULL; e = e->next_shared) {
		int fd = tb_gate_file_reopen(e->fd);

		if (fd >= 0) {
			tb_gate_file_close(e->fd);
			e->fd = fd;
		}
	}
}
