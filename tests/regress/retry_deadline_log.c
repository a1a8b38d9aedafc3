/* retry_deadline_log.c - a retry that starts after the deadline passed during the program's
 * own back-off is logged with the expired call's figures.
 *
 * What happened: with deadline 300ms and read_timeout 100ms against a server that never
 * answers, the first attempt is cut at 100 ms (phase first_byte: a failed attempt, the
 * call stays open). The program backs off 400 ms and connects again: the deadline has
 * passed, so the retry fails at once (phase deadline) - but tb_budget_step returned
 * "expired" without filling in the call's start and deadline, and connect logged the
 * uninitialised values: `elapsed_ms=-138104277 limit_ms=0`. Expected: the log line names
 * the call that expired: limit_ms=300, elapsed_ms >= 300 (since the call began).
 */
#include <pthread.h>

#include "regress.h"

static int lfd;

/* Accepts and holds every connection, reading nothing back. */
static void *silent_server(void *arg)
{
	(void)arg;
	for (;;)
		if (accept(lfd, NULL, NULL) < 0)
			return NULL;
}

int main(int argc, char **argv)
{
	static char logpath[64];
	static char line[4096], buf[4096];
	pthread_t t;
	int port, fd, err;
	ssize_t r;
	long elapsed = -1, limit = -1;
	FILE *f;

	(void)argc;
	snprintf(logpath, sizeof(logpath), "TIMEBOX_LOG=/tmp/tbr_retry_log.%d", (int)getpid());
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=300ms", "TIMEBOX_READ_TIMEOUT=100ms", logpath,
			 NULL);
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, silent_server, NULL);

	fd = tbr_connect(port);
	TBR_CHECK(write(fd, "GET\n", 4) == 4, "write: %s", strerror(errno));
	r = read(fd, buf, sizeof(buf));
	err = errno;
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "first read returned %zd %s", r,
		  tbt_errno_name(err));
	close(fd);
	tbt_sleep_ms(400); /* the program's back-off outlasts the deadline */

	{
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		fd = socket(AF_INET, SOCK_STREAM, 0);
		r = connect(fd, (struct sockaddr *)&a, sizeof(a));
		err = errno;
		TBR_CHECK(r == -1 && err == ETIMEDOUT, "retry connect returned %zd %s", r,
			  tbt_errno_name(err));
		close(fd);
	}

	f = fopen(getenv("TIMEBOX_LOG"), "r");
	TBR_CHECK(f != NULL, "cannot open the log %s", getenv("TIMEBOX_LOG"));
	while (fgets(buf, sizeof(buf), f) != NULL)
		if (strstr(buf, "phase=deadline") != NULL)
			snprintf(line, sizeof(line), "%s", buf);
	fclose(f);
	unlink(getenv("TIMEBOX_LOG"));
	TBR_CHECK(line[0] != '\0', "no phase=deadline line in the log");
	fprintf(stderr, "log: %s", line);
	{
		const char *e = strstr(line, "elapsed_ms="), *l = strstr(line, "limit_ms=");

		if (e != NULL)
			elapsed = strtol(e + 11, NULL, 10);
		if (l != NULL)
			limit = strtol(l + 9, NULL, 10);
	}
	TBR_CHECK(limit == 300, "limit_ms=%ld, expected the deadline, 300", limit);
	TBR_CHECK(elapsed >= 300 && elapsed < 5000, "elapsed_ms=%ld, expected >= 300", elapsed);
	return 0;
}
