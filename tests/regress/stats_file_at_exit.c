/* stats_file_at_exit.c - the stats file written at exit raced with the stats thread.
 *
 * What happened: with TIMEBOX_STATS_FILE set, the stats thread rewrites the file every
 * interval, and the exit handler writes it a last time. Both filled the same static table
 * of rows from the segment while the thread also refreshed the gauges in it: under
 * SANITIZE=thread, `timebox run --observe` with a stats file reported 13 data races at the
 * program's exit (tb_stats_rows, tb_hist_merge, refresh_gate), and a plain build could
 * write a file mixing two snapshots. The refresh, the periodic write and the last write
 * now take one lock (never taken on the I/O path).
 * The sequence: a governed connection (the segment and the thread start), the stats file
 * rewritten every millisecond, 300 ms of it, then exit: no race report, and the file is
 * whole (it ends with the last metric family's newline).
 */
#include <sys/stat.h>
#include <sys/wait.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static char path[64], setting[96];
	int lfd, port, fd;
	FILE *f;
	char line[512], last[512] = "";

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		snprintf(path, sizeof(path), "/tmp/tb-stats-exit-%d.prom", (int)getpid());
		snprintf(setting, sizeof(setting), "TIMEBOX_STATS_FILE=%s", path);
		setenv("TBR_STATS_PATH", path, 1);
		if (fork() == 0) {
			tbr_preload_self(argv, setting, "TIMEBOX_STATS_INTERVAL=1ms",
					 "TIMEBOX_READ_TIMEOUT=5s", NULL);
		}
		{
			int st;

			wait(&st);
			TBR_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the governed run failed "
				  "(status %d: a sanitizer report exits 66)", st);
		}
		f = fopen(path, "r");
		TBR_CHECK(f != NULL, "%s: %s", path, strerror(errno));
		while (fgets(line, sizeof(line), f) != NULL)
			snprintf(last, sizeof(last), "%s", line);
		fclose(f);
		unlink(path);
		printf("stats file's last line: %s", last);
		TBR_CHECK(strncmp(last, "timebox_", 8) == 0 && strchr(last, '\n') != NULL,
			  "the stats file is not whole");
		return 0;
	}
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	tbt_sleep_ms(300); /* the file rewritten ~300 times meanwhile: the run's length */
	close(fd);
	close(lfd);
	return 0; /* the exit handler writes the file a last time */
}
