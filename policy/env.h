/* env.h - the TIMEBOX_* environment variables: their table and their parser.
 * Pure code (the caller passes the lookup: tb_env_getenv for the process environment), used
 * by the library and the launcher. */
#ifndef TB_ENV_H
#define TB_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "settings.h"

enum tb_env_kind {
	TB_ENV_DURATION,
	TB_ENV_SCOPE,
	TB_ENV_ON_TIMEOUT,
	TB_ENV_LOG,
	TB_ENV_BOOL,
	TB_ENV_COUNT,      /* a positive integer, or 0/off for none */
	TB_ENV_GATE_NB,    /* wait|fail */
	TB_ENV_LOG_LEVEL,  /* warn|info */
	TB_ENV_PROTOCOL,   /* auto|http|tls|postgres|redis|session|raw */
	TB_ENV_PATH,       /* a file name; sets nothing in tb_settings (TIMEBOX_CONFIG) */
	TB_ENV_LOG_FORMAT, /* logfmt|json */
	TB_ENV_FILE,       /* an absolute file name, or off: a char[TB_LOG_PATH_MAX] at field */
	TB_ENV_HEADER,     /* an HTTP header name: a char[TB_PROP_HEADER_MAX] at field */
	TB_ENV_GATE_SIZE,  /* a count, 0/off for none, or auto: max_conns and max_conns_auto */
	TB_ENV_PERIOD,     /* a duration longer than 0 (a window, an opening): no "off" */
	TB_ENV_POSITIVE,   /* a whole number 1..TB_MAX_CONNS_LIMIT: no "off" */
	TB_ENV_NUMBER,     /* a whole number 0..TB_MAX_CONNS_LIMIT, 0 being a number */
	TB_ENV_PERCENT,    /* "50%" or 50: 1..100, or 0/off for none */
	TB_ENV_SHARE,      /* "20%" or 20: 1..1000 (a share of other calls), or 0/off */
	TB_ENV_ERRNO,      /* a refused connect's errno: ECONNREFUSED, ... (breaker_errno) */
	TB_ENV_BREAKER_HTTP, /* gateway|5xx|off (breaker_http) */
	TB_ENV_BREAKER,    /* on|off: the breaker switch (tb_settings.breaker, resolved by finish) */
};

#define TB_ENV_NO_FIELD ((size_t)-1)

/* Kinds that take no value on the command line (`--strict`, `--breaker`). */
#define TB_ENV_IS_SWITCH(kind) ((kind) == TB_ENV_BOOL || (kind) == TB_ENV_BREAKER)

/*
 * One variable: its name, the launcher option that mirrors it, what its value is, and the
 * member of struct tb_settings it sets. `field` is an offsetof for the kinds that share a
 * type (DURATION, PERIOD: int64_t ns; COUNT, POSITIVE, NUMBER, PERCENT, SHARE: int; BOOL:
 * bool; GATE_SIZE: max_conns, and max_conns_auto beside it); every other kind sets the one
 * member of its own type (scope, on_timeout, log_target and log_path, gate_nonblocking,
 * log_level, breaker_errno, breaker_http, the breaker switch) and has TB_ENV_NO_FIELD, as
 * has PATH, which sets nothing.
 */
struct tb_env_var {
	const char *name;   /* "TIMEBOX_READ_TIMEOUT" */
	const char *option; /* "--read-timeout" */
	enum tb_env_kind kind;
	size_t field;       /* offsetof(struct tb_settings, read_ns), or TB_ENV_NO_FIELD */
	const char *help;   /* one line for `timebox --help` */
};

/* The table, terminated by an entry whose name is NULL. */
extern const struct tb_env_var tb_env_vars[];

/*
 * The value `var` set in *s, read through its `field`: ns for a duration, the number for a
 * count or a percentage, 0 or 1 for a switch; -1 for a variable without a field. A duration's "not set"
 * marker (retry_window_ns < 0) comes back as it is stored.
 */
int64_t tb_env_number(const struct tb_settings *s, const struct tb_env_var *var);

/* A getenv-like lookup: the text of variable `name`, or NULL when unset; ctx is the caller's. */
typedef const char *(*tb_env_get_fn)(const char *name, void *ctx);

/* The tb_env_get_fn of the process environment: getenv(name), ctx unused. */
const char *tb_env_getenv(const char *name, void *ctx);

/* Looks a variable up by name, or by launcher option when `by_option`; NULL when unknown. */
const struct tb_env_var *tb_env_find(const char *key, int by_option);

/*
 * Called once per bad value: `name` is the variable, `value` its text, `why` a sentence.
 * `ctx` is the caller's.
 */
typedef void (*tb_env_error_fn)(void *ctx, const char *name, const char *value, const char *why);

/*
 * Applies one variable's text to *s. Returns 0, or -1 after calling err once (the setting
 * is then left as it was, so the program runs unguarded for it).
 */
int tb_env_apply(struct tb_settings *s, const struct tb_env_var *var, const char *value,
		 tb_env_error_fn err, void *ctx);

/*
 * Fills *s from every TIMEBOX_* variable found through get(name, get_ctx) (getenv-like: NULL
 * when unset), starting from tb_settings_init() and ending with tb_settings_finish().
 * Each bad value is reported once through err. Returns the number of errors.
 */
int tb_env_load(struct tb_settings *s, tb_env_get_fn get, void *get_ctx, tb_env_error_fn err,
		void *err_ctx);

/*
 * Reports every TIMEBOX_* name in `envp` that is not in the table (a typo such as
 * TIMEBOX_READ_TIMOUT would otherwise be silently ignored). Returns how many were found.
 */
int tb_env_check_unknown(char *const *envp, tb_env_error_fn err, void *ctx);

/* "ECONNREFUSED", ... for an errno breaker_errno accepts; NULL for any other. */
const char *tb_env_errno_name(int err);

/* "gateway", "5xx", "off": a breaker_http value as written. */
const char *tb_env_breaker_http_name(unsigned kind);

#endif
