/* stats_not_sent_first.c - a request not sent for a spent budget was not counted when it was
 * the process's first governed connect.
 *
 * What happened: the statistics segment is created at the first governed connect that goes
 * ahead (tb_stats_call_begin). A connect refused because the thread's request budget was
 * already spent comes before that point, and tb_stats_not_sent counted only into a segment
 * that already existed. The end-to-end chain test's `inventory` (a server whose only
 * outbound call comes 3 s into a request it was given 997 ms for) is exactly that case:
 * its log said the call to db was not sent, but `timebox stats PID` said "no statistics
 * for pid N: is it governed by timebox?" instead of NOT_SENT 1. Natively the connect goes
 * through; under timebox it is refused (right) and now counted.
 * The sequence: timebox_deadline_begin(0) (a budget spent at once), then the process's
 * first connect: ETIMEDOUT, nothing sent; `timebox stats PID` must show the destination's
 * row with NOT_SENT 1.
 */
#include <dlfcn.h>

#include "regress.h"

static int port;

/* The column of NOT_SENT in the header line, counting the values a row has: a header word
 * with a '/' names the parts of the value before it ("CUTS gate/conn/..."). -1: none. */
static int not_sent_column(char *header)
{
	int col = 0;

	for (char *w = strtok(header, " \n"); w != NULL; w = strtok(NULL, " \n")) {
		if (strcmp(w, "NOT_SENT") == 0)
			return col;
		col += strchr(w, '/') == NULL;
	}
	return -1;
}

/* NOT_SENT of the destination's row in `timebox stats PID`; -1: no such row or column. */
static long not_sent_shown(const char *launcher)
{
	char cmd[600], line[512], dest[64];
	long n = -1;
	int col = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "LD_PRELOAD= '%s' stats %d 2>&1", launcher, (int)getpid());
	snprintf(dest, sizeof(dest), "127.0.0.1:%d ", port);
	p = popen(cmd, "r");
	TBR_CHECK(p != NULL, "popen: %s", strerror(errno));
	while (fgets(line, sizeof(line), p) != NULL) {
		printf("  %s", line);
		if (strncmp(line, "DEST ", 5) == 0) {
			col = not_sent_column(line);
		} else if (strncmp(line, dest, strlen(dest)) == 0 && col >= 0) {
			char *w = strtok(line, " \n");

			for (int i = 0; w != NULL && i < col; i++)
				w = strtok(NULL, " \n");
			if (w != NULL)
				n = strtol(w, NULL, 10);
		}
	}
	pclose(p);
	return n;
}

int main(int argc, char **argv)
{
	static char launcher[512];
	int (*begin)(long);
	int lfd, fd, err;
	long n;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		const char *pre = getenv("TBR_PRELOAD");
		const char *lib = pre ? strstr(pre, "/lib/libtimebox.so") : NULL;
		const char *start = lib;

		if (lib == NULL)
			tbr_skip("TBR_PRELOAD names no libtimebox.so");
		while (start > pre && start[-1] != ' ')
			start--;
		snprintf(launcher, sizeof(launcher), "%.*s/bin/timebox", (int)(lib - start), start);
		setenv("TBR_LAUNCHER", launcher, 1);
	}
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=5s", NULL);
	snprintf(launcher, sizeof(launcher), "%s", getenv("TBR_LAUNCHER"));
	*(void **)&begin = dlsym(RTLD_DEFAULT, "timebox_deadline_begin");
	TBR_CHECK(begin != NULL, "the library exports no timebox_deadline_begin");
	lfd = tbr_listen(&port);
	TBR_CHECK(begin(0) == 0, "timebox_deadline_begin(0): %s", strerror(errno));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	{
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		err = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : errno;
	}
	TBR_CHECK(err == ETIMEDOUT, "the connect after a spent budget: %s", strerror(err));
	n = not_sent_shown(launcher);
	printf("the first connect, refused for a spent budget: NOT_SENT %ld\n", n);
	close(fd);
	close(lfd);
	TBR_CHECK(n == 1, "the refused request was not counted (no row, or no statistics)");
	return 0;
}
