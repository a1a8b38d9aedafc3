/* dest.c - destinations: conversion from sockaddr, equality, formatting.
 * Formatting is hand-written (no inet_ntop/snprintf) so the log path stays signal-safe. */
#include "dest.h"

#include <netinet/in.h>
#include <string.h>

int tb_dest_from_sockaddr(struct tb_dest *d, const struct sockaddr *sa, socklen_t len)
{
	memset(d, 0, sizeof(*d));
	if (sa == NULL || len < (socklen_t)sizeof(sa_family_t))
		return -1;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		d->family = AF_INET;
		d->port = ntohs(in->sin_port);
		memcpy(d->addr, &in->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		d->family = AF_INET6;
		d->port = ntohs(in6->sin6_port);
		memcpy(d->addr, &in6->sin6_addr, 16);
		return 0;
	}
	return -1;
}

bool tb_dest_equal(const struct tb_dest *a, const struct tb_dest *b)
{
	return a->family == b->family && a->port == b->port &&
	       memcmp(a->addr, b->addr, a->family == AF_INET ? 4 : 16) == 0;
}

/* The first 12 bytes of every IPv4-mapped IPv6 address. */
static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

bool tb_dest_unmap_v4(const struct tb_dest *d, struct tb_dest *v4)
{
	uint8_t addr[4];
	uint16_t port = d->port;

	if (d->family != AF_INET6 || memcmp(d->addr, v4_mapped_prefix, 12) != 0)
		return false;
	memcpy(addr, d->addr + 12, 4);
	memset(v4, 0, sizeof(*v4));
	v4->family = AF_INET;
	v4->port = port;
	memcpy(v4->addr, addr, 4);
	return true;
}

static size_t put_str(char *buf, size_t len, size_t at, const char *s)
{
	while (*s && at + 1 < len)
		buf[at++] = *s++;
	return at;
}

static size_t put_uint(char *buf, size_t len, size_t at, unsigned v)
{
	char tmp[12];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && at + 1 < len)
		buf[at++] = tmp[--n];
	return at;
}

static size_t put_hex16(char *buf, size_t len, size_t at, unsigned v)
{
	static const char hex[] = "0123456789abcdef";
	int shift = 12;

	while (shift > 0 && ((v >> shift) & 0xf) == 0)
		shift -= 4;
	for (; shift >= 0 && at + 1 < len; shift -= 4)
		buf[at++] = hex[(v >> shift) & 0xf];
	return at;
}

/* RFC 5952 text: the longest run (>= 2) of zero groups becomes "::". */
static size_t put_ipv6(char *buf, size_t len, size_t at, const uint8_t *a)
{
	unsigned g[8];
	int best = -1, best_len = 0;

	for (int i = 0; i < 8; i++)
		g[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
	for (int i = 0; i < 8;) {
		int j = i;

		while (j < 8 && g[j] == 0)
			j++;
		if (j - i > best_len && j - i >= 2) {
			best = i;
			best_len = j - i;
		}
		i = j == i ? i + 1 : j;
	}
	for (int i = 0; i < 8; i++) {
		if (i == best) {
			at = put_str(buf, len, at, "::");
			i += best_len - 1;
			continue;
		}
		if (i > 0 && i != best + best_len)
			at = put_str(buf, len, at, ":");
		at = put_hex16(buf, len, at, g[i]);
	}
	return at;
}

char *tb_dest_format(const struct tb_dest *d, char *buf, size_t len)
{
	size_t at = 0;

	if (len == 0)
		return buf;
	if (d->family == AF_INET) {
		for (int i = 0; i < 4; i++) {
			if (i)
				at = put_str(buf, len, at, ".");
			at = put_uint(buf, len, at, d->addr[i]);
		}
	} else if (d->family == AF_INET6) {
		at = put_str(buf, len, at, "[");
		at = put_ipv6(buf, len, at, d->addr);
		at = put_str(buf, len, at, "]");
	} else if (d->family == AF_UNIX) {
		/* Only a hash of the path is kept; the rule that matched names the path. */
		at = put_str(buf, len, at, "unix");
		buf[at] = '\0';
		return buf;
	} else {
		at = put_str(buf, len, at, "-");
		buf[at] = '\0';
		return buf;
	}
	at = put_str(buf, len, at, ":");
	at = put_uint(buf, len, at, d->port);
	buf[at] = '\0';
	return buf;
}
