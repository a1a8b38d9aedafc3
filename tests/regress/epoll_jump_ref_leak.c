/* epoll_jump_ref_leak.c - a signal handler that jumped out of epoll_wait leaked the
 * epoll instance's record.
 *
 * What happened: epoll_wait took a reference on timebox's record of the instance (its
 * entries, its array) and held it across the blocking call, to give it back when the call
 * returned. A handler that leaves the call with siglongjmp (the alarm() timeout idiom, which
 * timebox otherwise supports: waits.h) skips that return: the reference was never given
 * back, so when the program closed the epoll fd the record was never freed - ~300 bytes per
 * jump for a program that makes an instance per operation, without bound - and the thread's
 * count of what it holds stayed raised for good (a fork from it then trusts nothing the
 * other threads held). pthread_cancel of a thread blocked in epoll_wait did the same.
 * The sequence: a governed socket (TIMEBOX_READ_TIMEOUT set); 2000 times: epoll_create1, the
 * socket registered EPOLLIN, an interval timer whose handler siglongjmps, epoll_wait(-1),
 * close -> the heap in use (mallinfo2) grows by less than 64 kB, as natively (0).
 */
#include <malloc.h>
#include <setjmp.h>
#include <sys/epoll.h>
#include <sys/time.h>

#include "regress.h"

static sigjmp_buf jump;

static void jump_out(int sig)
{
	(void)sig;
	siglongjmp(jump, 1);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	int port, lfd, a, pa;
	size_t before, grew;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=60s", NULL);
	lfd = tbr_listen(&port);
	a = tbr_connect(port);
	pa = accept(lfd, NULL, NULL);
	TBR_CHECK(pa >= 0, "accept: %s", strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = jump_out;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);

	before = mallinfo2().uordblks;
	for (int i = 0; i < 2000; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = a }, out;
		int ep = epoll_create1(EPOLL_CLOEXEC);

		TBR_CHECK(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev) == 0, "epoll: %s",
			  strerror(errno));
		if (sigsetjmp(jump, 1) == 0) {
			struct itimerval it = { { 0, 0 }, { 0, 200 } };

			setitimer(ITIMER_REAL, &it, NULL);
			epoll_wait(ep, &out, 1, -1);
			TBR_CHECK(0, "epoll_wait returned");
		}
		close(ep);
	}
	grew = mallinfo2().uordblks - before;
	printf("heap in use grew by %zu bytes over 2000 jumps out of epoll_wait\n", grew);
	TBR_CHECK(grew < 65536, "the records of closed instances were not freed");
	return 0;
}
