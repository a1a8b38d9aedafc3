/* configure.h - the library's side of the configuration file: loading it at start-up, the
 * rule that governs a connect, and the hostnames the program's lookups taught us. */
#ifndef TB_CONFIGURE_H
#define TB_CONFIGURE_H

#include <stdbool.h>
#include <sys/socket.h>

#include "config.h"
#include "dest.h"
#include "settings.h"

/* The file's rule table (immutable after start-up), or NULL without TIMEBOX_CONFIG. */
extern const struct tb_config *tb_conf;

/*
 * Reads TIMEBOX_CONFIG, if set, over the environment's settings: *cfg becomes the resolved
 * defaults. Prints one line per problem on stderr, saying what is done about it (or that the
 * process refuses to run when `strict`, or when the file's defaults say strict). Returns the
 * number of problems; sets *strict_out when the file asks for strictness.
 */
int tb_configure(struct tb_settings *cfg, bool strict, bool *strict_out);

/* True when the file sets a limit for some destination (the defaults or any rule). */
bool tb_configure_any_limit(void);

/*
 * The settings that govern a connect to sa, filling *d; NULL when the socket is left alone.
 * Without a file that is tb_cfg for every AF_INET/AF_INET6 address. AF_UNIX addresses are
 * governed only by a unix: rule; their *d carries a hash of the path.
 */
const struct tb_settings *tb_configure_governing(const struct sockaddr *sa, socklen_t len,
						 struct tb_dest *d);

/* True when some rule names a hostname: the resolver hooks then remember what they see. */
bool tb_configure_learning(void);

/* Remembers that name resolved to addr (family AF_INET or AF_INET6). Thread-safe, and safe
 * against a signal handler that connects (signals are blocked while the table is locked). */
void tb_configure_learn(const char *name, int family, const void *addr);

/* The most recent name learned for d's address into buf (len bytes); "" when none. Takes the
 * table's lock: not for a hook's fast path (the statistics thread calls it). */
void tb_configure_name_of(const struct tb_dest *d, char *buf, size_t len);

/* pthread_atfork handlers for the learned names (registered by init.c): prepare takes the
 * table's lock with signals blocked, parent and child let go of it and restore the mask. */
void tb_configure_fork_prepare(void);
void tb_configure_fork_parent(void);
void tb_configure_fork_child(void);

#endif
