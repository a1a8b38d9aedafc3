/* reuse_under_call.c - a call on a number closed under it wrote into the socket that reused
 * the library's entry.
 *
 * What happened: the make stress run under SANITIZE=thread reported data races between
 * connect() filling a fresh socket entry (its destination, its framing state) and a write()
 * of another thread still reading that entry's destination (the deadline's step) and
 * feeding its framing. The program had closed the writer's fd from a third thread while
 * the write was under way - a pattern programs use to cancel I/O - and the entry went
 * back to the pool and out again to the next connect within microseconds. The stale
 * write's generation check passed just before the close, so it went on to read a torn
 * destination and to write its request bytes into the new connection's framing: the new
 * connection could be framed from someone else's bytes, or turned raw. Silent in a plain
 * build; under ThreadSanitizer this program reports the race (exit 66) within a second.
 * The same run showed the statistics' per-socket records read after a relaxed look at the
 * segment's state, racing with the thread that had just mapped them (now an acquire).
 * The sequence: 8 threads write HTTP requests (deadline 5 s, so every write steps the
 * call and feeds the framing) and reconnect when their fd is gone; a closer thread keeps
 * closing their fds; the numbers and the entries are reused at once.
 * Passes: no sanitizer report, no crash, and every write either moved bytes or failed
 * with an error the close explains (EBADF, EPIPE, ECONNRESET, ENOTCONN).
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#include "regress.h"

#define WRITERS 8
#define RUN_MS 1500.0
#define LIMIT_MS 30000.0
#define CLOSES 100

static int port;
static atomic_int fds[WRITERS];
static atomic_bool stop;
static atomic_ulong writes, closes, odd;
static atomic_int odd_errno;

static void server(int lfd)
{
	struct pollfd p[512];
	int n = 1;
	char buf[4096];

	p[0].fd = lfd;
	p[0].events = POLLIN;
	for (;;) {
		if (poll(p, (nfds_t)n, -1) < 0)
			continue;
		if ((p[0].revents & POLLIN) && n < 512) {
			int c = accept(lfd, NULL, NULL);

			if (c >= 0) {
				p[n].fd = c;
				p[n].events = POLLIN;
				p[n].revents = 0;
				n++;
			}
		}
		for (int i = 1; i < n; i++) {
			if (!p[i].revents)
				continue;
			if (read(p[i].fd, buf, sizeof(buf)) <= 0) {
				close(p[i].fd);
				p[i--] = p[--n];
			}
		}
	}
}

static void *writer(void *arg)
{
	static const char req[] = "GET /x HTTP/1.1\r\nHost: regress\r\n\r\n";
	int i = (int)(intptr_t)arg;

	while (!atomic_load(&stop)) {
		int fd = atomic_load(&fds[i]);
		ssize_t r;

		if (fd < 0) {
			fd = tbr_connect(port);
			atomic_store(&fds[i], fd);
		}
		r = write(fd, req, sizeof(req) - 1);
		if (r > 0) {
			atomic_fetch_add(&writes, 1);
			continue;
		}
		if (errno != EBADF && errno != EPIPE && errno != ECONNRESET && errno != ENOTCONN) {
			atomic_fetch_add(&odd, 1);
			atomic_store(&odd_errno, errno);
		}
		/* Gone under us: forget the number (it may already name another writer's). */
		atomic_compare_exchange_strong(&fds[i], &fd, -1);
	}
	return NULL;
}

static void *closer(void *arg)
{
	unsigned seed = 7;

	(void)arg;
	while (!atomic_load(&stop)) {
		int i = (int)(rand_r(&seed) % WRITERS);
		int fd = atomic_exchange(&fds[i], -1);

		if (fd >= 0) {
			close(fd);
			atomic_fetch_add(&closes, 1);
		}
		sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t w[WRITERS], c;
	int lfd;
	pid_t srv;
	double t0;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		/* The program's own close-under-a-writer is the point of the test: ThreadSanitizer
		 * would report it as a race on the fd (stacks through the close and write
		 * interceptors only); the library's own races have other stacks. */
		static char supp[64], opts[160];
		FILE *f;

		snprintf(supp, sizeof(supp), "/tmp/reuse_under_call.%d.supp", (int)getpid());
		f = fopen(supp, "w");
		TBR_CHECK(f != NULL, "%s: %s", supp, strerror(errno));
		fputs("race:closer\n", f);
		fclose(f);
		snprintf(opts, sizeof(opts), "TSAN_OPTIONS=die_after_fork=0:suppressions=%s", supp);
		setenv("TBR_SUPP", supp, 1);
		tbr_preload_self(argv, "TIMEBOX_DEADLINE=5s", "TIMEBOX_READ_TIMEOUT=5s", opts, NULL);
	}
	if (getenv("TBR_SUPP") != NULL)
		unlink(getenv("TBR_SUPP")); /* read by the sanitizer's start-up, if any */
	signal(SIGPIPE, SIG_IGN);
	lfd = tbr_listen(&port);
	srv = fork();
	TBR_CHECK(srv >= 0, "fork: %s", strerror(errno));
	if (srv == 0)
		server(lfd);
	close(lfd);
	for (int i = 0; i < WRITERS; i++)
		atomic_init(&fds[i], -1);
	for (int i = 0; i < WRITERS; i++)
		TBR_CHECK(pthread_create(&w[i], NULL, writer, (void *)(intptr_t)i) == 0, "pthread_create");
	TBR_CHECK(pthread_create(&c, NULL, closer, NULL) == 0, "pthread_create");
	t0 = tbt_now_ms();
	/* The run's length: RUN_MS and CLOSES closes, whichever is later (a sanitizer's first
	 * report, even a suppressed one, holds the closer for seconds while it symbolizes);
	 * at most LIMIT_MS. Not synchronisation: no result depends on where it stops. */
	while (tbt_now_ms() - t0 < LIMIT_MS &&
	       (tbt_now_ms() - t0 < RUN_MS || atomic_load(&closes) < CLOSES))
		tbt_sleep_ms(50);
	atomic_store(&stop, true);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	pthread_join(c, NULL);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	printf("%lu writes, %lu closes under the writers, %lu unexpected errors\n",
	       atomic_load(&writes), atomic_load(&closes), atomic_load(&odd));
	TBR_CHECK(atomic_load(&closes) >= CLOSES, "too few closes to race in %.0f s (%lu)",
		  LIMIT_MS / 1000, atomic_load(&closes));
	TBR_CHECK(atomic_load(&odd) == 0, "a write failed with %s",
		  tbt_errno_name(atomic_load(&odd_errno)));
	return 0;
}
