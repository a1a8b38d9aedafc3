/* hooks_fd.c - fd lifetime: close, close_range, closefrom, dup*, fcntl (F_DUPFD*, F_SETFL),
 * ioctl (FIONBIO), fclose, freopen and unshare (CLONE_FILES). Keeps the fd table exact so a
 * slot never outlives its socket, and keeps the program from closing timebox's own fds.
 *
 * Every path that changes the table first asks tb_foreign_process(): a vfork child (CPython's
 * subprocess closes every fd >= 3 with close_range between vfork and exec; posix_spawn and
 * JDK's VFORK launch clone the same way) shares its parent's memory but has its own fd
 * table, so it is passed straight to libc and changes nothing of the parent's. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "epoll_set.h"
#include "fdtable.h"
#include "gates.h"
#include "hooks.h"
#include "libc_compat.h"
#include "log.h"
#include "prop_io.h"
#include "real.h"
#include "sock.h"
#include "stale.h"
#include "protect.h"
#include "stats.h"
#include "thread.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/*
 * fd is going away (close, dup2 over it): untrack it. Returns its socket, or NULL; the
 * caller drops the reference with drop() only after the real close, so that a gate slot
 * passes to a waiter only once the old connection is really closed.
 */
static struct tb_sock *detach(int fd)
{
	struct tb_sock *s = tb_fd_take(fd);

	if (s != NULL) {
		const struct tb_settings *set = atomic_load(&s->set);

		tb_budget_on_close(tb_budget_here(), set);
		tb_stats_closed(s);
		if (TB_UNLIKELY(set->protects))
			tb_prot_closed(s);
	}
	return s;
}

static void drop(struct tb_sock *s)
{
	int saved = errno;

	if (s != NULL)
		tb_sock_unref(s);
	errno = saved;
}

/* The watchdog may be between its identity check and shutdown() on this fd number: wait
 * for it before the number is released to the kernel (microseconds at most). */
static void quiesce(struct tb_sock *s)
{
	if (s != NULL)
		tb_sock_quiesce(s);
}

/*
 * fd is about to be copied (dup*, F_DUPFD): a reference on its socket, taken before the
 * kernel's copy, or NULL when fd is not governed. Another thread may close fd meanwhile:
 * the socket then stays for the copy, which still holds the connection open, instead of
 * being freed - and its pool entry and fd number reused by another connect - before the
 * copy is tracked (regress/dup_while_closed).
 */
static struct tb_sock *hold(int fd)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (s == NULL || tb_foreign_process() || !tb_sock_ref_live(s))
		return NULL;
	return s;
}

/*
 * The kernel just handed out newfd as a copy of oldfd: newfd refers to the socket of the
 * file it copied, if governed, and to nothing it referred to before (a socket still
 * recorded there was closed unseen, by a raw close system call: keeping it would leak that
 * reference, and with it a gate slot, for good). `held` is hold(oldfd), taken before the
 * kernel's copy; it goes to newfd, or is dropped. The copy is known by its inode: oldfd's
 * number may have been closed and reused by another thread around the kernel's call.
 * Callers check first that oldfd or newfd is tracked, or held is set.
 */
static void duplicate(int oldfd, int newfd, struct tb_sock *held)
{
	struct tb_sock *s = NULL, *old;
	struct stat st;

	if (newfd < 0 || tb_foreign_process()) {
		drop(held);
		return;
	}
	if (tb_fstat_raw(newfd, &st) == 0 && S_ISSOCK(st.st_mode)) {
		if (held != NULL && atomic_load(&held->ino) == (uint64_t)st.st_ino) {
			s = held;
			held = NULL;
		} else if ((s = hold(oldfd)) != NULL &&
			   atomic_load(&s->ino) != (uint64_t)st.st_ino) {
			drop(s); /* oldfd's number names another connection now */
			s = NULL;
		}
	}
	drop(held);
	if (!tb_fd_swap(newfd, s, &old)) {
		drop(s);
		return;
	}
	drop(old);
}

/* The program is about to dup2/dup3 over one of our fds: move ours out of the way first. */
static void evacuate(int fd)
{
	int moved;

	if (!tb_fd_is_internal(fd))
		return;
	tb_gates_in_hand(NULL, 1); /* the copy is a slot's before its socket records it */
	moved = tb_fd_dup_internal(fd);
	/* It is the log file or a shared-gate slot lock; the dup2 about to happen closes
	 * the old number, and the copy keeps the file (and the slot's lock) open. With no
	 * number free for a copy, the log stops writing to what is about to be the program's. */
	tb_log_fd_moved(fd, moved);
	if (moved >= 0)
		tb_sock_slot_fd_moved(fd, moved);
	tb_gates_in_hand(NULL, -1);
}

/* The program put something of its own on fd 2: its stderr from now on (log_sink.h). */
static int onto_stderr(int r)
{
	if (r == 2 && !tb_foreign_process())
		tb_log_stderr_replaced();
	return r;
}

static TB_SLOW int close_tracked(int fd)
{
	struct tb_sock *s;
	int r;

	if (tb_foreign_process())
		return tb_real.close(fd);
	s = detach(fd);
	quiesce(s);
	/* Its epoll registrations (one kept alive by a dup stays unfollowed). Before the real
	 * close: after it the number may already name another thread's new socket. */
	if (atomic_load_explicit(&tb_eptab, memory_order_relaxed) != NULL)
		tb_epset_forget_fd(fd);
	r = tb_real.close(fd);
	drop(s);
	return r;
}

/* An epoll instance: its record of registrations goes with it, before the number is free
 * for another thread's epoll_create. */
static TB_SLOW int close_epoll(int fd)
{
	if (!tb_foreign_process())
		tb_epset_drop(fd);
	return tb_real.close(fd);
}

/* A new number the kernel handed out (dup, F_DUPFD) still has an epoll instance's record:
 * that instance was closed unseen (a raw close system call), and the number now names
 * another file, whose registrations, if it is an epoll fd, are not known. */
static TB_SLOW void forget_instance(int fd)
{
	int saved = errno;

	if (!tb_foreign_process())
		tb_epset_drop(fd);
	errno = saved;
}

/* Ours: the program never opened it, so pretend it is gone. A vfork child closes its own
 * copy (the parent's stays open, and so does a shared gate's lock on it). */
static TB_SLOW int close_internal(int fd)
{
	return tb_foreign_process() ? tb_real.close(fd) : 0;
}

/* A scope=request process: fd may be an inbound connection (prop_io.h), forgotten while its
 * number is still ours, before the kernel can hand it to another thread's accept. */
static TB_SLOW int close_maybe_inbound(int fd)
{
	tb_pin_forget(fd);
	return tb_real.close(fd);
}

/* newfd (r, when the duplicating call succeeded) now copies oldfd: an inbound connection's
 * fd follows, one dup'ed over goes (prop_io.h). Only in a scope=request process. */
static int follow_inbound(int oldfd, int r)
{
	if (r >= 0 && TB_UNLIKELY(tb_pin_enabled()))
		tb_pin_dup(oldfd, r);
	return r;
}

TB_EXPORT int close(int fd)
{
	if (TB_LIKELY(tb_fd_sock(fd) == NULL)) {
		if (TB_UNLIKELY(tb_fd_is_internal(fd)))
			return close_internal(fd);
		if (TB_UNLIKELY(tb_epset_known(fd)))
			return close_epoll(fd);
		if (TB_UNLIKELY(tb_pin_enabled()))
			return close_maybe_inbound(fd);
		return tb_real.close(fd);
	}
	return close_tracked(fd);
}

/* Governed fds detached per real close_range call, at most (no allocation here). */
#define SPAN_BATCH 64

/*
 * close_range over [lo, hi], which holds none of our internal fds. The governed fds in it
 * are detached first (while still open, their numbers cannot be reused), the kernel then
 * closes the range, and only then do their sockets go (a gate slot goes back only after the
 * real close). The range is closed by one real call - or one per SPAN_BATCH governed fds:
 * closing a governed fd on its own first would free its number while the range's call is
 * still to come, and a number another thread got meanwhile would be closed under it.
 * With CLOSE_RANGE_UNSHARE (the table is the other threads' too: close_range) the range
 * closes in the caller's copy only: nothing is detached.
 */
static int close_span(unsigned lo, unsigned hi, int flags)
{
	struct tb_sock *held[SPAN_BATCH];
	int held_fd[SPAN_BATCH];
	int hw = (flags & CLOSE_RANGE_UNSHARE) ? -1 : atomic_load(&tb_fd_hiwater), rc = 0;

	while (lo <= hi) {
		unsigned end = hi;
		int n = 0;

		for (unsigned fd = lo; hw >= 0 && fd <= hi && fd <= (unsigned)hw; fd++) {
			struct tb_sock *s = detach((int)fd);

			if (s == NULL)
				continue;
			quiesce(s);
			held_fd[n] = (int)fd;
			held[n++] = s;
			if (n == SPAN_BATCH) {
				end = fd;
				break;
			}
		}
		if (tb_real.close_range(lo, end, flags) < 0) {
			/* Refused (EINVAL, ENOMEM): nothing closed, they are tracked again. */
			rc = -1;
			for (int k = 0; k < n; k++)
				if (tb_fd_set(held_fd[k], held[k]))
					held[k] = NULL;
		}
		for (int k = 0; k < n; k++)
			drop(held[k]);
		if (end == hi)
			break;
		lo = end + 1;
	}
	return rc;
}

/* close_range for the process timebox set up: untracks what closes, skips our own fds. */
static int close_range_own(unsigned first, unsigned last, int flags)
{
	unsigned lo = first;
	int rc = 0, ihi = atomic_load(&tb_fd_internal_hiwater);

	if (TB_UNLIKELY(tb_pin_enabled()) && !(flags & CLOSE_RANGE_UNSHARE))
		tb_pin_forget_range(first, last);
	/* The epoll instances it closes: their records go, as at close (close_epoll), else a
	 * number reused by a copy of another instance (dup) inherited the old registrations
	 * and its waits marked sockets the kernel no longer watched for it
	 * (regress/epoll_close_range_record). */
	if (!(flags & CLOSE_RANGE_UNSHARE))
		tb_epset_drop_range(first, last);
	for (unsigned fd = first; ihi >= 0 && fd <= last && fd <= (unsigned)ihi; fd++) {
		if (!tb_fd_is_internal((int)fd))
			continue;
		if (fd > lo && close_span(lo, fd - 1, flags) < 0)
			rc = -1;
		lo = fd + 1;
		if (fd == last)
			return rc;
	}
	if (lo <= last && close_span(lo, last, flags) < 0)
		rc = -1;
	return rc;
}

/*
 * The caller asks for a table of its own (close_range's CLOSE_RANGE_UNSHARE, unshare's
 * CLONE_FILES): the kernel copies the table when another thread shares it, and does nothing
 * otherwise. timebox's own threads share it, so in a program with no other thread the copy
 * would be made where natively none is: the caller's close would then close nothing of
 * what timebox's threads keep open, and a peer waited for an end of stream that natively
 * comes at once (tests/regress/close_range_unshare.c). True when natively no copy would be
 * made: the request is then dropped. A vfork child has a table of its own already.
 */
static bool unshare_is_noop(void)
{
	return !tb_foreign_process() && tb_thread_program_alone();
}

TB_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	/* Kept when other threads of the program share the table: the range then closes in
	 * the caller's copy and stays open in theirs, still tracked (close_span). */
	if (TB_UNLIKELY(flags & CLOSE_RANGE_UNSHARE) && unshare_is_noop())
		flags &= ~CLOSE_RANGE_UNSHARE;
	if (flags & CLOSE_RANGE_CLOEXEC)
		return tb_real.close_range(first, last, flags); /* nothing closes before exec */
	if (first > last || tb_foreign_process())
		return tb_real.close_range(first, last, flags);
	return close_range_own(first, last, flags);
}

/* Beyond CLONE_FILES, every flag goes to the kernel as it came: unshare(0) does nothing
 * and succeeds, as natively unshare(CLONE_FILES) does in a program with one thread. */
TB_EXPORT int unshare(int flags)
{
	if (TB_UNLIKELY(flags & CLONE_FILES) && unshare_is_noop())
		flags &= ~CLONE_FILES;
	return tb_real.unshare(flags);
}

/* closefrom (glibc 2.34+) closes inside libc, out of our sight: bound here, at load time, so
 * that a vfork child never runs dlsym on its parent's memory. */
static void (*real_closefrom)(int);

__attribute__((constructor)) static void bind_closefrom(void)
{
	*(void **)&real_closefrom = dlsym(RTLD_NEXT, "closefrom");
}

/* Interposed so the sockets it closes are untracked (their gate slots come back) and our
 * own fds - the log file, shared-gate locks - stay open. A kernel without close_range
 * (before 5.9) gets glibc's own closefrom, which closes ours too. */
TB_EXPORT void closefrom(int lowfd)
{
	unsigned lo = lowfd > 0 ? (unsigned)lowfd : 0;
	int saved = errno;

	if (!tb_foreign_process() && close_range_own(lo, ~0U, 0) == 0) {
		errno = saved;
		return;
	}
	errno = saved;
	if (real_closefrom != NULL)
		real_closefrom(lowfd);
	/* It closed, unseen, the governed fds that close_range_own gave back to the table
	 * when the kernel refused close_range: their slots go now. */
	for (int fd = (int)lo, hw = atomic_load(&tb_fd_hiwater); fd <= hw; fd++) {
		struct tb_sock *s = tb_fd_sock(fd);

		if (s != NULL && !tb_foreign_process())
			tb_stale_check(fd, s);
	}
	errno = saved;
}

TB_EXPORT int dup(int fd)
{
	struct tb_sock *held = hold(fd);
	int nfd = follow_inbound(fd, tb_real.dup(fd));

	if (TB_UNLIKELY(nfd >= 0 && tb_epset_known(nfd)))
		forget_instance(nfd);
	if (nfd >= 0 &&
	    TB_UNLIKELY(held != NULL || tb_fd_sock(fd) != NULL || tb_fd_sock(nfd) != NULL))
		duplicate(fd, nfd, held);
	else
		drop(held);
	return TB_UNLIKELY(nfd == 2) ? onto_stderr(nfd) : nfd;
}

/* dup2 and dup3 onto a different fd: newfd's old socket (if any) goes, oldfd's comes. */
static int dup_onto(int oldfd, int newfd, int flags, bool is_dup3)
{
	struct tb_sock *gone, *held;
	int r;

	if (tb_foreign_process())
		return is_dup3 ? tb_real.dup3(oldfd, newfd, flags) : tb_real.dup2(oldfd, newfd);
	evacuate(newfd);
	gone = detach(newfd);
	quiesce(gone);
	held = hold(oldfd);
	r = is_dup3 ? tb_real.dup3(oldfd, newfd, flags) : tb_real.dup2(oldfd, newfd);
	if (r < 0) {
		if (gone != NULL && !tb_fd_set(newfd, gone)) /* still open: tracked again */
			drop(gone);
		drop(held);
		return r;
	}
	drop(gone);
	/* An epoll fd dup'ed over is closed: its instance's record goes, as at close (the
	 * number now names oldfd's file, whose registrations are not known). */
	if (TB_UNLIKELY(tb_epset_known(newfd)))
		tb_epset_drop(newfd);
	if (held != NULL || tb_fd_sock(oldfd) != NULL)
		duplicate(oldfd, newfd, held);
	return r;
}

/* Neither end is ours, nor newfd an epoll fd with a record: libc alone. */
static bool untouched(int oldfd, int newfd)
{
	return tb_fd_sock(oldfd) == NULL && tb_fd_sock(newfd) == NULL &&
	       !tb_fd_is_internal(newfd) && !tb_epset_known(newfd);
}

TB_EXPORT int dup2(int oldfd, int newfd)
{
	/* dup2(fd, fd) only checks fd: the socket keeps its one reference. */
	if (oldfd == newfd)
		return tb_real.dup2(oldfd, newfd);
	if (TB_UNLIKELY(newfd == 2))
		return onto_stderr(follow_inbound(oldfd, dup_onto(oldfd, newfd, 0, false)));
	if (TB_LIKELY(untouched(oldfd, newfd)))
		return follow_inbound(oldfd, tb_real.dup2(oldfd, newfd));
	return follow_inbound(oldfd, dup_onto(oldfd, newfd, 0, false));
}

TB_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (oldfd != newfd && TB_UNLIKELY(newfd == 2))
		return onto_stderr(follow_inbound(oldfd, dup_onto(oldfd, newfd, flags, true)));
	if (oldfd == newfd)
		return tb_real.dup3(oldfd, newfd, flags); /* EINVAL */
	if (TB_LIKELY(untouched(oldfd, newfd)))
		return follow_inbound(oldfd, tb_real.dup3(oldfd, newfd, flags));
	return follow_inbound(oldfd, dup_onto(oldfd, newfd, flags, true));
}

/* fcntl F_DUPFD and F_DUPFD_CLOEXEC: the copy follows fd's socket, as dup's. */
static TB_SLOW int fcntl_dup(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	struct tb_sock *held = hold(fd);
	int r = follow_inbound(fd, real(fd, cmd, arg));

	if (TB_UNLIKELY(r >= 0 && tb_epset_known(r)))
		forget_instance(r);
	if (r >= 0 && (held != NULL || tb_fd_sock(fd) != NULL || tb_fd_sock(r) != NULL))
		duplicate(fd, r, held);
	else
		drop(held);
	return r;
}

/* fcntl and fcntl64: forward, then follow duplicates and O_NONBLOCK changes of a governed
 * fd (the open file description is shared, so a vfork child's change is its parent's
 * too). The optional third argument is forwarded as a pointer-sized value (see real.c). */
static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	struct tb_sock *s;
	int r;

	if (TB_UNLIKELY(cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		return fcntl_dup(real, fd, cmd, arg);
	r = real(fd, cmd, arg);
	s = tb_fd_sock(fd);
	if (TB_UNLIKELY(s != NULL) && r >= 0 && cmd == F_SETFL)
		atomic_store(&s->nonblock, ((long)arg & O_NONBLOCK) != 0);
	return r;
}

TB_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(tb_real.fcntl, fd, cmd, arg);
}

TB_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(tb_real.fcntl64, fd, cmd, arg);
}

/* Python sets O_NONBLOCK with ioctl(FIONBIO), not fcntl. */
TB_EXPORT int ioctl(int fd, tb_ioctl_req req, ...)
{
	va_list ap;
	void *arg;
	int r;
	struct tb_sock *s;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	r = tb_real.ioctl(fd, req, arg);
	s = tb_fd_sock(fd);
	if (TB_UNLIKELY(s != NULL) && r == 0 && req == FIONBIO && arg != NULL)
		atomic_store(&s->nonblock, *(const int *)arg != 0);
	return r;
}

/* glibc's fclose closes the fd internally, out of our sight: untrack it first (an inbound
 * connection too, whose number a file or a pipe may get next: regress/inbound_fclose). */
TB_EXPORT int fclose(FILE *f)
{
	int fd = f != NULL ? fileno(f) : -1;

	struct tb_sock *s = NULL;
	int r;

	if (fd >= 0 && TB_UNLIKELY(tb_pin_enabled()))
		tb_pin_forget(fd);
	if (fd >= 0 && TB_UNLIKELY(tb_fd_sock(fd) != NULL) && !tb_foreign_process()) {
		s = detach(fd);
		quiesce(s);
	}
	r = tb_real.fclose(f);
	drop(s);
	return r;
}

/*
 * freopen closes the stream's fd and puts the new file on its number with glibc's own dup3,
 * out of our sight. A governed socket under the stream is untracked first, as in fclose. A
 * stream that is now on fd 2 is the program's own choice of stderr: a daemon's
 * freopen(log, "a", stderr) gets timebox's lines there, as after its own dup2
 * (regress/log_stderr_freopen); a data file that merely landed on fd 2 does not.
 */
static FILE *reopen(FILE *(*real)(const char *, const char *, FILE *), const char *path,
		    const char *mode, FILE *f)
{
	int fd = f != NULL ? fileno(f) : -1;
	struct tb_sock *s = NULL;
	FILE *r;

	if (fd >= 0 && TB_UNLIKELY(tb_pin_enabled()))
		tb_pin_forget(fd);
	if (fd >= 0 && TB_UNLIKELY(tb_fd_sock(fd) != NULL) && !tb_foreign_process()) {
		s = detach(fd);
		quiesce(s);
	}
	r = real(path, mode, f);
	drop(s);
	if (r != NULL && fileno(r) == 2 && !tb_foreign_process())
		tb_log_stderr_replaced();
	return r;
}

TB_EXPORT FILE *freopen(const char *path, const char *mode, FILE *f)
{
	return reopen(tb_real.freopen, path, mode, f);
}

TB_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *f)
{
	return reopen(tb_real.freopen64, path, mode, f);
}
