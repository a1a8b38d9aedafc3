/* hooks_resolve.c - getaddrinfo, gethostbyname*, getnameinfo and gethostbyaddr*: bounded by
 * phase dns (resolve.h); what the forward lookups resolved is remembered (only when a rule
 * names a host) so a connect finds its name. */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>

#include "configure.h"
#include "hooks.h"
#include "init.h"
#include "resolve.h"

/* Binds the real functions and loads the configuration (which says whether to learn). */
static void prepare(void)
{
	tb_init();
	tb_resolve_bind();
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
	struct tb_lookup lk;
	int r, saved;

	prepare();
	if (tb_resolve_real.getaddrinfo == NULL)
		return EAI_SYSTEM;
	switch (tb_lookup_plan(&lk, node, hints != NULL ? hints->ai_family : AF_UNSPEC,
			       hints != NULL && (hints->ai_flags & AI_NUMERICHOST))) {
	case TB_LOOKUP_NATIVE:
		r = tb_resolve_real.getaddrinfo(node, service, hints, res);
		break;
	case TB_LOOKUP_BOUNDED:
		r = tb_lookup_getaddrinfo(&lk, node, service, hints, res);
		break;
	default:
		saved = errno;
		tb_lookup_expired(&lk);
		errno = saved;
		return tb_addrinfo_unanswered();
	}
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
	struct tb_lookup lk;
	struct hostent *h;

	prepare();
	if (tb_resolve_real.gethostbyname == NULL)
		return NULL;
	switch (tb_lookup_plan(&lk, name, AF_INET, false)) {
	case TB_LOOKUP_NATIVE:
		h = tb_resolve_real.gethostbyname(name);
		break;
	case TB_LOOKUP_BOUNDED:
		h = tb_lookup_gethostbyname(&lk, name, false, AF_INET);
		break;
	default:
		tb_lookup_expired(&lk);
		return tb_hostname_unanswered();
	}
	learn_hostent(name, h);
	return h;
}

TB_EXPORT struct hostent *gethostbyname2(const char *name, int af)
{
	struct tb_lookup lk;
	struct hostent *h;

	prepare();
	if (tb_resolve_real.gethostbyname2 == NULL)
		return NULL;
	switch (tb_lookup_plan(&lk, name, af, false)) {
	case TB_LOOKUP_NATIVE:
		h = tb_resolve_real.gethostbyname2(name, af);
		break;
	case TB_LOOKUP_BOUNDED:
		h = tb_lookup_gethostbyname(&lk, name, true, af);
		break;
	default:
		tb_lookup_expired(&lk);
		return tb_hostname_unanswered();
	}
	learn_hostent(name, h);
	return h;
}

TB_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t len,
			      struct hostent **result, int *h_errnop)
{
	struct tb_lookup lk;
	int r;

	prepare();
	if (tb_resolve_real.gethostbyname_r == NULL)
		return ENOSYS;
	switch (tb_lookup_plan(&lk, name, AF_INET, false)) {
	case TB_LOOKUP_NATIVE:
		r = tb_resolve_real.gethostbyname_r(name, ret, buf, len, result, h_errnop);
		break;
	case TB_LOOKUP_BOUNDED:
		r = tb_lookup_gethostbyname_r(&lk, name, false, AF_INET, ret, buf, len, result,
					      h_errnop);
		break;
	default:
		tb_lookup_expired(&lk);
		return tb_hostname_r_unanswered(result, h_errnop);
	}
	if (r == 0 && result != NULL)
		learn_hostent(name, *result);
	return r;
}

TB_EXPORT int gethostbyname2_r(const char *name, int af, struct hostent *ret, char *buf,
			       size_t len, struct hostent **result, int *h_errnop)
{
	struct tb_lookup lk;
	int r;

	prepare();
	if (tb_resolve_real.gethostbyname2_r == NULL)
		return ENOSYS;
	switch (tb_lookup_plan(&lk, name, af, false)) {
	case TB_LOOKUP_NATIVE:
		r = tb_resolve_real.gethostbyname2_r(name, af, ret, buf, len, result, h_errnop);
		break;
	case TB_LOOKUP_BOUNDED:
		r = tb_lookup_gethostbyname_r(&lk, name, true, af, ret, buf, len, result,
					      h_errnop);
		break;
	default:
		tb_lookup_expired(&lk);
		return tb_hostname_r_unanswered(result, h_errnop);
	}
	if (r == 0 && result != NULL)
		learn_hostent(name, *result);
	return r;
}

/* A reverse lookup's name is not remembered: the program does not connect to it by name. */
TB_EXPORT int getnameinfo(const struct sockaddr *sa, socklen_t salen, char *host,
			  socklen_t hostlen, char *serv, socklen_t servlen, int flags)
{
	struct tb_lookup lk;

	prepare();
	if (tb_resolve_real.getnameinfo == NULL)
		return EAI_SYSTEM;
	switch (tb_lookup_plan_addr(&lk, sa, salen,
				    host == NULL || hostlen == 0 || (flags & NI_NUMERICHOST))) {
	case TB_LOOKUP_NATIVE:
		return tb_resolve_real.getnameinfo(sa, salen, host, hostlen, serv, servlen, flags);
	case TB_LOOKUP_BOUNDED:
		return tb_lookup_getnameinfo(&lk, sa, salen, host, hostlen, serv, servlen, flags);
	default:
		tb_lookup_expired(&lk);
		return tb_nameinfo_unanswered(sa, salen, host, hostlen, serv, servlen, flags);
	}
}

/* The older reverse lookups, as getnameinfo; their names are not remembered either. */
TB_EXPORT struct hostent *gethostbyaddr(const void *addr, socklen_t len, int type)
{
	struct tb_lookup lk;

	prepare();
	if (tb_resolve_real.gethostbyaddr == NULL)
		return NULL;
	switch (tb_lookup_plan_hostaddr(&lk, addr, len, type)) {
	case TB_LOOKUP_NATIVE:
		return tb_resolve_real.gethostbyaddr(addr, len, type);
	case TB_LOOKUP_BOUNDED:
		return tb_lookup_gethostbyaddr(&lk, addr, len, type);
	default:
		tb_lookup_expired(&lk);
		return tb_hostaddr_unanswered(addr, len, type);
	}
}

TB_EXPORT int gethostbyaddr_r(const void *addr, socklen_t len, int type, struct hostent *ret,
			      char *buf, size_t buflen, struct hostent **result, int *h_errnop)
{
	struct tb_lookup lk;

	prepare();
	if (tb_resolve_real.gethostbyaddr_r == NULL)
		return ENOSYS;
	switch (tb_lookup_plan_hostaddr(&lk, addr, len, type)) {
	case TB_LOOKUP_NATIVE:
		return tb_resolve_real.gethostbyaddr_r(addr, len, type, ret, buf, buflen, result,
						       h_errnop);
	case TB_LOOKUP_BOUNDED:
		return tb_lookup_gethostbyaddr_r(&lk, addr, len, type, ret, buf, buflen, result,
						 h_errnop);
	default:
		tb_lookup_expired(&lk);
		return tb_hostaddr_r_unanswered(addr, len, type, ret, buf, buflen, result,
						h_errnop);
	}
}
