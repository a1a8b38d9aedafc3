/* wd_start_in_handler.c - the watchdog thread was started by the first wait, which may run
 * inside a signal handler.
 *
 * What happened: the expiry thread was created lazily by the first governed wait of the
 * process. A program whose first blocking read on a governed socket happens in a signal
 * handler (a SIGIO- or timer-driven poller) then called pthread_create from the handler -
 * not async-signal-safe: it takes the thread-stack cache lock and allocates, and deadlocks
 * when the interrupted code holds either. The sequence: connect a governed socket (read
 * timeout 1 s) and, before any wait, look for the watchdog thread (timebox-wd): it must
 * appear with no other call into the library (the connect does not wait for it to run, so
 * the story looks for 5 s at most); then a read in a SIGALRM handler against a silent peer
 * is cut at its limit.
 */
#include <dirent.h>
#include <signal.h>
#include <sys/time.h>

#include "regress.h"

static int fd;
static volatile ssize_t handler_r;
static volatile int handler_errno;

/* The statistics thread (started at the first governed connect too) is not the watchdog. */
/* Is the library's watchdog thread (named timebox-wd) running? A sanitizer's runtime and the
 * statistics thread are threads too: only the name says which one is the watchdog. */
static int watchdog_runs(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int found = 0;

	TBR_CHECK(d != NULL, "opendir: %s", strerror(errno));
	while ((e = readdir(d)) != NULL && !found) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (f != NULL) {
			if (fgets(comm, sizeof(comm), f) == NULL)
				comm[0] = '\0';
			fclose(f);
		}
		found = strncmp(comm, "timebox-wd", 10) == 0;
	}
	closedir(d);
	return found;
}

static void on_alarm(int sig)
{
	char c;
	int saved = errno;

	(void)sig;
	handler_r = read(fd, &c, 1);
	handler_errno = errno;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { 0, 1000 } };
	sigset_t alrm, none;
	int port, lfd;
	struct timespec ms1 = { 0, 1000000 };
	double t0, ms, until;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	lfd = tbr_listen(&port);
	TBR_CHECK(!watchdog_runs(), "the watchdog runs before any governed connect");
	fd = tbr_connect(port);
	/* Only /proc is read until it appears: no call the library hooks starts it. */
	until = tbt_now_ms() + 5000;
	while (!watchdog_runs() && tbt_now_ms() < until)
		nanosleep(&ms1, NULL);
	TBR_CHECK(watchdog_runs(), "5 s after the first governed connect no watchdog runs: the "
		  "first wait would start it");
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigemptyset(&none);
	sigprocmask(SIG_BLOCK, &alrm, NULL); /* delivered only inside sigsuspend: no lost wake */
	t0 = tbt_now_ms();
	setitimer(ITIMER_REAL, &it, NULL);
	sigsuspend(&none);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(handler_r == -1 && handler_errno == ETIMEDOUT && ms >= 1000 && ms < 3000,
		  "read in the handler: %zd %s after %.0f ms", (ssize_t)handler_r,
		  tbt_errno_name(handler_errno), ms);
	close(fd);
	close(lfd);
	return 0;
}
