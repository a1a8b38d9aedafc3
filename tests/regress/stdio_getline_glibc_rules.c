/* stdio_getline_glibc_rules.c - getline on a socket FILE aborted the program when *n was 0
 * and *lineptr was not heap memory, read past a set error flag, and reported other sizes.
 *
 * What happened: the governed getline/getdelim copies lines out of the FILE's buffer
 * itself, and kept rules of its own where glibc's (libio/iogetdelim.c) differ:
 * - glibc takes `*lineptr == NULL || *n == 0` for "no buffer yet" and allocates a new one
 *   with malloc. The hook realloc'ed *lineptr whenever it was not NULL: a program that
 *   keeps a fixed array with a size of 0 beside it died in realloc ("invalid pointer",
 *   SIGABRT).
 * - glibc 2.36 returns -1 at once when the stream's error flag is set (a non-blocking
 *   socket's EAGAIN sets it), reading nothing until the program calls clearerr. The hook
 *   read on: it returned the line that had arrived meanwhile, and after clearerr the
 *   program's getline found the line gone.
 * - glibc grows the buffer to the length it needs or twice its size, whichever is more,
 *   at each piece of the FILE's buffer it copies; the hook doubled from 120, so a line of
 *   5,000 bytes left *n at 7,680 where glibc says 8,194.
 * getline now follows glibc's rules. The sequence: a fixed array with *n 0; a line of
 * 5,000 and one of 15,000 bytes, *n compared with an ungoverned socket's (socketpair) fed
 * the same bytes; getline on a stream whose error flag an EAGAIN set, with a line
 * waiting: -1, then after clearerr the line.
 */
#include <poll.h>
#include <sys/wait.h>

#include "regress.h"

static char big[20000];

/* The *n each getline of `f` reports, into caps[] (at most max); returns how many. */
static int capacities(FILE *f, size_t *caps, int max)
{
	char *line = NULL;
	size_t n = 0;
	int k = 0;

	while (k < max && getline(&line, &n, f) > 0)
		caps[k++] = n;
	free(line);
	return k;
}

/* A governed connection whose peer wrote `len` bytes of `data` (all sent before any read)
 * and closed. */
static FILE *governed_with(int lfd, int port, const char *data, size_t len)
{
	int sock = tbr_connect(port), peer = accept(lfd, NULL, NULL);
	FILE *f;

	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(write(peer, data, len) == (ssize_t)len, "write: %s", strerror(errno));
	close(peer);
	f = fdopen(sock, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	return f;
}

int main(int argc, char **argv)
{
	int lfd, port, sv[2], st, k, kn;
	size_t caps[4], native[4];
	pid_t pid;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=2s", NULL);
	tbr_hang_guard(15, "a getline never returned");
	lfd = tbr_listen(&port);

	/* A fixed array with a size of 0: a new buffer from malloc. In a child: the defect
	 * was an abort. */
	f = governed_with(lfd, port, "hello\n", 6);
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		static char fixed[8];
		char *line = fixed;
		size_t n = 0;
		ssize_t r = getline(&line, &n, f);

		TBR_CHECK(r == 6 && line != fixed && n == 120 && strcmp(line, "hello\n") == 0,
			  "getline returned %zd, *n %zu, %s buffer", r, n,
			  line == fixed ? "the fixed" : "a new");
		_exit(0);
	}
	TBR_CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	TBR_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "getline with *n 0: %s",
		  WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "failed");
	fclose(f);

	/* The sizes: as an ungoverned socket's stream fed the same bytes. */
	memset(big, 'a', sizeof(big));
	big[4999] = '\n';
	big[19999] = '\n';
	f = governed_with(lfd, port, big, sizeof(big));
	k = capacities(f, caps, 4);
	fclose(f);
	TBR_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	TBR_CHECK(write(sv[1], big, sizeof(big)) == (ssize_t)sizeof(big), "write");
	close(sv[1]);
	f = fdopen(sv[0], "r");
	kn = capacities(f, native, 4);
	fclose(f);
	TBR_CHECK(k == 2 && kn == 2, "%d and %d lines", k, kn);
	for (int i = 0; i < k; i++)
		TBR_CHECK(caps[i] == native[i], "line %d: *n %zu, natively %zu", i, caps[i],
			  native[i]);

	/* A set error flag: -1 at once, the waiting line left for after clearerr. */
	{
		int sock = tbr_connect(port), peer = accept(lfd, NULL, NULL);
		struct pollfd p = { .events = POLLIN };
		char *line = NULL;
		size_t n = 0;
		ssize_t r;

		TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
		fcntl(sock, F_SETFL, O_NONBLOCK);
		f = fdopen(sock, "r");
		TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
		TBR_CHECK(getc(f) == EOF && errno == EAGAIN && ferror(f), "getc: no EAGAIN");
		TBR_CHECK(write(peer, "hello\n", 6) == 6, "write");
		p.fd = sock;
		TBR_CHECK(poll(&p, 1, 5000) == 1, "the line never arrived");
		errno = 0;
		r = getline(&line, &n, f);
		TBR_CHECK(r == -1 && errno == 0, "with the error flag set getline returned %zd "
			  "(errno %s)", r, tbt_errno_name(errno));
		clearerr(f);
		r = getline(&line, &n, f);
		TBR_CHECK(r == 6 && strcmp(line, "hello\n") == 0, "after clearerr getline "
			  "returned %zd", r);
		free(line);
		fclose(f);
		close(peer);
	}
	close(lfd);
	return 0;
}
