/* frame_tls.c - TLS record-layer framing: handshake flights, then application-data turns.
 * Record bodies are skipped by counting; nothing is decrypted or parsed inside a record. */
#include <string.h>

#include "frame_impl.h"

enum { CT_CCS = 20, CT_ALERT = 21, CT_HANDSHAKE = 22, CT_APPDATA = 23, CT_HEARTBEAT = 24 };

/* TLSPlaintext/TLSCiphertext length limits: 2^14 + 2048 (TLS 1.2's ciphertext bound). */
#define RECORD_MAX (16384u + 2048u)

/*
 * NewSessionTicket in TLS 1.3 is encrypted and typed application_data. A ticket record is
 * small (a ticket of a few hundred bytes, a nonce, an AEAD tag): records taken for tickets
 * are at most this long.
 */
#define TICKET_RECORD_MAX 1100u

void tb_frame_tls_init(struct tb_frame *f)
{
	(void)f; /* all zero: no record seen either way */
}

static bool handshake_done(const struct tb_frame_tls *t)
{
	return t->rx.is13 ? t->tx.fin13 : (t->tx.ccs && t->rx.fin12);
}

/* The client's record of type `type` begins: is it application data (not its Finished)? */
static bool tx_is_app(const struct tb_frame_tls *t, uint8_t type)
{
	if (type != CT_APPDATA)
		return false;
	return !t->rx.is13 || t->tx.fin13;
}

bool tb_frame_tls_starts(const struct tb_frame *f)
{
	const struct tb_frame_tls *t = &f->u.tls;

	return t->tx.hpos == 0 && t->tx.skip == 0 && handshake_done(t) && t->tx.app_sent &&
	       t->rx.app != t->tx.rx_app_mark;
}

/* The client begins a record of type `type` (its first byte). */
static void tx_record(struct tb_frame *f, uint8_t type, unsigned *ev)
{
	struct tb_frame_tls *t = &f->u.tls;

	if (tx_is_app(t, type)) {
		if (tb_frame_tls_starts(f))
			*ev |= TB_FRAME_EV_CALL_STARTS;
		t->tx.app_sent = 1;
		t->tx.rx_app_mark = t->rx.app;
	} else if (type == CT_APPDATA) {
		t->tx.fin13 = 1; /* TLS 1.3: the first encrypted record carries the Finished */
	} else if (type == CT_CCS) {
		t->tx.ccs = 1;
	}
	t->tx.recs++;
}

/*
 * The server's record header is complete. Tells TLS 1.3 from 1.2 without looking inside a
 * record: only 1.3 sends encrypted (type 23) records in the ServerHello's flight; in 1.2
 * the server's ChangeCipherSpec is followed, in the same flight, by its Finished (type
 * 22). In 1.3 the records right after the client's Finished are taken for tickets while
 * they are small and of one length (see TICKET_RECORD_MAX and docs/design.md).
 */
static void rx_record(struct tb_frame_tls *t, uint8_t type, uint16_t len)
{
	if (t->rx.tx_mark != t->tx.recs) {
		t->rx.ccs_flight = 0; /* the client spoke since: a new flight */
		t->rx.tx_mark = t->tx.recs;
	}
	if (type == CT_CCS) {
		t->rx.ccs_flight = 1;
		return;
	}
	if (type == CT_HANDSHAKE) {
		if (t->rx.ccs_flight && !t->rx.is13)
			t->rx.fin12 = 1;
		return;
	}
	if (type != CT_APPDATA)
		return; /* alerts, heartbeats: neither handshake nor answer */
	if (!t->rx.fin12 && !t->rx.is13)
		t->rx.is13 = 1;
	if (t->rx.is13) {
		if (!t->tx.fin13)
			return; /* EncryptedExtensions .. Finished */
		if (t->rx.tix == 0)
			t->rx.tix = 1;
		if (t->rx.tix == 1 && len <= TICKET_RECORD_MAX &&
		    (t->rx.ticket_len == 0 || t->rx.ticket_len == len)) {
			t->rx.ticket_len = len;
			return;
		}
		t->rx.tix = 2;
	}
	t->rx.app++;
}

size_t tb_frame_tls_feed(struct tb_frame *f, bool tx, const unsigned char *p, size_t n,
			 unsigned *ev)
{
	struct tb_frame_tls *t = &f->u.tls;
	uint16_t *skip = tx ? &t->tx.skip : &t->rx.skip;
	uint8_t *hpos = tx ? &t->tx.hpos : &t->rx.hpos;
	uint8_t *type = tx ? &t->tx.type : &t->rx.type;
	size_t i = 0;

	while (i < n) {
		unsigned char c;

		if (*hpos == 0 && *skip > 0) {
			size_t take = n - i;

			if (take > *skip)
				take = *skip;
			*skip = (uint16_t)(*skip - take);
			i += take;
			continue;
		}
		if (*hpos == 0 && n - i >= 5) {
			/* A whole header in this buffer: the usual case, taken at once. */
			uint16_t len = (uint16_t)(p[i + 3] << 8 | p[i + 4]);

			if (p[i] < CT_CCS || p[i] > CT_HEARTBEAT || p[i + 1] != 3 || p[i + 2] > 4 ||
			    len > RECORD_MAX)
				goto bad;
			*type = p[i];
			if (tx)
				tx_record(f, p[i], ev);
			else
				rx_record(t, p[i], len);
			*skip = len;
			i += 5;
			continue;
		}
		c = p[i++];
		switch (*hpos) {
		case 0:
			if (c < CT_CCS || c > CT_HEARTBEAT)
				goto bad;
			*type = c;
			if (tx)
				tx_record(f, c, ev);
			break;
		case 1:
			if (c != 3)
				goto bad;
			break;
		case 2:
			if (c > 4)
				goto bad;
			break;
		case 3:
			*skip = (uint16_t)(c << 8); /* the length is built in place (hpos != 0) */
			break;
		default: {
			uint16_t len = (uint16_t)(*skip | c);

			if (len > RECORD_MAX)
				goto bad;
			if (!tx)
				rx_record(t, *type, len);
			*skip = len;
			*hpos = 0;
			continue;
		}
		}
		(*hpos)++;
		if (*hpos == 4 && *skip > RECORD_MAX)
			goto bad;
	}
	return n;
bad:
	tb_frame_give_up(f, ev);
	return i;
}

enum tb_frame_state tb_frame_tls_state(const struct tb_frame *f)
{
	const struct tb_frame_tls *t = &f->u.tls;

	if (t->tx.recs == 0)
		return TB_FRAME_RESTING; /* forced tls, nothing sent yet */
	if (!handshake_done(t) || t->tx.hpos || t->tx.skip || t->rx.hpos || t->rx.skip)
		return TB_FRAME_AWAITING;
	if (!t->tx.app_sent)
		return TB_FRAME_RESTING; /* handshake over (tickets perhaps), nothing asked */
	if (t->rx.app == t->tx.rx_app_mark)
		return TB_FRAME_AWAITING;
	return TB_FRAME_ANSWERED;
}

bool tb_frame_tls_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev)
{
	struct tb_frame_tls *t = &f->u.tls;
	uint16_t *skip = tx ? &t->tx.skip : &t->rx.skip;

	(void)ev;
	if ((tx ? t->tx.hpos : t->rx.hpos) != 0 || n > *skip)
		return false;
	*skip = (uint16_t)(*skip - n);
	return true;
}

bool tb_frame_tls_begun(const struct tb_frame *f)
{
	const struct tb_frame_tls *t = &f->u.tls;

	if (!handshake_done(t)) /* the server's flight began since the client's last record */
		return t->tx.recs > 0 && t->rx.tx_mark == t->tx.recs;
	return t->tx.app_sent && t->rx.app != t->tx.rx_app_mark;
}
