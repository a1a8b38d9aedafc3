/* epoll_mod_syscall.c - every EPOLL_CTL_MOD on a governed socket cost a getpid system call.
 *
 * What happened: the epoll_ctl hook asked, on every registration change of a governed
 * socket, whether it ran in a vfork child (tb_foreign_process: a raw getpid). Event loops
 * switch a connection between EPOLLIN and EPOLLOUT with EPOLL_CTL_MOD around every write
 * (libuv does): `make bench`'s churn workload measured 6.002 system calls per exchange
 * under timebox against 4.000 natively - two getpid per exchange, where the design allows
 * none. MOD no longer asks (a vfork child's MOD rewrites an entry that the shared epoll
 * instance now matches anyway); ADD and DEL, once per connection, still do.
 * The sequence: a governed connection registered once, then 2,000 EPOLL_CTL_MOD, counted
 * under `strace -f -c -e trace=getpid`: at most a handful of getpid calls in all.
 */
#include <sys/epoll.h>
#include <sys/wait.h>

#include "regress.h"

#define MODS 2000

static int mod_loop(void)
{
	int lfd, port, fd, ep;
	struct epoll_event ev = { .events = EPOLLIN };

	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll: %s",
		  strerror(errno));
	for (int i = 0; i < MODS; i++) {
		ev.events = i % 2 ? EPOLLIN : EPOLLIN | EPOLLOUT;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0, "mod: %s", strerror(errno));
	}
	close(ep);
	close(fd);
	close(lfd);
	return 0;
}

int main(int argc, char **argv)
{
	char out[64], cmd[512], line[256];
	long getpids = -1;
	FILE *f;
	int st;

	if (argc > 1 && strcmp(argv[1], "--mod-loop") == 0)
		return mod_loop();
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=5s", NULL);
	if (system("command -v strace >/dev/null 2>&1") != 0)
		tbr_skip("strace is not installed");
	snprintf(out, sizeof(out), "/tmp/tb-epoll-mod-%d.txt", (int)getpid());
	/* strace itself must not be governed: the library is given to the traced child only. */
	snprintf(cmd, sizeof(cmd),
		 "LD_PRELOAD= strace -f -c -e trace=getpid -o %s -E LD_PRELOAD='%s' "
		 "/proc/%d/exe --mod-loop", out, getenv("LD_PRELOAD"), (int)getpid());
	st = system(cmd);
	TBR_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the traced loop failed (%d)", st);
	f = fopen(out, "r");
	TBR_CHECK(f != NULL, "%s: %s", out, strerror(errno));
	getpids = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		long calls;

		/* "% time seconds usecs/call calls errors syscall" rows */
		if (strstr(line, " getpid") != NULL &&
		    sscanf(line, "%*f %*f %*d %ld", &calls) == 1)
			getpids = calls;
	}
	fclose(f);
	unlink(out);
	printf("%d EPOLL_CTL_MOD on a governed socket: %ld getpid system calls\n", MODS, getpids);
	TBR_CHECK(getpids < 20, "a system call per registration change (%ld for %d)", getpids,
		  MODS);
	return 0;
}
