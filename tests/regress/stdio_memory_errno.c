/* stdio_memory_errno.c - a stdio call on a memory stream that succeeded left errno EBADF.
 *
 * What happened (the musl build): every stdio hook asks fileno(f) whether the FILE is over
 * a governed socket. A memory stream (fmemopen, open_memstream) has no fd, and musl's
 * fileno says so by returning -1 with errno EBADF; the hook then passed the call through
 * to musl, which succeeded - and the program's errno was EBADF, where natively a successful
 * call leaves it as it was. A program that reads errno after a call that reports no error
 * (or sets errno to 0 before a strtol-style sequence) saw a failure that never happened.
 * The sequence: errno set to EINTR as a marker; each hooked reader and writer on a
 * memory stream succeeds; errno must still be EINTR. glibc's fileno of such a stream
 * returns -1 without touching errno, and the glibc build reads _fileno directly: there
 * this program is a guard. Built and run under the musl build by tests/e2e/test_musl.py.
 */
#include "regress.h"

/* Each call must succeed and leave the marker in errno. */
#define KEEPS_ERRNO(what, ok)                                                               \
	do {                                                                                \
		errno = EINTR;                                                              \
		TBR_CHECK((ok), "%s failed", what);                                         \
		TBR_CHECK(errno == EINTR, "%s left errno %s", what, tbt_errno_name(errno)); \
	} while (0)

static int scan(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfscanf(f, fmt, ap);
	va_end(ap);
	return r;
}

static int print(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

int main(int argc, char **argv)
{
	static char text[] = "one\ntwo\nthree\nfour\nfive 5\nsix 6\nseven 7\neight\n";
	char out[4096], line[64], *got = NULL, word[16];
	size_t cap = 0;
	int n, lfd, port, sock;
	FILE *r, *w;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	/* A governed socket first: until the process has one, the hooks pass every FILE
	 * through without asking fileno at all. */
	lfd = tbr_listen(&port);
	sock = tbr_connect(port);
	r = fmemopen(text, sizeof(text) - 1, "r");
	w = fmemopen(out, sizeof(out), "w");
	TBR_CHECK(r != NULL && w != NULL, "fmemopen: %s", strerror(errno));

	KEEPS_ERRNO("fgets", fgets(line, sizeof(line), r) != NULL);
	KEEPS_ERRNO("fgets_unlocked", fgets_unlocked(line, sizeof(line), r) != NULL);
	KEEPS_ERRNO("fgetc", fgetc(r) == 't');
	KEEPS_ERRNO("getc", getc(r) == 'h');
	KEEPS_ERRNO("getc_unlocked", getc_unlocked(r) == 'r');
	KEEPS_ERRNO("fgetc_unlocked", fgetc_unlocked(r) == 'e');
	KEEPS_ERRNO("fread", fread(line, 1, 2, r) == 2);
	KEEPS_ERRNO("fread_unlocked", fread_unlocked(line, 1, 5, r) == 5);
	KEEPS_ERRNO("getline", getline(&got, &cap, r) == 7);
	KEEPS_ERRNO("getdelim", getdelim(&got, &cap, '\n', r) == 6);
	KEEPS_ERRNO("fscanf", fscanf(r, "%15s %d", word, &n) == 2 && n == 7);
	KEEPS_ERRNO("vfscanf", scan(r, "%15s", word) == 1);

	KEEPS_ERRNO("fwrite", fwrite("ab", 1, 2, w) == 2);
	KEEPS_ERRNO("fwrite_unlocked", fwrite_unlocked("cd", 1, 2, w) == 2);
	KEEPS_ERRNO("fputs", fputs("ef", w) != EOF);
	KEEPS_ERRNO("fputs_unlocked", fputs_unlocked("gh", w) != EOF);
	KEEPS_ERRNO("fputc", fputc('i', w) == 'i');
	KEEPS_ERRNO("putc", putc('j', w) == 'j');
	KEEPS_ERRNO("fputc_unlocked", fputc_unlocked('k', w) == 'k');
	KEEPS_ERRNO("putc_unlocked", putc_unlocked('l', w) == 'l');
	KEEPS_ERRNO("fprintf", fprintf(w, "%s%d", "m", 1) == 2);
	KEEPS_ERRNO("vfprintf", print(w, "%c", 'n') == 1);
	KEEPS_ERRNO("fflush", fflush(w) == 0);
	KEEPS_ERRNO("fflush_unlocked", fflush_unlocked(w) == 0);
	TBR_CHECK(strcmp(out, "abcdefghijklm1n") == 0, "wrote \"%s\"", out);
	free(got);
	fclose(r);
	fclose(w);
	close(sock);
	close(lfd);
	return 0;
}
