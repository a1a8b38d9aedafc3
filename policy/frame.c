/* frame.c - framing a governed socket: detecting the protocol from its first bytes, then
 * handing each buffer to that protocol's machine (frame_http/tls/pg/resp.c). */
#include "frame.h"

#include <string.h>

#include "frame_impl.h"

_Static_assert(sizeof(struct tb_frame) <= TB_FRAME_SIZE_MAX, "struct tb_frame grew");

#define TB_FRAME_F_DRX 0x4u /* the bytes held for detection came from the server */

static const char *const proto_names[] = {
	[TB_PROTO_AUTO] = "auto",	  [TB_PROTO_HTTP] = "http",
	[TB_PROTO_TLS] = "tls",		  [TB_PROTO_POSTGRES] = "postgres",
	[TB_PROTO_REDIS] = "redis",	  [TB_PROTO_SESSION] = "session",
	[TB_PROTO_RAW] = "raw",
};

const char *tb_proto_name(enum tb_proto p)
{
	if ((unsigned)p >= sizeof(proto_names) / sizeof(proto_names[0]))
		return NULL;
	return proto_names[p];
}

int tb_proto_parse(const char *name, enum tb_proto *out)
{
	for (unsigned i = 0; i < sizeof(proto_names) / sizeof(proto_names[0]); i++)
		if (strcmp(name, proto_names[i]) == 0) {
			*out = (enum tb_proto)i;
			return 0;
		}
	return -1;
}

void tb_frame_switch(struct tb_frame *f, enum tb_proto p)
{
	memset(&f->u, 0, sizeof(f->u));
	f->dlen = 0;
	f->flags &= (uint8_t)~TB_FRAME_F_DRX;
	f->proto = (uint8_t)p;
	switch (p) {
	case TB_PROTO_HTTP:
		tb_frame_http_init(f);
		break;
	case TB_PROTO_TLS:
		tb_frame_tls_init(f);
		break;
	case TB_PROTO_POSTGRES:
		tb_frame_pg_init(f);
		break;
	case TB_PROTO_REDIS:
		tb_frame_resp_init(f);
		break;
	default:
		break;
	}
}

void tb_frame_init(struct tb_frame *f, enum tb_proto forced)
{
	memset(f, 0, sizeof(*f));
	if ((unsigned)forced > TB_PROTO_RAW)
		forced = TB_PROTO_AUTO;
	f->forced = (uint8_t)forced;
	/* TLS, session and raw need no look at the first bytes; the others still let a
	 * ClientHello or an SSH banner say what the stream really is. */
	if (forced == TB_PROTO_TLS || forced == TB_PROTO_SESSION || forced == TB_PROTO_RAW)
		tb_frame_switch(f, forced);
}

void tb_frame_give_up(struct tb_frame *f, unsigned *ev)
{
	tb_frame_switch(f, TB_PROTO_RAW);
	*ev |= TB_FRAME_EV_RAW;
}

void tb_frame_session(struct tb_frame *f, unsigned *ev)
{
	tb_frame_switch(f, TB_PROTO_SESSION);
	*ev |= TB_FRAME_EV_SESSION;
}

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static bool is_method_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
}

/* True while b[0..k) is a prefix of "SSH-" (k <= 4). */
static bool ssh_prefix(const unsigned char *b, size_t k)
{
	return memcmp(b, "SSH-", k < 4 ? k : 4) == 0;
}

/*
 * What the first k bytes of a connection say. Returns TB_PROTO_AUTO while more bytes are
 * needed (never past 8), otherwise the protocol to frame (RAW when none fits).
 * The client's first bytes: TLS record header 16 03 0x; "SSH-"; a RESP array "*<digit>";
 * a PostgreSQL startup (protocol 3.0 to 3.2; an old Kafka client's Metadata request looks
 * the same), SSLRequest or GSSENCRequest packet (8 bytes); an HTTP method token followed
 * by a space (confirmed by the request line's " HTTP/1.x" at its end). The
 * server's first bytes: only an SSH banner is recognised; the server-first protocols
 * (SMTP, FTP, MySQL, ...) are raw.
 */
static enum tb_proto classify(const unsigned char *b, size_t k, bool tx, enum tb_proto forced)
{
	enum tb_proto other = forced != TB_PROTO_AUTO ? forced : TB_PROTO_RAW;

	if (ssh_prefix(b, k))
		return k < 4 ? TB_PROTO_AUTO : TB_PROTO_SESSION;
	if (!tx)
		return other;
	if (b[0] == 0x16) {
		if (k < 3)
			return k == 2 && b[1] != 3 ? other : TB_PROTO_AUTO;
		return b[1] == 3 && b[2] <= 4 ? TB_PROTO_TLS : other;
	}
	if (forced != TB_PROTO_AUTO)
		return forced;
	if (b[0] == '*') {
		if (k < 2)
			return TB_PROTO_AUTO;
		return b[1] >= '0' && b[1] <= '9' ? TB_PROTO_REDIS : TB_PROTO_RAW;
	}
	if (b[0] == 0) {
		uint32_t len, code;

		if (k < 8)
			return TB_PROTO_AUTO;
		len = be32(b);
		code = be32(b + 4);
		if ((code >> 16) == 3 && (code & 0xffff) <= 2 && len >= 8 && len <= 10000)
			return TB_PROTO_POSTGRES;
		if ((code == 80877103 || code == 80877104) && len == 8)
			return TB_PROTO_POSTGRES;
		return TB_PROTO_RAW; /* CancelRequest too: a one-shot connection */
	}
	for (size_t i = 0; i < k; i++) {
		if (b[i] == ' ' && i > 0 && i == k - 1)
			return TB_PROTO_HTTP;
		if (!is_method_char(b[i]))
			return TB_PROTO_RAW;
	}
	return k < 8 ? TB_PROTO_AUTO : TB_PROTO_HTTP; /* PROPFIND, MKCALENDAR, ... */
}

static unsigned feed(struct tb_frame *f, bool tx, const unsigned char *p, size_t n);

/* Hands the held detection bytes to the protocol just decided. */
static void decide(struct tb_frame *f, enum tb_proto p, unsigned *ev)
{
	unsigned char held[sizeof(f->u.detect)];
	size_t k = f->dlen;
	bool held_tx = !(f->flags & TB_FRAME_F_DRX);

	memcpy(held, f->u.detect, k);
	if (p == TB_PROTO_SESSION) {
		tb_frame_session(f, ev);
		return;
	}
	if (p == TB_PROTO_RAW) {
		tb_frame_give_up(f, ev);
		return;
	}
	tb_frame_switch(f, p);
	*ev |= feed(f, held_tx, held, k);
}

static size_t detect_feed(struct tb_frame *f, bool tx, const unsigned char *p, size_t n,
			  unsigned *ev)
{
	size_t used = 0;
	enum tb_proto got = TB_PROTO_AUTO;

	if (f->dlen > 0 && tx == !!(f->flags & TB_FRAME_F_DRX)) {
		/* Both sides spoke before either said what it is. */
		decide(f, f->forced != TB_PROTO_AUTO ? (enum tb_proto)f->forced : TB_PROTO_RAW,
		       ev);
		return 0;
	}
	if (f->dlen == 0 && !tx)
		f->flags |= TB_FRAME_F_DRX;
	while (used < n && got == TB_PROTO_AUTO) {
		f->u.detect[f->dlen++] = p[used++];
		got = classify(f->u.detect, f->dlen, tx, (enum tb_proto)f->forced);
	}
	if (got != TB_PROTO_AUTO)
		decide(f, got, ev);
	return used;
}

static unsigned feed(struct tb_frame *f, bool tx, const unsigned char *p, size_t n)
{
	unsigned ev = 0;

	while (n > 0) {
		uint8_t before = f->proto;
		size_t used;

		switch (f->proto) {
		case TB_PROTO_AUTO:
			used = detect_feed(f, tx, p, n, &ev);
			break;
		case TB_PROTO_HTTP:
			used = tb_frame_http_feed(f, tx, p, n, &ev);
			break;
		case TB_PROTO_TLS:
			used = tb_frame_tls_feed(f, tx, p, n, &ev);
			break;
		case TB_PROTO_POSTGRES:
			used = tb_frame_pg_feed(f, tx, p, n, &ev);
			break;
		case TB_PROTO_REDIS:
			used = tb_frame_resp_feed(f, tx, p, n, &ev);
			break;
		default:
			return ev; /* raw, session: nothing more to learn */
		}
		if (used == 0 && f->proto == before) {
			tb_frame_give_up(f, &ev); /* cannot happen: never loop on it */
			return ev;
		}
		p += used;
		n -= used;
	}
	return ev;
}

unsigned tb_frame_sent(struct tb_frame *f, const void *buf, size_t n)
{
	if (f->proto == TB_PROTO_RAW || f->proto == TB_PROTO_SESSION)
		return 0;
	return feed(f, true, buf, n);
}

unsigned tb_frame_received(struct tb_frame *f, const void *buf, size_t n)
{
	if (f->proto == TB_PROTO_RAW || f->proto == TB_PROTO_SESSION)
		return 0;
	if (n == 0) {
		unsigned ev = 0;

		if (f->proto == TB_PROTO_HTTP)
			ev = tb_frame_http_eof(f);
		f->flags |= TB_FRAME_F_EOF;
		return ev;
	}
	return feed(f, false, buf, n);
}

unsigned tb_frame_unseen(struct tb_frame *f, bool sent, uint64_t n)
{
	unsigned ev = 0;
	bool ok;

	if (f->proto == TB_PROTO_RAW || f->proto == TB_PROTO_SESSION || n == 0)
		return 0;
	switch (f->proto) {
	case TB_PROTO_HTTP:
		ok = tb_frame_http_skip(f, sent, n, &ev);
		break;
	case TB_PROTO_TLS:
		ok = tb_frame_tls_skip(f, sent, n, &ev);
		break;
	case TB_PROTO_POSTGRES:
		ok = tb_frame_pg_skip(f, sent, n, &ev);
		break;
	case TB_PROTO_REDIS:
		ok = tb_frame_resp_skip(f, sent, n, &ev);
		break;
	default:
		ok = false; /* still detecting: the first bytes are the ones that matter */
		break;
	}
	if (!ok)
		tb_frame_give_up(f, &ev);
	return ev;
}

void tb_frame_abandon(struct tb_frame *f)
{
	if (f->proto != TB_PROTO_RAW)
		tb_frame_switch(f, TB_PROTO_RAW);
}

enum tb_frame_state tb_frame_state(const struct tb_frame *f)
{
	switch (f->proto) {
	case TB_PROTO_AUTO:
		return TB_FRAME_UNKNOWN;
	case TB_PROTO_RAW:
		return TB_FRAME_RAW;
	case TB_PROTO_SESSION:
		return TB_FRAME_SESSION;
	default:
		break;
	}
	if (f->flags & TB_FRAME_F_EOF)
		return TB_FRAME_RESTING; /* nothing more can come */
	switch (f->proto) {
	case TB_PROTO_HTTP:
		return tb_frame_http_state(f);
	case TB_PROTO_TLS:
		return tb_frame_tls_state(f);
	case TB_PROTO_POSTGRES:
		return tb_frame_pg_state(f);
	default:
		return tb_frame_resp_state(f);
	}
}

bool tb_frame_send_starts_call(const struct tb_frame *f)
{
	if (f->flags & TB_FRAME_F_EOF)
		return false;
	switch (f->proto) {
	case TB_PROTO_HTTP:
		return tb_frame_http_starts(f);
	case TB_PROTO_TLS:
		return tb_frame_tls_starts(f);
	case TB_PROTO_POSTGRES:
		return tb_frame_pg_starts(f);
	case TB_PROTO_REDIS:
		return tb_frame_resp_starts(f);
	default:
		return false;
	}
}

bool tb_frame_answer_begun(const struct tb_frame *f)
{
	if (tb_frame_state(f) != TB_FRAME_AWAITING)
		return false;
	switch (f->proto) {
	case TB_PROTO_HTTP:
		return tb_frame_http_begun(f);
	case TB_PROTO_TLS:
		return tb_frame_tls_begun(f);
	case TB_PROTO_POSTGRES:
		return tb_frame_pg_begun(f);
	default:
		return tb_frame_resp_begun(f);
	}
}

enum tb_proto tb_frame_proto(const struct tb_frame *f)
{
	return (enum tb_proto)f->proto;
}
