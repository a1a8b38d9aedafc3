/* test_frame_http.c - HTTP/1.x framing fed real exchanges whole, byte by byte and in random
 * splits: keep-alive, chunked, no-body responses, 100-continue, pipelining, tunnels, floods. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_frame_script.h"

#define GET "GET /a HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\n\r\n"
#define OK5 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"

static void test_keep_alive_content_length(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, GET, 0, AWAITING); /* the connection's first request: the connect's call */
	RX(s, OK5, ENDS, RESTING);
	TX(s, "POST /b HTTP/1.1\r\nHost: x\r\ncontent-length:  3 \r\n\r\nabc", STARTS,
	   AWAITING);
	RX(s, "HTTP/1.1 201 Created\r\nCONTENT-LENGTH: 12\r\n\r\n", 0, AWAITING);
	RX(s, "hello ", 0, AWAITING);
	RX(s, "world!", ENDS, RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

/* A final 5xx raises its event (the breaker's failure), on the whole-line path and byte by
 * byte alike; an interim 1xx and a 2xx raise none. */
static void test_status_5xx_events(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);
	const unsigned gw = TB_FRAME_EV_5XX | TB_FRAME_EV_GATEWAY;

	(void)state;
	TX(s, GET, 0, AWAITING);
	RX(s, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\nno", ENDS | gw,
	   RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", ENDS | TB_FRAME_EV_5XX,
	   RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, "HTTP/1.1 504 Gateway Timeout\r\nContent-Length: 0\r\n\r\n", ENDS | gw, RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, OK5, ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

static void test_chunked_response_with_trailers(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, GET, 0, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=val\r\nhello\r\n",
	   0, AWAITING);
	RX(s, "1A\r\nabcdefghijklmnopqrstuvwxyz\r\n", 0, AWAITING);
	RX(s, "0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n", ENDS, RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	   ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

/* Header names match in any mix of case, as ASCII folds it (the whole-line path never asks
 * the locale: regress/http_te_locale). */
static void test_header_names_in_capitals(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, GET, 0, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nTRANSFER-ENCODING: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	   ENDS, RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nCONTENT-LENGTH: 3\r\n\r\nabc", ENDS, RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\ntRaNsFeR-eNcOdInG: ChUnKeD\r\n\r\n1\r\nz\r\n0\r\n\r\n",
	   ENDS, RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 2\r\n\r\nok", ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

static void test_no_body_responses(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, "HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n", 0, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", ENDS, RESTING);
	TX(s, "DELETE /x HTTP/1.1\r\n\r\n", STARTS, AWAITING);
	RX(s, "HTTP/1.1 204 No Content\r\n\r\n", ENDS, RESTING);
	TX(s, "GET /c HTTP/1.1\r\nIf-None-Match: \"x\"\r\n\r\n", STARTS, AWAITING);
	RX(s, "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\nETag: \"x\"\r\n\r\n", ENDS,
	   RESTING);
	TX(s, "HEADER /x HTTP/1.1\r\n\r\n", STARTS, AWAITING); /* not HEAD */
	RX(s, "HTTP/1.1 405 Nope\r\nContent-Length: 2\r\n\r\n", 0, AWAITING);
	RX(s, "no", ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

static void test_expect_100_continue(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, GET, 0, AWAITING);
	RX(s, OK5, ENDS, RESTING);
	TX(s, "PUT /d HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n", STARTS,
	   AWAITING);
	fs_begun(s, false);
	RX(s, "HTTP/1.1 100 Con", 0, AWAITING);
	fs_begun(s, true);
	RX(s, "tinue\r\n\r\n", 0, AWAITING);
	fs_begun(s, false); /* the final answer has not begun */
	TX(s, "data", 0, AWAITING);
	RX(s, "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n", 0, AWAITING);
	RX(s, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

static void test_pipelined_three(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, GET, 0, AWAITING);
	RX(s, OK5, ENDS, RESTING);
	TX(s, "GET /1 HTTP/1.1\r\n\r\nHEAD /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n", STARTS,
	   AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none", 0, AWAITING);
	/* the HEAD's answer has a length but no body: the next status line follows at once */
	RX(s, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 200 OK\r\n", 0, AWAITING);
	RX(s, "Transfer-Encoding: chunked\r\n\r\n3\r\nthr\r\n0\r\n\r\n", ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

static void test_chunked_request_body(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, "POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n", 0,
	   AWAITING);
	TX(s, "0\r\n\r\n", 0, AWAITING);
	RX(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", ENDS, RESTING);
	TX(s, GET, STARTS, AWAITING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

/* Old clients send a CRLF after a POST body: it is not a request (the send-side query,
 * which cannot see the bytes, still says that a send there would start one). */
static void test_stray_crlf_is_not_a_request(void **state)
{
	struct tb_frame f;

	(void)state;
	tb_frame_init(&f, TB_PROTO_AUTO);
	tb_frame_sent(&f, GET, strlen(GET));
	assert_int_equal(tb_frame_received(&f, OK5, strlen(OK5)), ENDS);
	assert_int_equal(tb_frame_sent(&f, "\r\n", 2), 0);
	assert_int_equal(tb_frame_state(&f), RESTING);
	assert_true(tb_frame_send_starts_call(&f));
	assert_int_equal(tb_frame_sent(&f, GET, strlen(GET)), STARTS);
}

static void test_until_eof(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, "GET / HTTP/1.0\r\n\r\n", 0, AWAITING);
	RX(s, "HTTP/1.0 200 OK\r\nServer: old\r\n\r\nsome body", 0, AWAITING);
	RX(s, " and more", 0, AWAITING);
	fs_eof(s, ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

static void test_upgrade_is_session(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 0,
	   AWAITING);
	RX(s, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05hello",
	   EV_SESSION, SESSION);
	TX(s, "\x81\x85xxxxyyyyy", 0, SESSION);
	fs_run(s, TB_PROTO_SESSION);
	free(s);
}

static void test_connect_tunnel_then_tls(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);
	const unsigned char ch[] = { 0x16, 0x03, 0x01, 0x00, 0x04 };

	(void)state;
	TX(s, "CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n", 0,
	   AWAITING);
	RX(s, "HTTP/1.1 200 Connection established\r\n\r\n", 0, UNKNOWN);
	fs_put(s, ch, sizeof(ch));
	fs_fill(s, 0xcc, 4);
	fs_end(s, true, 0, AWAITING);
	fs_run(s, TB_PROTO_TLS);
	free(s);
}

static void test_unsolicited_response(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_HTTP);

	(void)state;
	TX(s, GET, 0, AWAITING);
	RX(s, OK5, ENDS, RESTING);
	/* A server's 408 before it closes an idle connection: not an answer to anything. */
	RX(s, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n", 0, RESTING);
	TX(s, GET, STARTS, AWAITING);
	RX(s, OK5, ENDS, RESTING);
	fs_run(s, TB_PROTO_HTTP);
	free(s);
}

/* Each line of `bad` after a good first request makes framing give up, whole or split. */
static void expect_raw(const char *first_tx, const char *bad_rx, bool bad_is_tx)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	if (first_tx)
		TX(s, first_tx, 0, AWAITING);
	fs_text(s, bad_is_tx, bad_rx, EV_RAW, RAW);
	TX(s, GET, 0, RAW);
	fs_run(s, TB_PROTO_RAW);
	free(s);
}

static void test_hostile_inputs_fall_back_to_raw(void **state)
{
	(void)state;
	expect_raw(NULL, "HELO mail.example.test\r\n", true); /* looks like a method */
	expect_raw(NULL, "GET / SPDY/3\r\n\r\n", true);
	expect_raw(GET, "HTTP/1.1 2x0 OK\r\n\r\n", false);
	expect_raw(GET, "HTTP/2 200\r\n\r\n", false);
	expect_raw(GET, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
		   false);
	expect_raw(GET, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
		   false);
	expect_raw(GET, "HTTP/1.1 200 OK\r\nContent-Length: 5 6\r\n\r\n", false);
	expect_raw(GET, "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", false);
	expect_raw(GET, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n12345678123456781\r\n",
		   false);
	expect_raw(GET, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", false);
	expect_raw(GET, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXY", false);
	expect_raw(NULL, "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", true);
}

/*
 * A header name with a NUL byte after "Content-Length" or "Transfer-Encoding" is neither
 * (the fuzzer's split check found it): the whole-line path compared the name as a C string
 * and skipped the line, while the byte path let the NUL match the end of the candidate
 * name and took "Content-Length\0: 3" for a length, so the same request was framed with
 * a 3-byte body or none depending on where the kernel cut it.
 */
static void test_nul_in_header_name_is_another_header(void **state)
{
	static const char line[][40] = { "Content-Length\0: 3\r\n",
					 "content-length\0\0\0\0\0: 3\r\n",
					 "Transfer-Encoding\0: chunked\r\n" };
	static const size_t len[] = { 20, 24, 29 };

	(void)state;
	for (int k = 0; k < 3; k++) {
		struct fscript *s = fs_new(TB_PROTO_AUTO);

		fs_put(s, "POST / HTTP/1.1\r\nHost: x\r\n", 26);
		fs_put(s, line[k], len[k]);
		fs_put(s, "\r\n", 2);
		fs_end(s, true, 0, AWAITING);
		RX(s, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", ENDS, RESTING);
		fs_run(s, TB_PROTO_HTTP);
		free(s);
	}
}

static void test_header_flood_and_endless_line(void **state)
{
	static const char *heads[] = { "GET /", "GET / HTTP/1.1\r\n" };

	(void)state;
	for (int k = 0; k < 2; k++) {
		struct fscript *s = fs_new(TB_PROTO_AUTO);

		fs_put(s, heads[k], strlen(heads[k]));
		for (int i = 0; i < 14000; i++)
			fs_put(s, k ? "X: y\r\n" : "aaaaa", 5 + k);
		fs_end(s, true, EV_RAW, RAW);
		fs_run(s, TB_PROTO_RAW);
		free(s);
	}
}

static void test_pipeline_too_deep(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	for (int i = 0; i < 32; i++)
		fs_put(s, GET, strlen(GET));
	fs_end(s, true, 0, AWAITING);
	TX(s, GET, EV_RAW, RAW);
	fs_run(s, TB_PROTO_RAW);
	free(s);
}

/* A 4 GiB body is counted, not scanned: 65536 sends of one 64 KiB buffer. */
static void test_huge_body_is_counted(void **state)
{
	static unsigned char chunk[65536];
	struct tb_frame f;
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 4294967296\r\n\r\n";

	(void)state;
	tb_frame_init(&f, TB_PROTO_AUTO);
	tb_frame_sent(&f, GET, strlen(GET));
	assert_int_equal(tb_frame_received(&f, resp, strlen(resp)), 0);
	for (int i = 0; i < 65535; i++)
		assert_int_equal(tb_frame_received(&f, chunk, sizeof(chunk)), 0);
	assert_int_equal(tb_frame_state(&f), AWAITING);
	assert_int_equal(tb_frame_received(&f, chunk, sizeof(chunk)), ENDS);
	assert_int_equal(tb_frame_state(&f), RESTING);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keep_alive_content_length),
		cmocka_unit_test(test_chunked_response_with_trailers),
		cmocka_unit_test(test_header_names_in_capitals),
		cmocka_unit_test(test_no_body_responses),
		cmocka_unit_test(test_expect_100_continue),
		cmocka_unit_test(test_pipelined_three),
		cmocka_unit_test(test_chunked_request_body),
		cmocka_unit_test(test_stray_crlf_is_not_a_request),
		cmocka_unit_test(test_until_eof),
		cmocka_unit_test(test_upgrade_is_session),
		cmocka_unit_test(test_connect_tunnel_then_tls),
		cmocka_unit_test(test_unsolicited_response),
		cmocka_unit_test(test_hostile_inputs_fall_back_to_raw),
		cmocka_unit_test(test_nul_in_header_name_is_another_header),
		cmocka_unit_test(test_header_flood_and_endless_line),
		cmocka_unit_test(test_pipeline_too_deep),
		cmocka_unit_test(test_huge_body_is_counted),
		cmocka_unit_test(test_status_5xx_events),
	};

	return cmocka_run_group_tests_name("frame_http", tests, NULL, NULL);
}
