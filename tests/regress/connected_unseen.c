/* connected_unseen.c - a non-blocking connect whose completion the program learns from a
 * zero-timeout poll and SO_ERROR is no longer taken for a handshake still under way.
 *
 * What happened: only POLLOUT from a waiting poll, connect() == 0/EISCONN or moved bytes
 * moved a socket from CONNECTING to OPEN. lftp and other server-speaks-first clients (SMTP,
 * FTP, MySQL) learn the handshake's end from poll(POLLOUT, 0) + getsockopt(SO_ERROR) and
 * then poll(POLLIN, -1) for the banner: that wait was judged as the connect phase.
 * With connect_timeout 200ms, read_timeout 2s and a banner sent after 500 ms, timebox cut
 * at 211 ms (phase=connect) where natively the banner arrives at ~500 ms; with only
 * read_timeout 1s against a silent server the wait was not bounded at all.
 * The sequence: non-blocking connect; poll(POLLOUT, 0) until ready; SO_ERROR == 0;
 * poll(POLLIN, -1); read. Expected: (banner) the banner is read; (silent) the read fails
 * with ETIMEDOUT no earlier than 1 s after the connect, logged as phase=first_byte.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>

#include "regress.h"

static int lfd, banner_ms;

/* Accepts one connection; sends a banner after banner_ms (never when negative). */
static void *server(void *arg)
{
	int fd = accept(lfd, NULL, NULL);

	(void)arg;
	if (fd >= 0 && banner_ms >= 0) {
		tbt_sleep_ms(banner_ms);
		if (write(fd, "220 hello\r\n", 11) != 11)
			perror("server write");
	}
	pause();
	return NULL;
}

/* The client: returns what the read after poll(POLLIN, -1) returned, errno in *err. */
static ssize_t client(int port, int *err, double *ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), soerr = -1;
	socklen_t sl = sizeof(soerr);
	struct pollfd p = { .fd = fd };
	char buf[64];
	double t0 = tbt_now_ms();
	ssize_t r;

	fcntl(fd, F_SETFL, O_NONBLOCK);
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	TBR_CHECK(r == 0 || errno == EINPROGRESS, "connect: %s", tbt_errno_name(errno));
	for (p.events = POLLOUT, p.revents = 0; poll(&p, 1, 0) == 0; p.revents = 0)
		sched_yield();
	TBR_CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0,
		  "SO_ERROR %d", soerr);
	p.events = POLLIN;
	TBR_CHECK(poll(&p, 1, -1) == 1, "poll(POLLIN): %s", tbt_errno_name(errno));
	r = read(fd, buf, sizeof(buf));
	*err = errno;
	*ms = tbt_now_ms() - t0;
	return r;
}

/* Runs this program again in a child under the library, in `mode`, with the settings. */
static int run(const char *mode, const char *connect_timeout, const char *read_timeout,
	       const char *log)
{
	char *args[] = { (char *)"connected_unseen", (char *)mode, NULL };
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		tbr_preload_self(args, connect_timeout, read_timeout, log, NULL);
		_exit(1);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv)
{
	static char logenv[96];
	char line[512] = "";
	pthread_t t;
	int port, err, rc;
	double ms;
	ssize_t r;
	FILE *f;

	if (getenv("TBR_CHILD") == NULL) {
		if (getenv("TBR_PRELOAD") == NULL)
			tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
		snprintf(logenv, sizeof(logenv), "TIMEBOX_LOG=/tmp/tbr_connected_unseen.%d",
			 (int)getpid());
		rc = run("banner", "TIMEBOX_CONNECT_TIMEOUT=200ms", "TIMEBOX_READ_TIMEOUT=2s",
			 logenv);
		if (rc == 0)
			rc = run("silent", "TIMEBOX_READ_TIMEOUT=1s", logenv, NULL);
		unlink(logenv + strlen("TIMEBOX_LOG="));
		return rc;
	}
	TBR_CHECK(argc == 2, "usage: connected_unseen banner|silent");
	banner_ms = strcmp(argv[1], "banner") == 0 ? 500 : -1;
	alarm(10); /* unbounded: a failure, not a hang */
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, server, NULL);
	r = client(port, &err, &ms);
	fprintf(stderr, "%s: read returned %zd %s after %.0f ms\n", argv[1], r,
		tbt_errno_name(r < 0 ? err : 0), ms);
	if (banner_ms >= 0) {
		TBR_CHECK(r == 11, "the banner was not read: %zd %s", r, tbt_errno_name(err));
		return 0;
	}
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "silent server: read returned %zd %s", r,
		  tbt_errno_name(err));
	TBR_CHECK(ms >= 1000, "cut after %.0f ms, before the 1 s read timeout", ms);
	TBR_CHECK(ms < 1000 + 1500, "cut after %.0f ms", ms);
	f = fopen(getenv("TIMEBOX_LOG"), "r");
	TBR_CHECK(f != NULL, "no log");
	while (fgets(line, sizeof(line), f) != NULL && strstr(line, "event=timeout") == NULL)
		;
	fclose(f);
	fprintf(stderr, "log: %s", line);
	TBR_CHECK(strstr(line, "phase=first_byte") != NULL, "expected phase=first_byte");
	return 0;
}
