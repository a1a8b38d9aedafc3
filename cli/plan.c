/* plan.c - `timebox plan`: which limit fires first, for given limits and a given downstream,
 * played by the library's own policy code on a simulated clock (policy/plan.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cli.h"
#include "config.h"
#include "duration.h"
#include "env.h"
#include "plan.h"
#include "rules.h"
#include "settings.h"

#define MAX_VARS TB_FIELDS_MAX /* one per tb_env_vars row: fewer than the config fields */

struct plan_args {
	const char *values[MAX_VARS]; /* one per tb_env_vars row, as `timebox run` takes them */
	const char *dest;
	const char *downstream;
	int json;
};

static void plan_usage(FILE *out)
{
	fprintf(out,
		"usage: timebox plan [LIMITS] [--config FILE --dest HOST:PORT] --downstream BEHAVIOUR\n"
		"                    [--retries N] [--backoff DURATION] [--rtt DURATION] [--reuse]\n"
		"                    [--format text|json]\n"
		"\n"
		"Plays one call and the program's retries on a simulated clock with the library's\n"
		"own policy code, and prints the timeline: which limit fires first, when, the errno\n"
		"the program sees, and how many times the downstream executed the request.\n"
		"LIMITS are `timebox run`'s options (--connect-timeout, --read-timeout, --deadline,\n"
		"--acquire-timeout, --max-conns, --retry-window, ...); the TIMEBOX_* environment\n"
		"applies under them, as it would to `timebox run`. The breaker, the retry budget\n"
		"and --max-conns auto (--breaker, --retry-budget, ...) act across calls: the plan\n"
		"says what they do for the destination, above the timeline, and does not play them.\n"
		"\n"
		"BEHAVIOUR (durations count from the request's last byte sent):\n"
		"  ok=50ms                  answers after 50 ms\n"
		"  stall=1200ms | stall     answers after 1200 ms | never answers\n"
		"  drip=150ms/20            one byte every 150 ms, 20 bytes\n"
		"  first=20ms,drip=150ms/20 a first byte after 20 ms, then 20 bytes, one per 150 ms\n"
		"  down                     the machine is gone: SYNs and data go unanswered\n"
		"  blackhole                the handshake completes, then every packet is dropped\n"
		"  slow-gate=800ms[,...]    every slot of the gate (--max-conns) is busy for 800 ms\n"
		"\n"
		"  --retries N       the program tries N more times after a failure, on a new connection\n"
		"  --backoff D       ... after a pause of D (default: at once)\n"
		"  --rtt D           the handshake's duration (default 1ms)\n"
		"  --reuse           the first attempt takes a kept-alive connection (no handshake)\n"
		"  --dest HOST:PORT  the destination whose rule in --config FILE applies\n"
		"\n"
		"Example (seed question 4):\n"
		"  timebox plan --read-timeout 250ms --deadline 300ms --retries 2 --reuse \\\n"
		"      --downstream stall=1200ms\n");
}

static int plan_error(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "timebox: plan: ");
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, "\n(see timebox plan --help)\n");
	return EXIT_USAGE;
}

static int parse_duration_opt(const char *opt, const char *text, int64_t *ns)
{
	const char *why;

	if (tb_duration_parse(text, ns, &why) < 0) {
		fprintf(stderr, "timebox: plan: %s %s: %s\n", opt, text, why);
		return -1;
	}
	return 0;
}

/*
 * Parses plan's arguments into *a and *in (the program's behaviour; the settings come
 * later). Returns 0, -1 after --help, or EXIT_USAGE after printing why.
 */
static int parse_args(int argc, char **argv, struct plan_args *a, struct tb_plan_input *in)
{
	in->rtt_ns = TB_NS_PER_MS;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *eq = strchr(arg, '='), *value = NULL;
		char option[64];
		size_t len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
		const struct tb_env_var *var;

		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			plan_usage(stdout);
			return -1;
		}
		if (strcmp(arg, "--reuse") == 0) {
			in->reuse = true;
			continue;
		}
		if (strncmp(arg, "--", 2) != 0 || len >= sizeof(option))
			return plan_error("unexpected argument '%s'%s", arg, "");
		memcpy(option, arg, len);
		option[len] = '\0';
		var = tb_env_find(option, 1);
		if (var != NULL && TB_ENV_IS_SWITCH(var->kind) && eq == NULL)
			value = "1";
		else if (eq != NULL)
			value = eq + 1;
		else if (i + 1 < argc)
			value = argv[++i];
		else
			return plan_error("%s needs a value%s", option, "");

		if (var != NULL) {
			a->values[var - tb_env_vars] = value;
		} else if (strcmp(option, "--dest") == 0) {
			a->dest = value;
		} else if (strcmp(option, "--downstream") == 0) {
			a->downstream = value;
		} else if (strcmp(option, "--format") == 0) {
			if (strcmp(value, "json") != 0 && strcmp(value, "text") != 0)
				return plan_error("--format %s: expected text or json%s", value, "");
			a->json = strcmp(value, "json") == 0;
		} else if (strcmp(option, "--retries") == 0) {
			char *end;
			long n = strtol(value, &end, 10);

			if (end == value || *end != '\0' || n < 0 || n > TB_PLAN_MAX_RETRIES)
				return plan_error("--retries %s: expected a number from 0 to 100%s",
						  value, "");
			in->retries = (int)n;
		} else if (strcmp(option, "--backoff") == 0) {
			if (parse_duration_opt(option, value, &in->backoff_ns) < 0)
				return EXIT_USAGE;
		} else if (strcmp(option, "--rtt") == 0) {
			if (parse_duration_opt(option, value, &in->rtt_ns) < 0)
				return EXIT_USAGE;
		} else {
			return plan_error("unknown option '%s'%s", arg, "");
		}
	}
	if (a->downstream == NULL)
		return plan_error("%s%s", "--downstream is required (e.g. --downstream stall=1200ms)",
				  "");
	return 0;
}

/* The settings from the environment and the options, the way `timebox run` checks them. */
static int settings_from_options(const struct plan_args *a, struct tb_settings *s)
{
	struct tb_cli_report from_env = { 0, 0 }, from_opt = { 1, 0 };

	tb_settings_init(s);
	for (size_t i = 0; tb_env_vars[i].name != NULL; i++) {
		const char *env_value = getenv(tb_env_vars[i].name);

		if (tb_env_vars[i].kind == TB_ENV_PATH)
			continue;
		if (env_value != NULL)
			tb_env_apply(s, &tb_env_vars[i], env_value, tb_cli_report_error, &from_env);
		if (a->values[i] != NULL)
			tb_env_apply(s, &tb_env_vars[i], a->values[i], tb_cli_report_error, &from_opt);
	}
	tb_settings_finish(s);
	return from_env.errors + from_opt.errors;
}

/*
 * The settings of the destination from the configuration file (with the environment and
 * the options over it, as `timebox run` gives them to the library). *governed is false
 * when the file leaves the destination alone. Returns 0, or EXIT_USAGE after printing why.
 */
static int settings_from_config(const char *path, const struct plan_args *a,
				struct tb_plan_input *in, bool *governed)
{
	char name[TB_NAME_MAX];
	const char *names[1] = { name }, *why;
	struct tb_target t = { NULL, NULL, names, 0 };
	const struct tb_settings *s;
	struct tb_config *c;
	int port, kind, errors;

	memset(&in->dest, 0, sizeof(in->dest));
	kind = tb_target_parse(a->dest != NULL ? a->dest : "127.0.0.1:80", &in->dest, name, &port,
			       &why);
	if (kind < 0)
		return plan_error("--dest %s: %s", a->dest, why);
	if (kind == TB_MATCH_UNIX) {
		t.unix_path = name;
	} else if (kind == TB_MATCH_HOST) {
		/* The name's rules apply; an address rule would need the name resolved. */
		memset(&in->dest, 0, sizeof(in->dest));
		in->dest.port = (uint16_t)port;
		t.dest = &in->dest;
		t.nnames = 1;
	} else {
		t.dest = &in->dest;
	}
	c = tb_cli_load(path, a->values, &errors);
	if (c == NULL || errors > 0) {
		tb_config_free(c);
		return EXIT_USAGE;
	}
	s = tb_config_governing(c, &t);
	*governed = s != NULL;
	if (s != NULL)
		in->set = *s;
	else
		tb_settings_init(&in->set);
	tb_settings_finish(&in->set);
	tb_config_free(c);
	return 0;
}

/* ---- output ------------------------------------------------------------------------- */

static const char *errno_name(int err)
{
	switch (err) {
	case 0: return "none";
	case ETIMEDOUT: return "ETIMEDOUT";
	case EAGAIN: return "EAGAIN";
	default: return "EIO";
	}
}

/* "752ms", "3.021s", "924.6s" - the time since t=0, for the eye. */
static const char *when(int64_t ns, char *buf, size_t len)
{
	if (ns == TB_NEVER)
		snprintf(buf, len, "never");
	else if (ns < 10 * TB_NS_PER_S)
		snprintf(buf, len, "%gms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.1fs", (double)ns / 1e9);
	return buf;
}

static const char *kernel_note(enum tb_plan_kernel k)
{
	switch (k) {
	case TB_KERNEL_SYN:
		return "no timebox limit: the kernel's default ends it after ~127 s "
		       "(tcp_syn_retries = 6: SYN sent again after 1, 2, 4, ... 64 s)";
	case TB_KERNEL_RETRIES2:
		return "no timebox limit: the kernel's default ends it after ~924.6 s "
		       "(tcp_retries2 = 15: unacknowledged data sent again with a doubling RTO)";
	case TB_KERNEL_NONE:
		break;
	}
	return "";
}

/* What one event says, in a sentence (text) - the JSON carries the same fields. */
static void describe(const struct tb_plan_input *in, const struct tb_plan_event *e, char *buf,
		     size_t len)
{
	char d[TB_DURATION_TEXT_MAX], l[TB_DURATION_TEXT_MAX];

	switch (e->what) {
	case TB_EV_BACKOFF:
		snprintf(buf, len, "the program waits %s before retrying",
			 tb_duration_format(e->span, d, sizeof(d)));
		break;
	case TB_EV_REUSE:
		snprintf(buf, len, "takes a kept-alive connection from its pool (no handshake)");
		break;
	case TB_EV_GATE_WAIT:
		snprintf(buf, len, "connect() waits at the gate: all %d slots are busy",
			 in->set.max_conns);
		break;
	case TB_EV_GATE_SLOT:
		snprintf(buf, len, "a slot is free: the gate lets the connect through");
		break;
	case TB_EV_CONNECT:
		snprintf(buf, len, "connect() starts the handshake");
		break;
	case TB_EV_HANDSHAKE:
		snprintf(buf, len, "handshake done");
		break;
	case TB_EV_SENT:
		snprintf(buf, len, "request sent%s",
			 in->down.kind == TB_DOWN_DOWN || in->down.kind == TB_DOWN_BLACKHOLE ?
				 " (it never arrives)" : "; the downstream starts executing it");
		break;
	case TB_EV_BYTE:
		snprintf(buf, len, e->count == 1 ? "first byte" : "byte %ld", e->count);
		break;
	case TB_EV_BYTES:
		snprintf(buf, len, "... %ld more bytes, one every %s, the last one here", e->count,
			 tb_duration_format(e->span, d, sizeof(d)));
		break;
	case TB_EV_RESPONSE:
		snprintf(buf, len, "response complete");
		break;
	case TB_EV_EXPIRED:
		snprintf(buf, len, "%s fires (%s %s): the program gets %s%s",
			 tb_phase_name(e->phase), e->phase == TB_PHASE_DEADLINE ? "deadline" : "limit",
			 tb_duration_format(tb_settings_phase_limit(&in->set, e->phase), l,
					    sizeof(l)),
			 errno_name(e->err),
			 e->phase == TB_PHASE_GATE || e->phase == TB_PHASE_CONNECT ?
				 " from connect()" :
				 "; the connection is shut down, never reused");
		break;
	case TB_EV_REFUSED:
		snprintf(buf, len, "the deadline has passed: inside retry_window the attempt fails "
			 "at once with %s, sending nothing", errno_name(e->err));
		break;
	case TB_EV_REJECTED:
		snprintf(buf, len, "the gate's queue is full (max_pending): connect() fails at once "
			 "with EAGAIN");
		break;
	case TB_EV_KERNEL:
		snprintf(buf, len, "%s; the program gets ETIMEDOUT", kernel_note(e->kernel));
		break;
	case TB_EV_FOREVER:
		snprintf(buf, len, "nothing ends the wait: no timebox limit, and the peer's "
			 "kernel acknowledges everything");
		break;
	}
}

static void limits_text(const struct tb_settings *s, char *buf, size_t len)
{
	static const enum tb_phase shown[] = { TB_PHASE_GATE, TB_PHASE_CONNECT, TB_PHASE_WRITE,
					       TB_PHASE_FIRST_BYTE, TB_PHASE_READ,
					       TB_PHASE_DEADLINE };
	size_t used = 0;
	char d[TB_DURATION_TEXT_MAX];

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]) && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", i ? " " : "",
					 tb_phase_name(shown[i]),
					 tb_duration_format(tb_settings_phase_limit(s, shown[i]), d,
							    sizeof(d)));
	if (used < len && s->deadline_ns > 0)
		used += (size_t)snprintf(buf + used, len - used, " retry_window=%s",
					 tb_duration_format(tb_settings_retry_window(s), d,
							    sizeof(d)));
	if (used < len && s->max_conns_auto)
		used += (size_t)snprintf(buf + used, len - used, " max_conns=auto(%d..%d)",
					 s->max_conns_floor, s->max_conns_ceiling);
	else if (used < len && s->max_conns > 0)
		used += (size_t)snprintf(buf + used, len - used, " max_conns=%d", s->max_conns);
	if (used < len && tb_settings_breaker_on(s))
		used += (size_t)snprintf(buf + used, len - used, " breaker=on");
	if (used < len && tb_settings_retry_budget_on(s))
		snprintf(buf + used, len - used, " retry_budget=%d%%", s->retry_budget);
}

static const char *outcome_name(enum tb_plan_outcome o)
{
	return o == TB_PLAN_OK ? "ok" : o == TB_PLAN_FAILED ? "failed" : "never";
}

static const char *ender(const struct tb_plan *p)
{
	if (p->outcome == TB_PLAN_OK)
		return "none";
	if (p->kernel == TB_KERNEL_SYN)
		return "kernel:tcp_syn_retries";
	if (p->kernel == TB_KERNEL_RETRIES2)
		return "kernel:tcp_retries2";
	return p->fired >= 0 ? tb_phase_name((enum tb_phase)p->fired) : "none";
}

static void print_text(const struct tb_plan_input *in, const struct tb_plan *p,
		       const char *downstream, bool governed)
{
	char lim[400], t[32], line[400], prot[TB_PLAN_PROTECTION_MAX][TB_PLAN_LINE_MAX];
	int attempt = 0;
	size_t np;

	limits_text(&in->set, lim, sizeof(lim));
	printf("limits: %s%s\n", lim, governed ? "" : " (the destination is not governed)");
	np = tb_plan_protection(&in->set, prot, TB_PLAN_PROTECTION_MAX);
	for (size_t i = 0; i < np && i < TB_PLAN_PROTECTION_MAX; i++)
		printf("%s\n", prot[i]);
	if (np > 0)
		printf("(the breaker, the retry budget and the adaptive gate act across calls: the "
		       "timeline below is one caller's and does not play them)\n");
	printf("downstream: %s; retries: %d", downstream, in->retries);
	if (in->backoff_ns > 0)
		printf(" after %s", when(in->backoff_ns, t, sizeof(t)));
	printf("; handshake: %s\n", when(in->rtt_ns, t, sizeof(t)));
	if (p->gate_ignored)
		printf("note: slow-gate has no effect without --max-conns: timebox has no gate\n");
	for (size_t i = 0; i < p->nevents; i++) {
		const struct tb_plan_event *e = &p->ev[i];

		if (e->attempt != attempt) {
			attempt = e->attempt;
			printf("attempt %d\n", attempt);
		}
		describe(in, e, line, sizeof(line));
		printf("  t=%-10s %s\n", when(e->at, t, sizeof(t)), line);
	}
	printf("outcome: %s", outcome_name(p->outcome));
	if (p->outcome == TB_PLAN_FOREVER)
		printf(": the program waits for ever,");
	else
		printf(" at t=%s", when(p->end, t, sizeof(t)));
	if (p->outcome == TB_PLAN_FAILED)
		printf(", errno %s, ended by %s", errno_name(p->err), ender(p));
	printf(" after %d attempt%s\n", p->attempts, p->attempts == 1 ? "" : "s");
	printf("downstream executed the request: %d time%s\n", p->executed,
	       p->executed == 1 ? "" : "s");
	if (p->kernel != TB_KERNEL_NONE)
		printf("%s\n", kernel_note(p->kernel));
}

static void json_ms(int64_t ns)
{
	if (ns == TB_NEVER)
		printf("null");
	else
		printf("%.3f", (double)ns / 1e6);
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void print_json(const struct tb_plan_input *in, const struct tb_plan *p,
		       const char *downstream, bool governed)
{
	char lim[400], line[400], prot[TB_PLAN_PROTECTION_MAX][TB_PLAN_LINE_MAX];
	size_t np = tb_plan_protection(&in->set, prot, TB_PLAN_PROTECTION_MAX);

	limits_text(&in->set, lim, sizeof(lim));
	printf("{\"limits\": ");
	json_str(lim);
	printf(", \"protection\": [");
	for (size_t i = 0; i < np && i < TB_PLAN_PROTECTION_MAX; i++) {
		printf("%s", i ? ", " : "");
		json_str(prot[i]);
	}
	printf("]");
	printf(", \"governed\": %s, \"downstream\": ", governed ? "true" : "false");
	json_str(downstream);
	printf(", \"retries\": %d, \"backoff_ms\": ", in->retries);
	json_ms(in->backoff_ns);
	printf(", \"rtt_ms\": ");
	json_ms(in->rtt_ns);
	printf(", \"reuse\": %s,\n \"outcome\": \"%s\", \"end_ms\": ", in->reuse ? "true" : "false",
	       outcome_name(p->outcome));
	json_ms(p->end);
	printf(", \"attempts\": %d, \"executed\": %d, \"errno\": ", p->attempts, p->executed);
	if (p->outcome == TB_PLAN_FAILED)
		printf("\"%s\"", errno_name(p->err));
	else
		printf("null");
	printf(", \"ended_by\": \"%s\", \"kernel_note\": ", ender(p));
	if (p->kernel != TB_KERNEL_NONE)
		json_str(kernel_note(p->kernel));
	else
		printf("null");
	printf(", \"gate_ignored\": %s,\n \"timeline\": [", p->gate_ignored ? "true" : "false");
	for (size_t i = 0; i < p->nevents; i++) {
		const struct tb_plan_event *e = &p->ev[i];

		printf("%s\n  {\"t_ms\": ", i ? "," : "");
		json_ms(e->at);
		printf(", \"attempt\": %d, \"event\": \"%s\"", e->attempt, tb_plan_what_name(e->what));
		if (e->what == TB_EV_EXPIRED || e->what == TB_EV_REFUSED)
			printf(", \"phase\": \"%s\"", tb_phase_name(e->phase));
		if (e->err != 0)
			printf(", \"errno\": \"%s\"", errno_name(e->err));
		if (e->what == TB_EV_BYTE || e->what == TB_EV_BYTES)
			printf(", \"count\": %ld", e->count);
		describe(in, e, line, sizeof(line));
		printf(", \"text\": ");
		json_str(line);
		putchar('}');
	}
	printf("\n]}\n");
}

int tb_plan_main(int argc, char **argv)
{
	struct plan_args a;
	struct tb_plan_input in;
	static struct tb_plan plan; /* large: kept off the stack */
	const struct tb_env_var *cv = tb_env_find("TIMEBOX_CONFIG", 0);
	const char *path, *why;
	bool governed = true;
	int rc;

	memset(&a, 0, sizeof(a));
	memset(&in, 0, sizeof(in));
	rc = parse_args(argc, argv, &a, &in);
	if (rc != 0)
		return rc < 0 ? EXIT_SUCCESS : rc;
	if (tb_downstream_parse(a.downstream, &in.down, &why) < 0)
		return plan_error("--downstream %s: %s", a.downstream, why);
	path = a.values[cv - tb_env_vars] != NULL ? a.values[cv - tb_env_vars]
						  : getenv("TIMEBOX_CONFIG");
	if (path != NULL && path[0] != '\0') {
		if ((rc = settings_from_config(path, &a, &in, &governed)) != 0)
			return rc;
	} else {
		if (a.dest != NULL)
			return plan_error("%s%s", "--dest needs --config FILE", "");
		if (settings_from_options(&a, &in.set) != 0)
			return EXIT_USAGE;
		governed = tb_settings_any_limit(&in.set);
		in.dest.family = AF_INET; /* any one destination will do */
		in.dest.port = 80;
	}
	if (tb_plan_run(&in, &plan) < 0)
		return plan_error("%s%s", "bad input", "");
	if (a.json)
		print_json(&in, &plan, a.downstream, governed);
	else
		print_text(&in, &plan, a.downstream, governed);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_USAGE;
}
