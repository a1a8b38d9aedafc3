/* log_sink.c - delivering log lines without ever blocking, signalling or trespassing.
 * A line that cannot go out at once is dropped (log.c counts it): a cut must never wait. */
#include "log_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdtable.h"
#include "real.h"

/* The file or the syslog socket: ours, kept above the numbers a program expects. */
static atomic_int sink_fd = -1;

/*
 * fd 2 as it was when the library started: the program's stderr. Lines go to fd 2 only
 * while it is still that object. A daemon that closes 0-2 gets its next connection, file
 * or database on fd 2; writing "timebox: ..." there corrupts it, and if that is a
 * governed socket the bytes reach the peer. Logging is rare: an fstat per line is cheap.
 *
 * Written once, in the library's start-up (under pthread_once) or by the first line, which
 * is logged from there: `state` publishes the fields (release), readers acquire it.
 */
enum { ERR_UNKNOWN, ERR_TAKING, ERR_KNOWN, ERR_NONE };
static struct {
	atomic_int state;
	dev_t dev;
	ino_t ino;
	mode_t type; /* S_IFMT bits */
} err_id;

static bool stderr_known(void)
{
	int state = atomic_load_explicit(&err_id.state, memory_order_acquire);
	struct stat st;

	if (state == ERR_UNKNOWN &&
	    atomic_compare_exchange_strong(&err_id.state, &state, ERR_TAKING)) {
		state = ERR_NONE;
		if (fstat(2, &st) == 0) {
			err_id.dev = st.st_dev;
			err_id.ino = st.st_ino;
			err_id.type = st.st_mode & S_IFMT;
			state = ERR_KNOWN;
		}
		atomic_store_explicit(&err_id.state, state, memory_order_release);
	}
	return state == ERR_KNOWN;
}

static bool same_object(const struct stat *st)
{
	return (st->st_mode & S_IFMT) == err_id.type && st->st_dev == err_id.dev &&
	       st->st_ino == err_id.ino;
}

/*
 * write() on a pipe: EPIPE raises SIGPIPE in this thread, which would kill a program that
 * never writes to its stderr itself. Blocked around the write; a SIGPIPE the write caused
 * is consumed, one the thread had pending before is left to the program (signals of one
 * number do not queue: had it been pending, ours merged into it).
 */
static bool write_nosignal(int fd, const char *buf, size_t n)
{
	static const struct timespec zero = { 0, 0 };
	sigset_t pipe_set, old, pending;
	bool had;
	ssize_t r;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	had = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	r = tb_real.write(fd, buf, n);
	if (r < 0 && errno == EPIPE && !had)
		sigtimedwait(&pipe_set, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r == (ssize_t)n;
}

/* A stream socket may take part of the line: one more try for the rest, then give up. */
static bool send_nowait(int fd, const char *buf, size_t n)
{
	for (int tries = 0; n > 0 && tries < 2; tries++) {
		ssize_t r = tb_real.send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r < 0)
			return false;
		buf += r;
		n -= (size_t)r;
	}
	return n == 0;
}

/*
 * A pipe or FIFO: its file description is the program's (and its children's), so making
 * it O_NONBLOCK would change the program's own writes. Opening /proc/self/fd/2 gives a new
 * description of the same pipe that may be non-blocking: a line (< PIPE_BUF) then goes in
 * whole or fails with EAGAIN. It is opened per line and closed at once: kept open, it
 * would hold the pipe's write end, and the reader would never see EOF once the program
 * closed its stderr. The fstat of the new fd proves it is still the start-up pipe.
 * Without /proc (or for another user's pipe), poll for room first: a writer racing us
 * between the poll and the write could still make that write wait.
 */
static bool pipe_write(const struct stat *want, const char *buf, size_t n)
{
	struct pollfd p = { 2, POLLOUT, 0 };
	struct stat st;
	int fd, mode = tb_real.fcntl(2, F_GETFL);
	bool ok;

	/* A read end on fd 2 refuses the program's writes (EBADF): the reopened pipe would
	 * not, and the line would land in what the program reads. */
	if (mode < 0 || (mode & O_ACCMODE) == O_RDONLY)
		return false;
	fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0) {
		ok = fstat(fd, &st) == 0 && st.st_dev == want->st_dev &&
		     st.st_ino == want->st_ino && write_nosignal(fd, buf, n);
		tb_real.close(fd);
		return ok;
	}
	if (errno == ENXIO)
		return false; /* a FIFO with no reader: the write would only fail with EPIPE */
	if (tb_real.poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
		return false;
	return write_nosignal(2, buf, n);
}

/*
 * fd 2 now: the start-up stderr, or what the program itself put there since (a daemon's
 * freopen of its log file, a dup2 of a pipe). A socket that was not stderr at start-up is
 * never written to: it is a connection that took the number after the program closed
 * fds 0-2 (inetd-style services, daemons), and a line there would land in its data.
 */
static bool stderr_write(const char *buf, size_t n)
{
	struct pollfd p = { 2, POLLOUT, 0 };
	struct stat st;

	if (!stderr_known() || fstat(2, &st) < 0)
		return false;
	/* Whatever fd 2 is, a socket the library governs never receives a byte from us. */
	if (tb_fd_sock(2) != NULL)
		return false;
	switch (st.st_mode & S_IFMT) {
	case S_IFSOCK: /* under systemd, stderr is a stream socket to the journal */
		return same_object(&st) && send_nowait(2, buf, n);
	case S_IFIFO:
		return pipe_write(&st, buf, n);
	default:
		/* A terminal stopped by ^S or a pty whose reader stalled blocks its writers:
		 * write only when it has room (a tty is not reopened: a hung-up one's number
		 * may belong to someone else's session by now). */
		if (isatty(2) && (tb_real.poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT)))
			return false;
		return tb_real.write(2, buf, n) == (ssize_t)n;
	}
}

/* syslog(3) takes a lock and blocks when the daemon's queue is full: a datagram of our own,
 * sent without waiting, to /dev/log each time (no connection to lose when the daemon
 * restarts). RFC 3164 without a timestamp: the daemon stamps what it receives. */
static const struct sockaddr_un dev_log = { AF_UNIX, "/dev/log" };

static bool syslog_write(const char *line, size_t n)
{
	static const char prefix[] = "timebox: ";
	char msg[1200];
	size_t k = 0, head = strlen(prefix);
	ssize_t r;
	int fd = atomic_load_explicit(&sink_fd, memory_order_relaxed);
	pid_t pid = getpid();
	char digits[16];
	int d = 0;

	if (n < head + 1 || n - head > sizeof(msg) - 40)
		return false;
	memcpy(msg, "<12>timebox[", 12); /* LOG_USER | LOG_WARNING */
	k = 12;
	do {
		digits[d++] = (char)('0' + pid % 10);
		pid /= 10;
	} while (pid > 0);
	while (d > 0)
		msg[k++] = digits[--d];
	memcpy(msg + k, "]: ", 3);
	k += 3;
	memcpy(msg + k, line + head, n - head - 1); /* without "timebox: " and the newline */
	k += n - head - 1;
	r = tb_real.sendto(fd, msg, k, MSG_DONTWAIT | MSG_NOSIGNAL,
			   (const struct sockaddr *)&dev_log, sizeof(dev_log));
	return r == (ssize_t)k;
}

bool tb_sink_write(int target, const char *line, size_t n)
{
	int saved = errno;
	bool ok = false;

	switch (target) {
	case TB_LOG_STDERR:
		ok = stderr_write(line, n);
		break;
	case TB_LOG_FILE:
		/* A regular file (checked at open): it does not block the way a pipe does. */
		ok = tb_real.write(atomic_load_explicit(&sink_fd, memory_order_relaxed), line, n) ==
		     (ssize_t)n;
		break;
	case TB_LOG_SYSLOG:
		ok = syslog_write(line, n);
		break;
	default:
		ok = true; /* off: nothing is lost that was asked for */
		break;
	}
	errno = saved;
	return ok;
}

/*
 * The log file: only a regular file, opened or created at the path itself. O_NOFOLLOW: a
 * link planted at a shared path must not choose which file the program appends to;
 * O_NONBLOCK: a FIFO planted there must not hold the program in open() (with no reader
 * the open fails with ENXIO; with one, the fstat refuses it).
 */
static int open_file(const char *path, const char **why)
{
	struct stat st;
	int fd;

	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
				O_NOCTTY,
		  0600);
	if (fd < 0) {
		*why = errno == ELOOP	? "a symbolic link: name the file itself"
		       : errno == ENXIO ? "not a regular file: a FIFO"
					: strerror(errno);
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		tb_real.close(fd);
		return -1;
	}
	return tb_fd_move_internal(fd);
}

int tb_sink_open(const struct tb_settings *s, const char **why)
{
	struct stat st;
	int fd;

	stderr_known();
	switch (s->log_target) {
	case TB_LOG_FILE:
		/* The names of stderr itself are symbolic links: they mean stderr. */
		if (strcmp(s->log_path, "/dev/stderr") == 0 ||
		    strcmp(s->log_path, "/dev/fd/2") == 0 ||
		    strcmp(s->log_path, "/proc/self/fd/2") == 0)
			return TB_LOG_STDERR;
		fd = open_file(s->log_path, why);
		break;
	case TB_LOG_SYSLOG:
		if (stat(dev_log.sun_path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
			*why = "no syslog daemon: /dev/log is not a socket";
			return TB_LOG_STDERR;
		}
		fd = tb_real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			*why = strerror(errno);
		else
			fd = tb_fd_move_internal(fd);
		break;
	default:
		return s->log_target;
	}
	if (fd < 0)
		return TB_LOG_STDERR;
	atomic_store(&sink_fd, fd);
	return s->log_target;
}

void tb_sink_fd_moved(int from, int to)
{
	int expect = from;

	if (atomic_compare_exchange_strong(&sink_fd, &expect, to)) {
		tb_fd_unmark_internal(from);
		tb_fd_mark_internal(to);
	}
}
