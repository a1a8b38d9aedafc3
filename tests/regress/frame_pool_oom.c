/* frame_pool_oom.c - a connection whose framing found no memory was governed by the raw
 * rules, silently, and its keep-alive wait was cut.
 *
 * What happened: a framed protocol's connection takes a framing from a pool of its own
 * (sock.c, frame_take), which grows by an mmap. When that failed the connection went on
 * governed by the system-call rules, without a word. Those rules do not know when an HTTP
 * response is complete: the wait of a keep-alive connection after its answer, which its
 * framing lets be (RESTING: nothing outstanding), was cut by the read timeout. A healthy
 * program saw ETIMEDOUT where natively it waits for the server's close.
 * The sequence: a rule makes 127.0.0.2 raw (no framing); open 600 connections there and
 * close them (the socket pool now has free entries, the framing pool has never grown),
 * limit the address space (RLIMIT_AS) to what is mapped now, and make one HTTP call to
 * 127.0.0.1 with a read timeout of 200 ms: the answer comes at once, then the server is
 * silent 600 ms and closes. The read after the answer must end as natively (end of file
 * after ~600 ms), and the log must say once that a connection is not governed.
 *
 * The fix: a connection whose protocol needs a framing it cannot have is not governed,
 * as one without a socket (event=error what=sock_pool, once per process).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>

#include "regress.h"

#define RAW_CONNS 600 /* past the socket pool's first chunk of 512 */

static int raw_lfd, http_lfd;

/* 127.0.0.2: accepts and keeps each connection until the program closes its end. */
static void *raw_peer(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(raw_lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		/* the program's close is this end's end of file; its fd is the program's too */
	}
}

/* 127.0.0.1: reads one request, answers it, is silent 600 ms, closes. */
static void *http_peer(void *arg)
{
	static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	char req[512];
	int c = accept(http_lfd, NULL, NULL);

	(void)arg;
	if (c < 0)
		return NULL;
	if (read(c, req, sizeof(req)) > 0 && write(c, answer, sizeof(answer) - 1) > 0)
		tbt_sleep_ms(600);
	close(c);
	return NULL;
}

static int listen_on(uint32_t addr, int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	TBR_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  listen(fd, 1024) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0,
		  "listener: %s", strerror(errno));
	*port = ntohs(a.sin_port);
	return fd;
}

static int connect_to(uint32_t addr, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(addr) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	TBR_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s",
		  strerror(errno));
	return fd;
}

int main(int argc, char **argv)
{
	static char log_kv[80], conf_kv[80], log[16384];
	static int raw[RAW_CONNS];
	static const char request[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *pre = getenv("TBR_PRELOAD"), *path;
	struct rlimit lim, was;
	int raw_port, http_port, lf, lines = 0, fd;
	char buf[256];
	pthread_t t1, t2;
	double t0, ms;
	ssize_t r, n = 0, got = 0;

	(void)argc;
	if (getrlimit(RLIMIT_NOFILE, &was) == 0 && was.rlim_cur < 2 * RAW_CONNS + 64) {
		was.rlim_cur = was.rlim_max < 2 * RAW_CONNS + 64 ? was.rlim_max : 2 * RAW_CONNS + 64;
		setrlimit(RLIMIT_NOFILE, &was);
	}
	if (getrlimit(RLIMIT_NOFILE, &was) != 0 || was.rlim_cur < 2 * RAW_CONNS + 16)
		tbr_skip("the fd limit is below both ends of the raw connections");
	if (pre != NULL && (strstr(pre, "libasan") != NULL || strstr(pre, "libtsan") != NULL))
		tbr_skip("a sanitizer's runtime needs address space a limit would deny it");
	/* exec keeps the pid: the re-executed program finds its files by it */
	snprintf(log_kv, sizeof(log_kv), "TIMEBOX_LOG=/tmp/tbr-frame-oom-%d.log", (int)getpid());
	snprintf(conf_kv, sizeof(conf_kv), "TIMEBOX_CONFIG=/tmp/tbr-frame-oom-%d.conf",
		 (int)getpid());
	if (getenv("TBR_CHILD") == NULL) {
		FILE *f = fopen(conf_kv + strlen("TIMEBOX_CONFIG="), "w");

		TBR_CHECK(f != NULL, "the configuration file: %s", strerror(errno));
		fputs("destinations = ( { match = \"127.0.0.2/32\"; protocol = \"raw\"; } );\n", f);
		fclose(f);
	}
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", "TIMEBOX_FIRST_BYTE_TIMEOUT=2s",
			 log_kv, conf_kv, NULL);
	path = log_kv + strlen("TIMEBOX_LOG=");
	unlink(conf_kv + strlen("TIMEBOX_CONFIG="));
	printf("opening and closing %d raw connections\n", RAW_CONNS); /* stdout's buffer */
	raw_lfd = listen_on(0x7f000002, &raw_port);
	http_lfd = listen_on(INADDR_LOOPBACK, &http_port);
	TBR_CHECK(pthread_create(&t1, NULL, raw_peer, NULL) == 0, "pthread_create");
	TBR_CHECK(pthread_create(&t2, NULL, http_peer, NULL) == 0, "pthread_create");
	for (int i = 0; i < RAW_CONNS; i++)
		raw[i] = connect_to(0x7f000002, raw_port);
	for (int i = 0; i < RAW_CONNS; i++)
		close(raw[i]);
	TBR_CHECK(getrlimit(RLIMIT_AS, &was) == 0, "getrlimit: %s", strerror(errno));
	lim = was;
	lim.rlim_cur = tbr_vm_size() + 16384; /* the soft limit only: it goes back up after */
	TBR_CHECK(lim.rlim_cur > 16384, "cannot read VmSize");
	TBR_CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit(RLIMIT_AS): %s", strerror(errno));
	fd = connect_to(INADDR_LOOPBACK, http_port);
	TBR_CHECK(write(fd, request, sizeof(request) - 1) == (ssize_t)sizeof(request) - 1,
		  "write: %s", strerror(errno));
	while (got < 40 && (r = read(fd, buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += r; /* the head and "ok": 40 bytes */
	buf[got] = '\0';
	TBR_CHECK(got == 40 && strstr(buf, "\r\n\r\nok") != NULL, "the answer: %zd bytes", got);
	t0 = tbt_now_ms();
	r = read(fd, buf, sizeof(buf));
	ms = tbt_now_ms() - t0;
	printf("the read after the answer gave %zd %s after %.0f ms\n", r,
	       r < 0 ? tbt_errno_name(errno) : "", ms);
	TBR_CHECK(r == 0 && ms >= 400, "the keep-alive wait did not end as natively (end of "
		  "file after 600 ms)");
	close(fd);
	setrlimit(RLIMIT_AS, &was);
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
	return 0;
}
