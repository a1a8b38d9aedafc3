/* stdio_scanf_no_input.c - fscanf with a format that reads nothing waited for the peer:
 * cut at the first-byte timeout, or blocked for ever with no read limit set.
 *
 * What happened: fscanf(f, "%n", &n) stores how many bytes the scan has read - none - and
 * returns 0 at once natively, whatever the peer does. The governed fscanf first fills an
 * empty buffer with a read of its own, so that the scan's first read is a wait of its own;
 * it did so for every format. On a connection whose server speaks only after the
 * client's request, the call blocked on the silent socket: with a first-byte timeout it
 * failed after it with ETIMEDOUT and the error flag (and the next fscanf, after the
 * request was sent, failed too), with only a connect timeout set it never returned. A
 * format made of %n directives alone now goes to glibc's scan without that read.
 * The sequence: first-byte timeout 300 ms; the server waits for a request; fscanf "%n"
 * must return 0 with n 0 well inside the limit, the stream clean; then the request is
 * written and fscanf "%d" reads the answer.
 */
#include "regress.h"

static void *server(void *arg)
{
	int peer = *(int *)arg;
	char b[16];

	if (read(peer, b, sizeof(b)) > 0 && write(peer, "42\n", 3) != 3)
		perror("write");
	return NULL;
}

int main(int argc, char **argv)
{
	int lfd, port, sock, peer, n = -1, v = 0, r;
	double t0, ms;
	pthread_t t;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_FIRST_BYTE_TIMEOUT=300ms", NULL);
	tbr_hang_guard(15, "fscanf(\"%n\") waited for the silent peer");
	lfd = tbr_listen(&port);
	sock = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(pthread_create(&t, NULL, server, &peer) == 0, "pthread_create");
	f = fdopen(sock, "r+");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));

	t0 = tbt_now_ms();
	errno = 0;
	r = fscanf(f, "%n", &n);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(r == 0 && n == 0, "fscanf(\"%%n\") returned %d, n %d (errno %s) after %.0f ms",
		  r, n, tbt_errno_name(errno), ms);
	TBR_CHECK(ms < 250, "fscanf(\"%%n\") took %.0f ms", ms);
	TBR_CHECK(!ferror(f) && !feof(f), "ferror %d feof %d", ferror(f), feof(f));

	TBR_CHECK(write(sock, "GET\n", 4) == 4, "write: %s", strerror(errno));
	r = fscanf(f, "%d", &v);
	TBR_CHECK(r == 1 && v == 42, "fscanf(\"%%d\") returned %d, %d (errno %s)", r, v,
		  tbt_errno_name(errno));
	pthread_join(t, NULL);
	fclose(f);
	close(peer);
	close(lfd);
	return 0;
}
