/* propagate_inbound_not_http.c - a non-HTTP message on an accepted socket kept a request
 * budget open, and the thread's later calls were refused.
 *
 * What happened: under scope=request an accepted socket's first byte opens the thread's
 * budget (it may begin an HTTP/1.x request head), and the budget closes when the thread
 * starts writing the response there. A line that turns out not to be an HTTP request line
 * ("PING\r\n", a RESP command, a custom protocol) left that budget open until a response that
 * may never come. The sequence: TIMEBOX_SCOPE=request, TIMEBOX_DEADLINE=300ms; the program
 * accepts a connection, reads "PI" then "NG\r\n" from it and does not answer, works 500 ms, then
 * connects to a healthy server -> the connect failed at once with ETIMEDOUT (the PING's
 * budget had run out), where natively it succeeds. Now a head that proves not to be HTTP
 * closes the budget its first byte opened: only HTTP/1.x requests open one.
 */
#include <sys/syscall.h>

#include "regress.h"

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timespec work = { 0, 500 * 1000 * 1000 };
	char buf[64];
	int lport, dport, lfd, dfd, cfd, in, out;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_SCOPE=request", "TIMEBOX_DEADLINE=300ms", NULL);
	lfd = tbr_listen(&lport);
	dfd = tbr_listen(&dport);
	/* The peer's socket by raw system calls: never governed, never tracked. */
	cfd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons((uint16_t)lport);
	TBR_CHECK(cfd >= 0 && syscall(SYS_connect, cfd, (struct sockaddr *)&a, sizeof(a)) == 0,
		  "raw connect: %s", strerror(errno));
	in = accept(lfd, NULL, NULL);
	TBR_CHECK(in >= 0, "accept: %s", strerror(errno));
	/* In two reads, as a slow peer's line arrives: "PI" may still begin a method. */
	TBR_CHECK(syscall(SYS_write, cfd, "PI", 2) == 2, "raw write");
	r = read(in, buf, sizeof(buf));
	TBR_CHECK(r == 2, "read %zd bytes: %s", r, r < 0 ? strerror(errno) : "short");
	TBR_CHECK(syscall(SYS_write, cfd, "NG\r\n", 4) == 4, "raw write");
	r = read(in, buf, sizeof(buf));
	TBR_CHECK(r == 4, "read %zd bytes: %s", r, r < 0 ? strerror(errno) : "short");
	nanosleep(&work, NULL); /* the program's own work, longer than the deadline */

	out = tbr_connect(dport); /* checks connect() == 0: ETIMEDOUT before the fix */
	TBR_CHECK(write(out, "GET / HTTP/1.1\r\nHost: d\r\n\r\n", 27) == 27, "write: %s",
		  strerror(errno));
	printf("a PING read on an accepted socket left no budget: the connect 500 ms later "
	       "went ahead\n");
	close(out);
	close(in);
	close(cfd);
	close(dfd);
	close(lfd);
	return 0;
}
