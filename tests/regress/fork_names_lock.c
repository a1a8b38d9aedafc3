/* fork_names_lock.c - a fork while another thread resolves a name must not hang the child.
 *
 * What happened: with a rule naming a host, every getaddrinfo remembers what it resolved
 * under a mutex, and every connect looks the address up under the same mutex. The mutex was
 * not reset across fork: a fork taken while a resolver thread held it left the child with a
 * mutex locked by a thread that does not exist there, and the child's first connect waited
 * forever (seen at the 50th fork of a loop).
 * The sequence: a host rule in TIMEBOX_CONFIG; four threads call getaddrinfo("localhost")
 * in a loop; the main thread forks 200 times, each child connects to a loopback listener
 * and exits. Every child must exit (an alarm kills a hung one).
 */
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "regress.h"

#define RESOLVERS 4
#define FORKS 200

static atomic_bool stop;
static int listen_fd;

static void *resolver(void *arg)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;

	(void)arg;
	while (!atomic_load(&stop))
		if (getaddrinfo("localhost", "80", &hints, &res) == 0)
			freeaddrinfo(res);
	return NULL;
}

static void *acceptor(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(listen_fd, NULL, NULL);

		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static char conf_env[128];
	char conf_path[] = "/tmp/tb_fork_names_XXXXXX";
	pthread_t th[RESOLVERS], acc;
	int port, hung = 0, failed = 0;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		int cfd = mkstemp(conf_path);
		static const char conf[] =
			"destinations = ( { match = \"localhost\"; read_timeout = \"5s\"; } );\n";

		TBR_CHECK(cfd >= 0, "mkstemp: %s", strerror(errno));
		TBR_CHECK(write(cfd, conf, sizeof(conf) - 1) == (ssize_t)sizeof(conf) - 1, "write");
		close(cfd);
		snprintf(conf_env, sizeof(conf_env), "TIMEBOX_CONFIG=%s", conf_path);
	}
	tbr_preload_self(argv, conf_env, NULL);
	unlink(getenv("TIMEBOX_CONFIG"));
	listen_fd = tbr_listen(&port);
	pthread_create(&acc, NULL, acceptor, NULL);
	for (int i = 0; i < RESOLVERS; i++)
		pthread_create(&th[i], NULL, resolver, NULL);
	for (int i = 0; i < FORKS; i++) {
		int status;
		pid_t pid = fork();

		if (pid == 0) {
			struct sockaddr_in a = { .sin_family = AF_INET,
						 .sin_port = htons((uint16_t)port),
						 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
			int fd = socket(AF_INET, SOCK_STREAM, 0);

			alarm(10); /* a hung child is killed, and counted */
			_exit(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : 3);
		}
		TBR_CHECK(pid > 0, "fork: %s", strerror(errno));
		TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
			fprintf(stderr, "child of fork #%d hung in connect\n", i + 1);
			hung++;
			break;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed++;
	}
	atomic_store(&stop, true);
	for (int i = 0; i < RESOLVERS; i++)
		pthread_join(th[i], NULL);
	TBR_CHECK(hung == 0, "a forked child deadlocked in its first connect");
	TBR_CHECK(failed == 0, "%d children failed to connect", failed);
	return 0;
}
