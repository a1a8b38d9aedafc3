/* lint.c - the budget lint: each rule is a pitfall from the seed (a drip outliving a read
 * timeout, retries that cannot fit, an unbounded gate, a cap far from Little's law, a deadline
 * that does not shrink down the chain, retries beyond a request's budget, a breaker that
 * cannot see a stall). Pure code: no I/O. */
#include "lint.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "breaker.h"
#include "duration.h"
#include "frame.h"

struct sink {
	struct tb_finding *out;
	size_t max, n;
	const char *scope;
	int line;
};

static void add(struct sink *s, const char *rule, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void add(struct sink *s, const char *rule, const char *fix, const char *fmt, ...)
{
	struct tb_finding *f;
	va_list ap;

	if (s->n++ >= s->max)
		return;
	f = &s->out[s->n - 1];
	f->rule = rule;
	f->line = s->line;
	snprintf(f->scope, sizeof(f->scope), "%s", s->scope);
	va_start(ap, fmt);
	vsnprintf(f->message, sizeof(f->message), fmt, ap);
	va_end(ap);
	snprintf(f->fix, sizeof(f->fix), "%s", fix);
}

#define D(ns, b) tb_duration_format((ns), (b), sizeof(b))


/* The limit a stalled downstream costs each attempt: first_byte (which follows read). */
static const char *first_byte_name(const struct tb_resolved *r, int fb_field)
{
	return r->origin[fb_field] == TB_ORIGIN_BUILTIN ? "read_timeout" : "first_byte_timeout";
}

static int field_named(const char *key)
{
	for (int f = 0; f < TB_FIELDS_MAX; f++)
		if (tb_config_key(f) != NULL && strcmp(tb_config_key(f), key) == 0)
			return f;
	return -1;
}

static void lint_deadline(struct sink *s, const struct tb_resolved *r, int64_t inbound_ns)
{
	const struct tb_settings *c = &r->set;
	int fb = field_named("first_byte_timeout"), dl = field_named("deadline");
	char a[TB_DURATION_TEXT_MAX], b[TB_DURATION_TEXT_MAX], x[TB_DURATION_TEXT_MAX],
		y[TB_DURATION_TEXT_MAX], fix[240];
	const char *fbname = first_byte_name(r, fb);

	/* Pitfall 1: a read timeout bounds the gap between chunks, not the call. An explicit
	 * deadline = "off" is a decision (a stream), not an oversight. */
	if (c->deadline_ns == 0 && r->origin[dl] == TB_ORIGIN_BUILTIN &&
	    (c->read_ns > 0 || c->first_byte_ns > 0)) {
		int64_t idle = c->read_ns > 0 ? c->read_ns : c->first_byte_ns;
		/* Room for the phases of one attempt and a retry, unless told otherwise. */
		int attempts = r->hints.attempts > 0 ? r->hints.attempts : 2;

		snprintf(fix, sizeof(fix),
			 "set a total deadline (your caller's budget), e.g. deadline = \"%s\"; or "
			 "deadline = \"off\" for a stream that may outlive any deadline",
			 D(idle * attempts + c->connect_ns + c->acquire_ns, a));
		add(s, TB_LINT_NO_DEADLINE, fix,
		    "%s is %s but there is no deadline: a peer that sends one byte every %s "
		    "keeps a call alive for ever",
		    c->read_ns > 0 ? "read_timeout" : "first_byte_timeout", D(idle, b),
		    D(idle - idle / 10 > 0 ? idle - idle / 10 : idle, x));
	}
	if (c->deadline_ns <= 0)
		return;

	/* The program's own retries share the deadline (seed question 4). */
	if (r->hints.attempts > 1 && c->first_byte_ns > 0 &&
	    c->first_byte_ns < c->deadline_ns &&
	    c->first_byte_ns * r->hints.attempts > c->deadline_ns) {
		int64_t fit = c->deadline_ns / c->first_byte_ns;

		snprintf(fix, sizeof(fix),
			 "lower %s to %s or less so that every attempt fits, raise the deadline "
			 "to %s, or expect %lld attempt%s",
			 fbname, D(c->deadline_ns / r->hints.attempts, a),
			 D(c->first_byte_ns * r->hints.attempts, b), (long long)fit,
			 fit == 1 ? "" : "s");
		add(s, TB_LINT_RETRIES, fix,
		    "%s %s x %d attempts = %s is more than the deadline %s: against a stalled "
		    "downstream only %lld attempt%s can wait out its %s",
		    fbname, D(c->first_byte_ns, x), r->hints.attempts,
		    D(c->first_byte_ns * r->hints.attempts, y), D(c->deadline_ns, a),
		    (long long)fit, fit == 1 ? "" : "s", fbname);
	}

	/* ① + ② + ③ of one attempt against the whole budget. */
	{
		int64_t sum = c->acquire_ns + c->connect_ns + c->first_byte_ns;
		int set = (c->acquire_ns > 0) + (c->connect_ns > 0) + (c->first_byte_ns > 0);

		if (set >= 2 && sum > c->deadline_ns && c->acquire_ns < c->deadline_ns &&
		    c->connect_ns < c->deadline_ns && c->first_byte_ns < c->deadline_ns) {
			char p1[TB_DURATION_TEXT_MAX], p2[TB_DURATION_TEXT_MAX],
				p3[TB_DURATION_TEXT_MAX];

			snprintf(fix, sizeof(fix),
				 "make acquire + connect + first_byte at most %s, or raise the "
				 "deadline to %s; if the deadline is meant to decide, keep it and "
				 "expect cuts at phase=deadline",
				 D(c->deadline_ns, a), D(sum, b));
			add(s, TB_LINT_PHASE_SUM, fix,
			    "acquire_timeout %s + connect_timeout %s + %s %s = %s is more than "
			    "the deadline %s: a call slow in every phase is cut by the deadline "
			    "before its phase limits fire",
			    D(c->acquire_ns, p1), D(c->connect_ns, p2), fbname,
			    D(c->first_byte_ns, p3), D(sum, x), D(c->deadline_ns, y));
		}
	}

	/* A phase limit at or above the deadline can never be the one that fires. */
	{
		static const char *const keys[] = { "acquire_timeout", "connect_timeout",
						    "write_timeout", "first_byte_timeout",
						    "read_timeout", "dns_timeout" };
		const int64_t vals[] = { c->acquire_ns, c->connect_ns, c->write_ns,
					 c->first_byte_ns, c->read_ns, c->dns_ns };
		int dns = field_named("dns_timeout");

		for (size_t i = 0; i < 6; i++) {
			/* A first_byte that only follows read is reported as read, and a dns that
			 * only follows connect as connect. */
			if (i == 3 && r->origin[fb] == TB_ORIGIN_BUILTIN)
				continue;
			if (i == 5 && (dns < 0 || r->origin[dns] == TB_ORIGIN_BUILTIN))
				continue;
			if (vals[i] <= 0 || vals[i] < c->deadline_ns)
				continue;
			snprintf(fix, sizeof(fix),
				 "lower %s below the deadline (e.g. %s), or remove it", keys[i],
				 D(c->deadline_ns * 8 / 10, a));
			add(s, TB_LINT_NEVER_FIRES, fix,
			    "%s %s can never fire: the deadline %s always comes first", keys[i],
			    D(vals[i], x), D(c->deadline_ns, y));
		}
	}

	/* Pitfall 5: deadlines must shrink down the chain. */
	if (inbound_ns > 0 && c->deadline_ns >= inbound_ns) {
		snprintf(fix, sizeof(fix),
			 "set the deadline below the inbound budget minus this service's own work, "
			 "e.g. deadline = \"%s\"",
			 D(inbound_ns * 8 / 10, a));
		add(s, TB_LINT_INBOUND, fix,
		    "the deadline %s is not shorter than the inbound budget %s: the caller gives "
		    "up before this call does, and the work continues for nobody",
		    D(c->deadline_ns, x), D(inbound_ns, y));
	}
}

static void lint_gate(struct sink *s, const struct tb_resolved *r)
{
	const struct tb_settings *c = &r->set;
	char a[TB_DURATION_TEXT_MAX], fix[240];

	if (c->max_conns <= 0)
		return;
	/* Pitfall 3: HttpClient's 3-minute connectionRequestTimeout, or worse, none. */
	if (c->acquire_ns == 0 && c->deadline_ns == 0) {
		char size[48];

		if (c->max_conns_auto)
			snprintf(size, sizeof(size), "auto (%d to %d)", c->max_conns_floor,
				 c->max_conns_ceiling);
		else
			snprintf(size, sizeof(size), "%d", c->max_conns);
		add(s, TB_LINT_GATE_WAIT,
		    "set acquire_timeout (e.g. \"50ms\"), or a deadline, which also bounds the "
		    "wait",
		    "max_conns is %s but neither acquire_timeout nor a deadline bounds the wait "
		    "for a slot: when the downstream slows, callers queue at the gate without "
		    "limit",
		    size);
	}
	if (c->max_conns_auto)
		return; /* Little's law is what the adaptive gate measures for itself */

	/* Pitfall 2 / seed question 6: in flight = rate x time in system (Little's law). */
	if (r->hints.expected_rps > 0 && r->hints.expected_p99_ns > 0) {
		double inflight = r->hints.expected_rps * (double)r->hints.expected_p99_ns / 1e9;
		long want = (long)(inflight * 1.5);

		if ((double)want < inflight * 1.5)
			want++; /* rounded up, without libm */
		if (want < 1)
			want = 1;
		if ((double)c->max_conns < inflight) {
			snprintf(fix, sizeof(fix), "set max_conns = %ld (expected_rps x "
						   "expected_p99 x 1.5)", want);
			add(s, TB_LINT_LITTLE, fix,
			    "max_conns %d is below the %.1f calls in flight that %g calls/s at a "
			    "p99 of %s keep open: callers will queue at the gate even on a good day",
			    c->max_conns, inflight, r->hints.expected_rps,
			    D(r->hints.expected_p99_ns, a));
		} else if (c->max_conns > 2 * want) {
			snprintf(fix, sizeof(fix), "set max_conns = %ld (expected_rps x "
						   "expected_p99 x 1.5)", want);
			add(s, TB_LINT_LITTLE, fix,
			    "max_conns %d is more than twice the %ld that %g calls/s at a p99 of %s "
			    "need: when the downstream slows, the cap lets %d calls pile onto it "
			    "instead of protecting it",
			    c->max_conns, want, r->hints.expected_rps,
			    D(r->hints.expected_p99_ns, a), c->max_conns);
		}
	}
}

/* protocol = session: a session has no deadline and no first_byte; read_timeout is its
 * inactivity limit. In the defaults that is every destination. */
static void lint_protocol(struct sink *s, const struct tb_resolved *r)
{
	const struct tb_settings *c = &r->set;
	char a[TB_DURATION_TEXT_MAX];

	if (c->protocol != TB_PROTO_SESSION)
		return;
	if (strcmp(s->scope, "defaults") == 0)
		add(s, TB_LINT_SESSION,
		    "set protocol = \"session\" in a rule that names the streaming destination, "
		    "and leave the defaults at \"auto\"",
		    "protocol = session in the defaults makes every destination a session: no "
		    "deadline and no first_byte timeout apply anywhere");
	else if (c->deadline_ns > 0)
		add(s, TB_LINT_SESSION,
		    "drop the deadline from this rule (deadline = \"off\"), or use protocol = "
		    "\"auto\" if its connections are request/response",
		    "the deadline %s never applies: protocol = session has none (its read_timeout "
		    "is the inactivity limit)", D(c->deadline_ns, a));
}

/*
 * Pitfall 5 across a chain (docs/propagation.md). What an inbound request can give a call
 * of this scope: --inbound (the caller's budget, whatever timebox's scope), and with the
 * defaults' scope = request their deadline (the budget each inbound request opens with, a
 * header can only lower it) for the scopes that draw on it. A rule's deadline x attempts
 * beyond that budget: the attempts past it are cut or, under scope = request, not even sent.
 * A rule that opts out (scope = "call") with propagate on tells the downstream its own
 * deadline, not what the request has left (shim/prop_io.c: the header is the socket's call
 * deadline): more than its caller can give when its deadline is longer than the request's,
 * and nothing at all without a deadline of its own.
 */
static void lint_chain(struct sink *s, const struct tb_resolved *r, const struct tb_resolved *dflt,
		       int64_t inbound_ns)
{
	const struct tb_settings *c = &r->set;
	int64_t budget = inbound_ns > 0 ? inbound_ns : 0, req = 0;
	const char *from = "--inbound";
	char a[TB_DURATION_TEXT_MAX], b[TB_DURATION_TEXT_MAX], x[TB_DURATION_TEXT_MAX],
		y[TB_DURATION_TEXT_MAX], fix[240];
	int pf = field_named("propagate");

	if (dflt->set.scope == TB_SCOPE_REQUEST && dflt->set.deadline_ns > 0)
		req = dflt->set.deadline_ns;
	if (c->scope == TB_SCOPE_REQUEST && req > 0 && (budget == 0 || req < budget)) {
		budget = req;
		from = "the defaults' deadline, scope = request";
	}
	/* Each attempt fits alone (one that does not is deadline-exceeds-inbound's). */
	if (budget > 0 && r->hints.attempts > 1 && c->deadline_ns > 0 && c->deadline_ns < budget &&
	    c->deadline_ns * r->hints.attempts > budget) {
		int64_t fit = budget / c->deadline_ns, each = budget / r->hints.attempts;

		if (each >= 1000000)
			each -= each % 1000000; /* whole milliseconds, as a file would say it */
		snprintf(fix, sizeof(fix),
			 "lower the deadline to %s or less so that every attempt fits, or expect "
			 "%lld attempt%s",
			 D(each, a), (long long)fit, fit == 1 ? "" : "s");
		add(s, TB_LINT_REQUEST_RETRIES, fix,
		    "deadline %s x %d attempts = %s is more than the %s an inbound request can "
		    "give (%s): only %lld attempt%s fit%s whole, %s",
		    D(c->deadline_ns, x), r->hints.attempts,
		    D(c->deadline_ns * r->hints.attempts, y), D(budget, b), from, (long long)fit,
		    fit == 1 ? "" : "s", fit == 1 ? "s" : "",
		    c->scope == TB_SCOPE_REQUEST
			    ? "the next is cut at the request's deadline, or not even sent once it "
			      "has passed"
			    : "the next ones go on after the caller has given up");
	}
	if (dflt->set.scope != TB_SCOPE_REQUEST || c->scope != TB_SCOPE_CALL || !c->propagate)
		return;
	if (c->deadline_ns == 0 && pf >= 0 && r->origin[pf] == TB_ORIGIN_RULE)
		add(s, TB_LINT_PROPAGATE_CALL,
		    "remove scope = \"call\" so that its calls draw on the request and send what "
		    "it has left, or set propagate = false",
		    "propagate is on but scope = call and there is no deadline: this rule's calls "
		    "do not draw on the inbound request, so they have no remaining budget and no "
		    "header is ever sent");
	else if (req > 0 && c->deadline_ns > req)
		add(s, TB_LINT_PROPAGATE_CALL,
		    "remove scope = \"call\" so that the header says what the request has left, "
		    "lower the deadline below the request's, or set propagate = false",
		    "propagate is on but scope = call: the header sent downstream is this rule's "
		    "own deadline %s, not what the inbound request has left (at most %s): the "
		    "downstream is told it has more time than its caller will wait",
		    D(c->deadline_ns, x), D(req, y));
}

/*
 * The downstream's protection (docs/breaker.md). A breaker or a retry budget learns of a
 * failure from timebox: a refusal, a reset, a cut. With no phase limit and no deadline, a
 * stalled downstream (the seed's storm) fails nothing here: the program's own timeout closes
 * a socket that had no outcome, which counts as nothing, so the breaker never opens on a
 * stall and the retries after it are first attempts.
 */
static void lint_protection(struct sink *s, const struct tb_resolved *r)
{
	const struct tb_settings *c = &r->set;
	bool breaker = tb_settings_breaker_on(c), budget = tb_settings_retry_budget_on(c);
	char a[TB_DURATION_TEXT_MAX], b[TB_DURATION_TEXT_MAX], fix[240];

	if (breaker && c->breaker_open_max_ns < c->breaker_open_ns) {
		snprintf(fix, sizeof(fix),
			 "raise breaker_open_max to at least breaker_open (Envoy: 10 x, e.g. "
			 "\"%s\"), or lower breaker_open",
			 D(c->breaker_open_ns * 10, a));
		add(s, TB_LINT_OPEN_MAX, fix,
		    "breaker_open_max %s is shorter than breaker_open %s: every opening lasts "
		    "%s, and a downstream that stays down is probed as often as one that "
		    "stuttered once",
		    D(c->breaker_open_max_ns, a), D(c->breaker_open_ns, b),
		    D(c->breaker_open_max_ns, a));
	}
	if (breaker && c->breaker_probes > TB_BREAKER_PROBES_MAX)
		add(s, TB_LINT_PROBES, "set breaker_probes to 16 or less (1 to 5 is usual)",
		    "breaker_probes %d is more than the %d connects a half-open breaker lets "
		    "through: it lets %d",
		    c->breaker_probes, TB_BREAKER_PROBES_MAX, TB_BREAKER_PROBES_MAX);
	if ((breaker || budget) && c->connect_ns == 0 && c->first_byte_ns == 0 && c->read_ns == 0 &&
	    c->deadline_ns == 0 && c->breaker_slow_ns == 0)
		add(s, TB_LINT_BLIND,
		    "set a deadline or a read_timeout (a cut is a failure), or breaker_slow",
		    "%s but no phase limit and no deadline: a downstream that stalls fails "
		    "nothing here (the program's own timeout only closes the socket), so %s",
		    breaker && budget ? "a breaker and a retry budget are on"
		    : breaker	      ? "the breaker is on"
				      : "a retry budget is on",
		    breaker ? "the breaker opens on refusals and resets only"
			    : "the retries after a stall are counted as first attempts");
	if (!c->max_conns_auto)
		return;
	if (c->gate_shared)
		add(s, TB_LINT_AUTO_SHARED,
		    "drop gate_shared so that each process sizes its own gate, or give max_conns a "
		    "number",
		    "max_conns = auto with gate_shared: the shared gate keeps a fixed size, the "
		    "ceiling %d, and never follows the latency",
		    c->max_conns_ceiling);
	if (c->max_conns_floor > c->max_conns_ceiling) {
		snprintf(fix, sizeof(fix), "lower max_conns_floor to %d or less, or raise "
					   "max_conns_ceiling", c->max_conns_ceiling);
		add(s, TB_LINT_AUTO_BOUNDS, fix,
		    "max_conns_floor %d is above max_conns_ceiling %d: there is no size between "
		    "them for the gate to choose",
		    c->max_conns_floor, c->max_conns_ceiling);
	}
}

/* One scope's findings, the defaults dflt giving the chain's context. */
static size_t lint_one(const struct tb_resolved *r, const struct tb_resolved *dflt,
		       const char *scope, int line, int64_t inbound_ns, struct tb_finding *out,
		       size_t max)
{
	struct sink s = { out, max, 0, scope, line };

	if (!r->enabled || !tb_settings_any_limit(&r->set) || r->set.observe)
		return 0; /* observe: nothing is limited, so no budget to lint */
	lint_deadline(&s, r, inbound_ns);
	lint_gate(&s, r);
	lint_protocol(&s, r);
	lint_chain(&s, r, dflt, inbound_ns);
	lint_protection(&s, r);
	return s.n;
}

size_t tb_lint_scope(const struct tb_resolved *r, const char *scope, int line, int64_t inbound_ns,
		     struct tb_finding *out, size_t max)
{
	return lint_one(r, r, scope, line, inbound_ns, out, max);
}

/* The first file line among the defaults' values, for messages about the defaults. */
static int defaults_line(const struct tb_resolved *r)
{
	int best = 0;

	for (int f = 0; f < TB_FIELDS_MAX; f++)
		if (r->line[f] > 0 && (best == 0 || r->line[f] < best))
			best = r->line[f];
	return best;
}

size_t tb_lint_config(const struct tb_config *c, int64_t inbound_ns, struct tb_finding *out,
		      size_t max)
{
	struct tb_finding scratch[16], mine[16];
	size_t nd, n = 0;

	nd = tb_lint_scope(&c->defaults, "defaults", defaults_line(&c->defaults), inbound_ns,
			   scratch, 16);
	if (nd > 16)
		nd = 16;
	for (size_t i = 0; i < nd; i++, n++)
		if (n < max)
			out[n] = scratch[i];
	for (size_t k = 0; k < c->nrules; k++) {
		const struct tb_rule *rule = &c->rules[k];
		size_t nr = lint_one(&rule->r, &c->defaults, rule->label, rule->line, inbound_ns,
				     mine, 16);

		if (nr > 16)
			nr = 16;
		for (size_t i = 0; i < nr; i++) {
			bool inherited = false;

			for (size_t j = 0; j < nd && !inherited; j++)
				inherited = strcmp(scratch[j].rule, mine[i].rule) == 0 &&
					    strcmp(scratch[j].message, mine[i].message) == 0;
			if (inherited)
				continue;
			if (n < max)
				out[n] = mine[i];
			n++;
		}
	}
	return n;
}
