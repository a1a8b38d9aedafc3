/* libc_compat.h - what the library needs and musl's headers lack (make MUSL=1). glibc's
 * headers have all of it; nothing here changes the glibc build. */
#ifndef TB_LIBC_COMPAT_H
#define TB_LIBC_COMPAT_H

#include <dlfcn.h>
#include <stdio.h>
#include <netdb.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* musl has no deep binding: a flag no caller can set, so the dlopen hook only forwards. */
#ifndef RTLD_DEEPBIND
#define RTLD_DEEPBIND 0
#endif

/* glibc's h_errno for "see errno"; musl's resolver never sets it, its callers may test it. */
#ifndef NETDB_INTERNAL
#define NETDB_INTERNAL (-1)
#endif

/* The request type of ioctl(2): glibc's prototype takes unsigned long, musl's int (POSIX). */
#ifdef __GLIBC__
typedef unsigned long tb_ioctl_req;
#else
typedef int tb_ioctl_req;
#endif

#ifndef __GLIBC__
/* Names glibc declares and musl does not; the hooks still define them, for a program built
 * against a libc that has them, and nothing here calls them. */
int close_range(unsigned first, unsigned last, int flags);
void closefrom(int lowfd);
int fcntl64(int fd, int cmd, ...);
#undef freopen64 /* <stdio.h>: a macro for freopen */
FILE *freopen64(const char *path, const char *mode, FILE *f);

/* musl 1.2.3 has no pwritev2 wrapper: the system call itself (offset -1: the file's own,
 * with its low and high halves as the kernel takes them). */
#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif
static inline ssize_t tb_pwritev2(int fd, const struct iovec *v, int n, off_t off, int flags)
{
	return syscall(SYS_pwritev2, fd, v, n, (long)off, 0L, flags);
}
#else
#define tb_pwritev2 pwritev2
#endif

#endif
