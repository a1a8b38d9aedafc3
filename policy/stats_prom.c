/* stats_prom.c - merging a segment's rows and printing them as Prometheus metrics.
 * Pure code: HELP/TYPE once per metric family, label values escaped as the format says. */
#include "stats_prom.h"

#include <stdio.h>
#include <string.h>

#include "textbuf.h"

/* A label value: \, " and newline escaped (the exposition format's three). */
static void put_label(struct tb_textbuf *o, const char *key, const char *v)
{
	tb_textbuf_put(o, "%s=\"", key);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			tb_textbuf_put(o, "\\%c", *v);
		else if (*v == '\n')
			tb_textbuf_put(o, "\\n");
		else
			tb_textbuf_put(o, "%c", *v);
	}
	tb_textbuf_put(o, "\"");
}

static void labels(struct tb_textbuf *o, const struct tb_stats_row *r, int pid)
{
	put_label(o, "dest", r->dest);
	if (r->host[0] != '\0') {
		tb_textbuf_put(o, ",");
		put_label(o, "host", r->host);
	}
	if (pid > 0)
		tb_textbuf_put(o, ",pid=\"%d\"", pid);
}

static void family(struct tb_textbuf *o, const char *name, const char *type, const char *help)
{
	tb_textbuf_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

const char *tb_notice_name(enum tb_notice k)
{
	static const char *const names[TB_NOTICE_COUNT] = {
		[TB_NOTICE_TLS_ANSWERED_WAIT] = "tls_answered_wait",
		[TB_NOTICE_FRAMING_RAW] = "framing_raw",
	};

	return (unsigned)k < TB_NOTICE_COUNT ? names[k] : NULL;
}

int tb_stats_rows(const struct tb_stats_seg *seg, struct tb_stats_row *rows)
{
	/* Only rows with pages: reading the hole past them would allocate its pages (tmpfs). */
	unsigned nd = atomic_load_explicit(&seg->rows_allocated, memory_order_acquire);
	int n = 0;

	if (nd > TB_STATS_DESTS)
		nd = TB_STATS_DESTS;
	for (unsigned i = 0; i < nd; i++) {
		const struct tb_stats_dest *d = &seg->d[i];
		struct tb_stats_row *r = NULL;
		struct tb_hist_snap h;
		int j;

		if (atomic_load_explicit(&d->state, memory_order_acquire) != 2)
			continue;
		for (j = 0; j < n; j++)
			if (strncmp(rows[j].dest, d->dest, TB_STATS_TEXT) == 0)
				r = &rows[j];
		if (r == NULL) {
			r = &rows[n++];
			memset(r, 0, sizeof(*r));
			memcpy(r->dest, d->dest, TB_STATS_TEXT);
			r->dest[TB_STATS_TEXT - 1] = '\0';
			memcpy(r->host, d->host, TB_STATS_TEXT);
			r->host[TB_STATS_TEXT - 1] = '\0';
			r->max = d->max;
			r->leased = (long)atomic_load_explicit(&d->leased, memory_order_relaxed);
			r->pending = (long)atomic_load_explicit(&d->pending, memory_order_relaxed);
			r->acquired = atomic_load_explicit(&d->acquired, memory_order_relaxed);
			r->rejects = atomic_load_explicit(&d->rejects, memory_order_relaxed);
			r->cuts[TB_PHASE_GATE] =
				atomic_load_explicit(&d->gate_timed_out, memory_order_relaxed);
			/* A destination's protection is the process's, as its gate: one row's. */
			r->protect = atomic_load_explicit(&d->protect, memory_order_relaxed) != 0;
			r->breaker_state = atomic_load_explicit(&d->breaker_state,
								memory_order_relaxed);
			r->breaker_opened = atomic_load_explicit(&d->breaker_opened,
								 memory_order_relaxed);
			r->breaker_refused = atomic_load_explicit(&d->breaker_refused,
								  memory_order_relaxed);
			r->retries = atomic_load_explicit(&d->retries, memory_order_relaxed);
			r->retry_refused = atomic_load_explicit(&d->retry_refused,
								memory_order_relaxed);
			r->auto_limit = atomic_load_explicit(&d->auto_limit, memory_order_relaxed);
			r->min_rtt_us = atomic_load_explicit(&d->min_rtt_us, memory_order_relaxed);
			r->rtt_us = atomic_load_explicit(&d->rtt_us, memory_order_relaxed);
		}
		r->calls += atomic_load_explicit(&d->calls, memory_order_relaxed);
		r->completed += atomic_load_explicit(&d->completed, memory_order_relaxed);
		for (int p = 0; p < TB_PHASE_COUNT; p++)
			if (p != TB_PHASE_GATE)
				r->cuts[p] += atomic_load_explicit(&d->cuts[p], memory_order_relaxed);
		for (int k = 0; k < TB_NOTICE_COUNT; k++)
			r->notices[k] += atomic_load_explicit(&d->notices[k], memory_order_relaxed);
		r->not_sent += atomic_load_explicit(&d->not_sent, memory_order_relaxed);
		for (int k = 0; k < TB_HIST_COUNT; k++) {
			tb_hist_snapshot(&d->hist[k], &h);
			tb_hist_merge(&r->hist[k], &h);
		}
	}
	(void)nd;
	return n;
}

static const char *const hist_name[TB_HIST_COUNT] = {
	[TB_HIST_CONNECT] = "timebox_connect_seconds",
	[TB_HIST_FIRST_BYTE] = "timebox_first_byte_seconds",
	[TB_HIST_CALL] = "timebox_call_seconds",
};
static const char *const hist_help[TB_HIST_COUNT] = {
	[TB_HIST_CONNECT] = "Time from the start of the TCP handshake to its completion.",
	[TB_HIST_FIRST_BYTE] = "Time from the first byte of a request to the first byte of "
			       "its response.",
	[TB_HIST_CALL] = "Time from the start of a call (gate wait included) to its last "
			 "response byte.",
};

static void histogram(struct tb_textbuf *o, const struct tb_stats_row *rows, int n, int pid, int k)
{
	family(o, hist_name[k], "histogram", hist_help[k]);
	for (int i = 0; i < n; i++) {
		const struct tb_hist_snap *h = &rows[i].hist[k];

		for (int e = TB_PROM_LE_FIRST; e <= TB_PROM_LE_LAST; e++) {
			uint64_t edge = UINT64_C(1) << e;

			tb_textbuf_put(o, "%s_bucket{", hist_name[k]);
			labels(o, &rows[i], pid);
			tb_textbuf_put(o, ",le=\"%.6f\"} %llu\n", (double)edge / 1e6,
			    (unsigned long long)tb_hist_count_le(h, edge - 1));
		}
		tb_textbuf_put(o, "%s_bucket{", hist_name[k]);
		labels(o, &rows[i], pid);
		tb_textbuf_put(o, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
		tb_textbuf_put(o, "%s_sum{", hist_name[k]);
		labels(o, &rows[i], pid);
		tb_textbuf_put(o, "} %.6f\n", (double)h->sum_us / 1e6);
		tb_textbuf_put(o, "%s_count{", hist_name[k]);
		labels(o, &rows[i], pid);
		tb_textbuf_put(o, "} %llu\n", (unsigned long long)h->count);
	}
}

static void counter(struct tb_textbuf *o, const struct tb_stats_row *rows, int n, int pid,
		    const char *name, const char *type, const char *help, size_t off)
{
	family(o, name, type, help);
	for (int i = 0; i < n; i++) {
		const char *at = (const char *)&rows[i] + off;
		long long v = strcmp(type, "gauge") == 0 ? *(const long *)(const void *)at
							 : (long long)*(const unsigned long long *)(const void *)at;

		tb_textbuf_put(o, "%s{", name);
		labels(o, &rows[i], pid);
		tb_textbuf_put(o, "} %lld\n", v);
	}
}

/* One gauge or counter of the protected destinations only (the others have none). */
static void protect_metric(struct tb_textbuf *o, const struct tb_stats_row *rows, int n, int pid,
			   const char *name, const char *type, const char *help, size_t off,
			   bool is_long)
{
	family(o, name, type, help);
	for (int i = 0; i < n; i++) {
		const char *f = (const char *)&rows[i] + off;

		if (!rows[i].protect)
			continue;
		tb_textbuf_put(o, "%s{", name);
		labels(o, &rows[i], pid);
		if (is_long)
			tb_textbuf_put(o, "} %lld\n", *(const long long *)(const void *)f);
		else
			tb_textbuf_put(o, "} %llu\n", *(const unsigned long long *)(const void *)f);
	}
}

static void protection(struct tb_textbuf *o, const struct tb_stats_row *rows, int n, int pid)
{
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= rows[i].protect;
	if (!any)
		return;
	protect_metric(o, rows, n, pid, "timebox_breaker_state", "gauge",
		       "The circuit breaker's state: 0 closed, 1 open, 2 half-open.",
		       offsetof(struct tb_stats_row, breaker_state), false);
	protect_metric(o, rows, n, pid, "timebox_breaker_opened_total", "counter",
		       "Times the circuit breaker opened.",
		       offsetof(struct tb_stats_row, breaker_opened), false);
	protect_metric(o, rows, n, pid, "timebox_breaker_refused_total", "counter",
		       "Connects refused at once by an open circuit breaker, nothing sent.",
		       offsetof(struct tb_stats_row, breaker_refused), false);
	protect_metric(o, rows, n, pid, "timebox_retries_total", "counter",
		       "Connects that were a thread's retry, let through by the retry budget.",
		       offsetof(struct tb_stats_row, retries), false);
	protect_metric(o, rows, n, pid, "timebox_retry_refused_total", "counter",
		       "Retries refused at once past the retry budget, nothing sent.",
		       offsetof(struct tb_stats_row, retry_refused), false);
	protect_metric(o, rows, n, pid, "timebox_gate_auto_max", "gauge",
		       "The size an adaptive gate (max_conns = auto) chose; 0: not adaptive.",
		       offsetof(struct tb_stats_row, auto_limit), true);
	protect_metric(o, rows, n, pid, "timebox_gate_min_rtt_microseconds", "gauge",
		       "The adaptive gate's floor latency (its minRTT).",
		       offsetof(struct tb_stats_row, min_rtt_us), true);
	protect_metric(o, rows, n, pid, "timebox_gate_rtt_microseconds", "gauge",
		       "The adaptive gate's last latency sample.",
		       offsetof(struct tb_stats_row, rtt_us), true);
}

size_t tb_stats_prom_process(const struct tb_stats_seg *seg, int pid, char *buf, size_t len)
{
	struct tb_textbuf o = { buf, len, 0 };

	if (len > 0)
		buf[0] = '\0';
	family(&o, "timebox_requests_arrived_expired_total", "counter",
	       "Inbound requests whose deadline header said the budget was already spent.");
	if (pid > 0)
		tb_textbuf_put(&o, "timebox_requests_arrived_expired_total{pid=\"%d\"} %llu\n", pid,
		    (unsigned long long)atomic_load_explicit(&seg->arrived_spent,
							     memory_order_relaxed));
	else
		tb_textbuf_put(&o, "timebox_requests_arrived_expired_total %llu\n",
		    (unsigned long long)atomic_load_explicit(&seg->arrived_spent,
							     memory_order_relaxed));
	return o.n;
}

size_t tb_stats_prom(const struct tb_stats_row *rows, int n, int pid, char *buf, size_t len)
{
	struct tb_textbuf o = { buf, len, 0 };

	if (len > 0)
		buf[0] = '\0';
	counter(&o, rows, n, pid, "timebox_calls_total", "counter",
		"Calls begun (a governed connect, or a new request on a kept-alive connection).",
		offsetof(struct tb_stats_row, calls));
	counter(&o, rows, n, pid, "timebox_completed_total", "counter",
		"Calls that ended with a response.", offsetof(struct tb_stats_row, completed));
	family(&o, "timebox_timeouts_total", "counter", "Calls cut by timebox, by phase.");
	for (int i = 0; i < n; i++)
		for (int p = 0; p < TB_PHASE_COUNT; p++) {
			tb_textbuf_put(&o, "timebox_timeouts_total{");
			labels(&o, &rows[i], pid);
			tb_textbuf_put(&o, ",phase=\"%s\"} %llu\n", tb_phase_name((enum tb_phase)p),
			    rows[i].cuts[p]);
		}
	family(&o, "timebox_notices_total", "counter",
	       "Connections on which timebox stopped governing something, by notice kind.");
	for (int i = 0; i < n; i++)
		for (int k = 0; k < TB_NOTICE_COUNT; k++) {
			tb_textbuf_put(&o, "timebox_notices_total{");
			labels(&o, &rows[i], pid);
			tb_textbuf_put(&o, ",what=\"%s\"} %llu\n", tb_notice_name((enum tb_notice)k),
			    rows[i].notices[k]);
		}
	counter(&o, rows, n, pid, "timebox_not_sent_total", "counter",
		"Requests not sent: the thread's request budget was already spent.",
		offsetof(struct tb_stats_row, not_sent));
	counter(&o, rows, n, pid, "timebox_gate_rejects_total", "counter",
		"Connects refused at once by a full gate.", offsetof(struct tb_stats_row, rejects));
	counter(&o, rows, n, pid, "timebox_gate_acquired_total", "counter",
		"Slots taken at the gate.", offsetof(struct tb_stats_row, acquired));
	counter(&o, rows, n, pid, "timebox_gate_leased", "gauge",
		"Slots of the gate held now.", offsetof(struct tb_stats_row, leased));
	counter(&o, rows, n, pid, "timebox_gate_pending", "gauge",
		"Callers waiting at the gate now.", offsetof(struct tb_stats_row, pending));
	counter(&o, rows, n, pid, "timebox_gate_max", "gauge",
		"The gate's size (0: no gate).", offsetof(struct tb_stats_row, max));
	protection(&o, rows, n, pid);
	for (int k = 0; k < TB_HIST_COUNT; k++)
		histogram(&o, rows, n, pid, k);
	return o.n;
}
