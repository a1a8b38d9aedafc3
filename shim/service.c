/* service.c - timebox's own threads: detached, signals blocked, named, small stacks when
 * the program's thread-local storage leaves room for them. */
#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

static int start(pthread_t *tid, void *(*fn)(void *), size_t stack)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (stack != 0)
		pthread_attr_setstacksize(&attr, stack);
	rc = pthread_create(tid, &attr, fn, NULL);
	pthread_attr_destroy(&attr);
	return rc;
}

bool tb_service_start(void *(*fn)(void *), size_t stack, const char *name)
{
	pthread_t tid;
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = start(&tid, fn, stack);
	if (rc == EINVAL) /* the program's static TLS does not fit in `stack` */
		rc = start(&tid, fn, 0);
	if (rc == 0)
		pthread_setname_np(tid, name);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0;
}
