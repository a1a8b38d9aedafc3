/* test_frame_tls.c - TLS record framing fed handshakes built like real captures (record
 * headers as the wire has them, dummy bodies): 1.2 full and resumed, 1.3 with middlebox
 * ChangeCipherSpec, HelloRetryRequest and session tickets; whole, byte by byte, split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_frame_script.h"

enum { CCS = 20, ALERT = 21, HS = 22, APP = 23 };

/* One record: type, version 03 0x, 16-bit length, then `len` dummy bytes. */
static void rec(struct fscript *s, unsigned type, unsigned minor, unsigned len)
{
	unsigned char h[3] = { (unsigned char)type, 3, (unsigned char)minor };

	fs_put(s, h, 3);
	fs_be16(s, len);
	fs_fill(s, (unsigned char)(0x40 + type), len);
}

#define C(s, ev, st) fs_end(s, true, ev, st)
#define S(s, ev, st) fs_end(s, false, ev, st)

static void test_tls12_full_handshake_then_turns(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	rec(s, HS, 1, 512); /* ClientHello, record version 1.0 as clients send it */
	C(s, 0, AWAITING);
	rec(s, HS, 3, 89);  /* ServerHello */
	rec(s, HS, 3, 2400); /* Certificate */
	rec(s, HS, 3, 333); /* ServerKeyExchange */
	rec(s, HS, 3, 4);   /* ServerHelloDone */
	S(s, 0, AWAITING);
	rec(s, HS, 3, 70);  /* ClientKeyExchange */
	rec(s, CCS, 3, 1);
	rec(s, HS, 3, 40);  /* Finished (encrypted, still type 22) */
	C(s, 0, AWAITING);
	rec(s, HS, 3, 202); /* NewSessionTicket (1.2: a handshake message) */
	rec(s, CCS, 3, 1);
	rec(s, HS, 3, 40);  /* Finished */
	S(s, 0, RESTING);   /* handshake over, nothing asked yet */
	rec(s, APP, 3, 120); /* the first request: same call as connect + handshake */
	C(s, 0, AWAITING);
	rec(s, APP, 3, 16408); /* the largest record */
	rec(s, APP, 3, 300);
	S(s, 0, ANSWERED);
	rec(s, APP, 3, 100); /* the next request: a new call */
	C(s, STARTS, AWAITING);
	rec(s, APP, 3, 50);
	C(s, 0, AWAITING); /* more of the same request */
	rec(s, APP, 3, 700);
	S(s, 0, ANSWERED);
	rec(s, ALERT, 3, 26); /* close_notify: not a call */
	C(s, NOT_REQ, ANSWERED);
	fs_eof(s, 0, RESTING);
	fs_run(s, TB_PROTO_TLS);
	free(s);
}

static void test_tls12_resumed(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	rec(s, HS, 1, 300);
	C(s, 0, AWAITING);
	rec(s, HS, 3, 89); /* ServerHello */
	rec(s, CCS, 3, 1);
	rec(s, HS, 3, 40); /* Finished */
	S(s, 0, AWAITING); /* the client's Finished is still due */
	rec(s, CCS, 3, 1);
	rec(s, HS, 3, 40);
	rec(s, APP, 3, 90); /* request right after the Finished */
	C(s, 0, AWAITING);
	rec(s, APP, 3, 200);
	S(s, 0, ANSWERED);
	fs_run(s, TB_PROTO_TLS);
	free(s);
}

/* The server's first flight in 1.3: ServerHello, middlebox CCS, then encrypted records. */
static void server_hello_13(struct fscript *s, bool ccs)
{
	rec(s, HS, 3, 90);
	if (ccs)
		rec(s, CCS, 3, 1);
	rec(s, APP, 3, 30);   /* EncryptedExtensions */
	rec(s, APP, 3, 2900); /* Certificate */
	rec(s, APP, 3, 281);  /* CertificateVerify */
	rec(s, APP, 3, 53);   /* Finished */
}

static void test_tls13_tickets_are_not_the_answer(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	rec(s, HS, 1, 512);
	C(s, 0, AWAITING);
	server_hello_13(s, true);
	S(s, 0, AWAITING);
	fs_begun(s, true); /* the server's flight came */
	rec(s, CCS, 3, 1);
	rec(s, APP, 3, 53);  /* Finished */
	rec(s, APP, 3, 120); /* the first request, same flight */
	C(s, 0, AWAITING);
	fs_begun(s, false);
	rec(s, APP, 3, 250); /* two NewSessionTickets, same length */
	rec(s, APP, 3, 250);
	S(s, 0, AWAITING);   /* still waiting for the first byte of the answer */
	fs_begun(s, false);
	rec(s, APP, 3, 900);
	s->used -= 400;
	S(s, 0, AWAITING);   /* half of the answer's first record */
	fs_begun(s, true);
	fs_fill(s, 0x57, 400);
	S(s, 0, ANSWERED);
	rec(s, APP, 3, 120);
	C(s, STARTS, AWAITING);
	rec(s, APP, 3, 250); /* an answer as long as a ticket, once tickets are over */
	S(s, 0, ANSWERED);
	fs_run(s, TB_PROTO_TLS);
	free(s);
}

static void test_tls13_tickets_on_idle_connection(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	rec(s, HS, 1, 512);
	C(s, 0, AWAITING);
	server_hello_13(s, false); /* no middlebox CCS */
	S(s, 0, AWAITING);
	rec(s, APP, 3, 53); /* Finished only: a pool's pre-opened connection */
	C(s, 0, RESTING);
	rec(s, APP, 3, 180); /* one ticket (Go sends one) */
	S(s, 0, RESTING);    /* tickets do not make it busy */
	rec(s, APP, 3, 95);  /* the first request, later */
	C(s, 0, AWAITING);
	rec(s, APP, 3, 400);
	S(s, 0, ANSWERED);
	fs_run(s, TB_PROTO_TLS);
	free(s);
}

static void test_tls13_hello_retry_request(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	rec(s, HS, 1, 512);
	C(s, 0, AWAITING);
	rec(s, HS, 3, 88); /* HelloRetryRequest */
	rec(s, CCS, 3, 1);
	S(s, 0, AWAITING);
	rec(s, CCS, 3, 1);
	rec(s, HS, 3, 540); /* second ClientHello */
	C(s, 0, AWAITING);
	rec(s, HS, 3, 155); /* ServerHello (its CCS came after the HRR) */
	rec(s, APP, 3, 30);
	rec(s, APP, 3, 2900);
	rec(s, APP, 3, 281);
	rec(s, APP, 3, 69); /* Finished, SHA-384 */
	S(s, 0, AWAITING);
	rec(s, APP, 3, 69);
	rec(s, APP, 3, 300);
	C(s, 0, AWAITING);
	rec(s, APP, 3, 233);
	S(s, 0, AWAITING); /* a ticket */
	rec(s, APP, 3, 4000);
	S(s, 0, ANSWERED);
	rec(s, APP, 3, 40);
	C(s, STARTS, AWAITING);
	fs_run(s, TB_PROTO_TLS);
	free(s);
}

static void test_forced_tls_rests_before_hello(void **state)
{
	struct tb_frame f;

	(void)state;
	tb_frame_init(&f, TB_PROTO_TLS);
	assert_int_equal(tb_frame_proto(&f), TB_PROTO_TLS);
	assert_int_equal(tb_frame_state(&f), RESTING);
	assert_false(tb_frame_send_starts_call(&f));
}

static void test_bad_records_fall_back_to_raw(void **state)
{
	static const struct {
		unsigned type, major, minor, len;
	} bad[] = { { 0x30, 3, 3, 10 }, { HS, 2, 0, 10 }, { HS, 3, 9, 10 }, { HS, 3, 3, 0xffff },
		    { APP, 3, 3, 18433 } };

	(void)state;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fscript *s = fs_new(TB_PROTO_AUTO);
		unsigned char h[3] = { (unsigned char)bad[i].type, (unsigned char)bad[i].major,
				       (unsigned char)bad[i].minor };

		rec(s, HS, 1, 100);
		C(s, 0, AWAITING);
		fs_put(s, h, 3);
		fs_be16(s, bad[i].len);
		S(s, EV_RAW, RAW);
		fs_run(s, TB_PROTO_RAW);
		free(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tls12_full_handshake_then_turns),
		cmocka_unit_test(test_tls12_resumed),
		cmocka_unit_test(test_tls13_tickets_are_not_the_answer),
		cmocka_unit_test(test_tls13_tickets_on_idle_connection),
		cmocka_unit_test(test_tls13_hello_retry_request),
		cmocka_unit_test(test_forced_tls_rests_before_hello),
		cmocka_unit_test(test_bad_records_fall_back_to_raw),
	};

	return cmocka_run_group_tests_name("frame_tls", tests, NULL, NULL);
}
