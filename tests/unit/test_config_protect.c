/* test_config_protect.c - the configuration keys of the downstream's protection (the breaker,
 * the retry budget, max_conns = "auto"): valid and invalid values, per-rule overrides, and
 * the breaker's switch across the layers defaults < rule < environment. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "unit.h"

#include "config.h"
#include "env.h"

#define MAX_ERRORS 16

struct errors {
	int count;
	int line[MAX_ERRORS];
	char key[MAX_ERRORS][64];
	char value[MAX_ERRORS][128];
	char why[MAX_ERRORS][200];
};

static struct errors errs;

static void collect(void *ctx, const struct tb_config_error *e)
{
	struct errors *x = ctx;

	if (x->count < MAX_ERRORS) {
		x->line[x->count] = e->line;
		snprintf(x->key[x->count], 64, "%s", e->key ? e->key : "");
		snprintf(x->value[x->count], 128, "%s", e->value ? e->value : "");
		snprintf(x->why[x->count], 200, "%s", e->why);
	}
	x->count++;
}

static const char *fake_get(const char *name, void *ctx)
{
	const char *const *e = ctx;
	size_t len = strlen(name);

	for (; *e != NULL; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}

static struct tb_config *parse_env(const char *text, const char *const *env)
{
	struct tb_overrides ov;
	struct tb_config *c;
	int n = -1;

	memset(&ov, 0, sizeof(ov));
	if (env != NULL)
		tb_overrides_from(&ov, fake_get, (void *)env, TB_ORIGIN_ENV);
	memset(&errs, 0, sizeof(errs));
	c = tb_config_parse(text, "test.conf", &ov, collect, &errs, &n);
	assert_non_null(c);
	assert_int_equal(n, errs.count);
	return c;
}

static int field(const char *key)
{
	for (int f = 0; f < TB_FIELDS_MAX; f++)
		if (tb_config_key(f) && strcmp(tb_config_key(f), key) == 0)
			return f;
	fail_msg("no field %s", key);
	return -1;
}

/* `defaults = { KEY = VALUE; }` is refused once, on line 2, naming KEY, VALUE and why. */
static void refused(const char *key, const char *value, const char *fragment)
{
	char text[256];

	snprintf(text, sizeof(text), "defaults = {\n %s = %s; };\n", key, value);
	tb_config_free(parse_env(text, NULL));
	if (errs.count != 1)
		fail_msg("%s: %d errors, first: %s", text, errs.count, errs.why[0]);
	assert_int_equal(errs.line[0], 2);
	assert_string_equal(errs.key[0], key);
	if (strstr(errs.why[0], fragment) == NULL)
		fail_msg("%s = %s: '%s' lacks '%s'", key, value, errs.why[0], fragment);
}

static void test_every_key(void **state)
{
	struct tb_config *c = parse_env(
		"defaults = {\n"
		"  breaker_failures = 7;\n"
		"  breaker_rate = \"40%\";\n"
		"  breaker_min_calls = 50;\n"
		"  breaker_window = \"30s\";\n"
		"  breaker_open = \"5s\";\n"
		"  breaker_open_max = \"1m\";\n"
		"  breaker_probes = 3;\n"
		"  breaker_slow = \"800ms\";\n"
		"  breaker_errno = \"ETIMEDOUT\";\n"
		"  breaker_http = \"5xx\";\n"
		"  retry_budget = 20;\n"
		"  retry_budget_floor = 0;\n"
		"  retry_budget_window = \"20s\";\n"
		"  max_conns = \"auto\";\n"
		"  max_conns_floor = 2;\n"
		"  max_conns_ceiling = 80;\n"
		"};\n",
		NULL);
	const struct tb_settings *s = &c->defaults.set;

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_int_equal(s->breaker_failures, 7);
	assert_int_equal(s->breaker_rate, 40);
	assert_int_equal(s->breaker_min_calls, 50);
	assert_int_equal(s->breaker_window_ns, 30 * S);
	assert_int_equal(s->breaker_open_ns, 5 * S);
	assert_int_equal(s->breaker_open_max_ns, 60 * S);
	assert_int_equal(s->breaker_probes, 3);
	assert_int_equal(s->breaker_slow_ns, 800 * MS);
	assert_int_equal(s->breaker_errno, ETIMEDOUT);
	assert_int_equal(s->breaker_http, TB_BREAKER_HTTP_5XX);
	assert_int_equal(s->retry_budget, 20);
	assert_int_equal(s->retry_budget_floor, 0);
	assert_int_equal(s->retry_budget_window_ns, 20 * S);
	assert_true(s->max_conns_auto);
	assert_int_equal(s->max_conns, 80); /* the ceiling: the gate is present */
	assert_int_equal(s->max_conns_floor, 2);
	assert_int_equal(c->defaults.origin[field("breaker_rate")], TB_ORIGIN_DEFAULTS);
	assert_int_equal(c->defaults.line[field("max_conns_ceiling")], 17);
	assert_true(tb_config_any_limit(c));
	tb_config_free(c);
}

static void test_bad_values(void **state)
{
	(void)state;
	refused("breaker", "\"on\"", "true or false");
	refused("breaker", "1", "true or false");
	refused("breaker_failures", "0", "at least 1; write \"off\"");
	refused("breaker_failures", "\"many\"", "a count is");
	refused("breaker_rate", "0", "at least 1; write \"off\"");
	refused("breaker_rate", "\"0%\"", "at least 1; write \"off\"");
	refused("breaker_rate", "150", "from 1 to 100");
	refused("breaker_rate", "\"50 %\"", "from 1 to 100");
	refused("breaker_rate", "0.5", "wrong type: a percentage");
	refused("breaker_min_calls", "0", "from 1 to 1000000");
	refused("breaker_window", "\"off\"", "cannot be off");
	refused("breaker_open", "30", "needs a unit");
	refused("breaker_open_max", "true", "wrong type");
	refused("breaker_probes", "\"off\"", "from 1 to 1000000");
	refused("breaker_slow", "\"-1s\"", "cannot be negative");
	refused("breaker_errno", "\"EPERM\"", "ECONNREFUSED, ETIMEDOUT");
	refused("breaker_errno", "111", "wrong type: this setting is a string");
	refused("breaker_http", "\"4xx\"", "gateway (502, 503, 504), 5xx or off");
	refused("retry_budget", "1001", "from 1 to 1000");
	refused("retry_budget", "\"ten\"", "from 1 to 1000");
	refused("retry_budget_floor", "-1", "from 0 to 1000000");
	refused("retry_budget_window", "\"0s\"", "cannot be off");
	refused("max_conns", "\"automatic\"", "auto, or 0/off");
	refused("max_conns", "true", "wrong type: a gate's size");
	refused("max_conns_ceiling", "0", "from 1 to 1000000");
	refused("max_conns_floor", "1.5", "wrong type: this setting is a whole number");
	/* the value is named as written */
	refused("breaker_rate", "\"101%\"", "from 1 to 100");
	assert_string_equal(errs.value[0], "101%");
}

/* Each key in a rule overrides the defaults' value; the others are inherited. */
static void test_rule_overrides(void **state)
{
	struct tb_config *c = parse_env(
		"defaults = { breaker = true; retry_budget = \"20%\"; max_conns = 50; };\n"
		"destinations = (\n"
		"  { match = \"pay:443\"; breaker_failures = 3; breaker_open = \"10s\";\n"
		"    max_conns = \"auto\"; max_conns_ceiling = 200; },\n"
		"  { match = \"batch:80\"; breaker = false; retry_budget = \"off\"; },\n"
		"  { match = \"cache:6379\"; breaker_rate = 25; max_conns = 8; }\n"
		");\n",
		NULL);
	const struct tb_settings *d = &c->defaults.set, *pay, *batch, *cache;

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_int_equal(c->nrules, 3);
	pay = &c->rules[0].r.set;
	batch = &c->rules[1].r.set;
	cache = &c->rules[2].r.set;
	/* breaker = true alone: Envoy's 5 in a row and Hystrix's 50 % */
	assert_int_equal(d->breaker_failures, 5);
	assert_int_equal(d->breaker_rate, 50);
	assert_int_equal(d->retry_budget, 20);
	assert_false(d->max_conns_auto);
	/* a rule that gives a mode has that mode (and the switch's default for the other) */
	assert_int_equal(pay->breaker_failures, 3);
	assert_int_equal(pay->breaker_rate, 0);
	assert_int_equal(pay->breaker_open_ns, 10 * S);
	assert_int_equal(pay->retry_budget, 20);
	assert_true(pay->max_conns_auto);
	assert_int_equal(pay->max_conns, 200);
	assert_int_equal(c->rules[0].r.origin[field("breaker_failures")], TB_ORIGIN_RULE);
	assert_int_equal(c->rules[0].r.origin[field("breaker")], TB_ORIGIN_DEFAULTS);
	/* breaker = false in a rule: off there, whatever the defaults say */
	assert_false(tb_settings_breaker_on(batch));
	assert_false(tb_settings_retry_budget_on(batch));
	assert_int_equal(batch->max_conns, 50);
	assert_int_equal(cache->breaker_failures, 0);
	assert_int_equal(cache->breaker_rate, 25);
	assert_false(cache->max_conns_auto);
	assert_int_equal(cache->max_conns, 8);
	tb_config_free(c);
}

/* The environment beats the file, field by field: TIMEBOX_BREAKER=off turns every rule's
 * breaker off; TIMEBOX_MAX_CONNS=auto makes every gate size itself. */
static void test_environment_over_rules(void **state)
{
	static const char *const off[] = { "TIMEBOX_BREAKER=off", NULL };
	static const char *const autosize[] = { "TIMEBOX_MAX_CONNS=auto",
						"TIMEBOX_MAX_CONNS_CEILING=64", NULL };
	static const char *const text =
		"defaults = { breaker_failures = 4; max_conns = 10; };\n"
		"destinations = ( { match = \"*:80\"; breaker_rate = 30; max_conns = 20; } );\n";
	struct tb_config *c = parse_env(text, off);

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_false(tb_settings_breaker_on(&c->defaults.set));
	assert_false(tb_settings_breaker_on(&c->rules[0].r.set));
	assert_int_equal(c->rules[0].r.origin[field("breaker")], TB_ORIGIN_ENV);
	tb_config_free(c);

	c = parse_env(text, autosize);
	assert_int_equal(errs.count, 0);
	assert_true(c->rules[0].r.set.max_conns_auto);
	assert_int_equal(c->rules[0].r.set.max_conns, 64);
	assert_int_equal(c->rules[0].r.set.breaker_failures, 4);
	assert_int_equal(c->rules[0].r.set.breaker_rate, 30);
	tb_config_free(c);
}

/* A destination governed by the protection alone is governed: its connects must be seen. */
static void test_protection_alone_governs(void **state)
{
	struct tb_config *c = parse_env("defaults = { breaker = true; };\n", NULL);
	struct tb_dest d = dest_ip("192.0.2.1", 80);
	struct tb_target t = { &d, NULL, NULL, 0 };

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_ptr_equal(tb_config_governing(c, &t), &c->defaults.set);
	tb_config_free(c);
	c = parse_env("defaults = { observe = true; breaker = true; retry_budget = 10; };\n",
		      NULL);
	assert_false(tb_settings_breaker_on(&c->defaults.set));
	assert_false(tb_settings_retry_budget_on(&c->defaults.set));
	tb_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_key),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_rule_overrides),
		cmocka_unit_test(test_environment_over_rules),
		cmocka_unit_test(test_protection_alone_governs),
	};

	return cmocka_run_group_tests_name("config_protect", tests, NULL, NULL);
}
