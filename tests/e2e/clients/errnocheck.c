/*
 * errnocheck.c - a small blocking client that checks, from inside a program, what timebox
 * promises about one socket: errno untouched on success, a timed-out socket that stays
 * dead, a forked child still governed, and dup/dup2 followed correctly.
 *
 * usage: errnocheck MODE --port N [--path P] [--wait-ms W]
 *
 *   reuse   GET P (default /delay?ms=400); the read must fail with ETIMEDOUT. Then send()
 *           and write() on the same fd fail with ETIMEDOUT (SIGPIPE keeps its default
 *           action, so an EPIPE would kill us), read() and recv() fail with ETIMEDOUT,
 *           SO_ERROR reads ETIMEDOUT; after W ms (default 600: the late response has come)
 *           reads still fail with ETIMEDOUT and never return data.
 *   errno   GET P (default /ok) with errno set to a sentinel before every call that must
 *           succeed: connect, send, write, poll, select, recv, read, getsockopt, fcntl,
 *           dup, close, and the same on a pipe. Prints "errno ok", or names the first call
 *           that changed errno.
 *   fork    GET P (default /stall), then fork: the child's read on the inherited socket
 *           must fail with ETIMEDOUT; the parent then makes a fresh GET /ok.
 *   dup     GET P (default /stall), dup the fd, close the original: the read on the dup
 *           must fail with ETIMEDOUT. Then dup2 a pipe over two governed sockets (one with a
 *           request in flight): an idle poll of W ms (default 600) on the pipe ends with 0,
 *           and bytes written to the pipe come back intact.
 *   chk     GET P (default /stall) twice, waiting with glibc's FORTIFY entry points called
 *           directly, __read_chk then __recv_chk: each must fail with ETIMEDOUT. (A
 *           -D_FORTIFY_SOURCE build calls them only where the compiler knows the buffer's
 *           size, so a fortified program may or may not reach them.)
 *
 * Output: logfmt lines "mode=M step=S rc=R errno=E ms=X", then "result=ok" (exit 0) or
 * "result=fail step=S why=..." (exit 1). Usage errors exit 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tbtest.h"

#define SENTINEL 12345
#define BUF_MAX  16384

struct options {
    const char *mode;
    const char *path;
    int port;
    long wait_ms;
};

static const char *mode_name = "?";

static void step(const char *name, long rc, int err, double ms)
{
    printf("mode=%s step=%s rc=%ld errno=%s ms=%.1f\n", mode_name, name, rc, tbt_errno_name(err), ms);
}

/* Prints the failure and exits 1. */
static void fail(const char *name, const char *why)
{
    printf("result=fail step=%s why=\"%s\"\n", name, why);
    exit(1);
}

/* Fails unless rc == -1 and err == want. */
static void expect_error(const char *name, long rc, int err, int want)
{
    char why[128];

    if (rc == -1 && err == want)
        return;
    snprintf(why, sizeof why, "expected -1 %s, got %ld %s", tbt_errno_name(want), rc,
             rc == -1 ? tbt_errno_name(err) : "");
    fail(name, why);
}

/* A blocking TCP socket connected to 127.0.0.1:port; exits on failure. */
static int connect_to(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        fail("socket", strerror(errno));
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        fail("connect", strerror(errno));
    return fd;
}

static int format_request(char *req, size_t size, const char *path, int port)
{
    int n = snprintf(req, size, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", path, port);

    if (n < 0 || (size_t)n >= size)
        fail("request", "path too long");
    return n;
}

/* Writes all of buf; exits on failure. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail("write_request", n < 0 ? strerror(errno) : "wrote nothing");
        buf += n;
        len -= (size_t)n;
    }
}

static void send_request(int fd, const char *path, int port)
{
    char req[BUF_MAX];
    int n = format_request(req, sizeof req, path, port);

    write_all(fd, req, (size_t)n);
}

/* True once buf (have bytes, NUL-terminated) holds a complete response. */
static bool response_complete(const char *buf, size_t have)
{
    const char *end = strstr(buf, "\r\n\r\n");
    const char *cl = strcasestr(buf, "Content-Length:");

    if (!end || !cl || cl > end)
        return false;
    return have >= (size_t)(end - buf) + 4 + strtoul(cl + 15, NULL, 10);
}

/* Reads one whole response with read(); returns its status code; exits on failure. */
static int read_response(int fd, char *buf, size_t size)
{
    size_t have = 0;
    int status = 0;

    buf[0] = '\0';
    while (!response_complete(buf, have)) {
        ssize_t n;

        if (have + 1 >= size)
            fail("read_response", "response too long");
        n = read(fd, buf + have, size - have - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail("read_response", n < 0 ? strerror(errno) : "EOF before the response's end");
        have += (size_t)n;
        buf[have] = '\0';
    }
    if (sscanf(buf, "HTTP/%*d.%*d %d", &status) != 1)
        fail("read_response", "no status line");
    return status;
}

/* A fresh connection, one GET of path, the whole response read; returns the status. */
static int fresh_call(int port, const char *path)
{
    char buf[BUF_MAX];
    int fd = connect_to(port), status;

    send_request(fd, path, port);
    status = read_response(fd, buf, sizeof buf);
    close(fd);
    return status;
}

/* ---- reuse --------------------------------------------------------------------------- */

/* A read on a dead socket: must fail with ETIMEDOUT, and above all return no data. */
static void dead_read(const char *name, int fd, bool use_recv)
{
    char buf[4096];
    double t = tbt_now_ms();
    ssize_t n = use_recv ? recv(fd, buf, sizeof buf, 0) : read(fd, buf, sizeof buf);
    int err = n < 0 ? errno : 0;

    step(name, (long)n, err, tbt_now_ms() - t);
    if (n > 0)
        fail(name, "a timed-out socket returned data");
    expect_error(name, (long)n, err, ETIMEDOUT);
}

static int mode_reuse(const struct options *o)
{
    static const char next[] = "GET /ok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    int fd = connect_to(o->port), soerr = 0, err;
    socklen_t len = sizeof soerr;
    ssize_t n;
    double t;
    int rc;

    send_request(fd, o->path, o->port);
    dead_read("read", fd, false);

    t = tbt_now_ms();
    n = send(fd, next, sizeof next - 1, 0);
    err = n < 0 ? errno : 0;
    step("send", (long)n, err, tbt_now_ms() - t);
    expect_error("send", (long)n, err, ETIMEDOUT);
    t = tbt_now_ms();
    n = write(fd, next, sizeof next - 1);
    err = n < 0 ? errno : 0;
    step("write", (long)n, err, tbt_now_ms() - t);
    expect_error("write", (long)n, err, ETIMEDOUT);

    dead_read("read_again", fd, false);
    dead_read("recv_again", fd, true);

    rc = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    printf("mode=%s step=so_error rc=%d so_error=%s\n", mode_name, rc, tbt_errno_name(soerr));
    if (rc != 0 || soerr != ETIMEDOUT)
        fail("so_error", "SO_ERROR is not ETIMEDOUT");

    /* The server answers the request at 400 ms: by now the late response has been sent. */
    tbt_sleep_ms(o->wait_ms);
    dead_read("read_late", fd, false);
    dead_read("recv_late", fd, true);
    close(fd);
    return 0;
}

/* ---- errno --------------------------------------------------------------------------- */

static const char *clobbered;
static int clobbered_errno;

/* Runs once after each call that succeeded: notes the first call that touched errno. */
static void check_errno(const char *op)
{
    int now = errno;

    if (now != SENTINEL && clobbered == NULL) {
        clobbered = op;
        clobbered_errno = now;
    }
}

/* Each CALL must succeed (COND on its result r) and leave errno at the sentinel. */
#define CHECKED(op, call, cond)                                                              \
    do {                                                                                     \
        long r;                                                                              \
        errno = SENTINEL;                                                                    \
        r = (long)(call);                                                                    \
        if (!(cond))                                                                         \
            fail(op, strerror(errno));                                                       \
        check_errno(op);                                                                     \
        (void)r;                                                                             \
    } while (0)

static int mode_errno(const struct options *o)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
    char req[BUF_MAX], buf[BUF_MAX];
    size_t have = 0, half;
    int fd, dfd = -1, flags = 0, soerr = -1, pipefd[2];
    socklen_t len = sizeof soerr;
    struct pollfd p;
    fd_set rd;
    struct timeval tv;
    int n, reqlen;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECKED("socket", fd = socket(AF_INET, SOCK_STREAM, 0), r >= 0);
    CHECKED("connect", connect(fd, (struct sockaddr *)&a, sizeof a), r == 0);
    reqlen = format_request(req, sizeof req, o->path, o->port);
    half = (size_t)reqlen / 2;
    CHECKED("send", send(fd, req, half, 0), r == (long)half);
    CHECKED("write", write(fd, req + half, (size_t)reqlen - half),
            r == (long)((size_t)reqlen - half));
    p = (struct pollfd){ .fd = fd, .events = POLLIN };
    CHECKED("poll", poll(&p, 1, 5000), r == 1);
    FD_ZERO(&rd);
    FD_SET(fd, &rd);
    tv = (struct timeval){ .tv_sec = 5 };
    CHECKED("select", select(fd + 1, &rd, NULL, NULL, &tv), r == 1);
    CHECKED("recv", have = (size_t)recv(fd, buf, 10, 0), r > 0);
    buf[have] = '\0';
    while (!response_complete(buf, have)) {
        CHECKED("read", n = (int)read(fd, buf + have, sizeof buf - have - 1), r > 0);
        have += (size_t)n;
        buf[have] = '\0';
    }
    CHECKED("getsockopt", getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len), r == 0);
    if (soerr != 0)
        fail("getsockopt", "SO_ERROR is set on a healthy socket");
    CHECKED("fcntl_getfl", flags = fcntl(fd, F_GETFL), r >= 0);
    CHECKED("fcntl_setfl", fcntl(fd, F_SETFL, flags), r == 0);
    CHECKED("dup", dfd = dup(fd), r >= 0);
    CHECKED("close_dup", close(dfd), r == 0);
    /* The next request on the same keep-alive connection, then the close. */
    CHECKED("send_again", send(fd, req, (size_t)reqlen, 0), r == reqlen);
    have = 0;
    buf[0] = '\0';
    while (!response_complete(buf, have)) {
        CHECKED("recv_again", n = (int)recv(fd, buf + have, sizeof buf - have - 1, 0), r > 0);
        have += (size_t)n;
        buf[have] = '\0';
    }
    CHECKED("close", close(fd), r == 0);

    CHECKED("pipe", pipe(pipefd), r == 0);
    CHECKED("pipe_write", write(pipefd[1], "hello", 5), r == 5);
    p = (struct pollfd){ .fd = pipefd[0], .events = POLLIN };
    CHECKED("pipe_poll", poll(&p, 1, 5000), r == 1);
    CHECKED("pipe_read", read(pipefd[0], buf, sizeof buf), r == 5);
    CHECKED("pipe_close_r", close(pipefd[0]), r == 0);
    CHECKED("pipe_close_w", close(pipefd[1]), r == 0);

    if (clobbered) {
        printf("errno clobbered op=%s errno=%s\n", clobbered, tbt_errno_name(clobbered_errno));
        fail(clobbered, "errno changed by a call that succeeded");
    }
    printf("errno ok\n");
    return 0;
}

/* ---- fork ---------------------------------------------------------------------------- */

static int mode_fork(const struct options *o)
{
    int fd = connect_to(o->port), status;
    pid_t pid;

    send_request(fd, o->path, o->port);
    fflush(stdout);
    pid = fork();
    if (pid < 0)
        fail("fork", strerror(errno));
    if (pid == 0) {
        mode_name = "fork_child";
        dead_read("child_read", fd, false);
        fflush(stdout);
        _exit(0);
    }
    if (waitpid(pid, &status, 0) != pid)
        fail("waitpid", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("child", "the child failed");
    close(fd);
    status = fresh_call(o->port, "/ok");
    printf("mode=%s step=parent_fresh_call status=%d\n", mode_name, status);
    if (status != 200)
        fail("parent_fresh_call", "not 200");
    return 0;
}

/* ---- dup ----------------------------------------------------------------------------- */

static int mode_dup(const struct options *o)
{
    int fd = connect_to(o->port), copy, rfd, wfd, pipefd[2], n, err;
    char buf[64];
    struct pollfd p;
    double t;

    send_request(fd, o->path, o->port);
    copy = dup(fd);
    if (copy < 0)
        fail("dup", strerror(errno));
    close(fd);
    dead_read("read_dup", copy, false);
    close(copy);

    /* rfd has a request in flight, wfd is merely connected: both are governed sockets
     * until the pipe's ends are dup2'ed over them. */
    rfd = connect_to(o->port);
    send_request(rfd, o->path, o->port);
    wfd = connect_to(o->port);
    if (pipe(pipefd) < 0)
        fail("pipe", strerror(errno));
    if (dup2(pipefd[0], rfd) != rfd || dup2(pipefd[1], wfd) != wfd)
        fail("dup2", strerror(errno));
    close(pipefd[0]);
    close(pipefd[1]);

    p = (struct pollfd){ .fd = rfd, .events = POLLIN };
    t = tbt_now_ms();
    errno = SENTINEL;
    n = poll(&p, 1, (int)o->wait_ms);
    err = errno;
    step("pipe_idle_poll", n, n < 0 ? err : 0, tbt_now_ms() - t);
    if (n != 0)
        fail("pipe_idle_poll", "an idle poll on a pipe did not just time out");
    if (err != SENTINEL)
        fail("pipe_idle_poll", "errno changed");

    errno = SENTINEL;
    n = (int)write(wfd, "hello", 5);
    err = errno;
    step("pipe_write", n, n < 0 ? err : 0, 0);
    if (n != 5 || err != SENTINEL)
        fail("pipe_write", "write on the pipe failed or changed errno");
    errno = SENTINEL;
    n = (int)read(rfd, buf, sizeof buf);
    err = errno;
    step("pipe_read", n, n < 0 ? err : 0, 0);
    if (n != 5 || memcmp(buf, "hello", 5) != 0 || err != SENTINEL)
        fail("pipe_read", "read on the pipe failed, changed errno or mangled the bytes");
    close(rfd);
    close(wfd);
    return 0;
}

/* ---- chk ----------------------------------------------------------------------------- */

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);

static int mode_chk(const struct options *o)
{
    char buf[4096];
    int fd = connect_to(o->port), err;
    ssize_t n;
    double t;

    send_request(fd, o->path, o->port);
    t = tbt_now_ms();
    n = __read_chk(fd, buf, sizeof buf, sizeof buf);
    err = n < 0 ? errno : 0;
    step("read_chk", (long)n, err, tbt_now_ms() - t);
    expect_error("read_chk", (long)n, err, ETIMEDOUT);
    close(fd);

    fd = connect_to(o->port);
    send_request(fd, o->path, o->port);
    t = tbt_now_ms();
    n = __recv_chk(fd, buf, sizeof buf, sizeof buf, 0);
    err = n < 0 ? errno : 0;
    step("recv_chk", (long)n, err, tbt_now_ms() - t);
    expect_error("recv_chk", (long)n, err, ETIMEDOUT);
    close(fd);
    return 0;
}

/* ---- main ---------------------------------------------------------------------------- */

static void usage(void)
{
    fputs("usage: errnocheck reuse|errno|fork|dup|chk --port N [--path P] [--wait-ms W]\n", stderr);
    exit(2);
}

static long parse_num(const char *text, long min, long max)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max)
        usage();
    return v;
}

int main(int argc, char **argv)
{
    struct options o = { .port = -1, .wait_ms = 600 };

    if (argc < 2)
        usage();
    o.mode = argv[1];
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        if (!strcmp(argv[i], "--port"))
            o.port = (int)parse_num(argv[++i], 1, 65535);
        else if (!strcmp(argv[i], "--path"))
            o.path = argv[++i];
        else if (!strcmp(argv[i], "--wait-ms"))
            o.wait_ms = parse_num(argv[++i], 0, 60000);
        else
            usage();
    }
    if (o.port < 0)
        usage();
    setvbuf(stdout, NULL, _IOLBF, 0);
    mode_name = o.mode;
    if (!strcmp(o.mode, "reuse")) {
        o.path = o.path ? o.path : "/delay?ms=400";
        mode_reuse(&o);
    } else if (!strcmp(o.mode, "errno")) {
        o.path = o.path ? o.path : "/ok";
        mode_errno(&o);
    } else if (!strcmp(o.mode, "fork")) {
        o.path = o.path ? o.path : "/stall";
        mode_fork(&o);
    } else if (!strcmp(o.mode, "dup")) {
        o.path = o.path ? o.path : "/stall";
        mode_dup(&o);
    } else if (!strcmp(o.mode, "chk")) {
        o.path = o.path ? o.path : "/stall";
        mode_chk(&o);
    } else {
        usage();
    }
    printf("result=ok\n");
    return 0;
}
