/* sendfile_stalled.c - a sendfile into a governed socket whose peer stopped reading was never cut.
 *
 * What happened: sendfile(2) was not interposed. A program that uploads a file with it
 * (Python's socket.sendfile, a proxy relaying a cached body) to a downstream that stalls
 * blocked in the kernel for ever, whatever write_timeout or deadline said: the write phase
 * covered write, send, writev and sendmsg only. sendfile is a send made by the kernel from a
 * file, so it now waits under the write phase and the call's deadline like them. It takes no
 * MSG_NOSIGNAL, and the cut (a shutdown) fails it with EPIPE: SIGPIPE is held around it, so
 * that a program with SIGPIPE's default action sees the timeout instead of dying of it.
 * (1) A peer that accepts and never reads, TIMEBOX_WRITE_TIMEOUT=300ms, SIGPIPE left at its
 * default: sendfile of a 64 MB file in a loop must fail with ETIMEDOUT, its blocked call not cut
 * before 300 ms, all within 10 s (before: no return at all; the alarm fails the story after 20 s). (2) What the
 * kernel does stays as natively: on a socket the program shut for writing itself, sendfile
 * fails with EPIPE and raises one SIGPIPE. (3) A healthy peer receives every byte in order.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#include "regress.h"

#define BIG (64L << 20)
#define HEALTHY (4 << 20)

static volatile sig_atomic_t pipes;

static void on_pipe(int sig)
{
	(void)sig;
	pipes++;
}

/* An unlinked file of n bytes: byte i is i * 7 mod 251. */
static int patterned_file(long n)
{
	char path[] = "/tmp/tbr-sendfile-XXXXXX", b[65536];
	int fd = mkstemp(path);

	TBR_CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	unlink(path);
	for (long at = 0; at < n; at += (long)sizeof(b)) {
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = (char)((at + (long)i) * 7 % 251);
		TBR_CHECK(write(fd, b, sizeof(b)) == (ssize_t)sizeof(b), "write: %s", strerror(errno));
	}
	return fd;
}

struct reader {
	int lfd;
	long got;
	int bad_at; /* -1: every byte as sent */
};

static void *read_all(void *arg)
{
	struct reader *rd = arg;
	int c = accept(rd->lfd, NULL, NULL);
	char b[65536];
	ssize_t n;

	rd->bad_at = -1;
	while (c >= 0 && (n = read(c, b, sizeof(b))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (b[i] != (char)((rd->got + i) * 7 % 251) && rd->bad_at < 0)
				rd->bad_at = (int)(rd->got + i);
		rd->got += n;
	}
	if (c >= 0)
		close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	int lport, lfd, fd, peer, file;
	double t0, took, longest = 0;
	struct reader rd = { 0 };
	pthread_t t;
	off_t off;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=300ms", "TIMEBOX_CONNECT_TIMEOUT=5s",
			 NULL);
	signal(SIGPIPE, SIG_DFL); /* a cut must not kill the program */
	lfd = tbr_listen(&lport);

	/* (1) the peer never reads (a sparse file: its bytes do not matter here) */
	file = patterned_file(0);
	TBR_CHECK(ftruncate(file, BIG) == 0, "ftruncate: %s", strerror(errno));
	fd = tbr_connect(lport);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	tbr_hang_guard(20, "a sendfile to a peer that never reads was not cut in 20 s");
	off = 0;
	t0 = tbt_now_ms();
	/* The call that blocks moves bytes until the buffers fill, then nothing: it must last
	 * write_timeout at least (the cut ends it, or the next call reports the cut). */
	do {
		double c0 = tbt_now_ms();

		r = sendfile(fd, file, &off, (size_t)(BIG - off));
		if (tbt_now_ms() - c0 > longest)
			longest = tbt_now_ms() - c0;
	} while (r > 0 && off < BIG);
	took = tbt_now_ms() - t0;
	alarm(0);
	printf("sendfile to a peer that never reads: %lld bytes moved, then %zd (%s) after %.0f ms "
	       "(the longest call %.0f ms)\n", (long long)off, r, r < 0 ? tbt_errno_name(errno) : "-",
	       took, longest);
	TBR_CHECK(r < 0 && errno == ETIMEDOUT, "the stalled sendfile ended with %zd (%s), want "
		  "ETIMEDOUT", r, r < 0 ? tbt_errno_name(errno) : "-");
	TBR_CHECK(longest >= 300, "the blocked call was cut after %.0f ms, before write_timeout "
		  "(300 ms)", longest);
	TBR_CHECK(took < 10000, "cut only after %.0f ms", took);
	close(fd);
	close(peer);

	/* (2) a genuine EPIPE raises SIGPIPE, as natively */
	signal(SIGPIPE, on_pipe);
	fd = tbr_connect(lport);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(shutdown(fd, SHUT_WR) == 0, "shutdown: %s", strerror(errno));
	off = 0;
	errno = 0;
	r = sendfile(fd, file, &off, 100);
	TBR_CHECK(r < 0 && errno == EPIPE, "sendfile on a socket shut for writing: %zd (%s), want "
		  "EPIPE", r, tbt_errno_name(errno));
	TBR_CHECK(pipes == 1, "%d SIGPIPE delivered, want 1 (as natively)", (int)pipes);
	close(fd);
	close(peer);
	close(file);

	/* (3) a healthy peer gets every byte */
	file = patterned_file(HEALTHY);
	rd.lfd = lfd;
	TBR_CHECK(pthread_create(&t, NULL, read_all, &rd) == 0, "pthread_create");
	fd = tbr_connect(lport);
	off = 0;
	while (off < HEALTHY) {
		r = sendfile(fd, file, &off, (size_t)(HEALTHY - off));
		TBR_CHECK(r > 0, "healthy sendfile: %zd (%s) at %lld", r, tbt_errno_name(errno),
			  (long long)off);
	}
	close(fd);
	pthread_join(t, NULL);
	TBR_CHECK(rd.got == HEALTHY && rd.bad_at < 0, "the peer got %ld of %d bytes, first wrong "
		  "at %d", rd.got, HEALTHY, rd.bad_at);
	close(file);
	close(lfd);
	return 0;
}
