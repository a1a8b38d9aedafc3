/*
 * stdiocli.c - a legacy client that talks to its server through a FILE *: fdopen on a
 * connected socket, the request written with one stdio writer + fflush, the response read
 * with one stdio reader until EOF. No timeouts of its own.
 *
 * usage: stdiocli --port N --path /x --api API [--write WAPI] [--host 127.0.0.1]
 *                 [--sleep-ms M]
 *        stdiocli --loop BYTES [--chunk B] [--write WAPI]
 *        stdiocli --flood WAPI [--peer-closes]
 *
 * API: fgets, fgets_chk, fgets_unlocked, fread, getc, getc_unlocked (the <stdio.h> macro,
 * whose slow path is __uflow), fscanf (one "%c" per byte), getline. --sleep-ms M: before
 * each read, the program is busy M ms (a slow program, not a slow peer). WAPI, the writer
 * of the request: fprintf (the default), fputs, fwrite, putc, putc_unlocked (one byte a
 * call), fflush (fputs into a 1 MiB buffer, then fflush sends it). Output, one line:
 *
 *   api=A ms=X result=ok bytes=B sum=H
 *   api=A ms=X result=error errno=NAME ferror=0|1 feof=0|1 bytes=B
 *
 * sum is FNV-1a of the whole response. --loop BYTES: forks a server that echoes what it
 * reads (plain read/write), and pushes BYTES through one governed socket, written with
 * fwrite (or --write WAPI, a chunk a call) by one thread and read back with fread by
 * another:
 *
 *   loop bytes=B ms=X result=ok|mismatch sent=H got=H
 *
 * --flood WAPI: connects to a listener of its own that accepts and never reads, SIGPIPE at
 * its default, and writes 64 KiB lines with WAPI until a call fails (at most 64 MiB); ms is
 * how long the failing call took, ferror the stream's error flag after it:
 *
 *   flood api=A ms=X result=error errno=NAME ferror=0|1 bytes=B
 *   flood api=A result=ok bytes=B            (every write went through: not bounded)
 *
 * --peer-closes: the listener closes the connection at once instead, so a write fails with
 * EPIPE and SIGPIPE, at its default, ends the program (as it would without timebox).
 *
 * Exit status: 0 on a complete response (or a matching loop), 1 otherwise, 2 for usage.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tbtest.h"

#ifdef __GLIBC__
char *__fgets_chk(char *buf, size_t size, int n, FILE *f);
#else
/* musl has no FORTIFY entry points: fgets_chk is fgets there (tests/e2e/test_musl.py). */
#define __fgets_chk(buf, size, n, f) fgets(buf, n, f)
#endif

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

#define FNV_INIT 14695981039346656037ULL

static int dial(const char *host, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		printf("result=error errno=%s stage=connect\n", tbt_errno_name(errno));
		exit(1);
	}
	return fd;
}

/* Reads one chunk with the chosen API into buf; returns its length, 0 at EOF or error. */
static size_t read_some(const char *api, FILE *f, char *buf, size_t cap, char **line,
			size_t *linecap)
{
	if (!strcmp(api, "fgets") || !strcmp(api, "fgets_chk") || !strcmp(api, "fgets_unlocked")) {
		char *r = !strcmp(api, "fgets") ? fgets(buf, (int)cap, f)
			: !strcmp(api, "fgets_chk") ? __fgets_chk(buf, cap, (int)cap, f)
			: fgets_unlocked(buf, (int)cap, f);
		return r == NULL ? 0 : strlen(buf);
	}
	if (!strcmp(api, "fread"))
		return fread(buf, 1, cap, f);
	if (!strcmp(api, "getc") || !strcmp(api, "getc_unlocked")) {
		int c = !strcmp(api, "getc") ? getc(f) : getc_unlocked(f);

		if (c == EOF)
			return 0;
		buf[0] = (char)c;
		return 1;
	}
	if (!strcmp(api, "fscanf"))
		return fscanf(f, "%c", buf) == 1 ? 1 : 0;
	if (!strcmp(api, "getline")) {
		ssize_t n = getline(line, linecap, f);

		if (n <= 0)
			return 0;
		memcpy(buf, *line, (size_t)n < cap ? (size_t)n : cap);
		return (size_t)n < cap ? (size_t)n : cap;
	}
	fprintf(stderr, "stdiocli: unknown api %s\n", api);
	exit(2);
}

/* Writes text[0..n) with the writer wapi; fflush's buffer is set by the caller. Returns 0,
 * or -1 when the writer failed (errno as it left it). */
static int write_with(const char *wapi, FILE *f, const char *text, size_t n)
{
	if (!strcmp(wapi, "fprintf"))
		return fprintf(f, "%.*s", (int)n, text) == (int)n ? 0 : -1;
	if (!strcmp(wapi, "fputs") || !strcmp(wapi, "fflush"))
		return fputs(text, f) != EOF ? 0 : -1; /* text is a string of n bytes */
	if (!strcmp(wapi, "fwrite"))
		return fwrite(text, 1, n, f) == n ? 0 : -1;
	if (!strcmp(wapi, "putc") || !strcmp(wapi, "putc_unlocked")) {
		bool unlocked = !strcmp(wapi, "putc_unlocked");

		for (size_t i = 0; i < n; i++)
			if ((unlocked ? putc_unlocked(text[i], f) : putc(text[i], f)) == EOF)
				return -1;
		return 0;
	}
	fprintf(stderr, "stdiocli: unknown writer %s\n", wapi);
	exit(2);
}

/* The stream f's buffer as wapi wants it: fflush's holds a whole request or line. */
static void buffer_for(const char *wapi, FILE *f)
{
	static char big[1 << 20];

	if (!strcmp(wapi, "fflush"))
		setvbuf(f, big, _IOFBF, sizeof(big));
}

static int fetch(const char *host, int port, const char *path, const char *api,
		 const char *wapi, long sleep_ms)
{
	char buf[1000], req[8192], *line = NULL;
	size_t linecap = 0, n;
	uint64_t sum = FNV_INIT, bytes = 0;
	double t0 = tbt_now_ms();
	FILE *f = fdopen(dial(host, port), "r+");
	int len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n",
			   path, host);

	if (f == NULL || len < 0 || (size_t)len >= sizeof(req))
		return 1;
	buffer_for(wapi, f);
	if (write_with(wapi, f, req, (size_t)len) < 0 || fflush(f) != 0) {
		printf("api=%s ms=%.1f result=error errno=%s stage=write\n", api,
		       tbt_now_ms() - t0, tbt_errno_name(errno));
		return 1;
	}
	for (;;) {
		if (sleep_ms > 0)
			tbt_sleep_ms(sleep_ms);
		errno = 0;
		n = read_some(api, f, buf, sizeof(buf), &line, &linecap);
		if (n == 0)
			break;
		sum = fnv(sum, buf, n);
		bytes += n;
	}
	if (ferror(f)) {
		printf("api=%s ms=%.1f result=error errno=%s ferror=1 feof=%d bytes=%llu\n", api,
		       tbt_now_ms() - t0, tbt_errno_name(errno), feof(f) ? 1 : 0,
		       (unsigned long long)bytes);
		return 1;
	}
	printf("api=%s ms=%.1f result=ok bytes=%llu sum=%016llx\n", api, tbt_now_ms() - t0,
	       (unsigned long long)bytes, (unsigned long long)sum);
	free(line);
	fclose(f);
	return 0;
}

/* ---- --flood: a peer that never reads ------------------------------------------------- */

static int flood(const char *wapi, bool peer_closes)
{
	static char line[65536];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), peer, r = 0;
	uint64_t bytes = 0;
	double t0 = 0;
	FILE *f;

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) < 0)
		return 2;
	f = fdopen(dial("127.0.0.1", ntohs(a.sin_port)), "w");
	peer = accept(lfd, NULL, NULL);
	if (f == NULL || peer < 0)
		return 2;
	if (peer_closes)
		close(peer);
	/* A cut must be reported, not kill the program: SIGPIPE as a program that never
	 * thought of it has it. */
	signal(SIGPIPE, SIG_DFL);
	buffer_for(wapi, f);
	memset(line, 'x', sizeof(line) - 2);
	line[sizeof(line) - 2] = '\n';
	/* Loopback buffers hold a few MiB at most: 1024 lines (64 MiB) must block. */
	for (int i = 0; i < 1024 && r == 0; i++) {
		t0 = tbt_now_ms();
		errno = 0;
		r = write_with(wapi, f, line, sizeof(line) - 1);
		if (r == 0 && !strcmp(wapi, "fflush"))
			r = fflush(f) == 0 ? 0 : -1;
		if (r == 0)
			bytes += sizeof(line) - 1;
	}
	if (r == 0) {
		printf("flood api=%s result=ok bytes=%llu\n", wapi, (unsigned long long)bytes);
		return 1;
	}
	printf("flood api=%s ms=%.1f result=error errno=%s ferror=%d bytes=%llu\n", wapi,
	       tbt_now_ms() - t0, tbt_errno_name(errno), ferror(f) ? 1 : 0,
	       (unsigned long long)bytes);
	return 1;
}

/* ---- --loop: fwrite out, fread back, through an echo server ---------------------------- */

struct loop {
	FILE *out;
	uint64_t bytes, sent;
	size_t chunk;
	const char *wapi;
};

static void fill(char *p, size_t n, uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)('a' + (off + i) % 26);
}

static void *writer(void *arg)
{
	struct loop *l = arg;
	char *buf = malloc(l->chunk + 1);
	uint64_t off = 0, sum = FNV_INIT;

	while (buf != NULL && off < l->bytes) {
		size_t n = l->bytes - off < l->chunk ? (size_t)(l->bytes - off) : l->chunk;

		fill(buf, n, off);
		buf[n] = '\0'; /* fputs's string */
		sum = fnv(sum, buf, n);
		if (write_with(l->wapi, l->out, buf, n) < 0 ||
		    (!strcmp(l->wapi, "fflush") && fflush(l->out) != 0))
			break;
		off += n;
	}
	fflush(l->out);
	shutdown(fileno(l->out), SHUT_WR);
	l->sent = sum;
	free(buf);
	return NULL;
}

static void echo_server(int lfd)
{
	static char buf[1 << 16];
	int c = accept(lfd, NULL, NULL);
	ssize_t n;

	while (c >= 0 && (n = read(c, buf, sizeof(buf))) > 0)
		for (ssize_t o = 0; o < n;) {
			ssize_t w = write(c, buf + o, (size_t)(n - o));

			if (w <= 0)
				_exit(1);
			o += w;
		}
	_exit(0);
}

static int loop(uint64_t bytes, size_t chunk, const char *wapi)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd, st;
	struct loop l = { .bytes = bytes, .chunk = chunk, .wapi = wapi };
	char *buf = malloc(chunk);
	uint64_t got = 0, sum = FNV_INIT;
	bool pattern = true;
	pthread_t t;
	pid_t pid;
	double t0;
	FILE *in;

	if (buf == NULL || lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(lfd, 1) < 0 || getsockname(lfd, (struct sockaddr *)&a, &alen) < 0)
		return 2;
	if ((pid = fork()) == 0)
		echo_server(lfd);
	close(lfd);
	t0 = tbt_now_ms();
	fd = dial("127.0.0.1", ntohs(a.sin_port));
	in = fdopen(fd, "r");
	l.out = fdopen(dup(fd), "w");
	if (in == NULL || l.out == NULL)
		return 2;
	buffer_for(wapi, l.out);
	if (pthread_create(&t, NULL, writer, &l) != 0)
		return 2;
	for (;;) {
		size_t n = fread(buf, 1, chunk, in);

		if (n == 0)
			break;
		for (size_t i = 0; i < n && pattern; i++)
			pattern = buf[i] == (char)('a' + (got + i) % 26);
		sum = fnv(sum, buf, n);
		got += n;
	}
	pthread_join(t, NULL);
	waitpid(pid, &st, 0);
	printf("loop bytes=%llu ms=%.1f result=%s sent=%016llx got=%016llx errno=%s\n",
	       (unsigned long long)got, tbt_now_ms() - t0,
	       got == bytes && sum == l.sent && pattern && !ferror(in) ? "ok" : "mismatch",
	       (unsigned long long)l.sent, (unsigned long long)sum,
	       tbt_errno_name(ferror(in) ? errno : 0));
	return got == bytes && sum == l.sent && pattern ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'h' }, { "port", required_argument, NULL, 'p' },
		{ "path", required_argument, NULL, 'P' }, { "api", required_argument, NULL, 'a' },
		{ "sleep-ms", required_argument, NULL, 's' },
		{ "loop", required_argument, NULL, 'l' }, { "chunk", required_argument, NULL, 'c' },
		{ "write", required_argument, NULL, 'w' }, { "flood", required_argument, NULL, 'f' },
		{ "peer-closes", no_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	const char *host = "127.0.0.1", *path = "/ok", *api = "fgets", *wapi = NULL;
	const char *flood_wapi = NULL;
	bool peer_closes = false;
	long port = 0, sleep_ms = 0;
	unsigned long long loop_bytes = 0;
	size_t chunk = 65536;
	int c;

	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'h': host = optarg; break;
		case 'p': port = atol(optarg); break;
		case 'P': path = optarg; break;
		case 'a': api = optarg; break;
		case 's': sleep_ms = atol(optarg); break;
		case 'l': loop_bytes = strtoull(optarg, NULL, 10); break;
		case 'c': chunk = (size_t)atol(optarg); break;
		case 'w': wapi = optarg; break;
		case 'f': flood_wapi = optarg; break;
		case 'C': peer_closes = true; break;
		default: return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (flood_wapi != NULL)
		return flood(flood_wapi, peer_closes);
	if (loop_bytes > 0)
		return loop(loop_bytes, chunk > 0 ? chunk : 65536, wapi != NULL ? wapi : "fwrite");
	if (port <= 0)
		return 2;
	return fetch(host, (int)port, path, api, wapi != NULL ? wapi : "fprintf", sleep_ms);
}
