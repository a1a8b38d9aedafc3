/* stdio_cut_sigpipe.c - a FILE * write cut by its write timeout killed the program.
 *
 * What happened: glibc's stdio writes with its own internal write(), which cannot ask for
 * MSG_NOSIGNAL. When the write phase expired, the cut (shutdown of the socket) made that
 * blocked write fail with EPIPE, and the kernel raised SIGPIPE: a program that had not
 * ignored SIGPIPE - the default - died of a timeout (exit by signal 13) instead of seeing
 * fflush fail with ETIMEDOUT. The sequence: SIGPIPE left at its default; connect (write
 * timeout 400 ms); the peer never reads; fprintf + fflush 64 KiB lines until a flush blocks
 * -> it must fail with ETIMEDOUT, ferror set, the process alive, no SIGPIPE left pending.
 * A genuine EPIPE (the peer closed) still raises SIGPIPE, as without timebox.
 */
#include <signal.h>

#include "regress.h"

static volatile sig_atomic_t pipes;

static void on_pipe(int sig)
{
	(void)sig;
	pipes++;
}

int main(int argc, char **argv)
{
	static char chunk[65536];
	int port, lfd, fd, peer, r = 0, i;
	double t0 = 0, ms;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=400ms", NULL);
	tbr_hang_guard(15, "the flush to a peer that never reads never returned");
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	f = fdopen(fd, "w");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	memset(chunk, 'x', sizeof(chunk) - 2);
	chunk[sizeof(chunk) - 2] = '\n';
	/* Loopback buffers hold a few MiB at most: 512 chunks (32 MiB) must block. */
	for (i = 0; i < 512 && r >= 0; i++) {
		t0 = tbt_now_ms();
		errno = 0;
		r = fprintf(f, "%s", chunk);
		if (r >= 0)
			r = fflush(f) == 0 ? 0 : -1;
	}
	ms = tbt_now_ms() - t0;
	TBR_CHECK(r < 0 && errno == ETIMEDOUT, "write %d: r %d errno %s", i, r,
		  tbt_errno_name(errno));
	TBR_CHECK(ferror(f), "ferror not set");
	TBR_CHECK(ms >= 400 && ms < 2500, "cut after %.1f ms (limit 400)", ms);
	{
		sigset_t pending;

		TBR_CHECK(sigpending(&pending) == 0 && !sigismember(&pending, SIGPIPE),
			  "a SIGPIPE is left pending");
	}
	fclose(f);
	close(peer);

	/* A genuine EPIPE: the peer closed; SIGPIPE is raised as natively (caught here). */
	{
		struct sigaction sa = { .sa_handler = on_pipe };
		FILE *g;

		sigaction(SIGPIPE, &sa, NULL);
		fd = tbr_connect(port);
		peer = accept(lfd, NULL, NULL);
		TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
		close(peer);
		g = fdopen(fd, "w");
		setvbuf(g, NULL, _IONBF, 0);
		for (i = 0; i < 50 && pipes == 0; i++) {
			fputs("x\n", g);
			tbt_sleep_ms(10);
		}
		TBR_CHECK(pipes > 0, "no SIGPIPE after the peer closed");
		fclose(g);
	}
	close(lfd);
	return 0;
}
