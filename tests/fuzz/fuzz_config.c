/* fuzz_config.c - libFuzzer target for the configuration file: the input is the file's text,
 * resolved by tb_config_parse_text into a rule table whose shape and precedence are checked. */
#include <libconfig.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "config.h"
#include "duration.h"
#include "env.h"
#include "fuzz.h"

static const char NAME[] = "fuzz.conf";

struct reports {
	int calls;
};

static void on_error(void *ctx, const struct tb_config_error *e)
{
	struct reports *r = ctx;

	FUZZ_CHECK(e->file == NAME, "an error names file '%s'", e->file ? e->file : "(null)");
	FUZZ_CHECK(e->why != NULL && e->why[0] != '\0', "an error without a sentence (line %d)",
		   e->line);
	FUZZ_CHECK(e->effect != NULL && (strcmp(e->effect, "file ignored") == 0 ||
					 strcmp(e->effect, "rule ignored") == 0 ||
					 strcmp(e->effect, "setting ignored") == 0),
		   "line %d: effect '%s'", e->line, e->effect ? e->effect : "(null)");
	FUZZ_CHECK(e->line >= 0, "line %d", e->line);
	FUZZ_CHECK((e->key == NULL) == (e->value == NULL), "line %d: key and value disagree",
		   e->line);
	r->calls++;
}

/* Every value a resolved layer holds is one the parsers could have produced. */
static void check_resolved(const struct tb_resolved *r, const char *what)
{
	const struct tb_settings *s = &r->set;

	FUZZ_CHECK(s->connect_ns >= 0 && s->write_ns >= 0 && s->first_byte_ns >= 0 &&
			   s->read_ns >= 0 && s->deadline_ns >= 0 && s->acquire_ns >= 0 &&
			   s->retry_window_ns >= -1,
		   "%s: a negative duration", what);
	FUZZ_CHECK(s->max_conns >= 0 && s->max_conns <= TB_MAX_CONNS_LIMIT && s->max_pending >= 0 &&
			   s->max_pending <= TB_MAX_CONNS_LIMIT,
		   "%s: a count out of range", what);
	FUZZ_CHECK(s->breaker == 0 && s->breaker_failures >= 0 &&
			   s->breaker_failures <= TB_MAX_CONNS_LIMIT && s->breaker_rate >= 0 &&
			   s->breaker_rate <= 100 && s->breaker_min_calls >= 1 &&
			   s->breaker_probes >= 1 && s->breaker_window_ns > 0 &&
			   s->breaker_open_ns > 0 && s->breaker_open_max_ns > 0 &&
			   s->breaker_slow_ns >= 0 && s->breaker_http <= TB_BREAKER_HTTP_OFF &&
			   tb_env_errno_name(s->breaker_errno) != NULL,
		   "%s: a breaker setting out of range", what);
	FUZZ_CHECK(s->retry_budget >= 0 && s->retry_budget <= 1000 && s->retry_budget_floor >= 0 &&
			   s->retry_budget_window_ns > 0,
		   "%s: a retry budget setting out of range", what);
	FUZZ_CHECK(s->max_conns_floor >= 1 && s->max_conns_ceiling >= 1 &&
			   (!s->max_conns_auto || s->max_conns == s->max_conns_ceiling),
		   "%s: an automatic gate of %d (ceiling %d)", what, s->max_conns,
		   s->max_conns_ceiling);
	/* An observed program is never refused. */
	FUZZ_CHECK(!s->observe || (!tb_settings_breaker_on(s) && !tb_settings_retry_budget_on(s) &&
				   !s->max_conns_auto),
		   "%s: observe with a breaker, a retry budget or an automatic gate", what);
	FUZZ_CHECK(memchr(s->log_path, '\0', sizeof(s->log_path)) != NULL,
		   "%s: log path unterminated", what);
	FUZZ_CHECK(s->log_target != TB_LOG_FILE || s->log_path[0] == '/', "%s: log path '%s'",
		   what, s->log_path);
	FUZZ_CHECK(r->hints.attempts >= 0 && r->hints.attempts <= 100 &&
			   r->hints.expected_rps >= 0 && r->hints.expected_rps <= 1e9 &&
			   r->hints.expected_p99_ns >= 0,
		   "%s: hints out of range", what);
	for (int f = 0; f < TB_FIELDS_MAX; f++) {
		FUZZ_CHECK(r->origin[f] <= TB_ORIGIN_OPTION && r->line[f] >= 0,
			   "%s: field %d origin %u line %d", what, f, r->origin[f], r->line[f]);
		FUZZ_CHECK(r->line[f] == 0 || r->origin[f] == TB_ORIGIN_DEFAULTS ||
				   r->origin[f] == TB_ORIGIN_RULE,
			   "%s: field %d has a line but origin %u", what, f, r->origin[f]);
	}
}

/* A target that rule i's first match certainly matches, or false when none is cheap to
 * build (a wildcard name or path). */
static bool target_of(const struct tb_match *m, struct tb_dest *d, struct tb_target *t,
		      const char **names)
{
	memset(d, 0, sizeof(*d));
	*t = (struct tb_target){ d, NULL, NULL, 0 };
	d->family = AF_INET;
	d->port = (uint16_t)(m->port > 0 ? m->port : 80);
	switch (m->kind) {
	case TB_MATCH_ANY:
	case TB_MATCH_PORT:
		return true;
	case TB_MATCH_ADDR:
		d->family = m->family;
		memcpy(d->addr, m->addr, 16);
		return true;
	case TB_MATCH_HOST:
		if (strchr(m->text, '*') != NULL)
			return false;
		names[0] = m->text;
		t->names = names;
		t->nnames = 1;
		return true;
	case TB_MATCH_UNIX:
		if (strpbrk(m->text, "*?[\\") != NULL)
			return false;
		t->dest = NULL;
		t->unix_path = m->text;
		return true;
	}
	return false;
}

static void check_config(const struct tb_config *c, int errors, int calls)
{
	bool host = false, unixr = false;

	FUZZ_CHECK(c != NULL, "no configuration");
	FUZZ_CHECK(errors == calls, "%d errors counted, %d reported", errors, calls);
	FUZZ_CHECK(c->path != NULL && strcmp(c->path, NAME) == 0, "path");
	check_resolved(&c->defaults, "defaults");
	FUZZ_CHECK(c->nrules == 0 || c->rules != NULL, "rules");
	for (size_t i = 0; i < c->nrules; i++) {
		const struct tb_rule *rule = &c->rules[i];
		struct tb_dest d;
		struct tb_target t;
		const char *names[1];
		const struct tb_rule *first;

		FUZZ_CHECK(rule->nmatches >= 1 && rule->matches != NULL, "rule %zu: no match", i);
		FUZZ_CHECK(memchr(rule->label, '\0', sizeof(rule->label)) != NULL && rule->line > 0,
			   "rule %zu: label or line", i);
		check_resolved(&rule->r, "rule");
		for (size_t k = 0; k < rule->nmatches; k++) {
			host |= rule->matches[k].kind == TB_MATCH_HOST;
			unixr |= rule->matches[k].kind == TB_MATCH_UNIX;
		}
		/* The first rule that matches wins: a target of rule i finds rule i or earlier. */
		if (!target_of(&rule->matches[0], &d, &t, names))
			continue;
		first = tb_config_match(c, &t);
		FUZZ_CHECK(first != NULL && first <= rule, "rule %zu ('%s') does not match its target",
			   i, rule->label);
		(void)tb_config_governing(c, &t);
	}
	FUZZ_CHECK(host == c->has_host_rules && unixr == c->has_unix_rules, "has_*_rules");
	(void)tb_config_any_limit(c);
}

/*
 * What the file says is what the table holds: each string of the defaults group that names
 * a duration (or the log) is read again here, straight from libconfig, and must have been
 * taken when the duration parser accepts it and refused otherwise, with the same value.
 */
static void check_defaults_against_text(const struct tb_config *c, const char *text)
{
	config_t cf;
	const config_setting_t *d;

	config_init(&cf);
	if (config_read_string(&cf, text) != CONFIG_TRUE)
		goto out;
	d = config_setting_get_member(config_root_setting(&cf), "defaults");
	if (d == NULL || !config_setting_is_group(d))
		goto out;
	for (int f = 0; f < tb_config_env_fields(); f++) {
		const struct tb_env_var *var = &tb_env_vars[f];
		const config_setting_t *st = config_setting_get_member(d, tb_config_key(f));
		const char *raw;
		int64_t ns = -1;
		const char *why;
		bool taken = c->defaults.origin[f] == TB_ORIGIN_DEFAULTS;

		if (st == NULL || config_setting_type(st) != CONFIG_TYPE_STRING)
			continue;
		raw = config_setting_get_string(st);
		if (var->kind == TB_ENV_DURATION) {
			bool ok = tb_duration_parse(raw, &ns, &why) == 0;

			FUZZ_CHECK(taken == ok, "defaults %s = \"%.40s...\" (%zu bytes) %s but %s",
				   tb_config_key(f), raw, strlen(raw), ok ? "parses" : "is refused",
				   taken ? "was taken" : "was not taken");
			/* observe (tb_settings_finish) clears every limit the file sets. */
			FUZZ_CHECK(!ok || c->defaults.set.observe ||
					   tb_env_number(&c->defaults.set, var) == ns,
				   "defaults %s = \"%s\": another value", tb_config_key(f), raw);
		} else if (var->kind == TB_ENV_PERIOD) {
			bool ok = tb_duration_parse(raw, &ns, &why) == 0 && ns > 0;

			FUZZ_CHECK(taken == ok, "defaults %s = \"%.40s...\" %s but %s",
				   tb_config_key(f), raw, ok ? "parses" : "is refused",
				   taken ? "was taken" : "was not taken");
			FUZZ_CHECK(!ok || tb_env_number(&c->defaults.set, var) == ns,
				   "defaults %s = \"%s\": another value", tb_config_key(f), raw);
		} else if (var->kind == TB_ENV_LOG && taken &&
			   c->defaults.set.log_target == TB_LOG_FILE) {
			FUZZ_CHECK(strcmp(c->defaults.set.log_path, raw) == 0,
				   "defaults log = \"%.40s...\" stored as another path", raw);
		}
	}
out:
	config_destroy(&cf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	struct reports r1 = { 0 }, r2 = { 0 };
	struct tb_overrides ov;
	struct tb_config *c, *o;
	int e1 = -1, e2 = -1, read_field = -1;

	c = tb_config_parse_text(text, size, NAME, NULL, on_error, &r1, &e1);
	check_config(c, e1, r1.calls);
	if (strlen(text) == size && strstr(text, "@include") == NULL)
		check_defaults_against_text(c, text);

	/* The same text under an environment that sets read_timeout: the same table, and the
	 * environment wins over the file in the defaults and in every rule. */
	memset(&ov, 0, sizeof(ov));
	for (int f = 0; f < tb_config_env_fields(); f++)
		if (strcmp(tb_env_vars[f].name, "TIMEBOX_READ_TIMEOUT") == 0)
			read_field = f;
	FUZZ_CHECK(read_field >= 0, "no TIMEBOX_READ_TIMEOUT");
	ov.value[read_field] = "1500ms";
	ov.origin[read_field] = TB_ORIGIN_ENV;
	o = tb_config_parse_text(text, size, NAME, &ov, on_error, &r2, &e2);
	check_config(o, e2, r2.calls);
	FUZZ_CHECK(e1 == e2 && c->nrules == o->nrules, "an override changed the file's reading");
	/* ... except that observe turns every limit off, the environment's too. */
	FUZZ_CHECK(o->defaults.set.read_ns == (o->defaults.set.observe ? 0 : 1500000000) &&
			   o->defaults.origin[read_field] == TB_ORIGIN_ENV,
		   "the environment does not override the defaults");
	for (size_t i = 0; i < o->nrules; i++)
		FUZZ_CHECK(o->rules[i].r.set.read_ns ==
					   (o->rules[i].r.set.observe ? 0 : 1500000000) &&
				   o->rules[i].r.origin[read_field] == TB_ORIGIN_ENV &&
				   o->rules[i].r.line[read_field] == 0,
			   "the environment does not override rule %zu", i);
	tb_config_free(c);
	tb_config_free(o);
	free(text);
	return 0;
}
