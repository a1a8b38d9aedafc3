/* log_fd_in_child.c - timebox's log file is an open fd every program can see.
 *
 * What happened: with TIMEBOX_LOG=/path, timebox opened the log file at start-up and kept it
 * at fd 512 for the process's life, whether or not anything was ever logged. A program that
 * lists its open fds (an fd-leak check in its tests, a daemon closing what it inherited, a
 * supervisor reporting its children's fds) found fd 512 where natively there is nothing -
 * in itself, and in every program it exec'd, since the child inherits LD_PRELOAD and
 * TIMEBOX_LOG and its own copy of the library opened the file at its start-up too. The
 * sequence: TIMEBOX_LOG=<file>, a read timeout that never fires; the program lists
 * /proc/self/fd, then execs a child that lists its own -> neither has an fd on the log file
 * (or any fd >= 512). Then a read is cut (a line is written): the program's own listing may
 * now show the log file (docs/limitations.md), and a child exec'd after that still does not
 * (the fd is close-on-exec and the child logged nothing).
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>

#include "spawn.h"

/* The fds of this process that are timebox's log file or >= 512, as text into out. */
static void foreign_fds(const char *log, char *out, size_t len)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	size_t k = 0;

	out[0] = '\0';
	TBR_CHECK(d != NULL, "opendir: %s", strerror(errno));
	while ((e = readdir(d)) != NULL) {
		char path[64], target[PATH_MAX];
		int fd = atoi(e->d_name);
		ssize_t n;

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		if ((strcmp(target, log) == 0 || fd >= 512) && k + 1 < len)
			k += (size_t)snprintf(out + k, len - k, "%d -> %s; ", fd, target);
	}
	closedir(d);
}

/* Execs this program as a child that lists its fds; returns what it found. */
static void child_listing(char **argv, char *out, size_t len)
{
	int p[2], status;
	ssize_t n;
	size_t got = 0;
	pid_t pid;

	TBR_CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
	fflush(stdout);
	pid = fork();
	TBR_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(p[1], 1);
		setenv("TBS_ROLE", "list", 1);
		execv("/proc/self/exe", argv);
		_exit(126);
	}
	close(p[1]);
	while (got + 1 < len && (n = read(p[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	TBR_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
			  WEXITSTATUS(status) == 0,
		  "the child %s", tbs_describe(status));
}

int main(int argc, char **argv)
{
	static char env_log[320] = "TIMEBOX_LOG=";
	char dir[256], found[2048], log[300];
	int port, lfd, fd, peer;
	char c = 'x';

	(void)argc;
	if (tbs_role() != NULL) { /* the exec'd child: under the library, nothing governed */
		foreign_fds(getenv("TBS_LOG"), found, sizeof(found));
		printf("%s", found);
		return 0;
	}
	if (getenv("TBR_CHILD") == NULL) {
		tbs_tmpdir(dir, sizeof(dir));
		snprintf(log, sizeof(log), "%s/log", dir);
		strcat(env_log, log);
		setenv("TBS_LOG", log, 1);
		setenv("TBS_DIR", dir, 1);
	}
	tbr_preload_self(argv, env_log, "TIMEBOX_READ_TIMEOUT=300ms", NULL);
	snprintf(log, sizeof(log), "%s", getenv("TBS_LOG"));
	snprintf(dir, sizeof(dir), "%s", getenv("TBS_DIR"));
	unsetenv("TBS_ROLE");

	foreign_fds(log, found, sizeof(found));
	TBR_CHECK(found[0] == '\0', "nothing was logged, yet the program has %s", found);
	child_listing(argv, found, sizeof(found));
	TBR_CHECK(found[0] == '\0', "an exec'd child of a healthy program has %s", found);

	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(write(fd, &c, 1) == 1, "write");
	TBR_CHECK(read(fd, &c, 1) == -1 && errno == ETIMEDOUT, "read: %s",
		  tbt_errno_name(errno));
	child_listing(argv, found, sizeof(found));
	TBR_CHECK(found[0] == '\0', "a child exec'd after a line was logged has %s", found);
	foreign_fds(log, found, sizeof(found));
	printf("after a line was logged, the program itself sees: %s\n",
	       found[0] ? found : "(nothing)");
	close(fd);
	close(peer);
	close(lfd);
	unlink(log);
	rmdir(dir);
	return 0;
}
