/* test_frame_resp.c - Redis RESP2/RESP3 framing fed commands and replies (bulk, nulls,
 * nested arrays, maps, attributes, pushes), pipelines and subscribe mode; whole, byte by
 * byte, split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_frame_script.h"

#define SET "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n"
#define GETK "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"

static void test_set_get_null(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, SET, 0, AWAITING);
	RX(s, "+OK\r\n", ENDS, RESTING);
	TX(s, GETK, STARTS, AWAITING);
	RX(s, "$5\r\nhel", 0, AWAITING);
	RX(s, "lo\r\n", ENDS, RESTING);
	TX(s, "*2\r\n$3\r\nget\r\n$7\r\nmissing\r\n", STARTS, AWAITING);
	RX(s, "$-1\r\n", ENDS, RESTING);
	TX(s, "*1\r\n$4\r\nPING\r\n", STARTS, AWAITING);
	RX(s, "-ERR unknown command 'PIN'\r\n", ENDS, RESTING);
	TX(s, "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n", STARTS, AWAITING);
	RX(s, ":-42\r\n", ENDS, RESTING);
	fs_run(s, TB_PROTO_REDIS);
	free(s);
}

static void test_pipelined_nested_arrays(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, SET, 0, AWAITING);
	RX(s, "+OK\r\n", ENDS, RESTING);
	TX(s, "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*4\r\n$6\r\nLRANGE\r\n$1\r\nl\r\n$1\r\n0\r\n$2\r\n-1\r\n"
	      "PING\r\n", STARTS, AWAITING); /* the last one inline */
	RX(s, ":1\r\n", 0, AWAITING);
	RX(s, "*3\r\n*2\r\n:1\r\n$1\r\na\r\n*0\r\n*-1\r\n", 0, AWAITING);
	RX(s, "+PONG\r\n", ENDS, RESTING);
	/* CLUSTER SLOTS-like depth and an empty bulk */
	TX(s, "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n", STARTS, AWAITING);
	RX(s, "*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$0\r\n\r\n",
	   ENDS, RESTING);
	fs_run(s, TB_PROTO_REDIS);
	free(s);
}

static void test_resp3_types_and_pushes(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n", 0, AWAITING);
	RX(s, "%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n", ENDS, RESTING);
	TX(s, "*1\r\n$4\r\nMISC\r\n", STARTS, AWAITING);
	RX(s, "*7\r\n,3.14\r\n#t\r\n_\r\n(3492890328409238509324850943850943825024385\r\n"
	      "=15\r\ntxt:Some string\r\n~2\r\n:1\r\n:2\r\n!21\r\nSYNTAX invalid syntax\r\n",
	   ENDS, RESTING);
	TX(s, GETK, STARTS, AWAITING);
	RX(s, "|1\r\n+key-popularity\r\n%1\r\n$1\r\nk\r\n,0.19\r\n$5\r\nhello\r\n", ENDS,
	   RESTING); /* an attribute before the reply */
	/* client-side caching: an invalidation pushed while resting is not a reply */
	RX(s, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", 0, RESTING);
	TX(s, GETK, STARTS, AWAITING);
	fs_begun(s, false);
	RX(s, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", 0, AWAITING);
	fs_begun(s, false); /* a push is not the answer */
	RX(s, "$5\r\nhel", 0, AWAITING);
	fs_begun(s, true);
	RX(s, "lo\r\n", ENDS, RESTING);
	fs_begun(s, false);
	fs_run(s, TB_PROTO_REDIS);
	free(s);
}

static void subscribe(const char *cmd, enum tb_proto forced)
{
	struct fscript *s = fs_new(forced);

	TX(s, "*1\r\n$4\r\nPING\r\n", 0, AWAITING);
	RX(s, "+PONG\r\n", ENDS, RESTING);
	TX(s, cmd, STARTS | EV_SESSION, SESSION);
	RX(s, "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", 0, SESSION);
	fs_run(s, TB_PROTO_SESSION);
	free(s);
}

static void test_subscribe_is_session(void **state)
{
	(void)state;
	subscribe("*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n", TB_PROTO_AUTO);
	subscribe("*2\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n", TB_PROTO_AUTO);
	subscribe("*2\r\n$10\r\npsubscribe\r\n$3\r\nch*\r\n", TB_PROTO_AUTO);
	subscribe("*2\r\n$10\r\nSSUBSCRIBE\r\n$2\r\nch\r\n", TB_PROTO_AUTO);
	subscribe("*1\r\n$7\r\nMONITOR\r\n", TB_PROTO_AUTO);
	subscribe("SUBSCRIBE ch\r\n", TB_PROTO_AUTO);
	subscribe("*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n", TB_PROTO_REDIS);
}

static void test_lookalike_commands_are_not_sessions(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, "*1\r\n$4\r\nPING\r\n", 0, AWAITING);
	RX(s, "+PONG\r\n", ENDS, RESTING);
	TX(s, "*2\r\n$11\r\nUNSUBSCRIBE\r\n$2\r\nch\r\n", STARTS, AWAITING);
	RX(s, "*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n", ENDS, RESTING);
	TX(s, "*3\r\n$3\r\nSET\r\n$9\r\nSUBSCRIBE\r\n$1\r\nv\r\n", STARTS, AWAITING);
	RX(s, "+OK\r\n", ENDS, RESTING);
	TX(s, "*2\r\n$12\r\nSUBSCRIBEXYZ\r\n$1\r\nv\r\n", STARTS, AWAITING);
	fs_run(s, TB_PROTO_REDIS);
	free(s);
}

static void test_deep_nesting_needs_no_stack(void **state)
{
	struct fscript *s = fs_new(TB_PROTO_AUTO);

	(void)state;
	TX(s, GETK, 0, AWAITING);
	for (int i = 0; i < 5000; i++)
		fs_put(s, "*1\r\n", 4);
	fs_end(s, false, 0, AWAITING);
	RX(s, ":1\r\n", ENDS, RESTING);
	fs_run(s, TB_PROTO_REDIS);
	free(s);
}

static void test_hostile_replies_fall_back_to_raw(void **state)
{
	static const char *bad[] = {
		"$99999999999999\r\n", "*2000000000\r\n", "$-5\r\n", "@what\r\n", "$?\r\n",
		"*?\r\n", "$12345678901234567890123\r\n", "$\r\n", "*1-\r\n",
	};

	(void)state;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fscript *s = fs_new(TB_PROTO_AUTO);

		TX(s, GETK, 0, AWAITING);
		RX(s, bad[i], EV_RAW, RAW);
		fs_run(s, TB_PROTO_RAW);
		free(s);
	}
}

/* A simple string with no end: given up on past 1 MiB, without ever growing. */
static void test_endless_line_falls_back_to_raw(void **state)
{
	static unsigned char a[65536];
	struct tb_frame f;
	unsigned ev = 0;
	int i;

	(void)state;
	memset(a, 'a', sizeof(a));
	tb_frame_init(&f, TB_PROTO_AUTO);
	tb_frame_sent(&f, GETK, strlen(GETK));
	tb_frame_received(&f, "+", 1);
	for (i = 0; i < 100 && !(ev & EV_RAW); i++)
		ev = tb_frame_received(&f, a, sizeof(a));
	assert_int_equal(ev, EV_RAW);
	assert_int_equal(i, 17);
	assert_int_equal(tb_frame_state(&f), RAW);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_get_null),
		cmocka_unit_test(test_pipelined_nested_arrays),
		cmocka_unit_test(test_resp3_types_and_pushes),
		cmocka_unit_test(test_subscribe_is_session),
		cmocka_unit_test(test_lookalike_commands_are_not_sessions),
		cmocka_unit_test(test_deep_nesting_needs_no_stack),
		cmocka_unit_test(test_hostile_replies_fall_back_to_raw),
		cmocka_unit_test(test_endless_line_falls_back_to_raw),
	};

	return cmocka_run_group_tests_name("frame_resp", tests, NULL, NULL);
}
