/* request.h - the calling thread's request budget: an inbound request's (scope=request) and
 * the API's nested deadlines (timebox_deadline_begin), which every outbound call draws on. */
#ifndef TB_REQUEST_H
#define TB_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reqtag.h"
#include "settings.h"

struct tb_prop_deadline; /* policy/propagate.h */

/*
 * The thread's request state (request.c): NULL until the thread first uses a request budget
 * (a begin, an inbound head), so the hot path of every other thread costs one initial-exec
 * TLS load and a predictable branch. Only a pointer lives in TLS: the library's static TLS
 * block must stay within what a dlopen of it can still get (regress/dlopen_library).
 */
struct tb_req_state;
extern __thread struct tb_req_state *tb_req_cur
	__attribute__((tls_model("initial-exec"), visibility("hidden")));
/* Its first member: the effective deadline, min(inbound, innermost API level). */
struct tb_req_head {
	int64_t deadline;
};

/* The calling thread's request deadline (absolute, monotonic ns), TB_NEVER when none. */
static inline int64_t tb_req_deadline(void)
{
	const struct tb_req_head *h = (const struct tb_req_head *)(const void *)tb_req_cur;

	return __builtin_expect(h == NULL, 1) ? TB_NEVER : h->deadline;
}

/* The inbound connection (prop_io.c's id) whose head opened the thread's request, 0 when
 * none, with the fd it was read through in *fd (when fd is not NULL). Kept in the thread's
 * request state, not in TLS of its own (see tb_req_cur). Set after tb_req_inbound_open;
 * a thread without a request state (the pool full) keeps none. */
uint64_t tb_req_inbound_conn(int *fd);
void tb_req_inbound_set_conn(uint64_t conn, int fd);

/* scope=request: a new inbound request head began at `now`; len_ns = the settings'
 * deadline (0: none). Replaces any inbound request the thread had (not nested). */
void tb_req_inbound_open(int64_t now, int64_t len_ns);

/* Its head carried a deadline: tighten to start + d->ns (never extends). d->ns < 0: no-op. */
void tb_req_inbound_tighten(const struct tb_prop_deadline *d);

/* The thread began writing the response: the inbound request's budget closes (the API's
 * deadlines, if any, stay). */
void tb_req_inbound_close(void);

/*
 * The API (include/timebox.h). begin: a deadline of `ms` from now nests inside whatever the
 * thread has (the smaller wins); returns 0, or -1 with errno EINVAL for ms < 0. end: the
 * innermost begin ends, the enclosing deadline is restored (no-op without a begin).
 * remaining: ms left of the thread's request deadline, rounded down, 0 when spent, -1 none.
 */
int tb_req_api_begin(long ms);
void tb_req_api_end(void);
long tb_req_remaining_ms(void);

/* The inbound head's deadline: ns from the head's start (< 0: none), which header carried
 * it and its value as written. tb_req_inbound_tighten's body, without propagate.h. */
void tb_req_inbound_tighten_ns(int64_t ns, enum tb_req_header header, const char *value);

/*
 * The request deadline that bounds a call governed by `set`, its tag, and when that budget
 * began (*start: the inbound head's start, or the begin whose deadline it is): the thread's
 * (inbound and API) when set->scope is request, the API's alone otherwise (a rule's
 * `scope = "call"` opts its destinations out of the inbound request's budget). TB_NEVER
 * when none applies (*tag and *start are then left alone).
 * @unittest test_request.c
 */
int64_t tb_req_bound(const struct tb_settings *set, struct tb_req_tag *tag, int64_t *start);


/* In a forked child: the parent's request (another process's thread) does not carry over. */
void tb_req_fork_child(void);

#endif
