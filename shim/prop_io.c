/* prop_io.c - deadline propagation on the data path: inbound request heads (scope=request)
 * and the remaining budget written into outbound HTTP/1.x requests. Side tables by fd. */
#include "prop_io.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>

#include "clock.h"
#include "configure.h"
#include "hooks.h"
#include "init.h"
#include "log.h"
#include "real.h"
#include "request.h"
#include "thread.h"

#define FD_LIMIT (1 << 20) /* the fd table's own bound (fdtable.c) */
#define CHUNK 256
#define NCHUNKS (FD_LIMIT / CHUNK)

/* Maps one chunk of `size` bytes (zeroed). NULL when the mapping fails: not followed. */
static void *chunk_map(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Installs a chunk in *slot unless another thread did first. Returns the one in place. */
static void *chunk_install(_Atomic(void *) *slot, size_t size)
{
	void *c = atomic_load_explicit(slot, memory_order_acquire), *mine, *none = NULL;

	if (c != NULL)
		return c;
	mine = chunk_map(size);
	if (mine == NULL)
		return NULL;
	if (atomic_compare_exchange_strong(slot, &none, mine))
		return mine;
	munmap(mine, size);
	return none;
}

/* Takes an entry's try-flag, waiting for it: only from accept, connect and dup (never a
 * data path), and the holder is a feed of microseconds. */
static void flag_take(atomic_uchar *fl)
{
	unsigned char free_ = 0;

	while (!atomic_compare_exchange_weak(fl, &free_, 1)) {
		free_ = 0;
		sched_yield();
	}
}

static bool flag_try(atomic_uchar *fl)
{
	unsigned char free_ = 0;

	return atomic_compare_exchange_strong(fl, &free_, 1);
}

static void flag_drop(atomic_uchar *fl)
{
	atomic_store_explicit(fl, 0, memory_order_release);
}

/* ------------------------------------------------------------------------------------ */
/* Inbound: accepted sockets of a scope=request process                                */

/*
 * One fd of an inbound connection. `conn` is the connection's id (0: not inbound), shared by
 * the fds dup'ed from the accepted one, so that a pre-fork or inetd-style server reading its
 * request on fd 0 and writing the response on fd 1 closes the budget it opened. The parser,
 * `opened` and `dirty` are written only under `flag` (a second thread reading the same
 * connection at once skips its bytes: the head is one thread's).
 */
struct pin_entry {
	_Atomic uint64_t conn;
	atomic_uchar flag;
	atomic_bool dirty; /* bytes fed since the last reset */
	bool opened;       /* the head under way opened a budget (tb_req_inbound_open) */
	struct tb_prop_in in;
};

atomic_bool tb_pin_on;
static _Atomic(void *) pin_chunks[NCHUNKS];
static _Atomic uint64_t pin_next_conn;
static atomic_int pin_hiwater = -1;

/* The inbound connection whose request the calling thread is serving, and the fd its head
 * came through (whose parser waits for the next request once the response starts), live in
 * the thread's request state (tb_req_inbound_conn): the library's static TLS has no room
 * to spare (regress/dlopen_library). */

static struct pin_entry *pin_entry(int fd)
{
	struct pin_entry *c;

	if ((unsigned)fd >= FD_LIMIT)
		return NULL;
	c = atomic_load_explicit(&pin_chunks[fd / CHUNK], memory_order_acquire);
	return c == NULL ? NULL : &c[fd % CHUNK];
}

static struct pin_entry *pin_ensure(int fd)
{
	struct pin_entry *c;
	int hi;

	if ((unsigned)fd >= FD_LIMIT)
		return NULL;
	c = chunk_install(&pin_chunks[fd / CHUNK], CHUNK * sizeof(struct pin_entry));
	if (c == NULL)
		return NULL;
	hi = atomic_load(&pin_hiwater);
	while (fd > hi && !atomic_compare_exchange_weak(&pin_hiwater, &hi, fd))
		;
	return &c[fd % CHUNK];
}

/* Under the entry's flag: the next byte read begins a new request head. */
static void pin_reset(struct pin_entry *e)
{
	tb_prop_in_reset(&e->in);
	e->opened = false;
	atomic_store_explicit(&e->dirty, false, memory_order_relaxed);
}

/* Makes fd (an entry already mapped) an fd of connection `conn` (0: of none). */
static void pin_assign(struct pin_entry *e, uint64_t conn)
{
	flag_take(&e->flag);
	pin_reset(e);
	atomic_store(&e->conn, conn);
	flag_drop(&e->flag);
}

void tb_pin_accepted(int fd)
{
	int saved = errno;
	struct pin_entry *e;

	tb_init();
	if (tb_default_settings.scope != TB_SCOPE_REQUEST || tb_foreign_process())
		goto out;
	e = pin_ensure(fd);
	if (e == NULL)
		goto out; /* no memory for it: this connection opens no budget */
	pin_assign(e, atomic_fetch_add(&pin_next_conn, 1) + 1);
	if (!tb_pin_enabled())
		atomic_store(&tb_pin_on, true);
out:
	errno = saved;
}

/* The calling thread's request on connection c is over (response begun, or closed). */
static void req_end(uint64_t c)
{
	if (c != 0 && tb_req_inbound_conn(NULL) == c) {
		tb_req_inbound_set_conn(0, -1);
		tb_req_inbound_close();
	}
}

void tb_pin_forget(int fd)
{
	struct pin_entry *e = pin_entry(fd);
	int saved = errno;
	uint64_t c;

	if (e == NULL || atomic_load_explicit(&e->conn, memory_order_relaxed) == 0)
		return;
	if (tb_foreign_process()) /* a vfork child: the parent's table is not its own */
		goto out;
	c = atomic_exchange(&e->conn, 0);
	req_end(c);
out:
	errno = saved;
}

/* close_range over [lo, hi]: each inbound fd in it is forgotten. */
void tb_pin_forget_range(unsigned lo, unsigned hi)
{
	int top = atomic_load(&pin_hiwater);

	for (unsigned fd = lo; top >= 0 && fd <= hi && fd <= (unsigned)top; fd++)
		tb_pin_forget((int)fd);
}

void tb_pin_dup(int oldfd, int newfd)
{
	struct pin_entry *from = pin_entry(oldfd), *to;
	uint64_t c = from == NULL ? 0 : atomic_load(&from->conn), was;
	int saved = errno;

	if (newfd < 0 || newfd == oldfd)
		return;
	to = c != 0 ? pin_ensure(newfd) : pin_entry(newfd);
	if (to == NULL || (c == 0 && atomic_load(&to->conn) == 0))
		goto out;
	if (tb_foreign_process())
		goto out;
	was = atomic_load(&to->conn);
	if (was != 0 && was != c)
		req_end(was); /* dup2 over an inbound fd closed it */
	pin_assign(to, c);
out:
	errno = saved;
}

/* A logfmt-safe copy of a header's text (quotes, backslashes, controls become '?'). */
static void safe_copy(char *dst, size_t size, const char *src)
{
	size_t i = 0;

	for (; src[i] != '\0' && i + 1 < size; i++) {
		unsigned char ch = (unsigned char)src[i];

		dst[i] = ch < 0x21 || ch > 0x7e || ch == '"' || ch == '\\' ? '?' : (char)ch;
	}
	dst[i] = '\0';
}

static __attribute__((noinline, cold)) void log_bad(const struct tb_prop_deadline *d, int fd)
{
	char name[sizeof(d->bad_name)], value[sizeof(d->bad_value)], body[256];

	safe_copy(name, sizeof(name), d->bad_name);
	safe_copy(value, sizeof(value), d->bad_value);
	snprintf(body, sizeof(body), "event=bad_deadline_header fd=%d header=%s value=\"%s\" "
		 "effect=\"ignored: it never extends a budget\"", fd, name, value);
	tb_log_error(body);
}

/* The head under way on e (connection c, through fd) began: the thread's budget opens. */
static void head_opens(struct pin_entry *e, uint64_t c, int fd)
{
	tb_req_inbound_open(tb_now(), tb_default_settings.deadline_ns);
	e->opened = true;
	tb_req_inbound_set_conn(c, fd);
}

/* The head ended: its deadline (propagate on) tightens the budget the thread opened. */
static void head_done(struct pin_entry *e, uint64_t c, int fd)
{
	const struct tb_prop_deadline *d;

	if (!tb_default_settings.propagate || tb_req_inbound_conn(NULL) != c)
		return;
	d = tb_prop_in_result(&e->in);
	if (d->ns >= 0)
		tb_req_inbound_tighten(d);
	if (TB_UNLIKELY(d->bad))
		log_bad(d, fd);
}

static void pin_feed(struct pin_entry *e, uint64_t c, int fd, const void *p, size_t n)
{
	int st;

	if (n == 0)
		return;
	st = tb_prop_in_feed(&e->in, tb_default_settings.deadline_header, p, n);
	if (!atomic_load_explicit(&e->dirty, memory_order_relaxed))
		atomic_store_explicit(&e->dirty, true, memory_order_relaxed);
	if (st == TB_PIN_HEAD_STARTED || (st == TB_PIN_HEAD_DONE && !e->opened))
		head_opens(e, c, fd);
	if (st == TB_PIN_HEAD_DONE)
		head_done(e, c, fd);
	/* Bytes that began like a request line and proved not to be one (a RESP command, a
	 * custom protocol): only an HTTP/1.x request opens a budget, and this one may never
	 * get a response to close it (regress/propagate_inbound_not_http). */
	if (st == TB_PIN_NOT_HTTP && e->opened) {
		e->opened = false;
		req_end(c);
	}
}

void tb_pin_consumed(int fd, const void *buf, const struct iovec *iov, size_t iovcnt, size_t r)
{
	struct pin_entry *e = pin_entry(fd);
	uint64_t c;
	int saved;

	if (e == NULL || (c = atomic_load_explicit(&e->conn, memory_order_acquire)) == 0)
		return;
	saved = errno;
	if (!flag_try(&e->flag))
		goto out; /* another thread is reading this connection: its head is theirs */
	if (atomic_load(&e->conn) == c) {
		if (buf != NULL) {
			pin_feed(e, c, fd, buf, r);
		} else {
			for (size_t i = 0; iov != NULL && i < iovcnt && r > 0; i++) {
				size_t k = iov[i].iov_len < r ? iov[i].iov_len : r;

				pin_feed(e, c, fd, iov[i].iov_base, k);
				r -= k;
			}
		}
	}
	flag_drop(&e->flag);
out:
	errno = saved;
}

/* Under no flag: e (connection c) waits for the next request's head, unless busy. */
static void pin_rearm(struct pin_entry *e, uint64_t c)
{
	if (e == NULL || !atomic_load_explicit(&e->dirty, memory_order_relaxed) ||
	    !flag_try(&e->flag))
		return;
	if (atomic_load(&e->conn) == c)
		pin_reset(e);
	flag_drop(&e->flag);
}

void tb_pin_writing(int fd)
{
	struct pin_entry *e = pin_entry(fd);
	uint64_t c;
	int saved, head_fd = -1;

	if (e == NULL || (c = atomic_load_explicit(&e->conn, memory_order_relaxed)) == 0)
		return;
	saved = errno;
	if (tb_req_inbound_conn(&head_fd) == c) {
		req_end(c);
		if (head_fd != fd)
			pin_rearm(pin_entry(head_fd), c);
	}
	pin_rearm(e, c);
	errno = saved;
}

/* ------------------------------------------------------------------------------------ */
/* Outbound: governed sockets whose rule propagates                                     */

/* One fd of a propagating socket: the planner's state, for the socket (s, gen) it was set
 * up for; an fd found holding another socket's state starts afresh. Under `flag`. */
/* What the connection's first request made of it: its request line read whole (HTTP), or
 * given up before that (not HTTP: TLS, Redis, PostgreSQL, a binary protocol). A connection
 * does not change protocol in the other direction - an HTTP connection may end up carrying
 * a tunnel, but one that began as something else never starts speaking HTTP/1.x requests
 * - so a NOT_HTTP connection's sends are no longer scanned at all: without this, each of
 * its requests was scanned again from its first byte, up to the method's bound. */
enum { POUT_UNKNOWN, POUT_HTTP, POUT_NOT_HTTP };

struct pout_entry {
	struct tb_sock *s;
	uint32_t gen;
	atomic_uchar flag;
	uint8_t verdict; /* POUT_*, for this connection (s, gen) */
	struct tb_prop_out o;
};

static _Atomic(void *) pout_chunks[NCHUNKS];

void tb_pout_connected(int fd, struct tb_sock *s)
{
	struct pout_entry *c, *e;
	int saved = errno;

	if ((unsigned)fd >= FD_LIMIT)
		return;
	c = chunk_install(&pout_chunks[fd / CHUNK], CHUNK * sizeof(struct pout_entry));
	if (c != NULL) {
		e = &c[fd % CHUNK];
		flag_take(&e->flag);
		e->s = s;
		e->gen = TB_ST_GEN(tb_sock_word(s));
		e->verdict = POUT_UNKNOWN;
		tb_prop_out_reset(&e->o);
		flag_drop(&e->flag);
	}
	errno = saved;
}

/* The connection is not HTTP: its next sends take the plain path (tb_pout_wanted). */
static void not_http(struct tb_sock *s)
{
	atomic_fetch_or_explicit(&s->frame_state, TB_FS_PLAIN, memory_order_relaxed);
}

/* The entry for a send on fd (socket s, generation gen), its flag held; NULL: send the bytes
 * unchanged (no chunk, or another thread is sending on the socket). */
static struct pout_entry *pout_take(int fd, struct tb_sock *s, uint32_t gen)
{
	struct pout_entry *c, *e;

	if ((unsigned)fd >= FD_LIMIT)
		return NULL;
	c = atomic_load_explicit(&pout_chunks[fd / CHUNK], memory_order_acquire);
	if (c == NULL)
		return NULL;
	e = &c[fd % CHUNK];
	if (!flag_try(&e->flag))
		return NULL;
	if (e->s != s || e->gen != gen) { /* a dup of the socket, or a number reused */
		e->s = s;
		e->gen = gen;
		e->verdict = POUT_UNKNOWN;
		tb_prop_out_reset(&e->o);
	}
	if (e->verdict == POUT_NOT_HTTP) {
		flag_drop(&e->flag);
		not_http(s);
		return NULL; /* nothing can be pending: no request line ever ended */
	}
	return e;
}

#define IN_MAX 64   /* the program's pieces planned per sendmsg (more: the next round) */
#define OUT_MAX (IN_MAX + TB_PROP_IOV_EXTRA)

/* Remaining ms of the socket's call at now (-1: no deadline: no header). */
static int64_t remaining_ms(struct tb_sock *s, int64_t now)
{
	int64_t dl = atomic_load_explicit(&s->call_deadline, memory_order_relaxed);

	if (dl == TB_NEVER)
		return -1;
	return dl > now ? (dl - now) / 1000000 : 0;
}

/* Whether the send on s begins a new request (the planner then expects a request line):
 * the framing says the next send starts a call, or, unframed, a response byte was read. */
static bool starts_request(struct tb_sock *s, unsigned fs)
{
	if ((fs & TB_FS_STATE) > TB_FRAME_RAW)
		return (fs & TB_FS_STARTS) != 0;
	return atomic_load_explicit(&s->got_bytes, memory_order_relaxed);
}

ssize_t tb_pout_send(struct tb_xfer *x, int fd, const struct iovec *iov, size_t iovcnt,
		     int flags, const struct msghdr *orig, bool try_first, bool *stale)
{
	struct tb_sock *s = x->s;
	const struct tb_settings *set;
	struct pout_entry *e;
	struct iovec in[IN_MAX], out[OUT_MAX];
	char scratch[TB_PROP_SCRATCH];
	size_t n = 0, done = 0;
	bool blocking = try_first, dontwait = try_first, first = true;
	unsigned fs = atomic_load_explicit(&s->frame_state, memory_order_relaxed);
	int64_t rem = remaining_ms(s, x->now);
	ssize_t rc = -1;

	*stale = false;
	for (size_t i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	/* A rule's forced protocol other than HTTP: never looked at (TLS and the others the
	 * planner itself recognises from their first bytes and leaves alone). */
	set = atomic_load_explicit(&s->set, memory_order_relaxed);
	e = set->protocol == TB_PROTO_AUTO || set->protocol == TB_PROTO_HTTP ?
		    pout_take(fd, s, x->gen) : NULL;
	if (e != NULL && !tb_prop_out_pending(&e->o)) {
		/* Inserted bytes still owed go out first whatever comes; otherwise a session
		 * sends unchanged, and a new request is looked for. */
		if ((fs & TB_FS_STATE) == TB_FRAME_SESSION) {
			flag_drop(&e->flag);
			e = NULL;
		} else if (starts_request(s, fs)) {
			tb_prop_out_reset(&e->o);
		}
	}
	if (e != NULL && rem == 0) {
		/* Less than 1 ms left: a downstream told "0" has nothing to work with, and the
		 * request must not leave (the budget step refuses from the deadline on). */
		int64_t unused;

		flag_drop(&e->flag);
		if (tb_sock_expire(s, x->gen, TB_WR, TB_PHASE_DEADLINE, fd, true, tb_now(),
				   &unused) <= 0)
			errno = ETIMEDOUT;
		return -1;
	}
	if (rem < 0) /* no deadline: followed all the same, nothing written (the planner's rule) */
		rem = TB_PROP_MS_MAX + 1;
	for (;;) {
		struct msghdr m = { 0 };
		size_t total, planned = 0;
		int inn = (int)tb_iov_from(iov, iovcnt, done, in, IN_MAX, &total), outn = 0;
		ssize_t k;

		if (orig != NULL && first) {
			m.msg_name = orig->msg_name;
			m.msg_namelen = orig->msg_namelen;
			m.msg_control = orig->msg_control;
			m.msg_controllen = orig->msg_controllen;
		}
		if (e != NULL)
			outn = tb_prop_out_plan(&e->o, set->deadline_header, rem,
						in, inn, out, OUT_MAX, scratch);
		m.msg_iov = outn > 0 ? out : in;
		m.msg_iovlen = (size_t)(outn > 0 ? outn : inn);
		for (size_t i = 0; i < (size_t)m.msg_iovlen; i++)
			planned += m.msg_iov[i].iov_len;
		k = tb_real.sendmsg(fd, &m, dontwait ? flags | MSG_DONTWAIT : flags);
		if (k < 0) {
			if (e != NULL)
				tb_prop_out_sent(&e->o, 0);
			if (errno == ENOTSOCK && first) {
				*stale = true;
				goto out;
			}
			if (try_first && dontwait && (errno == EAGAIN || errno == EWOULDBLOCK))
				goto wait;
			rc = done > 0 ? (ssize_t)done : -1;
			goto out;
		}
		first = false;
		done += e != NULL ? tb_prop_out_sent(&e->o, (size_t)k) : (size_t)k;
		if (done >= n) {
			rc = (ssize_t)done;
			goto out;
		}
		if (!blocking) {
			/* Non-blocking: a round taken whole goes on (the program's pieces go
			 * IN_MAX at a time; natively one call takes them all while there is
			 * room). Else, as natively, a short count; none of the program's bytes
			 * (only inserted ones, owed no more or still owed): nothing taken yet. */
			if ((size_t)k == planned && done > 0)
				continue;
			if (done == 0)
				errno = EAGAIN;
			rc = done > 0 ? (ssize_t)done : -1;
			goto out;
		}
		if (!dontwait && (size_t)k < planned && done > 0) {
			rc = (ssize_t)done; /* a blocking send cut short (a signal): as natively */
			goto out;
		}
		if (!dontwait)
			continue;
wait:
		/* The socket's buffer is full: the rest blocks, under a wait begun now. */
		dontwait = false;
		if (tb_xfer_wait(x) < 0) {
			if (done > 0)
				errno = x->saved_errno; /* the cut is reported by the next call */
			rc = done > 0 ? (ssize_t)done : -1;
			goto out;
		}
	}
out:
	if (e != NULL) {
		if (e->verdict == POUT_UNKNOWN) {
			int v = tb_prop_out_verdict(&e->o);

			e->verdict = v > 0 ? POUT_HTTP : v < 0 ? POUT_NOT_HTTP : POUT_UNKNOWN;
		}
		flag_drop(&e->flag);
		if (e->verdict == POUT_NOT_HTTP)
			not_http(s);
	}
	return rc;
}
