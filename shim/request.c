/* request.c - the thread's request budget: the inbound request's deadline (scope=request,
 * propagated headers) and the API's nesting stack, folded into one TLS deadline. */
#include "request.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "budget.h"
#include "clock.h"
#include "propagate.h"
#include "stats.h"

/* The effective deadline: min(inbound, innermost API level). The hot path reads only this. */
__thread int64_t tb_req_deadline_now __attribute__((tls_model("initial-exec"))) = TB_NEVER;

/*
 * The API's levels: a small fixed stack (no allocation on any path). A level holds the
 * deadline in force inside it: min(its own, the enclosing level's). Begins past
 * TB_REQ_API_DEPTH are counted (so every end still matches its begin) and tighten the
 * deadline; ending one of them restores the deepest recorded level's deadline, which may be
 * looser than an intermediate overflowed level asked: never stricter than the program asked.
 */
#define TB_REQ_API_DEPTH 16

struct tb_req_state {
	bool in_open;
	enum tb_req_source in_source; /* TB_REQ_SRC_SCOPE or _HEADER */
	int64_t in_start;
	int64_t in_deadline;          /* TB_NEVER: the inbound request has none */
	uint8_t in_header;            /* enum tb_req_header of a _HEADER source */
	char in_value[sizeof(((struct tb_req_tag *)0)->value)];
	unsigned api_depth;           /* begins not yet ended, overflow included */
	int64_t api[TB_REQ_API_DEPTH];
	int64_t api_start[TB_REQ_API_DEPTH]; /* when the begin whose deadline it is began */
	int64_t api_overflow;         /* the deadline of the innermost level past the stack */
	int64_t api_overflow_start;
};

static __thread struct tb_req_state req __attribute__((tls_model("initial-exec")));


/* The innermost API level's deadline (and its start), TB_NEVER without one. */
static int64_t api_top_at(int64_t *start)
{
	if (req.api_depth == 0)
		return TB_NEVER;
	if (req.api_depth > TB_REQ_API_DEPTH) {
		*start = req.api_overflow_start;
		return req.api_overflow;
	}
	*start = req.api_start[req.api_depth - 1];
	return req.api[req.api_depth - 1];
}

static int64_t api_top(void)
{
	int64_t unused;

	return api_top_at(&unused);
}

/* Recomputes the hot path's deadline from the two sources. */
static void refold(void)
{
	int64_t d = api_top();

	if (req.in_open && req.in_deadline < d)
		d = req.in_deadline;
	tb_req_deadline_now = d;
}

void tb_req_inbound_open(int64_t now, int64_t len_ns)
{
	req.in_open = true;
	req.in_source = TB_REQ_SRC_SCOPE;
	req.in_start = now;
	req.in_deadline = len_ns > 0 ? tb_budget_add_sat(now, len_ns) : TB_NEVER;
	req.in_header = TB_REQ_HDR_CONFIGURED;
	req.in_value[0] = '\0';
	refold();
}

/* A header's value never extends the budget: only a smaller deadline replaces the one the
 * settings gave (or none). 0 is valid and means the caller has already given up. */
void tb_req_inbound_tighten_ns(int64_t ns, enum tb_req_header header, const char *value)
{
	int64_t d;

	if (!req.in_open || ns < 0)
		return;
	if (ns == 0)
		tb_stats_arrived_spent();
	d = tb_budget_add_sat(req.in_start, ns);
	if (d >= req.in_deadline)
		return;
	req.in_deadline = d;
	req.in_source = TB_REQ_SRC_HEADER;
	req.in_header = (uint8_t)header;
	snprintf(req.in_value, sizeof(req.in_value), "%s", value != NULL ? value : "");
	refold();
}

void tb_req_inbound_tighten(const struct tb_prop_deadline *d)
{
	if (d == NULL || d->ns < 0)
		return;
	tb_req_inbound_tighten_ns(d->ns,
				  d->source == TB_PROP_SRC_ENVOY ? TB_REQ_HDR_ENVOY
								 : TB_REQ_HDR_CONFIGURED,
				  d->value);
}

void tb_req_inbound_close(void)
{
	if (!req.in_open)
		return;
	req.in_open = false;
	refold();
}

int tb_req_api_begin(long ms)
{
	int64_t now = tb_now(), top_start = now, start = now, d;
	int64_t top = api_top_at(&top_start);

	if (ms < 0) {
		errno = EINVAL;
		return -1;
	}
	if ((int64_t)ms >= TB_NEVER / TB_NS_PER_MS)
		d = TB_NEVER;
	else
		d = tb_budget_add_sat(now, (int64_t)ms * TB_NS_PER_MS);
	if (top < d) { /* nested: the enclosing level's deadline is the smaller */
		d = top;
		start = top_start;
	}
	if (req.api_depth < TB_REQ_API_DEPTH) {
		req.api[req.api_depth] = d;
		req.api_start[req.api_depth] = start;
	} else {
		req.api_overflow = d;
		req.api_overflow_start = start;
	}
	if (req.api_depth < UINT32_MAX)
		req.api_depth++;
	refold();
	return 0;
}

void tb_req_api_end(void)
{
	if (req.api_depth == 0)
		return;
	req.api_depth--;
	if (req.api_depth > TB_REQ_API_DEPTH) {
		/* Still past the stack: what the overflowed levels asked is not kept; the deepest
		 * recorded level's deadline applies (never stricter than the program asked). */
		req.api_overflow = req.api[TB_REQ_API_DEPTH - 1];
		req.api_overflow_start = req.api_start[TB_REQ_API_DEPTH - 1];
	}
	refold();
}

long tb_req_remaining_ms(void)
{
	int64_t d = tb_req_deadline_now, now;

	if (d == TB_NEVER)
		return -1;
	now = tb_now();
	return now >= d ? 0 : (long)((d - now) / TB_NS_PER_MS);
}

int64_t tb_req_bound(const struct tb_settings *set, struct tb_req_tag *tag, int64_t *start)
{
	int64_t api_start = 0, api = api_top_at(&api_start);

	if (set->scope == TB_SCOPE_REQUEST && req.in_open && req.in_deadline < api) {
		tag->source = (uint8_t)req.in_source;
		tag->header = req.in_header;
		memcpy(tag->value, req.in_value, sizeof(tag->value));
		*start = req.in_start;
		return req.in_deadline;
	}
	if (api == TB_NEVER)
		return TB_NEVER;
	memset(tag, 0, sizeof(*tag));
	tag->source = TB_REQ_SRC_API;
	*start = api_start;
	return api;
}

void tb_req_fork_child(void)
{
	memset(&req, 0, sizeof(req));
	tb_req_deadline_now = TB_NEVER;
}
