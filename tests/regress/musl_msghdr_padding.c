/* musl_msghdr_padding.c - under the musl build, sendmsg and recvmsg of a program that
 * fills its msghdr field by field failed with EMSGSIZE.
 *
 * What happened (the musl build): on 64-bit musl, msg_iovlen and msg_controllen are 32-bit
 * fields, each beside 32 bits of padding, while the kernel reads both as 64 bits. musl's
 * sendmsg and recvmsg copy the header and zero the padding before the system call. timebox
 * makes a transfer that cannot block as its system call when the function is libc's own
 * (a send's try without blocking, MSG_DONTWAIT, a non-blocking socket) - with the
 * program's header as it was: a header on the stack filled field by field, as musl
 * allows, kept whatever the stack held in the padding, the kernel saw a huge
 * msg_iovlen, and the call failed with EMSGSIZE: nothing was sent or received. Now
 * musl's sendmsg and recvmsg are always called. In the glibc build (no padding) this
 * program is a guard. Built and run under the musl build by tests/e2e/test_musl.py.
 * The sequence: a header whose every byte is first set to 0xff, then its fields; sendmsg
 * blocking and with MSG_DONTWAIT, recvmsg with MSG_DONTWAIT, sendmsg on an O_NONBLOCK
 * socket: each moves its bytes.
 */
#include <fcntl.h>
#include <sys/uio.h>

#include "regress.h"

/* A header as a program may fill it: its padding left as the stack had it. */
static void header(struct msghdr *m, struct iovec *iov)
{
	memset(m, 0xff, sizeof(*m));
	m->msg_name = NULL;
	m->msg_namelen = 0;
	m->msg_iov = iov;
	m->msg_iovlen = 1;
	m->msg_control = NULL;
	m->msg_controllen = 0;
	m->msg_flags = 0;
}

static void sent(int c, int p, struct msghdr *m, int flags, const char *what)
{
	char buf[16];
	ssize_t r = sendmsg(c, m, flags);

	TBR_CHECK(r == 5, "%s returned %zd (%s), want 5", what, r, tbt_errno_name(errno));
	TBR_CHECK(read(p, buf, sizeof(buf)) == 5, "%s: the peer did not get the bytes", what);
}

int main(int argc, char **argv)
{
	struct iovec out = { .iov_base = (void *)"hello", .iov_len = 5 }, in;
	struct msghdr m, rm;
	char buf[16];
	struct pollfd q;
	int port, lfd, c, p;
	ssize_t r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=2s", "TIMEBOX_WRITE_TIMEOUT=2s", NULL);
	lfd = tbr_listen(&port);
	c = tbr_connect(port);
	p = accept(lfd, NULL, NULL);
	TBR_CHECK(p >= 0, "accept: %s", strerror(errno));
	header(&m, &out);
	sent(c, p, &m, 0, "sendmsg");
	sent(c, p, &m, MSG_DONTWAIT, "sendmsg(MSG_DONTWAIT)");
	TBR_CHECK(write(p, "abc", 3) == 3, "the peer's write");
	q = (struct pollfd){ .fd = c, .events = POLLIN };
	TBR_CHECK(poll(&q, 1, 5000) == 1, "the peer's bytes never came");
	in = (struct iovec){ .iov_base = buf, .iov_len = sizeof(buf) };
	header(&rm, &in);
	r = recvmsg(c, &rm, MSG_DONTWAIT);
	TBR_CHECK(r == 3, "recvmsg(MSG_DONTWAIT) returned %zd (%s), want 3", r,
		  tbt_errno_name(errno));
	TBR_CHECK(fcntl(c, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	sent(c, p, &m, 0, "sendmsg on a non-blocking socket");
	printf("sendmsg and recvmsg moved their bytes with a header filled field by field\n");
	return 0;
}
