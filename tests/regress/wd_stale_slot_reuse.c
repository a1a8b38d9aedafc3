/* wd_stale_slot_reuse.c - the watchdog's forgetting of a stale fd slot took the next
 * connection's socket out of the table.
 *
 * What happened: when the watchdog finds a due wait whose socket no fd can still be
 * verified for (the fd was closed or dup'ed over where the hooks could not see: a raw
 * syscall, a library's own dup2), it gives the socket up and untracks the stale slot, so
 * that the object now behind that number is passed straight to libc. It did so outside
 * `busy`: it checked that the slot still named the socket, at that generation, looked at
 * the number's inode, then took the slot and dropped a reference. In between, the program
 * could close the number (the hooked close untracks the stale slot and frees the pool
 * entry), and a new connect get the same number and the same pool entry (the free list
 * hands back the last entry freed): the take removed that live socket from the table and
 * freed its entry. The new connection went ungoverned - its stalled read was never cut,
 * and its gate slot went back while it was still open.
 * The sequence, with a second preload (delaylib.h) holding the watchdog 500 ms right after
 * its look at the inode, where a preemption would: read_timeout 300 ms; thread W blocks
 * reading governed fd N from a silent peer; a raw dup3 puts /dev/null on N (W's recv keeps
 * the socket itself alive); at W's expiry the watchdog finds no fd of the socket, and
 * inside its hold the program closes N (its /dev/null) and connects again, getting N. A
 * recv on the new N from a silent peer must be cut at read_timeout (ETIMEDOUT), not run to
 * its own 2 s SO_RCVTIMEO (EAGAIN) as an ungoverned socket's does. The untracking is now
 * tb_sock_take_if_stale: under `busy` (the close waits for it before the number can be
 * reused), and given back when the generation moved.
 */
#include <fcntl.h>
#include <sys/syscall.h>

#include "regress.h"
#include "delaylib.h"

/* syscall() is how timebox makes its identity checks' fstat (real.h, tb_fstat_raw). The
 * watchdog's second look at a number that is not a socket is the stale slot's: the first is
 * find_fd's, under `busy`. */
static const char delay_c[] = TBR_DELAY_HEAD
	"static int looks;\n"
	TBR_DELAY_SYSCALL("not_socket(n, a, r) && named(\"timebox-wd\") && ++looks == 2");

static int victim;
static atomic_int waiter_tid;

static void *waiter(void *arg)
{
	char c;

	(void)arg;
	atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
	(void)!recv(victim, &c, 1, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mark;
	pthread_t w;
	int port, lfd, peer, peer2, devnull, fd, r, err;
	double ms;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		tbr_mark_name("/tmp/tbr-stale-slot-");
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
	TBR_CHECK(pthread_create(&w, NULL, waiter, NULL) == 0, "pthread_create");
	TBR_CHECK(tbr_wait_sleeping(&waiter_tid, 5000), "the waiter never blocked in its recv");
	/* Where no hook sees it: the number now names /dev/null. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	TBR_CHECK(devnull >= 0, "open /dev/null: %s", strerror(errno));
	TBR_CHECK(syscall(SYS_dup3, devnull, victim, O_CLOEXEC) == victim, "dup3: %s",
		  strerror(errno));
	close(devnull);
	/* At the waiter's expiry the watchdog finds no fd of its socket, and is held. */
	TBR_CHECK(tbr_mark_wait(mark, 5000), "the watchdog never looked at the stale slot");
	tbr_close_under_call(victim); /* the program's own /dev/null copy */
	fd = tbr_reconnect_on(lfd, port, victim, &peer2);
	if (fd < 0)
		return 0;
	r = tbr_read_silent(fd, &err, &ms);
	TBR_CHECK(r < 0 && err == ETIMEDOUT,
		  "fd %d, a new governed connection on the stale slot's number, was not governed: "
		  "its read of a silent peer returned %d (%s) after %.0f ms instead of ETIMEDOUT "
		  "at 300 ms", fd, r, r < 0 ? strerror(err) : "end of stream", ms);
	printf("the new connection on fd %d was cut at %.0f ms\n", fd, ms);
	close(peer); /* the waiter's recv ends */
	close(peer2);
	pthread_join(w, NULL);
	return 0;
}
