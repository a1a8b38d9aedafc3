/* propagate.c - the deadline an inbound HTTP/1.x request head carries: X-Deadline-Ms (or
 * the configured header, grpc-timeout's syntax too) and Envoy's, the strictest kept. */
#include <string.h>

#include "propagate_impl.h"

_Static_assert(sizeof(struct tb_prop_in) <= 160, "tb_prop_in is kept per accepted socket");

enum {
	IN_START, IN_METHOD, IN_TARGET0, IN_TARGET, IN_VERSION, IN_RL_EOL, IN_RL_CR,
	IN_LSTART, IN_NAME, IN_VALUE, IN_SKIP, IN_CR, IN_END_CR,
	IN_BODY, IN_OFF, /* final until reset */
};

void tb_prop_in_reset(struct tb_prop_in *p)
{
	memset(p, 0, sizeof(*p));
	p->res.ns = -1;
}

/* Copies up to cap-1 bytes of s into dst for a log line, NUL-terminated; bytes a logfmt
 * value would need to quote or escape are shown as '?'. */
static void copy_shown(char *dst, size_t cap, const char *s, size_t n)
{
	size_t i;

	if (n > cap - 1)
		n = cap - 1;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		dst[i] = c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '=' ? (char)c : '?';
	}
	dst[n] = '\0';
}

/* The kept value without its trailing whitespace. */
static size_t val_len(const struct tb_prop_in *p)
{
	size_t n = p->vlen;

	while (n && is_ows((unsigned char)p->val[n - 1]))
		n--;
	return n;
}

/* A value of `src` was ignored: the first one is kept for the log line. */
static void in_bad(struct tb_prop_in *p, uint8_t src, const char *name)
{
	if (p->res.bad)
		return;
	p->res.bad = 1;
	if (src == TB_PROP_SRC_ENVOY)
		name = ENVOY;
	copy_shown(p->res.bad_name, sizeof(p->res.bad_name), name, strlen(name));
	copy_shown(p->res.bad_value, sizeof(p->res.bad_value), p->val, val_len(p));
}

/* The pending value was not folded: it competes; the strictest (first of equals) wins. */
static void in_commit(struct tb_prop_in *p)
{
	if (!p->pend)
		return;
	if (p->res.ns < 0 || p->pend_ns < p->res.ns) {
		p->res.ns = p->pend_ns;
		p->res.source = p->pend;
		copy_shown(p->res.value, sizeof(p->res.value), p->val, val_len(p));
	}
	p->pend = 0;
}

/* A header line ended: a value of ours is checked, and kept pending until the next line's
 * first byte shows it is not continued by an obs-fold. */
static void in_line_end(struct tb_prop_in *p, const char *name)
{
	if (p->src) {
		int64_t ns = value_ns(p->vst, p->num, p->unit);

		if (ns < 0) {
			in_bad(p, p->src, name);
		} else {
			p->pend = p->src;
			p->pend_ns = ns;
		}
		p->src = 0;
	}
	p->st = IN_LSTART;
}

/* The head is given up (too long, malformed): no deadline from it. */
static void in_give_up(struct tb_prop_in *p)
{
	p->st = IN_BODY;
	p->pend = 0;
	p->res.ns = -1;
	p->res.source = TB_PROP_SRC_NONE;
	p->res.value[0] = '\0';
}

/* Narrows the names still matching by the field name's next byte. */
static void in_name_step(struct tb_prop_in *p, unsigned char c, const char *name, unsigned nlen)
{
	uint8_t cand = p->cand;
	unsigned pos = p->pos;

	if ((cand & 1) && (pos >= nlen || lower(c) != lower((unsigned char)name[pos])))
		cand &= (uint8_t)~1u;
	if ((cand & 2) && (pos >= ENVOY_LEN || lower(c) != (unsigned char)ENVOY[pos]))
		cand &= (uint8_t)~2u;
	p->cand = cand;
	p->pos = (uint8_t)(pos + 1);
	if (!cand)
		p->st = IN_SKIP; /* not ours: the rest of the line is not kept */
}

/* One byte of the head (st < IN_BODY). Returns true when the head ended with it. */
static bool in_step(struct tb_prop_in *p, unsigned char c, const char *name, unsigned nlen)
{
	if (p->st == IN_START) {
		if (c == '\r' || c == '\n') {
			/* empty lines before a request line are ignored, as servers do */
			if (++p->hbytes > TB_PROP_HEAD_MAX)
				p->st = IN_OFF;
			return false;
		}
		if (!is_tchar(c)) {
			p->st = IN_OFF; /* TLS's 0x16, a length prefix, a binary protocol */
			return false;
		}
		p->started = 1;
		p->hbytes = 1;
		p->st = IN_METHOD;
		return false;
	}
	if (++p->hbytes > TB_PROP_HEAD_MAX) {
		in_give_up(p);
		return false;
	}
	if (c == '\0' && p->st >= IN_LSTART) {
		in_give_up(p); /* servers refuse a NUL in a head: so do we, with no deadline */
		return false;
	}
	switch (p->st) {
	case IN_METHOD: /* p->hbytes - 1 method bytes before c */
		if (c == ' ')
			p->st = IN_TARGET0;
		else if (!is_tchar(c) || p->hbytes > TB_PROP_METHOD_MAX)
			p->st = IN_OFF;
		break;
	case IN_TARGET0:
		p->st = c <= 0x20 || c == 0x7f ? IN_OFF : IN_TARGET;
		break;
	case IN_TARGET:
		if (c == ' ') {
			p->st = IN_VERSION;
			p->pos = 0;
		} else if (c < 0x20 || c == 0x7f) {
			p->st = IN_OFF;
		}
		break;
	case IN_VERSION:
		if (p->pos < 7 ? c == (unsigned char)HTTP1[p->pos] : c >= '0' && c <= '9') {
			if (++p->pos == 8)
				p->st = IN_RL_EOL;
		} else {
			p->st = IN_OFF; /* HTTP/0.9, HTTP/2's preface, a Redis inline command */
		}
		break;
	case IN_RL_EOL:
		p->st = c == '\r' ? IN_RL_CR : c == '\n' ? IN_LSTART : IN_OFF;
		break;
	case IN_RL_CR:
		p->st = c == '\n' ? IN_LSTART : IN_OFF;
		break;
	case IN_LSTART:
		if (is_ows(c)) {
			/* obs-fold: the previous line goes on here; a value of ours there is
			 * not read (servers differ on folding: never guess a deadline) */
			if (p->pend)
				in_bad(p, p->pend, name);
			p->pend = 0;
			p->st = IN_SKIP;
			break;
		}
		in_commit(p);
		if (c == '\r') {
			p->st = IN_END_CR;
		} else if (c == '\n') {
			p->st = IN_BODY;
			return true;
		} else if (is_tchar(c)) {
			p->st = IN_NAME;
			p->pos = 0;
			p->cand = (uint8_t)((nlen ? 1u : 0u) | 2u);
			in_name_step(p, c, name, nlen);
		} else {
			p->st = IN_SKIP;
		}
		break;
	case IN_NAME:
		if (c == ':') {
			if ((p->cand & 1) && p->pos == nlen)
				p->src = TB_PROP_SRC_HEADER;
			else if ((p->cand & 2) && p->pos == ENVOY_LEN)
				p->src = TB_PROP_SRC_ENVOY;
			if (p->src) {
				p->st = IN_VALUE;
				p->vst = V_PRE;
				p->num = 0;
				p->ndig = 0;
				p->unit = 0;
				p->vlen = 0;
			} else {
				p->st = IN_SKIP;
			}
		} else if (is_tchar(c)) {
			in_name_step(p, c, name, nlen);
		} else if (c == '\r') {
			p->st = IN_CR;
		} else if (c == '\n') {
			in_line_end(p, name);
		} else {
			p->st = IN_SKIP; /* whitespace before the colon: not a field we read */
		}
		break;
	case IN_VALUE:
		if (c == '\r') {
			p->st = IN_CR;
		} else if (c == '\n') {
			in_line_end(p, name);
		} else {
			if ((p->vlen || !is_ows(c)) && p->vlen < sizeof(p->val))
				p->val[p->vlen++] = (char)c;
			p->vst = value_step(p->vst, c, p->src == TB_PROP_SRC_HEADER, &p->num,
					    &p->ndig, &p->unit);
		}
		break;
	case IN_SKIP:
		if (c == '\r')
			p->st = IN_CR;
		else if (c == '\n')
			in_line_end(p, name);
		break;
	case IN_CR:
		if (c == '\n')
			in_line_end(p, name);
		else
			in_give_up(p); /* a bare CR: request smuggling's material, not ours */
		break;
	case IN_END_CR:
		if (c == '\n') {
			p->st = IN_BODY;
			return true;
		}
		in_give_up(p);
		break;
	default:
		break;
	}
	return false;
}

int tb_prop_in_feed(struct tb_prop_in *p, const char *header_name, const void *buf, size_t n)
{
	const unsigned char *b = buf;
	const char *name = header_name ? header_name : TB_PROP_HEADER_DEFAULT;
	unsigned nlen;
	bool done = false;
	size_t i;

	p->started = 0;
	if (p->st >= IN_BODY)
		return p->st == IN_OFF ? TB_PIN_NOT_HTTP : TB_PIN_BODY;
	nlen = name_len(name);
	for (i = 0; i < n && p->st < IN_BODY; i++)
		done = in_step(p, b[i], name, nlen);
	if (done)
		return TB_PIN_HEAD_DONE;
	switch (p->st) {
	case IN_START:
		return TB_PIN_IDLE;
	case IN_OFF:
		return TB_PIN_NOT_HTTP;
	case IN_BODY:
		return TB_PIN_BODY;
	default:
		return p->started ? TB_PIN_HEAD_STARTED : TB_PIN_IN_HEAD;
	}
}

bool tb_prop_in_started(const struct tb_prop_in *p)
{
	return p->started;
}

const struct tb_prop_deadline *tb_prop_in_result(const struct tb_prop_in *p)
{
	return &p->res;
}
