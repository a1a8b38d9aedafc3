/* sigpipe.c - SIGPIPE held back around a write libc makes out of our sight (stdio_wait.c in
 * the glibc build, hooks_stdio_musl_w.c in the musl build). */
#include "sigpipe.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

void tb_sigpipe_hold(struct tb_sigpipe *p)
{
	int saved = errno;
	sigset_t pipe_set, pending;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	p->blocked = pthread_sigmask(SIG_BLOCK, &pipe_set, &p->old_mask) == 0;
	p->pending = p->blocked && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	errno = saved;
}

void tb_sigpipe_release(struct tb_sigpipe *p, bool ours)
{
	static const struct timespec zero = { 0, 0 };
	int saved = errno;
	sigset_t pipe_set;

	if (!p->blocked)
		return;
	if (ours && !p->pending) {
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &p->old_mask, NULL);
	p->blocked = false;
	errno = saved;
}
