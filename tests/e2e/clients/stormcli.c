/*
 * stormcli.c - the legacy caller of the protection tests (test_protect.py, the bench's storm
 * and adaptive workloads): N threads, each calling the server in a loop (connect, send an
 * HTTP/1.0 request, read the answer to EOF, close) with plain blocking sockets, retrying a
 * failed call itself as legacy code does. It prints what it saw, second by second.
 *
 * usage: stormcli --port P [--threads N] [--secs D] [--t0-ms MS] [--rcvtimeo MS]
 *                 [--retries R] [--retry-pause-ms MS] [--think-ms MS] [--mark-ms MS]
 *                 [--warmup-ms MS] [--path PATH]
 *   --t0-ms MS          start calling at this CLOCK_MONOTONIC time (ms), the server's origin
 *                       too; every time printed counts from it (default: now)
 *   --rcvtimeo MS       the program's own SO_RCVTIMEO (default 0: none, wait forever)
 *   --retries R         a failed attempt is retried R times before the call gives up
 *                       (default -1: retried until it succeeds or the run ends)
 *   --retry-pause-ms    the pause before a retry (default 0: at once)
 *   --think-ms MS       the pause after a call ends, before the next call (default 0)
 *   --mark-ms MS        report recovered_ms: when, after MS, the first call succeeded
 *   --warmup-ms MS      latencies and rps count the calls that started at MS or later
 * Output: "sec=K ok= failed= refused=" per second (attempts that ended in that second;
 * refused = connect failed with ECONNREFUSED, nothing sent), then one line "total ...":
 * first (attempts that were not retries, i.e. calls) attempts ok failed refused rps p50_ms p99_ms (the whole attempt: connect to
 * EOF) xp50_ms xp99_ms (request sent to first answer byte) max_inflight (attempts between
 * connect and answer at once) recovered_ms (-1: never) err_NAME=count per errno.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tbtest.h"

#define THREADS_MAX 1024
#define SECS_MAX    600
#define ERRNO_MAX   256
#define ERR_STATUS  (ERRNO_MAX - 1) /* an answer other than 200 */
#define ERR_SHORT   (ERRNO_MAX - 2) /* EOF before a whole status line */

static struct {
	int port, threads, secs, retries;
	long rcvtimeo_ms, retry_pause_ms, think_ms, mark_ms, warmup_ms;
	double t0;
	const char *path;
} opt = { .threads = 50, .secs = 8, .retries = -1, .mark_ms = -1, .path = "/" };

static struct {
	atomic_ulong ok[SECS_MAX + 1], failed[SECS_MAX + 1], refused[SECS_MAX + 1];
	atomic_ulong first, attempts, err[ERRNO_MAX];
	atomic_long inflight, max_inflight;
	atomic_long recovered_ms; /* LONG_MAX: not yet */
} tally;

/* Latencies of one thread, in ms; merged at the end. */
struct lat {
	double *total, *xchg;
	size_t len, cap;
};

static void lat_add(struct lat *l, double total, double xchg)
{
	if (l->len == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		double *t = realloc(l->total, cap * sizeof *t), *x;

		if (!t)
			return;
		l->total = t;
		x = realloc(l->xchg, cap * sizeof *x);
		if (!x)
			return;
		l->xchg = x;
		l->cap = cap;
	}
	l->total[l->len] = total;
	l->xchg[l->len++] = xchg;
}

static double since_t0(void)
{
	return tbt_now_ms() - opt.t0;
}

static void sleep_until(double t_ms)
{
	double left = t_ms - since_t0();

	if (left > 0)
		tbt_sleep_ms((long)left);
}

static void note_inflight(long delta)
{
	long now = atomic_fetch_add(&tally.inflight, delta) + delta, max;

	max = atomic_load(&tally.max_inflight);
	while (now > max && !atomic_compare_exchange_weak(&tally.max_inflight, &max, now))
		;
}

/*
 * One attempt: returns 0 when the answer was a whole 200, else an errno (ERR_STATUS,
 * ERR_SHORT for the answer's own faults). *at_connect tells a failure of connect() itself;
 * *xchg_ms the time from the request sent to the first answer byte (-1 without one).
 */
static int attempt(bool *at_connect, double *xchg_ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char req[512], buf[4096], head[16] = "";
	size_t headlen = 0;
	double sent = 0;
	int fd, len, err = 0;

	*at_connect = false;
	*xchg_ms = -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	if (opt.rcvtimeo_ms > 0) {
		struct timeval tv = { .tv_sec = opt.rcvtimeo_ms / 1000,
				      .tv_usec = (opt.rcvtimeo_ms % 1000) * 1000 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		err = errno;
		*at_connect = true;
		close(fd);
		return err;
	}
	note_inflight(1);
	len = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", opt.path);
	if (send(fd, req, (size_t)len, MSG_NOSIGNAL) != len) {
		err = errno ? errno : EIO;
		goto out;
	}
	sent = tbt_now_ms();
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);

		if (n < 0) {
			err = errno == EAGAIN ? ETIMEDOUT : errno; /* SO_RCVTIMEO's expiry */
			goto out;
		}
		if (n == 0)
			break;
		if (*xchg_ms < 0)
			*xchg_ms = tbt_now_ms() - sent;
		for (ssize_t i = 0; i < n && headlen < sizeof head - 1; i++)
			head[headlen++] = buf[i];
	}
	if (headlen < 12)
		err = ERR_SHORT;
	else if (strncmp(head, "HTTP/1.", 7) != 0 || strncmp(head + 9, "200", 3) != 0)
		err = ERR_STATUS;
out:
	note_inflight(-1);
	close(fd);
	return err;
}

static void record(int err, bool at_connect, double ended_ms)
{
	long sec = (long)(ended_ms / 1000);

	if (sec < 0)
		sec = 0;
	if (sec > SECS_MAX)
		sec = SECS_MAX;
	atomic_fetch_add(&tally.attempts, 1);
	if (err == 0) {
		atomic_fetch_add(&tally.ok[sec], 1);
		if (opt.mark_ms >= 0 && ended_ms >= opt.mark_ms) {
			long t = (long)(ended_ms - opt.mark_ms), cur = atomic_load(&tally.recovered_ms);

			while (t < cur && !atomic_compare_exchange_weak(&tally.recovered_ms, &cur, t))
				;
		}
		return;
	}
	atomic_fetch_add(&tally.failed[sec], 1);
	if (at_connect && err == ECONNREFUSED)
		atomic_fetch_add(&tally.refused[sec], 1);
	atomic_fetch_add(&tally.err[err > 0 && err < ERRNO_MAX ? err : 0], 1);
}

static void *caller(void *arg)
{
	struct lat *lat = arg;
	double end = opt.secs * 1000.0;

	sleep_until(0);
	while (since_t0() < end) {
		double started = since_t0();

		atomic_fetch_add(&tally.first, 1);
		for (int tries = 0;; tries++) {
			double t = since_t0(), xchg;
			bool at_connect;
			int err = attempt(&at_connect, &xchg);
			double ended = since_t0();

			record(err, at_connect, ended);
			if (err == 0 && started >= opt.warmup_ms)
				lat_add(lat, ended - t, xchg);
			if (err == 0 || ended >= end || (opt.retries >= 0 && tries >= opt.retries))
				break;
			if (opt.retry_pause_ms > 0)
				tbt_sleep_ms(opt.retry_pause_ms);
		}
		if (opt.think_ms > 0)
			tbt_sleep_ms(opt.think_ms);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double pct(double *v, size_t n, int p)
{
	return n ? v[(n - 1) * (size_t)p / 100] : -1;
}

static void report(struct lat *lats, int n)
{
	size_t total = 0, k = 0, k2 = 0;
	double *all, *xall, secs = opt.secs - opt.warmup_ms / 1000.0;
	unsigned long ok = 0, failed = 0, refused = 0;
	long rec = atomic_load(&tally.recovered_ms);

	for (int i = 0; i <= opt.secs && i <= SECS_MAX; i++) {
		printf("sec=%d ok=%lu failed=%lu refused=%lu\n", i, atomic_load(&tally.ok[i]),
		       atomic_load(&tally.failed[i]), atomic_load(&tally.refused[i]));
		ok += tally.ok[i];
		failed += tally.failed[i];
		refused += tally.refused[i];
	}
	for (int i = 0; i < n; i++)
		total += lats[i].len;
	all = malloc((total + 1) * sizeof *all);
	xall = malloc((total + 1) * sizeof *xall);
	if (!all || !xall) {
		fprintf(stderr, "stormcli: out of memory for %zu latencies\n", total);
		exit(1);
	}
	for (int i = 0; i < n; i++)
		for (size_t j = 0; j < lats[i].len; j++) {
			all[k++] = lats[i].total[j];
			if (lats[i].xchg[j] >= 0)
				xall[k2++] = lats[i].xchg[j];
		}
	qsort(all, k, sizeof *all, cmp_double);
	qsort(xall, k2, sizeof *xall, cmp_double);
	printf("total first=%lu attempts=%lu ok=%lu failed=%lu refused=%lu rps=%.1f "
	       "p50_ms=%.2f p99_ms=%.2f xp50_ms=%.2f xp99_ms=%.2f max_inflight=%ld recovered_ms=%ld",
	       atomic_load(&tally.first), atomic_load(&tally.attempts),
	       ok, failed, refused, secs > 0 ? k / secs : 0.0, pct(all, k, 50), pct(all, k, 99),
	       pct(xall, k2, 50), pct(xall, k2, 99), atomic_load(&tally.max_inflight),
	       rec == __LONG_MAX__ ? -1L : rec);
	for (int e = 0; e < ERRNO_MAX; e++) {
		unsigned long c = atomic_load(&tally.err[e]);

		if (c == 0)
			continue;
		printf(" err_%s=%lu", e == ERR_STATUS ? "STATUS" : e == ERR_SHORT ? "SHORT" :
		       e == 0 ? "OTHER" : tbt_errno_name(e), c);
	}
	printf("\n");
	free(all);
	free(xall);
}

static long num(const char *name, const char *v, long min)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (*v == '\0' || *end || n < min) {
		fprintf(stderr, "stormcli: %s wants a number >= %ld, not '%s'\n", name, min, v);
		exit(2);
	}
	return n;
}

int main(int argc, char **argv)
{
	static pthread_t tids[THREADS_MAX];
	static struct lat lats[THREADS_MAX];
	pthread_attr_t attr;

	opt.t0 = tbt_now_ms();
	for (int i = 1; i < argc; i += 2) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v) {
			fprintf(stderr, "stormcli: %s needs a value\n", o);
			return 2;
		}
		if (!strcmp(o, "--port"))
			opt.port = (int)num(o, v, 1);
		else if (!strcmp(o, "--threads"))
			opt.threads = (int)num(o, v, 1);
		else if (!strcmp(o, "--secs"))
			opt.secs = (int)num(o, v, 1);
		else if (!strcmp(o, "--t0-ms"))
			opt.t0 = (double)num(o, v, 0);
		else if (!strcmp(o, "--rcvtimeo"))
			opt.rcvtimeo_ms = num(o, v, 0);
		else if (!strcmp(o, "--retries"))
			opt.retries = (int)num(o, v, -1);
		else if (!strcmp(o, "--retry-pause-ms"))
			opt.retry_pause_ms = num(o, v, 0);
		else if (!strcmp(o, "--think-ms"))
			opt.think_ms = num(o, v, 0);
		else if (!strcmp(o, "--mark-ms"))
			opt.mark_ms = num(o, v, 0);
		else if (!strcmp(o, "--warmup-ms"))
			opt.warmup_ms = num(o, v, 0);
		else if (!strcmp(o, "--path"))
			opt.path = v;
		else {
			fprintf(stderr, "stormcli: unknown option %s\n", o);
			return 2;
		}
	}
	if (opt.port == 0 || opt.threads > THREADS_MAX || opt.secs > SECS_MAX) {
		fprintf(stderr, "usage: stormcli --port P [--threads N<=%d] [--secs D<=%d] ...\n",
			THREADS_MAX, SECS_MAX);
		return 2;
	}
	atomic_store(&tally.recovered_ms, __LONG_MAX__);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 128 * 1024);
	for (int i = 0; i < opt.threads; i++)
		if (pthread_create(&tids[i], &attr, caller, &lats[i]) != 0) {
			fprintf(stderr, "stormcli: cannot start thread %d\n", i);
			return 1;
		}
	for (int i = 0; i < opt.threads; i++)
		pthread_join(tids[i], NULL);
	report(lats, opt.threads);
	return 0;
}
