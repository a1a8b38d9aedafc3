/* fork_in_expiry_handler.c - a child forked by a signal handler that interrupted its
 * thread's own expiry of a socket hangs for ever in close() of that socket.
 *
 * What happens: an expiry raises the socket's `busy` count from its identity check to its
 * shutdown(), and close() waits for the count to fall to zero (sock.h rule 3). A fork child
 * starts with every count at zero (watchdog.c reset_sock: the parent's threads, the
 * watchdog first, do not exist in the child). But the forking thread does: when it forked
 * from a signal handler that interrupted its own expiry (between take_busy and drop_busy),
 * that expiry goes on in the child once the handler returns, and its drop_busy takes the
 * count from 0 to UINT_MAX. Every close() of the socket in the child then spins in
 * tb_sock_quiesce for ever (sched_yield, a whole core). The wait records already tell the
 * forking thread's own waits from the dead threads' (waits.c fork_child), the epoll mirror
 * its own references (epoll_set.h rule 5); `busy` did not.
 *
 * The sequence: read_timeout 300 ms; thread W blocks in recv on governed fd N; at 400 ms the
 * main thread reads N too: its wait begins past the expiry, so it expires N itself
 * (xfer.c wait_past_expiry). A second preload library (delaylib.h) holds the expiries in
 * their TCP_INFO look, where a preemption could fall: the watchdog's 300 ms, the main
 * thread's 1 s; at 700 ms SIGUSR1 (SA_RESTART), whose handler forks. In the child the
 * main thread's recv returns, then it closes N: that close must return (the guard ends the
 * child after 3 s). The parent reports the child's verdict.
 */
#include <sys/prctl.h>
#include <sys/wait.h>

#include "regress.h"
#include "delaylib.h"

static const char delay_c[] = TBR_DELAY_HEAD TBR_DELAY_NAP_THROUGH_SIGNALS
	TBR_DELAY_TCP_INFO("1000");

static int victim;
static volatile sig_atomic_t in_child;

static void on_usr1(int sig)
{
	pid_t p;
	int st;

	(void)sig;
	p = fork();
	if (p == 0) {
		in_child = 1;
		return; /* the interrupted expiry goes on in the child */
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		_exit(1);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

static void *waiter(void *arg)
{
	char c;

	(void)arg;
	(void)!recv(victim, &c, 1, 0);
	return NULL;
}

static void *kicker(void *arg)
{
	tbt_sleep_ms(300);
	pthread_kill((pthread_t)arg, SIGUSR1);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	pthread_t w, k;
	int port, lfd, peer, r, err;
	char c;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(delay_c);
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	tbr_remove_built();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	lfd = tbr_listen(&port);
	victim = tbr_connect(port); /* governed; the peer never answers */
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	pthread_create(&w, NULL, waiter, NULL);
	pthread_detach(w); /* not joined: it may still run at exit */
	tbt_sleep_ms(400);
	prctl(PR_SET_NAME, "tbr-late");
	pthread_create(&k, NULL, kicker, (void *)pthread_self());
	pthread_detach(k); /* not joined: it may still run at exit */
	errno = 0;
	r = (int)recv(victim, &c, 1, 0);
	err = errno;
	TBR_CHECK(in_child, "no fork happened during the recv (recv: %d, %s): the expiry was "
		  "not where this story holds it", r, strerror(err));
	tbr_hang_guard(3, "the child's close() of the socket its thread was expiring when it "
			  "forked never returned");
	close(victim);
	alarm(0);
	printf("child: recv %d (%s), close returned\n", r, strerror(err));
	return 0;
}
