/* hooks_stdio_musl.c - the musl build's stdio readers (fgets, fread, getc, getline, fscanf
 * ...): musl refills a FILE with its own readv system call, which no hook sees, and its FILE
 * is opaque (no glibc libio fields, no __uflow), so a FILE over a governed socket is read
 * here through musl's public buffer interface (<stdio_ext.h>: __freadptr, __freadptrinc,
 * __fseterr). Built by make MUSL=1 only; the glibc build has hooks_stdio.c. The writers
 * are in hooks_stdio_musl_w.c. */
#ifndef __GLIBC__
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fdtable.h"
#include "hooks.h"
#include "real.h"
#include "stdio_musl.h"
#include "xfer.h"

/* Weak: musl-only names, which glibc's loader, given this build by hand, must not fail to
 * resolve (LD_BIND_NOW) before the constructor says the library is inactive. */
#pragma weak __freadahead
#pragma weak __freadptr
#pragma weak __freadptrinc
#pragma weak __fseterr

int getc(FILE *f);
int getc_unlocked(FILE *f);
int fgetc_unlocked(FILE *f);
char *fgets_unlocked(char *buf, int n, FILE *f);
size_t fread_unlocked(void *p, size_t size, size_t n, FILE *f);
ssize_t getline(char **line, size_t *cap, FILE *f);

/* The socket was cut during a call on f: the stream's EOF (a shut-down socket reads as
 * EOF, which must not pass for the peer's close) becomes an error, errno kept (ETIMEDOUT,
 * or EAGAIN with on_timeout=eagain, as tb_xfer_end left it). */
static void mark_cut(FILE *f)
{
	int saved = errno;

	clearerr_unlocked(f);
	__fseterr(f);
	errno = saved;
}

/*
 * One refill of f's empty buffer as one wait: musl's getc reads what the socket holds, up
 * to its buffer's size, and returns the first byte. Each refill is a wait of its own, so a
 * line or an fread that takes several of them is cut only when the peer falls silent for
 * the limit, as a program's own read() calls would be. The bytes are not shown to the
 * framing (musl reads the first into the caller's variable, the rest into its buffer): it
 * counts them unseen. Returns the byte, or EOF with *cut set when the socket was cut
 * (f's error flag set). The caller holds f's lock.
 */
static int pull(struct tb_sock *s, int fd, FILE *f, bool *cut)
{
	struct tb_xfer x;
	ssize_t r;
	int c;

	*cut = false;
	if (tb_xfer_begin(&x, s, fd, TB_RD, false) != 0) {
		mark_cut(f);
		*cut = true;
		return EOF;
	}
	c = tb_real.fgetc_unlocked(f);
	r = c != EOF ? (ssize_t)(1 + __freadahead(f)) : ferror_unlocked(f) ? -1 : 0;
	if (tb_xfer_end(&x, r) < 0 && r >= 0) {
		mark_cut(f);
		*cut = true;
		return EOF;
	}
	return c;
}

/* Copies at most max buffered bytes of f into dst, stopping after delim (-1: none);
 * returns the count, *found when delim was copied. Never reads the socket. */
static size_t take_buffered(FILE *f, char *dst, size_t max, int delim, bool *found)
{
	size_t avail = 0, k;
	const char *p = __freadptr(f, &avail);
	const char *hit;

	*found = false;
	if (p == NULL || avail == 0 || max == 0)
		return 0;
	k = avail < max ? avail : max;
	if (delim >= 0 && (hit = memchr(p, delim, k)) != NULL) {
		k = (size_t)(hit - p) + 1;
		*found = true;
	}
	memcpy(dst, p, k);
	__freadptrinc(f, k);
	return k;
}

/* Reads up to max bytes into dst, stopping after delim (-1: none). Returns the count; *cut
 * when the socket was cut. The caller holds f's lock. */
static size_t read_governed(struct tb_sock *s, int fd, FILE *f, char *dst, size_t max,
			    int delim, bool *cut)
{
	size_t got = 0;
	bool found;
	int c;

	*cut = false;
	while (got < max) {
		got += take_buffered(f, dst + got, max - got, delim, &found);
		if (found || got == max)
			break;
		c = pull(s, fd, f, cut);
		if (c == EOF)
			break;
		dst[got++] = (char)c;
		if (c == delim)
			break;
	}
	return got;
}

static TB_SLOW char *fgets_governed(struct tb_sock *s, int fd, char *buf, int n, FILE *f)
{
	size_t got;
	bool cut;

	flockfile(f);
	got = read_governed(s, fd, f, buf, (size_t)n - 1, '\n', &cut);
	funlockfile(f);
	if (cut || got == 0)
		return NULL;
	buf[got] = '\0';
	return buf;
}

TB_EXPORT char *fgets(char *buf, int n, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL) || n <= 1)
		return tb_real.fgets(buf, n, f);
	return fgets_governed(s, fd, buf, n, f);
}

TB_EXPORT char *fgets_unlocked(char *buf, int n, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL) || n <= 1)
		return tb_real.fgets_unlocked(buf, n, f);
	return fgets_governed(s, fd, buf, n, f); /* the lock is recursive in musl */
}

static TB_SLOW size_t fread_governed(struct tb_sock *s, int fd, void *p, size_t size, size_t n,
				     FILE *f)
{
	size_t got;
	bool cut;

	flockfile(f);
	got = read_governed(s, fd, f, p, size * n, -1, &cut);
	funlockfile(f);
	return got / size;
}

TB_EXPORT size_t fread(void *p, size_t size, size_t n, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL) || size == 0 || n == 0 || n > (size_t)-1 / size)
		return tb_real.fread(p, size, n, f);
	return fread_governed(s, fd, p, size, n, f);
}

TB_EXPORT size_t fread_unlocked(void *p, size_t size, size_t n, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL) || size == 0 || n == 0 || n > (size_t)-1 / size)
		return tb_real.fread_unlocked(p, size, n, f);
	return fread_governed(s, fd, p, size, n, f);
}

/* A byte: from the buffer when it holds one (no wait), else one governed refill. */
static TB_SLOW int getc_governed(struct tb_sock *s, int fd, FILE *f)
{
	bool cut;
	int c;

	flockfile(f);
	c = __freadahead(f) > 0 ? tb_real.fgetc_unlocked(f) : pull(s, fd, f, &cut);
	funlockfile(f);
	return c;
}

TB_EXPORT int fgetc(FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.fgetc(f);
	return getc_governed(s, fd, f);
}

/* getc and fgetc are one function in musl, and so are their _unlocked forms. */
TB_EXPORT int getc(FILE *f)
{
	return fgetc(f);
}

TB_EXPORT int fgetc_unlocked(FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.fgetc_unlocked(f);
	return getc_governed(s, fd, f);
}

TB_EXPORT int getc_unlocked(FILE *f)
{
	return fgetc_unlocked(f);
}

/* getdelim's growth: room for `need` bytes and the NUL. Returns 0, or -1 (ENOMEM). */
static int reserve(char **line, size_t *cap, size_t need)
{
	size_t want = *cap > 0 ? *cap : 120;
	char *grown;

	if (*line != NULL && *cap > need)
		return 0;
	while (want <= need)
		want *= 2;
	grown = realloc(*line, want);
	if (grown == NULL) {
		errno = ENOMEM;
		return -1;
	}
	*line = grown;
	*cap = want;
	return 0;
}

static TB_SLOW ssize_t getdelim_governed(struct tb_sock *s, int fd, char **line, size_t *cap,
					 int delim, FILE *f)
{
	size_t len = 0, got;
	bool cut = false;

	flockfile(f);
	for (;;) {
		if (reserve(line, cap, len + 128) < 0) {
			__fseterr(f);
			break;
		}
		got = read_governed(s, fd, f, *line + len, *cap - 1 - len, delim, &cut);
		len += got;
		if (cut || got == 0 || (*line)[len - 1] == (char)delim)
			break;
	}
	funlockfile(f);
	if (*line != NULL)
		(*line)[len] = '\0';
	return cut || len == 0 ? -1 : (ssize_t)len;
}

TB_EXPORT ssize_t getdelim(char **line, size_t *cap, int delim, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL) || line == NULL || cap == NULL)
		return tb_real.getdelim(line, cap, delim, f);
	return getdelim_governed(s, fd, line, cap, delim, f);
}

/* musl's getline calls its getdelim inside libc, out of our sight. */
TB_EXPORT ssize_t getline(char **line, size_t *cap, FILE *f)
{
	return getdelim(line, cap, '\n', f);
}

/*
 * fscanf, as in the glibc build: a scan cannot say beforehand how much it will read, nor be
 * split at musl's refills (they happen inside musl's vfscanf). So its first refill is a
 * wait of its own (the first byte limit of a request answered by a scan is the scan's
 * first byte), and then a newline already buffered is taken for "enough" - line protocols
 * scan a line at a time - and the scan makes no wait; otherwise the rest of the call is one
 * wait, which a token dripped over more than the read timeout could outlast. At EOF musl's
 * scan reads no more (its EOF flag is sticky). A cut returns what the scan returned at the
 * EOF the shutdown made (EOF, or the conversions made before), f's error flag set.
 */
static TB_SLOW int vfscanf_governed(struct tb_sock *s, int fd, FILE *f, const char *fmt,
				    va_list ap)
{
	struct tb_xfer x;
	const char *held;
	size_t avail = 0;
	bool cut, had_eof, had_err, eof, err;
	ssize_t moved;
	int c, r = EOF;

	flockfile(f);
	if (!tb_scan_reads(fmt)) { /* no byte to wait for (regress/stdio_scanf_no_input) */
		r = tb_real.vfscanf(f, fmt, ap);
		goto out;
	}
	if (__freadahead(f) == 0) {
		c = pull(s, fd, f, &cut);
		if (c == EOF && (cut || ferror_unlocked(f)))
			goto out;
		if (c != EOF)
			ungetc(c, f); /* steps back over the byte just read: musl keeps room */
	}
	held = __freadptr(f, &avail);
	if (held != NULL && memchr(held, '\n', avail) != NULL) {
		r = tb_real.vfscanf(f, fmt, ap);
		goto out;
	}
	had_eof = feof_unlocked(f);
	had_err = ferror_unlocked(f);
	if (tb_xfer_begin(&x, s, fd, TB_RD, false) != 0) {
		mark_cut(f);
		goto out;
	}
	r = tb_real.vfscanf(f, fmt, ap);
	eof = feof_unlocked(f) && !had_eof;
	err = ferror_unlocked(f) && !had_err;
	moved = r != EOF && !eof && !err ? 1 : err ? -1 : 0;
	if (tb_xfer_end(&x, moved) < 0 && moved >= 0)
		mark_cut(f);
out:
	funlockfile(f);
	return r;
}

TB_EXPORT int vfscanf(FILE *f, const char *fmt, va_list ap)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.vfscanf(f, fmt, ap);
	return vfscanf_governed(s, fd, f, fmt, ap);
}

/* musl's fscanf calls its vfscanf inside libc, out of our sight. */
TB_EXPORT int fscanf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfscanf(f, fmt, ap);
	va_end(ap);
	return r;
}
#else
typedef int tb_hooks_stdio_musl_unused; /* ISO C: a file must declare something */
#endif
