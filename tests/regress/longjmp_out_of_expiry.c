/* longjmp_out_of_expiry.c - a signal handler that siglongjmp()s out of a call while
 * the call's thread expires the socket leaves the socket's close() spinning for ever.
 *
 * What happens: an expiry raises the socket's `busy` count from its identity check to its
 * shutdown(), and close() waits (sched_yield in a loop, no bound) for the count to fall to
 * zero (sock.h rule 3; tb_sock_quiesce). A thread's own expiry runs inside the program's
 * call (a read that begins past the limit expires the socket itself: xfer.c
 * wait_past_expiry). When a signal handler leaves that call with siglongjmp - the classic
 * alarm() timeout around a blocking read - the expiry never reaches drop_busy: `busy` stays
 * raised for ever, and the program's close() of the socket then never returns (a whole
 * core spent in sched_yield). Waits abandoned that way are ended by the longjmp hook
 * (waits.h, regress/longjmp_ghost_wait); the expiry's `busy` was not.
 *
 * The sequence: read_timeout 300 ms; thread W blocks in recv on governed fd N; at 400 ms
 * the main thread reads N too: its wait begins past the expiry, so it expires N itself. A
 * second preload library (delaylib.h) holds that expiry 1 s in its TCP_INFO look, where a
 * preemption could fall (and the watchdog's 300 ms, so that the main thread's expiry
 * begins before the watchdog's cut); at 700 ms SIGALRM, whose handler siglongjmp()s out of
 * the recv. The main thread then closes N: close must return (the guard ends the program
 * after 3 s).
 */
#include <setjmp.h>
#include <sys/prctl.h>

#include "regress.h"
#include "delaylib.h"

static const char delay_c[] = TBR_DELAY_HEAD TBR_DELAY_NAP_THROUGH_SIGNALS
	TBR_DELAY_TCP_INFO("1000");

static int victim;
static sigjmp_buf env;
static volatile sig_atomic_t jumped;

static void on_usr1(int sig)
{
	(void)sig;
	jumped = 1;
	siglongjmp(env, 1); /* give up on the read */
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
	int port, lfd, peer;
	char c;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(delay_c);
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	tbr_remove_built();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
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
	if (sigsetjmp(env, 1) == 0)
		(void)!recv(victim, &c, 1, 0);
	TBR_CHECK(jumped, "the recv returned before the signal: the expiry was not where this "
		  "story holds it");
	tbr_hang_guard(3, "close() of the socket whose expiry a siglongjmp left never returned");
	close(victim);
	alarm(0);
	printf("close returned after the siglongjmp\n");
	close(peer);
	return 0;
}
