/* epoll_close_range_record.c - an epoll instance closed by close_range left its record
 * behind, and a copy of another instance that got its number marked the old one's sockets.
 *
 * What happened: close() of an epoll fd drops timebox's record of its registrations, but
 * close_range (and closefrom, which timebox makes with it) did not, nor did dup and
 * F_DUPFD look for a record left at the number they return, as epoll_create and dup2 do.
 * When a dup of another instance landed on the closed number, its waits marked the closed
 * instance's sockets as read waits, though nothing watched them: after read_timeout of
 * silence the idle connection was cut, and the program's next exchange failed with
 * ETIMEDOUT. Natively nothing happens to it. close_range now drops the records of the
 * instances it closes, and dup and F_DUPFD drop one found at their new number.
 * The sequence (TIMEBOX_READ_TIMEOUT=300ms): E0 watches a pipe; E1 watches connection C;
 * close_range(E1, E1); E3 = dup(E0) takes E1's number; a 1,000 ms wait on E3; C must make
 * an exchange. Then with F_DUPFD, and with E1 closed by the system call itself, unseen.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/epoll.h>

#include "regress.h"

static void round_trip(int c, int p, const char *when)
{
	char buf[8];

	errno = 0;
	TBR_CHECK(write(c, "a", 1) == 1 && read(p, buf, 1) == 1 && write(p, "b", 1) == 1 &&
		  read(c, buf, 1) == 1, "the exchange %s failed: %s (the connection was cut "
		  "while no wait watched it)", when, strerror(errno));
}

/* E1 watching c, closed by close_range (or, with `unseen`, by the close system call, out
 * of every hook's sight); its number taken by a copy of e0 (dup, or F_DUPFD). */
static int reuse(int e0, int c, bool unseen, bool by_fcntl)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = c };
	int e1 = epoll_create1(EPOLL_CLOEXEC), e3;

	TBR_CHECK(e1 >= 0 && epoll_ctl(e1, EPOLL_CTL_ADD, c, &ev) == 0, "E1: %s",
		  strerror(errno));
	if (unseen)
		TBR_CHECK(syscall(SYS_close, e1) == 0, "close: %s", strerror(errno));
	else
		TBR_CHECK(close_range((unsigned)e1, (unsigned)e1, 0) == 0, "close_range: %s",
			  strerror(errno));
	e3 = by_fcntl ? fcntl(e0, F_DUPFD_CLOEXEC, e1) : dup(e0);
	if (e3 != e1)
		tbr_skip("the copy did not land on the closed number");
	return e3;
}

int main(int argc, char **argv)
{
	struct epoll_event ev, out[4];
	int port, lfd, c, p, e0, e3, pipefd[2], n;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	lfd = tbr_listen(&port);
	c = tbr_connect(port);
	p = accept(lfd, NULL, NULL);
	TBR_CHECK(p >= 0, "accept: %s", strerror(errno));
	round_trip(c, p, "before");
	e0 = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(e0 >= 0 && pipe(pipefd) == 0, "epoll/pipe: %s", strerror(errno));
	ev.events = EPOLLIN;
	ev.data.fd = pipefd[0];
	TBR_CHECK(epoll_ctl(e0, EPOLL_CTL_ADD, pipefd[0], &ev) == 0, "ADD pipe");
	for (int k = 0; k < 4; k++) {
		static const char *const what[] = {
			"close_range, then dup", "close_range, then F_DUPFD",
			"a close unseen, then dup", "a close unseen, then F_DUPFD",
		};
		char when[96];

		e3 = reuse(e0, c, k >= 2, k % 2 == 1);
		n = epoll_wait(e3, out, 4, 1000); /* the pipe stays silent */
		TBR_CHECK(n == 0, "epoll_wait returned %d (want 0)", n);
		snprintf(when, sizeof(when), "after %s and a wait on the copy", what[k]);
		round_trip(c, p, when);
		close(e3);
	}
	printf("a copy on a number close_range freed did not watch the closed instance's "
	       "connection\n");
	return 0;
}
