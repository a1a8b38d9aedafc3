/* gate_table_full.c - past 4,096 destinations, new ones went ungated without a word.
 *
 * What happened: a process keeps at most 4,096 gates (one per destination). A crawler or a
 * client of a large fleet that reached more destinations than that got no gate for the
 * new ones: their connects ran uncapped and nothing said so. The limit stays (the table is
 * lock-free and fixed), but the first ungated destination is logged once, and the exit
 * summary counts them. The sequence: TIMEBOX_MAX_CONNS=1, TIMEBOX_LOG_LEVEL=info, connect
 * to 4,200 distinct loopback addresses (127.1.x.y, a closed port: refused at once) -> every
 * connect still reports ECONNREFUSED, one event=error what=gate_table line when it
 * happens, and one at exit counting the 104 ungated connects.
 */
#include "gate_regress.h"

static int work(void)
{
	int refused = 0;

	for (int i = 0; i < 4200; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(1) };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		a.sin_addr.s_addr = htonl(0x7f010000u + 1 + (unsigned)i);
		TBR_CHECK(fd >= 0, "socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno == ECONNREFUSED)
			refused++;
		close(fd);
	}
	TBR_CHECK(refused == 4200, "%d of 4200 connects refused", refused);
	return 0;
}

int main(int argc, char **argv)
{
	static char log_env[96];
	const char *logpath;
	int st, lines, counted;

	if (getenv("TBR_CHILD") == NULL) {
		static char path[64];

		snprintf(path, sizeof(path), "/tmp/tbr-table-full-%d.log", (int)getpid());
		snprintf(log_env, sizeof(log_env), "TIMEBOX_LOG=%s", path);
		setenv("TBR_LOGPATH", path, 1);
		tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_LOG_LEVEL=info", log_env,
				 NULL);
	}
	if (argc >= 2)
		return work();
	logpath = getenv("TBR_LOGPATH");
	st = tbg_wait(tbg_spawn("work", NULL));
	lines = tbg_count_lines(logpath, "what=gate_table");
	counted = tbg_count_lines(logpath, "ungated_connects=104 ");
	if (lines != 2 || counted != 1)
		tbg_dump(logpath);
	unlink(logpath);
	TBR_CHECK(st == 0, "the connecting process failed (%d)", st);
	TBR_CHECK(lines == 2 && counted == 1, "%d what=gate_table lines for 4200 destinations, "
		  "%d counting 104 ungated connects (want the warning once, then the count at "
		  "exit)", lines, counted);
	return 0;
}
