/* mmsg_governed.c - recvmmsg and sendmmsg on a governed socket went around timebox.
 *
 * What happened: neither name was hooked. A program that read a stalled downstream with
 * recvmmsg (several messages per system call, on a stream socket as on a datagram one)
 * blocked for as long as the downstream stalled, whatever the read timeout, and its bytes
 * went past the framing unseen. Both now make one governed transfer, as recvmsg and
 * sendmsg do.
 * (a) read timeout 200 ms, a server that never answers: recvmmsg fails with ETIMEDOUT,
 *     no sooner than 200 ms and within 2 s (a watcher fails the program at 5 s).
 * (b) a healthy exchange: sendmmsg of three messages, their echo read back with
 *     recvmmsg(MSG_WAITFORONE) until all 12 bytes are in, byte for byte; errno as it was
 *     before each call that succeeded; the counts are messages, as natively.
 */
#include <pthread.h>
#include <sys/socket.h>

#include "regress.h"

static void *silent_or_echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (strncmp(buf, "stall", 5) != 0 && write(fd, buf, (size_t)n) != n)
			break;
	close(fd);
	return NULL;
}

static void *watcher(void *arg)
{
	(void)arg;
	tbt_sleep_ms(5000);
	fprintf(stderr, "FAIL: recvmmsg still blocked after 5 s: not governed\n");
	_exit(1);
	return NULL;
}

int main(int argc, char **argv)
{
	char in[4][8], got[16] = "", parts[3][4] = { "ping", "pong", "pang" };
	struct iovec iv[4], ov[3];
	struct mmsghdr vin[4], vout[3];
	size_t have = 0;
	pthread_t w;
	double t0, ms;
	int lfd, port, a, b, r;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=200ms", NULL);
	lfd = tbr_listen(&port);
	tbr_serve_each(lfd, silent_or_echo);

	/* (a) */
	a = tbr_connect(port);
	TBR_CHECK(write(a, "stall", 5) == 5, "write: %s", tbt_errno_name(errno));
	memset(vin, 0, sizeof(vin));
	iv[0] = (struct iovec){ in[0], sizeof(in[0]) };
	vin[0].msg_hdr.msg_iov = &iv[0];
	vin[0].msg_hdr.msg_iovlen = 1;
	TBR_CHECK(pthread_create(&w, NULL, watcher, NULL) == 0, "pthread_create");
	pthread_detach(w);
	t0 = tbt_now_ms();
	r = recvmmsg(a, vin, 1, 0, NULL);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(r == -1 && errno == ETIMEDOUT, "(a) recvmmsg: %d %s after %.0f ms", r,
		  tbt_errno_name(errno), ms);
	TBR_CHECK(ms >= 199.0 && ms < 2000.0, "(a) cut after %.0f ms (limit 200)", ms);
	close(a);

	/* (b) */
	b = tbr_connect(port);
	memset(vout, 0, sizeof(vout));
	for (int i = 0; i < 3; i++) {
		ov[i] = (struct iovec){ parts[i], 4 };
		vout[i].msg_hdr.msg_iov = &ov[i];
		vout[i].msg_hdr.msg_iovlen = 1;
	}
	errno = EILSEQ;
	r = sendmmsg(b, vout, 3, 0);
	TBR_CHECK(r == 3 && errno == EILSEQ, "(b) sendmmsg: %d %s", r, tbt_errno_name(errno));
	TBR_CHECK(vout[0].msg_len == 4 && vout[2].msg_len == 4, "(b) sendmmsg lengths");
	while (have < 12) {
		memset(vin, 0, sizeof(vin));
		for (int i = 0; i < 4; i++) {
			iv[i] = (struct iovec){ in[i], 4 };
			vin[i].msg_hdr.msg_iov = &iv[i];
			vin[i].msg_hdr.msg_iovlen = 1;
		}
		errno = EILSEQ;
		r = recvmmsg(b, vin, 4, MSG_WAITFORONE, NULL);
		TBR_CHECK(r >= 1 && r <= 4 && errno == EILSEQ, "(b) recvmmsg: %d %s", r,
			  tbt_errno_name(errno));
		for (int i = 0; i < r; i++) {
			TBR_CHECK(vin[i].msg_len > 0 && have + vin[i].msg_len <= 12,
				  "(b) message %d of %u bytes", i, vin[i].msg_len);
			memcpy(got + have, in[i], vin[i].msg_len);
			have += vin[i].msg_len;
		}
	}
	TBR_CHECK(memcmp(got, "pingpongpang", 12) == 0, "(b) echo '%.12s'", got);
	close(b);
	fprintf(stderr, "recvmmsg cut after %.0f ms; 12 bytes exchanged intact\n", ms);
	return 0;
}
