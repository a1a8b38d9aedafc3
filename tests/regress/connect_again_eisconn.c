/* connect_again_eisconn.c - connect() again on an established governed socket says EISCONN,
 * as natively, and leaves the socket's state and gate slot alone.
 *
 * What happened: some programs test a connection with a second connect() and expect
 * EISCONN. The hook took an OPEN socket connecting again for a close it had missed: it freed
 * the socket's state, gave its gate slot back and took one again. With max_conns = 1 and
 * another thread already waiting at the gate, the waiter got the slot and the established
 * connection's connect() failed with ETIMEDOUT after acquire_timeout. The sequence: connect
 * A; thread T connects B and waits at the full gate; connect(A) again -> must be -1 EISCONN
 * at once; T's connect fails with ETIMEDOUT (the gate stays full); A still carries an
 * exchange.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>

#include "regress.h"

static int lfd, port;
static atomic_int waiter_tid;
static int waiter_rc, waiter_err;

static void *waiter(void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)arg;
	atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
	waiter_rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	waiter_err = errno;
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	pthread_t t;
	char buf[16];
	int fd, r, err;
	double t0, ms;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=1", "TIMEBOX_ACQUIRE_TIMEOUT=500ms",
			 "TIMEBOX_READ_TIMEOUT=2s", NULL);
	lfd = tbr_listen(&port);
	a.sin_port = htons((uint16_t)port);
	tbr_serve_each(lfd, tbr_echo);
	fd = tbr_connect(port);

	pthread_create(&t, NULL, waiter, NULL);
	while (atomic_load(&waiter_tid) == 0 || !tbr_thread_sleeping(atomic_load(&waiter_tid)))
		sched_yield();

	t0 = tbt_now_ms();
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	err = errno;
	ms = tbt_now_ms() - t0;
	fprintf(stderr, "connect again: %d %s after %.0f ms\n", r, tbt_errno_name(err), ms);
	TBR_CHECK(r == -1 && err == EISCONN, "connect again returned %d %s", r,
		  tbt_errno_name(err));
	TBR_CHECK(ms < 250, "connect again took %.0f ms", ms);

	pthread_join(t, NULL);
	fprintf(stderr, "waiter: %d %s\n", waiter_rc, tbt_errno_name(waiter_err));
	TBR_CHECK(waiter_rc == -1 && waiter_err == ETIMEDOUT,
		  "the waiter got %d %s: the slot held by the open connection was given away",
		  waiter_rc, tbt_errno_name(waiter_err));
	TBR_CHECK(write(fd, "ping", 4) == 4, "write: %s", tbt_errno_name(errno));
	TBR_CHECK(read(fd, buf, sizeof(buf)) == 4, "read: %s", tbt_errno_name(errno));
	return 0;
}
