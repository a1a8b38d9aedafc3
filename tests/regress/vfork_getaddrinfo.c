/* vfork_getaddrinfo.c - a vfork child's lookup left the parent's resolver pool broken.
 *
 * What happened: a vfork child shares its parent's memory. A child that resolves a name
 * before exec (a launcher that checks its target, a shell's vfork path) took timebox's
 * bounded path: it queued its lookup on the parent's resolver pool and, the pool being
 * empty, started a resolver thread. That thread belonged to the child and died with it at
 * _exit or exec, but the pool, in the shared memory, went on counting it as a thread waiting
 * for work. The parent's next lookup was handed to that dead thread and failed with
 * EAI_AGAIN at the dns timeout, and so did every bounded lookup after it. Natively the
 * parent's lookups succeed.
 *
 * The sequence: a resolver on 127.0.0.1 that answers (fake_dns.h); TIMEBOX_DNS_TIMEOUT=1s;
 * the parent starts timebox with a numeric lookup; vfork; the child calls
 * getaddrinfo("child.example.test") and _exits; the parent's
 * getaddrinfo("parent.example.test") must succeed, with the fake resolver's address.
 */
#include <sys/wait.h>

#include "fake_dns.h"

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	in_addr_t want = tbr_fake_addr("parent.example.test");
	int rc, status;
	double t0, ms;
	pid_t pid;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DNS_TIMEOUT=1s", NULL);
	tbr_fake_dns(true);
	TBR_CHECK(getaddrinfo("127.0.0.1", "80", &hints, &res) == 0, "numeric lookup");
	freeaddrinfo(res);

	pid = vfork();
	if (pid == 0) {
		struct addrinfo *cres = NULL;

		_exit(getaddrinfo("child.example.test", "80", &hints, &cres) == 0 ? 0 : 3);
	}
	TBR_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "vfork: %s", strerror(errno));
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's lookup failed (%d)",
		  status);

	t0 = tbt_now_ms();
	rc = getaddrinfo("parent.example.test", "80", &hints, &res);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(rc == 0, "the parent's lookup after the child's returned %d (%s) after %.0f ms",
		  rc, gai_strerror(rc), ms);
	TBR_CHECK(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr == want,
		  "a wrong address");
	freeaddrinfo(res);
	return 0;
}
