/*
 * epoll_del_add_getpid - an event loop that switches a socket by DEL and ADD paid two extra
 * system calls for each.
 *
 * Before changing its mirror of an epoll instance, the epoll_ctl hook asked whether it ran
 * in a vfork child (a getpid system call), so that a child would change none of its
 * parent's bookkeeping. A MOD of a known registration already skipped the question, but
 * redis's ae event loop switches a socket between reading and writing by EPOLL_CTL_DEL and
 * EPOLL_CTL_ADD: redis-benchmark made 4 getpid calls per request on top of its 8 system
 * calls, and ran at 0.8 of its native throughput. The question was never needed there:
 * the instance is the kernel's, shared with a vfork child through the fd it inherited, so
 * what the child adds or deletes the parent's instance holds or no longer holds too.
 *
 * The program registers a governed socket with an epoll instance, then deletes and adds
 * it again 2,000 times, under strace counting getpid and epoll_ctl. It fails when there are
 * more than 100 getpid calls (there were 4,000).
 */
#include <limits.h>
#include <sys/epoll.h>

#include "regress.h"

#define ROUNDS 2000

static int loop(void)
{
	int lport, lfd = tbr_listen(&lport), fd = tbr_connect(lport), ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	TBR_CHECK(ep >= 0, "epoll_create1: %s", strerror(errno));
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "ADD: %s", strerror(errno));
	for (int i = 0; i < ROUNDS; i++) {
		ev.events = i % 2 ? EPOLLIN : EPOLLOUT;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0, "DEL: %s", strerror(errno));
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "ADD: %s", strerror(errno));
	}
	close(ep);
	close(fd);
	close(lfd);
	return 0;
}

/* The number of calls of `name` in strace -c's summary file, 0 when absent. */
static long calls_of(const char *path, const char *name)
{
	char line[256];
	long calls = 0;
	FILE *f = fopen(path, "r");

	TBR_CHECK(f != NULL, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		double pct, secs;
		long usecs, n;
		char last[64];
		size_t len = strlen(line);

		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == ' '))
			line[--len] = '\0';
		if (sscanf(line, "%lf %lf %ld %ld", &pct, &secs, &usecs, &n) != 4)
			continue;
		if (len >= strlen(name) && strcmp(line + len - strlen(name), name) == 0 &&
		    sscanf(strrchr(line, ' ') + 1, "%63s", last) == 1 && strcmp(last, name) == 0)
			calls = n;
	}
	fclose(f);
	return calls;
}

int main(int argc, char **argv)
{
	const char *lib = getenv("TBR_PRELOAD");
	char self[PATH_MAX], out[] = "/tmp/tbr-epoll-getpid-XXXXXX", cmd[2 * PATH_MAX + 512];
	long getpids, ctls;
	ssize_t n;
	int fd;

	if (argc == 2 && strcmp(argv[1], "loop") == 0)
		return loop();
	if (lib == NULL || *lib == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	if (system("strace -V >/dev/null 2>&1") != 0)
		tbr_skip("strace is not installed (tests/deps.sh installs it)");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	TBR_CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	fd = mkstemp(out);
	TBR_CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "strace -f -c -e trace=getpid,epoll_ctl -o '%s' -E 'LD_PRELOAD=%s' "
		 "-E TIMEBOX_READ_TIMEOUT=1s -E TIMEBOX_CONNECT_TIMEOUT=1s '%s' loop",
		 out, lib, self);
	TBR_CHECK(system(cmd) == 0, "%s failed", cmd);
	getpids = calls_of(out, "getpid");
	ctls = calls_of(out, "epoll_ctl");
	unlink(out);
	fprintf(stderr, "%ld epoll_ctl calls, %ld getpid calls\n", ctls, getpids);
	TBR_CHECK(ctls >= 2 * ROUNDS, "strace saw %ld epoll_ctl calls, not the loop's", ctls);
	TBR_CHECK(getpids <= 100, "%ld getpid calls for %d DEL and ADD pairs", getpids, ROUNDS);
	return 0;
}
