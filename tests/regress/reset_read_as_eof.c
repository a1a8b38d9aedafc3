/* reset_read_as_eof.c - a connection reset must read as ECONNRESET, never as a clean EOF.
 *
 * What happens: when a read-side limit falls due, the watchdog asks whether data is queued
 * with recv(MSG_PEEK | MSG_DONTWAIT) (tb_sock_rd_ready). When the peer's RST has arrived
 * and the program's blocked read has not run yet, that recv returns the pending ECONNRESET
 * - and the kernel clears the socket's error as it reports it. The program's read then
 * returns 0: the reset reads as a clean end of stream, and a response whose end is the
 * connection's close (HTTP/1.0, Connection: close without a length) passes for complete.
 * make stress: one reset in ~13,400 read as EOF ("UNEXPECTED: reset family 0"), at 200
 * threads on 2 cores, where a woken reader can wait long for a CPU.
 * The sequence, made deterministic by starving the reader: everything on one CPU; the
 * reader (SCHED_OTHER) blocks in read with TIMEBOX_READ_TIMEOUT=200ms; the peer resets the
 * connection at 100 ms; a SCHED_FIFO 1 thread spins from 50 ms to 700 ms, so the reader
 * runs only after the watchdog (SCHED_FIFO 2, inherited from the thread that started it)
 * has looked at 200 ms. Natively the read gives ECONNRESET. Needs real-time scheduling.
 *
 * The fix: tb_sock_rd_ready asks poll(POLLIN, 0), which reports a pending error without
 * taking it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "regress.h"

static int port;
static atomic_int asked;
static ssize_t got;
static int got_errno;
static double read_at;

static void *resetter(void *arg) /* reads the request, resets the connection 100 ms later */
{
	int c = accept((int)(intptr_t)arg, NULL, NULL);
	struct linger lg = { 1, 0 };
	struct timespec ts = { 0, 100 * 1000000 };
	char b[4];

	if (c < 0 || read(c, b, sizeof(b)) != (ssize_t)sizeof(b))
		return NULL;
	nanosleep(&ts, NULL);
	setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c);
	return NULL;
}

static void *reader(void *arg)
{
	struct sched_param p = { 0 };
	int fd;
	char b[16];

	(void)arg;
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &p); /* below the spinner */
	fd = tbr_connect(port);
	TBR_CHECK(write(fd, "ask!", 4) == 4, "request: %s", strerror(errno));
	atomic_store(&asked, 1);
	got = read(fd, b, sizeof(b));
	got_errno = errno;
	read_at = tbt_now_ms();
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	cpu_set_t one;
	pthread_t r, s;
	int lfd, idle_port, keep;
	double t0;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", "TIMEBOX_CONNECT_TIMEOUT=1s", NULL);
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	TBR_CHECK(sched_setaffinity(0, sizeof(one), &one) == 0, "affinity: %s", strerror(errno));
	/* Real-time priority 2 for this thread, hence for the library's watchdog and the
	 * resetter it starts; the spinner below drops to 1, the reader to SCHED_OTHER. */
	struct sched_param rt = { .sched_priority = 2 };
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) != 0)
		tbr_skip("no real-time scheduling here (needs CAP_SYS_NICE or RLIMIT_RTPRIO)");
	lfd = tbr_listen(&port);
	keep = tbr_listen(&idle_port);
	(void)keep;
	/* A governed connect from this (normal-priority) thread starts the library's watchdog
	 * with our priority, not the starved reader's. */
	keep = tbr_connect(idle_port);
	pthread_create(&s, NULL, resetter, (void *)(intptr_t)lfd);
	pthread_create(&r, NULL, reader, NULL);
	while (!atomic_load(&asked))
		usleep(1000);
	t0 = tbt_now_ms();
	usleep(50000);
	rt.sched_priority = 1;
	pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt);
	while (tbt_now_ms() - t0 < 700) /* the reader waits for the CPU meanwhile */
		;
	rt.sched_priority = 0;
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &rt);
	pthread_join(r, NULL);
	pthread_join(s, NULL);
	TBR_CHECK(got < 0 && got_errno == ECONNRESET, "a reset connection read %zd (%s), %.0f ms "
		  "after the request", got, got < 0 ? strerror(got_errno) : got == 0 ?
		  "a clean end of stream" : "data", read_at - t0);
	printf("the reset read as ECONNRESET, %.0f ms after the request\n", read_at - t0);
	return 0;
}
