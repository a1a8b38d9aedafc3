/* propagate_inbound_oob.c - a scope=request server's urgent byte and error-queue messages
 * were read into its request head, and its requests' budgets came out wrong.
 *
 * What happened: under scope = request the bytes a server consumes from an accepted socket
 * go through the head parser that opens the thread's request budget and reads its deadline
 * header (prop_io.c tb_pin_consumed, fed from hooks_io.c inbound_recvfrom and
 * inbound_recvmsg). Reads with MSG_PEEK and MSG_TRUNC were kept out, but not those with
 * MSG_OOB - TCP's urgent byte, which the kernel takes out of the stream (SO_OOBINLINE off)
 * - nor those with MSG_ERRQUEUE - the socket's error queue, which with SO_TIMESTAMPING
 * hands back the server's own sent packets, headers and all. Both were taken for bytes of
 * the request. The sequence, on one keep-alive connection (TIMEBOX_SCOPE=request,
 * TIMEBOX_PROPAGATE=1, TIMEBOX_DEADLINE=5s): (1) the client sends "X-Deadline-Ms: 2", an
 * urgent byte 'U', then "00"; the server reads up to the mark, takes the urgent byte with
 * recv(MSG_OOB) (sockatmark), and reads the rest. Its stream says 200, but the parser read
 * "2U00", logged it as malformed and left the budget at 5 s. (2) The server, timestamping
 * its sends, reads the error queue after its response; the looped-back packet (its first
 * byte not a request's) turned the parser off until the next response, so the next request
 * ("X-Deadline-Ms: 300") opened no budget at all (timebox_remaining_ms: -1). Neither kind
 * of read moves stream bytes: they are no longer fed (nor to a governed socket's framing,
 * regress/framing_oob).
 * The client connects with a raw system call: its socket is not governed and its requests
 * carry exactly the bytes written here.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <linux/net_tstamp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "regress.h"

static long (*remaining_ms)(void);
static long seen_ms[2];   /* timebox_remaining_ms after each head, by the server */
static int oob_bytes;     /* urgent bytes the server took */
static int errq_reads;    /* error-queue messages it read, with their bytes */
static int heads;         /* under mu */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* Reads a head to its blank line, taking an urgent byte with MSG_OOB where the stream is at
 * its mark (a reader of urgent data with sockatmark). Returns the head's length, 0 on EOF. */
static size_t read_head(int c, char *b, size_t cap)
{
	size_t len = 0;
	bool took = false; /* the mark stays until a read passes it */

	while (len + 1 < cap) {
		ssize_t n;

		if (!took && sockatmark(c) == 1) {
			char u;

			TBR_CHECK(recv(c, &u, 1, MSG_OOB) == 1, "recv(MSG_OOB): %s",
				  strerror(errno));
			oob_bytes++;
			took = true;
			continue;
		}
		took = false;
		n = recv(c, b + len, cap - 1 - len, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		b[len] = '\0';
		if (strstr(b, "\r\n\r\n") != NULL)
			return len;
	}
	TBR_CHECK(len == 0, "head cut short after %zu bytes", len);
	return 0;
}

/* After a response: waits for its transmit timestamp and reads the error queue, as a
 * server measuring its send latency does. */
static void read_errqueue(int c)
{
	char data[2048], ctl[512];
	struct iovec v = { data, sizeof(data) };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	struct pollfd p = { .fd = c, .events = 0 };
	ssize_t r;

	TBR_CHECK(poll(&p, 1, 2000) == 1 && (p.revents & POLLERR), "no transmit timestamp");
	for (;;) {
		m.msg_control = ctl;
		m.msg_controllen = sizeof(ctl);
		r = recvmsg(c, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (r < 0)
			break;
		if (r > 0)
			errq_reads++;
	}
	TBR_CHECK(errno == EAGAIN, "recvmsg(MSG_ERRQUEUE): %s", strerror(errno));
}

static void *server(void *arg)
{
	int c = (int)(intptr_t)arg, ts = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
	char b[4096];

	TBR_CHECK(setsockopt(c, SOL_SOCKET, SO_TIMESTAMPING, &ts, sizeof(ts)) == 0,
		  "SO_TIMESTAMPING: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		struct pollfd p = { .fd = c, .events = POLLPRI };

		/* The first request's urgent byte is there before its head is read. */
		TBR_CHECK(i > 0 || (poll(&p, 1, 5000) == 1 && (p.revents & POLLPRI)),
			  "no urgent data arrived");
		if (read_head(c, b, sizeof(b)) == 0)
			break;
		seen_ms[i] = remaining_ms();
		TBR_CHECK(write(c, resp, strlen(resp)) == (ssize_t)strlen(resp), "response");
		if (i == 0)
			read_errqueue(c);
		pthread_mutex_lock(&mu);
		heads++;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
	close(c);
	return NULL;
}

static void sent(int fd, const char *s, int flags)
{
	TBR_CHECK(send(fd, s, strlen(s), flags) == (ssize_t)strlen(s), "send: %s", strerror(errno));
}

static void until_heads(int n)
{
	pthread_mutex_lock(&mu);
	while (heads < n)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char b[512];
	int port, fd;

	tbr_preload_self(argv, "TIMEBOX_SCOPE=request", "TIMEBOX_PROPAGATE=1",
			 "TIMEBOX_DEADLINE=5s", NULL);
	(void)argc;
	remaining_ms = (long (*)(void))dlsym(RTLD_DEFAULT, "timebox_remaining_ms");
	TBR_CHECK(remaining_ms != NULL, "timebox_remaining_ms is not exported");
	tbr_hang_guard(20, "the exchange did not finish");
	tbr_serve_each(tbr_listen(&port), server);

	fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	a.sin_port = htons((uint16_t)port);
	TBR_CHECK(fd >= 0 && syscall(SYS_connect, fd, &a, sizeof(a)) == 0, "client connect: %s",
		  strerror(errno));

	/* (1) "X-Deadline-Ms: 200" in the stream, an urgent 'U' after its "2". */
	sent(fd, "GET /a HTTP/1.1\r\nHost: order\r\nX-Deadline-Ms: 2", 0);
	sent(fd, "U", MSG_OOB);
	sent(fd, "00\r\n\r\n", 0);
	until_heads(1);
	TBR_CHECK(recv(fd, b, sizeof(b), 0) > 0, "response 1");

	/* (2) After the server read its error queue: "X-Deadline-Ms: 300". */
	sent(fd, "GET /b HTTP/1.1\r\nHost: order\r\nX-Deadline-Ms: 300\r\n\r\n", 0);
	until_heads(2);
	close(fd);

	printf("urgent bytes taken %d, error-queue messages read %d\n", oob_bytes, errq_reads);
	printf("request 1 (X-Deadline-Ms: 2<urgent>00): remaining %ld ms\n", seen_ms[0]);
	printf("request 2 (X-Deadline-Ms: 300, after the error queue): remaining %ld ms\n",
	       seen_ms[1]);
	TBR_CHECK(oob_bytes == 1, "the server took %d urgent bytes", oob_bytes);
	TBR_CHECK(seen_ms[0] > 0 && seen_ms[0] <= 200,
		  "request 1's budget: %ld ms left, its header says 200", seen_ms[0]);
	if (errq_reads == 0) {
		printf("(2) not checked: no error-queue message carried bytes here "
		       "(net.core.tstamp_allow_data)\n");
		return 0;
	}
	TBR_CHECK(seen_ms[1] > 0 && seen_ms[1] <= 300,
		  "request 2's budget: %ld ms left, its header says 300", seen_ms[1]);
	return 0;
}
