/*
 * stormserver.c - the sick downstream of the protection tests (test_protect.py, the bench's
 * storm and adaptive workloads): an HTTP/1.0 server on 127.0.0.1 that answers every request
 * with 200 and closes, unless its options make it pause, queue or fail. One thread per
 * connection; a second port answers the test's questions, so they are never counted.
 *
 * usage: stormserver --port-file F --control-port-file F [--t0-ms MS] [options]
 *   --t0-ms MS              the run's origin, CLOCK_MONOTONIC in ms (shared with the client);
 *                           every time below and in the answers counts from it (default: start)
 *   --stall-from MS --stall-to MS --stall-ms MS
 *                           a GC pause: a request that arrives in [from, to) is answered
 *                           stall-ms after it arrived (or never, if the client leaves first)
 *   --workers N --service-ms MS
 *                           N requests served at a time, each taking MS; the rest wait in
 *                           arrival order (latency grows with concurrency)
 *   --delay-ms MS           every request answered MS after it arrived, any number at once
 *   --fail reset|503|close  every request fails: RST, a 503 answer, or a close without one
 *   --fail-every K          every K-th request is reset, the others served
 *
 * Control port: one line in, one line out, then close.
 *   stats                   accepted= requests= answered= failed= inflight= max_inflight=
 *   accepts FROM TO         count= the connections accepted in [FROM, TO) ms
 *   inflight FROM TO        samples= p10= p50= p90= max= of the requests received and not
 *                           yet answered (queued ones included), sampled every 5 ms
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tbtest.h"

#define THREAD_STACK   (128 * 1024)
#define SAMPLE_MS      5
#define INFLIGHT_MAX   100000
#define REQ_MAX        4096

enum fail_kind { FAIL_NONE, FAIL_RESET, FAIL_503, FAIL_CLOSE };

static struct {
	double t0;
	long stall_from, stall_to, stall_ms;
	int workers;
	long service_ms, delay_ms;
	enum fail_kind fail;
	long fail_every;
} opt = { .stall_from = -1, .stall_to = -1 };

/* A growable array of times (ms since t0) or of (time, value) pairs. */
struct series {
	long *v;
	size_t len, cap;
};

static struct {
	pthread_mutex_t lock;
	unsigned long accepted, requests, answered, failed;
	long inflight, max_inflight;
	struct series accepts;         /* time of each accepted connection */
	struct series samples;         /* time, inflight, time, inflight, ... */
	long busy;                     /* workers serving (--workers) */
	unsigned long next_ticket, serving_ticket_floor;
	pthread_cond_t worker_free;
} st = { .lock = PTHREAD_MUTEX_INITIALIZER, .worker_free = PTHREAD_COND_INITIALIZER };

static long since_t0(void)
{
	return (long)(tbt_now_ms() - opt.t0);
}

/* Appends under st.lock; a full machine loses the value, never the server. */
static void series_add(struct series *s, long v)
{
	if (s->len == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		long *nv = realloc(s->v, cap * sizeof *nv);

		if (!nv)
			return;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->len++] = v;
}

/* ---- socket I/O ------------------------------------------------------------------------ */

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads until the blank line that ends the request head. Returns 0, or -1 when the client
 * left or sent more than REQ_MAX bytes of head. */
static int read_head(int fd, char *buf, size_t cap)
{
	size_t got = 0;

	while (got < cap - 1) {
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
			return 0;
	}
	return -1;
}

/* Waits up to ms for the client to hang up. Returns true if it did. */
static bool client_left_within(int fd, long ms)
{
	double until = tbt_now_ms() + (double)ms;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLRDHUP };
		double left = until - tbt_now_ms();
		int n;

		if (left <= 0)
			return false;
		n = poll(&p, 1, (int)left + 1);
		if (n < 0 && errno == EINTR)
			continue;
		return n != 0;
	}
}

/* ---- behaviours ------------------------------------------------------------------------ */

static void answer(int fd, int status, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof head,
			 "HTTP/1.0 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 status, status == 200 ? "OK" : "Service Unavailable", strlen(body));

	if (send_all(fd, head, (size_t)n) == 0)
		send_all(fd, body, strlen(body));
}

/* An RST instead of a FIN: SO_LINGER with a zero timeout makes close() abort. */
static void reset(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
}

/* Takes a worker in arrival order: a ticket each, served when every earlier one was. */
static void worker_take(void)
{
	unsigned long ticket;

	pthread_mutex_lock(&st.lock);
	ticket = st.next_ticket++;
	while (ticket != st.serving_ticket_floor || st.busy >= opt.workers)
		pthread_cond_wait(&st.worker_free, &st.lock);
	st.serving_ticket_floor++;
	st.busy++;
	pthread_cond_broadcast(&st.worker_free);
	pthread_mutex_unlock(&st.lock);
}

static void worker_give(void)
{
	pthread_mutex_lock(&st.lock);
	st.busy--;
	pthread_cond_broadcast(&st.worker_free);
	pthread_mutex_unlock(&st.lock);
}

/* Serves one request that has arrived; returns true when it was answered with 200. */
static bool serve_request(int fd, unsigned long nth, long arrived)
{
	if (opt.fail != FAIL_NONE || (opt.fail_every > 0 && nth % (unsigned long)opt.fail_every == 0)) {
		switch (opt.fail_every > 0 ? FAIL_RESET : opt.fail) {
		case FAIL_503:
			answer(fd, 503, "unavailable\n");
			break;
		case FAIL_CLOSE:
			break;
		default:
			reset(fd);
		}
		return false;
	}
	if (arrived >= opt.stall_from && arrived < opt.stall_to &&
	    client_left_within(fd, opt.stall_ms))
		return false;
	if (opt.workers > 0) {
		worker_take();
		tbt_sleep_ms(opt.service_ms);
		worker_give();
	} else if (opt.delay_ms > 0 && client_left_within(fd, opt.delay_ms)) {
		return false;
	}
	answer(fd, 200, "ok\n");
	return true;
}

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char req[REQ_MAX];
	unsigned long nth;
	long arrived;
	bool ok;

	if (read_head(fd, req, sizeof req) < 0)
		goto out;
	arrived = since_t0();
	pthread_mutex_lock(&st.lock);
	nth = ++st.requests;
	if (++st.inflight > st.max_inflight)
		st.max_inflight = st.inflight;
	pthread_mutex_unlock(&st.lock);

	ok = serve_request(fd, nth, arrived);

	pthread_mutex_lock(&st.lock);
	st.inflight--;
	if (ok)
		st.answered++;
	else
		st.failed++;
	pthread_mutex_unlock(&st.lock);
out:
	close(fd);
	return NULL;
}

/* ---- the control port ------------------------------------------------------------------ */

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

static void control_inflight(char *out, size_t cap, long from, long to)
{
	long *vals = malloc((st.samples.len / 2 + 1) * sizeof *vals);
	size_t n = 0;

	if (!vals) {
		snprintf(out, cap, "error=ENOMEM\n");
		return;
	}
	for (size_t i = 0; i + 1 < st.samples.len; i += 2)
		if (st.samples.v[i] >= from && st.samples.v[i] < to)
			vals[n++] = st.samples.v[i + 1];
	qsort(vals, n, sizeof *vals, cmp_long);
	if (n == 0)
		snprintf(out, cap, "samples=0\n");
	else
		snprintf(out, cap, "samples=%zu p10=%ld p50=%ld p90=%ld max=%ld\n", n,
			 vals[n / 10], vals[n / 2], vals[n * 9 / 10], vals[n - 1]);
	free(vals);
}

/* Reads one line of at most cap - 1 bytes. Returns 0, or -1 when the client left first. */
static int read_line(int fd, char *buf, size_t cap)
{
	size_t got = 0;

	while (got < cap - 1) {
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		if (strchr(buf, '\n'))
			return 0;
	}
	return 0;
}

/* Answers one control line; the counters are read under st.lock. */
static void control(int fd)
{
	char line[256], out[512];
	long from = 0, to = 0;

	if (read_line(fd, line, sizeof line) < 0)
		return;
	pthread_mutex_lock(&st.lock);
	if (!strncmp(line, "stats", 5)) {
		snprintf(out, sizeof out,
			 "accepted=%lu requests=%lu answered=%lu failed=%lu inflight=%ld "
			 "max_inflight=%ld\n", st.accepted, st.requests, st.answered, st.failed,
			 st.inflight, st.max_inflight);
	} else if (sscanf(line, "accepts %ld %ld", &from, &to) == 2) {
		unsigned long count = 0;

		for (size_t i = 0; i < st.accepts.len; i++)
			count += st.accepts.v[i] >= from && st.accepts.v[i] < to;
		snprintf(out, sizeof out, "count=%lu\n", count);
	} else if (sscanf(line, "inflight %ld %ld", &from, &to) == 2) {
		control_inflight(out, sizeof out, from, to);
	} else {
		snprintf(out, sizeof out, "error=unknown-command\n");
	}
	pthread_mutex_unlock(&st.lock);
	send_all(fd, out, strlen(out));
}

/* ---- threads --------------------------------------------------------------------------- */

static void spawn(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t tid;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	if (pthread_create(&tid, &attr, fn, arg) != 0) {
		fprintf(stderr, "stormserver: cannot start a thread\n");
		if (fn == serve)
			close((int)(long)arg);
	}
	pthread_attr_destroy(&attr);
}

static void *accept_loop(void *arg)
{
	int listener = (int)(long)arg;

	for (;;) {
		int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				tbt_sleep_ms(10); /* out of fds or memory: a closing connection frees one */
			continue;
		}
		pthread_mutex_lock(&st.lock);
		st.accepted++;
		series_add(&st.accepts, since_t0());
		pthread_mutex_unlock(&st.lock);
		spawn(serve, (void *)(long)fd);
	}
	return NULL;
}

static void *control_loop(void *arg)
{
	int listener = (int)(long)arg;

	for (;;) {
		int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			tbt_sleep_ms(errno == EINTR ? 0 : 10);
			continue;
		}
		control(fd);
		close(fd);
	}
	return NULL;
}

static void *sampler(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&st.lock);
		if (st.samples.len / 2 < INFLIGHT_MAX) {
			series_add(&st.samples, since_t0());
			series_add(&st.samples, st.inflight);
		}
		pthread_mutex_unlock(&st.lock);
		tbt_sleep_ms(SAMPLE_MS);
	}
	return NULL;
}

/* ---- start-up -------------------------------------------------------------------------- */

/* A listener on 127.0.0.1, an ephemeral port; returns the socket or -1 with errno set. */
static int listen_any(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Through path.tmp and rename(): a reader polling for the file never sees half of it. */
static int write_port_file(const char *path, int port)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", port);
	if (fclose(f) != 0 || rename(tmp, path) < 0)
		return -1;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: stormserver --port-file F --control-port-file F [--t0-ms MS] "
		"[--stall-from MS --stall-to MS --stall-ms MS] [--workers N --service-ms MS] "
		"[--delay-ms MS] [--fail reset|503|close] [--fail-every K]\n");
	exit(2);
}

static long num(const char *opt_name, const char *v)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (*v == '\0' || *end || n < 0) {
		fprintf(stderr, "stormserver: %s wants a number >= 0, not '%s'\n", opt_name, v);
		exit(2);
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *port_file = NULL, *control_file = NULL;
	int listener, ctl, port, ctl_port, sig;
	sigset_t stop;

	opt.t0 = tbt_now_ms();
	for (int i = 1; i < argc; i += 2) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			usage();
		if (!strcmp(o, "--port-file"))
			port_file = v;
		else if (!strcmp(o, "--control-port-file"))
			control_file = v;
		else if (!strcmp(o, "--t0-ms"))
			opt.t0 = (double)num(o, v);
		else if (!strcmp(o, "--stall-from"))
			opt.stall_from = num(o, v);
		else if (!strcmp(o, "--stall-to"))
			opt.stall_to = num(o, v);
		else if (!strcmp(o, "--stall-ms"))
			opt.stall_ms = num(o, v);
		else if (!strcmp(o, "--workers"))
			opt.workers = (int)num(o, v);
		else if (!strcmp(o, "--service-ms"))
			opt.service_ms = num(o, v);
		else if (!strcmp(o, "--delay-ms"))
			opt.delay_ms = num(o, v);
		else if (!strcmp(o, "--fail-every"))
			opt.fail_every = num(o, v);
		else if (!strcmp(o, "--fail"))
			opt.fail = !strcmp(v, "reset") ? FAIL_RESET : !strcmp(v, "503") ? FAIL_503 :
				   !strcmp(v, "close") ? FAIL_CLOSE : (usage(), FAIL_NONE);
		else
			usage();
	}
	if (!port_file || !control_file)
		usage();

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);

	listener = listen_any(&port);
	ctl = listen_any(&ctl_port);
	if (listener < 0 || ctl < 0) {
		perror("stormserver: listen");
		return 1;
	}
	spawn(accept_loop, (void *)(long)listener);
	spawn(control_loop, (void *)(long)ctl);
	spawn(sampler, NULL);
	if (write_port_file(control_file, ctl_port) < 0 || write_port_file(port_file, port) < 0) {
		perror("stormserver: port file");
		return 1;
	}
	while (sigwait(&stop, &sig) != 0)
		;
	return 0;
}
