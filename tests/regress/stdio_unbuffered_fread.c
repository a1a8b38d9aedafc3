/* stdio_unbuffered_fread.c - fread from an unbuffered socket FILE made one read system call
 * per byte: 1 MB took a million reads, 600 times as long as natively.
 *
 * What happened: glibc's fread reads a request of at least a buffer's size straight into
 * the caller's memory, and an unbuffered stream (setvbuf _IONBF) has a buffer of one byte,
 * so natively a 1 MB fread is a handful of reads of up to what is left. The governed
 * fread reads straight into the caller's memory too, but left unbuffered and line-buffered
 * streams out, on the grounds that their underflow flushes stdout first - which glibc's
 * fread never reaches for such a request. It refilled the one-byte buffer through
 * __uflow instead: 1,048,578 reads for 1 MB (2.4 s against 0.004 s), long enough for a
 * call deadline to cut a healthy transfer. Those streams now read straight as glibc's do.
 * The sequence: the peer sends 1 MB and closes; an unbuffered FILE freads it in one call;
 * the read system calls the process made (/proc/self/io, syscr) must be a few hundred at
 * most, and the bytes complete.
 */
#include "regress.h"

#define SIZE (1 << 20)

static char data[SIZE], got[SIZE];

/* The read system calls this process has made (/proc/self/io), -1 when not available. */
static long read_calls(void)
{
	char buf[512], *p;
	int fd = open("/proc/self/io", O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "syscr: ");
	return p != NULL ? atol(p + 7) : -1;
}

static void *sender(void *arg)
{
	int peer = *(int *)arg;
	size_t off = 0;
	ssize_t n;

	while (off < SIZE && (n = write(peer, data + off, SIZE - off)) > 0)
		off += (size_t)n;
	close(peer);
	return NULL;
}

int main(int argc, char **argv)
{
	int lfd, port, sock, peer;
	long before, after;
	size_t n;
	pthread_t t;
	FILE *f;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=2s", NULL);
	tbr_hang_guard(30, "the fread never returned");
	if (read_calls() < 0)
		tbr_skip("/proc/self/io is not readable here");
	lfd = tbr_listen(&port);
	sock = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	for (size_t i = 0; i < SIZE; i++)
		data[i] = (char)('a' + i % 26);
	f = fdopen(sock, "r");
	TBR_CHECK(f != NULL, "fdopen: %s", strerror(errno));
	setvbuf(f, NULL, _IONBF, 0);
	TBR_CHECK(pthread_create(&t, NULL, sender, &peer) == 0, "pthread_create");
	before = read_calls();
	n = fread(got, 1, SIZE, f);
	after = read_calls();
	pthread_join(t, NULL);
	TBR_CHECK(n == SIZE && memcmp(got, data, SIZE) == 0, "fread returned %zu of %d bytes "
		  "(errno %s)", n, SIZE, tbt_errno_name(errno));
	TBR_CHECK(after - before < 1000, "%ld read system calls for 1 MB", after - before);
	fclose(f);
	close(lfd);
	return 0;
}
