/* xfer.h - the shared body of every hooked transfer on a governed socket (read, recv,
 * recvmsg, write, send, ...): budget steps, wait marking, and the errno on expiry. */
#ifndef TB_XFER_H
#define TB_XFER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "sock.h"

struct tb_xfer {
	struct tb_sock *s; /* NULL: pass the result through untouched */
	int fd;
	enum tb_side side;
	uint32_t gen;      /* the socket's generation at begin: it may be closed under us */
	bool waited;
	bool can_block;    /* the program's socket is blocking (it may still call with DONTWAIT) */
	int rec;           /* the wait's entry in the thread's record (waits.h), -1 none */
	unsigned rec_base;
	bool sigpipe;      /* the program's send would raise SIGPIPE (no MSG_NOSIGNAL of its own) */
	bool peek;         /* MSG_PEEK, MSG_OOB, MSG_ERRQUEUE: not the stream's bytes, not fed */
	int saved_errno;
	int *errp;         /* &errno of the calling thread (set by tb_xfer_begin) */
	int64_t now;       /* when the call began (set for sends and blocking reads) */
	/* What moved, for the framing (tb_xfer_data): one buffer, or an iovec; neither: the
	 * bytes are unseen (framing counts them inside a body, gives up elsewhere). */
	const void *buf;
	const struct iovec *iov;
	size_t iovcnt;
};

/* The transfer's bytes, after a successful tb_xfer_begin and before tb_xfer_end (every hook
 * must say them, and `peek`): buf, or iov[0..iovcnt). */
static inline void tb_xfer_data(struct tb_xfer *x, const void *buf, const struct iovec *iov,
				size_t iovcnt)
{
	x->buf = buf;
	x->iov = iov;
	x->iovcnt = iovcnt;
}

/* The pieces of iov[0..cnt) from byte `skip` on, at most max of them, into out[]; their
 * byte count in *bytes. Returns how many pieces. (The rest of a send that moved `skip`
 * bytes already.) */
static inline size_t tb_iov_from(const struct iovec *iov, size_t cnt, size_t skip,
				 struct iovec *out, size_t max, size_t *bytes)
{
	size_t k = 0;

	*bytes = 0;
	for (size_t i = 0; i < cnt && k < max; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		out[k].iov_base = (char *)iov[i].iov_base + skip;
		out[k].iov_len = iov[i].iov_len - skip;
		*bytes += out[k].iov_len;
		skip = 0;
		k++;
	}
	return k;
}

/*
 * Before the real call. `dontwait` is MSG_DONTWAIT in the call's flags.
 * Returns 0: make the real call, then pass its result through tb_xfer_end.
 * Returns -1 with errno set (ETIMEDOUT, or EAGAIN with on_timeout=eagain): the socket has
 * expired, or the call's deadline has passed; nothing was sent or read.
 */
int tb_xfer_begin(struct tb_xfer *x, struct tb_sock *s, int fd, enum tb_side side,
		  bool dontwait);

/*
 * After the real call returned r (errno as it left it). Returns what the program sees: r
 * with the caller's original errno on success; -1 ETIMEDOUT when the socket expired
 * during the call (a shut-down socket reads as EOF, which must not pass for one).
 * Governed sends are made with MSG_NOSIGNAL, so that a send cut by the watchdog's shutdown
 * cannot kill the program with SIGPIPE; a genuine EPIPE raises it here when the program
 * asked for it (x->sigpipe), exactly as the kernel would have.
 */
ssize_t tb_xfer_end(struct tb_xfer *x, ssize_t r);

/*
 * A send tried at once without blocking (tb_xfer_begin with dontwait) moved fewer than the
 * program's blocking call must: the rest blocks, as the program asked, under a wait that
 * begins now. 0: go on (make the blocking call for the rest; x->s may have become NULL:
 * the socket was closed meanwhile, the call is the program's own). -1: the wait expired
 * as it began: the socket is cut, and the expiry is not reported yet (errno untouched):
 * tb_xfer_end of a call that moved nothing reports it, or the next call on the socket
 * does - so that under on_timeout=eagain the program's first report is EAGAIN.
 */
int tb_xfer_wait(struct tb_xfer *x);

/*
 * Whether a multiplexed wait (poll, select, epoll) for reading governs s, which began
 * generation gen. Not after a TLS connection's answer came back (framing ANSWERED): HTTP
 * inside TLS is invisible, and an idle pooled connection an event loop watches for the
 * server's close looks like a stalled body - timebox stops governing those waits, counts
 * the connection (tls_answered_wait, once per connection) and, at log_level = info only,
 * says so once per process. Blocking reads stay governed.
 */
bool tb_xfer_polled_read_governed(struct tb_sock *s, uint32_t gen);

/* -1 with the timeout errno, telling the thread's budget once. For every hook. With
 * on_timeout=eagain the first report on a socket is EAGAIN, every later one ETIMEDOUT. */
int tb_xfer_timed_out(struct tb_sock *s);


/* A CONNECTING socket whose handshake the kernel reports done (getpeername succeeds: SO_ERROR
 * and a select result cannot tell a connected socket from one still connecting or failed)
 * becomes OPEN. One system call, made only while the socket is CONNECTING. errno kept. */
void tb_xfer_confirm_open(struct tb_sock *s, int fd);

/*
 * A transfer begun on x->fd found the fd is no socket at all (a send standing in for the
 * program's write failed with ENOTSOCK): the slot is stale. Ends the transfer's wait, drops
 * the slot, and restores the caller's errno, so the hook can make the program's own call.
 */
void tb_xfer_abandon_stale(struct tb_xfer *x);

#endif
