/* stdio_musl.h - what the musl build's stdio readers (hooks_stdio_musl.c) and writers
 * (hooks_stdio_musl_w.c) share: the governed socket under a FILE. */
#ifndef TB_STDIO_MUSL_H
#define TB_STDIO_MUSL_H

#include <errno.h>
#include <stdio.h>

#include "fdtable.h"

/* The governed socket under f, or NULL (most FILEs: files, pipes, untracked sockets).
 * musl's fileno of a memory stream (fmemopen, open_memstream: no fd) sets errno to EBADF:
 * a pass-through must leave the caller's errno as it was (regress/stdio_memory_errno). */
static inline struct tb_sock *file_sock(FILE *f, int *fd)
{
	int saved = errno;

	*fd = fileno(f);
	if (*fd < 0) {
		errno = saved;
		return NULL;
	}
	return tb_fd_sock(*fd);
}

#endif
