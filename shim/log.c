/* log.c - formatting log lines (logfmt or JSON), the rate limit, and counting the lines
 * that were not written. Hand-rolled formatting (no snprintf): the watchdog and signal
 * handlers may log. */
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log_sink.h"
#include "ratelimit.h"
#include "reqtag.h"
#include "thread.h"

#define LINE_MAX_LEN 768

struct line {
	char buf[LINE_MAX_LEN];
	size_t n;
	bool json;
};

static atomic_int log_target = TB_LOG_STDERR;
static atomic_int log_format = TB_LOG_FORMAT_LOGFMT;

/* Lines not written, not yet reported: those the sink could not take (full, gone, not
 * stderr any more) and those over the rate limit. One count, one kind of report. */
static atomic_ulong dropped;

/* Lines per second of events about sockets (timeouts, rejects, errors). Zero-initialised it
 * lets everything through until tb_log_open sets the configured rate. */
static struct tb_ratelimit limiter;

static void put(struct line *l, const char *s)
{
	while (*s && l->n < sizeof(l->buf) - 1)
		l->buf[l->n++] = *s++;
}

static void put_i64(struct line *l, int64_t v)
{
	char tmp[24];
	int k = 0;
	uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;

	if (v < 0)
		put(l, "-");
	do {
		tmp[k++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (k && l->n < sizeof(l->buf) - 1)
		l->buf[l->n++] = tmp[--k];
}

/* A JSON string: " and \ escaped, control bytes as \u00XX, the rest as it is. */
static void put_json_string(struct line *l, const char *v)
{
	static const char hex[] = "0123456789abcdef";

	put(l, "\"");
	for (; *v && l->n < sizeof(l->buf) - 8; v++) {
		unsigned char c = (unsigned char)*v;

		if (c == '"' || c == '\\') {
			l->buf[l->n++] = '\\';
			l->buf[l->n++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			put(l, "\\u00");
			l->buf[l->n++] = hex[c >> 4];
			l->buf[l->n++] = hex[c & 15];
		} else {
			l->buf[l->n++] = (char)c;
		}
	}
	put(l, "\"");
}

static void put_quoted(struct line *l, const char *v)
{
	if (l->json) {
		put_json_string(l, v);
		return;
	}
	put(l, "\"");
	for (; *v && l->n < sizeof(l->buf) - 3; v++) {
		unsigned char c = (unsigned char)*v;

		if (c == '"' || c == '\\')
			l->buf[l->n++] = '\\';
		l->buf[l->n++] = c < 0x20 ? '?' : (char)c;
	}
	put(l, "\"");
}

/* A logfmt value: quoted when it holds a blank, a quote or '=', with " and \ escaped. */
static void put_value(struct line *l, const char *v)
{
	if (l->json)
		put_json_string(l, v);
	else if (*v != '\0' && strpbrk(v, " \t=\"\\") == NULL)
		put(l, v);
	else
		put_quoted(l, v);
}

/* " key=" (logfmt) or ,"key": (JSON): every field after the event goes through here. */
static void key(struct line *l, const char *k)
{
	if (l->json) {
		put(l, ",\"");
		put(l, k);
		put(l, "\":");
	} else {
		put(l, " ");
		put(l, k);
		put(l, "=");
	}
}

static void kv_int(struct line *l, const char *k, int64_t v)
{
	key(l, k);
	put_i64(l, v);
}

static void kv_str(struct line *l, const char *k, const char *v)
{
	key(l, k);
	put_value(l, v);
}

/* A value always quoted (a file name, a value as the user wrote it). */
static void kv_quoted(struct line *l, const char *k, const char *v)
{
	key(l, k);
	put_quoted(l, v);
}

static void put_ids(struct line *l, int tid)
{
	kv_int(l, "pid", tb_pid());
	kv_int(l, "tid", tid > 0 ? tid : tb_tid());
}

static void start_format(struct line *l, const char *event, bool json)
{
	l->n = 0;
	l->json = json;
	if (json) {
		put(l, "{\"src\":\"timebox\",\"event\":");
		put_json_string(l, event);
	} else {
		put(l, "timebox: event=");
		put(l, event);
	}
}

static void start(struct line *l, const char *event)
{
	start_format(l, event,
		     atomic_load_explicit(&log_format, memory_order_relaxed) == TB_LOG_FORMAT_JSON);
}

/* The closing brace of a JSON line (room for it and the newline is kept by put's bound). */
static void finish(struct line *l)
{
	if (l->n > sizeof(l->buf) - 3)
		l->n = sizeof(l->buf) - 3;
	if (l->json)
		l->buf[l->n++] = '}';
	l->buf[l->n++] = '\n';
}

static void suppressed_line(struct line *s, unsigned long lost)
{
	start(s, "suppressed");
	kv_int(s, "count", (int64_t)lost);
	put_ids(s, 0);
	finish(s);
}

/* Writes l to target, after the count of lines not written so far when there is one: the
 * reader learns that something is missing, and how much. */
static void deliver(struct line *l, int target)
{
	struct line s;
	unsigned long lost;

	finish(l);
	lost = atomic_exchange_explicit(&dropped, 0, memory_order_relaxed);
	if (lost > 0) {
		suppressed_line(&s, lost);
		if (!tb_sink_write(target, s.buf, s.n)) {
			atomic_fetch_add_explicit(&dropped, lost + 1, memory_order_relaxed);
			return;
		}
	}
	if (!tb_sink_write(target, l->buf, l->n))
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

static void (*lent_held_back)(void);

void tb_log_lend(void (*held_back)(void))
{
	lent_held_back = held_back;
}

/*
 * Whether a line about an event of the program's traffic goes out: the log is on and the
 * rate limit lets it through; a line held back is counted, for the report of how many
 * were. Asked before the line is formatted: in a storm of cuts most lines are held back,
 * and formatting each (a getpid system call among the rest, then) took the watchdog's time
 * between two cuts. errno is kept.
 */
static bool admit(void)
{
	int saved = errno;
	bool ok = true;

	if (atomic_load_explicit(&log_target, memory_order_relaxed) == TB_LOG_OFF) {
		ok = false;
	} else if (!tb_rl_allow(&limiter, tb_now())) {
		tb_rl_take_suppressed(&limiter); /* counted in `dropped` instead */
		/* The first line held back since the last report: the stats thread reports the
		 * count a second later if no line goes out before (one futex wake per report). */
		if (atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed) == 0)
			if (lent_held_back != NULL)
				lent_held_back();
		ok = false;
	}
	errno = saved;
	return ok;
}

/* Writes a line that admit() let through. */
static void emit(struct line *l)
{
	int saved = errno;
	int target = atomic_load_explicit(&log_target, memory_order_relaxed);

	if (target != TB_LOG_OFF)
		deliver(l, target);
	errno = saved;
}

/* A line once per process (the exit summary): never rate limited. */
static void emit_unlimited(struct line *l)
{
	int saved = errno;
	int target = atomic_load_explicit(&log_target, memory_order_relaxed);

	if (target != TB_LOG_OFF)
		deliver(l, target);
	errno = saved;
}

bool tb_log_suppressing(void)
{
	return atomic_load_explicit(&dropped, memory_order_relaxed) > 0;
}

void tb_log_flush_suppressed(void)
{
	int saved = errno;
	int target = atomic_load_explicit(&log_target, memory_order_relaxed);
	unsigned long lost = atomic_exchange_explicit(&dropped, 0, memory_order_relaxed);
	struct line s;

	if (lost > 0 && target != TB_LOG_OFF) {
		suppressed_line(&s, lost);
		if (!tb_sink_write(target, s.buf, s.n))
			atomic_fetch_add_explicit(&dropped, lost, memory_order_relaxed);
	}
	errno = saved;
}

/* "event=E phase=P dest=D fd=F": the head of every line about one socket. */
static void start_socket_event(struct line *l, const char *event, enum tb_phase phase,
			       const struct tb_dest *d, int fd)
{
	char dest[TB_DEST_STRLEN];

	start(l, event);
	kv_str(l, "phase", tb_phase_name(phase));
	kv_str(l, "dest", tb_dest_format(d, dest, sizeof(dest)));
	kv_int(l, "fd", fd);
}

static void kv_ms(struct line *l, const char *k, int64_t ns)
{
	kv_int(l, k, ns / TB_NS_PER_MS);
}

static void at_exit_flush(void)
{
	tb_log_flush_suppressed();
}

/* The inbound requests' header (the defaults' deadline_header), for budget=header notes:
 * copied once at start-up, before any thread runs. */
static char deadline_header[TB_PROP_HEADER_MAX] = TB_PROP_HEADER_DEFAULT;

void tb_log_open(const struct tb_settings *s)
{
	const char *why = NULL;
	int target = tb_sink_open(s, &why);

	memcpy(deadline_header, s->deadline_header, sizeof(deadline_header));
	deadline_header[sizeof(deadline_header) - 1] = '\0';

	atomic_store(&log_format, (int)s->log_format);
	tb_rl_init(&limiter, s->log_rate);
	atomic_store(&log_target, target);
	if (s->log_rate > 0)
		atexit(at_exit_flush);
	if (why != NULL)
		tb_log_config_error("TIMEBOX_LOG",
				    s->log_target == TB_LOG_SYSLOG ? "syslog" : s->log_path, why,
				    "logging to stderr");
}

void tb_log_fd_moved(int from, int to)
{
	tb_sink_fd_moved(from, to);
}

void tb_log_stderr_replaced(void)
{
	tb_sink_stderr_replaced();
}

void tb_log_fork_child(void)
{
	tb_sink_fork_child();
}

void tb_log_timeout(enum tb_phase phase, const struct tb_dest *d, int fd, int64_t elapsed_ns,
		    int64_t limit_ns, int tid)
{
	tb_log_timeout_with(phase, d, fd, elapsed_ns, limit_ns, tid, NULL);
}

void tb_log_timeout_with(enum tb_phase phase, const struct tb_dest *d, int fd,
			 int64_t elapsed_ns, int64_t limit_ns, int tid,
			 const struct tb_log_timers *known)
{
	tb_log_timeout_budget(phase, d, fd, elapsed_ns, limit_ns, tid, known, NULL);
}

/* The notes of a request budget (request.h): where the deadline that cut the call came
 * from. The value is the peer's, validated by the header parser (digits and a unit) and
 * cut to the tag's size; put_value quotes anything else. */
static void put_budget(struct line *l, const struct tb_req_tag *tag)
{
	char value[sizeof(tag->value) + 1];

	switch (tag->source) {
	case TB_REQ_SRC_API:
		kv_str(l, "budget", "api");
		return;
	case TB_REQ_SRC_SCOPE:
		kv_str(l, "budget", "request");
		return;
	case TB_REQ_SRC_HEADER:
		memcpy(value, tag->value, sizeof(tag->value));
		value[sizeof(tag->value)] = '\0';
		kv_str(l, "budget", "header");
		kv_str(l, "header", tag->header == TB_REQ_HDR_ENVOY ? "x-envoy-expected-rq-timeout-ms"
								    : deadline_header);
		kv_str(l, "value", value[0] != '\0' ? value : "?");
		return;
	default:
		return;
	}
}

void tb_log_timeout_budget(enum tb_phase phase, const struct tb_dest *d, int fd,
			   int64_t elapsed_ns, int64_t limit_ns, int tid,
			   const struct tb_log_timers *known, const struct tb_req_tag *tag)
{
	struct line l;
	struct tb_log_timers t;

	if (!admit())
		return;

	/* Timers of the socket's call when this thread just cut it; otherwise (a gate wait, a
	 * deadline before the connect) what the elapsed time alone tells. */
	if (known != NULL) {
		t = *known;
	} else {
		t.gate_ms = phase == TB_PHASE_GATE ? elapsed_ns / TB_NS_PER_MS : -1;
		t.connect_ms = t.first_byte_ms = t.budget_ms = -1;
		t.total_ms = elapsed_ns / TB_NS_PER_MS;
		t.host[0] = '\0';
	}
	start_socket_event(&l, "timeout", phase, d, fd);
	kv_ms(&l, "elapsed_ms", elapsed_ns);
	kv_ms(&l, "limit_ms", limit_ns);
	if (t.host[0] != '\0')
		kv_str(&l, "host", t.host);
	kv_int(&l, "gate_ms", t.gate_ms);
	kv_int(&l, "connect_ms", t.connect_ms);
	kv_int(&l, "first_byte_ms", t.first_byte_ms);
	kv_int(&l, "total_ms", t.total_ms);
	kv_int(&l, "budget_ms", t.budget_ms);
	if (tag != NULL)
		put_budget(&l, tag);
	put_ids(&l, tid);
	emit(&l);
}

/* The name is the program's: a control byte in it must not break the line (or start one). */
void tb_log_dns_timeout(const char *name, int64_t elapsed_ns, int64_t limit_ns)
{
	struct line l;
	char shown[256];
	size_t i = 0;

	if (!admit())
		return;

	for (; name != NULL && name[i] != '\0' && i < sizeof(shown) - 1; i++)
		shown[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
	shown[i] = '\0';
	start(&l, "timeout");
	kv_str(&l, "phase", "dns");
	kv_str(&l, "name", shown);
	kv_ms(&l, "elapsed_ms", elapsed_ns);
	kv_ms(&l, "limit_ms", limit_ns);
	put_ids(&l, 0);
	emit(&l);
}

void tb_log_reject(enum tb_phase phase, const struct tb_dest *d, int fd, const char *reason)
{
	struct line l;

	if (!admit())
		return;

	start_socket_event(&l, "reject", phase, d, fd);
	kv_str(&l, "reason", reason);
	put_ids(&l, 0);
	emit(&l);
}

void tb_log_gate(const struct tb_dest *d, long leased, long pending, long max,
		 unsigned long acquired, unsigned long timed_out, unsigned long rejected)
{
	struct line l;
	char dest[TB_DEST_STRLEN];

	start(&l, "gate");
	kv_str(&l, "dest", tb_dest_format(d, dest, sizeof(dest)));
	kv_int(&l, "leased", leased);
	kv_int(&l, "pending", pending);
	kv_int(&l, "max", max);
	kv_int(&l, "acquired", (int64_t)acquired);
	kv_int(&l, "timed_out", (int64_t)timed_out);
	kv_int(&l, "rejected", (int64_t)rejected);
	put_ids(&l, 0);
	emit_unlimited(&l);
}

/* Configuration errors go to stderr whatever the target: they are about the target. */
static void emit_stderr(struct line *l)
{
	int saved = errno;

	deliver(l, TB_LOG_STDERR);
	errno = saved;
}

void tb_log_config_error(const char *name, const char *value, const char *why,
			 const char *effect)
{
	struct line l;

	start(&l, "config_error");
	kv_str(&l, "name", name);
	kv_quoted(&l, "value", value);
	kv_str(&l, "error", why);
	kv_str(&l, "effect", effect);
	emit_stderr(&l);
}

void tb_log_config_file_error(const char *file, int line, const char *key_name,
			      const char *value, const char *why, const char *effect)
{
	struct line l;

	start(&l, "config_error");
	kv_quoted(&l, "file", file);
	if (line > 0)
		kv_int(&l, "line", line);
	if (key_name != NULL) {
		kv_str(&l, "name", key_name);
		kv_quoted(&l, "value", value != NULL ? value : "");
	}
	kv_quoted(&l, "error", why);
	kv_quoted(&l, "effect", effect);
	put_ids(&l, 0);
	emit_stderr(&l);
}

void tb_log_config_more(const char *file, int count)
{
	struct line l;
	char why[48];
	struct line n;

	n.n = 0;
	n.json = false;
	put_i64(&n, count);
	put(&n, " more problems");
	n.buf[n.n] = '\0';
	memcpy(why, n.buf, n.n + 1 < sizeof(why) ? n.n + 1 : sizeof(why));
	why[sizeof(why) - 1] = '\0';
	start(&l, "config_error");
	kv_quoted(&l, "file", file);
	kv_quoted(&l, "error", why);
	put_ids(&l, 0);
	emit_stderr(&l);
}

/*
 * A logfmt body ("event=error what=x error=\"...\"") re-read into the line's format:
 * key=value pairs, a value bare or in double quotes with \" and \\ escapes. A body that does
 * not parse goes out whole as the value of `message`.
 */
static bool put_body(struct line *l, const char *body)
{
	const char *p = body;
	char k[32], v[256];
	bool first = true;

	while (*p) {
		size_t nk = 0, nv = 0;

		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		while (*p && *p != '=' && *p != ' ' && nk < sizeof(k) - 1)
			k[nk++] = *p++;
		k[nk] = '\0';
		if (*p++ != '=' || nk == 0)
			return false;
		if (*p == '"') {
			for (p++; *p && *p != '"' && nv < sizeof(v) - 1; p++) {
				if (*p == '\\' && p[1] != '\0')
					p++;
				v[nv++] = *p;
			}
			if (*p++ != '"')
				return false;
		} else {
			while (*p && *p != ' ' && nv < sizeof(v) - 1)
				v[nv++] = *p++;
		}
		v[nv] = '\0';
		if (first && strcmp(k, "event") == 0)
			start_format(l, v, l->json);
		else
			kv_str(l, k, v);
		first = false;
	}
	return !first;
}

void tb_log_error(const char *body)
{
	struct line l;

	if (!admit())
		return;

	if (atomic_load_explicit(&log_format, memory_order_relaxed) == TB_LOG_FORMAT_JSON) {
		start_format(&l, "error", true);
		if (!put_body(&l, body)) {
			start_format(&l, "error", true);
			kv_str(&l, "message", body);
		}
	} else {
		l.n = 0;
		l.json = false;
		put(&l, "timebox: ");
		put(&l, body);
	}
	put_ids(&l, 0);
	emit(&l);
}

void tb_log_breaker(const struct tb_dest *d, const char *state, const char *reason,
		    const char *last, uint64_t failures, uint64_t calls, int64_t for_ns)
{
	struct line l;
	char dest[TB_DEST_STRLEN];

	start(&l, "breaker");
	kv_str(&l, "dest", tb_dest_format(d, dest, sizeof(dest)));
	kv_str(&l, "state", state);
	kv_str(&l, "reason", reason);
	if (last != NULL)
		kv_str(&l, "last", last);
	kv_int(&l, "failures", (int64_t)failures);
	kv_int(&l, "calls", (int64_t)calls);
	if (for_ns >= 0)
		kv_ms(&l, "for_ms", for_ns);
	put_ids(&l, 0);
	emit_unlimited(&l); /* a change of state is rare and must never be lost to the limit */
}

void tb_log_refused(const struct tb_dest *d, int fd, const char *reason, uint64_t count,
		    int64_t left_ns)
{
	struct line l;

	if (!admit())
		return;

	start_socket_event(&l, "reject", TB_PHASE_CONNECT, d, fd);
	kv_str(&l, "reason", reason);
	kv_int(&l, "refused", (int64_t)count);
	if (left_ns >= 0)
		kv_ms(&l, "open_ms_left", left_ns);
	put_ids(&l, 0);
	emit(&l);
}

void tb_log_adaptive(const struct tb_dest *d, int limit, int64_t min_rtt_ns, int64_t rtt_ns)
{
	struct line l;
	char dest[TB_DEST_STRLEN];

	if (!admit())
		return;

	start(&l, "gate_size");
	kv_str(&l, "dest", tb_dest_format(d, dest, sizeof(dest)));
	kv_int(&l, "max", limit);
	kv_int(&l, "min_rtt_us", min_rtt_ns / 1000);
	kv_int(&l, "rtt_us", rtt_ns / 1000);
	put_ids(&l, 0);
	emit(&l);
}
