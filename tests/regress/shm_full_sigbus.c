/* shm_full_sigbus.c - a shared gate on a full /dev/shm killed the program with SIGBUS.
 *
 * What happened: the shared gate's file was sized with ftruncate, which on tmpfs reserves
 * nothing, and then mapped. In a container /dev/shm is 64 MB by default; once it was full,
 * the first write to the mapped page faulted and the program died of SIGBUS inside its
 * first connect. The sparse file stayed behind, so every later run died the same way.
 * The sequence (in a mount namespace of our own, as root): mount an 8 KB tmpfs on /dev/shm,
 * fill it, then run with TIMEBOX_GATE_SHARED=1 and max_conns 1: (1) with no gate file,
 * (2) with the sparse 4 KB file a crashed run leaves, (3) with a 100-byte file. Each run
 * must live, say once in the log that the shared gate is unavailable, and keep a gate of
 * its own (a second connect waits and times out).
 */
#include <fcntl.h>

#include "gate_regress.h"

static int run_mode(const char *mode, int port)
{
	char dir[64], path[160];
	double ms;
	int err, fd1, fd2;

	snprintf(dir, sizeof(dir), "/dev/shm/timebox-%u", (unsigned)getuid());
	if (strcmp(mode, "fresh") != 0) {
		/* What an earlier run left: the directory and a file of the wrong size. */
		off_t size = strcmp(mode, "sparse") == 0 ? 4096 : 100;

		mkdir(dir, 0700);
		snprintf(path, sizeof(path), "%s/gate-127.0.0.1_%d-max1", dir, port);
		fd1 = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		TBR_CHECK(fd1 >= 0, "create %s: %s", path, strerror(errno));
		TBR_CHECK(ftruncate(fd1, size) == 0, "ftruncate: %s", strerror(errno));
		close(fd1);
	}
	fd1 = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd1 >= 0, "[%s] first connect: %s", mode, tbt_errno_name(err));
	fd2 = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd2 < 0 && err == ETIMEDOUT && ms >= 300,
		  "[%s] second connect at a full gate: fd %d %s after %.0f ms (want ETIMEDOUT "
		  "after >= 300 ms: a gate of the process's own)", mode, fd2,
		  tbt_errno_name(err), ms);
	close(fd1);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *modes[] = { "fresh", "sparse", "small" };
	static char logenv[3][80];
	int failed = 0;

	if (getenv("TBR_CHILD") != NULL && argc >= 2) {
		int port, lfd = tbr_listen(&port);

		run_mode(argv[1], port);
		close(lfd);
		return 0;
	}
	tbg_private_tmpfs("/dev/shm", "size=8k,mode=1777");
	{
		/* Fill it, the way a busy container's /dev/shm is full. */
		char block[1024] = { 1 };
		int fd = open("/dev/shm/filler", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

		TBR_CHECK(fd >= 0, "filler: %s", strerror(errno));
		while (write(fd, block, sizeof(block)) > 0)
			;
		close(fd);
	}
	unsetenv("XDG_RUNTIME_DIR"); /* the gate file goes to /dev/shm */
	for (int i = 0; i < 3; i++) {
		char *av[] = { argv[0], (char *)modes[i], NULL };
		char logpath[64];
		pid_t pid;
		int st, lines;

		snprintf(logpath, sizeof(logpath), "/tmp/tbr-shm-full-%d-%s.log", (int)getpid(),
			 modes[i]);
		snprintf(logenv[i], sizeof(logenv[i]), "TIMEBOX_LOG=%s", logpath);
		pid = fork();
		TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			tbr_preload_self(av, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
					 "TIMEBOX_ACQUIRE_TIMEOUT=300ms", logenv[i], NULL);
		st = tbg_wait(pid);
		lines = tbg_count_lines(logpath, "what=shared_gate");
		fprintf(stderr, "%s: exit %d%s, shared_gate log lines %d\n", modes[i], st,
			st == 128 + SIGBUS ? " (SIGBUS)" : "", lines);
		tbg_dump(logpath);
		if (st != 0 || lines != 1)
			failed = 1;
		unlink(logpath);
	}
	TBR_CHECK(!failed, "a run died or did not say once that the shared gate is unavailable");
	return 0;
}
