/*
 * chain_inventory.c - the middle tier of the end-to-end chain test (test_chain.py): an
 * unmodified thread-per-connection HTTP/1.x server with no timeouts of its own.
 *
 * usage: chain_inventory PORT_FILE DB_PORT EVENT_FILE
 *
 * Per connection: reads one request head (plain blocking recv), records when and which
 * X-Deadline-Ms it carried, does 3 s of its own work (a sleep: the workload), then calls
 * the next hop `db` (127.0.0.1:DB_PORT, GET /db, blocking connect/send/recv, no timeout)
 * and answers 200. Every step is one line appended to EVENT_FILE:
 *   inventory start <monotonic ns> <X-Deadline-Ms value or ->
 *   inventory db <monotonic ns> ok|err=<errno>
 *   inventory end <monotonic ns>
 * The port is written to PORT_FILE (through a rename, so a reader never sees half of it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WORK_MS 3000

static int db_port;
static int event_fd;

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One line per event, in one write(2) on an O_APPEND file: lines of concurrent threads
 * never interleave and the test can poll the file for them. */
static void event(const char *what, const char *detail)
{
	char line[160];
	int n = snprintf(line, sizeof line, "inventory %s %lld %s\n", what, mono_ns(), detail);

	if (n > 0 && write(event_fd, line, (size_t)n) < 0)
		perror("chain_inventory: event file");
}

/* Reads until the end of a request head (or EOF/error) into buf; returns its length. */
static size_t read_head(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	while (len + 1 < cap) {
		ssize_t r = recv(fd, buf + len, cap - 1 - len, 0);
		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	buf[len] = '\0';
	return len;
}

/* The X-Deadline-Ms value of the head in buf (case-insensitive name), "-" when none. */
static void header_value(const char *buf, char *out, size_t cap)
{
	const char *name = "\nX-Deadline-Ms:";
	size_t nl = strlen(name);

	snprintf(out, cap, "-");
	for (const char *p = buf; (p = strchr(p, '\n')) != NULL; p++) {
		if (strncasecmp(p, name, nl) != 0)
			continue;
		p += nl;
		while (*p == ' ' || *p == '\t')
			p++;
		size_t n = strcspn(p, "\r\n");
		snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
		return;
	}
}

/* The call to db: a fresh connection, one GET, the status line read. */
static void call_db(void)
{
	char buf[512], detail[32];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)db_port) };
	static const char req[] = "GET /db HTTP/1.1\r\nHost: db\r\nConnection: close\r\n\r\n";
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    send(fd, req, sizeof req - 1, MSG_NOSIGNAL) < 0 || read_head(fd, buf, sizeof buf) == 0) {
		snprintf(detail, sizeof detail, "err=%d", errno);
		event("db", detail);
		goto out;
	}
	event("db", "ok");
out:
	if (fd >= 0)
		close(fd);
}

static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char head[8192], value[32];
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n"
				   "Connection: close\r\n\r\ninventory\n";
	struct timespec work = { WORK_MS / 1000, (WORK_MS % 1000) * 1000000L };

	if (read_head(fd, head, sizeof head) == 0)
		goto out;
	header_value(head, value, sizeof value);
	event("start", value);
	while (nanosleep(&work, &work) < 0 && errno == EINTR)
		;
	call_db();
	/* The caller may have left long ago (that is the point): a failed send is ignored. */
	(void)!send(fd, resp, sizeof resp - 1, MSG_NOSIGNAL);
	event("end", "-");
out:
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	char tmp[4096];
	FILE *f;
	int ls, one = 1;

	if (argc != 4) {
		fprintf(stderr, "usage: chain_inventory PORT_FILE DB_PORT EVENT_FILE\n");
		return 2;
	}
	db_port = atoi(argv[2]);
	event_fd = open(argv[3], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	signal(SIGPIPE, SIG_IGN);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (event_fd < 0 || ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 64) < 0 ||
	    getsockname(ls, (struct sockaddr *)&sa, &len) < 0) {
		perror("chain_inventory");
		return 1;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", ntohs(sa.sin_port)) < 0 || fclose(f) != 0 ||
	    rename(tmp, argv[1]) < 0) {
		perror("chain_inventory: port file");
		return 1;
	}
	for (;;) {
		pthread_t t;
		int c = accept(ls, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("chain_inventory: accept");
			return 1;
		}
		if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c) != 0) {
			close(c);
			continue;
		}
		pthread_detach(t);
	}
}
