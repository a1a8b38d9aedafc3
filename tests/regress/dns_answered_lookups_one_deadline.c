/* dns_answered_lookups_one_deadline.c - a thread's answered lookups shared one deadline.
 *
 * What happened: natively, a program that resolves name after name (a crawler, a checker of
 * its configuration's hosts, a resolver thread of its own) gets every answer however long
 * the series takes. Under timebox a lookup opens the thread's call, which has no destination
 * yet, and a lookup that followed joined that call whatever had become of the one before:
 * back-to-back answered lookups all spent the first one's deadline. With a 5 s deadline and
 * a resolver taking 50 ms, the 94th lookup was cut with 10 ms left, and every lookup after
 * it failed at once for the retry window.
 *
 * The sequence: a resolver on 127.0.0.1 that answers after 50 ms (fake_dns.h);
 * TIMEBOX_DEADLINE=400ms, TIMEBOX_DNS_TIMEOUT=5s; 16 getaddrinfo calls one after the other
 * (800 ms in all, twice the deadline) must each return the resolver's address.
 *
 * The fix: an answered lookup ends the call that lookups opened, as a response ends a TCP
 * call: the thread's next lookup opens a call of its own. The connect that follows a lookup
 * still takes its call over (dns_deadline_connect.c), and a lookup retried after a failure
 * still joins the failed one's call, so the program's retries spend one deadline.
 */
#include "fake_dns.h"

#define LOOKUPS 16

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	in_addr_t want = tbr_fake_addr("series.example.test");

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=400ms", "TIMEBOX_DNS_TIMEOUT=5s", NULL);
	tbr_fake_dns_delay_ms = 50;
	tbr_fake_dns(true);
	tbr_hang_guard(20, "the lookups never returned");

	for (int i = 0; i < LOOKUPS; i++) {
		struct addrinfo *res = NULL;
		double t0 = tbt_now_ms();
		int rc = getaddrinfo("series.example.test", "80", &hints, &res);

		TBR_CHECK(rc == 0 && res != NULL,
			  "lookup %d of %d returned %d (%s) after %.0f ms", i + 1, LOOKUPS, rc,
			  gai_strerror(rc), tbt_now_ms() - t0);
		TBR_CHECK(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr == want,
			  "lookup %d: not the resolver's address", i + 1);
		freeaddrinfo(res);
	}
	return 0;
}
