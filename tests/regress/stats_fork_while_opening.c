/* stats_fork_while_opening.c - a child forked while another thread created the statistics
 * segment waited a second in every governed connect.
 *
 * What happened: the process's first governed connect creates its statistics segment (a
 * file, an allocation, two mappings), marking it "opening" meanwhile; other threads that
 * connect then wait for it (bounded: 1 s). A fork in that window copied the mark into the
 * child, where the thread making the segment does not exist: the mark never changed, and
 * every governed connect of the child waited the whole second before going on uncounted.
 * A multi-threaded program that forks a worker while one of its threads makes its first
 * connect is that case. Now the child starts again from nothing: its first connect makes
 * a segment of its own.
 * The sequence, made deterministic: a second preload delays fallocate by 400 ms and marks
 * the moment it is entered; a thread makes the first connect; once it is inside the
 * allocation, the program forks; the child connects three times: each must take well under
 * the second (it took >= 1000 ms each before).
 */
#include <pthread.h>
#include <sys/wait.h>

#include "delaylib.h"

static int port;

static void *first_connect(void *arg)
{
	(void)arg;
	close(tbr_connect(port));
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mark;
	pthread_t t;
	pid_t pid;
	int lfd, status;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		tbr_mark_name("/tmp/tbr-fork-opening-");
		setenv("TBR_FALLOCATE_MS", "400", 1);
		tbr_add_preload(tbr_fallocate_delay_source);
	}
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=5s", NULL);
	tbr_remove_built();
	mark = tbr_mark_path();
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, first_connect, NULL) == 0, "pthread_create");
	TBR_CHECK(tbr_mark_wait(mark, 10000),
		  "the first connect never reached the segment's allocation");
	unsetenv("TBR_MARK"); /* the child's own allocations are not waited for here */
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		for (int i = 0; i < 3; i++) {
			double t0 = tbt_now_ms(), ms;

			close(tbr_connect(port));
			ms = tbt_now_ms() - t0;
			printf("child: governed connect %d took %.0f ms\n", i + 1, ms);
			fflush(stdout);
			/* The child's first connect makes its segment: one delayed allocation. */
			if (ms >= (i == 0 ? 900 : 500))
				_exit(1);
		}
		_exit(0);
	}
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	pthread_join(t, NULL);
	close(lfd);
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "a child forked while the segment was being made waited in its connects "
		  "(status %d)", status);
	return 0;
}
