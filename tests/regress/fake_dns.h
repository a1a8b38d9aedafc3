/* fake_dns.h - a resolver the stories can reach without traffic leaving the machine: private
 * network and mount namespaces (root only), lo up, resolv.conf naming 127.0.0.1.
 *
 * tbr_fake_dns(true) starts a thread that answers every A query for a name whose first label
 * begins with a letter with 10.0.0.<that letter> ("alpha.example.test" -> 10.0.0.97) and
 * every other query with no record; tbr_fake_dns(false) leaves 127.0.0.1:53 closed, so every
 * query is refused at once (the lookup fails fast, without an answer). A story that sets
 * tbr_fake_dns_delay_ms first gets each answer that much later (a slow resolver), and one
 * that sets tbr_fake_dns_silent to a letter gets no answer at all for names beginning with
 * it (a lost query: glibc waits its timeout, 1 s, on its socket). Skips (77) where the
 * namespaces cannot be made. */
#ifndef TB_FAKE_DNS_H
#define TB_FAKE_DNS_H

#include <net/if.h>
#include <netdb.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/mount.h>

#include "regress.h"

/* The address the fake resolver gives `name`, in network order. */
static inline in_addr_t tbr_fake_addr(const char *name)
{
	return htonl((10u << 24) | (unsigned char)name[0]);
}

static atomic_int tbr_fake_dns_delay_ms; /* read by the resolver thread at each query */
static char tbr_fake_dns_silent;

static inline void *tbr_fake_dns_main(void *arg)
{
	int s = (int)(intptr_t)arg;

	for (;;) {
		unsigned char q[512], a[600];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		size_t qend = 12, len;
		int qtype;

		if (n < 12 + 5)
			continue;
		while (qend < (size_t)n && q[qend] != 0) /* the question's name, label by label */
			qend += (size_t)q[qend] + 1;
		if (qend + 5 > (size_t)n)
			continue;
		if (tbr_fake_dns_silent != 0 && q[13] == tbr_fake_dns_silent)
			continue; /* lost */
		qtype = q[qend + 1] << 8 | q[qend + 2];
		qend += 5; /* the root label, type, class */
		memcpy(a, q, qend);
		a[2] = 0x81; /* a response, recursion desired and available, no error */
		a[3] = 0x80;
		a[4] = 0, a[5] = 1;                      /* one question */
		a[6] = 0, a[7] = qtype == 1 ? 1 : 0;     /* one answer for A, none otherwise */
		a[8] = a[9] = a[10] = a[11] = 0;
		len = qend;
		if (qtype == 1) {
			static const unsigned char rr[] = { 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4 };
			char first = (char)q[13];
			in_addr_t ip = tbr_fake_addr(&first);

			memcpy(a + len, rr, sizeof(rr));
			len += sizeof(rr);
			memcpy(a + len, &ip, 4);
			len += 4;
		}
		if (tbr_fake_dns_delay_ms > 0) /* the slow resolver itself, not a synchronisation */
			nanosleep(&(struct timespec){ tbr_fake_dns_delay_ms / 1000,
						      tbr_fake_dns_delay_ms % 1000 * 1000000L },
				  NULL);
		(void)!sendto(s, a, len, 0, (struct sockaddr *)&from, fl);
	}
	return NULL;
}

static inline void tbr_fake_dns(bool answer)
{
	static char conf[] = "/tmp/tbr_resolv_XXXXXX";
	static const char text[] = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct ifreq ifr;
	pthread_t t;
	int fd, s;

	if (geteuid() != 0)
		tbr_skip("needs root for private network and mount namespaces");
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0)
		tbr_skip("unshare(CLONE_NEWNET | CLONE_NEWNS) is refused here");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		tbr_skip("cannot make the mounts private");
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	TBR_CHECK(s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0, "lo: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	TBR_CHECK(ioctl(s, SIOCSIFFLAGS, &ifr) == 0, "lo up: %s", strerror(errno));
	fd = mkstemp(conf);
	TBR_CHECK(fd >= 0 && write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1,
		  "write %s", conf);
	close(fd);
	if (mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0) {
		unlink(conf);
		tbr_skip("cannot bind-mount over /etc/resolv.conf");
	}
	unlink(conf); /* the mount keeps it */
	if (!answer) {
		close(s);
		return;
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	TBR_CHECK(bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind :53: %s",
		  strerror(errno));
	TBR_CHECK(pthread_create(&t, NULL, tbr_fake_dns_main, (void *)(intptr_t)s) == 0,
		  "pthread_create");
	pthread_detach(t);
}

#endif
