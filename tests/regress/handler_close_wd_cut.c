/* handler_close_wd_cut.c - a signal handler's close() of a governed socket did not
 * wait for the watchdog's cut, which then shut down the next fd given that number.
 *
 * What happens: close() waits while an expiry is between its check that the fd still names
 * the socket and its shutdown() (`busy`, sock.h rule 3), so that the number cannot be
 * reused under that shutdown. One exception: a handler that closes the socket above its own
 * thread's expiry of it must not wait for that expiry (it cannot end before the handler
 * returns), so tb_sock_quiesce marks it and returns at once - without looking whether
 * another thread's expiry (the watchdog's) holds `busy` too. The number then goes back to
 * the kernel while the watchdog is about to shut it down, the next open gets it, and the
 * watchdog's shutdown() lands on that unrelated descriptor: a connection of the program's
 * own is cut (reads return 0, writes EPIPE).
 *
 * How a program gets there: a thread that reads a silent peer past read_timeout while
 * another waits on the same socket (the watchdog cuts the waiter; the late reader expires
 * the socket itself), and an alarm/timeout handler on that thread that closes the socket
 * to abort the call - at the moment both expiries are under way. A second preload library
 * (delaylib.h) holds the two expiries where a preemption would: the watchdog 300 ms in
 * TCP_INFO then 400 ms before its shutdown(), the late reader in its TCP_INFO until the
 * signal. The sequence: read_timeout 300 ms; thread W blocks in recv on governed fd N; at
 * 400 ms thread T reads N too (its wait begins past the expiry: it expires N itself); at
 * 700 ms SIGUSR1 to T, whose handler closes N; the main thread makes a socketpair, which
 * gets N; at 1000 ms the watchdog's shutdown runs. The socketpair must be intact: a
 * MSG_DONTWAIT read of it says EAGAIN, not 0.
 */
#include <fcntl.h>
#include <sys/prctl.h>

#include "regress.h"
#include "delaylib.h"

static const char delay_c[] = TBR_DELAY_HEAD
	"static void nap(int ms)\n"
	"{\n"
	"	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };\n"
	"	nanosleep(&t, 0); /* a signal ends it early */\n"
	"}\n"
	TBR_DELAY_TCP_INFO("3000")
	"static int wd_shut;\n"
	"int shutdown(int fd, int how)\n"
	"{\n"
	"	static int (*real)(int, int);\n"
	"	if (!real)\n"
	"		real = (int (*)(int, int))dlsym(RTLD_NEXT, \"shutdown\");\n"
	"	if (named(\"timebox-wd\") && !wd_shut++)\n"
	"		nap(400);\n"
	"	return real(fd, how);\n"
	"}\n";

static int victim;
static atomic_int closed_in_handler;

static void on_usr1(int sig)
{
	(void)sig;
	close(victim); /* abort the call: the socket goes */
	atomic_store(&closed_in_handler, 1);
}

static void *waiter(void *arg)
{
	char c;

	(void)arg;
	(void)!recv(victim, &c, 1, 0);
	return NULL;
}

static void *late(void *arg)
{
	char c;

	(void)arg;
	prctl(PR_SET_NAME, "tbr-late");
	(void)!recv(victim, &c, 1, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	pthread_t w, t;
	int port, lfd, peer, sp[2], r, err;
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
	tbr_hang_guard(10, "the story hung");
	pthread_create(&w, NULL, waiter, NULL);
	pthread_detach(w); /* not joined: it may still run at exit */
	tbt_sleep_ms(400);
	pthread_create(&t, NULL, late, NULL);
	pthread_detach(t); /* not joined: it may still run at exit */
	tbt_sleep_ms(300);
	pthread_kill(t, SIGUSR1);
	while (!atomic_load(&closed_in_handler))
		tbt_sleep_ms(1);
	TBR_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair: %s", strerror(errno));
	if (sp[0] != victim && sp[1] != victim) {
		printf("the socketpair got %d and %d, not the closed %d\n", sp[0], sp[1], victim);
		return 0;
	}
	tbt_sleep_ms(600); /* past the watchdog's shutdown */
	errno = 0;
	r = (int)recv(victim, &c, 1, MSG_DONTWAIT);
	err = errno;
	TBR_CHECK(r < 0 && err == EAGAIN,
		  "fd %d, a socketpair made after the governed socket on that number was closed, "
		  "was shut down: recv says %d (%s) instead of EAGAIN", victim, r,
		  r < 0 ? strerror(err) : "end of stream");
	printf("the socketpair on fd %d is intact\n", victim);
	close(peer); /* the waiter's recv ends */
	return 0;
}
