/* dlopen_library.c - a program that dlopen()s the library was aborted by it.
 *
 * What happened: timebox's binding checks that no libc name resolves to timebox itself
 * (forwarding would recurse). It compared dlsym(RTLD_NEXT, name) with the address of
 * `name` as seen from inside the library - but in a library loaded with dlopen (C dlopen,
 * python ctypes.CDLL) that address is libc's own, since a dlopen'ed library is not ahead
 * of libc in the global scope. Both were libc's function, and the constructor aborted its
 * host with "library loaded twice?", even with no TIMEBOX_* variable set.
 * The sequence: dlopen(libtimebox.so) (RTLD_LOCAL, then RTLD_GLOBAL with a read timeout
 * set), then ordinary I/O -> no abort; the same through python3 ctypes; and the library
 * preloaded twice (the same path twice, and two copies at different paths) with a read
 * timeout against a stalled peer -> the read is cut once, at >= 250 ms, nothing aborts.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "regress.h"

static char lib[4096];     /* the library: last word of TBR_PRELOAD */
static char runtime[4096]; /* what precedes it (a sanitizer runtime), or "" */

static void split_preload(void)
{
	const char *all = getenv("TBR_PRELOAD");
	const char *last;

	if (all == NULL || *all == '\0')
		tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
	last = strrchr(all, ' ');
	snprintf(lib, sizeof(lib), "%s", last != NULL ? last + 1 : all);
	snprintf(runtime, sizeof(runtime), "%.*s", last != NULL ? (int)(last - all) : 0, all);
}

/* Pipe I/O and a loopback exchange: the host still works. */
static void some_io(void)
{
	char buf[4] = "abc";
	int p[2], port, lfd, fd, peer;

	TBR_CHECK(pipe(p) == 0, "pipe: %s", strerror(errno));
	TBR_CHECK(write(p[1], buf, 3) == 3 && read(p[0], buf, 3) == 3, "pipe I/O: %s",
		  strerror(errno));
	close(p[0]);
	close(p[1]);
	lfd = tbr_listen(&port);
	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(send(peer, "hi", 2, 0) == 2, "send: %s", strerror(errno));
	TBR_CHECK(recv(fd, buf, 2, MSG_WAITALL) == 2, "recv: %s", strerror(errno));
	close(peer);
	close(fd);
	close(lfd);
}

/* Child modes, each run in a fresh process (its own environment). */
static int run_mode(const char *mode)
{
	if (strcmp(mode, "dlopen") == 0 || strcmp(mode, "dlopen-global") == 0) {
		int flags = RTLD_NOW | (strcmp(mode, "dlopen") == 0 ? RTLD_LOCAL : RTLD_GLOBAL);
		void *h = dlopen(lib, flags);

		TBR_CHECK(h != NULL, "dlopen: %s", dlerror());
		some_io();
		return 0;
	}
	if (strcmp(mode, "stall") == 0) {
		/* Preloaded (possibly twice): a peer that accepts and never answers. The
		 * listener never calls accept: the kernel completes the handshake anyway. */
		int port, lfd = tbr_listen(&port), fd = tbr_connect(port);
		double t0 = tbt_now_ms(), ms;
		char byte;
		ssize_t r;

		r = read(fd, &byte, 1);
		ms = tbt_now_ms() - t0;
		TBR_CHECK(r == -1 && errno == ETIMEDOUT, "stalled read returned %zd errno %s after "
			  "%.0f ms", r, tbt_errno_name(errno), ms);
		TBR_CHECK(ms >= 250 && ms < 250 + 1000, "stalled read cut after %.0f ms", ms);
		fprintf(stderr, "stalled read cut after %.0f ms\n", ms);
		close(fd);
		close(lfd);
		some_io();
		return 0;
	}
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}

/* Runs argv with LD_PRELOAD and one TIMEBOX_* setting (or none); fails on a signal. */
static void run_child(char *const argv[], const char *preload, const char *setting)
{
	pid_t pid = fork();
	int status;

	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		unsetenv("TIMEBOX_READ_TIMEOUT");
		if (setting != NULL)
			putenv((char *)setting);
		if (preload != NULL && *preload != '\0')
			setenv("LD_PRELOAD", preload, 1);
		else
			unsetenv("LD_PRELOAD");
		setenv("TBR_CHILD", "1", 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	TBR_CHECK(!WIFSIGNALED(status), "%s %s (LD_PRELOAD=%s %s): killed by signal %d",
		  argv[0], argv[1] ? argv[1] : "", preload ? preload : "", setting ? setting : "",
		  WTERMSIG(status));
	TBR_CHECK(WEXITSTATUS(status) == 0, "%s %s (LD_PRELOAD=%s %s): exit %d", argv[0],
		  argv[1] ? argv[1] : "", preload ? preload : "", setting ? setting : "",
		  WEXITSTATUS(status));
}

static void copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	TBR_CHECK(in >= 0, "open %s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	TBR_CHECK(out >= 0, "open %s: %s", to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		TBR_CHECK(write(out, buf, (size_t)n) == n, "write %s: %s", to, strerror(errno));
	close(in);
	close(out);
}

int main(int argc, char **argv)
{
	static const char py[] = "import ctypes, sys, os\n"
				 "ctypes.CDLL(sys.argv[1])\n"
				 "r, w = os.pipe(); os.write(w, b'ok'); assert os.read(r, 2) == b'ok'\n";
	char self[] = "/proc/self/exe", mode_dl[] = "dlopen", mode_dlg[] = "dlopen-global";
	char mode_stall[] = "stall", python[] = "python3", dash_c[] = "-c";
	char dir[] = "/tmp/tbr_dlopen_XXXXXX", copy[4096 + 32], twice[3 * 4096 + 64];
	char both[3 * 4096 + 128];

	split_preload();
	if (argc > 1)
		return run_mode(argv[1]);
	/* dlopen'ed from C, without and with a setting (the sanitizer runtime, if any, is
	 * preloaded: a sanitized library needs it first). */
	run_child((char *[]){ self, mode_dl, NULL }, runtime, NULL);
	run_child((char *[]){ self, mode_dlg, NULL }, runtime, "TIMEBOX_READ_TIMEOUT=250ms");
	/* python3 ctypes.CDLL, the same two ways. */
	if (*runtime == '\0' && access("/usr/bin/python3", X_OK) == 0) {
		run_child((char *[]){ python, dash_c, (char *)py, lib, NULL }, NULL, NULL);
		run_child((char *[]){ python, dash_c, (char *)py, lib, NULL }, NULL,
			  "TIMEBOX_READ_TIMEOUT=250ms");
	}
	/* Preloaded twice: the same path, then two copies at different paths. */
	snprintf(twice, sizeof(twice), "%s%s%s %s", runtime, *runtime ? " " : "", lib, lib);
	run_child((char *[]){ self, mode_stall, NULL }, twice, "TIMEBOX_READ_TIMEOUT=250ms");
	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(copy, sizeof(copy), "%s/libtimebox-copy.so", dir);
	copy_file(lib, copy);
	snprintf(both, sizeof(both), "%s%s%s %s", runtime, *runtime ? " " : "", lib, copy);
	run_child((char *[]){ self, mode_stall, NULL }, both, "TIMEBOX_READ_TIMEOUT=250ms");
	unlink(copy);
	rmdir(dir);
	return 0;
}
