/* request.c - the thread's request budget: the inbound request's deadline (scope=request,
 * propagated headers) and the API's nesting stack, folded into one TLS deadline. */
#include "request.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "budget.h"
#include "clock.h"
#include "log.h"
#include "propagate.h"
#include "stats.h"

/*
 * The API's levels: a small fixed stack (no allocation on any path). A level holds the
 * deadline in force inside it: min(its own, the enclosing level's). Begins past
 * TB_REQ_API_DEPTH are counted (so every end still matches its begin) and tighten the
 * deadline; ending one of them restores the deepest recorded level's deadline, which may be
 * looser than an intermediate overflowed level asked: never stricter than the program asked.
 */
#define TB_REQ_API_DEPTH 16

/* One thread's state, written and read only by that thread (whose it is: `taken`). */
struct tb_req_state {
	struct tb_req_head head;      /* first: tb_req_deadline() reads it */
	bool in_open;
	uint8_t in_source;            /* enum tb_req_source: _SCOPE or _HEADER */
	uint8_t in_header;            /* enum tb_req_header of a _HEADER source */
	char in_value[sizeof(((struct tb_req_tag *)0)->value)];
	int64_t in_start;
	int64_t in_deadline;          /* TB_NEVER: the inbound request has none */
	unsigned api_depth;           /* begins not yet ended, overflow included */
	int64_t api[TB_REQ_API_DEPTH];
	int64_t api_start[TB_REQ_API_DEPTH]; /* when the begin whose deadline it is began */
	int64_t api_overflow;         /* the deadline of the innermost level past the stack */
	int64_t api_overflow_start;
	uint64_t in_conn;             /* the inbound connection whose head opened it (prop_io.c) */
	int in_fd;                    /* ... and the fd it was read through */
};

/*
 * The states, in a static pool claimed by compare-and-swap at a thread's first use and given
 * back by the thread-specific key's destructor when the thread exits: no allocation, so a
 * hook (an inbound read) may claim one. A thread that finds the pool full has no request
 * budget (its calls keep their own deadlines only), said once.
 */
#define TB_REQ_SLOTS 4096
static struct tb_req_state pool[TB_REQ_SLOTS];
/* Slot i belongs to a live thread. Kept apart from the slots (4 KB, not 1.4 MB): a fork
 * child frees every slot but its own, and reading one flag in each slot's page there faulted
 * in 344 pages, 0.4 ms added to every fork of every process (tests/regress/fork_page_faults.c). */
static atomic_bool taken[TB_REQ_SLOTS];
static atomic_uint next_hint;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_ok;
static atomic_bool told_full;

__thread struct tb_req_state *tb_req_cur __attribute__((tls_model("initial-exec")));

static void give_back(void *p)
{
	struct tb_req_state *st = p;

	if (tb_req_cur == st)
		tb_req_cur = NULL;
	atomic_store_explicit(&taken[st - pool], false, memory_order_release);
}

static void make_key(void)
{
	key_ok = pthread_key_create(&key, give_back) == 0;
}

/* The calling thread's state, claimed on first use; NULL when none can be had. */
static struct tb_req_state *claim(void)
{
	unsigned h;

	if (tb_req_cur != NULL)
		return tb_req_cur;
	pthread_once(&key_once, make_key);
	if (!key_ok)
		return NULL;
	h = atomic_fetch_add_explicit(&next_hint, 1, memory_order_relaxed);
	for (unsigned i = 0; i < TB_REQ_SLOTS; i++) {
		unsigned k = (h + i) % TB_REQ_SLOTS;
		struct tb_req_state *st = &pool[k];
		bool no = false;

		if (atomic_load_explicit(&taken[k], memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&taken[k], &no, true))
			continue;
		if (pthread_setspecific(key, st) != 0) {
			atomic_store(&taken[k], false);
			return NULL;
		}
		memset((char *)st + offsetof(struct tb_req_state, in_open), 0,
		       sizeof(*st) - offsetof(struct tb_req_state, in_open));
		st->head.deadline = TB_NEVER;
		st->in_deadline = TB_NEVER;
		tb_req_cur = st;
		return st;
	}
	if (!atomic_exchange(&told_full, true))
		tb_log_error("event=error what=request_budget error=\"more threads than request "
			     "budgets (4096): a thread past them keeps its calls' own deadlines\"");
	return NULL;
}

#define req (*tb_req_cur)

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
	req.head.deadline = d;
}

void tb_req_inbound_open(int64_t now, int64_t len_ns)
{
	if (claim() == NULL)
		return;
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
	size_t n;

	if (tb_req_cur == NULL || !req.in_open || ns < 0)
		return;
	if (ns == 0)
		tb_stats_arrived_spent();
	d = tb_budget_add_sat(req.in_start, ns);
	if (d >= req.in_deadline)
		return;
	req.in_deadline = d;
	req.in_source = TB_REQ_SRC_HEADER;
	req.in_header = (uint8_t)header;
	/* Cut to the tag's size (a value is at most 8 digits and a unit when well formed). */
	n = value != NULL ? strnlen(value, sizeof(req.in_value) - 1) : 0;
	if (n > 0)
		memcpy(req.in_value, value, n);
	req.in_value[n] = '\0';
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

uint64_t tb_req_inbound_conn(int *fd)
{
	if (tb_req_cur == NULL)
		return 0;
	if (fd != NULL)
		*fd = req.in_fd;
	return req.in_conn;
}

void tb_req_inbound_set_conn(uint64_t conn, int fd)
{
	if (tb_req_cur == NULL)
		return;
	req.in_conn = conn;
	req.in_fd = fd;
}

void tb_req_inbound_close(void)
{
	if (tb_req_cur == NULL || !req.in_open)
		return;
	req.in_open = false;
	refold();
}

int tb_req_api_begin(long ms)
{
	int64_t now = tb_now(), top_start = now, start = now, d, top;

	if (ms < 0) {
		errno = EINVAL;
		return -1;
	}
	if (claim() == NULL)
		return 0; /* no state to keep it in (said once): as without the library */
	top = api_top_at(&top_start);
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
	if (tb_req_cur == NULL || req.api_depth == 0)
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
	int64_t d = tb_req_deadline(), now;

	if (d == TB_NEVER)
		return -1;
	now = tb_now();
	return now >= d ? 0 : (long)((d - now) / TB_NS_PER_MS);
}

int64_t tb_req_bound(const struct tb_settings *set, struct tb_req_tag *tag, int64_t *start)
{
	int64_t api_start = 0, api;

	if (tb_req_cur == NULL)
		return TB_NEVER;
	api = api_top_at(&api_start);

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

/* The forking thread keeps its slot, emptied; every other thread is gone in the child. */
void tb_req_fork_child(void)
{
	for (unsigned i = 0; i < TB_REQ_SLOTS; i++)
		if (&pool[i] != tb_req_cur && /* a load first: an untouched page stays shared */
		    atomic_load_explicit(&taken[i], memory_order_relaxed))
			atomic_store_explicit(&taken[i], false, memory_order_relaxed);
	if (tb_req_cur != NULL) {
		memset((char *)tb_req_cur + offsetof(struct tb_req_state, in_open), 0,
		       sizeof(*tb_req_cur) - offsetof(struct tb_req_state, in_open));
		tb_req_cur->head.deadline = TB_NEVER;
		tb_req_cur->in_deadline = TB_NEVER;
	}
}
