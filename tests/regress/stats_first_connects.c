/* stats_first_connects.c - connects made while the statistics segment was being created
 * were not counted.
 *
 * What happened: the first governed connect creates the process's statistics segment (a
 * file in the gate directory, sized, mapped). Other threads that connected meanwhile found
 * it "opening" and counted nothing - by design, never to wait. A pool of threads starting
 * at once is exactly that case: `timebox stats` showed LEASED 5 but CALLS 4 for a client
 * whose 5 threads were all inside a call, and the end-to-end test of the gate view failed
 * about one run in three on a loaded machine. Now those connects wait for the segment
 * (bounded: 1 s).
 * The sequence: the segment's creation is made slow (a second preload delays fallocate by
 * 300 ms, where a loaded machine would be slow); 8 threads connect at once and hold their
 * connections; `timebox stats PID` must show CALLS 8.
 */
#include <pthread.h>

#include "delaylib.h"

#define THREADS 8

static int port;
static pthread_barrier_t go;
static int fds[THREADS];

static void *connector(void *arg)
{
	int i = (int)(intptr_t)arg;

	pthread_barrier_wait(&go);
	fds[i] = tbr_connect(port);
	return NULL;
}

/* CALLS of the destination's row in `timebox stats PID` (-1: no such row). */
static long calls_shown(const char *launcher)
{
	char cmd[600], line[512], dest[64];
	long calls = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "LD_PRELOAD= '%s' stats %d", launcher, (int)getpid());
	snprintf(dest, sizeof(dest), "127.0.0.1:%d", port);
	p = popen(cmd, "r");
	TBR_CHECK(p != NULL, "popen: %s", strerror(errno));
	while (fgets(line, sizeof(line), p) != NULL) {
		char d[64], host[64], leased[16], pending[16], avail[16], max[16];
		long c;

		printf("  %s", line);
		/* DEST HOST LEASED PENDING AVAIL MAX CALLS ... */
		if (sscanf(line, "%63s %63s %15s %15s %15s %15s %ld", d, host, leased, pending,
			   avail, max, &c) == 7 && strcmp(d, dest) == 0)
			calls = c;
	}
	pclose(p);
	return calls;
}

int main(int argc, char **argv)
{
	static char launcher[512];
	pthread_t t[THREADS];
	int lfd;
	long calls;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		const char *pre = getenv("TBR_PRELOAD");
		const char *lib = pre ? strstr(pre, "/lib/libtimebox.so") : NULL;
		const char *start = lib;

		if (lib == NULL)
			tbr_skip("TBR_PRELOAD names no libtimebox.so");
		while (start > pre && start[-1] != ' ')
			start--;
		snprintf(launcher, sizeof(launcher), "%.*s/bin/timebox", (int)(lib - start), start);
		setenv("TBR_LAUNCHER", launcher, 1);
		setenv("TBR_FALLOCATE_MS", "300", 1);
		tbr_add_preload(tbr_fallocate_delay_source);
	}
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=5s", NULL);
	tbr_remove_built();
	snprintf(launcher, sizeof(launcher), "%s", getenv("TBR_LAUNCHER"));
	lfd = tbr_listen(&port);
	pthread_barrier_init(&go, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		TBR_CHECK(pthread_create(&t[i], NULL, connector, (void *)(intptr_t)i) == 0,
			  "pthread_create");
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	calls = calls_shown(launcher);
	printf("%d threads connected at once while the segment was created: CALLS %ld\n",
	       THREADS, calls);
	for (int i = 0; i < THREADS; i++)
		close(fds[i]);
	close(lfd);
	TBR_CHECK(calls == THREADS, "calls made during the segment's creation were lost");
	return 0;
}
