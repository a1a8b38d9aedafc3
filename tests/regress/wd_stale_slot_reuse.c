/* wd_stale_slot_reuse.c - the watchdog's forgetting of a stale fd slot took the next
 * connection's socket out of the table.
 *
 * What happened: when the watchdog finds a due wait whose socket no fd can still be
 * verified for (the fd was closed or dup'ed over where the hooks could not see: a raw
 * syscall, a library's own dup2), it gives the socket up and untracks the stale slot, so
 * that the object now behind that number is passed straight to libc. It did so outside
 * `busy`: it checked that the slot still named the socket, at that generation, looked at
 * the number's inode, then took the slot and dropped a reference. In between, the program
 * could close the number (the hooked close untracks the stale slot and frees the pool
 * entry), and a new connect get the same number and the same pool entry (the free list
 * hands back the last entry freed): the take removed that live socket from the table and
 * freed its entry. The new connection went ungoverned - its stalled read was never cut,
 * and its gate slot went back while it was still open.
 * The sequence, with a second preload (delaylib.h) holding the watchdog 500 ms right after
 * its look at the inode, where a preemption would: read_timeout 300 ms; thread W blocks
 * reading governed fd N from a silent peer; a raw dup3 puts /dev/null on N (W's recv keeps
 * the socket itself alive); at W's expiry the watchdog finds no fd of the socket, and
 * inside its hold the program closes N (its /dev/null) and connects again, getting N. A
 * recv on the new N from a silent peer must be cut at read_timeout (ETIMEDOUT), not run to
 * its own 2 s SO_RCVTIMEO (EAGAIN) as an ungoverned socket's does. The untracking is now
 * tb_sock_take_if_stale: under `busy` (the close waits for it before the number can be
 * reused), and given back when the generation moved.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "regress.h"
#include "delaylib.h"

/* syscall() is how timebox makes its identity checks' fstat (real.h, tb_fstat_raw). The
 * watchdog's second look at a number that is not a socket is the stale slot's: the first is
 * find_fd's, under `busy`. */
static const char delay_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <fcntl.h>\n#include <stdarg.h>\n"
	"#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n#include <unistd.h>\n"
	"#include <sys/prctl.h>\n#include <sys/stat.h>\n#include <sys/syscall.h>\n"
	"static int named(const char *n)\n"
	"{\n"
	"	char b[16] = \"\";\n"
	"	prctl(PR_GET_NAME, b);\n"
	"	return strcmp(b, n) == 0;\n"
	"}\n"
	"static int looks;\n"
	"long syscall(long n, ...)\n"
	"{\n"
	"	static long (*real)(long, ...);\n"
	"	struct timespec t = { 0, 500 * 1000000L };\n"
	"	struct stat *st = 0;\n"
	"	const char *mark;\n"
	"	long a[6], r;\n"
	"	va_list ap;\n"
	"	va_start(ap, n);\n"
	"	for (int i = 0; i < 6; i++)\n"
	"		a[i] = va_arg(ap, long);\n"
	"	va_end(ap);\n"
	"	if (!real)\n"
	"		real = (long (*)(long, ...))dlsym(RTLD_NEXT, \"syscall\");\n"
	"	r = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);\n"
	"#ifdef SYS_fstat\n"
	"	if (n == SYS_fstat)\n"
	"		st = (struct stat *)a[1];\n"
	"#else\n"
	"	if (n == SYS_newfstatat)\n"
	"		st = (struct stat *)a[2];\n"
	"#endif\n"
	"	if (st != 0 && r == 0 && a[0] > 2 && !S_ISSOCK(st->st_mode) &&\n"
	"	    named(\"timebox-wd\") && ++looks == 2) {\n"
	"		if ((mark = getenv(\"TBR_MARK\")) != 0)\n"
	"			close(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));\n"
	"		nanosleep(&t, 0);\n"
	"	}\n"
	"	return r;\n"
	"}\n";

static int victim;
static atomic_int waiter_tid;

/* The program closes the number its other thread still reads (a close ThreadSanitizer
 * cannot order after that recv, which never returned): the story's point, not a race of
 * the library's. */
static __attribute__((noinline)) void close_under_reader(int fd)
{
	close(fd);
	__asm__ volatile("" ::: "memory"); /* not a tail call: the frame stays for the rule */
}

static void *waiter(void *arg)
{
	char c;

	(void)arg;
	atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
	(void)!recv(victim, &c, 1, 0);
	return NULL;
}

int main(int argc, char **argv)
{
	static const char rule[] = "race:close_under_reader\n";
	static char mark[64], mark_env[96], tsan_env[256];
	char supp[] = "/tmp/tb_stale_slot_XXXXXX";
	struct timeval rcv = { 2, 0 };
	struct stat st;
	pthread_t w;
	int port, lfd, peer, peer2, devnull, fd, r, err, sfd;
	double until, t0, ms;
	char c;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		snprintf(mark, sizeof(mark), "/tmp/tbr-stale-slot-%d", (int)getpid());
		snprintf(mark_env, sizeof(mark_env), "TBR_MARK=%s", mark);
		putenv(mark_env);
		tbr_add_preload(delay_c);
		sfd = mkstemp(supp);
		TBR_CHECK(sfd >= 0, "mkstemp: %s", strerror(errno));
		TBR_CHECK(write(sfd, rule, sizeof(rule) - 1) == (ssize_t)sizeof(rule) - 1, "write");
		close(sfd);
		snprintf(tsan_env, sizeof(tsan_env), "TSAN_OPTIONS=die_after_fork=0:suppressions=%s",
			 supp);
	}
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", tsan_env, NULL);
	tbr_remove_built();
	if (getenv("TSAN_OPTIONS") != NULL && strstr(getenv("TSAN_OPTIONS"), "/tmp/tb_stale_slot_"))
		unlink(strstr(getenv("TSAN_OPTIONS"), "/tmp/tb_stale_slot_"));
	snprintf(mark, sizeof(mark), "%s", getenv("TBR_MARK"));
	unlink(mark);
	lfd = tbr_listen(&port);
	victim = tbr_connect(port); /* governed; the peer never answers */
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	tbr_hang_guard(10, "the story hung");
	TBR_CHECK(pthread_create(&w, NULL, waiter, NULL) == 0, "pthread_create");
	until = tbt_now_ms() + 5000;
	while ((atomic_load(&waiter_tid) == 0 || !tbr_thread_sleeping(atomic_load(&waiter_tid))) &&
	       tbt_now_ms() < until)
		tbt_sleep_ms(1);
	TBR_CHECK(tbt_now_ms() < until, "the waiter never blocked in its recv");
	/* Where no hook sees it: the number now names /dev/null. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	TBR_CHECK(devnull >= 0, "open /dev/null: %s", strerror(errno));
	TBR_CHECK(syscall(SYS_dup3, devnull, victim, O_CLOEXEC) == victim, "dup3: %s",
		  strerror(errno));
	close(devnull);
	/* At the waiter's expiry the watchdog finds no fd of its socket, and is held. */
	until = tbt_now_ms() + 5000;
	while (stat(mark, &st) != 0 && tbt_now_ms() < until)
		tbt_sleep_ms(1);
	TBR_CHECK(stat(mark, &st) == 0, "the watchdog never looked at the stale slot");
	unlink(mark);
	close_under_reader(victim); /* the program's own /dev/null copy */
	fd = tbr_connect(port);
	if (fd != victim) {
		printf("the new connection got fd %d, not %d: nothing to show\n", fd, victim);
		return 0;
	}
	peer2 = accept(lfd, NULL, NULL);
	TBR_CHECK(peer2 >= 0, "accept: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof(rcv));
	t0 = tbt_now_ms();
	errno = 0;
	r = (int)recv(fd, &c, 1, 0);
	err = errno;
	ms = tbt_now_ms() - t0;
	TBR_CHECK(r < 0 && err == ETIMEDOUT,
		  "fd %d, a new governed connection on the stale slot's number, was not governed: "
		  "its read of a silent peer returned %d (%s) after %.0f ms instead of ETIMEDOUT "
		  "at 300 ms", fd, r, r < 0 ? strerror(err) : "end of stream", ms);
	printf("the new connection on fd %d was cut at %.0f ms\n", fd, ms);
	close(peer); /* the waiter's recv ends */
	close(peer2);
	pthread_join(w, NULL);
	return 0;
}
