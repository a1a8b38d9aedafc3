/* expired_stale_reuse.c - a call on an expired socket's stale number took the next
 * connection's socket out of the table.
 *
 * What happened: a read or send on a socket that has expired first checks that its number
 * still names that socket (the program may have closed it where no hook could see, a raw
 * syscall or a library's own dup2, and reused it): when it does not, the slot is untracked
 * and the call made as the program's own. That check (tb_stale_check) looked at the
 * number's inode, then took the slot if it still pointed at the same pool entry - outside
 * `busy`, and without the generation. In between, another thread could close the number
 * (the hooked close untracks the slot and frees the pool entry) and connect again, getting
 * the same number and the same entry (the free list hands back the last entry freed): the
 * take removed that live socket from the table and dropped its reference. The new
 * connection went ungoverned - its stalled read was never cut - and its gate slot went back
 * while it was still open. A send that found the number no longer a socket (ENOTSOCK) had
 * the same window between its generation check and its take (tb_xfer_abandon_stale).
 * The sequence, with a second preload (delaylib.h) holding thread L 500 ms right after its
 * look at the inode, where a preemption would: read_timeout 300 ms; a recv on governed fd
 * N from a silent peer is cut (ETIMEDOUT: the socket is expired); a raw dup3 puts
 * /dev/null on N; thread L calls recv(N, MSG_DONTWAIT) and is held in the check; inside
 * its hold the program closes N and connects again, getting N. Once L is done, a recv on
 * the new N from a silent peer must be cut at read_timeout (ETIMEDOUT), not run to its own
 * 2 s SO_RCVTIMEO (EAGAIN) as an ungoverned socket's does. The check is now made under
 * `busy` with the generation the call began with (tb_sock_check_slot): the close waits for
 * it before the number can be reused, and a generation that moved is not the call's socket.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "regress.h"
#include "delaylib.h"

/* syscall() is how timebox makes its identity checks' fstat (real.h, tb_fstat_raw): held
 * is thread L's first look at a number that is not a socket. */
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
	"	    named(\"tbr-late\") && ++looks == 1) {\n"
	"		if ((mark = getenv(\"TBR_MARK\")) != 0)\n"
	"			close(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));\n"
	"		nanosleep(&t, 0);\n"
	"	}\n"
	"	return r;\n"
	"}\n";

static int victim;

/* The program closes the number its other thread is making a call on (a close
 * ThreadSanitizer cannot order after that recv): the story's point, not a race of the
 * library's. */
static __attribute__((noinline)) void close_under_call(int fd)
{
	close(fd);
	__asm__ volatile("" ::: "memory"); /* not a tail call: the frame stays for the rule */
}

/* Thread L: a call on the expired socket's number, which now names /dev/null. What it
 * returns is the program's own call's, on whatever the number names when it is made. */
static void *late(void *arg)
{
	char c;

	(void)arg;
	pthread_setname_np(pthread_self(), "tbr-late");
	(void)!recv(victim, &c, 1, MSG_DONTWAIT);
	return NULL;
}

int main(int argc, char **argv)
{
	static const char rule[] = "race:close_under_call\n";
	static char mark[64], mark_env[96], tsan_env[256];
	char supp[] = "/tmp/tb_expired_stale_XXXXXX";
	struct timeval rcv = { 2, 0 };
	struct stat st;
	pthread_t l;
	int port, lfd, peer, peer2, devnull, fd, r, err, sfd;
	double until, t0, ms;
	char c;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		snprintf(mark, sizeof(mark), "/tmp/tbr-expired-stale-%d", (int)getpid());
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
	if (getenv("TSAN_OPTIONS") != NULL && strstr(getenv("TSAN_OPTIONS"), "/tmp/tb_expired_stale_"))
		unlink(strstr(getenv("TSAN_OPTIONS"), "/tmp/tb_expired_stale_"));
	snprintf(mark, sizeof(mark), "%s", getenv("TBR_MARK"));
	unlink(mark);
	lfd = tbr_listen(&port);
	victim = tbr_connect(port); /* governed; the peer never answers */
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	tbr_hang_guard(10, "the story hung");
	errno = 0;
	r = (int)recv(victim, &c, 1, 0);
	TBR_CHECK(r < 0 && errno == ETIMEDOUT, "the first read was not cut: %d (%s)", r,
		  strerror(errno));
	/* Where no hook sees it: the number now names /dev/null. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	TBR_CHECK(devnull >= 0, "open /dev/null: %s", strerror(errno));
	TBR_CHECK(syscall(SYS_dup3, devnull, victim, O_CLOEXEC) == victim, "dup3: %s",
		  strerror(errno));
	close(devnull);
	TBR_CHECK(pthread_create(&l, NULL, late, NULL) == 0, "pthread_create");
	until = tbt_now_ms() + 5000;
	while (stat(mark, &st) != 0 && tbt_now_ms() < until)
		tbt_sleep_ms(1);
	TBR_CHECK(stat(mark, &st) == 0, "thread L never looked at the stale number");
	unlink(mark);
	close_under_call(victim); /* the program's own /dev/null copy */
	fd = tbr_connect(port);
	pthread_join(l, NULL);
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
		  "fd %d, a new governed connection on the stale number, was not governed: its "
		  "read of a silent peer returned %d (%s) after %.0f ms instead of ETIMEDOUT at "
		  "300 ms", fd, r, r < 0 ? strerror(err) : "end of stream", ms);
	printf("the new connection on fd %d was cut at %.0f ms\n", fd, ms);
	close(peer);
	close(peer2);
	return 0;
}
