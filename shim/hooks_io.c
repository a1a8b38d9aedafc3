/* hooks_io.c - the data-moving entry points: read/write, recv/send and their relatives,
 * and the FORTIFY variants. Each is: untracked fd -> libc at once; else xfer begin/end. */
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdtable.h"
#include "hooks.h"
#include "real.h"
#include "xfer.h"

/* glibc's fortify failure handler; aborts with "buffer overflow detected". */
extern void __chk_fail(void) __attribute__((noreturn));
/* The FORTIFY entry points (no public header declares them). */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);

#define GOVERNED(fd, side, dontwait, call) GOVERNED_SEND(fd, side, dontwait, false, call)

/* `sigpipe`: the program's own call would raise SIGPIPE on EPIPE (see tb_xfer_end). */
#define GOVERNED_SEND(fd, side, dontwait, sigpipe_, call)                                   \
	do {                                                                                \
		struct tb_xfer x_;                                                          \
		if (tb_xfer_begin(&x_, s, (fd), (side), (dontwait)) < 0)                    \
			return -1;                                                          \
		x_.sigpipe = (sigpipe_);                                                    \
		return tb_xfer_end(&x_, (call));                                            \
	} while (0)

TB_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.read(fd, buf, n);
	GOVERNED(fd, TB_RD, false, tb_real.read(fd, buf, n));
}

TB_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}

TB_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.write(fd, buf, n);
	/* write(2) on a connected stream socket is send(2) with no flags. */
	GOVERNED_SEND(fd, TB_WR, false, true, tb_real.send(fd, buf, n, MSG_NOSIGNAL));
}

TB_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.readv(fd, iov, n);
	GOVERNED(fd, TB_RD, false, tb_real.readv(fd, iov, n));
}

TB_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.writev(fd, iov, n);
	/* writev(2) on a connected stream socket is sendmsg(2) with no flags. */
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n > 0 ? (size_t)n : 0 };

	if (n < 0)
		return tb_real.writev(fd, iov, n); /* let libc report EINVAL */
	GOVERNED_SEND(fd, TB_WR, false, true, tb_real.sendmsg(fd, &m, MSG_NOSIGNAL));
}

TB_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.recv(fd, buf, n, flags);
	GOVERNED(fd, TB_RD, flags & MSG_DONTWAIT, tb_real.recv(fd, buf, n, flags));
}

TB_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		__chk_fail();
	return recv(fd, buf, n, flags);
}

TB_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.send(fd, buf, n, flags);
	GOVERNED_SEND(fd, TB_WR, flags & MSG_DONTWAIT, !(flags & MSG_NOSIGNAL),
		      tb_real.send(fd, buf, n, flags | MSG_NOSIGNAL));
}

TB_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
			   socklen_t *alen)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.recvfrom(fd, buf, n, flags, addr, alen);
	GOVERNED(fd, TB_RD, flags & MSG_DONTWAIT,
		 tb_real.recvfrom(fd, buf, n, flags, addr, alen));
}

TB_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				 struct sockaddr *addr, socklen_t *alen)
{
	if (n > buflen)
		__chk_fail();
	return recvfrom(fd, buf, n, flags, addr, alen);
}

TB_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			 const struct sockaddr *addr, socklen_t alen)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.sendto(fd, buf, n, flags, addr, alen);
	GOVERNED_SEND(fd, TB_WR, flags & MSG_DONTWAIT, !(flags & MSG_NOSIGNAL),
		      tb_real.sendto(fd, buf, n, flags | MSG_NOSIGNAL, addr, alen));
}

TB_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.recvmsg(fd, msg, flags);
	GOVERNED(fd, TB_RD, flags & MSG_DONTWAIT, tb_real.recvmsg(fd, msg, flags));
}

TB_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct tb_sock *s = tb_fd_sock(fd);

	if (TB_LIKELY(s == NULL))
		return tb_real.sendmsg(fd, msg, flags);
	GOVERNED_SEND(fd, TB_WR, flags & MSG_DONTWAIT, !(flags & MSG_NOSIGNAL),
		      tb_real.sendmsg(fd, msg, flags | MSG_NOSIGNAL));
}
