/* inbound_fclose.c - an accepted socket closed by fclose stayed an inbound connection
 * for timebox, and a file later given its number opened a request budget that refused the
 * thread's calls.
 *
 * What happened: under scope=request each accepted socket is followed by fd (prop_io.c),
 * and close, close_range and dup2 forget it. A server that wraps its connection in stdio
 * (fdopen) and ends it with fclose closes the fd inside libc, out of the hooks' sight:
 * fclose and freopen untracked governed sockets only, so the number stayed "inbound". The
 * next thing to get that number - here a pipe; a file, a UDP socket - had its bytes read as
 * a request head: "token" (a method's letters) opened the thread's request budget, and no
 * response ever closed it. The sequence: TIMEBOX_SCOPE=request, TIMEBOX_DEADLINE=300ms; a
 * raw client sends a request, the server accepts it, fdopen()s it, reads the request,
 * writes its response and fclose()s the stream; a pipe is put on the same number and
 * "token" read from it; 500 ms of work, then a connect to a healthy listener -> -1
 * ETIMEDOUT at once, where natively (and after close instead of fclose) it succeeds.
 */
#include <sys/syscall.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timespec work = { 0, 500 * 1000 * 1000 };
	char buf[256];
	int lport, dport, lfd, cfd, in, p[2], out;
	FILE *f;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_SCOPE=request", "TIMEBOX_DEADLINE=300ms", NULL);
	lfd = tbr_listen(&lport);
	tbr_listen(&dport);
	/* The peer's socket by raw system calls: never governed, never tracked. */
	cfd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons((uint16_t)lport);
	TBR_CHECK(cfd >= 0 && syscall(SYS_connect, cfd, (struct sockaddr *)&a, sizeof(a)) == 0,
		  "raw connect: %s", strerror(errno));
	TBR_CHECK(syscall(SYS_write, cfd, req, strlen(req)) == (long)strlen(req), "raw write");
	in = accept(lfd, NULL, NULL);
	TBR_CHECK(in >= 0, "accept: %s", strerror(errno));
	f = fdopen(in, "r+");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	r = read(in, buf, sizeof(buf));
	TBR_CHECK(r == (ssize_t)strlen(req), "read %zd", r);
	TBR_CHECK(write(in, "HTTP/1.1 204 No Content\r\n\r\n", 27) == 27, "response");
	TBR_CHECK(fclose(f) == 0, "fclose: %s", strerror(errno));

	/* The number goes to a pipe's read end (the lowest free one: a dup2 onto it would
	 * be seen, and forget the connection). */
	TBR_CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	if (p[0] != in)
		tbr_skip("the pipe did not get the connection's number");
	TBR_CHECK(write(p[1], "token", 5) == 5, "pipe write");
	r = read(in, buf, sizeof(buf));
	TBR_CHECK(r == 5, "pipe read %zd", r);
	nanosleep(&work, NULL); /* the program's own work, longer than the deadline */

	out = tbr_connect(dport); /* checks connect() == 0: ETIMEDOUT before the fix */
	printf("a pipe on the number of an fclose()d connection opened no budget: the connect "
	       "500 ms later went ahead\n");
	close(out);
	return 0;
}
