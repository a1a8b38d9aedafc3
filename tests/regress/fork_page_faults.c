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
 * The program forks children that exit at once, natively and preloaded with a limit set
 * (so the fork handlers are registered), and compares the children's page faults
 * (getrusage, RUSAGE_CHILDREN): counts, not time, so a loaded machine does not move them.
 * It fails when the library adds more than 100 per child (about 17 now).
 */
#include <limits.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "regress.h"

#define CHILDREN 200

/* Forks CHILDREN children that exit at once; prints their page faults per child. */
static int fork_children(void)
{
	struct rusage ru;

	for (int i = 0; i < CHILDREN; i++) {
		pid_t p = fork();

		if (p == 0)
			_exit(0);
		TBR_CHECK(p > 0 && waitpid(p, NULL, 0) == p, "fork: %s", strerror(errno));
	}
	TBR_CHECK(getrusage(RUSAGE_CHILDREN, &ru) == 0, "getrusage: %s", strerror(errno));
	printf("%.1f\n", (double)ru.ru_minflt / CHILDREN);
	return 0;
}

/* Page faults per child of `self forks`, preloaded with `lib` unless NULL. */
static double faults_per_child(const char *self, const char *lib)
{
	char cmd[2 * PATH_MAX + 256], line[64];
	double faults = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "env -i PATH=/usr/local/bin:/usr/bin:/bin %s%s%s '%s' forks",
		 lib != NULL ? "TIMEBOX_READ_TIMEOUT=1s LD_PRELOAD='" : "", lib != NULL ? lib : "",
		 lib != NULL ? "'" : "", self);
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
		return fork_children();
	if (lib == NULL || *lib == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	if (san != NULL && *san != '\0')
		tbr_skip("a sanitizer's runtime has fork costs of its own: counted without one");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	TBR_CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	native = faults_per_child(self, NULL);
	preloaded = faults_per_child(self, lib);
	fprintf(stderr, "page faults per fork child: %.1f natively, %.1f preloaded (%+.1f)\n",
		native, preloaded, preloaded - native);
	TBR_CHECK(preloaded - native <= 100, "the library adds %.1f page faults to each fork",
		  preloaded - native);
	return 0;
}
