/* epoll_set.h - what each epoll instance is asked to watch among the governed sockets:
 * epoll fd -> (fd -> events, identity, user data). Pure bookkeeping, no system call. */
#ifndef TB_EPOLL_SET_H
#define TB_EPOLL_SET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Only governed sockets are remembered: registering any other fd costs the caller one fd
 * table check and nothing here. Each entry carries the socket's identity (`tag`: pool index
 * and generation, chosen by the caller) so that a number closed and reused - by a close
 * the hooks never saw - is told apart at wait time: the set is keyed by fd number, the
 * kernel by open file description, and the tag is the bridge.
 *
 * Concurrency rules:
 * (1) Writers (tb_epset_put, tb_epset_del, tb_epset_disarm, tb_epset_forget_fd) hold the
 *     instance's spin lock; they never call anything that could block or allocate under it
 *     except the array growth (calloc), done before taking it. epoll_ctl is not
 *     async-signal-safe: a handler that calls it while its own thread is inside one on the
 *     same instance would spin, as it would deadlock inside a libc lock elsewhere.
 * (2) Readers (tb_epset_scan, a thread about to epoll_wait) take no lock: each entry's
 *     fields are atomics, so a reader racing with a writer may see one entry half updated
 *     (old events with the new tag, say). That misreads one registration for one call, in
 *     a program that changes a registration while another thread waits on the same
 *     instance - which the kernel itself leaves unordered.
 * (3) An entry array replaced by a new one (growth, or a rehash that drops tombstones) is
 *     retired, not freed at once: a scan may still be reading it. Each scan is counted
 *     (`scanners`, seq_cst) before it loads the array, and the writer stores the new array
 *     (seq_cst) before it retires the old one; whoever then sees no scan counted - the
 *     writer after it retired one, or the last scanner to finish - frees the retired arrays
 *     (reclaim: take them all, look at the count, give them back when it is not 0). A scan
 *     counted later loads a newer array. The count covers the scan alone, not a waiter's
 *     whole epoll_wait: with a thread pool blocked on one instance a reference is always
 *     held, and arrays freed only when the references fell to the table's were never
 *     freed while new numbers churned through it (a proxy whose outbound sockets take
 *     numbers among many inbound ones: a rehash every few connections). No lock either: the
 *     last scanner of an epoll_wait frees them, and a handler that interrupts it may take
 *     the instance's lock (a close). The rest go when the instance is released.
 *     References (`refs`: the table's, each caller's, taken with tb_epset_get) keep the
 *     instance itself: the release frees its arrays and recycles it. Instances are
 *     recycled, never returned to malloc, so a reader holding a stale pointer can still
 *     test it safely (type-stable memory). The release frees the arrays under the
 *     instance's lock, so a writer holding that lock and seeing the table still name the
 *     instance may use its arrays without a reference (tb_epset_modify).
 * (4) `oneshots` is changed by the writers alone, under the lock, as they change an entry's
 *     events; `settled_until` and `busy` by the waiters alone (relaxed: two waiters racing
 *     leave one of their two answers, each of which was true when it was made).
 * (5) Each thread counts the references and locks it holds (a thread-local count, raised
 *     before one is taken, lowered after it is given back). A fork child whose forking
 *     thread holds none knows every reference, scan and lock beyond the table's belonged to
 *     a thread that is gone, and sets them so (tb_epset_fork_child); otherwise it frees the
 *     locks alone and leaves the rest counted.
 */
struct tb_epset_ent {
	_Atomic int32_t fd;      /* EMPTY, TOMB, or the fd */
	_Atomic uint32_t events; /* as registered; 0 once a one-shot fired (disarmed) */
	_Atomic uint64_t tag;    /* the socket's identity when registered */
	_Atomic uint64_t data;   /* the program's epoll_data, to map results back */
};

struct tb_epset_arr {
	/* A power of two, set before the array is published. Atomic because a scan reads it
	 * as it reads the entries: a scan runs inside the thread sanitizer's blocking
	 * interceptor (epoll_wait), where the sanitizer does not see atomics synchronize, and
	 * a plain read there looked to it like a race with the free that the count of
	 * scanners orders (rule 3; unsynchronized in its eyes only). */
	_Atomic uint32_t cap;
	struct tb_epset_arr *retired_next;
	struct tb_epset_ent e[];
};

struct tb_epset {
	atomic_flag lock;
	atomic_uint refs;
	_Atomic uint32_t live;          /* entries in use: 0 lets a waiter skip the scan */
	_Atomic uint32_t oneshots;      /* entries whose events hold EPOLLONESHOT (writers) */
	/* Until then, every registration was settled by a wait that marked them: a wait that
	 * finds events ready need not mark again (hooks_epoll.c). Waiters only, relaxed. */
	_Atomic int64_t settled_until;
	/* The last wait returned more than one event: a loop under load (hooks_epoll.c).
	 * Waiters only, relaxed. */
	atomic_bool busy;
	uint32_t used;                  /* live + tombstones (writers only) */
	atomic_uint scanners;           /* scans under way (rule 3) */
	_Atomic(struct tb_epset_arr *) arr;
	_Atomic(struct tb_epset_arr *) retired; /* a lock-free stack (rule 3) */
	struct tb_epset *free_next;
};

/* Sizes the epoll fd table (epoll fds >= cap are not followed). Idempotent, thread-safe.
 * Returns 0, or -1 when memory is exhausted. */
int tb_epset_init(int cap);

/* The instance of epoll fd epfd with a reference taken, or NULL (none, or a race with its
 * close). Drop it with tb_epset_put_ref. Lock-free. */
struct tb_epset *tb_epset_get(int epfd);
void tb_epset_put_ref(struct tb_epset *set);

/* As tb_epset_get, creating the instance when epfd has none. NULL when epfd is outside the
 * table or memory is exhausted. */
struct tb_epset *tb_epset_get_or_make(int epfd);

/* epfd is a new epoll instance, or was closed: whatever the table held for that number is
 * released (it belonged to an instance closed unseen). */
void tb_epset_drop(int epfd);

/* tb_epset_drop for every number in [lo, hi] that has an instance: a close_range. */
void tb_epset_drop_range(unsigned lo, unsigned hi);

/* True when epfd has an instance: for close(), one load when none was ever made. */
extern _Atomic(struct tb_epset *) *tb_eptab;
extern atomic_int tb_ep_cap;
static inline bool tb_epset_known(int epfd)
{
	_Atomic(struct tb_epset *) *t = atomic_load_explicit(&tb_eptab, memory_order_acquire);

	if (t == NULL ||
	    (unsigned)epfd >= (unsigned)atomic_load_explicit(&tb_ep_cap, memory_order_relaxed))
		return false;
	return atomic_load_explicit(&t[epfd], memory_order_relaxed) != NULL;
}

/* Adds or replaces fd's registration (EPOLL_CTL_ADD and MOD are the same here: a socket
 * registered before it was governed is first seen at a MOD). The caller holds one reference
 * (tb_epset_get_or_make). Returns 0, or -1 when memory is exhausted (the registration is
 * then not followed). */
int tb_epset_put(struct tb_epset *set, int fd, uint32_t events, uint64_t tag, uint64_t data);

/* An EPOLL_CTL_MOD of a registration epfd's instance already holds for fd: rewrites it
 * under the instance's lock, taking no reference (one atomic operation, not three: event
 * loops modify on every switch between reading and writing). False when there is no such
 * instance or entry: the caller takes the general path (tb_epset_get_or_make, put). */
bool tb_epset_modify(int epfd, int fd, uint32_t events, uint64_t tag, uint64_t data);

/* Removes fd's registration, if any. */
void tb_epset_del(struct tb_epset *set, int fd);

/* A one-shot registration of fd fired: it watches nothing until the next MOD. Only when
 * the entry still carries `tag` (no concurrent re-registration). */
void tb_epset_disarm(struct tb_epset *set, int fd, uint64_t tag);

/* The fd number was closed: drops it from every instance. */
void tb_epset_forget_fd(int fd);

/* Calls fn on each live entry (lock-free, see rule 2); stops when fn returns false. */
void tb_epset_scan(struct tb_epset *set,
		   bool (*fn)(void *ctx, int fd, uint32_t events, uint64_t tag, uint64_t data),
		   void *ctx);

/* In a forked child: the references, scans and locks of the parent's other threads are
 * dropped, and each instance's counts made again from its entries (rule 5). */
void tb_epset_fork_child(void);

#endif
