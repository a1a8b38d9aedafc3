/* stdio_write_lock_wait.c - a thread whose fputs waited for another thread's flockfile
 * was cut as a stalled upload, and the socket shut down under both threads.
 *
 * What happened: a program composes a message on a line-buffered socket FILE from one
 * thread under flockfile (putc_unlocked, fputs_unlocked), while a second thread's fputs on
 * the same stream waits for that lock, as glibc's fputs takes it. Natively the second
 * fputs returns once the lock is given back, and the peer gets both lines. The governed
 * fputs (and fwrite, fputc, fprintf, fflush) began its write wait before calling glibc, so
 * the time spent waiting for the lock counted as the peer refusing the upload: past the
 * write timeout the watchdog cut the socket (phase=write), the fputs failed with
 * ETIMEDOUT and the error flag, and the first thread's line was never sent either. The
 * wait now begins once the hook holds the FILE's lock, as the read hooks always did.
 * The sequence: write timeout 300 ms; the main thread holds flockfile; a second thread's
 * fputs blocks on the lock; 1 s later the main thread writes its line and unlocks; the
 * second fputs must succeed and the peer must receive both lines.
 */
#include "regress.h"

static FILE *stream;
static atomic_int writer_tid;
static int put_rc, put_errno;

static void *writer(void *arg)
{
	(void)arg;
	atomic_store(&writer_tid, (int)syscall(SYS_gettid));
	errno = 0;
	put_rc = fputs("from B\n", stream);
	put_errno = errno;
	return NULL;
}

int main(int argc, char **argv)
{
	int lfd, port, sock, peer, tid;
	char got[64];
	size_t len = 0;
	ssize_t n;
	pthread_t t;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=300ms", NULL);
	tbr_hang_guard(15, "the fputs waiting for the FILE's lock never returned");
	lfd = tbr_listen(&port);
	sock = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	stream = fdopen(sock, "w");
	TBR_CHECK(stream != NULL, "fdopen: %s", strerror(errno));
	setvbuf(stream, NULL, _IOLBF, 0);

	flockfile(stream);
	TBR_CHECK(pthread_create(&t, NULL, writer, NULL) == 0, "pthread_create");
	for (int ms = 0; !((tid = atomic_load(&writer_tid)) != 0 && tbr_thread_in_futex(tid));
	     ms++) {
		TBR_CHECK(ms < 5000, "the second thread's fputs never waited for the lock");
		tbt_sleep_ms(1);
	}
	/* The lock held for more than three write timeouts: the program's own pace. */
	tbt_sleep_ms(1000);
	fputs_unlocked("from A\n", stream);
	funlockfile(stream);
	pthread_join(t, NULL);
	TBR_CHECK(put_rc >= 0, "the waiting fputs returned %d (errno %s)", put_rc,
		  tbt_errno_name(put_errno));
	TBR_CHECK(!ferror(stream), "the stream's error flag is set");
	fclose(stream);
	while (len < sizeof(got) - 1 && (n = read(peer, got + len, sizeof(got) - 1 - len)) > 0)
		len += (size_t)n;
	got[len] = '\0';
	TBR_CHECK(strcmp(got, "from A\nfrom B\n") == 0, "the peer received \"%s\"", got);
	close(peer);
	close(lfd);
	return 0;
}
