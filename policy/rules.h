/* rules.h - the `match` of a destination rule: its text parsed, and a connect tested against it.
 * Pure code: no I/O, no locks, no allocation; hostnames learned at run time come from the caller. */
#ifndef TB_RULES_H
#define TB_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dest.h"

#define TB_NAME_MAX 256       /* a DNS name is at most 253 bytes */
#define TB_UNIX_PATH_MAX 108  /* sizeof(sun_path) */

enum tb_match_kind {
	TB_MATCH_ANY,  /* "*": every TCP destination */
	TB_MATCH_PORT, /* "*:6379" */
	TB_MATCH_ADDR, /* "10.0.0.5", "10.0.0.5:80", "10.0.0.0/8", "[fd00::/8]:443", "::1" */
	TB_MATCH_HOST, /* "inventory:8080", "*.svc.cluster.local" (a pattern, lowercase) */
	TB_MATCH_UNIX, /* "unix:/run/app.sock", "unix:@abstract" (a pattern) */
};

struct tb_match {
	enum tb_match_kind kind;
	int port;         /* -1: any port */
	uint16_t family;  /* TB_MATCH_ADDR: AF_INET or AF_INET6 */
	uint8_t prefix;   /* TB_MATCH_ADDR: leading bits compared */
	uint8_t addr[16];
	char text[TB_NAME_MAX]; /* TB_MATCH_HOST: the name pattern; TB_MATCH_UNIX: the path */
};

/* What a connect is about to reach. dest is set for AF_INET/AF_INET6, unix_path for AF_UNIX
 * ("@name" for an abstract socket). names are the hostnames the program resolved to dest's
 * address (lowercase, most recent first). */
struct tb_target {
	const struct tb_dest *dest;
	const char *unix_path;
	const char *const *names;
	size_t nnames;
};

/*
 * Parses a match text. Returns 0, or -1 with *why set to a sentence naming the mistake
 * (a static string).
 */
int tb_match_parse(const char *text, struct tb_match *m, const char **why);

/* True when m matches t. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is tested as IPv4. */
bool tb_match_test(const struct tb_match *m, const struct tb_target *t);

/*
 * Parses a destination as written on a command line ("10.0.0.5:8080", "[::1]:80",
 * "inventory:8080", "unix:/run/x.sock") into a target: an address fills *dest, a name fills
 * name (TB_NAME_MAX bytes, lowercase) and *port, a unix path fills name. Returns the kind
 * (TB_MATCH_ADDR, TB_MATCH_HOST or TB_MATCH_UNIX), or -1 with *why set.
 */
int tb_target_parse(const char *text, struct tb_dest *dest, char *name, int *port,
		    const char **why);

#endif
