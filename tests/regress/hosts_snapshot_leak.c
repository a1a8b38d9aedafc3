/* hosts_snapshot_leak.c - memory grew for ever with a large, unreadable or changing /etc/hosts.
 *
 * What happened: the bounded lookup first asks a snapshot of /etc/hosts whether the name is
 * listed there (then it runs natively). The file is checked at most once a second. A file
 * over the snapshot's limit (ad-blocking lists of more than 1 MiB are common) or one that
 * cannot be read gave a "not present" snapshot, which never compared equal to the file: so
 * every lookup a second after the last made a new snapshot (72 bytes, a stat and an open)
 * and kept the old one, for the life of the process. A file that did change (a container
 * runtime rewriting it, a watcher touching it) cost its whole size at every change, kept
 * for ever as well, since a reader might still hold the old snapshot.
 *
 * The sequence: private namespaces with our own nsswitch.conf (files first), resolv.conf
 * naming 127.0.0.1 where nothing listens (every query fails at once) and /etc/hosts bound
 * to a file of ours; TIMEBOX_DNS_TIMEOUT=5s; the clock timebox reads is moved 2 s forward
 * before each lookup (a second preload wraps clock_gettime), so each lookup checks the
 * file. Memory in use (mallinfo2) must not grow over N lookups of a name the file does not
 * list: (a) while the file's time changes before each lookup, (b) with the file grown past
 * 1 MiB, (c) with the file unreadable (mode 000, the program no longer root).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>

#include "delaylib.h"
#include "fake_dns.h"

#define N 300
#define NAME "svc.example.test"

static const char clock_source[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <time.h>\n"
	"long long tbr_clock_skew_ns;\n"
	"int clock_gettime(clockid_t c, struct timespec *ts)\n"
	"{\n"
	"\tstatic int (*real)(clockid_t, struct timespec *);\n"
	"\tint r;\n"
	"\tif (!real)\n"
	"\t\treal = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, \"clock_gettime\");\n"
	"\tr = real(c, ts);\n"
	"\tif (r == 0 && c == CLOCK_MONOTONIC) {\n"
	"\t\tlong long ns = ts->tv_nsec + __atomic_load_n(&tbr_clock_skew_ns, __ATOMIC_RELAXED);\n"
	"\t\tts->tv_sec += ns / 1000000000;\n"
	"\t\tts->tv_nsec = ns % 1000000000;\n"
	"\t}\n"
	"\treturn r;\n"
	"}\n";

static long long *skew;

static size_t in_use(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

/* A file of ours bound over `path`; its fd (the file itself is unlinked). */
static int bind_file(const char *path, const char *text)
{
	char tmp[] = "/tmp/tbr_hosts_XXXXXX";
	int fd = mkstemp(tmp);

	TBR_CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
	fchmod(fd, 0644);
	if (mount(tmp, path, NULL, MS_BIND, NULL) != 0) {
		unlink(tmp);
		tbr_skip("cannot bind-mount over /etc files");
	}
	unlink(tmp);
	return fd;
}

static void lookup(void)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;

	__atomic_add_fetch(skew, 2000000000LL, __ATOMIC_RELAXED);
	if (getaddrinfo(NAME, "80", &hints, &res) == 0)
		freeaddrinfo(res);
}

/* Growth of memory in use over N lookups, each after `before` (when not NULL). */
static long growth(int hosts_fd, void (*before)(int fd, int i))
{
	size_t start;

	for (int i = 0; i < 20; i++) /* the resolver thread's and glibc's first allocations */
		lookup();
	start = in_use();
	for (int i = 0; i < N; i++) {
		if (before != NULL)
			before(hosts_fd, i);
		lookup();
	}
	return (long)in_use() - (long)start;
}

static void touch(int fd, int i)
{
	struct timespec t[2] = { { 1000000 + i, 0 }, { 1000000 + i, 0 } };

	TBR_CHECK(futimens(fd, t) == 0, "futimens: %s", strerror(errno));
}

int main(int argc, char **argv)
{
	char *hosts = malloc(64 * 1024);
	size_t len = 0;
	long grew;
	int fd;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(clock_source);
	tbr_preload_self(argv, "TIMEBOX_DNS_TIMEOUT=5s", NULL);
	tbr_remove_built();
	if (in_use() == 0)
		tbr_skip("mallinfo2 does not see this allocator (a sanitizer's): growth not measurable");
	skew = dlsym(RTLD_DEFAULT, "tbr_clock_skew_ns");
	TBR_CHECK(skew != NULL, "the clock library is not loaded");
	tbr_fake_dns(false);
	bind_file("/etc/nsswitch.conf", "hosts: files dns\n");
	len += (size_t)sprintf(hosts, "127.0.0.1 localhost\n");
	for (int i = 0; i < 400; i++)
		len += (size_t)sprintf(hosts + len, "10.9.%d.%d host%d.example.test\n", i / 256,
				       i % 256, i);
	fd = bind_file("/etc/hosts", hosts);

	grew = growth(fd, touch);
	TBR_CHECK(grew < 64 * 1024, "(a) %d changes of a %zu-byte /etc/hosts kept %ld bytes", N,
		  len, grew);

	{
		static char pad[80];

		memset(pad, '#', sizeof(pad) - 1);
		pad[sizeof(pad) - 2] = '\n';
		for (off_t at = (off_t)len; at < (1 << 20) + 4096; at += (off_t)sizeof(pad) - 1)
			TBR_CHECK(pwrite(fd, pad, sizeof(pad) - 1, at) == (ssize_t)sizeof(pad) - 1,
				  "pwrite");
	}
	grew = growth(fd, NULL);
	TBR_CHECK(grew < 8 * 1024, "(b) %d lookups with a 1 MiB /etc/hosts kept %ld bytes", N,
		  grew);

	TBR_CHECK(ftruncate(fd, (off_t)len) == 0 && fchmod(fd, 0) == 0, "ftruncate, fchmod");
	TBR_CHECK(setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0,
		  "setresuid: %s", strerror(errno));
	TBR_CHECK(open("/etc/hosts", O_RDONLY) < 0 && errno == EACCES, "/etc/hosts is readable");
	grew = growth(fd, NULL);
	TBR_CHECK(grew < 8 * 1024, "(c) %d lookups with an unreadable /etc/hosts kept %ld bytes", N,
		  grew);
	free(hosts);
	return 0;
}
