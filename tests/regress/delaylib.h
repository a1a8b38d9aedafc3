/* delaylib.h - a second preload library, built at run time from source the story holds, to
 * put a delay where a preemption would fall (between timebox's hook and the kernel).
 * tbr_add_preload builds it and appends it to TBR_PRELOAD, after timebox; the re-executed
 * program removes the build with tbr_remove_built. */
#ifndef TB_DELAYLIB_H
#define TB_DELAYLIB_H

#include "regress.h"

static inline void tbr_add_preload(const char *source)
{
	static char dir[] = "/tmp/tbr-delay-XXXXXX";
	char path[256], cmd[512], *preload;
	const char *tb = getenv("TBR_PRELOAD");
	FILE *f;

	if (tb == NULL || *tb == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/delay.c", dir);
	TBR_CHECK((f = fopen(path, "w")) != NULL, "fopen: %s", strerror(errno));
	fputs(source, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -fPIC -O1 -o %s/delay.so %s -ldl", dir, path);
	if (system(cmd) != 0)
		tbr_skip("cannot build the delaying library with cc");
	preload = malloc(strlen(tb) + sizeof(dir) + 16);
	TBR_CHECK(preload != NULL, "malloc");
	sprintf(preload, "%s %s/delay.so", tb, dir);
	setenv("TBR_PRELOAD", preload, 1);
	setenv("TBR_DELAY_DIR", dir, 1);
}

/* In the re-executed program: the library is mapped, its files can go. */
static inline void tbr_remove_built(void)
{
	const char *dir = getenv("TBR_DELAY_DIR");
	char cmd[256];

	if (dir == NULL || strncmp(dir, "/tmp/tbr-delay-", 15) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* A delaying library's source: fallocate (and fallocate64) sleep $TBR_FALLOCATE_MS
 * milliseconds before the real call - where the statistics segment is allocated - after
 * creating the file $TBR_MARK when that is set (the moment the delay begins, for a story
 * that must act inside it). */
static const char tbr_fallocate_delay_source[] =
	"#define _GNU_SOURCE\n"
	"#include <dlfcn.h>\n"
	"#include <fcntl.h>\n"
	"#include <stdlib.h>\n"
	"#include <time.h>\n"
	"#include <unistd.h>\n"
	"int fallocate(int fd, int mode, long off, long len)\n"
	"{\n"
	"\tstatic int (*real)(int, int, long, long);\n"
	"\tconst char *ms = getenv(\"TBR_FALLOCATE_MS\"), *mark = getenv(\"TBR_MARK\");\n"
	"\tlong n = ms != NULL ? atol(ms) : 0;\n"
	"\tstruct timespec t = { n / 1000, (n % 1000) * 1000000 };\n"
	"\tif (!real)\n"
	"\t\treal = (int (*)(int, int, long, long))dlsym(RTLD_NEXT, \"fallocate\");\n"
	"\tif (mark != NULL)\n"
	"\t\tclose(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));\n"
	"\tnanosleep(&t, 0);\n"
	"\treturn real(fd, mode, off, len);\n"
	"}\n"
	"int fallocate64(int fd, int mode, long off, long len)\n"
	"{\n"
	"\treturn fallocate(fd, mode, off, len);\n"
	"}\n";

/*
 * The mark file: a delaying library creates $TBR_MARK the moment its delay begins, so that
 * the story acts inside the delay, not after a guessed sleep. tbr_mark_name (before
 * tbr_add_preload) names it `prefix` and the pid; in the re-executed program tbr_mark_path
 * gives it back, with no file left from an earlier run, and tbr_mark_wait waits up to
 * `ms` milliseconds for it to appear, then removes it for the next delay.
 */
static inline void tbr_mark_name(const char *prefix)
{
	char mark[128];

	snprintf(mark, sizeof(mark), "%s%d", prefix, (int)getpid());
	setenv("TBR_MARK", mark, 1);
}

static inline const char *tbr_mark_path(void)
{
	static char mark[128];

	snprintf(mark, sizeof(mark), "%s", getenv("TBR_MARK"));
	unlink(mark);
	return mark;
}

static inline int tbr_mark_wait(const char *mark, double ms)
{
	double until = tbt_now_ms() + ms;

	while (access(mark, F_OK) != 0 && tbt_now_ms() < until)
		tbt_sleep_ms(1);
	return unlink(mark) == 0;
}

/* The head of a delaying library's source: the headers its stories use, and named(), true
 * when the calling thread's name (prctl PR_SET_NAME, pthread_setname_np) is n - the
 * watchdog is "timebox-wd" - so that only the thread the story means is held. */
#define TBR_DELAY_HEAD                                                                       \
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <fcntl.h>\n#include <stdarg.h>\n"  \
	"#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n#include <unistd.h>\n"  \
	"#include <netinet/in.h>\n#include <netinet/tcp.h>\n#include <sys/prctl.h>\n"         \
	"#include <sys/socket.h>\n#include <sys/stat.h>\n#include <sys/syscall.h>\n"          \
	"static int named(const char *n)\n"                                                    \
	"{\n"                                                                                  \
	"	char b[16] = \"\";\n"                                                           \
	"	prctl(PR_GET_NAME, b);\n"                                                       \
	"	return strcmp(b, n) == 0;\n"                                                    \
	"}\n"

/*
 * A delaying library's syscall(), after TBR_DELAY_HEAD: timebox makes its raw calls through
 * syscall() (real.h: the identity checks' fstat, futex.h: the gate's wait). It makes the
 * real call, then, when `cond` holds - C source over the call's number n, its arguments
 * a[0..5] and its result r - creates $TBR_MARK (if set) and holds the calling thread 500 ms
 * before returning, where a preemption would. not_socket(n, a, r) is true after a
 * successful fstat of a number above 2 that is not a socket (a stale slot's, looked at).
 */
#define TBR_DELAY_SYSCALL(cond)                                                              \
	"static int not_socket(long n, const long *a, long r)\n"                              \
	"{\n"                                                                                  \
	"	struct stat *st = 0;\n"                                                         \
	"#ifdef SYS_fstat\n"                                                                   \
	"	if (n == SYS_fstat)\n"                                                          \
	"		st = (struct stat *)a[1];\n"                                            \
	"#else\n"                                                                              \
	"	if (n == SYS_newfstatat)\n"                                                     \
	"		st = (struct stat *)a[2];\n"                                            \
	"#endif\n"                                                                             \
	"	return st != 0 && r == 0 && a[0] > 2 && !S_ISSOCK(st->st_mode);\n"              \
	"}\n"                                                                                  \
	"long syscall(long n, ...)\n"                                                          \
	"{\n"                                                                                  \
	"	static long (*real)(long, ...);\n"                                              \
	"	struct timespec t = { 0, 500 * 1000000L };\n"                                   \
	"	const char *mark;\n"                                                            \
	"	long a[6], r;\n"                                                                \
	"	va_list ap;\n"                                                                  \
	"	va_start(ap, n);\n"                                                             \
	"	for (int i = 0; i < 6; i++)\n"                                                  \
	"		a[i] = va_arg(ap, long);\n"                                             \
	"	va_end(ap);\n"                                                                  \
	"	if (!real)\n"                                                                   \
	"		real = (long (*)(long, ...))dlsym(RTLD_NEXT, \"syscall\");\n"           \
	"	r = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);\n"                             \
	"	if (" cond ") {\n"                                                              \
	"		if ((mark = getenv(\"TBR_MARK\")) != 0)\n"                              \
	"			close(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));\n"     \
	"		nanosleep(&t, 0);\n"                                                    \
	"	}\n"                                                                            \
	"	return r;\n"                                                                    \
	"}\n"

/*
 * A delaying library's getsockopt(), after TBR_DELAY_HEAD and a nap(int ms) of the story's:
 * an expiry's TCP_INFO look is where it has made its identity check and raised `busy`. The
 * watchdog's first look is held 300 ms (so that a late reader's own expiry begins before
 * the watchdog's cut), thread "tbr-late"'s first look `late_ms` (a string: "1000").
 */
#define TBR_DELAY_TCP_INFO(late_ms)                                                          \
	"static int wd_info, t_info;\n"                                                        \
	"int getsockopt(int fd, int lvl, int name, void *v, socklen_t *l)\n"                   \
	"{\n"                                                                                  \
	"	static int (*real)(int, int, int, void *, socklen_t *);\n"                      \
	"	if (!real)\n"                                                                   \
	"		real = (int (*)(int, int, int, void *, socklen_t *))dlsym(RTLD_NEXT, "  \
	"\"getsockopt\");\n"                                                                   \
	"	if (lvl == IPPROTO_TCP && name == TCP_INFO) {\n"                                \
	"		if (named(\"timebox-wd\") && !wd_info++)\n"                             \
	"			nap(300);\n"                                                    \
	"		else if (named(\"tbr-late\") && !t_info++)\n"                           \
	"			nap(" late_ms ");\n"                                            \
	"	}\n"                                                                            \
	"	return real(fd, lvl, name, v, l);\n"                                            \
	"}\n"

/* A nap(int ms) for TBR_DELAY_TCP_INFO that a signal does not end: a preemption, with a
 * handler run meanwhile. */
#define TBR_DELAY_NAP_THROUGH_SIGNALS                                                        \
	"static void nap(int ms)\n"                                                            \
	"{\n"                                                                                  \
	"	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };\n"                   \
	"	while (nanosleep(&t, &t) != 0)\n"                                               \
	"		; /* a preemption: a signal's handler runs meanwhile */\n"              \
	"}\n"

#endif
