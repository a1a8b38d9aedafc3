/* sendwrap.c - a library that wraps send(), preloaded after timebox by test_core.py (the
 * way a tracer or socket_wrapper would be): it counts the calls that reach it in
 * `sendwrap_calls`, which the program reads with dlsym, and forwards each to the next
 * definition. */
#include <dlfcn.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

__attribute__((visibility("default"))) unsigned sendwrap_calls;

__attribute__((visibility("default"))) ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	static ssize_t (*next)(int, const void *, size_t, int);

	if (next == NULL)
		next = (ssize_t (*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
	__atomic_fetch_add(&sendwrap_calls, 1, __ATOMIC_RELAXED);
	return next(fd, buf, n, flags);
}
