/* hooks_resolve.c - getaddrinfo and gethostbyname*: passed through, and what they resolved is
 * remembered (only when a rule names a host) so a connect to the address finds its name. */
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>

#include "configure.h"
#include "hooks.h"
#include "init.h"

/*
 * Bound here rather than in real.c: name lookups are not socket traffic, and the table there
 * serves the data path. dlsym(RTLD_NEXT) never resolves to us.
 */
static struct {
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
			   struct addrinfo **);
	struct hostent *(*gethostbyname)(const char *);
	struct hostent *(*gethostbyname2)(const char *, int);
	int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t, struct hostent **,
			       int *);
	int (*gethostbyname2_r)(const char *, int, struct hostent *, char *, size_t,
				struct hostent **, int *);
} real_resolve;
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static void bind_resolve(void)
{
	*(void **)&real_resolve.getaddrinfo = dlsym(RTLD_NEXT, "getaddrinfo");
	*(void **)&real_resolve.gethostbyname = dlsym(RTLD_NEXT, "gethostbyname");
	*(void **)&real_resolve.gethostbyname2 = dlsym(RTLD_NEXT, "gethostbyname2");
	*(void **)&real_resolve.gethostbyname_r = dlsym(RTLD_NEXT, "gethostbyname_r");
	*(void **)&real_resolve.gethostbyname2_r = dlsym(RTLD_NEXT, "gethostbyname2_r");
}

/* Binds the real functions and loads the configuration (which says whether to learn). */
static void prepare(void)
{
	tb_init();
	pthread_once(&bind_once, bind_resolve);
}

static void learn_hostent(const char *name, const struct hostent *h)
{
	int saved = errno;

	if (h == NULL || name == NULL || !tb_configure_learning())
		return;
	for (char **a = h->h_addr_list; a != NULL && *a != NULL; a++)
		tb_configure_learn(name, h->h_addrtype, *a);
	errno = saved;
}

TB_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
			  struct addrinfo **res)
{
	int r, saved;

	prepare();
	if (real_resolve.getaddrinfo == NULL)
		return EAI_SYSTEM;
	r = real_resolve.getaddrinfo(node, service, hints, res);
	if (r != 0 || node == NULL || res == NULL || !tb_configure_learning())
		return r;
	saved = errno;
	for (const struct addrinfo *ai = *res; ai != NULL; ai = ai->ai_next) {
		if (ai->ai_family == AF_INET && ai->ai_addr != NULL)
			tb_configure_learn(node, AF_INET,
					   &((const struct sockaddr_in *)ai->ai_addr)->sin_addr);
		else if (ai->ai_family == AF_INET6 && ai->ai_addr != NULL)
			tb_configure_learn(node, AF_INET6,
					   &((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr);
	}
	errno = saved;
	return r;
}

TB_EXPORT struct hostent *gethostbyname(const char *name)
{
	struct hostent *h;

	prepare();
	if (real_resolve.gethostbyname == NULL)
		return NULL;
	h = real_resolve.gethostbyname(name);
	learn_hostent(name, h);
	return h;
}

TB_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	struct hostent *h;

	prepare();
	if (real_resolve.gethostbyname2 == NULL)
		return NULL;
	h = real_resolve.gethostbyname2(name, af);
	learn_hostent(name, h);
	return h;
}

TB_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t len,
			      struct hostent **result, int *h_errnop)
{
	int r;

	prepare();
	if (real_resolve.gethostbyname_r == NULL)
		return ENOSYS;
	r = real_resolve.gethostbyname_r(name, ret, buf, len, result, h_errnop);
	if (r == 0 && result != NULL)
		learn_hostent(name, *result);
	return r;
}

TB_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf,
			       size_t len, struct hostent **result, int *h_errnop)
{
	int r;

	prepare();
	if (real_resolve.gethostbyname2_r == NULL)
		return ENOSYS;
	r = real_resolve.gethostbyname2_r(name, af, ret, buf, len, result, h_errnop);
	if (r == 0 && result != NULL)
		learn_hostent(name, *result);
	return r;
}
