/* stdio_ungetc_buffered_cut.c - a program that pushed a byte back with ungetc was cut
 * reading the rest of a response its FILE already held.
 *
 * What happened: a read the FILE's buffer can serve is no wait and is never cut, however
 * long the program took - the hooks check that the buffer holds bytes (_IO_read_ptr short
 * of _IO_read_end) before they begin a wait. But ungetc of a byte other than the one just
 * read puts it in glibc's ungetc area, and while the FILE reads that area the read
 * pointers are the area's: once the pushed-back byte was read again they showed nothing
 * held, although the buffer behind still held the rest of the response (glibc keeps it in
 * _IO_save_base.._IO_save_end and switches back to it without a read). The next getc,
 * fgets, fread or fscanf began a wait, and a call whose deadline had passed meanwhile was
 * cut on the spot: NULL or EOF, ETIMEDOUT, the error flag, on bytes that had arrived long
 * before. The bytes behind an ungetc area now count as held.
 * The sequence, once for each of getc, fgets, fread and fscanf: call deadline 300 ms; the
 * peer sends two lines at once and stays open; the program reads one byte, pushes back
 * another, reads it again, then takes 600 ms before reading the rest, which it must get.
 */
#include <poll.h>
#include <stdbool.h>

#include "regress.h"

static const char response[] = "AB line one\nline two\n";

/* The rest after "Z", read by way `how`; true when it is "B line one\n". */
static bool read_rest(FILE *f, int how, char *buf, size_t len)
{
	int n = 0;

	switch (how) {
	case 0:
		return getc(f) == 'B';
	case 1:
		return fgets(buf, (int)len, f) != NULL && strcmp(buf, "B line one\n") == 0;
	case 2:
		return fread(buf, 1, 11, f) == 11 && memcmp(buf, "B line one\n", 11) == 0;
	default:
		return fscanf(f, "B line %3s%n", buf, &n) == 1 && strcmp(buf, "one") == 0 &&
		       n == 10;
	}
}

int main(int argc, char **argv)
{
	static const char *const ways[] = { "getc", "fgets", "fread", "fscanf" };
	int lfd, port, peers[4];
	char buf[64];

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DEADLINE=300ms", NULL);
	tbr_hang_guard(20, "a read of buffered bytes never returned");
	lfd = tbr_listen(&port);
	for (int how = 0; how < 4; how++) {
		int sock = tbr_connect(port);
		struct pollfd p = { .fd = sock, .events = POLLIN };
		FILE *f;

		peers[how] = accept(lfd, NULL, NULL);
		TBR_CHECK(peers[how] >= 0, "accept: %s", strerror(errno));
		TBR_CHECK(write(peers[how], response, sizeof(response) - 1) ==
			  (ssize_t)sizeof(response) - 1, "write: %s", strerror(errno));
		TBR_CHECK(poll(&p, 1, 5000) == 1, "the response never arrived");
		f = fdopen(sock, "r");
		TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
		TBR_CHECK(getc(f) == 'A', "%s: the first byte", ways[how]);
		TBR_CHECK(f->_IO_read_end - f->_IO_read_ptr == (ssize_t)sizeof(response) - 2,
			  "%s: the response came in pieces: nothing to show", ways[how]);
		TBR_CHECK(ungetc('Z', f) == 'Z', "%s: ungetc", ways[how]);
		TBR_CHECK(getc(f) == 'Z', "%s: the pushed-back byte", ways[how]);
		/* The program's own pace: past the call's deadline, every byte already here. */
		tbt_sleep_ms(600);
		errno = 0;
		TBR_CHECK(read_rest(f, how, buf, sizeof(buf)), "%s of bytes the FILE holds failed "
			  "(errno %s, ferror %d)", ways[how], tbt_errno_name(errno), ferror(f));
		TBR_CHECK(!ferror(f), "%s: the error flag is set", ways[how]);
		fclose(f);
	}
	for (int how = 0; how < 4; how++)
		close(peers[how]);
	close(lfd);
	return 0;
}
