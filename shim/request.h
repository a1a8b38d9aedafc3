/* request.h - the calling thread's request budget: an inbound request's (scope=request) and
 * the API's nested deadlines (timebox_deadline_begin), which every outbound call draws on. */
#ifndef TB_REQUEST_H
#define TB_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "settings.h"

struct tb_prop_deadline; /* policy/propagate.h */

/* Where a thread's request deadline came from (the log's `budget=` note). */
enum tb_req_source {
	TB_REQ_SRC_NONE,   /* no request deadline */
	TB_REQ_SRC_SCOPE,  /* scope=request: the settings' deadline from the head's start */
	TB_REQ_SRC_HEADER, /* an inbound header tightened it (propagate) */
	TB_REQ_SRC_API,    /* timebox_deadline_begin */
};

/*
 * The thread's request deadline, read inline on the hot path: TB_NEVER when none is open
 * (the common case costs one initial-exec TLS load and a predictable branch). It is the
 * smaller of the inbound request's and the innermost API deadline (request.c keeps it).
 */
extern __thread int64_t tb_req_deadline_now
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The calling thread's request deadline (absolute, monotonic ns), TB_NEVER when none. */
static inline int64_t tb_req_deadline(void)
{
	return tb_req_deadline_now;
}

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

/*
 * For the log line of a call cut or refused by the request deadline: where it came from.
 * Writes at most `n` bytes of notes (`budget=api`, `budget=request`, or `budget=header
 * header=X-Deadline-Ms value=1000`) to `buf`, NUL-terminated; returns the source.
 */
enum tb_req_source tb_req_describe(char *buf, size_t n);

/*
 * Clamps a step's deadline to the thread's request deadline. Returns true when the
 * request deadline is already spent at `now` (the step must fail at once, nothing sent).
 * *deadline is lowered to the request's when that is smaller; *by_request tells that the
 * request's deadline is the one that now applies.
 */
static inline bool tb_req_clamp(int64_t now, int64_t *deadline, bool *by_request)
{
	int64_t r = tb_req_deadline_now;

	*by_request = false;
	if (__builtin_expect(r == TB_NEVER, 1))
		return false;
	if (r <= *deadline) {
		*deadline = r;
		*by_request = true;
	}
	return now >= r;
}

/* In a forked child: the parent's request (another process's thread) does not carry over. */
void tb_req_fork_child(void);

#endif
