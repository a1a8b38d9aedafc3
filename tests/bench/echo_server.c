/*
 * echo_server.c - the benchmark's downstream: echoes whatever a client sends, on 127.0.0.1.
 * One thread, epoll, non-blocking sockets; holds tens of thousands of idle connections.
 *
 * usage: echo_server --port-file F [--delay-us N] [--stats-file F] [--answer http|tls]
 *
 *   --port-file F    the listening port is written to F (by rename) once it listens
 *   --delay-us N     each chunk read is echoed N microseconds later (a slow downstream);
 *                    chunks are answered in arrival order, so one thread serves them all
 *   --stats-file F   on SIGUSR1, write "active=A max_active=M accepted=N max_inflight=Q"
 *                    to F (by rename) and restart the maxima from now. max_active may
 *                    count a connection that closed while the next was being accepted;
 *                    max_inflight (requests read and not yet answered, with --delay-us)
 *                    is exact: a client's next request cannot come before its answer
 *   --answer KIND    instead of echoing, play the server's side of canned.h's script KIND:
 *                    each time a connection has sent a step's request bytes, send that
 *                    step's answer (the framing workload's HTTP and TLS peers); no delay
 *
 * A client that sends nothing is simply held open: that is the stalled downstream of the
 * scale workload's blocked threads. SIGTERM ends the server with status 0.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "canned.h"

#define CHUNK       64      /* a delayed echo keeps at most this much per read */
#define QUEUE_LEN   65536   /* delayed echoes in flight */
#define EVENTS      256

struct pending {
    int fd;
    uint32_t gen;   /* the connection's generation when queued: a reused fd is not it */
    int64_t due;
    uint16_t len;
    char data[CHUNK];
};

static volatile sig_atomic_t stop, dump;
static struct pending *queue;
static size_t q_head, q_len;
static uint32_t *gens;      /* per fd, bumped at each close */
static size_t gens_cap;
static long active, max_active, accepted, max_inflight;

/* --answer: the script, and per fd the bytes of the current step received so far. */
static struct canned_step script[CANNED_MAX_STEPS];
static int script_len;
struct script_pos {
	uint32_t got;
	uint8_t step;
};
static struct script_pos *pos;

static int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        dump = 1;
    else
        stop = 1;
}

/* Writes text to path through a temporary file, so a reader never sees half of it. */
static int write_atomically(const char *path, const char *text)
{
    char tmp[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static void close_conn(int fd)
{
    if ((size_t)fd < gens_cap)
        gens[fd]++;
    close(fd);
    active--;
}

/* Sends all of buf. Echoes are small and lockstep, so the socket buffer has room; a
 * client that does not read its answers is dropped rather than waited for. */
static void send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close_conn(fd);
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

static void accept_all(int lfd, int ep)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN };
        int one = 1;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN)
                perror("echo_server: accept4");
            return;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (pos != NULL && (size_t)fd < gens_cap)
            pos[fd] = (struct script_pos){ 0, 0 };
        ev.data.fd = fd;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            perror("echo_server: epoll_ctl");
            close(fd);
            continue;
        }
        accepted++;
        if (++active > max_active)
            max_active = active;
    }
}

/* --answer: n more request bytes arrived on fd; send the answer of every step completed. */
static void answer(int fd, size_t n)
{
    struct script_pos *p;

    if ((size_t)fd >= gens_cap) {
        close_conn(fd);
        return;
    }
    p = &pos[fd];
    p->got += (uint32_t)n;
    while (p->got >= script[p->step].client_len) {
        const struct canned_step *st = &script[p->step];
        uint32_t gen = gens[fd];

        p->got -= (uint32_t)st->client_len;
        if (p->step + 1 < script_len)
            p->step++;
        send_all(fd, (const char *)st->server, st->server_len);
        if (gens[fd] != gen)
            return; /* closed by send_all */
    }
}

static void serve(int fd, int64_t delay_ns)
{
    char buf[4096];
    ssize_t n = recv(fd, buf, delay_ns > 0 ? CHUNK : sizeof(buf), 0);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close_conn(fd);
        return;
    }
    if (pos != NULL) {
        answer(fd, (size_t)n);
        return;
    }
    if (delay_ns == 0) {
        send_all(fd, buf, (size_t)n);
        return;
    }
    if (q_len == QUEUE_LEN) {
        fprintf(stderr, "echo_server: delay queue full\n");
        close_conn(fd);
        return;
    }
    {
        struct pending *p = &queue[(q_head + q_len++) % QUEUE_LEN];

        p->fd = fd;
        p->gen = (size_t)fd < gens_cap ? gens[fd] : 0;
        p->due = now_ns() + delay_ns;
        p->len = (uint16_t)n;
        memcpy(p->data, buf, (size_t)n);
    }
    if ((long)q_len > max_inflight)
        max_inflight = (long)q_len;
}

/* Answers the delayed echoes that are due; returns how long until the next, in ns (-1:
 * none queued). */
static int64_t flush_due(void)
{
    int64_t now = now_ns();

    while (q_len > 0) {
        struct pending *p = &queue[q_head];

        if (p->due > now)
            return p->due - now;
        if ((size_t)p->fd < gens_cap && gens[p->fd] == p->gen)
            send_all(p->fd, p->data, p->len);
        q_head = (q_head + 1) % QUEUE_LEN;
        q_len--;
    }
    return -1;
}

static void dump_stats(const char *path)
{
    char text[256];

    snprintf(text, sizeof(text), "active=%ld max_active=%ld accepted=%ld max_inflight=%ld\n",
             active, max_active, accepted, max_inflight);
    if (path != NULL && write_atomically(path, text) != 0)
        perror("echo_server: stats file");
    max_active = active;
    max_inflight = (long)q_len;
}

int main(int argc, char **argv)
{
    const char *port_file = NULL, *stats_file = NULL;
    int64_t delay_ns = 0;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t slen = sizeof(sin);
    struct epoll_event ev = { .events = EPOLLIN }, events[EVENTS];
    struct sigaction sa = { .sa_handler = on_signal };
    struct rlimit rl;
    sigset_t blocked, waiting;
    char text[32];
    int lfd, ep, one = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port-file") == 0 && i + 1 < argc)
            port_file = argv[++i];
        else if (strcmp(argv[i], "--stats-file") == 0 && i + 1 < argc)
            stats_file = argv[++i];
        else if (strcmp(argv[i], "--delay-us") == 0 && i + 1 < argc)
            delay_ns = strtoll(argv[++i], NULL, 10) * 1000;
        else if (strcmp(argv[i], "--answer") == 0 && i + 1 < argc &&
                 strcmp(argv[i + 1], "raw") != 0 &&
                 (script_len = canned_script(argv[i + 1], 0, script)) > 0)
            i++;
        else {
            fprintf(stderr, "usage: echo_server --port-file F [--delay-us N] "
                            "[--stats-file F] [--answer http|tls]\n");
            return 2;
        }
    }
    if (port_file == NULL) {
        fprintf(stderr, "echo_server: --port-file is required\n");
        return 2;
    }
    /* The scale workload holds 10,000 connections open. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    gens_cap = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
               rl.rlim_cur < (1 << 20) ? (size_t)rl.rlim_cur : (1 << 20);
    gens = calloc(gens_cap, sizeof(*gens));
    queue = calloc(QUEUE_LEN, sizeof(*queue));
    if (script_len > 0)
        pos = calloc(gens_cap, sizeof(*pos));
    if (gens == NULL || queue == NULL || (script_len > 0 && pos == NULL)) {
        fprintf(stderr, "echo_server: out of memory\n");
        return 1;
    }
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* The signals are let in only inside epoll_pwait: one that arrived just before the
     * wait would otherwise be seen only after the next event, which may never come. */
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGINT);
    sigaddset(&blocked, SIGUSR1);
    sigprocmask(SIG_BLOCK, &blocked, &waiting);
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGINT);
    sigdelset(&waiting, SIGUSR1);

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 4096) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &slen) < 0) {
        perror("echo_server: listen");
        return 1;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    ev.data.fd = lfd;
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) {
        perror("echo_server: epoll");
        return 1;
    }
    snprintf(text, sizeof(text), "%d\n", ntohs(sin.sin_port));
    if (write_atomically(port_file, text) != 0) {
        perror("echo_server: port file");
        return 1;
    }

    while (!stop) {
        /* epoll_pwait2: a timeout in ns, so a 1 ms delay is not rounded up to 2 ms. */
        int64_t next = flush_due();
        struct timespec ts = { .tv_sec = next / 1000000000, .tv_nsec = next % 1000000000 };
        int n = epoll_pwait2(ep, events, EVENTS, next < 0 ? NULL : &ts, &waiting);
        int listener_ready = 0;

        if (dump) {
            dump = 0;
            dump_stats(stats_file);
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("echo_server: epoll_wait");
            return 1;
        }
        /* Closes before accepts: a client that closes one connection and opens the next
         * must not be counted twice in max_active. */
        for (int i = 0; i < n; i++) {
            if (events[i].data.fd == lfd)
                listener_ready = 1;
            else
                serve(events[i].data.fd, delay_ns);
        }
        if (listener_ready)
            accept_all(lfd, ep);
    }
    return 0;
}
