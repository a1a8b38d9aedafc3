/* hooks_stdio_musl_w.c - the musl build's stdio writers (fwrite, fputs, fputc, fprintf,
 * fflush...): musl empties a FILE's buffer with its own writev system call, which no hook
 * sees, so a write on a FILE over a governed socket that may reach the socket is a wait here.
 * Built by make MUSL=1 only; the glibc build has hooks_stdio.c.
 *
 * How, and why so. musl's FILE is opaque, but <stdio_ext.h> says what its buffer holds:
 * __fbufsize (its size; 0 for an unbuffered stream), __fpending (bytes written, not yet
 * sent) and __flbf (line-buffered). musl's fwrite, fputc and their kin send only when the
 * bytes do not fit in what is left of the buffer, or carry a newline on a line-buffered
 * stream (src/stdio/fwrite.c, __overflow.c); otherwise they copy, no system call. So under
 * the FILE's lock (recursive in musl; held across the decision and the call, so that no
 * other thread fills the buffer between them) a write that cannot reach the socket is
 * musl's own call, untouched, and one that may is musl's own call inside a write-side wait:
 * tb_xfer_begin, musl's fwrite or fflush, tb_xfer_end. The wait is what a program's own
 * write() would have (write timeout, deadline, a step of the call budget); when it runs out
 * the watchdog shuts the socket down, musl's blocked writev fails with EPIPE, musl marks the
 * stream's error and drops its buffer as on any write error, and the call reports ETIMEDOUT
 * (EAGAIN once with on_timeout=eagain), ferror set. A blocked flush that makes progress is
 * seen by the watchdog's SIOCOUTQ samples, as a blocked send is. The bytes themselves
 * are always moved by musl's own code, so none can be lost, reordered or duplicated by us;
 * a wait that merely was not needed costs its clock read and no byte.
 *
 * fprintf's length is known only once formatted: it is formatted first (vsnprintf, on the
 * stack up to 1 KiB, else on the heap) and the text written as fwrite writes it - the same
 * engine, so the same bytes - which makes a formatted line that fits in the buffer no wait,
 * as in the glibc build a write that only fills the buffer is none. A format vsnprintf
 * refuses, or no memory for the text, leaves the call to musl's vfprintf as one wait.
 *
 * SIGPIPE: musl's writev cannot ask for MSG_NOSIGNAL, so SIGPIPE is held around a governed
 * write (sigpipe.h): the one a cut raised is consumed, a genuine one (the peer closed) is
 * delivered as natively. What stdio writes is unseen by the protocol framing (as in the
 * glibc build). fflush(NULL) flushes every stream inside libc and is passed through.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>

#include "fdtable.h"
#include "hooks.h"
#include "prop_io.h"
#include "real.h"
#include "sigpipe.h"
#include "sock.h"
#include "stdio_musl.h"
#include "xfer.h"

/* Weak: a musl-only name, which glibc's loader, given this build by hand, must not fail to
 * resolve (LD_BIND_NOW) before the constructor says the library is inactive. */
#pragma weak __fseterr

int putc_unlocked(int c, FILE *f);
int fputc_unlocked(int c, FILE *f);
size_t fwrite_unlocked(const void *p, size_t size, size_t n, FILE *f);
int fputs_unlocked(const char *str, FILE *f);
int fflush_unlocked(FILE *f);

/* A write on an untracked stream of a scope=request process: on an inbound connection the
 * response begins (prop_io.h tb_pin_writing: the request's budget closes, the connection's
 * parser waits for the next head; regress/inbound_stdio_keepalive, built with musl too).
 * One load and a branch otherwise. musl's fileno sets errno on a stream with no fd (a
 * memory stream): kept as it was. */
static TB_SLOW void inbound_put(FILE *f)
{
	int saved = errno, fd = f != NULL ? fileno(f) : -1;

	errno = saved;
	tb_pin_writing(fd);
}

#define INBOUND_PUT(f)                                                                      \
	do {                                                                                \
		if (TB_UNLIKELY(tb_pin_enabled()))                                          \
			inbound_put(f);                                                     \
	} while (0)

/* True when writing bytes[0..n) may make musl write to the fd: no room for them (an
 * unbuffered stream has a buffer of size 0), or a newline on a line-buffered stream. A
 * stream not yet in write mode has its whole buffer (musl's __towrite makes no system
 * call). One byte cautious: n equal to the room does not flush in musl. The caller holds
 * f's lock. */
static bool may_flush(FILE *f, const void *bytes, size_t n)
{
	if (__fbufsize(f) - __fpending(f) <= n)
		return true;
	return __flbf(f) && memchr(bytes, '\n', n) != NULL;
}

struct put {
	struct tb_xfer x;
	struct tb_sigpipe pipe;
};

/* Before a call that may write to socket s (f's fd). 0: make the call, then put_end.
 * -1: the socket had expired (or the call's deadline had passed): nothing is written, f's
 * error flag is set and errno says why (tb_xfer_begin). */
static int put_begin(struct put *w, struct tb_sock *s, int fd, FILE *f)
{
	w->pipe.blocked = false;
	if (tb_xfer_begin(&w->x, s, fd, TB_WR, false) != 0) {
		__fseterr(f);
		return -1;
	}
	tb_sigpipe_hold(&w->pipe);
	return 0;
}

/* After the call; `ok`: it wrote all it was given. Returns true when the socket was cut
 * during the call (f's error flag set, errno ETIMEDOUT or EAGAIN): the caller returns its
 * failure value. false: errno as the call left it (the caller's, on success). */
static bool put_end(struct put *w, FILE *f, bool ok)
{
	struct tb_sock *s = w->x.s;
	uint32_t word;
	bool cut;

	if (tb_xfer_end(&w->x, ok ? 1 : -1) >= 0 || s == NULL) {
		tb_sigpipe_release(&w->pipe, s != NULL && TB_ST(tb_sock_word(s)) == TB_ST_EXPIRED);
		return false;
	}
	word = tb_sock_word(s);
	cut = TB_ST_GEN(word) == w->x.gen && TB_ST(word) == TB_ST_EXPIRED;
	tb_sigpipe_release(&w->pipe, cut);
	if (cut)
		__fseterr(f);
	return cut;
}

/* musl's fwrite of bytes[0..n) on f, governed when it may reach the socket. Returns what
 * fwrite returned (what it took before a cut, too), 0 when the socket had expired. The
 * caller holds f's lock. */
static size_t put_bytes(struct tb_sock *s, int fd, FILE *f, const void *bytes, size_t n)
{
	struct put w;
	size_t r;

	if (!may_flush(f, bytes, n))
		return tb_real.fwrite(bytes, 1, n, f);
	if (put_begin(&w, s, fd, f) < 0)
		return 0;
	r = tb_real.fwrite(bytes, 1, n, f);
	put_end(&w, f, r == n);
	return r;
}

static TB_SLOW size_t fwrite_governed(struct tb_sock *s, int fd, const void *p, size_t size,
				      size_t n, FILE *f)
{
	size_t r;

	flockfile(f);
	r = put_bytes(s, fd, f, p, size * n) / size;
	funlockfile(f);
	return r;
}

/* fwrite and fwrite_unlocked are one function in musl (it takes the lock). */
TB_EXPORT size_t fwrite(const void *p, size_t size, size_t n, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL) || size == 0 || n == 0 || n > (size_t)-1 / size) {
		INBOUND_PUT(f);
		return tb_real.fwrite(p, size, n, f);
	}
	return fwrite_governed(s, fd, p, size, n, f);
}

TB_EXPORT size_t fwrite_unlocked(const void *p, size_t size, size_t n, FILE *f)
{
	return fwrite(p, size, n, f);
}

/* fputs as musl's: fwrite of the string, 0 on success, EOF on a short write. */
static TB_SLOW int fputs_governed(struct tb_sock *s, int fd, const char *str, FILE *f)
{
	size_t n = strlen(str), r;

	flockfile(f);
	r = put_bytes(s, fd, f, str, n);
	funlockfile(f);
	return r == n ? 0 : EOF;
}

TB_EXPORT int fputs(const char *str, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f);
		return tb_real.fputs(str, f);
	}
	return fputs_governed(s, fd, str, f);
}

/* fputs_unlocked is fputs in musl. */
TB_EXPORT int fputs_unlocked(const char *str, FILE *f)
{
	return fputs(str, f);
}

/* One byte: musl's own putc into the buffer when it has room (no wait), else governed. */
static TB_SLOW int putc_governed(struct tb_sock *s, int fd, int c, FILE *f)
{
	unsigned char byte = (unsigned char)c; /* what musl's putc compares with '\n' */
	struct put w;
	int r;

	flockfile(f);
	if (!may_flush(f, &byte, 1)) {
		r = tb_real.fputc_unlocked(c, f);
	} else if (put_begin(&w, s, fd, f) < 0) {
		r = EOF;
	} else {
		r = tb_real.fputc_unlocked(c, f);
		if (put_end(&w, f, r != EOF))
			r = EOF;
	}
	funlockfile(f);
	return r;
}

TB_EXPORT int fputc(int c, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f);
		return tb_real.fputc(c, f);
	}
	return putc_governed(s, fd, c, f);
}

/* putc is fputc under its own name in musl; putc_unlocked and fputc_unlocked are one
 * function, called here under the lock it does not take (recursive: a caller that holds
 * it, as the _unlocked contract asks, is not blocked). */
TB_EXPORT int putc(int c, FILE *f)
{
	return fputc(c, f);
}

TB_EXPORT int fputc_unlocked(int c, FILE *f)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f);
		return tb_real.fputc_unlocked(c, f);
	}
	return putc_governed(s, fd, c, f);
}

TB_EXPORT int putc_unlocked(int c, FILE *f)
{
	return fputc_unlocked(c, f);
}

/* musl's vfprintf as one wait: for what vsnprintf cannot format (it fails the same way). */
static int vfprintf_whole(struct tb_sock *s, int fd, FILE *f, const char *fmt, va_list ap)
{
	struct put w;
	int r;

	if (put_begin(&w, s, fd, f) < 0)
		return -1;
	r = tb_real.vfprintf(f, fmt, ap);
	return put_end(&w, f, r >= 0) ? -1 : r;
}

/* vfprintf as musl's: the count of bytes written, or -1 when not all of them were. */
static TB_SLOW int vfprintf_governed(struct tb_sock *s, int fd, FILE *f, const char *fmt,
				     va_list ap)
{
	char local[1024], *text = local;
	va_list again;
	int n, r;

	va_copy(again, ap);
	n = vsnprintf(local, sizeof(local), fmt, again);
	va_end(again);
	if (n >= (int)sizeof(local) && (text = malloc((size_t)n + 1)) != NULL)
		vsnprintf(text, (size_t)n + 1, fmt, ap); /* ap is spent only here */
	flockfile(f);
	if (n == 0) /* nothing to send: musl's own call, which sets what it sets */
		r = tb_real.vfprintf(f, fmt, ap);
	else if (n < 0 || text == NULL) /* a format vsnprintf refuses, or no memory */
		r = vfprintf_whole(s, fd, f, fmt, ap);
	else
		r = put_bytes(s, fd, f, text, (size_t)n) == (size_t)n ? n : -1;
	funlockfile(f);
	if (text != local)
		free(text);
	return r;
}

TB_EXPORT int vfprintf(FILE *f, const char *fmt, va_list ap)
{
	int fd;
	struct tb_sock *s = file_sock(f, &fd);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f);
		return tb_real.vfprintf(f, fmt, ap);
	}
	return vfprintf_governed(s, fd, f, fmt, ap);
}

/* musl's fprintf calls its vfprintf inside libc, out of our sight. */
TB_EXPORT int fprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

/* A wait only with output pending: musl's fflush of an empty buffer makes no write. */
static TB_SLOW int fflush_governed(struct tb_sock *s, int fd, FILE *f)
{
	struct put w;
	int r;

	flockfile(f);
	if (__fpending(f) == 0) {
		r = tb_real.fflush(f);
	} else if (put_begin(&w, s, fd, f) < 0) {
		r = EOF;
	} else {
		r = tb_real.fflush(f);
		if (put_end(&w, f, r == 0))
			r = EOF;
	}
	funlockfile(f);
	return r;
}

TB_EXPORT int fflush(FILE *f)
{
	int fd;
	struct tb_sock *s = f != NULL ? file_sock(f, &fd) : NULL;

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f);
		return tb_real.fflush(f);
	}
	return fflush_governed(s, fd, f);
}

/* fflush_unlocked is fflush in musl. */
TB_EXPORT int fflush_unlocked(FILE *f)
{
	return fflush(f);
}
