/* log_file_hostile.c - a FIFO or a symbolic link planted at the TIMEBOX_LOG path.
 *
 * What happened: the library opened TIMEBOX_LOG with open(O_WRONLY | O_CREAT) at start-up.
 * A FIFO at that path blocks the open until a reader comes: the program hung before its
 * first line. A symbolic link there is followed: another local user who can write the
 * directory of a shared log path chooses which file the program appends to. The sequence:
 * mkfifo log; TIMEBOX_LOG=log program -> must run, with one error line saying the log is
 * not a regular file; ln -s victim log; TIMEBOX_LOG=log program that times out -> the
 * link is refused, the victim is untouched, and the lines go to stderr.
 */
#include <sys/stat.h>

#include "spawn.h"

/* The program: one read cut by a 200 ms read timeout (a line to log), then exit 0. */
static int child(void)
{
	char c = 'x';
	int port, lfd = tbr_listen(&port), fd = tbr_connect(port);

	TBR_CHECK(write(fd, &c, 1) == 1, "write: %s", strerror(errno));
	TBR_CHECK(read(fd, &c, 1) == -1 && errno == ETIMEDOUT, "read: %s",
		  tbt_errno_name(errno));
	close(fd);
	close(lfd);
	return 0;
}

int main(int argc, char **argv)
{
	static char var[400], out[8192];
	const char *vars[] = { "TIMEBOX_READ_TIMEOUT=200ms", var, NULL };
	const int fds[3] = { -1, -1, -1 };
	char dir[256], fifo[300], victim[300], link[300];
	struct stat st;
	double took;
	int status;
	FILE *f;

	(void)argc;
	if (tbs_role() != NULL)
		return child();
	tbs_tmpdir(dir, sizeof(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo.log", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(link, sizeof(link), "%s/link.log", dir);
	TBR_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
	f = fopen(victim, "w");
	TBR_CHECK(f != NULL, "fopen: %s", strerror(errno));
	fclose(f);
	TBR_CHECK(symlink(victim, link) == 0, "symlink: %s", strerror(errno));

	snprintf(var, sizeof(var), "TIMEBOX_LOG=%s", fifo);
	status = tbs_run(argv, "child", vars, fds, out, sizeof(out), 5000, &took);
	TBR_CHECK(status == 0, "TIMEBOX_LOG=FIFO: the program %s after %.0f ms; stderr: %s",
		  tbs_describe(status), took, out);
	TBR_CHECK(strstr(out, "name=TIMEBOX_LOG") != NULL &&
			  strstr(out, "not a regular file") != NULL,
		  "TIMEBOX_LOG=FIFO: expected an error saying so; stderr: %s", out);
	TBR_CHECK(strstr(out, "event=timeout") != NULL, "the line went to stderr: %s", out);
	printf("TIMEBOX_LOG=FIFO: ran in %.0f ms\n%s", took, out);

	snprintf(var, sizeof(var), "TIMEBOX_LOG=%s", link);
	status = tbs_run(argv, "child", vars, fds, out, sizeof(out), 5000, &took);
	TBR_CHECK(status == 0, "TIMEBOX_LOG=link: the program %s; stderr: %s",
		  tbs_describe(status), out);
	TBR_CHECK(stat(victim, &st) == 0 && st.st_size == 0,
		  "the link was followed: its target holds %lld bytes", (long long)st.st_size);
	TBR_CHECK(strstr(out, "name=TIMEBOX_LOG") != NULL && strstr(out, "symbolic link") != NULL,
		  "TIMEBOX_LOG=link: expected an error saying so; stderr: %s", out);
	TBR_CHECK(strstr(out, "event=timeout") != NULL, "the line went to stderr: %s", out);
	printf("TIMEBOX_LOG=symlink: refused\n%s", out);

	unlink(link);
	unlink(victim);
	unlink(fifo);
	rmdir(dir);
	return 0;
}
