/* propagate.h - deadline propagation over HTTP/1.x: the deadline an inbound request head
 * carries, and the remaining budget written into an outbound request head. Pure byte loops. */
#ifndef TB_PROPAGATE_H
#define TB_PROPAGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The configured header's buffer size (a token of 1..63 characters). settings.h defines it
 * too, with the same value. */
#ifndef TB_PROP_HEADER_MAX
#define TB_PROP_HEADER_MAX 64
#endif

/* The header read and written when none is configured. */
#define TB_PROP_HEADER_DEFAULT "X-Deadline-Ms"
/* Envoy's header, read only (integer milliseconds). */
#define TB_PROP_ENVOY_HEADER "x-envoy-expected-rq-timeout-ms"

/* A request head is parsed (in) or scanned (out) up to this many bytes, request line
 * included; a longer head is given up: no deadline read, nothing written. */
#define TB_PROP_HEAD_MAX 16384
/* A request line's method has at most this many bytes (the framing's bound, frame_http.c);
 * a longer token is no HTTP method: the stream is not HTTP. Without the bound, a binary
 * protocol whose bytes happen to be token characters was scanned to the head's bound. */
#define TB_PROP_METHOD_MAX 32
/* A value has at most this many digits (grpc-timeout's limit): 99,999,999 ms is ~27.8 h. */
#define TB_PROP_DIGITS_MAX 8
#define TB_PROP_MS_MAX 99999999
/* A deadline read is capped here (~146 years, in ns), so that start + ns cannot overflow. */
#define TB_PROP_NS_CAP ((int64_t)1 << 62)

/* Where a deadline came from (tb_prop_deadline.source). */
#define TB_PROP_SRC_NONE   0
#define TB_PROP_SRC_HEADER 1 /* the configured header */
#define TB_PROP_SRC_ENVOY  2 /* x-envoy-expected-rq-timeout-ms */

/* tb_prop_in_feed's results. */
#define TB_PIN_IDLE         0 /* nothing yet (n == 0, or only the empty lines before a head) */
#define TB_PIN_HEAD_STARTED 1 /* this feed began a new head (the budget opens now): once */
#define TB_PIN_IN_HEAD      2 /* inside the head, more to come */
#define TB_PIN_HEAD_DONE    3 /* the head ended in this feed (once): see tb_prop_in_result */
#define TB_PIN_BODY         4 /* past the head, or a head given up: ignored until reset */
#define TB_PIN_NOT_HTTP     5 /* the first line is not an HTTP/1.x request line */

/* The deadline an inbound head carried. */
struct tb_prop_deadline {
	int64_t ns;          /* the strictest deadline found, ns from the head's start; -1: none */
	uint8_t source;      /* TB_PROP_SRC_HEADER or TB_PROP_SRC_ENVOY (NONE when ns < 0) */
	char value[24];      /* the winning value as written (for the log), NUL-terminated */
	uint8_t bad;         /* a malformed/negative/absurd/folded value was ignored */
	char bad_name[40], bad_value[24]; /* the first ignored one, truncated, for one log line;
					   * bytes outside 0x21..0x7e (and " \ =) shown as '?' */
};

/*
 * The inbound parser of one accepted socket: written only by the thread that reads it.
 * All fields are private to propagate.c.
 */
struct tb_prop_in {
	struct tb_prop_deadline res;
	int64_t pend_ns;   /* the value of the line just ended: kept unless the next line folds */
	uint32_t num;      /* the value's digits so far */
	uint16_t hbytes;   /* bytes of the head so far (or of the empty lines before it) */
	uint8_t st;        /* where in the head (propagate.c's IN_*) */
	uint8_t pos;       /* position in the header name being matched */
	uint8_t cand;      /* the names still matching: bit 0 configured, bit 1 Envoy */
	uint8_t src;       /* the line's name matched this source (0: another header) */
	uint8_t ndig;      /* digits of the value so far */
	uint8_t vst;       /* the value's own state: before, digits, unit, after, bad */
	uint8_t unit;      /* the value's unit letter (0: plain milliseconds) */
	uint8_t vlen;      /* bytes kept in val */
	uint8_t pend;      /* source of pend_ns (0: nothing pending) */
	uint8_t started;   /* the last feed began the head */
	char val[23];      /* the value as written so far, truncated */
};

/* Expect a new request head: the next byte fed starts one (after empty lines). */
void tb_prop_in_reset(struct tb_prop_in *p);

/*
 * Feeds n bytes the server consumed from the socket (never MSG_PEEK bytes), in order.
 * header_name: the configured header (NULL: TB_PROP_HEADER_DEFAULT); the same on every
 * feed. Returns TB_PIN_* (above). A feed can go from idle to done in one call: it then
 * returns TB_PIN_HEAD_DONE with tb_prop_in_started() true. A feed that began a head that
 * proves in the same feed not to be HTTP returns TB_PIN_NOT_HTTP with tb_prop_in_started()
 * true; TB_PIN_NOT_HTTP after a TB_PIN_HEAD_STARTED means the bytes that looked like the
 * start of a request were not one (the caller drops the budget it opened). A head longer
 * than TB_PROP_HEAD_MAX, or malformed (a CR not followed by LF, a NUL), is given up:
 * TB_PIN_BODY without TB_PIN_HEAD_DONE, no deadline. Never fails; no errno.
 */
int tb_prop_in_feed(struct tb_prop_in *p, const char *header_name, const void *buf, size_t n);

/* The last feed began a new head (whatever it returned). */
bool tb_prop_in_started(const struct tb_prop_in *p);

/* The head's deadline: complete once a feed returned TB_PIN_HEAD_DONE. */
const struct tb_prop_deadline *tb_prop_in_result(const struct tb_prop_in *p);

/* The caller's scratch for one plan: the inserted header line, an in-place value, and
 * what tb_prop_out_sent resumes from. */
#define TB_PROP_SCRATCH 160
/* A plan needs at most this many iovecs beyond the program's own count. */
#define TB_PROP_IOV_EXTRA 4
/* A copy of the header the program wrote itself is replaced only when its value, optional
 * whitespace included, spans at most this many bytes. */
#define TB_PROP_SPAN_MAX 32

/* The outbound request's scanner: what the bytes accepted so far make of the request. */
struct tb_prop_scan {
	uint32_t hbytes;  /* bytes of the head so far */
	uint32_t num;     /* the program's copy's digits so far */
	uint8_t st;       /* where in the request (propagate_out.c's OUT_*) */
	uint8_t pos;      /* position in a literal or in the configured name */
	uint8_t vst;      /* the program's copy's value: its state */
	uint8_t ndig;     /* ... its digits */
	uint8_t unit;     /* ... its unit letter (0: plain milliseconds) */
	uint8_t vlen;     /* ... its bytes so far, whitespace included (saturates) */
	uint8_t flags;    /* propagate_out.c's SF_* */
};

/*
 * The outbound planner of one governed socket that propagates: written only by the thread
 * that sends on it (a socket two threads write at once has no meaningful request stream).
 * All fields are private to propagate_out.c.
 */
struct tb_prop_out {
	struct tb_prop_scan m;  /* the stream as far as the kernel accepted it */
	const struct iovec *in; /* the plan's input, kept only until tb_prop_out_sent */
	const char *name;  /* the plan's header name, likewise */
	char *scratch;     /* the plan's scratch, likewise */
	size_t cover;      /* program bytes the plan covers (< n: a truncated plan) */
	uint32_t rl_end;   /* the request line ends before this program byte (or MAX) */
	uint32_t at_ins;   /* the plan's inserted bytes go before this program byte (or MAX) */
	uint32_t sub_at;   /* the plan's in-place bytes cover program bytes from here */
	uint32_t copy_at;  /* the program's copy's line begins here in this plan (or MAX) */
	int inn;           /* the plan's input's count */
	uint32_t ins_ms;   /* the inserted value */
	uint32_t ov_ms;    /* the in-place value (armed when ov_len > 0) */
	uint8_t ins_len;   /* the inserted line's length (0: none owed or planned) */
	uint8_t ins_off;   /* ... bytes of it accepted */
	uint8_t ins_plan;  /* ... bytes of it in the plan */
	uint8_t sub_len;   /* the plan's in-place bytes */
	uint8_t sub_from;  /* ... from this byte of the in-place value */
	uint8_t ov_len;    /* the in-place value's span (0: none armed) */
	uint8_t ov_fl;     /* ... its form (propagate_out.c's OV_*) */
	uint8_t pflags;    /* the plan's decisions (propagate_out.c's PF_*) */
	uint8_t rflags;    /* this request's outcome (propagate_out.c's RF_*) */
};

/* The next byte the program sends starts a request. */
void tb_prop_out_reset(struct tb_prop_out *o);

/*
 * Plans the send of the program's bytes in[0..inn) (n bytes in all). remaining_ms >= 0 is
 * the call's remaining budget (the caller checks it is > 0 first: 0 means refuse the send,
 * not plan it); above TB_PROP_MS_MAX nothing is written (the header cannot say it). Writes
 * at most `outmax` iovecs to `out`: pieces of the program's buffers, plus bytes in
 * `scratch` (>= TB_PROP_SCRATCH bytes). The caller keeps `in` (the array and its bytes) and
 * `scratch` valid and unchanged until tb_prop_out_sent, which it calls exactly once after
 * the kernel's call, with the kernel's count (0 after a failure: nothing is committed).
 * Returns the number of iovecs, or 0 when the send goes out unchanged (the caller sends the
 * program's own iovecs; tb_prop_out_sent is still called with the kernel's count). On a
 * body or a stream that is not HTTP, it returns 0 at once and sent() returns k: O(1).
 * The decisions are taken per send: the program's copy counts as whole when its line is
 * whole in this send (the kernel's partial accepts never change what goes on the wire;
 * how the program itself splits its writes can). in may be NULL when inn == 0.
 *
 * outmax: a plan needs at most inn + TB_PROP_IOV_EXTRA iovecs. When bytes are owed (the
 * rest of an inserted line, or of an in-place value, accepted only in part), they go first
 * whatever outmax is: a plan that does not fit then covers fewer of the program's bytes (a
 * short count, which the program meets after any partial write); with outmax == 1 it
 * sends only owed bytes. Otherwise a plan that does not fit sends the call unchanged: if
 * that passes the request line's end, the request carries no header (tb_prop_out_missed).
 * outmax < 1 is the caller's mistake: the send goes unchanged and the request's header is
 * given up, owed bytes included.
 * header_name: the configured header (NULL: TB_PROP_HEADER_DEFAULT), the same on every call.
 */
int tb_prop_out_plan(struct tb_prop_out *o, const char *header_name, int64_t remaining_ms,
		     const struct iovec *in, int inn, struct iovec *out, int outmax,
		     char *scratch);

/*
 * The kernel accepted k bytes of the plan (or of the unchanged send). Returns how many of
 * the program's bytes that is (<= n: the count the program is told), and records inserted
 * bytes accepted only in part: the next plan sends their rest first. It returns 0 for a
 * k > 0 that took only owed inserted bytes: the caller must not report 0 to the program
 * (a stream write of 0 reads as an error to many programs); it plans and sends again, or
 * on a non-blocking socket that would block, reports EAGAIN (nothing of the program's went).
 */
size_t tb_prop_out_sent(struct tb_prop_out *o, size_t k);

/* Inserted bytes (or in-place value bytes) are still owed: the next send must carry them
 * before anything else of the stream (a program that closes instead just loses them). */
bool tb_prop_out_pending(const struct tb_prop_out *o);

/* What the stream's current request has shown so far: 1 its request line ended (HTTP),
 * -1 it was given up before that (not HTTP, or a request line past TB_PROP_HEAD_MAX), 0
 * neither yet. */
int tb_prop_out_verdict(const struct tb_prop_out *o);

/* This request carries the header: inserted, or the program's own copy kept or lowered. */
bool tb_prop_out_carried(const struct tb_prop_out *o);

/* This request's header could not be written (a plan did not fit in outmax iovecs): for
 * one log line. Both stay until tb_prop_out_reset. */
bool tb_prop_out_missed(const struct tb_prop_out *o);

#endif
