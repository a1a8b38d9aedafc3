/* tls_idle_session.c - an idle TLS session that waits in select() was cut at read_timeout.
 *
 * What happened: `openssl s_client` (and every event loop holding a pooled HTTPS
 * connection) waits in select()/poll()/epoll for either the user or the server. Over TLS the
 * framing follows records, not HTTP: once application data came back, the connection was
 * ANSWERED, and the read phase kept running in those waits as under the system-call rules.
 * With TIMEBOX_READ_TIMEOUT=1s, s_client was cut one second after the server's answer while
 * it waited for the user's next line (`read:errno=110`), although nothing was outstanding.
 * The fix: a multiplexed wait for reading on an answered TLS connection is not governed
 * (blocking reads stay governed); timebox says so once (event=notice
 * what=tls_answered_wait).
 * The sequence: openssl s_server -rev (echoes each line reversed, over TLS 1.3); s_client
 * under the library with a 1 s read timeout; "hello" -> "olleh"; 3 s idle; "world" ->
 * "dlrow" must arrive.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "regress.h"

static char dir[64];

static pid_t spawn(const char *const argv[], int in, int out, bool preload)
{
	pid_t pid = fork();

	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		if (!preload)
			unsetenv("LD_PRELOAD");
		dup2(in >= 0 ? in : null, 0);
		dup2(out >= 0 ? out : null, 1);
		if (!preload)
			dup2(null, 2); /* the server's chatter */
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Reads one line from fd into buf within ms milliseconds; false on timeout or EOF. */
static bool read_line(int fd, char *buf, size_t size, int ms)
{
	size_t n = 0;
	double until = tbt_now_ms() + ms;

	while (n + 1 < size) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)(until - tbt_now_ms());

		if (left <= 0 || poll(&p, 1, left) <= 0 || read(fd, buf + n, 1) != 1)
			return false;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = '\0';
	return true;
}

int main(int argc, char **argv)
{
	char cert[96], key[96], accept_at[64], connect_to[64], line[256];
	int port, lfd, to_client[2], from_client[2], st = 0;
	pid_t server, client;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	if (system("command -v openssl >/dev/null 2>&1") != 0)
		tbr_skip("openssl is not installed (tests/deps.sh installs it)");
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/tb-tls-idle-XXXXXX");
	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(cert, sizeof(cert), "%s/c.pem", dir);
	snprintf(key, sizeof(key), "%s/k.pem", dir);
	{
		const char *req[] = { "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj",
				"/CN=localhost", "-days", "1", "-keyout", key, "-out", cert, NULL };
		pid_t p = spawn(req, -1, -1, false);

		TBR_CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "openssl req failed (status %d)", st);
	}
	lfd = tbr_listen(&port); /* a free port for the server, handed over just below */
	close(lfd);
	snprintf(accept_at, sizeof(accept_at), "127.0.0.1:%d", port);
	{
		const char *srv[] = { "openssl", "s_server", "-accept", accept_at, "-cert", cert,
				"-key", key, "-rev", "-quiet", NULL };

		server = spawn(srv, -1, -1, false);
	}
	for (int i = 0;; i++) { /* readiness: the server listens */
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

		close(fd);
		if (ok)
			break;
		TBR_CHECK(i < 500, "openssl s_server did not listen on %s", accept_at);
		tbt_sleep_ms(20);
	}
	TBR_CHECK(pipe(to_client) == 0 && pipe(from_client) == 0, "pipe: %s", strerror(errno));
	snprintf(connect_to, sizeof(connect_to), "127.0.0.1:%d", port);
	{
		const char *cli[] = { "openssl", "s_client", "-connect", connect_to, "-quiet", NULL };

		client = spawn(cli, to_client[0], from_client[1], true);
	}
	close(to_client[0]);
	close(from_client[1]);
	TBR_CHECK(write(to_client[1], "hello\n", 6) == 6, "write: %s", strerror(errno));
	TBR_CHECK(read_line(from_client[0], line, sizeof(line), 10000) &&
		  strcmp(line, "olleh\n") == 0, "no first answer (%s)", line);
	tbt_sleep_ms(3000); /* the user thinks: the session is idle, nothing outstanding */
	TBR_CHECK(write(to_client[1], "world\n", 6) == 6,
		  "s_client is gone after 3 s idle: %s", strerror(errno));
	bool got = read_line(from_client[0], line, sizeof(line), 10000);

	printf("after 3 s idle with a 1 s read timeout: %s", got ? line : "no answer\n");
	close(to_client[1]);
	kill(client, SIGTERM);
	kill(server, SIGTERM);
	waitpid(client, NULL, 0);
	waitpid(server, NULL, 0);
	unlink(cert);
	unlink(key);
	rmdir(dir);
	TBR_CHECK(got && strcmp(line, "dlrow\n") == 0, "the idle session was cut");
	return 0;
}
