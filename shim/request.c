/* request.c - the thread's request budget: the inbound request's deadline (scope=request,
 * propagated headers) and the API's nesting stack, folded into one TLS deadline. */
#include "request.h"

#include <errno.h>
#include <string.h>

#include "budget.h"
#include "clock.h"

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
	char in_header[TB_PROP_HEADER_MAX];
	char in_value[24];
	unsigned api_depth;           /* begins not yet ended, overflow included */
	int64_t api[TB_REQ_API_DEPTH];
	int64_t api_overflow;         /* the tightest of the levels past the stack */
};

static __thread struct tb_req_state req __attribute__((tls_model("initial-exec")));

/* The innermost API level's deadline, TB_NEVER without one. */
static int64_t api_top(void)
{
	if (req.api_depth == 0)
		return TB_NEVER;
	if (req.api_depth > TB_REQ_API_DEPTH)
		return req.api_overflow;
	return req.api[req.api_depth - 1];
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
	req.in_header[0] = '\0';
	req.in_value[0] = '\0';
	refold();
}

void tb_req_inbound_tighten(const struct tb_prop_deadline *d)
{
	(void)d; /* wired once policy/propagate.h is in */
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
	int64_t top = api_top(), d;

	if (ms < 0) {
		errno = EINVAL;
		return -1;
	}
	if ((int64_t)ms >= TB_NEVER / TB_NS_PER_MS)
		d = TB_NEVER;
	else
		d = tb_budget_add_sat(tb_now(), (int64_t)ms * TB_NS_PER_MS);
	if (top < d)
		d = top;
	if (req.api_depth < TB_REQ_API_DEPTH)
		req.api[req.api_depth] = d;
	else
		req.api_overflow = d;
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
	if (req.api_depth > TB_REQ_API_DEPTH)
		req.api_overflow = req.api[TB_REQ_API_DEPTH - 1];
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

enum tb_req_source tb_req_describe(char *buf, size_t n)
{
	(void)buf;
	(void)n;
	return TB_REQ_SRC_NONE;
}

void tb_req_fork_child(void)
{
	memset(&req, 0, sizeof(req));
	tb_req_deadline_now = TB_NEVER;
}
