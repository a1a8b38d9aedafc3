/* stdio_fgets_chk_overflow.c - __fgets_chk wrote past the buffer before it aborted.
 *
 * What happened: a program built with _FORTIFY_SOURCE calls __fgets_chk(buf, size, n, f)
 * for fgets into an array of known size. When n is larger than the array (the bug
 * FORTIFY is there to catch) and the line fills the array, glibc aborts cleanly ("***
 * buffer overflow detected ***", SIGABRT) and stores nothing past buf[size-1]. On a FILE
 * over a governed socket, timebox's fgets stored the terminating NUL at buf[size] first,
 * then aborted: one byte of the program's memory written past the array. The sequence:
 * a read timeout of 2 s, fdopen(fd, "r"), the peer sends "0123456789\n"; in a child,
 * __fgets_chk(buf, 4, 64, f) with buf the first 4 bytes of a shared page whose 5th byte
 * is a canary. Natively the child dies of SIGABRT and the canary is intact.
 *
 * The fix: the overflow check comes before the store, as in glibc's debug/fgets_chk.c.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "regress.h"

char *__fgets_chk(char *buf, size_t size, int n, FILE *f);
char *__fgets_unlocked_chk(char *buf, size_t size, int n, FILE *f);

/* One child per entry point: returns the signal it died of (0: it returned). */
static int overflow_in_child(int port, int lfd, volatile char *shared, bool unlocked)
{
	int fd, peer, st;
	pid_t pid;

	fd = tbr_connect(port);
	peer = accept(lfd, NULL, NULL);
	TBR_CHECK(peer >= 0, "accept: %s", strerror(errno));
	TBR_CHECK(write(peer, "0123456789\n", 11) == 11, "peer write");
	shared[4] = 'Z';
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		FILE *f = fdopen(fd, "r");
		int devnull = open("/dev/null", O_WRONLY);

		/* glibc's abort message goes to the terminal or stderr: keep the run quiet. */
		if (devnull >= 0)
			dup2(devnull, 2);
		if (f == NULL)
			_exit(3);
		if (unlocked)
			__fgets_unlocked_chk((char *)shared, 4, 64, f);
		else
			__fgets_chk((char *)shared, 4, 64, f);
		_exit(0);
	}
	TBR_CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
	close(fd);
	close(peer);
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

int main(int argc, char **argv)
{
	volatile char *shared;
	int port, lfd;

	(void)argc;
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=2s", NULL);
	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	TBR_CHECK(shared != MAP_FAILED, "mmap: %s", strerror(errno));
	lfd = tbr_listen(&port);
	for (int unlocked = 0; unlocked < 2; unlocked++) {
		const char *name = unlocked ? "__fgets_unlocked_chk" : "__fgets_chk";
		int sig = overflow_in_child(port, lfd, shared, unlocked);

		TBR_CHECK(sig == SIGABRT, "%s: the child ended with signal %d, natively SIGABRT",
			  name, sig);
		TBR_CHECK(shared[4] == 'Z', "%s: buf[size] was written (%#x) before the abort",
			  name, (unsigned char)shared[4]);
	}
	close(lfd);
	return 0;
}
