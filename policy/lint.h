/* lint.h - the budget lint of `timebox check`: the seed's timeout pitfalls found in the
 * effective settings of the defaults and of each rule. Pure code: numbers in, findings out. */
#ifndef TB_LINT_H
#define TB_LINT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* The rules, by the name each finding carries. */
#define TB_LINT_NO_DEADLINE "no-deadline"
#define TB_LINT_RETRIES "retries-exceed-deadline"
#define TB_LINT_PHASE_SUM "phases-exceed-deadline"
#define TB_LINT_NEVER_FIRES "phase-never-fires"
#define TB_LINT_GATE_WAIT "unbounded-gate-wait"
#define TB_LINT_LITTLE "cap-vs-littles-law"
#define TB_LINT_INBOUND "deadline-exceeds-inbound"
#define TB_LINT_SESSION "session-has-no-deadline"
#define TB_LINT_REQUEST_RETRIES "retries-exceed-request-budget"
#define TB_LINT_PROPAGATE_CALL "propagate-outside-request"
#define TB_LINT_OPEN_MAX "breaker-open-max-below-open"
#define TB_LINT_PROBES "breaker-probes-clamped"
#define TB_LINT_BLIND "protection-blind-to-stalls"
#define TB_LINT_AUTO_SHARED "max-conns-auto-shared"
#define TB_LINT_AUTO_BOUNDS "max-conns-floor-above-ceiling"

struct tb_finding {
	const char *rule;          /* one of TB_LINT_* */
	int line;                  /* the rule's line; for the defaults, the first value's */
	char scope[TB_NAME_MAX];   /* "defaults" or the rule's match */
	char message[400];         /* what is wrong, with the numbers */
	char fix[240];             /* a suggested change */
};

/*
 * Lints one scope (the defaults or a rule). inbound_ns > 0 is the caller's own budget
 * (`--inbound`). Writes up to max findings to out and returns how many there are in all.
 * The chain's rules need the defaults (an inbound request's budget is theirs): here r
 * stands for its own defaults; tb_lint_config gives every rule the file's.
 */
size_t tb_lint_scope(const struct tb_resolved *r, const char *scope, int line, int64_t inbound_ns,
		     struct tb_finding *out, size_t max);

/*
 * Lints the defaults and every rule. A rule's finding identical to one of the defaults'
 * (inherited, same numbers) is not repeated. Returns how many findings there are in all.
 */
size_t tb_lint_config(const struct tb_config *c, int64_t inbound_ns, struct tb_finding *out,
		      size_t max);

#endif
