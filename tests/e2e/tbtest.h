/* tbtest.h - what the project's test programs (fault server, clients) share: a monotonic
 * clock in milliseconds, a sleep that EINTR cannot shorten, and errno names. */
#ifndef TBTEST_H
#define TBTEST_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static inline double tbt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Sleeps ms milliseconds. An absolute deadline makes EINTR harmless. */
static inline void tbt_sleep_ms(long ms)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
}

#ifndef __GLIBC__
/* musl has no strerrorname_np (glibc 2.32): the names the tests read, for the clients built
 * with musl-gcc (tests/e2e/test_musl.py). */
static inline const char *strerrorname_np(int err)
{
#define TBT_NAME(e) case e: return #e
	switch (err) {
	TBT_NAME(ETIMEDOUT); TBT_NAME(ECONNREFUSED); TBT_NAME(ECONNRESET); TBT_NAME(EAGAIN);
	TBT_NAME(EINPROGRESS); TBT_NAME(EALREADY); TBT_NAME(EPIPE); TBT_NAME(EINTR);
	TBT_NAME(ENOTCONN); TBT_NAME(EBADF); TBT_NAME(EINVAL); TBT_NAME(ENETUNREACH);
	TBT_NAME(EHOSTUNREACH); TBT_NAME(ECONNABORTED); TBT_NAME(ENOTSOCK); TBT_NAME(ENOENT);
	TBT_NAME(EMFILE); TBT_NAME(ENOMEM); TBT_NAME(EACCES); TBT_NAME(EPERM);
	TBT_NAME(EADDRNOTAVAIL); TBT_NAME(EADDRINUSE); TBT_NAME(EISCONN); TBT_NAME(ENOSYS);
	TBT_NAME(EIO); TBT_NAME(ESHUTDOWN); TBT_NAME(EBUSY); TBT_NAME(ECANCELED);
	}
#undef TBT_NAME
	return NULL;
}
#endif

/* "ETIMEDOUT", "0" for no error, "E<n>" for a number the libc has no name for. */
static inline const char *tbt_errno_name(int err)
{
	static __thread char unknown[16];
	const char *name;

	if (err == 0)
		return "0";
	name = strerrorname_np(err);
	if (name)
		return name;
	snprintf(unknown, sizeof unknown, "E%d", err);
	return unknown;
}

#endif
