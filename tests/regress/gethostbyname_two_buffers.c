/* gethostbyname_two_buffers.c - gethostbyname2 freed the result of gethostbyname.
 *
 * What happened: glibc keeps one static result per function: gethostbyname's stays valid
 * across calls of gethostbyname2, and the reverse. timebox's bounded lookup kept a single
 * result per thread for both, freed by the thread's next bounded call of either, so
 * `h1 = gethostbyname(a); gethostbyname2(b, AF_INET); use(h1)` read freed memory.
 *
 * The sequence: a resolver on 127.0.0.1 that answers (fake_dns.h); TIMEBOX_CONNECT_TIMEOUT=5s;
 * h1 = gethostbyname("alpha.example.test"); h2 = gethostbyname2("bravo.example.test",
 * AF_INET); both must still hold their own name and address. Then, as in glibc, the next
 * gethostbyname replaces h1's contents (h1 then reads the new answer, never freed memory).
 * Freed memory is filled with a mark (MALLOC_PERTURB_, tcache off).
 */
#include "fake_dns.h"

static void check(const struct hostent *h, const char *name)
{
	in_addr_t want = tbr_fake_addr(name);

	TBR_CHECK(h != NULL, "%s: no result (h_errno %d)", name, h_errno);
	TBR_CHECK(h->h_addrtype == AF_INET && h->h_length == 4, "%s: hostent freed: type %d", name,
		  h->h_addrtype);
	TBR_CHECK(h->h_name != NULL && strcmp(h->h_name, name) == 0, "%s: hostent freed: name",
		  name);
	TBR_CHECK(h->h_addr_list != NULL && h->h_addr_list[0] != NULL &&
		  memcmp(h->h_addr_list[0], &want, 4) == 0 && h->h_addr_list[1] == NULL,
		  "%s: hostent freed: addresses", name);
}

int main(int argc, char **argv)
{
	struct hostent *h1, *h2, *h3;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=5s", "MALLOC_PERTURB_=165",
			 "GLIBC_TUNABLES=glibc.malloc.tcache_count=0", NULL);
	tbr_fake_dns(true);

	h1 = gethostbyname("alpha.example.test");
	check(h1, "alpha.example.test");
	h2 = gethostbyname2("bravo.example.test", AF_INET);
	check(h2, "bravo.example.test");
	check(h1, "alpha.example.test");
	h3 = gethostbyname("charlie.example.test");
	check(h3, "charlie.example.test");
	check(h1, "charlie.example.test"); /* h1 may be h3, or still alpha's: never freed */
	check(h2, "bravo.example.test");
	return 0;
}
