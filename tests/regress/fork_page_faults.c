/*
 * fork_page_faults - every fork of every governed process cost 0.4 ms more than natively.
 *
 * A fork child frees what belonged to its parent's other threads. The request budgets are a
 * static pool of 4,096 slots (1.4 MB), and the child looked at a flag inside each slot to
 * free those taken: one read in each of 344 pages nobody had ever touched, each a page
 * fault. The log's noted-line slots were stored into the same way (six more pages). A
 * child that only called _exit took 385 page faults against 18 natively, and a fork loop
 * ran at 700 us per fork against 210: a shell, make, or a pre-fork server paid it at every
 * fork, governed sockets or not. The flags now live in arrays of their own (4 KB and 512
 * bytes), read before they are written.
 *
 * After a governed connect it was worse: the child cleared the watchdog's fields in every
 * entry of the socket pool's chunk, 512 entries in 23 pages, most never handed out, and
 * wrote them whether or not there was anything to clear: 414 faults per child against 16.
 * The child now visits the entries handed out, and writes a field only when it is set.
 *
 * The program forks children that exit at once, natively and preloaded with a limit set
 * (so the fork handlers are registered), first without a socket, then after a governed
 * connect, and compares the children's page faults (getrusage, RUSAGE_CHILDREN): counts,
 * not time, so a loaded machine does not move them. It fails when the library adds more
 * than 50 per child without a socket (it added 364, 15 now) or 36 after a connect (it added
 * 398, then 47 with only the first fix, 24 now).
 */
#include <limits.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "regress.h"

#define CHILDREN 200

/* Forks CHILDREN children that exit at once, after a connect when `connected`; prints their
 * page faults per child. */
static int fork_children(int connected)
{
	struct rusage ru;
	int lport, lfd = -1, fd = -1;

	if (connected) {
		lfd = tbr_listen(&lport);
		fd = tbr_connect(lport);
	}

	for (int i = 0; i < CHILDREN; i++) {
		pid_t p = fork();

		if (p == 0)
			_exit(0);
		TBR_CHECK(p > 0 && waitpid(p, NULL, 0) == p, "fork: %s", strerror(errno));
	}
	TBR_CHECK(getrusage(RUSAGE_CHILDREN, &ru) == 0, "getrusage: %s", strerror(errno));
	printf("%.1f\n", (double)ru.ru_minflt / CHILDREN);
	if (connected) {
		close(fd);
		close(lfd);
	}
	return 0;
}

/* Page faults per child of `self MODE` (forks, forks-connected), preloaded with `lib`
 * unless NULL. */
static double faults_per_child(const char *self, const char *mode, const char *lib)
{
	char cmd[2 * PATH_MAX + 256], line[64];
	double faults = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "env -i PATH=/usr/local/bin:/usr/bin:/bin %s%s%s '%s' %s",
		 lib != NULL ? "TIMEBOX_READ_TIMEOUT=1s LD_PRELOAD='" : "", lib != NULL ? lib : "",
		 lib != NULL ? "'" : "", self, mode);
	p = popen(cmd, "r");
	TBR_CHECK(p != NULL, "popen: %s", strerror(errno));
	if (fgets(line, sizeof(line), p) != NULL)
		faults = strtod(line, NULL);
	TBR_CHECK(pclose(p) == 0 && faults >= 0, "%s: no count", cmd);
	return faults;
}

int main(int argc, char **argv)
{
	const char *lib = getenv("TBR_PRELOAD");
	const char *san = getenv("TB_SANITIZE");
	char self[PATH_MAX];
	ssize_t n;
	double native, preloaded;

	if (argc == 2 && strcmp(argv[1], "forks") == 0)
		return fork_children(0);
	if (argc == 2 && strcmp(argv[1], "forks-connected") == 0)
		return fork_children(1);
	if (lib == NULL || *lib == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	if (san != NULL && *san != '\0')
		tbr_skip("a sanitizer's runtime has fork costs of its own: counted without one");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	TBR_CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	for (int connected = 0; connected <= 1; connected++) {
		const char *mode = connected ? "forks-connected" : "forks";

		native = faults_per_child(self, mode, NULL);
		preloaded = faults_per_child(self, mode, lib);
		fprintf(stderr, "page faults per fork child%s: %.1f natively, %.1f preloaded "
			"(%+.1f)\n", connected ? " after a connect" : "", native, preloaded,
			preloaded - native);
		TBR_CHECK(preloaded - native <= (connected ? 36 : 50), "the library adds %.1f "
			  "page faults to each fork%s", preloaded - native,
			  connected ? " after a connect" : "");
	}
	return 0;
}
