/* config.h - the configuration file (libconfig syntax): defaults, per-destination rules, and the
 * precedence that merges them with the environment. Parsed once into an immutable table. */
#ifndef TB_CONFIG_H
#define TB_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rules.h"
#include "settings.h"

/*
 * Fields are numbered like tb_env_vars (a setting's config key is its variable's name without
 * TIMEBOX_, in lowercase), followed by the keys that only the file has.
 */
#define TB_FIELDS_MAX 64
enum {
	TB_FIELD_ENABLED = TB_FIELDS_MAX - 4, /* enabled: false leaves a destination alone */
	TB_FIELD_ATTEMPTS,                    /* attempts: retries the program makes (lint) */
	TB_FIELD_EXPECTED_RPS,                /* expected_rps: calls per second (lint) */
	TB_FIELD_EXPECTED_P99,                /* expected_p99: the downstream's p99 (lint) */
};

/* Where an effective value came from, lowest precedence first. */
enum tb_origin {
	TB_ORIGIN_BUILTIN,
	TB_ORIGIN_DEFAULTS, /* the file's defaults group */
	TB_ORIGIN_RULE,     /* the matching rule */
	TB_ORIGIN_ENV,      /* a TIMEBOX_* variable */
	TB_ORIGIN_OPTION,   /* a launcher option (which the program sees as a variable) */
};

/* What the operator expects of a destination: read by `timebox check`, never by the runtime. */
struct tb_hints {
	int attempts;            /* 0: not given */
	double expected_rps;     /* 0: not given */
	int64_t expected_p99_ns; /* 0: not given */
};

/* The effective settings of the defaults or of one rule, and where each value came from. */
struct tb_resolved {
	struct tb_settings set;
	bool enabled;
	struct tb_hints hints;
	uint8_t origin[TB_FIELDS_MAX]; /* enum tb_origin */
	int line[TB_FIELDS_MAX];       /* the file line of a value from the file, else 0 */
};

struct tb_rule {
	struct tb_match *matches; /* one or more; the rule applies when any matches */
	size_t nmatches;
	char label[TB_NAME_MAX];  /* the match as written, for messages */
	int line;
	struct tb_resolved r;
};

struct tb_config {
	char *path;
	struct tb_resolved defaults;
	struct tb_rule *rules; /* in file order: the first that matches wins */
	size_t nrules;
	bool has_host_rules;   /* some rule names a hostname: learn what the program resolves */
	bool has_unix_rules;   /* some rule names a unix socket: AF_UNIX connects are examined */
};

/* The environment's layer: a value per tb_env_vars row (NULL: unset), and its origin. */
struct tb_overrides {
	const char *value[TB_FIELDS_MAX];
	uint8_t origin[TB_FIELDS_MAX];
};

/* One problem in the file. key and value are NULL for a syntax or I/O error; line is 0
 * when unknown. effect says what the library does about it: "file ignored", "rule
 * ignored" or "setting ignored". */
struct tb_config_error {
	const char *file;
	int line;
	const char *key;
	const char *value;
	const char *why;
	const char *effect;
};

typedef void (*tb_config_error_fn)(void *ctx, const struct tb_config_error *e);

/*
 * The largest configuration file read. A rule table is a few kilobytes; the cap keeps a
 * wrong path (a log, a dump) from holding the program at start-up, and libconfig from
 * scanning megabytes inside the program's constructor.
 */
#define TB_CONFIG_MAX_BYTES (1024 * 1024)

/*
 * Why a file of this st_mode and st_size is not read as the configuration (a static
 * sentence), or NULL when it is read. Only regular files are: a FIFO blocks its reader, a
 * directory or a device is a mistake. The readers (the library, the launcher) call this on
 * the fstat of the descriptor they opened, so that a symbolic link is followed but what it
 * leads to is checked. @unittest test_config.c: file_refusals
 */
const char *tb_config_refusal(unsigned mode, long long size);

/* "larger than 1 MiB ...": what a reader says when the file grew past the cap as it read. */
extern const char tb_config_too_large[];

/*
 * Resolves the text of a configuration file (len bytes, NUL-terminated; `name` is the file
 * in messages). Each problem is reported once through err and counted in *errors: a syntax
 * error, text beyond TB_CONFIG_MAX_BYTES, a NUL byte or an @include line (refused: libconfig
 * would open the named file itself, with none of the readers' checks) leaves an empty
 * configuration (built-ins and ov only), a bad rule is dropped, a bad default is ignored.
 * Returns the configuration (owned by the caller, tb_config_free), or NULL when out of
 * memory. No I/O: the caller has read the file.
 */
struct tb_config *tb_config_parse_text(const char *text, size_t len, const char *name,
				       const struct tb_overrides *ov, tb_config_error_fn err,
				       void *ctx, int *errors);

/* The same for a NUL-terminated text (tests, `timebox plan`). */
struct tb_config *tb_config_parse(const char *text, const char *name,
				  const struct tb_overrides *ov, tb_config_error_fn err, void *ctx,
				  int *errors);

/*
 * The configuration of a file that could not be read: `why` is reported once (effect "file
 * ignored") and the result holds the built-ins and ov only. NULL when out of memory.
 */
struct tb_config *tb_config_unread(const char *name, const char *why,
				   const struct tb_overrides *ov, tb_config_error_fn err,
				   void *ctx, int *errors);

void tb_config_free(struct tb_config *c);

/* The first rule that matches t, or NULL. */
const struct tb_rule *tb_config_match(const struct tb_config *c, const struct tb_target *t);

/*
 * The settings that govern a connect to t: the matching rule's, or the defaults' when none
 * matches (an AF_UNIX target is governed only by a rule). NULL when the destination is left
 * alone: disabled, unmatched unix, or no limit at all.
 */
const struct tb_settings *tb_config_governing(const struct tb_config *c,
					      const struct tb_target *t);

/* True when the defaults or some enabled rule set a limit. */
bool tb_config_any_limit(const struct tb_config *c);

/* The config key of a field ("read_timeout", "enabled"), or NULL. */
const char *tb_config_key(int field);

/* Number of tb_env_vars rows (fields 0 .. n-1). */
int tb_config_env_fields(void);

/*
 * Fills *ov from get(name, ctx) (getenv-like), keeping only valid values (a bad value was
 * already reported by the env parser) and marking each with origin.
 */
void tb_overrides_from(struct tb_overrides *ov, const char *(*get)(const char *name, void *ctx),
		       void *ctx, enum tb_origin origin);

#endif
