/* plan.c - the bench of `timebox plan`: which limit fires first, played on a simulated clock.
 * Every decision is taken by the library's policy code (budget, phase, gate); this file only
 * moves the clock from one event of the downstream to the next. */
#include "plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "duration.h"
#include "gate.h"
#include "phase.h"

/* The simulated clock starts far from 0: the budget reads 0 as "no retry window". */
#define ORIGIN (INT64_C(1000) * TB_NS_PER_S)

/* Bytes shown one by one at the start and at the end of a drip; the rest is one line. */
#define HEAD_BYTES 3
#define TAIL_BYTES 2

static int parse_ms(const char *text, size_t len, int64_t *ns, const char **why)
{
	char buf[TB_DURATION_TEXT_MAX];

	if (len == 0 || len >= sizeof(buf)) {
		*why = "a duration is missing or too long, e.g. stall=1200ms";
		return -1;
	}
	memcpy(buf, text, len);
	buf[len] = '\0';
	return tb_duration_parse(buf, ns, why);
}

/* One "key[=value]" item of the downstream's text. */
static int parse_item(const char *p, size_t len, struct tb_downstream *d, bool *main_set,
		      const char **why)
{
	const char *eq = memchr(p, '=', len), *v = eq != NULL ? eq + 1 : p + len;
	size_t klen = eq != NULL ? (size_t)(eq - p) : len, vlen = (size_t)(p + len - v);
	bool is_main = true;

#define KEY(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0)
	if (KEY("down") || KEY("blackhole")) {
		if (eq != NULL)
			goto no_value;
		d->kind = KEY("down") ? TB_DOWN_DOWN : TB_DOWN_BLACKHOLE;
	} else if (KEY("stall") && eq == NULL) {
		d->kind = TB_DOWN_STALL;
		d->answer_ns = -1;
	} else if (KEY("ok") || KEY("stall")) {
		d->kind = KEY("ok") ? TB_DOWN_OK : TB_DOWN_STALL;
		if (parse_ms(v, vlen, &d->answer_ns, why) < 0)
			return -1;
	} else if (KEY("first")) {
		is_main = false;
		if (parse_ms(v, vlen, &d->first_ns, why) < 0)
			return -1;
	} else if (KEY("slow-gate")) {
		is_main = false;
		if (parse_ms(v, vlen, &d->gate_busy_ns, why) < 0)
			return -1;
	} else if (KEY("drip")) {
		const char *slash = memchr(v, '/', vlen);
		char *end;

		if (slash == NULL) {
			*why = "drip needs an interval and a count, e.g. drip=150ms/20";
			return -1;
		}
		if (parse_ms(v, (size_t)(slash - v), &d->interval_ns, why) < 0)
			return -1;
		d->bytes = strtol(slash + 1, &end, 10);
		if (end != v + vlen || end == slash + 1 || d->bytes < 1 || d->bytes > 1000000) {
			*why = "drip's count is a number of bytes from 1 to 1000000, e.g. drip=150ms/20";
			return -1;
		}
		if (d->interval_ns <= 0) {
			*why = "drip's interval must be longer than 0";
			return -1;
		}
		d->kind = TB_DOWN_DRIP;
	} else {
		*why = "unknown behaviour: expected ok=, stall[=], drip=, first=, down, blackhole, "
		       "slow-gate=";
		return -1;
	}
#undef KEY
	if (is_main) {
		if (*main_set) {
			*why = "give one of ok, stall, drip, down, blackhole (with first= and "
			       "slow-gate= beside it)";
			return -1;
		}
		*main_set = true;
	}
	return 0;
no_value:
	*why = "down and blackhole take no value";
	return -1;
}

int tb_downstream_parse(const char *text, struct tb_downstream *d, const char **why)
{
	bool main_set = false;

	memset(d, 0, sizeof(*d));
	d->kind = TB_DOWN_OK;
	d->first_ns = -1;
	for (const char *p = text;;) {
		size_t len = strcspn(p, ",");

		if (len == 0) {
			*why = "an empty behaviour: items are separated by single commas";
			return -1;
		}
		if (parse_item(p, len, d, &main_set, why) < 0)
			return -1;
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
	if (d->first_ns >= 0 && d->kind != TB_DOWN_DRIP) {
		*why = "first= goes with drip=, e.g. first=20ms,drip=150ms/20";
		return -1;
	}
	return 0;
}

const char *tb_plan_what_name(enum tb_plan_what what)
{
	static const char *const names[] = {
		[TB_EV_BACKOFF] = "backoff",     [TB_EV_REUSE] = "reuse",
		[TB_EV_GATE_WAIT] = "gate_wait", [TB_EV_GATE_SLOT] = "gate_slot",
		[TB_EV_CONNECT] = "connect",     [TB_EV_HANDSHAKE] = "handshake",
		[TB_EV_SENT] = "sent",           [TB_EV_BYTE] = "byte",
		[TB_EV_BYTES] = "bytes",         [TB_EV_RESPONSE] = "response",
		[TB_EV_EXPIRED] = "expired",     [TB_EV_REFUSED] = "refused",
		[TB_EV_REJECTED] = "rejected",   [TB_EV_KERNEL] = "kernel",
		[TB_EV_FOREVER] = "forever",
	};

	return (unsigned)what < sizeof(names) / sizeof(names[0]) ? names[what] : "?";
}

/* The run under way: the input, the output, and the thread's state in the library. */
struct sim {
	const struct tb_plan_input *in;
	struct tb_plan *out;
	struct tb_budget budget;
	struct tb_gate gate;
	bool gated;
	bool others_left;  /* the slots held by others have been given back */
	int attempt;
	int64_t now;       /* absolute, on the simulated clock */
	/* the drip's bytes not yet shown: the run to elide and the last TAIL_BYTES */
	long run_count;
	int64_t run_end;
	struct tb_plan_event tail[TAIL_BYTES];
	int ntail;
};

static int64_t add_sat(int64_t t, int64_t d)
{
	return d >= TB_NEVER - t ? TB_NEVER : t + d;
}

/* k intervals of d, saturated at TB_NEVER ("drip=2562047h/1000" is valid). */
static int64_t mul_sat(long k, int64_t d)
{
	return k > 0 && d > TB_NEVER / k ? TB_NEVER : k * d;
}

static struct tb_plan_event *emit(struct sim *m, enum tb_plan_what what, int64_t at)
{
	static struct tb_plan_event overflow;
	struct tb_plan *o = m->out;
	struct tb_plan_event *e = o->nevents < TB_PLAN_MAX_EVENTS ? &o->ev[o->nevents++]
								   : &overflow;

	memset(e, 0, sizeof(*e));
	e->at = at == TB_NEVER ? TB_NEVER : at - ORIGIN;
	e->attempt = m->attempt;
	e->what = what;
	return e;
}

static int timeout_errno(const struct tb_settings *s)
{
	return s->on_timeout == TB_ON_TIMEOUT_EAGAIN ? EAGAIN : ETIMEDOUT;
}

/* Ends the attempt with an expiry of `phase` at `at` that the library delivers. */
static void expire(struct sim *m, enum tb_phase phase, int64_t at, int64_t call_deadline)
{
	struct tb_plan_event *e = emit(m, TB_EV_EXPIRED, at);

	e->phase = phase;
	e->err = timeout_errno(&m->in->set);
	m->now = at;
	tb_budget_on_expired(&m->budget, &m->in->set, &m->in->dest, phase, call_deadline);
	m->out->err = e->err;
	m->out->fired = (int)phase;
	m->out->kernel = TB_KERNEL_NONE;
}

/* Ends the attempt with the kernel's own ETIMEDOUT: a failure the budget is told of. */
static void kernel_gives_up(struct sim *m, enum tb_plan_kernel k, int64_t at)
{
	struct tb_plan_event *e = emit(m, TB_EV_KERNEL, at);

	e->kernel = k;
	e->err = ETIMEDOUT;
	m->now = at;
	tb_budget_on_failure(&m->budget, &m->in->set);
	m->out->err = ETIMEDOUT;
	m->out->fired = -1;
	m->out->kernel = k;
}

/* A step refused by the budget: the attempt fails at once, sending nothing. */
static void refused(struct sim *m)
{
	struct tb_plan_event *e = emit(m, TB_EV_REFUSED, m->now);

	e->phase = TB_PHASE_DEADLINE;
	e->err = timeout_errno(&m->in->set);
	m->out->err = e->err;
	m->out->fired = TB_PHASE_DEADLINE;
	m->out->kernel = TB_KERNEL_NONE;
}

static void others_give_back(struct sim *m)
{
	if (!m->gated || m->others_left || m->now < ORIGIN + m->in->down.gate_busy_ns)
		return;
	m->others_left = true;
	for (int i = 0; i < m->gate.max; i++)
		(void)tb_gate_release(&m->gate);
}

/*
 * The gate, as connect waits at it. Returns true with a slot held, false when the attempt
 * failed (expiry or a full queue).
 */
static bool take_slot(struct sim *m, int64_t call_deadline)
{
	const struct tb_settings *s = &m->in->set;
	struct tb_gate_waiter w;
	struct tb_expiry bound;
	int64_t free_at = ORIGIN + m->in->down.gate_busy_ns;

	others_give_back(m);
	if (tb_gate_try_acquire(&m->gate))
		return true;
	switch (tb_gate_enqueue(&m->gate, &w)) {
	case TB_GATE_TOOK:
		return true;
	case TB_GATE_REJECTED:
		emit(m, TB_EV_REJECTED, m->now)->err = EAGAIN;
		tb_budget_on_failure(&m->budget, s);
		m->out->err = EAGAIN;
		m->out->fired = TB_PHASE_GATE;
		return false;
	case TB_GATE_QUEUED:
		break;
	}
	emit(m, TB_EV_GATE_WAIT, m->now);
	bound = tb_gate_wait_bound(m->now, s->acquire_ns, call_deadline);
	if (bound.at < free_at) {
		(void)tb_gate_cancel(&m->gate, &w);
		expire(m, bound.phase, bound.at, call_deadline);
		return false;
	}
	m->now = free_at;
	others_give_back(m); /* hands the first slot to w */
	emit(m, TB_EV_GATE_SLOT, m->now);
	return true;
}

/* The drip's bytes beyond the first HEAD_BYTES go through a small tail; older ones join
 * the run shown as one line. */
static void byte_arrived(struct sim *m, long n, int64_t at)
{
	struct tb_plan_event *e;

	if (n <= HEAD_BYTES) {
		e = emit(m, TB_EV_BYTE, at);
		e->count = n;
		return;
	}
	if (m->ntail == TAIL_BYTES) {
		m->run_count++;
		m->run_end = m->tail[0].at;
		m->tail[0] = m->tail[1];
		m->ntail--;
	}
	e = &m->tail[m->ntail++];
	memset(e, 0, sizeof(*e));
	e->at = at - ORIGIN;
	e->attempt = m->attempt;
	e->what = TB_EV_BYTE;
	e->count = n;
}

static void flush_bytes(struct sim *m)
{
	if (m->run_count > 0) {
		struct tb_plan_event *e = emit(m, TB_EV_BYTES, ORIGIN + m->run_end);

		e->count = m->run_count;
		e->span = m->in->down.interval_ns;
	}
	for (int i = 0; i < m->ntail; i++)
		*emit(m, TB_EV_BYTE, ORIGIN) = m->tail[i];
	m->run_count = 0;
	m->ntail = 0;
}

/* When response byte k (0-based) reaches the program, the request sent at `sent`;
 * TB_NEVER when there is none. `*chunks` is how many reads the response takes. */
static int64_t arrival(const struct tb_downstream *d, int64_t sent, long k, long *chunks)
{
	switch (d->kind) {
	case TB_DOWN_OK:
	case TB_DOWN_STALL:
		*chunks = 1;
		return d->answer_ns < 0 ? TB_NEVER : add_sat(sent, d->answer_ns);
	case TB_DOWN_DRIP:
		if (d->first_ns >= 0) {
			*chunks = d->bytes + 1;
			return add_sat(add_sat(sent, d->first_ns), mul_sat(k, d->interval_ns));
		}
		*chunks = d->bytes;
		return add_sat(sent, mul_sat(k + 1, d->interval_ns));
	case TB_DOWN_DOWN:
	case TB_DOWN_BLACKHOLE:
		break;
	}
	*chunks = 0;
	return TB_NEVER;
}

/*
 * Waits for the response on a connection where the request was sent at m->now. Returns
 * true when it came whole. The program reads as bytes arrive: each read wait begins where
 * the previous byte was read, the way a blocking read loop does.
 */
static bool read_response(struct sim *m, int64_t call_deadline)
{
	const struct tb_settings *s = &m->in->set;
	const struct tb_downstream *d = &m->in->down;
	bool silent = d->kind == TB_DOWN_DOWN || d->kind == TB_DOWN_BLACKHOLE;
	int64_t sent = m->now;
	/* A dropped request is sent again until tcp_retries2 gives up on it. */
	int64_t giveup = silent ? add_sat(sent, TB_PLAN_RETRIES2_NS) : TB_NEVER;
	struct tb_idle idle = { 0, 0 };
	long chunks = 0;

	for (long k = 0;; k++) {
		int64_t at = arrival(d, sent, k, &chunks);
		enum tb_phase phase = k == 0 ? TB_PHASE_FIRST_BYTE : TB_PHASE_READ;
		struct tb_expiry e;

		if (k >= chunks && chunks > 0)
			break;
		tb_idle_wait_begin(&idle, m->now);
		e = tb_expiry_pick(phase, tb_idle_expiry(&idle, tb_settings_phase_limit(s, phase)),
				   call_deadline);
		/* A byte that lands as the limit falls is queued before the watchdog looks. */
		if (e.at < at && e.at < giveup) {
			flush_bytes(m);
			expire(m, e.phase, e.at, call_deadline);
			return false;
		}
		if (at == TB_NEVER) {
			flush_bytes(m);
			if (giveup != TB_NEVER) {
				kernel_gives_up(m, TB_KERNEL_RETRIES2, giveup);
				return false;
			}
			emit(m, TB_EV_FOREVER, TB_NEVER);
			m->now = TB_NEVER;
			return false;
		}
		m->now = at;
		tb_idle_wait_end(&idle, at);
		tb_idle_progress(&idle);
		tb_budget_on_response(&m->budget, s);
		if (d->kind == TB_DOWN_DRIP)
			byte_arrived(m, k + 1, at);
	}
	flush_bytes(m);
	emit(m, TB_EV_RESPONSE, m->now);
	return true;
}

/* The handshake of a new connection. Returns true when it completed. */
static bool handshake(struct sim *m, int64_t call_deadline)
{
	const struct tb_settings *s = &m->in->set;
	int64_t begin = m->now, done, giveup = TB_NEVER;
	struct tb_expiry e;

	emit(m, TB_EV_CONNECT, begin);
	if (m->in->down.kind == TB_DOWN_DOWN) {
		done = TB_NEVER;
		giveup = add_sat(begin, TB_PLAN_SYN_GIVEUP_NS);
	} else {
		done = add_sat(begin, m->in->rtt_ns);
	}
	e = tb_expiry_pick(TB_PHASE_CONNECT,
			   s->connect_ns > 0 ? add_sat(begin, s->connect_ns) : TB_NEVER,
			   call_deadline);
	if (e.at < done && e.at < giveup) {
		expire(m, e.phase, e.at, call_deadline);
		return false;
	}
	if (done == TB_NEVER) {
		kernel_gives_up(m, TB_KERNEL_SYN, giveup);
		return false;
	}
	m->now = done;
	emit(m, TB_EV_HANDSHAKE, done);
	return true;
}

/* One attempt of the call. Returns true when the program got its response. */
static bool attempt(struct sim *m)
{
	const struct tb_settings *s = &m->in->set;
	const struct tb_dest *dest = &m->in->dest;
	int64_t start, deadline;
	bool slot = false, ok = false;

	if (m->in->reuse && m->attempt == 1) {
		emit(m, TB_EV_REUSE, m->now);
	} else {
		if (tb_budget_step(&m->budget, s, dest, m->now, &start, &deadline) != TB_STEP_GO) {
			refused(m);
			return false;
		}
		if (m->gated) {
			if (!take_slot(m, deadline))
				return false;
			slot = true;
		}
		if (!handshake(m, deadline))
			goto out;
	}
	/* The send: a new call's first step, or the same call's (the library steps on sends
	 * only when a deadline is set). */
	if (s->deadline_ns > 0 &&
	    tb_budget_step(&m->budget, s, dest, m->now, &start, &deadline) != TB_STEP_GO) {
		refused(m);
		goto out;
	}
	if (s->deadline_ns <= 0)
		deadline = TB_NEVER;
	emit(m, TB_EV_SENT, m->now);
	if (m->in->down.kind != TB_DOWN_DOWN && m->in->down.kind != TB_DOWN_BLACKHOLE)
		m->out->executed++;
	ok = read_response(m, deadline);
out:
	if (m->now != TB_NEVER)
		tb_budget_on_close(&m->budget, s);
	if (slot)
		(void)tb_gate_release(&m->gate);
	return ok;
}

int tb_plan_run(const struct tb_plan_input *in, struct tb_plan *out)
{
	struct sim m;

	memset(out, 0, sizeof(*out));
	out->outcome = TB_PLAN_FAILED;
	out->fired = -1;
	if (in->retries < 0 || in->retries > TB_PLAN_MAX_RETRIES)
		return -1;
	memset(&m, 0, sizeof(m));
	m.in = in;
	m.out = out;
	m.now = ORIGIN;
	m.gated = in->set.max_conns > 0;
	m.others_left = in->down.gate_busy_ns <= 0;
	out->gate_ignored = !m.gated && in->down.gate_busy_ns > 0;
	if (m.gated) {
		tb_gate_init(&m.gate, &in->dest, in->set.max_conns, in->set.max_pending);
		/* slow-gate: the other callers hold every slot until gate_busy_ns */
		for (int i = 0; !m.others_left && i < in->set.max_conns; i++)
			(void)tb_gate_try_acquire(&m.gate);
	}
	if (in->set.scope == TB_SCOPE_PROCESS)
		tb_budget_open_process(&m.budget, &in->set, m.now);

	for (m.attempt = 1; m.attempt <= in->retries + 1; m.attempt++) {
		if (m.attempt > 1 && in->backoff_ns > 0) {
			emit(&m, TB_EV_BACKOFF, m.now)->span = in->backoff_ns;
			m.now = add_sat(m.now, in->backoff_ns);
			if (m.now == TB_NEVER) {
				out->outcome = TB_PLAN_FOREVER;
				break;
			}
		}
		out->attempts = m.attempt;
		if (attempt(&m)) {
			out->outcome = TB_PLAN_OK;
			out->err = 0;
			out->fired = -1;
			out->kernel = TB_KERNEL_NONE;
			break;
		}
		if (m.now == TB_NEVER) {
			out->outcome = TB_PLAN_FOREVER;
			break;
		}
	}
	out->end = m.now == TB_NEVER ? TB_NEVER : m.now - ORIGIN;
	if (m.gated)
		pthread_mutex_destroy(&m.gate.lock);
	return 0;
}
