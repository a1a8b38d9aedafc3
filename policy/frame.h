/* frame.h - where a call begins and ends, as the protocol on a governed socket sees it.
 * Pure: fed the bytes the program already moves, never copies, changes or scans bodies. */
#ifndef TB_FRAME_H
#define TB_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The protocol a socket speaks. As an input (a rule's `protocol`), AUTO detects it from the
 * first bytes; HTTP, POSTGRES and REDIS still recognise a TLS ClientHello or an SSH banner
 * as their first bytes (the protocol then runs inside TLS, or the peer is not what the rule
 * said). As an output (tb_frame_proto), AUTO means "not decided yet".
 */
enum tb_proto {
	TB_PROTO_AUTO = 0,
	TB_PROTO_HTTP,
	TB_PROTO_TLS,
	TB_PROTO_POSTGRES,
	TB_PROTO_REDIS,
	TB_PROTO_SESSION,
	TB_PROTO_RAW,
};

/*
 * What the connection is doing, for the runtime's waits:
 *   UNKNOWN   nothing decided yet (no byte, or detection under way): syscall-pattern rules.
 *   RAW       not framed (unrecognised, malformed, or given up): syscall-pattern rules.
 *   RESTING   no request outstanding: no phase and no deadline on a wait to read.
 *   AWAITING  a request is outstanding (or being sent, or a handshake is under way): the
 *             phases and the call's deadline run.
 *   ANSWERED  TLS only: application data came back after the last request and its last
 *             record is complete; whether more follows is invisible (HTTP inside TLS).
 *             The call has an answer: the runtime should treat it as the syscall rules
 *             treat "response bytes read" (the read phase and the call's deadline, no
 *             first_byte).
 *   SESSION   ssh, subscribed Redis, an upgraded HTTP connection, PostgreSQL CopyBoth:
 *             connect and write phases only, no deadline.
 */
enum tb_frame_state {
	TB_FRAME_UNKNOWN = 0,
	TB_FRAME_RAW,
	TB_FRAME_RESTING,
	TB_FRAME_AWAITING,
	TB_FRAME_ANSWERED,
	TB_FRAME_SESSION,
};

/* Event bits returned by tb_frame_sent / tb_frame_received. */
#define TB_FRAME_EV_CALL_STARTS 0x1u /* these sent bytes begin a new call (not the first) */
#define TB_FRAME_EV_CALL_ENDS   0x2u /* the last outstanding response is complete */
#define TB_FRAME_EV_RAW         0x4u /* framing gave up here (log once, then syscall rules) */
#define TB_FRAME_EV_SESSION     0x8u /* the connection became a session */
#define TB_FRAME_EV_5XX        0x10u /* a final HTTP response's status is 5xx */
#define TB_FRAME_EV_GATEWAY    0x20u /* ... and it is 502, 503 or 504 (with EV_5XX) */

/* Per-half parser states: each half is written only by its own direction's calls. */
struct tb_frame_http_half {
	uint64_t n;       /* body/chunk bytes left to skip, or the number being parsed */
	uint16_t hbytes;  /* bytes of the header section (or chunk line) so far: bounded */
	uint8_t st;
	uint8_t pos;      /* position in a name or literal being matched */
	uint8_t cand;     /* candidates still matching */
	uint8_t fl;       /* per-message facts (content-length seen, chunked, no body, ...) */
	uint8_t te;       /* a value matcher's position */
	uint8_t status;   /* response class facts (1xx, 101, 2xx, no body) */
};

struct tb_frame_http {
	struct tb_frame_http_half tx, rx;
	uint32_t sent;         /* requests begun (tx) */
	uint32_t done;         /* final responses complete (rx) */
	uint32_t head_mask;    /* bit k%32: request k was HEAD (tx writes, rx reads) */
	uint32_t connect_mask; /* bit k%32: request k was CONNECT */
};

struct tb_frame_tls {
	struct {
		uint16_t skip;        /* record body bytes left */
		uint8_t hpos;         /* record header bytes seen (0..4) */
		uint8_t type;
		uint8_t ccs;          /* sent a ChangeCipherSpec */
		uint8_t fin13;        /* TLS 1.3: sent the first encrypted record (Finished) */
		uint8_t app_sent;     /* sent application data */
		uint8_t pad;
		uint32_t recs;        /* records begun */
		uint32_t rx_app_mark; /* rx.app at the last application record sent */
	} tx;
	struct {
		uint16_t skip;
		uint16_t ticket_len;  /* the length of the first record taken for a ticket */
		uint8_t hpos;
		uint8_t type;
		uint8_t is13;         /* encrypted records came in the ServerHello's flight */
		uint8_t fin12;        /* TLS 1.2: the server's CCS then Finished */
		uint8_t ccs_flight;   /* a CCS in the server's current flight */
		uint8_t tix;          /* ticket heuristic: 0 before, 1 open, 2 closed */
		uint8_t pad[2];
		uint32_t app;         /* application records received (not tickets) */
		uint32_t tx_mark;     /* tx.recs at the server's last record: flight boundaries */
	} rx;
};

struct tb_frame_pg_half {
	uint32_t skip;  /* message body bytes left */
	uint32_t len;   /* the length being read */
	uint32_t code;  /* the startup packet's protocol code */
	uint8_t hpos;   /* header bytes seen */
	uint8_t type;
	uint8_t st;
	uint8_t pad;
	uint32_t msgs;  /* rx: messages begun; tx: rx.msgs when the client last sent one */
};

struct tb_frame_pg {
	struct tb_frame_pg_half tx, rx;
	uint32_t expect;  /* ReadyForQuery the client has asked for */
	uint32_t got;     /* ReadyForQuery received */
	uint8_t batch;    /* extended-protocol messages sent since the last Sync */
	uint8_t ready;    /* the first ReadyForQuery came: the startup is over */
	uint8_t pad[2];
};

struct tb_frame_resp_half {
	uint64_t n;       /* bulk bytes left to skip, or the number being parsed */
	uint32_t pending; /* elements still due in the message under way (0: between) */
	uint8_t st;
	uint8_t digits;
	uint8_t type;     /* the type byte of the element under way */
	uint8_t fl;       /* negative number, push message, capturing the command name */
};

struct tb_frame_resp {
	struct tb_frame_resp_half tx, rx;
	uint32_t sent;     /* commands begun */
	uint32_t done;     /* replies complete (pushes not counted) */
	uint8_t name[8];   /* the first 8 bytes of the command name, upper-cased */
	uint32_t namelen;  /* its full length */
};

/*
 * Per governed socket. Fixed size (see TB_FRAME_SIZE_MAX), no pointers, no allocation:
 * zeroed memory is not a valid state, call tb_frame_init.
 *
 * Concurrency: tb_frame_sent writes the `tx` halves and the request counters,
 * tb_frame_received the `rx` halves and the answer counters; each reads the other's. A
 * switch of protocol (detection, PostgreSQL's SSL answer, an HTTP tunnel) rewrites the
 * whole state. So the calls on one socket must be serialised: a runtime that sees a send
 * and a receive overlap (a per-socket try-flag already taken) calls tb_frame_abandon
 * instead of waiting; full-duplex use is not request/response anyway. The queries may
 * be asked under the same flag; a watchdog thread should read a state the I/O path
 * published (one byte), not this struct.
 */
struct tb_frame {
	uint8_t proto;   /* enum tb_proto now (AUTO: detecting) */
	uint8_t forced;  /* enum tb_proto asked for */
	uint8_t flags;   /* TB_FRAME_F_* (frame.c) */
	uint8_t dlen;    /* detection: bytes held in u.detect */
	union {
		uint8_t detect[8];
		struct tb_frame_http http;
		struct tb_frame_tls tls;
		struct tb_frame_pg pg;
		struct tb_frame_resp resp;
	} u;
};

#define TB_FRAME_SIZE_MAX 64

/* Starts framing a new connection; `forced` is a rule's protocol (TB_PROTO_AUTO: detect). */
void tb_frame_init(struct tb_frame *f, enum tb_proto forced);

/*
 * The program sent buf[0..n) (what the kernel took: the call's return value, not what it
 * offered). Returns TB_FRAME_EV_* bits: CALL_STARTS when these bytes begin a request on a
 * connection whose previous call is answered (never for the connection's first request:
 * that one belongs to the connect, with any TLS handshake or database startup), RAW when
 * framing gave up, SESSION when the connection became a session. O(framing bytes).
 */
unsigned tb_frame_sent(struct tb_frame *f, const void *buf, size_t n);

/*
 * The program received buf[0..n); n == 0 means the peer closed (a read returned 0).
 * Returns TB_FRAME_EV_* bits: CALL_ENDS when the last outstanding response is complete
 * (never for TLS, whose responses are invisible), RAW, SESSION.
 */
unsigned tb_frame_received(struct tb_frame *f, const void *buf, size_t n);

/*
 * n bytes moved in one direction that the hooks could not see (sendfile, splice, a
 * zero-copy send). Counted when they fall inside a body the machine is skipping (a file
 * sent as an HTTP body, a TLS record's payload); anywhere else framing gives up (RAW).
 * Returns TB_FRAME_EV_* bits like tb_frame_sent.
 */
unsigned tb_frame_unseen(struct tb_frame *f, bool sent, uint64_t n);

/* Stop framing this socket for good (RAW): for uses framing cannot follow, such as two
 * threads sending and receiving at once without serialising their calls. */
void tb_frame_abandon(struct tb_frame *f);

/* The connection's state now (see enum tb_frame_state). */
enum tb_frame_state tb_frame_state(const struct tb_frame *f);

/*
 * Would a byte sent now begin a new call? The answer tb_frame_sent will give for a request
 * that begins here, available before the real send (where the budget's step runs). It
 * cannot see the bytes: a TLS alert, a PostgreSQL Terminate or a stray CRLF sent where it
 * says true will not start a call.
 */
bool tb_frame_send_starts_call(const struct tb_frame *f);

/*
 * While AWAITING: has a byte of the answer arrived (the `read` phase applies), or not yet
 * (`first_byte`)? Unlike "any byte received", a TLS 1.3 session ticket or a bare record
 * header is not the answer's first byte. False in any other state.
 */
bool tb_frame_answer_begun(const struct tb_frame *f);

/* The protocol being framed (TB_PROTO_AUTO while detecting). */
enum tb_proto tb_frame_proto(const struct tb_frame *f);

/* "auto", "http", ... for logs and configuration; NULL for an out-of-range value. */
const char *tb_proto_name(enum tb_proto p);

/* Parses a protocol name; returns 0, or -1 when `name` is none of them. */
int tb_proto_parse(const char *name, enum tb_proto *out);

#endif
