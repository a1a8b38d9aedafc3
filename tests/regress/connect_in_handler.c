/* connect_in_handler.c - connect() from a signal handler while the thread resolves names.
 *
 * What happened: with a rule naming a host, getaddrinfo remembers what it resolved under a
 * mutex, and connect looks the address up under the same mutex. POSIX allows connect in a
 * signal handler; a handler that interrupted its own thread inside getaddrinfo, while that
 * thread held the mutex, waited for itself forever.
 * The sequence: a host rule in TIMEBOX_CONFIG; SIGALRM every millisecond, its handler
 * connects to a loopback listener and closes; the main thread calls getaddrinfo("localhost")
 * in a loop for two seconds. It must finish (a guard thread fails it after 20 s).
 */
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "regress.h"

static int listen_fd, port;
static atomic_int handled, refused;

static void on_alarm(int sig)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int saved = errno, fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)sig;
	if (fd >= 0) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			atomic_fetch_add(&handled, 1);
		else
			atomic_fetch_add(&refused, 1);
		close(fd);
	}
	errno = saved;
}

/* The helper threads never take SIGALRM: it must interrupt the resolving thread. */
static void block_alarm(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static void *acceptor(void *arg)
{
	(void)arg;
	block_alarm();
	for (;;) {
		int fd = accept(listen_fd, NULL, NULL);

		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

static void *guard(void *arg)
{
	static const char msg[] = "FAIL: hung for 20 s (the handler's connect deadlocked)\n";

	(void)arg;
	block_alarm();
	tbt_sleep_ms(20000);
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

int main(int argc, char **argv)
{
	static char conf_env[128];
	char conf_path[] = "/tmp/tb_handler_names_XXXXXX";
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
	struct itimerval every_ms = { { 0, 1000 }, { 0, 1000 } }, off = { { 0, 0 }, { 0, 0 } };
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	pthread_t acc, grd;
	long lookups = 0;
	double until;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		int cfd = mkstemp(conf_path);
		static const char conf[] =
			"destinations = ( { match = \"localhost\"; read_timeout = \"5s\"; } );\n";

		TBR_CHECK(cfd >= 0, "mkstemp: %s", strerror(errno));
		TBR_CHECK(write(cfd, conf, sizeof(conf) - 1) == (ssize_t)sizeof(conf) - 1, "write");
		close(cfd);
		snprintf(conf_env, sizeof(conf_env), "TIMEBOX_CONFIG=%s", conf_path);
	}
	tbr_preload_self(argv, conf_env, NULL);
	unlink(getenv("TIMEBOX_CONFIG"));
	listen_fd = tbr_listen(&port);
	pthread_create(&acc, NULL, acceptor, NULL);
	pthread_create(&grd, NULL, guard, NULL);
	/* The process's first governed connect outside any handler, as docs/limitations.md
	 * asks: it starts the library's threads, which a handler must not do. The rule names
	 * localhost: look it up first, so that the address is known to be governed. */
	if (getaddrinfo("localhost", "80", &hints, &res) == 0)
		freeaddrinfo(res);
	close(tbr_connect(port));
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every_ms, NULL);
	until = tbt_now_ms() + 2000;
	while (tbt_now_ms() < until) {
		if (getaddrinfo("localhost", "80", &hints, &res) == 0)
			freeaddrinfo(res);
		lookups++;
	}
	setitimer(ITIMER_REAL, &off, NULL);
	fprintf(stderr, "%ld lookups, %d connects from the handler (%d refused)\n", lookups,
		atomic_load(&handled), atomic_load(&refused));
	TBR_CHECK(atomic_load(&handled) > 0, "the handler never connected");
	return 0;
}
