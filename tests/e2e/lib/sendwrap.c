/* sendwrap.c - a library that wraps send(), read() and recv(), preloaded after timebox by
 * test_core.py (the way a tracer or socket_wrapper would be): it counts the calls that
 * reach it in `sendwrap_calls` (send) and `readwrap_calls` (read and recv on sockets),
 * which the program reads with dlsym, and forwards each to the next definition. */
#include <dlfcn.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

__attribute__((visibility("default"))) unsigned readwrap_calls;

/* Only sockets are counted: the dynamic loader and stdio read files too. */
static void count_if_socket(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
		__atomic_fetch_add(&readwrap_calls, 1, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) ssize_t read(int fd, void *buf, size_t n)
{
	static ssize_t (*next)(int, void *, size_t);

	if (next == NULL)
		next = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	count_if_socket(fd);
	return next(fd, buf, n);
}

__attribute__((visibility("default"))) ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	static ssize_t (*next)(int, void *, size_t, int);

	if (next == NULL)
		next = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
	count_if_socket(fd);
	return next(fd, buf, n, flags);
}
