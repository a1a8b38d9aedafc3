/* textbuf.h - text appended to a caller's buffer, for the pure modules that print (the
 * Prometheus exposition, `timebox suggest`'s file). No allocation: what does not fit is cut,
 * and `n` still counts it, so the caller can tell and size again. */
#ifndef TB_TEXTBUF_H
#define TB_TEXTBUF_H

#include <stddef.h>

struct tb_textbuf {
	char *buf;
	size_t len, n; /* buf's size; the bytes the text needs (more than len: cut) */
};

/* Appends printf-formatted text (NUL-terminated while it fits). */
void tb_textbuf_put(struct tb_textbuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
