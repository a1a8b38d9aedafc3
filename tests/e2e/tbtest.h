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

/* "ETIMEDOUT", "0" for no error, "E<n>" for a number glibc has no name for. */
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
