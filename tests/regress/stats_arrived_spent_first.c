/* stats_arrived_spent_first.c - an inbound request that arrived with its budget spent was not
 * counted when the server had made no governed connect yet.
 *
 * What happened: the statistics segment is created by the first governed connect that goes
 * ahead, and tb_stats_arrived_spent counted only into a segment that already existed. A
 * server under scope = request whose first request says `X-Deadline-Ms: 0` (its caller has
 * already given up) read it before any outbound call: the count was lost, and `timebox
 * stats PID` then said "no statistics", or (after a later refused call created the
 * segment) NOT_SENT 1 without "1 inbound requests arrived with their budget spent".
 * The sequence: a native client (bash's /dev/tcp, LD_PRELOAD unset) sends one request head
 * with X-Deadline-Ms: 0 to this program, which reads it on an accepted socket; `timebox
 * stats PID` must say one inbound request arrived with its budget spent.
 */
#include <sys/wait.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static char launcher[512];
	char cmd[700], line[512], head[512];
	int lfd, port, c, found = 0;
	pid_t child;
	FILE *p;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		const char *pre = getenv("TBR_PRELOAD");
		const char *lib = pre ? strstr(pre, "/lib/libtimebox.so") : NULL;
		const char *start = lib;

		if (lib == NULL)
			tbr_skip("TBR_PRELOAD names no libtimebox.so");
		if (access("/bin/bash", X_OK) != 0)
			tbr_skip("no /bin/bash for a native client (/dev/tcp)");
		while (start > pre && start[-1] != ' ')
			start--;
		snprintf(launcher, sizeof(launcher), "%.*s/bin/timebox", (int)(lib - start), start);
		setenv("TBR_LAUNCHER", launcher, 1);
	}
	tbr_preload_self(argv, "TIMEBOX_SCOPE=request", "TIMEBOX_PROPAGATE=1",
			 "TIMEBOX_DEADLINE=5s", NULL);
	snprintf(launcher, sizeof(launcher), "%s", getenv("TBR_LAUNCHER"));
	lfd = tbr_listen(&port);
	snprintf(cmd, sizeof(cmd),
		 "exec 3<>/dev/tcp/127.0.0.1/%d && printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\n"
		 "X-Deadline-Ms: 0\\r\\n\\r\\n' >&3 && cat <&3 >/dev/null", port);
	child = fork();
	TBR_CHECK(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		unsetenv("LD_PRELOAD");
		execl("/bin/bash", "bash", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	c = accept(lfd, NULL, NULL);
	TBR_CHECK(c >= 0, "accept: %s", strerror(errno));
	{
		size_t len = 0;
		ssize_t r;

		/* Read the head whole (it opens and, at its end, tightens the request's budget). */
		while (len + 1 < sizeof(head) && (r = read(c, head + len, sizeof(head) - 1 - len)) > 0) {
			len += (size_t)r;
			head[len] = '\0';
			if (strstr(head, "\r\n\r\n") != NULL)
				break;
		}
		TBR_CHECK(strstr(head, "\r\n\r\n") != NULL, "no whole head read");
	}
	snprintf(cmd, sizeof(cmd), "LD_PRELOAD= '%s' stats %d 2>&1", launcher, (int)getpid());
	p = popen(cmd, "r");
	TBR_CHECK(p != NULL, "popen: %s", strerror(errno));
	while (fgets(line, sizeof(line), p) != NULL) {
		printf("  %s", line);
		found |= strstr(line, "1 inbound requests arrived with their budget spent") != NULL;
	}
	pclose(p);
	close(c); /* the client's cat sees EOF and exits */
	waitpid(child, NULL, 0);
	close(lfd);
	TBR_CHECK(found, "the request that arrived with its budget spent was not counted");
	return 0;
}
