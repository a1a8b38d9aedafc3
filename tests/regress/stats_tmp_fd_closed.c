/* stats_tmp_fd_closed.c - the statistics writer closes the program's file.
 *
 * What happened: with TIMEBOX_STATS_FILE set, timebox's stats thread rewrites the file
 * through a temporary: open (a low number, the lowest free), write, close, rename. That fd
 * was neither moved above the program's numbers nor shielded from the program's close(). A
 * program that closes fds it does not know (a daemon's loop over every number, closefrom)
 * while the write is under way frees the number, its next open gets it, and the stats thread
 * then closes the program's file (and its next write could go into it). Natively the
 * program's file stays open with exactly its bytes. The sequence, made deterministic: the
 * temporary's name is a FIFO the program keeps full, so the stats thread blocks in its
 * write; the program closes the stats thread's fd, opens its data file (which gets the
 * lowest free number), writes DATA, then drains the FIFO -> once the stats file is renamed
 * into place, the data file is still open and holds exactly "DATA\n".
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "regress.h"

/* The stats thread's id, or 0. */
static int stats_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int tid = 0;

	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[300], name[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		if (fgets(name, sizeof(name), f) != NULL && strncmp(name, "timebox-stats", 13) == 0)
			tid = atoi(e->d_name);
		fclose(f);
	}
	if (d != NULL)
		closedir(d);
	return tid;
}

/* An fd other than mine that names the FIFO at path: the stats thread's, or -1. */
static int fd_on(const char *path, int mine)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	while (d != NULL && (e = readdir(d)) != NULL) {
		char link[64], target[PATH_MAX];
		int fd = atoi(e->d_name);
		ssize_t n;

		if (e->d_name[0] == '.' || fd == mine || fd == dirfd(d))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		if (strcmp(target, path) == 0)
			found = fd;
	}
	if (d != NULL)
		closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	static char setting[320];
	char dir[] = "/tmp/tb-regress-statsfd-XXXXXX", stats[64], tmp[96], buf[65536];
	int port, lfd, fd, peer, fifo, theirs = -1, data, tid = 0;
	double until;
	struct stat st;
	ssize_t n;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
		snprintf(setting, sizeof(setting), "TIMEBOX_STATS_FILE=%s/stats", dir);
		setenv("TBR_DIR", dir, 1);
	}
	tbr_preload_self(argv, setting, "TIMEBOX_STATS_INTERVAL=100ms",
			 "TIMEBOX_READ_TIMEOUT=10s", NULL);
	snprintf(dir, sizeof(dir), "%s", getenv("TBR_DIR"));
	snprintf(stats, sizeof(stats), "%s/stats", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", stats, (int)getpid());
	TBR_CHECK(mkfifo(tmp, 0600) == 0, "mkfifo: %s", strerror(errno));
	fifo = open(tmp, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	TBR_CHECK(fifo >= 0, "open the FIFO: %s", strerror(errno));
	memset(buf, 'f', sizeof(buf));
	while (write(fifo, buf, sizeof(buf)) > 0 || errno != EAGAIN)
		;
	while (write(fifo, buf, 1) == 1)
		;

	lfd = tbr_listen(&port); /* the first governed connect starts the stats thread */
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);

	/* Until the stats thread sleeps in its write to the full FIFO, on an fd of its own. */
	until = tbt_now_ms() + 10000;
	while (tbt_now_ms() < until) {
		struct timespec ms = { 0, 1000000 };

		if (tid == 0)
			tid = stats_tid();
		theirs = fd_on(tmp, fifo);
		if (tid != 0 && theirs >= 0 && tbr_thread_sleeping(tid))
			break;
		theirs = -1;
		nanosleep(&ms, NULL);
	}
	TBR_CHECK(theirs >= 0, "the stats thread never blocked writing the temporary");
	printf("the stats thread writes its temporary through fd %d\n", theirs);

	close(theirs); /* the program closes an fd it does not know */
	data = open(dir, O_TMPFILE | O_RDWR, 0600);
	TBR_CHECK(data >= 0, "open the data file: %s", strerror(errno));
	printf("the program's data file got fd %d\n", data);
	TBR_CHECK(write(data, "DATA\n", 5) == 5, "write DATA");
	while (read(fifo, buf, sizeof(buf)) > 0) /* let the stats thread finish its write */
		;
	until = tbt_now_ms() + 10000;
	while (stat(stats, &st) < 0 && tbt_now_ms() < until) {
		struct timespec ms = { 0, 1000000 };

		while (read(fifo, buf, sizeof(buf)) > 0)
			;
		nanosleep(&ms, NULL);
	}
	TBR_CHECK(stat(stats, &st) == 0, "the stats file never appeared");

	errno = 0;
	TBR_CHECK(fcntl(data, F_GETFD) >= 0, "the program's data file (fd %d) was closed: %s",
		  data, strerror(errno));
	n = pread(data, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	TBR_CHECK(strcmp(buf, "DATA\n") == 0, "the data file holds \"%.200s\"", buf);
	close(fd);
	close(peer);
	close(lfd);
	close(fifo);
	unlink(stats);
	unlink(tmp);
	rmdir(dir);
	return 0;
}
