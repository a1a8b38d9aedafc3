/* check.c - `timebox check`: the configuration file validated and linted, or one destination's
 * effective settings explained. Launcher-only; the lint rules themselves are in lint.c. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "duration.h"
#include "env.h"
#include "frame.h"
#include "lint.h"

void tb_cli_config_error(void *ctx, const struct tb_config_error *e)
{
	int *count = ctx;

	if (count != NULL)
		(*count)++;
	if (e->line > 0)
		fprintf(stderr, "timebox: %s:%d: ", e->file, e->line);
	else
		fprintf(stderr, "timebox: %s: ", e->file);
	if (e->key != NULL && e->value != NULL && e->value[0] != '\0')
		fprintf(stderr, "%s = %s: ", e->key, e->value);
	else if (e->key != NULL)
		fprintf(stderr, "%s: ", e->key);
	fprintf(stderr, "%s\n", e->why);
}

struct opt_ctx {
	const char *const *values;
};

static const char *get_opt(const char *name, void *ctx)
{
	const struct opt_ctx *o = ctx;
	const struct tb_env_var *v = tb_env_find(name, 0);

	return v != NULL && o->values != NULL ? o->values[v - tb_env_vars] : NULL;
}

/* The unread configuration for a reason built from errno: "cannot read the file: ...". */
static struct tb_config *unread(const char *path, const char *what, int err_no,
				const struct tb_overrides *ov, tb_config_error_fn err, void *ctx,
				int *errors)
{
	char why[200];

	snprintf(why, sizeof(why), "%s: %s", what, strerror(err_no));
	return tb_config_unread(path, why, ov, err, ctx, errors);
}

struct tb_config *tb_cli_read_config(const char *path, const struct tb_overrides *ov,
				     tb_config_error_fn err, void *ctx, int *errors)
{
	struct tb_config *c = NULL;
	const char *refused;
	struct stat st;
	size_t len = 0;
	char *text;
	int fd;

	/* O_NONBLOCK: opening a FIFO must not wait for a writer (fopen would, forever). A
	 * symbolic link is followed, and fstat judges what it leads to. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return unread(path, "cannot read the file", errno, ov, err, ctx, errors);
	if (fstat(fd, &st) < 0) {
		c = unread(path, "cannot read the file", errno, ov, err, ctx, errors);
		goto out;
	}
	refused = tb_config_refusal(st.st_mode, (long long)st.st_size);
	if (refused != NULL) {
		c = tb_config_unread(path, refused, ov, err, ctx, errors);
		goto out;
	}
	/* One byte beyond the cap tells a file that grew past it since the fstat. */
	text = malloc(TB_CONFIG_MAX_BYTES + 2);
	if (text == NULL)
		goto out;
	for (;;) {
		ssize_t n = read(fd, text + len, TB_CONFIG_MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			c = unread(path, "cannot read the file", errno, ov, err, ctx, errors);
			break;
		}
		len += (size_t)n;
		if (n == 0 || len > TB_CONFIG_MAX_BYTES) {
			text[len] = '\0';
			c = tb_config_parse_text(text, len, path, ov, err, ctx, errors);
			break;
		}
	}
	free(text);
out:
	close(fd);
	return c;
}

struct tb_config *tb_cli_load(const char *path, const char *const *opt_values, int *errors)
{
	struct tb_overrides ov;
	struct opt_ctx o = { opt_values };
	struct tb_config *c;

	memset(&ov, 0, sizeof(ov));
	tb_overrides_from(&ov, tb_env_getenv, NULL, TB_ORIGIN_ENV);
	tb_overrides_from(&ov, get_opt, &o, TB_ORIGIN_OPTION);
	*errors = 0;
	c = tb_cli_read_config(path, &ov, tb_cli_config_error, NULL, errors);
	if (c == NULL) {
		fprintf(stderr, "timebox: out of memory\n");
		(*errors)++;
	}
	return c;
}

#define MAX_FINDINGS 64
#define MAX_ERRORS 64

/* Config errors kept for --format json (text mode prints them as they come). */
struct kept_errors {
	int count;
	struct {
		int line;
		char key[64];
		char value[128];
		char why[240];
	} e[MAX_ERRORS];
};

static void keep_error(void *ctx, const struct tb_config_error *e)
{
	struct kept_errors *k = ctx;

	if (k->count < MAX_ERRORS) {
		k->e[k->count].line = e->line;
		snprintf(k->e[k->count].key, sizeof(k->e[0].key), "%s", e->key ? e->key : "");
		snprintf(k->e[k->count].value, sizeof(k->e[0].value), "%s",
			 e->value ? e->value : "");
		snprintf(k->e[k->count].why, sizeof(k->e[0].why), "%s", e->why);
	}
	k->count++;
}

static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void check_usage(FILE *out)
{
	fprintf(out,
		"usage: timebox check [--format text|json] [--inbound DURATION] [FILE]\n"
		"       timebox check --explain DEST [FILE]\n"
		"\n"
		"Validates the configuration file (default: $TIMEBOX_CONFIG) and lints its budgets:\n"
		"  no-deadline               a read timeout without a total deadline\n"
		"  retries-exceed-deadline   first_byte x attempts longer than the deadline\n"
		"  phases-exceed-deadline    acquire + connect + first_byte longer than the deadline\n"
		"  phase-never-fires         a phase limit not shorter than the deadline\n"
		"  unbounded-gate-wait       max_conns with neither acquire_timeout nor a deadline\n"
		"  cap-vs-littles-law        max_conns far from expected_rps x expected_p99 x 1.5\n"
		"  deadline-exceeds-inbound  a deadline not shorter than --inbound\n"
		"  session-has-no-deadline   protocol = session with a deadline, or in the defaults\n"
		"  retries-exceed-request-budget  deadline x attempts longer than an inbound\n"
		"                            request's budget (--inbound, or the defaults' deadline\n"
		"                            with scope = request)\n"
		"  propagate-outside-request a scope = call rule that propagates a deadline longer\n"
		"                            than the request's (or none) under scope = request\n"
		"  breaker-open-max-below-open  breaker_open_max shorter than breaker_open\n"
		"  breaker-probes-clamped    breaker_probes above 16 (half-open lets 16 through)\n"
		"  protection-blind-to-stalls  a breaker or a retry budget with no phase limit,\n"
		"                            no deadline and no breaker_slow: a stall fails nothing\n"
		"  max-conns-auto-shared     max_conns = auto with gate_shared (a fixed shared size)\n"
		"  max-conns-floor-above-ceiling  max_conns = auto with floor > ceiling\n"
		"--explain DEST prints the effective settings for DEST (host:port, ip:port,\n"
		"[ipv6]:port or unix:/path) and where each one comes from.\n"
		"\n"
		"Exit status: 0 clean, 1 warnings, 2 errors.\n");
}

/* A setting's effective value as text, the way the file would spell it. */
static void value_text(const struct tb_resolved *r, int f, char *buf, size_t len)
{
	const struct tb_settings *s = &r->set;
	const struct tb_env_var *var = &tb_env_vars[f];

	if (f == TB_FIELD_ENABLED) {
		snprintf(buf, len, "%s", r->enabled ? "true" : "false");
		return;
	}
	switch (var->kind) {
	case TB_ENV_DURATION:
	case TB_ENV_PERIOD: {
		int64_t v = tb_env_number(s, var);

		/* An unset retry window follows the deadline: show what applies. */
		if (var->field == offsetof(struct tb_settings, retry_window_ns))
			v = tb_settings_retry_window(s);
		tb_duration_format(v, buf, len);
		return;
	}
	case TB_ENV_COUNT: {
		int64_t n = tb_env_number(s, var);

		if (n > 0)
			snprintf(buf, len, "%lld", (long long)n);
		else
			snprintf(buf, len, "off");
		return;
	}
	case TB_ENV_BOOL:
		snprintf(buf, len, "%s", tb_env_number(s, var) > 0 ? "true" : "false");
		return;
	case TB_ENV_GATE_SIZE:
		if (s->max_conns_auto)
			snprintf(buf, len, "auto");
		else if (s->max_conns > 0)
			snprintf(buf, len, "%d", s->max_conns);
		else
			snprintf(buf, len, "off");
		return;
	case TB_ENV_POSITIVE:
	case TB_ENV_NUMBER:
		snprintf(buf, len, "%lld", (long long)tb_env_number(s, var));
		return;
	case TB_ENV_PERCENT:
	case TB_ENV_SHARE: {
		int64_t n = tb_env_number(s, var);

		if (n > 0)
			snprintf(buf, len, "%lld%%", (long long)n);
		else
			snprintf(buf, len, "off");
		return;
	}
	case TB_ENV_BREAKER:
		snprintf(buf, len, "%s", tb_settings_breaker_on(s) ? "true" : "false");
		return;
	case TB_ENV_ERRNO: {
		const char *name = tb_env_errno_name(s->breaker_errno);

		snprintf(buf, len, "%s", name != NULL ? name : "?");
		return;
	}
	case TB_ENV_BREAKER_HTTP:
		snprintf(buf, len, "%s", tb_env_breaker_http_name(s->breaker_http));
		return;
	case TB_ENV_SCOPE:
		snprintf(buf, len, "%s", s->scope == TB_SCOPE_PROCESS   ? "process"
					 : s->scope == TB_SCOPE_REQUEST ? "request"
									: "call");
		return;
	case TB_ENV_ON_TIMEOUT:
		snprintf(buf, len, "%s", s->on_timeout == TB_ON_TIMEOUT_EAGAIN ? "eagain" : "etimedout");
		return;
	case TB_ENV_LOG: {
		static const char *const names[] = { "stderr", "syslog", "off", "" };

		snprintf(buf, len, "%s",
			 s->log_target == TB_LOG_FILE ? s->log_path : names[s->log_target]);
		return;
	}
	case TB_ENV_GATE_NB:
		snprintf(buf, len, "%s", s->gate_nonblocking == TB_GATE_NB_FAIL ? "fail" : "wait");
		return;
	case TB_ENV_LOG_LEVEL:
		snprintf(buf, len, "%s", s->log_level == TB_LOG_LEVEL_INFO ? "info" : "warn");
		return;
	case TB_ENV_PROTOCOL: {
		const char *name = tb_proto_name((enum tb_proto)s->protocol);

		snprintf(buf, len, "%s", name != NULL ? name : "auto");
		return;
	}
	case TB_ENV_LOG_FORMAT:
		snprintf(buf, len, "%s", s->log_format == TB_LOG_FORMAT_JSON ? "json" : "logfmt");
		return;
	case TB_ENV_FILE:
	case TB_ENV_HEADER:
		snprintf(buf, len, "%s", (const char *)s + var->field);
		return;
	case TB_ENV_PATH:
		break;
	}
	buf[0] = '\0';
}

static void origin_text(const struct tb_resolved *r, int f, const char *file, char *buf,
			size_t len)
{
	const char *k = tb_config_key(f);

	switch (r->origin[f]) {
	case TB_ORIGIN_DEFAULTS:
		snprintf(buf, len, "defaults (%s:%d)", file, r->line[f]);
		return;
	case TB_ORIGIN_RULE:
		snprintf(buf, len, "rule (%s:%d)", file, r->line[f]);
		return;
	case TB_ORIGIN_ENV:
		snprintf(buf, len, "environment (%s)", tb_env_vars[f].name);
		return;
	case TB_ORIGIN_OPTION:
		snprintf(buf, len, "option (%s)", tb_env_vars[f].option);
		return;
	default:
		break;
	}
	if (strcmp(k, "first_byte_timeout") == 0 && r->set.read_ns > 0)
		snprintf(buf, len, "built-in: follows read_timeout");
	else if (strcmp(k, "dns_timeout") == 0 && r->set.connect_ns > 0)
		snprintf(buf, len, "built-in: follows connect_timeout");
	else if (strcmp(k, "retry_window") == 0 && r->set.deadline_ns > 0)
		snprintf(buf, len, "built-in: follows the deadline");
	else if (strcmp(k, "breaker_failures") == 0 && r->set.breaker_failures > 0)
		snprintf(buf, len, "built-in: breaker = true (Envoy's consecutive failures)");
	else if (strcmp(k, "breaker_rate") == 0 && r->set.breaker_rate > 0)
		snprintf(buf, len, "built-in: breaker = true (Hystrix's error percentage)");
	else
		snprintf(buf, len, "built-in");
}

/* `--explain DEST`: which rule applies and where each effective value comes from. */
static int explain(const struct tb_config *c, const char *text)
{
	struct tb_dest d;
	char name[TB_NAME_MAX], shown[TB_DEST_STRLEN];
	const char *names[1] = { name }, *why;
	struct tb_target t = { NULL, NULL, names, 0 };
	const struct tb_rule *rule;
	const struct tb_resolved *r;
	int port, kind = tb_target_parse(text, &d, name, &port, &why);

	if (kind < 0) {
		fprintf(stderr, "timebox: --explain %s: %s\n", text, why);
		return EXIT_USAGE;
	}
	printf("destination: %s\n", text);
	if (kind == TB_MATCH_UNIX) {
		t.unix_path = name;
	} else if (kind == TB_MATCH_HOST) {
		struct addrinfo hints, *res = NULL;

		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		memset(&d, 0, sizeof(d));
		d.port = (uint16_t)port;
		if (getaddrinfo(name, NULL, &hints, &res) == 0 && res != NULL) {
			tb_dest_from_sockaddr(&d, res->ai_addr, res->ai_addrlen);
			d.port = (uint16_t)port;
			printf("resolves to: %s\n", tb_dest_format(&d, shown, sizeof(shown)));
		} else {
			printf("resolves to: nothing here (address rules are not tried)\n");
		}
		if (res != NULL)
			freeaddrinfo(res);
		t.dest = &d;
		t.nnames = 1;
	} else {
		t.dest = &d;
	}
	rule = tb_config_match(c, &t);
	if (rule != NULL) {
		printf("rule: %s:%d, match = \"%s\" (the first rule that matches)\n", c->path,
		       rule->line, rule->label);
		r = &rule->r;
	} else if (kind == TB_MATCH_UNIX) {
		printf("rule: none; a unix socket is governed only by a rule: not governed\n");
		return 0;
	} else {
		printf("rule: none; the defaults apply\n");
		r = &c->defaults;
	}
	if (!r->enabled) {
		printf("enabled = false (%s:%d): timebox leaves this destination alone\n", c->path,
		       r->line[TB_FIELD_ENABLED]);
		return 0;
	}
	if (r->set.observe)
		printf("observe = true (%s): measured, never limited; the values below are "
		       "what applies\n", r->origin[tb_env_find("TIMEBOX_OBSERVE", 0) - tb_env_vars] >=
					   TB_ORIGIN_ENV ? "the environment" : "the file's defaults");
	else if (!tb_settings_any_limit(&r->set))
		printf("no limit is set: timebox leaves this destination alone\n");
	for (int f = 0; f < tb_config_env_fields(); f++) {
		char v[300], o[300];

		if (tb_env_vars[f].kind == TB_ENV_PATH)
			continue;
		value_text(r, f, v, sizeof(v));
		origin_text(r, f, c->path, o, sizeof(o));
		printf("  %-20s %-10s %s\n", tb_config_key(f), v, o);
	}
	return 0;
}

static void print_text(const char *file, const struct tb_finding *f, size_t n, size_t total)
{
	for (size_t i = 0; i < n; i++) {
		if (f[i].line > 0)
			printf("%s:%d: warning: [%s] %s: %s\n", file, f[i].line, f[i].rule, f[i].scope,
			       f[i].message);
		else
			printf("%s: warning: [%s] %s: %s\n", file, f[i].rule, f[i].scope,
			       f[i].message);
		printf("    fix: %s\n", f[i].fix);
	}
	if (total > n)
		printf("%s: and %zu more warnings\n", file, total - n);
}

static void print_json(const char *file, const struct kept_errors *k, const struct tb_finding *f,
		       size_t n, int status)
{
	printf("{\"file\": ");
	json_string(stdout, file);
	printf(", \"status\": %d, \"errors\": [", status);
	for (int i = 0; i < k->count && i < MAX_ERRORS; i++) {
		printf("%s{\"line\": %d, \"key\": ", i ? ", " : "", k->e[i].line);
		json_string(stdout, k->e[i].key);
		printf(", \"value\": ");
		json_string(stdout, k->e[i].value);
		printf(", \"message\": ");
		json_string(stdout, k->e[i].why);
		printf("}");
	}
	printf("], \"warnings\": [");
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"rule\": ", i ? ", " : "");
		json_string(stdout, f[i].rule);
		printf(", \"line\": %d, \"scope\": ", f[i].line);
		json_string(stdout, f[i].scope);
		printf(", \"message\": ");
		json_string(stdout, f[i].message);
		printf(", \"fix\": ");
		json_string(stdout, f[i].fix);
		printf("}");
	}
	printf("]}\n");
}

int tb_check_main(int argc, char **argv)
{
	const char *file = NULL, *format = "text", *explain_dest = NULL, *why;
	int64_t inbound = 0;
	struct tb_overrides ov;
	struct kept_errors *kept;
	struct tb_finding *found;
	struct tb_config *c;
	size_t total, shown;
	int errors = 0, status;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			check_usage(stdout);
			return 0;
		} else if (strcmp(a, "--format") == 0 && i + 1 < argc) {
			format = argv[++i];
		} else if (strncmp(a, "--format=", 9) == 0) {
			format = a + 9;
		} else if (strcmp(a, "--inbound") == 0 && i + 1 < argc) {
			a = argv[++i];
			if (tb_duration_parse(a, &inbound, &why) < 0) {
				fprintf(stderr, "timebox: --inbound %s: %s\n", a, why);
				return EXIT_USAGE;
			}
		} else if (strcmp(a, "--explain") == 0 && i + 1 < argc) {
			explain_dest = argv[++i];
		} else if (a[0] == '-' && a[1] != '\0') {
			fprintf(stderr, "timebox: check: unknown option or missing value '%s'\n", a);
			check_usage(stderr);
			return EXIT_USAGE;
		} else if (file == NULL) {
			file = a;
		} else {
			fprintf(stderr, "timebox: check: one file at a time ('%s')\n", a);
			return EXIT_USAGE;
		}
	}
	if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
		fprintf(stderr, "timebox: check: --format is text or json\n");
		return EXIT_USAGE;
	}
	if (file == NULL)
		file = getenv("TIMEBOX_CONFIG");
	if (file == NULL || file[0] == '\0') {
		fprintf(stderr, "timebox: check: no file given and TIMEBOX_CONFIG is not set\n");
		check_usage(stderr);
		return EXIT_USAGE;
	}

	kept = calloc(1, sizeof(*kept));
	found = calloc(MAX_FINDINGS, sizeof(*found));
	if (kept == NULL || found == NULL) {
		fprintf(stderr, "timebox: out of memory\n");
		return EXIT_USAGE;
	}
	/* What the program would run with: the file under the environment's values. */
	memset(&ov, 0, sizeof(ov));
	tb_overrides_from(&ov, tb_env_getenv, NULL, TB_ORIGIN_ENV);
	c = tb_cli_read_config(file, &ov,
			       strcmp(format, "json") == 0 ? keep_error : tb_cli_config_error,
			       strcmp(format, "json") == 0 ? (void *)kept : NULL, &errors);
	if (c == NULL) {
		fprintf(stderr, "timebox: out of memory\n");
		return EXIT_USAGE;
	}
	if (explain_dest != NULL) {
		status = errors > 0 ? EXIT_USAGE : explain(c, explain_dest);
		goto out;
	}
	total = tb_lint_config(c, inbound, found, MAX_FINDINGS);
	shown = total < MAX_FINDINGS ? total : MAX_FINDINGS;
	status = errors > 0 ? 2 : total > 0 ? 1 : 0;
	if (strcmp(format, "json") == 0) {
		print_json(file, kept, found, shown, status);
	} else {
		print_text(file, found, shown, total);
		if (status == 0)
			printf("%s: ok (%zu rule%s)\n", file, c->nrules, c->nrules == 1 ? "" : "s");
		else if (errors > 0)
			fprintf(stderr, "timebox: %s: %d error%s\n", file, errors,
				errors == 1 ? "" : "s");
	}
out:
	tb_config_free(c);
	free(found);
	free(kept);
	return status;
}

/* Shared by timebox run and timebox plan (cli.h). */
void tb_cli_report_error(void *ctx, const char *name, const char *value, const char *why)
{
	struct tb_cli_report *r = ctx;
	const struct tb_env_var *var = tb_env_find(name, 0);

	if (r->from_option && var != NULL)
		fprintf(stderr, "timebox: %s %s: %s\n", var->option, value, why);
	else
		fprintf(stderr, "timebox: %s=%s: %s\n", name, value, why);
	r->errors++;
}
