/* stdio_musl.h - what the musl build's stdio readers (hooks_stdio_musl.c) and writers
 * (hooks_stdio_musl_w.c) share: the governed socket under a FILE. */
#ifndef TB_STDIO_MUSL_H
#define TB_STDIO_MUSL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include "fdtable.h"

/* The governed socket under f, or NULL (most FILEs: files, pipes, untracked sockets).
 * *fd is set when a socket is returned. Until the process has governed a socket, one load:
 * musl's fileno takes the FILE's lock, which tripled the cost of a putc to a file.
 * musl's fileno of a memory stream (fmemopen, open_memstream: no fd) sets errno to EBADF:
 * a pass-through must leave the caller's errno as it was (regress/stdio_memory_errno). */
static inline struct tb_sock *file_sock(FILE *f, int *fd)
{
	int saved;

	if (atomic_load_explicit(&tb_fd_hiwater, memory_order_relaxed) < 0)
		return NULL;
	saved = errno;
	*fd = fileno(f);
	if (*fd < 0) {
		errno = saved;
		return NULL;
	}
	return tb_fd_sock(*fd);
}

#endif
