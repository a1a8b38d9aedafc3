/* prop_io.h - deadline propagation on the data path: the request heads a scope=request server
 * reads from its accepted sockets, and the header put into the requests governed sockets send. */
#ifndef TB_PROP_IO_H
#define TB_PROP_IO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "propagate.h"
#include "sock.h"
#include "xfer.h"

/*
 * Both sides keep their state in side tables indexed by fd, never in struct tb_sock: a
 * governed socket that does not propagate pays no byte for it, and an accepted socket is
 * never governed at all. Each table is a fixed array of pointers to chunks of entries,
 * mapped the first time an fd of a chunk needs one - in accept or connect, never on the
 * data path, so a send or a read (which may run in a signal handler) never allocates: an
 * fd whose chunk is missing is simply not followed.
 */

/* Set once, by the first accept of a process whose scope is request: until then the
 * untracked paths of read and write test this flag and nothing else. */
extern atomic_bool tb_pin_on;

static inline bool tb_pin_enabled(void)
{
	return atomic_load_explicit(&tb_pin_on, memory_order_relaxed);
}

/* accept/accept4 returned fd: under scope=request it becomes an inbound connection, its head
 * parser reset. errno is preserved. */
void tb_pin_accepted(int fd);

/* fd is closed (or dup2'ed over): it is no inbound connection any more; a request of the
 * calling thread that it carried is over (its budget closes). errno is preserved. */
void tb_pin_forget(int fd);

/* close_range over [lo, hi] (the process's own, not a vfork child's): tb_pin_forget each. */
void tb_pin_forget_range(unsigned lo, unsigned hi);

/* newfd is now a copy of oldfd (dup, dup2, dup3, F_DUPFD): newfd belongs to oldfd's inbound
 * connection when oldfd has one, with a parser of its own, else to none. errno preserved. */
void tb_pin_dup(int oldfd, int newfd);

/*
 * The program consumed r > 0 bytes of the stream from fd (never MSG_PEEK, MSG_TRUNC, MSG_OOB
 * or MSG_ERRQUEUE bytes): buf, or iov[0..iovcnt). On an inbound connection they go through
 * its head parser: a head that begins opens the calling thread's request budget, a head
 * that ends with a deadline tightens it (propagate on), a malformed value is logged
 * (rate-limited). errno preserved.
 */
void tb_pin_consumed(int fd, const void *buf, const struct iovec *iov, size_t iovcnt, size_t r);

/* The program writes on fd: on an inbound connection the response begins - the calling
 * thread's request budget closes if this connection opened it, and the parser waits for the
 * next request (keep-alive). errno preserved. */
void tb_pin_writing(int fd);

/* connect made fd a governed socket s whose settings propagate: readies its outbound state
 * (maps its chunk; the first request starts with the first byte). errno preserved. */
void tb_pout_connected(int fd, struct tb_sock *s);

/* Whether sends on governed socket s go through tb_pout_send: its rule propagates, and its
 * connection has not shown itself other than HTTP (TB_FS_PLAIN: the planner would send its
 * bytes unchanged, as the plain path does). For the hooks: two loads when propagation is
 * off. */
static inline bool tb_pout_wanted(struct tb_sock *s)
{
	return atomic_load_explicit(&s->set, memory_order_relaxed)->propagate &&
	       !(atomic_load_explicit(&s->frame_state, memory_order_relaxed) & TB_FS_PLAIN);
}

/*
 * A send on a propagating governed socket x->s through fd, after tb_xfer_begin(dontwait =
 * true) and with x->s set: the program's bytes in iov[0..iovcnt), its flags (MSG_NOSIGNAL
 * added by the caller), and optionally its msghdr (name and control go with the first
 * piece). The bytes go out through sendmsg as the planner says (tb_prop_out_plan: the header
 * after a request line), or unchanged (not HTTP, TLS, a session, no deadline). `try_first`:
 * a blocking call on a blocking socket, tried with MSG_DONTWAIT first and the rest sent
 * under a wait (tb_xfer_wait), as every governed send. A request whose remaining budget
 * rounds to 0 ms is not sent: the socket is cut for the deadline and -1 returned (the
 * caller's tb_xfer_end reports it).
 * Returns the count of the program's bytes the kernel took (at most n; on a blocking call
 * never 0 for n > 0: inserted bytes still owed are finished first), or -1 with errno (a
 * non-blocking call whose only progress was inserted bytes: EAGAIN). *stale is set when the
 * fd turned out to name no socket (ENOTSOCK, nothing sent): the caller makes the program's
 * own call.
 */
ssize_t tb_pout_send(struct tb_xfer *x, int fd, const struct iovec *iov, size_t iovcnt,
		     int flags, const struct msghdr *orig, bool try_first, bool *stale);

#endif
