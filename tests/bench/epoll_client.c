/*
 * epoll_client.c - an event-loop client: one thread, one epoll instance, C keep-alive
 * connections, each making request/response exchanges driven by epoll_wait.
 *
 * usage: epoll_client --port P [--conns C] [--n N] [--warmup W] [--size B] [--churn]
 *
 *   --conns C   connections, each with one exchange outstanding at a time (default 64)
 *   --n N       exchanges per connection, measured (default 1000)
 *   --warmup W  exchanges per connection before the start, not measured (default N/10)
 *   --size B    request and response size in bytes (default 64, at most 4096)
 *   --churn     libuv's pattern: each socket is registered for EPOLLOUT while it has a
 *               request to send and for EPOLLIN while it waits for the answer, switched
 *               with EPOLL_CTL_MOD twice per exchange; without it, every socket stays
 *               registered for EPOLLIN (level-triggered) and requests are written at once
 *
 * Prints one line: conns= n= secs= xps= p50_us= p99_us= cpu_us= errors= waits=, where
 * waits is the number of epoll_wait calls per measured exchange.
 * Exit status 1 when a connection fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SIZE_MAX_BYTES 4096

struct conn {
    int fd;
    size_t got;     /* bytes of the current answer read */
    long left;      /* exchanges still to start in this phase */
    int64_t t0;     /* when the current request was written */
};

static struct sockaddr_in target = { .sin_family = AF_INET };
static size_t size = 64;
static bool churn;
static char request[SIZE_MAX_BYTES];
static int64_t *lat;
static long n_lat, waits;

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void set_events(int ep, struct conn *c, uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.ptr = c };

    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        die("epoll_client: epoll_ctl MOD");
}

/* Writes c's request (small: the socket buffer takes it whole) and starts its clock. */
static void send_request(int ep, struct conn *c)
{
    c->left--;
    c->got = 0;
    c->t0 = now_ns();
    if (write(c->fd, request, size) != (ssize_t)size)
        die("epoll_client: write");
    if (churn)
        set_events(ep, c, EPOLLIN);
}

/* Reads what is there of c's answer; at its end, records the exchange and begins the next
 * (or, with --churn, asks for EPOLLOUT to begin it). Returns 1 when c finished the phase. */
static int on_readable(int ep, struct conn *c, bool record)
{
    char buf[SIZE_MAX_BYTES];
    ssize_t n = read(c->fd, buf, size - c->got);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) {
        fprintf(stderr, "epoll_client: read: %s\n", n == 0 ? "EOF" : strerror(errno));
        exit(1);
    }
    c->got += (size_t)n;
    if (c->got < size)
        return 0;
    if (record)
        lat[n_lat++] = now_ns() - c->t0;
    if (c->left == 0) {
        if (churn)
            set_events(ep, c, 0);
        return 1;
    }
    if (churn)
        set_events(ep, c, EPOLLOUT);
    else
        send_request(ep, c);
    return 0;
}

/* Every connection makes `per` exchanges, all outstanding at once, driven by epoll_wait. */
static void run_phase(int ep, struct conn *conns, long nconns, long per, bool record)
{
    struct epoll_event *events = calloc((size_t)nconns, sizeof(*events));
    long active = nconns;

    if (events == NULL)
        die("epoll_client: calloc");
    for (long i = 0; i < nconns; i++) {
        conns[i].left = per;
        if (churn)
            set_events(ep, &conns[i], EPOLLOUT);
        else
            send_request(ep, &conns[i]);
    }
    while (active > 0) {
        int n = epoll_wait(ep, events, (int)nconns, -1);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("epoll_client: epoll_wait");
        if (record)
            waits++;
        for (int i = 0; i < n; i++) {
            struct conn *c = events[i].data.ptr;

            if (churn && (events[i].events & EPOLLOUT))
                send_request(ep, c);
            else if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                active -= on_readable(ep, c, record);
        }
    }
    free(events);
}

static void usage(void)
{
    fprintf(stderr, "usage: epoll_client --port P [--conns C] [--n N] [--warmup W] "
                    "[--size B] [--churn]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    long nconns = 64, n_per = 1000, warmup = -1;
    int port = 0, ep;
    struct conn *conns;
    int64_t t0, t1;
    double cpu0, cpu1, secs;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--churn") == 0)
            churn = true;
        else if (i + 1 >= argc)
            usage();
        else if (strcmp(a, "--port") == 0)
            port = atoi(argv[++i]);
        else if (strcmp(a, "--conns") == 0)
            nconns = atol(argv[++i]);
        else if (strcmp(a, "--n") == 0)
            n_per = atol(argv[++i]);
        else if (strcmp(a, "--warmup") == 0)
            warmup = atol(argv[++i]);
        else if (strcmp(a, "--size") == 0)
            size = (size_t)atol(argv[++i]);
        else
            usage();
    }
    if (port <= 0 || nconns < 1 || n_per < 1 || size < 1 || size > SIZE_MAX_BYTES)
        usage();
    if (warmup < 0)
        warmup = n_per / 10;
    target.sin_port = htons((uint16_t)port);
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(request, 'x', size);

    conns = calloc((size_t)nconns, sizeof(*conns));
    lat = malloc((size_t)(nconns * n_per) * sizeof(*lat));
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (conns == NULL || lat == NULL || ep < 0)
        die("epoll_client: setup");
    for (long i = 0; i < nconns; i++) {
        struct conn *c = &conns[i];
        struct epoll_event ev = { .events = churn ? 0 : EPOLLIN, .data.ptr = c };
        int one = 1;

        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
            die("epoll_client: socket");
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->fd, (struct sockaddr *)&target, sizeof(target)) < 0)
            die("epoll_client: connect");
        if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0 ||
            epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
            die("epoll_client: register");
    }
    if (warmup > 0)
        run_phase(ep, conns, nconns, warmup, false);
    t0 = now_ns();
    cpu0 = cpu_secs();
    run_phase(ep, conns, nconns, n_per, true);
    t1 = now_ns();
    cpu1 = cpu_secs();

    qsort(lat, (size_t)n_lat, sizeof(*lat), cmp_i64);
    secs = (double)(t1 - t0) / 1e9;
    printf("conns=%ld n=%ld secs=%.4f xps=%.1f p50_us=%.2f p99_us=%.2f cpu_us=%.3f "
           "errors=0 waits=%.3f\n",
           nconns, n_lat, secs, n_lat / secs, lat[n_lat / 2] / 1e3,
           lat[(n_lat * 99) / 100] / 1e3, (cpu1 - cpu0) * 1e6 / (double)n_lat,
           (double)waits / (double)n_lat);
    return 0;
}
