/* gate_shared.c - the cross-process gate. A slot is an open-file-description lock
 * (F_OFD_SETLK) on one byte of a per-destination file in the gate directory (gate_file.c):
 * the kernel drops it when the last fd of that description closes, so a slot follows its
 * socket through fork (the child shares the description) and comes back at once when every
 * holder is gone, SIGKILL included. The file's first page, mapped shared, holds a futex word
 * that releases bump, and counters. Its contents are hints: a crashed run leaves nothing that
 * could block the next one, because only the locks say who holds what.
 *
 * The file can be deleted under us (tmp cleaners, systemd's RemoveIPC). Every acquire opens
 * it by name, so it notices: the process moves to the file now at that name (created by
 * whoever came first), and the slots still held through the deleted one keep counting
 * against the cap until they are closed. */
#include "gate_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "fdtable.h"
#include "futex.h"
#include "gate.h"
#include "gate_file.h"
#include "log.h"
#include "real.h"

#define POLL_NS (20 * TB_NS_PER_MS) /* a waiter looks again at least this often */

struct shm_page {
	atomic_uint seq;     /* futex word: bumped by every release */
	atomic_uint hint;    /* the slot to try first */
	atomic_int unused;   /* was a count of the waiters, now their locks (waiters_of) */
	atomic_ulong acquired, timed_out, rejected;
};

/*
 * Concurrency rules: dest, name, max and max_pending never change after open. `lock` guards
 * fd and old_fd, and serialises moves to a new file (follow); dev, ino, page and has_old are
 * atomics written under `lock` and read without it by the acquire path. A page is never
 * unmapped: another thread may be waiting on its futex word.
 */
struct tb_shared_gate {
	struct tb_dest dest;
	char name[96];               /* the file's name in the gate directory */
	int max, max_pending;
	pthread_mutex_t lock;
	int fd;                      /* our use description of the current file */
	int old_fd;                  /* the deleted file, while slots held through it count; -1 */
	atomic_bool has_old;
	_Atomic uint64_t dev, ino;   /* the current file */
	_Atomic(struct shm_page *) page;
	struct tb_shared_gate *next; /* every shared gate of the process (exit, fork) */
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tb_shared_gate *gates;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static atomic_bool said_unavailable, said_ungated, said_follow;

/* Slot descriptions in hand (tb_shared_gate_in_hand), by every thread and by this one. */
static atomic_int in_hand;
static __thread int own_in_hand __attribute__((tls_model("initial-exec")));
/* In a fork child between tb_shared_gate_fork_child and tb_shared_gate_fork_unheld: one bit
 * per fd through which a socket of the child holds a slot. */
static atomic_ulong *held_bits;
static size_t held_len;

/* One event=error line; with `once`, only the first time in this process. */
static void say(atomic_bool *once, const char *name, const char *why, const char *effect)
{
	char body[700];

	if (once != NULL && atomic_exchange(once, true))
		return;
	snprintf(body, sizeof(body),
		 "event=error what=shared_gate path=%s/%s error=\"%s\" effect=\"%s\"",
		 tb_gate_file_dir(), name, why, effect);
	tb_log_error(body);
}

static bool same_file(struct tb_shared_gate *g, const struct stat *st)
{
	return atomic_load(&g->ino) == (uint64_t)st->st_ino &&
	       atomic_load(&g->dev) == (uint64_t)st->st_dev;
}

/* Slots held through fd's file by any description (every process), probed with GETLK. */
static int held_slots(int fd, int max)
{
	int n = 0;

	for (int i = 0; i < max; i++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = TB_GATE_SLOT_BASE + i, .l_len = 1 };

		if (tb_real.fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
			n++;
	}
	return n;
}

/* Waiters' locks held in [from, to) of fd's file by other descriptions. GETLK names one
 * conflicting lock, not the lowest: each one found splits the range in two, the smaller
 * part counted by recursion (so at most log2 of the range deep), the larger by the loop. */
static long waiters_in(int fd, off_t from, off_t to)
{
	long n = 0;

	while (from < to) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = from,
				    .l_len = to - from };
		off_t at;

		if (tb_real.fcntl(fd, F_OFD_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
			break;
		n++;
		at = fl.l_start < from ? from : fl.l_start >= to ? to - 1 : fl.l_start;
		if (at - from < to - (at + 1)) {
			n += waiters_in(fd, from, at);
			from = at + 1;
		} else {
			n += waiters_in(fd, at + 1, to);
			to = at;
		}
	}
	return n;
}

static long waiters_of(int fd)
{
	return waiters_in(fd, TB_GATE_WAIT_BASE, TB_GATE_WAIT_BASE + TB_GATE_WAIT_LEN);
}

/* A waiter's byte, locked on fd (the waiter's own description) from a start spread over
 * the range; false when 64 in a row are taken (the waiter is then not counted). */
static bool take_waiter_byte(int fd)
{
	static atomic_uint turn;
	unsigned start = (unsigned)((uint64_t)tb_now() ^ atomic_fetch_add(&turn, 1)) *
			 2654435761u % (unsigned)TB_GATE_WAIT_LEN;

	for (unsigned k = 0; k < 64; k++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = TB_GATE_WAIT_BASE +
					       (start + k) % (unsigned)TB_GATE_WAIT_LEN,
				    .l_len = 1 };

		if (tb_real.fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return true;
	}
	return false;
}

static void leave_waiter_byte(int fd)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET,
			    .l_start = TB_GATE_WAIT_BASE, .l_len = TB_GATE_WAIT_LEN };

	tb_real.fcntl(fd, F_OFD_SETLK, &fl);
}

/* A lock waited for 100 ms at most (see remove_unused). */
static int lock_briefly(pthread_mutex_t *m)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 100 * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	return pthread_mutex_timedlock(m, &until);
}

/* At exit: the last process using a gate file removes it (gate_file.c says how it knows).
 * Bounded waits: the statistics thread's refresh holds these locks for microseconds and
 * may be at it as the program exits - it starts a moment after the first connect, so a
 * program that connects once and exits meets its first refresh - and a try-lock then left
 * the file behind (regress gate_file_removal); exit() called from a signal handler that
 * interrupted one of our own critical sections must not deadlock: it gives up after
 * 100 ms, and the file stays for the next user to remove. */
static void remove_unused(void)
{
	if (lock_briefly(&list_lock) != 0)
		return;
	for (struct tb_shared_gate *g = gates; g != NULL; g = g->next) {
		struct stat id = { 0 };

		if (lock_briefly(&g->lock) != 0)
			continue;
		id.st_dev = (dev_t)atomic_load(&g->dev);
		id.st_ino = (ino_t)atomic_load(&g->ino);
		tb_gate_file_remove_if_unused(g->fd, g->name, &id);
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_unlock(&list_lock);
}

static void register_exit(void)
{
	atexit(remove_unused);
}

struct tb_shared_gate *tb_shared_gate_open(const struct tb_dest *d, const struct tb_settings *set)
{
	struct tb_shared_gate *g = calloc(1, sizeof(*g));
	char why[400] = "out of memory";
	struct stat st;
	void *page;
	int saved = errno;

	if (g == NULL)
		goto fail;
	if (tb_gate_file_name(d, set->max_conns, g->name, sizeof(g->name)) < 0) {
		snprintf(why, sizeof(why), "no file name for this destination");
		goto fail;
	}
	g->fd = tb_gate_file_attach(g->name, &st, &page, why, sizeof(why));
	if (g->fd < 0)
		goto fail;
	g->dest = *d;
	g->max = set->max_conns;
	g->max_pending = set->max_pending;
	g->old_fd = -1;
	pthread_mutex_init(&g->lock, NULL);
	atomic_store(&g->dev, (uint64_t)st.st_dev);
	atomic_store(&g->ino, (uint64_t)st.st_ino);
	atomic_store(&g->page, (struct shm_page *)page);
	pthread_mutex_lock(&list_lock);
	g->next = gates;
	gates = g;
	pthread_mutex_unlock(&list_lock);
	pthread_once(&exit_once, register_exit);
	errno = saved;
	return g;
fail:
	say(&said_unavailable, g != NULL ? g->name : "-", why,
	    "a gate per process for this destination, and silently for any other whose shared "
	    "gate fails too");
	free(g);
	errno = saved;
	return NULL;
}

/*
 * The file at the gate's name (st, just opened) is not the one this process uses: it was
 * deleted and re-created. Moves the process to the file now at the name, keeping the old
 * one's fd so that its slots still count. Returns true when st is that file (the caller
 * may take slots through it), false when the caller must open the name again.
 */
static bool follow(struct tb_shared_gate *g, const struct stat *st)
{
	char why[400];
	struct stat nst;
	void *page;
	bool ours = true;
	int fd;

	pthread_mutex_lock(&g->lock);
	if (same_file(g, st))
		goto out; /* another thread moved first */
	fd = tb_gate_file_attach(g->name, &nst, &page, why, sizeof(why));
	if (fd < 0) {
		/* The slots (locks) live in the file the caller opened, so the cap holds; only
		 * wake-ups and counters stay on the old page. */
		say(&said_follow, g->name, why, "slots taken in the new file, wake-ups by polling");
		goto out;
	}
	if (same_file(g, &nst)) {
		tb_gate_file_close(fd); /* st was a deleted file opened before a move */
		munmap(page, TB_GATE_PAGE);
	} else {
		if (g->old_fd >= 0)
			tb_gate_file_close(g->old_fd); /* two deletions in a row: forget the oldest */
		g->old_fd = g->fd;
		g->fd = fd;
		atomic_store(&g->dev, (uint64_t)nst.st_dev);
		atomic_store(&g->ino, (uint64_t)nst.st_ino);
		atomic_store(&g->page, (struct shm_page *)page);
		atomic_store(&g->has_old, true);
		say(NULL, g->name, "the gate file was removed by someone else",
		    "using the file now at that name; slots held through the removed one count "
		    "until closed");
	}
	ours = nst.st_dev == st->st_dev && nst.st_ino == st->st_ino;
out:
	pthread_mutex_unlock(&g->lock);
	return ours;
}

/*
 * A new description of the gate's current file, for one slot (created if someone removed
 * it). Returns the fd, or -1 with a reason in why.
 */
static int open_current(struct tb_shared_gate *g, char *why, size_t whylen)
{
	struct stat st;

	for (int tries = 0; tries < 4; tries++) {
		int fd = tb_gate_file_open(g->name, &st, why, whylen);

		if (fd < 0)
			return -1;
		if (same_file(g, &st) || follow(g, &st))
			return fd;
		tb_gate_file_close(fd);
	}
	snprintf(why, whylen, "the gate file keeps being replaced");
	errno = EAGAIN;
	return -1;
}

/* Slots still held through the deleted file, counted on the slow path only while there is
 * one; once none are, it is forgotten. */
static int old_held(struct tb_shared_gate *g)
{
	int n = 0;

	if (!atomic_load(&g->has_old))
		return 0;
	pthread_mutex_lock(&g->lock);
	if (g->old_fd >= 0) {
		n = held_slots(g->old_fd, g->max);
		if (n == 0) {
			tb_gate_file_close(g->old_fd);
			g->old_fd = -1;
			atomic_store(&g->has_old, false);
		}
	}
	pthread_mutex_unlock(&g->lock);
	return n;
}

/* Tries every usable slot once, starting at the hint. Returns true with a slot locked on fd.
 * While slots of a deleted file are held, only max minus their number are usable: every
 * process that saw the deletion uses the lowest indices, so the total stays within max. */
static bool try_slots(struct tb_shared_gate *g, int fd)
{
	struct shm_page *page = atomic_load(&g->page);
	int limit = g->max - old_held(g);
	unsigned start = atomic_load_explicit(&page->hint, memory_order_relaxed);

	for (int k = 0; k < limit; k++) {
		unsigned i = (start + (unsigned)k) % (unsigned)limit;
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = TB_GATE_SLOT_BASE + (off_t)i, .l_len = 1 };

		if (tb_real.fcntl(fd, F_OFD_SETLK, &fl) == 0) {
			atomic_store_explicit(&page->hint, (i + 1) % (unsigned)limit,
					      memory_order_relaxed);
			return true;
		}
	}
	return false;
}

/* The waiting room, when max_pending is set: one locked byte per waiter, so a waiter that
 * dies frees its seat too. Returns true with a seat locked on fd. */
static bool take_seat(struct tb_shared_gate *g, int fd)
{
	for (int j = 0; j < g->max_pending; j++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = TB_GATE_SLOT_BASE + g->max + j, .l_len = 1 };

		if (tb_real.fcntl(fd, F_OFD_SETLK, &fl) == 0)
			return true;
	}
	return false;
}

/* Our description holds one seat; unlocking the whole room releases just that one. */
static void leave_seat(struct tb_shared_gate *g, int fd)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET,
			    .l_start = TB_GATE_SLOT_BASE + g->max, .l_len = g->max_pending };

	tb_real.fcntl(fd, F_OFD_SETLK, &fl);
}

int tb_gate_timed_out(const struct tb_dest *d, int fd, const struct tb_settings *set,
		      enum tb_phase phase, int64_t begin, int64_t call_start,
		      int64_t call_deadline)
{
	int64_t now = tb_now();

	if (phase == TB_PHASE_DEADLINE)
		tb_log_timeout(TB_PHASE_DEADLINE, d, fd, now - call_start,
			       call_deadline - call_start, 0);
	else
		tb_log_timeout(TB_PHASE_GATE, d, fd, now - begin, set->acquire_ns, 0);
	errno = ETIMEDOUT;
	return -1;
}

int tb_shared_gate_acquire(struct tb_shared_gate *g, const struct tb_settings *set,
			   bool nonblock, int fd, int64_t call_start, int64_t call_deadline,
			   enum tb_phase *phase, int *slot_fd)
{
	int saved = errno, lfd;
	struct shm_page *page;
	struct tb_expiry bound;
	int64_t begin, now;
	bool seated = false, counted;
	char why[400];

	lfd = open_current(g, why, sizeof(why));
	if (lfd < 0) {
		/* Out of fds, or the directory became unusable: ungated, not broken. */
		say(&said_ungated, g->name, why, "connects that cannot reach their shared gate "
		    "are not gated");
		errno = saved;
		return 1;
	}
	page = atomic_load(&g->page);
	if (try_slots(g, lfd))
		goto took;
	if (nonblock && set->gate_nonblocking == TB_GATE_NB_FAIL) {
		atomic_fetch_add(&page->rejected, 1);
		tb_log_reject(TB_PHASE_GATE, &g->dest, fd, "full");
		goto refuse;
	}
	if (g->max_pending > 0) {
		if (!take_seat(g, lfd)) {
			atomic_fetch_add(&page->rejected, 1);
			tb_log_reject(TB_PHASE_GATE, &g->dest, fd, "max_pending");
			goto refuse;
		}
		seated = true;
	}
	counted = take_waiter_byte(lfd);
	begin = tb_now();
	bound = tb_gate_wait_bound(begin, set->acquire_ns, call_deadline);
	for (;;) {
		struct shm_page *cur = atomic_load(&g->page);
		unsigned seq = atomic_load(&cur->seq);
		int64_t until;

		if (try_slots(g, lfd))
			break;
		now = tb_now();
		if (now >= bound.at) {
			atomic_fetch_add(&page->timed_out, 1);
			tb_gate_file_close(lfd); /* drops the waiter's byte and seat with it */
			*phase = bound.phase;
			return tb_gate_timed_out(&g->dest, fd, set, bound.phase, begin, call_start,
						 call_deadline);
		}
		/* Wake on a release here, or look again soon: a holder that died releases its
		 * slot without bumping anything. */
		until = now + POLL_NS < bound.at ? now + POLL_NS : bound.at;
		if (tb_futex_wait_until(&cur->seq, seq, until, true) == EINTR) {
			tb_gate_file_close(lfd); /* drops the waiter's byte and seat with it */
			errno = EINTR;
			return -1;
		}
	}
	if (counted)
		leave_waiter_byte(lfd);
	if (seated)
		leave_seat(g, lfd);
took:
	atomic_fetch_add(&page->acquired, 1);
	*slot_fd = lfd;
	errno = saved;
	return 0;
refuse:
	tb_gate_file_close(lfd);
	errno = EAGAIN;
	return -1;
}

void tb_shared_gate_release(struct tb_shared_gate *g, int slot_fd)
{
	struct shm_page *page = atomic_load(&g->page);

	tb_gate_file_close(slot_fd);
	atomic_fetch_add(&page->seq, 1);
	tb_futex_wake_one(&page->seq, true);
}

void tb_shared_gate_counts(struct tb_shared_gate *g, long *leased, long *pending)
{
	pthread_mutex_lock(&g->lock);
	*leased = held_slots(g->fd, g->max);
	if (g->old_fd >= 0)
		*leased += held_slots(g->old_fd, g->max);
	pthread_mutex_unlock(&g->lock);
	*pending = waiters_of(g->fd);
}

void tb_shared_gate_stats(struct tb_shared_gate *g, unsigned long *acquired,
			  unsigned long *timed_out, unsigned long *rejected)
{
	struct shm_page *page = atomic_load(&g->page);

	*acquired = atomic_load(&page->acquired);
	*timed_out = atomic_load(&page->timed_out);
	*rejected = atomic_load(&page->rejected);
}

void tb_shared_gate_in_hand(int delta)
{
	atomic_fetch_add(&in_hand, delta);
	own_in_hand += delta;
}

void tb_shared_gate_fork_child(void)
{
	int cap = atomic_load(&tb_fd_cap);

	/* Another thread had a slot's description in hand: the child looks for it once the
	 * sockets said which descriptions they hold. One the forking thread has in hand itself
	 * (a fork from a signal handler above its own gate step) is not followed. */
	if (gates != NULL && atomic_load(&in_hand) > 0 && own_in_hand == 0 && cap > 0) {
		held_len = (size_t)cap / 8 + sizeof(unsigned long);
		held_bits = mmap(NULL, held_len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (held_bits == MAP_FAILED)
			held_bits = NULL;
	}
	atomic_store(&in_hand, own_in_hand);
	pthread_mutex_init(&list_lock, NULL);
	tb_gate_file_fork_child();
	for (struct tb_shared_gate *g = gates; g != NULL; g = g->next) {
		int fd = tb_gate_file_reopen(g->fd);

		pthread_mutex_init(&g->lock, NULL);
		/* A use lock of the child's own: the parent's exit must not see the child's use
		 * through a description they share, nor the child's exit the parent's. Failing
		 * that (no /proc), the child shares the parent's: if the parent removes the file
		 * at exit, the child follows to a new one at its next connect. */
		if (fd >= 0) {
			tb_gate_file_close(g->fd);
			g->fd = fd;
		}
	}
}

void tb_shared_gate_fork_held(int slot_fd)
{
	if (held_bits != NULL && slot_fd >= 0 &&
	    (size_t)slot_fd / 64 < held_len / sizeof(unsigned long))
		atomic_fetch_or_explicit(&held_bits[slot_fd / 64], 1UL << (slot_fd % 64),
					 memory_order_relaxed);
}

/* Is fd a description of a gate file this process knows, other than a use lock's? */
static bool slot_description(int fd)
{
	struct stat st;

	if (tb_fstat_raw(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	for (struct tb_shared_gate *g = gates; g != NULL; g = g->next) {
		struct stat old;

		if (fd == g->fd || fd == g->old_fd)
			return false;
		if (same_file(g, &st))
			return true;
		if (g->old_fd >= 0 && tb_fstat_raw(g->old_fd, &old) == 0 &&
		    old.st_dev == st.st_dev && old.st_ino == st.st_ino)
			return true;
	}
	return false;
}

static void close_unheld(int fd)
{
	size_t word = (size_t)fd / 64;
	bool held = word >= held_len / sizeof(unsigned long) || /* past the table: not ours */
		    (atomic_load_explicit(&held_bits[word], memory_order_relaxed) >> (fd % 64)) & 1;

	if (!held && slot_description(fd))
		tb_gate_file_close(fd);
}

void tb_shared_gate_fork_unheld(void)
{
	char buf[4096];
	long n;
	int dfd;

	if (held_bits == NULL)
		return;
	/* Every fd of the child, /proc's listing: a description is in hand before it is
	 * marked internal (tb_fd_move_internal) as well as after. Without /proc, the internal
	 * ones. */
	dfd = tb_open_raw(AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (dfd < 0) {
		for (int fd = 0, hi = atomic_load(&tb_fd_internal_hiwater); fd <= hi; fd++)
			if (tb_fd_is_internal(fd))
				close_unheld(fd);
	}
	while (dfd >= 0 && (n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (long at = 0; at < n;) {
			struct { uint64_t ino; int64_t off; unsigned short len; unsigned char type;
				 char name[]; } *e = (void *)(buf + at);
			char *end;
			long fd = strtol(e->name, &end, 10);

			if (end != e->name && *end == '\0' && fd != dfd)
				close_unheld((int)fd);
			at += e->len;
		}
	}
	if (dfd >= 0)
		tb_real.close(dfd);
	munmap(held_bits, held_len);
	held_bits = NULL;
}
