/* sanitizer_own_fds.c - the thread sanitizer saw half of each of timebox's own fds.
 *
 * What happened: timebox opened its own files (the statistics temporary, gate files, the log
 * file, the configuration) with open(), which a sanitizer's runtime preloaded first
 * intercepts, and closed them with the real close(), which it does not. ThreadSanitizer
 * keeps a record per fd number: it saw the stats thread create fd N and never saw it go, so
 * when the program's next opendir() got the freed number and closedir() closed it, it
 * reported a data race between the program's main thread and timebox's stats thread on a
 * descriptor neither shared (make test SANITIZE=thread failed, now and then, in
 * stats_tmp_fd_closed). Now timebox opens its own fds with the system call, as it closes
 * them: a sanitizer sees neither half. The sequence, made deterministic: the stats thread
 * rewrites its file every 100 ms through a temporary that gets the lowest free number; after
 * each rewrite the program opens and closes a directory, which gets that number.
 * Only ThreadSanitizer keeps this history, so the program skips in other builds.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static char setting[320];
	char dir[] = "/tmp/tb-regress-ownfds-XXXXXX", stats[64];
	const char *pre = getenv("TBR_PRELOAD");
	int port, lfd, fd, peer, rewrites = 0;
	ino_t last = 0;
	double until;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		if (pre == NULL || strstr(pre, "libtsan") == NULL)
			tbr_skip("only ThreadSanitizer keeps a history of each fd number");
		TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
		snprintf(setting, sizeof(setting), "TIMEBOX_STATS_FILE=%s/stats", dir);
		setenv("TBR_DIR", dir, 1);
	}
	tbr_preload_self(argv, setting, "TIMEBOX_STATS_INTERVAL=100ms",
			 "TIMEBOX_READ_TIMEOUT=10s", NULL);
	snprintf(stats, sizeof(stats), "%s/stats", getenv("TBR_DIR"));

	lfd = tbr_listen(&port); /* the first governed connect starts the stats thread */
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));

	/* Each rename of a new temporary into place is one rewrite: a new inode. */
	until = tbt_now_ms() + 10000;
	while (rewrites < 5 && tbt_now_ms() < until) {
		struct timespec ms = { 0, 1000000 };
		struct stat st;
		DIR *d;

		if (stat(stats, &st) == 0 && st.st_ino != last) {
			last = st.st_ino;
			rewrites++;
			d = opendir(getenv("TBR_DIR")); /* the number the temporary had */
			TBR_CHECK(d != NULL, "opendir: %s", strerror(errno));
			closedir(d);
		}
		nanosleep(&ms, NULL);
	}
	TBR_CHECK(rewrites == 5, "the stats file was rewritten %d times in 10 s, not 5", rewrites);
	printf("the program reused the temporary's number after %d rewrites\n", rewrites);
	close(fd);
	close(peer);
	close(lfd);
	unlink(stats);
	rmdir(getenv("TBR_DIR"));
	return 0;
}
