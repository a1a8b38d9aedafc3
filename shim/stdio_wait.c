/* stdio_wait.c - begin and end of a stdio call on a governed socket: the transfer's wait
 * (xfer.c) around a call whose own read or write glibc makes where no hook can see it. */
#include "stdio_wait.h"

#include <errno.h>
#include <string.h>

#include "real.h"
#include "sigpipe.h"
#include "sock.h"

/*
 * Sets the stream's error flag and clears its EOF flag. There is no public setter of the
 * error flag (clearerr only clears), yet it is what the program checks: glibc's own read
 * error sets exactly this bit (_IO_ERR_SEEN, public in struct_FILE.h for ferror_unlocked),
 * and a stream left at EOF would let a program take a cut body for a complete one. Under
 * the FILE lock (recursive: the _unlocked callers may hold it) so that a concurrent user
 * of the stream does not lose its own flag update; errno is kept.
 */
static void mark_cut(FILE *f)
{
	int saved = errno;

	tb_file_lock(f);
	f->_flags = (f->_flags | _IO_ERR_SEEN) & ~_IO_EOF_SEEN;
	tb_file_unlock(f);
	errno = saved;
}

int tb_stdio_begin(struct tb_stdio *w, struct tb_sock *s, FILE *f, enum tb_side side)
{
	w->flags = f->_flags;
	w->pipe.blocked = false;
	w->refill = side == TB_RD && tb_stdio_avail(f) == 0 && !(f->_flags & TB_IO_IN_BACKUP);
	w->moved = 0;
	if (tb_xfer_begin(&w->x, s, f->_fileno, side, false) == 0) {
		if (side == TB_WR)
			tb_sigpipe_hold(&w->pipe);
		return 0;
	}
	mark_cut(f);
	return -1;
}

/*
 * What a stdio call's outcome is as a transfer: the bytes moved (or 1) when it got
 * everything; 0 when it ended at the peer's EOF; -1 when it failed. The flags tell these
 * apart only in part: a failure sets the error flag only when it was clear (a second EPIPE,
 * a second EAGAIN on a stream whose error the program never cleared sets nothing new), and
 * a call can fail without touching the stream at all (fprintf's EILSEQ). So a failed write
 * is always a failure, and a failed read is the peer's EOF only when it set the EOF flag
 * without a new error, or met the EOF flag glibc keeps (a read at EOF returns at once).
 */
static ssize_t outcome(const struct tb_stdio *w, int now, bool ok)
{
	bool eof = (now & _IO_EOF_SEEN) && !(w->flags & _IO_EOF_SEEN);
	bool err = (now & _IO_ERR_SEEN) && !(w->flags & _IO_ERR_SEEN);

	if (ok && !eof && !err)
		return w->moved > 0 ? (ssize_t)w->moved : 1;
	if (w->x.side == TB_RD && !err && (now & _IO_EOF_SEEN))
		return 0;
	return -1;
}

bool tb_stdio_end(struct tb_stdio *w, FILE *f, bool ok)
{
	struct tb_sock *s = w->x.s;
	int now = f->_flags, err = errno;
	ssize_t r = outcome(w, now, ok);
	uint32_t word;
	bool cut;

	/* A failure the stream does not show (no error flag: a conversion fprintf refused) is
	 * the call's own, not an attempt on the socket that failed: it ends the wait as an
	 * interrupted call does, which tells the call budget nothing. */
	if (r < 0 && !(now & _IO_ERR_SEEN))
		errno = EINTR;
	/* A complete result stands even if a cut came meanwhile: the next call reports it. */
	if (tb_xfer_end(&w->x, r) >= 0 || r > 0 || s == NULL) {
		tb_sigpipe_release(&w->pipe, s != NULL && TB_ST(tb_sock_word(s)) == TB_ST_EXPIRED);
		if (r < 0)
			errno = err;
		return false;
	}
	word = tb_sock_word(s);
	cut = TB_ST_GEN(word) == w->x.gen && TB_ST(word) == TB_ST_EXPIRED;
	tb_sigpipe_release(&w->pipe, cut);
	if (!cut) {
		errno = err; /* the peer's own close or error: errno as the call left it */
		return false;
	}
	mark_cut(f);
	return true;
}

void tb_stdio_refilled(struct tb_stdio *w, const FILE *f)
{
	/* glibc's _IO_file_underflow reads into _IO_buf_base and sets read_base there, read_end
	 * after the count; __uflow then returns *read_ptr++. */
	if (!w->refill || f->_IO_read_base != f->_IO_buf_base ||
	    f->_IO_read_ptr != f->_IO_read_base + 1 || f->_IO_read_end <= f->_IO_read_base)
		return;
	tb_xfer_data(&w->x, f->_IO_read_base, NULL, 0);
	w->moved = (size_t)(f->_IO_read_end - f->_IO_read_base);
}

/* One underflow as one wait. Returns the byte or EOF; *cut when the socket was cut. An
 * underflow that only leaves the ungetc area for the bytes behind it is no wait: a slow
 * program that pushed a byte back must not be cut reading what it already holds
 * (regress/stdio_ungetc_buffered_cut). */
static int pull(struct tb_sock *s, FILE *f, bool *cut)
{
	struct tb_stdio w;
	int c;

	*cut = false;
	if (tb_stdio_behind_backup(f) > 0)
		return tb_real.__uflow(f);
	if (tb_stdio_begin(&w, s, f, TB_RD) < 0) {
		*cut = true;
		return EOF;
	}
	c = tb_real.__uflow(f);
	if (c != EOF)
		tb_stdio_refilled(&w, f);
	*cut = tb_stdio_end(&w, f, c != EOF);
	return c;
}

/* glibc's fread (_IO_file_xsgetn) reads a request of at least a buffer's size straight
 * into the caller's memory when the buffer is empty; so do we, but through the governed
 * read. A line-buffered or unbuffered stream too, as glibc's: its underflow would flush
 * stdout first, but glibc's fread makes no underflow for such a request, and an unbuffered
 * stream's buffer is one byte - refilled by __uflow, 1 MB took a million reads
 * (regress/stdio_unbuffered_fread). Not for a stream with an ungetc area, pending output
 * or wide orientation: those refill by __uflow. */
static bool can_read_direct(const FILE *f, size_t n)
{
	return !(f->_flags & (TB_IO_IN_BACKUP | TB_IO_CURRENTLY_PUTTING)) && f->_mode <= 0 &&
	       f->_IO_buf_base != NULL && n >= (size_t)(f->_IO_buf_end - f->_IO_buf_base);
}

/* The governed read into dst; sets the stream's EOF or error flag as glibc's own read
 * would. Returns the count, 0 at EOF, -1 on error (*cut: the socket was cut). */
static ssize_t read_direct(struct tb_sock *s, FILE *f, char *dst, size_t n, bool *cut)
{
	struct tb_xfer x;
	ssize_t r = -1;

	*cut = false;
	if (tb_xfer_begin(&x, s, f->_fileno, TB_RD, false) == 0) {
		tb_xfer_data(&x, dst, NULL, 0);
		r = tb_xfer_end(&x, tb_real.read(f->_fileno, dst, n));
	}
	if (r == 0) {
		f->_flags |= _IO_EOF_SEEN;
	} else if (r < 0) {
		uint32_t word = tb_sock_word(s);

		f->_flags |= _IO_ERR_SEEN;
		*cut = TB_ST_GEN(word) == x.gen && TB_ST(word) == TB_ST_EXPIRED;
	}
	return r;
}

size_t tb_stdio_take(struct tb_sock *s, FILE *f, char *dst, size_t max, int delim,
		     enum tb_take_end *end)
{
	size_t got = 0;
	bool cut;

	*end = TB_TAKE_FULL;
	while (got < max) {
		size_t k = tb_stdio_avail(f);
		char *from = f->_IO_read_ptr, *hit = NULL;

		if (k == 0 && delim < 0 && can_read_direct(f, max - got)) {
			ssize_t r = read_direct(s, f, dst + got, max - got, &cut);

			if (r <= 0) {
				*end = cut ? TB_TAKE_CUT : TB_TAKE_END;
				break;
			}
			got += (size_t)r;
			continue;
		}
		if (k == 0) {
			int c = pull(s, f, &cut);

			if (c == EOF) {
				*end = cut ? TB_TAKE_CUT : TB_TAKE_END;
				break;
			}
			dst[got++] = (char)c;
			if (c == delim) {
				*end = TB_TAKE_DELIM;
				break;
			}
			continue;
		}
		if (k > max - got)
			k = max - got;
		if (delim >= 0 && (hit = memchr(from, delim, k)) != NULL)
			k = (size_t)(hit - from) + 1;
		memcpy(dst + got, from, k);
		f->_IO_read_ptr += k;
		got += k;
		if (hit != NULL) {
			*end = TB_TAKE_DELIM;
			break;
		}
	}
	return got;
}

int tb_stdio_prime(struct tb_sock *s, FILE *f)
{
	bool cut;
	int c;

	if (tb_stdio_avail(f) > 0)
		return 1;
	c = pull(s, f, &cut);
	if (c == EOF)
		return cut ? -1 : 0;
	/* glibc's ungetc of the byte just read only steps _IO_read_ptr back. */
	f->_IO_read_ptr--;
	return 1;
}
