/* init.h - start-up and fork: reads the settings once (configure.h holds them), readies the
 * fd table, the log and the process budget, and keeps every table consistent across fork. */
#ifndef TB_INIT_H
#define TB_INIT_H

/* Starts timebox once (thread-safe, idempotent): the settings, then, when something is
 * governed, the tables; prints configuration errors. Runs from the constructor, and from a
 * hook that may run before it (a constructor's dlopen, getaddrinfo). */
void tb_init(void);

#endif
