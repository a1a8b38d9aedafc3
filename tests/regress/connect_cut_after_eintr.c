/* connect_cut_after_eintr.c - a connect retried after EINTR, cut before it reached the
 * kernel, blocked for the kernel's SYN retries.
 *
 * What happened: make stress (200 threads, signals without SA_RESTART) found a worker in
 * connect() 4.9 s after the library had logged its cut (event=timeout phase=connect). A
 * signal had interrupted the worker's first, blocking connect: EINTR, with the handshake
 * going on in the background (SYN_SENT). The worker called connect() again; the library
 * armed the connect phase; before that call reached the kernel, the watchdog found the
 * limit due. Its guard against cutting a connect not yet begun (connect_cut_early.c) looks
 * at the TCP state, which said SYN_SENT - the first attempt's - so it cut: shutdown() took
 * the socket back to CLOSE. The retried connect() then began a fresh handshake with a peer
 * that drops SYNs and blocked for ~127 s, unwatched (the socket was already EXPIRED).
 * The fix: the cut of a handshake also sets a 1 us send timeout, which bounds any blocking
 * connect the kernel begins afterwards (read under the socket lock that shutdown takes).
 * The sequence, made deterministic: TIMEBOX_CONNECT_TIMEOUT=300ms; a listener whose accept
 * queue is full (SYNs dropped); connect() interrupted by SIGALRM at 100 ms (EINTR); a
 * second preload library puts 500 ms between the library's arming of the retried connect
 * and the kernel, as a preemption would. The retry must fail with ETIMEDOUT at once after
 * the delay, not block.
 */
#include <poll.h>
#include <signal.h>
#include <sys/time.h>

#include "regress.h"
#include "delaylib.h"

/* The delaying library, built at run time and preloaded after timebox: from the second
 * connect of the program on, 500 ms pass between timebox's hook and the kernel. */
static const char delay_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdlib.h>\n"
	"#include <sys/socket.h>\n#include <time.h>\n"
	"int connect(int fd, const struct sockaddr *sa, socklen_t len)\n"
	"{\n"
	"	static int (*real)(int, const struct sockaddr *, socklen_t);\n"
	"	static int calls;\n"
	"	struct timespec ts = { 0, 500 * 1000000 };\n"
	"	if (real == NULL)\n"
	"		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, \"connect\");\n"
	"	if (getenv(\"CCA_DELAY\") != NULL && ++calls >= 2)\n"
	"		nanosleep(&ts, NULL); /* descheduled between the hook and the kernel */\n"
	"	return real(fd, sa, len);\n"
	"}\n";

static void on_alarm(int sig)
{
	(void)sig; /* interrupts the blocking connect: EINTR */
}

int main(int argc, char **argv)
{
	struct sockaddr_in a;
	struct itimerval first = { .it_value = { 0, 100000 } };
	struct sigaction sa;
	int lfd, fd, r, err;
	double t0;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(delay_c);
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=300ms", NULL);
	tbr_remove_built();
	lfd = tbr_listen_dropping_syns(&a); /* kept open to the end: it drops SYNs */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	setenv("CCA_DELAY", "1", 1);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	t0 = tbt_now_ms();
	setitimer(ITIMER_REAL, &first, NULL);
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	err = errno;
	TBR_CHECK(r < 0 && err == EINTR, "the first connect gave %d (%s), not EINTR", r,
		  strerror(err));
	printf("first connect: EINTR after %.0f ms\n", tbt_now_ms() - t0);
	tbr_hang_guard(5, "the retried connect still blocked 5 s after its cut"); /* the retry's bound */
	r = connect(fd, (struct sockaddr *)&a, sizeof(a)); /* the retry */
	err = errno;
	printf("retried connect: %s after %.0f ms\n", r < 0 ? strerror(err) : "ok",
	       tbt_now_ms() - t0);
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "the retry gave %d (%s)", r, strerror(err));
	close(lfd);
	return 0;
}
