/* test_frame_pg.c - PostgreSQL framing fed a startup, authentication, simple and extended
 * queries, notifications while idle and the SSL negotiation; whole, byte by byte, split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_frame_script.h"

/* A message: type byte, int32 length (itself included), `body` dummy bytes. */
static void msg(struct fscript *s, char type, unsigned body)
{
	fs_put(s, &type, 1);
	fs_be32(s, 4 + body);
	fs_fill(s, 'x', body);
}

static void startup(struct fscript *s)
{
	fs_be32(s, 8 + 33);
	fs_be32(s, 0x00030000);
	fs_put(s, "user\0alice\0database\0app\0\0\0\0\0\0\0\0\0", 33);
}

#define C(s, ev, st) fs_end(s, true, ev, st)
#define S(s, ev, st) fs_end(s, false, ev, st)

/* Startup and authentication up to the first ReadyForQuery: the connection's first call. */
static void login(struct fscript *s)
{
	startup(s);
	C(s, 0, AWAITING);
	msg(s, 'R', 8 + 15); /* AuthenticationSASL */
	S(s, 0, AWAITING);
	msg(s, 'p', 60); /* SASLInitialResponse */
	C(s, 0, AWAITING);
	msg(s, 'R', 80); /* SASLContinue */
	S(s, 0, AWAITING);
	msg(s, 'p', 100); /* SASLResponse */
	C(s, 0, AWAITING);
	msg(s, 'R', 50); /* SASLFinal */
	msg(s, 'R', 4);  /* AuthenticationOk */
	for (int i = 0; i < 12; i++)
		msg(s, 'S', 20 + i); /* ParameterStatus */
	msg(s, 'K', 8);           /* BackendKeyData */
	msg(s, 'Z', 1);           /* ReadyForQuery */
	S(s, ENDS, RESTING);
}

static void test_startup_auth_then_simple_query(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	login(s);
	msg(s, 'Q', 9); /* select 1 */
	C(s, STARTS, AWAITING);
	fs_begun(s, false);
	msg(s, 'T', 27); /* RowDescription */
	msg(s, 'D', 11); /* DataRow */
	S(s, 0, AWAITING);
	fs_begun(s, true);
	msg(s, 'C', 13); /* CommandComplete */
	S(s, 0, AWAITING);
	msg(s, 'Z', 1);
	S(s, ENDS, RESTING);
	msg(s, 'Q', 3000); /* a long query */
	C(s, STARTS, AWAITING);
	msg(s, 'T', 27);
	for (int i = 0; i < 50; i++)
		msg(s, 'D', 200);
	msg(s, 'C', 13);
	msg(s, 'Z', 1);
	S(s, ENDS, RESTING);
	msg(s, 'X', 0); /* Terminate: not a call */
	C(s, NOT_REQ, RESTING);
	fs_run(s, TB_PROTO_POSTGRES);
	free(s);
}

static void test_listen_notifications_while_idle(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	login(s);
	msg(s, 'Q', 12); /* LISTEN jobs */
	C(s, STARTS, AWAITING);
	msg(s, 'C', 7);
	msg(s, 'Z', 1);
	S(s, ENDS, RESTING);
	msg(s, 'A', 30); /* NotificationResponse */
	S(s, 0, RESTING);
	msg(s, 'N', 80); /* NoticeResponse */
	msg(s, 'S', 25); /* ParameterStatus */
	S(s, 0, RESTING);
	msg(s, 'Q', 9);
	C(s, STARTS, AWAITING);
	msg(s, 'A', 30); /* a notification in the middle of an answer */
	msg(s, 'C', 13);
	S(s, 0, AWAITING);
	msg(s, 'Z', 1);
	S(s, ENDS, RESTING);
	fs_run(s, TB_PROTO_POSTGRES);
	free(s);
}

static void test_extended_protocol_and_pipeline(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	login(s);
	msg(s, 'P', 30); /* Parse */
	C(s, STARTS, AWAITING);
	msg(s, 'B', 20); /* Bind */
	msg(s, 'D', 6);  /* Describe */
	msg(s, 'E', 9);  /* Execute */
	C(s, 0, AWAITING);
	msg(s, 'S', 0);  /* Sync */
	C(s, 0, AWAITING);
	msg(s, '1', 0);
	msg(s, '2', 0);
	msg(s, 'T', 27);
	msg(s, 'D', 11);
	msg(s, 'C', 13);
	msg(s, 'Z', 1);
	S(s, ENDS, RESTING);
	/* libpq pipeline mode: two Syncs in flight, two ReadyForQuery back */
	msg(s, 'B', 20);
	msg(s, 'E', 9);
	msg(s, 'S', 0);
	msg(s, 'B', 20);
	msg(s, 'E', 9);
	msg(s, 'S', 0);
	C(s, STARTS, AWAITING);
	msg(s, '2', 0);
	msg(s, 'C', 13);
	msg(s, 'Z', 1);
	S(s, 0, AWAITING);
	msg(s, '2', 0);
	msg(s, 'C', 13);
	msg(s, 'Z', 1);
	S(s, ENDS, RESTING);
	fs_run(s, TB_PROTO_POSTGRES);
	free(s);
}

static void test_ssl_request_accepted_becomes_tls(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);
	const unsigned char ch[5] = { 22, 3, 1, 0, 200 };

	(void)state;
	fs_be32(s, 8);
	fs_be32(s, 80877103);
	C(s, 0, AWAITING);
	fs_put(s, "S", 1);
	S(s, 0, RESTING); /* a TLS machine before its ClientHello */
	fs_put(s, ch, 5);
	fs_fill(s, 1, 200);
	C(s, 0, AWAITING);
	fs_run(s, TB_PROTO_TLS);
	free(s);
}

static void test_ssl_request_refused_continues(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	fs_be32(s, 8);
	fs_be32(s, 80877103);
	C(s, 0, AWAITING);
	fs_put(s, "N", 1);
	S(s, 0, RESTING);
	login(s);
	msg(s, 'Q', 9);
	C(s, STARTS, AWAITING);
	fs_run(s, TB_PROTO_POSTGRES);
	free(s);
}

static void test_copy_both_is_session(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	login(s);
	msg(s, 'Q', 40); /* START_REPLICATION */
	C(s, STARTS, AWAITING);
	msg(s, 'W', 3);
	msg(s, 'd', 500);
	S(s, EV_SESSION, SESSION);
	fs_run(s, TB_PROTO_SESSION);
	free(s);
}

static void test_bad_messages_fall_back_to_raw(void **state)
{
	static const uint32_t lens[] = { 0, 3, (1u << 30) + 5, 0xffffffffu };

	(void)state;
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct fscript *s = fs_new(TB_PROTO_AUTO);

		login(s);
		fs_put(s, "D", 1);
		fs_be32(s, lens[i]);
		S(s, EV_RAW, RAW);
		fs_run(s, TB_PROTO_RAW);
		free(s);
	}
}

static void test_detection(void **state)
{
	struct tb_frame f;
	unsigned char cancel[16] = { 0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e };
	unsigned char gss[8] = { 0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30 };
	unsigned char v2[8] = { 0, 0, 0, 8, 0, 2, 0, 0 };

	(void)state;
	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_sent(&f, cancel, sizeof(cancel)), EV_RAW);
	assert_int_equal(tb_frame_state(&f), RAW);

	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_sent(&f, v2, sizeof(v2)), EV_RAW);

	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_sent(&f, gss, sizeof(gss)), 0);
	assert_int_equal(tb_frame_proto(&f), TB_PROTO_POSTGRES);
	assert_int_equal(tb_frame_received(&f, "G", 1), EV_RAW); /* GSS-encrypted */

	tb_frame_init(&f, TB_PROTO_AUTO);
	assert_int_equal(tb_frame_sent(&f, gss, sizeof(gss)), 0);
	assert_int_equal(tb_frame_sent(&f, gss, 1), EV_RAW); /* spoke before the answer */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_startup_auth_then_simple_query),
		cmocka_unit_test(test_listen_notifications_while_idle),
		cmocka_unit_test(test_extended_protocol_and_pipeline),
		cmocka_unit_test(test_ssl_request_accepted_becomes_tls),
		cmocka_unit_test(test_ssl_request_refused_continues),
		cmocka_unit_test(test_copy_both_is_session),
		cmocka_unit_test(test_bad_messages_fall_back_to_raw),
		cmocka_unit_test(test_detection),
	};

	return cmocka_run_group_tests_name("frame_pg", tests, NULL, NULL);
}
