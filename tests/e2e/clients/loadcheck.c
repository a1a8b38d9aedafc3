/*
 * loadcheck.c - a small HTTP/1.0 client for the load-time and hostile-environment tests
 * (test_hostile_env.py): N threads each make one exchange with the fault server and the
 * program prints what came back, so that a native run and a run under timebox compare.
 *
 * usage: loadcheck [--threads N] [--out FILE] [--whoami] PORT PATH
 *   --threads N   N threads (0: the main thread alone, the default), each one exchange
 *   --out FILE    write the report there instead of stdout (for a run with 0-2 closed)
 *   --whoami      also report whether libtimebox.so is mapped and AT_SECURE is set
 * Report, one line each: "body <first line of the body>" (the main thread or the first
 * thread), "ok K" exchanges whose body was right, "err NAME K" per errno that failed one,
 * "fds_leaked N" (the program's open fds below 512 after the threads ended minus
 * before). Exit 0 when every
 * exchange was ok, 1 otherwise, 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dirent.h>

#define MAX_THREADS 4096
#define ERRNO_MAX 256

static int port;
static const char *path;
static atomic_int ok_count;
static atomic_int err_count[ERRNO_MAX];
static char first_body[256];
static atomic_flag first_taken = ATOMIC_FLAG_INIT;

/* The program's open fds: those below 512, where timebox keeps none of its own (its log,
 * stats segment and gate locks live at 512 and above, shim/real.h). */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && atoi(e->d_name) < 512)
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

/* One exchange: returns 0 with the body's first line in line[], or an errno. */
static int exchange(char *line, size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char req[512], buf[8192];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), len, err;
	char *body, *eol;

	if (fd < 0)
		return errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto fail;
	len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	if (write(fd, req, (size_t)len) != len)
		goto fail;
	for (;;) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);

		if (n < 0)
			goto fail;
		if (n == 0 || got + (size_t)n == sizeof(buf) - 1) {
			got += (size_t)(n > 0 ? n : 0);
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	body = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || body == NULL)
		return EPROTO;
	body += 4;
	eol = strchr(body, '\n');
	if (eol != NULL)
		*eol = '\0';
	snprintf(line, cap, "%s", body);
	return 0;
fail:
	err = errno;
	close(fd);
	return err;
}

static void record(int err, const char *line)
{
	if (err == 0) {
		atomic_fetch_add(&ok_count, 1);
		if (!atomic_flag_test_and_set(&first_taken))
			snprintf(first_body, sizeof(first_body), "%s", line);
	} else {
		atomic_fetch_add(&err_count[err < ERRNO_MAX ? err : 0], 1);
	}
}

static void *worker(void *arg)
{
	char line[256];
	int err = exchange(line, sizeof(line));

	(void)arg;
	record(err, line);
	return NULL;
}

static int whoami(FILE *out)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char l[512];
	bool mapped = false;

	if (m != NULL) {
		while (fgets(l, sizeof(l), m) != NULL)
			if (strstr(l, "libtimebox.so") != NULL)
				mapped = true;
		fclose(m);
	}
	return fprintf(out, "timebox %s\nsecure %lu\n", mapped ? "mapped" : "absent",
		       getauxval(AT_SECURE));
}

int main(int argc, char **argv)
{
	static pthread_t tids[MAX_THREADS];
	int threads = 0, i, fds_before, fds_after, started = 0, failed = 0;
	const char *outpath = NULL;
	bool who = false;
	FILE *out = stdout;
	pthread_attr_t attr;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
			outpath = argv[++i];
		else if (strcmp(argv[i], "--whoami") == 0)
			who = true;
		else
			break;
	}
	if (argc - i != 2 || threads < 0 || threads > MAX_THREADS) {
		fprintf(stderr, "usage: loadcheck [--threads N] [--out FILE] [--whoami] PORT PATH\n");
		return 2;
	}
	port = atoi(argv[i]);
	path = argv[i + 1];
	fds_before = count_fds();
	if (threads == 0) {
		char line[256];

		record(exchange(line, sizeof(line)), line);
	} else {
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 128 * 1024);
		for (i = 0; i < threads; i++) {
			int rc = pthread_create(&tids[i], &attr, worker, NULL);

			if (rc != 0) {
				atomic_fetch_add(&err_count[rc < ERRNO_MAX ? rc : 0], 1);
				continue;
			}
			started++;
			tids[started - 1] = tids[i];
		}
		for (i = 0; i < started; i++)
			pthread_join(tids[i], NULL);
		pthread_attr_destroy(&attr);
	}
	fds_after = count_fds();
	if (outpath != NULL) {
		int fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		out = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (out == NULL)
			return 1;
	}
	if (who)
		whoami(out);
	fprintf(out, "body %s\nok %d\n", first_body, atomic_load(&ok_count));
	for (i = 0; i < ERRNO_MAX; i++) {
		int n = atomic_load(&err_count[i]);

		if (n > 0) {
			fprintf(out, "err %s %d\n", i == 0 ? "other" : strerrorname_np(i), n);
			failed += n;
		}
	}
	fprintf(out, "fds_leaked %d\n", fds_after - fds_before);
	if (fclose(out) != 0)
		return 1;
	return failed == 0 && fds_after == fds_before ? 0 : 1;
}
