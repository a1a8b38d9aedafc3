/* resolve_jump_out.c - a program that left a slow lookup with siglongjmp (the alarm()
 * timeout idiom of old C programs) hung in its next lookup, or crashed when the thread later
 * ended with pthread_exit.
 *
 * What happened: a bounded lookup runs on one of timebox's resolver threads while its
 * caller waited in pthread_cond_timedwait, under a pthread_cleanup_push that gives the
 * lookup up if the caller is cancelled. A signal handler that jumped out of that wait
 * skipped both ends of it: glibc's longjmp runs the condition variable's own cleanup, which
 * takes its mutex - the pool's lock - back, so the lock stayed taken and every later lookup
 * of the process hung for good; and the cancellation buffer stayed registered on the stack
 * the jump abandoned, so a later pthread_exit of the thread unwound into it (SIGSEGV).
 * Natively the jump simply leaves getaddrinfo. The caller now waits on a futex word of the
 * request holding no lock, and gives the lookup up from the jump itself (hooks_jump.c) or
 * from its thread's exit.
 * The sequence: a resolver that answers after 800 ms (fake_dns.h), TIMEBOX_DNS_TIMEOUT=5s.
 * (1) The main thread's getaddrinfo is interrupted by a signal whose handler siglongjmps
 * out; the next getaddrinfo (answered at once) must answer. (2) A thread does the same, then calls
 * pthread_exit(42): it must be joined with 42.
 */
#include <setjmp.h>
#include <signal.h>

#include "fake_dns.h"

static sigjmp_buf back;
static atomic_int waiter_tid;

static void jump_back(int sig)
{
	(void)sig;
	siglongjmp(back, 1);
}

/* Sends SIGUSR1 to the thread once it sleeps in its lookup. */
static void interrupt_when_waiting(pthread_t t)
{
	TBR_CHECK(tbr_wait_sleeping(&waiter_tid, 5000), "the lookup never waited");
	TBR_CHECK(pthread_kill(t, SIGUSR1) == 0, "pthread_kill");
}

/* Looks up a name the slow resolver answers, leaving with siglongjmp; true if it jumped. */
static bool lookup_left_by_jump(void)
{
	struct addrinfo hints = { .ai_family = AF_INET }, *res = NULL;
	int rc;

	atomic_store(&waiter_tid, (int)syscall(SYS_gettid));
	if (sigsetjmp(back, 1) != 0) {
		atomic_store(&waiter_tid, 0);
		return true;
	}
	rc = getaddrinfo("bravo.example.test", NULL, &hints, &res);
	if (rc == 0)
		freeaddrinfo(res);
	atomic_store(&waiter_tid, 0);
	fprintf(stderr, "the lookup returned %d (%s) before the signal came\n", rc,
		gai_strerror(rc));
	return false;
}

static void *interrupter(void *arg)
{
	interrupt_when_waiting(*(pthread_t *)arg);
	return NULL;
}

static void *worker(void *arg)
{
	(void)arg;
	TBR_CHECK(lookup_left_by_jump(), "thread: the lookup was not interrupted");
	pthread_exit((void *)42);
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_family = AF_INET }, *res = NULL;
	struct sigaction sa = { .sa_handler = jump_back };
	pthread_t self = pthread_self(), t, w;
	void *ret = NULL;
	int rc;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_DNS_TIMEOUT=5s", NULL);
	tbr_fake_dns_delay_ms = 800;
	tbr_fake_dns(true);
	tbr_hang_guard(20, "a lookup after a jump out of another hung");
	sigemptyset(&sa.sa_mask);
	TBR_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");

	TBR_CHECK(pthread_create(&t, NULL, interrupter, &self) == 0, "pthread_create");
	TBR_CHECK(lookup_left_by_jump(), "main: the lookup was not interrupted");
	pthread_join(t, NULL);
	/* Answered at once now: behind the abandoned query, within glibc's 1 s. */
	tbr_fake_dns_delay_ms = 0;
	rc = getaddrinfo("alpha.example.test", NULL, &hints, &res);
	TBR_CHECK(rc == 0, "the lookup after the jump: %d (%s)", rc, gai_strerror(rc));
	freeaddrinfo(res);
	printf("main: a lookup left by siglongjmp, then the next one answered\n");

	tbr_fake_dns_delay_ms = 800;
	TBR_CHECK(pthread_create(&w, NULL, worker, NULL) == 0, "pthread_create");
	interrupt_when_waiting(w);
	TBR_CHECK(pthread_join(w, &ret) == 0, "pthread_join");
	TBR_CHECK(ret == (void *)42, "the thread ended with %p (want 42)", ret);
	printf("thread: left its lookup by siglongjmp, then ended with pthread_exit(42)\n");
	return 0;
}
