/* inbound_stdio_keepalive.c - a keep-alive server that answers through stdio ran its
 * second request under the first one's request budget, and its calls were refused.
 *
 * What happened: under scope=request a head read from an accepted socket opens the
 * thread's request budget, and the response's first write (write, send, writev, sendmsg on
 * that connection) closes it and readies the connection's parser for the next head. A
 * response written with stdio (fdopen, fprintf, fflush) goes through libc's own write,
 * unseen: the budget stayed open and the parser stayed "in the body" of the first request,
 * so the second request on the same connection opened no budget of its own - it ran under
 * the first's, long expired. docs/limitations.md says of such responses "the thread's next
 * head replaces it"; on a keep-alive connection the next head is never read as one. The
 * sequence: TIMEBOX_SCOPE=request, TIMEBOX_DEADLINE=300ms; a raw client sends a request,
 * the server reads it with read() and answers with fprintf + fflush on a FILE of a dup of
 * the socket; 500 ms later the client sends a second request on the same connection, the
 * server reads it and connects to a healthy listener for it -> -1 ETIMEDOUT at once, where
 * natively it succeeds. The musl build's stdio writers had the same hole after the glibc
 * build's was closed: the program is built with musl-gcc too (make musl-clients) and run
 * under that build by test_musl.py.
 */
#include <sys/syscall.h>

#include "regress.h"

int main(int argc, char **argv)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timespec idle = { 0, 500 * 1000 * 1000 };
	char buf[256];
	int lport, dport, lfd, cfd, in, out;
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
	in = accept(lfd, NULL, NULL);
	TBR_CHECK(in >= 0, "accept: %s", strerror(errno));
	f = fdopen(dup(in), "w");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));

	/* Request 1: read, answered through stdio. */
	TBR_CHECK(syscall(SYS_write, cfd, req, strlen(req)) == (long)strlen(req), "raw write");
	r = read(in, buf, sizeof(buf));
	TBR_CHECK(r == (ssize_t)strlen(req), "read %zd", r);
	TBR_CHECK(fprintf(f, "HTTP/1.1 204 No Content\r\n\r\n") > 0 && fflush(f) == 0,
		  "the response through stdio");
	TBR_CHECK(syscall(SYS_read, cfd, buf, sizeof(buf)) > 0, "the client reads it");
	nanosleep(&idle, NULL); /* the connection rests, longer than the deadline */

	/* Request 2 on the same connection: its own outbound call. */
	TBR_CHECK(syscall(SYS_write, cfd, req, strlen(req)) == (long)strlen(req), "raw write");
	r = read(in, buf, sizeof(buf));
	TBR_CHECK(r == (ssize_t)strlen(req), "read %zd", r);
	out = tbr_connect(dport); /* checks connect() == 0: ETIMEDOUT before the fix */
	printf("the second request on a connection answered through stdio had a budget of its "
	       "own: its connect went ahead\n");
	close(out);
	fclose(f);
	return 0;
}
