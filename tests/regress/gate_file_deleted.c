/* gate_file_deleted.c - a deleted shared gate file silently un-gated every connect.
 *
 * What happened: tmp cleaners and systemd's RemoveIPC delete files under /dev/shm. Each
 * shared acquire opened the gate file by name without creating it, and when that open
 * failed the connect went ungated, with no word in the log: the cap was gone for good.
 * The sequence: TIMEBOX_GATE_SHARED=1, max_conns 1, acquire_timeout 300ms. Connect once
 * (the process and a forked worker now use the file), hold a slot, delete the file; a
 * second connect must still wait and time out (the old file's slot still counts); after
 * the first connection closes, a connect takes the slot in the re-created file, and both
 * the forked worker and a new process must then find the gate full.
 */
#include "gate_regress.h"

static char xdg_env[128];

/* A worker: connect once to argv's port; exit 0 when the gate made it time out. */
static int worker(int port)
{
	double ms;
	int err, fd = tbg_connect(port, &err, &ms);

	TBR_CHECK(fd < 0 && err == ETIMEDOUT && ms >= 300,
		  "pid %d: connect while another process holds the only slot: fd %d %s after "
		  "%.0f ms (want ETIMEDOUT after >= 300 ms)", (int)getpid(), fd,
		  tbt_errno_name(err), ms);
	return 0;
}

int main(int argc, char **argv)
{
	char part[32], path[256], dirs[2][128];
	const char *xdg;
	double ms;
	int port, lfd, fd, fd1, fd2, err, go[2], found = 0;
	pid_t forked, fresh;

	if (getenv("TBR_CHILD") == NULL) {
		snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
				 "TIMEBOX_ACQUIRE_TIMEOUT=300ms", xdg_env, NULL);
	}
	if (argc >= 3 && strcmp(argv[1], "worker") == 0)
		return worker(atoi(argv[2]));
	lfd = tbr_listen(&port);
	fd = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd >= 0, "first connect: %s", tbt_errno_name(err));
	close(fd);
	TBR_CHECK(pipe(go) == 0, "pipe");
	forked = fork();
	TBR_CHECK(forked >= 0, "fork");
	if (forked == 0) {
		char c;

		close(go[1]);
		TBR_CHECK(read(go[0], &c, 1) == 1, "forked worker: no go");
		_exit(worker(port));
	}
	close(go[0]);

	fd1 = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd1 >= 0, "connect: %s", tbt_errno_name(err));
	xdg = getenv("XDG_RUNTIME_DIR");
	snprintf(dirs[0], sizeof(dirs[0]), "%s/timebox", xdg);
	snprintf(dirs[1], sizeof(dirs[1]), "/dev/shm/timebox-%u", (unsigned)getuid());
	snprintf(part, sizeof(part), "_%d-max1", port);
	for (int i = 0; i < 2 && !found; i++)
		found = tbg_find_file(dirs[i], part, path, sizeof(path));
	TBR_CHECK(found, "no gate file *%s* in %s or %s", part, dirs[0], dirs[1]);
	TBR_CHECK(unlink(path) == 0, "unlink %s: %s", path, strerror(errno));

	fd2 = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd2 < 0 && err == ETIMEDOUT && ms >= 300,
		  "connect after the gate file was deleted, a slot still held: fd %d %s after "
		  "%.0f ms (want ETIMEDOUT after >= 300 ms)", fd2, tbt_errno_name(err), ms);
	close(fd1);
	fd2 = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd2 >= 0 && ms < 250, "connect once the old slot is free: %s after %.0f ms",
		  tbt_errno_name(err), ms);
	TBR_CHECK(access(path, F_OK) == 0, "the gate file %s was not re-created", path);

	TBR_CHECK(write(go[1], "g", 1) == 1, "go");
	err = tbg_wait(forked);
	TBR_CHECK(err == 0, "the forked worker was not gated by the re-created file (exit %d)",
		  err);
	{
		char portstr[16];

		snprintf(portstr, sizeof(portstr), "%d", port);
		fresh = tbg_spawn("worker", portstr, NULL);
		err = tbg_wait(fresh);
	}
	TBR_CHECK(err == 0, "a new process was not gated by the re-created file (exit %d)", err);
	close(fd2);
	close(lfd);
	tbg_cleanup(NULL);
	return 0;
}
