/* frame_resp.c - Redis RESP2/RESP3 framing: commands and replies delimited by their type
 * bytes and lengths (nesting tracked by one counter), pushes, and subscribe mode. */
#include <string.h>

#include "frame_impl.h"

enum { R_TYPE = 0, R_NUM, R_LINE, R_BULK, R_INLINE };

/* tb_frame_resp_half.fl */
#define FL_NEG 0x1u    /* the number being read is negative */
#define FL_PUSH 0x2u   /* rx: the message under way is a push ('>'), not a reply */
#define FL_TOP 0x4u    /* tx: the next aggregate header is the command's own array */
#define FL_NAME 0x8u   /* tx: the next element is the command's name */
#define FL_NAMING 0x10u /* tx: reading the command's name */

#define BULK_MAX (UINT64_C(1) << 32)
#define COUNT_MAX (1u << 30)
#define LINE_MAX (1u << 20) /* a simple string, an error, an inline command */

void tb_frame_resp_init(struct tb_frame *f)
{
	(void)f; /* all zero: between messages both ways */
}

static bool at_rest(const struct tb_frame_resp_half *s)
{
	return s->pending == 0 && s->st == R_TYPE;
}

bool tb_frame_resp_starts(const struct tb_frame *f)
{
	const struct tb_frame_resp *r = &f->u.resp;

	return at_rest(&r->tx) && (at_rest(&r->rx) || (r->rx.fl & FL_PUSH)) &&
	       r->sent == r->done && r->sent > 0;
}

/*
 * Commands after which the connection carries what the server pushes, not replies:
 * subscribe mode (RESP2 and RESP3) and MONITOR. Only the name's first 8 bytes and its
 * length are kept, which tells these apart from every other command.
 */
static bool is_session_command(const struct tb_frame_resp *r)
{
	static const struct {
		const char *prefix;
		uint32_t len;
	} cmds[] = { { "SUBSCRIB", 9 }, { "PSUBSCRI", 10 }, { "SSUBSCRI", 10 }, { "MONITOR", 7 } };

	for (unsigned i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (r->namelen == cmds[i].len &&
		    memcmp(r->name, cmds[i].prefix, strlen(cmds[i].prefix)) == 0)
			return true;
	return false;
}

/* One more byte of an inline command's name. */
static void name_byte(struct tb_frame_resp *r, unsigned char c)
{
	if (r->namelen < sizeof(r->name))
		r->name[r->namelen] = (c >= 'a' && c <= 'z') ? (unsigned char)(c - 32) : c;
	if (r->namelen < LINE_MAX)
		r->namelen++;
}

/* A whole message of this half is complete. */
static void message_done(struct tb_frame *f, bool tx, unsigned *ev)
{
	struct tb_frame_resp *r = &f->u.resp;
	struct tb_frame_resp_half *s = tx ? &r->tx : &r->rx;
	bool push = s->fl & FL_PUSH;

	s->fl = 0;
	s->st = R_TYPE;
	if (tx || push || r->done == r->sent)
		return; /* commands are counted when they begin; pushes are not replies */
	r->done++;
	if (r->done == r->sent && at_rest(&r->tx))
		*ev |= TB_FRAME_EV_CALL_ENDS;
}

/* One element (a leaf, or a null aggregate) is complete. Returns false on a protocol
 * change (a subscribe command was just sent). */
static bool element_done(struct tb_frame *f, bool tx, unsigned *ev)
{
	struct tb_frame_resp *r = &f->u.resp;
	struct tb_frame_resp_half *s = tx ? &r->tx : &r->rx;

	s->st = R_TYPE;
	if (s->fl & FL_NAMING) {
		s->fl &= (uint8_t)~FL_NAMING;
		if (is_session_command(r)) {
			tb_frame_session(f, ev);
			return false;
		}
	}
	if (--s->pending == 0)
		message_done(f, tx, ev);
	return true;
}

/*
 * A length or count line is complete. Nesting needs no stack: elements come depth first,
 * so the message ends when the count of elements still due reaches 0 (an aggregate of n
 * replaces itself by its n elements, a map by 2n, an attribute adds 2n before its value).
 */
static bool number_done(struct tb_frame *f, bool tx, unsigned *ev)
{
	struct tb_frame_resp *r = &f->u.resp;
	struct tb_frame_resp_half *s = tx ? &r->tx : &r->rx;
	uint64_t v = s->n;
	bool top = s->fl & FL_TOP;

	s->fl &= (uint8_t) ~(FL_TOP | FL_NAME);
	if (s->digits == 0)
		goto bad;
	if (s->fl & FL_NEG) {
		s->fl &= (uint8_t)~FL_NEG;
		if (v != 1)
			goto bad;
		return element_done(f, tx, ev); /* null bulk string or array (RESP2) */
	}
	switch (s->type) {
	case '$':
	case '!':
	case '=':
		if (v > BULK_MAX)
			goto bad;
		s->n = v + 2; /* and its CRLF */
		s->st = R_BULK;
		if (tx && (s->fl & FL_NAMING))
			r->namelen = (uint32_t)v; /* its bytes are read in R_BULK */
		return true;
	case '|':
		if (v > COUNT_MAX || s->pending > COUNT_MAX)
			goto bad;
		s->pending += (uint32_t)(2 * v);
		break;
	default: {
		uint64_t more = (s->type == '%' ? 2 : 1) * v;

		if (v > COUNT_MAX || s->pending > COUNT_MAX)
			goto bad;
		s->pending = (uint32_t)(s->pending - 1 + more);
		if (tx && top && s->type == '*' && v > 0)
			s->fl |= FL_NAME;
		break;
	}
	}
	s->st = R_TYPE;
	if (s->pending == 0)
		message_done(f, tx, ev);
	return true;
bad:
	tb_frame_give_up(f, ev);
	return false;
}

/* One byte where an element's type is due. Returns false on a protocol change. */
static bool type_byte(struct tb_frame *f, bool tx, unsigned char c, unsigned *ev)
{
	struct tb_frame_resp *r = &f->u.resp;
	struct tb_frame_resp_half *s = tx ? &r->tx : &r->rx;

	if (s->pending == 0) {
		if (c == '\r' || c == '\n')
			return true;
		s->fl = 0;
		if (tx) {
			if (tb_frame_resp_starts(f))
				*ev |= TB_FRAME_EV_CALL_STARTS;
			r->sent++;
			r->namelen = 0;
			s->fl = FL_TOP;
		} else if (c == '>') {
			s->fl = FL_PUSH;
		}
		s->pending = 1;
	}
	if (s->fl & FL_NAME) {
		s->fl &= (uint8_t)~FL_NAME;
		if (c == '$')
			s->fl |= FL_NAMING;
	}
	s->type = c;
	s->n = 0;
	s->digits = 0;
	switch (c) {
	case '+': case '-': case ':': case ',': case '(': case '#': case '_':
		s->st = R_LINE;
		return true;
	case '$': case '!': case '=': case '*': case '~': case '>': case '%': case '|':
		s->st = R_NUM;
		return true;
	default:
		if (tx && (s->fl & FL_TOP)) {
			/* An inline command ("PING\r\n"): its first word is its name. */
			s->fl = FL_NAMING;
			s->st = R_INLINE;
			name_byte(r, c);
			s->n = 1;
			return true;
		}
		tb_frame_give_up(f, ev);
		return false;
	}
}

size_t tb_frame_resp_feed(struct tb_frame *f, bool tx, const unsigned char *p, size_t n,
			  unsigned *ev)
{
	struct tb_frame_resp *r = &f->u.resp;
	struct tb_frame_resp_half *s = tx ? &r->tx : &r->rx;
	size_t i = 0;

	while (i < n) {
		unsigned char c;

		if (s->st == R_BULK) {
			size_t take;

			/* The command's name: at most its first 8 bytes are looked at. */
			while (tx && (s->fl & FL_NAMING) && i < n && s->n > 2) {
				uint64_t at = r->namelen - (s->n - 2);

				if (at >= sizeof(r->name))
					break;
				r->name[at] = (p[i] >= 'a' && p[i] <= 'z') ? (uint8_t)(p[i] - 32) : p[i];
				i++;
				s->n--;
			}
			take = n - i;
			if (take > s->n)
				take = (size_t)s->n;
			s->n -= take;
			i += take;
			if (s->n == 0 && !element_done(f, tx, ev))
				return i;
			continue;
		}
		if (s->st == R_LINE) {
			const unsigned char *lf = memchr(p + i, '\n', n - i);
			size_t span = lf ? (size_t)(lf - (p + i)) + 1 : n - i;

			s->n += span;
			i += span;
			if (s->n > LINE_MAX) {
				tb_frame_give_up(f, ev);
				return i;
			}
			if (lf && !element_done(f, tx, ev))
				return i;
			continue;
		}
		c = p[i++];
		switch (s->st) {
		case R_TYPE:
			if (!type_byte(f, tx, c, ev))
				return i;
			break;
		case R_NUM:
			if (c == '-' && s->digits == 0 && !(s->fl & FL_NEG)) {
				s->fl |= FL_NEG;
			} else if (c >= '0' && c <= '9' && s->digits < 19) {
				s->n = s->n * 10 + (uint64_t)(c - '0');
				s->digits++;
				/* the rest of the number and its CRLF, without the dispatch */
				while (i < n && p[i] >= '0' && p[i] <= '9' && s->digits < 19) {
					s->n = s->n * 10 + (uint64_t)(p[i++] - '0');
					s->digits++;
				}
				if (n - i >= 2 && p[i] == '\r' && p[i + 1] == '\n') {
					i += 2;
					if (!number_done(f, tx, ev))
						return i;
				}
			} else if (c == '\n') {
				if (!number_done(f, tx, ev))
					return i;
			} else if (c != '\r') {
				tb_frame_give_up(f, ev); /* RESP3 streamed aggregates ('?') too */
				return i;
			}
			break;
		default: /* R_INLINE */
			if (++s->n > LINE_MAX) {
				tb_frame_give_up(f, ev);
				return i;
			}
			if (c == ' ' || c == '\r' || c == '\n')
				s->fl &= (uint8_t)~FL_NAMING;
			else if (s->fl & FL_NAMING)
				name_byte(r, c);
			if (c != '\n')
				break;
			s->fl |= FL_NAMING; /* element_done checks the name read so far */
			if (!element_done(f, tx, ev))
				return i;
			break;
		}
	}
	return n;
}

enum tb_frame_state tb_frame_resp_state(const struct tb_frame *f)
{
	const struct tb_frame_resp *r = &f->u.resp;

	if (!at_rest(&r->tx) || r->sent != r->done)
		return TB_FRAME_AWAITING;
	return TB_FRAME_RESTING;
}

bool tb_frame_resp_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev)
{
	struct tb_frame_resp_half *s = tx ? &f->u.resp.tx : &f->u.resp.rx;

	if (s->st != R_BULK || (s->fl & FL_NAMING) || n > s->n)
		return false;
	s->n -= n;
	if (s->n == 0)
		element_done(f, tx, ev);
	return true;
}

bool tb_frame_resp_begun(const struct tb_frame *f)
{
	const struct tb_frame_resp_half *rx = &f->u.resp.rx;

	return !at_rest(rx) && !(rx->fl & FL_PUSH);
}
