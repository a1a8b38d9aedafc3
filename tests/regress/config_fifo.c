/* config_fifo.c - a FIFO as the configuration file, or @included by it, hangs the program.
 *
 * What happened: the library read TIMEBOX_CONFIG with libconfig's own fopen, from the
 * constructor, before main. A FIFO there (or named by an @include line of the file) blocks
 * that open until some writer comes: every program started with the variable hung before
 * its first line, silently. Anyone who can plant a FIFO at a shared path can do it. The
 * sequence: mkfifo f; TIMEBOX_CONFIG=f some_program -> must run, with one error line that
 * names the file and says it is not a regular file; the same for a regular file holding
 * `@include "f"`, whose error must name the include.
 */
#include <sys/stat.h>

#include "spawn.h"

/* The program itself: it has nothing to do but exit 0. */
static int child(void)
{
	return 0;
}

/* Runs the child with TIMEBOX_CONFIG=conf and checks it ran promptly and said `want`. */
static void expect_runs(char **argv, const char *conf, const char *want)
{
	static char var[4200], out[8192];
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=1s", var, NULL };
	const int fds[3] = { -1, -1, -1 };
	double took;
	int status;

	snprintf(var, sizeof(var), "TIMEBOX_CONFIG=%s", conf);
	status = tbs_run(argv, "child", vars, fds, out, sizeof(out), 5000, &took);
	TBR_CHECK(status == 0, "TIMEBOX_CONFIG=%s: the program %s after %.0f ms; stderr: %s",
		  conf, tbs_describe(status), took, out);
	TBR_CHECK(strstr(out, "event=config_error") != NULL && strstr(out, conf) != NULL &&
			  strstr(out, want) != NULL,
		  "TIMEBOX_CONFIG=%s: expected one error naming the file and saying \"%s\"; "
		  "stderr: %s", conf, want, out);
	TBR_CHECK(strchr(out, '\n') == out + strlen(out) - 1, "one line expected; stderr: %s",
		  out);
	printf("TIMEBOX_CONFIG=%s: ran in %.0f ms; %s", conf, took, out);
}

int main(int argc, char **argv)
{
	char dir[256], fifo[300], conf[300];
	FILE *f;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	tbs_tmpdir(dir, sizeof(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(conf, sizeof(conf), "%s/with_include.conf", dir);
	TBR_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
	f = fopen(conf, "w");
	TBR_CHECK(f != NULL, "fopen: %s", strerror(errno));
	fprintf(f, "defaults = { read_timeout = \"2s\"; };\n@include \"%s\"\n", fifo);
	fclose(f);

	expect_runs(argv, fifo, "not a regular file");
	expect_runs(argv, conf, "@include");

	unlink(conf);
	unlink(fifo);
	rmdir(dir);
	return 0;
}
