/* fuzz_match.c - libFuzzer target for the rule matcher: a `match` text (the input's first line)
 * parsed by tb_match_parse, then tested against destinations built from the rest. */
#include <stdbool.h>
#include <ctype.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "dest.h"
#include "fuzz.h"
#include "rules.h"

/* The parsed form is well made: a known kind, a port of 1..65535 or none, a prefix within
 * its family, no address bit past it, a lowercase name. */
static void check_shape(const struct tb_match *m, const char *text)
{
	FUZZ_CHECK(m->port == -1 || (m->port >= 1 && m->port <= 65535), "'%s': port %d", text,
		   m->port);
	FUZZ_CHECK(memchr(m->text, '\0', sizeof(m->text)) != NULL, "'%s': text unterminated",
		   text);
	switch (m->kind) {
	case TB_MATCH_ANY:
		FUZZ_CHECK(m->port == -1 && strcmp(text, "*") == 0, "'%s' is any", text);
		break;
	case TB_MATCH_PORT:
		FUZZ_CHECK(m->port > 0, "'%s': a port match without a port", text);
		break;
	case TB_MATCH_ADDR: {
		int max = m->family == AF_INET ? 32 : 128;

		FUZZ_CHECK(m->family == AF_INET || m->family == AF_INET6, "'%s': family %u", text,
			   m->family);
		FUZZ_CHECK(m->prefix <= max, "'%s': prefix %u", text, m->prefix);
		for (int bit = m->prefix; bit < max; bit++)
			FUZZ_CHECK(!(m->addr[bit / 8] & (0x80 >> (bit % 8))),
				   "'%s': bit %d set past /%u", text, bit, m->prefix);
		break;
	}
	case TB_MATCH_HOST:
		FUZZ_CHECK(m->text[0] != '\0' && strlen(m->text) <= 253, "'%s': name '%s'", text,
			   m->text);
		for (const char *p = m->text; *p; p++)
			FUZZ_CHECK(!isupper((unsigned char)*p), "'%s': name '%s' not lowercase", text,
				   m->text);
		break;
	case TB_MATCH_UNIX:
		FUZZ_CHECK(m->port == -1 && (m->text[0] == '/' || m->text[0] == '@') &&
				   strlen(m->text) < TB_UNIX_PATH_MAX,
			   "'%s': unix path '%s'", text, m->text);
		break;
	default:
		FUZZ_CHECK(0, "'%s': kind %d", text, (int)m->kind);
	}
}

/* An address match written back as text ("10.0.0.0/8:80", "[fd00::/8]:443", "::1/128")
 * parses to the same match. */
static void check_addr_round_trip(const struct tb_match *m, const char *text)
{
	struct tb_dest d;
	struct tb_match again;
	char addr[TB_DEST_STRLEN], canon[TB_DEST_STRLEN + 16], *colon;
	const char *why = NULL;

	memset(&d, 0, sizeof(d));
	d.family = m->family;
	memcpy(d.addr, m->addr, 16);
	tb_dest_format(&d, addr, sizeof(addr)); /* "a.b.c.d:0" or "[v6]:0" */
	colon = strrchr(addr, ':');
	*colon = '\0';
	if (m->family == AF_INET) {
		if (m->port > 0)
			snprintf(canon, sizeof(canon), "%s/%u:%d", addr, m->prefix, m->port);
		else
			snprintf(canon, sizeof(canon), "%s/%u", addr, m->prefix);
	} else {
		addr[strlen(addr) - 1] = '\0'; /* the ']' */
		if (m->port > 0)
			snprintf(canon, sizeof(canon), "%s/%u]:%d", addr, m->prefix, m->port);
		else
			snprintf(canon, sizeof(canon), "%s/%u", addr + 1, m->prefix);
	}
	FUZZ_CHECK(tb_match_parse(canon, &again, &why) == 0, "'%s' written '%s' is refused: %s",
		   text, canon, why);
	FUZZ_CHECK(again.kind == TB_MATCH_ADDR && again.family == m->family &&
			   again.prefix == m->prefix && again.port == m->port &&
			   memcmp(again.addr, m->addr, 16) == 0,
		   "'%s' written '%s' parses to another match", text, canon);
}

/* The network of an address match itself, and any address inside it, is matched; an
 * address with a bit flipped inside the prefix is not. */
static void check_addr_self(const struct tb_match *m, const uint8_t *noise, const char *text)
{
	struct tb_dest d;
	struct tb_target t = { &d, NULL, NULL, 0 };
	int max = m->family == AF_INET ? 32 : 128;

	memset(&d, 0, sizeof(d));
	d.family = m->family;
	d.port = (uint16_t)(m->port > 0 ? m->port : 1 + noise[0]);
	memcpy(d.addr, m->addr, 16);
	FUZZ_CHECK(tb_match_test(m, &t), "'%s' does not match its own address", text);
	for (int bit = m->prefix; bit < max; bit++)
		if (noise[1 + bit / 8] & (0x80 >> (bit % 8)))
			d.addr[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
	FUZZ_CHECK(tb_match_test(m, &t), "'%s' does not match an address inside it", text);
	if (m->prefix > 0) {
		int bit = noise[0] % m->prefix;

		d.addr[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
		FUZZ_CHECK(!tb_match_test(m, &t), "'%s' matches an address outside it (bit %d)",
			   text, bit);
	}
}

/* Tests m against the destination that `rest` describes: byte 0 picks the family, 1-2 the
 * port, 3-18 the address, the remainder is a hostname or a unix path. */
static void check_against(const struct tb_match *m, const uint8_t *rest, size_t len,
			  const char *text)
{
	uint8_t b[19] = { 0 };
	struct tb_dest d, v4;
	struct tb_target t;
	char *name = fuzz_cstr(rest + (len > 19 ? 19 : len), len > 19 ? len - 19 : 0);
	const char *names[1] = { name };
	bool hit, hit_named;

	memcpy(b, rest, len < sizeof(b) ? len : sizeof(b));
	memset(&d, 0, sizeof(d));
	d.port = (uint16_t)(b[1] << 8 | b[2]);
	memcpy(d.addr, b + 3, 16);
	switch (b[0] % 4) {
	case 0:
		d.family = AF_INET;
		memset(d.addr + 4, 0, 12);
		break;
	case 1:
		d.family = AF_INET6;
		break;
	case 2: /* an IPv4-mapped IPv6 address */
		d.family = AF_INET6;
		memset(d.addr, 0, 10);
		d.addr[10] = d.addr[11] = 0xff;
		break;
	default: { /* a unix socket: only a unix match may match */
		struct tb_target u = { NULL, name, NULL, 0 };

		hit = tb_match_test(m, &u);
		FUZZ_CHECK(!hit || m->kind == TB_MATCH_UNIX, "'%s' matches unix path '%s'", text,
			   name);
		if (m->kind == TB_MATCH_UNIX && strpbrk(m->text, "*?[\\") == NULL) {
			u.unix_path = m->text;
			FUZZ_CHECK(tb_match_test(m, &u), "'%s' does not match its own path", text);
		}
		free(name);
		return;
	}
	}
	t = (struct tb_target){ &d, NULL, NULL, 0 };
	hit = tb_match_test(m, &t);
	t.names = names;
	t.nnames = 1;
	hit_named = tb_match_test(m, &t);

	FUZZ_CHECK(m->kind != TB_MATCH_UNIX || (!hit && !hit_named), "'%s' matches an IP", text);
	FUZZ_CHECK(m->kind != TB_MATCH_HOST || !hit, "'%s' matches an address without names",
		   text);
	FUZZ_CHECK(m->kind == TB_MATCH_HOST || hit == hit_named,
		   "'%s': a name changes an address match", text);
	if (m->port > 0 && d.port != m->port)
		FUZZ_CHECK(!hit && !hit_named, "'%s' matches port %u", text, d.port);
	if (m->kind == TB_MATCH_ANY || (m->kind == TB_MATCH_PORT && d.port == m->port))
		FUZZ_CHECK(hit, "'%s' misses port %u", text, d.port);
	if (m->kind == TB_MATCH_ADDR && d.family != m->family) {
		/* Across families only an IPv4 rule and an IPv4-mapped address meet. */
		FUZZ_CHECK(!hit || (m->family == AF_INET && tb_dest_unmap_v4(&d, &v4)),
			   "'%s' matches an address of another family", text);
		if (m->family == AF_INET && tb_dest_unmap_v4(&d, &v4)) {
			struct tb_target t4 = { &v4, NULL, NULL, 0 };

			FUZZ_CHECK(hit == tb_match_test(m, &t4),
				   "'%s': a mapped address and its IPv4 disagree", text);
		}
	}
	if (m->kind == TB_MATCH_HOST && strpbrk(m->text, "*?[\\") == NULL) {
		/* A plain name matches itself at its port. */
		names[0] = m->text;
		d.port = (uint16_t)(m->port > 0 ? m->port : d.port);
		FUZZ_CHECK(tb_match_test(m, &t), "'%s' does not match its own name", text);
	}
	free(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t tlen = nl != NULL ? (size_t)(nl - data) : size;
	char *text = fuzz_cstr(data, tlen);
	struct tb_match m;
	const char *why = NULL;
	uint8_t noise[17] = { 0 };

	if (tb_match_parse(text, &m, &why) < 0) {
		FUZZ_CHECK(why != NULL && strlen(why) > 10, "'%s' refused without a sentence", text);
		free(text);
		return 0;
	}
	check_shape(&m, text);
	if (nl != NULL) {
		const uint8_t *rest = nl + 1;
		size_t rlen = size - tlen - 1;

		memcpy(noise, rest, rlen < sizeof(noise) ? rlen : sizeof(noise));
		check_against(&m, rest, rlen, text);
	}
	if (m.kind == TB_MATCH_ADDR) {
		check_addr_round_trip(&m, text);
		check_addr_self(&m, noise, text);
	}
	free(text);
	return 0;
}
