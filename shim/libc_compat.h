/* libc_compat.h - what the library needs and musl's headers lack (make MUSL=1). glibc's
 * headers have all of it; nothing here changes the glibc build. */
#ifndef TB_LIBC_COMPAT_H
#define TB_LIBC_COMPAT_H

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
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
/*
 * The glibc build, preloaded by hand into a musl program. musl's loader binds every symbol
 * when it loads the library and fails the program on one it cannot find, before any code of
 * ours runs; it would take the library only if each name it imports is one musl has, or is
 * weak. The glibc-only names below are weak: on glibc they bind as they always did, on musl
 * to nothing, and the constructor is reached, sees musl and leaves the library inert
 * (init.c, libc_mismatch). None of them is called before that check, nor after it on musl.
 * The build's other imports are names both libcs export (tests/e2e/test_musl.py checks the
 * list against musl's libc), libconfig is loaded only to read a file (libconfig_dl.c), and
 * the library's thread-locals are initial-exec, so it needs nothing of glibc's loader
 * (__tls_get_addr).
 */
#pragma weak pwritev2
#define tb_pwritev2 pwritev2

/* glibc's fortify failure handler; aborts with "buffer overflow detected". */
extern void __chk_fail(void) __attribute__((noreturn, weak));

/* pthread_atfork as glibc's libc_nonshared.a defines it for each object: the handlers are
 * registered under the library's __dso_handle, so a dlclose of it drops them. Calling the
 * libc's entry point ourselves keeps that archive's strong reference out of the library. */
extern void *__dso_handle;
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
		      void *dso) __attribute__((weak));
static inline int tb_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void))
{
	/* NULL in a musl process, where constructors run before the check: nothing to guard
	 * in an inert library. */
	if (__register_atfork == NULL)
		return ENOSYS;
	return __register_atfork(prepare, parent, child, __dso_handle);
}

/* The cancellation unwinding that pthread_cleanup_push expands to (resolve_pool.c). */
#pragma weak __pthread_register_cancel
#pragma weak __pthread_unregister_cancel
#pragma weak __pthread_unwind_next
#endif

#ifndef __GLIBC__
#define tb_atfork pthread_atfork
#endif

#endif
