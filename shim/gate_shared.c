/* gate_shared.c - the cross-process gate. A slot is an open-file-description lock
 * (F_OFD_SETLK) on one byte of a per-destination file under /dev/shm/timebox-<uid>/: the
 * kernel drops it when the last fd of that description closes, so a slot follows its socket
 * through fork (the child shares the description) and comes back at once when every holder
 * is gone, SIGKILL included. The file's first page, mapped shared, holds a futex word that
 * releases bump, and counters. Its contents are hints: a crashed run leaves nothing that
 * could block the next one, because only the locks say who holds what. */
#include "gate_shared.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
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
#include "gate.h"
#include "log.h"
#include "real.h"

#define PAGE 4096
#define SLOT_BASE PAGE   /* byte SLOT_BASE + i is slot i */
#define POLL_NS (20 * TB_NS_PER_MS) /* a waiter looks again at least this often */
#define HIGH_FD 512      /* keep our fds out of the program's low numbers */

struct shm_page {
	atomic_uint seq;     /* futex word: bumped by every release */
	atomic_uint hint;    /* the slot to try first */
	atomic_int pending;  /* callers waiting (a count, repaired by probing: see counts) */
	atomic_ulong acquired, timed_out, rejected;
};

struct tb_shared_gate {
	struct tb_dest dest;
	char path[160];
	int max, max_pending;
	struct shm_page *page;
};

static int lock_byte(int fd, short type, off_t at, int cmd)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1 };

	return tb_real.fcntl(fd, cmd, &fl);
}

/* Our directory must be ours alone: a directory another user controls could hand us a file
 * that lets them hold our slots or read our destinations. */
static int check_dir(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -1;
	if (lstat(dir, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

static void name_file(char *buf, size_t len, const char *dir, const struct tb_dest *d,
		      const struct tb_settings *set)
{
	char dest[TB_DEST_STRLEN];

	tb_dest_format(d, dest, sizeof(dest));
	for (char *p = dest; *p; p++)
		if (*p == ':' || *p == '[' || *p == ']')
			*p = '_';
	snprintf(buf, len, "%s/gate-%s-max%d", dir, dest, set->max_conns);
}

/* A new fd on the gate file, high, close-on-exec, and shielded from the program's close. */
static int open_file(const char *path, int flags)
{
	int fd = open(path, flags | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600), high;

	if (fd < 0)
		return -1;
	high = tb_real.fcntl(fd, F_DUPFD_CLOEXEC, HIGH_FD);
	if (high >= 0) {
		tb_real.close(fd);
		fd = high;
	}
	tb_fd_mark_internal(fd);
	return fd;
}

static void close_file(int fd)
{
	tb_fd_unmark_internal(fd);
	tb_real.close(fd);
}

struct tb_shared_gate *tb_shared_gate_open(const struct tb_dest *d, const struct tb_settings *set)
{
	char dir[64], why[400];
	struct tb_shared_gate *g = calloc(1, sizeof(*g));
	struct stat st;
	int fd = -1, saved = errno;
	void *p;

	if (g == NULL)
		goto fail;
	snprintf(dir, sizeof(dir), "/dev/shm/timebox-%u", (unsigned)getuid());
	if (check_dir(dir) < 0)
		goto fail;
	name_file(g->path, sizeof(g->path), dir, d, set);
	fd = open_file(g->path, O_CREAT);
	if (fd < 0 || fstat(fd, &st) < 0)
		goto fail;
	if (!S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
		errno = EPERM;
		goto fail;
	}
	if (st.st_size < PAGE && ftruncate(fd, PAGE) < 0)
		goto fail;
	p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	close_file(fd);
	g->page = p;
	g->dest = *d;
	g->max = set->max_conns;
	g->max_pending = set->max_pending;
	errno = saved;
	return g;
fail:
	snprintf(why, sizeof(why),
		 "event=error what=shared_gate path=%s error=\"%s\" effect=\"a gate per process\"",
		 g != NULL && g->path[0] ? g->path : dir, strerror(errno));
	tb_log_error(why);
	if (fd >= 0)
		close_file(fd);
	free(g);
	errno = saved;
	return NULL;
}

/* Tries every slot once, starting at the hint. Returns true with a slot locked on fd. */
static bool try_slots(struct tb_shared_gate *g, int fd)
{
	unsigned start = atomic_load_explicit(&g->page->hint, memory_order_relaxed);

	for (int k = 0; k < g->max; k++) {
		unsigned i = (start + (unsigned)k) % (unsigned)g->max;

		if (lock_byte(fd, F_WRLCK, SLOT_BASE + (off_t)i, F_OFD_SETLK) == 0) {
			atomic_store_explicit(&g->page->hint, (i + 1) % (unsigned)g->max,
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
	for (int j = 0; j < g->max_pending; j++)
		if (lock_byte(fd, F_WRLCK, SLOT_BASE + g->max + (off_t)j, F_OFD_SETLK) == 0)
			return true;
	return false;
}

/* Our description holds one seat; unlocking the whole room releases just that one. */
static void leave_seat(struct tb_shared_gate *g, int fd)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET,
			    .l_start = SLOT_BASE + g->max, .l_len = g->max_pending };

	tb_real.fcntl(fd, F_OFD_SETLK, &fl);
}

static void futex_wait_shared(atomic_uint *word, unsigned val, int64_t at)
{
	struct timespec ts = { at / TB_NS_PER_S, at % TB_NS_PER_S };

	syscall(SYS_futex, word, FUTEX_WAIT_BITSET, val, &ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

int tb_shared_gate_acquire(struct tb_shared_gate *g, const struct tb_settings *set,
			   bool nonblock, int fd, int64_t call_start, int64_t call_deadline,
			   enum tb_phase *phase, int *slot_fd)
{
	int lfd = open_file(g->path, 0), saved = errno;
	struct tb_expiry bound;
	int64_t begin, now;
	bool seated = false;

	if (lfd < 0)
		return 1; /* the gate file is out of reach (fd limit): go ungated, not broken */
	if (try_slots(g, lfd))
		goto took;
	if (nonblock && set->gate_nonblocking == TB_GATE_NB_FAIL) {
		atomic_fetch_add(&g->page->rejected, 1);
		tb_log_reject(TB_PHASE_GATE, &g->dest, fd, "full");
		goto refuse;
	}
	if (g->max_pending > 0) {
		if (!take_seat(g, lfd)) {
			atomic_fetch_add(&g->page->rejected, 1);
			tb_log_reject(TB_PHASE_GATE, &g->dest, fd, "max_pending");
			goto refuse;
		}
		seated = true;
	}
	atomic_fetch_add(&g->page->pending, 1);
	begin = tb_now();
	bound = tb_gate_wait_bound(begin, set->acquire_ns, call_deadline);
	for (;;) {
		unsigned seq = atomic_load(&g->page->seq);
		int64_t until;

		if (try_slots(g, lfd))
			break;
		now = tb_now();
		if (now >= bound.at) {
			atomic_fetch_sub(&g->page->pending, 1);
			atomic_fetch_add(&g->page->timed_out, 1);
			*phase = bound.phase;
			if (bound.phase == TB_PHASE_DEADLINE)
				tb_log_timeout(TB_PHASE_DEADLINE, &g->dest, fd, now - call_start,
					       call_deadline - call_start, 0);
			else
				tb_log_timeout(TB_PHASE_GATE, &g->dest, fd, now - begin,
					       set->acquire_ns, 0);
			close_file(lfd);
			errno = ETIMEDOUT;
			return -1;
		}
		/* Wake on a release here, or look again soon: a holder that died releases its
		 * slot without bumping anything. */
		until = now + POLL_NS < bound.at ? now + POLL_NS : bound.at;
		futex_wait_shared(&g->page->seq, seq, until);
	}
	atomic_fetch_sub(&g->page->pending, 1);
	if (seated)
		leave_seat(g, lfd);
took:
	atomic_fetch_add(&g->page->acquired, 1);
	*slot_fd = lfd;
	errno = saved;
	return 0;
refuse:
	close_file(lfd);
	errno = EAGAIN;
	return -1;
}

void tb_shared_gate_release(struct tb_shared_gate *g, int slot_fd)
{
	close_file(slot_fd);
	atomic_fetch_add(&g->page->seq, 1);
	syscall(SYS_futex, &g->page->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void tb_shared_gate_counts(struct tb_shared_gate *g, long *leased, long *pending)
{
	int fd = open_file(g->path, 0);

	*leased = 0;
	*pending = atomic_load(&g->page->pending);
	if (fd < 0)
		return;
	for (int i = 0; i < g->max; i++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = SLOT_BASE + i, .l_len = 1 };

		if (tb_real.fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK)
			(*leased)++;
	}
	close_file(fd);
}

void tb_shared_gate_stats(struct tb_shared_gate *g, unsigned long *acquired,
			  unsigned long *timed_out, unsigned long *rejected)
{
	*acquired = atomic_load(&g->page->acquired);
	*timed_out = atomic_load(&g->page->timed_out);
	*rejected = atomic_load(&g->page->rejected);
}
