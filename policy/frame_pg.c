/* frame_pg.c - PostgreSQL v3 framing: the startup (and SSL/GSS negotiation), then messages
 * of a type byte and an int32 length; a call's answer ends at ReadyForQuery ('Z'). */
#include <string.h>

#include "frame_impl.h"

enum { P_STARTUP = 0, P_SSLWAIT, P_MSG, P_RX_SSL };

#define SSL_REQUEST 80877103u
#define GSSENC_REQUEST 80877104u
#define MSG_MAX (1u << 30) /* the server's own limit for a message */

void tb_frame_pg_init(struct tb_frame *f)
{
	f->u.pg.tx.st = P_STARTUP;
	f->u.pg.rx.st = P_MSG;
}

bool tb_frame_pg_starts(const struct tb_frame *f)
{
	const struct tb_frame_pg *g = &f->u.pg;

	return g->ready && g->expect == g->got && !g->batch && g->tx.st == P_MSG &&
	       g->tx.hpos == 0 && g->tx.skip == 0;
}

/*
 * The client begins a message of type c. Each Query, FunctionCall and Sync is answered by
 * exactly one ReadyForQuery; the extended protocol's Parse/Bind/Execute/Describe/Close/
 * Flush wait for a Sync and keep the connection busy until its answer. Terminate is not a
 * call.
 */
static void tx_message(struct tb_frame *f, unsigned char c, unsigned *ev)
{
	struct tb_frame_pg *g = &f->u.pg;

	if (c != 'X' && tb_frame_pg_starts(f))
		*ev |= TB_FRAME_EV_CALL_STARTS;
	switch (c) {
	case 'Q':
	case 'F':
		g->expect++;
		break;
	case 'S':
		g->expect++;
		g->batch = 0;
		break;
	case 'P':
	case 'B':
	case 'E':
	case 'D':
	case 'C':
	case 'H':
		g->batch = 1;
		break;
	default:
		break;
	}
}

static void ready_for_query(struct tb_frame_pg *g, unsigned *ev)
{
	g->ready = 1;
	if (g->got == g->expect)
		return; /* one nobody asked for: nothing to count */
	g->got++;
	if (g->got == g->expect && !g->batch && g->tx.st == P_MSG && g->tx.hpos == 0 &&
	    g->tx.skip == 0)
		*ev |= TB_FRAME_EV_CALL_ENDS;
}

/* The 8-byte startup packet is complete. Returns false when framing gave up. */
static bool startup(struct tb_frame *f, unsigned *ev)
{
	struct tb_frame_pg *g = &f->u.pg;
	uint32_t len = g->tx.len, code = g->tx.code;

	if ((code >> 16) == 3 && (code & 0xffff) <= 2 && len >= 8 && len <= 10000) {
		g->expect++; /* answered by the first ReadyForQuery, after authentication */
		g->tx.skip = len - 8;
		g->tx.st = P_MSG;
	} else if ((code == SSL_REQUEST || code == GSSENC_REQUEST) && len == 8) {
		g->tx.st = P_SSLWAIT;
		g->rx.st = P_RX_SSL;
		g->rx.code = code;
	} else {
		tb_frame_give_up(f, ev);
		return false;
	}
	g->tx.hpos = 0;
	return true;
}

size_t tb_frame_pg_feed(struct tb_frame *f, bool tx, const unsigned char *p, size_t n,
			unsigned *ev)
{
	struct tb_frame_pg *g = &f->u.pg;
	struct tb_frame_pg_half *s = tx ? &g->tx : &g->rx;
	size_t i = 0;

	while (i < n) {
		unsigned char c;

		if (s->hpos == 0 && s->skip > 0) {
			/* Count, don't scan: O(1) per buffer whatever the message's size. */
			size_t take = n - i;

			if (take > s->skip)
				take = s->skip;
			s->skip -= (uint32_t)take;
			i += take;
			if (s->skip == 0 && !tx && s->type == 'Z')
				ready_for_query(g, ev);
			continue;
		}
		c = p[i++];
		switch (s->st) {
		case P_STARTUP:
			if (s->hpos < 4)
				s->len = s->len << 8 | c;
			else
				s->code = s->code << 8 | c;
			if (++s->hpos == 8 && !startup(f, ev))
				return i;
			continue;
		case P_SSLWAIT:
			goto bad; /* the client must wait for the one-byte answer */
		case P_RX_SSL:
			if (c == 'S' && s->code == SSL_REQUEST) {
				tb_frame_switch(f, TB_PROTO_TLS); /* the rest is a TLS handshake */
				return i;
			}
			if (c != 'N')
				goto bad; /* 'G': GSS-encrypted, nothing left to frame */
			g->tx.st = P_STARTUP;
			g->tx.len = g->tx.code = 0;
			s->st = P_MSG;
			continue;
		default:
			break;
		}
		if (s->hpos == 0) {
			s->type = c;
			s->len = 0;
			s->msgs = tx ? g->rx.msgs : s->msgs + 1;
			if (tx) {
				tx_message(f, c, ev);
			} else if (c == 'W') {
				tb_frame_session(f, ev); /* CopyBoth: streaming replication */
				return i;
			}
			s->hpos = 1;
			continue;
		}
		s->len = s->len << 8 | c;
		if (++s->hpos < 5)
			continue;
		if (s->len < 4 || s->len > MSG_MAX)
			goto bad;
		s->hpos = 0;
		s->skip = s->len - 4;
		if (s->skip == 0 && !tx && s->type == 'Z')
			ready_for_query(g, ev);
	}
	return n;
bad:
	tb_frame_give_up(f, ev);
	return i;
}

enum tb_frame_state tb_frame_pg_state(const struct tb_frame *f)
{
	const struct tb_frame_pg *g = &f->u.pg;

	if (g->tx.st == P_STARTUP && g->tx.hpos == 0 && g->expect == 0)
		return TB_FRAME_RESTING; /* nothing sent yet (or refused SSL, startup to come) */
	if (g->tx.st != P_MSG || g->tx.hpos || g->tx.skip || g->expect != g->got || g->batch)
		return TB_FRAME_AWAITING;
	return TB_FRAME_RESTING;
}

bool tb_frame_pg_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev)
{
	struct tb_frame_pg *g = &f->u.pg;
	struct tb_frame_pg_half *s = tx ? &g->tx : &g->rx;

	if (s->st != P_MSG || s->hpos != 0 || n > s->skip)
		return false;
	s->skip -= (uint32_t)n;
	if (s->skip == 0 && !tx && s->type == 'Z')
		ready_for_query(g, ev);
	return true;
}

bool tb_frame_pg_begun(const struct tb_frame *f)
{
	const struct tb_frame_pg *g = &f->u.pg;

	/* any message since the client's last one: a notice or a notification in the middle
	 * of a query counts too, as any received byte does for the system-call rules */
	return g->rx.msgs != g->tx.msgs || g->rx.hpos > 0;
}
