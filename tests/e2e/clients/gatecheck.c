/*
 * gatecheck.c - a client that checks, from inside one program, that a gate slot follows its
 * socket through the fd calls that copy or drop it: run at a cap of 1 with a short acquire
 * timeout, a connect that must wait is one that finds the slot still held.
 *
 * usage: gatecheck MODE --port N
 *
 *   dup         connect A; B = dup(A), C = fcntl(A, F_DUPFD_CLOEXEC); close A and B: the
 *               slot is still held (C); close C: it is free.
 *   dup2        connect A; dup2(A, 100), close A: still held; dup2 a pipe over 100: free.
 *               Then connect A; dup3 a pipe over A: free.
 *   close_range connect A; close_range(A, A, CLOSE_RANGE_CLOEXEC): still held (nothing
 *               closes before exec); close_range(A, ~0U, 0): free.
 *   fclose      connect A; fclose(fdopen(A)): free.
 *   fork        (shared gate) connect A; fork; the parent closes its copy: still held
 *               (the child has one); the child closes its copy and exits: free.
 *   fork_local  (a gate per process) connect A; fork; the parent closes its copy: free in
 *               the parent's gate; the child's gate still counts A (held) until the child
 *               closes it (free).
 *
 * Every mode ends the same way: a connect that must succeed at once, one more that must
 * wait (at a cap of 1: a slot given back twice would let it through), then everything is
 * closed, so the gate's exit summary must read leased=0.
 *
 * A connect is checked with one of two verdicts: "take" must succeed, "held" must fail
 * with ETIMEDOUT (the gate's wait ran out). Output: logfmt lines
 * "mode=M step=S expect=take|held rc=R errno=E ms=X", then "result=ok" (exit 0) or
 * "result=fail step=S why=..." (exit 1). Usage errors exit 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tbtest.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define DUP_TARGET 100 /* a free fd number to dup2 onto */

static const char *mode_name = "?";
static int port = -1;

/* Prints the failure and exits 1. */
static void fail(const char *step, const char *why)
{
    printf("result=fail step=%s why=\"%s\"\n", step, why);
    exit(1);
}

/* Fails unless rc == 0 (a call that is not a connect). */
static void check(const char *step, int rc)
{
    if (rc < 0)
        fail(step, strerror(errno));
}

/*
 * Connects a fresh blocking socket to 127.0.0.1:port and checks the verdict: "take" must
 * return the connected fd, "held" must fail with ETIMEDOUT (its socket is then closed and
 * -1 returned).
 */
static int gate_connect(const char *step, bool take)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0), rc, err;
    double start;
    char why[128];

    if (fd < 0)
        fail(step, strerror(errno));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    start = tbt_now_ms();
    errno = 0;
    rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    err = rc < 0 ? errno : 0;
    printf("mode=%s step=%s expect=%s rc=%d errno=%s ms=%.1f\n", mode_name, step,
           take ? "take" : "held", rc, tbt_errno_name(err), tbt_now_ms() - start);
    if (take && rc < 0) {
        snprintf(why, sizeof why, "connect failed with %s, the slot should be free",
                 tbt_errno_name(err));
        fail(step, why);
    }
    if (!take && !(rc < 0 && err == ETIMEDOUT)) {
        snprintf(why, sizeof why, "expected -1 ETIMEDOUT (slot held), got %d %s", rc,
                 tbt_errno_name(err));
        fail(step, why);
    }
    if (rc < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The common end: the slot is free exactly once, then everything is closed. */
static void finish(void)
{
    int fd = gate_connect("free", true);

    gate_connect("no_double_release", false);
    check("close_free", close(fd));
}

static int a_pipe_end(const char *step)
{
    int p[2];

    check(step, pipe(p));
    close(p[1]);
    return p[0];
}

static void mode_dup(void)
{
    int a = gate_connect("connect", true), b, c;

    check("dup", b = dup(a));
    check("dupfd", c = fcntl(a, F_DUPFD_CLOEXEC, 0));
    check("close_original", close(a));
    gate_connect("after_close_original", false);
    check("close_dup", close(b));
    gate_connect("after_close_dup", false);
    check("close_dupfd", close(c));
}

static void mode_dup2(void)
{
    int a = gate_connect("connect", true), p = a_pipe_end("pipe");

    check("dup2_copy", dup2(a, DUP_TARGET));
    check("close_original", close(a));
    gate_connect("after_close_original", false);
    check("dup2_over", dup2(p, DUP_TARGET));
    a = gate_connect("after_dup2_over", true);
    check("dup3_over", dup3(p, a, O_CLOEXEC));
    check("close_dup3", close(a));
    check("close_target", close(DUP_TARGET));
    check("close_pipe", close(p));
}

static void mode_close_range(void)
{
    int a = gate_connect("connect", true);

    check("close_range_cloexec", close_range((unsigned)a, (unsigned)a, CLOSE_RANGE_CLOEXEC));
    gate_connect("after_cloexec", false);
    check("close_range", close_range((unsigned)a, ~0U, 0));
}

static void mode_fclose(void)
{
    int a = gate_connect("connect", true);
    FILE *f = fdopen(a, "r+");

    if (!f)
        fail("fdopen", strerror(errno));
    check("fclose", fclose(f));
}

static void mode_fork(void)
{
    int a = gate_connect("connect", true), go[2], done[2];
    char c = 'x';
    pid_t pid;
    int status;

    check("pipe", pipe(go));
    check("pipe", pipe(done));
    fflush(stdout);
    pid = fork();
    check("fork", pid);
    if (pid == 0) {
        /* The child holds its copy of A until the parent has seen the slot still held. */
        close(go[1]);
        close(done[0]);
        if (read(go[0], &c, 1) != 1)
            _exit(1);
        close(a);
        if (write(done[1], &c, 1) != 1)
            _exit(1);
        exit(0); /* exit, not _exit: the child's gate summary is printed too */
    }
    close(go[0]);
    close(done[1]);
    check("close_parent_copy", close(a));
    gate_connect("after_parent_close", false);
    if (write(go[1], &c, 1) != 1 || read(done[0], &c, 1) != 1)
        fail("child", "lost the child");
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("child", "the child failed");
    close(go[1]);
    close(done[0]);
}

/* A gate per process counts the sockets that process has open: after fork each process has
 * its own copy of the gate, and of the socket. */
static void mode_fork_local(void)
{
    int a = gate_connect("connect", true), b, go[2];
    char c = 'x';
    pid_t pid;
    int status;

    check("pipe", pipe(go));
    fflush(stdout);
    pid = fork();
    check("fork", pid);
    if (pid == 0) {
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(1);
        gate_connect("child_holds_inherited", false);
        close(a);
        b = gate_connect("child_after_close", true);
        close(b);
        exit(0); /* exit, not _exit: the child's gate summary is printed too */
    }
    close(go[0]);
    check("close_parent_copy", close(a));
    b = gate_connect("parent_after_close", true);
    close(b);
    if (write(go[1], &c, 1) != 1)
        fail("child", "lost the child");
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("child", "the child failed");
    close(go[1]);
}

static void usage(void)
{
    fputs("usage: gatecheck dup|dup2|close_range|fclose|fork|fork_local --port N\n", stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } modes[] = {
        { "dup", mode_dup },
        { "dup2", mode_dup2 },
        { "close_range", mode_close_range },
        { "fclose", mode_fclose },
        { "fork", mode_fork },
        { "fork_local", mode_fork_local },
    };
    void (*run)(void) = NULL;
    char *end;

    if (argc != 4 || strcmp(argv[2], "--port"))
        usage();
    port = (int)strtol(argv[3], &end, 10);
    if (*end || port < 1 || port > 65535)
        usage();
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (!strcmp(argv[1], modes[i].name))
            run = modes[i].run;
    if (!run)
        usage();
    mode_name = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    run();
    finish();
    printf("result=ok\n");
    return 0;
}
