/* dlopen_caller.c - interposing dlopen must not make timebox the caller glibc sees.
 *
 * What could happen: to drop RTLD_DEEPBIND (dlopen_deepbind.c), timebox exports dlopen.
 * glibc's dlopen takes its caller from its return address, and searches the caller's
 * DT_RPATH for a bare name (and loads into the caller's namespace). A hook that called
 * libc's dlopen from a frame of its own would make libtimebox.so the caller: a library
 * that loads a plugin by bare name through its own RPATH would fail with "cannot open
 * shared object file", with or without RTLD_DEEPBIND. The hook forwards by a tail call.
 * The sequence: build libtbr_inner.so in one directory and libtbr_outer.so (DT_RPATH to
 * it) in another; under the library with a read timeout set, dlopen the outer library by
 * path and have it dlopen("libtbr_inner.so") itself, with and without RTLD_DEEPBIND.
 */
#include <dlfcn.h>
#include <sys/wait.h>

#include "regress.h"

static void build(const char *dir)
{
	char cmd[1024];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s/inner.c", dir);
	TBR_CHECK((f = fopen(cmd, "w")) != NULL, "fopen: %s", strerror(errno));
	fputs("int tbr_inner(void);\nint tbr_inner(void) { return 42; }\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s/outer.c", dir);
	TBR_CHECK((f = fopen(cmd, "w")) != NULL, "fopen: %s", strerror(errno));
	fputs("#include <dlfcn.h>\nvoid *tbr_outer(int flags);\n"
	      "void *tbr_outer(int flags) { return dlopen(\"libtbr_inner.so\", flags); }\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %1$s/in && cc -shared -fPIC -o %1$s/in/libtbr_inner.so %1$s/inner.c && "
		 "cc -shared -fPIC -Wl,--disable-new-dtags -Wl,-rpath,%1$s/in "
		 "-o %1$s/libtbr_outer.so %1$s/outer.c -ldl", dir);
	if (system(cmd) != 0)
		tbr_skip("cannot build the test libraries with cc");
}

/* Runs this program on the libraries in dir with LD_PRELOAD = preload (NULL: the
 * library, through tbr_preload_self); returns its exit status (1 on a signal). */
static int run_on(char **argv, const char *dir, const char *preload)
{
	int status;
	pid_t pid = fork();

	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		setenv("TBR_DLCALLER_DIR", dir, 1);
		if (preload == NULL)
			tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
		setenv("LD_PRELOAD", preload, 1);
		setenv("TBR_CHILD", "1", 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	return WIFSIGNALED(status) ? 1 : WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/tbr_dlcaller_XXXXXX", path[256];
	const char *dir = getenv("TBR_DLCALLER_DIR");
	void *(*outer)(int);
	void *h, *inner;

	(void)argc;
	if (dir == NULL) {
		/* Built before running under the library, then removed after. A sanitizer's
		 * runtime (first in TBR_PRELOAD) has a dlopen interceptor of its own, which may
		 * itself be the caller glibc sees: the story is told only where the runtime
		 * alone keeps the caller. */
		const char *all = getenv("TBR_PRELOAD"), *sp;
		char runtime[4096];
		int rc = 0;

		if (all == NULL || *all == '\0')
			tbr_skip("TBR_PRELOAD is not set (run through tests/regress/run.sh)");
		TBR_CHECK(mkdtemp(tmpl) != NULL, "mkdtemp: %s", strerror(errno));
		build(tmpl);
		sp = strrchr(all, ' ');
		if (sp != NULL) {
			snprintf(runtime, sizeof(runtime), "%.*s", (int)(sp - all), all);
			if (run_on(argv, tmpl, runtime) != 0)
				rc = TBR_SKIP;
		}
		if (rc == 0)
			rc = run_on(argv, tmpl, NULL);
		snprintf(path, sizeof(path), "rm -rf %s", tmpl);
		TBR_CHECK(system(path) == 0, "rm -rf %s", tmpl);
		if (rc == TBR_SKIP)
			tbr_skip("a library's RPATH is not searched with only the sanitizer's "
				 "runtime preloaded (its dlopen interceptor is the caller)");
		return rc;
	}
	snprintf(path, sizeof(path), "%s/libtbr_outer.so", dir);
	h = dlopen(path, RTLD_NOW);
	TBR_CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
	*(void **)&outer = dlsym(h, "tbr_outer");
	TBR_CHECK(outer != NULL, "dlsym tbr_outer: %s", dlerror());
	inner = outer(RTLD_NOW);
	TBR_CHECK(inner != NULL, "dlopen by the outer library's RPATH: %s", dlerror());
	inner = outer(RTLD_NOW | RTLD_DEEPBIND);
	TBR_CHECK(inner != NULL, "dlopen(RTLD_DEEPBIND) by the outer library's RPATH: %s",
		  dlerror());
	return 0;
}
