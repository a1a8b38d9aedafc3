/* target.c - can LD_PRELOAD reach the program? Static and Go binaries, setuid/setgid and
 * file-capability binaries are refused with a reason; a #! script is judged by its interpreter. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"

#define MAX_SCRIPT_DEPTH 4

/* Finds `file` the way execvp does: as given when it holds a slash, else along PATH.
 * Returns 0 with the path in out (PATH_MAX bytes), or -1 when not found. */
static int find_program(const char *file, char *out)
{
	const char *path = getenv("PATH"), *p;

	if (strchr(file, '/') != NULL) {
		snprintf(out, PATH_MAX, "%s", file);
		return access(out, F_OK) == 0 ? 0 : -1;
	}
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path;; p++) {
		const char *end = strchrnul(p, ':');
		int n = (int)(end - p);
		struct stat st;

		snprintf(out, PATH_MAX, "%.*s%s%s", n, p, n ? "/" : "", file);
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
			return 0;
		if (*end == '\0')
			return -1;
		p = end;
	}
}

/* Reads len bytes at off; returns 0 or -1. */
static int read_at(int fd, void *buf, size_t len, off_t off)
{
	return pread(fd, buf, len, off) == (ssize_t)len ? 0 : -1;
}

/* The ELF facts that matter here, for 32- and 64-bit files of the host's byte order. */
struct elf_facts {
	int has_interp;
	int is_go;
};

static const char *const go_sections[] = { ".go.buildinfo", ".note.go.buildid", ".gopclntab",
					   NULL };

static int is_go_section(const char *name)
{
	for (int i = 0; go_sections[i] != NULL; i++)
		if (strcmp(name, go_sections[i]) == 0)
			return 1;
	return 0;
}

#define ELF_SCAN(Ehdr, Phdr, Shdr)                                                          \
	do {                                                                                \
		Ehdr eh;                                                                    \
		char *names = NULL;                                                         \
		if (read_at(fd, &eh, sizeof(eh), 0) < 0)                                    \
			return -1;                                                          \
		for (unsigned i = 0; i < eh.e_phnum && i < 4096; i++) {                     \
			Phdr ph;                                                            \
			if (read_at(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * \
							       eh.e_phentsize)) < 0)        \
				return -1;                                                  \
			if (ph.p_type == PT_INTERP)                                         \
				f->has_interp = 1;                                          \
		}                                                                           \
		if (eh.e_shstrndx != SHN_UNDEF && eh.e_shstrndx < eh.e_shnum &&             \
		    eh.e_shnum < 65535) {                                                   \
			Shdr strs;                                                          \
			if (read_at(fd, &strs, sizeof(strs),                                \
				    (off_t)(eh.e_shoff + (uint64_t)eh.e_shstrndx *          \
							     eh.e_shentsize)) < 0 ||        \
			    strs.sh_size > (1 << 20) ||                                     \
			    (names = calloc(1, (size_t)strs.sh_size + 1)) == NULL ||        \
			    read_at(fd, names, (size_t)strs.sh_size, (off_t)strs.sh_offset) < 0) { \
				free(names);                                                \
				return 0; /* no section names: not judged as Go */          \
			}                                                                   \
			for (unsigned i = 0; i < eh.e_shnum; i++) {                         \
				Shdr sh;                                                    \
				if (read_at(fd, &sh, sizeof(sh),                            \
					    (off_t)(eh.e_shoff + (uint64_t)i * eh.e_shentsize)) < 0) \
					break;                                              \
				if (sh.sh_name < strs.sh_size && is_go_section(names + sh.sh_name)) \
					f->is_go = 1;                                       \
			}                                                                   \
			free(names);                                                        \
		}                                                                           \
	} while (0)

/* Reads the facts of an ELF file. Returns 0, or -1 when it is not a readable ELF file. */
static int elf_scan(int fd, struct elf_facts *f)
{
	unsigned char ident[EI_NIDENT];

	memset(f, 0, sizeof(*f));
	if (read_at(fd, ident, sizeof(ident), 0) < 0 || memcmp(ident, ELFMAG, SELFMAG) != 0)
		return -1;
	if (ident[EI_CLASS] == ELFCLASS64)
		ELF_SCAN(Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr);
	else if (ident[EI_CLASS] == ELFCLASS32)
		ELF_SCAN(Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr);
	else
		return -1;
	return 0;
}

/* The interpreter of a #! script into interp (PATH_MAX), resolving "/usr/bin/env NAME".
 * Returns 1 for a script, 0 for anything else, -1 for a script whose interpreter is not
 * found (why is set). */
static int script_interpreter(int fd, const char *path, char *interp, char *why, size_t len)
{
	char line[256], *p, *arg;
	ssize_t n = pread(fd, line, sizeof(line) - 1, 0);

	if (n < 2 || line[0] != '#' || line[1] != '!')
		return 0;
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	p = line + 2 + strspn(line + 2, " \t");
	arg = p + strcspn(p, " \t");
	if (*arg != '\0') {
		*arg++ = '\0';
		arg += strspn(arg, " \t");
		arg[strcspn(arg, " \t")] = '\0';
	}
	if (strcmp(p, "/usr/bin/env") == 0 || strcmp(p, "/bin/env") == 0) {
		if (strncmp(arg, "-S", 2) == 0 || *arg == '\0' || *arg == '-') {
			snprintf(interp, PATH_MAX, "%s", p); /* env's options: judge env itself */
			return 1;
		}
		if (find_program(arg, interp) < 0) {
			snprintf(why, len, "%s: its interpreter '%s' is not on PATH", path, arg);
			return -1;
		}
		return 1;
	}
	snprintf(interp, PATH_MAX, "%s", p);
	return 1;
}

static int check_one(const char *path, int depth, char *why, size_t len)
{
	struct elf_facts f;
	struct stat st;
	char interp[PATH_MAX];
	int fd, r;

	if (stat(path, &st) < 0)
		return 0; /* exec will say why */
	/* The loader runs these in secure mode (AT_SECURE) and drops LD_PRELOAD. A set-id bit
	 * naming the caller's own uid or gid changes nothing, so it is not refused. */
	if ((st.st_mode & S_ISUID) && st.st_uid != getuid()) {
		snprintf(why, len, "%s is setuid: the dynamic loader runs it in secure mode and "
				   "ignores LD_PRELOAD, so timebox cannot govern it",
			 path);
		return -1;
	}
	if ((st.st_mode & S_ISGID) && st.st_gid != getgid()) {
		snprintf(why, len, "%s is setgid: the dynamic loader runs it in secure mode and "
				   "ignores LD_PRELOAD, so timebox cannot govern it",
			 path);
		return -1;
	}
	if (getxattr(path, "security.capability", NULL, 0) > 0) {
		snprintf(why, len, "%s has file capabilities (security.capability): the dynamic "
				   "loader runs it in secure mode and ignores LD_PRELOAD",
			 path);
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* not readable (execute-only): exec decides, unjudged */
	r = script_interpreter(fd, path, interp, why, len);
	if (r != 0) {
		close(fd);
		if (r < 0)
			return -1;
		if (depth >= MAX_SCRIPT_DEPTH)
			return 0;
		if (check_one(interp, depth + 1, why, len) < 0) {
			char inner[400];

			snprintf(inner, sizeof(inner), "%s", why);
			snprintf(why, len, "%s is a script run by %s; %s", path, interp, inner);
			return -1;
		}
		return 0;
	}
	r = elf_scan(fd, &f);
	close(fd);
	if (r < 0)
		return 0; /* not ELF, not #!: the shell's business */
	if (f.is_go) {
		snprintf(why, len, "%s is a Go program: Go makes its network calls with raw "
				   "system calls, which LD_PRELOAD cannot reach",
			 path);
		return -1;
	}
	if (!f.has_interp) {
		snprintf(why, len, "%s is statically linked: there is no dynamic loader to "
				   "preload libtimebox.so into it",
			 path);
		return -1;
	}
	return 0;
}

int tb_target_check(const char *file, char *why, size_t len)
{
	char path[PATH_MAX];

	if (find_program(file, path) < 0)
		return 0; /* exec reports "not found" with the shell's status */
	return check_one(path, 0, why, len);
}
