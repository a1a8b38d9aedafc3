/* stdio_wait.h - a stdio call on a FILE whose fd is a governed socket: the call is one wait
 * on one side of the socket, and a cut makes it fail the way a read or write error would. */
#ifndef TB_STDIO_WAIT_H
#define TB_STDIO_WAIT_H

#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "sigpipe.h"
#include "xfer.h"

/*
 * glibc's FILE layout (bits/types/struct_FILE.h, public since glibc 2.28 for the getc and
 * putc macros) gives the buffer pointers and _fileno; the flags below come
 * from glibc's internal libio.h, unchanged since libio began (GLIBC_2.0 ABI: FILE is
 * embedded in programs, so its flags cannot move). No public function reads these cheaply:
 * __fbufsize/__flbf take the FILE lock, and __freadahead is gnulib's, not glibc's.
 */
#define TB_IO_UNBUFFERED 0x0002
#define TB_IO_LINE_BUF 0x0200
#define TB_IO_IN_BACKUP 0x0100         /* reading the ungetc area, not the buffer */
#define TB_IO_CURRENTLY_PUTTING 0x0800 /* the buffer holds unwritten output */

/*
 * A FILE's own lock (recursive), as glibc's stdio takes it. ThreadSanitizer does not follow
 * that lock (glibc's, internal to libc), so its builds are told of it: two threads' hooks
 * on one stream are ordered by it (regress/stdio_scanf_shared).
 */
#ifdef __SANITIZE_THREAD__
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#endif

static inline void tb_file_lock(FILE *f)
{
	flockfile(f);
#ifdef __SANITIZE_THREAD__
	__tsan_acquire(f);
#endif
}

static inline void tb_file_unlock(FILE *f)
{
#ifdef __SANITIZE_THREAD__
	__tsan_release(f);
#endif
	funlockfile(f);
}

struct tb_stdio {
	struct tb_xfer x;
	int flags; /* the FILE's _flags before the call: which EOF/error flags are new */
	struct tb_sigpipe pipe; /* write side: SIGPIPE held for the call (see tb_stdio_begin) */
	bool refill;        /* read side: the buffer was empty, not the ungetc area */
	size_t moved;       /* bytes the call is known to have read into the buffer (0: unknown) */
};

/* Bytes the FILE holds unread: a read of at most this many never touches the fd. */
static inline size_t tb_stdio_avail(const FILE *f)
{
	return f->_IO_read_ptr < f->_IO_read_end ? (size_t)(f->_IO_read_end - f->_IO_read_ptr)
						 : 0;
}

/* Bytes the buffer holds behind the ungetc area while the FILE reads that area: glibc
 * keeps the buffer's unread part in _IO_save_base.._IO_save_end meanwhile, and the refill
 * that ends the area only switches back to them, reading nothing. */
static inline size_t tb_stdio_behind_backup(const FILE *f)
{
	return (f->_flags & TB_IO_IN_BACKUP) && f->_IO_save_base < f->_IO_save_end
		       ? (size_t)(f->_IO_save_end - f->_IO_save_base)
		       : 0;
}

/* True when `c` is among the unread bytes held (the end of a line already here), the
 * buffer's behind an ungetc area included. */
static inline bool tb_stdio_holds(const FILE *f, int c)
{
	size_t n = tb_stdio_avail(f), m = tb_stdio_behind_backup(f);

	return (n > 0 && __builtin_memchr(f->_IO_read_ptr, c, n) != NULL) ||
	       (m > 0 && __builtin_memchr(f->_IO_save_base, c, m) != NULL);
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
 * On the write side SIGPIPE is blocked for the call: glibc's own write cannot ask for
 * MSG_NOSIGNAL, and the cut (a shutdown) makes a blocked write fail with EPIPE - a program
 * that never ignored SIGPIPE would die of a timeout instead of seeing ETIMEDOUT.
 * tb_stdio_end consumes a SIGPIPE the cut raised and lets a genuine one (the peer closed)
 * through, as the kernel would have. Two or three system calls per write that may flush.
 */
int tb_stdio_begin(struct tb_stdio *w, struct tb_sock *s, FILE *f, enum tb_side side);

/*
 * After a call that takes one byte and returned it (__uflow, fgetc), before tb_stdio_end:
 * when the buffer was empty at tb_stdio_begin, glibc refilled it with one read of its own
 * - the bytes between _IO_read_base and _IO_read_end, the first just returned - and these
 * are the bytes the framing is told (tb_xfer_data), not "unseen": a response read through
 * a FILE is framed as a read() of it would be. Anything else (the ungetc area, a buffer
 * that does not look freshly filled) stays unseen. The caller holds the FILE's lock or is
 * its only user (the _unlocked calls' contract).
 */
void tb_stdio_refilled(struct tb_stdio *w, const FILE *f);

/*
 * After the call. `ok`: it returned everything it was asked for (a line, all items, no
 * EOF). The wait ends; a call that moved bytes restarts the silence count. Returns true
 * when the socket was cut during the call: the stream's EOF (a shut-down socket reads as
 * EOF, which must not pass for the peer's close) becomes an error - error flag set, EOF flag
 * cleared, errno ETIMEDOUT - and the caller returns its failure value. Returns false
 * otherwise, with errno as the call left it (the caller's, on success).
 */
bool tb_stdio_end(struct tb_stdio *w, FILE *f, bool ok);

/*
 * Reads inside one stdio call must each be a wait of their own: a line or an fread that
 * takes several of glibc's internal reads, each after a short silence, would otherwise be
 * one long wait and be cut although the peer never fell silent for the limit. So the
 * governed fgets, getdelim and fread move the bytes themselves, the way glibc's own
 * _IO_getline and fread do (memchr and memcpy from the buffer, advancing _IO_read_ptr as
 * the getc macro does), and refill the buffer one read at a time: __uflow, one wait; or,
 * for a request of at least a buffer's size on an empty buffer, a governed read straight
 * into the caller's memory, as glibc's fread does. The caller holds the FILE's lock.
 *
 * tb_stdio_take copies at most `max` bytes into dst, stopping after `delim` (-1: none).
 * Returns the count; *end says why it stopped.
 */
enum tb_take_end {
	TB_TAKE_FULL,  /* max bytes copied */
	TB_TAKE_DELIM, /* the delimiter was copied */
	TB_TAKE_END,   /* EOF or an error: the stream's flag is set, errno as glibc left it */
	TB_TAKE_CUT,   /* the socket was cut: error flag set, errno ETIMEDOUT */
};
size_t tb_stdio_take(struct tb_sock *s, FILE *f, char *dst, size_t max, int delim,
		     enum tb_take_end *end);

/* Fills an empty buffer with one underflow (one wait) and puts the byte back, so that a
 * call which cannot be split (fscanf) starts with what the peer has sent. Returns 1 when
 * bytes are buffered, 0 at EOF or an error (flag set by glibc), -1 when the socket was cut
 * (error flag set, errno ETIMEDOUT: see tb_stdio_end). */
int tb_stdio_prime(struct tb_sock *s, FILE *f);

/* vfscanf (c99 false: the GNU name) or __isoc99_vfscanf on f, governed when f's fd is a
 * governed socket (hooks_stdio.c; called from hooks_scanf.c). */
int tb_stdio_vfscanf(FILE *f, const char *fmt, va_list ap, bool c99);

#endif
