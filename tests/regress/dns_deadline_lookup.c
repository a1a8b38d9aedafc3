/* dns_deadline_lookup.c - the deadline did not cover name resolution.
 *
 * What happened: TIMEBOX_DEADLINE promises to bound the whole call, and the seed counts the
 * lookup in segment 2 ("DNS + TCP handshake"). But the resolver hooks only passed the
 * lookup through: a program with a 300 ms deadline whose resolver never answers waited in
 * getaddrinfo for glibc's timeout x attempts (5 s x 2 by default; 1 s here), and its retry
 * waited as long again, before the deadline could apply to anything.
 *
 * The sequence: in private network and mount namespaces (root only), a UDP socket on
 * 127.0.0.1:53 that never answers and a resolv.conf naming it (timeout:1 attempts:1);
 * TIMEBOX_DEADLINE=300ms; getaddrinfo("svc.example.com") must fail with EAI_AGAIN at 300 ms
 * (never earlier, well before glibc's 1 s); the retry that follows is inside the retry
 * window and must fail at once; gethostbyname_r there must fail with TRY_AGAIN the same way.
 */
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include "regress.h"

#define NAME "svc.example.com"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* lo up, a resolver on 127.0.0.1:53 that never answers, and resolv.conf naming it. */
static void silent_resolver(void)
{
	static char conf[] = "/tmp/tbr_resolv_XXXXXX";
	static const char text[] = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct ifreq ifr;
	int fd, s;

	if (geteuid() != 0)
		tbr_skip("needs root for private network and mount namespaces");
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0)
		tbr_skip("unshare(CLONE_NEWNET | CLONE_NEWNS) is refused here");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		tbr_skip("cannot make the mounts private");
	s = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	TBR_CHECK(s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0, "lo: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	TBR_CHECK(ioctl(s, SIOCSIFFLAGS, &ifr) == 0, "lo up: %s", strerror(errno));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	TBR_CHECK(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind :53: %s",
		  strerror(errno));
	fd = mkstemp(conf);
	TBR_CHECK(fd >= 0 && write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1,
		  "write %s", conf);
	close(fd);
	if (mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0) {
		unlink(conf);
		tbr_skip("cannot bind-mount over /etc/resolv.conf");
	}
	unlink(conf); /* the mount keeps it */
	/* s stays open and unread for the life of the program: the resolver that never answers */
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	struct hostent he, *result = NULL;
	char buf[1024];
	int64_t t0, ms;
	int rc, herr = 0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=300ms", NULL);
	silent_resolver();

	t0 = now_ms();
	rc = getaddrinfo(NAME, "80", &hints, &res);
	ms = now_ms() - t0;
	TBR_CHECK(rc == EAI_AGAIN, "getaddrinfo returned %d (%s)", rc, gai_strerror(rc));
	TBR_CHECK(ms >= 300, "getaddrinfo failed early: %lld ms", (long long)ms);
	TBR_CHECK(ms < 900, "getaddrinfo took %lld ms: the 300 ms deadline did not bound it",
		  (long long)ms);

	/* The program's retry: the call's deadline has passed, so it fails at once. */
	t0 = now_ms();
	rc = getaddrinfo(NAME, "80", &hints, &res);
	ms = now_ms() - t0;
	TBR_CHECK(rc == EAI_AGAIN && ms < 200, "the retry returned %d after %lld ms", rc,
		  (long long)ms);
	rc = gethostbyname_r(NAME, &he, buf, sizeof(buf), &result, &herr);
	TBR_CHECK(rc == EAGAIN && result == NULL && herr == TRY_AGAIN,
		  "gethostbyname_r returned %d, h_errno %d", rc, herr);
	return 0;
}
