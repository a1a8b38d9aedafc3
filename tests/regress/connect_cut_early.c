/* connect_cut_early.c - a connect cut before it reaches the kernel must still end.
 *
 * What happens: connect_marked() arms the connect phase, then calls the real connect().
 * If the thread is descheduled in between for longer than connect_timeout (200 threads on
 * 2 cores: make stress saw it once in ~7,500 blackholed connects), the watchdog expires the
 * socket and shuts it down while it is still unconnected - which does nothing to the
 * connect() that follows. That connect then sends its SYN to a peer that drops it and
 * blocks for the kernel's SYN retries (~127 s); the socket is already EXPIRED, so the
 * watchdog never looks at it again. The log even says event=timeout phase=connect.
 * make stress: "HANG: worker 121 in connect for 4982 ms (bound 4894 ms)", stack in
 * __libc_connect <- connect_marked (shim/hooks_conn.c:94), the watchdog idle in its futex.
 * The sequence, made deterministic: a second preload library (this file built with
 * -DDELAY_LIB) puts 500 ms between the library's arming and the kernel's connect, as a
 * preemption would; TIMEBOX_CONNECT_TIMEOUT=200ms; connect to a listener whose accept
 * queue is full (SYNs dropped). It must fail with ETIMEDOUT within ~1 s, not hang.
 *
 * The fix: the watchdog does not cut a connect whose socket has not begun its handshake
 * (TCP_INFO state CLOSE); it looks again 1 ms later, and cuts once the SYN is out.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>

#include "regress.h"
#include "delaylib.h"

/* The delaying library, built at run time and preloaded after timebox. */
static const char delay_c[] =
	"#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdlib.h>\n"
	"#include <sys/socket.h>\n#include <time.h>\n"
	"int connect(int fd, const struct sockaddr *sa, socklen_t len)\n"
	"{\n"
	"	static int (*real)(int, const struct sockaddr *, socklen_t);\n"
	"	struct timespec ts = { 0, 500 * 1000000 };\n"
	"	if (real == NULL)\n"
	"		real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, \"connect\");\n"
	"	if (getenv(\"CCE_DELAY\") != NULL)\n"
	"		nanosleep(&ts, NULL); /* descheduled between the hook and the kernel */\n"
	"	return real(fd, sa, len);\n"
	"}\n";

int main(int argc, char **argv)
{
	struct sockaddr_in a;
	int port, lfd, fd, r, err;
	double t0;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL)
		tbr_add_preload(delay_c);
	tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=200ms", NULL);
	tbr_remove_built();
	lfd = tbr_listen_dropping_syns(&a); /* kept open to the end: it drops SYNs */
	port = ntohs(a.sin_port);
	(void)port;
	tbr_hang_guard(5, "connect still blocked 5 s after its 200 ms limit");
	setenv("CCE_DELAY", "1", 1);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	t0 = tbt_now_ms();
	r = connect(fd, (struct sockaddr *)&a, sizeof(a));
	err = errno;
	TBR_CHECK(r < 0 && err == ETIMEDOUT, "connect gave %d (%s)", r, strerror(err));
	printf("connect failed with ETIMEDOUT after %.0f ms\n", tbt_now_ms() - t0);
	close(lfd);
	return 0;
}
