/* oob_read_not_a_failure.c - a program that looks for TCP urgent data after each answer
 * had its healthy calls run together under one deadline, and then refused.
 *
 * What happened: recv(fd, &c, 1, MSG_OOB) with no urgent data pending fails at once with
 * EINVAL (a telnet- or FTP-style client checks for it; it never blocks). On a governed
 * socket that error was taken for the call's failure: the thread's budget forgot the
 * answer it had just read, so the program's next request was taken for a retry of the
 * same call, under the same deadline. With TIMEBOX_DEADLINE=500ms, a client making one
 * call every 100 ms, each answered at once, had its send refused with ETIMEDOUT after
 * half a second. A read of urgent data is not the stream's, like an error-queue read: it
 * is now the program's own call, no transfer.
 * The sequence: eight calls 100 ms apart (the client's own pace, not a wait for anything),
 * each a request, its answer, then a recv(MSG_OOB) that fails with EINVAL as natively;
 * every call must succeed.
 */
#include "regress.h"

#define CALLS 8

/* Answers each request "q" with "a". */
static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	char b;

	while (read(c, &b, 1) == 1)
		if (b == 'q' && write(c, "a", 1) != 1)
			break;
	close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	int port, fd;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=500ms", NULL);
	tbr_hang_guard(20, "the calls did not finish");
	tbr_serve_each(tbr_listen(&port), serve);
	fd = tbr_connect(port);
	for (int i = 0; i < CALLS; i++) {
		char b;
		ssize_t r;

		if (i > 0)
			tbt_sleep_ms(100); /* the program's pace between calls */
		r = send(fd, "q", 1, 0);
		TBR_CHECK(r == 1, "call %d (%d ms in): the request: %zd (%s); natively sent", i,
			  i * 100, r, strerror(errno));
		TBR_CHECK(read(fd, &b, 1) == 1 && b == 'a', "call %d: the answer: %s", i,
			  strerror(errno));
		errno = 0;
		r = recv(fd, &b, 1, MSG_OOB);
		TBR_CHECK(r < 0 && errno == EINVAL, "call %d: recv(MSG_OOB) with no urgent data: "
			  "%zd (%s), natively -1 EINVAL", i, r, strerror(errno));
	}
	close(fd);
	printf("%d calls, each followed by a look for urgent data: each under its own deadline\n",
	       CALLS);
	return 0;
}
