/* gethostbyname_thread_exit.c - a gethostbyname result freed when the thread that asked exits.
 *
 * What happened: glibc's gethostbyname returns process-wide static storage, valid until the
 * next gethostbyname of any thread. timebox's bounded lookup (any name not answered from
 * /etc/hosts, as soon as a connect or dns timeout is set) returned a hostent kept in the
 * calling thread's storage instead, freed by a thread-specific destructor when that thread
 * exited. A worker that resolves a name and hands the pointer to the main thread (the way
 * old C servers resolve their upstreams at start-up) left the main thread reading freed
 * memory: garbage addresses, or valgrind's "invalid read ... freed by
 * __nptl_deallocate_tsd".
 *
 * The sequence: a resolver on 127.0.0.1 that answers (fake_dns.h); TIMEBOX_CONNECT_TIMEOUT=5s;
 * a thread calls gethostbyname("worker.example.test") and exits; the main thread reads the
 * hostent. Freed memory is filled with a mark (MALLOC_PERTURB_, tcache off), so a freed
 * result shows as a wrong name or address even without a sanitizer.
 */
#include "fake_dns.h"

#define NAME "worker.example.test"

static void *worker(void *arg)
{
	*(struct hostent **)arg = gethostbyname(NAME);
	return NULL;
}

int main(int argc, char **argv)
{
	struct hostent *h = NULL;
	pthread_t t;
	in_addr_t want = tbr_fake_addr(NAME);

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=5s", "MALLOC_PERTURB_=165",
			 "GLIBC_TUNABLES=glibc.malloc.tcache_count=0", NULL);
	tbr_fake_dns(true);

	TBR_CHECK(pthread_create(&t, NULL, worker, &h) == 0, "pthread_create");
	TBR_CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	TBR_CHECK(h != NULL, "gethostbyname failed: h_errno %d", h_errno);
	TBR_CHECK(h->h_addrtype == AF_INET && h->h_length == 4, "hostent freed: type %d length %d",
		  h->h_addrtype, h->h_length);
	TBR_CHECK(h->h_name != NULL && strcmp(h->h_name, NAME) == 0, "hostent freed: a wrong name");
	TBR_CHECK(h->h_addr_list != NULL && h->h_addr_list[0] != NULL &&
		  memcmp(h->h_addr_list[0], &want, 4) == 0 && h->h_addr_list[1] == NULL,
		  "hostent freed: wrong addresses");
	return 0;
}
