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

int main(int argc, char **argv)
{
	char tmpl[] = "/tmp/tbr_dlcaller_XXXXXX", path[256];
	const char *dir = getenv("TBR_DLCALLER_DIR");
	void *(*outer)(int);
	void *h, *inner;

	(void)argc;
	if (dir == NULL) {
		/* Built before running under the library, then removed after. */
		int status;
		pid_t pid;

		TBR_CHECK(mkdtemp(tmpl) != NULL, "mkdtemp: %s", strerror(errno));
		build(tmpl);
		pid = fork();
		TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			setenv("TBR_DLCALLER_DIR", tmpl, 1);
			tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
		}
		waitpid(pid, &status, 0);
		snprintf(path, sizeof(path), "rm -rf %s", tmpl);
		TBR_CHECK(system(path) == 0, "rm -rf %s", tmpl);
		if (WIFSIGNALED(status))
			return 1;
		return WEXITSTATUS(status);
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
