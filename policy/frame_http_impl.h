/* frame_http_impl.h - what the two halves of the HTTP/1.x machine share: the parser states
 * and flags, and the steps both the byte-at-a-time path and the whole-line path take. */
#ifndef TB_FRAME_HTTP_IMPL_H
#define TB_FRAME_HTTP_IMPL_H

#include "frame_impl.h"

/* Parser states, one set for both halves (a request's line differs from a status line). */
enum {
	H_START = 0,  /* between messages (stray CR/LF are skipped) */
	H_METHOD,     /* request: the method token */
	H_RLINE,      /* request: the rest of the request line, ending in " HTTP/1.x" */
	H_STATUS,     /* response: "HTTP/1.x NNN" */
	H_SLINE,      /* response: the reason phrase */
	H_HSTART,     /* start of a header line (or the empty line) */
	H_HNAME,
	H_HSKIP,      /* a header value we do not need: skip to LF */
	H_CLVAL,      /* Content-Length value */
	H_TEVAL,      /* Transfer-Encoding value */
	H_HEND_LF,    /* CR of the empty line seen */
	H_BODY,       /* n bytes of body left */
	H_CHUNK_SIZE,
	H_CHUNK_EXT,
	H_CHUNK_DATA, /* n bytes of chunk data left */
	H_CHUNK_CRLF, /* the CRLF after chunk data */
	H_TRAILER,
	H_TRSKIP,
	H_TRAILER_LF,
	H_EOF_BODY,   /* response delimited by the connection's end */
};

/* tb_frame_http_half.fl */
#define FL_CL 0x1u      /* Content-Length seen */
#define FL_TE 0x2u      /* Transfer-Encoding seen */
#define FL_CHUNKED 0x4u /* ... and its last coding is chunked */
#define FL_UNSOL 0x8u   /* rx: a response that came with no request outstanding */

/* tb_frame_http_half.status */
#define ST_INTERIM 0x1u /* 1xx other than 101: the final response follows */
#define ST_SWITCH 0x2u  /* 101 Switching Protocols */
#define ST_2XX 0x4u
#define ST_NOBODY 0x8u  /* 1xx, 204, 304 */

/* The status code's class (ST_* bits). */
uint8_t tb_frame_http_status_class(uint64_t code);

/* The events a final response's status raises: TB_FRAME_EV_5XX (and _GATEWAY for 502, 503,
 * 504), the downstream's own "I am failing" that the breaker counts (shim/protect.c). */
unsigned tb_frame_http_status_events(uint64_t code);

/* The program begins a request. Returns false when framing gave up (too deep a pipeline). */
bool tb_frame_http_begin_request(struct tb_frame *f, unsigned *ev);

/* The server begins a response (unsolicited when no request is outstanding). */
void tb_frame_http_begin_response(struct tb_frame_http *h);

/*
 * Whole lines within one buffer (the common case), taken at once from state H_START or
 * H_HSTART (frame_http_lines.c). Returns the bytes consumed; 0 leaves them to the
 * byte-at-a-time path, which decides exactly as this would. The protocol may change
 * (framing gave up): the caller checks.
 */
size_t tb_frame_http_lines(struct tb_frame *f, bool tx, struct tb_frame_http_half *s,
			   const unsigned char *p, size_t n, unsigned *ev);

#endif
