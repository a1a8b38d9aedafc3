/* epoll_set.c - the interest sets of epoll instances, governed sockets only: an open
 * addressing map per instance behind a table indexed by epoll fd (epoll_set.h: the rules). */
#include "epoll_set.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>

#define EMPTY (-1)
#define TOMB (-2)
#define CAP_MIN 8u

_Atomic(struct tb_epset *) *tb_eptab;
atomic_int tb_ep_cap;
static atomic_int ep_hiwater = -1; /* highest epoll fd with an instance, ever */

/* Recycled instances (rule 3), and their lock; held for a few loads and stores. */
static struct tb_epset *free_list;
static atomic_flag free_lock = ATOMIC_FLAG_INIT;

/*
 * References and locks this thread holds, a signal handler's included (rule 5). Counted
 * before a reference or lock is taken and uncounted after it is given back: a fork from a
 * handler in between finds this thread counted, and the child then trusts nothing it could
 * not tell from its own (tb_epset_fork_child). Static TLS, which a dlopen of the library
 * gets only from glibc's spare: see TB_WAITS_MAX (waits.h).
 */
static __thread unsigned held __attribute__((tls_model("initial-exec")));

/* A lock counts this much in `held`, a reference 1: tb_epset_forget_fd tells them apart. */
#define HELD_LOCK 0x10000u

static void hold_n(unsigned n)
{
	held += n;
	atomic_signal_fence(memory_order_seq_cst);
}

static void unhold_n(unsigned n)
{
	atomic_signal_fence(memory_order_seq_cst);
	held -= n;
}

static void hold(void)
{
	hold_n(1);
}

static void unhold(void)
{
	unhold_n(1);
}

static void spin_lock(atomic_flag *l)
{
	hold_n(HELD_LOCK);
	while (atomic_flag_test_and_set_explicit(l, memory_order_acquire))
		sched_yield();
}

static void spin_unlock(atomic_flag *l)
{
	atomic_flag_clear_explicit(l, memory_order_release);
	unhold_n(HELD_LOCK);
}

int tb_epset_init(int cap)
{
	_Atomic(struct tb_epset *) *t;

	if (atomic_load_explicit(&tb_eptab, memory_order_acquire) != NULL)
		return 0;
	if (cap <= 0)
		return -1;
	/* calloc of this size is an anonymous mapping: pages are touched only for the epoll
	 * fds a program really has. */
	t = calloc((size_t)cap, sizeof(*t));
	if (t == NULL)
		return -1;
	spin_lock(&free_lock);
	if (atomic_load(&tb_eptab) == NULL) {
		atomic_store(&tb_ep_cap, cap);
		atomic_store_explicit(&tb_eptab, t, memory_order_release);
		t = NULL;
	}
	spin_unlock(&free_lock);
	free(t);
	return 0;
}

static struct tb_epset_arr *arr_new(uint32_t cap)
{
	struct tb_epset_arr *a = calloc(1, sizeof(*a) + cap * sizeof(a->e[0]));

	if (a == NULL)
		return NULL;
	atomic_store_explicit(&a->cap, cap, memory_order_relaxed); /* published by arr's store */
	for (uint32_t i = 0; i < cap; i++)
		atomic_store_explicit(&a->e[i].fd, EMPTY, memory_order_relaxed);
	return a;
}

/*
 * An instance with `refs` references, fresh or recycled. The count is stored once, last,
 * and only ever changed by atomic read-modify-writes after that: a reader holding a stale
 * pointer (rule 3) may take a reference on a recycled instance as soon as its count is not
 * 0, and a later plain store (as recycling did: 1, then 2) would overwrite that increment,
 * the count reaching 0 while the table and a caller still held the instance
 * (test_recycled_instance_keeps_a_racing_reference).
 */
static struct tb_epset *set_new(unsigned refs)
{
	struct tb_epset *s;

	spin_lock(&free_lock);
	s = free_list;
	if (s != NULL)
		free_list = s->free_next;
	spin_unlock(&free_lock);
	if (s == NULL) {
		s = calloc(1, sizeof(*s));
		if (s == NULL)
			return NULL;
		atomic_flag_clear(&s->lock);
	}
	s->used = 0;
	atomic_store(&s->retired, NULL);
	atomic_store(&s->scanners, 0);
	s->free_next = NULL;
	atomic_store(&s->live, 0);
	atomic_store(&s->oneshots, 0);
	atomic_store(&s->settled_until, 0);
	atomic_store(&s->busy, false);
	atomic_store(&s->arr, NULL);
	atomic_store(&s->refs, refs);
	return s;
}

/* The last reference went: nobody scans its arrays any more. Under the instance's lock:
 * tb_epset_modify works on an instance it holds no reference to, inside that lock. */
static void set_release(struct tb_epset *s)
{
	struct tb_epset_arr *a, *next;

	spin_lock(&s->lock);
	a = atomic_exchange(&s->arr, NULL);
	free(a);
	for (a = atomic_exchange(&s->retired, NULL); a != NULL; a = next) {
		next = a->retired_next;
		free(a);
	}
	atomic_store(&s->live, 0);
	atomic_store(&s->oneshots, 0);
	spin_unlock(&s->lock);
	spin_lock(&free_lock);
	s->free_next = free_list;
	free_list = s;
	spin_unlock(&free_lock);
}

static void free_retired(struct tb_epset_arr *a)
{
	for (struct tb_epset_arr *next; a != NULL; a = next) {
		next = a->retired_next;
		free(a);
	}
}

/* Pushes the list head..tail onto the retired arrays. Lock-free: a writer (under the lock)
 * and reclaimers (without it) may push at once; pushing onto a head that went and came back
 * links to a live list all the same. */
static void push_retired(struct tb_epset *s, struct tb_epset_arr *head, struct tb_epset_arr *tail)
{
	struct tb_epset_arr *old = atomic_load(&s->retired);

	do
		tail->retired_next = old;
	while (!atomic_compare_exchange_weak(&s->retired, &old, head));
}

/*
 * Frees the retired arrays when no scan is under way (rule 3): takes them all, then looks
 * at the count of scanners, and gives them back when it is not 0. Every array taken was
 * replaced (s->arr stored, seq_cst) before it was pushed, so a scan that may be reading it
 * was counted (seq_cst) before that store, and is seen here unless it is over; a scan
 * counted later loads a newer array. No lock: the last scanner of an epoll_wait comes here,
 * and a handler may interrupt it and take the instance's lock (a close).
 */
static void reclaim(struct tb_epset *s)
{
	struct tb_epset_arr *gone, *tail;

	if (atomic_load_explicit(&s->retired, memory_order_relaxed) == NULL)
		return;
	gone = atomic_exchange(&s->retired, NULL);
	if (gone == NULL)
		return;
	if (atomic_load(&s->scanners) == 0) {
		free_retired(gone);
		return;
	}
	for (tail = gone; tail->retired_next != NULL; tail = tail->retired_next)
		;
	push_retired(s, gone, tail);
}

/* Gives back a reference this thread did not count (the table's, or a fresh instance's). */
static void unref(struct tb_epset *s)
{
	if (atomic_fetch_sub(&s->refs, 1) == 1)
		set_release(s);
}

void tb_epset_put_ref(struct tb_epset *s)
{
	if (s != NULL) {
		unref(s);
		unhold();
	}
}

struct tb_epset *tb_epset_get(int epfd)
{
	_Atomic(struct tb_epset *) *t = atomic_load_explicit(&tb_eptab, memory_order_acquire);
	struct tb_epset *s;
	unsigned r;

	if (t == NULL ||
	    (unsigned)epfd >= (unsigned)atomic_load_explicit(&tb_ep_cap, memory_order_relaxed))
		return NULL;
	s = atomic_load_explicit(&t[epfd], memory_order_acquire);
	if (s == NULL)
		return NULL;
	/* A reference only while one is held (0: being released, or already recycled). */
	hold();
	r = atomic_load(&s->refs);
	do {
		if (r == 0) {
			unhold();
			return NULL;
		}
	} while (!atomic_compare_exchange_weak(&s->refs, &r, r + 1));
	if (atomic_load(&t[epfd]) != s) { /* closed (and perhaps recycled) meanwhile */
		tb_epset_put_ref(s);
		return NULL;
	}
	return s;
}

struct tb_epset *tb_epset_get_or_make(int epfd)
{
	struct tb_epset *s = tb_epset_get(epfd), *expected = NULL;
	_Atomic(struct tb_epset *) *t;
	int hi;

	if (s != NULL)
		return s;
	t = atomic_load_explicit(&tb_eptab, memory_order_acquire);
	/* Two references: the table's and the caller's. */
	if (t == NULL || epfd < 0 || epfd >= atomic_load(&tb_ep_cap))
		return NULL;
	hold(); /* the caller's reference, counted before the instance is in the table */
	if ((s = set_new(2)) == NULL) {
		unhold();
		return NULL;
	}
	if (!atomic_compare_exchange_strong(&t[epfd], &expected, s)) {
		/* Another thread made it first: both references go (a stale reader's too). */
		unref(s);
		unref(s);
		unhold();
		return tb_epset_get(epfd);
	}
	hi = atomic_load(&ep_hiwater);
	while (hi < epfd && !atomic_compare_exchange_weak(&ep_hiwater, &hi, epfd))
		;
	return s;
}

void tb_epset_drop(int epfd)
{
	_Atomic(struct tb_epset *) *t = atomic_load_explicit(&tb_eptab, memory_order_acquire);

	struct tb_epset *s;

	if (t == NULL || epfd < 0 || epfd >= atomic_load(&tb_ep_cap))
		return;
	s = atomic_exchange(&t[epfd], NULL);
	if (s != NULL)
		unref(s); /* the table's */
}

void tb_epset_drop_range(unsigned lo, unsigned hi)
{
	int top = atomic_load(&ep_hiwater);

	if (top < 0 || atomic_load_explicit(&tb_eptab, memory_order_acquire) == NULL)
		return;
	for (unsigned fd = lo; fd <= hi && fd <= (unsigned)top; fd++)
		if (tb_epset_known((int)fd))
			tb_epset_drop((int)fd);
}

/* An array's size, read once per walk (an atomic: epoll_set.h). */
static uint32_t cap_of(const struct tb_epset_arr *a)
{
	return atomic_load_explicit(&a->cap, memory_order_relaxed);
}

static uint32_t slot_of(int fd, uint32_t cap)
{
	return ((uint32_t)fd * 2654435761u) & (cap - 1);
}

/* fd's entry, or NULL; and in *tomb (unless NULL) the first tombstone on fd's probe path
 * before its end, or NULL: an ADD after a DEL of the same fd (an event loop switching a
 * socket between reading and writing) takes its old slot back instead of a new one, so the
 * count of used slots does not grow. Writers only. */
static struct tb_epset_ent *probe(struct tb_epset_arr *a, int fd, struct tb_epset_ent **tomb)
{
	if (tomb != NULL)
		*tomb = NULL;
	if (a == NULL)
		return NULL;
	uint32_t cap = cap_of(a);

	for (uint32_t i = slot_of(fd, cap), n = 0; n < cap; i = (i + 1) & (cap - 1), n++) {
		int32_t f = atomic_load_explicit(&a->e[i].fd, memory_order_relaxed);

		if (f == fd)
			return &a->e[i];
		if (f == EMPTY)
			return NULL;
		if (f == TOMB && tomb != NULL && *tomb == NULL)
			*tomb = &a->e[i];
	}
	return NULL;
}

static struct tb_epset_ent *find(struct tb_epset_arr *a, int fd)
{
	return probe(a, fd, NULL);
}

/* The instance's count of one-shot entries, as an entry's events go from `was` to `now`
 * (0: none). Writers only. */
static void count_oneshot(struct tb_epset *s, uint32_t was, uint32_t now)
{
	if ((was ^ now) & EPOLLONESHOT)
		atomic_fetch_add_explicit(&s->oneshots, (now & EPOLLONESHOT) ? 1u : (uint32_t)-1,
					  memory_order_relaxed);
}

static void fill(struct tb_epset_ent *e, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	atomic_store_explicit(&e->events, events, memory_order_relaxed);
	atomic_store_explicit(&e->tag, tag, memory_order_relaxed);
	atomic_store_explicit(&e->data, data, memory_order_relaxed);
	atomic_store_explicit(&e->fd, fd, memory_order_release);
}

/* Inserts into a (which has room, and no entry for fd). Writers only. */
static void insert(struct tb_epset_arr *a, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	uint32_t cap = cap_of(a), i = slot_of(fd, cap);

	while (atomic_load_explicit(&a->e[i].fd, memory_order_relaxed) >= 0)
		i = (i + 1) & (cap - 1);
	fill(&a->e[i], fd, events, tag, data);
}

/* Writers' view of the instance's size, for the growth decision made before the lock. */
static uint32_t cap_needed(struct tb_epset *s)
{
	struct tb_epset_arr *a = atomic_load(&s->arr);
	uint32_t live = atomic_load(&s->live), cap = a != NULL ? cap_of(a) : 0;

	/* Load at most 3/4 counting tombstones; a rehash drops those. */
	if (a != NULL && (s->used + 1) * 4 <= cap * 3)
		return 0;
	cap = CAP_MIN;
	while ((live + 1) * 2 > cap)
		cap *= 2;
	return cap;
}

bool tb_epset_modify(int epfd, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	_Atomic(struct tb_epset *) *t = atomic_load_explicit(&tb_eptab, memory_order_acquire);
	struct tb_epset_ent *e;
	struct tb_epset *s;

	if (t == NULL ||
	    (unsigned)epfd >= (unsigned)atomic_load_explicit(&tb_ep_cap, memory_order_relaxed))
		return false;
	s = atomic_load_explicit(&t[epfd], memory_order_acquire);
	if (s == NULL)
		return false;
	/* No reference: instances are type-stable (rule 3), so the lock may be taken on one
	 * that is being released or was recycled; once it is held, release waits for it, and
	 * an instance the table still names under it is epfd's, with its arrays live. */
	spin_lock(&s->lock);
	if (atomic_load_explicit(&t[epfd], memory_order_acquire) != s ||
	    (e = find(atomic_load_explicit(&s->arr, memory_order_relaxed), fd)) == NULL) {
		spin_unlock(&s->lock);
		return false;
	}
	count_oneshot(s, atomic_load_explicit(&e->events, memory_order_relaxed), events);
	fill(e, fd, events, tag, data);
	spin_unlock(&s->lock);
	return true;
}

int tb_epset_put(struct tb_epset *s, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	struct tb_epset_arr *a, *fresh = NULL;
	struct tb_epset_ent *e, *tomb;
	uint32_t want;

	if (fd < 0)
		return -1;
	for (;;) {
		spin_lock(&s->lock);
		a = atomic_load(&s->arr);
		e = probe(a, fd, &tomb);
		if (e != NULL) {
			count_oneshot(s, atomic_load_explicit(&e->events, memory_order_relaxed),
				      events);
			fill(e, fd, events, tag, data);
			spin_unlock(&s->lock);
			if (fresh != NULL)
				free(fresh);
			return 0;
		}
		if (tomb != NULL) {
			fill(tomb, fd, events, tag, data);
			count_oneshot(s, 0, events);
			atomic_fetch_add(&s->live, 1);
			spin_unlock(&s->lock);
			free(fresh);
			return 0;
		}
		want = cap_needed(s);
		if (want == 0 || (fresh != NULL && fresh->cap >= want))
			break;
		spin_unlock(&s->lock);
		free(fresh);
		fresh = arr_new(want); /* outside the lock (rule 1) */
		if (fresh == NULL)
			return -1;
	}
	if (want != 0) {
		/* Rehash into the fresh array; the old one stays readable (rule 3). */
		for (uint32_t i = 0, cap = a != NULL ? cap_of(a) : 0; i < cap; i++) {
			int32_t f = atomic_load_explicit(&a->e[i].fd, memory_order_relaxed);

			if (f >= 0)
				insert(fresh, f, atomic_load(&a->e[i].events),
				       atomic_load(&a->e[i].tag), atomic_load(&a->e[i].data));
		}
		s->used = atomic_load(&s->live);
		atomic_store(&s->arr, fresh); /* before it is pushed (rule 3, reclaim) */
		if (a != NULL)
			push_retired(s, a, a);
		a = fresh;
		fresh = NULL;
	}
	insert(a, fd, events, tag, data);
	count_oneshot(s, 0, events);
	s->used++;
	atomic_fetch_add(&s->live, 1);
	spin_unlock(&s->lock);
	free(fresh);
	reclaim(s); /* outside the lock (rule 1) */
	return 0;
}

static void del_locked(struct tb_epset *s, int fd)
{
	struct tb_epset_ent *e = find(atomic_load(&s->arr), fd);

	if (e == NULL)
		return;
	count_oneshot(s, atomic_load_explicit(&e->events, memory_order_relaxed), 0);
	atomic_store_explicit(&e->fd, TOMB, memory_order_release);
	atomic_fetch_sub(&s->live, 1);
}

void tb_epset_del(struct tb_epset *s, int fd)
{
	spin_lock(&s->lock);
	del_locked(s, fd);
	spin_unlock(&s->lock);
}

void tb_epset_disarm(struct tb_epset *s, int fd, uint64_t tag)
{
	struct tb_epset_ent *e;

	spin_lock(&s->lock);
	e = find(atomic_load(&s->arr), fd);
	if (e != NULL && atomic_load_explicit(&e->tag, memory_order_relaxed) == tag) {
		count_oneshot(s, atomic_load_explicit(&e->events, memory_order_relaxed), 0);
		atomic_store_explicit(&e->events, 0, memory_order_relaxed);
	}
	spin_unlock(&s->lock);
}

void tb_epset_forget_fd(int fd)
{
	int hi = atomic_load(&ep_hiwater);

	/* A close in a signal handler that interrupted this very thread under a lock of the
	 * sets (an epoll_ctl's; close is async-signal-safe) would spin on a lock its own
	 * thread holds, for good (regress/epoll_close_in_handler). Its entries stay, as
	 * a close_range's do: the tag tells a reused number apart. */
	if (held >= HELD_LOCK)
		return;
	for (int epfd = 0; epfd <= hi; epfd++) {
		struct tb_epset *s = tb_epset_get(epfd);

		if (s == NULL)
			continue;
		if (atomic_load_explicit(&s->live, memory_order_relaxed) != 0)
			tb_epset_del(s, fd);
		tb_epset_put_ref(s);
	}
}

void tb_epset_scan(struct tb_epset *s,
		   bool (*fn)(void *ctx, int fd, uint32_t events, uint64_t tag, uint64_t data),
		   void *ctx)
{
	struct tb_epset_arr *a;

	atomic_fetch_add(&s->scanners, 1);
	a = atomic_load(&s->arr); /* after the count (rule 3) */
	for (uint32_t i = 0, cap = a != NULL ? cap_of(a) : 0; i < cap; i++) {
		struct tb_epset_ent *e = &a->e[i];
		int32_t f = atomic_load_explicit(&e->fd, memory_order_acquire);

		if (f < 0)
			continue;
		if (!fn(ctx, f, atomic_load_explicit(&e->events, memory_order_relaxed),
			atomic_load_explicit(&e->tag, memory_order_relaxed),
			atomic_load_explicit(&e->data, memory_order_relaxed)))
			break;
	}
	if (atomic_fetch_sub(&s->scanners, 1) == 1)
		reclaim(s); /* the last scanner: what was retired meanwhile can go */
}

/*
 * The counts an instance keeps as its arrays change, from its current array: a fork in the
 * middle of another thread's update (under the instance's lock) copied them half-made - an
 * entry filled and the count of live ones not yet raised, which a waiter takes for an
 * instance with nothing to watch. Each stored only when it differs (a page written in a
 * child is a page copied).
 */
static void recount(struct tb_epset *s)
{
	struct tb_epset_arr *a = atomic_load(&s->arr);
	uint32_t live = 0, used = 0, oneshots = 0;

	for (uint32_t i = 0, cap = a != NULL ? cap_of(a) : 0; i < cap; i++) {
		int32_t f = atomic_load_explicit(&a->e[i].fd, memory_order_relaxed);

		if (f == EMPTY)
			continue;
		used++;
		if (f >= 0) {
			live++;
			if (atomic_load_explicit(&a->e[i].events, memory_order_relaxed) &
			    EPOLLONESHOT)
				oneshots++;
		}
	}
	if (atomic_load(&s->live) != live)
		atomic_store(&s->live, live);
	if (atomic_load(&s->oneshots) != oneshots)
		atomic_store(&s->oneshots, oneshots);
	if (s->used != used)
		s->used = used;
}

/*
 * In the child every other thread of the parent is gone, with the references, scans and
 * locks it held: each instance in the table is left with the table's reference alone (a
 * thread pool blocked in epoll_wait held one each, and the instance outlived its close in
 * the child), no scan, its lock free and its counts made again. Only when this thread held
 * none itself (rule 5): a fork from a signal handler that interrupted this thread's own
 * section is followed by the rest of that section, which must find what it left; then the
 * locks alone are freed, and what the other threads held stays counted (kept, never freed
 * under a reader).
 */
void tb_epset_fork_child(void)
{
	_Atomic(struct tb_epset *) *t = atomic_load(&tb_eptab);
	int hi = atomic_load(&ep_hiwater);
	bool alone = held == 0;

	atomic_flag_clear(&free_lock);
	for (int epfd = 0; t != NULL && epfd <= hi; epfd++) {
		struct tb_epset *s = atomic_load(&t[epfd]);

		if (s == NULL)
			continue;
		atomic_flag_clear(&s->lock);
		if (!alone)
			continue;
		if (atomic_load(&s->scanners) != 0)
			atomic_store(&s->scanners, 0);
		if (atomic_load(&s->refs) != 1)
			atomic_store(&s->refs, 1);
		recount(s);
	}
}
