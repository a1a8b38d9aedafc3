/* clock.h - the one clock timebox reads: CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall).
 * Policy code never calls it; it takes `now` as a parameter so tests drive a simulated clock. */
#ifndef TB_CLOCK_H
#define TB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t tb_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
