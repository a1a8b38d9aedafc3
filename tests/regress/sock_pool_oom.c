/* sock_pool_oom.c - a connection timebox could not govern was left ungoverned without a
 * word.
 *
 * What happened: when a connect found no memory for its governed socket (the socket pool
 * grows by a chunk of entries, each growth an mmap), it went on ungoverned, as designed - and said
 * nothing. An operator reading the log believed every call was bounded, while that
 * connection waited as long as its downstream liked. The same silence followed a socket
 * numbered past the fd table (the hard RLIMIT_NOFILE raised after start-up). timebox's rule
 * when it cannot govern is to step aside and say so once.
 * The sequence: with a read timeout of 200 ms, open 512 governed connections (the pool's
 * first chunk, HELD: sock.c's CHUNK), then limit the address space (RLIMIT_AS) to what is mapped now, and open
 * two more to a peer that closes each 600 ms later without a byte. Each must work as
 * natively - its read is not cut, it ends at the peer's close - and the log must say once
 * that connections are not governed, naming the first one's fd.
 *
 * The fix: the connect logs `event=error what=sock_pool` once per process (and
 * `what=fd_table` for a number past the table), then goes on ungoverned.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>

#include "regress.h"

#define HELD 512 /* sock.c's CHUNK */

static int lfd;

/* Accepts every connection; the ones past the first HELD are closed 600 ms after they came,
 * without a byte. The others stay open and silent until the program exits. */
static void *peer(void *arg)
{
	(void)arg;
	for (int i = 0;; i++) {
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		if (i >= HELD) {
			tbt_sleep_ms(600);
			close(c);
		}
	}
}

int main(int argc, char **argv)
{
	static char log_kv[80], log[16384];
	static int held[HELD];
	const char *path, *pre = getenv("TBR_PRELOAD");
	struct rlimit lim, was;
	int port, lf, lines = 0, first = -1;
	pthread_t t;
	ssize_t n = 0;

	(void)argc;
	/* Both ends of HELD connections live in this process. */
	if (getrlimit(RLIMIT_NOFILE, &was) == 0 && was.rlim_cur < 2 * HELD + 64) {
		was.rlim_cur = was.rlim_max < 2 * HELD + 64 ? was.rlim_max : 2 * HELD + 64;
		setrlimit(RLIMIT_NOFILE, &was);
	}
	if (getrlimit(RLIMIT_NOFILE, &was) != 0 || was.rlim_cur < 2 * HELD + 16)
		tbr_skip("the fd limit is below both ends of a pool chunk's connections");
	if (pre != NULL && (strstr(pre, "libasan") != NULL || strstr(pre, "libtsan") != NULL))
		tbr_skip("a sanitizer's runtime needs address space a limit would deny it");
	/* exec keeps the pid: the re-executed program finds its log by it */
	snprintf(log_kv, sizeof(log_kv), "TIMEBOX_LOG=/tmp/tbr-pool-oom-%d.log", (int)getpid());
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", log_kv, NULL);
	path = log_kv + strlen("TIMEBOX_LOG=");
	printf("opening %d governed connections\n", HELD); /* stdout's buffer, before the limit */
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, peer, NULL) == 0, "pthread_create");
	for (int i = 0; i < HELD; i++)
		held[i] = tbr_connect(port);
	TBR_CHECK(getrlimit(RLIMIT_AS, &was) == 0, "getrlimit: %s", strerror(errno));
	lim = was;
	lim.rlim_cur = tbr_vm_size() + 16384; /* the soft limit only: it goes back up after */
	TBR_CHECK(lim.rlim_cur > 16384, "cannot read VmSize");
	TBR_CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit(RLIMIT_AS): %s", strerror(errno));
	for (int k = 0; k < 2; k++) {
		int fd = tbr_connect(port);
		double t0 = tbt_now_ms(), ms;
		ssize_t r;
		char c;

		first = first < 0 ? fd : first;
		r = read(fd, &c, 1);
		ms = tbt_now_ms() - t0;
		printf("connection %d (fd %d): read gave %zd %s after %.0f ms\n", HELD + k + 1, fd,
		       r, r < 0 ? tbt_errno_name(errno) : "", ms);
		TBR_CHECK(r == 0 && ms >= 400, "fd %d: the read did not end as natively "
			  "(end of file after 600 ms)", fd);
		close(fd);
	}
	setrlimit(RLIMIT_AS, &was);
	for (int i = 0; i < HELD; i++)
		close(held[i]);
	lf = open(path, O_RDONLY | O_CLOEXEC);
	TBR_CHECK(lf >= 0, "the log %s: %s", path, strerror(errno));
	for (ssize_t k; (k = read(lf, log + n, sizeof(log) - 1 - (size_t)n)) > 0;)
		n += k;
	close(lf);
	unlink(path);
	log[n] = '\0';
	printf("log:\n%s", log);
	for (const char *p = log; (p = strstr(p, "what=sock_pool")) != NULL; p++)
		lines++;
	TBR_CHECK(lines == 1, "%d lines say a connection is not governed (want 1)", lines);
	{
		char want[32];

		snprintf(want, sizeof(want), "fd=%d ", first);
		TBR_CHECK(strstr(log, want) != NULL, "the line does not name fd %d", first);
	}
	return 0;
}
