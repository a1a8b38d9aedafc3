/*
 * reads.c - small reads and writes on fds timebox does not govern: the untracked fast path.
 * Run natively and preloaded under callgrind; the difference in instructions between two
 * values of N, divided by the calls added, is what the hooks add per call.
 *
 * usage: reads --mode file|pipe|fork|connect --n N
 *
 *   file   N reads of 64 bytes from /dev/zero
 *   pipe   N rounds of write(64) then read(64) on a pipe: 2N calls
 *   fork   N forks of a child that exits at once, one after the other: prints the children's
 *          page faults per child and the microseconds per fork (what the library's fork
 *          handlers cost a process that forks)
 *   connect  the process's first connect, to a listener of its own on 127.0.0.1, then N - 1
 *          more: prints the microseconds of the first and the median of the others (what
 *          a process's first governed connect pays once: timebox's threads and segment)
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int forks(long n)
{
    struct timespec a, b;
    struct rusage ru;

    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) {
        pid_t p = fork();

        if (p == 0)
            _exit(0);
        if (p < 0 || waitpid(p, NULL, 0) != p) {
            perror("reads: fork");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (getrusage(RUSAGE_CHILDREN, &ru) != 0) {
        perror("reads: getrusage");
        return 1;
    }
    printf("mode=fork n=%ld faults_per_child=%.2f us_per_fork=%.2f\n", n,
           (double)ru.ru_minflt / (double)n,
           ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 1e3 / (double)n);
    return 0;
}

static double us_since(const struct timespec *a)
{
    struct timespec b;

    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a->tv_sec) * 1e9 + (double)(b.tv_nsec - a->tv_nsec)) / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static int connects(long n)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    double *us = calloc((size_t)n, sizeof(double));
    int lfd = socket(AF_INET, SOCK_STREAM, 0);

    if (us == NULL || n < 2 || lfd < 0 || bind(lfd, (struct sockaddr *)&a, len) < 0 ||
        listen(lfd, (int)n) < 0 || getsockname(lfd, (struct sockaddr *)&a, &len) < 0) {
        perror("reads: listen");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        struct timespec t;
        int fd, c;

        clock_gettime(CLOCK_MONOTONIC, &t);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
            perror("reads: connect");
            return 1;
        }
        us[i] = us_since(&t);
        c = accept(lfd, NULL, NULL);
        close(c);
        close(fd);
    }
    qsort(us + 1, (size_t)(n - 1), sizeof(double), cmp_double);
    printf("mode=connect n=%ld first_us=%.1f later_us=%.1f\n", n, us[0], us[1 + (n - 1) / 2]);
    free(us);
    return 0;
}

int main(int argc, char **argv)
{
    char buf[64];
    long n = -1;
    int pipe_mode = -1, fds[2];

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--n") == 0)
            n = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--mode") == 0)
            pipe_mode = strcmp(argv[i + 1], "pipe") == 0 ? 1 :
                        strcmp(argv[i + 1], "file") == 0 ? 0 :
                        strcmp(argv[i + 1], "fork") == 0 ? 2 :
                        strcmp(argv[i + 1], "connect") == 0 ? 3 : -1;
    }
    if (n < 0 || pipe_mode < 0) {
        fprintf(stderr, "usage: reads --mode file|pipe|fork|connect --n N\n");
        return 2;
    }
    if (pipe_mode == 2)
        return forks(n);
    if (pipe_mode == 3)
        return connects(n);
    if (pipe_mode) {
        if (pipe(fds) < 0) {
            perror("reads: pipe");
            return 1;
        }
    } else {
        fds[0] = open("/dev/zero", O_RDONLY | O_CLOEXEC);
        if (fds[0] < 0) {
            perror("reads: /dev/zero");
            return 1;
        }
    }
    memset(buf, 'x', sizeof(buf));
    for (long i = 0; i < n; i++) {
        if (pipe_mode && write(fds[1], buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
            perror("reads: write");
            return 1;
        }
        if (read(fds[0], buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
            perror("reads: read");
            return 1;
        }
    }
    printf("mode=%s n=%ld\n", pipe_mode ? "pipe" : "file", n);
    return 0;
}
