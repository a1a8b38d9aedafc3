/* upload_first_byte.c - a healthy upload was cut by first_byte_timeout while the server was
 * still receiving the request.
 *
 * What happened (curl -T to a server that reads the body at 100 KB/s, read timeout 2 s):
 * curl hands its 300 KB body to the kernel in a millisecond - the send buffer grows to hold
 * it - and then waits in poll for the answer. first_byte counts from the last request byte
 * sent, so its clock ran while the kernel was still delivering the body to the server,
 * which cannot answer before it has it all: the call was cut at 2 s
 * (`event=timeout phase=first_byte`, curl: error 56), where natively the answer came at
 * 3 s. From the sender, the request has left only when the peer acknowledged it.
 * The sequence: TIMEBOX_READ_TIMEOUT=1s; the server reads 4 KiB every 20 ms through a
 * 16 KiB receive buffer and answers once it has the whole request; the client sends a
 * 256 KiB request in one call and reads the answer. It must get it (about 1.3 s after the
 * send returned). Then a server that stops reading after 32 KiB and never answers: the
 * read must still be cut, never before 1 s after the send returned.
 *
 * wget --post-file and Python's urllib were cut the same way (wget retried 20 times, 204 s).
 *
 * The fix: at a first_byte expiry the clock counts from the peer's last acknowledgement
 * (TCP_INFO's tcpi_last_ack_recv) when that came within the wait: always while bytes of
 * ours are unacknowledged, once per wait otherwise (wget's last bytes were acknowledged
 * just before the look).
 */
#include <pthread.h>
#include <stdbool.h>

#include "regress.h"

#define REQUEST (256 << 10)

struct server {
	int lfd;
	bool stall;
	int done; /* the stalled server waits for a byte here before it closes */
};

static void *serve(void *arg)
{
	struct server *sv = arg;
	int c = accept(sv->lfd, NULL, NULL);
	struct timespec gap = { 0, 20 * 1000000 };
	static char buf[4096];
	size_t got = 0;
	ssize_t n;

	while (c >= 0 && got < REQUEST && !(sv->stall && got >= (32 << 10)) &&
	       (n = read(c, buf, sizeof(buf))) > 0) {
		got += (size_t)n;
		nanosleep(&gap, NULL);
	}
	if (c >= 0 && !sv->stall && write(c, "answer", 6) != 6)
		perror("write");
	if (c >= 0 && sv->stall && read(sv->done, buf, 1) < 0)
		perror("read");
	if (c >= 0)
		close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	static char request[REQUEST];

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	for (int k = 0; k < 2; k++) {
		struct server sv = { .stall = k == 1 };
		int port, rcv = 16384, fd, done[2];
		double t0, ms;
		pthread_t t;
		char ans[16];
		ssize_t r;

		TBR_CHECK(pipe(done) == 0, "pipe: %s", strerror(errno));
		sv.done = done[0];
		sv.lfd = tbr_listen(&port);
		setsockopt(sv.lfd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
		TBR_CHECK(pthread_create(&t, NULL, serve, &sv) == 0, "pthread_create");
		fd = tbr_connect(port);
		r = send(fd, request, sizeof(request), MSG_NOSIGNAL);
		TBR_CHECK(r == (ssize_t)sizeof(request), "send: %zd %s", r, strerror(errno));
		t0 = tbt_now_ms();
		r = read(fd, ans, sizeof(ans));
		ms = tbt_now_ms() - t0;
		printf("%s server: read gave %zd %s %.0f ms after the request was handed over\n",
		       sv.stall ? "a stalled" : "a slow", r, r < 0 ? tbt_errno_name(errno) : "", ms);
		if (!sv.stall) {
			TBR_CHECK(r == 6, "the answer of a server still receiving the request was "
				  "cut: %zd %s after %.0f ms", r, tbt_errno_name(errno), ms);
		} else {
			TBR_CHECK(r < 0 && errno == ETIMEDOUT, "a stalled server was not cut: %zd",
				  r);
			TBR_CHECK(ms >= 1000, "cut early: %.0f ms (limit 1 s)", ms);
			TBR_CHECK(ms < 1000 + 2500, "cut late: %.0f ms (limit 1 s)", ms);
		}
		close(fd);
		TBR_CHECK(write(done[1], "x", 1) == 1, "write: %s", strerror(errno));
		pthread_join(t, NULL);
		close(sv.lfd);
		close(done[0]);
		close(done[1]);
	}
	return 0;
}
