/* real.c - the bound libc table. Every entry starts at a boot stub so that a hook called
 * before our constructor (another library's constructor doing I/O) still works. */
#include "real.h"

#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread int binding __attribute__((tls_model("initial-exec")));
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static long sys_poll(struct pollfd *p, nfds_t n, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	return syscall(SYS_ppoll, p, n, ms < 0 ? NULL : &ts, NULL, _NSIG / 8);
}

/* The kernel writes the time left back into pselect6's timeout; pselect(2) promises not to
 * touch the caller's, so it gets a copy (as glibc does). */
static long sys_pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
			const sigset_t *s)
{
	struct timespec copy, *tp = NULL;
	struct {
		const sigset_t *set;
		size_t size;
	} mask = { s, _NSIG / 8 };

	if (t != NULL) {
		copy = *t;
		tp = &copy;
	}
	return syscall(SYS_pselect6, n, r, w, e, tp, &mask);
}

/* aarch64 has no epoll_create system call; the size only has to be positive. */
static long sys_epoll_create(int size)
{
	if (size <= 0) {
		errno = EINVAL;
		return -1;
	}
	return syscall(SYS_epoll_create1, 0);
}

static long sys_epoll_pwait2(int ep, struct epoll_event *e, int n, const struct timespec *t,
			     const sigset_t *s)
{
#ifdef SYS_epoll_pwait2
	return syscall(SYS_epoll_pwait2, ep, e, n, t, s, _NSIG / 8);
#else
	(void)ep, (void)e, (void)n, (void)t, (void)s;
	errno = ENOSYS;
	return -1;
#endif
}

/*
 * Per entry, two functions. raw_NAME makes the system call itself: it is what a boot stub
 * uses while the binding is under way on its own thread (the only way not to deadlock),
 * and what the entry is bound to when libc has no NAME. boot_NAME binds, then forwards
 * through the table, which by then never points back at a boot stub.
 */
#define ENTRY(ret, name, params, args, raw)                                                \
	static ret raw_##name params                                                        \
	{                                                                                   \
		return (ret)(raw);                                                          \
	}                                                                                   \
	static ret boot_##name params                                                       \
	{                                                                                   \
		if (tb_real_bind() == 0)                                                    \
			return tb_real.name args;                                           \
		return raw_##name args;                                                     \
	}

ENTRY(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n), syscall(SYS_read, fd, b, n))
ENTRY(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n),
      syscall(SYS_write, fd, b, n))
ENTRY(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n),
      syscall(SYS_readv, fd, v, n))
ENTRY(ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n),
      syscall(SYS_writev, fd, v, n))
ENTRY(ssize_t, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f),
      syscall(SYS_recvfrom, fd, b, n, f, NULL, NULL))
ENTRY(ssize_t, send, (int fd, const void *b, size_t n, int f), (fd, b, n, f),
      syscall(SYS_sendto, fd, b, n, f, NULL, 0))
ENTRY(ssize_t, recvfrom,
      (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l),
      (fd, b, n, f, a, l), syscall(SYS_recvfrom, fd, b, n, f, a, l))
ENTRY(ssize_t, sendto,
      (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l),
      (fd, b, n, f, a, l), syscall(SYS_sendto, fd, b, n, f, a, l))
ENTRY(ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f),
      syscall(SYS_recvmsg, fd, m, f))
ENTRY(ssize_t, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f),
      syscall(SYS_sendmsg, fd, m, f))
ENTRY(int, recvmmsg, (int fd, struct mmsghdr *v, unsigned int n, tb_mmsg_flags f,
		     struct timespec *t), (fd, v, n, f, t), syscall(SYS_recvmmsg, fd, v, n, f, t))
ENTRY(int, sendmmsg, (int fd, struct mmsghdr *v, unsigned int n, tb_mmsg_flags f),
      (fd, v, n, f), syscall(SYS_sendmmsg, fd, v, n, f))
ENTRY(ssize_t, sendfile, (int out, int in, off_t *o, size_t n), (out, in, o, n),
      syscall(SYS_sendfile, out, in, o, n))
ENTRY(int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t), sys_poll(p, n, t))
ENTRY(int, ppoll, (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *s),
      (p, n, t, s), syscall(SYS_ppoll, p, n, t, s, _NSIG / 8))
ENTRY(int, select, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t),
      (n, r, w, e, t), syscall(SYS_select, n, r, w, e, t))
ENTRY(int, pselect,
      (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *s),
      (n, r, w, e, t, s), sys_pselect(n, r, w, e, t, s))
ENTRY(int, connect, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l),
      syscall(SYS_connect, fd, a, l))
ENTRY(int, socket, (int d, int t, int p), (d, t, p), syscall(SYS_socket, d, t, p))
ENTRY(int, accept, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l),
      syscall(SYS_accept, fd, a, l))
ENTRY(int, accept4, (int fd, struct sockaddr *a, socklen_t *l, int f), (fd, a, l, f),
      syscall(SYS_accept4, fd, a, l, f))
ENTRY(int, getsockopt, (int fd, int lv, int nm, void *v, socklen_t *l), (fd, lv, nm, v, l),
      syscall(SYS_getsockopt, fd, lv, nm, v, l))
ENTRY(int, close, (int fd), (fd), syscall(SYS_close, fd))
ENTRY(int, close_range, (unsigned a, unsigned b, int f), (a, b, f),
      syscall(SYS_close_range, a, b, f))
ENTRY(int, unshare, (int f), (f), syscall(SYS_unshare, f))
ENTRY(int, dup, (int fd), (fd), syscall(SYS_dup, fd))
ENTRY(int, dup2, (int a, int b), (a, b), syscall(SYS_dup2, a, b))
ENTRY(int, dup3, (int a, int b, int f), (a, b, f), syscall(SYS_dup3, a, b, f))
/* No system call closes a FILE: until bound, fclose fails and the FILE stays open. */
ENTRY(int, fclose, (FILE *f), (f), ((void)f, errno = ENOSYS, EOF))
/* Nor reopens one: until bound, freopen fails and the stream is left as it was. */
ENTRY(FILE *, freopen, (const char *p, const char *m, FILE *f), (p, m, f),
      ((void)p, (void)m, (void)f, errno = ENOSYS, (FILE *)NULL))
ENTRY(FILE *, freopen64, (const char *p, const char *m, FILE *f), (p, m, f),
      ((void)p, (void)m, (void)f, errno = ENOSYS, (FILE *)NULL))
ENTRY(void *, dlopen, (const char *file, int flags), (file, flags),
      ((void)file, (void)flags, NULL))
ENTRY(int, epoll_create, (int size), (size), sys_epoll_create(size))
ENTRY(int, epoll_create1, (int flags), (flags), syscall(SYS_epoll_create1, flags))
ENTRY(int, epoll_ctl, (int ep, int op, int fd, struct epoll_event *e), (ep, op, fd, e),
      syscall(SYS_epoll_ctl, ep, op, fd, e))
ENTRY(int, epoll_wait, (int ep, struct epoll_event *e, int n, int t), (ep, e, n, t),
      syscall(SYS_epoll_pwait, ep, e, n, t, NULL, _NSIG / 8))
ENTRY(int, epoll_pwait, (int ep, struct epoll_event *e, int n, int t, const sigset_t *s),
      (ep, e, n, t, s), syscall(SYS_epoll_pwait, ep, e, n, t, s, _NSIG / 8))
ENTRY(int, epoll_pwait2,
      (int ep, struct epoll_event *e, int n, const struct timespec *t, const sigset_t *s),
      (ep, e, n, t, s), sys_epoll_pwait2(ep, e, n, t, s))

/* stdio: no system call makes one, so until bound a call fails with ENOSYS (only a
 * recursive call from inside the binding itself can see that). */
#define SENTRY(ret, name, params, args, fail)                                               \
	static ret raw_##name params                                                        \
	{                                                                                   \
		errno = ENOSYS;                                                             \
		return (fail);                                                              \
	}                                                                                   \
	static ret boot_##name params                                                       \
	{                                                                                   \
		if (tb_real_bind() == 0)                                                    \
			return tb_real.name args;                                           \
		return raw_##name args;                                                     \
	}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
SENTRY(char *, fgets, (char *b, int n, FILE *f), (b, n, f), NULL)
SENTRY(char *, fgets_unlocked, (char *b, int n, FILE *f), (b, n, f), NULL)
SENTRY(char *, __fgets_chk, (char *b, size_t z, int n, FILE *f), (b, z, n, f), NULL)
SENTRY(char *, __fgets_unlocked_chk, (char *b, size_t z, int n, FILE *f), (b, z, n, f), NULL)
SENTRY(size_t, fread, (void *p, size_t z, size_t n, FILE *f), (p, z, n, f), 0)
SENTRY(size_t, fread_unlocked, (void *p, size_t z, size_t n, FILE *f), (p, z, n, f), 0)
SENTRY(size_t, __fread_chk, (void *p, size_t l, size_t z, size_t n, FILE *f), (p, l, z, n, f), 0)
SENTRY(size_t, __fread_unlocked_chk, (void *p, size_t l, size_t z, size_t n, FILE *f),
       (p, l, z, n, f), 0)
SENTRY(int, fgetc, (FILE *f), (f), EOF)
SENTRY(int, fgetc_unlocked, (FILE *f), (f), EOF)
SENTRY(int, __uflow, (FILE *f), (f), EOF)
SENTRY(ssize_t, getdelim, (char **l, size_t *n, int d, FILE *f), (l, n, d, f), -1)
SENTRY(int, vfscanf, (FILE *f, const char *s, va_list a), (f, s, a), EOF)
SENTRY(int, __isoc99_vfscanf, (FILE *f, const char *s, va_list a), (f, s, a), EOF)
SENTRY(size_t, fwrite, (const void *p, size_t z, size_t n, FILE *f), (p, z, n, f), 0)
SENTRY(size_t, fwrite_unlocked, (const void *p, size_t z, size_t n, FILE *f), (p, z, n, f), 0)
SENTRY(int, fputs, (const char *s, FILE *f), (s, f), EOF)
SENTRY(int, fputs_unlocked, (const char *s, FILE *f), (s, f), EOF)
SENTRY(int, fputc, (int c, FILE *f), (c, f), EOF)
SENTRY(int, fputc_unlocked, (int c, FILE *f), (c, f), EOF)
SENTRY(int, __overflow, (FILE *f, int c), (f, c), EOF)
SENTRY(int, vfprintf, (FILE *f, const char *s, va_list a), (f, s, a), -1)
SENTRY(int, __vfprintf_chk, (FILE *f, int g, const char *s, va_list a), (f, g, s, a), -1)
SENTRY(int, fflush, (FILE *f), (f), EOF)
SENTRY(int, fflush_unlocked, (FILE *f), (f), EOF)
#pragma GCC diagnostic pop

/* fcntl and ioctl are variadic; their third argument is an int or a pointer, which the
 * x86-64 and aarch64 ABIs pass in the same register, so forwarding it as a pointer works
 * (socket_wrapper and libfaketime do the same). */
#define VENTRY(name, type2, sysno)                                                          \
	static int raw_##name(int fd, type2 req, ...)                                       \
	{                                                                                   \
		va_list ap;                                                                 \
		void *arg;                                                                  \
                                                                                            \
		va_start(ap, req);                                                          \
		arg = va_arg(ap, void *);                                                   \
		va_end(ap);                                                                 \
		return (int)syscall(sysno, fd, req, arg);                                   \
	}                                                                                   \
	static int boot_##name(int fd, type2 req, ...)                                      \
	{                                                                                   \
		va_list ap;                                                                 \
		void *arg;                                                                  \
                                                                                            \
		va_start(ap, req);                                                          \
		arg = va_arg(ap, void *);                                                   \
		va_end(ap);                                                                 \
		if (tb_real_bind() == 0)                                                    \
			return tb_real.name(fd, req, arg);                                  \
		return (int)syscall(sysno, fd, req, arg);                                   \
	}

VENTRY(fcntl, int, SYS_fcntl)
VENTRY(fcntl64, int, SYS_fcntl)
VENTRY(ioctl, unsigned long, SYS_ioctl)

struct tb_real tb_real = {
	.read = boot_read, .write = boot_write, .readv = boot_readv, .writev = boot_writev,
	.recv = boot_recv, .send = boot_send, .recvfrom = boot_recvfrom,
	.sendto = boot_sendto, .recvmsg = boot_recvmsg, .sendmsg = boot_sendmsg,
	.recvmmsg = boot_recvmmsg, .sendmmsg = boot_sendmmsg, .sendfile = boot_sendfile,
	.poll = boot_poll, .ppoll = boot_ppoll, .select = boot_select,
	.pselect = boot_pselect, .connect = boot_connect, .socket = boot_socket,
	.accept = boot_accept, .accept4 = boot_accept4, .getsockopt = boot_getsockopt,
	.close = boot_close, .close_range = boot_close_range,
	.unshare = boot_unshare, .dup = boot_dup,
	.dup2 = boot_dup2, .dup3 = boot_dup3, .fcntl = boot_fcntl, .fcntl64 = boot_fcntl64,
	.ioctl = boot_ioctl, .fclose = boot_fclose, .freopen = boot_freopen,
	.freopen64 = boot_freopen64, .dlopen = boot_dlopen,
	.fgets = boot_fgets, .fgets_unlocked = boot_fgets_unlocked,
	.__fgets_chk = boot___fgets_chk, .__fgets_unlocked_chk = boot___fgets_unlocked_chk,
	.fread = boot_fread, .fread_unlocked = boot_fread_unlocked,
	.__fread_chk = boot___fread_chk, .__fread_unlocked_chk = boot___fread_unlocked_chk,
	.fgetc = boot_fgetc, .fgetc_unlocked = boot_fgetc_unlocked, .__uflow = boot___uflow,
	.getdelim = boot_getdelim, .vfscanf = boot_vfscanf,
	.__isoc99_vfscanf = boot___isoc99_vfscanf, .fwrite = boot_fwrite,
	.fwrite_unlocked = boot_fwrite_unlocked, .fputs = boot_fputs,
	.fputs_unlocked = boot_fputs_unlocked, .fputc = boot_fputc,
	.fputc_unlocked = boot_fputc_unlocked, .__overflow = boot___overflow,
	.vfprintf = boot_vfprintf, .__vfprintf_chk = boot___vfprintf_chk, .fflush = boot_fflush,
	.fflush_unlocked = boot_fflush_unlocked,
	.epoll_create = boot_epoll_create, .epoll_create1 = boot_epoll_create1,
	.epoll_ctl = boot_epoll_ctl, .epoll_wait = boot_epoll_wait,
	.epoll_pwait = boot_epoll_pwait, .epoll_pwait2 = boot_epoll_pwait2,
};

/* Says once, by a raw write (nothing else is bound yet), that a name fell back. */
static void say_self(const char *name)
{
	static const char head[] = "timebox: ", tail[] = " resolves to timebox itself; "
						  "calling the system call directly\n";
	static int said;

	if (said++)
		return;
	syscall(SYS_write, 2, head, sizeof(head) - 1);
	syscall(SYS_write, 2, name, strlen(name));
	syscall(SYS_write, 2, tail, sizeof(tail) - 1);
}

/*
 * A thread started before our constructor (by another preloaded library's) may call a hook
 * while the binding below stores into tb_real: it reads either the boot stub, which waits
 * for the binding, or the bound function - both right, as an aligned pointer is stored and
 * loaded whole. The stores are atomic and these functions are left out of ThreadSanitizer's
 * view, which would otherwise report the plain loads of the hot path
 * (tests/regress/load_time_io).
 */
#define TB_BINDER __attribute__((no_sanitize("thread")))
#define SET_SLOT(slot, p) __atomic_store_n((slot), (p), __ATOMIC_RELAXED)

struct range {
	uintptr_t lo, hi;
};

/* The address range of the loaded object that holds `at`: its PT_LOAD segments' span. */
struct range_query {
	uintptr_t at;
	struct range r;
};

static int find_range(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range_query *q = arg;
	struct range seen = { UINTPTR_MAX, 0 };
	bool holds = false;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type != PT_LOAD)
			continue;
		seen.lo = lo < seen.lo ? lo : seen.lo;
		seen.hi = hi > seen.hi ? hi : seen.hi;
		holds |= q->at >= lo && q->at < hi;
	}
	if (holds)
		q->r = seen;
	return holds;
}

static struct range range_of(const void *p)
{
	struct range_query q = { (uintptr_t)p, { 0, 0 } };

	dl_iterate_phdr(find_range, &q);
	return q.r;
}

static bool in_range(struct range r, const void *p)
{
	return r.hi != 0 && (uintptr_t)p >= r.lo && (uintptr_t)p < r.hi;
}

/*
 * Binds *slot to the next definition of `name` after timebox, or to `fallback` (the system
 * call) when there is none or when it lies inside timebox itself (`self`, the address range
 * of our loaded segments): forwarding there would recurse. The check asks where the resolved
 * address lies: comparing with `&name` as seen from here would be wrong in a library loaded
 * by dlopen, where `name` means libc's function and so equals the right answer. It is made
 * against our own range instead of by dladdr: dladdr scans the symbols of the object it
 * lands in (libc's thousands), 3.7 M instructions for these names - 30 times what starting
 * /bin/true costs natively.
 */
static TB_BINDER void bind_one(void **slot, const char *name, void *fallback, struct range self)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p != NULL && in_range(self, p)) {
		say_self(name);
		p = NULL;
	}
	SET_SLOT(slot, p != NULL ? p : fallback);
}

#define BIND(name) bind_one((void **)&tb_real.name, #name, (void *)raw_##name, self)

#define BIND_STDIO(name)                                                                    \
	do {                                                                                \
		void *p_ = dlsym(RTLD_NEXT, #name);                                         \
		if (p_ != NULL && in_range(self, p_)) {                                     \
			say_self(#name);                                                    \
			p_ = NULL;                                                          \
		}                                                                           \
		SET_SLOT(&tb_real.name,                                                     \
			 p_ != NULL ? (__typeof__(tb_real.name))p_ : raw_##name);            \
	} while (0)

static TB_BINDER void bind_stdio(struct range self)
{
	BIND_STDIO(fgets);
	BIND_STDIO(fgets_unlocked);
	BIND_STDIO(__fgets_chk);
	BIND_STDIO(__fgets_unlocked_chk);
	BIND_STDIO(fread);
	BIND_STDIO(fread_unlocked);
	BIND_STDIO(__fread_chk);
	BIND_STDIO(__fread_unlocked_chk);
	BIND_STDIO(fgetc);
	BIND_STDIO(fgetc_unlocked);
	BIND_STDIO(__uflow);
	BIND_STDIO(getdelim);
	BIND_STDIO(vfscanf);
	BIND_STDIO(__isoc99_vfscanf);
	BIND_STDIO(fwrite);
	BIND_STDIO(fwrite_unlocked);
	BIND_STDIO(fputs);
	BIND_STDIO(fputs_unlocked);
	BIND_STDIO(fputc);
	BIND_STDIO(fputc_unlocked);
	BIND_STDIO(__overflow);
	BIND_STDIO(vfprintf);
	BIND_STDIO(__vfprintf_chk);
	BIND_STDIO(fflush);
	BIND_STDIO(fflush_unlocked);
}

unsigned tb_real_direct;

/* The bits of tb_real_direct (real.h): each transfer that lies in libc's object. Not musl's
 * recvmsg and sendmsg: on 64-bit musl, msg_iovlen and msg_controllen are 32 bits with
 * padding beside them, which musl's functions zero in a copy of the header before the
 * system call (the kernel reads 64 bits); a program that fills its header field by field
 * leaves the padding as the stack had it, and the system call made with its header failed
 * with EMSGSIZE (regress/musl_msghdr_padding). */
static unsigned direct_bits(struct range libc)
{
	static const struct {
		void **slot;
		unsigned bit;
	} t[] = {
		{ (void **)&tb_real.read, TB_DIRECT_READ },
		{ (void **)&tb_real.readv, TB_DIRECT_READV },
		{ (void **)&tb_real.recv, TB_DIRECT_RECV },
		{ (void **)&tb_real.recvfrom, TB_DIRECT_RECVFROM },
#ifdef __GLIBC__ /* musl's own copy the header, see below */
		{ (void **)&tb_real.recvmsg, TB_DIRECT_RECVMSG },
#endif
		{ (void **)&tb_real.send, TB_DIRECT_SEND },
		{ (void **)&tb_real.sendto, TB_DIRECT_SENDTO },
#ifdef __GLIBC__
		{ (void **)&tb_real.sendmsg, TB_DIRECT_SENDMSG },
#endif
	};
	unsigned bits = 0;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (in_range(libc, *t[i].slot))
			bits |= t[i].bit;
	return bits;
}


static TB_BINDER void bind_all(void)
{
	struct range self = range_of(&tb_real);

	BIND(read);
	BIND(write);
	BIND(readv);
	BIND(writev);
	BIND(recv);
	BIND(send);
	BIND(recvfrom);
	BIND(sendto);
	BIND(recvmsg);
	BIND(sendmsg);
	BIND(recvmmsg);
	BIND(sendmmsg);
	BIND(sendfile);
	BIND(poll);
	BIND(ppoll);
	BIND(select);
	BIND(pselect);
	BIND(connect);
	BIND(socket);
	BIND(accept);
	BIND(accept4);
	BIND(getsockopt);
	BIND(close);
	BIND(close_range);
	BIND(unshare);
	BIND(dup);
	BIND(dup2);
	BIND(dup3);
	BIND(fcntl);
	BIND(fcntl64);
	BIND(ioctl);
	BIND(fclose);
	BIND(freopen);
	BIND(freopen64);
	BIND(dlopen);
	bind_stdio(self);
	BIND(epoll_create);
	BIND(epoll_create1);
	BIND(epoll_ctl);
	BIND(epoll_wait);
	BIND(epoll_pwait);
	BIND(epoll_pwait2);
	/* The transfers are libc's own when they lie in the object that starts the program
	 * (no library loaded after timebox wraps them): only then may one that cannot block
	 * be made as its system call (real.h, TB_NOWAIT). */
	{
		void *start = dlsym(RTLD_DEFAULT, "__libc_start_main");

		tb_real_direct = start != NULL ? direct_bits(range_of(start)) : 0;
	}
	/* glibc before 2.28 has no fcntl64: forward both names to fcntl. */
	if (tb_real.fcntl64 == raw_fcntl64)
		SET_SLOT(&tb_real.fcntl64, tb_real.fcntl);
}

static void bind_once_fn(void)
{
	bind_all();
}

/* `binding` is raised before pthread_once, not inside its routine: a handler that runs while
 * this thread is in pthread_once - before the routine starts as much as during it - must
 * make its call raw; calling pthread_once again, it waited for itself (regress/load_time_io:
 * a start-up timer's handler writing, 1 run in 7 under UBSan hung). */
int tb_real_bind(void)
{
	int saved = errno; /* a signal handler's write may be what binds: errno is its caller's */

	if (binding)
		return -1;
	binding = 1;
	pthread_once(&bind_once, bind_once_fn);
	binding = 0;
	errno = saved;
	return 0;
}
