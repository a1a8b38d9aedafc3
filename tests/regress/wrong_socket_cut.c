/* wrong_socket_cut.c - an expiry shut down an fd number that already named something else.
 *
 * What happened: a wait that begins after its call's deadline fails at once, and the
 * thread expired the socket through its own fd - without the guard the watchdog uses
 * (`busy`, then "does this fd still name this socket?") and with the log line written
 * between marking the socket and shutting it down. When another thread closed that fd and
 * the number was reused at once, shutdown() landed on the new object: 8 times in 8,000
 * runs, an unrelated connection of the program was cut.
 * The sequence, made certain here with a log sink that blocks (a full FIFO): a thread
 * connects (deadline 50 ms), lets the deadline pass and reads; it blocks writing the expiry's
 * log line; the main thread closes the fd and creates a socketpair, which gets the same
 * number; the log is drained -> the socketpair must not be shut down.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "regress.h"

#define FIFO_FD 100

static int port;
static int conn_fd = -1;
static pid_t reader_tid;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t connected = PTHREAD_COND_INITIALIZER;

static void *late_reader(void *arg)
{
	char c;

	(void)arg;
	pthread_mutex_lock(&lock);
	reader_tid = (pid_t)syscall(SYS_gettid);
	conn_fd = tbr_connect(port);
	pthread_cond_signal(&connected);
	pthread_mutex_unlock(&lock);
	tbt_sleep_ms(60); /* past the call's deadline */
	(void)read(conn_fd, &c, 1);
	return NULL;
}

/* True once thread tid sits in write(2) (the log line), within 3 s. */
static bool blocked_in_write(pid_t tid)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(path, "r");
		long nr = -1;

		if (f != NULL) {
			if (fgets(buf, sizeof(buf), f) != NULL)
				nr = strtol(buf, NULL, 10);
			fclose(f);
		}
		if (nr == SYS_write)
			return true;
		tbt_sleep_ms(10);
	}
	return false;
}

/* Before the library loads: TIMEBOX_LOG names a FIFO that is already full. */
static const char *full_fifo(void)
{
	static char path[64], supp[80], tsan[128];
	char junk[4096];
	int w;

	snprintf(path, sizeof(path), "/tmp/tb_wrong_cut_%d", (int)getpid());
	if (getenv("TBR_CHILD") != NULL)
		return getenv("TBR_FIFO");
	unlink(path);
	TBR_CHECK(mkfifo(path, 0600) == 0, "mkfifo: %s", strerror(errno));
	TBR_CHECK(dup2(open(path, O_RDONLY | O_NONBLOCK), FIFO_FD) == FIFO_FD, "open fifo");
	w = open(path, O_WRONLY | O_NONBLOCK);
	TBR_CHECK(w >= 0, "open fifo for writing: %s", strerror(errno));
	memset(junk, 'j', sizeof(junk));
	while (write(w, junk, sizeof(junk)) > 0)
		;
	while (write(w, junk, 1) > 0)
		;
	close(w);
	setenv("TBR_FIFO", path, 1);
	/* Under ThreadSanitizer: closing the fd another thread is reading is this story's
	 * very sequence, not a defect of the library. */
	snprintf(supp, sizeof(supp), "%s.supp", path);
	w = open(supp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	TBR_CHECK(w >= 0 && write(w, "race:late_reader\n", 18) == 18, "suppressions");
	close(w);
	snprintf(tsan, sizeof(tsan), "TSAN_OPTIONS=suppressions=%s", supp);
	putenv(tsan);
	return path;
}

int main(int argc, char **argv)
{
	static char logenv[128];
	char buf[4096];
	int lfd, sp[2];
	pthread_t t;
	const char *fifo;
	bool blocked;

	(void)argc;
	fifo = full_fifo();
	snprintf(logenv, sizeof(logenv), "TIMEBOX_LOG=%s", fifo);
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=50ms", logenv, NULL);
	unlink(fifo);
	snprintf(buf, sizeof(buf), "%s.supp", fifo);
	unlink(buf);
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, late_reader, NULL) == 0, "pthread_create");
	pthread_mutex_lock(&lock);
	while (conn_fd < 0)
		pthread_cond_wait(&connected, &lock);
	pthread_mutex_unlock(&lock);
	blocked = blocked_in_write(reader_tid);
	if (blocked) {
		/* Pre-fix: the socket is marked, its cut is still to come. */
		close(conn_fd);
		TBR_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	}
	fcntl(FIFO_FD, F_SETFL, O_NONBLOCK);
	while (!blocked && read(FIFO_FD, buf, sizeof(buf)) > 0)
		;
	if (blocked) {
		/* Let the log line through, then wait for the reader to finish. */
		while (read(FIFO_FD, buf, sizeof(buf)) > 0)
			;
	}
	pthread_join(t, NULL);
	if (!blocked) {
		/* The cut came before the log line (and the log did not block the reader):
		 * the closed number cannot be cut any more. */
		close(conn_fd);
		TBR_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
	}
	printf("reader %s in the log write; the socketpair got fd %d (the socket's was %d)\n",
	       blocked ? "blocked" : "did not block", sp[0], conn_fd);
	if (sp[0] != conn_fd && sp[1] != conn_fd)
		tbr_skip("the socketpair did not get the closed socket's number");
	errno = 0;
	TBR_CHECK(send(conn_fd, "z", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1,
		  "the new object behind fd %d was shut down: %s", conn_fd, tbt_errno_name(errno));
	close(sp[0]);
	close(sp[1]);
	close(lfd);
	return 0;
}
