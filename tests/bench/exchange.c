/*
 * exchange.c - a blocking request/response client: the program timebox is loaded into.
 * Each thread writes a request and reads the whole echo back, over a keep-alive connection
 * or (--reconnect) a fresh connection per exchange; the run is timed from a common start.
 *
 * usage: exchange --port P [--conns C] [--n N] [--warmup W] [--size B] [--reconnect]
 *                 [--idle K] [--blocked T] [--kind raw|http|tls] [--writev] [--poll]
 *
 *   --conns C     C threads, one connection each (default 1)
 *   --n N         exchanges per thread, measured (default 10000)
 *   --warmup W    exchanges per thread before the start, not measured (default N/10)
 *   --size B      request and response size in bytes (default 64, at most 4096)
 *   --reconnect   connect, exchange, close for every exchange (the gate workload)
 *   --idle K      before the start, open K more connections and make one exchange on each,
 *                 then leave them idle (the scale workload); RSS is read around it
 *   --blocked T   before the start, T more threads each block in recv on a connection of
 *                 their own that never gets an answer (they are not joined)
 *   --kind K      what the exchanges carry (canned.h): raw (default: --size bytes each way,
 *                 echoed), http or tls (against echo_server --answer K); a tls connection
 *                 makes its handshake when it opens, before any measured exchange
 *   --writev      each request goes out with writev(2), in two pieces (its first 16 bytes
 *                 and the rest), as a client that writes a header and a body does
 *   --poll        the socket is non-blocking once connected, and each read is preceded by
 *                 poll(2) for POLLIN (a write that the buffer does not take, by one for
 *                 POLLOUT), as a client with timeouts of its own does (curl, libpq)
 *
 * Prints one line: conns= n= secs= xps= p50_us= p99_us= cpu_us= errors= idle= blocked=
 * idle_rss_kb=, where cpu_us is the process's user+system CPU per exchange (getrusage),
 * and idle_rss_kb is the growth of anonymous RSS (RssAnon) while the idle connections were opened.
 * Exit status 1 when a connection fails during the measured run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "canned.h"

#define SIZE_MAX_BYTES 4096

struct worker {
    pthread_t tid;
    int fd;
    int64_t *lat;       /* ns per measured exchange */
    long done;
    long errors;
};

static struct sockaddr_in target = { .sin_family = AF_INET };
static long n_per, warmup;
static size_t size = 64;
static bool reconnect;
static bool use_writev;
static bool use_poll;
static pthread_barrier_t start_line;
static struct canned_step script[CANNED_MAX_STEPS];
static int script_len;

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int step(int fd, const struct canned_step *st);

/* Connects (and, for tls, makes the handshake: every step of the script but the last). */
static int open_conn(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;

    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&target, sizeof(target)) < 0) {
        int err = errno;

        close(fd);
        errno = err;
        return -1;
    }
    if (use_poll)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (int i = 0; i + 1 < script_len; i++) {
        if (step(fd, &script[i]) < 0) {
            int err = errno;

            close(fd);
            errno = err;
            return -1;
        }
    }
    return fd;
}

/* Closes with a reset: a benchmark that opens thousands of connections a second must not
 * fill the port range with TIME_WAIT. */
static void close_hard(int fd)
{
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };

    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

/* --poll: waits until fd is ready for `events`; 0, or -1 with errno set. */
static int await(int fd, short events)
{
    struct pollfd p = { .fd = fd, .events = events };

    while (poll(&p, 1, -1) < 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

/* --poll: the whole request, written as the buffer takes it. */
static int write_polled(int fd, const unsigned char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);

        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (await(fd, POLLOUT) < 0)
                return -1;
            continue;
        }
        if (w < 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Sends a step's request in one write and reads its whole answer. Returns 0, or -1 with
 * errno set (EPIPE at EOF). */
static int step(int fd, const struct canned_step *st)
{
    char buf[CANNED_MAX_BYTES];
    size_t got = 0;

    if (use_poll) {
        if (write_polled(fd, st->client, st->client_len) < 0)
            return -1;
    } else if (use_writev && st->client_len > 16) {
        struct iovec v[2] = { { (void *)st->client, 16 },
                              { (void *)(st->client + 16), st->client_len - 16 } };

        if (writev(fd, v, 2) != (ssize_t)st->client_len)
            return -1;
    } else if (write(fd, st->client, st->client_len) != (ssize_t)st->client_len) {
        return -1;
    }
    while (got < st->server_len) {
        ssize_t n;

        if (use_poll && await(fd, POLLIN) < 0)
            return -1;
        n = read(fd, buf + got, st->server_len - got);
        if (n < 0 && (errno == EINTR || (use_poll && errno == EAGAIN)))
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EPIPE;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

/* One request and its whole answer. */
static int exchange(int fd)
{
    return step(fd, &script[script_len - 1]);
}

static int one_round(struct worker *w)
{
    int rc;

    if (!reconnect)
        return exchange(w->fd);
    w->fd = open_conn();
    if (w->fd < 0)
        return -1;
    rc = exchange(w->fd);
    close_hard(w->fd);
    return rc;
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;

    for (long i = 0; i < warmup; i++)
        if (one_round(w) < 0)
            w->errors++;
    pthread_barrier_wait(&start_line);
    for (long i = 0; i < n_per; i++) {
        int64_t t0 = now_ns();

        if (one_round(w) < 0) {
            w->errors++;
            if (!reconnect) {
                perror("exchange");
                break;
            }
            continue;
        }
        w->lat[w->done++] = now_ns() - t0;
    }
    return NULL;
}

static void *run_blocked(void *arg)
{
    char c;
    int fd = (int)(intptr_t)arg;

    pthread_barrier_wait(&start_line);
    while (recv(fd, &c, 1, 0) > 0)
        ;
    return NULL;
}

static long rss_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "RssAnon: %ld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static double cpu_secs(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static void usage(void)
{
    fprintf(stderr, "usage: exchange --port P [--conns C] [--n N] [--warmup W] [--size B] "
                    "[--reconnect] [--idle K] [--blocked T] [--kind raw|http|tls] [--writev] "
                    "[--poll]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    long conns = 1, idle = 0, blocked = 0, total = 0, errors = 0, rss0 = 0, rss1 = 0;
    int port = 0;
    struct worker *w;
    int64_t *all, t0, t1;
    double cpu0, cpu1, secs;
    pthread_attr_t attr;
    struct rlimit rl;
    const char *kind = "raw";

    n_per = 10000;
    warmup = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--reconnect") == 0)
            reconnect = true;
        else if (strcmp(a, "--writev") == 0)
            use_writev = true;
        else if (strcmp(a, "--poll") == 0)
            use_poll = true;
        else if (i + 1 >= argc)
            usage();
        else if (strcmp(a, "--port") == 0)
            port = atoi(argv[++i]);
        else if (strcmp(a, "--conns") == 0)
            conns = atol(argv[++i]);
        else if (strcmp(a, "--n") == 0)
            n_per = atol(argv[++i]);
        else if (strcmp(a, "--warmup") == 0)
            warmup = atol(argv[++i]);
        else if (strcmp(a, "--size") == 0)
            size = (size_t)atol(argv[++i]);
        else if (strcmp(a, "--idle") == 0)
            idle = atol(argv[++i]);
        else if (strcmp(a, "--blocked") == 0)
            blocked = atol(argv[++i]);
        else if (strcmp(a, "--kind") == 0)
            kind = argv[++i];
        else
            usage();
    }
    if (port <= 0 || conns < 1 || n_per < 1 || size < 1 || size > SIZE_MAX_BYTES ||
        idle < 0 || blocked < 0 || (script_len = canned_script(kind, size, script)) == 0)
        usage();
    if (warmup < 0)
        warmup = n_per / 10;
    target.sin_port = htons((uint16_t)port);
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    rss0 = rss_kb();
    for (long i = 0; i < idle; i++) {
        int fd = open_conn();

        if (fd < 0 || exchange(fd) < 0) {
            fprintf(stderr, "exchange: idle connection %ld: %s\n", i, strerror(errno));
            return 1;
        }
    }
    rss1 = rss_kb();

    w = calloc((size_t)conns, sizeof(*w));
    all = malloc((size_t)(conns * n_per) * sizeof(*all));
    if (w == NULL || all == NULL) {
        fprintf(stderr, "exchange: out of memory\n");
        return 1;
    }
    pthread_barrier_init(&start_line, NULL, (unsigned)(conns + blocked + 1));
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    for (long i = 0; i < blocked; i++) {
        pthread_t tid;
        int fd = open_conn();

        if (fd < 0 || pthread_create(&tid, &attr, run_blocked, (void *)(intptr_t)fd) != 0) {
            fprintf(stderr, "exchange: blocked thread %ld: %s\n", i, strerror(errno));
            return 1;
        }
        pthread_detach(tid);
    }
    for (long i = 0; i < conns; i++) {
        w[i].lat = all + i * n_per;
        w[i].fd = -1;
        if (!reconnect && (w[i].fd = open_conn()) < 0) {
            perror("exchange: connect");
            return 1;
        }
        if (pthread_create(&w[i].tid, &attr, run_worker, &w[i]) != 0) {
            perror("exchange: pthread_create");
            return 1;
        }
    }
    pthread_barrier_wait(&start_line);
    t0 = now_ns();
    cpu0 = cpu_secs();
    for (long i = 0; i < conns; i++)
        pthread_join(w[i].tid, NULL);
    t1 = now_ns();
    cpu1 = cpu_secs();

    /* Gather every thread's latencies into one sorted run. */
    for (long i = 0; i < conns; i++) {
        memmove(all + total, w[i].lat, (size_t)w[i].done * sizeof(*all));
        total += w[i].done;
        errors += w[i].errors;
    }
    qsort(all, (size_t)total, sizeof(*all), cmp_i64);
    secs = (double)(t1 - t0) / 1e9;
    printf("conns=%ld n=%ld secs=%.4f xps=%.1f p50_us=%.2f p99_us=%.2f cpu_us=%.3f "
           "errors=%ld idle=%ld blocked=%ld idle_rss_kb=%ld\n",
           conns, total, secs, total / secs, total ? all[total / 2] / 1e3 : 0.0,
           total ? all[(total * 99) / 100] / 1e3 : 0.0,
           total ? (cpu1 - cpu0) * 1e6 / (double)total : 0.0, errors, idle, blocked,
           rss1 - rss0);
    fflush(stdout);
    /* Blocked threads stay in recv: leave without waiting for them. */
    _exit(!reconnect && errors > 0 ? 1 : 0);
}
