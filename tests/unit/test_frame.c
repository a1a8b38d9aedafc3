/* test_frame.c - framing's front door: detection from either side's first bytes, a rule's
 * forced protocol, the names, the size, and random and mutated input that must never crash,
 * loop or leave the state space. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_frame_script.h"

static void test_fits_in_a_socket(void **state)
{
	(void)state;
	assert_true(sizeof(struct tb_frame) <= 64);
}

static void test_nothing_seen_is_unknown(void **state)
{
	struct tb_frame f;

	(void)state;
	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_state(&f), UNKNOWN);
	assert_int_equal(tb_frame_proto(&f), TB_PROTO_AUTO);
	assert_false(tb_frame_send_starts_call(&f));
	tb_frame_sent(&f, "GE", 2); /* not decided yet */
	assert_int_equal(tb_frame_state(&f), UNKNOWN);
	assert_int_equal(tb_frame_sent(&f, "T / HTTP/1.1\r\n\r\n", 16), 0);
	assert_int_equal(tb_frame_proto(&f), TB_PROTO_HTTP);
	assert_int_equal(tb_frame_state(&f), AWAITING);
}

static enum tb_proto detect(enum tb_proto forced, bool tx, const void *p, size_t n)
{
	struct tb_frame f;

	tb_frame_init(&f, forced);
	if (tx)
		tb_frame_sent(&f, p, n);
	else
		tb_frame_received(&f, p, n);
	return tb_frame_proto(&f);
}

static void test_detection(void **state)
{
	const unsigned char ch[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01 };
	const unsigned char ch_bad[] = { 0x16, 0x02, 0x01, 0x02, 0x00, 0x01 };
	const unsigned char pg[] = { 0, 0, 0, 9, 0, 3, 0, 0, 0 };

	(void)state;
	assert_int_equal(detect(TB_PROTO_AUTO, true, ch, sizeof(ch)), TB_PROTO_TLS);
	assert_int_equal(detect(TB_PROTO_AUTO, true, ch_bad, sizeof(ch_bad)), TB_PROTO_RAW);
	assert_int_equal(detect(TB_PROTO_AUTO, true, pg, sizeof(pg)), TB_PROTO_POSTGRES);
	assert_int_equal(detect(TB_PROTO_AUTO, true, "*1\r\n", 4), TB_PROTO_REDIS);
	assert_int_equal(detect(TB_PROTO_AUTO, true, "*x", 2), TB_PROTO_RAW);
	assert_int_equal(detect(TB_PROTO_AUTO, true, "PING\r\n", 6), TB_PROTO_RAW);
	assert_int_equal(detect(TB_PROTO_AUTO, true, "PROPFIND /x HTTP/1.1\r\n", 22),
			 TB_PROTO_HTTP);
	assert_int_equal(detect(TB_PROTO_AUTO, true, "M-SEARCH * HTTP/1.1\r\n", 21),
			 TB_PROTO_HTTP);
	assert_int_equal(detect(TB_PROTO_AUTO, true, "get / HTTP/1.1\r\n", 16), TB_PROTO_RAW);
	assert_int_equal(detect(TB_PROTO_AUTO, true, "SSH-2.0-OpenSSH_9.6\r\n", 21),
			 TB_PROTO_SESSION);
	assert_int_equal(detect(TB_PROTO_AUTO, false, "SSH-2.0-OpenSSH_9.6\r\n", 21),
			 TB_PROTO_SESSION);
	assert_int_equal(detect(TB_PROTO_AUTO, false, "220 mail ESMTP\r\n", 16), TB_PROTO_RAW);
	assert_int_equal(detect(TB_PROTO_AUTO, false, "\x4a\0\0\0\x0a" "8.0", 8),
			 TB_PROTO_RAW); /* MySQL greets first */
	assert_int_equal(detect(TB_PROTO_AUTO, true, "\x01\x02\x03", 3), TB_PROTO_RAW);
}

static void test_forced_protocols(void **state)
{
	const unsigned char ch[] = { 0x16, 0x03, 0x03, 0x00, 0x01, 0x00 };
	struct tb_frame f;

	(void)state;
	/* a rule that says http on port 443: the ClientHello says what the stream is */
	assert_int_equal(detect(TB_PROTO_HTTP, true, ch, sizeof(ch)), TB_PROTO_TLS);
	assert_int_equal(detect(TB_PROTO_REDIS, true, ch, sizeof(ch)), TB_PROTO_TLS);
	assert_int_equal(detect(TB_PROTO_POSTGRES, true, ch, sizeof(ch)), TB_PROTO_TLS);
	assert_int_equal(detect(TB_PROTO_REDIS, true, "PING\r\n", 6), TB_PROTO_REDIS);
	assert_int_equal(detect(TB_PROTO_HTTP, true, "SSH-2.0-x\r\n", 11), TB_PROTO_SESSION);
	assert_int_equal(detect(TB_PROTO_HTTP, true, "SEARCH / HTTP/1.1\r\n", 19),
			 TB_PROTO_HTTP);
	assert_int_equal(detect(TB_PROTO_TLS, true, "GET / HTTP/1.1\r\n", 16), TB_PROTO_RAW);

	tb_frame_init(&f, TB_PROTO_RAW);
	assert_int_equal(tb_frame_state(&f), RAW);
	assert_int_equal(tb_frame_sent(&f, ch, sizeof(ch)), 0);
	assert_int_equal(tb_frame_proto(&f), TB_PROTO_RAW);
	tb_frame_init(&f, TB_PROTO_SESSION);
	assert_int_equal(tb_frame_state(&f), SESSION);
	assert_int_equal(tb_frame_received(&f, "x", 1), 0);
	tb_frame_init(&f, (enum tb_proto)99);
	assert_int_equal(tb_frame_proto(&f), TB_PROTO_AUTO);

	/* forced redis, first command inline */
	tb_frame_init(&f, TB_PROTO_REDIS);
	assert_int_equal(tb_frame_sent(&f, "PING\r\n", 6), 0);
	assert_int_equal(tb_frame_state(&f), AWAITING);
	assert_int_equal(tb_frame_received(&f, "+PONG\r\n", 7), ENDS);
	assert_int_equal(tb_frame_state(&f), RESTING);
}

static void test_both_sides_before_a_decision(void **state)
{
	struct tb_frame f;

	(void)state;
	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_sent(&f, "GE", 2), 0);
	assert_int_equal(tb_frame_received(&f, "xx", 2), EV_RAW);
	assert_int_equal(tb_frame_state(&f), RAW);

	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_received(&f, "SS", 2), 0);
	assert_int_equal(tb_frame_sent(&f, "SSH-2.0-x\r\n", 11), EV_RAW);
}

static void test_eof(void **state)
{
	struct tb_frame f;

	(void)state;
	tb_frame_init(&f, TB_PROTO_AUTO);
	tb_frame_sent(&f, "*1\r\n$4\r\nPING\r\n", 14);
	assert_int_equal(tb_frame_state(&f), AWAITING);
	assert_int_equal(tb_frame_received(&f, NULL, 0), 0);
	assert_int_equal(tb_frame_state(&f), RESTING); /* nothing more can come */
	assert_false(tb_frame_send_starts_call(&f));
}

/* sendfile/splice: bytes the hooks cannot see are counted inside a body, or end framing. */
static void test_unseen_bytes(void **state)
{
	const char *put = "PUT /f HTTP/1.1\r\nContent-Length: 1000\r\n\r\n";
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n";
	const unsigned char rec[5] = { 23, 3, 3, 0x10, 0x00 };
	struct tb_frame f;

	(void)state;
	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_sent(&f, put, strlen(put)), 0);
	assert_int_equal(tb_frame_unseen(&f, true, 600), 0);
	assert_int_equal(tb_frame_unseen(&f, true, 400), 0);
	assert_int_equal(tb_frame_received(&f, ok, strlen(ok)), 0);
	assert_int_equal(tb_frame_unseen(&f, false, 4096), ENDS); /* splice()d to a file */
	assert_int_equal(tb_frame_state(&f), RESTING);
	assert_int_equal(tb_frame_unseen(&f, true, 10), EV_RAW); /* not inside a body */
	assert_int_equal(tb_frame_state(&f), RAW);

	tb_frame_init(&f, TB_PROTO_TLS);
	tb_frame_sent(&f, rec, sizeof(rec));
	assert_int_equal(tb_frame_unseen(&f, true, 4096), 0);
	assert_int_equal(tb_frame_unseen(&f, true, 1), EV_RAW); /* past the record */

	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_unseen(&f, true, 1), EV_RAW); /* the first bytes unseen */

	tb_frame_init(&f, TB_PROTO_AUTO);
	tb_frame_sent(&f, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\n", 24);
	assert_int_equal(tb_frame_unseen(&f, true, 5), 0);
	assert_int_equal(tb_frame_sent(&f, "\r\n", 2), 0);
	assert_int_equal(tb_frame_received(&f, "+OK\r\n", 5), ENDS);

	tb_frame_init(&f, TB_PROTO_AUTO);
	tb_frame_sent(&f, "GET / HTTP/1.1\r\n\r\n", 18);
	tb_frame_abandon(&f);
	assert_int_equal(tb_frame_state(&f), RAW);
	assert_int_equal(tb_frame_received(&f, ok, strlen(ok)), 0);
}

static void test_names(void **state)
{
	enum tb_proto p;

	(void)state;
	for (int i = TB_PROTO_AUTO; i <= TB_PROTO_RAW; i++) {
		assert_non_null(tb_proto_name((enum tb_proto)i));
		assert_int_equal(tb_proto_parse(tb_proto_name((enum tb_proto)i), &p), 0);
		assert_int_equal(p, i);
	}
	assert_null(tb_proto_name((enum tb_proto)7));
	assert_int_equal(tb_proto_parse("https", &p), -1);
	assert_string_equal(tb_proto_name(TB_PROTO_POSTGRES), "postgres");
}

/* Feeds `n` bytes in random pieces and directions; the state must stay in range. */
static void churn(struct tb_frame *f, const unsigned char *p, size_t n, uint64_t *x)
{
	while (n > 0) {
		size_t piece = 1 + fs_rand(x) % (fs_rand(x) % 2 ? 16 : n);
		bool tx = fs_rand(x) % 4 != 0;

		if (piece > n)
			piece = n;
		if (tx)
			tb_frame_sent(f, p, piece);
		else
			tb_frame_received(f, p, piece);
		assert_true(tb_frame_state(f) <= TB_FRAME_SESSION);
		assert_true(tb_frame_proto(f) <= TB_PROTO_RAW);
		(void)tb_frame_send_starts_call(f);
		p += piece;
		n -= piece;
	}
}

static void test_random_bytes_never_crash(void **state)
{
	static unsigned char buf[4096];

	(void)state;
	for (uint64_t seed = 1; seed <= 3000; seed++) {
		uint64_t x = seed * 0x2545f4914f6cdd1dull;
		struct tb_frame f;
		size_t n = fs_rand(&x) % sizeof(buf);

		for (size_t i = 0; i < n; i++) {
			/* mostly framing-like bytes, so that parsers get deep */
			static const char alpha[] = "*$:+-%>|\r\n0123456789GET HTTP/1.1 \x16\x03\x17";
			uint64_t r = fs_rand(&x);

			buf[i] = r % 3 ? (unsigned char)alpha[r % (sizeof(alpha) - 1)]
				       : (unsigned char)(r >> 8);
		}
		tb_frame_init(&f, (enum tb_proto)(seed % 7));
		churn(&f, buf, n, &x);
	}
}

/* Real exchanges with a few bytes flipped: every machine, deep in its states. */
static void test_mutated_exchanges_never_crash(void **state)
{
	static const char *const conv[] = {
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
		"\r\n5\r\nhello\r\n0\r\nT: 1\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n+OK\r\n*2\r\n*1\r\n:1\r\n%1\r\n+a\r\n$1\r\nb\r\n"
		">2\r\n$1\r\nx\r\n_\r\n|1\r\n+a\r\n+b\r\n#t\r\n",
	};
	static const unsigned char pg[] = { 0, 0, 0, 8, 0, 3, 0, 0, 'R', 0, 0, 0, 8, 0, 0, 0, 0,
					    'Z', 0, 0, 0, 5, 'I', 'Q', 0, 0, 0, 5, 'x',
					    'T', 0, 0, 0, 4, 'Z', 0, 0, 0, 5, 'I' };
	static const unsigned char tls[] = { 22, 3, 1, 0, 2, 1, 1, 22, 3, 3, 0, 1, 2, 20, 3, 3,
					     0, 1, 1, 23, 3, 3, 0, 3, 1, 2, 3, 23, 3, 3, 0, 1, 9 };
	unsigned char buf[256];

	(void)state;
	for (uint64_t seed = 1; seed <= 4000; seed++) {
		uint64_t x = seed * 0x9e3779b97f4a7c15ull;
		struct tb_frame f;
		size_t n;
		unsigned which = seed % 4;

		if (which < 2) {
			n = strlen(conv[which]);
			memcpy(buf, conv[which], n);
		} else if (which == 2) {
			n = sizeof(pg);
			memcpy(buf, pg, n);
		} else {
			n = sizeof(tls);
			memcpy(buf, tls, n);
		}
		for (int k = 0; k < 1 + (int)(seed % 3); k++)
			buf[fs_rand(&x) % n] = (unsigned char)fs_rand(&x);
		tb_frame_init(&f, TB_PROTO_AUTO);
		churn(&f, buf, n, &x);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fits_in_a_socket),
		cmocka_unit_test(test_nothing_seen_is_unknown),
		cmocka_unit_test(test_detection),
		cmocka_unit_test(test_forced_protocols),
		cmocka_unit_test(test_both_sides_before_a_decision),
		cmocka_unit_test(test_eof),
		cmocka_unit_test(test_unseen_bytes),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_random_bytes_never_crash),
		cmocka_unit_test(test_mutated_exchanges_never_crash),
	};

	return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
