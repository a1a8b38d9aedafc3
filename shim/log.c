/* log.c - formatting log lines, and counting those the sink had to drop.
 * Hand-rolled formatting (no snprintf): the watchdog and signal handlers may log. */
#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "log_sink.h"
#include "thread.h"

#define LINE_MAX_LEN 512

struct line {
	char buf[LINE_MAX_LEN];
	size_t n;
};

static atomic_int log_target = TB_LOG_STDERR;

/* Lines the sink could not take (full, gone, not stderr any more), not yet reported. */
static atomic_ulong dropped;

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

static void put_quoted(struct line *l, const char *v)
{
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
	if (*v != '\0' && strpbrk(v, " \t=\"\\") == NULL)
		put(l, v);
	else
		put_quoted(l, v);
}

static void put_ids(struct line *l, int tid)
{
	put(l, " pid=");
	put_i64(l, getpid());
	put(l, " tid=");
	put_i64(l, tid > 0 ? tid : tb_tid());
}

/* Writes l (its newline added here) to target, after the count of lines dropped so far
 * when there is one: the reader learns that something is missing, and how much. */
static void deliver(struct line *l, int target)
{
	struct line s;
	unsigned long lost;

	l->buf[l->n++] = '\n';
	lost = atomic_exchange_explicit(&dropped, 0, memory_order_relaxed);
	if (lost > 0) {
		s.n = 0;
		put(&s, "timebox: event=suppressed count=");
		put_i64(&s, (int64_t)lost);
		put_ids(&s, 0);
		s.buf[s.n++] = '\n';
		if (!tb_sink_write(target, s.buf, s.n)) {
			atomic_fetch_add_explicit(&dropped, lost + 1, memory_order_relaxed);
			return;
		}
	}
	if (!tb_sink_write(target, l->buf, l->n))
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

static void emit(struct line *l)
{
	int saved = errno;
	int target = atomic_load_explicit(&log_target, memory_order_relaxed);

	if (target != TB_LOG_OFF)
		deliver(l, target);
	errno = saved;
}

static void start(struct line *l, const char *event)
{
	l->n = 0;
	put(l, "timebox: event=");
	put(l, event);
}

/* "timebox: event=E phase=P dest=D fd=F": the head of every line about one socket. */
static void start_socket_event(struct line *l, const char *event, enum tb_phase phase,
			       const struct tb_dest *d, int fd)
{
	char dest[TB_DEST_STRLEN];

	start(l, event);
	put(l, " phase=");
	put(l, tb_phase_name(phase));
	put(l, " dest=");
	put(l, tb_dest_format(d, dest, sizeof(dest)));
	put(l, " fd=");
	put_i64(l, fd);
}

static void put_ms(struct line *l, const char *key, int64_t ns)
{
	put(l, key);
	put_i64(l, ns / TB_NS_PER_MS);
}

void tb_log_open(const struct tb_settings *s)
{
	const char *why = NULL;
	int target = tb_sink_open(s, &why);

	atomic_store(&log_target, target);
	if (why != NULL)
		tb_log_config_error("TIMEBOX_LOG",
				    s->log_target == TB_LOG_SYSLOG ? "syslog" : s->log_path, why,
				    "logging to stderr");
}

void tb_log_fd_moved(int from, int to)
{
	tb_sink_fd_moved(from, to);
}

void tb_log_timeout(enum tb_phase phase, const struct tb_dest *d, int fd, int64_t elapsed_ns,
		    int64_t limit_ns, int tid)
{
	struct line l;

	start_socket_event(&l, "timeout", phase, d, fd);
	put_ms(&l, " elapsed_ms=", elapsed_ns);
	put_ms(&l, " limit_ms=", limit_ns);
	put_ids(&l, tid);
	emit(&l);
}

/* The name is the program's: a control byte in it must not break the line (or start one). */
void tb_log_dns_timeout(const char *name, int64_t elapsed_ns, int64_t limit_ns)
{
	struct line l;
	char shown[256];
	size_t i = 0;

	for (; name != NULL && name[i] != '\0' && i < sizeof(shown) - 1; i++)
		shown[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
	shown[i] = '\0';
	start(&l, "timeout");
	put(&l, " phase=dns name=");
	put_value(&l, shown);
	put_ms(&l, " elapsed_ms=", elapsed_ns);
	put_ms(&l, " limit_ms=", limit_ns);
	put_ids(&l, 0);
	emit(&l);
}

void tb_log_reject(enum tb_phase phase, const struct tb_dest *d, int fd, const char *reason)
{
	struct line l;

	start_socket_event(&l, "reject", phase, d, fd);
	put(&l, " reason=");
	put_value(&l, reason);
	put_ids(&l, 0);
	emit(&l);
}

void tb_log_gate(const struct tb_dest *d, long leased, long pending, long max,
		 unsigned long acquired, unsigned long timed_out, unsigned long rejected)
{
	struct line l;
	char dest[TB_DEST_STRLEN];

	start(&l, "gate");
	put(&l, " dest=");
	put(&l, tb_dest_format(d, dest, sizeof(dest)));
	put(&l, " leased=");
	put_i64(&l, leased);
	put(&l, " pending=");
	put_i64(&l, pending);
	put(&l, " max=");
	put_i64(&l, max);
	put(&l, " acquired=");
	put_i64(&l, (int64_t)acquired);
	put(&l, " timed_out=");
	put_i64(&l, (int64_t)timed_out);
	put(&l, " rejected=");
	put_i64(&l, (int64_t)rejected);
	put_ids(&l, 0);
	emit(&l);
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
	put(&l, " name=");
	put_value(&l, name);
	put(&l, " value=");
	put_quoted(&l, value);
	put(&l, " error=");
	put_value(&l, why);
	put(&l, " effect=");
	put_value(&l, effect);
	emit_stderr(&l);
}

void tb_log_config_file_error(const char *file, int line, const char *key, const char *value,
			      const char *why, const char *effect)
{
	struct line l;

	start(&l, "config_error");
	put(&l, " file=");
	put_quoted(&l, file);
	if (line > 0) {
		put(&l, " line=");
		put_i64(&l, line);
	}
	if (key != NULL) {
		put(&l, " name=");
		put_value(&l, key);
		put(&l, " value=");
		put_quoted(&l, value != NULL ? value : "");
	}
	put(&l, " error=");
	put_quoted(&l, why);
	put(&l, " effect=");
	put_quoted(&l, effect);
	put_ids(&l, 0);
	emit_stderr(&l);
}

void tb_log_config_more(const char *file, int count)
{
	struct line l;

	start(&l, "config_error");
	put(&l, " file=");
	put_quoted(&l, file);
	put(&l, " error=\"");
	put_i64(&l, count);
	put(&l, " more problems\"");
	put_ids(&l, 0);
	emit_stderr(&l);
}

void tb_log_error(const char *body)
{
	struct line l;

	l.n = 0;
	put(&l, "timebox: ");
	put(&l, body);
	put_ids(&l, 0);
	emit(&l);
}
