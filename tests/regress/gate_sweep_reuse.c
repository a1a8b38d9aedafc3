/* gate_sweep_reuse.c - a connect at a full gate must not read a socket being reused.
 *
 * What happened: at a full gate, connect first sweeps the fd table for sockets closed where
 * the hooks could not see (tb_stale_sweep_gate), reading each governed socket's `gate`
 * pointer to find the ones holding this gate's slots. That pointer was a plain field, and
 * the socket the table named could be closed and its pool entry reused by another thread's
 * connect at that moment (tb_sock_new resets the field): a data race, which
 * `make test SANITIZE=thread` reported in the storm test once max_conns = "auto" kept the
 * gate full all the time. The sequence: 8 threads connecting and closing as fast as they
 * can through a gate of 2 (so most connects find it full and sweep), for 1.5 s; every
 * connect must succeed and the gate must end empty. Under ThreadSanitizer the race was
 * reported on the first run.
 * With the pointer atomic, a CI run under ThreadSanitizer found the sweep's second fault:
 * it read the table, then the socket's inode, then took the slot, and between these a
 * close and another thread's connect could reuse the number and the entry: the sweep saw
 * the old inode and took the new, live socket (freed under its connect: a race on `dest`
 * in tb_sock_new). The check is now made under `busy` (tb_sock_take_if_stale).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "regress.h"

#define THREADS 8

static int port;
static atomic_int stop;
static atomic_long done;

static void *churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		int fd = tbr_connect(port);

		close(fd);
		atomic_fetch_add(&done, 1);
	}
	return NULL;
}

static void *drop_each(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[THREADS];
	int lfd;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_MAX_CONNS=2", "TIMEBOX_ACQUIRE_TIMEOUT=5s", NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, drop_each);
	for (int i = 0; i < THREADS; i++)
		TBR_CHECK(pthread_create(&t[i], NULL, churn, NULL) == 0, "pthread_create");
	usleep(1500 * 1000); /* the run's length, not a synchronisation: the threads churn */
	atomic_store(&stop, 1);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	TBR_CHECK(atomic_load(&done) > 100, "only %ld connects in 1.5 s", atomic_load(&done));
	printf("gate_sweep_reuse: %ld connects through a gate of 2, none failed\n",
	       atomic_load(&done));
	return 0;
}
