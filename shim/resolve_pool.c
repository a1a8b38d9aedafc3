/* resolve_pool.c - the resolver threads: a bounded lookup runs on one of them while its caller
 * waits at most until the lookup's expiry; an abandoned lookup finishes there and is freed. */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "futex.h"
#include "libc_compat.h"
#include "log.h"
#include "resolve.h"
#include "thread.h"

/*
 * Why threads of our own. glibc's resolver cannot be interrupted: it waits on its own socket
 * with its own poll (internal calls the hooks never see), retries on EINTR, and its only
 * knobs (_res.retrans, options timeout:) count whole seconds. getaddrinfo_a runs the same
 * lookup on glibc's helper threads, but gai_cancel cannot stop one under way, its queue
 * keeps every abandoned request until it has run, and it covers getaddrinfo only. So the
 * caller hands the lookup to a thread here and waits for it with the lookup's deadline;
 * when that passes it returns EAI_AGAIN and leaves the lookup to finish (the resolver's own
 * timeouts end it), after which the thread frees the result.
 *
 * The caller waits on a futex word of the request, holding no lock and no condition
 * variable: a signal handler may leave the lookup with siglongjmp (the alarm() timeout
 * idiom of old programs), and a jump out of pthread_cond_timedwait left the pool's lock
 * taken back by the condition variable's cleanup - every later lookup of the process hung -
 * and a cancellation buffer registered on the abandoned stack, which a later pthread_exit
 * of the thread unwound into (regress/resolve_jump_out). The request waited on is the
 * thread's value of a key: the jump (hooks_jump.c) and the thread's exit (a cancellation
 * in the wait, a pthread_exit from a handler) give it up from there.
 *
 * Bounds: at most POOL_MAX threads; one that has been idle IDLE_NS exits. A lookup still
 * queued when its caller gives up is removed unsent. So a dead resolver costs at most
 * POOL_MAX threads, each holding one lookup until glibc gives up on it (timeout x attempts),
 * and no fd or memory beyond those lookups. While all of them are stuck, further lookups
 * wait in the queue and expire there: the resolver is down for them too.
 *
 * Stacks: each thread runs on a stack of ours, one per slot, mapped at the slot's first
 * thread and kept for the next (never unmapped: at most POOL_MAX stacks of the default
 * size, as glibc's cache of stacks would keep). glibc keeps a stack it allocated for the
 * next thread it creates, with the struct pthread at its top, and that struct holds the
 * thread's resolver state (res, reached through _res), which a new thread on a cached
 * stack inherits as it was. In a child forked while a resolver thread was inside a lookup,
 * the first thread the child created - a resolver thread, or the child's own - inherited
 * the socket that lookup waited on, by number: its queries went out on the parent's socket
 * and failed, and on a file the child had opened under that number, which glibc then
 * closed. A stack the caller supplies is never cached by glibc, and the struct pthread
 * placed on it is cleared at each creation, so every resolver thread starts with fresh
 * resolver state, and no thread of the child starts on a resolver thread's stack. A slot's
 * stack is given to a new thread only once the previous one has been joined.
 *
 * Lock rules: pool.lock guards the queue, the counters, the slots, and every request's
 * state and abandoned flag. A request belongs to its caller until it gives up on it
 * (abandoned set while RUNNING): then to the thread running it, which frees it.
 */
#define POOL_MAX 16
#define IDLE_NS (5 * TB_NS_PER_S)
#define HOSTENT_BUF_START 1024
#define HOSTENT_BUF_MAX (1 << 20)
#define BUF_ALIGN 16
#define RESOLVER_STACK_MIN ((size_t)256 * 1024) /* glibc's resolver wants tens of KB */
#define NO_HERR INT_MIN /* h_errno, *h_errnop: libc did not write it */

enum kind { K_ADDRINFO, K_HOSTENT, K_HOSTENT_R, K_NAMEINFO };
enum state { QUEUED, RUNNING, DONE };

struct req {
	struct req *next;
	atomic_uint done;     /* 1 once DONE: the caller's futex word */
	int cancel_type;      /* the caller's, while its wait runs asynchronously cancellable */
	enum state state;
	bool abandoned;
	enum kind kind;
	bool two;             /* gethostbyname2*: af applies */
	bool byaddr;          /* gethostbyaddr*: addr, addrlen and af */
	int af;
	unsigned char addr[16];
	socklen_t addrlen;
	const char *node, *service;
	bool has_hints;
	struct addrinfo hints;
	int rc, err, herr;    /* what the lookup returned; errno and h_errno after it */
	int tls_herr;         /* K_HOSTENT*: the thread's h_errno after it, or NO_HERR */
	struct addrinfo *res;
	struct hostent he, *result;
	char *mem, *buf;      /* buf: mem aligned like the caller's buffer (K_HOSTENT_R) */
	size_t buflen;
	struct sockaddr_storage sa; /* K_NAMEINFO: the address */
	socklen_t salen, hostlen, servlen;
	char *host, *serv;    /* in mem; NULL when the caller asked for none */
	int flags;
	char strings[];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t work;
	struct req *head, *tail;
	int threads, idle, queued;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };
/* A resolver thread's place and its stack (see "Stacks" above). */
enum slot_state {
	SLOT_FREE, /* no thread: the stack, when mapped, is free for the next */
	SLOT_LIVE, /* a thread runs on the stack */
	SLOT_GONE  /* the thread has left the pool and is ending: join it before reuse */
};
static struct slot {
	enum slot_state state;
	pthread_t thread;
	char *map; /* guard page, then the stack; NULL until the slot's first thread */
} slots[POOL_MAX];
static size_t stack_size, guard_size;

static pthread_condattr_t mono;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
/* The request the thread waits for, while it waits (see the top). */
static pthread_key_t waiting_key;
static atomic_bool have_waiting_key;
_Thread_local bool tb_resolver_thread __attribute__((tls_model("initial-exec")));
static bool pool_ready;

/*
 * The results of the non-reentrant calls, kept as glibc keeps them: one per function
 * (gethostbyname, gethostbyname2, gethostbyaddr), process-wide, overwritten by the next call of the same
 * function from any thread and never freed otherwise. A result handed from a worker thread
 * to another, or held across a call of the other function, stays readable, as natively.
 * The buffer only grows, in powers of two from HOSTENT_BUF_START, and a buffer it outgrew is
 * kept rather than freed (glibc reallocs its own): a racing reader of the previous result
 * (another thread's, or timebox's learning of names) reads stale bytes, never freed memory.
 * That keeps at most one buffer per size up to HOSTENT_BUF_MAX, under 2 MiB per function in
 * the worst case, one of 1 KiB for usual answers.
 */
#define HOSTENT_SIZES 11 /* HOSTENT_BUF_START << 10 == HOSTENT_BUF_MAX */
static struct static_result {
	pthread_mutex_t lock;
	struct hostent he;
	char *buf;
	size_t len;
	char *outgrown[HOSTENT_SIZES];
	int n_outgrown;
} static_results[3] = { { .lock = PTHREAD_MUTEX_INITIALIZER },
			{ .lock = PTHREAD_MUTEX_INITIALIZER },
			{ .lock = PTHREAD_MUTEX_INITIALIZER } };

static void free_req(struct req *r)
{
	if (r == NULL)
		return;
	if (r->res != NULL)
		freeaddrinfo(r->res);
	free(r->mem);
	free(r);
}

static void waiting_gone(void *r);

static void pool_init(void)
{
	pthread_attr_t attr;
	long page = getpagesize();

	/* The size of the stack glibc would give the thread (the default attributes'), at
	 * least RESOLVER_STACK_MIN. Neither sysconf nor PTHREAD_STACK_MIN: glibc's headers
	 * make both a call of __sysconf, which musl does not have, and the glibc build must
	 * load (and stay inactive) in a musl program. */
	guard_size = page > 0 ? (size_t)page : 4096;
	pthread_attr_init(&attr);
	if (pthread_attr_getstacksize(&attr, &stack_size) != 0 ||
	    stack_size < RESOLVER_STACK_MIN)
		stack_size = RESOLVER_STACK_MIN;
	pthread_attr_destroy(&attr);
	stack_size = (stack_size + guard_size - 1) / guard_size * guard_size;
	atomic_store(&have_waiting_key, pthread_key_create(&waiting_key, waiting_gone) == 0);
	pthread_condattr_init(&mono);
	pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
	pthread_cond_init(&pool.work, &mono);
	pool_ready = true;
}

/*
 * A child of fork() has none of the resolver threads, and a lock one of them held stays held
 * there: start again empty. The lookups of the parent's queue are its callers' and the
 * threads' (neither exists here): their memory is dropped, not freed.
 */
void tb_resolve_pool_fork_child(void)
{
	/* The slots' threads are not here, and glibc has forgotten them (a stack the caller
	 * supplied is not its to keep): their stacks are free for the child's resolver threads.
	 * Unless the forking thread is itself a resolver thread (an NSS module's fork): it runs
	 * on one of them, so the child leaves them all alone and maps new ones. */
	for (size_t i = 0; i < POOL_MAX; i++) {
		slots[i].state = SLOT_FREE;
		if (tb_resolver_thread)
			slots[i].map = NULL;
	}
	pthread_mutex_init(&pool.lock, NULL);
	for (size_t i = 0; i < sizeof(static_results) / sizeof(static_results[0]); i++)
		pthread_mutex_init(&static_results[i].lock, NULL);
	if (pool_ready)
		pthread_cond_init(&pool.work, &mono);
	pool.head = pool.tail = NULL;
	pool.threads = pool.idle = pool.queued = 0;
}

static struct timespec at(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / TB_NS_PER_S), (long)(ns % TB_NS_PER_S) };

	return ts;
}

/* A request for `node` (and `service`), with a hostent buffer of `buflen` bytes placed at the
 * same alignment as `like` (so glibc lays it out as it would lay out the caller's). */
static struct req *new_req(enum kind kind, const char *node, const char *service,
			   size_t buflen, const char *like)
{
	size_t ln = node != NULL ? strlen(node) + 1 : 0, ls = service != NULL ? strlen(service) + 1 : 0;
	struct req *r = calloc(1, sizeof(*r) + ln + ls);

	if (r == NULL)
		return NULL;
	r->kind = kind;
	if (node != NULL)
		r->node = memcpy(r->strings, node, ln);
	if (service != NULL)
		r->service = memcpy(r->strings + ln, service, ls);
	if (buflen > 0) {
		uintptr_t want = (uintptr_t)like % BUF_ALIGN, have;

		r->mem = malloc(buflen + BUF_ALIGN);
		if (r->mem == NULL) {
			free(r);
			return NULL;
		}
		have = (uintptr_t)r->mem % BUF_ALIGN;
		r->buf = r->mem + (want + BUF_ALIGN - have) % BUF_ALIGN;
		r->buflen = buflen;
	}
	return r;
}

/* gethostbyname*_r or gethostbyaddr_r into r->buf; h_errno's value comes back in r->herr. */
static int hostent_r(struct req *r)
{
	const struct tb_resolve_real *f = &tb_resolve_real;

	if (r->byaddr)
		return f->gethostbyaddr_r(r->addr, r->addrlen, r->af, &r->he, r->buf, r->buflen,
					  &r->result, &r->herr);
	if (r->two)
		return f->gethostbyname2_r(r->node, r->af, &r->he, r->buf, r->buflen, &r->result,
					   &r->herr);
	return f->gethostbyname_r(r->node, &r->he, r->buf, r->buflen, &r->result, &r->herr);
}

/* Whether the non-reentrant call grows its buffer and asks again, as libc's own does: glibc
 * when the _r function says ERANGE with h_errno NETDB_INTERNAL (getXXbyYY.c), musl on ERANGE
 * (its _r functions leave *h_errnop alone then). */
static bool grow_again(const struct req *r)
{
#ifdef __GLIBC__
	return r->rc == ERANGE && r->herr == NETDB_INTERNAL;
#else
	return r->rc == ERANGE;
#endif
}

/* The lookup itself, on a resolver thread, which starts from its caller's errno. */
static void run(struct req *r)
{
	errno = r->err;
	switch (r->kind) {
	case K_ADDRINFO:
		/* glibc's getaddrinfo sets h_errno from the resolver's answer (NXDOMAIN
		 * HOST_NOT_FOUND, SERVFAIL TRY_AGAIN, no address NO_DATA, an answer 0): a value it
		 * did not set is not handed back (NO_HERR). */
		h_errno = NO_HERR;
		r->rc = tb_resolve_real.getaddrinfo(r->node, r->service,
						    r->has_hints ? &r->hints : NULL, &r->res);
		r->herr = h_errno;
		break;
	case K_HOSTENT_R:
		/* libc writes *h_errnop and h_errno on some paths only (glibc's _r functions set
		 * h_errno too when DNS fails): a value it did not write is not handed back. */
		r->herr = NO_HERR;
		h_errno = NO_HERR;
		r->rc = hostent_r(r);
		r->tls_herr = h_errno;
		break;
	case K_NAMEINFO:
		/* glibc's getnameinfo sets h_errno on some failures only: a value it did not set
		 * is not handed back (NO_HERR). */
		h_errno = NO_HERR;
		r->rc = tb_resolve_real.getnameinfo((const struct sockaddr *)&r->sa, r->salen,
						    r->host, r->hostlen, r->serv, r->servlen,
						    r->flags);
		r->err = errno;
		r->herr = h_errno;
		return;
	case K_HOSTENT:
		/* The non-reentrant call's buffer is ours: grow it as glibc grows its own. The
		 * _r function may set the thread's h_errno itself (glibc's files backend sets
		 * HOST_NOT_FOUND on its way to DNS, even when DNS answers), which the caller's
		 * thread must see as it would natively. */
		h_errno = NO_HERR;
		for (size_t len = HOSTENT_BUF_START; len <= HOSTENT_BUF_MAX; len *= 2) {
			char *mem = realloc(r->mem, len);

			if (mem == NULL) {
				r->rc = ENOMEM;
				r->herr = NETDB_INTERNAL;
				break;
			}
			r->mem = r->buf = mem;
			r->buflen = len;
			r->rc = hostent_r(r);
			if (!grow_again(r))
				break;
		}
		r->tls_herr = h_errno;
		break;
	}
	r->err = errno;
}

static void *resolver_thread(void *arg)
{
	struct slot *slot = arg;

	tb_resolver_thread = true;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct req *r;

		while (pool.head == NULL) {
			struct timespec idle_until = at(tb_now() + IDLE_NS);
			int rc;

			pool.idle++;
			rc = pthread_cond_timedwait(&pool.work, &pool.lock, &idle_until);
			pool.idle--;
			if (rc == ETIMEDOUT && pool.head == NULL) {
				pool.threads--;
				slot->state = SLOT_GONE;
				pthread_mutex_unlock(&pool.lock);
				tb_thread_own_ended();
				return NULL;
			}
		}
		r = pool.head;
		pool.head = r->next;
		if (pool.head == NULL)
			pool.tail = NULL;
		pool.queued--;
		r->state = RUNNING;
		pthread_mutex_unlock(&pool.lock);
		run(r);
		pthread_mutex_lock(&pool.lock);
		if (r->abandoned) {
			pthread_mutex_unlock(&pool.lock);
			free_req(r);
			pthread_mutex_lock(&pool.lock);
		} else {
			r->state = DONE;
			atomic_store(&r->done, 1);
			tb_futex_wake_all(&r->done, false);
		}
	}
}

/*
 * A slot for a new thread, its stack mapped (pool.lock held): a free one, else one whose
 * thread has left the pool, joined first. That thread has released pool.lock for good and
 * only ends, so the join is short; it is no cancellation point here, where the lock is
 * held. NULL when the stack cannot be mapped.
 */
static struct slot *slot_locked(void)
{
	struct slot *s = NULL;

	for (size_t i = 0; i < POOL_MAX && s == NULL; i++)
		if (slots[i].state == SLOT_FREE)
			s = &slots[i];
	for (size_t i = 0; i < POOL_MAX && s == NULL; i++) {
		if (slots[i].state == SLOT_GONE) {
			int cancel;

			s = &slots[i];
			pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
			pthread_join(s->thread, NULL);
			pthread_setcancelstate(cancel, NULL);
			s->state = SLOT_FREE;
		}
	}
	if (s != NULL && s->map == NULL) {
		void *m = mmap(NULL, guard_size + stack_size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);

		if (m == MAP_FAILED)
			return NULL;
		/* The guard page glibc would have put below a stack of its own. */
		if (mprotect(m, guard_size, PROT_NONE) != 0) {
			munmap(m, guard_size + stack_size);
			return NULL;
		}
		s->map = m;
	}
	return s;
}

/* A thread more, when the queue holds more lookups than threads wait for work. Called with
 * pool.lock held. The thread takes no signal: the program's handlers run on its own threads. */
static void grow_locked(void)
{
	pthread_attr_t attr;
	struct slot *s;
	sigset_t all, old;

	if (pool.queued <= pool.idle || pool.threads >= POOL_MAX || (s = slot_locked()) == NULL)
		return;
	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, s->map + guard_size, stack_size);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&s->thread, &attr, resolver_thread, s) == 0) {
		s->state = SLOT_LIVE;
		pool.threads++;
		tb_thread_own_started();
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

static void unlink_locked(struct req *r)
{
	struct req **p = &pool.head, *prev = NULL;

	for (; *p != NULL; prev = *p, p = &(*p)->next) {
		if (*p != r)
			continue;
		*p = r->next;
		if (pool.tail == r)
			pool.tail = prev;
		pool.queued--;
		return;
	}
}

/* The caller gives up on r (pool.lock held): unsent or finished, it goes; under way, its
 * thread frees it. */
static void abandon_locked(struct req *r)
{
	if (r->state == QUEUED) {
		unlink_locked(r);
		free_req(r);
	} else if (r->state == DONE) {
		free_req(r); /* finished as its caller was cancelled: nobody else will free it */
	} else {
		r->abandoned = true;
	}
}

/* The thread exits while it waits (cancelled there, or a handler's pthread_exit): the
 * lookup is given up, as when its expiry passes. */
static void waiting_gone(void *r)
{
	pthread_mutex_lock(&pool.lock);
	abandon_locked(r);
	pthread_mutex_unlock(&pool.lock);
}

void tb_resolve_pool_jumped(void)
{
	struct req *r;

	if (!atomic_load(&have_waiting_key) || (r = pthread_getspecific(waiting_key)) == NULL)
		return;
	pthread_setspecific(waiting_key, NULL);
	pthread_setcanceltype(r->cancel_type, NULL);
	waiting_gone(r);
}

enum wait_result { W_DONE, W_EXPIRED, W_NO_THREAD };

/* Whether r's lookup got the resolver's answer - a result, or word that the name has none -
 * rather than a failure the program may retry (a temporary failure, an error). */
static bool answered(const struct req *r)
{
	switch (r->kind) {
	case K_ADDRINFO:
#ifdef EAI_NODATA
		if (r->rc == EAI_NODATA)
			return true;
#endif
		return r->rc == 0 || r->rc == EAI_NONAME;
	case K_NAMEINFO:
		return r->rc == 0 || r->rc == EAI_NONAME;
	case K_HOSTENT:
	case K_HOSTENT_R:
		break;
	}
	return r->result != NULL || r->herr == HOST_NOT_FOUND || r->herr == NO_DATA;
}

/*
 * Queues r and waits for it until lk->expiry. W_DONE: r holds the result and is the
 * caller's. W_EXPIRED: r is no longer the caller's. W_NO_THREAD: no resolver thread could be
 * started; r is the caller's, unrun (the caller runs the lookup itself, unbounded).
 * Signals are held while the pool's lock is: a handler that jumps away (see the top) can
 * only do it in the wait, where the thread holds nothing. The wait is a cancellation point,
 * as getaddrinfo's own poll is: asynchronously cancellable around the futex alone.
 */
static enum wait_result submit(struct req *r, const struct tb_lookup *lk)
{
	enum wait_result w;
	sigset_t all, old;

	pthread_once(&pool_once, pool_init);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_mutex_lock(&pool.lock);
	r->state = QUEUED;
	if (pool.tail != NULL)
		pool.tail->next = r;
	else
		pool.head = r;
	pool.tail = r;
	pool.queued++;
	grow_locked();
	if (pool.threads == 0) {
		unlink_locked(r);
		pthread_mutex_unlock(&pool.lock);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return W_NO_THREAD;
	}
	pthread_cond_signal(&pool.work);
	pthread_mutex_unlock(&pool.lock);
	if (atomic_load_explicit(&have_waiting_key, memory_order_relaxed))
		pthread_setspecific(waiting_key, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	while (atomic_load(&r->done) == 0 && tb_now() < lk->expiry) {
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &r->cancel_type);
		tb_futex_wait_until(&r->done, 0, lk->expiry, false);
		pthread_setcanceltype(r->cancel_type, NULL);
	}
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (atomic_load_explicit(&have_waiting_key, memory_order_relaxed))
		pthread_setspecific(waiting_key, NULL);
	pthread_mutex_lock(&pool.lock);
	w = r->state == DONE ? W_DONE : W_EXPIRED;
	if (w == W_EXPIRED)
		abandon_locked(r);
	pthread_mutex_unlock(&pool.lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (w == W_DONE && answered(r))
		tb_lookup_answered();
	return w;
}

int tb_lookup_getaddrinfo(struct tb_lookup *lk, const char *node, const char *service,
			  const struct addrinfo *hints, struct addrinfo **res)
{
	struct req *r = new_req(K_ADDRINFO, node, service, 0, NULL);
	int saved = errno, rc;

	if (r == NULL)
		return tb_resolve_real.getaddrinfo(node, service, hints, res);
	if (hints != NULL) {
		/* POSIX: only these four members of hints are read. */
		r->has_hints = true;
		r->hints.ai_flags = hints->ai_flags;
		r->hints.ai_family = hints->ai_family;
		r->hints.ai_socktype = hints->ai_socktype;
		r->hints.ai_protocol = hints->ai_protocol;
	}
	r->err = saved; /* the thread starts from the caller's errno, as libc would */
	switch (submit(r, lk)) {
	case W_NO_THREAD:
		free_req(r);
		return tb_resolve_real.getaddrinfo(node, service, hints, res);
	case W_EXPIRED:
		tb_lookup_cut(lk);
		errno = saved;
		return tb_addrinfo_unanswered();
	case W_DONE:
		break;
	}
	rc = r->rc;
	/* libc writes *res only with a list to give: a failed lookup leaves the caller's
	 * pointer as it was (a program may keep its last good list across a failed refresh). */
	if (rc == 0) {
		*res = r->res;
		r->res = NULL;
	}
	if (r->herr != NO_HERR)
		h_errno = r->herr;
	errno = r->err;
	free_req(r);
	return rc;
}

/* p moved from r->buf to `to`, when it points into r->buf. */
static void *moved(void *p, const struct req *r, char *to)
{
	uintptr_t a = (uintptr_t)p, lo = (uintptr_t)r->buf;

	return p != NULL && a >= lo && a < lo + r->buflen ? to + (a - lo) : p;
}

/* The end of `len` bytes at p, as an offset into r->buf, when they lie in it; else 0. */
static size_t end_in(const void *p, size_t len, const struct req *r)
{
	uintptr_t a = (uintptr_t)p, lo = (uintptr_t)r->buf;

	return p != NULL && a >= lo && a < lo + r->buflen && len <= lo + r->buflen - a ?
		       (size_t)(a - lo) + len : 0;
}

static size_t max_size(size_t a, size_t b)
{
	return a > b ? a : b;
}

/*
 * How many bytes from the start of r->buf the resolver thread's hostent uses: the end of
 * the last name, array or address glibc placed there. Only those are copied, so a caller's
 * buffer receives what glibc itself would have written into it, whatever length it claims.
 */
static size_t used_bytes(const struct req *r)
{
	const struct hostent *h = &r->he;
	size_t used = 0, n;

	if (h->h_name != NULL)
		used = max_size(used, end_in(h->h_name, strlen(h->h_name) + 1, r));
	if (h->h_aliases != NULL) {
		for (n = 0; h->h_aliases[n] != NULL; n++)
			used = max_size(used, end_in(h->h_aliases[n], strlen(h->h_aliases[n]) + 1, r));
		used = max_size(used, end_in(h->h_aliases, (n + 1) * sizeof(char *), r));
	}
	if (h->h_addr_list != NULL) {
		for (n = 0; h->h_addr_list[n] != NULL; n++)
			used = max_size(used, end_in(h->h_addr_list[n], (size_t)h->h_length, r));
		used = max_size(used, end_in(h->h_addr_list, (n + 1) * sizeof(char *), r));
	}
	return used;
}

/* The resolver thread's hostent, copied into buf (`used` bytes, from used_bytes): every
 * pointer glibc placed in its buffer moves by the same offset. */
static void copy_hostent(struct hostent *dst, char *buf, size_t used, const struct req *r)
{
	if (used > 0)
		memcpy(buf, r->buf, used);
	*dst = r->he;
	dst->h_name = moved(r->he.h_name, r, buf);
	dst->h_aliases = moved(r->he.h_aliases, r, buf);
	dst->h_addr_list = moved(r->he.h_addr_list, r, buf);
	if (dst->h_aliases != r->he.h_aliases)
		for (char **a = dst->h_aliases; *a != NULL; a++)
			*a = moved(*a, r, buf);
	if (dst->h_addr_list != r->he.h_addr_list)
		for (char **a = dst->h_addr_list; *a != NULL; a++)
			*a = moved(*a, r, buf);
}

/* r's hostent copied into its function's static result. NULL (h_errno NETDB_INTERNAL, errno
 * ENOMEM) when that cannot grow. */
static struct hostent *keep_static(const struct req *r)
{
	struct static_result *k = &static_results[r->byaddr ? 2 : r->two ? 1 : 0];
	size_t used = used_bytes(r);
	struct hostent *h = &k->he;

	pthread_mutex_lock(&k->lock);
	if (k->len < used) {
		size_t len = HOSTENT_BUF_START;
		char *buf;

		while (len < used)
			len *= 2;
		if (k->n_outgrown == HOSTENT_SIZES || (buf = malloc(len)) == NULL) {
			h = NULL;
			goto out;
		}
		if (k->buf != NULL)
			k->outgrown[k->n_outgrown++] = k->buf; /* kept (see above) */
		k->buf = buf;
		k->len = len;
	}
	copy_hostent(&k->he, k->buf, used, r);
out:
	pthread_mutex_unlock(&k->lock);
	if (h == NULL) {
		h_errno = NETDB_INTERNAL;
		errno = ENOMEM;
	}
	return h;
}

/* The address a gethostbyaddr* request asks for (the plan saw to its length: 4 or 16). */
static void set_addr(struct req *r, const void *addr, socklen_t len, int af)
{
	r->byaddr = true;
	r->af = af;
	r->addrlen = len;
	memcpy(r->addr, addr, len);
}

/* A non-reentrant request run (W_DONE): its hostent in its function's static storage, h_errno
 * and errno as libc's own function leaves them (glibc sets h_errno only when the _r function
 * wrote one, getXXbyYY.c; musl's hands it h_errno itself). */
static struct hostent *static_result(struct req *r)
{
	struct hostent *h = NULL;

	if (r->tls_herr != NO_HERR)
		h_errno = r->tls_herr;
	if (r->herr != 0)
		h_errno = r->herr;
	errno = r->err;
	if (r->result != NULL)
		h = keep_static(r);
	free_req(r);
	return h;
}

/* A reentrant request run (W_DONE): the hostent moved into the caller's buffer, and what libc
 * wrote of *h_errnop and h_errno. */
static int reentrant_result(struct req *r, struct hostent *ret, char *buf,
			    struct hostent **result, int *h_errnop)
{
	int rc = r->rc;

	if (r->herr != NO_HERR)
		*h_errnop = r->herr;
	if (r->tls_herr != NO_HERR)
		h_errno = r->tls_herr;
	*result = NULL;
	if (rc == 0 && r->result != NULL) {
		copy_hostent(ret, buf, used_bytes(r), r);
		*result = ret;
	}
	errno = r->err;
	free_req(r);
	return rc;
}

/* A reentrant request for the caller's buffer: the thread's is the caller's length up to
 * HOSTENT_BUF_MAX. A length is the caller's word, not its buffer (SIZE_MAX would wrap the
 * allocation, and a copy of the whole length would write past a buffer smaller than
 * claimed). No resolver answer needs more (a DNS message is at most 64 KiB); beyond it the
 * lookup reports ERANGE. NULL for a length of 0, or without memory: the caller's own call. */
static struct req *reentrant_req(const char *name, char *buf, size_t len)
{
	size_t n = len < HOSTENT_BUF_MAX ? len : HOSTENT_BUF_MAX;

	return n > 0 ? new_req(K_HOSTENT_R, name, NULL, n, buf) : NULL;
}

/*
 * submit for the hostent lookups, which fall back on libc's own call: A_NATIVE when no
 * request could be made (r NULL) or no thread could run it (r freed: the caller makes
 * libc's call, unbounded), A_CUT when the lookup expired (counted: the caller answers as a
 * silent resolver would), A_DONE when r holds the result. The thread starts from the
 * caller's errno, as libc would.
 */
enum ask { A_NATIVE, A_CUT, A_DONE };

static enum ask ask(struct req *r, struct tb_lookup *lk)
{
	if (r == NULL)
		return A_NATIVE;
	r->err = errno;
	switch (submit(r, lk)) {
	case W_NO_THREAD:
		free_req(r);
		return A_NATIVE;
	case W_EXPIRED:
		tb_lookup_cut(lk);
		return A_CUT;
	case W_DONE:
		break;
	}
	return A_DONE;
}

struct hostent *tb_lookup_gethostbyname(struct tb_lookup *lk, const char *name, bool two,
					int af)
{
	struct req *r = new_req(K_HOSTENT, name, NULL, 0, NULL);

	if (r != NULL) {
		r->two = two;
		r->af = af;
	}
	switch (ask(r, lk)) {
	case A_NATIVE:
		return two ? tb_resolve_real.gethostbyname2(name, af)
			   : tb_resolve_real.gethostbyname(name);
	case A_CUT:
		return tb_hostname_unanswered();
	case A_DONE:
		break;
	}
	return static_result(r);
}

int tb_lookup_gethostbyname_r(struct tb_lookup *lk, const char *name, bool two, int af,
			      struct hostent *ret, char *buf, size_t len,
			      struct hostent **result, int *h_errnop)
{
	struct req *r = reentrant_req(name, buf, len);

	if (r != NULL) {
		r->two = two;
		r->af = af;
	}
	switch (ask(r, lk)) {
	case A_NATIVE:
		if (two)
			return tb_resolve_real.gethostbyname2_r(name, af, ret, buf, len, result,
								h_errnop);
		return tb_resolve_real.gethostbyname_r(name, ret, buf, len, result, h_errnop);
	case A_CUT:
		return tb_hostname_r_unanswered(result, h_errnop);
	case A_DONE:
		break;
	}
	return reentrant_result(r, ret, buf, result, h_errnop);
}

struct hostent *tb_lookup_gethostbyaddr(struct tb_lookup *lk, const void *addr, socklen_t len,
					int af)
{
	struct req *r = new_req(K_HOSTENT, NULL, NULL, 0, NULL);

	if (r != NULL)
		set_addr(r, addr, len, af);
	switch (ask(r, lk)) {
	case A_NATIVE:
		return tb_resolve_real.gethostbyaddr(addr, len, af);
	case A_CUT:
		return tb_hostaddr_unanswered(addr, len, af);
	case A_DONE:
		break;
	}
	return static_result(r);
}

int tb_lookup_gethostbyaddr_r(struct tb_lookup *lk, const void *addr, socklen_t len, int af,
			      struct hostent *ret, char *buf, size_t buflen,
			      struct hostent **result, int *h_errnop)
{
	struct req *r = reentrant_req(NULL, buf, buflen);

	if (r != NULL)
		set_addr(r, addr, len, af);
	switch (ask(r, lk)) {
	case A_NATIVE:
		return tb_resolve_real.gethostbyaddr_r(addr, len, af, ret, buf, buflen, result,
						       h_errnop);
	case A_CUT:
		return tb_hostaddr_r_unanswered(addr, len, af, ret, buf, buflen, result, h_errnop);
	case A_DONE:
		break;
	}
	return reentrant_result(r, ret, buf, result, h_errnop);
}

struct hostent *tb_hostname_unanswered(void)
{
	h_errno = TRY_AGAIN;
#ifdef __GLIBC__
	errno = EAGAIN;
#endif
	return NULL;
}

int tb_hostname_r_unanswered(struct hostent **result, int *h_errnop)
{
	*result = NULL;
	*h_errnop = TRY_AGAIN;
#ifdef __GLIBC__
	h_errno = TRY_AGAIN;
	errno = EAGAIN;
#endif
	return EAGAIN;
}

#ifdef __GLIBC__
struct hostent *tb_hostaddr_unanswered(const void *addr, socklen_t len, int af)
{
	(void)addr, (void)len, (void)af;
	h_errno = TRY_AGAIN;
	errno = 0;
	return NULL;
}

int tb_hostaddr_r_unanswered(const void *addr, socklen_t len, int af, struct hostent *ret,
			     char *buf, size_t buflen, struct hostent **result, int *h_errnop)
{
	/* glibc's "not found" with TRY_AGAIN: the dns module's status on a silent resolver is
	 * NOTFOUND, which the _r function returns as 0 (and errno 0). */
	(void)addr, (void)len, (void)af, (void)ret, (void)buf, (void)buflen;
	*result = NULL;
	*h_errnop = TRY_AGAIN;
	h_errno = TRY_AGAIN;
	errno = 0;
	return 0;
}
#else
/*
 * musl's gethostbyaddr_r names an address with its getnameinfo, which without an answer
 * writes the numeric address: the same hostent is built here, laid out in buf as musl lays
 * it out (musl 1.2: the address list and alias list, two pointers each, after aligning buf
 * to a pointer, then the address, then the name, which is also the one alias), with the
 * numeric host getnameinfo gives under NI_NUMERICHOST. ERANGE when buf cannot hold it, as
 * musl says then.
 */
int tb_hostaddr_r_unanswered(const void *addr, socklen_t len, int af, struct hostent *ret,
			     char *buf, size_t buflen, struct hostent **result, int *h_errnop)
{
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa;
	socklen_t salen = af == AF_INET6 ? sizeof(sa.v6) : sizeof(sa.v4);
	size_t skip = (sizeof(char *) - (uintptr_t)buf % sizeof(char *)) % sizeof(char *);

	*result = NULL;
	/* The alignment, four pointers, the address, and at least a byte of name. */
	if (buflen <= skip + 4 * sizeof(char *) + len)
		return ERANGE;
	memset(&sa, 0, sizeof(sa));
	sa.v4.sin_family = (sa_family_t)af;
	if (af == AF_INET6)
		memcpy(&sa.v6.sin6_addr, addr, 16);
	else
		memcpy(&sa.v4.sin_addr, addr, 4);
	buf += skip;
	buflen -= skip + 4 * sizeof(char *) + len;
	ret->h_addr_list = (char **)(void *)buf;
	ret->h_aliases = (char **)(void *)(buf + 2 * sizeof(char *));
	buf += 4 * sizeof(char *);
	ret->h_addr_list[0] = memcpy(buf, addr, len);
	ret->h_addr_list[1] = NULL;
	buf += len;
	ret->h_aliases[0] = buf;
	ret->h_aliases[1] = NULL;
	switch (tb_resolve_real.getnameinfo((const struct sockaddr *)&sa, salen, buf,
					    (socklen_t)buflen, NULL, 0, NI_NUMERICHOST)) {
	case 0:
		break;
	case EAI_OVERFLOW:
		return ERANGE;
	default:
		*h_errnop = NO_RECOVERY;
		return errno;
	}
	ret->h_addrtype = af;
	ret->h_length = (int)len;
	ret->h_name = buf;
	*result = ret;
	return 0;
}

/* musl's gethostbyaddr: its _r function's hostent, here in gethostbyaddr's static storage. */
struct hostent *tb_hostaddr_unanswered(const void *addr, socklen_t len, int af)
{
	struct req *r = new_req(K_HOSTENT, NULL, NULL, HOSTENT_BUF_START, NULL);
	struct hostent *h = NULL;
	int saved = errno;

	if (r == NULL) {
		h_errno = NO_RECOVERY;
		return NULL;
	}
	set_addr(r, addr, len, af);
	r->rc = tb_hostaddr_r_unanswered(addr, len, af, &r->he, r->buf, r->buflen, &r->result,
					 &h_errno);
	if (r->result != NULL)
		h = keep_static(r);
	free_req(r);
	errno = saved;
	return h;
}
#endif

/* A caller's buffer length as the resolver thread's: no name or service is over 1 MiB. */
static socklen_t name_len(const char *buf, socklen_t len)
{
	return buf == NULL ? 0 : len < HOSTENT_BUF_MAX ? len : HOSTENT_BUF_MAX;
}

int tb_lookup_getnameinfo(struct tb_lookup *lk, const struct sockaddr *sa, socklen_t salen,
			  char *host, socklen_t hostlen, char *serv, socklen_t servlen, int flags)
{
	socklen_t hl = name_len(host, hostlen), sl = name_len(serv, servlen);
	struct req *r = new_req(K_NAMEINFO, NULL, NULL, 0, NULL);
	int saved = errno, rc;

	/* Zeroed: a string libc did not write reads as empty, never past the buffer. */
	if (r == NULL || (r->mem = calloc(1, (size_t)hl + sl + 1)) == NULL)
		goto native;
	/* Only the family's own struct is copied (libc reads no more of it, and the caller's
	 * length is its word, not its buffer). The length libc judges stays on the same side of
	 * that struct's size: glibc wants at least it, musl exactly it. */
	memcpy(&r->sa, sa, sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						       sizeof(struct sockaddr_in6));
	r->salen = salen < (socklen_t)sizeof(r->sa) ? salen : (socklen_t)sizeof(r->sa);
	r->host = hl > 0 ? r->mem : NULL;
	r->serv = sl > 0 ? r->mem + hl : NULL;
	r->hostlen = hl;
	r->servlen = sl;
	r->flags = flags;
	r->err = saved; /* the thread starts from the caller's errno, as libc would */
	switch (submit(r, lk)) {
	case W_NO_THREAD:
		goto native;
	case W_EXPIRED:
		tb_lookup_cut(lk);
		errno = saved;
		return tb_nameinfo_unanswered(sa, salen, host, hostlen, serv, servlen, flags);
	case W_DONE:
		break;
	}
	/* What libc wrote, it wrote whole, and failing it may still have written one of the
	 * two (glibc writes the host, then finds the service too long: EAI_OVERFLOW). */
	rc = r->rc;
	if (r->host != NULL && r->host[0] != '\0')
		memcpy(host, r->host, strlen(r->host) + 1);
	if (r->serv != NULL && r->serv[0] != '\0')
		memcpy(serv, r->serv, strlen(r->serv) + 1);
	if (r->herr != NO_HERR)
		h_errno = r->herr;
	errno = r->err; /* as libc left it, which glibc sets on success too */
	free_req(r);
	return rc;
native:
	free_req(r);
	return tb_resolve_real.getnameinfo(sa, salen, host, hostlen, serv, servlen, flags);
}
