/* fdtable.c - the fd-indexed table of governed sockets.
 * Sized from the hard RLIMIT_NOFILE and mapped MAP_NORESERVE: pages are touched only for
 * fd numbers a governed socket actually used, so a 1M-entry table costs a few KB. */
#include "fdtable.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "real.h"

#define FD_CAP_MAX (1 << 20)

_Atomic(struct tb_sock *) *tb_fdtab;
atomic_int tb_fd_cap;
atomic_int tb_fd_hiwater = -1;
/* One bit per fd: timebox's own fds (the log file, shared-gate slot locks). Checked only by
 * close, close_range and dup2/dup3, never by the data path. */
static atomic_ulong *internal_bits;
atomic_int tb_fd_internal_hiwater = -1;

int tb_fdtable_init(void)
{
	struct rlimit rl;
	size_t cap = FD_CAP_MAX;
	void *p;

	if (atomic_load(&tb_fd_cap) > 0)
		return 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	    rl.rlim_max < cap)
		cap = rl.rlim_max < 1024 ? 1024 : (size_t)rl.rlim_max;
	p = mmap(NULL, cap * sizeof(*tb_fdtab), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	tb_fdtab = p;
	p = mmap(NULL, cap / 8 + sizeof(unsigned long), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p != MAP_FAILED)
		internal_bits = p;
	atomic_store(&tb_fd_cap, (int)cap);
	return 0;
}

static void raise_hiwater(int fd)
{
	int hi = atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed);

	while (fd > hi && !atomic_compare_exchange_weak(&tb_fd_hiwater, &hi, fd))
		;
}

bool tb_fd_set(int fd, struct tb_sock *s)
{
	if (fd < 0 || fd >= atomic_load_explicit(&tb_fd_cap, memory_order_acquire))
		return false;
	atomic_store_explicit(&tb_fdtab[fd], s, memory_order_release);
	if (s != NULL)
		raise_hiwater(fd);
	return true;
}

bool tb_fd_swap(int fd, struct tb_sock *s, struct tb_sock **old)
{
	*old = NULL;
	if (fd < 0 || fd >= atomic_load_explicit(&tb_fd_cap, memory_order_acquire))
		return false;
	*old = atomic_exchange(&tb_fdtab[fd], s);
	if (s != NULL)
		raise_hiwater(fd);
	return true;
}

bool tb_fd_take_if(int fd, struct tb_sock *s)
{
	if (fd < 0 || fd >= atomic_load_explicit(&tb_fd_cap, memory_order_acquire) || s == NULL)
		return false;
	return atomic_compare_exchange_strong(&tb_fdtab[fd], &s, NULL);
}

struct tb_sock *tb_fd_take(int fd)
{
	if (fd < 0 || fd >= atomic_load_explicit(&tb_fd_cap, memory_order_acquire))
		return NULL;
	if (atomic_load_explicit(&tb_fdtab[fd], memory_order_relaxed) == NULL)
		return NULL;
	return atomic_exchange(&tb_fdtab[fd], NULL);
}

#define BITS (8 * sizeof(unsigned long))

static bool internal_ok(int fd)
{
	/* The capacity first: its acquire makes internal_bits visible. */
	return fd >= 0 && fd < atomic_load_explicit(&tb_fd_cap, memory_order_acquire) &&
	       internal_bits != NULL;
}

void tb_fd_mark_internal(int fd)
{
	int hi;

	if (!internal_ok(fd))
		return;
	atomic_fetch_or(&internal_bits[fd / BITS], 1UL << (fd % BITS));
	hi = atomic_load(&tb_fd_internal_hiwater);
	while (fd > hi && !atomic_compare_exchange_weak(&tb_fd_internal_hiwater, &hi, fd))
		;
}

void tb_fd_unmark_internal(int fd)
{
	if (internal_ok(fd))
		atomic_fetch_and(&internal_bits[fd / BITS], ~(1UL << (fd % BITS)));
}

bool tb_fd_is_internal(int fd)
{
	return internal_ok(fd) &&
	       (atomic_load_explicit(&internal_bits[fd / BITS], memory_order_relaxed) >>
		(fd % BITS)) & 1;
}

/*
 * Where a copy of fd may go when no number >= TB_INTERNAL_FD_MIN exists (`ulimit -n 256`):
 * as high below the soft limit as one is free, F_DUPFD giving the lowest free number from
 * each start tried in turn. Never 0-2: a program started with them closed opens /dev/null
 * expecting exactly 0, 1 and 2.
 */
static int dup_below_limit(int fd)
{
	struct rlimit rl;
	int lim, high = -1;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return -1;
	lim = rl.rlim_cur > TB_INTERNAL_FD_MIN ? TB_INTERNAL_FD_MIN : (int)rl.rlim_cur;
	for (int back = 1; high < 0; back *= 8) {
		int from = lim - back < 3 ? 3 : lim - back;

		high = tb_real.fcntl(fd, F_DUPFD_CLOEXEC, from);
		if (from == 3)
			break;
	}
	return high;
}

int tb_fd_dup_internal(int fd)
{
	int saved = errno, high = tb_real.fcntl(fd, F_DUPFD_CLOEXEC, TB_INTERNAL_FD_MIN);

	if (high < 0)
		high = dup_below_limit(fd);
	errno = saved;
	return high;
}

int tb_fd_move_internal(int fd)
{
	int saved = errno, high = tb_fd_dup_internal(fd);

	if (high >= 0) {
		tb_real.close(fd);
		fd = high;
	} else if (fd <= 2) {
		tb_real.close(fd); /* the program's own numbers: the feature goes instead */
		errno = EMFILE;
		return -1;
	}
	tb_fd_mark_internal(fd);
	errno = saved;
	return fd;
}
