/* service.h - timebox's own threads (the watchdog, the statistics thread): started
 * detached, with every signal blocked and a name, on a small stack when the program lets. */
#ifndef TB_SERVICE_H
#define TB_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Starts fn(NULL) on a detached thread named `name` (top -H, ps -L, a debugger), with
 * every signal blocked (the host's signals are for the host's threads). `stack` bytes of
 * stack are asked first; glibc puts the static TLS of the program and its libraries on
 * the stack too and refuses a stack too small for it, and then the thread is started with
 * the system's default size instead (tests/regress/big_tls_watchdog.c). Returns once the
 * thread is created, without waiting for it to run (it names itself when it does): that
 * wait cost a process's first connect ~50 us. False when no thread could be started.
 * A fork waits until every thread started is past its start-up (tb_service_fork_prepare),
 * so that it cannot copy a lock a start-up held (tests/regress/fork_after_first_connect.c).
 */
bool tb_service_start(void *(*fn)(void *), size_t stack, const char *name);

/* The fork handlers (init.c): prepare holds the creations back until parent or child. */
void tb_service_fork_prepare(void);
void tb_service_fork_parent(void);
void tb_service_fork_child(void);

#endif
