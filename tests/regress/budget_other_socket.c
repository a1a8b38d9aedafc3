/* budget_other_socket.c - a send on one governed socket must not start the deadline of a
 * call the thread makes later on another.
 *
 * What happens: scope=call opens a thread's budget at its first governed step, a connect
 * or a send on any governed socket, and a later connect joins the open budget while no
 * response has been read. A program that writes a line to a TCP log collector (a
 * write-only stream: no response ever comes), does 800 ms of work of its own, then calls
 * a service that answers in 300 ms, has that call cut at 1 s after the log line: 200 ms
 * into a healthy call, with `event=timeout phase=deadline elapsed_ms=1000`. Natively (and
 * with the call's own 1 s deadline) the call succeeds.
 * Found by make stress: signal handlers that send on their own socket in the middle of a
 * call (the budget then restarts at the handler's send, and the next call inherits it).
 * The sequence: TIMEBOX_DEADLINE=1s; send on a connection to a sink; sleep 800 ms (the
 * program's own work, not a wait on any socket); connect to a service, send a request; the
 * answer comes 300 ms later and must be read.
 * The fix: a step towards another destination, while no attempt of the call has failed,
 * opens a call of its own (policy/budget.c; a retry after a failure still spends the
 * deadline, whatever address it goes to).
 */
#include <pthread.h>
#include <time.h>

#include "regress.h"

static void *sink(void *arg)
{
	int c = accept((int)(intptr_t)arg, NULL, NULL);
	char b[256];

	while (c >= 0 && read(c, b, sizeof(b)) > 0)
		;
	return NULL;
}

static void *service(void *arg) /* answers each 4-byte request after 300 ms */
{
	int c = accept((int)(intptr_t)arg, NULL, NULL);
	char b[4];
	struct timespec ts = { 0, 300 * 1000000 };

	while (c >= 0 && read(c, b, sizeof(b)) == (ssize_t)sizeof(b)) {
		nanosleep(&ts, NULL);
		if (write(c, "pong", 4) != 4)
			break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int lport, sport, lfd, sfd, log, rpc;
	pthread_t t1, t2;
	struct timespec work = { 0, 800 * 1000000 };
	char b[4];
	double t0;
	ssize_t n;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=1s", NULL);
	lfd = tbr_listen(&lport);
	sfd = tbr_listen(&sport);
	pthread_create(&t1, NULL, sink, (void *)(intptr_t)lfd);
	pthread_create(&t2, NULL, service, (void *)(intptr_t)sfd);
	log = tbr_connect(lport);
	TBR_CHECK(write(log, "started\n", 8) == 8, "log line: %s", strerror(errno));
	nanosleep(&work, NULL); /* the program's own work */
	t0 = tbt_now_ms();
	rpc = tbr_connect(sport);
	TBR_CHECK(write(rpc, "ping", 4) == 4, "request: %s", strerror(errno));
	n = read(rpc, b, sizeof(b));
	TBR_CHECK(n == 4, "a service answering in 300 ms was cut after %.0f ms: %s",
		  tbt_now_ms() - t0, n < 0 ? strerror(errno) : "short read");
	printf("the call took %.0f ms and was answered\n", tbt_now_ms() - t0);
	return 0;
}
