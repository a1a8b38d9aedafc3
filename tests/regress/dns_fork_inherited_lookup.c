/* dns_fork_inherited_lookup.c - a child forked during a lookup sent its queries on the
 * parent's socket, and closed its own file.
 *
 * What happened: natively, a single-threaded program has no lookup under way when it forks,
 * and its child resolves names like any process. Under timebox, a lookup cut by
 * dns_timeout goes on on a resolver thread until glibc gives up on it. glibc keeps the
 * stack of every thread the child does not have for the next thread the child creates,
 * and the thread's resolver state (the sockets of a lookup under way) lives at the top of
 * that stack, where a new thread inherits it as it was. The child's first resolver thread
 * got the stack of the parent's, and with it the number of the socket the parent's lookup
 * waited on: its queries went out on the parent's socket and failed (EAI_AGAIN); a daemon
 * that had closed its fds and opened its log file under that number had glibc write the
 * query into the file, take it for a broken socket, and close it. Had the child's lookups
 * run natively instead, the first thread the child created of its own would have got that
 * stack, and the same.
 *
 * The sequence: a resolver on 127.0.0.1 that answers, except names beginning with "s"
 * (fake_dns.h); TIMEBOX_DNS_TIMEOUT=200ms; getaddrinfo("silent.example.test") is cut at
 * 200 ms while glibc waits 1 s on its socket; fork. The child finds that socket among the
 * fds it inherited (none: the lookup was over before the fork, and the story cannot run),
 * closes every fd from 3 up, opens a log file under the socket's number, and resolves
 * "alpha.example.test" on its own thread, then on a thread it creates: both must give the
 * resolver's address, and the log file must still be open under its number.
 *
 * The fix: resolver threads run on stacks timebox maps itself. glibc never keeps a stack
 * the caller supplied, and clears the thread's structure on it at each creation: every
 * resolver thread starts with fresh resolver state, and no thread of the child starts on a
 * resolver thread's stack.
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include "fake_dns.h"

#define CHILD_SKIP 77

static int lookup(const char *who)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc = getaddrinfo("alpha.example.test", "80", &hints, &res);

	if (rc != 0 || res == NULL) {
		fprintf(stderr, "FAIL: the child's lookup on %s returned %d (%s)\n", who, rc,
			gai_strerror(rc));
		return 1;
	}
	if (((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr !=
	    tbr_fake_addr("alpha.example.test")) {
		fprintf(stderr, "FAIL: the child's lookup on %s: not the resolver's address\n", who);
		return 1;
	}
	freeaddrinfo(res);
	return 0;
}

static void *lookup_main(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)lookup("a thread it created");
}

/* The UDP socket connected to 127.0.0.1:53 among the fds: the parent's lookup's. */
static int resolver_socket(void)
{
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_in peer;
		socklen_t len = sizeof(peer);
		int type;
		socklen_t tl = sizeof(type);

		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_DGRAM &&
		    getpeername(fd, (struct sockaddr *)&peer, &len) == 0 &&
		    peer.sin_family == AF_INET && peer.sin_port == htons(53))
			return fd;
	}
	return -1;
}

static int child(void)
{
	char path[] = "/tmp/tbr_fork_log_XXXXXX";
	int sock = resolver_socket(), log, rc;
	struct stat before, after;
	pthread_t t;
	void *trc;

	if (sock < 0) {
		fprintf(stderr, "SKIP: the parent's lookup was over before the fork\n");
		return CHILD_SKIP;
	}
	for (int fd = 3; fd < 1024; fd++) /* a daemon's start */
		close(fd);
	log = mkstemp(path);
	if (log < 0 || (log != sock && dup2(log, sock) != sock)) {
		fprintf(stderr, "FAIL: the log file: %s\n", strerror(errno));
		return 1;
	}
	if (log != sock)
		close(log);
	unlink(path);
	fstat(sock, &before);
	rc = lookup("its main thread");
	if (rc == 0 && pthread_create(&t, NULL, lookup_main, NULL) == 0) {
		pthread_join(t, &trc);
		rc = (int)(intptr_t)trc;
	}
	if (fstat(sock, &after) != 0 || after.st_ino != before.st_ino ||
	    after.st_dev != before.st_dev) {
		fprintf(stderr, "FAIL: the log file under fd %d was closed by the lookups (%s)\n",
			sock, strerror(errno));
		return 1;
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
	int rc, status;
	pid_t pid;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DNS_TIMEOUT=200ms", NULL);
	tbr_fake_dns_silent = 's';
	tbr_fake_dns(true);
	tbr_hang_guard(20, "the child never finished");

	rc = getaddrinfo("silent.example.test", "80", &hints, &res);
	TBR_CHECK(rc == EAI_AGAIN, "the lookup of a name never answered returned %d (%s)", rc,
		  gai_strerror(rc));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(child());
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_SKIP)
		tbr_skip("the parent's lookup was over before the fork");
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with %d",
		  status);
	return 0;
}
