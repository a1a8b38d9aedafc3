/* zerocopy_ids.c - a MSG_ZEROCOPY send on a governed socket was made as two or more
 * system calls, and the program's completion numbers no longer matched its calls.
 *
 * What happened: the kernel numbers each successful send with MSG_ZEROCOPY (0, 1, 2, ...)
 * and reports on the socket's error queue which numbers completed: the program counts its
 * own calls to know when each buffer may be reused. A governed blocking send is tried with
 * MSG_DONTWAIT first and the rest sent blocking (hooks_io.c governed_send_try and
 * governed_sendmsg_try, prop_io.c tb_pout_send with TIMEBOX_PROPAGATE=1, which also goes 64
 * pieces per call): when the socket's buffer does not take it all at once, one call of the
 * program became two or more kernel sends, each given a number. After the program's two
 * sends the error queue said 0..3 completed (natively 0..1): a program that frees or
 * rewrites buffer n when n is reported reuses a buffer of a send still in flight (on a real
 * NIC, its new bytes go on the wire), or waits forever for a number that means something
 * else. The sequence: a governed connection with SO_ZEROCOPY and a 16 KB send buffer to a
 * reader, two blocking sends of 1 MB with MSG_ZEROCOPY (send, then sendmsg), then the
 * error queue is read until the kernel has reported every send -> the highest number must
 * be 1. Without and with TIMEBOX_PROPAGATE=1.
 */
#include <sys/uio.h>
#include <sys/wait.h>

#include "regress.h"

#include <linux/errqueue.h>

#define BIG (1 << 20)

static void *drain(void *arg)
{
	int c = (int)(intptr_t)arg;
	char b[65536];

	while (read(c, b, sizeof(b)) > 0)
		;
	close(c);
	return NULL;
}

/* Two zerocopy sends; returns the highest completion number reported. */
static long two_sends(int port, char *buf)
{
	int fd = tbr_connect(port), one = 1, sb = 16384;
	struct iovec v = { buf, BIG };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	long hi = -1;
	ssize_t r;

	if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) != 0)
		tbr_skip("SO_ZEROCOPY is not supported here");
	TBR_CHECK(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb)) == 0, "SO_SNDBUF");
	r = send(fd, buf, BIG, MSG_ZEROCOPY);
	TBR_CHECK(r == BIG, "send: %zd (%s)", r, strerror(errno));
	r = sendmsg(fd, &m, MSG_ZEROCOPY);
	TBR_CHECK(r == BIG, "sendmsg: %zd (%s)", r, strerror(errno));
	/* Every completion is reported once the peer has acknowledged all: at most 2 s. */
	for (int tries = 0; tries < 200; tries++) {
		char ctl[256];
		struct msghdr e = { .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		struct cmsghdr *c;
		struct sock_extended_err *ee;

		if (recvmsg(fd, &e, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			struct timespec pause = { 0, 10 * 1000 * 1000 };

			TBR_CHECK(errno == EAGAIN, "error queue: %s", strerror(errno));
			if (hi >= 1)
				break; /* both of the program's calls reported; anything more came */
			nanosleep(&pause, NULL);
			continue;
		}
		c = CMSG_FIRSTHDR(&e);
		TBR_CHECK(c != NULL, "an error queue message without its cmsg");
		ee = (struct sock_extended_err *)(void *)CMSG_DATA(c);
		if (ee->ee_origin == SO_EE_ORIGIN_ZEROCOPY && (long)ee->ee_data > hi)
			hi = ee->ee_data;
	}
	close(fd);
	return hi;
}

int main(int argc, char **argv)
{
	const char *prop = getenv("TBR_ZC_PROP");
	char *buf;
	long hi;
	int port;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL && prop == NULL) { /* each variant in its own process */
		static const char *const variants[] = { "0", "1" };

		for (int i = 0; i < 2; i++) {
			pid_t p = fork();
			int st;

			if (p == 0) {
				setenv("TBR_ZC_PROP", variants[i], 1);
				execv("/proc/self/exe", argv);
				_exit(1);
			}
			TBR_CHECK(waitpid(p, &st, 0) == p, "waitpid");
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		}
		return 0;
	}
	if (prop != NULL && strcmp(prop, "1") == 0)
		tbr_preload_self(argv, "TIMEBOX_DEADLINE=10s", "TIMEBOX_PROPAGATE=1", NULL);
	else
		tbr_preload_self(argv, "TIMEBOX_DEADLINE=10s", NULL);
	buf = malloc(BIG);
	TBR_CHECK(buf != NULL, "malloc");
	memset(buf, 'z', BIG);
	memcpy(buf, "PUT /zc HTTP/1.1\r\n", 18); /* a request line: the planner looks at it */
	tbr_serve_each(tbr_listen(&port), drain);
	hi = two_sends(port, buf);
	TBR_CHECK(hi == 1, "propagate=%s: two MSG_ZEROCOPY sends, completions reported up to "
		  "number %ld (natively 1)", prop != NULL ? prop : "0", hi);
	printf("propagate=%s: two MSG_ZEROCOPY sends, completion numbers 0..1 as natively\n",
	       prop != NULL ? prop : "0");
	free(buf);
	return 0;
}
