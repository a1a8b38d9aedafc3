/*
 * start_up_symbol_scan - every process paid 3.7 million instructions to start.
 *
 * At load, timebox binds each function it wraps to the next definition (dlsym with
 * RTLD_NEXT) and checks that the definition does not lie inside timebox itself, where
 * forwarding would recurse. That check asked dladdr which object holds the address, and
 * dladdr answers by finding the nearest symbol: a scan of every symbol of the object - libc's
 * thousands - for each of forty names. /bin/true ran 3.9 M instructions under the library
 * against 0.13 M natively (0.5 -> 1.0 ms of CPU per process): a shell script, a make or a
 * container entrypoint run under `timebox run` paid it at every exec, governed or not. The
 * check is now a comparison with timebox's own address range, taken once.
 *
 * The program counts /bin/true's instructions under callgrind, natively and preloaded (with
 * limits set, so the configuration is read too), and fails when the library adds more than
 * 1,000,000 (it adds about 110,000 now). Callgrind counts instructions, not time: the
 * figure is the same on a loaded machine.
 */
#include "regress.h"

/* The instructions callgrind counted for /bin/true, preloaded with `lib` unless NULL. */
static long count_true(const char *lib)
{
	char cmd[4096], line[512];
	long collected = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "env -i PATH=/usr/local/bin:/usr/bin:/bin %s%s%s valgrind --tool=callgrind "
		 "--callgrind-out-file=/dev/null /bin/true 2>&1",
		 lib != NULL ? "TIMEBOX_DEADLINE=5s TIMEBOX_READ_TIMEOUT=1s LD_PRELOAD='" : "",
		 lib != NULL ? lib : "", lib != NULL ? "'" : "");
	p = popen(cmd, "r");
	TBR_CHECK(p != NULL, "popen: %s", strerror(errno));
	while (fgets(line, sizeof(line), p) != NULL) {
		const char *at = strstr(line, "Collected : ");

		if (at != NULL)
			collected = strtol(at + strlen("Collected : "), NULL, 10);
	}
	TBR_CHECK(pclose(p) == 0 && collected > 0, "%s: no instruction count", cmd);
	return collected;
}

int main(void)
{
	const char *lib = getenv("TBR_PRELOAD");
	const char *san = getenv("TB_SANITIZE");
	long native, preloaded;

	if (lib == NULL || *lib == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	if (san != NULL && *san != '\0')
		tbr_skip("callgrind cannot run a sanitizer's runtime");
	if (system("valgrind --version >/dev/null 2>&1") != 0)
		tbr_skip("valgrind is not installed (tests/deps.sh bench installs it)");
	native = count_true(NULL);
	preloaded = count_true(lib);
	fprintf(stderr, "/bin/true: %ld instructions natively, %ld preloaded (%+ld)\n", native,
		preloaded, preloaded - native);
	TBR_CHECK(preloaded - native <= 1000000,
		  "the library adds %ld instructions to a process's start", preloaded - native);
	return 0;
}
