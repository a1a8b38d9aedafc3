/* log.c - formatting and writing log lines.
 * Hand-rolled formatting (no snprintf): the watchdog and signal handlers may log. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "fdtable.h"
#include "real.h"
#include "thread.h"

#define LINE_MAX_LEN 512

struct line {
	char buf[LINE_MAX_LEN];
	size_t n;
};

static atomic_int log_fd = 2;
static atomic_int log_target = TB_LOG_STDERR;

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

static void emit(struct line *l)
{
	int saved = errno;
	int target = atomic_load_explicit(&log_target, memory_order_relaxed);

	if (target == TB_LOG_OFF)
		return;
	if (target == TB_LOG_SYSLOG) {
		l->buf[l->n] = '\0';
		syslog(LOG_WARNING, "%s", l->buf + strlen("timebox: "));
		errno = saved;
		return;
	}
	l->buf[l->n++] = '\n';
	/* One write() per line: lines from several threads or processes never interleave. */
	if (tb_real.write(atomic_load_explicit(&log_fd, memory_order_relaxed), l->buf, l->n) < 0)
		(void)0; /* nowhere left to report it */
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
	int fd, high;

	atomic_store(&log_target, s->log_target);
	if (s->log_target == TB_LOG_SYSLOG)
		openlog("timebox", LOG_PID | LOG_NDELAY, LOG_USER);
	if (s->log_target != TB_LOG_FILE)
		return;
	fd = open(s->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		atomic_store(&log_target, TB_LOG_STDERR);
		tb_log_config_error("TIMEBOX_LOG", s->log_path, strerror(errno),
				    "logging to stderr");
		return;
	}
	/* Keep out of the low numbers a program may expect to get from its own open(). */
	high = tb_real.fcntl(fd, F_DUPFD_CLOEXEC, 512);
	if (high >= 0) {
		tb_real.close(fd);
		fd = high;
	}
	tb_fd_mark_internal(fd);
	atomic_store(&log_fd, fd);
}

void tb_log_fd_moved(int from, int to)
{
	int expect = from;

	if (atomic_compare_exchange_strong(&log_fd, &expect, to)) {
		tb_fd_unmark_internal(from);
		tb_fd_mark_internal(to);
	}
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
	/* Configuration errors go to stderr whatever the target: they are about the target. */
	l.buf[l.n++] = '\n';
	if (tb_real.write(2, l.buf, l.n) < 0)
		(void)0;
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
