/* rules.c - parsing and testing the `match` of a destination rule.
 * Pure code: inet_pton and fnmatch only; the caller brings the names its program resolved. */
#include "rules.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static const char E_EMPTY[] = "a match is empty; write e.g. \"10.0.0.5:8080\" or \"inventory:8080\"";
static const char E_PORT[] = "a port is a whole number from 1 to 65535";
static const char E_PREFIX4[] = "an IPv4 prefix length is 0 to 32";
static const char E_PREFIX6[] = "an IPv6 prefix length is 0 to 128";
static const char E_HOSTBITS[] = "the address has bits set beyond the prefix length "
				 "(write the network address, e.g. 10.0.0.0/8)";
static const char E_V6[] = "not an IPv6 address";
static const char E_V4[] = "not an IPv4 address";
static const char E_BRACKET[] = "an IPv6 address with a port is written [addr]:port";
static const char E_HOST[] = "a hostname holds letters, digits, '-', '.', '_' and '*' only";
static const char E_HOST_PORT[] = "a hostname needs a port here, e.g. inventory:8080";
static const char E_HOST_LONG[] = "a hostname is at most 253 bytes";
static const char E_UNIX[] = "a unix match names a path starting with / (or @ for an abstract "
			     "socket), e.g. unix:/run/app.sock";
static const char E_UNIX_LONG[] = "a unix socket path is at most 107 bytes";
static const char E_PORT_ONLY[] = "write *:PORT to match a port on every address";

/* A port: 1..65535, digits only. Returns the port or -1. */
static int parse_port(const char *s)
{
	long v = 0;

	if (*s < '1' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');
		if (v > 65535)
			return -1;
	}
	return *s == '\0' ? (int)v : -1;
}

/* "/n" after an address: 0..max. Returns the length or -1. */
static int parse_prefix(const char *s, int max)
{
	int v = 0;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] != '\0'))
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');
		if (v > max)
			return -1;
	}
	return *s == '\0' ? v : -1;
}

/* True when addr has no bit set after the first `prefix` bits. */
static bool host_bits_clear(const uint8_t *addr, int bytes, int prefix)
{
	for (int bit = prefix; bit < bytes * 8; bit++)
		if (addr[bit / 8] & (0x80 >> (bit % 8)))
			return false;
	return true;
}

/* An address with an optional /prefix (text is modified). Returns 0 or -1 with *why. */
static int parse_addr(char *text, int family, struct tb_match *m, const char **why)
{
	char *slash = strchr(text, '/');
	int max = family == AF_INET ? 32 : 128, prefix = max;

	if (slash != NULL) {
		*slash = '\0';
		prefix = parse_prefix(slash + 1, max);
		if (prefix < 0) {
			*why = family == AF_INET ? E_PREFIX4 : E_PREFIX6;
			return -1;
		}
	}
	if (inet_pton(family, text, m->addr) != 1) {
		*why = family == AF_INET ? E_V4 : E_V6;
		return -1;
	}
	if (!host_bits_clear(m->addr, max / 8, prefix)) {
		*why = E_HOSTBITS;
		return -1;
	}
	m->kind = TB_MATCH_ADDR;
	m->family = (uint16_t)family;
	m->prefix = (uint8_t)prefix;
	return 0;
}

/* True when s looks like a dotted IPv4 address (digits, dots and maybe a /prefix). */
static bool looks_ipv4(const char *s)
{
	if (!isdigit((unsigned char)*s))
		return false;
	return strspn(s, "0123456789./") == strlen(s) && strchr(s, '.') != NULL;
}

static int parse_host(const char *host, struct tb_match *m, const char **why)
{
	size_t len = strlen(host);

	if (len == 0) {
		*why = E_EMPTY;
		return -1;
	}
	if (len > 253) {
		*why = E_HOST_LONG;
		return -1;
	}
	if (strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._*") !=
	    len) {
		*why = E_HOST;
		return -1;
	}
	for (size_t i = 0; i <= len; i++)
		m->text[i] = (char)tolower((unsigned char)host[i]);
	if (len > 1 && m->text[len - 1] == '.')
		m->text[len - 1] = '\0'; /* "inventory." is the same name */
	m->kind = TB_MATCH_HOST;
	return 0;
}

int tb_match_parse(const char *text, struct tb_match *m, const char **why)
{
	char buf[TB_NAME_MAX + 16], *colon;
	size_t len = text != NULL ? strlen(text) : 0;

	memset(m, 0, sizeof(*m));
	m->port = -1;
	if (len == 0) {
		*why = E_EMPTY;
		return -1;
	}
	if (strcmp(text, "*") == 0) {
		m->kind = TB_MATCH_ANY;
		return 0;
	}
	if (strncmp(text, "unix:", 5) == 0) {
		const char *path = text + 5;

		if (path[0] != '/' && !(path[0] == '@' && path[1] != '\0')) {
			*why = E_UNIX;
			return -1;
		}
		if (strlen(path) >= TB_UNIX_PATH_MAX) {
			*why = E_UNIX_LONG;
			return -1;
		}
		m->kind = TB_MATCH_UNIX;
		snprintf(m->text, sizeof(m->text), "%s", path);
		return 0;
	}
	if (len >= sizeof(buf)) {
		*why = E_HOST_LONG;
		return -1;
	}
	memcpy(buf, text, len + 1);

	if (buf[0] == '[') { /* [v6] or [v6/n] then an optional :port */
		char *close = strchr(buf, ']');

		if (close == NULL || (close[1] != '\0' && close[1] != ':')) {
			*why = E_BRACKET;
			return -1;
		}
		if (close[1] == ':' && (m->port = parse_port(close + 2)) < 0) {
			*why = E_PORT;
			return -1;
		}
		*close = '\0';
		return parse_addr(buf + 1, AF_INET6, m, why);
	}
	colon = strchr(buf, ':');
	if (colon != NULL && strchr(colon + 1, ':') != NULL) /* bare IPv6: no port */
		return parse_addr(buf, AF_INET6, m, why);
	if (colon != NULL) {
		*colon = '\0';
		if ((m->port = parse_port(colon + 1)) < 0) {
			*why = E_PORT;
			return -1;
		}
		if (strcmp(buf, "*") == 0) {
			m->kind = TB_MATCH_PORT;
			return 0;
		}
	} else if (buf[0] == '*' && buf[1] == '\0') {
		*why = E_PORT_ONLY;
		return -1;
	}
	if (looks_ipv4(buf))
		return parse_addr(buf, AF_INET, m, why);
	return parse_host(buf, m, why);
}

/* The first `bits` bits of a and b are equal. */
static bool prefix_equal(const uint8_t *a, const uint8_t *b, int bits)
{
	int bytes = bits / 8, rest = bits % 8;

	if (memcmp(a, b, (size_t)bytes) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[bytes] ^ b[bytes]) & (0xff << (8 - rest)) & 0xff) == 0;
}

static bool addr_matches(const struct tb_match *m, const struct tb_dest *d)
{
	struct tb_dest v4;

	if (d->family == m->family)
		return prefix_equal(d->addr, m->addr, m->prefix);
	if (m->family == AF_INET && tb_dest_unmap_v4(d, &v4))
		return prefix_equal(v4.addr, m->addr, m->prefix);
	return false;
}

bool tb_match_test(const struct tb_match *m, const struct tb_target *t)
{
	if (m->kind == TB_MATCH_UNIX)
		return t->unix_path != NULL && fnmatch(m->text, t->unix_path, 0) == 0;
	if (t->dest == NULL)
		return false;
	if (m->port >= 0 && m->port != t->dest->port)
		return false;
	switch (m->kind) {
	case TB_MATCH_ANY:
	case TB_MATCH_PORT:
		return true;
	case TB_MATCH_ADDR:
		return addr_matches(m, t->dest);
	case TB_MATCH_HOST:
		for (size_t i = 0; i < t->nnames; i++)
			if (fnmatch(m->text, t->names[i], 0) == 0)
				return true;
		return false;
	case TB_MATCH_UNIX:
		break;
	}
	return false;
}

int tb_target_parse(const char *text, struct tb_dest *dest, char *name, int *port,
		    const char **why)
{
	struct tb_match m;

	memset(dest, 0, sizeof(*dest));
	name[0] = '\0';
	*port = -1;
	if (tb_match_parse(text, &m, why) < 0)
		return -1;
	switch (m.kind) {
	case TB_MATCH_UNIX:
		snprintf(name, TB_NAME_MAX, "%s", m.text);
		return TB_MATCH_UNIX;
	case TB_MATCH_HOST:
		if (m.port < 0 || strchr(m.text, '*') != NULL) {
			*why = E_HOST_PORT;
			return -1;
		}
		snprintf(name, TB_NAME_MAX, "%s", m.text);
		*port = m.port;
		return TB_MATCH_HOST;
	case TB_MATCH_ADDR:
		if (m.port < 0 || m.prefix != (m.family == AF_INET ? 32 : 128)) {
			*why = "a destination is one address and a port, e.g. 10.0.0.5:8080";
			return -1;
		}
		dest->family = m.family;
		dest->port = (uint16_t)m.port;
		memcpy(dest->addr, m.addr, 16);
		*port = m.port;
		return TB_MATCH_ADDR;
	case TB_MATCH_ANY:
	case TB_MATCH_PORT:
		break;
	}
	*why = "a destination is host:port, ip:port, [ipv6]:port or unix:/path";
	return -1;
}
