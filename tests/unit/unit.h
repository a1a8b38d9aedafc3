/* unit.h - what the cmocka unit tests share: time units on the simulated clock, and an
 * IPv4 destination builder. Include after <cmocka.h>. */
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

#endif
