/* dns_deadline_connect.c - the connect after a lookup got a deadline of its own.
 *
 * What happened: the deadline bounds the whole call, and the lookup is its first step
 * (segment 2, "DNS + TCP handshake"; configuration.md: "the connect that follows spends the
 * same deadline"). A lookup opens the thread's call towards no destination; a step towards
 * another destination is another call (so that a write-only stream's sends lend their
 * deadline to no other request); so the connect that followed the lookup closed the
 * lookup's call and opened a new one with the whole deadline again. A program with a 1 s
 * deadline whose resolver took 600 ms, connecting to a server that never accepts, was cut
 * at 1.6 s instead of 1 s.
 *
 * The sequence: in private namespaces, a resolver that answers after 600 ms (fake_dns.h);
 * TIMEBOX_DEADLINE=1s, TIMEBOX_DNS_TIMEOUT=5s; getaddrinfo("upstream.example.test"), then a
 * connect to a listener whose accept queue is full (here on 127.0.0.1: the answer's address
 * is not routable in the namespace, and the budget does not depend on which address it is).
 * The connect must fail at the deadline, 1 s after the lookup began, never before it.
 *
 * The fix: a call that lookups opened (no destination yet) is the call of the first
 * destination the thread then steps towards: it keeps its start and deadline.
 */
#include <netdb.h>

#include "fake_dns.h"

#define NAME "upstream.example.test"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	struct sockaddr_in stalled;
	int64_t t0, looked_up, cut;
	int rc, fd;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=1s", "TIMEBOX_DNS_TIMEOUT=5s", NULL);
	tbr_fake_dns_delay_ms = 600;
	tbr_fake_dns(true);
	tbr_listen_dropping_syns(&stalled);
	tbr_hang_guard(10, "the connect was never cut");

	t0 = now_ms();
	rc = getaddrinfo(NAME, "80", &hints, &res);
	looked_up = now_ms() - t0;
	TBR_CHECK(rc == 0 && res != NULL, "getaddrinfo returned %d (%s)", rc, gai_strerror(rc));
	freeaddrinfo(res);
	TBR_CHECK(looked_up >= 600 && looked_up < 1000,
		  "the lookup took %lld ms, not the resolver's 600", (long long)looked_up);

	fd = socket(AF_INET, SOCK_STREAM, 0);
	TBR_CHECK(fd >= 0, "socket: %s", strerror(errno));
	rc = connect(fd, (struct sockaddr *)&stalled, sizeof(stalled));
	cut = now_ms() - t0;
	TBR_CHECK(rc < 0, "the stalled connect succeeded");
	TBR_CHECK(cut >= 1000, "the connect was cut at %lld ms, before the 1 s deadline",
		  (long long)cut);
	TBR_CHECK(cut < 1400,
		  "the connect was cut %lld ms after the lookup began: it did not spend the "
		  "lookup's deadline (a fresh one ends at %lld ms)",
		  (long long)cut, (long long)(looked_up + 1000));
	alarm(0);
	return 0;
}
