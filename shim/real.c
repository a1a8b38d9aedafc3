/* real.c - the bound libc table. Every entry starts at a boot stub so that a hook called
 * before our constructor (another library's constructor doing I/O) still works. */
#include "real.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hooks.h"

static __thread int binding __attribute__((tls_model("initial-exec")));
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static long raw_poll(struct pollfd *p, nfds_t n, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	return syscall(SYS_ppoll, p, n, ms < 0 ? NULL : &ts, NULL, _NSIG / 8);
}

/*
 * Boot stubs: bind, then forward through the table. If binding is already under way on
 * this thread the stub makes the system call itself (the only way not to deadlock).
 */
#define BOOT(ret, name, params, args, raw)                                                 \
	static ret boot_##name params                                                       \
	{                                                                                   \
		if (tb_real_bind() == 0)                                                    \
			return tb_real.name args;                                           \
		return (ret)(raw);                                                          \
	}

BOOT(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n), syscall(SYS_read, fd, b, n))
BOOT(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n),
     syscall(SYS_write, fd, b, n))
BOOT(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n),
     syscall(SYS_readv, fd, v, n))
BOOT(ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n),
     syscall(SYS_writev, fd, v, n))
BOOT(ssize_t, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f),
     syscall(SYS_recvfrom, fd, b, n, f, NULL, NULL))
BOOT(ssize_t, send, (int fd, const void *b, size_t n, int f), (fd, b, n, f),
     syscall(SYS_sendto, fd, b, n, f, NULL, 0))
BOOT(ssize_t, recvfrom,
     (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l),
     (fd, b, n, f, a, l), syscall(SYS_recvfrom, fd, b, n, f, a, l))
BOOT(ssize_t, sendto,
     (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l),
     (fd, b, n, f, a, l), syscall(SYS_sendto, fd, b, n, f, a, l))
BOOT(ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f),
     syscall(SYS_recvmsg, fd, m, f))
BOOT(ssize_t, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f),
     syscall(SYS_sendmsg, fd, m, f))
BOOT(int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t), raw_poll(p, n, t))
BOOT(int, ppoll, (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *s),
     (p, n, t, s), syscall(SYS_ppoll, p, n, t, s, _NSIG / 8))
BOOT(int, select, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t),
     (n, r, w, e, t), syscall(SYS_select, n, r, w, e, t))
BOOT(int, pselect,
     (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *s),
     (n, r, w, e, t, s), (errno = ENOSYS, -1))
BOOT(int, connect, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l),
     syscall(SYS_connect, fd, a, l))
BOOT(int, socket, (int d, int t, int p), (d, t, p), syscall(SYS_socket, d, t, p))
BOOT(int, accept, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l),
     syscall(SYS_accept, fd, a, l))
BOOT(int, accept4, (int fd, struct sockaddr *a, socklen_t *l, int f), (fd, a, l, f),
     syscall(SYS_accept4, fd, a, l, f))
BOOT(int, getsockopt, (int fd, int lv, int nm, void *v, socklen_t *l), (fd, lv, nm, v, l),
     syscall(SYS_getsockopt, fd, lv, nm, v, l))
BOOT(int, close, (int fd), (fd), syscall(SYS_close, fd))
BOOT(int, close_range, (unsigned a, unsigned b, int f), (a, b, f),
     syscall(SYS_close_range, a, b, f))
BOOT(int, dup, (int fd), (fd), syscall(SYS_dup, fd))
BOOT(int, dup2, (int a, int b), (a, b), syscall(SYS_dup2, a, b))
BOOT(int, dup3, (int a, int b, int f), (a, b, f), syscall(SYS_dup3, a, b, f))
BOOT(int, fclose, (FILE *f), (f), (errno = EAGAIN, EOF))

/* fcntl and ioctl are variadic; their third argument is an int or a pointer, which the
 * x86-64 and aarch64 ABIs pass in the same register, so forwarding it as a pointer works
 * (socket_wrapper and libfaketime do the same). */
#define VBOOT(name, type2, sysno)                                                           \
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

VBOOT(fcntl, int, SYS_fcntl)
VBOOT(fcntl64, int, SYS_fcntl)
VBOOT(ioctl, unsigned long, SYS_ioctl)

struct tb_real tb_real = {
	.read = boot_read, .write = boot_write, .readv = boot_readv, .writev = boot_writev,
	.recv = boot_recv, .send = boot_send, .recvfrom = boot_recvfrom,
	.sendto = boot_sendto, .recvmsg = boot_recvmsg, .sendmsg = boot_sendmsg,
	.poll = boot_poll, .ppoll = boot_ppoll, .select = boot_select,
	.pselect = boot_pselect, .connect = boot_connect, .socket = boot_socket,
	.accept = boot_accept, .accept4 = boot_accept4, .getsockopt = boot_getsockopt,
	.close = boot_close, .close_range = boot_close_range, .dup = boot_dup,
	.dup2 = boot_dup2, .dup3 = boot_dup3, .fcntl = boot_fcntl, .fcntl64 = boot_fcntl64,
	.ioctl = boot_ioctl, .fclose = boot_fclose,
};

static void bind_one(void **slot, const char *name, void *self)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p == NULL)
		return; /* keep the boot stub (e.g. close_range on an old libc: raw syscall) */
	if (p == self) {
		static const char msg[] = "timebox: libc symbol resolves to timebox itself "
					  "(library loaded twice?); aborting\n";
		syscall(SYS_write, 2, msg, sizeof(msg) - 1);
		abort();
	}
	*slot = p;
}

#define BIND(name) bind_one((void **)&tb_real.name, #name, (void *)(name))

static void bind_all(void)
{
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
	BIND(dup);
	BIND(dup2);
	BIND(dup3);
	BIND(fcntl);
	BIND(fcntl64);
	BIND(ioctl);
	BIND(fclose);
	/* glibc before 2.28 has no fcntl64: forward both names to fcntl. */
	if (tb_real.fcntl64 == boot_fcntl64)
		tb_real.fcntl64 = tb_real.fcntl;
}

static void bind_once_fn(void)
{
	binding = 1;
	bind_all();
	binding = 0;
}

int tb_real_bind(void)
{
	if (binding)
		return -1;
	pthread_once(&bind_once, bind_once_fn);
	return 0;
}
