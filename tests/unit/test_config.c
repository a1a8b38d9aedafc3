/* test_config.c - the configuration file: parsing, every error path (with its line), rule
 * resolution and first-match order, and the precedence built-in < defaults < rule < env. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	char effect[MAX_ERRORS][32];
};

static void collect(void *ctx, const struct tb_config_error *e)
{
	struct errors *x = ctx;

	if (x->count < MAX_ERRORS) {
		x->line[x->count] = e->line;
		snprintf(x->key[x->count], 64, "%s", e->key ? e->key : "");
		snprintf(x->value[x->count], 128, "%s", e->value ? e->value : "");
		snprintf(x->why[x->count], 200, "%s", e->why);
		snprintf(x->effect[x->count], 32, "%s", e->effect);
	}
	x->count++;
}

static struct errors errs;

static struct tb_config *parse_ov(const char *text, const struct tb_overrides *ov)
{
	int n = -1;
	struct tb_config *c;

	memset(&errs, 0, sizeof(errs));
	c = tb_config_parse(text, "test.conf", ov, collect, &errs, &n);
	assert_non_null(c);
	assert_int_equal(n, errs.count);
	return c;
}

static struct tb_config *parse(const char *text)
{
	return parse_ov(text, NULL);
}

/* Expects exactly one error at `line` for `key`, whose message holds `fragment`. */
static void one_error(const char *text, int line, const char *key, const char *fragment,
		      const char *effect)
{
	tb_config_free(parse(text));
	if (errs.count != 1)
		fail_msg("%s: %d errors, first: %s", text, errs.count, errs.why[0]);
	assert_int_equal(errs.line[0], line);
	assert_string_equal(errs.key[0], key);
	if (strstr(errs.why[0], fragment) == NULL)
		fail_msg("'%s' lacks '%s'", errs.why[0], fragment);
	assert_string_equal(errs.effect[0], effect);
}

static const struct tb_settings *governing(const struct tb_config *c, const char *addr, int port,
					   const char *name)
{
	struct tb_dest d = dest_ip(addr, port);
	const char *names[] = { name };
	struct tb_target t = { &d, NULL, names, name ? 1 : 0 };

	return tb_config_governing(c, &t);
}

static int field(const char *key)
{
	for (int f = 0; f < TB_FIELDS_MAX; f++)
		if (tb_config_key(f) && strcmp(tb_config_key(f), key) == 0)
			return f;
	fail_msg("no field %s", key);
	return -1;
}

static const char SERVICE[] =
	"# a service with several downstreams\n"
	"defaults = {\n"
	"  connect_timeout = \"100ms\";\n"
	"  read_timeout = \"1s\";\n"
	"  deadline = \"2s\";\n"
	"};\n"
	"destinations = (\n"
	"  { match = \"inventory:8080\"; read_timeout = \"250ms\"; deadline = \"300ms\";\n"
	"    max_conns = 30; acquire_timeout = \"50ms\"; },\n"
	"  { match = \"10.0.0.0/8:6379\"; read_timeout = \"50ms\"; deadline = \"100ms\"; },\n"
	"  { match = [\"stream:9000\", \"[fd00::/8]:9000\"]; deadline = \"off\"; },\n"
	"  { match = \"*:6379\"; read_timeout = \"5s\"; },\n"
	"  { match = \"10.9.9.9\"; enabled = false; },\n"
	"  { match = \"unix:/run/app.sock\"; read_timeout = \"10ms\"; }\n"
	");\n";

static void test_parse_service(void **state)
{
	struct tb_config *c = parse(SERVICE);
	const struct tb_settings *s;

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_int_equal(c->nrules, 6);
	assert_true(c->has_host_rules);
	assert_true(c->has_unix_rules);
	assert_int_equal(c->rules[0].line, 8);
	assert_string_equal(c->rules[2].label, "stream:9000, [fd00::/8]:9000");

	/* No rule: the defaults. */
	s = governing(c, "192.0.2.1", 80, NULL);
	assert_ptr_equal(s, &c->defaults.set);
	assert_int_equal(s->read_ns, 1000 * MS);
	assert_int_equal(s->first_byte_ns, 1000 * MS);

	/* A hostname rule: only with the learned name; the rest comes from the defaults. */
	s = governing(c, "192.0.2.7", 8080, "inventory");
	assert_ptr_equal(s, &c->rules[0].r.set);
	assert_int_equal(s->read_ns, 250 * MS);
	assert_int_equal(s->first_byte_ns, 250 * MS); /* follows the rule's read timeout */
	assert_int_equal(s->connect_ns, 100 * MS);
	assert_int_equal(s->max_conns, 30);
	assert_ptr_equal(governing(c, "192.0.2.7", 8080, NULL), &c->defaults.set);

	/* First match wins: 10.1.2.3:6379 matches rules 2 and 4; rule 2 comes first. */
	s = governing(c, "10.1.2.3", 6379, NULL);
	assert_int_equal(s->read_ns, 50 * MS);
	s = governing(c, "192.0.2.1", 6379, NULL);
	assert_int_equal(s->read_ns, 5000 * MS);

	/* deadline = "off" keeps the idle limits. */
	s = governing(c, "fd12::1", 9000, NULL);
	assert_int_equal(s->deadline_ns, 0);
	assert_int_equal(s->read_ns, 1000 * MS);
	assert_int_equal(s->connect_ns, 100 * MS);

	/* enabled = false leaves the destination alone. */
	assert_null(governing(c, "10.9.9.9", 80, NULL));
	tb_config_free(c);
}

static void test_unix_only_by_rule(void **state)
{
	struct tb_config *c = parse(SERVICE);
	struct tb_target app = { NULL, "/run/app.sock", NULL, 0 };
	struct tb_target other = { NULL, "/run/other.sock", NULL, 0 };

	(void)state;
	assert_non_null(tb_config_governing(c, &app));
	assert_int_equal(tb_config_governing(c, &app)->read_ns, 10 * MS);
	assert_null(tb_config_governing(c, &other));
	tb_config_free(c);
}

static void test_disabled_defaults(void **state)
{
	struct tb_config *c = parse("defaults = { read_timeout = \"1s\"; enabled = false; };\n"
				    "destinations = ( { match = \"*:80\"; } );\n");

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_null(governing(c, "192.0.2.1", 81, NULL));
	/* A rule is enabled unless it says otherwise. */
	assert_non_null(governing(c, "192.0.2.1", 80, NULL));
	assert_true(tb_config_any_limit(c));
	tb_config_free(c);
}

static void test_empty_file_limits_nothing(void **state)
{
	struct tb_config *c = parse("# nothing\n");

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_false(tb_config_any_limit(c));
	assert_null(governing(c, "192.0.2.1", 80, NULL));
	tb_config_free(c);
}

static void test_errors(void **state)
{
	(void)state;
	one_error("defaults = {\n read_timeout = \"250ms\"\n deadline = 1s; };\n", 3, "",
		  "syntax error", "file ignored");
	one_error("defaults = {\n reed_timeout = \"250ms\"; };\n", 2, "reed_timeout", "unknown key",
		  "setting ignored");
	one_error("defaults = {\n read_timeout = 250; };\n", 2, "read_timeout",
		  "a duration needs a unit", "setting ignored");
	one_error("defaults = {\n read_timeout = true; };\n", 2, "read_timeout", "wrong type",
		  "setting ignored");
	one_error("defaults = {\n read_timeout = \"-1s\"; };\n", 2, "read_timeout",
		  "cannot be negative", "setting ignored");
	one_error("defaults = {\n max_conns = 0; };\n", 2, "max_conns", "at least 1",
		  "setting ignored");
	one_error("defaults = {\n max_conns = \"0\"; };\n", 2, "max_conns", "at least 1",
		  "setting ignored");
	one_error("defaults = {\n max_conns = 1.5; };\n", 2, "max_conns", "wrong type",
		  "setting ignored");
	one_error("defaults = {\n scope = \"thread\"; };\n", 2, "scope", "call, process or request",
		  "setting ignored");
	one_error("defaults = {\n gate_shared = \"yes\"; };\n", 2, "gate_shared", "true or false",
		  "setting ignored");
	one_error("defaults = {\n config = \"/x\"; };\n", 2, "config", "unknown key",
		  "setting ignored");
	one_error("defaults = {\n match = \"*\"; };\n", 2, "match", "belongs in a rule",
		  "setting ignored");
	one_error("defaults = {\n attempts = 0; };\n", 2, "attempts", "1 to 100",
		  "setting ignored");
	one_error("defaults = {\n expected_p99 = \"0\"; };\n", 2, "expected_p99", "above 0",
		  "setting ignored");
	one_error("read_timeout = \"1s\";\n", 1, "read_timeout", "belongs in defaults",
		  "setting ignored");
	one_error("default = {};\n", 1, "default", "unknown key", "setting ignored");
	one_error("destinations = (\n { match = \"10.0.0.0/33\"; read_timeout = \"1s\"; } );\n", 2,
		  "match", "0 to 32", "rule ignored");
	one_error("destinations = (\n { read_timeout = \"1s\"; } );\n", 2, "match",
		  "needs a match", "rule ignored");
	one_error("destinations = (\n { match = \"*\";\n scope = \"process\"; } );\n", 3, "scope",
		  "a rule's scope is call or request", "rule ignored");
	one_error("defaults = { scope = \"process\"; };\n"
		  "destinations = (\n { match = \"*\";\n scope = \"call\"; } );\n", 4, "scope",
		  "cannot set another", "rule ignored");
	one_error("defaults = {\n deadline_header = \"X Deadline\"; };\n", 2, "deadline_header",
		  "1 to 63", "setting ignored");
	one_error("defaults = {\n deadline_header = 1000; };\n", 2, "deadline_header",
		  "is a string", "setting ignored");
	one_error("defaults = {\n propagate = 1; };\n", 2, "propagate", "true or false",
		  "setting ignored");
	one_error("destinations = (\n { match = \"*\";\n enabled = \"no\"; } );\n", 3, "enabled",
		  "true or false", "rule ignored");
	one_error("destinations = { match = \"*\"; };\n", 1, "destinations", "a list of rules",
		  "setting ignored");
	one_error("defaults = (1, 2);\n", 1, "defaults", "is a group", "setting ignored");
}

/*
 * scope = "request" in defaults: inbound requests open a budget, and every rule's calls draw
 * on it unless the rule says scope = "call". propagate and deadline_header are per rule
 * (outbound: what a destination is sent), the defaults' for inbound requests.
 */
static void test_request_scope_and_propagation(void **state)
{
	struct tb_config *c = parse("defaults = { deadline = \"1s\"; scope = \"request\";\n"
				    "  propagate = true; deadline_header = \"X-Budget-Ms\"; };\n"
				    "destinations = (\n"
				    "  { match = \"*:6379\"; scope = \"call\"; propagate = false; },\n"
				    "  { match = \"*:81\"; deadline_header = \"grpc-timeout\"; }\n"
				    ");\n");
	const struct tb_settings *redis, *web, *other;

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_int_equal(c->defaults.set.scope, TB_SCOPE_REQUEST);
	assert_true(c->defaults.set.propagate);
	assert_string_equal(c->defaults.set.deadline_header, "X-Budget-Ms");
	redis = governing(c, "192.0.2.1", 6379, NULL);
	web = governing(c, "192.0.2.1", 81, NULL);
	other = governing(c, "192.0.2.1", 82, NULL);
	assert_int_equal(redis->scope, TB_SCOPE_CALL);
	assert_false(redis->propagate);
	assert_string_equal(redis->deadline_header, "X-Budget-Ms");
	assert_int_equal(web->scope, TB_SCOPE_REQUEST);
	assert_true(web->propagate);
	assert_string_equal(web->deadline_header, "grpc-timeout");
	assert_int_equal(other->scope, TB_SCOPE_REQUEST);
	assert_int_equal(c->rules[0].r.origin[field("scope")], TB_ORIGIN_RULE);
	tb_config_free(c);
}

static void test_broken_rule_is_dropped(void **state)
{
	struct tb_config *c = parse("defaults = { read_timeout = \"1s\"; };\n"
				    "destinations = (\n"
				    "  { match = \"*:80\"; read_timeout = \"250\"; deadline = \"x\"; },\n"
				    "  { match = \"*:81\"; read_timeout = \"2s\"; }\n"
				    ");\n");

	(void)state;
	assert_int_equal(errs.count, 2); /* both mistakes of the rule, each once */
	assert_string_equal(errs.effect[0], "rule ignored");
	assert_int_equal(errs.line[0], 3);
	assert_int_equal(c->nrules, 1);
	assert_int_equal(governing(c, "192.0.2.1", 80, NULL)->read_ns, 1000 * MS);
	assert_int_equal(governing(c, "192.0.2.1", 81, NULL)->read_ns, 2000 * MS);
	tb_config_free(c);
}

static void test_bad_default_keeps_the_rest(void **state)
{
	struct tb_config *c = parse("defaults = { read_timeout = \"1s\"; deadline = \"1\"; };\n");

	(void)state;
	assert_int_equal(errs.count, 1);
	assert_int_equal(c->defaults.set.read_ns, 1000 * MS);
	assert_int_equal(c->defaults.set.deadline_ns, 0);
	tb_config_free(c);
}

/*
 * A value longer than the parser's buffer is refused, not cut: "000...01sXYZ" (317 zeros)
 * was read as its first 319 bytes, "000...01s", so a junk duration passed for 1s. Seen
 * while writing tests/fuzz/fuzz_config.c, whose check of the defaults against libconfig's
 * own reading catches it (corpus/config/regress_long_value). A long value that fits is
 * still read whole.
 */
static void test_long_value_not_truncated(void **state)
{
	char text[512], zeros[400];
	struct tb_config *c;

	(void)state;
	memset(zeros, '0', sizeof(zeros));
	snprintf(text, sizeof(text),
		 "defaults = { read_timeout = \"%.317s1sXYZ\"; deadline = \"1s\"; };\n", zeros);
	c = parse(text);
	assert_int_equal(errs.count, 1);
	assert_string_equal(errs.key[0], "read_timeout");
	assert_string_equal(errs.effect[0], "setting ignored");
	assert_int_equal(c->defaults.set.read_ns, 0);
	assert_int_equal(c->defaults.origin[field("read_timeout")], TB_ORIGIN_BUILTIN);
	assert_int_equal(c->defaults.set.deadline_ns, 1000 * MS);
	tb_config_free(c);

	/* A duration that fits the buffer is still refused past 64 characters, as the
	 * environment refuses it: one text, one meaning (test_duration.c test_long_text). */
	snprintf(text, sizeof(text), "defaults = { read_timeout = \"%.300s1s\"; };\n", zeros);
	c = parse(text);
	assert_int_equal(errs.count, 1);
	assert_string_equal(errs.key[0], "read_timeout");
	assert_int_equal(c->defaults.set.read_ns, 0);
	tb_config_free(c);

	/* The longest value a setting takes, a 255-byte log path, is read whole. */
	memset(zeros, 'a', sizeof(zeros));
	snprintf(text, sizeof(text), "defaults = { log = \"/%.254s\"; };\n", zeros);
	c = parse(text);
	assert_int_equal(errs.count, 0);
	assert_int_equal(strlen(c->defaults.set.log_path), 255);
	tb_config_free(c);
}

/* A file its reader could not read: one error for the whole file, nothing limited. */
static void test_unread_file(void **state)
{
	int n = 0;
	struct tb_config *c;

	(void)state;
	memset(&errs, 0, sizeof(errs));
	c = tb_config_unread("/etc/tb.conf", "cannot read the file: No such file or directory",
			     NULL, collect, &errs, &n);
	assert_non_null(c);
	assert_int_equal(n, 1);
	assert_int_equal(errs.line[0], 0);
	assert_string_equal(errs.key[0], "");
	assert_non_null(strstr(errs.why[0], "No such file or directory"));
	assert_string_equal(errs.effect[0], "file ignored");
	assert_string_equal(c->path, "/etc/tb.conf");
	assert_false(tb_config_any_limit(c));
	tb_config_free(c);
}

/* Only a regular file within the cap is read: a FIFO would block, a directory is a slip. */
static void test_file_refusals(void **state)
{
	(void)state;
	assert_null(tb_config_refusal(S_IFREG | 0644, 0));
	assert_null(tb_config_refusal(S_IFREG | 0644, TB_CONFIG_MAX_BYTES));
	assert_ptr_equal(tb_config_refusal(S_IFREG | 0644, TB_CONFIG_MAX_BYTES + 1),
			 tb_config_too_large);
	assert_non_null(strstr(tb_config_refusal(S_IFDIR | 0755, 4096), "a directory"));
	assert_non_null(strstr(tb_config_refusal(S_IFIFO | 0600, 0), "a FIFO"));
	assert_non_null(strstr(tb_config_refusal(S_IFCHR | 0666, 0), "not a regular file"));
	assert_non_null(strstr(tb_config_refusal(S_IFSOCK | 0666, 0), "a socket"));
}

/* The text itself: the cap, NUL bytes and @include each leave the file ignored. */
static void test_text_refusals(void **state)
{
	static const char nul[] = "defaults = { read_timeout = \"2s\"; };\0junk";
	static const char inc[] = "defaults = { read_timeout = \"2s\"; };\n"
				  "  \t@include \"/tmp/other.conf\"\n";
	size_t big = TB_CONFIG_MAX_BYTES + 1;
	char *text = malloc(big + 1);
	struct tb_config *c;
	int n = 0;

	(void)state;
	assert_non_null(text);
	memset(text, ' ', big);
	text[big] = '\0';
	memset(&errs, 0, sizeof(errs));
	c = tb_config_parse_text(text, big, "big.conf", NULL, collect, &errs, &n);
	free(text);
	assert_int_equal(n, 1);
	assert_non_null(strstr(errs.why[0], "larger than 1 MiB"));
	assert_string_equal(errs.effect[0], "file ignored");
	tb_config_free(c);

	memset(&errs, 0, sizeof(errs));
	c = tb_config_parse_text(nul, sizeof(nul) - 1, "nul.conf", NULL, collect, &errs, &n);
	assert_int_equal(n, 1);
	assert_non_null(strstr(errs.why[0], "NUL"));
	assert_false(tb_config_any_limit(c));
	tb_config_free(c);

	memset(&errs, 0, sizeof(errs));
	c = tb_config_parse(inc, "inc.conf", NULL, collect, &errs, &n);
	assert_int_equal(n, 1);
	assert_int_equal(errs.line[0], 2);
	assert_non_null(strstr(errs.why[0], "@include is not supported"));
	assert_false(tb_config_any_limit(c));
	tb_config_free(c);

	/* Not at the start of a line: libconfig's scanner does not take it, nor do we. */
	memset(&errs, 0, sizeof(errs));
	c = tb_config_parse("defaults = { log = \"x @include y\"; };\n", "ok.conf", NULL,
			    collect, &errs, &n);
	assert_int_equal(n, 1); /* an unknown log target, not an include */
	assert_null(strstr(errs.why[0], "@include"));
	tb_config_free(c);
}

/* A fake environment for tb_overrides_from. */
static const char *fake_get(const char *name, void *ctx)
{
	const char *const *e = ctx;
	size_t len = strlen(name);

	for (; *e != NULL; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}

static void test_precedence(void **state)
{
	static const char *const env[] = { "TIMEBOX_DEADLINE=5s", "TIMEBOX_READ_TIMEOUT=bad",
					   "TIMEBOX_CONFIG=/x", NULL };
	static const char *const opts[] = { "TIMEBOX_WRITE_TIMEOUT=7s", NULL };
	struct tb_overrides ov;
	struct tb_config *c;
	const struct tb_resolved *d, *r;

	(void)state;
	memset(&ov, 0, sizeof(ov));
	tb_overrides_from(&ov, fake_get, (void *)env, TB_ORIGIN_ENV);
	tb_overrides_from(&ov, fake_get, (void *)opts, TB_ORIGIN_OPTION);
	assert_null(ov.value[field("read_timeout")]); /* invalid: left to the env parser */
	assert_null(ov.value[field("config")]);
	c = parse_ov("defaults = {\n connect_timeout = \"1s\";\n read_timeout = \"2s\";\n"
		     " write_timeout = \"3s\"; };\n"
		     "destinations = (\n { match = \"*:80\";\n read_timeout = \"4s\";\n"
		     " deadline = \"8s\"; write_timeout = \"9s\"; } );\n",
		     &ov);
	assert_int_equal(errs.count, 0);
	d = &c->defaults;
	r = &c->rules[0].r;

	/* built-in */
	assert_int_equal(r->set.max_conns, 0);
	assert_int_equal(r->origin[field("max_conns")], TB_ORIGIN_BUILTIN);
	/* defaults */
	assert_int_equal(r->set.connect_ns, 1000 * MS);
	assert_int_equal(r->origin[field("connect_timeout")], TB_ORIGIN_DEFAULTS);
	assert_int_equal(r->line[field("connect_timeout")], 2);
	/* rule beats defaults */
	assert_int_equal(r->set.read_ns, 4000 * MS);
	assert_int_equal(r->origin[field("read_timeout")], TB_ORIGIN_RULE);
	assert_int_equal(r->line[field("read_timeout")], 7);
	assert_int_equal(d->set.read_ns, 2000 * MS);
	/* env beats the rule, field by field */
	assert_int_equal(r->set.deadline_ns, 5000 * MS);
	assert_int_equal(r->origin[field("deadline")], TB_ORIGIN_ENV);
	assert_int_equal(d->set.deadline_ns, 5000 * MS);
	/* an option beats everything */
	assert_int_equal(r->set.write_ns, 7000 * MS);
	assert_int_equal(r->origin[field("write_timeout")], TB_ORIGIN_OPTION);
	assert_int_equal(d->set.write_ns, 7000 * MS);
	tb_config_free(c);
}

static void test_env_first_byte_follows_rule_read(void **state)
{
	static const char *const env[] = { "TIMEBOX_CONNECT_TIMEOUT=1s", NULL };
	struct tb_overrides ov;
	struct tb_config *c;

	(void)state;
	memset(&ov, 0, sizeof(ov));
	tb_overrides_from(&ov, fake_get, (void *)env, TB_ORIGIN_ENV);
	c = parse_ov("defaults = { first_byte_timeout = \"100ms\"; };\n"
		     "destinations = ( { match = \"*:80\"; read_timeout = \"4s\"; },\n"
		     "                 { match = \"*:81\"; read_timeout = \"4s\";"
		     " first_byte_timeout = \"off\"; } );\n",
		     &ov);
	assert_int_equal(c->rules[0].r.set.first_byte_ns, 100 * MS); /* from defaults */
	assert_int_equal(c->rules[1].r.set.first_byte_ns, 0);
	assert_int_equal(c->defaults.set.first_byte_ns, 100 * MS);
	tb_config_free(c);
}

/* dns_timeout is a default of the process: a rule may not set it; unset, it follows the
 * defaults' connect_timeout, and the environment beats the file. */
static void test_dns_timeout_key(void **state)
{
	static const char *const env[] = { "TIMEBOX_DNS_TIMEOUT=100ms", NULL };
	struct tb_overrides ov;
	struct tb_config *c;

	(void)state;
	c = parse("defaults = { dns_timeout = \"250ms\"; connect_timeout = \"1s\"; };\n");
	assert_int_equal(errs.count, 0);
	assert_int_equal(c->defaults.set.dns_ns, 250 * MS);
	tb_config_free(c);
	c = parse("defaults = { connect_timeout = \"1s\"; };\n");
	assert_int_equal(errs.count, 0);
	assert_int_equal(c->defaults.set.dns_ns, 1 * S);
	tb_config_free(c);
	one_error("destinations = (\n { match = \"*\";\n dns_timeout = \"1s\"; } );\n", 3,
		  "dns_timeout", "process-wide", "rule ignored");
	memset(&ov, 0, sizeof(ov));
	tb_overrides_from(&ov, fake_get, (void *)env, TB_ORIGIN_ENV);
	c = parse_ov("defaults = { dns_timeout = \"250ms\"; };\n", &ov);
	assert_int_equal(errs.count, 0);
	assert_int_equal(c->defaults.set.dns_ns, 100 * MS);
	assert_int_equal(c->defaults.origin[field("dns_timeout")], TB_ORIGIN_ENV);
	tb_config_free(c);
}

static void test_hints_and_keys(void **state)
{
	struct tb_config *c = parse("defaults = { attempts = 3; expected_rps = 100;\n"
				    " expected_p99 = \"200ms\"; };\n"
				    "destinations = ( { match = \"*:80\"; expected_rps = 2.5; } );\n");

	(void)state;
	assert_int_equal(errs.count, 0);
	assert_int_equal(c->defaults.hints.attempts, 3);
	assert_true(c->rules[0].r.hints.expected_rps == 2.5);
	assert_int_equal(c->rules[0].r.hints.expected_p99_ns, 200 * MS);
	assert_string_equal(tb_config_key(0), "dns_timeout");
	assert_string_equal(tb_config_key(1), "connect_timeout");
	assert_string_equal(tb_config_key(TB_FIELD_ENABLED), "enabled");
	assert_null(tb_config_key(tb_config_env_fields()));
	tb_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_service),
		cmocka_unit_test(test_unix_only_by_rule),
		cmocka_unit_test(test_disabled_defaults),
		cmocka_unit_test(test_empty_file_limits_nothing),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_request_scope_and_propagation),
		cmocka_unit_test(test_broken_rule_is_dropped),
		cmocka_unit_test(test_bad_default_keeps_the_rest),
		cmocka_unit_test(test_long_value_not_truncated),
		cmocka_unit_test(test_unread_file),
		cmocka_unit_test(test_file_refusals),
		cmocka_unit_test(test_text_refusals),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_env_first_byte_follows_rule_read),
		cmocka_unit_test(test_dns_timeout_key),
		cmocka_unit_test(test_hints_and_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
