/* reqtag.h - where a request deadline came from, as a socket keeps it for the log line of
 * its cut: plain data shared by request.c, sock.c and log.c (no behaviour here). */
#ifndef TB_REQTAG_H
#define TB_REQTAG_H

#include <stdint.h>

/* Where a thread's request deadline came from (the log's `budget=` note). */
enum tb_req_source {
	TB_REQ_SRC_NONE,   /* no request deadline */
	TB_REQ_SRC_SCOPE,  /* scope=request: the settings' deadline from the head's start */
	TB_REQ_SRC_HEADER, /* an inbound header tightened it (propagate) */
	TB_REQ_SRC_API,    /* timebox_deadline_begin */
};

/* The configured header (TIMEBOX_DEADLINE_HEADER) or Envoy's, for the log line. */
enum tb_req_header { TB_REQ_HDR_CONFIGURED, TB_REQ_HDR_ENVOY };

/* Where a clamped call's deadline came from, packed in 16 bytes that a socket keeps
 * (struct tb_sock's req_tag: relaxed atomics, read by whoever writes the cut's line). */
struct tb_req_tag {
	uint8_t source;  /* enum tb_req_source */
	uint8_t header;  /* enum tb_req_header, for TB_REQ_SRC_HEADER */
	char value[14];  /* the header's value as written, NUL-terminated (cut to fit) */
};

#endif
