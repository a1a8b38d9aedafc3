/* process_rule_deadline.c - scope = process honours the deadline of the rule that governs
 * the socket.
 *
 * What happened: the process budget was opened at start-up from the defaults only, and every
 * socket's call deadline came from it; `timebox check --explain` meanwhile showed the
 * rule's `deadline 1s (rule)`. With defaults deadline 5s and a rule for 127.0.0.1 with
 * deadline 1s, a read from a server that never answers was cut at 5 s. Expected: the
 * deadline that `check` explains: the process's start + the rule's 1 s, phase deadline.
 */
#include <pthread.h>

#include "regress.h"

static int lfd;

static void *silent_server(void *arg)
{
	(void)arg;
	for (;;)
		if (accept(lfd, NULL, NULL) < 0)
			return NULL;
}

int main(int argc, char **argv)
{
	static char conf[64], confenv[96];
	char buf[64];
	pthread_t t;
	int port, fd, err;
	double t0, ms;
	ssize_t r;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		FILE *f;

		snprintf(conf, sizeof(conf), "/tmp/tbr_process_rule.%d.conf", (int)getpid());
		f = fopen(conf, "w");
		TBR_CHECK(f != NULL, "cannot write %s", conf);
		fprintf(f, "defaults = { scope = \"process\"; deadline = \"5s\"; };\n"
			   "destinations = ( { match = \"127.0.0.1\"; deadline = \"1s\"; } );\n");
		fclose(f);
		snprintf(confenv, sizeof(confenv), "TIMEBOX_CONFIG=%s", conf);
	}
	tbr_preload_self(argv, confenv, NULL);
	unlink(getenv("TIMEBOX_CONFIG"));
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, silent_server, NULL);
	t0 = tbt_now_ms();
	fd = tbr_connect(port);
	TBR_CHECK(write(fd, "GET\n", 4) == 4, "write: %s", strerror(errno));
	r = read(fd, buf, sizeof(buf));
	err = errno;
	ms = tbt_now_ms() - t0;
	fprintf(stderr, "read returned %zd %s after %.0f ms\n", r, tbt_errno_name(err), ms);
	TBR_CHECK(r == -1 && err == ETIMEDOUT, "read returned %zd %s", r, tbt_errno_name(err));
	/* The process started a little before t0: never later than 1 s after it. */
	TBR_CHECK(ms < 1000 + 1500, "cut after %.0f ms: the rule's deadline is 1 s", ms);
	return 0;
}
