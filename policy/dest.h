/* dest.h - a destination (address family, IP, port) in a compact, comparable form.
 * Pure code: converting from a sockaddr, comparing, and writing "ip:port" for logs. */
#ifndef TB_DEST_H
#define TB_DEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct tb_dest {
	uint16_t family; /* AF_INET, AF_INET6, AF_UNIX (addr: a hash of the path), or 0 */
	uint16_t port;   /* host byte order */
	uint8_t addr[16];
};

#define TB_DEST_STRLEN 64 /* "[ffff:...:ffff]:65535" fits */

/* Fills *d from an AF_INET/AF_INET6 address. Returns 0, or -1 for any other family or a
 * length too short for its family (then *d is zeroed). */
int tb_dest_from_sockaddr(struct tb_dest *d, const struct sockaddr *sa, socklen_t len);

bool tb_dest_equal(const struct tb_dest *a, const struct tb_dest *b);

/*
 * True when d is an IPv4-mapped IPv6 address (::ffff:a.b.c.d, RFC 4291 2.5.5.2: an IPv4 peer
 * reached through an IPv6 socket); then *v4 is set to that IPv4 destination, same port.
 * Otherwise returns false and leaves *v4 untouched. v4 may be d itself.
 */
bool tb_dest_unmap_v4(const struct tb_dest *d, struct tb_dest *v4);

/* "127.0.0.1:8080", "[::1]:8080" or "-" when unknown; returns buf. Async-signal-safe. */
char *tb_dest_format(const struct tb_dest *d, char *buf, size_t len);

#endif
