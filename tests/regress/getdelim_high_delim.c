/* getdelim_high_delim.c - getdelim on a socket FILE with a delimiter byte of 0x80 or
 * more read past it to the end of the stream.
 *
 * What happened: glibc's getdelim finds the delimiter with memchr, which takes its int
 * argument as an unsigned char: getdelim(&line, &n, sep, f) with `char sep = '\xff'` (the
 * int -1 where char is signed, as on x86) or any value above 255 stops at that byte. The
 * governed getdelim hands the delimiter to tb_stdio_take, where a negative delimiter means
 * "none" and a byte refilled by __uflow is compared with ==: on a governed stream the call
 * ran to EOF (one 8-byte "line" instead of 3 bytes) and set feof. Records separated by a
 * high byte (0xFE/0xFF framing, Latin-1 separators) were merged.
 * The sequence: the peer sends "ab\xff" "cd\nef" and closes; getdelim with (char)0xff must
 * return 3; getdelim with '\n' + 256 on "\ncd\n" must return 1 (its first byte is the
 * delimiter, which comes from the buffer's refill).
 */
#include "regress.h"

static FILE *open_with(int lfd, int port, const char *data, size_t n)
{
	int sock = tbr_connect(port), peer = accept(lfd, NULL, NULL);
	FILE *f;

	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(write(peer, data, n) == (ssize_t)n, "write: %s", strerror(errno));
	close(peer);
	f = fdopen(sock, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	return f;
}

int main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t r;
	int lfd, port;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=5s", NULL);
	lfd = tbr_listen(&port);

	f = open_with(lfd, port, "ab\xff" "cd\nef", 8);
	r = getdelim(&line, &cap, (char)0xff, f);
	TBR_CHECK(r == 3 && memcmp(line, "ab\xff", 3) == 0 && !feof(f),
		  "getdelim((char)0xff) returned %zd, feof %d (natively 3, 0)", r, feof(f));
	fclose(f);

	f = open_with(lfd, port, "\ncd\n", 4);
	r = getdelim(&line, &cap, '\n' + 256, f);
	TBR_CHECK(r == 1, "getdelim('\\n' + 256) returned %zd (natively 1)", r);
	fclose(f);

	free(line);
	close(lfd);
	return 0;
}
