/* suggest.c - limits from measurements: quantiles of a bucketed distribution, the seed's
 * factor of 1.5-2 on the p99, Little's law for the gate, and fitting it all in a budget. */
#include "suggest.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "duration.h"
#include "settings.h"

#define MS INT64_C(1000000)

void tb_dist_init(struct tb_dist *d)
{
	d->n = 0;
	d->total = 0;
}

void tb_dist_add(struct tb_dist *d, uint64_t lo_us, uint64_t hi_us, uint64_t count)
{
	if (count == 0 || d->n >= TB_HIST_BUCKETS || hi_us <= lo_us ||
	    (d->n > 0 && lo_us < d->hi[d->n - 1]))
		return;
	d->lo[d->n] = lo_us;
	d->hi[d->n] = hi_us;
	d->count[d->n] = count;
	d->n++;
	d->total += count;
}

void tb_dist_from_hist(struct tb_dist *d, const struct tb_hist_snap *h)
{
	tb_dist_init(d);
	for (unsigned i = 0; i < TB_HIST_BUCKETS; i++)
		tb_dist_add(d, tb_hist_lower(i), tb_hist_upper(i), h->bucket[i]);
}

int64_t tb_dist_quantile_ns(const struct tb_dist *d, double q)
{
	double rank, seen = 0;

	if (d->total == 0)
		return -1;
	if (q > 1)
		q = 1;
	rank = q * (double)d->total;
	for (unsigned i = 0; i < d->n; i++) {
		double before = seen;

		seen += (double)d->count[i];
		if (seen >= rank || i + 1 == d->n) {
			double within = (rank - before) / (double)d->count[i];

			if (within < 0)
				within = 0;
			if (within > 1)
				within = 1;
			/* The last histogram bucket holds everything above it: its lower edge. */
			if (d->hi[i] == UINT64_MAX)
				return (int64_t)d->lo[i] * 1000;
			return (int64_t)(((double)d->lo[i] + (double)(d->hi[i] - d->lo[i]) * within) *
					 1000.0);
		}
	}
	return -1;
}

/* Round up (limits: never below what was computed) or down (a share of a budget). */
static int64_t up_ms(double ns)
{
	int64_t ms = (int64_t)(ns / (double)MS);

	if ((double)ms * (double)MS < ns)
		ms++;
	return ms * MS;
}

static int64_t down_ms(int64_t ns)
{
	return ns / MS * MS;
}

/* A measured time for a comment: "81.3ms", "412us", "1.25s". */
static const char *t(int64_t ns, char *buf, size_t len)
{
	if (ns < 0)
		snprintf(buf, len, "-");
	else if (ns < MS)
		snprintf(buf, len, "%lldus", (long long)(ns / 1000));
	else if (ns < 1000 * MS)
		snprintf(buf, len, "%.1fms", (double)ns / (double)MS);
	else
		snprintf(buf, len, "%.2fs", (double)ns / 1e9);
	return buf;
}

static void say(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(char *buf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, TB_SUGGEST_WHY, fmt, ap);
	va_end(ap);
}

static void warn(struct tb_suggestion *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void warn(struct tb_suggestion *s, const char *fmt, ...)
{
	va_list ap;

	if (s == NULL || s->nwarnings >= TB_SUGGEST_WARNINGS)
		return;
	va_start(ap, fmt);
	vsnprintf(s->warning[s->nwarnings++], TB_SUGGEST_WHY, fmt, ap);
	va_end(ap);
}

/*
 * The seed's factor on a p99, 1.5 to 2: the smallest that also covers the observed p99.9,
 * so that a tight distribution gets the tight limit and a long tail the room it needs.
 * Without TB_SUGGEST_TAIL_CALLS calls the p99.9 is not measured: 2, the safe end. A tail
 * beyond 2 x p99 is a warning in s (none when s is NULL). The reason goes to why.
 */
static double factor(const struct tb_dist *d, int64_t p99, int64_t p999, const char *what,
		     char *why, size_t len, struct tb_suggestion *s)
{
	char a[24], b[24];
	double r;

	if (d->total < TB_SUGGEST_TAIL_CALLS || p99 <= 0) {
		snprintf(why, len, "2x: %llu calls are too few to measure the p99.9, so the "
			 "seed's upper factor", (unsigned long long)d->total);
		return 2.0;
	}
	r = (double)p999 / (double)p99;
	if (r <= 1.5) {
		snprintf(why, len, "1.5x: the p99.9 (%s) is within 1.5x the p99, so the seed's "
			 "lower factor already covers it", t(p999, a, sizeof(a)));
		return 1.5;
	}
	if (r <= 2.0) {
		r = (double)(int)(r * 100 + 0.999) / 100; /* up to the hundredth */
		snprintf(why, len, "%.2fx: the smallest factor of the seed's 1.5-2 that covers the "
			 "p99.9 (%s)", r > 2.0 ? 2.0 : r, t(p999, a, sizeof(a)));
		return r > 2.0 ? 2.0 : r;
	}
	snprintf(why, len, "2x: the seed's upper factor; the p99.9 (%s) lies beyond it",
		 t(p999, a, sizeof(a)));
	warn(s, "%s: the p99.9 (%s) is %.1fx the p99 (%s): the slowest calls, fewer than 1 %% "
	     "but more than 0.1 %%, will be cut; find out why they are slow", what,
	     t(p999, a, sizeof(a)), r, t(p99, b, sizeof(b)));
	return 2.0;
}

/* A note shared by every value taken from few calls. */
static void few_calls(struct tb_suggestion *s, const struct tb_suggest_in *in)
{
	if (in->calls < TB_SUGGEST_FEW_CALLS)
		warn(s, "only %llu calls were measured: a p99 of so few is little more than the "
		     "slowest of them; observe longer for limits you can trust",
		     (unsigned long long)in->calls);
}

static void choose_phases(const struct tb_suggest_in *in, struct tb_suggestion *s)
{
	const struct tb_dist *rd = in->call.total > 0 ? &in->call : &in->first_byte;
	char f[200], a[24];
	int64_t rp99 = in->call.total > 0 ? s->call_p99 : s->fb_p99;
	int64_t rp999 = in->call.total > 0 ? s->call_p999 : s->fb_p999;

	s->fb_factor = factor(&in->first_byte, s->fb_p99, s->fb_p999, "first byte", f, sizeof(f),
			      s);
	s->first_byte.ns = up_ms(s->fb_factor * (double)s->fb_p99);
	say(s->first_byte.why, "%.2f x the first-byte p99 %s (%s)", s->fb_factor,
	    t(s->fb_p99, a, sizeof(a)), f);

	s->call_factor = factor(rd, rp99, rp999, "call", f, sizeof(f), s);
	s->read.ns = up_ms(s->call_factor * (double)rp99);
	if (in->call.total > 0)
		say(s->read.why, "%.2f x the call's p99 %s: a gap between two chunks is never "
		    "longer than its call, whose p99 bounds it (%s)", s->call_factor,
		    t(rp99, a, sizeof(a)), f);
	else
		say(s->read.why, "%.2f x the first-byte p99 %s: no call was seen to its end, so "
		    "the wait for the answer bounds the gaps (%s)", s->call_factor,
		    t(rp99, a, sizeof(a)), f);
	if (s->read.ns < s->first_byte.ns) {
		/* A call is never shorter than its wait for the first byte; the factors differ. */
		s->read.ns = s->first_byte.ns;
		say(s->read.why, "first_byte_timeout's value: %.2f x the call's p99 %s would be "
		    "below it (%s)", s->call_factor, t(rp99, a, sizeof(a)), f);
	}

	if (s->connect_p99 >= 0) {
		char g[200];
		double cf = factor(&in->connect, s->connect_p99,
				   tb_dist_quantile_ns(&in->connect, 0.999), "connect", g,
				   sizeof(g), NULL); /* a slow handshake's warning: the floor's */
		int64_t c = up_ms(cf * (double)s->connect_p99);

		if (c < TB_SUGGEST_CONNECT_FLOOR_NS) {
			s->connect.ns = TB_SUGGEST_CONNECT_FLOOR_NS;
			say(s->connect.why, "the floor of 100ms, the seed's same-datacentre round "
			    "trip: %.2f x the handshake p99 %s would be %s, where a pause of this "
			    "host, not the network, would decide", cf,
			    t(s->connect_p99, a, sizeof(a)), t(c, f, sizeof(f)));
		} else {
			s->connect.ns = c;
			say(s->connect.why, "%.2f x the handshake p99 %s (%s)", cf,
			    t(s->connect_p99, a, sizeof(a)), g);
		}
	} else {
		say(s->connect.why, "no handshake was measured (connections opened before "
		    "observing began)");
	}
}

static void choose_gate(const struct tb_suggest_in *in, struct tb_suggestion *s)
{
	char a[24];
	long want;

	s->little = -1;
	if (in->qps < 0) {
		say(s->why_max_conns, "no rate is known (a stats file read once has no time "
		    "base): read it over --qps-window, or size it by QPS x p99 x 1.5 yourself");
		return;
	}
	if (in->qps == 0) {
		say(s->why_max_conns, "no call began in the rate window");
		return;
	}
	if (s->call_p99 <= 0) {
		/* Calls began, but none was seen to end: a call ends when the next request
		 * follows its response, at EOF, or when the program closes it after a response. */
		say(s->why_max_conns, "%.1f calls/s began, but none was seen to end with its "
		    "response (every one was cut or closed before its answer was complete), so "
		    "no call's duration is known", in->qps);
		return;
	}
	s->little = in->qps * (double)s->call_p99 / 1e9;
	want = (long)(s->little * 1.5);
	if ((double)want < s->little * 1.5)
		want++;
	if (want < 1)
		want = 1;
	if (want > TB_MAX_CONNS_LIMIT)
		want = TB_MAX_CONNS_LIMIT; /* the largest count a setting takes */
	if (in->leased > want && in->leased <= TB_MAX_CONNS_LIMIT) {
		s->max_conns = (int)in->leased;
		say(s->why_max_conns, "the %ld connections the program held open when read: "
		    "Little's law asks only %ld (%.1f calls/s x the call's p99 %s x 1.5), but a "
		    "smaller cap would make its own pool's connects wait", in->leased, want,
		    in->qps, t(s->call_p99, a, sizeof(a)));
		if (in->leased > 2 * want)
			warn(s, "max_conns %ld is more than twice what the load needs (%ld): timebox "
			     "check will say cap-vs-littles-law; shrink the program's pool, then "
			     "the cap", in->leased, want);
	} else {
		s->max_conns = (int)want;
		say(s->why_max_conns, "Little's law: %.1f calls/s x the call's p99 %s = %.2f "
		    "in flight, x 1.5 (the seed), rounded up", in->qps,
		    t(s->call_p99, a, sizeof(a)), s->little);
	}
	s->acquire.ns = TB_SUGGEST_ACQUIRE_NS;
	say(s->acquire.why, "the seed: tens of milliseconds; a full gate means the downstream "
	    "is saturated, and failing fast beats queueing");
}

/* A phase limit that cannot fire before the deadline is left off (the lint's
 * phase-never-fires): the deadline bounds that wait. */
static void under_deadline(struct tb_suggest_value *v, const char *key, int64_t deadline)
{
	char a[24], b[24];

	if (v->ns > 0 && v->ns >= deadline) {
		say(v->why, "left off: %s %s would not fire before the deadline %s, which bounds "
		    "this wait", key, t(v->ns, a, sizeof(a)), t(deadline, b, sizeof(b)));
		v->ns = 0;
	}
}

static void fit_budget(const struct tb_suggest_in *in, int64_t budget, struct tb_suggestion *s)
{
	char a[24], b[24], c[24];
	int64_t room, sum;

	(void)in;
	s->deadline.ns = budget;
	say(s->deadline.why, "the budget given (--budget %s): the whole call, the program's own "
	    "retries included", tb_duration_format(budget, a, sizeof(a)));
	if (s->call_p99 >= budget || (s->call_p99 < 0 && s->fb_p99 >= budget))
		warn(s, "this hop's p99 (%s) does not fit the upstream budget (%s): more than 1 %% "
		     "of its calls would be cut; change the call (batch, cache, asynchronous), "
		     "not the timeout", t(s->call_p99 >= 0 ? s->call_p99 : s->fb_p99, a, sizeof(a)),
		     t(budget, b, sizeof(b)));
	else if (s->read.ns >= budget)
		warn(s, "this hop's p99 does not fit the upstream budget with the seed's margin: "
		     "read_timeout would be %s, the budget is %s; calls slower than %s are cut by "
		     "the deadline; change the call, not the timeout", t(s->read.ns, a, sizeof(a)),
		     t(budget, b, sizeof(b)), t(budget, c, sizeof(c)));
	under_deadline(&s->first_byte, "first_byte_timeout", budget);
	under_deadline(&s->read, "read_timeout", budget);
	under_deadline(&s->connect, "connect_timeout", budget);
	under_deadline(&s->acquire, "acquire_timeout", budget);

	/* acquire + connect + first_byte of one attempt must fit (phases-exceed-deadline). */
	sum = s->acquire.ns + s->connect.ns + s->first_byte.ns;
	if (sum <= budget || s->acquire.ns + s->connect.ns == 0)
		return;
	room = budget - s->first_byte.ns;
	{
		int64_t both = s->acquire.ns + s->connect.ns;
		int64_t acq = down_ms((int64_t)((double)s->acquire.ns * (double)room / (double)both));
		int64_t con = down_ms(room - acq);
		int64_t was = s->connect.ns;

		if (s->connect.ns > 0 && con < MS) {
			say(s->connect.why, "left off: no room is left in the budget %s after "
			    "first_byte_timeout %s; the deadline bounds the handshake",
			    t(budget, a, sizeof(a)), t(s->first_byte.ns, b, sizeof(b)));
			s->connect.ns = 0;
		} else if (s->connect.ns > 0) {
			s->connect.ns = con;
			say(s->connect.why, "%s, shrunk from %s so that acquire + connect + first "
			    "byte fit in the budget %s", t(con, a, sizeof(a)), t(was, b, sizeof(b)),
			    t(budget, c, sizeof(c)));
			if (s->connect_p99 > 0 && con < s->connect_p99 * 3 / 2)
				warn(s, "connect_timeout %s is below 1.5x the handshake p99 (%s): the "
				     "budget leaves no more; slow handshakes will be cut",
				     t(con, a, sizeof(a)), t(s->connect_p99, b, sizeof(b)));
		}
		if (s->acquire.ns > 0 && acq < MS) {
			say(s->acquire.why, "left off: no room is left in the budget %s; the "
			    "deadline bounds the wait for a slot", t(budget, a, sizeof(a)));
			s->acquire.ns = 0;
		} else if (s->acquire.ns > 0) {
			s->acquire.ns = acq;
			say(s->acquire.why, "%s: the seed's tens of milliseconds, shrunk so that "
			    "acquire + connect + first byte fit in the budget %s",
			    t(acq, a, sizeof(a)), t(budget, b, sizeof(b)));
		}
	}
}

void tb_suggest(const struct tb_suggest_in *in, const struct tb_suggest_opts *o,
		struct tb_suggestion *out)
{
	struct tb_suggestion *s = out;
	char a[24], b[24], c[24];

	memset(s, 0, sizeof(*s));
	s->connect_p99 = tb_dist_quantile_ns(&in->connect, 0.99);
	s->fb_p99 = tb_dist_quantile_ns(&in->first_byte, 0.99);
	s->fb_p999 = tb_dist_quantile_ns(&in->first_byte, 0.999);
	s->call_p99 = tb_dist_quantile_ns(&in->call, 0.99);
	s->call_p999 = tb_dist_quantile_ns(&in->call, 0.999);
	s->little = -1;
	if (s->fb_p99 < 0) {
		say(s->skipped, "no response was measured (%llu calls begun): nothing to base "
		    "limits on", (unsigned long long)in->calls);
		return;
	}
	s->usable = true;
	few_calls(s, in);
	if (in->coarse)
		warn(s, "read from a stats file, whose buckets are powers of two: each p99 is "
		     "known within a factor of 2 (interpolated); `timebox suggest PID` reads the "
		     "finer histograms");
	choose_phases(in, s);
	choose_gate(in, s);
	if (o->budget_ns > 0) {
		fit_budget(in, o->budget_ns, s);
		return;
	}
	s->deadline.ns = 2 * s->read.ns + s->connect.ns + s->acquire.ns;
	say(s->deadline.why, "no --budget given: 2 x read_timeout %s + connect_timeout %s + "
	    "acquire_timeout %s, room for one attempt and a retry (timebox check's own formula); "
	    "set --budget to what your caller allows", t(s->read.ns, a, sizeof(a)),
	    t(s->connect.ns, b, sizeof(b)), t(s->acquire.ns, c, sizeof(c)));
}
