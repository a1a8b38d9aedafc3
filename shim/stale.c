/* stale.c - noticing fd slots whose socket is gone: the program closed the number where no
 * hook could see it (syscall(SYS_close), a libc-internal close) and perhaps reused it. */
#include "stale.h"

#include <errno.h>
#include <sys/stat.h>

#include "clock.h"
#include "fdtable.h"
#include "gate.h"
#include "sock.h"
#include "thread.h"
#include "xfer.h"

/* fd no longer names s: untrack it if it still points at s. A vfork child sees its own fd
 * table through its parent's slots; what differs there says nothing about the parent's. */
static void drop(int fd, struct tb_sock *s)
{
	if (tb_foreign_process())
		return;
	if (tb_fd_take_if(fd, s))
		tb_sock_unref(s);
}

bool tb_stale_check(int fd, struct tb_sock *s)
{
	int saved = errno;
	struct stat st;
	bool ours = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
		    (uint64_t)st.st_ino == atomic_load_explicit(&s->ino, memory_order_relaxed);

	if (!ours)
		drop(fd, s);
	errno = saved;
	return ours;
}

void tb_stale_abandon(struct tb_xfer *x)
{
	struct tb_sock *s = x->s;

	/* The wait began on s; end it before s can go back to the pool. The budget is not
	 * told: nothing was attempted on the socket. */
	if (s != NULL && TB_ST_GEN(tb_sock_word(s)) == x->gen) {
		if (x->waited)
			tb_sock_wait_end(s, x->side, tb_now(), false, x->gen);
		drop(x->fd, s);
	}
	x->s = NULL;
	errno = x->saved_errno;
}

void tb_stale_sweep_gate(struct tb_gate *g)
{
	int hi;

	/* A shared gate's fullness is only known by probing its locks: not swept here (its
	 * slots still come back at close, and at the holder's exit). */
	if (g->shared != NULL || atomic_load(&g->leased) < g->max)
		return;
	hi = atomic_load(&tb_fd_hiwater);
	for (int fd = 0; fd <= hi; fd++) {
		struct tb_sock *s = tb_fd_sock(fd);

		if (s != NULL && atomic_load(&s->has_slot) && s->gate == g)
			tb_stale_check(fd, s);
	}
}
