/* dup_while_closed.c - a dup() of a governed fd that another thread closes at that moment
 * must govern the copy as the socket it is, never as another connection.
 *
 * What happened: dup(fd) (and dup2/dup3 and fcntl F_DUPFD) looked fd's socket up in the fd
 * table and counted the new fd's reference on it only after the kernel's dup. A thread
 * that closed fd in between (the copy keeps the connection open) untracked fd and freed the
 * socket: the copy was left ungoverned, its gate slot given back while the connection
 * lived. When the number was reused meanwhile by another thread's connect (a socket gets
 * the lowest free number, and its pool entry is the one just freed), the copy was tracked
 * as that new connection: a wait on the copy ran on the other connection's state, and the
 * watchdog, finding the copy's number no longer names that socket, cut the other
 * connection instead. In the narrowest window (the close between the look-up and the
 * count) the count landed on a free pool entry, which the next connect took over: two
 * connections on one entry, freed under one of them at the first close.
 *
 * The sequence: read_timeout 300 ms, a silent peer; thread A calls dup(fd) (then, in two
 * more rounds, dup2 and fcntl F_DUPFD), and a second preload library holds it just after
 * the kernel's copy (as a preemption would) until the main thread has closed fd and
 * connected again, getting fd's number. A recv() on the copy must then fail with ETIMEDOUT
 * about 300 ms later, and the new connection must not be cut. The recv blocked (the guard
 * ends it after 3 s) while the watchdog shut the new connection down for the copy's wait.
 *
 * The fix: the socket is referenced before the kernel's dup, inside a section (sock.h rule
 * 12) so that a concurrent close can neither free nor reuse it under the count, and the
 * copy is tracked to it only when its inode is the copy's (tb_sock_ref_live).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "regress.h"
#include "delaylib.h"

/* The delaying library: after the real dup, dup2 or fcntl, once, the hook the story arms. */
static const char delay_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdarg.h>\n"
	"void (*tbr_after_dup)(void);\n"
	"static int after(int r)\n"
	"{\n"
	"	void (*f)(void) = __atomic_exchange_n(&tbr_after_dup, (void (*)(void))0,\n"
	"					      __ATOMIC_SEQ_CST);\n"
	"	if (f)\n"
	"		f(); /* descheduled just after the system call */\n"
	"	return r;\n"
	"}\n"
	"int dup(int fd)\n"
	"{\n"
	"	static int (*real)(int);\n"
	"	if (real == 0)\n"
	"		real = (int (*)(int))dlsym(RTLD_NEXT, \"dup\");\n"
	"	return after(real(fd));\n"
	"}\n"
	"int dup2(int fd, int to)\n"
	"{\n"
	"	static int (*real)(int, int);\n"
	"	if (real == 0)\n"
	"		real = (int (*)(int, int))dlsym(RTLD_NEXT, \"dup2\");\n"
	"	return after(real(fd, to));\n"
	"}\n"
	"#define FCNTL(name)							\\\n"
	"int name(int fd, int cmd, ...)						\\\n"
	"{									\\\n"
	"	static int (*real)(int, int, ...);				\\\n"
	"	va_list ap;							\\\n"
	"	void *arg;							\\\n"
	"	va_start(ap, cmd);						\\\n"
	"	arg = va_arg(ap, void *);					\\\n"
	"	va_end(ap);							\\\n"
	"	if (real == 0)							\\\n"
	"		real = (int (*)(int, int, ...))dlsym(RTLD_NEXT, #name);	\\\n"
	"	if (cmd != 0 /* F_DUPFD */)					\\\n"
	"		return real(fd, cmd, arg);				\\\n"
	"	return after(real(fd, cmd, arg));				\\\n"
	"}\n"
	"FCNTL(fcntl)\n"
	"FCNTL(fcntl64)\n";

enum op { OP_DUP, OP_DUP2, OP_F_DUPFD };
static const char *const op_name[] = { "dup", "dup2", "fcntl(F_DUPFD)" };

static int victim;
static enum op op;
/* 1: the kernel's copy is made; 2: the main thread closed its original and connected again */
static atomic_int step;

static void held(void)
{
	atomic_store(&step, 1);
	while (atomic_load(&step) != 2)
		sched_yield();
}

static void *copier(void *arg)
{
	void (**hook)(void) = (void (**)(void))dlsym(RTLD_DEFAULT, "tbr_after_dup");
	int r;

	(void)arg;
	TBR_CHECK(hook != NULL, "the delaying library is not loaded");
	__atomic_store_n(hook, held, __ATOMIC_SEQ_CST);
	if (op == OP_DUP)
		r = dup(victim);
	else if (op == OP_DUP2)
		r = dup2(victim, 50);
	else
		r = fcntl(victim, F_DUPFD, 40);
	return (void *)(intptr_t)r;
}

/* One round: the copy made while the main thread closes its original and connects again. */
static void round_of(enum op which, int port)
{
	struct pollfd p = { .events = POLLIN | POLLRDHUP };
	int copy, again, r, err;
	pthread_t t;
	void *ret;
	double t0;
	char c;

	op = which;
	atomic_store(&step, 0);
	victim = tbr_connect(port); /* governed; the peer never answers */
	TBR_CHECK(pthread_create(&t, NULL, copier, NULL) == 0, "pthread_create");
	while (atomic_load(&step) != 1)
		sched_yield();
	close(victim);
	again = tbr_connect(port);
	atomic_store(&step, 2);
	pthread_join(t, &ret);
	copy = (int)(intptr_t)ret;
	TBR_CHECK(copy >= 0, "%s: %s", op_name[which], strerror(errno));
	if (again != victim)
		tbr_skip("the new connection did not get the closed fd's number");
	tbr_hang_guard(3, "recv() on a copy made while another thread closed the original blocked "
			  "past read_timeout (the copy is not governed as its own connection)");
	t0 = tbt_now_ms();
	r = (int)recv(copy, &c, 1, 0);
	err = errno;
	alarm(0);
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "%s: recv on the copy: %d (%s) after %.0f ms",
		  op_name[which], r, strerror(err), tbt_now_ms() - t0);
	p.fd = again;
	TBR_CHECK(poll(&p, 1, 0) == 0, "%s: the new connection on fd %d was cut (revents %#x)",
		  op_name[which], again, p.revents);
	printf("%s: recv on the copy timed out after %.0f ms; the new connection is intact\n",
	       op_name[which], tbt_now_ms() - t0);
	close(copy);
	close(again);
}

int main(int argc, char **argv)
{
	int port, lfd;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		tbr_add_preload(delay_c);
		/* Under ThreadSanitizer, the copy of an fd the main thread closes and reuses is
		 * the very race this story is about (and its hand-over runs in the uninstrumented
		 * delaying library): suppressed by the copying thread's function name. */
		tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=300ms", tbr_tsan_rule("race:copier\n"),
				 NULL);
	}
	tbr_remove_built();
	tbr_tsan_rule_remove();
	lfd = tbr_listen(&port);
	for (enum op o = OP_DUP; o <= OP_F_DUPFD; o++)
		round_of(o, port);
	close(lfd);
	return 0;
}
