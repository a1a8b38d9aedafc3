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

#endif
