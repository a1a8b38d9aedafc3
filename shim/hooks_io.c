/* hooks_io.c - the data-moving entry points: read/write, recv/send and their relatives,
 * and the FORTIFY variants. Each is: untracked fd -> libc at once; else xfer begin/end. */
#include <errno.h>
#include <limits.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdtable.h"
#include "hooks.h"
#include "libc_compat.h"
#include "prop_io.h"
#include "real.h"
#include "sigpipe.h"
#include "xfer.h"

#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000 /* Linux 4.14; older C libraries do not name it */
#endif

/*
 * MSG_ZEROCOPY: the kernel numbers each successful such send (0, 1, 2, ...) and reports on
 * the error queue which numbers completed; the program counts its own calls to know when a
 * buffer may be reused. Such a send is therefore made as exactly one system call - never
 * tried without blocking first and finished by a second, never planned in pieces by the
 * deadline header (whose bytes live in a stack buffer the kernel would pin).
 */
#define ONE_CALL(flags) ((flags) & MSG_ZEROCOPY)

#ifdef __GLIBC__
/* The FORTIFY entry points (no public header declares them). */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);
#endif

/*
 * An untracked fd in a process that accepted a connection under scope=request: it may be an
 * inbound connection, whose request heads open the thread's budget (prop_io.h). Out of line
 * like the governed bodies, and reached only once that flag is set: until then the
 * untracked path pays one load and a predictable branch for it. The bytes pass unchanged.
 */
static TB_SLOW ssize_t inbound_read(int fd, void *buf, size_t n)
{
	ssize_t r = tb_real.read(fd, buf, n);

	if (r > 0)
		tb_pin_consumed(fd, buf, NULL, 0, (size_t)r);
	return r;
}

static TB_SLOW ssize_t inbound_readv(int fd, const struct iovec *iov, int n)
{
	ssize_t r = tb_real.readv(fd, iov, n);

	if (r > 0)
		tb_pin_consumed(fd, NULL, iov, (size_t)n, (size_t)r);
	return r;
}

/*
 * Reads whose bytes are not the stream's: MSG_PEEK's will be read again, MSG_OOB returns
 * TCP's urgent byte (which the kernel keeps out of the stream), MSG_ERRQUEUE the socket's
 * error queue (a timestamped send's own packet, a notification). They are fed neither to
 * an inbound request's head parser (regress/propagate_inbound_oob), where MSG_TRUNC bytes,
 * never copied, are not fed either, nor to a governed socket's framing (regress/framing_oob).
 */
#define NOT_STREAM (MSG_PEEK | MSG_OOB | MSG_ERRQUEUE)

static TB_SLOW ssize_t inbound_recvfrom(int fd, void *buf, size_t n, int flags,
					struct sockaddr *addr, socklen_t *alen)
{
	ssize_t r = tb_real.recvfrom(fd, buf, n, flags, addr, alen);

	if (r > 0 && !(flags & (NOT_STREAM | MSG_TRUNC)))
		tb_pin_consumed(fd, buf, NULL, 0, (size_t)r);
	return r;
}

static TB_SLOW ssize_t inbound_recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t r = tb_real.recvmsg(fd, msg, flags);

	if (r > 0 && !(flags & (NOT_STREAM | MSG_TRUNC)))
		tb_pin_consumed(fd, NULL, msg->msg_iov, msg->msg_iovlen, (size_t)r);
	return r;
}

/* A write on such an fd: the response to its request begins. */
static TB_SLOW ssize_t inbound_write(int fd, const void *buf, size_t n)
{
	tb_pin_writing(fd);
	return tb_real.write(fd, buf, n);
}

static TB_SLOW ssize_t inbound_writev(int fd, const struct iovec *iov, int n)
{
	tb_pin_writing(fd);
	return tb_real.writev(fd, iov, n);
}

static TB_SLOW ssize_t inbound_sendto(int fd, const void *buf, size_t n, int flags,
				      const struct sockaddr *addr, socklen_t alen)
{
	tb_pin_writing(fd);
	return tb_real.sendto(fd, buf, n, flags, addr, alen);
}

static TB_SLOW ssize_t inbound_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	tb_pin_writing(fd);
	return tb_real.sendmsg(fd, msg, flags);
}

/*
 * Whether the planner may read the program's pieces: no NULL array, no NULL buffer with
 * bytes. It reads them before the kernel does (the request line is looked for first), so a
 * program's bad pointer would be a crash where natively it is EFAULT; such a send takes the
 * plain path, whose kernel call says EFAULT (regress/prop_bad_pointer). A non-NULL
 * bad address is still read: checking it would cost a system call per send.
 */
static bool prop_readable(const struct iovec *iov, size_t iovcnt)
{
	if (iov == NULL)
		return iovcnt == 0;
	for (size_t i = 0; i < iovcnt; i++)
		if (iov[i].iov_base == NULL && iov[i].iov_len > 0)
			return false;
	return true;
}

/*
 * A send on a governed socket whose rule propagates (prop_io.h): the program's bytes in
 * iov[0..iovcnt), its flags (own_flags < 0: write or writev, which have none), its msghdr
 * (sendto, sendmsg) or NULL. The planner puts the call's remaining milliseconds after each
 * request line; the program is told how many of its own bytes went. A number found naming
 * no socket at all (ENOTSOCK) gets the program's own call, as the plain paths do.
 */
static TB_SLOW __attribute__((cold)) ssize_t governed_prop(struct tb_sock *s, int fd, const struct iovec *iov,
				     size_t iovcnt, int own_flags, const struct msghdr *msg)
{
	int flags = (own_flags < 0 ? 0 : own_flags) | MSG_NOSIGNAL;
	struct msghdr own = { .msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt };
	struct tb_xfer x;
	bool stale;
	ssize_t r;

	if (tb_xfer_begin(&x, s, fd, TB_WR, true) < 0)
		return -1;
	if (TB_UNLIKELY(x.s == NULL))
		goto own_call; /* not ours (any more) */
	x.sigpipe = own_flags < 0 || !(own_flags & MSG_NOSIGNAL);
	x.peek = false;
	tb_xfer_data(&x, NULL, iov, iovcnt);
	r = tb_pout_send(&x, fd, iov, iovcnt, flags, msg,
			 x.can_block && !(flags & MSG_DONTWAIT), &stale);
	if (TB_UNLIKELY(stale)) {
		tb_xfer_abandon_stale(&x);
		goto own_call;
	}
	return tb_xfer_end(&x, r);
own_call:
	if (own_flags < 0)
		return tb_real.writev(fd, iov, (int)iovcnt);
	if (msg != NULL)
		return tb_real.sendmsg(fd, msg, own_flags);
	return tb_real.sendmsg(fd, &own, own_flags);
}

/* governed_prop for one buffer (write, send): its own frame, so that the plain send path
 * keeps none for the iovec (measured: +5 instructions per exchange when it did). */
static TB_SLOW __attribute__((cold)) ssize_t governed_prop_one(struct tb_sock *s, int fd, const void *buf, size_t n,
					 int own_flags)
{
	struct iovec one = { .iov_base = (void *)buf, .iov_len = n };

	return governed_prop(s, fd, &one, 1, own_flags, NULL);
}

/*
 * The body for a governed socket, kept out of line (TB_SLOW): inlined, its stack frame
 * would make every hook save and restore registers even for an untracked fd, whose whole
 * path must stay a bounds check, a load and a tail call into libc.
 * `sigpipe`: the program's own call would raise SIGPIPE on EPIPE (see tb_xfer_end).
 * `call` is made when it may block; `nowait` (the same as its system call, real.h's
 * TB_NOWAIT) when it cannot: MSG_DONTWAIT, or a governed socket that is non-blocking.
 * `none` (looked at only when the call returned 0): a read that asked for no bytes
 * (end_asked_none).
 */
#define GOVERNED_IO(side, dontwait, sigpipe_, buf_, iov_, iovcnt_, peek_, call, nowait, none) \
	do {                                                                                \
		struct tb_xfer x_;                                                          \
		ssize_t r_;                                                                 \
		if (tb_xfer_begin(&x_, s, fd, (side), (dontwait)) < 0)                      \
			return -1;                                                          \
		x_.sigpipe = (sigpipe_);                                                    \
		x_.peek = (peek_);                                                          \
		tb_xfer_data(&x_, (buf_), (iov_), (iovcnt_));                               \
		r_ = (dontwait) || (x_.s != NULL && !x_.can_block) ? (nowait) : (call);      \
		if (TB_UNLIKELY(r_ == 0) && (none))                                         \
			return end_asked_none(&x_);                                         \
		return tb_xfer_end(&x_, r_);                                                \
	} while (0)

/* A send (a 0 it returns is no end of file); a read. */
#define GOVERNED(side, dontwait, sigpipe_, buf_, iov_, iovcnt_, peek_, call, nowait)        \
	GOVERNED_IO(side, dontwait, sigpipe_, buf_, iov_, iovcnt_, peek_, call, nowait, false)
#define GOVERNED_RD(dontwait, buf_, iov_, iovcnt_, peek_, call, nowait, none)               \
	GOVERNED_IO(TB_RD, dontwait, false, buf_, iov_, iovcnt_, peek_, call, nowait, none)

/*
 * A read that asked for no bytes returns 0 with the connection open (read and readv at once,
 * recv once data or the end is there): that 0 says nothing of the peer, and must not reach
 * tb_xfer_end as an end of file - the framing would end the response there, and a breaker
 * count the call as reset (regress/zero_length_read_eof). It ends as a call
 * interrupted before moving anything: an expiry during it is still reported.
 */
static __attribute__((noinline, cold)) ssize_t end_asked_none(struct tb_xfer *x)
{
	int saved = errno;

	errno = EINTR;
	if (tb_xfer_end(x, -1) < 0 && errno != EINTR)
		return -1; /* the socket expired during the call: reported */
	errno = saved;
	return 0;
}

static size_t iov_total(const struct iovec *iov, size_t cnt)
{
	size_t t = 0;

	for (size_t i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

static TB_SLOW ssize_t governed_read(struct tb_sock *s, int fd, void *buf, size_t n)
{
	GOVERNED_RD(false, buf, NULL, 0, false, tb_real.read(fd, buf, n),
		    tb_real_read_nowait(fd, buf, n), n == 0);
}

TB_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.read(fd, buf, n);
		return inbound_read(fd, buf, n);
	}
	return governed_read(s, fd, buf, n);
}

#ifdef __GLIBC__ /* FORTIFY entry points: musl has none */
TB_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}
#endif

/*
 * write/writev are made as send/sendmsg (for MSG_NOSIGNAL). ENOTSOCK: the number was closed
 * unseen (a raw close system call) and now names a file or a pipe, so the slot is stale:
 * drop it and make the program's own call.
 *
 * A blocking send tried first without blocking: when the socket's buffer takes it all (a
 * healthy peer: nearly always), no wait is begun, recorded or armed - one system call, as
 * before, and a fraction of the bookkeeping. Otherwise the rest is sent blocking, under a
 * wait begun then (tb_xfer_wait); the program sees one call that moved everything, or, as
 * natively, the bytes that moved before an error or a signal ended it.
 */
static ssize_t send_rest(struct tb_xfer *x, int fd, const char *buf, size_t n, int flags,
			 ssize_t r)
{
	size_t done = r > 0 ? (size_t)r : 0;
	ssize_t more;

	if (tb_xfer_wait(x) < 0) {
		if (done == 0)
			return -1; /* tb_xfer_end reports the cut */
		errno = x->saved_errno; /* the cut is reported by the next call */
		return (ssize_t)done;
	}
	more = tb_real.send(fd, buf + done, n - done, flags);
	if (more < 0)
		return done > 0 ? (ssize_t)done : -1;
	return (ssize_t)done + more;
}

/* The program's own call: write(2), or send(2) with its own flags (own_flags < 0: write). */
static ssize_t own_send(int fd, const void *buf, size_t n, int own_flags)
{
	return own_flags < 0 ? tb_real.write(fd, buf, n) : tb_real.send(fd, buf, n, own_flags);
}

static TB_SLOW ssize_t governed_send_try(struct tb_sock *s, int fd, const void *buf, size_t n,
					  int own_flags)
{
	int flags = (own_flags < 0 ? 0 : own_flags) | MSG_NOSIGNAL;
	struct tb_xfer x;
	ssize_t r;

	if (tb_xfer_begin(&x, s, fd, TB_WR, true) < 0)
		return -1;
	if (TB_UNLIKELY(x.s == NULL))
		return own_send(fd, buf, n, own_flags); /* not ours (any more) */
	/* own_flags never hold MSG_DONTWAIT here (governed_send): the try is ours. */
	r = tb_real_send_nowait(fd, buf, n, x.can_block ? flags | MSG_DONTWAIT : flags);
	if (TB_UNLIKELY(r < 0 && errno == ENOTSOCK)) {
		/* The number was closed unseen and now names a file or a pipe (see above). */
		tb_xfer_abandon_stale(&x);
		return own_send(fd, buf, n, own_flags);
	}
	x.sigpipe = own_flags < 0 || !(own_flags & MSG_NOSIGNAL);
	x.peek = false;
	tb_xfer_data(&x, buf, NULL, 0);
	if (TB_UNLIKELY((size_t)r != n) && x.s != NULL && x.can_block &&
	    (r >= 0 || errno == EAGAIN || errno == EWOULDBLOCK))
		r = send_rest(&x, fd, buf, n, flags, r);
	return tb_xfer_end(&x, r);
}

static TB_SLOW ssize_t governed_write(struct tb_sock *s, int fd, const void *buf, size_t n)
{
	if (TB_UNLIKELY(tb_pout_wanted(s)) && (buf != NULL || n == 0))
		return governed_prop_one(s, fd, buf, n, -1);
	/* write(2) on a connected stream socket is send(2) with no flags. */
	return governed_send_try(s, fd, buf, n, -1);
}

TB_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.write(fd, buf, n);
		return inbound_write(fd, buf, n);
	}
	return governed_write(s, fd, buf, n);
}

#define REST_PIECES 64 /* the rest of a gathered send, per blocking sendmsg */

/*
 * send_rest for a gathered send (writev, sendmsg): what the try left, from its first byte
 * not taken, goes out blocking under a wait begun now, REST_PIECES pieces per sendmsg
 * until all moved. The name and the control data go with the first of these only when the
 * try moved nothing (otherwise they went with its bytes, as they would have natively).
 */
static ssize_t sendmsg_rest(struct tb_xfer *x, int fd, const struct msghdr *msg, size_t n,
			    int flags, ssize_t r)
{
	size_t done = r > 0 ? (size_t)r : 0;

	if (tb_xfer_wait(x) < 0) {
		if (done == 0)
			return -1; /* tb_xfer_end reports the cut */
		errno = x->saved_errno; /* the cut is reported by the next call */
		return (ssize_t)done;
	}
	while (done < n) {
		struct iovec rest[REST_PIECES];
		struct msghdr m = { .msg_iov = rest };
		size_t planned;
		ssize_t more;

		if (done == 0) {
			m.msg_name = msg->msg_name;
			m.msg_namelen = msg->msg_namelen;
			m.msg_control = msg->msg_control;
			m.msg_controllen = msg->msg_controllen;
		}
		m.msg_iovlen = tb_iov_from(msg->msg_iov, (size_t)msg->msg_iovlen, done, rest,
					   REST_PIECES, &planned);
		more = tb_real.sendmsg(fd, &m, flags);
		if (more < 0)
			return done > 0 ? (ssize_t)done : -1;
		done += (size_t)more;
		if ((size_t)more < planned)
			break; /* cut short (a signal): as natively, what moved */
	}
	return (ssize_t)done;
}

/* The program's own gathered call: writev(2) (own_flags < 0), or sendmsg(2). */
static ssize_t own_sendmsg(int fd, const struct msghdr *msg, int own_flags)
{
	if (own_flags < 0)
		return tb_real.writev(fd, msg->msg_iov, (int)msg->msg_iovlen);
	return tb_real.sendmsg(fd, msg, own_flags);
}

/*
 * writev, and sendmsg without MSG_DONTWAIT, tried without blocking first as send is
 * (governed_send_try): when the socket's buffer takes every piece - nearly always - no
 * wait is begun, recorded or armed; otherwise sendmsg_rest sends the rest under a wait.
 * writev(2) on a connected stream socket is sendmsg(2) with no flags. msg_iovlen is at
 * most IOV_MAX (the hooks check).
 */
static TB_SLOW ssize_t governed_sendmsg_try(struct tb_sock *s, int fd, const struct msghdr *msg,
					    int own_flags)
{
	int flags = (own_flags < 0 ? 0 : own_flags) | MSG_NOSIGNAL;
	struct tb_xfer x;
	size_t n = 0;
	ssize_t r;

	if (tb_xfer_begin(&x, s, fd, TB_WR, true) < 0)
		return -1;
	if (TB_UNLIKELY(x.s == NULL))
		return own_sendmsg(fd, msg, own_flags); /* not ours (any more) */
	r = tb_real_sendmsg_nowait(fd, msg, x.can_block ? flags | MSG_DONTWAIT : flags);
	if (TB_UNLIKELY(r < 0 && errno == ENOTSOCK)) {
		/* The number was closed unseen and now names a file or a pipe (see above). */
		tb_xfer_abandon_stale(&x);
		return own_sendmsg(fd, msg, own_flags);
	}
	x.sigpipe = own_flags < 0 || !(own_flags & MSG_NOSIGNAL);
	x.peek = false;
	tb_xfer_data(&x, NULL, msg->msg_iov, (size_t)msg->msg_iovlen);
	/* A writev of no bytes returns 0 natively before the socket is asked (the kernel's
	 * vfs_writev); as a sendmsg it met the socket's state: EPIPE and SIGPIPE after a
	 * shutdown, a peer's reset (regress/writev_nothing). The kernel has read the pieces
	 * by now (a bad one is EFAULT), so their lengths can be summed. The reset's pending
	 * error is taken by the sendmsg all the same (docs/limitations.md). */
	if (TB_UNLIKELY(r < 0) && own_flags < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EFAULT && errno != EINVAL && errno != EMSGSIZE &&
	    iov_total(msg->msg_iov, (size_t)msg->msg_iovlen) == 0)
		r = 0;
	/* The pieces' lengths are read only once the kernel has read them (it fails a bad
	 * iovec with EFAULT before anything else): a program's bad pointer is its EFAULT. */
	if (x.can_block && (r >= 0 || errno == EAGAIN || errno == EWOULDBLOCK)) {
		n = iov_total(msg->msg_iov, (size_t)msg->msg_iovlen); /* int in musl */
		if (TB_UNLIKELY((size_t)r != n) && x.s != NULL)
			r = sendmsg_rest(&x, fd, msg, n, flags, r);
	}
	return tb_xfer_end(&x, r);
}

static TB_SLOW ssize_t governed_readv(struct tb_sock *s, int fd, const struct iovec *iov, int n)
{
	GOVERNED_RD(false, NULL, iov, (size_t)n, false, tb_real.readv(fd, iov, n),
		    tb_real_readv_nowait(fd, iov, n),
		    iov_total(iov, (size_t)n) == 0);
}

TB_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()) || n <= 0)
			return tb_real.readv(fd, iov, n);
		return inbound_readv(fd, iov, n);
	}
	return governed_readv(s, fd, iov, n);
}

static TB_SLOW ssize_t governed_writev(struct tb_sock *s, int fd, const struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };

	if (TB_UNLIKELY(tb_pout_wanted(s)) && prop_readable(iov, (size_t)n) &&
	    iov_total(iov, (size_t)n) != 0)
		return governed_prop(s, fd, iov, (size_t)n, -1, NULL);
	return governed_sendmsg_try(s, fd, &m, -1);
}

TB_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	/* Out of range: let libc report EINVAL (sendmsg would say EMSGSIZE for > IOV_MAX). */
	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.writev(fd, iov, n);
		return inbound_writev(fd, iov, n);
	}
	if (n <= 0 || n > IOV_MAX) /* none: 0 at once, the socket not asked (governed_sendmsg_try) */
		return tb_real.writev(fd, iov, n);
	return governed_writev(s, fd, iov, n);
}

/*
 * sendfile(2) into a governed socket: a send the kernel makes from a file, so it blocks as a
 * send does and waits under the write phase and the call's deadline (a blocked sendfile to a
 * stalled peer was never cut). Its bytes are unseen: framing counts them inside a body it
 * is skipping and gives up anywhere else (tb_frame_unseen). It takes no MSG_NOSIGNAL, so
 * SIGPIPE is held around it (sigpipe.h): a cut fails it with EPIPE, which the program must
 * see as the timeout, not die of; a genuine EPIPE (the peer closed) raises SIGPIPE as the
 * mask is restored, as natively. Three or four system calls more per governed sendfile, each
 * of which moves a file's worth; an untracked fd (a file, a pipe, an inbound socket) is
 * the program's own call.
 */
static TB_SLOW ssize_t governed_sendfile(struct tb_sock *s, int out, int in, off_t *off,
					 size_t n)
{
	struct tb_xfer x;
	struct tb_sigpipe pipe_held;
	uint32_t w;
	ssize_t r;

	if (tb_xfer_begin(&x, s, out, TB_WR, false) < 0)
		return -1;
	if (x.s == NULL)
		return tb_real.sendfile(out, in, off, n); /* not ours (any more) */
	x.sigpipe = false; /* the kernel's own, held below */
	x.peek = false;
	tb_xfer_data(&x, NULL, NULL, 0);
	tb_sigpipe_hold(&pipe_held);
	r = tb_real.sendfile(out, in, off, n);
	w = tb_sock_word(s);
	tb_sigpipe_release(&pipe_held, TB_ST_GEN(w) == x.gen && TB_ST(w) == TB_ST_EXPIRED);
	return tb_xfer_end(&x, r);
}

TB_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	struct tb_sock *s = tb_fd_sock(out);

	if (TB_LIKELY(s == NULL))
		return tb_real.sendfile(out, in, off, n);
	return governed_sendfile(s, out, in, off, n);
}

#if defined(__GLIBC__) && __WORDSIZE == 64 /* the same call under its large-file name */
TB_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	return sendfile(out, in, off, n);
}
#endif

/*
 * The buffer that holds what a receive moved, for the framing: none under MSG_TRUNC. On
 * TCP the kernel then discards the bytes without copying them and returns how many (a
 * program skipping a body it does not want), so buf may be far smaller than the count and
 * holds nothing of them; the framing must not read it (past its end, or stale bytes taken
 * for the response). Unseen bytes are counted inside a body the framing is skipping, as
 * sendfile's are; anywhere else framing gives up on that connection (tb_frame_unseen).
 */
#define SEEN(flags, buf) ((flags) & MSG_TRUNC ? NULL : (buf))

/*
 * A read of the error queue (MSG_ERRQUEUE: a zerocopy send's completion, a timestamp) or
 * of TCP's urgent byte (MSG_OOB) never blocks and moves none of the stream's bytes: it is
 * the program's own call, no transfer (OWN_READ). An error-queue read's 0 (a completion
 * carries no data) is no end of file, and its bytes no response: taken for either, a
 * breaker counted each zerocopy program's completion read as a reset
 * (regress/errqueue_not_eof). An urgent-data read's EINVAL (none pending) is no failure of
 * the call: taken for one, the budget forgot the answer just read, and the next request
 * ran on as a retry under the same deadline (regress/oob_read_not_a_failure). So in recv,
 * recvfrom and recvmsg.
 */
#define OWN_READ (MSG_ERRQUEUE | MSG_OOB)

static TB_SLOW ssize_t governed_recv(struct tb_sock *s, int fd, void *buf, size_t n, int flags)
{
	if (TB_UNLIKELY(flags & OWN_READ))
		return tb_real.recv(fd, buf, n, flags);
	GOVERNED_RD(flags & MSG_DONTWAIT, SEEN(flags, buf), NULL, 0, flags & NOT_STREAM, tb_real.recv(fd, buf, n, flags),
		    tb_real_recv_nowait(fd, buf, n, flags), n == 0);
}

TB_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.recv(fd, buf, n, flags);
		return inbound_recvfrom(fd, buf, n, flags, NULL, NULL);
	}
	return governed_recv(s, fd, buf, n, flags);
}

#ifdef __GLIBC__ /* FORTIFY entry points: musl has none */
TB_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		__chk_fail();
	return recv(fd, buf, n, flags);
}
#endif

static TB_SLOW ssize_t governed_send(struct tb_sock *s, int fd, const void *buf, size_t n, int flags)
{
	if (TB_UNLIKELY(tb_pout_wanted(s)) && !ONE_CALL(flags) && (buf != NULL || n == 0))
		return governed_prop_one(s, fd, buf, n, flags);
	if (!(flags & MSG_DONTWAIT) && !ONE_CALL(flags))
		return governed_send_try(s, fd, buf, n, flags);
	GOVERNED(TB_WR, flags & MSG_DONTWAIT, !(flags & MSG_NOSIGNAL), buf, NULL, 0, false, tb_real.send(fd, buf, n, flags | MSG_NOSIGNAL),
		 tb_real_send_nowait(fd, buf, n, flags | MSG_NOSIGNAL));
}

TB_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.send(fd, buf, n, flags);
		return inbound_sendto(fd, buf, n, flags, NULL, 0);
	}
	return governed_send(s, fd, buf, n, flags);
}

static TB_SLOW ssize_t governed_recvfrom(struct tb_sock *s, int fd, void *buf, size_t n, int flags, struct sockaddr *addr, socklen_t *alen)
{
	if (TB_UNLIKELY(flags & OWN_READ))
		return tb_real.recvfrom(fd, buf, n, flags, addr, alen);
	GOVERNED_RD(flags & MSG_DONTWAIT, SEEN(flags, buf), NULL, 0, flags & NOT_STREAM, tb_real.recvfrom(fd, buf, n, flags, addr, alen),
		    tb_real_recvfrom_nowait(fd, buf, n, flags, addr, alen), n == 0);
}

TB_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr, socklen_t *alen)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.recvfrom(fd, buf, n, flags, addr, alen);
		return inbound_recvfrom(fd, buf, n, flags, addr, alen);
	}
	return governed_recvfrom(s, fd, buf, n, flags, addr, alen);
}

#ifdef __GLIBC__ /* FORTIFY entry points: musl has none */
TB_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				 struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		__chk_fail();
	return recvfrom(fd, buf, n, flags, addr, alen);
}
#endif

static TB_SLOW ssize_t governed_sendto(struct tb_sock *s, int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr, socklen_t alen)
{
	if (TB_UNLIKELY(tb_pout_wanted(s)) && !ONE_CALL(flags) && (buf != NULL || n == 0)) {
		struct iovec one = { .iov_base = (void *)buf, .iov_len = n };
		struct msghdr m = { .msg_name = (void *)addr, .msg_namelen = alen,
				    .msg_iov = &one, .msg_iovlen = 1 };

		return governed_prop(s, fd, &one, 1, flags, &m);
	}
	GOVERNED(TB_WR, flags & MSG_DONTWAIT, !(flags & MSG_NOSIGNAL), buf, NULL, 0, false, tb_real.sendto(fd, buf, n, flags | MSG_NOSIGNAL, addr, alen),
		 tb_real_sendto_nowait(fd, buf, n, flags | MSG_NOSIGNAL, addr, alen));
}

TB_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr, socklen_t alen)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.sendto(fd, buf, n, flags, addr, alen);
		return inbound_sendto(fd, buf, n, flags, addr, alen);
	}
	return governed_sendto(s, fd, buf, n, flags, addr, alen);
}

static TB_SLOW ssize_t governed_recvmsg(struct tb_sock *s, int fd, struct msghdr *msg, int flags)
{
	if (TB_UNLIKELY(flags & OWN_READ))
		return tb_real.recvmsg(fd, msg, flags);
	GOVERNED_RD(flags & MSG_DONTWAIT, NULL, msg != NULL && !(flags & MSG_TRUNC) ? msg->msg_iov : NULL, msg != NULL ? msg->msg_iovlen : 0, flags & NOT_STREAM, tb_real.recvmsg(fd, msg, flags),
		    tb_real_recvmsg_nowait(fd, msg, flags), msg != NULL && iov_total(msg->msg_iov, (size_t)msg->msg_iovlen) == 0);
}

TB_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()) || msg == NULL)
			return tb_real.recvmsg(fd, msg, flags);
		return inbound_recvmsg(fd, msg, flags);
	}
	return governed_recvmsg(s, fd, msg, flags);
}

static TB_SLOW ssize_t governed_sendmsg(struct tb_sock *s, int fd, const struct msghdr *msg, int flags)
{
	if (TB_UNLIKELY(tb_pout_wanted(s)) && msg != NULL && msg->msg_iovlen <= IOV_MAX &&
	    !ONE_CALL(flags) && prop_readable(msg->msg_iov, msg->msg_iovlen))
		return governed_prop(s, fd, msg->msg_iov, msg->msg_iovlen, flags, msg);
	if (!(flags & MSG_DONTWAIT) && !ONE_CALL(flags) && msg != NULL && msg->msg_iovlen <= IOV_MAX &&
	    (msg->msg_iov != NULL || msg->msg_iovlen == 0))
		return governed_sendmsg_try(s, fd, msg, flags);
	GOVERNED(TB_WR, flags & MSG_DONTWAIT, !(flags & MSG_NOSIGNAL), NULL, msg != NULL ? msg->msg_iov : NULL, msg != NULL ? msg->msg_iovlen : 0, false, tb_real.sendmsg(fd, msg, flags | MSG_NOSIGNAL),
		 tb_real_sendmsg_nowait(fd, msg, flags | MSG_NOSIGNAL));
}

TB_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL)) {
		if (TB_LIKELY(!tb_pin_enabled()))
			return tb_real.sendmsg(fd, msg, flags);
		return inbound_sendmsg(fd, msg, flags);
	}
	return governed_sendmsg(s, fd, msg, flags);
}

/*
 * recvmmsg and sendmmsg on a governed stream socket: one transfer, as recvmsg's or
 * sendmsg's, whose bytes (the messages' msg_len, summed) the framing does not see: it
 * counts them inside a body it is skipping and gives up on the connection anywhere else.
 * The program sees the count of messages. No message asked for: nothing moves, libc's
 * own call.
 */
static size_t mmsg_bytes(const struct mmsghdr *v, int r)
{
	size_t b = 0;

	for (int i = 0; i < r; i++)
		b += v[i].msg_len;
	return b;
}

/* Each of the r messages asked for no bytes (end_asked_none: its 0 is no end of file). */
static bool mmsg_asked_none(const struct mmsghdr *v, int r)
{
	for (int i = 0; i < r; i++)
		if (iov_total(v[i].msg_hdr.msg_iov, (size_t)v[i].msg_hdr.msg_iovlen) != 0)
			return false;
	return true;
}

static TB_SLOW int governed_recvmmsg(struct tb_sock *s, int fd, struct mmsghdr *v, unsigned int n,
				     tb_mmsg_flags flags, struct timespec *t)
{
	struct tb_xfer x;
	int r;

	if (tb_xfer_begin(&x, s, fd, TB_RD, flags & MSG_DONTWAIT) < 0)
		return -1;
	x.sigpipe = false;
	x.peek = flags & NOT_STREAM;
	tb_xfer_data(&x, NULL, NULL, 0);
	r = tb_real.recvmmsg(fd, v, n, flags, t);
	if (r > 0 && mmsg_bytes(v, r) == 0 && mmsg_asked_none(v, r))
		return end_asked_none(&x) < 0 ? -1 : r; /* no bytes asked: no end of file */
	/* One message of no bytes is the end of the stream (a cut reads as one too). */
	return tb_xfer_end(&x, r < 0 ? -1 : (ssize_t)mmsg_bytes(v, r)) < 0 ? -1 : r;
}

TB_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, tb_mmsg_flags flags,
		       struct timespec *t)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL) || n == 0 || v == NULL)
		return tb_real.recvmmsg(fd, v, n, flags, t);
	return governed_recvmmsg(s, fd, v, n, flags, t);
}

static TB_SLOW int governed_sendmmsg(struct tb_sock *s, int fd, struct mmsghdr *v, unsigned int n,
				     tb_mmsg_flags flags)
{
	struct tb_xfer x;
	int r;

	if (tb_xfer_begin(&x, s, fd, TB_WR, flags & MSG_DONTWAIT) < 0)
		return -1;
	x.sigpipe = !(flags & MSG_NOSIGNAL);
	x.peek = false;
	tb_xfer_data(&x, NULL, NULL, 0);
	r = tb_real.sendmmsg(fd, v, n, flags | MSG_NOSIGNAL);
	return tb_xfer_end(&x, r < 0 ? -1 : (ssize_t)mmsg_bytes(v, r)) < 0 ? -1 : r;
}

TB_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, tb_mmsg_flags flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL) || n == 0 || v == NULL)
		return tb_real.sendmmsg(fd, v, n, flags);
	return governed_sendmmsg(s, fd, v, n, flags);
}
