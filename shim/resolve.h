/* resolve.h - name resolution as phase dns: which lookups are bounded, and the resolver
 * threads that run a bounded lookup while its caller waits at most min(dns, deadline left). */
#ifndef TB_RESOLVE_H
#define TB_RESOLVE_H

#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* libc's resolver functions, bound once by tb_resolve_bind (dlsym RTLD_NEXT). Bound here
 * rather than in real.c: lookups are not socket traffic, and that table serves the data path. */
struct tb_resolve_real {
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	struct hostent *(*gethostbyname)(const char *);
	struct hostent *(*gethostbyname2)(const char *, int);
	int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t, struct hostent **,
			       int *);
	int (*gethostbyname2_r)(const char *, int, struct hostent *, char *, size_t,
				struct hostent **, int *);
	int (*getnameinfo)(const struct sockaddr *, socklen_t, char *, socklen_t, char *,
			   socklen_t, int);
	struct hostent *(*gethostbyaddr)(const void *, socklen_t, int);
	int (*gethostbyaddr_r)(const void *, socklen_t, int, struct hostent *, char *, size_t,
			       struct hostent **, int *);
};
extern struct tb_resolve_real tb_resolve_real;

/* Binds tb_resolve_real (thread-safe, idempotent). */
void tb_resolve_bind(void);

/* One bounded lookup: when it started and when its caller stops waiting for it. */
struct tb_lookup {
	const char *name;    /* a reverse lookup's is text, its address */
	char text[INET6_ADDRSTRLEN];
	int64_t start;       /* the hook's entry */
	int64_t expiry;      /* start + min(dns_timeout, the call's time left) */
	int64_t call_start;  /* the call the lookup belongs to (the thread's budget) */
	int64_t deadline;    /* that call's deadline, TB_NEVER without one */
};

/* True on timebox's resolver threads: a lookup an NSS module makes from there runs natively
 * (its caller is already bounded, and it must not queue behind itself). */
extern _Thread_local bool tb_resolver_thread
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

enum tb_lookup_plan {
	TB_LOOKUP_NATIVE = 0,  /* run libc's lookup in the caller, unchanged */
	TB_LOOKUP_BOUNDED = 1, /* run it through tb_lookup_* below */
	TB_LOOKUP_EXPIRED = -1 /* the call's deadline has passed: fail at once (logged) */
};

/*
 * Plans a lookup of `name` for address family `af` (AF_UNSPEC: any). Native when nothing
 * bounds lookups (no dns_timeout, no deadline), when the name is a numeric address or
 * `numeric` is set (AI_NUMERICHOST), and when /etc/hosts answers it and nsswitch.conf asks
 * the files first: those never wait on a network, and must cost what they cost natively.
 * Native in a vfork child too: a resolver thread started there would belong to the child and
 * die at its exec, leaving the parent's pool (shared memory) counting a thread that never
 * takes work again (regress/vfork_getaddrinfo).
 * A bounded lookup opens, or joins, the thread's budget (it is the first step of the call
 * that connects to what it finds; it joins a call of lookups only after one that failed,
 * tb_lookup_answered) and fills *lk.
 */
enum tb_lookup_plan tb_lookup_plan(struct tb_lookup *lk, const char *name, int af, bool numeric);

/*
 * Plans getnameinfo's reverse lookup of sa's address, as tb_lookup_plan plans a name's.
 * Native also when no host name is asked for (`numeric`: NI_NUMERICHOST, or no host
 * buffer), for a family other than AF_INET and AF_INET6 (AF_UNIX never asks a resolver), for
 * a length libc refuses, and for an address /etc/hosts names (files first). A bounded
 * lookup's name, for the log, is the address in text (lk->text).
 */
enum tb_lookup_plan tb_lookup_plan_addr(struct tb_lookup *lk, const struct sockaddr *sa,
					socklen_t salen, bool numeric);

/*
 * Plans gethostbyaddr's reverse lookup of the `len` bytes at addr, as tb_lookup_plan_addr
 * plans getnameinfo's. Native also for a family other than AF_INET and AF_INET6, for a
 * length other than the family's address size, for an address /etc/hosts names, and in
 * glibc for :: (answered "not found" by glibc itself).
 */
enum tb_lookup_plan tb_lookup_plan_hostaddr(struct tb_lookup *lk, const void *addr,
					    socklen_t len, int af);

/*
 * The bounded lookups. Each returns what libc returned (with errno, h_errno and *h_errnop as
 * libc left them, and getaddrinfo's *res written only on success, as libc writes it), or on
 * expiry what libc returns when the resolver does not answer: for getaddrinfo as
 * tb_addrinfo_unanswered, for the gethostby* functions as tb_host*_unanswered below. An expiry is
 * logged (phase=dns) and reported to the thread's budget. The lookup itself finishes on a
 * resolver thread, which frees its result.
 */
int tb_lookup_getaddrinfo(struct tb_lookup *lk, const char *node, const char *service,
			  const struct addrinfo *hints, struct addrinfo **res);

/* gethostbyname (two = false, af ignored) or gethostbyname2. The hostent is process-wide,
 * one per function as glibc's: valid until the next bounded call of the same function by any
 * thread (regress/gethostbyname_thread_exit, regress/gethostbyname_two_buffers); one that
 * call replaced still reads as its bytes, never as freed memory. */
struct hostent *tb_lookup_gethostbyname(struct tb_lookup *lk, const char *name, bool two,
					int af);

/* gethostbyname_r (two = false) or gethostbyname2_r, into the caller's buffer: only the bytes
 * the hostent uses are written there, however large `len` is (regress/gethostbyname_r_huge_len). */
int tb_lookup_gethostbyname_r(struct tb_lookup *lk, const char *name, bool two, int af,
			      struct hostent *ret, char *buf, size_t len,
			      struct hostent **result, int *h_errnop);

/* gethostbyaddr: its hostent is kept as gethostbyname's, in storage of its own. */
struct hostent *tb_lookup_gethostbyaddr(struct tb_lookup *lk, const void *addr, socklen_t len,
					int af);

/* gethostbyaddr_r, into the caller's buffer as gethostbyname_r. */
int tb_lookup_gethostbyaddr_r(struct tb_lookup *lk, const void *addr, socklen_t len, int af,
			      struct hostent *ret, char *buf, size_t buflen,
			      struct hostent **result, int *h_errnop);

/* What getaddrinfo returns when the resolver does not answer, as measured. glibc: EAI_AGAIN,
 * h_errno TRY_AGAIN, errno EAGAIN. musl: EAI_AGAIN, errno and h_errno untouched. */
int tb_addrinfo_unanswered(void);

/*
 * What the gethostby* functions return when the resolver does not answer, as measured.
 * glibc: gethostbyname and gethostbyname2 NULL, h_errno TRY_AGAIN, errno EAGAIN; their _r
 * variants EAGAIN, *result NULL, *h_errnop and h_errno TRY_AGAIN, errno EAGAIN;
 * gethostbyaddr NULL, h_errno TRY_AGAIN, errno 0; gethostbyaddr_r 0 (its "not found"),
 * *result NULL, *h_errnop and h_errno TRY_AGAIN, errno 0. musl: the same for the name
 * lookups without errno, and for the _r variants without h_errno (musl writes only
 * *h_errnop); for the address lookups a hostent of the numeric address (its name and only
 * alias), musl's own answer without one.
 */
struct hostent *tb_hostname_unanswered(void);
int tb_hostname_r_unanswered(struct hostent **result, int *h_errnop);
struct hostent *tb_hostaddr_unanswered(const void *addr, socklen_t len, int af);
int tb_hostaddr_r_unanswered(const void *addr, socklen_t len, int af, struct hostent *ret,
			     char *buf, size_t buflen, struct hostent **result, int *h_errnop);

/*
 * getnameinfo through a resolver thread, into the caller's buffers: the host and service
 * strings libc wrote are copied there (only their bytes, whatever length the caller claims),
 * and a buffer libc did not write is left as it was; h_errno as libc left it, errno too when
 * it failed. Lengths over 1 MiB are looked up as 1 MiB (no name is longer). On expiry, as
 * tb_nameinfo_unanswered.
 */
int tb_lookup_getnameinfo(struct tb_lookup *lk, const struct sockaddr *sa, socklen_t salen,
			  char *host, socklen_t hostlen, char *serv, socklen_t servlen, int flags);

/*
 * What getnameinfo returns when the resolver does not answer. glibc: EAI_AGAIN, h_errno
 * TRY_AGAIN, the buffers untouched. musl: the numeric host (EAI_NONAME with NI_NAMEREQD),
 * which is libc's own answer with NI_NUMERICHOST added.
 */
int tb_nameinfo_unanswered(const struct sockaddr *sa, socklen_t salen, char *host,
			   socklen_t hostlen, char *serv, socklen_t servlen, int flags);

/* A lookup planned TB_LOOKUP_EXPIRED: logged (the budget already knows). */
void tb_lookup_expired(const struct tb_lookup *lk);

/* A bounded lookup that got the resolver's answer (an address, or word that the name has
 * none): told to the thread's budget, so that the thread's next lookup opens a call of its
 * own rather than spending what is left of this one's deadline. */
void tb_lookup_answered(void);

/* A bounded lookup cut at lk->expiry: logged, and told to the thread's budget. */
void tb_lookup_cut(const struct tb_lookup *lk);

/* In a forked child: the locks of resolve.c and resolve_pool.c, and no resolver thread. */
void tb_resolve_fork_child(void);
void tb_resolve_pool_fork_child(void);

/* A jump (longjmp, siglongjmp) leaves the thread's frames: a lookup it waited for, if any,
 * is given up, as at its expiry (resolve_pool.c). From hooks_jump.c. */
void tb_resolve_pool_jumped(void);

#endif
