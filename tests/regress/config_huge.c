/* config_huge.c - a configuration file of megabytes holds the program at start-up.
 *
 * What happened: libconfig's scanner reads a file in 8 KiB blocks and rescans a token
 * that spans blocks from its start, so one long string costs time quadratic in its
 * length: a 2 MB file took 2.6 s, an 8 MB one 27 s, all of it inside the constructor of
 * every program started with TIMEBOX_CONFIG. The sequence: a 2 MiB file holding one long
 * string -> refused at once (the configuration is small by nature; the cap is 1 MiB) with
 * one error naming the file and the cap, and the program runs.
 */
#include "spawn.h"

static int child(void)
{
	return 0;
}

int main(int argc, char **argv)
{
	static char var[400], out[8192];
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=1s", var, NULL };
	const int fds[3] = { -1, -1, -1 };
	char dir[256], conf[300];
	size_t size = 2u << 20;
	double took;
	int status;
	FILE *f;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	tbs_tmpdir(dir, sizeof(dir));
	snprintf(conf, sizeof(conf), "%s/huge.conf", dir);
	snprintf(var, sizeof(var), "TIMEBOX_CONFIG=%s", conf);
	f = fopen(conf, "w");
	TBR_CHECK(f != NULL, "fopen: %s", strerror(errno));
	fputs("defaults = { read_timeout = \"2s\"; };\nnote = \"", f);
	for (size_t i = 0; i < size; i++)
		fputc('x', f);
	fputs("\";\n", f);
	fclose(f);

	status = tbs_run(argv, "child", vars, fds, out, sizeof(out), 20000, &took);
	TBR_CHECK(status == 0, "the program %s; stderr: %s", tbs_describe(status), out);
	TBR_CHECK(strstr(out, "event=config_error") != NULL && strstr(out, conf) != NULL &&
			  strstr(out, "larger than") != NULL,
		  "expected one error naming the file and the size cap (after %.0f ms); stderr: %s",
		  took, out);
	/* Generous: the refusal itself is an fstat; exec and start-up are the rest. */
	TBR_CHECK(took < 1000, "the start took %.0f ms (2 MiB file)", took);
	printf("2 MiB config: refused, the program ran in %.0f ms; %s", took, out);
	unlink(conf);
	rmdir(dir);
	return 0;
}
