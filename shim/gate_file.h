/* gate_file.h - where shared gate files live and how they are opened, allocated, mapped and
 * removed: every step checked, because the directory is shared with the rest of the host. */
#ifndef TB_GATE_FILE_H
#define TB_GATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#define TB_GATE_PAGE 4096        /* the mapped page: futex word, hints, counters */
#define TB_GATE_USE_BYTE 0       /* every process using the file holds a read lock here */
#define TB_GATE_SLOT_BASE 4096   /* byte TB_GATE_SLOT_BASE + i is slot i */
/* The waiters: each caller waiting at the gate holds a write lock on one byte of
 * [TB_GATE_WAIT_BASE, TB_GATE_WAIT_BASE + TB_GATE_WAIT_LEN) while it waits, so that the
 * count of waiters is the count of those locks, and a waiter that dies leaves none. */
#define TB_GATE_WAIT_BASE ((off_t)1 << 30)
#define TB_GATE_WAIT_LEN ((off_t)1 << 20)

/*
 * A new open file description of the gate file `name` in the gate directory, created
 * (0600) if missing: close-on-exec, above the program's low fds, shielded from its close.
 * Checked after the open: a regular file, owned by us, closed to others. *st is its fstat.
 * Returns the fd, or -1 with errno and a reason for the log in why.
 */
int tb_gate_file_open(const char *name, struct stat *st, char *why, size_t whylen);

/*
 * Like tb_gate_file_open, for a process that starts (or resumes) using the file: holds a
 * read lock on TB_GATE_USE_BYTE through the new description (so the file is not removed
 * under it), reserves the page for real (posix_fallocate semantics: a full tmpfs fails here
 * with ENOSPC instead of killing the program with SIGBUS at its first write), and maps it
 * into *page. Returns the fd, or -1 with errno and a reason in why (nothing left open).
 */
int tb_gate_file_attach(const char *name, struct stat *st, void **page, char *why,
			size_t whylen);

/*
 * At exit: when no other description holds the use lock (upgrading ours to a write lock
 * succeeds), removes `name` if it still is the file `id` describes. Returns true when it
 * removed it. A process opening the file meanwhile waits for our lock, finds the file
 * unlinked and creates a new one (tb_gate_file_attach), so no one keeps using a removed file.
 */
bool tb_gate_file_remove_if_unused(int use_fd, const char *name, const struct stat *id);

/* A new description of the file use_fd refers to (removed or not), with the use lock, for a
 * forked child: the child's exit must not take the parent's lock with it. -1 on failure. */
int tb_gate_file_reopen(int use_fd);

/* Closes an fd from tb_gate_file_open/attach/reopen. */
void tb_gate_file_close(int fd);

/* "/run/user/1000/timebox" or "/dev/shm/timebox-1000" (once chosen; for logs). */
const char *tb_gate_file_dir(void);

/* Forked child: the directory lock may have been held by a thread that is gone. */
void tb_gate_file_fork_child(void);

#endif
