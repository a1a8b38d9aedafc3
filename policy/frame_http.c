/* frame_http.c - HTTP/1.x framing: requests and responses delimited by their headers,
 * Content-Length and chunked coding; bodies skipped by counting; pipelined requests counted. */
#include <string.h>

#include "frame_http_impl.h"

/* Candidates matched while reading a method or a header name (tb_frame_http_half.cand). */
static const char methods[2][32] = { "HEAD", "CONNECT" };
static const char names[2][32] = { "content-length", "transfer-encoding" };

void tb_frame_http_init(struct tb_frame *f)
{
	(void)f; /* all zero: both halves between messages, nothing sent */
}

static bool is_hex(unsigned char c, unsigned *v)
{
	if (c >= '0' && c <= '9')
		*v = c - '0';
	else if (c >= 'a' && c <= 'f')
		*v = c - 'a' + 10;
	else if (c >= 'A' && c <= 'F')
		*v = c - 'A' + 10;
	else
		return false;
	return true;
}

/* Narrows the candidates `cand` (bit i: cands[i]) by character c at position pos. A NUL
 * byte matches no candidate: it would meet the terminator of a name already complete. */
static uint8_t narrow(const char cands[2][32], uint8_t cand, unsigned pos, unsigned char c)
{
	for (unsigned i = 0; i < 2; i++)
		if ((cand & (1u << i)) && (c == '\0' || cands[i][pos < 32 ? pos : 31] != c))
			cand &= (uint8_t) ~(1u << i); /* a shorter name meets its NUL */
	return cand;
}

/* Candidate i matched all `pos` characters seen, and has no more. */
static bool matched(const char cands[2][32], uint8_t cand, unsigned pos, unsigned i)
{
	return (cand & (1u << i)) && cands[i][pos < 32 ? pos : 31] == '\0';
}

uint8_t tb_frame_http_status_class(uint64_t code)
{
	uint8_t st = 0;

	if (code == 101)
		st = ST_SWITCH;
	else if (code < 200)
		st = ST_INTERIM | ST_NOBODY;
	else if (code == 204 || code == 304)
		st = ST_NOBODY;
	if (code >= 200 && code < 300)
		st |= ST_2XX;
	return st;
}

unsigned tb_frame_http_status_events(uint64_t code)
{
	if (code < 500 || code > 599)
		return 0;
	return TB_FRAME_EV_5XX | (code >= 502 && code <= 504 ? TB_FRAME_EV_GATEWAY : 0);
}

/* A message of this half is complete (the protocol stays: returns true). */
static bool message_done(struct tb_frame *f, bool tx, unsigned *ev)
{
	struct tb_frame_http *h = &f->u.http;
	struct tb_frame_http_half *s = tx ? &h->tx : &h->rx;
	bool unsolicited = s->fl & FL_UNSOL;

	memset(s, 0, sizeof(*s));
	if (tx || unsolicited)
		return true;
	h->done++;
	if (h->done == h->sent && h->tx.st == H_START)
		*ev |= TB_FRAME_EV_CALL_ENDS;
	return true;
}

/* The empty line ended a header section: decide how the body is delimited. */
static bool headers_done(struct tb_frame *f, bool tx, unsigned *ev)
{
	struct tb_frame_http *h = &f->u.http;
	struct tb_frame_http_half *s = tx ? &h->tx : &h->rx;
	uint32_t bit = 1u << (h->done % TB_FRAME_PIPELINE_MAX);
	bool asked = !tx && !(s->fl & FL_UNSOL);

	if (!tx && (s->status & ST_SWITCH)) {
		tb_frame_session(f, ev); /* WebSocket, h2c: a stream of its own */
		return false;
	}
	if (!tx && (s->status & ST_INTERIM)) {
		memset(s, 0, sizeof(*s)); /* 100 Continue, 103 Early Hints: not the answer */
		return true;
	}
	if (asked && (h->connect_mask & bit) && (s->status & ST_2XX)) {
		/* A CONNECT tunnel: what flows next is another protocol (often TLS), and its
		 * handshake and first request belong to this same call. */
		tb_frame_switch(f, TB_PROTO_AUTO);
		return false;
	}
	if (!tx && ((asked && (h->head_mask & bit)) || (s->status & ST_NOBODY)))
		return message_done(f, tx, ev);
	if (s->fl & FL_TE) {
		if (s->fl & FL_CHUNKED) {
			s->st = H_CHUNK_SIZE;
			s->n = 0;
			s->pos = 0;
			s->hbytes = 0;
			return true;
		}
		if (tx) {
			tb_frame_give_up(f, ev); /* a request body with no length the server could see */
			return false;
		}
		s->st = H_EOF_BODY;
		return true;
	}
	if (s->fl & FL_CL) {
		if (s->n == 0)
			return message_done(f, tx, ev);
		s->st = H_BODY;
		return true;
	}
	if (tx)
		return message_done(f, tx, ev);
	s->st = H_EOF_BODY; /* no length: the response ends when the server closes */
	return true;
}

bool tb_frame_http_begin_request(struct tb_frame *f, unsigned *ev)
{
	struct tb_frame_http *h = &f->u.http;
	uint32_t outstanding = h->sent - h->done;
	uint32_t bit = 1u << (h->sent % TB_FRAME_PIPELINE_MAX);

	if (outstanding >= TB_FRAME_PIPELINE_MAX) {
		tb_frame_give_up(f, ev);
		return false;
	}
	if (outstanding == 0 && h->sent > 0 && h->rx.st == H_START)
		*ev |= TB_FRAME_EV_CALL_STARTS;
	h->head_mask &= ~bit;
	h->connect_mask &= ~bit;
	h->sent++;
	memset(&h->tx, 0, sizeof(h->tx));
	h->tx.st = H_METHOD;
	h->tx.cand = 3;
	return true;
}

void tb_frame_http_begin_response(struct tb_frame_http *h)
{
	memset(&h->rx, 0, sizeof(h->rx));
	h->rx.fl = h->sent == h->done ? FL_UNSOL : 0;
}

/* The end of a line skipped to its LF, per state. Returns false when the protocol changed. */
static bool line_end(struct tb_frame *f, bool tx, struct tb_frame_http_half *s, unsigned *ev)
{
	switch (s->st) {
	case H_SLINE:
	case H_HSKIP:
		s->st = H_HSTART;
		return true;
	case H_TRSKIP:
		s->st = H_TRAILER;
		return true;
	default: /* H_CHUNK_EXT */
		if (s->n == 0)
			s->st = H_TRAILER;
		else
			s->st = H_CHUNK_DATA;
		(void)f, (void)tx, (void)ev;
		return true;
	}
}

/* One framing byte in state s->st. Returns false when the protocol changed. */
static bool step(struct tb_frame *f, bool tx, struct tb_frame_http_half *s, unsigned char c,
		 unsigned *ev)
{
	struct tb_frame_http *h = &f->u.http;
	static const char http1[] = " HTTP/1.";
	unsigned v;

	switch (s->st) {
	case H_START:
		if (c == '\r' || c == '\n')
			return true;
		if (tx) {
			if (!tb_frame_http_begin_request(f, ev))
				return false;
		} else {
			tb_frame_http_begin_response(h);
			s->st = H_STATUS;
		}
		return step(f, tx, s, c, ev);
	case H_METHOD:
		if (c == ' ' && s->pos > 0) {
			uint32_t bit = 1u << ((h->sent - 1) % TB_FRAME_PIPELINE_MAX);

			if (matched(methods, s->cand, s->pos, 0))
				h->head_mask |= bit;
			if (matched(methods, s->cand, s->pos, 1))
				h->connect_mask |= bit;
			s->st = H_RLINE;
			s->pos = 0;
			return true;
		}
		if (!((c >= 'A' && c <= 'Z') || c == '-' || c == '_') || s->pos >= 32)
			break;
		s->cand = narrow(methods, s->cand, s->pos++, c);
		return true;
	case H_RLINE:
		/* s->pos: how much of " HTTP/1.", a digit, then CR has just been seen. */
		if (c == '\n') {
			if (s->pos != 9 && s->pos != 10)
				break;
			s->st = H_HSTART;
			return true;
		}
		if (s->pos < 8 && c == (unsigned char)http1[s->pos])
			s->pos++;
		else if (s->pos == 8 && c >= '0' && c <= '9')
			s->pos = 9;
		else if (s->pos == 9 && c == '\r')
			s->pos = 10;
		else
			s->pos = c == ' ' ? 1 : 0;
		return true;
	case H_STATUS:
		if (s->pos < 7) {
			if (c != (unsigned char)http1[s->pos + 1])
				break;
		} else if (s->pos == 7 || (s->pos >= 9 && s->pos <= 11)) {
			if (c < '0' || c > '9')
				break;
			if (s->pos >= 9)
				s->n = s->n * 10 + (c - '0');
		} else if (s->pos == 8) {
			if (c != ' ')
				break;
		} else {
			if (c != ' ' && c != '\r' && c != '\n')
				break;
			s->status = tb_frame_http_status_class(s->n);
			if (!tx)
				*ev |= tb_frame_http_status_events(s->n);
			s->n = 0;
			s->st = c == '\n' ? H_HSTART : H_SLINE;
			return true;
		}
		s->pos++;
		return true;
	case H_HSTART:
		if (c == '\r') {
			s->st = H_HEND_LF;
			return true;
		}
		if (c == '\n')
			return headers_done(f, tx, ev);
		if (c == ' ' || c == '\t') {
			s->st = H_HSKIP; /* obsolete line folding: more of a value we skip */
			return true;
		}
		s->st = H_HNAME;
		s->pos = 0;
		s->cand = 3;
		return step(f, tx, s, c, ev);
	case H_HNAME:
		if (c == ':') {
			if (matched(names, s->cand, s->pos, 0)) {
				if (s->fl & FL_CL)
					break; /* two lengths: request smuggling, or a broken peer */
				s->fl |= FL_CL;
				s->n = 0;
				s->te = 0;
				s->st = H_CLVAL;
			} else if (matched(names, s->cand, s->pos, 1)) {
				s->fl |= FL_TE;
				s->fl &= (uint8_t)~FL_CHUNKED;
				s->te = 0;
				s->st = H_TEVAL;
			} else {
				s->st = H_HSKIP;
			}
			return true;
		}
		/* Other names are not checked, nor is a line without a colon: the peer
		 * judges them, framing only needs the line's end. */
		if (c == '\n') {
			s->st = H_HSTART;
			return true;
		}
		s->cand = narrow(names, s->cand, s->pos, tb_frame_lower(c));
		if (s->pos < 0xff)
			s->pos++;
		return true;
	case H_CLVAL:
		/* s->te: 1 = digits seen, 2 = blank after them */
		if (c == ' ' || c == '\t') {
			if (s->te & 1)
				s->te |= 2;
			return true;
		}
		if (c >= '0' && c <= '9') {
			if ((s->te & 2) || s->n > (UINT64_C(1) << 60))
				break;
			s->n = s->n * 10 + (c - '0');
			s->te |= 1;
			return true;
		}
		if (c == '\r')
			return true;
		if (c != '\n' || !(s->te & 1))
			break;
		s->st = H_HSTART;
		return true;
	case H_TEVAL:
		/* s->te: how much of "chunked" the current coding matched, 0xff: it does not */
		if (c == ',') {
			s->te = 0;
		} else if (c == '\n') {
			if (s->te == 7)
				s->fl |= FL_CHUNKED;
			s->st = H_HSTART;
		} else if (c != ' ' && c != '\t' && c != '\r') {
			if (s->te < 7 && tb_frame_lower(c) == (unsigned char)"chunked"[s->te])
				s->te++;
			else
				s->te = 0xff;
		}
		return true;
	case H_HEND_LF:
		if (c != '\n')
			break;
		return headers_done(f, tx, ev);
	case H_CHUNK_SIZE:
		if (is_hex(c, &v)) {
			if (s->pos >= 15)
				break;
			s->n = s->n * 16 + v;
			s->pos++;
			return true;
		}
		if (s->pos == 0)
			break;
		if (c == ';' || c == ' ' || c == '\t') {
			s->st = H_CHUNK_EXT;
			return true;
		}
		if (c == '\r')
			return true;
		if (c != '\n')
			break;
		s->st = H_CHUNK_EXT;
		return line_end(f, tx, s, ev);
	case H_CHUNK_CRLF:
		if (c == '\r' && s->pos == 0) {
			s->pos = 1;
			return true;
		}
		if (c != '\n')
			break;
		s->st = H_CHUNK_SIZE;
		s->n = 0;
		s->pos = 0;
		s->hbytes = 0;
		return true;
	case H_TRAILER:
		if (c == '\r') {
			s->st = H_TRAILER_LF;
			return true;
		}
		if (c == '\n')
			return message_done(f, tx, ev);
		s->st = H_TRSKIP;
		return true;
	case H_TRAILER_LF:
		if (c != '\n')
			break;
		return message_done(f, tx, ev);
	default:
		break;
	}
	tb_frame_give_up(f, ev);
	return false;
}

static bool skips_to_lf(uint8_t st)
{
	return st == H_SLINE || st == H_HSKIP || st == H_TRSKIP || st == H_CHUNK_EXT;
}

size_t tb_frame_http_feed(struct tb_frame *f, bool tx, const unsigned char *p, size_t n,
			  unsigned *ev)
{
	struct tb_frame_http *h = &f->u.http;
	struct tb_frame_http_half *s = tx ? &h->tx : &h->rx;
	size_t i = 0;

	while (i < n) {
		if (s->st == H_BODY || s->st == H_CHUNK_DATA) {
			/* Count, don't scan: O(1) per buffer whatever the body's size. */
			size_t take = n - i;

			if (take > s->n)
				take = (size_t)s->n;
			s->n -= take;
			i += take;
			if (s->n != 0)
				continue;
			if (s->st == H_CHUNK_DATA) {
				s->st = H_CHUNK_CRLF;
				s->pos = 0;
			} else if (!message_done(f, tx, ev)) {
				return i;
			}
			continue;
		}
		if (s->st == H_EOF_BODY)
			return n;
		if (skips_to_lf(s->st)) {
			const unsigned char *lf = memchr(p + i, '\n', n - i);
			size_t span = lf ? (size_t)(lf - (p + i)) + 1 : n - i;

			if (s->hbytes + span > TB_FRAME_HDR_MAX) {
				tb_frame_give_up(f, ev);
				return i;
			}
			s->hbytes = (uint16_t)(s->hbytes + span);
			i += span;
			if (lf && !line_end(f, tx, s, ev))
				return i;
			continue;
		}
		if (s->st == H_START || s->st == H_HSTART) {
			uint8_t proto = f->proto;
			size_t used = tb_frame_http_lines(f, tx, s, p + i, n - i, ev);

			i += used;
			if (f->proto != proto)
				return i;
			if (used > 0)
				continue;
		}
		if (s->hbytes >= TB_FRAME_HDR_MAX) {
			tb_frame_give_up(f, ev); /* a header flood, an endless line */
			return i;
		}
		s->hbytes++;
		if (!step(f, tx, s, p[i++], ev))
			return i;
	}
	return n;
}

unsigned tb_frame_http_eof(struct tb_frame *f)
{
	unsigned ev = 0;

	if (f->u.http.rx.st == H_EOF_BODY)
		message_done(f, false, &ev);
	return ev;
}

enum tb_frame_state tb_frame_http_state(const struct tb_frame *f)
{
	const struct tb_frame_http *h = &f->u.http;

	if (h->tx.st != H_START || h->rx.st != H_START || h->sent != h->done)
		return TB_FRAME_AWAITING;
	return TB_FRAME_RESTING;
}

bool tb_frame_http_starts(const struct tb_frame *f)
{
	const struct tb_frame_http *h = &f->u.http;

	return h->tx.st == H_START && h->rx.st == H_START && h->sent == h->done && h->sent > 0;
}

bool tb_frame_http_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev)
{
	struct tb_frame_http_half *s = tx ? &f->u.http.tx : &f->u.http.rx;

	if (s->st == H_EOF_BODY)
		return true;
	if ((s->st != H_BODY && s->st != H_CHUNK_DATA) || n > s->n)
		return false;
	s->n -= n;
	if (s->n == 0 && s->st == H_CHUNK_DATA) {
		s->st = H_CHUNK_CRLF;
		s->pos = 0;
	} else if (s->n == 0) {
		message_done(f, tx, ev);
	}
	return true;
}

bool tb_frame_http_begun(const struct tb_frame *f)
{
	return f->u.http.rx.st != H_START; /* a response (or an interim one) under way */
}
