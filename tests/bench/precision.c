/*
 * precision.c - how late does a 300 ms limit fire? T threads each wait on a connection to a
 * peer that never answers, all starting together, and measure (return time - limit).
 *
 * usage: precision --threads T --mode timebox|first_byte|poll|poll_deadline|rcvtimeo|one_cutter
 *        [--ms L]
 *
 *   timebox    a blocking recv, cut by the preloaded library's deadline (TIMEBOX_DEADLINE
 *              must be L ms); the clock starts before connect, where the deadline opens
 *   first_byte the same cut by TIMEBOX_FIRST_BYTE_TIMEOUT (L ms), which starts in recv;
 *              the clock starts after connect, as for the native modes
 *   poll       poll(fd, POLLIN, L) natively: the kernel's hrtimer, the floor
 *   poll_deadline  ppoll natively until L after a clock started before connect, as for
 *              timebox: every thread's limit falls in the same instant (the start line)
 *              instead of spread over the connects, the floor for timebox's deadline
 *   rcvtimeo   a blocking recv with SO_RCVTIMEO = L ms natively: the kernel's timer wheel
 *   one_cutter a blocking recv natively, ended by one other thread that sleeps until each
 *              wait's limit in turn (L after a clock started before connect, as for
 *              timebox) and shuts the socket's reading half: what cutting every wait from a
 *              single thread costs at best, without any of timebox's work - the floor of
 *              its watchdog when many limits fall at once
 *
 * The silent peer is a listener in this process whose accepted connections are held open
 * and never written to. Prints one line: threads= mode= min_us= p50_us= p99_us= max_us=
 * early= bad=, where early counts returns before the limit and bad counts waits that ended
 * some other way than the mode's timeout (data, EOF, wrong errno).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum mode { M_TIMEBOX, M_FIRST_BYTE, M_POLL, M_POLL_DEADLINE, M_RCVTIMEO, M_ONE_CUTTER };

struct waiter {
    pthread_t tid;
    int64_t late_ns;
    int bad;
    int fd;     /* one_cutter: the socket to cut, and when */
    int64_t due;
};

static struct sockaddr_in peer = { .sin_family = AF_INET };
static enum mode mode;
static int64_t limit_ns;
static pthread_barrier_t start_line;
static pthread_barrier_t all_connected; /* one_cutter: every wait is known to the cutter */

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Accepts every connection and keeps it open, unread and unanswered, until exit. */
static void *hold_peer(void *arg)
{
    int lfd = (int)(intptr_t)arg;

    for (;;)
        if (accept(lfd, NULL, NULL) < 0 && errno != EINTR && errno != ECONNABORTED)
            return NULL;
}

static void *wait_one(void *arg)
{
    struct waiter *w = arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int64_t t0 = 0;
    char c;

    if (fd < 0) {
        w->bad = 1;
        pthread_barrier_wait(&start_line);
        return NULL;
    }
    if (mode == M_RCVTIMEO) {
        struct timeval tv = { .tv_sec = limit_ns / 1000000000,
                              .tv_usec = (limit_ns % 1000000000) / 1000 };

        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    pthread_barrier_wait(&start_line);
    if (mode == M_TIMEBOX || mode == M_POLL_DEADLINE || mode == M_ONE_CUTTER)
        t0 = now_ns();
    if (connect(fd, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
        w->bad = 1;
        if (mode == M_ONE_CUTTER) {
            w->fd = -1;
            pthread_barrier_wait(&all_connected);
        }
        return NULL;
    }
    switch (mode) {
    case M_TIMEBOX:
        w->bad = !(recv(fd, &c, 1, 0) < 0 && errno == ETIMEDOUT);
        break;
    case M_FIRST_BYTE:
        t0 = now_ns();
        w->bad = !(recv(fd, &c, 1, 0) < 0 && errno == ETIMEDOUT);
        break;
    case M_POLL: {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        t0 = now_ns();
        w->bad = poll(&p, 1, (int)(limit_ns / 1000000)) != 0;
        break;
    }
    case M_POLL_DEADLINE: {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int64_t left = t0 + limit_ns - now_ns();
        struct timespec ts = { .tv_sec = left > 0 ? left / 1000000000 : 0,
                               .tv_nsec = left > 0 ? left % 1000000000 : 0 };

        w->bad = ppoll(&p, 1, &ts, NULL) != 0;
        break;
    }
    case M_RCVTIMEO:
        t0 = now_ns();
        w->bad = !(recv(fd, &c, 1, 0) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        break;
    case M_ONE_CUTTER:
        w->fd = fd;
        w->due = t0 + limit_ns;
        pthread_barrier_wait(&all_connected);
        w->bad = recv(fd, &c, 1, 0) != 0; /* the cutter's SHUT_RD reads as EOF */
        break;
    }
    w->late_ns = now_ns() - t0 - limit_ns;
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static long nwaiters;

static int cmp_due(const void *a, const void *b)
{
    const struct waiter *x = *(struct waiter *const *)a, *y = *(struct waiter *const *)b;

    return (x->due > y->due) - (x->due < y->due);
}

/* one_cutter: every wait's limit in order of its instant, each cut as it falls due. */
static void *cut_all(void *arg)
{
    struct waiter *w = arg;
    struct waiter **order = calloc((size_t)nwaiters, sizeof(*order));
    long n = 0;

    /* As timebox's watchdog: the kernel's default 50 us of timer slack would be added to
     * every cut. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    pthread_barrier_wait(&all_connected);
    if (order == NULL)
        abort();
    for (long i = 0; i < nwaiters; i++)
        if (w[i].fd >= 0)
            order[n++] = &w[i];
    qsort(order, (size_t)n, sizeof(*order), cmp_due);
    for (long i = 0; i < n; i++) {
        struct timespec ts = { .tv_sec = order[i]->due / 1000000000,
                               .tv_nsec = order[i]->due % 1000000000 };

        while (now_ns() < order[i]->due &&
               clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        shutdown(order[i]->fd, SHUT_RD);
    }
    free(order);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = 10;
    const char *mname = NULL;
    struct waiter *w;
    int64_t *late;
    long n = 0, early = 0, bad = 0;
    socklen_t plen = sizeof(peer);
    pthread_attr_t attr;
    pthread_t holder, cutter;
    struct rlimit rl;
    int lfd;

    limit_ns = 300 * INT64_C(1000000);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--threads") == 0)
            threads = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--mode") == 0)
            mname = argv[i + 1];
        else if (strcmp(argv[i], "--ms") == 0)
            limit_ns = atol(argv[i + 1]) * INT64_C(1000000);
    }
    if (mname != NULL && strcmp(mname, "timebox") == 0)
        mode = M_TIMEBOX;
    else if (mname != NULL && strcmp(mname, "first_byte") == 0)
        mode = M_FIRST_BYTE;
    else if (mname != NULL && strcmp(mname, "poll") == 0)
        mode = M_POLL;
    else if (mname != NULL && strcmp(mname, "poll_deadline") == 0)
        mode = M_POLL_DEADLINE;
    else if (mname != NULL && strcmp(mname, "rcvtimeo") == 0)
        mode = M_RCVTIMEO;
    else if (mname != NULL && strcmp(mname, "one_cutter") == 0)
        mode = M_ONE_CUTTER;
    else
        mname = NULL;
    if (mname == NULL || threads < 1 || limit_ns <= 0 || argc % 2 == 0) {
        fprintf(stderr, "usage: precision --threads T --mode "
                        "timebox|first_byte|poll|poll_deadline|rcvtimeo|one_cutter [--ms L]\n");
        return 2;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&peer, sizeof(peer)) < 0 ||
        listen(lfd, 4096) < 0 || getsockname(lfd, (struct sockaddr *)&peer, &plen) < 0) {
        perror("precision: listen");
        return 1;
    }
    w = calloc((size_t)threads, sizeof(*w));
    late = calloc((size_t)threads, sizeof(*late));
    if (w == NULL || late == NULL) {
        fprintf(stderr, "precision: out of memory\n");
        return 1;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&holder, &attr, hold_peer, (void *)(intptr_t)lfd) != 0) {
        perror("precision: pthread_create");
        return 1;
    }
    pthread_barrier_init(&start_line, NULL, (unsigned)threads);
    pthread_barrier_init(&all_connected, NULL, (unsigned)threads + 1);
    nwaiters = threads;
    if (mode == M_ONE_CUTTER && pthread_create(&cutter, &attr, cut_all, w) != 0) {
        perror("precision: pthread_create");
        return 1;
    }
    for (long i = 0; i < threads; i++) {
        if (pthread_create(&w[i].tid, &attr, wait_one, &w[i]) != 0) {
            perror("precision: pthread_create");
            return 1;
        }
    }
    for (long i = 0; i < threads; i++) {
        pthread_join(w[i].tid, NULL);
        if (w[i].bad) {
            bad++;
            continue;
        }
        late[n++] = w[i].late_ns;
        if (w[i].late_ns < 0)
            early++;
    }
    qsort(late, (size_t)n, sizeof(*late), cmp_i64);
    printf("threads=%ld mode=%s min_us=%.1f p50_us=%.1f p99_us=%.1f max_us=%.1f early=%ld "
           "bad=%ld\n",
           threads, mname, n ? late[0] / 1e3 : 0.0, n ? late[n / 2] / 1e3 : 0.0,
           n ? late[(n * 99) / 100] / 1e3 : 0.0, n ? late[n - 1] / 1e3 : 0.0, early, bad);
    fflush(stdout);
    _exit(bad > 0 ? 1 : 0);
}
