/* sock.c - governed socket state: the pool and the waits (the act of expiring is in
 * sock_expire.c). Lock-free and allocation-free except pool growth (in connect). */
#include "sock.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "clock.h"
#include "fdtable.h"
#include "gates.h"
#include "real.h"
#include "reqtag.h"
#include "thread.h"

#define CHUNK 512 /* 184-byte entries: 23 pages */
_Static_assert(CHUNK % 32 == 0 && TB_FRAME_CHUNK % 32 == 0, "chunks hand out whole batches");
#define MAX_CHUNKS 2048 /* 1M sockets */

atomic_ulong tb_expiries[TB_PHASE_COUNT];
atomic_ulong tb_sock_retired;

static struct tb_sock *chunks[MAX_CHUNKS];
static struct tb_sock_rare *rare_chunks[MAX_CHUNKS]; /* chunk n's rare records */
static atomic_uint nchunks;
static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
/* Free list: a Treiber stack of (index + 1) in the low half, an ABA tag in the high half. */
static _Atomic uint64_t free_head;

static struct tb_sock *at_index(uint32_t i)
{
	return &chunks[i / CHUNK][i % CHUNK];
}

/* A published chunk's rare records are stored before nchunks (release in grow), and an
 * entry is only reached through its chunk: plain reads suffice. */
struct tb_sock_rare *tb_sock_rare(const struct tb_sock *s)
{
	return &rare_chunks[s->index / CHUNK][s->index % CHUNK];
}

/*
 * The entries whose rare record was written since tb_sock_new last cleared it, one bit
 * each: tb_sock_new looks at these bits, never at a record. Reading a record to see
 * whether it holds anything backed its page on a kernel that maps no shared zero page for
 * a read of anonymous memory: every rare page of every chunk was backed, 72 bytes more
 * per socket (make bench: 328 bytes per idle governed socket instead of 253). 128 KiB of
 * bits for the whole pool, a page of them backed per 32,768 entries.
 */
static atomic_ulong rare_marks[MAX_CHUNKS * CHUNK / 64];

struct tb_sock_rare *tb_sock_rare_mut(const struct tb_sock *s)
{
	atomic_ulong *m = &rare_marks[s->index / 64];
	unsigned long bit = 1UL << (s->index % 64);

	if (!(atomic_load_explicit(m, memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(m, bit, memory_order_relaxed);
	return tb_sock_rare(s);
}

static void push_free(struct tb_sock *s)
{
	uint64_t old = atomic_load(&free_head), nw;

	do {
		atomic_store_explicit(&s->free_next, (uint32_t)old, memory_order_relaxed);
		nw = ((old >> 32) + 1) << 32 | (s->index + 1);
	} while (!atomic_compare_exchange_weak(&free_head, &old, nw));
}

static struct tb_sock *pop_free(void)
{
	uint64_t old = atomic_load(&free_head), nw;
	struct tb_sock *s;

	do {
		if ((uint32_t)old == 0)
			return NULL;
		s = at_index((uint32_t)old - 1);
		nw = ((old >> 32) + 1) << 32 |
		     atomic_load_explicit(&s->free_next, memory_order_relaxed);
	} while (!atomic_compare_exchange_weak(&free_head, &old, nw));
	return s;
}

/*
 * Entries go to the free list POOL_BATCH at a time, as the pool runs out: pushing one
 * writes it, and a chunk pushed whole at its mapping backed all of its 23 pages for a
 * program's first socket (and 9 for the framings'). One or two pages at a time, a process
 * pays for the entries it has used: 10,000 idle sockets, each after one raw exchange, grew
 * RSS by 72 KiB less (regress/pool_pages_backed). Under grow_lock: the entries of the last
 * chunk handed out so far.
 */
#define POOL_BATCH 32
static unsigned chunk_used = CHUNK, frame_chunk_used = TB_FRAME_CHUNK;

static int grow(void)
{
	unsigned n;
	struct tb_sock *c;
	struct tb_sock_rare *r;
	int rc = -1;

	pthread_mutex_lock(&grow_lock);
	if ((uint32_t)atomic_load(&free_head) != 0) {
		rc = 0; /* another thread grew it meanwhile */
		goto out;
	}
	n = atomic_load(&nchunks);
	if (chunk_used == CHUNK) {
		if (n >= MAX_CHUNKS)
			goto out;
		c = mmap(NULL, CHUNK * sizeof(*c), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c == MAP_FAILED)
			goto out;
		/* MAP_NORESERVE: the rare records' pages are backed only for the sockets that
		 * use them. */
		r = mmap(NULL, CHUNK * sizeof(*r), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r == MAP_FAILED) {
			munmap(c, CHUNK * sizeof(*c));
			goto out;
		}
		chunks[n] = c;
		rare_chunks[n] = r;
		atomic_store(&nchunks, ++n);
		chunk_used = 0;
	}
	c = chunks[n - 1];
	/* Highest first: the lowest index is popped first (stats time the first CALLS_MAX). */
	for (unsigned i = chunk_used + POOL_BATCH; i-- > chunk_used;) {
		c[i].index = (n - 1) * CHUNK + i;
		atomic_init(&c[i].fd, -1);
		push_free(&c[i]);
	}
	chunk_used += POOL_BATCH;
	rc = 0;
out:
	pthread_mutex_unlock(&grow_lock);
	return rc;
}

/*
 * The framings (rule 11) have a pool of their own, never unmapped either: a socket takes one
 * at its connect unless its protocol is forced raw, and gives it back as soon as framing is
 * over for it (RAW), so that a raw connection keeps only a 0 index. Same free list as
 * the sockets'; an entry is the framing, the free list's link and its own index.
 */
struct tb_frame_entry *tb_frame_chunks[TB_FRAME_MAX_CHUNKS];
static atomic_uint frame_nchunks;
static _Atomic uint64_t frame_free_head;

static struct tb_frame_entry *frame_at(uint32_t i)
{
	return &tb_frame_chunks[i / TB_FRAME_CHUNK][i % TB_FRAME_CHUNK];
}

static void frame_push(struct tb_frame_entry *e)
{
	uint64_t old = atomic_load(&frame_free_head), nw;

	do {
		atomic_store_explicit(&e->free_next, (uint32_t)old, memory_order_relaxed);
		nw = ((old >> 32) + 1) << 32 | (e->index + 1);
	} while (!atomic_compare_exchange_weak(&frame_free_head, &old, nw));
}

static struct tb_frame_entry *frame_pop(void)
{
	uint64_t old = atomic_load(&frame_free_head), nw;
	struct tb_frame_entry *e;

	do {
		if ((uint32_t)old == 0)
			return NULL;
		e = frame_at((uint32_t)old - 1);
		nw = ((old >> 32) + 1) << 32 |
		     atomic_load_explicit(&e->free_next, memory_order_relaxed);
	} while (!atomic_compare_exchange_weak(&frame_free_head, &old, nw));
	return e;
}

static int frame_grow(void)
{
	unsigned n;
	struct tb_frame_entry *c;
	int rc = -1;

	pthread_mutex_lock(&grow_lock);
	if ((uint32_t)atomic_load(&frame_free_head) != 0) {
		rc = 0; /* another thread grew it meanwhile */
		goto out;
	}
	n = atomic_load(&frame_nchunks);
	if (frame_chunk_used == TB_FRAME_CHUNK) {
		if (n >= TB_FRAME_MAX_CHUNKS)
			goto out;
		c = mmap(NULL, TB_FRAME_CHUNK * sizeof(*c), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c == MAP_FAILED)
			goto out;
		tb_frame_chunks[n] = c;
		atomic_store(&frame_nchunks, ++n);
		frame_chunk_used = 0;
	}
	c = tb_frame_chunks[n - 1];
	for (unsigned i = frame_chunk_used + POOL_BATCH; i-- > frame_chunk_used;) {
		c[i].index = (n - 1) * TB_FRAME_CHUNK + i;
		frame_push(&c[i]);
	}
	frame_chunk_used += POOL_BATCH;
	rc = 0;
out:
	pthread_mutex_unlock(&grow_lock);
	return rc;
}

/* A framing for a new connection speaking `proto`: its index + 1 (struct tb_sock's frame);
 * 0 when memory is exhausted (the connection then goes ungoverned, as without a socket). */
static uint32_t frame_take(enum tb_proto proto)
{
	struct tb_frame_entry *e;

	while ((e = frame_pop()) == NULL)
		if (frame_grow() < 0)
			return 0;
	tb_frame_init(&e->f, proto);
	return e->index + 1;
}


void tb_sock_frame_over(struct tb_sock *s)
{
	uint32_t i = s->frame;

	if (i == 0)
		return;
	s->frame = 0;
	frame_push(frame_at(i - 1));
}

static void side_reset(struct tb_side_state *sd)
{
	atomic_store_explicit(&sd->waiters, 0, memory_order_relaxed);
	atomic_store_explicit(&sd->idle_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&sd->wait_begin, 0, memory_order_relaxed);
	atomic_store_explicit(&sd->expiry, TB_NEVER, memory_order_relaxed);
}

/*
 * What a new socket must not inherit from the entry's earlier one (rule 13): a request
 * deadline that a call deadline of its own could match, the watchdog's last looks. Only a
 * record that was written (its mark) is touched. The gate and its slot fd need nothing:
 * they are read only while has_slot.
 */
static void rare_reset(const struct tb_sock *s)
{
	atomic_ulong *m = &rare_marks[s->index / 64];
	unsigned long bit = 1UL << (s->index % 64);
	struct tb_sock_rare *r;

	if (!(atomic_load_explicit(m, memory_order_relaxed) & bit))
		return;
	atomic_fetch_and_explicit(m, ~bit, memory_order_relaxed);
	r = tb_sock_rare(s);
	atomic_store_explicit(&r->req_deadline, 0, memory_order_relaxed);
	atomic_store_explicit(&r->wr_seen_at, 0, memory_order_relaxed);
	atomic_store_explicit(&r->rd_acked_at, 0, memory_order_relaxed);
	atomic_store_explicit(&r->wr_seen, 0, memory_order_relaxed);
}

struct tb_sock *tb_sock_new(int fd, const struct tb_settings *set, const struct tb_dest *d,
			    uint64_t ino, bool nonblock, int64_t now)
{
	struct tb_sock *s;
	uint32_t gen, frame = 0;

	while ((s = pop_free()) == NULL)
		if (grow() < 0)
			return NULL;
	/* No framing, no governing: raw rules on a framed protocol would cut a keep-alive
	 * connection's idle wait, which its framing lets be (regress/frame_pool_oom). */
	if (set->protocol != TB_PROTO_RAW &&
	    (frame = frame_take((enum tb_proto)set->protocol)) == 0) {
		push_free(s);
		return NULL;
	}
	gen = TB_ST_GEN(atomic_load(&s->state)) + 1;
	atomic_store_explicit(&s->refs, 1, memory_order_relaxed);
	atomic_store_explicit(&s->fd, fd, memory_order_relaxed);
	atomic_store_explicit(&s->nonblock, nonblock, memory_order_relaxed);
	atomic_store_explicit(&s->got_bytes, false, memory_order_relaxed);
	atomic_store_explicit(&s->delivered, false, memory_order_relaxed);
	atomic_store_explicit(&s->log_pending, 0, memory_order_relaxed);
	atomic_store_explicit(&s->ino, ino, memory_order_relaxed);
	atomic_store_explicit(&s->set, set, memory_order_relaxed);
	s->dest = *d;
	atomic_store_explicit(&s->connect_start, now, memory_order_relaxed);
	atomic_store_explicit(&s->call_start, now, memory_order_relaxed);
	atomic_store_explicit(&s->call_deadline, TB_NEVER, memory_order_relaxed);
	rare_reset(s);
	side_reset(&s->side[TB_RD]);
	side_reset(&s->side[TB_WR]);
	atomic_store_explicit(&s->has_slot, false, memory_order_relaxed);
	s->frame = frame;
	atomic_store_explicit(&s->frame_flag, 0, memory_order_relaxed);
	atomic_store_explicit(&s->frame_state,
			      (unsigned char)(s->frame != 0 ? tb_frame_state(tb_sock_framing(s))
							    : TB_FRAME_RAW),
			      memory_order_relaxed);
	atomic_store(&s->state, gen << 8 | TB_ST_CONNECTING);
	return s;
}

void tb_sock_ref(struct tb_sock *s)
{
	atomic_fetch_add(&s->refs, 1);
}

bool tb_sock_ref_live(struct tb_sock *s)
{
	unsigned n;

	if (!tb_sock_enter(s, TB_ST_GEN(tb_sock_word(s))))
		return false;
	n = atomic_load(&s->refs);
	/* From a count above 0 only: 0 is a last close under way, which frees it. */
	while (n != 0 && !atomic_compare_exchange_weak(&s->refs, &n, n + 1))
		;
	tb_sock_leave(s);
	return n != 0;
}

void tb_sock_hold_slot(struct tb_sock *s, struct tb_gate *g, int slot_fd)
{
	struct tb_sock_rare *r = tb_sock_rare(s);

	atomic_store_explicit(&r->gate, g, memory_order_relaxed);
	r->slot_fd = slot_fd;
	atomic_store(&s->has_slot, true);
}

void tb_sock_release_slot(struct tb_sock *s)
{
	struct tb_sock_rare *r = tb_sock_rare(s);
	struct tb_gate *g;

	if (!atomic_load(&s->has_slot))
		return;
	/* In hand from before has_slot falls until the release closed it: a fork child must
	 * not keep a shared gate's slot no socket of its own holds (gates.h). */
	g = atomic_load_explicit(&r->gate, memory_order_relaxed);
	tb_gates_in_hand(g, 1);
	if (atomic_exchange(&s->has_slot, false))
		tb_gates_release(g, r->slot_fd);
	tb_gates_in_hand(g, -1);
}

/*
 * After the generation moved on: waits until no call is inside a section on s (rule 12).
 * Sections are a few hundred instructions; 20 ms covers a preempted one on a loaded
 * machine. False: one never ended (siglongjmp out of it, or we are a signal handler that
 * interrupted it): the entry must not be reused.
 */
static bool drained(struct tb_sock *s)
{
	int64_t until = 0;

	while (atomic_load(&s->inuse) != 0) {
		int64_t now = tb_now();

		if (until == 0)
			until = now + 20 * 1000000LL;
		else if (now > until)
			return false;
		sched_yield();
	}
	return true;
}

void tb_sock_unref(struct tb_sock *s)
{
	uint32_t w;

	/* The watchdog may be between its identity check and shutdown() on this fd: the fd
	 * number must not be released (and reused) until it is done. Microseconds at most. */
	tb_sock_quiesce(s);
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	tb_sock_await_log(s); /* a program may close a cut socket and exit at once */
	tb_sock_release_slot(s);
	/* A new generation at once: a thread still blocked on a number that was closed
	 * under it (or a stale slot) must not touch the free entry when its call returns. */
	w = atomic_load(&s->state);
	atomic_store(&s->state, (TB_ST_GEN(w) + 1) << 8 | TB_ST_FREE);
	if (!drained(s)) {
		atomic_fetch_add(&tb_sock_retired, 1);
		return;
	}
	side_reset(&s->side[TB_RD]);
	side_reset(&s->side[TB_WR]);
	tb_sock_frame_over(s); /* no section is left to feed it (drained) */
	push_free(s);
}

void tb_sock_set_open(struct tb_sock *s)
{
	uint32_t w = atomic_load(&s->state);

	if (TB_ST(w) == TB_ST_CONNECTING)
		atomic_compare_exchange_strong(&s->state, &w, (w & ~0xfu) | TB_ST_OPEN);
}

void tb_sock_set_call(struct tb_sock *s, int64_t start, int64_t deadline)
{
	atomic_store_explicit(&s->call_start, start, memory_order_relaxed);
	atomic_store_explicit(&s->call_deadline, deadline, memory_order_relaxed);
}

void tb_sock_set_request(struct tb_sock *s, int64_t deadline, const struct tb_req_tag *tag)
{
	struct tb_sock_rare *r = tb_sock_rare_mut(s);
	uint64_t w[2];

	_Static_assert(sizeof(*tag) == sizeof(w), "a tag is two words");
	memcpy(w, tag, sizeof(w));
	atomic_store_explicit(&r->req_tag[0], w[0], memory_order_relaxed);
	atomic_store_explicit(&r->req_tag[1], w[1], memory_order_relaxed);
	atomic_store_explicit(&r->req_deadline, deadline, memory_order_relaxed);
	atomic_store_explicit(&s->call_deadline, deadline, memory_order_relaxed);
}

/* A call deadline equal to the recorded request deadline is the request's: a call's own
 * deadline is another instant (ns apart at least), so a stale record never matches; 0 (none
 * recorded) is no deadline's instant. */
bool tb_sock_request_tag(struct tb_sock *s, struct tb_req_tag *tag)
{
	struct tb_sock_rare *r = tb_sock_rare(s);
	uint64_t w[2];
	int64_t d = atomic_load_explicit(&s->call_deadline, memory_order_relaxed);

	if (d == TB_NEVER || d == 0 ||
	    atomic_load_explicit(&r->req_deadline, memory_order_relaxed) != d)
		return false;
	w[0] = atomic_load_explicit(&r->req_tag[0], memory_order_relaxed);
	w[1] = atomic_load_explicit(&r->req_tag[1], memory_order_relaxed);
	memcpy(tag, w, sizeof(*tag));
	return true;
}

void tb_sock_connect_begins(struct tb_sock *s, int64_t now)
{
	atomic_store_explicit(&s->connect_start, now, memory_order_relaxed);
}

static void restart_silence(struct tb_side_state *sd, int64_t now)
	__attribute__((noinline, cold));

static struct tb_idle load_idle(struct tb_side_state *sd)
{
	struct tb_idle c = {
		atomic_load_explicit(&sd->idle_ns, memory_order_relaxed),
		atomic_load_explicit(&sd->wait_begin, memory_order_relaxed),
	};
	return c;
}

/*
 * The framing's state decides which phases run (docs/design.md, "Calls as the protocol sees
 * them"): a RESTING connection has nothing outstanding, so a wait to read it has no limit at
 * all; a SESSION has no deadline, and a read limit only when the settings force
 * protocol = session (read_timeout is then its inactivity limit); AWAITING takes first_byte
 * or read from whether the answer began; ANSWERED, RAW and UNKNOWN follow the system-call
 * rules (got_bytes: any byte received since the last send).
 */
static struct tb_expiry framed_expiry(struct tb_sock *s, enum tb_side side, unsigned fs)
	__attribute__((noinline));

struct tb_expiry tb_sock_expiry(struct tb_sock *s, enum tb_side side)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	int64_t deadline = atomic_load_explicit(&s->call_deadline, memory_order_relaxed);
	unsigned fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed);
	struct tb_idle c;
	enum tb_phase phase;
	int64_t at;

	if (__builtin_expect((fs & TB_FS_STATE) > TB_FRAME_RAW, 0))
		return framed_expiry(s, side, fs);
	c = load_idle(&s->side[side]);
	if (TB_ST(tb_sock_word(s)) == TB_ST_CONNECTING) {
		int64_t start = atomic_load_explicit(&s->connect_start, memory_order_relaxed);

		phase = TB_PHASE_CONNECT;
		at = set->connect_ns > 0 ? tb_at_after(start, set->connect_ns) : TB_NEVER;
	} else {
		if (side == TB_WR)
			phase = TB_PHASE_WRITE;
		else if (atomic_load_explicit(&s->got_bytes, memory_order_relaxed))
			phase = TB_PHASE_READ;
		else
			phase = TB_PHASE_FIRST_BYTE;
		at = tb_idle_expiry(&c, tb_settings_phase_limit(set, phase));
	}
	return tb_expiry_pick(phase, at, deadline);
}

/*
 * tb_sock_expiry on a framed socket: the framing's state decides which phases run
 * (docs/design.md, "Calls as the protocol sees them"). RESTING has nothing outstanding, so a
 * wait to read it has no limit at all; a SESSION has no deadline, and a read limit only when
 * the settings force protocol = session (read_timeout is then its inactivity limit);
 * AWAITING takes first_byte or read from whether the answer began; ANSWERED is read.
 */
static struct tb_expiry framed_expiry(struct tb_sock *s, enum tb_side side, unsigned fs)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	int64_t deadline = atomic_load_explicit(&s->call_deadline, memory_order_relaxed);
	struct tb_idle c = load_idle(&s->side[side]);
	enum tb_phase phase;
	int64_t at;

	if ((fs & TB_FS_STATE) == TB_FRAME_SESSION)
		deadline = TB_NEVER;
	if (TB_ST(tb_sock_word(s)) == TB_ST_CONNECTING) {
		int64_t start = atomic_load_explicit(&s->connect_start, memory_order_relaxed);

		phase = TB_PHASE_CONNECT;
		at = set->connect_ns > 0 ? tb_at_after(start, set->connect_ns) : TB_NEVER;
		return tb_expiry_pick(phase, at, deadline);
	}
	if (side == TB_WR) {
		phase = TB_PHASE_WRITE;
		at = tb_idle_expiry(&c, tb_settings_phase_limit(set, phase));
		return tb_expiry_pick(phase, at, deadline);
	}
	switch (fs & TB_FS_STATE) {
	case TB_FRAME_RESTING:
		return tb_expiry_pick(TB_PHASE_READ, TB_NEVER, TB_NEVER);
	case TB_FRAME_SESSION:
		at = set->protocol == TB_PROTO_SESSION ? tb_idle_expiry(&c, set->read_ns)
						       : TB_NEVER;
		return tb_expiry_pick(TB_PHASE_READ, at, TB_NEVER);
	default:
		break;
	}
	phase = (fs & TB_FS_STATE) == TB_FRAME_ANSWERED || (fs & TB_FS_BEGUN) ? TB_PHASE_READ
										: TB_PHASE_FIRST_BYTE;
	at = tb_idle_expiry(&c, tb_settings_phase_limit(set, phase));
	return tb_expiry_pick(phase, at, deadline);
}

/*
 * The first wait of a fresh silence (no other waiter, nothing idle counted) on an open
 * socket expires no earlier than its side's shortest phase limit after `now`
 * (settings.h, wait_floor_ns) or its call's deadline, whatever the phase and the framing
 * decide: that bound, or 0 when the wait is not such a wait. When the watchdog is filed
 * to look at the socket by then, the wait needs nothing more: the watchdog recomputes
 * every expiry it finds due before acting (rule 6), and files the socket again for the
 * true one. A busy keep-alive socket stays filed (the watchdog lingers on it), so its
 * waits skip the expiry's computation and the watchdog's check (make bench: the raw
 * exchange's instructions).
 */
static inline int64_t fresh_bound(struct tb_sock *s, struct tb_side_state *sd,
				  enum tb_side side, int64_t now)
{
	const struct tb_settings *set = atomic_load_explicit(&s->set, memory_order_relaxed);
	int64_t at, deadline;

	if (atomic_load_explicit(&sd->idle_ns, memory_order_relaxed) != 0 ||
	    TB_ST(tb_sock_word(s)) != TB_ST_OPEN)
		return 0;
	at = tb_at_after(now, set->wait_floor_ns[side]);
	deadline = atomic_load_explicit(&s->call_deadline, memory_order_relaxed);
	if (deadline < at)
		at = deadline;
	return at > now ? at : 0;
}

/* tb_sock_wait_record of a wait that has no bound, or whose bound the watchdog does not
 * look at in time (`counted`: the wait is counted already): the true expiry. */
static __attribute__((noinline)) struct tb_expiry wait_record_exact(struct tb_sock *s,
								   enum tb_side side, int fd,
								   bool counted)
{
	struct tb_side_state *sd = &s->side[side];
	struct tb_expiry e = tb_sock_expiry(s, side);

	atomic_store_explicit(&sd->expiry, e.at, memory_order_relaxed);
	if (counted)
		return e;
	atomic_store_explicit(&s->fd, fd, memory_order_relaxed);
	atomic_store_explicit(&sd->waiter_tid, tb_tid(), memory_order_relaxed);
	/* seq_cst: pairs with the watchdog clearing wd_filed_at then re-reading waiters. */
	atomic_fetch_add(&sd->waiters, 1);
	return e;
}

/* Inlined into each caller with link-time optimisation, as tb_xfer_begin. */
__attribute__((always_inline)) inline struct tb_expiry
tb_sock_wait_record(struct tb_sock *s, enum tb_side side, int fd, int64_t now, bool *watched)
{
	struct tb_side_state *sd = &s->side[side];
	struct tb_expiry e;
	int64_t bound, filed;

	*watched = false;
	if (atomic_load_explicit(&sd->waiters, memory_order_relaxed) != 0)
		return wait_record_exact(s, side, fd, false);
	atomic_store_explicit(&sd->wait_begin, now, memory_order_relaxed);
	bound = fresh_bound(s, sd, side, now);
	if (bound == 0)
		return wait_record_exact(s, side, fd, false);
	atomic_store_explicit(&sd->expiry, bound, memory_order_relaxed);
	atomic_store_explicit(&s->fd, fd, memory_order_relaxed);
	atomic_store_explicit(&sd->waiter_tid, tb_tid(), memory_order_relaxed);
	/* seq_cst, then wd_filed_at: rule 5. */
	atomic_fetch_add(&sd->waiters, 1);
	filed = atomic_load(&s->wd_filed_at);
	if (__builtin_expect(filed == 0 || filed > bound, 0))
		return wait_record_exact(s, side, fd, true); /* for the watchdog to be told */
	*watched = true;
	e.at = bound;
	e.phase = TB_PHASE_DEADLINE; /* not due: no phase is reported */
	return e;
}

void tb_sock_wait_end(struct tb_sock *s, enum tb_side side, int64_t now, bool progress,
		      uint32_t gen)
{
	struct tb_side_state *sd = &s->side[side];

	if (TB_ST_GEN(tb_sock_word(s)) != gen)
		return;
	if (atomic_fetch_sub(&sd->waiters, 1) != 1) {
		/* Others still wait on this side: bytes moved restart their silence too. */
		if (progress)
			restart_silence(sd, now);
		return;
	}
	if (progress) {
		atomic_store_explicit(&sd->idle_ns, 0, memory_order_relaxed);
	} else {
		struct tb_idle c = load_idle(sd);

		tb_idle_wait_end(&c, now);
		atomic_store_explicit(&sd->idle_ns, c.idle_ns, memory_order_relaxed);
	}
}

/* Bytes moved on sd while other threads wait on it: their silence starts again at `now`
 * (0: read the clock). Rare - two threads waiting on one side of one socket - so kept out
 * of line, off the transfer's path. */
static __attribute__((noinline, cold)) void restart_silence(struct tb_side_state *sd,
							    int64_t now)
{
	atomic_store_explicit(&sd->idle_ns, 0, memory_order_relaxed);
	atomic_store_explicit(&sd->wait_begin, now != 0 ? now : tb_now(), memory_order_relaxed);
}

/* The silence of sd is over: the threads still waiting on it count again from now. */
static void progress_on(struct tb_side_state *sd)
{
	if (atomic_load_explicit(&sd->waiters, memory_order_relaxed) != 0)
		restart_silence(sd, 0);
	else
		atomic_store_explicit(&sd->idle_ns, 0, memory_order_relaxed);
}

/* tb_sock_progress while a thread waits on an affected side: out of line, so that the
 * healthy case below needs no stack frame (measured: 13 instructions per transfer). */
static __attribute__((noinline, cold)) void progress_while_waited(struct tb_sock *s,
								   enum tb_side side)
{
	progress_on(&s->side[TB_RD]);
	if (side == TB_WR)
		progress_on(&s->side[TB_WR]);
	atomic_store_explicit(&s->got_bytes, side == TB_RD, memory_order_relaxed);
}

void tb_sock_moved(struct tb_sock *s, enum tb_side side, bool waited, uint32_t gen)
{
	uint32_t w = tb_sock_word(s);

	/* The transfer's own wait ends first (tb_sock_wait_end with progress): unless the
	 * socket was closed under it, or the wait was ended for it. */
	if (waited && TB_ST_GEN(w) == gen)
		atomic_fetch_sub(&s->side[side].waiters, 1);
	/* Another thread waiting on a side this progress ends: its silence restarts too. */
	if (__builtin_expect((atomic_load_explicit(&s->side[TB_RD].waiters,
						   memory_order_relaxed) |
			      (side == TB_WR ? atomic_load_explicit(&s->side[TB_WR].waiters,
								    memory_order_relaxed)
					     : 0)) != 0,
			     0)) {
		progress_while_waited(s, side);
	} else if (side == TB_RD) {
		atomic_store_explicit(&s->side[TB_RD].idle_ns, 0, memory_order_relaxed);
		if (!atomic_load_explicit(&s->got_bytes, memory_order_relaxed))
			atomic_store_explicit(&s->got_bytes, true, memory_order_relaxed);
	} else {
		/* A request went out: the read side now waits for its first byte, from here. */
		atomic_store_explicit(&s->side[TB_WR].idle_ns, 0, memory_order_relaxed);
		atomic_store_explicit(&s->side[TB_RD].idle_ns, 0, memory_order_relaxed);
		if (atomic_load_explicit(&s->got_bytes, memory_order_relaxed))
			atomic_store_explicit(&s->got_bytes, false, memory_order_relaxed);
	}
	if (__builtin_expect(TB_ST(w) == TB_ST_CONNECTING, 0))
		tb_sock_set_open(s);
}

void tb_sock_slot_fd_moved(int from, int to)
{
	unsigned n = atomic_load(&nchunks);

	for (unsigned c = 0; c < n; c++)
		for (unsigned i = 0; i < CHUNK; i++)
			if (atomic_load(&chunks[c][i].has_slot) &&
			    tb_sock_rare(&chunks[c][i])->slot_fd == from)
				tb_sock_rare(&chunks[c][i])->slot_fd = to;
	tb_fd_unmark_internal(from);
	tb_fd_mark_internal(to);
}

void tb_sock_fork_child(void)
{
	/* The thread that held it (growing the pool) does not exist in the child. */
	pthread_mutex_init(&grow_lock, NULL);
}

/* True when an fd of this process names s: its fd hint, else any number of the table (a
 * socket dup'ed and its first number closed). A fork child's only. */
static bool named_by_fd(struct tb_sock *s)
{
	int hw = atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed);

	if (tb_fd_sock(atomic_load_explicit(&s->fd, memory_order_relaxed)) == s)
		return true;
	for (int fd = 0; fd <= hw; fd++)
		if (tb_fd_sock(fd) == s)
			return true;
	return false;
}

/* A socket holds its slot in the child only while an fd names it. One whose last close was
 * under way at the fork (its fd taken from the table, the slot not yet given back) is not
 * counted, and gives nothing back: in another thread, nobody is left in the child to give
 * it back (regress/gate_fork_closing); in the forking thread - a handler that interrupted
 * its close - the close goes on in the child, and must not give back a slot the child's
 * gate never counted (regress/gate_fork_in_close_handler). No other thread runs here. */
static void count_slot(struct tb_sock *s)
{
	struct tb_sock_rare *r;

	if (!atomic_load_explicit(&s->has_slot, memory_order_relaxed))
		return;
	if (!named_by_fd(s)) {
		atomic_store_explicit(&s->has_slot, false, memory_order_relaxed);
		return;
	}
	r = tb_sock_rare(s);
	tb_gates_fork_held(atomic_load_explicit(&r->gate, memory_order_relaxed), r->slot_fd);
}

void tb_sock_slots_fork_child(void)
{
	tb_sock_foreach(count_slot);
}

void tb_sock_foreach(void (*fn)(struct tb_sock *s))
{
	unsigned n = atomic_load(&nchunks);

	/* The entries handed out: those past chunk_used in the last chunk were never touched,
	 * and a fork child that visits them faults each of their pages in (23 per chunk). */
	for (unsigned c = 0; c < n; c++)
		for (unsigned i = 0, end = c + 1 == n ? chunk_used : CHUNK; i < end; i++)
			fn(&chunks[c][i]);
}
