/* suggest_text.c - `timebox suggest`'s output: a configuration file (timebox.conf(5)) with a
 * comment on every value saying where it came from. Pure code: writes into the caller's buffer. */
#include "suggest.h"

#include <stdio.h>
#include <string.h>

#include "textbuf.h"

#include "duration.h"

/* A string value: the statistics' texts are addresses and hostnames, but a quote or a
 * backslash would end the string early, so they are escaped the way libconfig reads them. */
static void put_string(struct tb_textbuf *o, const char *s)
{
	tb_textbuf_put(o, "\"");
	for (; *s; s++)
		tb_textbuf_put(o, (*s == '"' || *s == '\\') ? "\\%c" : "%c", *s);
	tb_textbuf_put(o, "\"");
}

static const char *ms(int64_t ns, char *buf, size_t len)
{
	if (ns < 0)
		snprintf(buf, len, "-");
	else if (ns < 1000000)
		snprintf(buf, len, "%lldus", (long long)(ns / 1000));
	else
		snprintf(buf, len, "%.1fms", (double)ns / 1e6);
	return buf;
}

static void value(struct tb_textbuf *o, const char *key, const struct tb_suggest_value *v)
{
	char d[TB_DURATION_TEXT_MAX];

	if (v->why[0] == '\0')
		return;
	if (v->ns <= 0) {
		tb_textbuf_put(o, "    # %s: %s\n", key, v->why);
		return;
	}
	tb_textbuf_put(o, "    # %s\n    %s = \"%s\";\n", v->why, key,
		       tb_duration_format(v->ns, d, sizeof(d)));
}

/* The port of "1.2.3.4:80" or "[::1]:80": the text after the last colon. */
static const char *port_of(const char *dest)
{
	const char *c = strrchr(dest, ':');

	return c != NULL ? c + 1 : "";
}

static void rule(struct tb_textbuf *o, const struct tb_suggest_in *in,
		 const struct tb_suggestion *s)
{
	char a[24], b[24], c[24], e[24], f[24], d[TB_DURATION_TEXT_MAX];

	tb_textbuf_put(o, "  # %s%s%s%s: %llu calls", in->dest, in->host[0] ? " (" : "", in->host,
	    in->host[0] ? ")" : "", (unsigned long long)in->calls);
	if (in->qps >= 0)
		tb_textbuf_put(o, ", %.1f calls/s", in->qps);
	if (in->leased >= 0)
		tb_textbuf_put(o, ", %ld connections open", in->leased);
	tb_textbuf_put(o, "\n  #   first byte p50 %s p99 %s p99.9 %s; call p99 %s p99.9 %s; handshake "
	       "p99 %s\n",
	    ms(tb_dist_quantile_ns(&in->first_byte, 0.5), a, sizeof(a)),
	    ms(s->fb_p99, b, sizeof(b)), ms(s->fb_p999, c, sizeof(c)),
	    ms(s->call_p99, e, sizeof(e)), ms(s->call_p999, f, sizeof(f)),
	    ms(s->connect_p99, d, sizeof(d)));
	if (!s->usable) {
		tb_textbuf_put(o, "  #   no rule: %s\n", s->skipped);
		return;
	}
	for (int i = 0; i < s->nwarnings; i++)
		tb_textbuf_put(o, "  #   WARNING: %s\n", s->warning[i]);
	tb_textbuf_put(o, "  { match = ");
	if (in->host[0] != '\0') {
		char named[2 * TB_SUGGEST_TEXT];

		snprintf(named, sizeof(named), "%s:%s", in->host, port_of(in->dest));
		tb_textbuf_put(o, "[ ");
		put_string(o, named);
		tb_textbuf_put(o, ", ");
		put_string(o, in->dest);
		tb_textbuf_put(o, " ];\n");
	} else {
		put_string(o, in->dest);
		tb_textbuf_put(o, ";\n");
	}
	value(o, "connect_timeout", &s->connect);
	value(o, "first_byte_timeout", &s->first_byte);
	value(o, "read_timeout", &s->read);
	value(o, "deadline", &s->deadline);
	if (s->max_conns > 0) {
		tb_textbuf_put(o, "    # %s\n    max_conns = %d;\n", s->why_max_conns, s->max_conns);
		value(o, "acquire_timeout", &s->acquire);
		/* The measurements themselves, so that `timebox check` can hold the cap against
		 * Little's law again when the load changes (rounded up to the microsecond). */
		tb_textbuf_put(o, "    # what was measured: timebox check's cap-vs-littles-law compares "
		       "max_conns with them\n    expected_rps = %.1f;\n    expected_p99 = \"%s\";\n",
		    in->qps, tb_duration_format((s->call_p99 + 999) / 1000 * 1000, d, sizeof(d)));
	} else {
		tb_textbuf_put(o, "    # max_conns: left off: %s\n", s->why_max_conns);
	}
	tb_textbuf_put(o, "  }");
}

size_t tb_suggest_render(const struct tb_suggest_in *in, const struct tb_suggestion *s,
			 size_t n, const struct tb_suggest_opts *o, const char *source,
			 const char *qps_from, char *buf, size_t len)
{
	struct tb_textbuf w = { buf, len, 0 };
	char d[TB_DURATION_TEXT_MAX];
	size_t rules = 0;

	if (len > 0)
		buf[0] = '\0';
	tb_textbuf_put(&w, "# Suggested by `timebox suggest` from %s.\n", source);
	tb_textbuf_put(&w, "# Latencies: every call measured since the process started. Rate: %s.\n",
	    qps_from);
	if (o->budget_ns > 0)
		tb_textbuf_put(&w, "# Budget: %s per call (--budget), the deadline of every rule.\n",
		    tb_duration_format(o->budget_ns, d, sizeof(d)));
	else
		tb_textbuf_put(&w, "# Budget: none given (--budget): each deadline leaves room for one retry.\n");
	tb_textbuf_put(&w, "# The seed's rules: timeouts 1.5-2 x the p99, a pool of QPS x p99 x 1.5.\n"
		"# Check it with `timebox check FILE`, then `timebox run --config FILE -- COMMAND`.\n"
		"# Destinations not listed were not observed: no limit applies to them.\n\n"
		"destinations = (\n");
	for (size_t i = 0; i < n; i++) {
		if (s[i].usable && rules++ > 0)
			tb_textbuf_put(&w, ",\n");
		else if (!s[i].usable && rules > 0)
			tb_textbuf_put(&w, "\n");
		rule(&w, &in[i], &s[i]);
	}
	tb_textbuf_put(&w, "\n);\n");
	return w.n;
}
