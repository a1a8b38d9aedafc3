/* stdio_wait.h - a stdio call on a FILE whose fd is a governed socket: the call is one wait
 * on one side of the socket, and a cut makes it fail the way a read or write error would. */
#ifndef TB_STDIO_WAIT_H
#define TB_STDIO_WAIT_H

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "xfer.h"

/*
 * glibc's FILE layout (bits/types/struct_FILE.h, public since glibc 2.28 for the getc and
 * putc macros) gives the buffer pointers and _fileno; the two buffering flags below come
 * from glibc's internal libio.h, unchanged since libio began (GLIBC_2.0 ABI: FILE is
 * embedded in programs, so its flags cannot move). No public function reads either cheaply:
 * __fbufsize/__flbf take the FILE lock, and __freadahead is gnulib's, not glibc's.
 */
#define TB_IO_UNBUFFERED 0x0002
#define TB_IO_LINE_BUF 0x0200

struct tb_stdio {
	struct tb_xfer x;
	int flags; /* the FILE's _flags before the call: which EOF/error flags are new */
};

/* Bytes the FILE holds unread: a read of at most this many never touches the fd. */
static inline size_t tb_stdio_avail(const FILE *f)
{
	return f->_IO_read_ptr < f->_IO_read_end ? (size_t)(f->_IO_read_end - f->_IO_read_ptr)
						 : 0;
}

/* True when `c` is among the unread bytes held (the end of a line already here). */
static inline bool tb_stdio_holds(const FILE *f, int c, size_t max)
{
	size_t n = tb_stdio_avail(f);

	return n > 0 && __builtin_memchr(f->_IO_read_ptr, c, n < max ? n : max) != NULL;
}

/* True when writing n more bytes may make glibc write to the fd: an unbuffered or
 * line-buffered stream, or a put area without room for them (also a stream never written,
 * whose buffer does not exist yet). A full-buffered stream otherwise only copies. */
static inline bool tb_stdio_may_flush(const FILE *f, size_t n)
{
	if (f->_flags & (TB_IO_UNBUFFERED | TB_IO_LINE_BUF))
		return true;
	return f->_IO_write_ptr == NULL || (size_t)(f->_IO_buf_end - f->_IO_write_ptr) <= n;
}

/*
 * Before a call that may wait on `side` of socket s (f's fd). Returns 0: make the call,
 * then pass its outcome to tb_stdio_end. Returns -1 without calling: the socket has
 * expired (or the call's deadline has passed); f's error flag is set and errno is
 * ETIMEDOUT (EAGAIN once with on_timeout=eagain), so the caller returns its failure value.
 */
int tb_stdio_begin(struct tb_stdio *w, struct tb_sock *s, FILE *f, enum tb_side side);

/*
 * After the call. `ok`: it returned everything it was asked for (a line, all items, no
 * EOF). The wait ends; a call that moved bytes restarts the silence count. Returns true
 * when the socket was cut during the call: the stream's EOF (a shut-down socket reads as
 * EOF, which must not pass for the peer's close) becomes an error - error flag set, EOF flag
 * cleared, errno ETIMEDOUT - and the caller returns its failure value. Returns false
 * otherwise, with errno as the call left it (the caller's, on success).
 */
bool tb_stdio_end(struct tb_stdio *w, FILE *f, bool ok);

/* vfscanf (c99 false: the GNU name) or __isoc99_vfscanf on f, governed when f's fd is a
 * governed socket (hooks_stdio.c; called from hooks_scanf.c). */
int tb_stdio_vfscanf(FILE *f, const char *fmt, va_list ap, bool c99);

#endif
