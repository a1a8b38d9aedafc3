/* protect_lock_in_handler.c - a signal handler's exchange with a protected destination
 * hung the thread it interrupted.
 *
 * What happened: with a breaker (or a retry budget, or an adaptive gate) each call's
 * outcome is recorded in the destination's state under its mutex (protect.c). A signal
 * handler that does an exchange of its own - send and recv are async-signal-safe, and a
 * program may well answer a health probe from SIGALRM or flush a metric from SIGTERM -
 * records its outcome the same way. When the signal came while its thread held that mutex,
 * the handler waited for a mutex its own thread would never release: the program hung.
 * The sequence: breaker on, a deadline of 5 s; 20,000 exchanges on socket A while a 100 us
 * interval timer's handler (SA_RESTART) makes an exchange on socket B, to the same
 * destination, each time it fires. Every exchange succeeds, the handler's included, and
 * the program ends (a watcher thread fails it when no exchange completes for 5 s).
 *
 * The fix: the destination's lock is taken only by a thread that does not already hold
 * one; a handler that interrupted the holder leaves its call out of the destination's
 * counts (its exchange itself goes on as natively).
 *
 * Under a sanitizer (TB_SANITIZE, set by make regress) the timer fires every 250 us and the
 * main thread makes 5,000 exchanges: with ThreadSanitizer's runtime the handler's exchange
 * costs more than 100 us, so at 100 us the handler took nearly all of the main thread's
 * time (439,309 handler exchanges for 5,000 of its own) and the run took 55 s to past the
 * runner's 60 s limit on a two-core machine.
 */
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "regress.h"

#define EXCHANGES 20000
#define EXCHANGES_SANITIZED 5000

static int lfd, port, hfd = -1;
static atomic_int handler_ok, handler_bad, done_main;

static void exchange_in_handler(int sig)
{
	int saved = errno;
	char buf[8];

	(void)sig;
	if (write(hfd, "pong", 4) == 4 && read(hfd, buf, sizeof(buf)) == 4)
		atomic_fetch_add(&handler_ok, 1);
	else
		atomic_fetch_add(&handler_bad, 1);
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	sigset_t alrm;
	struct itimerval it = { .it_value = { 0, 100 }, .it_interval = { 0, 100 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	char buf[16];
	const char *san = getenv("TB_SANITIZE");
	bool sanitized = san != NULL && *san != '\0';
	int a, exchanges = sanitized ? EXCHANGES_SANITIZED : EXCHANGES;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_BREAKER=1", "TIMEBOX_DEADLINE=5s", NULL);
	/* The handler runs on the main thread only: on the peer's thread it would wait for an
	 * answer that thread owes it, a hang natively too. */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, tbr_echo);
	a = tbr_connect(port);
	hfd = tbr_connect(port);
	tbr_watch(&done_main, exchanges, "exchange");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = exchange_in_handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	if (sanitized)
		it.it_value.tv_usec = it.it_interval.tv_usec = 250;
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < exchanges; i++) {
		TBR_CHECK(write(a, "ping", 4) == 4, "exchange %d: write: %s", i,
			  tbt_errno_name(errno));
		r = read(a, buf, 4);
		TBR_CHECK(r == 4, "exchange %d: read %zd %s", i, r, tbt_errno_name(errno));
		atomic_store(&done_main, i + 1);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	fprintf(stderr, "%d exchanges; the handler's exchanges ok=%d bad=%d\n", exchanges,
		atomic_load(&handler_ok), atomic_load(&handler_bad));
	TBR_CHECK(atomic_load(&handler_bad) == 0, "an exchange from the handler failed");
	TBR_CHECK(atomic_load(&handler_ok) > 100, "the handler ran only %d times",
		  atomic_load(&handler_ok));
	return 0;
}
