/* getaddrinfo_failure_keeps_res.c - a failed lookup wrote NULL over the caller's list.
 *
 * What happened: glibc's getaddrinfo writes *res only when it has a list to give; when the
 * lookup fails it leaves the caller's pointer as it was. A program that keeps its last good
 * list in the variable it passes, and goes on using it when a refresh fails, works natively.
 * Under timebox the bounded lookup copied the resolver thread's result into *res whatever
 * the outcome, so a failed refresh set the program's list to NULL, and the program crashed
 * on its next use of it (or leaked the list it had).
 *
 * The sequence: a resolver on 127.0.0.1 that answers A queries and has no record of any
 * other type (fake_dns.h); TIMEBOX_DNS_TIMEOUT=2s; getaddrinfo("alpha.example.test") for
 * AF_INET gives a list; the same lookup for AF_INET6, which the resolver answers with no
 * record, must fail and leave the same list in the variable.
 *
 * The fix: the bounded lookup hands back the resolver thread's list only when the lookup
 * succeeded; otherwise *res is not written, as libc does.
 */
#include "fake_dns.h"

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	struct addrinfo *kept;
	int rc;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DNS_TIMEOUT=2s", NULL);
	tbr_fake_dns(true);
	tbr_hang_guard(10, "the lookups never returned");

	rc = getaddrinfo("alpha.example.test", "80", &hints, &res);
	TBR_CHECK(rc == 0 && res != NULL, "getaddrinfo returned %d (%s)", rc, gai_strerror(rc));
	TBR_CHECK(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr ==
			  tbr_fake_addr("alpha.example.test"),
		  "the first lookup's address is not the resolver's");
	kept = res;

	hints.ai_family = AF_INET6;
	rc = getaddrinfo("alpha.example.test", "80", &hints, &res);
	TBR_CHECK(rc != 0, "the lookup of a name without an IPv6 record succeeded");
	TBR_CHECK(res == kept, "the failed lookup (%d, %s) left %p in the caller's variable, "
			       "not its list %p", rc, gai_strerror(rc), (void *)res, (void *)kept);
	TBR_CHECK(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr ==
			  tbr_fake_addr("alpha.example.test"),
		  "the kept list changed");
	freeaddrinfo(kept);
	return 0;
}
