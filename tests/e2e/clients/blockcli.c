/*
 * blockcli.c - a plain legacy HTTP/1.1 client that sets no timeouts at all, the kind of
 * program timebox is preloaded into. It prints one logfmt line per attempt.
 *
 * usage: blockcli --port N --path /x [--host 127.0.0.1] [--calls N] [--pause-ms M]
 *                 [--attempts K] [--read-sleep-ms M] [--chunk B] [--api rw|sr]
 *                 [--poll-slice-ms S] [--select] [--threads T] [--connect-only] [--hold-ms M]
 *
 * Each of the T threads (default 1) makes N sequential calls over one keep-alive
 * connection. A call that fails closes the connection and is retried on a fresh one, up to
 * K attempts in all: the program's own retries. Output per attempt:
 *
 *   [thread=I ]call=C attempt=A ms=X result=ok status=S bytes=B rx=R
 *   [thread=I ]call=C attempt=A ms=X result=error errno=NAME bytes=B rx=R
 *
 * bytes counts body bytes, rx every byte received in the attempt; errno is a symbolic
 * name, or EOF when the server closed before the response was complete. A last line gives
 * total_ms. Exit status: 0 when every call got a complete response, 1 otherwise, 2 for a
 * usage error.
 *
 * Without --poll-slice-ms or --select every socket call blocks. With them the socket is
 * made non-blocking and the client waits in its own poll()/select() loop, in slices of S
 * ms (1000 with --select alone), forever - the way curl waits in 1 s slices.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tbtest.h"

#define HEAD_MAX 16384
#define ERR_EOF  (-1) /* struct outcome.err: the peer closed too early */

enum api { API_RW, API_SR };

struct options {
    const char *host;
    int port;
    const char *path;
    long calls, pause_ms, attempts, read_sleep_ms, chunk, poll_slice_ms, threads, hold_ms;
    enum api api;
    bool use_select;
    bool connect_only;
    struct sockaddr_storage addr;
    socklen_t addrlen;
};

struct outcome {
    int err;        /* 0, an errno value, or ERR_EOF */
    int status;
    size_t body;    /* body bytes received */
    size_t rx;      /* all bytes received */
    bool keep;      /* the server will keep the connection open */
};

struct job {
    const struct options *opt;
    int thread;     /* 0 when the process runs a single job */
    long failures;
};

static bool nonblocking(const struct options *o)
{
    return o->poll_slice_ms > 0 || o->use_select;
}

/*
 * Waits until fd is ready for events (POLLIN or POLLOUT) in the program's own loop of
 * poll() or select() slices; a slice that ends empty just starts the next one, forever.
 * Returns 0 when ready (an error or hang-up counts: the next call reports it), or -1 with
 * errno set.
 */
static int wait_ready(const struct options *o, int fd, short events)
{
    long slice = o->poll_slice_ms > 0 ? o->poll_slice_ms : 1000;

    for (;;) {
        int n;

        if (o->use_select) {
            fd_set rd, wr;
            struct timeval tv = { .tv_sec = slice / 1000, .tv_usec = (slice % 1000) * 1000 };

            if (fd >= FD_SETSIZE) {
                errno = EINVAL;
                return -1;
            }
            FD_ZERO(&rd);
            FD_ZERO(&wr);
            FD_SET(fd, events == POLLIN ? &rd : &wr);
            n = select(fd + 1, &rd, &wr, NULL, &tv);
        } else {
            struct pollfd p = { .fd = fd, .events = events };

            n = poll(&p, 1, (int)slice);
        }
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Returns a connected socket, or -1 with errno set. */
static int open_connection(const struct options *o)
{
    int fd, err = 0, saved;
    socklen_t elen = sizeof err;

    fd = socket(o->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (nonblocking(o) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
        goto error;
    if (connect(fd, (const struct sockaddr *)&o->addr, o->addrlen) == 0)
        return fd;
    /* A blocking connect interrupted by a signal goes on in the background, like EINPROGRESS. */
    if (errno != EINPROGRESS && errno != EINTR)
        goto error;
    if (nonblocking(o)) {
        if (wait_ready(o, fd, POLLOUT) < 0)
            goto error;
    } else {
        struct pollfd p = { .fd = fd, .events = POLLOUT };

        while (poll(&p, 1, -1) < 0)
            if (errno != EINTR)
                goto error;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
        goto error;
    if (err == 0)
        return fd;
    errno = err;
error:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* Writes all of buf with write() or send(). Returns 0, or -1 with errno set. */
static int send_all(const struct options *o, int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = o->api == API_SR ? send(fd, buf, len, 0) : write(fd, buf, len);

        if (n >= 0) {
            buf += n;
            len -= (size_t)n;
        } else if (errno == EINTR) {
            continue;
        } else if (nonblocking(o) && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_ready(o, fd, POLLOUT) < 0)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/*
 * Reads at most len bytes with read() or recv(), after the configured nap (a slow program).
 * Returns the count, 0 at EOF, -1 with errno set.
 */
static ssize_t recv_some(const struct options *o, int fd, char *buf, size_t len)
{
    /* A local array of known size: under _FORTIFY_SOURCE the compiler then calls
     * __read_chk/__recv_chk, the entry points a hardened distribution build uses. */
    char chunk[65536];

    if (len > sizeof chunk)
        len = sizeof chunk;
    /* Hide the clamp from the optimiser, or it proves the read safe and skips the check. */
    __asm__("" : "+r"(len));
    if (o->read_sleep_ms > 0)
        tbt_sleep_ms(o->read_sleep_ms);
    for (;;) {
        ssize_t n = o->api == API_SR ? recv(fd, chunk, len, 0) : read(fd, chunk, len);

        if (n > 0)
            memcpy(buf, chunk, (size_t)n);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (!nonblocking(o) || (errno != EAGAIN && errno != EWOULDBLOCK))
            return -1;
        if (wait_ready(o, fd, POLLIN) < 0)
            return -1;
    }
}

/* Parses the status line and the headers we need. Returns 0, or -1 if malformed. */
static int parse_head(char *head, long long *length, struct outcome *r)
{
    char *line, *save = NULL;

    *length = -1;
    line = strtok_r(head, "\r\n", &save);
    if (!line || sscanf(line, "HTTP/%*d.%*d %d", &r->status) != 1)
        return -1;
    r->keep = strncmp(line, "HTTP/1.0", 8) != 0;
    while ((line = strtok_r(NULL, "\r\n", &save)) != NULL) {
        if (!strncasecmp(line, "Content-Length:", 15))
            *length = strtoll(line + 15, NULL, 10);
        else if (!strncasecmp(line, "Connection:", 11))
            r->keep = strcasestr(line + 11, "close") == NULL;
    }
    return *length < 0 ? -1 : 0;
}

/*
 * Reads one response: the head up to CRLFCRLF, then Content-Length body bytes, in reads of
 * at most opt.chunk bytes. Returns 0, or -1 with r->err set.
 */
static int read_response(const struct options *o, int fd, char *buf, struct outcome *r)
{
    size_t have = 0, head_len;
    long long length;
    char *end;

    while ((end = memmem(buf, have, "\r\n\r\n", 4)) == NULL) {
        size_t want = HEAD_MAX - have;
        ssize_t n;

        if (want == 0)
            return r->err = EMSGSIZE, -1;
        if (want > (size_t)o->chunk)
            want = (size_t)o->chunk;
        n = recv_some(o, fd, buf + have, want);
        if (n <= 0)
            return r->err = n == 0 ? ERR_EOF : errno, -1;
        have += (size_t)n;
        r->rx += (size_t)n;
    }
    head_len = (size_t)(end - buf) + 4;
    *end = '\0';
    if (parse_head(buf, &length, r) < 0)
        return r->err = EPROTO, -1;
    r->body = have - head_len;
    if ((long long)r->body > length)
        return r->err = EPROTO, -1;
    while ((long long)r->body < length) {
        size_t want = (size_t)(length - (long long)r->body);
        ssize_t n;

        if (want > (size_t)o->chunk)
            want = (size_t)o->chunk;
        n = recv_some(o, fd, buf, want);
        if (n <= 0)
            return r->err = n == 0 ? ERR_EOF : errno, -1;
        r->body += (size_t)n;
        r->rx += (size_t)n;
    }
    return 0;
}

/*
 * One attempt of one call, on *fd if a connection is open, else on a new one. On success
 * *fd is left open when the connection can carry the next call; on failure the caller
 * closes it. Returns 0, or -1 with r->err set.
 */
static int attempt(const struct options *o, int *fd, char *buf, struct outcome *r)
{
    char req[HEAD_MAX];
    int n;

    if (*fd < 0 && (*fd = open_connection(o)) < 0)
        return r->err = errno, -1;
    if (o->connect_only) {
        if (o->hold_ms > 0)
            tbt_sleep_ms(o->hold_ms);
        r->keep = false;
        return 0;
    }
    n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: blockcli\r\n"
                 "Accept: */*\r\n\r\n", o->path, o->host, o->port);
    if (n < 0 || (size_t)n >= sizeof req)
        return r->err = EMSGSIZE, -1;
    if (send_all(o, *fd, req, (size_t)n) < 0)
        return r->err = errno, -1;
    return read_response(o, *fd, buf, r);
}

static const char *err_name(int err)
{
    return err == ERR_EOF ? "EOF" : tbt_errno_name(err);
}

static void report(const struct job *j, long call, long att, double ms, int rc,
                   const struct outcome *r)
{
    char thread[32] = "";

    if (j->thread > 0)
        snprintf(thread, sizeof thread, "thread=%d ", j->thread);
    /* One printf per line: stdio locks the stream, so threads never mix their lines. */
    if (rc == 0)
        printf("%scall=%ld attempt=%ld ms=%.1f result=ok status=%d bytes=%zu rx=%zu\n",
               thread, call, att, ms, r->status, r->body, r->rx);
    else
        printf("%scall=%ld attempt=%ld ms=%.1f result=error errno=%s bytes=%zu rx=%zu\n",
               thread, call, att, ms, err_name(r->err), r->body, r->rx);
}

/* Makes every call of one job; counts the calls that failed in j->failures. */
static void *run_job(void *arg)
{
    struct job *j = arg;
    const struct options *o = j->opt;
    char *buf = malloc(HEAD_MAX > o->chunk ? HEAD_MAX : (size_t)o->chunk);
    int fd = -1;

    if (!buf) {
        j->failures = o->calls;
        return NULL;
    }
    for (long call = 1; call <= o->calls; call++) {
        bool ok = false;

        if (call > 1 && o->pause_ms > 0)
            tbt_sleep_ms(o->pause_ms);
        for (long att = 1; att <= o->attempts && !ok; att++) {
            struct outcome r = { .err = 0 };
            double start = tbt_now_ms();
            int rc = attempt(o, &fd, buf, &r);

            report(j, call, att, tbt_now_ms() - start, rc, &r);
            ok = rc == 0;
            if ((!ok || !r.keep) && fd >= 0) {
                close(fd);
                fd = -1;
            }
        }
        if (!ok)
            j->failures++;
    }
    if (fd >= 0)
        close(fd);
    free(buf);
    return NULL;
}

static void usage(void)
{
    fputs("usage: blockcli --port N --path /x [--host 127.0.0.1] [--calls N] [--pause-ms M]\n"
          "                [--attempts K] [--read-sleep-ms M] [--chunk B] [--api rw|sr]\n"
          "                [--poll-slice-ms S] [--select] [--threads T] [--connect-only]\n"
          "                [--hold-ms M]\n", stderr);
}

static int parse_long(const char *text, long min, long *out)
{
    char *end;

    errno = 0;
    *out = strtol(text, &end, 10);
    return errno || end == text || *end || *out < min ? -1 : 0;
}

/* Fills o from argv. Returns 0, or -1 after printing what is wrong. */
static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        { "host", required_argument, NULL, 'h' },
        { "port", required_argument, NULL, 'p' },
        { "path", required_argument, NULL, 'P' },
        { "calls", required_argument, NULL, 'c' },
        { "pause-ms", required_argument, NULL, 'z' },
        { "attempts", required_argument, NULL, 'a' },
        { "read-sleep-ms", required_argument, NULL, 'r' },
        { "chunk", required_argument, NULL, 'b' },
        { "api", required_argument, NULL, 'A' },
        { "poll-slice-ms", required_argument, NULL, 's' },
        { "select", no_argument, NULL, 'S' },
        { "threads", required_argument, NULL, 't' },
        { "connect-only", no_argument, NULL, 'C' },
        { "hold-ms", required_argument, NULL, 'H' },
        { NULL, 0, NULL, 0 },
    };
    struct sockaddr_in *in4 = (struct sockaddr_in *)&o->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&o->addr;
    long port = -1;
    int c, bad = 0;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': o->host = optarg; break;
        case 'p': bad |= parse_long(optarg, 1, &port) || port > 65535; break;
        case 'P': o->path = optarg; break;
        case 'c': bad |= parse_long(optarg, 1, &o->calls); break;
        case 'z': bad |= parse_long(optarg, 0, &o->pause_ms); break;
        case 'a': bad |= parse_long(optarg, 1, &o->attempts); break;
        case 'r': bad |= parse_long(optarg, 0, &o->read_sleep_ms); break;
        case 'b': bad |= parse_long(optarg, 1, &o->chunk) || o->chunk > (1L << 24); break;
        case 's': bad |= parse_long(optarg, 1, &o->poll_slice_ms); break;
        case 'S': o->use_select = true; break;
        case 't': bad |= parse_long(optarg, 1, &o->threads) || o->threads > 4096; break;
        case 'C': o->connect_only = true; break;
        case 'H': bad |= parse_long(optarg, 0, &o->hold_ms); break;
        case 'A':
            if (!strcmp(optarg, "rw"))
                o->api = API_RW;
            else if (!strcmp(optarg, "sr"))
                o->api = API_SR;
            else
                bad = 1;
            break;
        default: bad = 1;
        }
    }
    if (bad || optind != argc || port < 0 || (!o->path && !o->connect_only)) {
        usage();
        return -1;
    }
    o->port = (int)port;
    if (!o->path)
        o->path = "/";
    memset(&o->addr, 0, sizeof o->addr);
    if (inet_pton(AF_INET, o->host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        o->addrlen = sizeof *in4;
    } else if (inet_pton(AF_INET6, o->host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        o->addrlen = sizeof *in6;
    } else {
        fprintf(stderr, "blockcli: --host takes a numeric address, not '%s'\n", o->host);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o = { .host = "127.0.0.1", .calls = 1, .attempts = 1, .chunk = 4096,
                         .threads = 1, .api = API_RW };
    struct job *jobs = NULL;
    pthread_t *tids = NULL;
    long failures = 0, started = 0;
    double start;
    int status = 1;

    if (parse_options(argc, argv, &o) < 0)
        return 2;
    /* Like most programs, we would rather see EPIPE than die of SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    /* Line-buffered, so the lines printed so far survive a kill by timeout(1). */
    setvbuf(stdout, NULL, _IOLBF, 0);

    jobs = calloc((size_t)o.threads, sizeof *jobs);
    tids = calloc((size_t)o.threads, sizeof *tids);
    if (!jobs || !tids) {
        perror("blockcli");
        goto out;
    }
    start = tbt_now_ms();
    if (o.threads == 1) {
        jobs[0] = (struct job){ .opt = &o, .thread = 0 };
        run_job(&jobs[0]);
        started = 1;
    } else {
        for (; started < o.threads; started++) {
            jobs[started] = (struct job){ .opt = &o, .thread = (int)started + 1 };
            if (pthread_create(&tids[started], NULL, run_job, &jobs[started]) != 0) {
                fprintf(stderr, "blockcli: cannot start thread %ld\n", started + 1);
                failures++;
                break;
            }
        }
        for (long i = 0; i < started; i++)
            pthread_join(tids[i], NULL);
    }
    for (long i = 0; i < started; i++)
        failures += jobs[i].failures;
    printf("total_ms=%.1f\n", tbt_now_ms() - start);
    status = failures == 0 ? 0 : 1;
out:
    free(jobs);
    free(tids);
    return status;
}
