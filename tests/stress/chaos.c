/* chaos.c - the stress client's disturbances: signals sent to the workers every few
 * milliseconds, and children of every kind (fork, exec, vfork, posix_spawn, python-style). */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"

extern char **environ;

void *signaller(void *arg)
{
	uint64_t rng = cfg.seed ^ 0x5151;

	(void)arg;
	register_own_thread();
	while (!atomic_load(&stopping)) {
		struct worker *w = &workers[rnd(&rng, 0, (uint32_t)nworkers - 1)];
		int sig = rnd(&rng, 0, 1) ? SIGUSR1 : SIGUSR2;

		usleep(rnd(&rng, 200, 2000));
		if (w->tid != 0 && pthread_kill(w->th, sig) == 0)
			atomic_fetch_add(&cnt.signals[sig == SIGUSR2], 1);
	}
	return NULL;
}

/* Children of every kind, each doing one governed exchange, recorded for the judge. */
void *spawner(void *arg)
{
	struct worker *w = arg;
	char port[16], seed[24], id[24], self_exe[64] = "/proc/self/exe";
	char arg0[] = "stress", arg1[] = "--child";
	char *cargv[] = { arg0, arg1, port, seed, id, NULL };
	pid_t pid = -1;
	int status;

	set_self(w);
	snprintf(port, sizeof(port), "%d", cfg.ports[K_NORMAL]);
	while (!atomic_load(&stopping)) {
		uint32_t how = rnd(&w->rng, 0, 4);

		snprintf(seed, sizeof(seed), "%llu", (unsigned long long)splitmix(&w->rng));
		/* The child's call is recorded under this id and judged with the others. */
		snprintf(id, sizeof(id), "%llu", (unsigned long long)next_conn_id());
		usleep(rnd(&w->rng, 5000, 50000));
		watch(w, "spawn", cfg.deadline_ms + cfg.slack_ms + 5000);
		switch (how) {
		case 0: /* fork, no exec: the child's library runs on a copy of our state */
			pid = fork();
			if (pid == 0)
				_exit(child_exchange(cfg.ports[K_NORMAL], strtoull(seed, NULL, 10),
						     strtoull(id, NULL, 10)));
			atomic_fetch_add(&cnt.forks, 1);
			break;
		case 1:
			pid = fork();
			if (pid == 0) {
				execve(self_exe, cargv, environ);
				_exit(127);
			}
			atomic_fetch_add(&cnt.fork_execs, 1);
			break;
		case 2:
		case 3: /* vfork + exec; 3 is python's subprocess: close_range in the child */
			pid = vfork();
			if (pid == 0) {
				if (how == 3)
					close_range(3u, ~0u, 0); /* as CPython does, through libc */
				execve(self_exe, cargv, environ);
				_exit(127);
			}
			atomic_fetch_add(&cnt.vforks[how == 3], 1);
			break;
		case 4:
			if (posix_spawn(&pid, self_exe, NULL, NULL, cargv, environ) != 0)
				pid = -1;
			atomic_fetch_add(&cnt.spawns, 1);
			break;
		}
		while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		unwatch(w);
		/* A child's call is judged from its record (main.c); a child that failed here
		 * crashed, could not run, or could not write its record. */
		if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			if (atomic_fetch_add(&cnt.child_fail, 1) < 5)
				fprintf(stderr, "stress: child (how %u) ended with status %#x\n",
					how, status);
		}
	}
	return NULL;
}
