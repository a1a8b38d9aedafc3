/* pool_pages_backed.c - governed sockets cost memory they never used.
 *
 * What happened: make bench measured 328 bytes per idle governed socket (10,000 of them)
 * where the same library had measured 253 on another machine. Two causes:
 * - The pool's chunks were written whole when mapped: the free list's link of each of its
 *   512 entries, and the framings' chunk likewise. A program's first governed socket
 *   backed 23 pages of sockets and 9 of framings - 128 KiB for one connection - on any
 *   kernel.
 * - A new socket looked at its entry's rare record (the request deadline, the watchdog's
 *   looks at a blocked send) to see whether the entry's earlier socket had left anything
 *   to clear. Reading a page never written maps the shared zero page on most kernels, and
 *   backs a page of its own on others (seen on the machine above): every rare page of
 *   every chunk was backed, 72 bytes more per socket.
 * - The stats thread visited every gate and every protected destination once a second by
 *   scanning both tables whole (40 KiB), with the same effect on such a kernel.
 * The sequence: RssAnon before and after the first governed connection, then after 600 and
 *   after 1,600 of them (every connection to a peer in this process that holds it open,
 *   each sent a byte of no protocol, so that its framing is given back as a raw
 *   connection's is). The first may cost what starting timebox's threads costs, never a
 *   chunk; the 1,000 between the last two no more than a socket's entry, its timers and
 *   its fd slot. Before the fix, on that kernel: 212 KiB, and 324 bytes each.
 *
 * The fix: entries go to the free list 32 at a time as the pool runs out (sock.c,
 * POOL_BATCH); a bitmap marks the rare records that were written, and a new socket clears
 * a record only when marked, reading none; the gates and the protected destinations are
 * visited through a list in the order they were made.
 */
#include <pthread.h>
#include <sys/resource.h>

#include "regress.h"

#define FIRST 600
#define LAST 1600

/* The first socket: timebox's threads' stacks and its first pages (72 KiB seen), never a
 * 92 KiB chunk of entries plus a 36 KiB chunk of framings. */
#define FIRST_MAX_KB 120
/* A socket's entry (184 bytes), its timers (48) and its fd slot (8) are 240 bytes; the
 * watchdog's heap and the pages' rounding take a little more. A backed rare record is 72. */
#define EACH_MAX_BYTES 280

static int lfd;

static void *hold(void *arg)
{
	(void)arg;
	while (accept(lfd, NULL, NULL) >= 0)
		;
	return NULL;
}

/* A byte that is no protocol's: the framing gives up on the connection and its entry goes
 * back to the framings' pool, as on a raw connection that has talked. */
static void speak(int fd)
{
	TBR_CHECK(send(fd, "\x01", 1, 0) == 1, "send: %s", strerror(errno));
}

static long rss_anon_kb(void)
{
	static char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	const char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	p = strstr(buf, "RssAnon:");
	return p != NULL ? strtol(p + 8, NULL, 10) : -1;
}

int main(int argc, char **argv)
{
	const char *pre = getenv("TBR_PRELOAD");
	struct rlimit lim;
	long before, first, at_first, at_last;
	double each;
	pthread_t t;
	int port;

	(void)argc;
	if (pre != NULL && (strstr(pre, "libasan") != NULL || strstr(pre, "libtsan") != NULL))
		tbr_skip("a sanitizer's runtime backs memory of its own for every allocation");
	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 2 * LAST + 64) {
		lim.rlim_cur = lim.rlim_max < 2 * LAST + 64 ? lim.rlim_max : 2 * LAST + 64;
		setrlimit(RLIMIT_NOFILE, &lim);
	}
	if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur < 2 * LAST + 16)
		tbr_skip("the fd limit is below both ends of the connections");
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=10s", "TIMEBOX_DEADLINE=30s", NULL);
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, hold, NULL) == 0, "pthread_create");
	before = rss_anon_kb();
	(void)tbr_connect(port);
	first = rss_anon_kb() - before;
	for (int i = 1; i < FIRST; i++)
		speak(tbr_connect(port));
	at_first = rss_anon_kb();
	for (int i = FIRST; i < LAST; i++)
		speak(tbr_connect(port));
	at_last = rss_anon_kb();
	TBR_CHECK(before > 0 && at_first > 0 && at_last > 0, "cannot read RssAnon");
	each = (double)(at_last - at_first) * 1024 / (LAST - FIRST);
	printf("first governed socket: %ld KiB; sockets %d..%d: %.0f bytes each\n", first,
	       FIRST, LAST, each);
	TBR_CHECK(first <= FIRST_MAX_KB, "the first governed socket backed %ld KiB (at most %d)",
		  first, FIRST_MAX_KB);
	TBR_CHECK(each <= EACH_MAX_BYTES, "each governed socket backed %.0f bytes (at most %d)",
		  each, EACH_MAX_BYTES);
	return 0;
}
