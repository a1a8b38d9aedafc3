/* stdio_wait.c - begin and end of a stdio call on a governed socket: the transfer's wait
 * (xfer.c) around a call whose own read or write glibc makes where no hook can see it. */
#include "stdio_wait.h"

#include <errno.h>

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

	flockfile(f);
	f->_flags = (f->_flags | _IO_ERR_SEEN) & ~_IO_EOF_SEEN;
	funlockfile(f);
	errno = saved;
}

int tb_stdio_begin(struct tb_stdio *w, struct tb_sock *s, FILE *f, enum tb_side side)
{
	w->flags = f->_flags;
	if (tb_xfer_begin(&w->x, s, f->_fileno, side, false) == 0)
		return 0;
	mark_cut(f);
	return -1;
}

bool tb_stdio_end(struct tb_stdio *w, FILE *f, bool ok)
{
	struct tb_sock *s = w->x.s;
	int now = f->_flags;
	bool eof = (now & _IO_EOF_SEEN) && !(w->flags & _IO_EOF_SEEN);
	bool err = (now & _IO_ERR_SEEN) && !(w->flags & _IO_ERR_SEEN);
	ssize_t r = ok && !eof && !err ? 1 : err ? -1 : 0;
	uint32_t word;

	/* A complete result stands even if a cut came meanwhile: the next call reports it. */
	if (tb_xfer_end(&w->x, r) >= 0 || r > 0 || s == NULL)
		return false;
	word = tb_sock_word(s);
	if (TB_ST_GEN(word) != w->x.gen || TB_ST(word) != TB_ST_EXPIRED)
		return false; /* the peer's own close or error: errno as the call left it */
	mark_cut(f);
	return true;
}
