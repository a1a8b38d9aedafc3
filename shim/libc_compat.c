/* libc_compat.c - the musl build's own atexit. glibc's libc.so.6 exports no atexit (each
 * object gets one from libc_nonshared.a, a call of __cxa_atexit with its __dso_handle); the
 * musl build, linked against no libc, would otherwise import the name, and glibc's loader,
 * given the musl build by hand, would fail the program on it (at once under LD_BIND_NOW)
 * instead of letting the library say it is inactive. Hidden: the library's own calls bind
 * here, the program's do not. The glibc build does not compile this file (Makefile). */
#include <stdlib.h>

int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);
extern void *__dso_handle;

static void call_plain(void *fn)
{
	((void (*)(void))fn)();
}

int atexit(void (*fn)(void))
{
	return __cxa_atexit(call_plain, (void *)fn, __dso_handle);
}
