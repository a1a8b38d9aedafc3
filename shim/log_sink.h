/* log_sink.h - where timebox's log lines go (stderr, a file, syslog) and how they get there:
 * never blocking the caller, never raising a signal, never into an fd that is not ours. */
#ifndef TB_LOG_SINK_H
#define TB_LOG_SINK_H

#include <stdbool.h>
#include <stddef.h>

#include "settings.h"

/*
 * Opens the sink of s->log_target (TB_LOG_FILE: the file, TB_LOG_SYSLOG: a datagram socket
 * for /dev/log) and returns the target lines now go to. When the sink cannot be opened,
 * returns TB_LOG_STDERR with *why saying why (a static sentence, or strerror's).
 */
int tb_sink_open(const struct tb_settings *s, const char **why);

/*
 * Writes one line (n bytes ending in '\n', n <= 1024) to the sink of target, whole or not
 * at all. Returns true when written; false when the line was dropped: the sink is full (a
 * pipe or socket nobody drains), gone (a broken pipe, no syslog daemon), or fd 2 is no
 * longer the object it was at start-up. Safe in a signal handler and in any thread;
 * preserves errno; a SIGPIPE it causes is consumed.
 */
bool tb_sink_write(int target, const char *line, size_t n);

/* The program dup2'd over the sink's fd, which the hooks moved from `from` to `to` (-1:
 * they could not; lines go to stderr from now on). */
void tb_sink_fd_moved(int from, int to);

/*
 * The program itself just put something on fd 2 (dup2, dup3 or dup): that is its stderr
 * from now on, unless it is a socket (a connection is never taken for stderr). Not for a
 * vfork child, whose fd 2 is not ours. errno is preserved.
 */
void tb_sink_stderr_replaced(void);

/* In a forked child: forget a line under way in the parent; make a relay of its own. */
void tb_sink_fork_child(void);

#endif
