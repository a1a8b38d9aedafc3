/* expired_stale_reuse.c - a call on an expired socket's stale number took the next
 * connection's socket out of the table.
 *
 * What happened: a read or send on a socket that has expired first checks that its number
 * still names that socket (the program may have closed it where no hook could see, a raw
 * syscall or a library's own dup2, and reused it): when it does not, the slot is untracked
 * and the call made as the program's own. That check (tb_stale_check) looked at the
 * number's inode, then took the slot if it still pointed at the same pool entry - outside
 * `busy`, and without the generation. In between, another thread could close the number
 * (the hooked close untracks the slot and frees the pool entry) and connect again, getting
 * the same number and the same entry (the free list hands back the last entry freed): the
 * take removed that live socket from the table and dropped its reference. The new
 * connection went ungoverned - its stalled read was never cut - and its gate slot went back
 * while it was still open. A send that found the number no longer a socket (ENOTSOCK) had
 * the same window between its generation check and its take (tb_xfer_abandon_stale).
 * The sequence, with a second preload (delaylib.h) holding thread L 500 ms right after its
 * look at the inode, where a preemption would: read_timeout 300 ms; a recv on governed fd
 * N from a silent peer is cut (ETIMEDOUT: the socket is expired); a raw dup3 puts
 * /dev/null on N; thread L calls recv(N, MSG_DONTWAIT) and is held in the check; inside
 * its hold the program closes N and connects again, getting N. Once L is done, a recv on
 * the new N from a silent peer must be cut at read_timeout (ETIMEDOUT), not run to its own
 * 2 s SO_RCVTIMEO (EAGAIN) as an ungoverned socket's does. The check is now made under
 * `busy` with the generation the call began with (tb_sock_check_slot): the close waits for
 * it before the number can be reused, and a generation that moved is not the call's socket.
 */
#include <fcntl.h>
#include <sys/syscall.h>

#include "regress.h"
#include "delaylib.h"

/* syscall() is how timebox makes its identity checks' fstat (real.h, tb_fstat_raw): held
 * is thread L's first look at a number that is not a socket. */
static const char delay_c[] = TBR_DELAY_HEAD
	"static int looks;\n"
	TBR_DELAY_SYSCALL("not_socket(n, a, r) && named(\"tbr-late\") && ++looks == 1");

static int victim;

/* Thread L: a call on the expired socket's number, which now names /dev/null. What it
 * returns is the program's own call's, on whatever the number names when it is made. */
static void *late(void *arg)
{
	char c;

	(void)arg;
	pthread_setname_np(pthread_self(), "tbr-late");
	(void)!recv(victim, &c, 1, MSG_DONTWAIT);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mark;
	pthread_t l;
	int port, lfd, peer, peer2, devnull, fd, r, err;
	double ms;
	char c;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		tbr_mark_name("/tmp/tbr-expired-stale-");
		tbr_add_preload(delay_c);
		tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms",
				 tbr_tsan_rule("race:tbr_close_under_call\n"), NULL);
	}
	tbr_remove_built();
	tbr_tsan_rule_remove();
	mark = tbr_mark_path();
	lfd = tbr_listen(&port);
	victim = tbr_connect(port); /* governed; the peer never answers */
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	tbr_hang_guard(10, "the story hung");
	errno = 0;
	r = (int)recv(victim, &c, 1, 0);
	TBR_CHECK(r < 0 && errno == ETIMEDOUT, "the first read was not cut: %d (%s)", r,
		  strerror(errno));
	/* Where no hook sees it: the number now names /dev/null. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	TBR_CHECK(devnull >= 0, "open /dev/null: %s", strerror(errno));
	TBR_CHECK(syscall(SYS_dup3, devnull, victim, O_CLOEXEC) == victim, "dup3: %s",
		  strerror(errno));
	close(devnull);
	TBR_CHECK(pthread_create(&l, NULL, late, NULL) == 0, "pthread_create");
	TBR_CHECK(tbr_mark_wait(mark, 5000), "thread L never looked at the stale number");
	tbr_close_under_call(victim); /* the program's own /dev/null copy */
	fd = tbr_reconnect_on(lfd, port, victim, &peer2);
	pthread_join(l, NULL);
	if (fd < 0)
		return 0;
	r = tbr_read_silent(fd, &err, &ms);
	TBR_CHECK(r < 0 && err == ETIMEDOUT,
		  "fd %d, a new governed connection on the stale number, was not governed: its "
		  "read of a silent peer returned %d (%s) after %.0f ms instead of ETIMEDOUT at "
		  "300 ms", fd, r, r < 0 ? strerror(err) : "end of stream", ms);
	printf("the new connection on fd %d was cut at %.0f ms\n", fd, ms);
	close(peer);
	close(peer2);
	return 0;
}
