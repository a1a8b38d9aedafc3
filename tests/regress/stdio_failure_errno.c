/* stdio_failure_errno.c - a stdio call on a socket FILE that failed said errno 0 once the
 * stream's error flag was already set, or when the call set no flag at all.
 *
 * What happened: the governed stdio hooks told the transfer underneath whether the call
 * failed by looking for an error flag the call had newly set. glibc sets the flag only
 * when it is clear: a program that ignores SIGPIPE and writes on after the peer closed
 * gets -1 with errno EPIPE from every fputs, but only the first one sets the flag. And
 * some failures set no flag at all: fprintf of a wide string the locale cannot represent
 * fails with EILSEQ before anything is written. Any such failure was taken for the peer's
 * end of file, whose ending restores the errno from before the call: fputs, fprintf and
 * fwrite returned their failure with errno 0, as did getc and fread on a non-blocking
 * socket whose error flag an earlier EAGAIN had set (natively EAGAIN). A read failure
 * taken for the end of file also told the framing that an EOF-delimited body had ended,
 * and the breaker that the peer had closed. Now a failed write is always a failure; a
 * failed read is the peer's EOF only when the EOF flag says so; a failure the stream does
 * not show is the call's own and tells the call budget nothing; errno is the call's.
 * The sequence: an unbuffered stream to a peer that closed, SIGPIPE ignored: fputs three
 * times, fprintf, fwrite, each -1 (0) with EPIPE; an fprintf that fails with EILSEQ; a
 * non-blocking stream from a silent peer: getc and fread twice, each EOF (0) with EAGAIN.
 */
#include <wchar.h>

#include "regress.h"

/* The call must fail and leave errno `want`. */
#define FAILS_WITH(what, failed, want)                                                      \
	do {                                                                                \
		errno = 0;                                                                  \
		TBR_CHECK((failed), "%s did not fail", what);                               \
		TBR_CHECK(errno == (want), "%s failed with errno %s, natively %s", what,    \
			  tbt_errno_name(errno), tbt_errno_name(want));                     \
	} while (0)

int main(int argc, char **argv)
{
	int lfd, port, sock, peer;
	char buf[16];
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_WRITE_TIMEOUT=2s", "TIMEBOX_READ_TIMEOUT=2s", NULL);
	tbr_hang_guard(15, "a failing stdio call never returned");
	signal(SIGPIPE, SIG_IGN);
	lfd = tbr_listen(&port);

	/* Writes after the peer closed: the first EPIPE sets the error flag. */
	sock = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	close(peer);
	f = fdopen(sock, "w");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	setvbuf(f, NULL, _IONBF, 0);
	/* The peer's RST answers the first write; until then a write may still go out. */
	for (int i = 0; i < 100 && fputs("hello\n", f) != EOF; i++)
		tbt_sleep_ms(10);
	TBR_CHECK(ferror(f), "writes to a closed peer never failed");
	FAILS_WITH("fputs", fputs("hello\n", f) == EOF, EPIPE);
	FAILS_WITH("fputs again", fputs("hello\n", f) == EOF, EPIPE);
	FAILS_WITH("fprintf", fprintf(f, "x=%d\n", 1) < 0, EPIPE);
	FAILS_WITH("fwrite", fwrite("abc", 1, 3, f) == 0, EPIPE);
	fclose(f);

	/* A conversion the C locale refuses: nothing reaches the stream, no flag is set. */
	sock = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	f = fdopen(sock, "w");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	FAILS_WITH("fprintf %ls", fprintf(f, "name=%ls\n", L"caf\u00e9") < 0, EILSEQ);
	FAILS_WITH("fprintf %lc", fprintf(f, "%lc", (wint_t)0x20ac) < 0, EILSEQ);
	TBR_CHECK(!ferror(f), "the error flag is set");
	fclose(f);
	close(peer);

	/* A non-blocking socket whose peer is silent: EAGAIN, then EAGAIN with the flag set. */
	sock = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	fcntl(sock, F_SETFL, O_NONBLOCK);
	f = fdopen(sock, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	for (int round = 0; round < 2; round++) {
		FAILS_WITH("getc", getc(f) == EOF, EAGAIN);
		FAILS_WITH("fread", fread(buf, 1, sizeof(buf), f) == 0, EAGAIN);
		TBR_CHECK(ferror(f) && !feof(f), "round %d: ferror %d feof %d", round, ferror(f),
			  feof(f));
	}
	fclose(f);
	close(peer);
	close(lfd);
	return 0;
}
