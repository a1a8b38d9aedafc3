/* test_propagate.c - deadline propagation: every accepted and refused form of an inbound
 * head's deadline, split at every byte; the outbound header under every partial accept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "propagate.h"
#include "unit.h"

/* ---------------------------------- inbound ---------------------------------- */

/* Feeds s whole to a fresh parser: the final result's ns (-1: none), and the last status. */
static int64_t in_whole(const char *name, const char *s, int *st, struct tb_prop_in *p)
{
	tb_prop_in_reset(p);
	*st = tb_prop_in_feed(p, name, s, strlen(s));
	return tb_prop_in_result(p)->ns;
}

/* The deadline of a head with one extra line `line` (CRLF added). */
static int64_t in_line(const char *name, const char *line)
{
	char buf[512];
	struct tb_prop_in p;
	int st;
	int64_t ns;

	snprintf(buf, sizeof(buf), "GET /a HTTP/1.1\r\nHost: x\r\n%s\r\nAccept: */*\r\n\r\n",
		 line);
	ns = in_whole(name, buf, &st, &p);
	assert_int_equal(st, TB_PIN_HEAD_DONE);
	return ns;
}

static void test_in_accepted_forms(void **state)
{
	(void)state;
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 1000"), 1000 * MS);
	assert_int_equal(in_line(NULL, "x-deadline-ms:250"), 250 * MS);
	assert_int_equal(in_line(NULL, "X-DEADLINE-MS: \t 42 \t"), 42 * MS);
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 0"), 0); /* already expired: valid */
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 00000007"), 7 * MS);
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 99999999"), 99999999 * MS);
	/* grpc-timeout's syntax in the configured header */
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 2H"), 2 * 3600 * S);
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 3M"), 3 * 60 * S);
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 4S"), 4 * S);
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 5m"), 5 * MS);
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 6u"), 6000);
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 7n "), 7);
	/* the largest grpc value is capped, never wraps */
	assert_int_equal(in_line(NULL, "X-Deadline-Ms: 99999999H"), TB_PROP_NS_CAP);
	/* Envoy's header, integer milliseconds */
	assert_int_equal(in_line(NULL, "x-envoy-expected-rq-timeout-ms: 200"), 200 * MS);
	assert_int_equal(in_line(NULL, "X-Envoy-Expected-Rq-Timeout-Ms:15"), 15 * MS);
	/* a configured name */
	assert_int_equal(in_line("grpc-timeout", "Grpc-Timeout: 100m"), 100 * MS);
	assert_int_equal(in_line("X-Budget", "x-budget: 9"), 9 * MS);
	assert_int_equal(in_line("X-Budget", "X-Deadline-Ms: 9"), -1); /* not configured */
}

static void test_in_source_and_value_for_the_log(void **state)
{
	struct tb_prop_in p;
	int st;

	(void)state;
	in_whole(NULL, "GET / HTTP/1.1\r\nX-Deadline-Ms:  250m \r\n\r\n", &st, &p);
	assert_int_equal(tb_prop_in_result(&p)->source, TB_PROP_SRC_HEADER);
	assert_string_equal(tb_prop_in_result(&p)->value, "250m");
	assert_int_equal(tb_prop_in_result(&p)->bad, 0);
	in_whole(NULL, "GET / HTTP/1.1\r\nx-envoy-expected-rq-timeout-ms: 80\r\n\r\n", &st, &p);
	assert_int_equal(tb_prop_in_result(&p)->source, TB_PROP_SRC_ENVOY);
	assert_string_equal(tb_prop_in_result(&p)->value, "80");
	in_whole(NULL, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", &st, &p);
	assert_int_equal(tb_prop_in_result(&p)->ns, -1);
	assert_int_equal(tb_prop_in_result(&p)->source, TB_PROP_SRC_NONE);
}

/* Refused values: each ignored, and reported once. */
static void test_in_malformed_ignored_and_reported(void **state)
{
	static const char *const bad[] = {
		"-5", "+5", "1.5", "", "   ", "abc", "123456789", "5 5", "5ms", "5s", "0x10",
		"1,2", "5H5", "5mm", "m", "1e3", "５",
	};
	char line[128];
	struct tb_prop_in p;
	int st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(line, sizeof(line), "X-Deadline-Ms: %s", bad[i]);
		print_message("value '%s'\n", bad[i]);
		assert_int_equal(in_line(NULL, line), -1);
	}
	/* Envoy's header takes no unit */
	assert_int_equal(in_line(NULL, "x-envoy-expected-rq-timeout-ms: 200m"), -1);
	/* the report: the first ignored value, as configured and as written */
	in_whole(NULL,
		 "GET / HTTP/1.1\r\nX-Deadline-Ms: -12\r\nx-envoy-expected-rq-timeout-ms: x\r\n"
		 "X-Deadline-Ms: 30\r\n\r\n", &st, &p);
	assert_int_equal(st, TB_PIN_HEAD_DONE);
	assert_int_equal(tb_prop_in_result(&p)->ns, 30 * MS); /* the good one still counts */
	assert_int_equal(tb_prop_in_result(&p)->bad, 1);
	assert_string_equal(tb_prop_in_result(&p)->bad_name, "X-Deadline-Ms");
	assert_string_equal(tb_prop_in_result(&p)->bad_value, "-12");
	/* a long junk value: truncated, bytes a log line would quote shown as '?' */
	in_whole(NULL,
		 "GET / HTTP/1.1\r\nX-Deadline-Ms: 1 \"=\\ 2345678901234567890123456789\r\n\r\n",
		 &st, &p);
	assert_int_equal(tb_prop_in_result(&p)->ns, -1);
	assert_string_equal(tb_prop_in_result(&p)->bad_value, "1?????23456789012345678");
}

static void test_in_strictest_wins(void **state)
{
	struct tb_prop_in p;
	int st;

	(void)state;
	in_whole(NULL,
		 "GET / HTTP/1.1\r\nX-Deadline-Ms: 900\r\nx-envoy-expected-rq-timeout-ms: 200\r\n"
		 "X-Deadline-Ms: 1S\r\nX-Deadline-Ms: 300\r\n\r\n", &st, &p);
	assert_int_equal(tb_prop_in_result(&p)->ns, 200 * MS);
	assert_int_equal(tb_prop_in_result(&p)->source, TB_PROP_SRC_ENVOY);
	in_whole(NULL,
		 "GET / HTTP/1.1\r\nx-envoy-expected-rq-timeout-ms: 200\r\nX-Deadline-Ms: 199999u"
		 "\r\n\r\n", &st, &p);
	assert_int_equal(tb_prop_in_result(&p)->ns, 199999 * 1000);
	assert_int_equal(tb_prop_in_result(&p)->source, TB_PROP_SRC_HEADER);
	/* a malformed copy never loosens a good one, nor counts as 0 */
	in_whole(NULL, "GET / HTTP/1.1\r\nX-Deadline-Ms: 50\r\nX-Deadline-Ms: -1\r\n\r\n", &st,
		 &p);
	assert_int_equal(tb_prop_in_result(&p)->ns, 50 * MS);
}

static void test_in_folded_line_is_not_read(void **state)
{
	(void)state;
	/* obs-fold continues the deadline's line: the value is not read, and said so */
	struct tb_prop_in p;
	int st;

	in_whole(NULL, "GET / HTTP/1.1\r\nX-Deadline-Ms: 100\r\n 200\r\nHost: x\r\n\r\n", &st, &p);
	assert_int_equal(st, TB_PIN_HEAD_DONE);
	assert_int_equal(tb_prop_in_result(&p)->ns, -1);
	assert_int_equal(tb_prop_in_result(&p)->bad, 1);
	assert_string_equal(tb_prop_in_result(&p)->bad_value, "100");
	/* a fold ending the head right before the blank line */
	in_whole(NULL, "GET / HTTP/1.1\r\nX-Deadline-Ms: 100\r\n\t\r\n\r\n", &st, &p);
	assert_int_equal(tb_prop_in_result(&p)->ns, -1);
	/* a fold of another field leaves ours alone, and a folded line never names ours */
	assert_int_equal(in_line(NULL, "Via: a\r\n b\r\nX-Deadline-Ms: 70"), 70 * MS);
	assert_int_equal(in_line(NULL, "Via: a\r\n X-Deadline-Ms: 70"), -1);
	/* whitespace before the colon: not a field we read */
	assert_int_equal(in_line(NULL, "X-Deadline-Ms : 70"), -1);
	/* a longer or shorter name */
	assert_int_equal(in_line(NULL, "X-Deadline-Msx: 70"), -1);
	assert_int_equal(in_line(NULL, "X-Deadline-M: 70"), -1);
}

static void test_in_bare_lf_and_empty_lines_before(void **state)
{
	struct tb_prop_in p;
	int st;

	(void)state;
	assert_int_equal(in_whole(NULL, "GET / HTTP/1.0\nX-Deadline-Ms: 7\n\n", &st, &p), 7 * MS);
	assert_int_equal(st, TB_PIN_HEAD_DONE);
	assert_int_equal(in_whole(NULL, "GET / HTTP/1.1\r\nX-Deadline-Ms: 7\n\r\n", &st, &p),
			 7 * MS);
	tb_prop_in_reset(&p);
	assert_int_equal(tb_prop_in_feed(&p, NULL, "\r\n\r\n", 4), TB_PIN_IDLE);
	assert_false(tb_prop_in_started(&p));
	assert_int_equal(tb_prop_in_feed(&p, NULL, "GET", 3), TB_PIN_HEAD_STARTED);
	assert_true(tb_prop_in_started(&p));
	assert_int_equal(tb_prop_in_feed(&p, NULL, " / HTTP/1.1\r\n", 13), TB_PIN_IN_HEAD);
	assert_false(tb_prop_in_started(&p));
	assert_int_equal(tb_prop_in_feed(&p, NULL, "", 0), TB_PIN_IN_HEAD);
	assert_int_equal(tb_prop_in_feed(&p, NULL, "\r\nbody", 6), TB_PIN_HEAD_DONE);
	assert_int_equal(tb_prop_in_feed(&p, NULL, "X-Deadline-Ms: 1\r\n\r\n", 20), TB_PIN_BODY);
	assert_int_equal(tb_prop_in_result(&p)->ns, -1); /* a body is never read */
	/* idle to done in one feed */
	tb_prop_in_reset(&p);
	assert_int_equal(tb_prop_in_feed(&p, NULL, "GET / HTTP/1.1\r\n\r\n", 18), TB_PIN_HEAD_DONE);
	assert_true(tb_prop_in_started(&p));
}

static void test_in_not_http(void **state)
{
	static const char tls[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
	static const char pg[] = "\0\0\0\x08\x04\xd2\x16\x2f";
	struct tb_prop_in p;
	int st;

	(void)state;
	tb_prop_in_reset(&p);
	assert_int_equal(tb_prop_in_feed(&p, NULL, tls, sizeof(tls) - 1), TB_PIN_NOT_HTTP);
	assert_false(tb_prop_in_started(&p));
	tb_prop_in_reset(&p);
	assert_int_equal(tb_prop_in_feed(&p, NULL, pg, sizeof(pg) - 1), TB_PIN_NOT_HTTP);
	in_whole(NULL, "*1\r\n$4\r\nPING\r\n", &st, &p);
	assert_int_equal(st, TB_PIN_NOT_HTTP);
	assert_true(tb_prop_in_started(&p)); /* '*' may begin a method */
	in_whole(NULL, "SET k X-Deadline-Ms:\r\n", &st, &p);
	assert_int_equal(st, TB_PIN_NOT_HTTP);
	in_whole(NULL, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &st, &p);
	assert_int_equal(st, TB_PIN_NOT_HTTP);
	in_whole(NULL, "GET /\r\n", &st, &p); /* HTTP/0.9 */
	assert_int_equal(st, TB_PIN_NOT_HTTP);
	in_whole(NULL, "GET  / HTTP/1.1\r\n\r\n", &st, &p);
	assert_int_equal(st, TB_PIN_NOT_HTTP);
	in_whole(NULL, "GET / HTTP/1.1 \r\n\r\n", &st, &p);
	assert_int_equal(st, TB_PIN_NOT_HTTP);
	assert_int_equal(tb_prop_in_feed(&p, NULL, "GET / HTTP/1.1\r\n\r\n", 18), TB_PIN_NOT_HTTP);
}

/* A method is at most TB_PROP_METHOD_MAX bytes: 32 is read, 33 is no HTTP (a binary stream
 * of token characters is given up there, not scanned to the head's bound). */
static void test_in_method_bound(void **state)
{
	char head[128];
	int st;
	struct tb_prop_in p;

	(void)state;
	snprintf(head, sizeof(head), "%.*s / HTTP/1.1\r\nX-Deadline-Ms: 250\r\n\r\n",
		 TB_PROP_METHOD_MAX, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ");
	assert_true(in_whole(NULL, head, &st, &p) > 0);
	assert_int_equal(st, TB_PIN_HEAD_DONE);
	snprintf(head, sizeof(head), "%.*s / HTTP/1.1\r\nX-Deadline-Ms: 250\r\n\r\n",
		 TB_PROP_METHOD_MAX + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ");
	in_whole(NULL, head, &st, &p);
	assert_int_equal(st, TB_PIN_NOT_HTTP);
}

static void test_in_malformed_head_given_up(void **state)
{
	struct tb_prop_in p;
	int st;

	(void)state;
	/* a bare CR */
	assert_int_equal(in_whole(NULL, "GET / HTTP/1.1\r\nX-Deadline-Ms: 5\rX: 1\r\n\r\n", &st, &p),
			 -1);
	assert_int_equal(st, TB_PIN_BODY);
	/* a NUL in a field */
	static const char nul[] = "GET / HTTP/1.1\r\nX-Deadline-Ms: 5\r\nA: \0\r\n\r\n";
	tb_prop_in_reset(&p);
	assert_int_equal(tb_prop_in_feed(&p, NULL, nul, sizeof(nul) - 1), TB_PIN_BODY);
	assert_int_equal(tb_prop_in_result(&p)->ns, -1);
}

static void test_in_huge_head_bounded(void **state)
{
	size_t big = TB_PROP_HEAD_MAX + 100;
	char *h = malloc(big + 64);
	struct tb_prop_in p;
	size_t n;
	int st;

	(void)state;
	if (h == NULL)
		abort();
	/* the deadline comes first, then a field that takes the head past the bound */
	n = (size_t)sprintf(h, "GET / HTTP/1.1\r\nX-Deadline-Ms: 5\r\nX-Pad: ");
	memset(h + n, 'a', big - n);
	memcpy(h + big, "\r\n\r\n", 5);
	tb_prop_in_reset(&p);
	st = tb_prop_in_feed(&p, NULL, h, big + 4);
	assert_int_equal(st, TB_PIN_BODY);
	assert_int_equal(tb_prop_in_result(&p)->ns, -1);
	/* exactly at the bound is fine */
	n = (size_t)sprintf(h, "GET / HTTP/1.1\r\nX-Deadline-Ms: 5\r\nX-Pad: ");
	memset(h + n, 'a', TB_PROP_HEAD_MAX - 4 - n);
	memcpy(h + TB_PROP_HEAD_MAX - 4, "\r\n\r\n", 5);
	assert_int_equal(in_whole(NULL, h, &st, &p), 5 * MS);
	assert_int_equal(st, TB_PIN_HEAD_DONE);
	/* a long name is skipped without keeping it, a long value of another field too */
	memset(h, 0, big + 64);
	n = (size_t)sprintf(h, "GET / HTTP/1.1\r\n");
	memset(h + n, 'N', 5000);
	memcpy(h + n + 5000, ": v\r\nX-Deadline-Ms: 6\r\n\r\n", sizeof(": v\r\nX-Deadline-Ms: 6\r\n\r\n"));
	assert_int_equal(in_whole(NULL, h, &st, &p), 6 * MS);
	free(h);
}

/* Every split of a head into two feeds, and byte by byte, gives the one-feed result. */
static void split_everywhere(const char *head, int64_t want)
{
	size_t n = strlen(head);
	struct tb_prop_in p;
	int st, st2, started;

	for (size_t i = 0; i <= n; i++) {
		tb_prop_in_reset(&p);
		st = tb_prop_in_feed(&p, NULL, head, i);
		started = tb_prop_in_started(&p);
		st2 = tb_prop_in_feed(&p, NULL, head + i, n - i);
		started += tb_prop_in_started(&p);
		assert_int_equal(tb_prop_in_result(&p)->ns, want);
		assert_true(st == TB_PIN_HEAD_DONE || st2 == TB_PIN_HEAD_DONE);
		assert_int_equal(started, 1); /* said once */
	}
	tb_prop_in_reset(&p);
	st = 0;
	for (size_t i = 0; i < n; i++)
		if (tb_prop_in_feed(&p, NULL, head + i, 1) == TB_PIN_HEAD_DONE)
			st++;
	assert_int_equal(st, 1);
	assert_int_equal(tb_prop_in_result(&p)->ns, want);
}

static void test_in_split_at_every_byte(void **state)
{
	(void)state;
	split_everywhere("GET /a HTTP/1.1\r\nHost: x\r\nX-Deadline-Ms: 1500\r\n\r\n", 1500 * MS);
	split_everywhere("\r\nPOST /b?c=d HTTP/1.0\nx-envoy-expected-rq-timeout-ms:\t20\n"
			 "X-DEADLINE-MS: 3S\nX-Deadline-Ms: 19\n 1\n\nbody", 20 * MS);
	split_everywhere("GET / HTTP/1.1\r\nX-Deadline-Ms: 12345678\r\n"
			 "X-Deadline-Ms: 123456789\r\n\r\n", 12345678 * MS);
	split_everywhere("GET / HTTP/1.1\r\nX-Deadline-Ms: 7\r\n\t8\r\n\r\n", -1);
}

/* ---------------------------------- outbound ---------------------------------- */

#define HDR "X-Deadline-Ms"

/* A program writing `prog` on a socket whose kernel accepts, at its c-th call, at most
 * acc[c] bytes (all once the schedule ends); the program splits its bytes into sends at
 * `cuts` (each send resent from where the kernel stopped, as programs do) and each send
 * into iovecs of `piece` bytes (0: one). Collects what the kernel accepted. */
struct stream {
	const char *prog;
	size_t len;
	const size_t *cuts;  /* ends of the program's sends, ascending; the last is len */
	size_t ncuts;
	size_t piece;
	const size_t *acc;
	size_t nacc;
	int64_t ms;
	int outmax;          /* 0: enough */
	const char *name;
	char wire[8192];
	size_t wlen;
	size_t calls;
	bool carried, missed;
};

static void run_stream(struct stream *s)
{
	struct tb_prop_out o;
	size_t pos = 0, c = 0, single = s->len;
	size_t calls = 0;

	tb_prop_out_reset(&o);
	s->wlen = 0;
	if (s->ncuts == 0) {
		s->cuts = &single;
		s->ncuts = 1;
	}
	for (size_t w = 0; w < s->ncuts; w++) {
		size_t end = s->cuts[w];

		while (pos < end) {
			struct iovec in[256], out[256 + TB_PROP_IOV_EXTRA];
			char scratch[TB_PROP_SCRATCH];
			size_t n = end - pos, step = s->piece ? s->piece : n, total = 0, k, p;
			int inn = 0, cnt, outmax;

			for (size_t q = pos; q < end; q += step) {
				assert_true(inn < 256);
				in[inn].iov_base = (char *)s->prog + q;
				in[inn++].iov_len = end - q < step ? end - q : step;
			}
			outmax = s->outmax ? s->outmax : inn + TB_PROP_IOV_EXTRA;
			memset(scratch, '#', sizeof(scratch));
			cnt = tb_prop_out_plan(&o, s->name ? s->name : HDR, s->ms, in, inn, out,
					       outmax, scratch);
			assert_true(cnt >= 0 && cnt <= outmax);
			const struct iovec *v = cnt ? out : in;
			int vn = cnt ? cnt : inn;

			for (int i = 0; i < vn; i++)
				total += v[i].iov_len;
			k = c < s->nacc ? s->acc[c] : SIZE_MAX;
			c++;
			if (k > total)
				k = total;
			for (int i = 0, left = (int)k; i < vn && left > 0; i++) {
				size_t t = v[i].iov_len < (size_t)left ? v[i].iov_len : (size_t)left;

				assert_true(s->wlen + t <= sizeof(s->wire));
				memcpy(s->wire + s->wlen, v[i].iov_base, t);
				s->wlen += t;
				left -= (int)t;
			}
			p = tb_prop_out_sent(&o, k);
			assert_true(p <= n); /* a write of n reports at most n */
			if (k == total && cnt == 0)
				assert_int_equal(p, n);
			pos += p;
			assert_true(++calls < 10000);
		}
	}
	assert_int_equal(pos, s->len); /* the counts the program was told sum to its total */
	assert_false(tb_prop_out_pending(&o));
	s->calls = calls;
	s->carried = tb_prop_out_carried(&o);
	s->missed = tb_prop_out_missed(&o);
}

/* prog with `ins` inserted after its first line end. */
static size_t expect_inserted(char *dst, const char *prog, size_t len, const char *ins)
{
	const char *lf = memchr(prog, '\n', len);
	size_t a = (size_t)(lf - prog) + 1, il = strlen(ins);

	memcpy(dst, prog, a);
	memcpy(dst + a, ins, il);
	memcpy(dst + a + il, prog + a, len - a);
	return len + il;
}

static void assert_wire(const struct stream *s, const char *want, size_t wl)
{
	if (s->wlen != wl || memcmp(s->wire, want, wl) != 0) {
		print_error("wire (%zu): '%.*s'\nwant (%zu): '%.*s'\n", s->wlen, (int)s->wlen,
			    s->wire, wl, (int)wl, want);
		fail();
	}
}

#define GET1 "GET /a HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\n\r\n"
#define POST1 "POST /b HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world"

static void test_out_inserted_after_request_line(void **state)
{
	char want[512];
	size_t wl;
	struct stream s = { .prog = GET1, .len = strlen(GET1), .ms = 734 };

	(void)state;
	run_stream(&s);
	wl = expect_inserted(want, s.prog, s.len, HDR ": 734\r\n");
	assert_wire(&s, want, wl);
	assert_true(s.carried);
	assert_false(s.missed);
	/* bare LF request line, a configured name, the largest value */
	struct stream s2 = { .prog = "GET / HTTP/1.0\nHost: x\n\n", .len = 24, .ms = 99999999,
			     .name = "X-Budget" };
	run_stream(&s2);
	assert_wire(&s2, "GET / HTTP/1.0\nX-Budget: 99999999\r\nHost: x\n\n", 44);
	/* a budget the header cannot say: nothing written */
	struct stream s3 = { .prog = GET1, .len = strlen(GET1), .ms = 100000000 };
	run_stream(&s3);
	assert_wire(&s3, GET1, strlen(GET1));
	assert_false(s3.carried);
}

/* The invariant under every partial accept: at its first call the kernel takes k bytes
 * (every k from 0 to all), then the rest. */
static void every_k(const char *prog, size_t len, const size_t *cuts, size_t ncuts,
		    size_t piece, const char *want, size_t wl)
{
	for (size_t k = 0; k <= wl + 1; k++) {
		size_t acc[1] = { k };
		struct stream s = { .prog = prog, .len = len, .cuts = cuts, .ncuts = ncuts,
				    .piece = piece, .acc = acc, .nacc = 1, .ms = 250 };

		run_stream(&s);
		assert_wire(&s, want, wl);
	}
	/* two partial accepts: k1 then k2, both small around the insertion */
	for (size_t k1 = 0; k1 <= 60 && k1 <= wl; k1++)
		for (size_t k2 = 0; k2 <= 30; k2++) {
			size_t acc[3] = { k1, k2, 1 };
			struct stream s = { .prog = prog, .len = len, .cuts = cuts,
					    .ncuts = ncuts, .piece = piece, .acc = acc,
					    .nacc = 3, .ms = 250 };

			run_stream(&s);
			assert_wire(&s, want, wl);
		}
}

static void test_out_every_partial_accept(void **state)
{
	char want[512];
	size_t wl;

	(void)state;
	wl = expect_inserted(want, GET1, strlen(GET1), HDR ": 250\r\n");
	every_k(GET1, strlen(GET1), NULL, 0, 0, want, wl);
	every_k(GET1, strlen(GET1), NULL, 0, 1, want, wl); /* one byte per iovec */
	every_k(GET1, strlen(GET1), NULL, 0, 7, want, wl);
	wl = expect_inserted(want, POST1, strlen(POST1), HDR ": 250\r\n");
	every_k(POST1, strlen(POST1), NULL, 0, 0, want, wl);
	every_k(POST1, strlen(POST1), NULL, 0, 3, want, wl);
}

/* The program's own sends split the request line anywhere (write after write), each
 * send's iovecs split too. */
static void test_out_request_line_split_across_sends(void **state)
{
	char want[512];
	size_t wl = expect_inserted(want, POST1, strlen(POST1), HDR ": 250\r\n");
	size_t len = strlen(POST1);

	(void)state;
	for (size_t a = 1; a < len; a++) {
		size_t cuts[2] = { a, len };
		struct stream s = { .prog = POST1, .len = len, .cuts = cuts, .ncuts = 2,
				    .ms = 250 };

		run_stream(&s);
		assert_wire(&s, want, wl);
		if (a % 5 == 0)
			every_k(POST1, len, cuts, 2, 2, want, wl);
	}
	/* one byte per send */
	size_t cuts[128];
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	struct stream s = { .prog = POST1, .len = len, .cuts = cuts, .ncuts = len, .ms = 250 };
	run_stream(&s);
	assert_wire(&s, want, wl);
}

/* A program's own copy of the header: lowered in place to ours, padded; one header. */
static void test_out_program_copy_lowered_in_place(void **state)
{
	static const char prog[] = "GET / HTTP/1.1\r\nHost: x\r\nX-Deadline-Ms: 5000\r\n\r\n";
	static const char want[] = "GET / HTTP/1.1\r\nHost: x\r\nX-Deadline-Ms: 250 \r\n\r\n";
	size_t len = sizeof(prog) - 1;

	(void)state;
	every_k(prog, len, NULL, 0, 0, want, len);
	every_k(prog, len, NULL, 0, 4, want, len);
	/* smaller than ours: kept as written, nothing inserted */
	static const char small[] = "GET / HTTP/1.1\r\nx-deadline-ms:100\r\n\r\n";
	every_k(small, sizeof(small) - 1, NULL, 0, 0, small, sizeof(small) - 1);
	/* a grpc unit: ours in milliseconds with its unit, when it fits */
	static const char unit[] = "GET / HTTP/1.1\r\nX-Deadline-Ms:   10S\r\n\r\n";
	static const char unitw[] = "GET / HTTP/1.1\r\nX-Deadline-Ms: 250m \r\n\r\n";
	every_k(unit, sizeof(unit) - 1, NULL, 0, 0, unitw, sizeof(unitw) - 1);
	/* a grpc unit that leaves no room: ours inserted, the program's left as written */
	struct stream s = { .prog = "GET / HTTP/1.1\r\nX-Deadline-Ms: 1M\r\n\r\n", .len = 37,
			    .ms = 250 };
	run_stream(&s);
	assert_wire(&s, "GET / HTTP/1.1\r\nX-Deadline-Ms: 250\r\nX-Deadline-Ms: 1M\r\n\r\n", 57);
	/* a malformed copy: ours inserted before it, the program's left as written */
	struct stream s2 = { .prog = "GET / HTTP/1.1\r\nX-Deadline-Ms: soon\r\n\r\n", .len = 39,
			     .ms = 250 };
	run_stream(&s2);
	assert_wire(&s2, "GET / HTTP/1.1\r\nX-Deadline-Ms: 250\r\nX-Deadline-Ms: soon\r\n\r\n",
		    59);
	/* only the first copy is lowered */
	struct stream s3 = { .prog = "GET / HTTP/1.1\r\nX-Deadline-Ms: 900\r\nX-Deadline-Ms: 800"
				     "\r\n\r\n", .len = 56, .ms = 250 };
	run_stream(&s3);
	assert_wire(&s3, "GET / HTTP/1.1\r\nX-Deadline-Ms: 250\r\nX-Deadline-Ms: 800\r\n\r\n", 56);
}

/* The copy in a later send than the request line: ours inserted, the copy lowered too. */
static void test_out_program_copy_in_a_later_send(void **state)
{
	static const char prog[] = "GET / HTTP/1.1\r\nX-Deadline-Ms: 5000\r\nHost: x\r\n\r\n";
	static const char want[] = "GET / HTTP/1.1\r\nX-Deadline-Ms: 250\r\n"
				   "X-Deadline-Ms: 250 \r\nHost: x\r\n\r\n";
	size_t len = sizeof(prog) - 1;
	size_t cuts[2] = { 16, len };

	(void)state;
	every_k(prog, len, cuts, 2, 0, want, sizeof(want) - 1);
	/* the copy itself split across the program's sends: not lowered (not seen whole) */
	static const char want2[] = "GET / HTTP/1.1\r\nX-Deadline-Ms: 250\r\n"
				    "X-Deadline-Ms: 5000\r\nHost: x\r\n\r\n";
	size_t cuts2[3] = { 16, 30, len };
	every_k(prog, len, cuts2, 3, 0, want2, sizeof(want2) - 1);
}

static void test_out_body_never_scanned(void **state)
{
	static const char prog[] = "POST / HTTP/1.1\r\nContent-Length: 43\r\n\r\n"
				   "GET / HTTP/1.1\r\nX-Deadline-Ms: 9999\r\n\r\n";
	char want[256];
	size_t len = sizeof(prog) - 1, wl = expect_inserted(want, prog, len, HDR ": 250\r\n");

	(void)state;
	every_k(prog, len, NULL, 0, 0, want, wl);
	/* until reset: the next request gets its own header */
	struct tb_prop_out o;
	struct iovec in = { (char *)GET1, strlen(GET1) }, out[8];
	char scratch[TB_PROP_SCRATCH];

	tb_prop_out_reset(&o);
	assert_true(tb_prop_out_plan(&o, HDR, 100, &in, 1, out, 8, scratch) > 0);
	assert_int_equal(tb_prop_out_sent(&o, strlen(GET1) + 20), strlen(GET1));
	assert_int_equal(tb_prop_out_plan(&o, HDR, 100, &in, 1, out, 8, scratch), 0);
	assert_int_equal(tb_prop_out_sent(&o, 5), 5);
	tb_prop_out_reset(&o);
	assert_true(tb_prop_out_plan(&o, HDR, 100, &in, 1, out, 8, scratch) > 0);
	assert_int_equal(tb_prop_out_sent(&o, 0), 0);
}

/* Other protocols and TLS: byte-identical, every plan unchanged. */
static void same_bytes(const char *prog, size_t len)
{
	for (size_t piece = 0; piece < 4; piece++)
		for (size_t k = 0; k <= len; k += 3) {
			size_t acc[2] = { k, 1 };
			struct stream s = { .prog = prog, .len = len, .piece = piece, .acc = acc,
					    .nacc = 2, .ms = 250 };

			run_stream(&s);
			assert_wire(&s, prog, len);
			assert_false(s.carried);
		}
}

static void test_out_other_protocols_untouched(void **state)
{
	static const char tls[] = "\x16\x03\x01\x00\x2f\x01\x00\x00\x2b\x03\x03GET / HTTP/1.1\r\n"
				  "\r\n";
	static const char redis[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$14\r\nGET / HTTP/1.1\r\n";
	static const char redis_inline[] = "PING\r\nGET / HTTP/1.1\r\n\r\n";
	static const char pg[] = "\0\0\0\x29\0\x03\0\0user\0alice\0database\0GET / HTTP/1.1\r\n\0\0";
	static const char h2[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	static const char h09[] = "GET /\r\nX: y\r\n\r\n";

	(void)state;
	same_bytes(tls, sizeof(tls) - 1);
	same_bytes(redis, sizeof(redis) - 1);
	same_bytes(redis_inline, sizeof(redis_inline) - 1);
	same_bytes(pg, sizeof(pg) - 1);
	same_bytes(h2, sizeof(h2) - 1);
	same_bytes(h09, sizeof(h09) - 1);
}

/* The planner's method bound: 32 bytes take the header, 33 are not HTTP (unchanged). */
static void test_out_method_bound(void **state)
{
	static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ";
	char prog[128], want[256];
	size_t len, wl;

	(void)state;
	len = (size_t)snprintf(prog, sizeof(prog), "%.*s / HTTP/1.1\r\nHost: x\r\n\r\n",
			       TB_PROP_METHOD_MAX, letters);
	struct stream s = { .prog = prog, .len = len, .ms = 321 };
	run_stream(&s);
	wl = expect_inserted(want, prog, len, HDR ": 321\r\n");
	assert_wire(&s, want, wl);
	len = (size_t)snprintf(prog, sizeof(prog), "%.*s / HTTP/1.1\r\nHost: x\r\n\r\n",
			       TB_PROP_METHOD_MAX + 1, letters);
	same_bytes(prog, len);
}

/* outmax too small: nothing owed, so the send goes unchanged and the request is said to
 * miss its header; owed bytes always go first, in fewer of the program's bytes. */
static void test_out_outmax_rule(void **state)
{
	size_t len = strlen(GET1);

	(void)state;
	struct stream s = { .prog = GET1, .len = len, .piece = 1, .outmax = 40, .ms = 250 };
	run_stream(&s);
	assert_wire(&s, GET1, len);
	assert_true(s.missed);
	assert_false(s.carried);
	/* a request line that fits: inserted (split of one piece: +2) */
	struct stream s2 = { .prog = GET1, .len = len, .piece = 1000, .outmax = 3, .ms = 250 };
	char want[512];
	size_t wl = expect_inserted(want, GET1, len, HDR ": 250\r\n");
	run_stream(&s2);
	assert_wire(&s2, want, wl);
	/* owed bytes after a partial accept, with pieces of 5: all in order */
	for (size_t k = 17; k < 17 + 19; k++) {
		size_t acc[1] = { k };
		struct stream s3 = { .prog = GET1, .len = len, .piece = 5, .acc = acc,
				     .nacc = 1, .ms = 250 };

		run_stream(&s3);
		assert_wire(&s3, want, wl);
	}
}

/* Direct: owed bytes with outmax 1, sent() says 0 for bytes of ours only. */
static void test_out_owed_bytes_first(void **state)
{
	struct tb_prop_out o;
	const char *p = GET1;
	struct iovec in[2] = { { (char *)p, 10 }, { (char *)p + 10, strlen(p) - 10 } };
	struct iovec out[8];
	char scratch[TB_PROP_SCRATCH];
	int cnt;

	(void)state;
	tb_prop_out_reset(&o);
	cnt = tb_prop_out_plan(&o, HDR, 250, in, 2, out, 8, scratch);
	assert_int_equal(cnt, 4); /* [0,10) [10,17) ins [17,..) */
	assert_int_equal(tb_prop_out_sent(&o, 20), 17); /* 3 bytes of ours: "X-D" */
	assert_true(tb_prop_out_pending(&o));
	struct iovec rest = { (char *)p + 17, strlen(p) - 17 };
	cnt = tb_prop_out_plan(&o, HDR, 100, &rest, 1, out, 1, scratch);
	assert_int_equal(cnt, 1);
	assert_int_equal(out[0].iov_len, strlen(HDR ": 100\r\n") - 3); /* the latest budget */
	assert_memory_equal(out[0].iov_base, "eadline-Ms: 100\r\n", out[0].iov_len);
	assert_int_equal(tb_prop_out_sent(&o, 4), 0); /* ours only: the caller must retry */
	cnt = tb_prop_out_plan(&o, HDR, 90, &rest, 1, out, 2, scratch);
	assert_int_equal(cnt, 2);
	assert_int_equal(out[0].iov_len, 12);
	assert_memory_equal(out[0].iov_base, "ine-Ms: 90\r\n", 12); /* digits not yet out */
	assert_int_equal(tb_prop_out_sent(&o, 12 + 4), 4);
	assert_false(tb_prop_out_pending(&o));
	assert_true(tb_prop_out_carried(&o));

	/* an empty send (in NULL) carries owed bytes alone, and tells the program 0 */
	tb_prop_out_reset(&o);
	in[0].iov_len = 17;
	assert_int_equal(tb_prop_out_plan(&o, HDR, 250, in, 1, out, 8, scratch), 2);
	assert_int_equal(tb_prop_out_sent(&o, 17 + 2), 17);
	assert_int_equal(tb_prop_out_plan(&o, HDR, 250, NULL, 0, out, 8, scratch), 1);
	assert_memory_equal(out[0].iov_base, "Deadline-Ms: 250\r\n", out[0].iov_len);
	assert_int_equal(tb_prop_out_sent(&o, out[0].iov_len), 0);
	assert_false(tb_prop_out_pending(&o));
}

/* A plan the caller abandons (no sent()) commits nothing; outmax 0 gives the header up. */
static void test_out_abandoned_plan_and_no_room(void **state)
{
	static const char prog[] = "GET / HTTP/1.1\r\nX-Deadline-Ms: 5000\r\n\r\n";
	struct tb_prop_out o;
	struct iovec in = { (char *)prog, sizeof(prog) - 1 }, out[8];
	char scratch[TB_PROP_SCRATCH];

	(void)state;
	tb_prop_out_reset(&o);
	assert_true(tb_prop_out_plan(&o, HDR, 250, &in, 1, out, 8, scratch) > 0);
	assert_int_equal(tb_prop_out_plan(&o, HDR, 9000, &in, 1, out, 8, scratch), 0);
	assert_int_equal(tb_prop_out_sent(&o, in.iov_len), in.iov_len); /* 5000 < 9000: kept */
	assert_false(tb_prop_out_pending(&o));
	assert_true(tb_prop_out_carried(&o));
	tb_prop_out_reset(&o);
	assert_int_equal(tb_prop_out_plan(&o, HDR, 250, &in, 1, out, 0, scratch), 0);
	assert_int_equal(tb_prop_out_sent(&o, in.iov_len), in.iov_len);
	assert_true(tb_prop_out_missed(&o));
}

/* Keep-alive: each request after a reset gets its own header; OPTIONS * and CONNECT too. */
static void test_out_keep_alive_and_request_forms(void **state)
{
	static const char *const reqs[] = {
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT db.internal:5432 HTTP/1.1\r\n\r\n",
		"DELETE /x?y=%20 HTTP/1.0\r\n\r\n",
		"M-SEARCH * HTTP/1.1\r\n\r\n",
	};
	struct tb_prop_out o;
	struct tb_prop_in p;
	struct iovec out[8];
	char scratch[TB_PROP_SCRATCH], wire[256];

	(void)state;
	tb_prop_out_reset(&o);
	for (size_t r = 0; r < 4; r++) {
		struct iovec in = { (char *)reqs[r], strlen(reqs[r]) };
		size_t wl = 0;
		int cnt = tb_prop_out_plan(&o, HDR, 40 + (int64_t)r, &in, 1, out, 8, scratch);

		assert_int_equal(cnt, 3);
		for (int i = 0; i < cnt; i++) {
			memcpy(wire + wl, out[i].iov_base, out[i].iov_len);
			wl += out[i].iov_len;
		}
		assert_int_equal(tb_prop_out_sent(&o, wl), in.iov_len);
		/* what a server reads back */
		tb_prop_in_reset(&p);
		assert_int_equal(tb_prop_in_feed(&p, NULL, wire, wl), TB_PIN_HEAD_DONE);
		assert_int_equal(tb_prop_in_result(&p)->ns, (40 + (int64_t)r) * MS);
		tb_prop_out_reset(&o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_accepted_forms),
		cmocka_unit_test(test_in_source_and_value_for_the_log),
		cmocka_unit_test(test_in_malformed_ignored_and_reported),
		cmocka_unit_test(test_in_strictest_wins),
		cmocka_unit_test(test_in_folded_line_is_not_read),
		cmocka_unit_test(test_in_bare_lf_and_empty_lines_before),
		cmocka_unit_test(test_in_not_http),
		cmocka_unit_test(test_in_method_bound),
		cmocka_unit_test(test_in_malformed_head_given_up),
		cmocka_unit_test(test_in_huge_head_bounded),
		cmocka_unit_test(test_in_split_at_every_byte),
		cmocka_unit_test(test_out_inserted_after_request_line),
		cmocka_unit_test(test_out_every_partial_accept),
		cmocka_unit_test(test_out_request_line_split_across_sends),
		cmocka_unit_test(test_out_program_copy_lowered_in_place),
		cmocka_unit_test(test_out_program_copy_in_a_later_send),
		cmocka_unit_test(test_out_body_never_scanned),
		cmocka_unit_test(test_out_other_protocols_untouched),
		cmocka_unit_test(test_out_method_bound),
		cmocka_unit_test(test_out_outmax_rule),
		cmocka_unit_test(test_out_owed_bytes_first),
		cmocka_unit_test(test_out_abandoned_plan_and_no_room),
		cmocka_unit_test(test_out_keep_alive_and_request_forms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
