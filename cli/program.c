/* program.c - can LD_PRELOAD reach the program to run? Static and Go binaries, setuid/setgid and
 * file-capability binaries are refused with a reason; a #! script is judged by its interpreter.
 * A program that links a library known to bypass the hooks (liburing) is run with a warning. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
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

/*
 * The file's bytes from the last window read: the headers are read one small structure at
 * a time (a program header, a section header), and one pread per structure was 55 system
 * calls for a common binary, twice per `timebox run`. A window serves every small read it
 * holds; only elf_scan reads through it, and drops it first (its fd's number may have
 * named another file in the previous scan).
 */
#define WINDOW 8192

static struct {
	int fd; /* -1: none */
	off_t off;
	size_t len;
	unsigned char data[WINDOW];
} win = { .fd = -1 };

/* Reads len bytes at off; returns 0 or -1. */
static int read_at(int fd, void *buf, size_t len, off_t off)
{
	if (len > WINDOW / 4 || off < 0)
		return pread(fd, buf, len, off) == (ssize_t)len ? 0 : -1;
	if (win.fd != fd || off < win.off || (size_t)(off - win.off) + len > win.len) {
		ssize_t n = pread(fd, win.data, WINDOW, off);

		win.fd = n >= 0 ? fd : -1;
		win.off = off;
		win.len = n >= 0 ? (size_t)n : 0;
	}
	if (win.fd != fd || (size_t)(off - win.off) + len > win.len)
		return -1; /* past the end of the file */
	memcpy(buf, win.data + (off - win.off), len);
	return 0;
}

/* The ELF facts that matter here, for 32- and 64-bit files of the host's byte order. */
struct elf_facts {
	int has_interp;
	char interp[PATH_MAX]; /* PT_INTERP's path (the dynamic loader), "" when none or unread */
	int is_go;
	int links_uring; /* a DT_NEEDED entry names liburing.so* */
};

/* The header fields read here, widened from ELF32 or ELF64 into one form. */
struct elf_header {
	int is64;
	uint64_t phoff, shoff;
	unsigned phnum, phentsize, shnum, shentsize, shstrndx;
};

/* A section header's fields read here, widened likewise. */
struct elf_section {
	uint32_t type, link;
	uint64_t name, offset, size;
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

/* Reads the file header of class `class` (ELFCLASS32/64) into *h. Returns 0 or -1. */
static int read_header(int fd, int class, struct elf_header *h)
{
	memset(h, 0, sizeof(*h));
	if (class == ELFCLASS64) {
		Elf64_Ehdr e;

		if (read_at(fd, &e, sizeof(e), 0) < 0)
			return -1;
		*h = (struct elf_header){ 1, e.e_phoff, e.e_shoff, e.e_phnum, e.e_phentsize,
					  e.e_shnum, e.e_shentsize, e.e_shstrndx };
		return 0;
	}
	if (class == ELFCLASS32) {
		Elf32_Ehdr e;

		if (read_at(fd, &e, sizeof(e), 0) < 0)
			return -1;
		*h = (struct elf_header){ 0, e.e_phoff, e.e_shoff, e.e_phnum, e.e_phentsize,
					  e.e_shnum, e.e_shentsize, e.e_shstrndx };
		return 0;
	}
	return -1;
}

/* The p_type of program header i, and where its contents lie in the file. Returns 0 or -1. */
static int read_segment(int fd, const struct elf_header *h, unsigned i, uint32_t *type,
			uint64_t *offset, uint64_t *size)
{
	off_t at = (off_t)(h->phoff + (uint64_t)i * h->phentsize);

	if (h->is64) {
		Elf64_Phdr p;

		if (read_at(fd, &p, sizeof(p), at) < 0)
			return -1;
		*type = p.p_type;
		*offset = p.p_offset;
		*size = p.p_filesz;
	} else {
		Elf32_Phdr p;

		if (read_at(fd, &p, sizeof(p), at) < 0)
			return -1;
		*type = p.p_type;
		*offset = p.p_offset;
		*size = p.p_filesz;
	}
	return 0;
}

/* Section header i into *s. Returns 0 or -1. */
static int read_section(int fd, const struct elf_header *h, unsigned i, struct elf_section *s)
{
	off_t at = (off_t)(h->shoff + (uint64_t)i * h->shentsize);

	if (h->is64) {
		Elf64_Shdr e;

		if (read_at(fd, &e, sizeof(e), at) < 0)
			return -1;
		*s = (struct elf_section){ e.sh_type, e.sh_link, e.sh_name, e.sh_offset,
					    e.sh_size };
	} else {
		Elf32_Shdr e;

		if (read_at(fd, &e, sizeof(e), at) < 0)
			return -1;
		*s = (struct elf_section){ e.sh_type, e.sh_link, e.sh_name, e.sh_offset,
					    e.sh_size };
	}
	return 0;
}

/* The libraries whose I/O no preload sees: liburing submits through io_uring with inline
 * system calls. Matched as a DT_NEEDED prefix (liburing.so.2, liburing.so.2.3, ...). */
static const char *const bypass_libs[] = { "liburing.so", NULL };

/* Reads a whole section (at most 1 MiB) into a NUL-terminated allocation; NULL on failure. */
static char *read_section_data(int fd, const struct elf_section *s)
{
	char *data;

	if (s->size > (1 << 20) || (data = calloc(1, (size_t)s->size + 1)) == NULL)
		return NULL;
	if (read_at(fd, data, (size_t)s->size, (off_t)s->offset) < 0) {
		free(data);
		return NULL;
	}
	return data;
}

/* Sets f->links_uring when the dynamic section `dyn` (its strings in section dyn.link)
 * needs a library of bypass_libs. Unreadable tables: nothing is set. */
static void scan_needed(int fd, const struct elf_header *h, const struct elf_section *dyn,
			struct elf_facts *f)
{
	struct elf_section strsec;
	size_t entsize = h->is64 ? sizeof(Elf64_Dyn) : sizeof(Elf32_Dyn);
	char *strs, *ents;

	if (dyn->link >= h->shnum || read_section(fd, h, dyn->link, &strsec) < 0 ||
	    (strs = read_section_data(fd, &strsec)) == NULL)
		return;
	if ((ents = read_section_data(fd, dyn)) == NULL) {
		free(strs);
		return;
	}
	for (size_t off = 0; off + entsize <= dyn->size; off += entsize) {
		int64_t tag;
		uint64_t val;

		if (h->is64) {
			Elf64_Dyn d;

			memcpy(&d, ents + off, sizeof(d));
			tag = d.d_tag;
			val = d.d_un.d_val;
		} else {
			Elf32_Dyn d;

			memcpy(&d, ents + off, sizeof(d));
			tag = d.d_tag;
			val = d.d_un.d_val;
		}
		if (tag == DT_NULL)
			break;
		if (tag != DT_NEEDED || val >= strsec.size)
			continue;
		for (int i = 0; bypass_libs[i] != NULL; i++)
			if (strncmp(strs + val, bypass_libs[i], strlen(bypass_libs[i])) == 0)
				f->links_uring = 1;
	}
	free(ents);
	free(strs);
}

/* Sets f->is_go when a section is named like Go's, and f->links_uring from the dynamic
 * section. No readable section names: not Go. */
static void scan_sections(int fd, const struct elf_header *h, struct elf_facts *f)
{
	struct elf_section strs, sh;
	char *names = NULL;

	if (h->shstrndx == SHN_UNDEF || h->shstrndx >= h->shnum || h->shnum >= 65535)
		return;
	if (read_section(fd, h, h->shstrndx, &strs) < 0 ||
	    (names = read_section_data(fd, &strs)) == NULL)
		return;
	for (unsigned i = 0; i < h->shnum; i++) {
		if (read_section(fd, h, i, &sh) < 0)
			break;
		if (sh.name < strs.size && is_go_section(names + sh.name))
			f->is_go = 1;
		if (sh.type == SHT_DYNAMIC)
			scan_needed(fd, h, &sh, f);
	}
	free(names);
}

/* Reads the facts of an ELF file. Returns 0, or -1 when it is not a readable ELF file. */
static int elf_scan(int fd, struct elf_facts *f)
{
	unsigned char ident[EI_NIDENT];
	struct elf_header h;

	memset(f, 0, sizeof(*f));
	win.fd = -1; /* the fd's number may have named another file */
	if (read_at(fd, ident, sizeof(ident), 0) < 0 || memcmp(ident, ELFMAG, SELFMAG) != 0 ||
	    read_header(fd, ident[EI_CLASS], &h) < 0)
		return -1;
	for (unsigned i = 0; i < h.phnum && i < 4096; i++) {
		uint32_t type;
		uint64_t offset, size;

		if (read_segment(fd, &h, i, &type, &offset, &size) < 0)
			return -1;
		if (type != PT_INTERP)
			continue;
		f->has_interp = 1;
		if (size > 0 && size < sizeof(f->interp) &&
		    read_at(fd, f->interp, (size_t)size, (off_t)offset) == 0)
			f->interp[size - 1] = '\0'; /* the segment holds the NUL */
	}
	scan_sections(fd, &h, f);
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
	/* A warning, not a refusal: the program's plain socket calls are still governed. */
	if (f.links_uring)
		fprintf(stderr,
			"timebox: %s links liburing: I/O submitted through io_uring is not "
			"governed (docs/limitations.md)\n",
			path);
	return 0;
}

int tb_program_check(const char *file, char *why, size_t len)
{
	char path[PATH_MAX];

	if (find_program(file, path) < 0)
		return 0; /* exec reports "not found" with the shell's status */
	return check_one(path, 0, why, len);
}

/* True when the loader path names musl's: /lib/ld-musl-x86_64.so.1 and its kin. */
static int is_musl_loader(const char *interp)
{
	const char *base = strrchr(interp, '/');

	return strncmp(base != NULL ? base + 1 : interp, "ld-musl-", 8) == 0;
}

static enum tb_libc libc_of(const char *path, int depth)
{
	struct elf_facts f;
	char interp[PATH_MAX], why[8];
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return TB_LIBC_GLIBC;
	r = script_interpreter(fd, path, interp, why, sizeof(why));
	if (r != 0) {
		close(fd);
		return r > 0 && depth < MAX_SCRIPT_DEPTH ? libc_of(interp, depth + 1)
							 : TB_LIBC_GLIBC;
	}
	r = elf_scan(fd, &f);
	close(fd);
	return r == 0 && is_musl_loader(f.interp) ? TB_LIBC_MUSL : TB_LIBC_GLIBC;
}

enum tb_libc tb_program_libc(const char *file)
{
	char path[PATH_MAX];

	if (find_program(file, path) < 0)
		return TB_LIBC_GLIBC;
	return libc_of(path, 0);
}
