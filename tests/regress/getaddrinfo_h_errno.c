/* getaddrinfo_h_errno.c - a bounded lookup did not pass back the h_errno and errno libc set.
 *
 * What happened: glibc's getaddrinfo sets h_errno from the resolver's answer (no such name
 * HOST_NOT_FOUND, a server failure TRY_AGAIN with errno EAGAIN, no address of the family
 * NO_DATA, an answer 0), and programs read it to tell a name that does not exist from a
 * resolver that failed. Under timebox the lookup ran on a resolver thread, whose h_errno and
 * errno stayed there: the caller's were left as they were before the call, and a lookup cut
 * at dns_timeout left them so too, where glibc says TRY_AGAIN and EAGAIN. A gethostbyname
 * that succeeded left the thread's h_errno as it was, where glibc leaves what its files
 * backend set on the way to DNS (HOST_NOT_FOUND).
 *
 * The sequence: a resolver on 127.0.0.1 that answers A queries, has no record of any other
 * type, and never answers names beginning with "s" (fake_dns.h); TIMEBOX_DNS_TIMEOUT=300ms.
 * Each lookup is made through libc's own function, then through the library's, both from
 * errno 1234 and h_errno 777, and must leave the same return, errno and h_errno: an IPv4
 * lookup (answered), an IPv6 one (no record), gethostbyname (answered), and a lookup the
 * resolver never answers (glibc's timeout natively, dns_timeout under timebox).
 *
 * The fix: the resolver thread hands back the h_errno libc set (and errno, whatever the
 * outcome); a lookup cut at its limit sets them as glibc does when no resolver answers.
 */
#include <dlfcn.h>

#include "fake_dns.h"

struct outcome {
	int rc, err, herr;
};

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
typedef struct hostent *(*ghbn_fn)(const char *);

static struct outcome by_gai(gai_fn f, const char *name, int family)
{
	struct addrinfo hints = { .ai_family = family, .ai_socktype = SOCK_STREAM }, *res = NULL;
	struct outcome o;

	errno = 1234;
	h_errno = 777;
	o.rc = f(name, "80", &hints, &res);
	o.err = errno;
	o.herr = h_errno;
	if (o.rc == 0)
		freeaddrinfo(res);
	return o;
}

static struct outcome by_ghbn(ghbn_fn f, const char *name)
{
	struct outcome o;

	errno = 1234;
	h_errno = 777;
	o.rc = f(name) != NULL;
	o.err = errno;
	o.herr = h_errno;
	return o;
}

static void same(const char *what, struct outcome native, struct outcome hooked)
{
	TBR_CHECK(native.rc == hooked.rc && native.err == hooked.err &&
			  native.herr == hooked.herr,
		  "%s: libc returned %d with errno %d and h_errno %d, timebox %d with errno %d "
		  "and h_errno %d", what, native.rc, native.err, native.herr, hooked.rc, hooked.err,
		  hooked.herr);
}

int main(int argc, char **argv)
{
	void *libc;
	gai_fn gai;
	ghbn_fn ghbn;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DNS_TIMEOUT=300ms", NULL);
	libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (libc == NULL)
		tbr_skip("no glibc to compare with");
	gai = (gai_fn)dlsym(libc, "getaddrinfo");
	ghbn = (ghbn_fn)dlsym(libc, "gethostbyname");
	TBR_CHECK(gai != NULL && ghbn != NULL, "dlsym: %s", dlerror());
	tbr_fake_dns_silent = 's';
	tbr_fake_dns(true);
	tbr_hang_guard(20, "the lookups never returned");

	same("getaddrinfo(AF_INET), answered", by_gai(gai, "alpha.example.test", AF_INET),
	     by_gai(getaddrinfo, "alpha.example.test", AF_INET));
	same("getaddrinfo(AF_INET6), no record", by_gai(gai, "alpha.example.test", AF_INET6),
	     by_gai(getaddrinfo, "alpha.example.test", AF_INET6));
	same("gethostbyname, answered", by_ghbn(ghbn, "bravo.example.test"),
	     by_ghbn(gethostbyname, "bravo.example.test"));
	same("getaddrinfo, never answered", by_gai(gai, "silent.example.test", AF_INET),
	     by_gai(getaddrinfo, "silent.example.test", AF_INET));
	return 0;
}
