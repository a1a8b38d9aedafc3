/* gate_file_removal.c - shared gate files were never removed.
 *
 * What happened: each destination a shared gate served left a file behind for good, one
 * per ip:port and size: a long-lived host collected thousands of them in a tmpfs (memory).
 * The last process using a gate file now removes it at exit, and only then: a lock each
 * user holds tells it whether anyone else still uses the file. The sequence:
 * TIMEBOX_GATE_SHARED=1, max_conns 1: (1) a process connects once and exits: no file is
 * left. (2) A process connects, then another process and a forked child each connect and
 * exit while it still runs: the file stays; when the first process exits, it is gone.
 */
#include "gate_regress.h"

static char part[32], dirs[2][128];

static bool gate_file_exists(void)
{
	char path[256];

	return tbg_find_file(dirs[0], part, path, sizeof(path)) ||
	       tbg_find_file(dirs[1], part, path, sizeof(path));
}

static void connect_once(int port)
{
	double ms;
	int err, fd = tbg_connect(port, &err, &ms);

	TBR_CHECK(fd >= 0, "pid %d: connect: %s", (int)getpid(), tbt_errno_name(err));
	close(fd);
}

/* Uses the gate while a second process and a forked child come and go. */
static int owner(int port, const char *portstr)
{
	pid_t pid;
	int st;

	connect_once(port);
	st = tbg_wait(tbg_spawn("once", portstr, NULL));
	TBR_CHECK(st == 0, "second process failed (%d)", st);
	TBR_CHECK(gate_file_exists(), "a process that exited removed the gate file while "
		  "another still used it");
	pid = fork();
	TBR_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		connect_once(port);
		exit(0);
	}
	TBR_CHECK(tbg_wait(pid) == 0, "forked child failed");
	TBR_CHECK(gate_file_exists(), "a forked child that exited removed the gate file while "
		  "its parent still used it");
	return 0;
}

int main(int argc, char **argv)
{
	static char xdg_env[128];
	char portstr[16];
	int port, lfd, st;

	if (getenv("TBR_CHILD") == NULL) {
		snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
				 "TIMEBOX_ACQUIRE_TIMEOUT=1s", xdg_env, NULL);
	}
	snprintf(dirs[0], sizeof(dirs[0]), "%s/timebox", getenv("XDG_RUNTIME_DIR"));
	snprintf(dirs[1], sizeof(dirs[1]), "/dev/shm/timebox-%u", (unsigned)getuid());
	if (argc >= 3) {
		snprintf(part, sizeof(part), "_%s-max1", argv[2]);
		if (strcmp(argv[1], "once") == 0)
			connect_once(atoi(argv[2]));
		else
			return owner(atoi(argv[2]), argv[2]);
		return 0;
	}
	lfd = tbr_listen(&port);
	snprintf(portstr, sizeof(portstr), "%d", port);
	snprintf(part, sizeof(part), "_%d-max1", port);
	st = tbg_wait(tbg_spawn("once", portstr, NULL));
	TBR_CHECK(st == 0, "single process failed (%d)", st);
	TBR_CHECK(!gate_file_exists(), "the only process to use a gate file exited and left it");
	st = tbg_wait(tbg_spawn("owner", portstr, NULL));
	TBR_CHECK(st == 0, "owner failed (%d)", st);
	TBR_CHECK(!gate_file_exists(), "the last process to use a gate file exited and left it");
	close(lfd);
	tbg_cleanup(NULL);
	return 0;
}
