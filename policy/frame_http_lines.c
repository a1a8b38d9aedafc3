/* frame_http_lines.c - HTTP/1.x framing's fast path: request, status and header lines
 * that lie whole in one buffer, checked at their ends instead of byte by byte. */
#include <string.h>

#include "frame_http_impl.h"

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool is_method(const unsigned char *p, size_t n, const char *m)
{
	return n == strlen(m) && memcmp(p, m, n) == 0;
}

/* A whole request line p[0..len) (LF included): the same checks as step()'s. */
static size_t fast_request_line(struct tb_frame *f, const unsigned char *p, size_t len,
				unsigned *ev)
{
	struct tb_frame_http *h = &f->u.http;
	const unsigned char *sp = memchr(p, ' ', len);
	size_t mlen = sp ? (size_t)(sp - p) : 0, e = len - 1;
	uint32_t bit = 1u << (h->sent % TB_FRAME_PIPELINE_MAX);

	if (mlen == 0 || mlen > 32)
		return 0;
	for (size_t k = 0; k < mlen; k++)
		if (!((p[k] >= 'A' && p[k] <= 'Z') || p[k] == '-' || p[k] == '_'))
			return 0;
	if (e > 0 && p[e - 1] == '\r')
		e--;
	if (e < mlen + 10 || memcmp(p + e - 9, " HTTP/1.", 8) != 0 || !is_digit(p[e - 1]))
		return 0;
	if (!tb_frame_http_begin_request(f, ev))
		return len;
	if (is_method(p, mlen, "HEAD"))
		h->head_mask |= bit;
	if (is_method(p, mlen, "CONNECT"))
		h->connect_mask |= bit;
	h->tx.st = H_HSTART;
	h->tx.hbytes = (uint16_t)len;
	return len;
}

/* A whole status line p[0..len): the same checks as step()'s. */
static size_t fast_status_line(struct tb_frame_http *h, const unsigned char *p, size_t len,
			       unsigned *ev)
{
	unsigned code;

	if (len < 13 || memcmp(p, "HTTP/1.", 7) != 0 || !is_digit(p[7]) || p[8] != ' ' ||
	    !is_digit(p[9]) || !is_digit(p[10]) || !is_digit(p[11]) ||
	    (p[12] != ' ' && p[12] != '\r' && p[12] != '\n'))
		return 0;
	code = (p[9] - '0') * 100u + (p[10] - '0') * 10u + (p[11] - '0');
	tb_frame_http_begin_response(h);
	h->rx.status = tb_frame_http_status_class(code);
	*ev |= tb_frame_http_status_events(code);
	h->rx.st = H_HSTART;
	h->rx.hbytes = (uint16_t)len;
	return len;
}

/* A Content-Length value v[0..n) up to its LF, plain digits between blanks; false to
 * leave anything else (a second length, no digits, a sign) to step(). */
static bool fast_content_length(struct tb_frame_http_half *s, const unsigned char *v, size_t n)
{
	size_t k = 0, d;
	uint64_t x = 0;

	if (s->fl & FL_CL)
		return false;
	while (k < n && (v[k] == ' ' || v[k] == '\t'))
		k++;
	for (d = 0; k < n && is_digit(v[k]) && d < 18; k++, d++)
		x = x * 10 + (uint64_t)(v[k] - '0');
	while (k < n && (v[k] == ' ' || v[k] == '\t' || v[k] == '\r'))
		k++;
	if (d == 0 || k != n - 1) /* v[n - 1] is the LF */
		return false;
	s->fl |= FL_CL;
	s->n = x;
	return true;
}

/*
 * Whether the 8 bytes at p are `lower` (8 bytes), letters in either case where fold[k] is
 * 0x20, the other bytes exact (fold[k] 0): an ASCII letter's two cases differ in that bit
 * alone, so `v | fold == lower` folds exactly what tb_frame_lower folds - never by the
 * program's locale, as strncasecmp does (in tr_TR the capital of 'i' is not 'I':
 * regress/http_te_locale). One load and one compare; the constants fold at compile time.
 */
static inline bool word_is(const unsigned char *p, const char *lower, const char *fold)
{
	uint64_t v, want, mask;

	memcpy(&v, p, 8);
	memcpy(&want, lower, 8);
	memcpy(&mask, fold, 8);
	return (v | mask) == want;
}

#define LETTERS8 "\x20\x20\x20\x20\x20\x20\x20\x20"

/* p[0..15) is "content-length:" (the line is longer than 15 bytes). */
static inline bool is_content_length(const unsigned char *p)
{
	return word_is(p, "content-", "\x20\x20\x20\x20\x20\x20\x20\x00") &&
	       word_is(p + 7, "-length:", "\x00\x20\x20\x20\x20\x20\x20\x00");
}

/* p[0..18) is "transfer-encoding:" (the line is longer than 18 bytes). */
static inline bool is_transfer_encoding(const unsigned char *p)
{
	return word_is(p, "transfer", LETTERS8) &&
	       word_is(p + 8, "-encodin", "\x00\x20\x20\x20\x20\x20\x20\x20") &&
	       word_is(p + 10, "ncoding:", "\x20\x20\x20\x20\x20\x20\x20\x00");
}

/*
 * Header lines that lie whole within the buffer, from p: a line that is neither
 * Content-Length nor Transfer-Encoding costs one memchr and a look at its first byte (and,
 * for a 'c' or a 't', one or two word compares).
 * Stops (leaving the rest to step(), which decides the same way) at the empty line, a
 * folded line, Transfer-Encoding, an unusual Content-Length, or a line split across
 * buffers. Returns the bytes consumed.
 */
static size_t fast_headers(struct tb_frame_http_half *s, const unsigned char *p, size_t n)
{
	size_t i = 0, hbytes = s->hbytes;

	while (i < n) {
		const unsigned char *q = p + i, *lf;
		unsigned char c = q[0];
		size_t len;

		if (c == '\r' || c == '\n' || c == ' ' || c == '\t')
			break;
		lf = memchr(q, '\n', n - i);
		if (lf == NULL)
			break;
		len = (size_t)(lf - q) + 1;
		if (hbytes + len > TB_FRAME_HDR_MAX)
			break;
		c |= 0x20; /* 'c' or 'C', 't' or 'T' (and only those) */
		if (c == 'c' && len > 15 && is_content_length(q)) {
			if (!fast_content_length(s, q + 15, len - 15))
				break;
		} else if (c == 't' && len > 18 && is_transfer_encoding(q)) {
			break;
		}
		hbytes += len;
		i += len;
	}
	s->hbytes = (uint16_t)hbytes;
	return i;
}

/*
 * Whole lines within one buffer (the common case) are taken at once: a request or status
 * line is checked at its ends, then the header lines that follow (fast_headers).
 * Returns the bytes consumed; 0 lets step() take the bytes one at a time, deciding
 * exactly as this would.
 */
size_t tb_frame_http_lines(struct tb_frame *f, bool tx, struct tb_frame_http_half *s,
			   const unsigned char *p, size_t n, unsigned *ev)
{
	size_t used = 0;

	if (s->st == H_START) {
		const unsigned char *lf = memchr(p, '\n', n);
		size_t len = lf ? (size_t)(lf - p) + 1 : 0;

		if (len == 0 || len > TB_FRAME_HDR_MAX || p[0] == '\r' || p[0] == '\n')
			return 0;
		used = tx ? fast_request_line(f, p, len, ev) : fast_status_line(&f->u.http, p, len, ev);
		if (used == 0 || f->proto != TB_PROTO_HTTP)
			return used;
	}
	if (s->st == H_HSTART)
		used += fast_headers(s, p + used, n - used);
	return used;
}

