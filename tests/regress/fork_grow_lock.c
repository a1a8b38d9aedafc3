/* fork_grow_lock.c - a fork while another thread grew the socket pool deadlocked the child.
 *
 * What happened: the pool of governed sockets grows under a mutex (grow_lock) when it runs
 * out. A fork while another thread held that mutex - inside the mmap of a new chunk - gave
 * the child a copy of the mutex that nobody would ever unlock: the child's first connect
 * needing a new chunk blocked for ever (a pre-fork server's worker, hung at its first call).
 * The sequence, made certain with a seccomp user notification that holds thread A inside
 * that mmap: A uses up the pool's first chunk (512 connections: sock.c's CHUNK), then
 * connects once more; while A is held in grow's mmap, the main thread forks; the child
 * connects -> it must complete (the child re-initialises the mutex).
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "regress.h"

#define CHUNK 512 /* sock.c's: when it changed, this program skipped until it followed */

static int port;
static atomic_int notif_fd = -1;
static atomic_int a_done;

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg;

	for (;;) {
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		close(c);
	}
}

/* Thread A only: every mmap waits for the main thread's word. */
static int hold_mmaps(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

static void *thread_a(void *arg)
{
	int fd;

	(void)arg;
	for (int i = 0; i < CHUNK; i++)
		(void)tbr_connect(port); /* kept open: the pool's first chunk is used up */
	fd = hold_mmaps();
	atomic_store(&notif_fd, fd < 0 ? -2 : fd);
	if (fd >= 0)
		(void)tbr_connect(port); /* grows the pool: held inside mmap */
	atomic_store(&a_done, 1);
	return NULL;
}

/* The child of a fork made while A is held: one connect, within 3 s. */
static bool child_connects(void)
{
	int status;
	pid_t pid = fork();

	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		alarm(3);
		(void)tbr_connect(port);
		_exit(0);
	}
	TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		return false;
	TBR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: %d", status);
	return true;
}

int main(int argc, char **argv)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	int lfd, fd, held = 0, hung = 0;
	pthread_t ta, tacc;

	struct rlimit lim;

	(void)argc;
	/* Both ends of a chunk's connections live in this process. */
	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 2 * CHUNK + 64) {
		lim.rlim_cur = lim.rlim_max < 2 * CHUNK + 64 ? lim.rlim_max : 2 * CHUNK + 64;
		setrlimit(RLIMIT_NOFILE, &lim);
	}
	if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur < 2 * CHUNK + 16)
		tbr_skip("the fd limit is below both ends of a pool chunk's connections");
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=1s", NULL);
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&tacc, NULL, acceptor, &lfd) == 0, "pthread_create");
	TBR_CHECK(pthread_create(&ta, NULL, thread_a, NULL) == 0, "pthread_create");
	while ((fd = atomic_load(&notif_fd)) == -1)
		tbt_sleep_ms(5);
	if (fd == -2)
		tbr_skip("seccomp user notification is not available here");
	while (!atomic_load(&a_done)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 100) <= 0)
			continue;
		memset(&req, 0, sizeof(req));
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
			continue;
		/* The pool's chunk: a small private anonymous read-write mapping (malloc's own
		 * mmaps are larger, or PROT_NONE/MAP_NORESERVE). Fork only while A is held there:
		 * held elsewhere, it might own a lock that fork itself needs. */
		if (req.data.args[0] == 0 && req.data.args[2] == (PROT_READ | PROT_WRITE) &&
		    req.data.args[3] == (MAP_PRIVATE | MAP_ANONYMOUS) &&
		    (int)req.data.args[4] == -1 && req.data.args[1] < (128 << 10)) {
			held++;
			if (!child_connects())
				hung++;
		}
		memset(&resp, 0, sizeof(resp));
		resp.id = req.id;
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		TBR_CHECK(ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) == 0, "NOTIF_SEND: %s",
			  strerror(errno));
	}
	pthread_join(ta, NULL);
	printf("forked %d time(s) while the pool grew in another thread; %d child(ren) hung\n",
	       held, hung);
	if (held == 0)
		tbr_skip("the pool's growth was never seen in mmap");
	TBR_CHECK(hung == 0, "the child's first connect deadlocked on the pool's lock");
	return 0;
}
