/* gate_regress.h - what the gate's regression programs share: a timed connect, a private
 * directory for gate files, a look into the log file, and running a mode of self again. */
#ifndef TB_GATE_REGRESS_H
#define TB_GATE_REGRESS_H

#include <dirent.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "regress.h"

/* connect() to 127.0.0.1:port; returns the fd or -1, with the errno in *err and the time the
 * call took in *ms. */
static inline int tbg_connect(int port, int *err, double *ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	double t0 = tbt_now_ms();

	TBR_CHECK(fd >= 0, "socket: %s", strerror(errno));
	errno = 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		*err = errno;
		*ms = tbt_now_ms() - t0;
		close(fd);
		return -1;
	}
	*err = 0;
	*ms = tbt_now_ms() - t0;
	return fd;
}

/* A thread that connects to 127.0.0.1:port with tbg_connect (its result in fd, err, ms),
 * named `name` if not NULL (for a delaying library's named()), and with close_after set
 * closes the connection at once (fd keeps the number it had). It stores its id in tid
 * first, so that the story can see it wait at the gate; tbg_connecter_start starts it. */
struct tbg_connecter {
	pthread_t t;
	const char *name;
	int port, fd, err;
	bool close_after;
	double ms;
	atomic_int tid;
};

static inline void *tbg_connecter_main(void *arg)
{
	struct tbg_connecter *c = arg;

	if (c->name != NULL)
		prctl(PR_SET_NAME, c->name);
	atomic_store(&c->tid, (int)syscall(SYS_gettid));
	c->fd = tbg_connect(c->port, &c->err, &c->ms);
	if (c->close_after && c->fd >= 0)
		close(c->fd);
	return NULL;
}

static inline void tbg_connecter_start(struct tbg_connecter *c, int port, const char *name)
{
	c->port = port;
	c->name = name;
	atomic_store(&c->tid, 0);
	TBR_CHECK(pthread_create(&c->t, NULL, tbg_connecter_main, c) == 0, "pthread_create");
}

/* A fresh directory only we can enter, for XDG_RUNTIME_DIR: gate files of one program stay
 * out of everyone else's way. The path is static storage. */
static inline const char *tbg_private_dir(void)
{
	static char dir[] = "/tmp/tbr-gate-XXXXXX";

	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	return dir;
}

static inline int tbg_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Removes a directory tbg_private_dir made (given, or $XDG_RUNTIME_DIR), with its files. */
static inline void tbg_cleanup(const char *dir)
{
	if (dir == NULL)
		dir = getenv("XDG_RUNTIME_DIR");
	if (dir != NULL && strncmp(dir, "/tmp/tbr-gate-", 14) == 0)
		nftw(dir, tbg_rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* The path of the first file in dir whose name contains `part` into buf; false if none. */
static inline bool tbg_find_file(const char *dir, const char *part, char *buf, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	bool found = false;

	if (d == NULL)
		return false;
	while (!found && (e = readdir(d)) != NULL)
		if (strstr(e->d_name, part) != NULL) {
			found = (size_t)snprintf(buf, len, "%s/%.*s", dir, 200, e->d_name) < len;
		}
	closedir(d);
	return found;
}

/* How many lines of the file at path contain needle (0 when the file is missing). */
static inline int tbg_count_lines_with(const char *path, const char *needle, const char *also)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int n = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, needle) != NULL && (also == NULL || strstr(line, also) != NULL))
			n++;
	fclose(f);
	return n;
}

static inline int tbg_count_lines(const char *path, const char *needle)
{
	return tbg_count_lines_with(path, needle, NULL);
}

/* Prints the file at path to stderr (the log, when a check failed). */
static inline void tbg_dump(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[1024];

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
		fprintf(stderr, "  log: %s", line);
	fclose(f);
}

/* Runs this program again (already under the library: TBR_CHILD is set) with argv[1..] =
 * the NULL-terminated list; returns the child's pid. */
static inline pid_t tbg_spawn(const char *arg1, ...)
{
	const char *args[8] = { "self", arg1 };
	va_list ap;
	int n = 2;
	pid_t pid;

	va_start(ap, arg1);
	while (n < 7 && (args[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	args[n] = NULL;
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		execv("/proc/self/exe", (char **)args);
		_exit(127);
	}
	return pid;
}

/* Waits for pid; returns its exit status, or 128 + the signal that killed it. */
static inline int tbg_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		TBR_CHECK(errno == EINTR, "waitpid: %s", strerror(errno));
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* In a mount namespace of this process's own (as root; skips otherwise), a fresh tmpfs
 * mounted on dir with the mount options given ("size=8k,mode=1777"): the stories that need
 * a full or a squatted tmpfs make it there, unseen by the rest of the machine. Run before
 * the program re-executes itself: the namespace is inherited. */
static inline void tbg_private_tmpfs(const char *dir, const char *options)
{
	if (getenv("TBR_PRELOAD") == NULL)
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	if (unshare(CLONE_NEWNS) < 0)
		tbr_skip("cannot create a mount namespace (needs root)");
	TBR_CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "make-private: %s",
		  strerror(errno));
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, options) < 0)
		tbr_skip("cannot mount a tmpfs");
}

#endif
