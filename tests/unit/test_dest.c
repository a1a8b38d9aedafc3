/* test_dest.c - destinations: conversion from sockaddr (and its refusals), equality, and the
 * "ip:port" text the logs print, including RFC 5952 IPv6 forms and truncation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cmocka.h>

#include "unit.h"

#include "dest.h"


static void expect_text(const struct tb_dest *d, const char *want)
{
	char buf[TB_DEST_STRLEN];

	memset(buf, 'x', sizeof(buf));
	assert_ptr_equal(tb_dest_format(d, buf, sizeof(buf)), buf);
	assert_string_equal(buf, want);
}

static void expect_v6_text(const char *ip, uint16_t port, const char *want)
{
	struct tb_dest d = dest_v6(ip, port);

	expect_text(&d, want);
}

static void is_zero(const struct tb_dest *d)
{
	static const struct tb_dest zero;

	assert_memory_equal(d, &zero, sizeof(zero));
}

static void test_from_ipv4(void **state)
{
	struct tb_dest d = dest_v4("192.168.1.20", 8080);
	const uint8_t want[4] = { 192, 168, 1, 20 };

	(void)state;
	assert_int_equal(d.family, AF_INET);
	assert_int_equal(d.port, 8080);
	assert_memory_equal(d.addr, want, 4);
}

static void test_from_ipv6(void **state)
{
	struct tb_dest d = dest_v6("2001:db8::1", 443);
	struct in6_addr want;

	(void)state;
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &want), 1);
	assert_int_equal(d.family, AF_INET6);
	assert_int_equal(d.port, 443);
	assert_memory_equal(d.addr, &want, 16);
}

static void test_from_sockaddr_refusals(void **state)
{
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_un un;
	struct tb_dest d;

	(void)state;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons(80);
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memset(&d, 0x5a, sizeof(d));
	assert_int_equal(tb_dest_from_sockaddr(&d, (struct sockaddr *)&in, sizeof(in) - 1), -1);
	is_zero(&d);
	memset(&d, 0x5a, sizeof(d));
	assert_int_equal(tb_dest_from_sockaddr(&d, (struct sockaddr *)&in, 1), -1);
	is_zero(&d);
	assert_int_equal(tb_dest_from_sockaddr(&d, (struct sockaddr *)&in, 0), -1);
	assert_int_equal(tb_dest_from_sockaddr(&d, NULL, sizeof(in)), -1);
	is_zero(&d);

	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_port = htons(443);
	in6.sin6_addr = in6addr_loopback;
	memset(&d, 0x5a, sizeof(d));
	/* long enough for a sockaddr_in, too short for its own family */
	assert_int_equal(tb_dest_from_sockaddr(&d, (struct sockaddr *)&in6,
					       sizeof(struct sockaddr_in)), -1);
	is_zero(&d);

	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	strcpy(un.sun_path, "/tmp/sock");
	memset(&d, 0x5a, sizeof(d));
	assert_int_equal(tb_dest_from_sockaddr(&d, (struct sockaddr *)&un, sizeof(un)), -1);
	is_zero(&d);
}

static void test_equal(void **state)
{
	struct tb_dest a = dest_v4("10.0.0.1", 80);
	struct tb_dest b = dest_v4("10.0.0.1", 80);
	struct tb_dest port = dest_v4("10.0.0.1", 81);
	struct tb_dest host = dest_v4("10.0.0.2", 80);
	struct tb_dest six = dest_v6("::ffff:10.0.0.1", 80);
	struct tb_dest s1 = dest_v6("2001:db8::1", 80);
	struct tb_dest s2 = dest_v6("2001:db8::1", 80);
	struct tb_dest s3 = dest_v6("2001:db8::2", 80);
	struct tb_dest unknown1, unknown2;

	(void)state;
	assert_true(tb_dest_equal(&a, &b));
	assert_true(tb_dest_equal(&a, &a));
	assert_false(tb_dest_equal(&a, &port));
	assert_false(tb_dest_equal(&a, &host));
	assert_false(tb_dest_equal(&a, &six)); /* the family differs, even for a mapped address */
	assert_false(tb_dest_equal(&six, &a));
	assert_true(tb_dest_equal(&s1, &s2));
	assert_false(tb_dest_equal(&s1, &s3));

	/* IPv4 compares only its 4 bytes: junk in the unused tail does not matter */
	b.addr[15] = 0xff;
	assert_true(tb_dest_equal(&a, &b));

	memset(&unknown1, 0, sizeof(unknown1));
	memset(&unknown2, 0, sizeof(unknown2));
	assert_true(tb_dest_equal(&unknown1, &unknown2));
	assert_false(tb_dest_equal(&unknown1, &a));
}

static void test_unmap_v4(void **state)
{
	struct tb_dest mapped = dest_v6("::ffff:10.0.0.1", 80), plain = dest_v6("2001:db8::1", 80);
	struct tb_dest four = dest_v4("10.0.0.1", 80), other = dest_v4("10.9.9.9", 9), out;

	(void)state;
	assert_true(tb_dest_unmap_v4(&mapped, &out));
	assert_true(tb_dest_equal(&out, &four));
	out = other;
	assert_false(tb_dest_unmap_v4(&plain, &out));
	assert_false(tb_dest_unmap_v4(&four, &out));
	assert_true(tb_dest_equal(&out, &other)); /* left untouched */
	assert_true(tb_dest_unmap_v4(&mapped, &mapped)); /* in place */
	assert_true(tb_dest_equal(&mapped, &four));
}

static void test_format_ipv4(void **state)
{
	struct tb_dest d;

	(void)state;
	d = dest_v4("127.0.0.1", 8080);
	expect_text(&d, "127.0.0.1:8080");
	d = dest_v4("0.0.0.0", 0);
	expect_text(&d, "0.0.0.0:0");
	d = dest_v4("255.255.255.255", 65535);
	expect_text(&d, "255.255.255.255:65535");
	d = dest_v4("10.200.3.40", 5);
	expect_text(&d, "10.200.3.40:5");
}

static void test_format_ipv6(void **state)
{
	(void)state;
	expect_v6_text("::1", 443, "[::1]:443");
	expect_v6_text("2001:db8::1", 80, "[2001:db8::1]:80");
	expect_v6_text("fe80::1:0:0:1", 1, "[fe80::1:0:0:1]:1");
	expect_v6_text("::", 0, "[::]:0");
	expect_v6_text("1::", 2, "[1::]:2");
	expect_v6_text("1:0:0:2:0:0:0:3", 3, "[1:0:0:2::3]:3");       /* longest run */
	expect_v6_text("1:0:0:2:3:0:0:4", 4, "[1::2:3:0:0:4]:4");      /* first of equal runs */
	expect_v6_text("2001:db8:0:1:1:1:1:1", 5, "[2001:db8:0:1:1:1:1:1]:5"); /* one zero stays */
	expect_v6_text("2001:DB8:AB:CDEF::", 6, "[2001:db8:ab:cdef::]:6"); /* lower case, no 0s */
	expect_v6_text("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535,
		       "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
}

static void test_format_unknown(void **state)
{
	struct tb_dest d;
	char buf[TB_DEST_STRLEN];

	(void)state;
	memset(&d, 0, sizeof(d));
	expect_text(&d, "-");
	/* a failed conversion leaves an unknown destination */
	assert_int_equal(tb_dest_from_sockaddr(&d, NULL, 0), -1);
	expect_text(&d, "-");
	d.family = AF_PACKET;
	assert_string_equal(tb_dest_format(&d, buf, sizeof(buf)), "-");
	/* A unix destination keeps only a hash of its path. */
	d.family = AF_UNIX;
	assert_string_equal(tb_dest_format(&d, buf, sizeof(buf)), "unix");
}

static void test_format_truncates(void **state)
{
	struct tb_dest d = dest_v4("127.0.0.1", 8080);
	struct tb_dest d6 = dest_v6("2001:db8::1", 80);
	char buf[8];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	tb_dest_format(&d, buf, 6);
	assert_string_equal(buf, "127.0");
	assert_int_equal(buf[6], 'x'); /* nothing written past len */
	tb_dest_format(&d6, buf, sizeof(buf));
	assert_string_equal(buf, "[2001:d");
	tb_dest_format(&d, buf, 1);
	assert_string_equal(buf, "");
	memset(buf, 'x', sizeof(buf));
	tb_dest_format(&d, buf, 0); /* writes nothing at all */
	assert_int_equal(buf[0], 'x');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_from_ipv4),
		cmocka_unit_test(test_from_ipv6),
		cmocka_unit_test(test_from_sockaddr_refusals),
		cmocka_unit_test(test_equal),
		cmocka_unit_test(test_unmap_v4),
		cmocka_unit_test(test_format_ipv4),
		cmocka_unit_test(test_format_ipv6),
		cmocka_unit_test(test_format_unknown),
		cmocka_unit_test(test_format_truncates),
	};

	return cmocka_run_group_tests_name("dest", tests, NULL, NULL);
}
