/* stdio_cancel_lock.c - a reader thread cancelled in fgets on a socket FILE left the
 * FILE locked: every later use of the stream, fclose included, hung.
 *
 * What happened: on a FILE over a governed socket, the stdio hooks (fgets, getline,
 * getdelim, fread, fgetc) take the FILE's lock with flockfile and refill the buffer with
 * reads of their own - cancellation points. glibc's own fgets holds its lock through
 * _IO_acquire_lock, whose cleanup releases it when the thread is cancelled inside; the
 * hooks had no such cleanup, so pthread_cancel of a thread blocked in fgets (a program
 * that stops its reader thread at shutdown) unwound past the hook with the recursive lock
 * still owned by a thread that no longer exists. The next fgets, fclose or fflush of the
 * stream from any other thread then waited for ever.
 * The sequence, for each of fgets, getline, fread and fgetc: a thread blocks reading a
 * silent peer; it is cancelled and joined; the peer sends a line; the main thread's fgets
 * must return it (natively it does at once).
 */
#include "regress.h"

static FILE *stream;
static int how;
static atomic_int reader_tid;

static void *reader(void *arg)
{
	char buf[64], *line = NULL;
	size_t cap = 0;

	(void)arg;
	atomic_store(&reader_tid, (int)syscall(SYS_gettid));
	switch (how) {
	case 0:
		(void)!fgets(buf, sizeof(buf), stream);
		break;
	case 1:
		(void)!getline(&line, &cap, stream);
		break;
	case 2:
		(void)!fread(buf, 1, 10, stream);
		break;
	default:
		(void)!fgetc(stream);
		break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "fgets", "getline", "fread", "fgetc" };
	int lfd, port;

	const char *pre = getenv("TBR_PRELOAD");

	(void)argc;
	/* ASan cannot follow a cancellation's unwinding through instrumented frames: the
	 * shadow of the frames unwound stays poisoned, and its own __asan_handle_no_return,
	 * called before the unwinding goes on from the cleanup, reports a stack overflow
	 * there (GCC 12; the cleanup attribute form, -fexceptions, reports the same). */
	if (pre != NULL && strstr(pre, "libasan") != NULL)
		tbr_skip("AddressSanitizer reports its own false stack overflow when a "
			 "cancellation unwinds through instrumented frames");
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=30s", NULL);
	lfd = tbr_listen(&port);
	for (how = 0; how < 4; how++) {
		int sock = tbr_connect(port), peer = accept(lfd, NULL, NULL);
		char buf[64], *got;
		pthread_t t;

		TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
		stream = fdopen(sock, "r");
		TBR_CHECK(stream != NULL, "fdopen: %s", strerror(errno));
		atomic_store(&reader_tid, 0);
		TBR_CHECK(pthread_create(&t, NULL, reader, NULL) == 0, "pthread_create");
		/* Cancelled only once blocked in its refill's read, the FILE locked. */
		for (int ms = 0; !(atomic_load(&reader_tid) != 0 &&
				   tbr_thread_sleeping(atomic_load(&reader_tid))); ms++) {
			TBR_CHECK(ms < 5000, "the %s reader never blocked", names[how]);
			tbt_sleep_ms(1);
		}
		pthread_cancel(t);
		pthread_join(t, NULL);
		TBR_CHECK(write(peer, "7\n", 2) == 2, "write: %s", strerror(errno));
		tbr_hang_guard(5, "fgets hangs: the FILE stays locked by the cancelled reader");
		got = fgets(buf, sizeof(buf), stream);
		alarm(0);
		TBR_CHECK(got != NULL && strcmp(buf, "7\n") == 0, "after a cancelled %s: %s",
			  names[how], got != NULL ? buf : "NULL");
		fclose(stream);
		close(peer);
	}
	close(lfd);
	return 0;
}
