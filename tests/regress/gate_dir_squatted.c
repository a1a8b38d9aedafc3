/* gate_dir_squatted.c - another user could turn the shared gate off by creating its directory.
 *
 * What happened: the shared gate lived at a fixed, guessable place, /dev/shm/timebox-<uid>.
 * Any local user could create that directory first; timebox then (rightly) refused it and
 * every process fell back to a gate of its own: the per-service cap silently became a cap
 * per worker. The sequence (as root, in a mount namespace of our own with a fresh tmpfs on
 * /dev/shm): create /dev/shm/timebox-<uid> owned by nobody. (1) With XDG_RUNTIME_DIR set
 * (a directory only we can enter), the gate lives there and is still shared: with
 * max_conns 1 held by one process, another process's connect waits and times out.
 * (2) Without it, the fallback is loud: one log line names the directory and its owner.
 */

#include "gate_regress.h"

/* Holds the only slot and runs a second process that must find the gate full. */
static int run_shared(int port)
{
	char portstr[16];
	double ms;
	int err, fd = tbg_connect(port, &err, &ms), st;

	TBR_CHECK(fd >= 0, "first connect: %s", tbt_errno_name(err));
	snprintf(portstr, sizeof(portstr), "%d", port);
	st = tbg_wait(tbg_spawn("worker", portstr, NULL));
	TBR_CHECK(st == 0, "the gate was not shared between two processes (worker exit %d)", st);
	close(fd);
	return 0;
}

static int worker(int port)
{
	double ms;
	int err, fd = tbg_connect(port, &err, &ms);

	TBR_CHECK(fd < 0 && err == ETIMEDOUT && ms >= 300,
		  "connect while another process holds the only slot: fd %d %s after %.0f ms",
		  fd, tbt_errno_name(err), ms);
	return 0;
}

static int run_child(int argc, char **argv)
{
	int port, lfd, r;

	if (argc >= 3 && strcmp(argv[1], "worker") == 0)
		return worker(atoi(argv[2]));
	lfd = tbr_listen(&port);
	if (strcmp(argv[1], "xdg") == 0) {
		r = run_shared(port);
	} else {
		double ms;
		int err, fd = tbg_connect(port, &err, &ms);

		TBR_CHECK(fd >= 0, "connect with the shared gate refused: %s", tbt_errno_name(err));
		close(fd);
		r = 0;
	}
	close(lfd);
	return r;
}

int main(int argc, char **argv)
{
	static char xdg_env[128], log_env[2][96];
	static const char *modes[] = { "xdg", "noxdg" };
	char squat[64];
	int failed = 0;

	if (getenv("TBR_CHILD") != NULL && argc >= 2)
		return run_child(argc, argv);
	tbg_private_tmpfs("/dev/shm", "size=1m,mode=1777");
	snprintf(squat, sizeof(squat), "/dev/shm/timebox-%u", (unsigned)getuid());
	TBR_CHECK(mkdir(squat, 0700) == 0 && chown(squat, 65534, 65534) == 0,
		  "squat %s: %s", squat, strerror(errno));
	snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
	for (int i = 0; i < 2; i++) {
		char *av[] = { argv[0], (char *)modes[i], NULL };
		char logpath[80];
		int st, lines, owner;
		pid_t pid;

		snprintf(logpath, sizeof(logpath), "/tmp/tbr-squat-%d-%s.log", (int)getpid(),
			 modes[i]);
		snprintf(log_env[i], sizeof(log_env[i]), "TIMEBOX_LOG=%s", logpath);
		pid = fork();
		TBR_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			if (i == 1)
				unsetenv("XDG_RUNTIME_DIR");
			tbr_preload_self(av, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
					 "TIMEBOX_ACQUIRE_TIMEOUT=300ms", i == 0 ? xdg_env : log_env[i],
					 log_env[i], NULL);
		}
		st = tbg_wait(pid);
		lines = tbg_count_lines(logpath, "what=shared_gate");
		/* (the statistics segment, in the same directory, says so on a line of its own) */
		owner = tbg_count_lines_with(logpath, "what=shared_gate", "owned by uid 65534");
		fprintf(stderr, "%s: exit %d, shared_gate lines %d (naming the owner: %d)\n",
			modes[i], st, lines, owner);
		if (st != 0 || (i == 0 && lines != 0) || (i == 1 && (lines != 1 || owner != 1))) {
			tbg_dump(logpath);
			failed = 1;
		}
		unlink(logpath);
	}
	tbg_cleanup(xdg_env + strlen("XDG_RUNTIME_DIR="));
	TBR_CHECK(!failed, "a squatted /dev/shm directory disabled or silently degraded sharing");
	return 0;
}
