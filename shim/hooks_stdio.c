/* hooks_stdio.c - the stdio calls that can wait on a stream (fgets, fread, getc, getline,
 * fscanf, fwrite, fputs, fprintf, fflush...): glibc moves a FILE's bytes with internal read
 * and write calls no hook can see, so a FILE over a governed socket is governed here. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "fdtable.h"
#include "hooks.h"
#include "libc_compat.h"
#include "prop_io.h"
#include "real.h"
#include "stdio_wait.h"

/* The entry points with no public declaration (FORTIFY, the getc/putc macros' slow path,
 * the C99 scanf names that <stdio.h> redirects to). */
char *__fgets_chk(char *buf, size_t size, int n, FILE *f);
char *__fgets_unlocked_chk(char *buf, size_t size, int n, FILE *f);
size_t __fread_chk(void *p, size_t buflen, size_t size, size_t n, FILE *f);
size_t __fread_unlocked_chk(void *p, size_t buflen, size_t size, size_t n, FILE *f);
ssize_t __getdelim(char **line, size_t *n, int delim, FILE *f);
int _IO_getc(FILE *f);
int _IO_putc(int c, FILE *f);
int __uflow(FILE *f);
int __overflow(FILE *f, int c);
int __isoc99_fscanf(FILE *f, const char *fmt, ...);
int __isoc99_vfscanf(FILE *f, const char *fmt, va_list ap);
int __fprintf_chk(FILE *f, int flag, const char *fmt, ...);
int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap);

/*
 * Every hook: the stream's fd is not a governed socket (files, pipes, memory streams whose
 * _fileno is -1) -> libc at once: one load, a bounds check, a load and a tail call. Only a
 * governed stream reaches the out-of-line body, which first asks whether the call can touch
 * the fd at all: a read that the FILE's buffer already holds (a buffered line) is no wait
 * and is never cut - a slow program is not a slow peer - and a write that only fills the
 * buffer sends nothing, so it starts no call and no wait.
 */
#define SOCK_OF(f) tb_fd_sock((f)->_fileno)

/* A write on an untracked stream of a scope=request process: on an inbound connection the
 * response begins (prop_io.h tb_pin_writing: the request's budget closes, the connection's
 * parser waits for the next head; regress/inbound_stdio_keepalive). fd is -1 for
 * a memory stream or fflush(NULL). One load and a branch otherwise. */
#define INBOUND_PUT(fd)                                                                     \
	do {                                                                                \
		if (TB_UNLIKELY(tb_pin_enabled()))                                          \
			tb_pin_writing(fd);                                                 \
	} while (0)

/* The governed call: `fail` when the socket had already expired, `cut` when it expired
 * during the call (r_ is what the call returned); `ok` says the call got everything. */
#define GOVERNED(type, side, call, ok, fail, cut)                                           \
	do {                                                                                \
		struct tb_stdio w_;                                                         \
		type r_;                                                                    \
		if (tb_stdio_begin(&w_, s, f, (side)) < 0)                                  \
			return (fail);                                                      \
		r_ = (call);                                                                \
		if (tb_stdio_end(&w_, f, (ok)))                                             \
			return (cut);                                                       \
		return r_;                                                                  \
	} while (0)

/* ---- reads ---------------------------------------------------------------------------- */

/*
 * The FILE's lock taken here is released if the thread is cancelled inside (every refill is
 * a read, a cancellation point), as glibc's _IO_acquire_lock releases its own: a lock left
 * held by a cancelled reader would hang every later use of the stream, fclose included.
 * f is NULL when the caller holds the lock itself (the _unlocked forms).
 */
static void unlock_on_cancel(void *f)
{
	if (f != NULL)
		tb_file_unlock(f);
}

/* tb_stdio_take, whose refills are cancellation points, with the FILE's lock given back
 * on cancellation when `unlock` (the caller took it). A function of its own: the cleanup's
 * sigsetjmp then keeps no variable of the caller's. */
static size_t take_cancellable(struct tb_sock *s, FILE *f, bool unlock, void *dst, size_t max,
			       int delim, enum tb_take_end *end)
{
	size_t got;

	pthread_cleanup_push(unlock_on_cancel, unlock ? f : NULL);
	got = tb_stdio_take(s, f, dst, max, delim, end);
	pthread_cleanup_pop(0);
	return got;
}

/*
 * fgets as glibc's (libio/iofgets.c): n <= 0 gives NULL, n == 1 an empty string (the
 * FORTIFY form, which reads at most min(n-1, size), gives NULL there and aborts when the
 * line fills `size`); a new error gives NULL even after a partial line, an EOF after one
 * gives the line, and so does EAGAIN (a non-blocking socket's), leaving errno EAGAIN and
 * the error flag set as glibc does: the program's one sign that the line is partial.
 * `locked`: the caller's call takes the FILE lock.
 */
static TB_SLOW char *governed_fgets(struct tb_sock *s, char *buf, int n, FILE *f, bool locked,
				    bool chk, size_t size)
{
	size_t max, got;
	enum tb_take_end end;
	int old_error;
	char *r = buf;

	if (n <= 0)
		return NULL;
	max = (size_t)n - 1 < size ? (size_t)n - 1 : size;
	if (max == 0 && !chk) {
		buf[0] = '\0';
		return buf;
	}
	if (locked)
		tb_file_lock(f);
	old_error = f->_flags & _IO_ERR_SEEN;
	f->_flags &= ~_IO_ERR_SEEN;
	got = take_cancellable(s, f, locked, buf, max, '\n', &end);
	if (got == 0 || end == TB_TAKE_CUT || ((f->_flags & _IO_ERR_SEEN) && errno != EAGAIN))
		r = NULL;
	else if (chk && got >= size)
		__chk_fail(); /* before the NUL, which would land past the buffer (as glibc) */
	else
		buf[got] = '\0';
	f->_flags |= old_error;
	if (locked)
		tb_file_unlock(f);
	return r;
}

TB_EXPORT char *fgets(char *buf, int n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.fgets(buf, n, f);
	return governed_fgets(s, buf, n, f, true, false, (size_t)-1);
}

TB_EXPORT char *fgets_unlocked(char *buf, int n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.fgets_unlocked(buf, n, f);
	return governed_fgets(s, buf, n, f, false, false, (size_t)-1);
}

TB_EXPORT char *__fgets_chk(char *buf, size_t size, int n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.__fgets_chk(buf, size, n, f);
	return governed_fgets(s, buf, n, f, true, true, size);
}

TB_EXPORT char *__fgets_unlocked_chk(char *buf, size_t size, int n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.__fgets_unlocked_chk(buf, size, n, f);
	return governed_fgets(s, buf, n, f, false, true, size);
}

/* fread as glibc's: the count of whole items; a partial item's bytes are consumed. An
 * overflowing size * n is left to libc (which reads nothing and says so its own way). */
static TB_SLOW size_t governed_fread(struct tb_sock *s, void *p, size_t size, size_t n,
				     FILE *f, bool locked)
{
	size_t want, got;
	enum tb_take_end end;

	if (__builtin_mul_overflow(size, n, &want) || want == 0)
		return locked ? tb_real.fread(p, size, n, f) : tb_real.fread_unlocked(p, size, n, f);
	if (locked)
		tb_file_lock(f);
	got = take_cancellable(s, f, locked, p, want, -1, &end);
	if (locked)
		tb_file_unlock(f);
	return got / size;
}

TB_EXPORT size_t fread(void *p, size_t size, size_t n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.fread(p, size, n, f);
	return governed_fread(s, p, size, n, f, true);
}

TB_EXPORT size_t fread_unlocked(void *p, size_t size, size_t n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.fread_unlocked(p, size, n, f);
	return governed_fread(s, p, size, n, f, false);
}

/* The FORTIFY checks of debug/fread_chk.c, then the governed read. */
static size_t checked(size_t buflen, size_t size, size_t n)
{
	size_t bytes;

	if (__builtin_mul_overflow(size, n, &bytes) || bytes > buflen)
		__chk_fail();
	return bytes;
}

TB_EXPORT size_t __fread_chk(void *p, size_t buflen, size_t size, size_t n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.__fread_chk(p, buflen, size, n, f);
	if (checked(buflen, size, n) == 0)
		return 0;
	return governed_fread(s, p, size, n, f, true);
}

TB_EXPORT size_t __fread_unlocked_chk(void *p, size_t buflen, size_t size, size_t n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.__fread_unlocked_chk(p, buflen, size, n, f);
	if (checked(buflen, size, n) == 0)
		return 0;
	return governed_fread(s, p, size, n, f, false);
}

/* One byte: a wait only when the FILE holds none (the ungetc area and the buffer behind
 * it both spent: regress/stdio_ungetc_buffered_cut); the refill's bytes go to the framing
 * (tb_stdio_refilled: the caller holds the FILE's lock, or is its only user). */
#define GOVERNED_GETC(call)                                                                 \
	do {                                                                                \
		struct tb_stdio w_;                                                         \
		int c_;                                                                     \
		if (tb_stdio_avail(f) > 0 || tb_stdio_behind_backup(f) > 0)                 \
			return (call);                                                      \
		if (tb_stdio_begin(&w_, s, f, TB_RD) < 0)                                   \
			return EOF;                                                         \
		c_ = (call);                                                                \
		if (c_ != EOF)                                                              \
			tb_stdio_refilled(&w_, f);                                          \
		return tb_stdio_end(&w_, f, c_ != EOF) ? EOF : c_;                          \
	} while (0)

static int governed_fgetc_unlocked_body(struct tb_sock *s, FILE *f)
{
	GOVERNED_GETC(tb_real.fgetc_unlocked(f));
}

static TB_SLOW int governed_fgetc_unlocked(struct tb_sock *s, FILE *f)
{
	return governed_fgetc_unlocked_body(s, f);
}

/* fgetc takes the FILE's lock itself: held across it (recursive), so that the buffer the
 * refill left is still that refill's when it is looked at. */
static TB_SLOW int governed_fgetc(struct tb_sock *s, FILE *f)
{
	int c;

	tb_file_lock(f);
	pthread_cleanup_push(unlock_on_cancel, f);
	c = governed_fgetc_unlocked_body(s, f);
	pthread_cleanup_pop(0);
	tb_file_unlock(f);
	return c;
}

/* getc and _IO_getc are fgetc under other names (one address in glibc). */
TB_EXPORT int fgetc(FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	/* A byte in the buffer: no wait, and no call out of line (getc is per byte). */
	if (TB_LIKELY(s == NULL) || f->_IO_read_ptr < f->_IO_read_end)
		return tb_real.fgetc(f);
	return governed_fgetc(s, f);
}

TB_EXPORT int getc(FILE *f)
{
	return fgetc(f);
}

TB_EXPORT int _IO_getc(FILE *f)
{
	return fgetc(f);
}

TB_EXPORT int fgetc_unlocked(FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	/* A byte in the buffer: no wait, and no call out of line (getc is per byte). */
	if (TB_LIKELY(s == NULL) || f->_IO_read_ptr < f->_IO_read_end)
		return tb_real.fgetc_unlocked(f);
	return governed_fgetc_unlocked(s, f);
}

TB_EXPORT int getc_unlocked(FILE *f)
{
	return fgetc_unlocked(f);
}

/* The slow path of the getc_unlocked macro that <stdio.h> inlines into programs: called
 * when the buffer is empty, so reached by programs that never call a stdio function. */
static TB_SLOW int governed_uflow(struct tb_sock *s, FILE *f)
{
	GOVERNED_GETC(tb_real.__uflow(f));
}

TB_EXPORT int __uflow(FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.__uflow(f);
	return governed_uflow(s, f);
}

/*
 * getdelim as glibc's (libio/iogetdelim.c, 2.36): -1 at once when the stream's error flag
 * is set; a new buffer of 120 bytes by malloc when *line is NULL or *n is 0 (then *line is
 * not the program's heap memory, never realloc'ed); each piece the buffer holds is copied
 * with room for it and the NUL, the room at least doubled when it grows, so *n is what
 * glibc would report. -1 when nothing was read before EOF or an error, else the length (a
 * partial last line too). A cut gives -1 with the error flag set.
 */
static ssize_t getdelim_locked(struct tb_sock *s, char **line, size_t *n, int delim, FILE *f)
{
	size_t len = 0;
	int more = 1;

	if (f->_flags & _IO_ERR_SEEN)
		return -1;
	if (*line == NULL || *n == 0) {
		*n = 120;
		*line = malloc(*n);
		if (*line == NULL)
			goto no_memory;
	}
	for (;;) {
		size_t k, needed;
		char *from, *hit;

		if (tb_stdio_avail(f) == 0 && (more = tb_stdio_prime(s, f)) <= 0)
			break;
		k = tb_stdio_avail(f);
		from = f->_IO_read_ptr;
		hit = memchr(from, delim, k);
		if (hit != NULL)
			k = (size_t)(hit - from) + 1;
		if (k >= SSIZE_MAX - len) {
			errno = EOVERFLOW;
			return -1;
		}
		needed = len + k + 1;
		if (needed > *n) {
			char *grown;

			if (needed < 2 * *n)
				needed = 2 * *n;
			grown = realloc(*line, needed);
			if (grown == NULL)
				goto no_memory;
			*line = grown;
			*n = needed;
		}
		memcpy(*line + len, from, k);
		f->_IO_read_ptr += k;
		len += k;
		if (hit != NULL)
			break;
	}
	if (len == 0 || more < 0)
		return -1;
	(*line)[len] = '\0';
	return (ssize_t)len;
no_memory:
	f->_flags |= _IO_ERR_SEEN;
	errno = ENOMEM;
	return -1;
}

static TB_SLOW ssize_t governed_getdelim(struct tb_sock *s, char **line, size_t *n, int delim,
					 FILE *f)
{
	ssize_t r;

	if (line == NULL || n == NULL)
		return tb_real.getdelim(line, n, delim, f); /* EINVAL, libc's own way */
	tb_file_lock(f);
	pthread_cleanup_push(unlock_on_cancel, f);
	/* glibc finds the delimiter with memchr, which takes it as an unsigned char: a char
	 * delimiter of 0x80 or more (negative where char is signed) still ends the line. */
	r = getdelim_locked(s, line, n, (unsigned char)delim, f);
	pthread_cleanup_pop(0);
	tb_file_unlock(f);
	return r;
}

TB_EXPORT ssize_t getdelim(char **line, size_t *n, int delim, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.getdelim(line, n, delim, f);
	return governed_getdelim(s, line, n, delim, f);
}

TB_EXPORT ssize_t __getdelim(char **line, size_t *n, int delim, FILE *f)
{
	return getdelim(line, n, delim, f);
}

TB_EXPORT ssize_t getline(char **line, size_t *n, FILE *f)
{
	return getdelim(line, n, '\n', f);
}

/*
 * fscanf cannot say beforehand how much it will read, nor be split: a buffered newline is
 * taken for "enough" (line protocols scan a line at a time), otherwise the rest of the call
 * is one wait (a token longer than a buffer, dripped, could be cut early). A cut
 * returns what the scan returned at the EOF it saw (EOF, or the conversions made before),
 * with the error flag set.
 */

static int governed_vfscanf_locked(struct tb_sock *s, FILE *f, const char *fmt, va_list ap,
				   bool c99)
{
	if (!tb_scan_reads(fmt))
		return c99 ? tb_real.__isoc99_vfscanf(f, fmt, ap) : tb_real.vfscanf(f, fmt, ap);
	/* The first read is a wait of its own; then, with a newline buffered, no wait. */
	if (tb_stdio_prime(s, f) < 0)
		return EOF;
	if (tb_stdio_holds(f, '\n'))
		return c99 ? tb_real.__isoc99_vfscanf(f, fmt, ap) : tb_real.vfscanf(f, fmt, ap);
	GOVERNED(int, TB_RD,
		 c99 ? tb_real.__isoc99_vfscanf(f, fmt, ap) : tb_real.vfscanf(f, fmt, ap), true,
		 EOF, r_);
}

/* Under the FILE's lock from the first read on, as glibc's vfscanf: another thread's read
 * of the stream must not come between the priming read and the scan, nor share its
 * refill of the buffer. */
static TB_SLOW int governed_vfscanf(struct tb_sock *s, FILE *f, const char *fmt, va_list ap,
				    bool c99)
{
	int r;

	tb_file_lock(f);
	pthread_cleanup_push(unlock_on_cancel, f);
	r = governed_vfscanf_locked(s, f, fmt, ap, c99);
	pthread_cleanup_pop(0);
	tb_file_unlock(f);
	return r;
}

/* The C99 names here; fscanf and vfscanf (the GNU names, whose %as allocates) live in
 * hooks_scanf.c: <stdio.h> renames them to these by asm label in C99 and later. */
int tb_stdio_vfscanf(FILE *f, const char *fmt, va_list ap, bool c99)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return c99 ? tb_real.__isoc99_vfscanf(f, fmt, ap) : tb_real.vfscanf(f, fmt, ap);
	return governed_vfscanf(s, f, fmt, ap, c99);
}

TB_EXPORT int __isoc99_vfscanf(FILE *f, const char *fmt, va_list ap)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL))
		return tb_real.__isoc99_vfscanf(f, fmt, ap);
	return governed_vfscanf(s, f, fmt, ap, true);
}

TB_EXPORT int __isoc99_fscanf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = __isoc99_vfscanf(f, fmt, ap);
	va_end(ap);
	return r;
}

/* ---- writes --------------------------------------------------------------------------- */

/* A write that may flush is a write-side wait and, like send, a step of the call budget. */
#define GOVERNED_PUT(type, n, call, ok, fail, cut)                                          \
	do {                                                                                \
		if (!tb_stdio_may_flush(f, (n)))                                            \
			return (call);                                                      \
		GOVERNED(type, TB_WR, call, ok, fail, cut);                                 \
	} while (0)

/*
 * The locked writers' governed body (`call`, a function of its own) under the FILE's lock,
 * taken before the wait begins: glibc's writer takes the lock first too, and a thread
 * waiting for another's flockfile is not waiting for the peer - timed from before the
 * lock, it was cut as a stalled upload, and the socket shut down under the lock's holder
 * (regress/stdio_write_lock_wait). Inside, glibc's own lock is a recursive re-entry; the
 * put area the body looks at is this thread's to look at. Released on cancellation.
 */
#define UNDER_LOCK(type, call)                                                              \
	do {                                                                                \
		type r_;                                                                    \
		tb_file_lock(f);                                                            \
		pthread_cleanup_push(unlock_on_cancel, f);                                  \
		r_ = (call);                                                                \
		pthread_cleanup_pop(0);                                                     \
		tb_file_unlock(f);                                                          \
		return r_;                                                                  \
	} while (0)

static size_t fwrite_body(struct tb_sock *s, const void *p, size_t size, size_t n, FILE *f)
{
	size_t bytes = __builtin_mul_overflow(size, n, &bytes) ? (size_t)-1 : bytes;

	GOVERNED_PUT(size_t, bytes, tb_real.fwrite(p, size, n, f), r_ == n, 0, r_);
}

static TB_SLOW size_t governed_fwrite(struct tb_sock *s, const void *p, size_t size, size_t n,
				      FILE *f)
{
	UNDER_LOCK(size_t, fwrite_body(s, p, size, n, f));
}

TB_EXPORT size_t fwrite(const void *p, size_t size, size_t n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.fwrite(p, size, n, f);
	}
	return governed_fwrite(s, p, size, n, f);
}

static TB_SLOW size_t governed_fwrite_unlocked(struct tb_sock *s, const void *p, size_t size,
					       size_t n, FILE *f)
{
	size_t bytes = __builtin_mul_overflow(size, n, &bytes) ? (size_t)-1 : bytes;

	GOVERNED_PUT(size_t, bytes, tb_real.fwrite_unlocked(p, size, n, f), r_ == n, 0, r_);
}

TB_EXPORT size_t fwrite_unlocked(const void *p, size_t size, size_t n, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.fwrite_unlocked(p, size, n, f);
	}
	return governed_fwrite_unlocked(s, p, size, n, f);
}

static int fputs_body(struct tb_sock *s, const char *str, FILE *f)
{
	GOVERNED_PUT(int, strlen(str), tb_real.fputs(str, f), r_ != EOF, EOF, EOF);
}

static TB_SLOW int governed_fputs(struct tb_sock *s, const char *str, FILE *f)
{
	UNDER_LOCK(int, fputs_body(s, str, f));
}

TB_EXPORT int fputs(const char *str, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.fputs(str, f);
	}
	return governed_fputs(s, str, f);
}

static TB_SLOW int governed_fputs_unlocked(struct tb_sock *s, const char *str, FILE *f)
{
	GOVERNED_PUT(int, strlen(str), tb_real.fputs_unlocked(str, f), r_ != EOF, EOF, EOF);
}

TB_EXPORT int fputs_unlocked(const char *str, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.fputs_unlocked(str, f);
	}
	return governed_fputs_unlocked(s, str, f);
}

static int fputc_body(struct tb_sock *s, int c, FILE *f)
{
	GOVERNED_PUT(int, 1, tb_real.fputc(c, f), r_ != EOF, EOF, EOF);
}

static TB_SLOW int governed_fputc(struct tb_sock *s, int c, FILE *f)
{
	UNDER_LOCK(int, fputc_body(s, c, f));
}

/* putc and _IO_putc are fputc under other names. */
TB_EXPORT int fputc(int c, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.fputc(c, f);
	}
	return governed_fputc(s, c, f);
}

TB_EXPORT int putc(int c, FILE *f)
{
	return fputc(c, f);
}

TB_EXPORT int _IO_putc(int c, FILE *f)
{
	return fputc(c, f);
}

static TB_SLOW int governed_fputc_unlocked(struct tb_sock *s, int c, FILE *f)
{
	GOVERNED_PUT(int, 1, tb_real.fputc_unlocked(c, f), r_ != EOF, EOF, EOF);
}

TB_EXPORT int fputc_unlocked(int c, FILE *f)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.fputc_unlocked(c, f);
	}
	return governed_fputc_unlocked(s, c, f);
}

TB_EXPORT int putc_unlocked(int c, FILE *f)
{
	return fputc_unlocked(c, f);
}

/* The slow path of the putc_unlocked macro: the put area is full (or c is EOF: flush). */
static TB_SLOW int governed_overflow(struct tb_sock *s, FILE *f, int c)
{
	GOVERNED(int, TB_WR, tb_real.__overflow(f, c), r_ != EOF, EOF, EOF);
}

TB_EXPORT int __overflow(FILE *f, int c)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.__overflow(f, c);
	}
	return governed_overflow(s, f, c);
}

/* fprintf's length is known only once formatted: on a governed stream each call may flush
 * (the wait's cost, a clock read and two atomic updates, is small beside the formatting). */
static int vfprintf_body(struct tb_sock *s, FILE *f, int flag, const char *fmt, va_list ap)
{
	GOVERNED(int, TB_WR,
		 flag < 0 ? tb_real.vfprintf(f, fmt, ap) : tb_real.__vfprintf_chk(f, flag, fmt, ap),
		 r_ >= 0, -1, -1);
}

static TB_SLOW int governed_vfprintf(struct tb_sock *s, FILE *f, int flag, const char *fmt,
				     va_list ap)
{
	UNDER_LOCK(int, vfprintf_body(s, f, flag, fmt, ap));
}

TB_EXPORT int vfprintf(FILE *f, const char *fmt, va_list ap)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.vfprintf(f, fmt, ap);
	}
	return governed_vfprintf(s, f, -1, fmt, ap);
}

TB_EXPORT int __vfprintf_chk(FILE *f, int flag, const char *fmt, va_list ap)
{
	struct tb_sock *s = SOCK_OF(f);

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f->_fileno);
		return tb_real.__vfprintf_chk(f, flag, fmt, ap);
	}
	return governed_vfprintf(s, f, flag < 0 ? 0 : flag, fmt, ap);
}

TB_EXPORT int fprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

TB_EXPORT int __fprintf_chk(FILE *f, int flag, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = __vfprintf_chk(f, flag, fmt, ap);
	va_end(ap);
	return r;
}

/* fflush: a wait when output is pending. fflush(NULL) flushes every stream at once and is
 * passed through (see docs/limitations.md). */
#define GOVERNED_FLUSH(call)                                                                \
	do {                                                                                \
		if (f->_IO_write_ptr <= f->_IO_write_base)                                  \
			return (call);                                                      \
		GOVERNED(int, TB_WR, call, r_ == 0, EOF, EOF);                              \
	} while (0)

static int fflush_body(struct tb_sock *s, FILE *f)
{
	GOVERNED_FLUSH(tb_real.fflush(f));
}

static TB_SLOW int governed_fflush(struct tb_sock *s, FILE *f)
{
	UNDER_LOCK(int, fflush_body(s, f));
}

TB_EXPORT int fflush(FILE *f)
{
	struct tb_sock *s = f != NULL ? SOCK_OF(f) : NULL;

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f != NULL ? f->_fileno : -1);
		return tb_real.fflush(f);
	}
	return governed_fflush(s, f);
}

static TB_SLOW int governed_fflush_unlocked(struct tb_sock *s, FILE *f)
{
	GOVERNED_FLUSH(tb_real.fflush_unlocked(f));
}

TB_EXPORT int fflush_unlocked(FILE *f)
{
	struct tb_sock *s = f != NULL ? SOCK_OF(f) : NULL;

	if (TB_LIKELY(s == NULL)) {
		INBOUND_PUT(f != NULL ? f->_fileno : -1);
		return tb_real.fflush_unlocked(f);
	}
	return governed_fflush_unlocked(s, f);
}
