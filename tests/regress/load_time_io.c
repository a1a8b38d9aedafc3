/* load_time_io.c - I/O before timebox's constructor, and inside the allocator that dlsym
 * calls while timebox binds its symbols.
 *
 * What could happen (socket_wrapper's and libfaketime's histories): the hooks are live from
 * the moment the library is mapped, before its constructor ran and before the real
 * functions are bound. Another preloaded library's constructor that reads and writes
 * sockets then reaches a hook with nothing set up; and binding calls dlsym, which may call
 * calloc, which a preloaded allocator may implement with a write() of its own - re-entering
 * the binding that is under way. Either can recurse without end, deadlock on the binding's
 * once-lock, or crash. The sequence: build libtbr_early.so, whose constructor makes a TCP
 * exchange with a loopback echo peer and writes to a pipe, and whose calloc writes one byte
 * to a pipe each time it is called; run this program with it before and after the library
 * in LD_PRELOAD (each order initialises a different one first), with a read timeout set:
 * every run must finish its exchange, see its byte count, and then still be governed
 * (a stalled read is cut at its limit). A guard, not a reproduction: this passed before
 * too; whether glibc's dlsym allocates (it does for its error state) and so reaches the
 * writing calloc during the binding depends on the symbols looked up, and the program
 * prints how many bytes calloc wrote during start-up.
 *
 * What happened under SANITIZE=thread: the early exchange's connect was interrupted by the
 * timer (the sanitizer's runtime restarts nothing), so the run was skipped - except once in
 * CI, where the probe's connect won the race and the real run's did not. Made robust to
 * EINTR, the early library then showed two real races with the thread it starts: the fd
 * table's capacity was read relaxed, so a thread that saw it set could read the table's
 * pointer unset (now acquire, a plain load on x86); and the binding's stores into the
 * real-function table raced with that thread's calls (now atomic stores, and not
 * instrumented: either value read is right). ThreadSanitizer's report of the second also
 * deadlocked its own symbolizer (the run hung for 60 s). And the binding, when a signal
 * handler's write is the first call, changed the handler's errno: it is kept now.
 *
 * What happened under SANITIZE=undefined (CI; 1 run in 7 here): the run hung for 60 s. The
 * early library's calloc wrote, which bound the real functions inside pthread_once; the
 * 100 us timer's handler ran in that thread after pthread_once had claimed the binding but
 * before its routine had marked the thread as binding, and its write called pthread_once
 * again, waiting for itself (gdb: tb_real_bind twice on one stack, the inner one in
 * futex_wait on bind_once). The thread is marked before pthread_once now: such a handler's
 * write is made as a system call, as one during the binding already was.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "regress.h"

static const char early_c[] =
	"#define _GNU_SOURCE\n"
	"#include <arpa/inet.h>\n#include <errno.h>\n#include <stdlib.h>\n#include <string.h>\n"
	"#include <sys/socket.h>\n#include <unistd.h>\n"
	"extern void *__libc_calloc(size_t, size_t);\n"
	"#include <pthread.h>\n#include <signal.h>\n#include <sys/time.h>\n"
	"int tbr_early_ok = -1;\n"
	"static void on_alarm(int sig)\n"
	"{\n"
	"	const char *p = getenv(\"TBR_EARLY_PIPE\");\n"
	"	(void)sig;\n"
	"	if (p != NULL && write(atoi(p), \"s\", 1) < 0) {}\n"
	"}\n"
	"static void *writer(void *arg)\n"
	"{\n"
	"	int fd = atoi((const char *)arg);\n"
	"	for (int i = 0; i < 2000; i++)\n"
	"		if (write(fd, \"w\", 1) < 0) {}\n"
	"	return NULL;\n"
	"}\n"
	"void *calloc(size_t n, size_t m)\n"
	"{\n"
	"	const char *p = getenv(\"TBR_EARLY_PIPE\");\n"
	"	if (p != NULL && write(atoi(p), \"c\", 1) < 0) {}\n"
	"	return __libc_calloc(n, m);\n"
	"}\n"
	"__attribute__((constructor)) static void early(void)\n"
	"{\n"
	"	const char *port = getenv(\"TBR_EARLY_PORT\"), *p = getenv(\"TBR_EARLY_PIPE\");\n"
	"	struct sockaddr_in a = { .sin_family = AF_INET };\n"
	"	char buf[8];\n"
	"	int fd;\n"
	"	ssize_t w;\n"
	"	size_t got = 0;\n"
	"	struct itimerval every = { { 0, 100 }, { 0, 100 } };\n"
	"	pthread_t t;\n"
	"	if (port == NULL || p == NULL)\n"
	"		return;\n"
	"	/* While the next constructors run (timebox binding its symbols among them): a\n"
	"	 * thread writing, and a handler writing every 100 us. */\n"
	"	signal(SIGALRM, on_alarm);\n"
	"	setitimer(ITIMER_REAL, &every, NULL);\n"
	"	if (pthread_create(&t, NULL, writer, (void *)p) == 0)\n"
	"		pthread_detach(t);\n"
	"	a.sin_port = htons((unsigned short)atoi(port));\n"
	"	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);\n"
	"	fd = socket(AF_INET, SOCK_STREAM, 0);\n"
	"	if (fd < 0)\n"
	"		return;\n"
	"	/* The timer interrupts: a sanitizer's runtime restarts nothing. */\n"
	"	while (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)\n"
	"		if (errno == EISCONN)\n"
	"			break;\n"
	"		else if (errno != EINTR && errno != EALREADY)\n"
	"			return;\n"
	"	while ((w = write(fd, \"early\", 5)) < 0 && errno == EINTR) {}\n"
	"	while (w == 5 && got < 5) {\n"
	"		ssize_t r = recv(fd, buf + got, 5 - got, 0);\n"
	"		if (r > 0)\n"
	"			got += (size_t)r;\n"
	"		else if (!(r < 0 && errno == EINTR))\n"
	"			break;\n"
	"	}\n"
	"	if (got == 5 && memcmp(buf, \"early\", 5) == 0)\n"
	"		tbr_early_ok = 1;\n"
	"	close(fd);\n"
	"	if (write(atoi(p), \"k\", 1) < 0) {}\n"
	"}\n";

static int lfd;

/* Echoes what each connection sends; a connection that sends "stall" gets nothing. */
static void *echo(void *arg)
{
	(void)arg;
	for (;;) {
		char buf[64];
		ssize_t n;
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		while ((n = read(c, buf, sizeof(buf))) > 0)
			if (strncmp(buf, "stall", 5) != 0 && write(c, buf, (size_t)n) != n)
				break;
		close(c);
	}
}

static void child(int port)
{
	extern int tbr_early_ok __attribute__((weak));
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	setitimer(ITIMER_REAL, &off, NULL);
	tbt_sleep_ms(100); /* the early writer thread's 2000 writes are done by now */
	int fd;
	double t0, ms;
	char c;
	ssize_t r;

	fd = tbr_connect(port);
	t0 = tbt_now_ms();
	TBR_CHECK(&tbr_early_ok != NULL && tbr_early_ok == 1,
		  "the early library's exchange before timebox's constructor failed");
	if (getenv("TBR_EARLY_PROBE") != NULL)
		exit(0); /* the probe without timebox: the early library works here */
	TBR_CHECK(write(fd, "stall", 5) == 5, "write: %s", strerror(errno));
	r = read(fd, &c, 1);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(r == -1 && errno == ETIMEDOUT && ms >= 300 && ms < 2000,
		  "stalled read after start-up: %zd %s after %.0f ms", r, tbt_errno_name(errno), ms);
	exit(0);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/tbr-early-XXXXXX", cmd[512], lib[256], order[2][600], pipe_s[16],
	     port_s[16], buf[16384];
	const char *tb = getenv("TBR_PRELOAD");
	int port, p[2], status;
	pthread_t t;

	if (getenv("TBR_EARLY_CHILD") != NULL) {
		port = atoi(getenv("TBR_EARLY_PORT"));
		child(port);
	}
	(void)argc;
	if (tb == NULL || *tb == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(cmd, sizeof(cmd), "%s/early.c", dir);
	{
		FILE *f = fopen(cmd, "w");

		TBR_CHECK(f != NULL, "fopen: %s", strerror(errno));
		fputs(early_c, f);
		fclose(f);
	}
	snprintf(lib, sizeof(lib), "%s/libtbr_early.so", dir);
	snprintf(cmd, sizeof(cmd), "cc -shared -fPIC -O1 -pthread -o %s %s/early.c", lib, dir);
	if (system(cmd) != 0)
		tbr_skip("cannot build the test library with cc");
	lfd = tbr_listen(&port);
	pthread_create(&t, NULL, echo, NULL);
	/* tb may hold a sanitizer runtime first: keep it first in both orders. */
	{
		const char *sp = strrchr(tb, ' ');

		if (sp == NULL) {
			snprintf(order[0], sizeof(order[0]), "%s %s", lib, tb);
		} else {
			snprintf(order[0], sizeof(order[0]), "%.*s %s %s", (int)(sp - tb), tb, lib,
				 sp + 1);
		}
		snprintf(order[1], sizeof(order[1]), "%s %s", tb, lib);
	}
	/* Under a sanitizer, first the early library with the sanitizer's runtime alone: if
	 * that already fails (ASan's runtime crashes when a preloaded constructor starts a
	 * thread and a timer this early; under TSan the early exchange fails), there is
	 * nothing of timebox's to test here. */
	if (strchr(tb, ' ') != NULL) {
		char probe[700], port_p[16];
		const char *sp = strrchr(tb, ' ');
		pid_t pid;

		snprintf(probe, sizeof(probe), "%.*s %s", (int)(sp - tb), tb, lib);
		snprintf(port_p, sizeof(port_p), "%d", port);
		pid = fork();
		TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			int devnull = open("/dev/null", O_WRONLY);

			snprintf(pipe_s, sizeof(pipe_s), "%d", devnull);
			setenv("TBR_EARLY_PIPE", pipe_s, 1);
			setenv("TBR_EARLY_PORT", port_p, 1);
			setenv("TBR_EARLY_CHILD", "1", 1);
			setenv("TBR_EARLY_PROBE", "1", 1);
			setenv("LD_PRELOAD", probe, 1);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
			if (system(cmd) != 0)
				fprintf(stderr, "could not remove %s\n", dir);
			tbr_skip("the sanitizer's runtime alone fails with the early library "
				 "(probe: this program without timebox did not exit 0)");
		}
	}
	for (int k = 0; k < 2; k++) {
		pid_t pid;
		ssize_t n;

		TBR_CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
		pid = fork();
		TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			close(p[0]);
			snprintf(pipe_s, sizeof(pipe_s), "%d", p[1]);
			snprintf(port_s, sizeof(port_s), "%d", port);
			setenv("TBR_EARLY_PIPE", pipe_s, 1);
			setenv("TBR_EARLY_PORT", port_s, 1);
			setenv("TBR_EARLY_CHILD", "1", 1);
			setenv("TIMEBOX_READ_TIMEOUT", "300ms", 1);
			setenv("LD_PRELOAD", order[k], 1);
			/* When the handler's write is the first call, the binding (dlsym) runs
			 * inside the handler: not async-signal-safe, a known limit of binding
			 * at first use (docs/reliability.md), which ThreadSanitizer reports. */
			if (getenv("TSAN_OPTIONS") != NULL) {
				char o[512];

				snprintf(o, sizeof(o), "%s:report_signal_unsafe=0",
					 getenv("TSAN_OPTIONS"));
				setenv("TSAN_OPTIONS", o, 1);
			}
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		close(p[1]);
		n = 0;
		for (ssize_t r; (r = read(p[0], buf + n, sizeof(buf) - 1 - (size_t)n)) > 0;)
			n += r;
		close(p[0]);
		buf[n] = '\0';
		TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "LD_PRELOAD=\"%s\": the program %s %d", order[k],
			  WIFSIGNALED(status) ? "died of signal" : "exited",
			  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		TBR_CHECK(strchr(buf, 'k') != NULL, "order %d: the early constructor did not finish",
			  k);
		{
			size_t w = 0, sig = 0, cal = 0;

			for (ssize_t i = 0; i < n; i++) {
				w += buf[i] == 'w';
				sig += buf[i] == 's';
				cal += buf[i] == 'c';
			}
			TBR_CHECK(w == 2000, "order %d: the early thread's writes: %zu of 2000 arrived",
				  k, w);
			fprintf(stderr, "order %d: ok; during start-up calloc wrote %zu bytes, the "
				"handler %zu, the thread all 2000\n", k, cal, sig);
		}
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	TBR_CHECK(system(cmd) == 0, "%s", cmd);
	return 0;
}
