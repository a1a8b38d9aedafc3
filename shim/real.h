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

/* tb_real.send and tb_real.sendmsg are libc's own (set by the binding): see
 * tb_real_send_nowait. */
extern bool tb_real_send_direct, tb_real_sendmsg_direct;

/*
 * send(2) with flags that hold MSG_DONTWAIT: it cannot block, so it needs none of the
 * cancellation point's work around the system call that libc's send does in a process with
 * threads (two atomic compare-and-swaps on the thread's cancellation word, to switch
 * asynchronous cancellation on and off) - timebox's own threads make every governed
 * process one. A cancellation already pending is acted on first, as libc's send would;
 * then the system call itself (sendto, as libc makes it). Only while send is libc's: a
 * library preloaded after timebox that wraps send is always called.
 */
static inline ssize_t tb_real_send_nowait(int fd, const void *buf, size_t n, int flags)
{
#ifdef SYS_sendto
	if (!tb_real_send_direct)
		return tb_real.send(fd, buf, n, flags);
	pthread_testcancel();
	return syscall(SYS_sendto, fd, buf, n, flags, NULL, 0);
#else /* no sendto system call of its own (i386's socketcall) */
	return tb_real.send(fd, buf, n, flags);
#endif
}

/* sendmsg(2) with flags that hold MSG_DONTWAIT: as tb_real_send_nowait. */
static inline ssize_t tb_real_sendmsg_nowait(int fd, const struct msghdr *msg, int flags)
{
#ifdef SYS_sendmsg
	if (!tb_real_sendmsg_direct)
		return tb_real.sendmsg(fd, msg, flags);
	pthread_testcancel();
	return syscall(SYS_sendmsg, fd, msg, flags);
#else
	return tb_real.sendmsg(fd, msg, flags);
#endif
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
