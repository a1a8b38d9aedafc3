/* configure.h - the settings in force: the TIMEBOX_* variables and the configuration file,
 * read once at start-up; the rule that governs a connect; the hostnames lookups taught us. */
#ifndef TB_CONFIGURE_H
#define TB_CONFIGURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "config.h"
#include "dest.h"
#include "settings.h"

/* The default settings: those of every connect no rule of the file matches, and the
 * process-wide ones (scope, log, strict). From TIMEBOX_* alone, or the file's defaults
 * under TIMEBOX_* overrides when there is a file. Written by tb_configure only, immutable
 * after it. */
extern struct tb_settings tb_default_settings;

/* The configuration file, loaded: its defaults and rules (immutable after start-up), or
 * NULL without TIMEBOX_CONFIG. */
extern const struct tb_config *tb_file_config;

/* Some limit is set: connect() starts tracking. Stored true by init.c once the fd table,
 * the log and the process budget are ready; never cleared. */
extern atomic_bool tb_governing;

/*
 * Reads the TIMEBOX_* variables into tb_default_settings, then TIMEBOX_CONFIG, if set,
 * into tb_file_config (tb_default_settings becomes the file's resolved defaults). Prints
 * one line per problem on stderr, saying what is done about it. Returns false when the process must refuse to run:
 * some problem under strictness (TIMEBOX_STRICT, or `strict` in the file's defaults).
 * Called once, by init.c, before any thread of ours exists.
 */
bool tb_configure(void);

/* True when the file sets a limit for some destination (the defaults or any rule). */
bool tb_configure_any_limit(void);

/*
 * The settings that govern a connect to sa, filling *d; NULL when the socket is left alone.
 * Without a file that is tb_default_settings for every AF_INET/AF_INET6 address. AF_UNIX
 * addresses are governed only by a unix: rule; their *d carries a hash of the path.
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
