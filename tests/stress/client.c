/* client.c - the stress driver's program under the library: worker threads calling every
 * downstream kind with every call family, while others fork, spawn, dup, close and signal.
 * Each call becomes a struct crec; the parent (main.c) judges them against the server. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

struct cfg cfg;
struct counters cnt;
static atomic_uint_fast64_t next_id = 1;
atomic_int stopping;
static int rec_fd = -1;
static __thread struct worker *self;

void set_self(struct worker *w)
{
	self = w;
	w->tid = (pid_t)syscall(SYS_gettid);
	register_own_thread();
}
struct worker *workers;
int nworkers;

static const char *const fam_names[NFAM] = { "read", "recv", "readv", "recvmsg", "poll",
					     "select", "ppoll", "waitall", "peek" };

void watch(struct worker *w, const char *what, int64_t bound_ms)
{
	w->what = what;
	atomic_store(&w->bound_ns, bound_ms * 1000000);
	atomic_store(&w->busy_since, now_ns());
}

void unwatch(struct worker *w)
{
	atomic_store(&w->busy_since, 0);
}

/* A handler that writes on its own (governed) socket, as a program's logger might. */
static void on_signal(int sig)
{
	int e = errno;
	struct worker *w = self;

	if (w == NULL)
		return;
	if (sig == SIGUSR2)
		atomic_fetch_add(&w->norestart, 1);
	if (w->side_fd >= 0) {
		ssize_t r = send(w->side_fd, "sig!", 4, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r > 0) {
			w->side_sent += (uint64_t)r;
			w->side_last = (uint64_t)now_ns();
		}
		else
			atomic_fetch_add(&cnt.side_err[errno == EAGAIN ? 0 : errno == ETIMEDOUT ? 1 : 2], 1);
	}
	errno = e;
}

/* An EINTR is native only when a handler without SA_RESTART ran since `mark`. */
static void judge_eintr(struct worker *w, unsigned mark, const char *call)
{
	if (atomic_load(&w->norestart) != mark) {
		atomic_fetch_add(&cnt.eintr_ok, 1);
		return;
	}
	if (atomic_fetch_add(&cnt.eintr_spurious, 1) < 5)
		fprintf(stderr, "stress: EINTR from %s with only SA_RESTART handlers run\n", call);
}

static int wait_fd(int fd, bool wr, int fam)
{
	short ev = wr ? POLLOUT : POLLIN;
	struct pollfd p = { .fd = fd, .events = ev };

	if (fam == F_SELECT) {
		fd_set s;

		FD_ZERO(&s);
		FD_SET(fd, &s);
		return select(fd + 1, wr ? NULL : &s, wr ? &s : NULL, NULL, NULL);
	}
	if (fam == F_PPOLL)
		return ppoll(&p, 1, NULL, NULL);
	return poll(&p, 1, -1);
}

/* One transfer of the family `fam`: blocking families make one call; the event-loop
 * families wait for readiness first. Returns what the call returned (errno set). */
static ssize_t io_once(struct worker *w, int fd, void *b, size_t n, int fam, bool wr)
{
	struct iovec v = { b, n };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	unsigned char peek[16384];
	ssize_t r, r2;

	switch (fam) {
	case F_RW: return wr ? write(fd, b, n) : read(fd, b, n);
	case F_SR: return wr ? send(fd, b, n, MSG_NOSIGNAL) : recv(fd, b, n, 0);
	case F_V: return wr ? writev(fd, &v, 1) : readv(fd, &v, 1);
	case F_MSG: return wr ? sendmsg(fd, &m, MSG_NOSIGNAL) : recvmsg(fd, &m, 0);
	case F_WAITALL: return wr ? send(fd, b, n, MSG_NOSIGNAL) : recv(fd, b, n, MSG_WAITALL);
	case F_PEEK:
		if (wr)
			return write(fd, b, n);
		r = recv(fd, peek, n < sizeof(peek) ? n : sizeof(peek), MSG_PEEK);
		if (r <= 0)
			return r;
		r2 = read(fd, b, (size_t)r); /* what was peeked is queued: it all comes */
		if (r2 != r || memcmp(peek, b, (size_t)r) != 0) {
			atomic_fetch_add(&cnt.corrupt, 1);
			fprintf(stderr, "stress: MSG_PEEK saw %zd bytes, read gave %zd (or others)\n",
				r, r2);
		}
		return r2;
	}
	for (;;) { /* F_POLL, F_SELECT, F_PPOLL: non-blocking socket */
		unsigned mark = atomic_load(&w->norestart);

		r = wr ? send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, b, n, MSG_DONTWAIT);
		if (r >= 0 || errno != EAGAIN)
			return r;
		if (wait_fd(fd, wr, fam) < 0 && errno != EINTR)
			return -1;
		(void)mark; /* poll and select never restart: EINTR is always native there */
	}
}

/* Transfers all n bytes, retrying EINTR as programs do (and judging it). 0 or an errno;
 * EOF before the end is ESHUTDOWN (the library's cut makes a blocked read see EOF only if
 * it failed to report the cut). */
static int io_all(struct worker *w, int fd, void *b, size_t n, int fam, bool wr,
		  uint64_t seed, uint64_t off)
{
	unsigned char want[16384];

	while (n > 0) {
		unsigned mark = atomic_load(&w->norestart);
		size_t k = n < sizeof(want) ? n : sizeof(want);
		ssize_t r = io_once(w, fd, b, wr ? n : k, fam, wr);

		if (r < 0 && errno == EINTR) {
			judge_eintr(w, mark, fam_names[fam]);
			continue;
		}
		if (r < 0)
			return errno;
		if (r == 0)
			return ESHUTDOWN;
		if (!wr && seed != 0) {
			fill(seed, off, want, (size_t)r);
			if (memcmp(want, b, (size_t)r) != 0) {
				if (atomic_fetch_add(&cnt.corrupt, 1) < 5)
					fprintf(stderr, "stress: corrupt bytes at offset %llu\n",
						(unsigned long long)off);
				return EILSEQ;
			}
			atomic_fetch_add(&cnt.bytes, (uint64_t)r);
		}
		off += (uint64_t)r;
		n -= (size_t)r;
		if (wr)
			b = (char *)b + r;
	}
	return 0;
}

static int do_connect(struct worker *w, int fd, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	unsigned mark = atomic_load(&w->norestart);
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0;

	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return 0;
	if (errno != EINTR)
		return errno;
	judge_eintr(w, mark, "connect");
	while (poll(&p, 1, -1) < 0) /* the handshake goes on: wait for it as programs do */
		;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err;
}

/* The request for `kind`, with limits drawn around the configured ones; says whether the
 * downstream answers within every limit (a cut there is a healthy call cut). */
static bool make_req(struct worker *w, int kind, struct req *q)
{
	uint64_t *s = &w->rng;
	uint32_t rd = cfg.read_ms, dl = cfg.deadline_ms;

	memset(q, 0, sizeof(*q));
	q->magic = REQ_MAGIC;
	q->kind = (uint32_t)kind;
	q->seed = splitmix(s) | 1;
	q->n = 1;
	switch (kind) {
	case K_NORMAL:
		q->delay_ms = rnd(s, 0, rd / 4);
		q->resp_len = rnd(s, 0, 65536);
		q->upload_len = rnd(s, 0, 16384);
		return true;
	case K_DRIP:
		q->n = rnd(s, 2, 12);
		q->gap_ms = rnd(s, 1, rd / 4);
		if (rnd(s, 0, 3) == 0) { /* outlives the deadline */
			q->flags = F_LONG;
			q->gap_ms = rnd(s, rd / 4, rd / 2);
			q->n = 2 * dl / q->gap_ms + 2;
		} else if (q->n * q->gap_ms > dl / 4) {
			q->n = dl / 4 / q->gap_ms + 1;
		}
		q->resp_len = q->n * rnd(s, 1, 2048);
		return !(q->flags & F_LONG);
	case K_STALL:
		return false;
	case K_RESET:
		q->delay_ms = rnd(s, 0, rd / 4);
		q->n = rnd(s, 2, 8);
		q->resp_len = q->n * 4096;
		return false;
	case K_SINK:
		q->chunk = rnd(s, 4096, 16384);
		/* What is queued when the last send returns (up to ~64 KiB) drains within a
		 * third of the first_byte limit: the answer comes in time. */
		q->gap_ms = rnd(s, 1, 1 + rd * q->chunk / (3 * 65536));
		q->upload_len = q->chunk * rnd(s, 4, 64);
		if (q->upload_len / q->chunk * q->gap_ms > dl / 4)
			q->upload_len = q->chunk * (dl / 4 / q->gap_ms);
		q->resp_len = rnd(s, 0, 4096);
		return true;
	case K_STREAM:
		q->n = rnd(s, 4, 64);
		q->gap_ms = rnd(s, 0, 2);
		q->resp_len = q->n * rnd(s, 4096, 32768);
		return true;
	}
	return false; /* K_BLACKHOLE */
}

static void put_rec(struct crec *r)
{
	if (write(rec_fd, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		atomic_fetch_add(&cnt.rec_lost, 1);
}

/* A second governed connection that dup2 then closes: recorded, never used. */
static int open_victim(struct worker *w, struct crec *v)
{
	struct req q;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	make_req(w, K_NORMAL, &q);
	q.resp_len = 0;
	memset(v, 0, sizeof(*v));
	v->conn_id = q.conn_id = atomic_fetch_add(&next_id, 1);
	v->kind = K_NORMAL;
	v->how_closed = CL_DUP2;
	v->t_start = now_ns();
	if (fd < 0 || do_connect(w, fd, cfg.ports[K_NORMAL]) != 0 ||
	    send(fd, &q, sizeof(q), MSG_NOSIGNAL) != sizeof(q)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The one read of an fd another thread takes away meanwhile (and whose number others
 * reuse at once): by name, so that tests/stress/tsan.supp can say the race is intended. */
__attribute__((noinline)) static ssize_t waited_read(int fd, unsigned char *buf)
{
	ssize_t r = read(fd, buf, 1);

	atomic_signal_fence(memory_order_seq_cst); /* no tail call: the frame stays named */
	return r;
}

void call(struct worker *w, int kind, int fam, int mode, int want_fd)
{
	struct crec rec = { 0 }, victim;
	struct req q;
	uint64_t h = FNV0, got_h = 0;
	unsigned char *buf = NULL;
	int fd, vfd = -1, err = 0;
	bool healthy = make_req(w, kind, &q);

	if (fam == F_SELECT && want_fd >= FD_SETSIZE - 64)
		fam = F_POLL;
	if (kind == K_STREAM && rnd(&w->rng, 0, 1))
		fam = F_WAITALL; /* a steady stream read whole with MSG_WAITALL */
	rec.conn_id = q.conn_id = atomic_fetch_add(&next_id, 1);
	rec.kind = (uint8_t)kind;
	rec.family = (uint8_t)fam;
	rec.healthy = healthy;
	rec.flags = (uint8_t)q.flags;
	rec.tainted = w->tainted;
	rec.chain_start = w->chain_start;
	rec.t_start = now_ns();
	rec.tid = w->tid;
	rec.mode = mode;
	rec.side_last = (int64_t)w->side_last;
	rec.in_window = w->last_cut[kind] != 0 &&
			rec.t_start < w->last_cut[kind] + 2 * (int64_t)cfg.deadline_ms * 1000000;
	if (mode == M_WAITED) {
		q.end_ms = rnd(&w->rng, cfg.read_ms / 2, 2 * cfg.read_ms);
		rec.how_closed = CL_OTHER;
	}
	watch(w, kind == K_BLACKHOLE ? "connect" : fam_names[fam],
	      cfg.deadline_ms + cfg.slack_ms + q.end_ms);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = errno;
		goto done;
	}
	rec.fd = fd;
	if (want_fd >= 0 && fd == want_fd)
		atomic_fetch_add(&cnt.fd_reuse, 1);
	if (kind == K_SINK) {
		int sz = 8192;

		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	}
	if ((err = do_connect(w, fd, cfg.ports[kind])) != 0)
		goto done;
	if (mode == M_DUP) { /* carry on through a duplicate, the original closed */
		int d = rnd(&w->rng, 0, 1) ? dup(fd) : fcntl(fd, F_DUPFD_CLOEXEC, 0);

		if (d < 0) {
			err = errno;
			goto done;
		}
		close(fd);
		fd = d;
		atomic_fetch_add(&cnt.dups, 1);
	} else if (mode == M_DUP2 && (vfd = open_victim(w, &victim)) >= 0) {
		victim.t_close = victim.t_end = now_ns();
		if (dup2(fd, vfd) != vfd) { /* over a live governed connection */
			err = errno;
			close(vfd);
			goto done;
		}
		put_rec(&victim);
		close(fd);
		fd = vfd;
		atomic_fetch_add(&cnt.dups, 1);
	} else if (mode == M_REUSE_DUP2 && want_fd >= 0) { /* over the number another waits on */
		if (dup2(fd, want_fd) != want_fd) {
			err = errno;
			goto done;
		}
		close(fd);
		fd = want_fd;
		atomic_fetch_add(&cnt.fd_reuse, 1);
	}
	if (fam == F_POLL || fam == F_SELECT || fam == F_PPOLL)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	rec.fd = fd;
	rec.stage = ST_SEND;
	buf = malloc(q.upload_len + q.resp_len + 16);
	fill(q.seed ^ 0x55, 0, buf, q.upload_len);
	h = fnv(h, buf, q.upload_len);
	if ((err = io_all(w, fd, &q, sizeof(q), fam, true, 0, 0)) != 0 ||
	    (err = io_all(w, fd, buf, q.upload_len, fam, true, 0, 0)) != 0)
		goto done;
	if (kind == K_STALL && mode != M_WAITED && rnd(&w->rng, 0, 1)) {
		atomic_fetch_add(&cnt.eagain_checks, 1); /* nothing queued: EAGAIN, at once */
		if (recv(fd, buf, 1, MSG_DONTWAIT) != -1 || errno != EAGAIN)
			atomic_fetch_add(&cnt.eagain_bad, 1);
	}
	rec.stage = ST_RECV;
	rec.t_sent = now_ns();
	if (mode == M_WAITED) { /* one read, signals blocked: the fd is not ours afterwards */
		ssize_t r;

		w->waited_num = fd;
		atomic_store(&w->wait_state, WS_READING);
		r = waited_read(fd, buf);
		err = r < 0 ? errno : 0;
		rec.t_end = now_ns();
		atomic_store(&w->wait_state, WS_RETURNED);
		fd = -1;
		goto done;
	}
	if ((kind == K_NORMAL || kind == K_SINK) &&
	    (err = io_all(w, fd, &got_h, sizeof(got_h), fam, false, 0, 0)) == 0 && got_h != h) {
		atomic_fetch_add(&cnt.corrupt, 1);
		fprintf(stderr, "stress: upload of %u bytes arrived altered\n", q.upload_len);
		err = EILSEQ;
	}
	if (err == 0)
		err = io_all(w, fd, buf, kind == K_STALL ? 1 : q.resp_len, fam, false,
			     kind == K_STALL ? 0 : q.seed, 0);
	rec.bytes = q.resp_len + q.upload_len;
	if (err == 0 && (kind == K_STALL || kind == K_BLACKHOLE || kind == K_RESET))
		err = ENOTRECOVERABLE; /* an answer where none can be */
	if (err == 0 && rnd(&w->rng, 0, 3) == 0) {
		atomic_fetch_add(&cnt.eagain_checks, 1);
		if (recv(fd, buf, 1, MSG_DONTWAIT) != -1 || errno != EAGAIN)
			atomic_fetch_add(&cnt.eagain_bad, 1);
	}
done:
	if (mode == M_WAITED && atomic_load(&w->wait_state) == WS_PENDING)
		atomic_store(&w->wait_state, WS_NONE); /* no read: the fd stays ours */
	if (mode == M_REUSE_DUP2 && fd != want_fd)
		close(want_fd); /* no dup2 over it happened: take it away all the same */
	if (rec.t_end == 0)
		rec.t_end = now_ns();
	rec.err = err;
	if (fd >= 0) { /* the FIN leaves inside close: the time is taken before it */
		rec.t_close = now_ns();
		close(fd);
	}
	unwatch(w);
	free(buf);
	if (err == ETIMEDOUT)
		w->last_cut[kind] = rec.t_end;
	if (err == 0) {
		w->tainted = 0;
	} else if (!w->tainted) {
		w->tainted = 1;
		w->chain_start = rec.t_start;
	}
	atomic_fetch_add(&cnt.calls[kind], 1);
	put_rec(&rec);
}

uint64_t next_conn_id(void)
{
	return atomic_fetch_add(&next_id, 1);
}

/*
 * One NORMAL exchange, for children (forked or exec'd): recorded as connection conn_id in
 * the run's record file, so that the parent judges it as it judges its own calls (a cut
 * that ran past its limit on a loaded machine is not a failure; anything else unexplained
 * is). Its socket is closed on every path: an fd left open at exit keeps a gate slot
 * leased in the exit summary. Returns 0 once the record is written, 4 when it cannot be.
 */
int child_exchange(int port, uint64_t seed, uint64_t conn_id)
{
	struct worker w = { .rng = seed, .side_fd = -1 };
	struct crec rec = { 0 };
	struct req q;
	unsigned char buf[4096];
	uint64_t h = 0;
	int fd = -1, err;

	if (cfg.out_rec[0] == '\0' && cfg_from_env() < 0) /* exec'd: the run's settings */
		return 4;
	if (rec_fd < 0) /* a forked child writes through its parent's O_APPEND fd */
		rec_fd = open(cfg.out_rec, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (rec_fd < 0)
		return 4;
	w.tid = (pid_t)syscall(SYS_gettid);
	rec.healthy = make_req(&w, K_NORMAL, &q);
	q.upload_len = 0;
	q.resp_len = sizeof(buf);
	q.conn_id = rec.conn_id = conn_id;
	rec.kind = K_NORMAL;
	rec.family = F_SR;
	rec.mode = M_CHILD;
	rec.tid = w.tid;
	rec.stage = ST_CONNECT;
	rec.t_start = now_ns();
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = errno;
		goto done;
	}
	rec.fd = fd;
	if ((err = do_connect(&w, fd, port)) != 0)
		goto done;
	rec.stage = ST_SEND;
	if ((err = io_all(&w, fd, &q, sizeof(q), F_SR, true, 0, 0)) != 0)
		goto done;
	rec.stage = ST_RECV;
	rec.t_sent = now_ns();
	err = io_all(&w, fd, &h, sizeof(h), F_RW, false, 0, 0);
	if (err == 0 && h != FNV0) { /* the checksum of an empty upload */
		atomic_fetch_add(&cnt.corrupt, 1);
		err = EILSEQ;
	}
	if (err == 0)
		err = io_all(&w, fd, buf, q.resp_len, F_RW, false, q.seed, 0);
	rec.bytes = q.resp_len;
done:
	rec.t_end = now_ns();
	rec.err = err;
	if (fd >= 0) {
		rec.t_close = now_ns();
		close(fd);
	}
	return write(rec_fd, &rec, sizeof(rec)) == (ssize_t)sizeof(rec) ? 0 : 4;
}

/* A governed connection that got its answer and is left open (a pool's idle connection);
 * -1 on failure. */
int open_resting(struct worker *w)
{
	struct req q;
	unsigned char buf[256];
	uint64_t h;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	make_req(w, K_NORMAL, &q);
	q.upload_len = 0;
	q.delay_ms = 0;
	q.resp_len = sizeof(buf);
	q.conn_id = atomic_fetch_add(&next_id, 1);
	if (fd < 0 || do_connect(w, fd, cfg.ports[K_NORMAL]) != 0 ||
	    io_all(w, fd, &q, sizeof(q), F_SR, true, 0, 0) != 0 ||
	    io_all(w, fd, &h, sizeof(h), F_RW, false, 0, 0) != 0 ||
	    io_all(w, fd, buf, sizeof(buf), F_RW, false, q.seed, 0) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static sem_t side_ready;

/*
 * The worker's side connection, made before its calls begin. Its failures are classified
 * as the judge classifies a call's: an ETIMEDOUT that ran past connect_ms is a loaded
 * machine, not a defect, and is retried (at once: a phase cut leaves the thread's budget
 * open, so the retries share its deadline as a program's would); one that fails fast right
 * after such a cut is the retry window (designed), waited out before the next attempt.
 * Anything else fails the setup, with its errno. True when connected.
 */
static bool side_connect(struct worker *w, const struct req *q)
{
	int64_t limit = (int64_t)cfg.connect_ms * 1000000;
	int err = 0;

	for (int attempt = 0; attempt < 4; attempt++) {
		int64_t t0 = now_ns(), took;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		err = fd < 0 ? errno : do_connect(w, fd, cfg.ports[K_SIDE]);
		if (err == 0 && send(fd, q, sizeof(*q), MSG_NOSIGNAL) != sizeof(*q))
			err = errno;
		if (err == 0) {
			w->side_fd = fd;
			return true;
		}
		if (fd >= 0)
			close(fd);
		took = now_ns() - t0;
		if (err != ETIMEDOUT || (took < limit && attempt == 0))
			break; /* not a cut a loaded machine explains */
		atomic_fetch_add(&cnt.side_retries, 1);
		if (took < limit) { /* the retry window of the attempt before: wait it out */
			struct timespec ts = { 0, 0 };
			int64_t wait = 2 * (int64_t)cfg.deadline_ms * 1000000;

			ts.tv_sec = (time_t)(wait / 1000000000);
			ts.tv_nsec = (long)(wait % 1000000000);
			while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
				;
		}
	}
	fprintf(stderr, "stress: worker %d: side connection failed: %s\n", (int)w->tid,
		strerror(err));
	return false;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct req q = { .magic = REQ_MAGIC, .kind = K_SIDE };
	static const int weight[NKIND] = { 30, 14, 8, 6, 12, 10, 0, 3 };

	set_self(w);
	w->side_id = q.conn_id = atomic_fetch_add(&next_id, 1);
	if (!side_connect(w, &q))
		atomic_fetch_add(&cnt.setup_fail, 1);
	sem_post(&side_ready);
	while (!atomic_load(&stopping)) {
		uint32_t op = rnd(&w->rng, 0, 99), pick = rnd(&w->rng, 0, 82);
		int kind = 0, fam = (int)rnd(&w->rng, 0, F_PPOLL);

		while (pick >= (uint32_t)weight[kind])
			pick -= (uint32_t)weight[kind++];
		if (op < 5 && closer_push(w)) {
			sigset_t all, old;

			sigemptyset(&all);
			sigaddset(&all, SIGUSR1);
			sigaddset(&all, SIGUSR2);
			pthread_sigmask(SIG_BLOCK, &all, &old);
			call(w, K_STALL, F_RW, M_WAITED, -1);
			pthread_sigmask(SIG_SETMASK, &old, NULL);
		} else {
			call(w, kind, fam, op < 10 ? M_DUP : op < 14 ? M_DUP2 : M_PLAIN, -1);
		}
	}
	int fd = w->side_fd;

	w->side_fd = -1; /* a handler from now on sends nothing */
	atomic_signal_fence(memory_order_seq_cst);
	close(fd);
	return NULL;
}

int client_main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	pthread_t sig_th, hang_th, sp_th[2];
	struct worker spw[2] = { 0 };
	int nsp = 2;

	(void)argc;
	(void)argv;
	if (cfg_from_env() < 0)
		return 2;
	rec_fd = open(cfg.out_rec, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (rec_fd < 0)
		return 2;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	sigaddset(&sa.sa_mask, SIGUSR2);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_flags = 0;
	sigaction(SIGUSR2, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	note_tasks_before();
	warm_up(); /* the library's own fds and thread exist from here on */
	cnt.fds_before = count_fds();
	nworkers = cfg.threads;
	workers = calloc((size_t)nworkers, sizeof(*workers));
	pthread_create(&hang_th, NULL, hang_watchdog, spw);
	closers_start();
	/* One side connection at a time: 200 at once overflow an accept queue the size of an
	 * older kernel's somaxconn (128), and the SYNs dropped wait a second for their retry. */
	sem_init(&side_ready, 0, 0);
	for (int i = 0; i < nworkers; i++) {
		workers[i].rng = cfg.seed * 1000003 + (uint64_t)i;
		workers[i].side_fd = -1;
		pthread_create(&workers[i].th, NULL, worker_main, &workers[i]);
		while (sem_wait(&side_ready) != 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < nsp; i++) {
		spw[i].rng = cfg.seed ^ (0xabcdefull + (uint64_t)i);
		pthread_create(&sp_th[i], NULL, spawner, &spw[i]);
	}
	pthread_create(&sig_th, NULL, signaller, NULL);
	sleep((unsigned)cfg.secs);
	atomic_store(&stopping, 1);
	pthread_join(sig_th, NULL);
	for (int i = 0; i < nsp; i++)
		pthread_join(sp_th[i], NULL);
	for (int i = 0; i < nworkers; i++)
		pthread_join(workers[i].th, NULL);
	closers_stop();
	for (int i = 0; i < nworkers; i++) {
		cnt.side_sent += workers[i].side_sent;
		cnt.threads++;
	}
	idle_window();
	cnt.fds_after = count_fds();
	stop_hang_watchdog(hang_th);
	int rc = write_summary(rec_fd);

	close(rec_fd);
	return rc;
}
