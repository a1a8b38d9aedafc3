/* config_directory.c - a directory as the configuration file exits the program with 2.
 *
 * What happened: libconfig read TIMEBOX_CONFIG through its flex scanner, which fails on a
 * directory with "input in flex scanner failed" and calls exit(2) itself - from the
 * library's constructor, without TIMEBOX_STRICT, in every program started with the
 * variable. The sequence: TIMEBOX_CONFIG=/some/dir program -> the program must run with
 * its own exit status, after one error line naming the file and saying it is not a
 * regular file; with TIMEBOX_STRICT=1 it is refused (exit 2) with that same reason.
 */
#include "spawn.h"

/* The program itself: exits with a status of its own, so that a change shows. */
static int child(void)
{
	return 5;
}

int main(int argc, char **argv)
{
	static char var[400], out[8192];
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=1s", var, NULL };
	const char *strict[] = { "TIMEBOX_READ_TIMEOUT=1s", "TIMEBOX_STRICT=1", var, NULL };
	const int fds[3] = { -1, -1, -1 };
	char dir[256];
	int status;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	tbs_tmpdir(dir, sizeof(dir));
	snprintf(var, sizeof(var), "TIMEBOX_CONFIG=%s", dir);

	status = tbs_run(argv, "child", vars, fds, out, sizeof(out), 5000, NULL);
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 5,
		  "the program's own status is 5; got %s; stderr: %s", tbs_describe(status), out);
	TBR_CHECK(strstr(out, "event=config_error") != NULL && strstr(out, dir) != NULL &&
			  strstr(out, "not a regular file") != NULL &&
			  strstr(out, "flex") == NULL,
		  "expected one clear error naming %s; stderr: %s", dir, out);
	TBR_CHECK(strchr(out, '\n') == out + strlen(out) - 1, "one line expected; stderr: %s",
		  out);
	printf("directory: the program ran (exit 5); %s", out);

	status = tbs_run(argv, "child", strict, fds, out, sizeof(out), 5000, NULL);
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2 &&
			  strstr(out, "not a regular file") != NULL &&
			  strstr(out, "refusing to run") != NULL,
		  "TIMEBOX_STRICT=1 refuses with the reason; got %s; stderr: %s",
		  tbs_describe(status), out);
	printf("directory, strict: refused (exit 2); %s", out);
	rmdir(dir);
	return 0;
}
