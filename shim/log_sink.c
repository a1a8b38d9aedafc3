/* log_sink.c - delivering log lines without ever blocking, signalling or trespassing.
 * A line that cannot go out at once is dropped (log.c counts it): a cut must never wait. */
#include "log_sink.h"
#include "libc_compat.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "fdtable.h"
#include "real.h"
#include "thread.h"

/*
 * The file or the syslog socket: ours, kept above the numbers a program expects, and opened
 * at the first line, not at start-up: a process that logs nothing (a healthy one, and every
 * program it execs, which inherits TIMEBOX_LOG) has no fd of timebox's to find in its
 * listings (tests/regress/log_fd_in_child). One of the SINK_ states until it is open.
 */
enum { SINK_CLOSED = -1, SINK_OPENING = -2, SINK_FAILED = -3 };
static atomic_int sink_fd = SINK_CLOSED;
static int sink_target; /* TB_LOG_FILE or TB_LOG_SYSLOG: what sink_fd is; set at start-up */
static char sink_path[TB_LOG_PATH_MAX];

/*
 * fd 2 as it should be: the program's stderr. Lines go to fd 2 only while it is still the
 * object it was when the library started, or one the program itself put there since with
 * dup2/dup3/dup (tb_sink_stderr_replaced) - never a socket that was not stderr at start-up.
 * A daemon that closes 0-2 gets its next file, FIFO, device or connection on fd 2;
 * writing "timebox: ..." there corrupts it (tests/regress/log_fd2_data_file,
 * log_fd2_socket). A start-up with fd 2 closed has no stderr until the program makes one.
 * Logging is rare: an fstat per line is cheap. Whether it is a terminal is taken with it
 * (one isatty per stderr, not per line: the same device is the same answer).
 *
 * Taken once at start-up (under pthread_once) or by the first line, which is logged from
 * there; replaced by the program's dup2. `seq` is odd while the fields are rewritten: a
 * reader that sees it move takes the line as not for stderr (dropped, counted).
 */
enum { ERR_UNKNOWN, ERR_TAKING, ERR_KNOWN, ERR_NONE };
static struct {
	atomic_int state;
	atomic_uint seq;
	_Atomic uint64_t dev, ino, rdev;
	atomic_uint type; /* S_IFMT bits */
	atomic_bool tty;
} err_id;

/* A seqlock without fences (ThreadSanitizer knows no fences): the fields are stored with
 * release, so none moves before the odd count, and loaded with acquire, so the count's
 * second load cannot move before them. */
static void err_id_store(const struct stat *st)
{
	int saved = errno;
	bool tty = S_ISCHR(st->st_mode) && isatty(2); /* st is fd 2's */

	errno = saved;

	atomic_fetch_add_explicit(&err_id.seq, 1, memory_order_acq_rel);
	atomic_store_explicit(&err_id.dev, st->st_dev, memory_order_release);
	atomic_store_explicit(&err_id.ino, st->st_ino, memory_order_release);
	atomic_store_explicit(&err_id.rdev, st->st_rdev, memory_order_release);
	atomic_store_explicit(&err_id.type, st->st_mode & S_IFMT, memory_order_release);
	atomic_store_explicit(&err_id.tty, tty, memory_order_release);
	atomic_fetch_add_explicit(&err_id.seq, 1, memory_order_release);
}

static bool stderr_known(void)
{
	int state = atomic_load_explicit(&err_id.state, memory_order_acquire);
	struct stat st;

	if (state == ERR_UNKNOWN &&
	    atomic_compare_exchange_strong(&err_id.state, &state, ERR_TAKING)) {
		state = ERR_NONE;
		if (tb_fstat_raw(2, &st) == 0) {
			err_id_store(&st);
			state = ERR_KNOWN;
		}
		atomic_store_explicit(&err_id.state, state, memory_order_release);
	}
	return state == ERR_KNOWN;
}

/* Is st (fd 2 now) the program's stderr? Type, device and inode, and for a device its
 * number: /dev/null, a tty, a pipe and a journald socket are all legitimate stderrs. *tty:
 * whether it is a terminal. */
static bool is_stderr(const struct stat *st, bool *tty)
{
	unsigned seq = atomic_load_explicit(&err_id.seq, memory_order_acquire);
	bool same = (st->st_mode & S_IFMT) ==
			    atomic_load_explicit(&err_id.type, memory_order_acquire) &&
		    st->st_dev == atomic_load_explicit(&err_id.dev, memory_order_acquire) &&
		    st->st_ino == atomic_load_explicit(&err_id.ino, memory_order_acquire) &&
		    st->st_rdev == atomic_load_explicit(&err_id.rdev, memory_order_acquire);

	*tty = atomic_load_explicit(&err_id.tty, memory_order_acquire);
	return same && !(seq & 1) && atomic_load_explicit(&err_id.seq, memory_order_relaxed) == seq;
}

void tb_sink_stderr_replaced(void)
{
	struct stat st;
	int state;

	if (tb_fstat_raw(2, &st) < 0 || S_ISSOCK(st.st_mode) || tb_fd_sock(2) != NULL)
		return; /* a connection on fd 2 is never taken for stderr */
	stderr_known();
	err_id_store(&st);
	state = atomic_load(&err_id.state);
	if (state == ERR_NONE)
		atomic_compare_exchange_strong(&err_id.state, &state, ERR_KNOWN);
}

/*
 * A write or a splice into a pipe: EPIPE raises SIGPIPE in this thread, which would kill a
 * program that never writes to its stderr itself. Blocked around the call; a SIGPIPE the
 * call caused is consumed, one the thread had pending before is left to the program
 * (signals of one number do not queue: had it been pending, ours merged into it). It can
 * have been pending only if the thread blocked it already: otherwise it was delivered. A
 * thread of timebox's own blocks every signal for good: no mask to change, and nothing of
 * the program's can be pending for it alone (a process-wide one is taken after the thread's
 * own, so sigtimedwait takes ours).
 * from >= 0: splice n bytes from that pipe of ours, without waiting; from == PUT_NOWAIT:
 * write buf with RWF_NOWAIT (errno EOPNOTSUPP where the kernel cannot); else write buf.
 */
enum { PUT_WRITE = -1, PUT_NOWAIT = -2 };

static bool put_nosignal(int fd, int from, const char *buf, size_t n)
{
	static const struct timespec zero = { 0, 0 };
	sigset_t pipe_set, old, pending;
	bool had;
	ssize_t r;
	int err;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (tb_thread_service) {
		had = false;
	} else {
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		had = sigismember(&old, SIGPIPE) && sigpending(&pending) == 0 &&
		      sigismember(&pending, SIGPIPE);
	}
	if (from >= 0) {
		r = splice(from, NULL, fd, NULL, n, SPLICE_F_NONBLOCK);
	} else if (from == PUT_NOWAIT) {
		struct iovec v = { (void *)buf, n };

		r = tb_pwritev2(fd, &v, 1, -1, RWF_NOWAIT);
	} else {
		r = tb_real.write(fd, buf, n);
	}
	err = errno;
	if (r < 0 && err == EPIPE && !had)
		sigtimedwait(&pipe_set, NULL, &zero);
	if (!tb_thread_service)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
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
 * A pipe or FIFO on fd 2: its file description is the program's (and its children's), so
 * making it O_NONBLOCK would change the program's own writes, and a plain write blocks
 * while the pipe is full (a reader that stalled) - with the watchdog in it, no socket would
 * be cut again. Neither is a reopen of /proc/self/fd/2 per line used any more: its fd took
 * the lowest free number for a moment, the one a program thread doing close(1); open() was
 * about to be given. The line goes through a pipe of timebox's own (the relay, made at the
 * first such line, its fds internal): written there whole, then moved into fd 2 by
 * splice(SPLICE_F_NONBLOCK), which never waits for room whatever fd 2's flags are, and
 * moves the line's one buffer whole into one free slot or not at all (a reader never sees
 * half a line). One line at a time: a line that finds the relay in use is dropped.
 * The relay is the fallback. A spliced buffer takes a slot of its own and cannot be merged
 * into, so 16 lines (a pipe's slots) that the reader has not yet taken filled the pipe:
 * wget's 18 quick rejects lost 2 or 3 to a reader reading 2 KB, and two threads' lines at
 * once lost one to the relay's flag. First comes a write with RWF_NOWAIT (Linux 5.8 and
 * later honour it on pipes): it merges as the program's own writes do, fails with EAGAIN
 * instead of waiting, and a line of at most PIPE_BUF bytes goes whole or not at all
 * (regress/log_pipe_burst).
 */
static atomic_flag relay_busy = ATOMIC_FLAG_INIT;
static int relay[2] = { -1, -1 };
static bool relay_tried;

static bool relay_ready(void)
{
	int p[2];

	if (relay_tried)
		return relay[0] >= 0;
	relay_tried = true;
	if (tb_pipe2_raw(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return false;
	p[0] = tb_fd_move_internal(p[0]);
	p[1] = tb_fd_move_internal(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		for (int i = 0; i < 2; i++)
			if (p[i] >= 0) {
				tb_fd_unmark_internal(p[i]);
				tb_real.close(p[i]);
			}
		return false;
	}
	relay[0] = p[0];
	relay[1] = p[1];
	return true;
}

static bool pipe_write(const char *buf, size_t n)
{
	struct pollfd p = { 2, POLLOUT, 0 };
	char scrap[256];
	bool ok = false;

	errno = 0;
	if (put_nosignal(2, PUT_NOWAIT, buf, n))
		return true;
	if (errno != EOPNOTSUPP && errno != EINVAL && errno != ENOSYS)
		return false; /* EAGAIN: full for real (a reader that stalled), or EPIPE */
	if (atomic_flag_test_and_set_explicit(&relay_busy, memory_order_acquire))
		return false;
	/* A vfork child shares our memory, not our fds: the relay's numbers are not its own. */
	if (tb_foreign_process() || !relay_ready()) {
		/* No relay (no fd free above 2): write only when the pipe has room. A writer
		 * racing us between the poll and the write could still make that write wait. */
		ok = tb_real.poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) &&
		     put_nosignal(2, -1, buf, n);
		goto out;
	}
	if (tb_real.write(relay[1], buf, n) == (ssize_t)n)
		ok = put_nosignal(2, relay[0], buf, n);
	while (!ok && tb_real.read(relay[0], scrap, sizeof(scrap)) > 0)
		; /* what did not go out must not precede the next line */
out:
	atomic_flag_clear_explicit(&relay_busy, memory_order_release);
	return ok;
}

/*
 * fd 2 now, if it is the program's stderr (is_stderr). Whatever it is, a socket the library
 * governs never receives a byte from us. A line not for stderr is dropped and counted; it
 * is said nowhere else: stderr is the one place the program gave for such text, and a line
 * anywhere else is the defect itself (docs/observability.md).
 */
static bool stderr_write(const char *buf, size_t n)
{
	struct pollfd p = { 2, POLLOUT, 0 };
	struct stat st;
	bool tty;

	if (!stderr_known() || tb_fstat_raw(2, &st) < 0 || !is_stderr(&st, &tty))
		return false;
	if (tb_fd_sock(2) != NULL)
		return false;
	switch (st.st_mode & S_IFMT) {
	case S_IFSOCK: /* under systemd, stderr is a stream socket to the journal */
		return send_nowait(2, buf, n);
	case S_IFIFO:
		return pipe_write(buf, n);
	default:
		/* A terminal stopped by ^S or a pty whose reader stalled blocks its writers:
		 * write only when it has room (a tty is not reopened: a hung-up one's number
		 * may belong to someone else's session by now). */
		if (tty && (tb_real.poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT)))
			return false;
		return tb_real.write(2, buf, n) == (ssize_t)n;
	}
}

/* syslog(3) takes a lock and blocks when the daemon's queue is full: a datagram of our own,
 * sent without waiting, to /dev/log each time (no connection to lose when the daemon
 * restarts). RFC 3164 without a timestamp: the daemon stamps what it receives. */
static const struct sockaddr_un dev_log = { AF_UNIX, "/dev/log" };

static bool syslog_write(int fd, const char *line, size_t n)
{
	static const char prefix[] = "timebox: ";
	char msg[1200];
	size_t k = 0, head = strlen(prefix);
	ssize_t r;
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

	fd = tb_open_raw(AT_FDCWD, path,
			 O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
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
	return fd;
}

/* Appends v to line (at *k, within len), quoted the logfmt way: " and \ escaped, a control
 * byte as '?' (a path may hold a newline; it must not start a forged line). */
static void put_escaped(char *line, size_t len, size_t *k, const char *v)
{
	for (; *v && *k + 3 < len; v++) {
		unsigned char c = (unsigned char)*v;

		if (c == '"' || c == '\\')
			line[(*k)++] = '\\';
		line[(*k)++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
}

/* Says on stderr, once, that the sink checked at start-up cannot be opened now. */
static void say_sink_lost(const char *why)
{
	char line[2 * TB_LOG_PATH_MAX + 320];
	size_t k = 0;
	const char *parts[] = { "timebox: event=config_error name=TIMEBOX_LOG value=\"",
				sink_target == TB_LOG_SYSLOG ? "syslog" : sink_path, "\" error=\"",
				why, "\" effect=\"logging to stderr\"\n" };

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		if (i % 2 == 1) {
			put_escaped(line, sizeof(line) - 40, &k, parts[i]);
			continue;
		}
		for (const char *p = parts[i]; *p && k < sizeof(line) - 1; p++)
			line[k++] = *p;
	}
	stderr_write(line, k);
}

/*
 * The sink's fd, opened by the first line that needs it (its fd moved high at once and
 * marked internal). SINK_OPENING while another thread (or the code this signal handler
 * interrupted) opens it: that line is dropped. SINK_FAILED: lines go to stderr.
 */
static int sink_get(void)
{
	int fd = atomic_load_explicit(&sink_fd, memory_order_acquire), expect = SINK_CLOSED;
	const char *why = "no fd above 2 is free under the fd limit";

	if (fd != SINK_CLOSED ||
	    !atomic_compare_exchange_strong(&sink_fd, &expect, SINK_OPENING))
		return fd != SINK_CLOSED ? fd : expect;
	if (sink_target == TB_LOG_FILE) {
		fd = open_file(sink_path, &why);
	} else {
		fd = tb_real.socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			why = strerror(errno);
	}
	if (fd >= 0)
		fd = tb_fd_move_internal(fd);
	atomic_store_explicit(&sink_fd, fd >= 0 ? fd : SINK_FAILED, memory_order_release);
	if (fd < 0)
		say_sink_lost(why);
	return fd >= 0 ? fd : SINK_FAILED;
}

bool tb_sink_write(int target, const char *line, size_t n)
{
	int saved = errno, fd;
	bool ok = false;

	switch (target) {
	case TB_LOG_FILE:
	case TB_LOG_SYSLOG:
		fd = sink_get();
		if (fd == SINK_FAILED)
			ok = stderr_write(line, n);
		else if (fd < 0)
			ok = false; /* being opened right now */
		else if (target == TB_LOG_SYSLOG)
			ok = syslog_write(fd, line, n);
		else /* a regular file (checked at open): it does not block the way a pipe does */
			ok = tb_real.write(fd, line, n) == (ssize_t)n;
		break;
	case TB_LOG_STDERR:
		ok = stderr_write(line, n);
		break;
	default:
		ok = true; /* off: nothing is lost that was asked for */
		break;
	}
	errno = saved;
	return ok;
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
		/* Opened (created) and checked now, so that a bad path is said at start-up;
		 * closed again at once: the file is kept open only from the first line on. */
		fd = open_file(s->log_path, why);
		if (fd < 0)
			return TB_LOG_STDERR;
		tb_real.close(fd);
		snprintf(sink_path, sizeof(sink_path), "%s", s->log_path);
		break;
	case TB_LOG_SYSLOG:
		if (stat(dev_log.sun_path, &st) < 0 || !S_ISSOCK(st.st_mode)) {
			*why = "no syslog daemon: /dev/log is not a socket";
			return TB_LOG_STDERR;
		}
		break;
	default:
		return s->log_target;
	}
	sink_target = s->log_target;
	return s->log_target;
}

void tb_sink_fd_moved(int from, int to)
{
	int expect = from;

	if (from >= 0 &&
	    atomic_compare_exchange_strong(&sink_fd, &expect, to >= 0 ? to : SINK_FAILED)) {
		tb_fd_unmark_internal(from);
		if (to >= 0)
			tb_fd_mark_internal(to);
	}
}

void tb_sink_fork_child(void)
{
	/* A line under way in a thread that does not exist here left the flag set. The relay
	 * is shared with the parent: lines of both would mix in it, so the child makes its own
	 * (the inherited copies are its own fds, closed here). */
	atomic_flag_clear(&relay_busy);
	for (int i = 0; i < 2; i++)
		if (relay[i] >= 0) {
			tb_fd_unmark_internal(relay[i]);
			tb_real.close(relay[i]);
			relay[i] = -1;
		}
	relay_tried = false;
}
