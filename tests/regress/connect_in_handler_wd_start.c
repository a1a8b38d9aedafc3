/* connect_in_handler_wd_start.c - a signal handler that connected while the process's first
 * connect was starting the watchdog waited for itself for ever.
 *
 * What happened: the first governed connect starts the watchdog thread under a mutex
 * (start_lock), and blocks every signal only around the thread's creation. When the
 * creation was over the signals came back while the mutex was still held: a signal that
 * had arrived meanwhile was delivered right then, on the same thread, and a handler that
 * connects (connect is async-signal-safe) asked for the watchdog again: it blocked on the
 * mutex its own thread held, for ever. Now the signals stay blocked until the mutex is let
 * go, and the handler runs once the watchdog is running.
 * The sequence, made deterministic: a second preload makes the first pthread_create after
 * the program armed it (right before its first connect: the watchdog's creation) raise
 * SIGUSR1 while its caller has the signal blocked, so the signal is pending at the moment
 * the signals come back. The handler connects to a loopback
 * listener. The program's connect and the handler's must both be over within 10 s (a
 * guard thread fails the program; it hung before the fix).
 */
#include <dlfcn.h>
#include <signal.h>

#include "delaylib.h"

static const char raise_source[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <pthread.h>\n"
	"#include <signal.h>\n"
	"#include <stdatomic.h>\n"
	"static atomic_int armed;\n"
	"void tbr_arm(void)\n"
	"{\n"
	"\tatomic_store(&armed, 1);\n"
	"}\n"
	"int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)\n"
	"{\n"
	"\tstatic int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);\n"
	"\tsigset_t now;\n"
	"\tif (!real)\n"
	"\t\treal = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))\n"
	"\t\t\tdlsym(RTLD_NEXT, \"pthread_create\");\n"
	"\tif (pthread_sigmask(SIG_BLOCK, 0, &now) == 0 && sigismember(&now, SIGUSR1) &&\n"
	"\t    atomic_exchange(&armed, 0))\n"
	"\t\tpthread_kill(pthread_self(), SIGUSR1);\n"
	"\treturn real(t, a, fn, arg);\n"
	"}\n";

static int port;
static atomic_int handled, done;

static void on_usr1(int sig)
{
	int saved = errno, fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	(void)sig;
	if (fd >= 0) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			atomic_fetch_add(&handled, 1);
		close(fd);
	}
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	void (*arm)(void);
	int lfd;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(raise_source);
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=5s", NULL);
	tbr_remove_built();
	lfd = tbr_listen(&port);
	sigemptyset(&sa.sa_mask);
	TBR_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction: %s", strerror(errno));
	tbr_watch(&done, 1, "first connect");
	TBR_CHECK((arm = (void (*)(void))dlsym(RTLD_DEFAULT, "tbr_arm")) != NULL,
		  "the raising library is not loaded");
	arm();
	close(tbr_connect(port)); /* the first governed connect: it starts the watchdog */
	atomic_store(&done, 1);
	/* Natively the handler has run by now; the thread sanitizer delivers a signal at its
	 * next interceptor, and nanosleep is one. */
	for (double until = tbt_now_ms() + 5000;
	     atomic_load(&handled) == 0 && tbt_now_ms() < until;) {
		struct timespec ms = { 0, 1000000 };

		nanosleep(&ms, NULL);
	}
	TBR_CHECK(atomic_load(&handled) == 1,
		  "the handler connected %d times, expected once (the signal was raised in "
		  "the watchdog's start)", atomic_load(&handled));
	close(lfd);
	return 0;
}
