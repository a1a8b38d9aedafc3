/* env.c - the TIMEBOX_* variables: one table, and the parser that fills tb_settings from it.
 * Pure code: the caller supplies the lookup and the error sink; no printing, no allocation. */
#include "env.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "env_impl.h"
#include "frame.h"

#define AT(member) offsetof(struct tb_settings, member)

/*
 * The one map from a setting's name to the tb_settings member it sets: the parser below,
 * the config file (config.c numbers its keys by these rows) and `timebox check --explain`
 * all read it. The launcher's --help is generated from it too: keep `help` to one line.
 */
const struct tb_env_var tb_env_vars[] = {
	{ "TIMEBOX_DNS_TIMEOUT", "--dns-timeout", TB_ENV_DURATION, AT(dns_ns),
	  "limit on a lookup (getaddrinfo, gethostbyname*, getnameinfo, gethostbyaddr*; default: the connect timeout)" },
	{ "TIMEBOX_CONNECT_TIMEOUT", "--connect-timeout", TB_ENV_DURATION, AT(connect_ns),
	  "limit on the TCP handshake" },
	{ "TIMEBOX_WRITE_TIMEOUT", "--write-timeout", TB_ENV_DURATION, AT(write_ns),
	  "limit on a send that makes no progress" },
	{ "TIMEBOX_FIRST_BYTE_TIMEOUT", "--first-byte-timeout", TB_ENV_DURATION, AT(first_byte_ns),
	  "last request byte sent to first response byte (default: the read timeout)" },
	{ "TIMEBOX_READ_TIMEOUT", "--read-timeout", TB_ENV_DURATION, AT(read_ns),
	  "longest wait between two received chunks" },
	{ "TIMEBOX_DEADLINE", "--deadline", TB_ENV_DURATION, AT(deadline_ns),
	  "limit on a whole call, the program's own retries included (event loop: per connection)" },
	{ "TIMEBOX_RETRY_WINDOW", "--retry-window", TB_ENV_DURATION, AT(retry_window_ns),
	  "how long retries fail fast after a deadline (default: the deadline; not in event loops)" },
	{ "TIMEBOX_MAX_CONNS", "--max-conns", TB_ENV_GATE_SIZE, AT(max_conns),
	  "open sockets per destination (the gate's size; default: no gate); auto: sized by latency" },
	{ "TIMEBOX_MAX_CONNS_FLOOR", "--max-conns-floor", TB_ENV_POSITIVE, AT(max_conns_floor),
	  "with --max-conns auto: the smallest size the gate takes (default 1)" },
	{ "TIMEBOX_MAX_CONNS_CEILING", "--max-conns-ceiling", TB_ENV_POSITIVE,
	  AT(max_conns_ceiling), "with --max-conns auto: the largest size the gate takes (default 1000)" },
	{ "TIMEBOX_ACQUIRE_TIMEOUT", "--acquire-timeout", TB_ENV_DURATION, AT(acquire_ns),
	  "longest wait for a slot at a full gate (default: no limit but the deadline)" },
	{ "TIMEBOX_MAX_PENDING", "--max-pending", TB_ENV_COUNT, AT(max_pending),
	  "callers allowed to wait at a full gate; more are refused at once" },
	{ "TIMEBOX_GATE_SHARED", "--gate-shared", TB_ENV_BOOL, AT(gate_shared),
	  "one gate per destination for every process with the same settings" },
	{ "TIMEBOX_GATE_NONBLOCKING", "--gate-nonblocking", TB_ENV_GATE_NB, TB_ENV_NO_FIELD,
	  "a non-blocking connect at a full gate: wait (default) or fail (EAGAIN)" },
	{ "TIMEBOX_BREAKER", "--breaker", TB_ENV_BREAKER, TB_ENV_NO_FIELD,
	  "the circuit breaker on (5 failures in a row, or 50% of 20 calls in 10s) or off" },
	{ "TIMEBOX_BREAKER_FAILURES", "--breaker-failures", TB_ENV_COUNT, AT(breaker_failures),
	  "consecutive failures that open the breaker (Envoy's 5; default: off)" },
	{ "TIMEBOX_BREAKER_RATE", "--breaker-rate", TB_ENV_PERCENT, AT(breaker_rate),
	  "failure percentage over the window that opens the breaker (Hystrix's 50%; default: off)" },
	{ "TIMEBOX_BREAKER_MIN_CALLS", "--breaker-min-calls", TB_ENV_POSITIVE, AT(breaker_min_calls),
	  "calls in the window before the failure rate counts (default 20)" },
	{ "TIMEBOX_BREAKER_WINDOW", "--breaker-window", TB_ENV_PERIOD, AT(breaker_window_ns),
	  "the failure rate's rolling window (default 10s)" },
	{ "TIMEBOX_BREAKER_OPEN", "--breaker-open", TB_ENV_PERIOD, AT(breaker_open_ns),
	  "how long an opening refuses connects; the n-th in a row lasts n times it (default 30s)" },
	{ "TIMEBOX_BREAKER_OPEN_MAX", "--breaker-open-max", TB_ENV_PERIOD, AT(breaker_open_max_ns),
	  "the longest opening (default 300s)" },
	{ "TIMEBOX_BREAKER_PROBES", "--breaker-probes", TB_ENV_POSITIVE, AT(breaker_probes),
	  "connects let through half-open to try the downstream (default 1, at most 16)" },
	{ "TIMEBOX_BREAKER_SLOW", "--breaker-slow", TB_ENV_DURATION, AT(breaker_slow_ns),
	  "a first response byte later than this counts as a failure (default: off)" },
	{ "TIMEBOX_BREAKER_ERRNO", "--breaker-errno", TB_ENV_ERRNO, TB_ENV_NO_FIELD,
	  "the errno of a connect the open breaker refuses (default ECONNREFUSED)" },
	{ "TIMEBOX_BREAKER_HTTP", "--breaker-http", TB_ENV_BREAKER_HTTP, TB_ENV_NO_FIELD,
	  "HTTP answers that count as failures: gateway (502/503/504, default), 5xx or off" },
	{ "TIMEBOX_RETRY_BUDGET", "--retry-budget", TB_ENV_SHARE, AT(retry_budget),
	  "retries allowed as a share of recent first attempts, e.g. 20% (default: off)" },
	{ "TIMEBOX_RETRY_BUDGET_FLOOR", "--retry-budget-floor", TB_ENV_NUMBER, AT(retry_budget_floor),
	  "retries per second the budget always allows (default 10)" },
	{ "TIMEBOX_RETRY_BUDGET_WINDOW", "--retry-budget-window", TB_ENV_PERIOD,
	  AT(retry_budget_window_ns),
	  "the budget's window; a failed call makes the next connect a retry this long (default 10s)" },
	{ "TIMEBOX_SCOPE", "--scope", TB_ENV_SCOPE, TB_ENV_NO_FIELD,
	  "what the deadline covers: call (default), process, or request (an inbound request)" },
	{ "TIMEBOX_PROPAGATE", "--propagate", TB_ENV_BOOL, AT(propagate),
	  "read an inbound request's deadline header; send the remaining budget downstream" },
	{ "TIMEBOX_DEADLINE_HEADER", "--deadline-header", TB_ENV_HEADER, AT(deadline_header),
	  "the header that carries the milliseconds left (default X-Deadline-Ms)" },
	{ "TIMEBOX_ON_TIMEOUT", "--on-timeout", TB_ENV_ON_TIMEOUT, TB_ENV_NO_FIELD,
	  "errno on expiry: etimedout (default) or eagain" },
	{ "TIMEBOX_PROTOCOL", "--protocol", TB_ENV_PROTOCOL, TB_ENV_NO_FIELD,
	  "what sockets speak: auto (default: detected), http, tls, postgres, redis, session, raw" },
	{ "TIMEBOX_LOG", "--log", TB_ENV_LOG, TB_ENV_NO_FIELD,
	  "where expiries go: stderr (default), syslog, off or an absolute file path" },
	{ "TIMEBOX_LOG_LEVEL", "--log-level", TB_ENV_LOG_LEVEL, TB_ENV_NO_FIELD,
	  "warn (default: expiries and errors) or info (also notices and a gate summary at exit)" },
	{ "TIMEBOX_LOG_FORMAT", "--log-format", TB_ENV_LOG_FORMAT, TB_ENV_NO_FIELD,
	  "log lines as logfmt (default) or json" },
	{ "TIMEBOX_LOG_RATE", "--log-rate", TB_ENV_COUNT, AT(log_rate),
	  "log lines per second per process, then one suppressed count (default 100; off)" },
	{ "TIMEBOX_STATS_FILE", "--stats-file", TB_ENV_FILE, AT(stats_path),
	  "keep this file written with the Prometheus metrics (absolute path; default: off)" },
	{ "TIMEBOX_STATS_INTERVAL", "--stats-interval", TB_ENV_DURATION, AT(stats_interval_ns),
	  "how often the stats file is rewritten (default 10s)" },
	{ "TIMEBOX_OBSERVE", "--observe", TB_ENV_BOOL, AT(observe),
	  "measure every destination, govern none: no limit, no gate, no refusal (timebox suggest)" },
	{ "TIMEBOX_STRICT", "--strict", TB_ENV_BOOL, AT(strict),
	  "refuse to run the program when a setting is bad, instead of running it unguarded" },
	{ "TIMEBOX_CONFIG", "--config", TB_ENV_PATH, TB_ENV_NO_FIELD,
	  "configuration file: defaults and per-destination rules (timebox.conf(5))" },
	{ NULL, NULL, TB_ENV_DURATION, TB_ENV_NO_FIELD, NULL },
};

/*
 * Names that tb_env_check_unknown accepts without a table entry. TIMEBOX_LIBRARY is read by
 * the launcher alone and reaches the program through exec.
 */
static const char *const accepted_names[] = {
	"TIMEBOX_LIBRARY",
	NULL,
};

static const char E_SCOPE[] = "a scope is call, process or request";
static const char E_HEADER[] =
	"a deadline header is a header name of 1 to 63 letters, digits or !#$%&'*+-.^_`|~";
static const char E_ON_TIMEOUT[] = "on_timeout is etimedout or eagain";
static const char E_LOG[] = "a log target is stderr, syslog, off or an absolute file path";
static const char E_LOG_LONG[] = "a log file path is too long (at most 255 bytes)";
static const char E_BOOL[] = "a switch is 1, 0, true, false, yes, no, on or off";
static const char E_GATE_NB[] = "gate_nonblocking is wait or fail";
static const char E_LOG_LEVEL[] = "a log level is warn or info";
static const char E_PROTOCOL[] =
	"a protocol is auto, http, tls, postgres, redis, session or raw";
static const char E_PATH[] = "a file name is empty";
static const char E_LOG_FORMAT[] = "a log format is logfmt or json";
static const char E_FILE[] = "a file is an absolute path (at most 255 bytes), or off";

const struct tb_env_var *tb_env_find(const char *key, int by_option)
{
	if (key == NULL)
		return NULL;
	for (const struct tb_env_var *v = tb_env_vars; v->name != NULL; v++)
		if (strcmp(by_option ? v->option : v->name, key) == 0)
			return v;
	return NULL;
}

int64_t tb_env_number(const struct tb_settings *s, const struct tb_env_var *var)
{
	const char *at;

	/* Checked first: s + TB_ENV_NO_FIELD would be an out-of-bounds pointer even unread. */
	if (var->field == TB_ENV_NO_FIELD)
		return -1;
	at = (const char *)s + var->field;
	switch (var->kind) {
	case TB_ENV_DURATION:
	case TB_ENV_PERIOD:
		return *(const int64_t *)(const void *)at;
	case TB_ENV_COUNT:
	case TB_ENV_GATE_SIZE:
	case TB_ENV_POSITIVE:
	case TB_ENV_NUMBER:
	case TB_ENV_PERCENT:
	case TB_ENV_SHARE:
		return *(const int *)(const void *)at;
	case TB_ENV_BOOL:
		return *(const bool *)(const void *)at;
	default:
		return -1;
	}
}

const char *tb_env_getenv(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}


/* Parses a switch; returns 0 and sets *out, or -1. */
static int parse_bool(const char *text, bool *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on", NULL };
	static const char *const no[] = { "0", "false", "no", "off", NULL };

	for (int i = 0; yes[i] != NULL; i++) {
		if (strcmp(text, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcmp(text, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/*
 * Values are case-sensitive, like durations ("250MS" is refused): one spelling per value
 * keeps configs greppable. An empty value is an error, not "unset": `TIMEBOX_DEADLINE=`
 * is more likely a broken template than a wish for no limit (write "off" for that).
 */
int tb_env_apply(struct tb_settings *s, const struct tb_env_var *var, const char *value,
		 tb_env_error_fn err, void *ctx)
{
	const char *why = NULL;
	int64_t ns;
	bool flag;

	if (value == NULL)
		value = "";
	switch (var->kind) {
	case TB_ENV_DURATION: {
		int64_t *field = tb_env_member(s, var, TB_ENV_DURATION);

		if (field == NULL) {
			why = "internal error: no setting for this variable";
			break;
		}
		if (tb_duration_parse(value, &ns, &why) == 0)
			*field = ns;
		break;
	}
	case TB_ENV_SCOPE:
		if (strcmp(value, "call") == 0)
			s->scope = TB_SCOPE_CALL;
		else if (strcmp(value, "process") == 0)
			s->scope = TB_SCOPE_PROCESS;
		else if (strcmp(value, "request") == 0)
			s->scope = TB_SCOPE_REQUEST;
		else
			why = E_SCOPE;
		break;
	case TB_ENV_ON_TIMEOUT:
		if (strcmp(value, "etimedout") == 0)
			s->on_timeout = TB_ON_TIMEOUT_ETIMEDOUT;
		else if (strcmp(value, "eagain") == 0)
			s->on_timeout = TB_ON_TIMEOUT_EAGAIN;
		else
			why = E_ON_TIMEOUT;
		break;
	case TB_ENV_LOG:
		if (strcmp(value, "stderr") == 0) {
			s->log_target = TB_LOG_STDERR;
		} else if (strcmp(value, "syslog") == 0) {
			s->log_target = TB_LOG_SYSLOG;
		} else if (strcmp(value, "off") == 0) {
			s->log_target = TB_LOG_OFF;
		} else if (value[0] != '/') {
			why = E_LOG;
		} else if (strlen(value) >= sizeof(s->log_path)) {
			why = E_LOG_LONG;
		} else {
			s->log_target = TB_LOG_FILE;
			snprintf(s->log_path, sizeof(s->log_path), "%s", value);
		}
		break;
	case TB_ENV_BOOL: {
		bool *field = tb_env_member(s, var, TB_ENV_BOOL);

		if (field == NULL)
			why = "internal error: no setting for this variable";
		else if (parse_bool(value, &flag) == 0)
			*field = flag;
		else
			why = E_BOOL;
		break;
	}
	case TB_ENV_COUNT:
	case TB_ENV_POSITIVE:
	case TB_ENV_NUMBER:
	case TB_ENV_PERCENT:
	case TB_ENV_SHARE: {
		int *field = tb_env_member(s, var, var->kind);

		if (field == NULL)
			why = "internal error: no setting for this variable";
		else
			why = tb_env_apply_whole(field, var->kind, value);
		break;
	}
	case TB_ENV_GATE_SIZE:
	case TB_ENV_PERIOD:
	case TB_ENV_ERRNO:
	case TB_ENV_BREAKER_HTTP:
		why = tb_env_apply_value(s, var, value);
		break;
	case TB_ENV_BREAKER:
		if (parse_bool(value, &flag) == 0)
			s->breaker = flag ? 1 : -1;
		else
			why = E_BOOL;
		break;
	case TB_ENV_GATE_NB:
		if (strcmp(value, "wait") == 0)
			s->gate_nonblocking = TB_GATE_NB_WAIT;
		else if (strcmp(value, "fail") == 0)
			s->gate_nonblocking = TB_GATE_NB_FAIL;
		else
			why = E_GATE_NB;
		break;
	case TB_ENV_PROTOCOL: {
		enum tb_proto p;

		if (tb_proto_parse(value, &p) == 0)
			s->protocol = (uint8_t)p;
		else
			why = E_PROTOCOL;
		break;
	}
	case TB_ENV_LOG_LEVEL:
		if (strcmp(value, "warn") == 0)
			s->log_level = TB_LOG_LEVEL_WARN;
		else if (strcmp(value, "info") == 0)
			s->log_level = TB_LOG_LEVEL_INFO;
		else
			why = E_LOG_LEVEL;
		break;
	case TB_ENV_PATH:
		/* Read by the config loader, not stored here: only an empty name is refused. */
		if (value[0] == '\0')
			why = E_PATH;
		break;
	case TB_ENV_LOG_FORMAT:
		if (strcmp(value, "logfmt") == 0)
			s->log_format = TB_LOG_FORMAT_LOGFMT;
		else if (strcmp(value, "json") == 0)
			s->log_format = TB_LOG_FORMAT_JSON;
		else
			why = E_LOG_FORMAT;
		break;
	case TB_ENV_HEADER: {
		char *field = var->field == TB_ENV_NO_FIELD ? NULL : (char *)s + var->field;

		if (field == NULL)
			why = "internal error: no setting for this variable";
		else if (!tb_settings_header_ok(value))
			why = E_HEADER;
		else
			snprintf(field, TB_PROP_HEADER_MAX, "%s", value);
		break;
	}
	case TB_ENV_FILE: {
		char *field = var->field == TB_ENV_NO_FIELD ? NULL : (char *)s + var->field;

		if (field == NULL)
			why = "internal error: no setting for this variable";
		else if (strcmp(value, "off") == 0)
			field[0] = '\0';
		else if (value[0] != '/' || strlen(value) >= TB_LOG_PATH_MAX)
			why = E_FILE;
		else
			snprintf(field, TB_LOG_PATH_MAX, "%s", value);
		break;
	}
	}
	if (why == NULL)
		return 0;
	if (err != NULL)
		err(ctx, var->name, value, why);
	return -1;
}

int tb_env_load(struct tb_settings *s, tb_env_get_fn get, void *get_ctx, tb_env_error_fn err,
		void *err_ctx)
{
	int errors = 0;

	tb_settings_init(s);
	for (const struct tb_env_var *v = tb_env_vars; v->name != NULL; v++) {
		const char *value = get(v->name, get_ctx);

		if (value != NULL && tb_env_apply(s, v, value, err, err_ctx) != 0)
			errors++;
	}
	tb_settings_finish(s);
	return errors;
}

/* Levenshtein distance between a and b, or a large number when either is too long. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[65];

	if (la > 64 || lb > 64)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static int is_accepted(const char *name)
{
	if (tb_env_find(name, 0) != NULL)
		return 1;
	for (int i = 0; accepted_names[i] != NULL; i++)
		if (strcmp(accepted_names[i], name) == 0)
			return 1;
	return 0;
}

/*
 * The sentence handed to err lives in this function's stack frame: it is valid during the
 * call only (it names the closest known variable, so it cannot be static).
 */
int tb_env_check_unknown(char *const *envp, tb_env_error_fn err, void *ctx)
{
	int found = 0;

	if (envp == NULL)
		return 0;
	for (; *envp != NULL; envp++) {
		const char *entry = *envp, *eq, *best = NULL;
		char name[128], why[160];
		size_t len, best_d = 4; /* suggest only names within 3 edits */

		if (strncmp(entry, "TIMEBOX_", 8) != 0)
			continue;
		eq = strchr(entry, '=');
		len = eq != NULL ? (size_t)(eq - entry) : strlen(entry);
		if (len >= sizeof(name))
			len = sizeof(name) - 1;
		memcpy(name, entry, len);
		name[len] = '\0';
		if (is_accepted(name))
			continue;

		for (const struct tb_env_var *v = tb_env_vars; v->name != NULL; v++) {
			size_t d = edit_distance(name, v->name);

			if (d < best_d) {
				best_d = d;
				best = v->name;
			}
		}
		if (best != NULL)
			snprintf(why, sizeof(why), "unknown variable; did you mean %s?", best);
		else
			snprintf(why, sizeof(why), "unknown variable: not a timebox setting");
		if (err != NULL)
			err(ctx, name, eq != NULL ? eq + 1 : "", why);
		found++;
	}
	return found;
}
