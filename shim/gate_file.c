/* gate_file.c - the shared gates' files: one directory per user (under $XDG_RUNTIME_DIR when
 * it is ours, else /dev/shm/timebox-<uid>), files opened without following links, checked
 * after the open, really allocated before they are mapped, and removed by their last user.
 *
 * Why each step: /dev/shm is world-writable, so a name there may have been created by
 * someone else (checked after the open, never before: no window to swap it); a tmpfs page
 * reserved only by ftruncate faults with SIGBUS on the first write once the tmpfs is full
 * (a container's 64 MB /dev/shm), so the page is allocated with fallocate, which fails
 * cleanly instead; a file is removed only while no other process holds its use lock. */
#include "gate_file.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fdtable.h"
#include "real.h"

#define LOCK_TRIES 200   /* x 0.5 ms: how long a use lock may wait for a remover */

static pthread_mutex_t dir_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int dir_fd = -1;
static char dir_path[256];

static int lock_byte(int fd, short type, off_t at)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1 };

	return tb_real.fcntl(fd, F_OFD_SETLK, &fl);
}

void tb_gate_file_close(int fd)
{
	int saved = errno;

	tb_fd_unmark_internal(fd);
	tb_real.close(fd);
	errno = saved;
}

/* $XDG_RUNTIME_DIR when it is a directory of ours closed to others (systemd's
 * /run/user/<uid>): no other user can create anything in it, so no one can squat our
 * directory there as they can in /dev/shm. */
static bool runtime_dir_usable(const char *xdg)
{
	struct stat st;

	return xdg != NULL && xdg[0] == '/' && strlen(xdg) < sizeof(dir_path) - 16 &&
	       stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       (st.st_mode & 077) == 0;
}

/* Chooses, creates and opens the gate directory (O_PATH: only a base for *at calls).
 * Called with dir_lock held. Returns the fd, or -1 with errno and why. */
static int open_dir(char *why, size_t whylen)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int fd;

	if (runtime_dir_usable(xdg))
		snprintf(dir_path, sizeof(dir_path), "%s/timebox", xdg);
	else
		snprintf(dir_path, sizeof(dir_path), "/dev/shm/timebox-%u", (unsigned)geteuid());
	if (mkdir(dir_path, 0700) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create %s: %s", dir_path, strerror(errno));
		return -1;
	}
	fd = tb_open_raw(AT_FDCWD, dir_path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, whylen, "cannot open %s: %s", dir_path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(why, whylen, "cannot stat %s: %s", dir_path, strerror(errno));
		tb_real.close(fd);
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		snprintf(why, whylen, "directory %s is owned by uid %u with mode %03o (want ours, "
			 "0700): another user may have created it", dir_path, (unsigned)st.st_uid,
			 (unsigned)(st.st_mode & 0777));
		tb_real.close(fd);
		errno = EPERM;
		return -1;
	}
	fd = tb_fd_move_internal(fd);
	if (fd < 0)
		snprintf(why, whylen, "cannot keep %s open: no fd above 2 is free under the fd "
			 "limit", dir_path);
	return fd;
}

/* The directory's fd, opened on first use; again == true after it was found removed. A
 * replaced fd stays open: another thread may be inside an openat on it right now. */
static int get_dir(bool again, char *why, size_t whylen)
{
	int fd = atomic_load(&dir_fd);

	if (fd >= 0 && !again)
		return fd;
	pthread_mutex_lock(&dir_lock);
	if (atomic_load(&dir_fd) == fd) {
		fd = open_dir(why, whylen);
		if (fd >= 0)
			atomic_store(&dir_fd, fd);
	} else {
		fd = atomic_load(&dir_fd); /* another thread opened it first */
	}
	pthread_mutex_unlock(&dir_lock);
	return fd;
}

int tb_gate_file_open(const char *name, struct stat *st, char *why, size_t whylen)
{
	int fd = -1;

	for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
		int dfd = get_dir(attempt > 0, why, whylen);

		if (dfd < 0)
			return -1;
		fd = tb_open_raw(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		/* ENOENT despite O_CREAT: the directory itself was removed; make it again. */
		if (fd < 0 && errno != ENOENT)
			break;
	}
	if (fd < 0) {
		snprintf(why, whylen, "cannot open: %s", strerror(errno));
		return -1;
	}
	fd = tb_fd_move_internal(fd);
	if (fd < 0) {
		snprintf(why, whylen, "cannot keep it open: no fd above 2 is free under the fd "
			 "limit");
		return -1;
	}
	if (fstat(fd, st) < 0) {
		snprintf(why, whylen, "cannot stat: %s", strerror(errno));
		tb_gate_file_close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode) || st->st_uid != geteuid() || (st->st_mode & 077) != 0) {
		snprintf(why, whylen, "owned by uid %u with mode %03o (want a regular file of "
			 "ours, 0600)", (unsigned)st->st_uid, (unsigned)(st->st_mode & 0777));
		tb_gate_file_close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* The use lock, waiting out a remover (who holds the write lock for one unlink only). */
static int use_lock(int fd)
{
	struct timespec pause = { 0, 500000 };

	for (int i = 0; i < LOCK_TRIES; i++) {
		if (lock_byte(fd, F_RDLCK, TB_GATE_USE_BYTE) == 0)
			return 0;
		if (errno != EAGAIN && errno != EACCES)
			return -1;
		nanosleep(&pause, NULL);
	}
	errno = EAGAIN;
	return -1;
}

int tb_gate_file_attach(const char *name, struct stat *st, void **page, char *why,
			size_t whylen)
{
	int fd = -1;
	void *p;

	for (int tries = 0; tries < 8; tries++) {
		fd = tb_gate_file_open(name, st, why, whylen);
		if (fd < 0)
			return -1;
		if (use_lock(fd) < 0 || fstat(fd, st) < 0) {
			snprintf(why, whylen, "cannot lock: %s", strerror(errno));
			goto fail;
		}
		if (st->st_nlink > 0)
			break;
		/* Its last user removed it as we opened it: open the one that replaces it. */
		tb_gate_file_close(fd);
		fd = -1;
	}
	if (fd < 0) {
		snprintf(why, whylen, "keeps being removed");
		errno = EAGAIN;
		return -1;
	}
	/* fallocate, not posix_fallocate: glibc emulates the latter by writing into the file
	 * where the call is unsupported, which would race other processes' page. Unsupported
	 * is simply a failure here (tmpfs supports it). Already allocated: a no-op. */
	if (fallocate(fd, 0, 0, TB_GATE_PAGE) < 0) {
		snprintf(why, whylen, "cannot allocate: %s", strerror(errno));
		/* Leave nothing behind that no one uses (a full tmpfs frees up later). */
		tb_gate_file_remove_if_unused(fd, name, st);
		goto fail;
	}
	p = mmap(NULL, TB_GATE_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		snprintf(why, whylen, "cannot map: %s", strerror(errno));
		goto fail;
	}
	*page = p;
	return fd;
fail:
	tb_gate_file_close(fd);
	return -1;
}

bool tb_gate_file_remove_if_unused(int use_fd, const char *name, const struct stat *id)
{
	int dfd = atomic_load(&dir_fd), saved = errno;
	bool removed = false;
	struct stat st;

	if (dfd < 0 || lock_byte(use_fd, F_WRLCK, TB_GATE_USE_BYTE) < 0)
		goto out; /* another process still uses it */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == id->st_dev &&
	    st.st_ino == id->st_ino)
		removed = unlinkat(dfd, name, 0) == 0;
	lock_byte(use_fd, F_RDLCK, TB_GATE_USE_BYTE);
out:
	errno = saved;
	return removed;
}

int tb_gate_file_reopen(int use_fd)
{
	char path[40];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", use_fd);
	fd = tb_open_raw(AT_FDCWD, path, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	fd = tb_fd_move_internal(fd);
	if (fd < 0)
		return -1;
	if (lock_byte(fd, F_RDLCK, TB_GATE_USE_BYTE) < 0) {
		tb_gate_file_close(fd);
		return -1;
	}
	return fd;
}

const char *tb_gate_file_dir(void)
{
	return dir_path[0] ? dir_path : "(no gate directory)";
}

void tb_gate_file_fork_child(void)
{
	pthread_mutex_init(&dir_lock, NULL);
}
