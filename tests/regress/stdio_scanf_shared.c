/* stdio_scanf_shared.c - fscanf on a socket FILE shared between threads read without
 * the FILE's lock: another thread's fgets took the scan's line, or sat in a read while the
 * line it was owed lay in the buffer, until the read timeout cut it.
 *
 * What happened: glibc's fscanf holds the FILE's lock for the whole call, so a second
 * thread's fgets on the same stream waits for the scan and then reads what the scan left.
 * The governed fscanf first fills an empty buffer itself with one read of its own (so that
 * the first read is a wait of its own) - and did that without the lock. With the buffer
 * empty and the peer not yet sending, the scanning thread sat in read() unlocked; another
 * thread's fgets took the lock and made a read of its own into the same buffer. When the
 * peer sent "12\nab\n", either read got it: the fgets returned the scan's "12\n" (and the
 * scan then waited for more), or the scan got it and the fgets, still inside its read
 * while the rest of the line sat in the shared buffer, was cut by the read timeout.
 * The sequence: one thread blocks in fscanf("%d"); the main thread calls fgets; the peer
 * sends "12\nab\n"; natively the scan gets 12 and the fgets the "\n" after it, every time.
 */
#include "regress.h"

static FILE *stream;
static int scanned = -1, scan_rc = -99, peer;
static atomic_int scan_tid, main_tid;

/* Until thread *tid is known and blocked in the kernel (5 s at most). */
static void await_blocked(atomic_int *tid, const char *who)
{
	for (int ms = 0; !(atomic_load(tid) != 0 && tbr_thread_sleeping(atomic_load(tid))); ms++) {
		TBR_CHECK(ms < 5000, "%s never blocked", who);
		tbt_sleep_ms(1);
	}
}

static void *scanner(void *arg)
{
	(void)arg;
	atomic_store(&scan_tid, (int)syscall(SYS_gettid));
	scan_rc = fscanf(stream, "%d", &scanned);
	return NULL;
}

static void *late_peer(void *arg)
{
	(void)arg;
	/* The main thread's fgets is blocked: natively on the FILE the scan holds. */
	await_blocked(&main_tid, "the main thread's fgets");
	if (write(peer, "12\nab\n", 6) != 6)
		perror("write");
	return NULL;
}

int main(int argc, char **argv)
{
	int lfd, port;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=2s", NULL);
	atomic_store(&main_tid, (int)syscall(SYS_gettid));
	lfd = tbr_listen(&port);
	for (int i = 0; i < 5; i++) {
		int sock = tbr_connect(port);
		char buf[64], *got;
		pthread_t ts, tp;

		peer = accept(lfd, NULL, NULL);
		TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
		stream = fdopen(sock, "r");
		TBR_CHECK(stream != NULL, "fdopen: %s", strerror(errno));
		scanned = -1;
		atomic_store(&scan_tid, 0);
		TBR_CHECK(pthread_create(&ts, NULL, scanner, NULL) == 0, "pthread_create");
		await_blocked(&scan_tid, "the scan"); /* in its read: natively holding the FILE */
		TBR_CHECK(pthread_create(&tp, NULL, late_peer, NULL) == 0, "pthread_create");
		got = fgets(buf, sizeof(buf), stream);
		pthread_join(ts, NULL);
		pthread_join(tp, NULL);
		TBR_CHECK(scan_rc == 1 && scanned == 12, "round %d: the scan returned %d (%d)", i,
			  scan_rc, scanned);
		TBR_CHECK(got != NULL && strcmp(buf, "\n") == 0,
			  "round %d: fgets returned %s (errno %s)", i, got != NULL ? buf : "NULL",
			  tbt_errno_name(errno));
		fclose(stream);
		close(peer);
	}
	close(lfd);
	return 0;
}
