/* config.c - the configuration file: its text in, an immutable rule table out (the callers read
 * the file). Precedence, lowest first: built-in < defaults < rule < environment < option. */
#include "config.h"

#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "duration.h"
#include "env.h"

/* Settings that belong to the process, not to a destination: a rule may not set them. */
/* dns_timeout is one of them: a lookup happens before any destination is known, so only the
 * defaults' value can apply. */
/* scope is not among them: inbound requests open a budget when the defaults' scope is
 * request, and a rule may opt its destinations out with scope = "call" (rule_scope_error). */
static const char *const process_keys[] = { "log", "log_level", "strict", "dns_timeout",
					    "log_format", "log_rate", "stats_file", "stats_interval",
					    "observe", NULL };

static const char *const extra_keys[] = {
	[TB_FIELD_ENABLED - TB_FIELD_ENABLED] = "enabled",
	[TB_FIELD_ATTEMPTS - TB_FIELD_ENABLED] = "attempts",
	[TB_FIELD_EXPECTED_RPS - TB_FIELD_ENABLED] = "expected_rps",
	[TB_FIELD_EXPECTED_P99 - TB_FIELD_ENABLED] = "expected_p99",
};

/* Room for a value's text, NUL included; the longest a setting takes is a 255-byte log path.
 * value_text's "too long" sentence names this number. */
#define VALUE_MAX 320

static const char EFFECT_FILE[] = "file ignored";
static const char EFFECT_RULE[] = "rule ignored";
static const char EFFECT_SETTING[] = "setting ignored";

struct load {
	const char *file;
	tb_config_error_fn err;
	void *ctx;
	int errors;
};

int tb_config_env_fields(void)
{
	int n = 0;

	while (tb_env_vars[n].name != NULL)
		n++;
	return n;
}

/* "TIMEBOX_READ_TIMEOUT" -> "read_timeout" into buf (32 bytes). */
static void key_of(const struct tb_env_var *v, char *buf, size_t len)
{
	size_t i = 0;

	for (const char *p = v->name + strlen("TIMEBOX_"); *p && i + 1 < len; p++)
		buf[i++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	buf[i] = '\0';
}

/*
 * The keys of the env fields, computed once per process; the extra keys are constant.
 * Filled on first use from tb_config_parse, which runs before any reader (the library's
 * start-up is under pthread_once; the launcher is single-threaded).
 */
static char env_keys[TB_FIELDS_MAX][32];

static void fill_keys(void)
{
	for (int i = 0; tb_env_vars[i].name != NULL && i < TB_FIELD_ENABLED; i++)
		if (env_keys[i][0] == '\0')
			key_of(&tb_env_vars[i], env_keys[i], sizeof(env_keys[i]));
}

const char *tb_config_key(int field)
{
	if (field >= TB_FIELD_ENABLED && field < TB_FIELDS_MAX)
		return extra_keys[field - TB_FIELD_ENABLED];
	if (field < 0 || field >= tb_config_env_fields())
		return NULL;
	fill_keys();
	return env_keys[field];
}

/* The field named by a config key, or -1. TIMEBOX_CONFIG has no key in the file.
 * `shared` is accepted for gate_shared: inside a rule it can only mean the gate. */
static int field_of(const char *key)
{
	if (strcmp(key, "shared") == 0)
		key = "gate_shared";
	for (int f = 0; f < TB_FIELDS_MAX; f++) {
		const char *k = tb_config_key(f);

		if (k != NULL && strcmp(k, key) == 0 &&
		    (f >= TB_FIELD_ENABLED || tb_env_vars[f].kind != TB_ENV_PATH))
			return f;
	}
	return -1;
}

static bool is_process_key(const char *key)
{
	for (int i = 0; process_keys[i] != NULL; i++)
		if (strcmp(process_keys[i], key) == 0)
			return true;
	return false;
}

static void report(struct load *l, int line, const char *key, const char *value, const char *why,
		   const char *effect)
{
	struct tb_config_error e = { l->file, line, key, value, why, effect };

	l->errors++;
	if (l->err != NULL)
		l->err(l->ctx, &e);
}

/* A setting's value as text, the way the environment would carry it ("250ms", "30",
 * "true"). Returns 0, or -1 with *why for a group or a list, or for a string that does not
 * fit buf (cut, "000...01sXYZ" would read as a valid "000...01s"). */
static int value_text(const config_setting_t *st, char *buf, size_t len, const char **why)
{
	switch (config_setting_type(st)) {
	case CONFIG_TYPE_STRING:
		if ((size_t)snprintf(buf, len, "%s", config_setting_get_string(st)) >= len) {
			*why = "too long: no setting takes a value of 320 bytes or more";
			return -1;
		}
		return 0;
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64:
		snprintf(buf, len, "%lld", (long long)config_setting_get_int64(st));
		return 0;
	case CONFIG_TYPE_FLOAT:
		snprintf(buf, len, "%g", config_setting_get_float(st));
		return 0;
	case CONFIG_TYPE_BOOL:
		snprintf(buf, len, "%s", config_setting_get_bool(st) ? "true" : "false");
		return 0;
	default:
		snprintf(buf, len, "%s", config_setting_is_group(st) ? "{...}" : "(...)");
		*why = "wrong type: a setting here is a single value, not a group or a list";
		return -1;
	}
}

/* The type each kind of setting accepts in the file; NULL when t is fine. */
static const char *type_error(enum tb_env_kind kind, int t)
{
	switch (kind) {
	case TB_ENV_DURATION:
	case TB_ENV_PERIOD:
		if (t == CONFIG_TYPE_STRING || t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64 ||
		    t == CONFIG_TYPE_FLOAT)
			return NULL; /* a number gets the duration parser's own message */
		return "wrong type: a duration is a string with a unit, e.g. \"250ms\", or \"off\"";
	case TB_ENV_COUNT:
		if (t == CONFIG_TYPE_STRING || t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
			return NULL;
		return "wrong type: a count is a whole number, or \"off\"";
	case TB_ENV_GATE_SIZE:
		if (t == CONFIG_TYPE_STRING || t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
			return NULL;
		return "wrong type: a gate's size is a whole number, \"auto\" or \"off\"";
	case TB_ENV_POSITIVE:
	case TB_ENV_NUMBER:
		if (t == CONFIG_TYPE_STRING || t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
			return NULL;
		return "wrong type: this setting is a whole number";
	case TB_ENV_PERCENT:
	case TB_ENV_SHARE:
		if (t == CONFIG_TYPE_STRING || t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64)
			return NULL;
		return "wrong type: a percentage is a whole number, e.g. 50 or \"50%\", or \"off\"";
	case TB_ENV_BREAKER:
		return t == CONFIG_TYPE_BOOL ? NULL : "wrong type: breaker is true or false";
	case TB_ENV_BOOL:
		return t == CONFIG_TYPE_BOOL ? NULL : "wrong type: a switch is true or false";
	case TB_ENV_ERRNO:
	case TB_ENV_BREAKER_HTTP:
	case TB_ENV_SCOPE:
	case TB_ENV_ON_TIMEOUT:
	case TB_ENV_LOG:
	case TB_ENV_GATE_NB:
	case TB_ENV_LOG_LEVEL:
	case TB_ENV_PROTOCOL:
	case TB_ENV_PATH:
	case TB_ENV_LOG_FORMAT:
	case TB_ENV_FILE:
	case TB_ENV_HEADER:
		return t == CONFIG_TYPE_STRING ? NULL : "wrong type: this setting is a string";
	}
	return NULL;
}

struct apply_err {
	const char *why;
};

static void keep_why(void *ctx, const char *name, const char *value, const char *why)
{
	struct apply_err *a = ctx;

	(void)name;
	(void)value;
	a->why = why;
}

/*
 * A rule's scope says whether its destinations' calls draw on the thread's inbound request
 * budget (request, what the defaults' scope=request gives every rule) or keep their own
 * deadline only (call). `process` is the whole process's or nothing: not a rule's, and a
 * rule cannot leave a process-scoped process (`rule_from`: the scope the rule inherited).
 */
static const char *rule_scope_error(const char *value, enum tb_scope rule_from)
{
	if (rule_from == TB_SCOPE_PROCESS)
		return "the defaults' scope is process, which covers every destination: a rule "
		       "cannot set another";
	if (strcmp(value, "process") == 0)
		return "a rule's scope is call or request (process is set in defaults)";
	return NULL;
}

/* Applies one file setting to r. Returns 0, or -1 with *why (a static sentence) and the
 * value's text in vbuf. */
static int apply_one(struct tb_resolved *r, int field, const config_setting_t *st, char *vbuf,
		     size_t vlen, const char **why, bool in_rule)
{
	int t = config_setting_type(st);

	if (value_text(st, vbuf, vlen, why) < 0)
		return -1;
	if (field == TB_FIELD_ENABLED) {
		if (t != CONFIG_TYPE_BOOL) {
			*why = "wrong type: enabled is true or false";
			return -1;
		}
		r->enabled = config_setting_get_bool(st);
	} else if (field == TB_FIELD_ATTEMPTS) {
		long long n = config_setting_get_int64(st);

		if ((t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64) || n < 1 || n > 100) {
			*why = "attempts is a whole number from 1 to 100 (the first try included)";
			return -1;
		}
		r->hints.attempts = (int)n;
	} else if (field == TB_FIELD_EXPECTED_RPS) {
		double v = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(st)
						   : (double)config_setting_get_int64(st);

		if ((t != CONFIG_TYPE_FLOAT && t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64) ||
		    !(v > 0) || v > 1e9) {
			*why = "expected_rps is a number of calls per second above 0";
			return -1;
		}
		r->hints.expected_rps = v;
	} else if (field == TB_FIELD_EXPECTED_P99) {
		int64_t ns;

		if (t != CONFIG_TYPE_STRING) {
			*why = "wrong type: a duration is a string with a unit, e.g. \"250ms\"";
			return -1;
		}
		if (tb_duration_parse(vbuf, &ns, why) < 0)
			return -1;
		if (ns <= 0) {
			*why = "expected_p99 must be above 0";
			return -1;
		}
		r->hints.expected_p99_ns = ns;
	} else {
		const struct tb_env_var *v = &tb_env_vars[field];
		struct apply_err a = { NULL };

		if (in_rule && is_process_key(tb_config_key(field))) {
			*why = "a process-wide setting: set it in defaults, not in a rule";
			return -1;
		}
		if ((*why = type_error(v->kind, t)) != NULL)
			return -1;
		if (in_rule && v->kind == TB_ENV_SCOPE &&
		    (*why = rule_scope_error(vbuf, r->set.scope)) != NULL)
			return -1;
		/* The environment's "0 means none" is refused here: in a file, max_conns = 0 is
		 * more likely a mistake than a wish, and "off" says the wish plainly. */
		if ((v->kind == TB_ENV_COUNT || v->kind == TB_ENV_GATE_SIZE) &&
		    strcmp(vbuf, "0") == 0) {
			*why = "a count is at least 1; write \"off\" for none";
			return -1;
		}
		if ((v->kind == TB_ENV_PERCENT || v->kind == TB_ENV_SHARE) &&
		    (strcmp(vbuf, "0") == 0 || strcmp(vbuf, "0%") == 0)) {
			*why = "a percentage is at least 1; write \"off\" for none";
			return -1;
		}
		if (tb_env_apply(&r->set, v, vbuf, keep_why, &a) < 0) {
			*why = a.why;
			return -1;
		}
	}
	r->origin[field] = in_rule ? TB_ORIGIN_RULE : TB_ORIGIN_DEFAULTS;
	r->line[field] = config_setting_source_line(st);
	return 0;
}

/* Applies every setting of group g to r, skipping `match` in a rule. Returns the number of
 * problems (each reported). */
static int apply_group(struct load *l, const config_setting_t *g, struct tb_resolved *r,
		       bool in_rule)
{
	int bad = 0, n = config_setting_length(g);

	for (int i = 0; i < n; i++) {
		const config_setting_t *st = config_setting_get_elem(g, (unsigned)i);
		const char *key = config_setting_name(st), *why = NULL;
		char vbuf[VALUE_MAX];
		int field;

		if (key == NULL || (in_rule && strcmp(key, "match") == 0))
			continue;
		field = field_of(key);
		if (field < 0) {
			if (value_text(st, vbuf, sizeof(vbuf), &why) < 0)
				why = NULL;
			report(l, config_setting_source_line(st), key, vbuf,
			       strcmp(key, "match") == 0 ? "match belongs in a rule of destinations"
							 : "unknown key",
			       in_rule ? EFFECT_RULE : EFFECT_SETTING);
			bad++;
			continue;
		}
		if (apply_one(r, field, st, vbuf, sizeof(vbuf), &why, in_rule) < 0) {
			report(l, config_setting_source_line(st), key, vbuf, why,
			       in_rule ? EFFECT_RULE : EFFECT_SETTING);
			bad++;
		}
	}
	return bad;
}

/* Parses the rule's `match` (a string or a list of strings) into rule. Returns 0 or -1
 * (reported). */
static int parse_matches(struct load *l, const config_setting_t *g, struct tb_rule *rule)
{
	const config_setting_t *m = config_setting_get_member(g, "match");
	int n, line = config_setting_source_line(g);
	size_t used = 0;

	if (m == NULL) {
		report(l, line, "match", "", "a rule needs a match, e.g. match = \"inventory:8080\"",
		       EFFECT_RULE);
		return -1;
	}
	line = config_setting_source_line(m);
	if (config_setting_type(m) == CONFIG_TYPE_STRING) {
		n = 1;
	} else if (config_setting_is_aggregate(m) && !config_setting_is_group(m) &&
		   config_setting_length(m) > 0) {
		n = config_setting_length(m);
	} else {
		report(l, line, "match", "", "match is a string or a list of strings", EFFECT_RULE);
		return -1;
	}
	rule->matches = calloc((size_t)n, sizeof(*rule->matches));
	if (rule->matches == NULL) {
		report(l, line, "match", "", "out of memory", EFFECT_RULE);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *e = n == 1 && config_setting_type(m) == CONFIG_TYPE_STRING
						    ? m
						    : config_setting_get_elem(m, (unsigned)i);
		const char *text = config_setting_get_string(e), *why;

		if (text == NULL) {
			report(l, line, "match", "", "match is a string or a list of strings",
			       EFFECT_RULE);
			return -1;
		}
		if (tb_match_parse(text, &rule->matches[i], &why) < 0) {
			report(l, line, "match", text, why, EFFECT_RULE);
			return -1;
		}
		used += (size_t)snprintf(rule->label + used, sizeof(rule->label) - used, "%s%s",
					 i ? ", " : "", text);
		if (used >= sizeof(rule->label))
			used = sizeof(rule->label) - 1;
	}
	rule->nmatches = (size_t)n;
	rule->line = line;
	return 0;
}

/* The environment's layer over r, field by field, then the derived values. */
static void overlay(struct tb_resolved *r, const struct tb_overrides *ov)
{
	if (ov != NULL) {
		for (int f = 0; f < TB_FIELD_ENABLED && tb_env_vars[f].name != NULL; f++) {
			if (ov->value[f] == NULL)
				continue;
			if (tb_env_apply(&r->set, &tb_env_vars[f], ov->value[f], NULL, NULL) == 0) {
				r->origin[f] = ov->origin[f];
				r->line[f] = 0;
			}
		}
	}
	tb_settings_finish(&r->set);
}

static void resolved_init(struct tb_resolved *r)
{
	memset(r, 0, sizeof(*r));
	tb_settings_init(&r->set);
	r->enabled = true;
}

static void parse_rules(struct load *l, struct tb_config *c, const config_setting_t *list)
{
	int n = config_setting_length(list);

	if (!config_setting_is_list(list)) {
		report(l, config_setting_source_line(list), "destinations", "",
		       "destinations is a list of rules: ( { match = \"...\"; ... }, ... )",
		       EFFECT_SETTING);
		return;
	}
	c->rules = calloc((size_t)n + 1, sizeof(*c->rules));
	if (c->rules == NULL) {
		report(l, 0, "destinations", "", "out of memory", EFFECT_SETTING);
		return;
	}
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(list, (unsigned)i);
		struct tb_rule *rule = &c->rules[c->nrules];
		int bad;

		memset(rule, 0, sizeof(*rule));
		if (!config_setting_is_group(g)) {
			report(l, config_setting_source_line(g), "destinations", "",
			       "each rule is a group: { match = \"...\"; ... }", EFFECT_RULE);
			continue;
		}
		/* Not yet overlaid: the rule comes before the environment. A rule is enabled
		 * unless it says otherwise; the defaults' `enabled` is for unmatched traffic. */
		rule->r = c->defaults;
		rule->r.enabled = true;
		rule->r.origin[TB_FIELD_ENABLED] = TB_ORIGIN_BUILTIN;
		rule->r.line[TB_FIELD_ENABLED] = 0;
		bad = parse_matches(l, g, rule) < 0;
		bad += apply_group(l, g, &rule->r, true); /* its errors are reported too */
		if (bad > 0) {
			free(rule->matches);
			memset(rule, 0, sizeof(*rule));
			continue;
		}
		for (size_t k = 0; k < rule->nmatches; k++) {
			c->has_host_rules |= rule->matches[k].kind == TB_MATCH_HOST;
			c->has_unix_rules |= rule->matches[k].kind == TB_MATCH_UNIX;
		}
		c->nrules++;
	}
}

/* Builds the configuration from a parsed libconfig tree (cf NULL: from nothing). */
static struct tb_config *build(struct load *l, const config_t *cf, const struct tb_overrides *ov)
{
	struct tb_config *c = calloc(1, sizeof(*c));
	const config_setting_t *root;
	int n;

	if (c == NULL)
		return NULL;
	c->path = strdup(l->file);
	resolved_init(&c->defaults);
	if (cf != NULL) {
		const config_setting_t *d, *list;

		root = config_root_setting(cf);
		n = config_setting_length(root);
		for (int i = 0; i < n; i++) {
			const config_setting_t *st = config_setting_get_elem(root, (unsigned)i);
			const char *key = config_setting_name(st);

			if (strcmp(key, "defaults") != 0 && strcmp(key, "destinations") != 0)
				report(l, config_setting_source_line(st), key, "",
				       field_of(key) >= 0
					       ? "a setting belongs in defaults { ... } or in a rule"
					       : "unknown key: the file holds defaults and destinations",
				       EFFECT_SETTING);
		}
		d = config_setting_get_member(root, "defaults");
		if (d != NULL && !config_setting_is_group(d))
			report(l, config_setting_source_line(d), "defaults", "",
			       "defaults is a group: defaults = { read_timeout = \"250ms\"; }",
			       EFFECT_SETTING);
		else if (d != NULL)
			apply_group(l, d, &c->defaults, false);
		list = config_setting_get_member(root, "destinations");
		if (list != NULL)
			parse_rules(l, c, list);
	}
	overlay(&c->defaults, ov);
	for (size_t i = 0; i < c->nrules; i++)
		overlay(&c->rules[i].r, ov);
	return c;
}

static struct tb_config *finish(config_t *cf, bool ok, struct load *l,
				const struct tb_overrides *ov, int *errors)
{
	struct tb_config *c;

	if (!ok) {
		report(l, config_error_line(cf), NULL, NULL, config_error_text(cf), EFFECT_FILE);
		c = build(l, NULL, ov);
	} else {
		c = build(l, cf, ov);
	}
	config_destroy(cf);
	*errors = l->errors;
	return c;
}

const char tb_config_too_large[] =
	"larger than 1 MiB: not read (a configuration file is a rule table of a few KB)";

const char *tb_config_refusal(unsigned mode, long long size)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return size > TB_CONFIG_MAX_BYTES ? tb_config_too_large : NULL;
	case S_IFDIR:
		return "not a regular file: a directory";
	case S_IFIFO:
		return "not a regular file: a FIFO (reading it would wait for a writer)";
	case S_IFSOCK:
		return "not a regular file: a socket";
	case S_IFCHR:
	case S_IFBLK:
		return "not a regular file: a device";
	default:
		return "not a regular file";
	}
}

/*
 * The line of the first @include in text, or 0. libconfig's scanner takes "@include" at
 * the start of any line, after blanks (even inside what a reader takes for a comment or a
 * string, its rule matches first there), so every such line counts.
 */
static int include_line(const char *text)
{
	int line = 1;

	for (const char *p = text; *p; line++) {
		p += strspn(p, " \t");
		if (strncmp(p, "@include", 8) == 0)
			return line;
		p = strchr(p, '\n');
		if (p == NULL)
			break;
		p++;
	}
	return 0;
}

struct tb_config *tb_config_parse_text(const char *text, size_t len, const char *name,
				       const struct tb_overrides *ov, tb_config_error_fn err,
				       void *ctx, int *errors)
{
	struct load l = { name, err, ctx, 0 };
	config_t cf;
	int line;

	fill_keys();
	if (len > TB_CONFIG_MAX_BYTES) {
		report(&l, 0, NULL, NULL, tb_config_too_large, EFFECT_FILE);
		*errors = l.errors;
		return build(&l, NULL, ov);
	}
	if (memchr(text, '\0', len) != NULL) {
		report(&l, 0, NULL, NULL, "a NUL byte: not a text file", EFFECT_FILE);
		*errors = l.errors;
		return build(&l, NULL, ov);
	}
	if ((line = include_line(text)) > 0) {
		report(&l, line, NULL, NULL,
		       "@include is not supported: write the rules into this one file",
		       EFFECT_FILE);
		*errors = l.errors;
		return build(&l, NULL, ov);
	}
	config_init(&cf);
	return finish(&cf, config_read_string(&cf, text) == CONFIG_TRUE, &l, ov, errors);
}

struct tb_config *tb_config_parse(const char *text, const char *name,
				  const struct tb_overrides *ov, tb_config_error_fn err, void *ctx,
				  int *errors)
{
	return tb_config_parse_text(text, strlen(text), name, ov, err, ctx, errors);
}

struct tb_config *tb_config_unread(const char *name, const char *why,
				   const struct tb_overrides *ov, tb_config_error_fn err,
				   void *ctx, int *errors)
{
	struct load l = { name, err, ctx, 0 };
	struct tb_config *c;

	fill_keys();
	report(&l, 0, NULL, NULL, why, EFFECT_FILE);
	c = build(&l, NULL, ov);
	*errors = l.errors;
	return c;
}

void tb_config_free(struct tb_config *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->nrules; i++)
		free(c->rules[i].matches);
	free(c->rules);
	free(c->path);
	free(c);
}

const struct tb_rule *tb_config_match(const struct tb_config *c, const struct tb_target *t)
{
	for (size_t i = 0; i < c->nrules; i++)
		for (size_t k = 0; k < c->rules[i].nmatches; k++)
			if (tb_match_test(&c->rules[i].matches[k], t))
				return &c->rules[i];
	return NULL;
}

const struct tb_settings *tb_config_governing(const struct tb_config *c,
					      const struct tb_target *t)
{
	const struct tb_rule *rule = tb_config_match(c, t);
	const struct tb_resolved *r = rule != NULL ? &rule->r : NULL;

	if (r == NULL && t->unix_path == NULL)
		r = &c->defaults;
	if (r == NULL || !r->enabled || !tb_settings_any_limit(&r->set))
		return NULL;
	return &r->set;
}

bool tb_config_any_limit(const struct tb_config *c)
{
	if (c->defaults.enabled && tb_settings_any_limit(&c->defaults.set))
		return true;
	for (size_t i = 0; i < c->nrules; i++)
		if (c->rules[i].r.enabled && tb_settings_any_limit(&c->rules[i].r.set))
			return true;
	return false;
}

void tb_overrides_from(struct tb_overrides *ov, const char *(*get)(const char *name, void *ctx),
		       void *ctx, enum tb_origin origin)
{
	struct tb_settings scratch;

	for (int f = 0; f < TB_FIELD_ENABLED && tb_env_vars[f].name != NULL; f++) {
		const char *v = get(tb_env_vars[f].name, ctx);

		tb_settings_init(&scratch);
		if (v == NULL || tb_env_vars[f].kind == TB_ENV_PATH ||
		    tb_env_apply(&scratch, &tb_env_vars[f], v, NULL, NULL) < 0)
			continue;
		ov->value[f] = v;
		ov->origin[f] = (uint8_t)origin;
	}
}
