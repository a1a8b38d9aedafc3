/* textbuf.c - text appended to a caller's buffer (textbuf.h). */
#include "textbuf.h"

#include <stdarg.h>
#include <stdio.h>

void tb_textbuf_put(struct tb_textbuf *o, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(o->n < o->len ? o->buf + o->n : NULL, o->n < o->len ? o->len - o->n : 0,
		      fmt, ap);
	va_end(ap);
	if (k > 0)
		o->n += (size_t)k;
}
