/* fuzz_env.c - libFuzzer target for the TIMEBOX_* value parsers (tb_env_apply): the first
 * input byte picks the variable, the rest is its value; past the table, the unknown-name check. */
#include <stdbool.h>

#include "duration.h"
#include "env.h"
#include "fuzz.h"

static size_t nvars(void)
{
	size_t n = 0;

	while (tb_env_vars[n].name != NULL)
		n++;
	return n;
}

struct seen {
	int calls;
	const char *name;
	const char *why;
};

static void count_err(void *ctx, const char *name, const char *value, const char *why)
{
	struct seen *s = ctx;

	FUZZ_CHECK(value != NULL, "%s: error without its value", name);
	s->calls++;
	s->name = name;
	s->why = why;
}

/* Settings as a library would start them, with every field set to a recognisable value so
 * that a write to the wrong member shows. */
static void start(struct tb_settings *s)
{
	tb_settings_init(s);
	s->connect_ns = 11;
	s->write_ns = 12;
	s->first_byte_ns = 13;
	s->read_ns = 14;
	s->deadline_ns = 15;
	s->retry_window_ns = 16;
	s->acquire_ns = 17;
	s->max_conns = 18;
	s->max_pending = 19;
}

/* Everything but the member `var` sets is as `before` had it. */
static void check_only_member(const struct tb_settings *before, const struct tb_settings *after,
			      const struct tb_env_var *var, const char *value)
{
	struct tb_settings a, b;

	memcpy(&a, before, sizeof(a));
	memcpy(&b, after, sizeof(b));

	switch (var->kind) {
	case TB_ENV_DURATION:
	case TB_ENV_PERIOD:
		memcpy((char *)&a + var->field, (char *)&b + var->field, sizeof(int64_t));
		break;
	case TB_ENV_COUNT:
	case TB_ENV_POSITIVE:
	case TB_ENV_NUMBER:
	case TB_ENV_PERCENT:
	case TB_ENV_SHARE:
		/* Copy the one member over, then the rest must be equal. */
		memcpy((char *)&a + var->field, (char *)&b + var->field, sizeof(int));
		break;
	case TB_ENV_BOOL:
		memcpy((char *)&a + var->field, (char *)&b + var->field, sizeof(bool));
		break;
	case TB_ENV_GATE_SIZE:
		memcpy((char *)&a + var->field, (char *)&b + var->field, sizeof(int));
		a.max_conns_auto = b.max_conns_auto;
		break;
	case TB_ENV_ERRNO:
		a.breaker_errno = b.breaker_errno;
		break;
	case TB_ENV_BREAKER_HTTP:
		a.breaker_http = b.breaker_http;
		break;
	case TB_ENV_BREAKER:
		a.breaker = b.breaker;
		break;
	case TB_ENV_SCOPE:
		a.scope = b.scope;
		break;
	case TB_ENV_ON_TIMEOUT:
		a.on_timeout = b.on_timeout;
		break;
	case TB_ENV_LOG:
		a.log_target = b.log_target;
		memcpy(a.log_path, b.log_path, sizeof(a.log_path));
		break;
	case TB_ENV_GATE_NB:
		a.gate_nonblocking = b.gate_nonblocking;
		break;
	case TB_ENV_LOG_LEVEL:
		a.log_level = b.log_level;
		break;
	case TB_ENV_PROTOCOL:
		a.protocol = b.protocol;
		break;
	case TB_ENV_LOG_FORMAT:
		a.log_format = b.log_format;
		break;
	case TB_ENV_FILE:
		memcpy((char *)&a + var->field, (char *)&b + var->field, TB_LOG_PATH_MAX);
		break;
	case TB_ENV_HEADER:
		memcpy((char *)&a + var->field, (char *)&b + var->field, TB_PROP_HEADER_MAX);
		break;
	case TB_ENV_PATH:
		break;
	}
	FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0, "%s='%s' changed another setting", var->name,
		   value);
}

/* The value that was stored, written back as text, is accepted again with the same effect. */
static void check_reapply(const struct tb_settings *after, const struct tb_env_var *var,
			  const char *value)
{
	struct tb_settings again;
	char text[TB_LOG_PATH_MAX + 32];
	int64_t n = tb_env_number(after, var);

	switch (var->kind) {
	case TB_ENV_DURATION:
		tb_duration_format(n, text, sizeof(text));
		break;
	case TB_ENV_PERIOD:
		FUZZ_CHECK(n > 0, "%s='%s' stored %lld", var->name, value, (long long)n);
		tb_duration_format(n, text, sizeof(text));
		break;
	case TB_ENV_COUNT:
	case TB_ENV_NUMBER:
	case TB_ENV_POSITIVE:
		FUZZ_CHECK(n >= (var->kind == TB_ENV_POSITIVE) && n <= TB_MAX_CONNS_LIMIT,
			   "%s='%s' stored %lld", var->name, value, (long long)n);
		snprintf(text, sizeof(text), "%lld", (long long)n);
		break;
	case TB_ENV_PERCENT:
	case TB_ENV_SHARE:
		FUZZ_CHECK(n >= 0 && n <= (var->kind == TB_ENV_PERCENT ? 100 : 1000),
			   "%s='%s' stored %lld", var->name, value, (long long)n);
		snprintf(text, sizeof(text), "%lld%%", (long long)n);
		break;
	case TB_ENV_GATE_SIZE:
		FUZZ_CHECK(n >= 0 && n <= TB_MAX_CONNS_LIMIT, "%s='%s' stored %lld", var->name,
			   value, (long long)n);
		if (after->max_conns_auto) {
			FUZZ_CHECK(strcmp(value, "auto") == 0 && n == after->max_conns_ceiling,
				   "%s='%s' made the gate automatic at %lld", var->name, value,
				   (long long)n);
			return;
		}
		snprintf(text, sizeof(text), "%lld", (long long)n);
		break;
	case TB_ENV_ERRNO:
		FUZZ_CHECK(tb_env_errno_name(after->breaker_errno) != NULL,
			   "%s='%s' stored errno %d", var->name, value, after->breaker_errno);
		return;
	case TB_ENV_BREAKER_HTTP:
		FUZZ_CHECK(after->breaker_http <= TB_BREAKER_HTTP_OFF, "%s='%s' stored %u",
			   var->name, value, after->breaker_http);
		return;
	case TB_ENV_BREAKER:
		FUZZ_CHECK(after->breaker == 1 || after->breaker == -1, "%s='%s' stored %d",
			   var->name, value, after->breaker);
		return;
	case TB_ENV_BOOL:
		FUZZ_CHECK(n == 0 || n == 1, "%s='%s' stored %lld", var->name, value, (long long)n);
		snprintf(text, sizeof(text), "%s", n ? "true" : "false");
		break;
	case TB_ENV_LOG:
		if (after->log_target == TB_LOG_FILE) {
			FUZZ_CHECK(strcmp(after->log_path, value) == 0 && value[0] == '/',
				   "TIMEBOX_LOG='%s' stored path '%s'", value, after->log_path);
		}
		return;
	default:
		return;
	}
	start(&again);
	FUZZ_CHECK(tb_env_apply(&again, var, text, NULL, NULL) == 0,
		   "%s='%s' stored a value written '%s' that is refused", var->name, value, text);
	FUZZ_CHECK(tb_env_number(&again, var) == n, "%s='%s': '%s' reads back differently",
		   var->name, value, text);
}

/* Input lines as an environment for tb_env_check_unknown. A few lines are enough to reach
 * every path: each TIMEBOX_ line costs up to 17 edit distances of 64 x 64. */
#define ENV_LINES 8

static void check_unknown(const char *text)
{
	char *copy = strdup(text), *envp[ENV_LINES + 1], *save = NULL;
	size_t n = 0, timebox = 0;
	struct seen s = { 0, NULL, NULL };

	if (copy == NULL)
		abort();
	for (char *line = strtok_r(copy, "\n", &save); line != NULL && n < ENV_LINES;
	     line = strtok_r(NULL, "\n", &save)) {
		envp[n++] = line;
		timebox += strncmp(line, "TIMEBOX_", 8) == 0;
	}
	envp[n] = NULL;
	int found = tb_env_check_unknown(envp, count_err, &s);

	FUZZ_CHECK(found == s.calls, "%d unknown names but %d reports", found, s.calls);
	FUZZ_CHECK((size_t)found <= timebox, "%d unknown names among %zu TIMEBOX_ entries", found,
		   timebox);
	free(copy);
}

/* Finished, the settings hold only what the parsers could give; observe governs nothing. */
static void check_finished(const struct tb_settings *after, const struct tb_env_var *var,
			   const char *value)
{
	struct tb_settings f;

	memcpy(&f, after, sizeof(f));
	tb_settings_finish(&f);
	FUZZ_CHECK(f.breaker == 0 && f.breaker_failures >= 0 && f.breaker_rate >= 0 &&
			   f.breaker_rate <= 100 && f.retry_budget >= 0 && f.retry_budget <= 1000,
		   "%s='%s': breaker %d failures %d rate %d budget %d once finished", var->name,
		   value, f.breaker, f.breaker_failures, f.breaker_rate, f.retry_budget);
	FUZZ_CHECK(!f.max_conns_auto || f.max_conns == f.max_conns_ceiling,
		   "%s='%s': an automatic gate of %d, ceiling %d", var->name, value, f.max_conns,
		   f.max_conns_ceiling);
	f.observe = true;
	tb_settings_finish(&f);
	FUZZ_CHECK(!tb_settings_breaker_on(&f) && !tb_settings_retry_budget_on(&f) &&
			   !f.max_conns_auto && f.breaker_slow_ns == 0 && f.deadline_ns == 0,
		   "%s='%s': observe left something that refuses", var->name, value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t n = nvars();
	const struct tb_env_var *var;
	struct tb_settings before, after;
	struct seen s = { 0, NULL, NULL };
	char *value;
	int rc;

	if (size == 0)
		return 0;
	value = fuzz_cstr(data + 1, size - 1);
	if (data[0] % (n + 1) == n) {
		check_unknown(value);
		free(value);
		return 0;
	}
	var = &tb_env_vars[data[0] % (n + 1)];
	FUZZ_CHECK(tb_env_find(var->name, 0) == var && tb_env_find(var->option, 1) == var,
		   "%s is not found by its own name or option", var->name);
	memset(&before, 0, sizeof(before));
	start(&before);
	memcpy(&after, &before, sizeof(after));
	rc = tb_env_apply(&after, var, value, count_err, &s);
	if (rc == 0) {
		FUZZ_CHECK(s.calls == 0, "%s='%s' accepted with an error", var->name, value);
		FUZZ_CHECK(value[0] != '\0', "%s: the empty value is accepted", var->name);
		check_only_member(&before, &after, var, value);
		check_reapply(&after, var, value);
		check_finished(&after, var, value);
		if (var->kind == TB_ENV_DURATION) {
			int64_t ns = -1;
			const char *why;

			FUZZ_CHECK(tb_duration_parse(value, &ns, &why) == 0 &&
					   ns == tb_env_number(&after, var),
				   "%s='%s' differs from the duration parser", var->name, value);
		}
	} else {
		FUZZ_CHECK(rc == -1, "%s: returned %d", var->name, rc);
		FUZZ_CHECK(s.calls == 1 && s.name == var->name && s.why != NULL,
			   "%s='%s' refused with %d reports", var->name, value, s.calls);
		FUZZ_CHECK(memcmp(&before, &after, sizeof(before)) == 0,
			   "%s='%s' refused but the settings changed", var->name, value);
	}
	free(value);
	return 0;
}
