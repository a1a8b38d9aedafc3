/*
 * epoll_fork_waiter_refs - a child forked while a thread of its parent was blocked in
 * epoll_wait kept that instance's mirror for ever after it closed the epoll fd.
 *
 * timebox mirrors each epoll instance's governed registrations in a table, released when
 * its references fall to none; each thread blocked in epoll_wait on the instance holds one
 * for the whole wait. A fork copies those counts, but not the threads that hold them: in
 * the child, closing the epoll fd gave back the table's own reference and left the dead
 * waiters', so the instance and its entry array (24 bytes per registration, rounded up to
 * a power of two) stayed allocated for the child's whole life - a pre-forking server whose
 * parent waits on its listeners in a thread pool leaks that in every worker. Now the child
 * counts the table's reference alone (the forking thread held none), and its close frees
 * the mirror.
 *
 * The program registers 600 numbers of one governed socket (dups: each its own entry, an
 * array of 1,024: 24 kB), lets a thread block in epoll_wait on the instance (until it
 * sleeps there), and forks; the child closes the epoll fd and fails when the C library's
 * allocated bytes (mallinfo2) fell by less than 16 kB (by 0 before, 24,608 now). A
 * sanitizer's allocator does not answer mallinfo2: then the program says so and skips.
 */
#include <fcntl.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/wait.h>

#include "regress.h"

#define NUMBERS 600

static int ep;

/* The child: closes the epoll fd; 0 when that freed the mirror, 1 when not, 77 when the
 * allocator cannot tell. */
static int child(void)
{
	size_t before = mallinfo2().uordblks, after;

	if (before == 0) {
		fprintf(stderr, "SKIP: mallinfo2 reports no allocated bytes (a sanitizer's "
			"allocator)\n");
		return TBR_SKIP;
	}
	close(ep);
	after = mallinfo2().uordblks;
	fprintf(stderr, "child: %zu bytes allocated before closing the epoll fd, %zu after\n",
		before, after);
	if (after + 16 * 1024 > before) {
		fprintf(stderr, "FAIL: closing the epoll fd freed %zd bytes, expected its mirror "
			"(>= 16 kB)\n", (ssize_t)(before - after));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int lport, lfd, sock, wake[2], status;
	struct tbr_epoll_waiter w;
	pid_t pid;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=5s", "TIMEBOX_CONNECT_TIMEOUT=5s", NULL);
	lfd = tbr_listen(&lport);
	ep = epoll_create1(EPOLL_CLOEXEC);
	TBR_CHECK(ep >= 0, "epoll_create1: %s", strerror(errno));
	sock = tbr_connect(lport);
	for (int i = 0; i < NUMBERS; i++) {
		int fd = fcntl(sock, F_DUPFD_CLOEXEC, 100);

		TBR_CHECK(fd >= 0, "F_DUPFD: %s", strerror(errno));
		ev.data.fd = fd;
		TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "ADD: %s", strerror(errno));
	}
	TBR_CHECK(pipe2(wake, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
	ev.data.fd = wake[0];
	TBR_CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, wake[0], &ev) == 0, "ADD: %s", strerror(errno));
	/* Known before the fork, the mirror allocated: a child of a threaded process under
	 * ThreadSanitizer's runtime once took long enough to exit that the waited-on socket
	 * was cut meanwhile, and the run was killed. */
	if (mallinfo2().uordblks == 0)
		tbr_skip("mallinfo2 reports no allocated bytes (a sanitizer's allocator)");
	tbr_epoll_waiter_start(&w, ep);
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(child());
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	TBR_CHECK(write(wake[1], "x", 1) == 1, "wake the waiter: %s", strerror(errno));
	tbr_epoll_waiter_join(&w);
	close(lfd);
	TBR_CHECK(WIFEXITED(status), "the child died (status %#x)", status);
	if (WEXITSTATUS(status) == TBR_SKIP)
		exit(TBR_SKIP);
	TBR_CHECK(WEXITSTATUS(status) == 0, "the child kept the mirror of the closed epoll fd");
	return 0;
}
