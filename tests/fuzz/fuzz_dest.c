/* fuzz_dest.c - libFuzzer target for destinations: a sockaddr from the input converted and
 * written by tb_dest_format, and a destination's text read by tb_target_parse; each round trip. */
#include <ctype.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "dest.h"
#include "fuzz.h"
#include "rules.h"

/* d written in full, then into every shorter buffer: always a NUL-terminated prefix. */
static void check_format(const struct tb_dest *d, char *full)
{
	char part[TB_DEST_STRLEN + 1];

	memset(full, 'x', TB_DEST_STRLEN);
	tb_dest_format(d, full, TB_DEST_STRLEN);
	FUZZ_CHECK(memchr(full, '\0', TB_DEST_STRLEN) != NULL, "family %u: no NUL", d->family);
	for (size_t len = 1; len < TB_DEST_STRLEN; len++) {
		memset(part, 'x', sizeof(part));
		tb_dest_format(d, part, len);
		FUZZ_CHECK(memchr(part, '\0', len) != NULL && part[len] == 'x',
			   "'%s' in %zu bytes: not terminated inside", full, len);
		FUZZ_CHECK(strncmp(part, full, strlen(part)) == 0 &&
				   (strlen(part) == strlen(full) || strlen(part) == len - 1),
			   "'%s' in %zu bytes gave '%s'", full, len, part);
	}
}

/* An IP destination's text, read back as a command-line destination, is that destination. */
static void check_text_round_trip(const struct tb_dest *d, const char *text)
{
	struct tb_dest back;
	char name[TB_NAME_MAX];
	const char *why = NULL;
	int port, kind = tb_target_parse(text, &back, name, &port, &why);

	if (d->port == 0) { /* no port 0 on a command line */
		FUZZ_CHECK(kind == -1, "'%s' accepted with port 0", text);
		return;
	}
	FUZZ_CHECK(kind == TB_MATCH_ADDR, "'%s' read as kind %d: %s", text, kind,
		   kind < 0 ? why : "-");
	FUZZ_CHECK(tb_dest_equal(&back, d) && port == d->port, "'%s' read back differently",
		   text);
}

static void from_sockaddr(const uint8_t *data, size_t size)
{
	struct sockaddr_storage ss;
	struct tb_dest d, v4;
	char full[TB_DEST_STRLEN];
	socklen_t len;
	static const sa_family_t families[] = { AF_INET, AF_INET6, AF_UNIX, AF_UNSPEC };
	int rc;

	if (size < 2)
		return;
	memset(&ss, 0, sizeof(ss));
	len = (socklen_t)(data[1] % (sizeof(ss) + 1));
	memcpy(&ss, data + 2, size - 2 < sizeof(ss) ? size - 2 : sizeof(ss));
	if (data[0] % 5 < 4)
		ss.ss_family = families[data[0] % 5];
	memset(&d, 0xa5, sizeof(d));
	rc = tb_dest_from_sockaddr(&d, (struct sockaddr *)&ss, len);
	if (rc != 0) {
		static const struct tb_dest zero;

		FUZZ_CHECK(rc == -1 && memcmp(&d, &zero, sizeof(d)) == 0,
			   "refused family %u len %u: rc %d, not zeroed", ss.ss_family, len, rc);
		FUZZ_CHECK(!((ss.ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
			     (ss.ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))),
			   "family %u len %u refused", ss.ss_family, len);
		check_format(&d, full);
		FUZZ_CHECK(strcmp(full, "-") == 0, "a zeroed destination written '%s'", full);
		return;
	}
	FUZZ_CHECK(d.family == ss.ss_family && (d.family == AF_INET || d.family == AF_INET6),
		   "family %u became %u", ss.ss_family, d.family);
	FUZZ_CHECK(tb_dest_equal(&d, &d), "a destination differs from itself");
	check_format(&d, full);
	check_text_round_trip(&d, full);
	if (tb_dest_unmap_v4(&d, &v4)) {
		char text4[TB_DEST_STRLEN];

		FUZZ_CHECK(d.family == AF_INET6 && v4.family == AF_INET && v4.port == d.port &&
				   memcmp(v4.addr, d.addr + 12, 4) == 0,
			   "'%s' unmapped wrongly", full);
		FUZZ_CHECK(!tb_dest_equal(&d, &v4), "'%s' equals its unmapped form", full);
		check_format(&v4, text4);
		check_text_round_trip(&v4, text4);
		/* v4 may be d itself. */
		v4 = d;
		FUZZ_CHECK(tb_dest_unmap_v4(&v4, &v4) && v4.family == AF_INET, "in place");
	}
}

static void from_text(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size), name[TB_NAME_MAX + 1], full[TB_DEST_STRLEN];
	struct tb_dest d;
	const char *why = NULL;
	int port = 12345, kind;

	memset(name, 'x', sizeof(name));
	kind = tb_target_parse(text, &d, name, &port, &why);
	FUZZ_CHECK(memchr(name, '\0', TB_NAME_MAX) != NULL && name[TB_NAME_MAX] == 'x',
		   "'%s': name not terminated inside TB_NAME_MAX", text);
	switch (kind) {
	case -1:
		FUZZ_CHECK(why != NULL && strlen(why) > 10, "'%s' refused without a sentence",
			   text);
		break;
	case TB_MATCH_ADDR:
		FUZZ_CHECK(port >= 1 && port <= 65535 && port == d.port, "'%s': port %d", text, port);
		check_format(&d, full);
		check_text_round_trip(&d, full);
		break;
	case TB_MATCH_HOST:
		FUZZ_CHECK(port >= 1 && port <= 65535 && d.family == 0, "'%s': port %d", text, port);
		FUZZ_CHECK(name[0] != '\0' && strchr(name, '*') == NULL, "'%s': name '%s'", text,
			   name);
		for (const char *p = name; *p; p++)
			FUZZ_CHECK(!isupper((unsigned char)*p), "'%s': '%s' not lowercase", text, name);
		break;
	case TB_MATCH_UNIX:
		FUZZ_CHECK((name[0] == '/' || name[0] == '@') && strlen(name) < TB_UNIX_PATH_MAX &&
				   strcmp(name, text + 5) == 0 && d.family == 0,
			   "'%s': path '%s'", text, name);
		break;
	default:
		FUZZ_CHECK(0, "'%s': kind %d", text, kind);
	}
	free(text);
}

/* The first byte picks the direction: even, a sockaddr; odd, a destination's text. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] % 2 == 0)
		from_sockaddr(data + 1, size - 1);
	else
		from_text(data + 1, size - 1);
	return 0;
}
