/* connect_max_timeout.c - the largest connect timeout failed every connect at once.
 *
 * What happened: a connect's expiry was computed as start + connect_timeout. With the
 * documented maximum, 2562047h, the sum overflows int64 nanoseconds as soon as the
 * monotonic clock passes ~47 minutes (host uptime), the expiry lands in the past, and every
 * connect failed with ETIMEDOUT before it began.
 * The sequence: monotonic clock past 47 minutes (a time namespace moves it forward here,
 * so that the story does not depend on the host's uptime), TIMEBOX_CONNECT_TIMEOUT=2562047h,
 * connect to a listener -> it must succeed; so must a read with the largest read timeout.
 */
#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>

#include "regress.h"

#define UPTIME_NEEDED 2840.0 /* seconds: INT64_MAX ns - 2562047 h */

static double monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the rest of the program in a child whose monotonic clock is 30000 s ahead. */
static void move_clock(void)
{
	const char *off = "monotonic 30000 0\n";
	int fd, status;
	pid_t pid;

	if (getenv("TBR_CHILD") != NULL || monotonic_s() > UPTIME_NEEDED + 60)
		return;
	if (unshare(CLONE_NEWUSER | CLONE_NEWTIME) < 0)
		tbr_skip("uptime below 47 min and no time namespace to move the clock");
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, off, strlen(off)) < 0)
		tbr_skip("cannot set the time namespace's offset");
	close(fd);
	pid = fork(); /* the child is the first process of the new time namespace */
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid > 0) {
		TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
	}
}

int main(int argc, char **argv)
{
	int port, lfd, fd, peer;
	char c;
	ssize_t r;

	(void)argc;
	move_clock();
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=2562047h",
			 "TIMEBOX_READ_TIMEOUT=2562047h", "TIMEBOX_WRITE_TIMEOUT=2562047h",
			 "TIMEBOX_DEADLINE=2562047h", NULL);
	printf("monotonic clock at %.0f s\n", monotonic_s());
	TBR_CHECK(monotonic_s() > UPTIME_NEEDED, "the clock did not move");
	lfd = tbr_listen(&port);
	fd = tbr_connect(port); /* exits on failure, naming the errno */
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(write(fd, "q", 1) == 1, "write: %s", tbt_errno_name(errno));
	TBR_CHECK(write(peer, "a", 1) == 1, "peer write: %s", strerror(errno));
	r = read(fd, &c, 1);
	TBR_CHECK(r == 1, "read returned %zd %s", r, tbt_errno_name(errno));
	close(fd);
	close(peer);
	close(lfd);
	return 0;
}
