/* stale.c - noticing fd slots whose socket is gone: the program closed the number where no
 * hook could see it (syscall(SYS_close), a libc-internal close) and perhaps reused it. */
#include "stale.h"

#include <errno.h>

#include "fdtable.h"
#include "gate.h"
#include "sock.h"
#include "thread.h"

void tb_stale_drop(int fd, struct tb_sock *s, uint32_t gen)
{
	if (!tb_foreign_process() && tb_sock_take_if_stale(s, gen, fd))
		tb_sock_unref(s);
}

bool tb_stale_check_gen(int fd, struct tb_sock *s, uint32_t gen)
{
	int saved = errno;
	bool ours, taken = false;

	/* Under `busy` with the generation (tb_sock_check_slot): an inode looked at, then a
	 * take outside it, could take another thread's new socket - the number closed and
	 * connected again, with the same pool entry, in between (regress/expired_stale_reuse).
	 * A vfork child changes nothing of its parent's, `busy` included: it only looks. */
	if (!tb_foreign_process())
		ours = tb_sock_check_slot(s, gen, fd, &taken);
	else
		ours = tb_sock_names(s, gen, fd);
	if (taken)
		tb_sock_unref(s);
	errno = saved;
	return ours;
}

bool tb_stale_check(int fd, struct tb_sock *s)
{
	return tb_stale_check_gen(fd, s, TB_ST_GEN(tb_sock_word(s)));
}

void tb_stale_sweep_gate(struct tb_gate *g)
{
	int hi;

	/* A shared gate's fullness is only known by probing its locks: not swept here (its
	 * slots still come back at close, and at the holder's exit). */
	if (g->shared != NULL || atomic_load(&g->leased) < atomic_load_explicit(&g->max, memory_order_relaxed))
		return;
	hi = atomic_load(&tb_fd_hiwater);
	for (int fd = 0; fd <= hi; fd++) {
		struct tb_sock *s = tb_fd_sock(fd);

		uint32_t gen;

		if (s == NULL)
			continue;
		gen = TB_ST_GEN(tb_sock_word(s));
		if (atomic_load(&s->has_slot) &&
		    atomic_load_explicit(&tb_sock_rare(s)->gate, memory_order_relaxed) == g &&
		    !tb_foreign_process() && tb_sock_take_if_stale(s, gen, fd))
			tb_sock_unref(s);
	}
}
