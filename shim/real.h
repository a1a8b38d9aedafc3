/* real.h - the table of libc functions that the hooks forward to, bound once with
 * dlsym(RTLD_NEXT). Until bound, each entry points at a boot stub that binds then forwards;
 * a name libc lacks is bound to its system call made directly. */
#ifndef TB_REAL_H
#define TB_REAL_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* musl's <stdio.h> makes freopen64 a macro for freopen (its off_t is always 64-bit): the
 * table's entry and the hook keep the name, so that a program linked against the name on a
 * libc that still exports it finds it. */
#ifndef __GLIBC__
#undef freopen64
#endif

/* <stdio.h> may make these two macros when optimising; here they name table entries. */
#undef fread_unlocked
#undef fwrite_unlocked

/* The flags of recvmmsg and sendmmsg: int in glibc, unsigned int in musl. */
#ifdef __GLIBC__
typedef int tb_mmsg_flags;
#else
typedef unsigned int tb_mmsg_flags;
#endif

struct tb_real {
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, tb_mmsg_flags, struct timespec *);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, tb_mmsg_flags);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		       const sigset_t *);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*socket)(int, int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*close)(int);
	int (*close_range)(unsigned, unsigned, int);
	int (*unshare)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*fcntl64)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*fclose)(FILE *);
	FILE *(*freopen)(const char *, const char *, FILE *);
	FILE *(*freopen64)(const char *, const char *, FILE *);
	void *(*dlopen)(const char *, int);
	/* stdio (hooks_stdio.c): glibc's own read and write of a FILE are out of our sight */
	char *(*fgets)(char *, int, FILE *);
	char *(*fgets_unlocked)(char *, int, FILE *);
	char *(*__fgets_chk)(char *, size_t, int, FILE *);
	char *(*__fgets_unlocked_chk)(char *, size_t, int, FILE *);
	size_t (*fread)(void *, size_t, size_t, FILE *);
	size_t (*fread_unlocked)(void *, size_t, size_t, FILE *);
	size_t (*__fread_chk)(void *, size_t, size_t, size_t, FILE *);
	size_t (*__fread_unlocked_chk)(void *, size_t, size_t, size_t, FILE *);
	int (*fgetc)(FILE *);
	int (*fgetc_unlocked)(FILE *);
	int (*__uflow)(FILE *);
	ssize_t (*getdelim)(char **, size_t *, int, FILE *);
	int (*vfscanf)(FILE *, const char *, va_list);
	int (*__isoc99_vfscanf)(FILE *, const char *, va_list);
	size_t (*fwrite)(const void *, size_t, size_t, FILE *);
	size_t (*fwrite_unlocked)(const void *, size_t, size_t, FILE *);
	int (*fputs)(const char *, FILE *);
	int (*fputs_unlocked)(const char *, FILE *);
	int (*fputc)(int, FILE *);
	int (*fputc_unlocked)(int, FILE *);
	int (*__overflow)(FILE *, int);
	int (*vfprintf)(FILE *, const char *, va_list);
	int (*__vfprintf_chk)(FILE *, int, const char *, va_list);
	int (*fflush)(FILE *);
	int (*fflush_unlocked)(FILE *);
	int (*epoll_create)(int);
	int (*epoll_create1)(int);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	/* glibc 2.35+; the system call (Linux 5.11+) otherwise, ENOSYS before that. */
	int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *,
			    const sigset_t *);
};

/*
 * timebox's own fds (the log file, shared-gate slot locks, a socket moved out of the way)
 * are duplicated to numbers >= TB_INTERNAL_FD_MIN with F_DUPFD_CLOEXEC and marked
 * internal: programs hand out low numbers and some (select users) break above 1024, so
 * ours sit in between, out of both ways. Under a lower fd limit they go as high below it as
 * one is free, never to 0-2 (shim/fdtable.h, tb_fd_dup_internal).
 */
#define TB_INTERNAL_FD_MIN 512

extern struct tb_real tb_real;

/*
 * Binds every entry (idempotent, thread-safe). Returns 0, or -1 when called recursively
 * from inside the binding itself (dlsym may allocate, and an allocator may do I/O): the
 * caller then uses the raw system call. A name that libc lacks (close_range before glibc
 * 2.34), or that resolves into timebox itself, is bound to a function making the system
 * call directly (ENOSYS where there is none), never to a boot stub or to ourselves: either
 * would forward to itself forever. Never aborts the host.
 */
int tb_real_bind(void);

/*
 * Which transfers of tb_real are libc's own (TB_DIRECT_* bits, set by the binding): those
 * whose function lies in the object that holds __libc_start_main. A library preloaded
 * after timebox that wraps one (a tracer, socket_wrapper) is always called.
 */
enum {
	TB_DIRECT_READ = 1u << 0,
	TB_DIRECT_READV = 1u << 1,
	TB_DIRECT_RECV = 1u << 2,
	TB_DIRECT_RECVFROM = 1u << 3,
	TB_DIRECT_RECVMSG = 1u << 4,
	TB_DIRECT_SEND = 1u << 5,
	TB_DIRECT_SENDTO = 1u << 6,
	TB_DIRECT_SENDMSG = 1u << 7,
};
extern unsigned tb_real_direct;

#if defined(SYS_read) && defined(SYS_readv) && defined(SYS_recvfrom) && defined(SYS_recvmsg) && \
	defined(SYS_sendto) && defined(SYS_sendmsg)
#define TB_NOWAIT_SYSCALLS 1 /* (i386's socketcall-only kernels have no sendto of its own) */
#endif

/*
 * A transfer that cannot block - MSG_DONTWAIT in its flags, or on a socket whose open file
 * description is non-blocking - made as its system call. libc's read, recv, send... are
 * cancellation points: in a process with threads (timebox's own make every governed
 * process one) each switches asynchronous cancellation on and off around its system call,
 * two atomic compare-and-swaps on the thread's cancellation word, what an event loop's
 * every read and write paid for timebox's threads. A call that cannot block needs neither:
 * a cancellation already pending is acted on first (pthread_testcancel, as libc does on
 * entry), then the system call libc makes. Only while the function is libc's own
 * (tb_real_direct); `libc_call` otherwise. For O_NONBLOCK, timebox's view of the flag is
 * the one its hooks saw (connect, fcntl, ioctl): a flag cleared where they could not see
 * (another process sharing the description) makes such a call block outside a
 * cancellation point (docs/limitations.md).
 */
#ifdef TB_NOWAIT_SYSCALLS
#define TB_NOWAIT(bit, libc_call, ...)                                                     \
	(__builtin_expect((tb_real_direct & (bit)) != 0, 1)                                 \
		 ? (pthread_testcancel(), (ssize_t)syscall(__VA_ARGS__))                     \
		 : (libc_call))
#else
#define TB_NOWAIT(bit, libc_call, ...) (libc_call)
#endif

static inline ssize_t tb_real_read_nowait(int fd, void *buf, size_t n)
{
	return TB_NOWAIT(TB_DIRECT_READ, tb_real.read(fd, buf, n), SYS_read, fd, buf, n);
}

static inline ssize_t tb_real_readv_nowait(int fd, const struct iovec *iov, int n)
{
	return TB_NOWAIT(TB_DIRECT_READV, tb_real.readv(fd, iov, n), SYS_readv, fd, iov, n);
}

static inline ssize_t tb_real_recv_nowait(int fd, void *buf, size_t n, int flags)
{
	return TB_NOWAIT(TB_DIRECT_RECV, tb_real.recv(fd, buf, n, flags), SYS_recvfrom, fd, buf,
			 n, flags, NULL, NULL);
}

static inline ssize_t tb_real_recvfrom_nowait(int fd, void *buf, size_t n, int flags,
					      struct sockaddr *addr, socklen_t *alen)
{
	return TB_NOWAIT(TB_DIRECT_RECVFROM, tb_real.recvfrom(fd, buf, n, flags, addr, alen),
			 SYS_recvfrom, fd, buf, n, flags, addr, alen);
}

static inline ssize_t tb_real_recvmsg_nowait(int fd, struct msghdr *msg, int flags)
{
	return TB_NOWAIT(TB_DIRECT_RECVMSG, tb_real.recvmsg(fd, msg, flags), SYS_recvmsg, fd,
			 msg, flags);
}

static inline ssize_t tb_real_send_nowait(int fd, const void *buf, size_t n, int flags)
{
	return TB_NOWAIT(TB_DIRECT_SEND, tb_real.send(fd, buf, n, flags), SYS_sendto, fd, buf, n,
			 flags, NULL, 0);
}

static inline ssize_t tb_real_sendto_nowait(int fd, const void *buf, size_t n, int flags,
					    const struct sockaddr *addr, socklen_t alen)
{
	return TB_NOWAIT(TB_DIRECT_SENDTO, tb_real.sendto(fd, buf, n, flags, addr, alen),
			 SYS_sendto, fd, buf, n, flags, addr, alen);
}

static inline ssize_t tb_real_sendmsg_nowait(int fd, const struct msghdr *msg, int flags)
{
	return TB_NOWAIT(TB_DIRECT_SENDMSG, tb_real.sendmsg(fd, msg, flags), SYS_sendmsg, fd, msg,
			 flags);
}

/*
 * fstat by system call, for the identity checks (does this fd still name that socket?).
 * They look at the program's fd, perhaps while another thread closes it: an fstat
 * interposed ahead of us (a sanitizer's, another preload) would take that for the
 * program's own use of the fd racing with its close, whose guard it cannot see.
 */
static inline int tb_fstat_raw(int fd, struct stat *st)
{
#ifdef SYS_fstat
	return (int)syscall(SYS_fstat, fd, st);
#else
	return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#endif
}

/*
 * timebox's own fds are opened by system call, as tb_real.close closes them: a sanitizer's
 * runtime preloaded ahead of us intercepts open() and pipe2() but not the real close, so it
 * kept each number's history as our thread's and reported the program's next use of the
 * number as a race with it (tests/regress/sanitizer_own_fds). Results and errno as
 * openat(2) and pipe2(2).
 */
static inline int tb_open_raw(int dirfd, const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

static inline int tb_pipe2_raw(int fds[2], int flags)
{
	return (int)syscall(SYS_pipe2, fds, flags);
}

#endif
