/* unit.h - what the cmocka unit tests share: time units on the simulated clock, and
 * destination builders. Include after <cmocka.h>. */
#ifndef TB_UNIT_H
#define TB_UNIT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "dest.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)

/* An origin far from 0, so that a bound computed from 0 (or a 0 meaning "none") cannot
 * pass by accident. */
#define T0 (1000 * S)

/* ip:port as a tb_dest; the test fails if ip does not parse. */
static inline struct tb_dest dest_v4(const char *ip, uint16_t port)
{
	struct sockaddr_in in;
	struct tb_dest d;

	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	in.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, ip, &in.sin_addr), 1);
	assert_int_equal(tb_dest_from_sockaddr(&d, (struct sockaddr *)&in, sizeof(in)), 0);
	return d;
}

/* [ip6]:port as a tb_dest, through a sockaddr_in6; the test fails if ip does not parse. */
static inline struct tb_dest dest_v6(const char *ip, uint16_t port)
{
	struct sockaddr_in6 in6;
	struct tb_dest d;

	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_port = htons(port);
	assert_int_equal(inet_pton(AF_INET6, ip, &in6.sin6_addr), 1);
	assert_int_equal(tb_dest_from_sockaddr(&d, (struct sockaddr *)&in6, sizeof(in6)), 0);
	return d;
}

/* addr:port as a tb_dest, IPv6 when addr holds a colon, filled in directly. */
static inline struct tb_dest dest_ip(const char *addr, int port)
{
	struct tb_dest d;

	memset(&d, 0, sizeof(d));
	d.family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	assert_int_equal(inet_pton(d.family, addr, d.addr), 1);
	d.port = (uint16_t)port;
	return d;
}

#endif
