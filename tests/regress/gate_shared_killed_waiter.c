/* gate_shared_killed_waiter.c - a process killed while it waited at a shared gate stayed
 * counted as waiting there, in every process that shared the gate.
 *
 * What happened: a shared gate counted its waiters in an integer on the gate file's page,
 * added to when a caller began to wait and taken from when it stopped waiting. A process
 * killed while it waited - by a supervisor's SIGKILL, by the OOM killer, the moments a full
 * gate is most likely to see - never took its one away: each process sharing the gate
 * reported one waiter more for as long as the file lived, in its exit line
 * (event=gate pending=...), in `timebox stats` and in `timebox_gate_pending`, where the
 * alert docs/observability.md suggests (pending > 0) then fired for good. Now a waiter
 * holds a lock on a byte of its own in the gate file while it waits, and the waiters are
 * counted by finding those locks: the kernel drops a dead process's locks.
 * The sequence (TIMEBOX_GATE_SHARED=1, max_conns 1, acquire_timeout 10 s): a process holds
 * the one slot; two processes it starts connect and wait at the gate; the first is killed; the
 * process exits with the second still waiting: its gate line must say pending=1 (it said 2),
 * and the second's, once it has the slot, pending=0 (it said 1).
 */
#include <sys/prctl.h>

#include "gate_regress.h"

static char log_path[128];

/* True when the main thread of process pid is in a futex wait (x86_64's number). */
static bool waits_in_futex(pid_t pid)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return false;
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	return atoi(buf) == 202; /* SYS_futex on x86_64 */
}

/* A process of its own (exec'd: it does not inherit the holder's connection) that
 * connects and waits at the gate; returns once it waits there. */
static pid_t waiter(const char *port)
{
	double t0 = tbt_now_ms();
	pid_t pid = tbg_spawn("wait", port, NULL);

	while (!waits_in_futex(pid)) {
		TBR_CHECK(tbt_now_ms() - t0 < 5000, "waiter %d never waited at the gate", (int)pid);
		sched_yield();
	}
	return pid;
}

/* Under the library: holds the slot, lets two children wait, kills one, exits. */
static int holder(void)
{
	int port, lfd = tbr_listen(&port), fd, err;
	pid_t first, second;
	char portstr[16];
	double ms;

	snprintf(portstr, sizeof(portstr), "%d", port);
	fd = tbg_connect(port, &err, &ms);
	TBR_CHECK(fd >= 0, "connect: %s", tbt_errno_name(err));
	first = waiter(portstr);
	second = waiter(portstr);
	TBR_CHECK(kill(first, SIGKILL) == 0, "kill: %s", strerror(errno));
	TBR_CHECK(tbg_wait(first) == 128 + SIGKILL, "the first waiter was not killed");
	printf("holder %d: one waiter killed, %d still waiting\n", (int)getpid(), (int)second);
	fflush(stdout);
	(void)lfd;
	return 0; /* the second waiter gets the slot when the exit closes fd */
}

int main(int argc, char **argv)
{
	static char xdg_env[128], log_env[160];
	char line[1024], want[64];
	int st, lines = 0, right = 0, last = 0, last_right = 0;
	pid_t pid;
	FILE *f;

#if !defined(__x86_64__)
	tbr_skip("reads the futex system call number of x86_64 from /proc");
#endif
	if (getenv("TBR_CHILD") != NULL && argc >= 3) { /* a waiter */
		double ms;
		int err, fd = tbg_connect(atoi(argv[2]), &err, &ms);

		if (fd >= 0)
			close(fd);
		return 0;
	}
	if (getenv("TBR_CHILD") != NULL)
		return holder();
	if (getenv("TBR_PRELOAD") == NULL)
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	tbr_hang_guard(30, "the story hung");
	snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", tbg_private_dir());
	snprintf(log_path, sizeof(log_path), "%s/log", xdg_env + strlen("XDG_RUNTIME_DIR="));
	snprintf(log_env, sizeof(log_env), "TIMEBOX_LOG=%s", log_path);
	/* The second waiter outlives the holder: it becomes our child, and is waited for. */
	TBR_CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0, "prctl: %s", strerror(errno));
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_GATE_SHARED=1",
				 "TIMEBOX_ACQUIRE_TIMEOUT=10s", "TIMEBOX_LOG_LEVEL=info", xdg_env,
				 log_env, NULL);
	st = tbg_wait(pid);
	TBR_CHECK(st == 0, "the holder failed (%d)", st);
	while (wait(NULL) > 0 || errno == EINTR)
		; /* the second waiter */
	f = fopen(log_path, "r");
	TBR_CHECK(f != NULL, "no log at %s", log_path);
	snprintf(want, sizeof(want), " pid=%d ", (int)pid);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "event=gate ") == NULL)
			continue;
		if (strstr(line, want) == NULL) { /* the second waiter's, once it got the slot */
			last++;
			last_right += strstr(line, " pending=0 ") != NULL;
			continue;
		}
		lines++;
		right += strstr(line, " pending=1 ") != NULL;
	}
	fclose(f);
	if (lines != 1 || right != 1 || last != 1 || last_right != 1)
		tbg_dump(log_path);
	TBR_CHECK(lines == 1, "the holder wrote %d gate lines at exit (want 1)", lines);
	TBR_CHECK(right == 1, "the holder's gate line counts a killed waiter as waiting "
		  "(want pending=1: one waiter alive)");
	TBR_CHECK(last == 1 && last_right == 1, "the last waiter's gate line: %d lines, %d with "
		  "pending=0 (want 1 and 1: nobody waits once it has the slot)", last, last_right);
	printf("the holder's gate line counts the one live waiter\n");
	tbg_cleanup(xdg_env + strlen("XDG_RUNTIME_DIR="));
	return 0;
}
