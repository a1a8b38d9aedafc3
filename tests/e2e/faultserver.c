/*
 * faultserver.c - the misbehaving HTTP/1.x server that the end-to-end tests aim programs at.
 * Listens on 127.0.0.1 only, one thread per connection; the request path chooses the fault.
 *
 * usage: faultserver [--port N] [--port-file F] [--blackhole-port-file F]
 *
 *   /ok[?order=X]            200 "ok order=X\n" at once (X defaults to 0)
 *   /delay?ms=N              the same after N ms (the work is done even if the client left)
 *   /stall                   never answers; holds the connection until the client hangs up
 *                            (at most 30 s after the client's FIN, which may be a half-close)
 *   /stall?ms=N              same as /delay
 *   /drip?ms=N&n=K           headers with Content-Length K at once, then one 'x' every N ms
 *   /reset?after=B           promises B+1000 bytes, sends B, then resets the connection
 *   /close                   closes without answering
 *   /big?bytes=N             N bytes, byte i = 'a' + i % 26
 *   /count?key=NAME          how many requests carried key=NAME, as decimal text
 *   /stats                   JSON counters (see stats_json); /reset-stats clears them
 *
 * /count, /stats and /reset-stats are control requests: they are not counted anywhere, and
 * a connection that only carries control requests is not counted as active, so the
 * harness's own questions never disturb what it measures.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tbtest.h"

#define HEAD_MAX      16384 /* request line and headers */
#define TARGET_MAX    2048
#define KEY_MAX       64
#define FILLERS_MAX   64    /* connections tried while filling the blackhole's queue */
#define FILL_STALL_MS 100   /* a connect pending this long means the queue is full */
#define THREAD_STACK  (256 * 1024)

enum { REQ_OK = 1, REQ_EOF = 0, REQ_ERR = -1, REQ_BAD = -2 };

struct request {
    char path[TARGET_MAX];
    char query[TARGET_MAX];
    bool keep_alive;
    bool control;
    unsigned long long content_length;
};

struct conn {
    int fd;
    bool counted;  /* has been counted in stats.active */
    size_t len;    /* bytes in buf: the start of the next request */
    char buf[HEAD_MAX];
};

struct key_count {
    struct key_count *next;
    unsigned long count;
    char name[KEY_MAX + 1];
};

static struct {
    pthread_mutex_t lock;
    unsigned long requests, connections;
    long active, max_active, inflight, max_inflight;
    struct key_count *keys;
} stats = { .lock = PTHREAD_MUTEX_INITIALIZER };

static volatile sig_atomic_t accept_failed;

/* ---- time ---------------------------------------------------------------------------- */

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Waits up to ms milliseconds (ms < 0: forever) for the client to hang up: FIN, RST, or
 * shutdown() on its side. Data it sends meanwhile stays queued. Returns 1 if it hung up,
 * 0 when the time passed, -1 with errno set on error.
 */
static int wait_hangup(int fd, long ms)
{
    long long deadline = now_ms() + ms;

    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };
        long long left = ms < 0 ? -1 : deadline - now_ms();
        int n;

        if (ms >= 0 && left < 0)
            left = 0;
        n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : n > 0;
    }
}

/* ---- socket I/O ---------------------------------------------------------------------- */

/*
 * Sends all of buf. MSG_NOSIGNAL because a client that left must cost us an EPIPE, not the
 * process. Returns 0, or -1 with errno set.
 */
static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Receives at most len bytes. Returns the count, 0 at EOF, -1 with errno set. */
static ssize_t recv_some(int fd, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(fd, buf, len, 0);

        if (n >= 0 || errno != EINTR)
            return n;
    }
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    default:  return "Unknown";
    }
}

static int send_head(int fd, int status, unsigned long long length, bool keep_alive)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %llu\r\n"
                     "Connection: %s\r\n\r\n",
                     status, reason(status), length, keep_alive ? "keep-alive" : "close");

    return send_all(fd, head, (size_t)n);
}

/*
 * Sends a complete response with a short body in one send(), so that a small response is
 * one segment and a client reading it never waits for the second half of it.
 */
static int send_response(int fd, int status, const char *body, bool keep_alive)
{
    char msg[1024];
    size_t blen = strlen(body);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: %s\r\n\r\n%s",
                     status, reason(status), blen, keep_alive ? "keep-alive" : "close", body);

    if (n < 0 || (size_t)n >= sizeof msg) {
        errno = EMSGSIZE;
        return -1;
    }
    return send_all(fd, msg, (size_t)n);
}

/* ---- request parsing ----------------------------------------------------------------- */

/*
 * Copies the value of the query parameter name into out. Returns 1 when present, 0 when
 * absent, -1 when the value does not fit.
 */
static int query_param(const char *query, const char *name, char *out, size_t outsz)
{
    size_t nlen = strlen(name);
    const char *p = query;

    while (*p) {
        const char *end = p + strcspn(p, "&");

        if ((size_t)(end - p) > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
            size_t vlen = (size_t)(end - p) - nlen - 1;

            if (vlen >= outsz)
                return -1;
            memcpy(out, p + nlen + 1, vlen);
            out[vlen] = '\0';
            return 1;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

/*
 * Reads a non-negative integer parameter into *value, def when absent. Returns 1 when
 * present, 0 when absent, -1 when malformed.
 */
static int query_num(const char *query, const char *name, long def, long *value)
{
    char text[32], *end;
    int found = query_param(query, name, text, sizeof text);

    if (found <= 0) {
        *value = def;
        return found;
    }
    errno = 0;
    *value = strtol(text, &end, 10);
    if (errno || end == text || *end || *value < 0)
        return -1;
    return 1;
}

static bool header_is(const char *line, const char *name, const char **value)
{
    size_t n = strlen(name);

    if (strncasecmp(line, name, n) != 0 || line[n] != ':')
        return false;
    *value = line + n + 1 + strspn(line + n + 1, " \t");
    return true;
}

/* Parses the NUL-terminated head (request line and headers). Returns 0, or -1 if malformed. */
static int parse_head(char *head, struct request *req)
{
    char method[16], target[TARGET_MAX], *line, *save = NULL, *q, *end;
    int major, minor;

    line = strtok_r(head, "\r\n", &save);
    if (!line || sscanf(line, "%15s %2047s HTTP/%d.%d", method, target, &major, &minor) != 4)
        return -1;
    q = strchr(target, '?');
    if (q)
        *q++ = '\0';
    snprintf(req->path, sizeof req->path, "%s", target);
    snprintf(req->query, sizeof req->query, "%s", q ? q : "");
    req->keep_alive = major > 1 || (major == 1 && minor >= 1);
    req->content_length = 0;
    req->control = !strcmp(req->path, "/count") || !strcmp(req->path, "/stats") ||
                   !strcmp(req->path, "/reset-stats");

    while ((line = strtok_r(NULL, "\r\n", &save)) != NULL) {
        const char *value;

        if (header_is(line, "Content-Length", &value)) {
            errno = 0;
            req->content_length = strtoull(value, &end, 10);
            if (errno || end == value || *value == '-')
                return -1;
        } else if (header_is(line, "Connection", &value)) {
            if (strcasestr(value, "close"))
                req->keep_alive = false;
            else if (strcasestr(value, "keep-alive"))
                req->keep_alive = true;
        }
    }
    return 0;
}

/*
 * Reads one request: the head up to CRLFCRLF, then its Content-Length body, which is
 * discarded. Bytes after it (a pipelined request) stay in c->buf. Returns REQ_OK, REQ_EOF
 * when the client closed between requests, REQ_BAD for a malformed or oversized head, and
 * REQ_ERR on a read error or a close in the middle of a request.
 */
static int read_request(struct conn *c, struct request *req)
{
    char *end;
    size_t head_len, buffered;
    unsigned long long body;

    while ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)) == NULL) {
        ssize_t n;

        if (c->len == sizeof c->buf)
            return REQ_BAD;
        n = recv_some(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (n <= 0)
            return n == 0 && c->len == 0 ? REQ_EOF : REQ_ERR;
        c->len += (size_t)n;
    }
    head_len = (size_t)(end - c->buf) + 4;
    *end = '\0';
    if (parse_head(c->buf, req) < 0)
        return REQ_BAD;

    body = req->content_length;
    buffered = c->len - head_len;
    if (buffered >= body) {
        size_t used = head_len + (size_t)body;

        memmove(c->buf, c->buf + used, c->len - used);
        c->len -= used;
        return REQ_OK;
    }
    body -= buffered;
    c->len = 0;
    while (body > 0) {
        size_t want = body < sizeof c->buf ? (size_t)body : sizeof c->buf;
        ssize_t n = recv_some(c->fd, c->buf, want);

        if (n <= 0)
            return REQ_ERR;
        body -= (unsigned long long)n;
    }
    return REQ_OK;
}

/* ---- counters ------------------------------------------------------------------------ */

/* Counts a request that has been read: requests, inflight, the connection, its key. */
static void stats_begin(struct conn *c, const char *key)
{
    struct key_count *k;

    pthread_mutex_lock(&stats.lock);
    stats.requests++;
    if (++stats.inflight > stats.max_inflight)
        stats.max_inflight = stats.inflight;
    if (!c->counted) {
        c->counted = true;
        stats.connections++;
        if (++stats.active > stats.max_active)
            stats.max_active = stats.active;
    }
    if (key) {
        for (k = stats.keys; k && strcmp(k->name, key) != 0; k = k->next)
            ;
        if (!k && (k = calloc(1, sizeof *k)) != NULL) {
            snprintf(k->name, sizeof k->name, "%s", key);
            k->next = stats.keys;
            stats.keys = k;
        }
        if (k)
            k->count++;
    }
    pthread_mutex_unlock(&stats.lock);
}

static void stats_end(void)
{
    pthread_mutex_lock(&stats.lock);
    stats.inflight--;
    pthread_mutex_unlock(&stats.lock);
}

static void stats_conn_closed(const struct conn *c)
{
    if (!c->counted)
        return;
    pthread_mutex_lock(&stats.lock);
    stats.active--;
    pthread_mutex_unlock(&stats.lock);
}

static void stats_free_keys_locked(void)
{
    while (stats.keys) {
        struct key_count *k = stats.keys;

        stats.keys = k->next;
        free(k);
    }
}

/* Zeroes the counts; the maxima restart from the current values. */
static void stats_reset(void)
{
    pthread_mutex_lock(&stats.lock);
    stats.requests = 0;
    stats.connections = 0;
    stats.max_active = stats.active;
    stats.max_inflight = stats.inflight;
    stats_free_keys_locked();
    pthread_mutex_unlock(&stats.lock);
}

static unsigned long stats_key_count(const char *key)
{
    unsigned long n = 0;
    const struct key_count *k;

    pthread_mutex_lock(&stats.lock);
    for (k = stats.keys; k; k = k->next)
        if (!strcmp(k->name, key))
            n = k->count;
    pthread_mutex_unlock(&stats.lock);
    return n;
}

/*
 * requests: non-control requests read; active: open connections that carried one;
 * inflight: such requests being handled; connections: such connections opened; maxima and
 * counts since the start or the last /reset-stats.
 */
static void stats_json(char *out, size_t outsz)
{
    pthread_mutex_lock(&stats.lock);
    snprintf(out, outsz,
             "{\"requests\":%lu,\"active\":%ld,\"max_active\":%ld,\"inflight\":%ld,"
             "\"max_inflight\":%ld,\"connections\":%lu}\n",
             stats.requests, stats.active, stats.max_active, stats.inflight,
             stats.max_inflight, stats.connections);
    pthread_mutex_unlock(&stats.lock);
}

/* ---- behaviours ---------------------------------------------------------------------- */

/* Each returns true to serve the next request on the connection, false to close it. */

static bool do_ok(int fd, const struct request *req)
{
    char order[64], body[128];
    int found = query_param(req->query, "order", order, sizeof order);

    if (found < 0) {
        send_response(fd, 400, "order too long\n", false);
        return false;
    }
    if (found == 0)
        strcpy(order, "0");
    snprintf(body, sizeof body, "ok order=%s\n", order);
    return send_response(fd, 200, body, req->keep_alive) == 0 && req->keep_alive;
}

static bool do_drip(int fd, const struct request *req, long ms, long n)
{
    if (send_head(fd, 200, (unsigned long long)n, req->keep_alive) < 0)
        return false;
    for (long i = 0; i < n; i++) {
        if (wait_hangup(fd, ms) != 0)
            return false;
        if (send_all(fd, "x", 1) < 0)
            return false;
    }
    return req->keep_alive;
}

/*
 * Sends part of a response, then an RST: SO_LINGER with a zero timeout makes close() abort
 * the connection instead of ending it with a FIN.
 */
static bool do_reset(int fd, long after)
{
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    char chunk[4096];

    memset(chunk, 'r', sizeof chunk);
    if (send_head(fd, 200, (unsigned long long)after + 1000, true) < 0)
        return false;
    while (after > 0) {
        size_t n = after < (long)sizeof chunk ? (size_t)after : sizeof chunk;

        if (send_all(fd, chunk, n) < 0)
            return false;
        after -= (long)n;
    }
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    return false;
}

static bool do_big(int fd, const struct request *req, long bytes)
{
    char chunk[26 * 512];

    for (size_t i = 0; i < sizeof chunk; i++)
        chunk[i] = (char)('a' + i % 26);
    if (send_head(fd, 200, (unsigned long long)bytes, req->keep_alive) < 0)
        return false;
    /* Chunks are a multiple of 26 long, so every chunk starts the pattern at 'a'. */
    while (bytes > 0) {
        size_t n = bytes < (long)sizeof chunk ? (size_t)bytes : sizeof chunk;

        if (send_all(fd, chunk, n) < 0)
            return false;
        bytes -= (long)n;
    }
    return req->keep_alive;
}

static bool do_control(int fd, const struct request *req)
{
    char body[512], key[KEY_MAX + 1];

    if (!strcmp(req->path, "/stats")) {
        stats_json(body, sizeof body);
    } else if (!strcmp(req->path, "/reset-stats")) {
        stats_reset();
        strcpy(body, "reset\n");
    } else if (query_param(req->query, "key", key, sizeof key) == 1) {
        snprintf(body, sizeof body, "%lu\n", stats_key_count(key));
    } else {
        send_response(fd, 400, "count needs key=NAME\n", false);
        return false;
    }
    return send_response(fd, 200, body, req->keep_alive) == 0 && req->keep_alive;
}

/* Runs the behaviour the request asks for. Returns true to keep the connection. */
static bool handle(struct conn *c, const struct request *req)
{
    const char *path = req->path;
    char key[KEY_MAX + 1];
    long ms, n, after, bytes;
    bool keep;
    int has_key, has_ms;

    if (req->control)
        return do_control(c->fd, req);

    has_key = query_param(req->query, "key", key, sizeof key);
    has_ms = query_num(req->query, "ms", 0, &ms);
    if (has_key < 0 || has_ms < 0 || ms > 3600000 || query_num(req->query, "n", 0, &n) < 0 ||
        query_num(req->query, "after", 0, &after) < 0 ||
        query_num(req->query, "bytes", 0, &bytes) < 0) {
        send_response(c->fd, 400, "bad query\n", false);
        return false;
    }
    stats_begin(c, has_key == 1 ? key : NULL);

    if (!strcmp(path, "/ok")) {
        keep = do_ok(c->fd, req);
    } else if (!strcmp(path, "/delay") || (!strcmp(path, "/stall") && has_ms)) {
        tbt_sleep_ms(ms);
        keep = do_ok(c->fd, req);
    } else if (!strcmp(path, "/stall")) {
        /* The client's FIN may be a half-close (nc and HTTP/1.0 clients shut down their
         * sending side after the request and keep reading): a stall keeps stalling. A
         * full close looks the same from here, so after the FIN hold at most 30 s. */
        if (wait_hangup(c->fd, -1) > 0) {
            struct pollfd p = { .fd = c->fd, .events = 0 };

            while (poll(&p, 1, 30000) < 0 && errno == EINTR)
                ;
        }
        keep = false;
    } else if (!strcmp(path, "/drip")) {
        keep = do_drip(c->fd, req, ms, n);
    } else if (!strcmp(path, "/reset")) {
        keep = do_reset(c->fd, after);
    } else if (!strcmp(path, "/close")) {
        keep = false;
    } else if (!strcmp(path, "/big")) {
        keep = do_big(c->fd, req, bytes);
    } else {
        keep = send_response(c->fd, 404, "not found\n", req->keep_alive) == 0 &&
               req->keep_alive;
    }
    stats_end();
    return keep;
}

static void *serve(void *arg)
{
    struct conn *c = arg;
    struct request req;

    for (;;) {
        int r = read_request(c, &req);

        if (r == REQ_BAD)
            send_response(c->fd, 400, "bad request\n", false);
        if (r != REQ_OK || !handle(c, &req))
            break;
    }
    stats_conn_closed(c);
    close(c->fd);
    free(c);
    return NULL;
}

/* ---- listeners ----------------------------------------------------------------------- */

/* Returns a socket bound to 127.0.0.1:port and listening, or -1 with errno set. */
static int listen_on(int port, int backlog, int *bound_port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t salen = sizeof sa;
    int one = 1, saved;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &salen) < 0)
        goto error;
    *bound_port = ntohs(sa.sin_port);
    return fd;
error:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/*
 * Connects a non-blocking socket to 127.0.0.1:port. Returns 1 when the handshake completed
 * within FILL_STALL_MS, 0 when it is still pending, -1 with errno set on failure. *out
 * receives the socket in the first two cases.
 */
static int connect_probe(int port, int *out)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    long long deadline = now_ms() + FILL_STALL_MS;
    int err = 0, saved;
    socklen_t elen = sizeof err;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
        goto done;
    if (errno != EINPROGRESS)
        goto error;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        long long left = deadline - now_ms();
        int n = poll(&p, 1, left > 0 ? (int)left : 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto error;
        if (n == 0) {
            *out = fd;
            return 0;
        }
        break;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
        goto error;
    if (err) {
        errno = err;
        goto error;
    }
done:
    *out = fd;
    return 1;
error:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

struct blackhole {
    int listener;
    int port;
    int nfillers;
    int fillers[FILLERS_MAX];
};

/*
 * Opens a listener that is never accepted and fills its accept queue with our own
 * connections. Linux drops a SYN aimed at a listener whose accept queue is full (before
 * any syncookie logic), so from then on a client's connect() hangs exactly as one aimed at
 * a host behind a firewall that drops packets. The queue is full when a probe's handshake
 * stays pending; the fillers stay open for the life of the process. Returns 0, or -1 with
 * errno set.
 */
static int blackhole_open(struct blackhole *bh)
{
    bh->nfillers = 0;
    bh->listener = listen_on(0, 0, &bh->port);
    if (bh->listener < 0)
        return -1;
    while (bh->nfillers < FILLERS_MAX) {
        int fd, r = connect_probe(bh->port, &fd);

        if (r < 0)
            return -1;
        bh->fillers[bh->nfillers++] = fd;
        if (r == 0)
            return 0;
    }
    errno = EAGAIN;
    return -1;
}

static void blackhole_close(struct blackhole *bh)
{
    for (int i = 0; i < bh->nfillers; i++)
        close(bh->fillers[i]);
    if (bh->listener >= 0)
        close(bh->listener);
}

/*
 * Writes the port number to path through path.tmp and rename(), so a reader polling for
 * the file never sees it half-written. Returns 0, or -1 with errno set.
 */
static int write_port_file(const char *path, int port)
{
    char tmp[4096];
    FILE *f;
    int bad;

    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    f = fopen(tmp, "w");
    if (!f)
        return -1;
    bad = fprintf(f, "%d\n", port) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void spawn(int fd)
{
    pthread_attr_t attr;
    pthread_t tid;
    struct conn *c = calloc(1, sizeof *c);
    int one = 1;

    if (!c) {
        close(fd);
        return;
    }
    c->fd = fd;
    /* Drip bytes must leave one by one, not wait for the previous byte's ACK. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, THREAD_STACK);
    if (pthread_create(&tid, &attr, serve, c) != 0) {
        fprintf(stderr, "faultserver: cannot start a connection thread\n");
        close(fd);
        free(c);
    }
    pthread_attr_destroy(&attr);
}

static void *accept_loop(void *arg)
{
    int listener = *(int *)arg;

    for (;;) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);

        if (fd >= 0) {
            spawn(fd);
        } else if (errno == EINTR || errno == ECONNABORTED) {
            continue;
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* Out of resources: back off instead of spinning; a closing connection frees one. */
            perror("faultserver: accept");
            tbt_sleep_ms(10);
        } else {
            perror("faultserver: accept");
            accept_failed = 1;
            kill(getpid(), SIGTERM);
            return NULL;
        }
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: faultserver [--port N] [--port-file F] [--blackhole-port-file F]\n");
}

int main(int argc, char **argv)
{
    const char *port_file = NULL, *bh_file = NULL;
    struct blackhole bh = { .listener = -1 };
    int port = 0, bound = 0, listener = -1, sig, status = 1;
    bool wrote_port = false, wrote_bh = false;
    sigset_t stop;
    pthread_t tid;

    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (!val) {
            usage();
            return 2;
        }
        if (!strcmp(opt, "--port")) {
            char *end;
            long p = strtol(val, &end, 10);

            if (*val == '\0' || *end || p < 0 || p > 65535) {
                usage();
                return 2;
            }
            port = (int)p;
        } else if (!strcmp(opt, "--port-file")) {
            port_file = val;
        } else if (!strcmp(opt, "--blackhole-port-file")) {
            bh_file = val;
        } else {
            usage();
            return 2;
        }
        i++;
    }

    /* A client that hangs up must cost a thread an EPIPE, never the server its life. */
    signal(SIGPIPE, SIG_IGN);
    /* Blocked before any thread starts, so every thread inherits it and main sigwait()s. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    listener = listen_on(port, SOMAXCONN, &bound);
    if (listener < 0) {
        perror("faultserver: listen");
        goto out;
    }
    if (bh_file) {
        if (blackhole_open(&bh) < 0) {
            perror("faultserver: blackhole");
            goto out;
        }
        if (write_port_file(bh_file, bh.port) < 0) {
            perror("faultserver: blackhole port file");
            goto out;
        }
        wrote_bh = true;
    }
    if (pthread_create(&tid, NULL, accept_loop, &listener) != 0) {
        fprintf(stderr, "faultserver: cannot start the accept thread\n");
        goto out;
    }
    pthread_detach(tid);
    if (port_file) {
        if (write_port_file(port_file, bound) < 0) {
            perror("faultserver: port file");
            goto out;
        }
        wrote_port = true;
    } else {
        printf("%d\n", bound);
        fflush(stdout);
    }

    while (sigwait(&stop, &sig) != 0)
        ;
    status = accept_failed ? 1 : 0;
out:
    if (wrote_port)
        unlink(port_file);
    if (wrote_bh)
        unlink(bh_file);
    /*
     * The listener stays open: the accept thread may still be inside accept() on it, and
     * the process is about to end. Connection threads die with it.
     */
    blackhole_close(&bh);
    pthread_mutex_lock(&stats.lock);
    stats_free_keys_locked();
    return status;
}
