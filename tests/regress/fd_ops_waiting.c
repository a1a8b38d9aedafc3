/* fd_ops_waiting.c - dup2(fd, fd), and close/dup2/close_range of an fd another thread reads.
 *
 * What is pinned here: dup2(fd, fd) on a governed fd returns fd and changes nothing (the
 * socket stays governed, its one gate slot is not counted twice or given back); and closing
 * an fd - by close, dup2 over it, or close_range - while another thread is blocked reading
 * it returns at once, as natively, gives the gate slot back, and the reader returns when
 * the peer closes (timebox must not wait for the reader, nor crash when it wakes on a
 * socket that is gone).
 * Settings: max_conns 1, acquire 300 ms, read 500 ms. Under ThreadSanitizer the program's
 * own close of an fd another thread reads is the very race this case is about: it is
 * suppressed by function name, and any race inside the library is still reported.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>

#include "regress.h"

static int port, lfd;

struct reader {
	int fd;
	ssize_t r;
	int err;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	char c;

	rd->r = read(rd->fd, &c, 1);
	rd->err = errno;
	return NULL;
}

/* Connects; returns the client fd and the server's end in *peer. */
static int pair(int *peer)
{
	int fd = tbr_connect(port);

	*peer = accept(lfd, NULL, NULL);
	TBR_CHECK(*peer >= 0, "accept: %s", strerror(errno));
	return fd;
}

enum how { BY_CLOSE, BY_DUP2, BY_CLOSE_RANGE };

static void close_under_reader(enum how how, bool timed)
{
	static const char *names[] = { "close", "dup2", "close_range" };
	struct reader rd = { 0 };
	pthread_t th;
	int peer, other_peer, other, fd = pair(&peer);
	double t0;

	rd.fd = fd;
	pthread_create(&th, NULL, reader_main, &rd);
	tbt_sleep_ms(100); /* let it block (if it has not, the case is only weaker) */
	t0 = tbt_now_ms();
	if (how == BY_CLOSE) {
		TBR_CHECK(close(fd) == 0, "close: %s", strerror(errno));
	} else if (how == BY_DUP2) {
		other = open("/dev/null", O_RDONLY);
		TBR_CHECK(dup2(other, fd) == fd, "dup2: %s", strerror(errno));
		close(other);
	} else {
		TBR_CHECK(close_range((unsigned)fd, (unsigned)fd, 0) == 0, "close_range: %s",
			  strerror(errno));
	}
	TBR_CHECK(!timed || tbt_now_ms() - t0 < 300, "%s under a reader took %.0f ms", names[how],
		  tbt_now_ms() - t0);
	/* The slot came back: another connect gets it at once. */
	other = pair(&other_peer);
	close(other);
	close(other_peer);
	close(peer); /* the reader sees the end of the stream */
	pthread_join(th, NULL);
	if (how == BY_DUP2)
		close(fd);
	fprintf(stderr, "%s under a reader: reader got %zd (%s)\n", names[how], rd.r,
		tbt_errno_name(rd.r < 0 ? rd.err : 0));
}

int main(int argc, char **argv)
{
	static char tsan_env[256];
	char supp[] = "/tmp/tb_fd_ops_supp_XXXXXX";
	int fd, peer, other;
	double t0, took;
	char c;
	ssize_t r;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		static const char rule[] = "race:close_under_reader\n";
		int sfd = mkstemp(supp);

		TBR_CHECK(sfd >= 0, "mkstemp: %s", strerror(errno));
		TBR_CHECK(write(sfd, rule, sizeof(rule) - 1) == (ssize_t)sizeof(rule) - 1, "write");
		close(sfd);
		snprintf(tsan_env, sizeof(tsan_env), "TSAN_OPTIONS=suppressions=%s", supp);
	}
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=500ms", "TIMEBOX_MAX_CONNS=1",
			 "TIMEBOX_ACQUIRE_TIMEOUT=300ms", tsan_env, NULL);
	if (getenv("TSAN_OPTIONS") != NULL && strstr(getenv("TSAN_OPTIONS"), "/tmp/tb_fd_ops_supp_"))
		unlink(strstr(getenv("TSAN_OPTIONS"), "/tmp/tb_fd_ops_supp_"));
	lfd = tbr_listen(&port);

	fd = pair(&peer);
	TBR_CHECK(dup2(fd, fd) == fd, "dup2(fd, fd): %s", strerror(errno));
	t0 = tbt_now_ms();
	r = read(fd, &c, 1);
	took = tbt_now_ms() - t0;
	TBR_CHECK(r == -1 && errno == ETIMEDOUT && took >= 500 && took < 2000,
		  "after dup2(fd, fd) the read returned %zd errno %s after %.0f ms", r,
		  tbt_errno_name(errno), took);
	close(fd);
	close(peer);
	other = pair(&peer); /* one close gave the one slot back */
	close(other);
	close(peer);

	/* Under ThreadSanitizer the program's close races the reader on purpose, and the first
	 * report of each call site is checked against the suppression by symbolizing its stack
	 * inside that close: 300-400 ms (strace: some 3,000 mmaps between the sleep and the
	 * close), which failed the bound about one run in seven. Each case is run once untimed
	 * first; a suppression that fired is then matched by address, at once. */
	if (getenv("TB_SANITIZE") != NULL && strcmp(getenv("TB_SANITIZE"), "thread") == 0)
		for (enum how h = BY_CLOSE; h <= BY_CLOSE_RANGE; h++)
			close_under_reader(h, false);
	close_under_reader(BY_CLOSE, true);
	close_under_reader(BY_DUP2, true);
	close_under_reader(BY_CLOSE_RANGE, true);
	close(lfd);
	return 0;
}
