/* duration_text_long.c - one duration text, two sources, two meanings.
 *
 * What happened: the configuration file refuses any value of 320 bytes or more (it cannot
 * cut one without changing its meaning), but the environment had no bound: the same text,
 * "000...0250ms" of 330 characters, was a 250 ms read timeout in TIMEBOX_READ_TIMEOUT and
 * an error ("too long") in the file's defaults. fuzz_config found it in the CI's smoke run
 * (the invariant that the file takes exactly what the duration parser accepts). The
 * sequence: the program runs with that text once in the environment and once in the
 * file -> both times one error naming the setting, and the program runs unguarded by it.
 * Now every duration is at most 64 characters, from every source.
 */
#include "spawn.h"

static int child(void)
{
	return 0;
}

int main(int argc, char **argv)
{
	static char value[331], envvar[400], confvar[400], out[8192];
	const int fds[3] = { -1, -1, -1 };
	char dir[256], conf[300];
	double took;
	int status;
	FILE *f;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	memset(value, '0', 330);
	memcpy(value + 330 - 5, "250ms", 5);
	value[330] = '\0';

	snprintf(envvar, sizeof(envvar), "TIMEBOX_READ_TIMEOUT=%s", value);
	{
		const char *vars[] = { envvar, NULL };

		status = tbs_run(argv, "child", vars, fds, out, sizeof(out), 20000, &took);
		TBR_CHECK(status == 0, "the program %s; stderr: %s", tbs_describe(status), out);
		TBR_CHECK(strstr(out, "TIMEBOX_READ_TIMEOUT") != NULL &&
				  strstr(out, "at most 64 characters") != NULL,
			  "the environment took a 330-character duration without a word; stderr: %s",
			  out);
	}

	tbs_tmpdir(dir, sizeof(dir));
	snprintf(conf, sizeof(conf), "%s/long.conf", dir);
	snprintf(confvar, sizeof(confvar), "TIMEBOX_CONFIG=%s", conf);
	f = fopen(conf, "w");
	TBR_CHECK(f != NULL, "fopen: %s", strerror(errno));
	fprintf(f, "defaults = { read_timeout = \"%s\"; };\n", value);
	fclose(f);
	{
		const char *vars[] = { confvar, NULL };

		status = tbs_run(argv, "child", vars, fds, out, sizeof(out), 20000, &took);
		TBR_CHECK(status == 0, "the program %s; stderr: %s", tbs_describe(status), out);
		TBR_CHECK(strstr(out, "event=config_error") != NULL && strstr(out, "read_timeout"),
			  "the file took a 330-character duration without a word; stderr: %s", out);
	}
	printf("a 330-character read_timeout: refused from the environment and from the file\n");
	unlink(conf);
	rmdir(dir);
	return 0;
}
