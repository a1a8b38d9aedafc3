/* frame_impl.h - what frame.c shares with the per-protocol machines (frame_*.c): the feed
 * contract, the switch of protocol, giving up. Not for the runtime: use frame.h. */
#ifndef TB_FRAME_IMPL_H
#define TB_FRAME_IMPL_H

#include "frame.h"

/* struct tb_frame flags */
#define TB_FRAME_F_EOF 0x1u     /* the peer closed */
#define TB_FRAME_F_SESSION 0x2u /* sticky: the connection became a session */

/* Absurd sizes: past these a stream is not what it looked like, or hostile. */
#define TB_FRAME_HDR_MAX 65000u          /* an HTTP header section, a chunk line, a RESP line */
#define TB_FRAME_PIPELINE_MAX 32u        /* outstanding requests (HTTP head/connect masks) */

/*
 * Every machine's feed: consumes bytes p[0..n) of one direction (tx: sent by the program)
 * and returns how many it consumed. It consumes all of them unless it switched the
 * protocol (tb_frame_switch, tb_frame_give_up), in which case the rest belongs to the new
 * machine and the caller feeds it there. Never 0 with n > 0 unless the protocol changed.
 */
typedef size_t tb_frame_feed_fn(struct tb_frame *f, bool tx, const unsigned char *p,
				size_t n, unsigned *ev);

tb_frame_feed_fn tb_frame_http_feed, tb_frame_tls_feed, tb_frame_pg_feed, tb_frame_resp_feed;

void tb_frame_http_init(struct tb_frame *f);
void tb_frame_tls_init(struct tb_frame *f);
void tb_frame_pg_init(struct tb_frame *f);
void tb_frame_resp_init(struct tb_frame *f);

enum tb_frame_state tb_frame_http_state(const struct tb_frame *f);
enum tb_frame_state tb_frame_tls_state(const struct tb_frame *f);
enum tb_frame_state tb_frame_pg_state(const struct tb_frame *f);
enum tb_frame_state tb_frame_resp_state(const struct tb_frame *f);

bool tb_frame_http_begun(const struct tb_frame *f);
bool tb_frame_tls_begun(const struct tb_frame *f);
bool tb_frame_pg_begun(const struct tb_frame *f);
bool tb_frame_resp_begun(const struct tb_frame *f);

bool tb_frame_http_starts(const struct tb_frame *f);
bool tb_frame_tls_starts(const struct tb_frame *f);
bool tb_frame_pg_starts(const struct tb_frame *f);
bool tb_frame_resp_starts(const struct tb_frame *f);

/* n bytes moved that the hooks did not see (sendfile, splice): counted when the machine is
 * skipping a body at least that long, otherwise false (the caller gives up). */
bool tb_frame_http_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev);
bool tb_frame_tls_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev);
bool tb_frame_pg_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev);
bool tb_frame_resp_skip(struct tb_frame *f, bool tx, uint64_t n, unsigned *ev);

/* The peer closed: a response framed "until EOF" is complete. Returns event bits. */
unsigned tb_frame_http_eof(struct tb_frame *f);

/* Stop framing: RAW from here on (EV_RAW once). */
void tb_frame_give_up(struct tb_frame *f, unsigned *ev);

/* The connection is a session from here on (EV_SESSION once). */
void tb_frame_session(struct tb_frame *f, unsigned *ev);

/* Restart on a new protocol: `p` (TLS after PostgreSQL's SSL answer) or AUTO (detect again:
 * an HTTP CONNECT tunnel). The state of the old machine is gone. */
void tb_frame_switch(struct tb_frame *f, enum tb_proto p);

static inline unsigned char tb_frame_lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

#endif
