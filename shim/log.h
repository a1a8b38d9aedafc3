/* log.h - timebox's only output: one logfmt line per expiry or misconfiguration.
 * Lines are built without malloc or stdio, so they can be written from any hook. */
#ifndef TB_LOG_H
#define TB_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "dest.h"
#include "settings.h"

/* Opens the target chosen by s (stderr, syslog, off, a file). Idempotent per process. */
void tb_log_open(const struct tb_settings *s);

/* event=timeout phase=... dest=... fd=... elapsed_ms=... limit_ms=... pid=... tid=...
 * `tid` is the program's thread whose wait was cut, not the watchdog's. */
void tb_log_timeout(enum tb_phase phase, const struct tb_dest *d, int fd, int64_t elapsed_ns,
		    int64_t limit_ns, int tid);

/* event=reject phase=... dest=... fd=... reason=...: an attempt failed before it began. */
void tb_log_reject(enum tb_phase phase, const struct tb_dest *d, int fd, const char *reason);

/* event=config_error name=... value="..." error="..." effect=... */
void tb_log_config_error(const char *name, const char *value, const char *why,
			 const char *effect);

/* event=gate dest=... leased=... pending=... max=... acquired=... timed_out=... rejected=... */
void tb_log_gate(const struct tb_dest *d, long leased, long pending, long max,
		 unsigned long acquired, unsigned long timed_out, unsigned long rejected);

/* A preformatted logfmt body; "timebox: " and the newline are added. */
void tb_log_error(const char *body);

/* The log fd moved (dup2 over it by the program): follow it. */
void tb_log_fd_moved(int from, int to);

#endif
