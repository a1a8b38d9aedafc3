/* test_rules.c - tb_match_parse, tb_match_test and tb_target_parse: every kind of match, its
 * mistakes, IPv4/IPv6 (mapped addresses too), hostnames learned at run time, unix paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "unit.h"

#include "names.h"
#include "rules.h"

static struct tb_match parsed(const char *text)
{
	struct tb_match m;
	const char *why = NULL;

	if (tb_match_parse(text, &m, &why) != 0)
		fail_msg("%s: %s", text, why);
	return m;
}

static bool hits(const char *match, const char *addr, int port)
{
	struct tb_match m = parsed(match);
	struct tb_dest d = dest_ip(addr, port);
	struct tb_target t = { &d, NULL, NULL, 0 };

	return tb_match_test(&m, &t);
}

static bool hits_named(const char *match, const char *addr, int port, const char *name)
{
	struct tb_match m = parsed(match);
	struct tb_dest d = dest_ip(addr, port);
	const char *names[] = { "other.example", name };
	struct tb_target t = { &d, NULL, names, name ? 2 : 1 };

	return tb_match_test(&m, &t);
}

static void expect_error(const char *text, const char *fragment)
{
	struct tb_match m;
	const char *why = NULL;

	assert_int_equal(tb_match_parse(text, &m, &why), -1);
	assert_non_null(why);
	if (strstr(why, fragment) == NULL)
		fail_msg("%s: '%s' lacks '%s'", text, why, fragment);
}

static void test_kinds(void **state)
{
	(void)state;
	assert_int_equal(parsed("*").kind, TB_MATCH_ANY);
	assert_int_equal(parsed("*:6379").kind, TB_MATCH_PORT);
	assert_int_equal(parsed("*:6379").port, 6379);
	assert_int_equal(parsed("10.0.0.5").kind, TB_MATCH_ADDR);
	assert_int_equal(parsed("10.0.0.5").prefix, 32);
	assert_int_equal(parsed("10.0.0.5:80").port, 80);
	assert_int_equal(parsed("10.0.0.0/8").prefix, 8);
	assert_int_equal(parsed("10.0.0.0/8:443").port, 443);
	assert_int_equal(parsed("::1").family, AF_INET6);
	assert_int_equal(parsed("::1").port, -1);
	assert_int_equal(parsed("[fd00::/8]:443").prefix, 8);
	assert_int_equal(parsed("[::1]:80").port, 80);
	assert_int_equal(parsed("inventory:8080").kind, TB_MATCH_HOST);
	assert_string_equal(parsed("Inventory.Svc.:8080").text, "inventory.svc");
	assert_int_equal(parsed("inventory").port, -1);
	assert_int_equal(parsed("unix:/run/app.sock").kind, TB_MATCH_UNIX);
	assert_string_equal(parsed("unix:@abstract").text, "@abstract");
}

static void test_errors(void **state)
{
	(void)state;
	expect_error("", "empty");
	expect_error("10.0.0.0/33", "0 to 32");
	expect_error("[fd00::/129]:1", "0 to 128");
	expect_error("10.0.0.1/8", "bits set beyond the prefix");
	expect_error("10.0.0.300", "not an IPv4 address");
	expect_error("fd00::zz", "not an IPv6 address");
	expect_error("[::1", "[addr]:port");
	expect_error("[::1]x", "[addr]:port");
	expect_error("host:0", "port");
	expect_error("host:65536", "port");
	expect_error("host:80x", "port");
	expect_error("*:", "port");
	expect_error("bad host:80", "hostname");
	expect_error("unix:relative.sock", "unix");
	expect_error("unix:@", "unix");
}

static void test_ipv4(void **state)
{
	(void)state;
	assert_true(hits("10.0.0.5:8080", "10.0.0.5", 8080));
	assert_false(hits("10.0.0.5:8080", "10.0.0.5", 8081));
	assert_false(hits("10.0.0.5:8080", "10.0.0.6", 8080));
	assert_true(hits("10.0.0.5", "10.0.0.5", 1));
	assert_true(hits("10.0.0.0/8", "10.255.1.2", 443));
	assert_false(hits("10.0.0.0/8", "11.0.0.1", 443));
	assert_true(hits("192.168.4.0/22", "192.168.7.255", 1));
	assert_false(hits("192.168.4.0/22", "192.168.8.0", 1));
	assert_true(hits("0.0.0.0/0", "8.8.8.8", 53));
	assert_true(hits("*:6379", "10.1.1.1", 6379));
	assert_false(hits("*:6379", "10.1.1.1", 6380));
	assert_true(hits("*", "::1", 1));
	/* An IPv4 rule matches the same address reached through an IPv6 socket. */
	assert_true(hits("10.0.0.0/8:80", "::ffff:10.1.2.3", 80));
	assert_false(hits("10.0.0.0/8:80", "::1", 80));
}

static void test_ipv6(void **state)
{
	(void)state;
	assert_true(hits("::1", "::1", 80));
	assert_true(hits("[::1]:80", "::1", 80));
	assert_false(hits("[::1]:80", "::1", 81));
	assert_true(hits("fd00::/8", "fdab::1", 1));
	assert_false(hits("fd00::/8", "fe80::1", 1));
	assert_true(hits("[2001:db8::/33]:443", "2001:db8:7fff::1", 443));
	assert_false(hits("[2001:db8::/33]:443", "2001:db8:8000::1", 443));
	assert_false(hits("::1", "127.0.0.1", 80));
}

static void test_hostnames(void **state)
{
	(void)state;
	assert_true(hits_named("inventory:8080", "10.0.0.5", 8080, "inventory"));
	assert_false(hits_named("inventory:8080", "10.0.0.5", 8081, "inventory"));
	assert_false(hits_named("inventory:8080", "10.0.0.5", 8080, NULL));
	assert_true(hits_named("inventory", "10.0.0.5", 1, "inventory"));
	assert_true(hits_named("*.svc.cluster.local:80", "10.0.0.5", 80,
			       "payments.prod.svc.cluster.local"));
	assert_false(hits_named("*.svc.cluster.local:80", "10.0.0.5", 80, "svc.cluster.local"));
	/* Never by address alone: a name rule needs a learned name. */
	assert_false(hits_named("localhost:80", "127.0.0.1", 80, NULL));
}

static void test_unix(void **state)
{
	struct tb_match m = parsed("unix:/run/app.sock"), glob = parsed("unix:/run/*.sock");
	struct tb_dest d = dest_ip("127.0.0.1", 80);
	struct tb_target u = { NULL, "/run/app.sock", NULL, 0 }, o = { NULL, "/run/x", NULL, 0 };
	struct tb_target inet = { &d, NULL, NULL, 0 };

	(void)state;
	assert_true(tb_match_test(&m, &u));
	assert_false(tb_match_test(&m, &o));
	assert_false(tb_match_test(&m, &inet));
	assert_true(tb_match_test(&glob, &u));
	/* Address rules never match a unix socket. */
	assert_false(tb_match_test(&(struct tb_match){ .kind = TB_MATCH_ANY, .port = -1 }, &u));
}

static void test_target_parse(void **state)
{
	struct tb_dest d;
	char name[TB_NAME_MAX];
	int port;
	const char *why;

	(void)state;
	assert_int_equal(tb_target_parse("10.0.0.5:8080", &d, name, &port, &why), TB_MATCH_ADDR);
	assert_int_equal(d.family, AF_INET);
	assert_int_equal(d.port, 8080);
	assert_int_equal(tb_target_parse("[::1]:80", &d, name, &port, &why), TB_MATCH_ADDR);
	assert_int_equal(d.family, AF_INET6);
	assert_int_equal(tb_target_parse("Inventory:8080", &d, name, &port, &why), TB_MATCH_HOST);
	assert_string_equal(name, "inventory");
	assert_int_equal(port, 8080);
	assert_int_equal(tb_target_parse("unix:/run/a.sock", &d, name, &port, &why),
			 TB_MATCH_UNIX);
	assert_string_equal(name, "/run/a.sock");
	assert_int_equal(tb_target_parse("10.0.0.0/8:80", &d, name, &port, &why), -1);
	assert_int_equal(tb_target_parse("inventory", &d, name, &port, &why), -1);
	assert_int_equal(tb_target_parse("*:80", &d, name, &port, &why), -1);
}

static struct tb_names table; /* 64 KiB: not on the stack */

static void test_learned_names(void **state)
{
	struct tb_dest d = dest_ip("10.0.0.5", 8080), v6 = dest_ip("fd00::5", 80), mapped;
	char out[TB_NAMES_PER_ADDR][TB_NAME_MAX];
	const char *ptrs[TB_NAMES_PER_ADDR];
	struct tb_match m = parsed("inventory:8080");
	struct tb_target t = { &d, NULL, ptrs, 0 };
	char name[32];

	(void)state;
	memset(&table, 0, sizeof(table));
	assert_int_equal(tb_names_lookup(&table, &d, out, 4), 0);
	assert_false(tb_match_test(&m, &t));

	tb_names_learn(&table, "Inventory.", AF_INET, d.addr);
	tb_names_learn(&table, "inventory", AF_INET, d.addr); /* the same pair: kept once */
	tb_names_learn(&table, "10.0.0.5", AF_INET, d.addr);  /* numeric: not a name */
	tb_names_learn(&table, "other", AF_INET6, v6.addr);
	assert_int_equal(tb_names_lookup(&table, &d, out, 4), 1);
	assert_string_equal(out[0], "inventory");
	t.nnames = tb_names_lookup(&table, &d, out, 4);
	ptrs[0] = out[0];
	assert_true(tb_match_test(&m, &t));

	/* Most recent first, bounded by max. */
	tb_names_learn(&table, "inv-alias", AF_INET, d.addr);
	assert_int_equal(tb_names_lookup(&table, &d, out, 4), 2);
	assert_string_equal(out[0], "inv-alias");
	assert_int_equal(tb_names_lookup(&table, &d, out, 1), 1);

	/* The port does not matter; the family does; a v4-mapped address finds the v4 name. */
	d.port = 1;
	assert_int_equal(tb_names_lookup(&table, &d, out, 4), 2);
	assert_int_equal(tb_names_lookup(&table, &v6, out, 4), 1);
	mapped = dest_ip("::ffff:10.0.0.5", 8080);
	assert_int_equal(tb_names_lookup(&table, &mapped, out, 4), 2);

	/* Bounded: the oldest pairs are forgotten first. */
	for (int i = 0; i < TB_NAMES_CAP; i++) {
		struct tb_dest x = dest_ip("192.0.2.1", 1);

		x.addr[3] = (uint8_t)i;
		snprintf(name, sizeof(name), "filler-%d", i);
		tb_names_learn(&table, name, AF_INET, x.addr);
	}
	assert_int_equal(table.count, TB_NAMES_CAP);
	assert_int_equal(tb_names_lookup(&table, &d, out, 4), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),     cmocka_unit_test(test_errors),
		cmocka_unit_test(test_ipv4),      cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_hostnames), cmocka_unit_test(test_unix),
		cmocka_unit_test(test_target_parse), cmocka_unit_test(test_learned_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
