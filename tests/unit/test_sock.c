/* test_sock.c - the runtime core of an expiry against a fake tb_real and a simulated clock:
 * when a due wait is cut, when it is not (bytes arriving unseen, a send still draining),
 * which fd it is cut through, and that the watchdog never loops on a socket it cannot act on.
 * Links sock.o, sock_expire.o and fdtable.o; includes watchdog.c to reach its steps. The
 * sockets are real socketpairs (identity is checked with fstat); their TCP_INFO is faked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdtable.h"
#include "gates.h"
#include "init.h"
#include "log.h"
#include "real.h"
#include "protect.h"
#include "sock.h"
#include "unit.h"

/* The watchdog's steps (evaluate, next_look, side_next) are static: test them in place.
 * Its thread is never started (`started` is set in setup). */
#include "../../shim/watchdog.c"

/* ---- fakes: tb_real, the log, the gates, the thread id ---------------------------------- */

static struct {
	bool tcp;                 /* getsockopt(TCP_INFO) succeeds */
	uint32_t last_data_recv;  /* ms */
	uint64_t bytes_acked;
	uint32_t last_ack_recv;   /* ms */
	int outq;                 /* SIOCOUTQ when > 0; otherwise the real ioctl answers */
	uint8_t backoff;          /* zero-window probes since bytes last moved */
	uint8_t retransmits;
	int logged;
	int64_t logged_elapsed;
	bool shut_when_logged;    /* the socket was already cut when its line was written */
	int peer;                 /* the other end of the socket under test */
} fake;

static int fake_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct tcp_info ti;

	(void)fd;
	if (!fake.tcp || level != IPPROTO_TCP || name != TCP_INFO) {
		errno = EOPNOTSUPP;
		return -1;
	}
	memset(&ti, 0, sizeof(ti));
	ti.tcpi_last_data_recv = fake.last_data_recv;
	ti.tcpi_bytes_acked = fake.bytes_acked;
	ti.tcpi_last_ack_recv = fake.last_ack_recv;
	ti.tcpi_backoff = fake.backoff;
	ti.tcpi_retransmits = fake.retransmits;
	if (*len > sizeof(ti))
		*len = sizeof(ti);
	memcpy(val, &ti, *len);
	return 0;
}

static int fake_ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (req == SIOCOUTQ && fake.outq > 0) {
		*(int *)arg = fake.outq;
		return 0;
	}
	return ioctl(fd, req, arg);
}

struct tb_real tb_real;

void tb_log_timeout_with(enum tb_phase phase, const struct tb_dest *d, int fd,
			 int64_t elapsed_ns, int64_t limit_ns, int tid,
			 const struct tb_log_timers *t)
{
	char c;

	(void)phase, (void)d, (void)fd, (void)limit_ns, (void)tid, (void)t;
	fake.logged++;
	fake.logged_elapsed = elapsed_ns;
	/* A shut-down socket reads EOF at the peer at once. */
	fake.shut_when_logged = recv(fake.peer, &c, 1, MSG_DONTWAIT) == 0;
}

void tb_log_timeout_budget(enum tb_phase phase, const struct tb_dest *d, int fd,
			   int64_t elapsed_ns, int64_t limit_ns, int tid,
			   const struct tb_log_timers *t, const struct tb_req_tag *tag)
{
	(void)tag;
	tb_log_timeout_with(phase, d, fd, elapsed_ns, limit_ns, tid, t);
}

void tb_log_error(const char *body)
{
	(void)body;
}

/* The breaker's side of a cut (shim/protect.c): no socket of this suite is protected. */
void tb_prot_cut(struct tb_sock *s, struct tb_prot_note *n)
{
	(void)s;
	n->entry = NULL;
}

void tb_prot_say(const struct tb_prot_note *n)
{
	(void)n;
}

bool tb_stats_cut(struct tb_sock *s, enum tb_phase phase, struct tb_log_timers *t)
{
	(void)s, (void)phase, (void)t;
	return false;
}

void tb_gates_release(struct tb_gate *g, int slot_fd)
{
	(void)g, (void)slot_fd;
}

void tb_gates_in_hand(const struct tb_gate *g, int delta)
{
	(void)g, (void)delta;
}

void tb_gates_fork_held(struct tb_gate *g, int slot_fd)
{
	(void)g, (void)slot_fd;
}

__thread int tb_thread_tid = 4242; /* tb_tid() reads it (thread.h) */
__thread bool tb_thread_service; /* service.c's trampoline sets it */

void tb_thread_own_started(void) /* service.c counts its threads (thread.h) */
{
}

void tb_thread_own_ended(void)
{
}

int tb_tid_slow(void)
{
	return tb_thread_tid;
}

/* ---- fixtures ------------------------------------------------------------------------- */

static struct tb_settings set;

struct pair {
	struct tb_sock *s;
	int fd, peer;
};

static uint64_t ino_of(int fd)
{
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	return (uint64_t)st.st_ino;
}

/* A governed socket, OPEN, tracked at its fd, with its peer. */
static struct pair open_pair(void)
{
	struct tb_dest d = dest_v4("127.0.0.1", 80);
	struct pair p;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p.fd = sv[0];
	p.peer = sv[1];
	p.s = tb_sock_new(p.fd, &set, &d, ino_of(p.fd), false, T0);
	assert_non_null(p.s);
	assert_true(tb_fd_set(p.fd, p.s));
	tb_sock_set_open(p.s);
	fake.peer = p.peer;
	return p;
}

static void close_pair(struct pair *p)
{
	if (tb_fd_take(p->fd) == p->s)
		tb_sock_unref(p->s);
	close(p->fd);
	close(p->peer);
}

static bool was_cut(struct pair *p)
{
	char c;

	return recv(p->peer, &c, 1, MSG_DONTWAIT) == 0;
}

static uint32_t gen_of(struct tb_sock *s)
{
	return TB_ST_GEN(tb_sock_word(s));
}

static int setup(void **state)
{
	(void)state;
	memset(&fake, 0, sizeof(fake));
	fake.last_ack_recv = 100000; /* no acknowledgement in any wait, unless a test says so */
	tb_settings_init(&set);
	set.read_ns = 1 * S;
	set.first_byte_ns = 1 * S;
	set.write_ns = 800 * MS;
	tb_real.recv = recv;
	tb_real.poll = poll;
	tb_real.ioctl = fake_ioctl;
	tb_real.getsockopt = fake_getsockopt;
	atomic_store(&wd.started, 1); /* no watchdog thread: the tests drive its steps */
	assert_int_equal(tb_fdtable_init(), 0);
	return 0;
}

/* ---- expiries computed from the settings ------------------------------------------------ */

/* 2562047h (the largest duration) from a clock past 47 minutes must not wrap into the past. */
static void test_largest_connect_timeout_never_expires(void **state)
{
	struct tb_dest d = dest_v4("127.0.0.1", 80);
	struct tb_sock *s;
	struct tb_expiry e;

	(void)state;
	set.connect_ns = INT64_C(2562047) * 3600 * S;
	s = tb_sock_new(-1, &set, &d, 1, false, 3000 * S);
	e = tb_sock_expiry(s, TB_WR);
	assert_true(e.at == TB_NEVER);
	assert_true(tb_at_after(TB_NEVER - 5, 10) == TB_NEVER);
	assert_true(tb_at_after(T0, 10) == T0 + 10);
	tb_sock_unref(s);
}

/* The framing's published state decides the phases of a wait (sock.h, TB_FS_*). */
static void test_framed_expiry_follows_the_published_state(void **state)
{
	struct pair p = open_pair();
	uint32_t gen = gen_of(p.s);
	struct tb_expiry e;

	(void)state;
	tb_sock_set_call(p.s, T0, T0 + 500 * MS);
	{ bool watched; tb_sock_wait_record(p.s, TB_RD, p.fd, T0, &watched); }
	/* A request outstanding, no answer yet: first_byte, under the deadline. */
	atomic_store(&p.s->frame_state, TB_FRAME_AWAITING);
	e = tb_sock_expiry(p.s, TB_RD);
	assert_true(e.at == T0 + 500 * MS && e.phase == TB_PHASE_DEADLINE);
	tb_sock_set_call(p.s, T0, TB_NEVER);
	e = tb_sock_expiry(p.s, TB_RD);
	assert_true(e.at == T0 + 1 * S && e.phase == TB_PHASE_FIRST_BYTE);
	atomic_store(&p.s->frame_state, TB_FRAME_AWAITING | TB_FS_BEGUN);
	assert_int_equal(tb_sock_expiry(p.s, TB_RD).phase, TB_PHASE_READ);
	/* Resting: nothing at all on the read side, whatever the call's deadline says. */
	tb_sock_set_call(p.s, T0, T0 + 500 * MS);
	atomic_store(&p.s->frame_state, TB_FRAME_RESTING | TB_FS_STARTS);
	assert_true(tb_sock_expiry(p.s, TB_RD).at == TB_NEVER);
	/* A session: no deadline, no read limit ... */
	atomic_store(&p.s->frame_state, TB_FRAME_SESSION);
	assert_true(tb_sock_expiry(p.s, TB_RD).at == TB_NEVER);
	e = tb_sock_expiry(p.s, TB_WR);
	assert_int_equal(e.phase, TB_PHASE_WRITE);
	/* ... unless the settings force protocol = session: read_timeout is its limit. */
	set.protocol = TB_PROTO_SESSION;
	e = tb_sock_expiry(p.s, TB_RD);
	assert_true(e.at == T0 + 1 * S && e.phase == TB_PHASE_READ);
	set.protocol = TB_PROTO_AUTO;
	tb_sock_wait_end(p.s, TB_RD, T0 + 10 * MS, false, gen);
	close_pair(&p);
}

/* Two threads read one socket; a byte for one of them restarts the other's silence. */
static void test_bytes_for_one_reader_restart_the_others_silence(void **state)
{
	struct pair p = open_pair();
	uint32_t gen = gen_of(p.s);

	(void)state;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0 + 10 * MS);
	tb_sock_wait_end(p.s, TB_RD, T0 + 900 * MS, true, gen);
	assert_true(tb_sock_expiry(p.s, TB_RD).at == T0 + 1900 * MS);
	tb_sock_wait_end(p.s, TB_RD, T0 + 1000 * MS, false, gen);
	close_pair(&p);
}

/* ---- the bound of a fresh wait (tb_sock_wait_record) ---------------------------------- */

/* The watchdog is filed to look at p.s at `at` (as a lingering busy socket is). */
static void filed_at(struct pair *p, int64_t at)
{
	wd.heap_len = 0;
	atomic_store(&wd.incoming, NULL);
	atomic_store(&p->s->in_incoming, false);
	file_at(p->s, at);
}

/* A wait's bound is below its true expiry (first_byte 1 s, read 3 s, bytes already read):
 * the watchdog, filed before the bound, is told nothing; when the bound comes it
 * recomputes, files the true expiry, and cuts there - not at the bound. */
static void test_fresh_wait_under_a_filed_watchdog_is_cut_at_its_true_expiry(void **state)
{
	struct pair p;
	struct tb_expiry e;

	(void)state;
	set.read_ns = 3 * S;
	tb_settings_finish(&set);
	assert_true(set.wait_floor_ns[TB_RD] == 1 * S);
	p = open_pair();
	atomic_store(&p.s->got_bytes, true); /* a read phase: 3 s */
	filed_at(&p, T0 + 500 * MS);
	e = tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_true(e.at == T0 + 1 * S); /* the bound, not the true 3 s */
	assert_null(atomic_load(&wd.incoming)); /* nothing queued, nobody woken */
	evaluate(p.s, T0 + 500 * MS); /* the filing comes: not due yet, looked at again */
	assert_true(atomic_load(&p.s->wd_filed_at) == T0 + 1 * S);
	evaluate(p.s, T0 + 1 * S); /* the bound comes: recomputed, not cut */
	assert_false(was_cut(&p));
	assert_true(atomic_load(&p.s->wd_filed_at) == T0 + 3 * S);
	assert_true(tb_sock_expiry(p.s, TB_RD).at == T0 + 3 * S);
	evaluate(p.s, T0 + 3 * S - 1);
	assert_false(was_cut(&p));
	evaluate(p.s, T0 + 3 * S);
	assert_int_equal(TB_ST(tb_sock_word(p.s)), TB_ST_EXPIRED);
	assert_int_equal(fake.logged, 1);
	close_pair(&p);
}

/* Filed later than the bound (or not at all): the true expiry, and the watchdog is told. */
static void test_fresh_wait_filed_too_late_tells_the_watchdog(void **state)
{
	struct pair p;
	struct tb_expiry e;

	(void)state;
	tb_settings_finish(&set);
	p = open_pair();
	filed_at(&p, T0 + 5 * S);
	e = tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_true(e.at == T0 + 1 * S && e.phase == TB_PHASE_FIRST_BYTE);
	assert_ptr_equal(atomic_load(&wd.incoming), p.s);
	tb_sock_wait_end(p.s, TB_RD, T0 + 1 * MS, true, gen_of(p.s));
	close_pair(&p);
}

/* The call's deadline is the bound when it comes first; a second waiter, a silence already
 * counted and a connecting socket take the exact path. */
static void test_fresh_wait_bound_and_the_exact_cases(void **state)
{
	struct pair p;
	struct tb_expiry e;
	uint32_t gen;

	(void)state;
	tb_settings_finish(&set);
	p = open_pair();
	gen = gen_of(p.s);
	tb_sock_set_call(p.s, T0, T0 + 200 * MS);
	filed_at(&p, T0 + 100 * MS);
	e = tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_true(e.at == T0 + 200 * MS);
	assert_null(atomic_load(&wd.incoming));
	/* A second reader: the first one's silence, exactly. */
	e = tb_wd_wait_begin(p.s, TB_RD, p.fd, T0 + 50 * MS);
	assert_true(e.at == T0 + 200 * MS && e.phase == TB_PHASE_DEADLINE);
	tb_sock_wait_end(p.s, TB_RD, T0 + 60 * MS, false, gen);
	tb_sock_wait_end(p.s, TB_RD, T0 + 60 * MS, false, gen);
	/* 60 ms of silence counted: no bound, the exact expiry (still the deadline). */
	tb_sock_set_call(p.s, T0, TB_NEVER);
	e = tb_wd_wait_begin(p.s, TB_RD, p.fd, T0 + 100 * MS);
	assert_true(e.at == T0 + 100 * MS + 1 * S - 60 * MS && e.phase == TB_PHASE_FIRST_BYTE);
	tb_sock_wait_end(p.s, TB_RD, T0 + 110 * MS, true, gen);
	close_pair(&p);
}

/*
 * The story: the watchdog looked at a lingering socket (nobody waiting: filed again a
 * linger period on, 800 ms here), and in the same instant the program began a read whose
 * call had 50 ms left. The read saw the socket filed at or before its expiry (the filing
 * being looked at) and told nobody; the watchdog then stored its new filing, computed
 * without the read, and the deadline was cut 750 ms late. Now the watchdog looks at the
 * waits' stored expiries after its filing is visible (file_checked).
 */
static void test_wait_begun_during_the_watchdogs_look_is_not_missed(void **state)
{
	struct pair p;
	int64_t at = 0, seen[2];

	(void)state;
	tb_settings_finish(&set);
	p = open_pair();
	atomic_store(&p.s->side[TB_RD].wait_begin, T0 - 1 * MS); /* busy a moment ago */
	filed_at(&p, T0); /* the filing being looked at */
	assert_int_equal(next_look(p.s, T0, &at, seen), V_FILE);
	assert_true(at == T0 + 800 * MS); /* lingers: the shortest limit on */
	/* Meanwhile, the program: */
	tb_sock_set_call(p.s, T0 - 1 * S, T0 + 50 * MS);
	assert_true(tb_wd_wait_begin(p.s, TB_RD, p.fd, T0).at == T0 + 50 * MS);
	assert_null(atomic_load(&wd.incoming)); /* it saw the old filing: told nobody */
	file_checked(p.s, at, seen);
	assert_true(atomic_load(&p.s->wd_filed_at) == T0 + 50 * MS);
	/* A stored expiry the look had read is not taken again. */
	seen[TB_RD] = T0 + 50 * MS;
	file_checked(p.s, at, seen);
	assert_true(atomic_load(&p.s->wd_filed_at) == T0 + 800 * MS);
	tb_sock_wait_end(p.s, TB_RD, T0 + 1 * MS, true, gen_of(p.s));
	close_pair(&p);
}

/* ---- the read side ---------------------------------------------------------------------- */

/* MSG_WAITALL: nothing queued, but TCP_INFO says data arrived 100 ms ago: not cut; the
 * silence restarts then (one jiffy late, never early). */
static void test_waitall_bytes_arriving_are_progress(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0, now = T0 + 1 * S;

	(void)state;
	fake.tcp = true;
	fake.last_data_recv = 100;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					now, &recheck), 0);
	assert_false(was_cut(&p));
	assert_true(recheck >= now - 100 * MS + 1 * S);
	assert_true(recheck <= now - 100 * MS + 1 * S + 20 * MS);
	/* The peer then falls silent: cut at the recheck, and the line says one limit. */
	fake.last_data_recv = (uint32_t)((recheck - now) / MS) + 100;
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					recheck, &recheck), 1);
	assert_true(was_cut(&p));
	assert_int_equal(fake.logged, 1);
	assert_true(fake.logged_elapsed >= 1 * S && fake.logged_elapsed < 1 * S + 20 * MS);
	close_pair(&p);
}

/* A request the peer is still acknowledging (bytes of ours unacknowledged): the first
 * byte's clock counts from the last acknowledgement; once everything is acknowledged and
 * nothing answers, the cut comes at the limit after it. */
static void test_request_in_flight_delays_the_first_byte(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0, now = T0 + 1 * S;

	(void)state;
	fake.tcp = true;
	fake.last_data_recv = 5000; /* nothing came in this wait */
	fake.outq = 4096;
	fake.last_ack_recv = 50;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					now, &recheck), 0);
	assert_false(was_cut(&p));
	assert_true(recheck >= now - 50 * MS + 1 * S);
	assert_true(recheck <= now - 50 * MS + 1 * S + 20 * MS);
	/* Everything acknowledged by then, by that same acknowledgement: nothing newer, and
	 * the answer does not come: cut at the limit after it. */
	fake.outq = 0;
	fake.last_ack_recv = (uint32_t)((recheck - now) / MS) + 50;
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					recheck, &recheck), 1);
	assert_true(was_cut(&p));
	close_pair(&p);

	/* All acknowledged by the look: the last acknowledgement counts once per wait; a later
	 * one (a keepalive probe's answer) does not extend it again. */
	p = open_pair();
	fake.last_ack_recv = 50;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					now, &recheck), 0);
	fake.last_ack_recv = 10;
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					recheck, &recheck), 1);
	assert_true(was_cut(&p));
	close_pair(&p);
}

/* A program's poll loop: the request's last acknowledgement came during an earlier round
 * of the same silence, before the wait under way began: it still counts. */
static void test_acknowledgement_in_an_earlier_poll_round_counts(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0, now = T0 + 1001 * MS;

	(void)state;
	fake.tcp = true;
	fake.last_data_recv = 5000;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	tb_sock_wait_end(p.s, TB_RD, T0 + 600 * MS, false, gen_of(p.s));
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0 + 601 * MS);
	fake.last_ack_recv = 701; /* at T0 + 300 ms, in the first round */
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					now, &recheck), 0);
	assert_false(was_cut(&p));
	assert_true(recheck >= T0 + 300 * MS + 1 * S);
	close_pair(&p);
}

/* Data that arrived before the wait began is no progress: cut at once, not one jiffy later. */
static void test_data_before_the_wait_does_not_delay_the_cut(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0;

	(void)state;
	fake.tcp = true;
	fake.last_data_recv = 1003; /* the wait began 1000 ms ago */
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_READ, -1, false,
					T0 + 1 * S, &recheck), 1);
	assert_true(was_cut(&p));
	close_pair(&p);
}

/* Data queued: a slow program is not a slow peer. */
static void test_queued_data_is_not_cut(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0;

	(void)state;
	assert_int_equal(write(p.peer, "x", 1), 1);
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_READ, -1, false,
					T0 + 1 * S, &recheck), 0);
	assert_int_equal(TB_ST(tb_sock_word(p.s)), TB_ST_OPEN);
	close_pair(&p);
}

/* ---- the write side --------------------------------------------------------------------- */

/* A blocked sender whose peer keeps acknowledging is draining, however full its buffer;
 * once the count stops, the cut comes write_timeout after its last movement, as soon as
 * TCP confirms the stall (the second zero-window probe found the window shut). */
static void test_bytes_acked_decide_write_progress(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0, look;

	(void)state;
	fake.tcp = true;
	fake.bytes_acked = 1000;
	tb_wd_wait_begin(p.s, TB_WR, p.fd, T0);
	look = tb_sock_sample_acked(p.s, T0 + 100 * MS);
	assert_true(look == T0 + 200 * MS);
	fake.bytes_acked = 65000;
	tb_sock_sample_acked(p.s, T0 + 700 * MS);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_WR, TB_PHASE_WRITE, -1, false,
					T0 + 800 * MS, &recheck), 0);
	assert_true(recheck == T0 + 1500 * MS);
	/* Stuck from here on; one probe so far: looked at again one period later. */
	fake.backoff = 1;
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_WR, TB_PHASE_WRITE, -1, false,
					T0 + 1500 * MS, &recheck), 0);
	assert_true(recheck == T0 + 1600 * MS);
	assert_int_equal(fake.logged, 0);
	fake.backoff = 2;
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_WR, TB_PHASE_WRITE, -1, false,
					T0 + 1600 * MS, &recheck), 1);
	assert_true(fake.logged_elapsed == 900 * MS);
	close_pair(&p);
}

/* Without a word from TCP - no probe, no retransmission - the stall is cut one more
 * write_timeout (at least 1 s) after the limit; a retransmission outstanding cuts at once. */
static void test_write_cut_waits_for_tcp_at_most_one_more_limit(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0;

	(void)state;
	fake.tcp = true;
	fake.bytes_acked = 1000;
	tb_wd_wait_begin(p.s, TB_WR, p.fd, T0);
	tb_sock_sample_acked(p.s, T0 + 100 * MS);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_WR, TB_PHASE_WRITE, -1, false,
					T0 + 1750 * MS, &recheck), 0);
	assert_true(recheck == T0 + 1800 * MS); /* capped at the limit (800 ms) + 1 s */
	assert_int_equal(fake.logged, 0);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_WR, TB_PHASE_WRITE, -1, false,
					T0 + 1800 * MS, &recheck), 1);
	close_pair(&p);

	p = open_pair();
	fake.logged = 0;
	tb_wd_wait_begin(p.s, TB_WR, p.fd, T0);
	tb_sock_sample_acked(p.s, T0 + 100 * MS);
	fake.retransmits = 1;
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_WR, TB_PHASE_WRITE, -1, false,
					T0 + 800 * MS, &recheck), 1);
	close_pair(&p);
}

/* ---- which fd, and when none -------------------------------------------------------------- */

/* The recorded fd is a dup that was closed: the cut goes through the socket's other fd. */
static void test_closed_dup_cut_through_the_other_fd(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0;
	int d = dup(p.fd);

	(void)state;
	tb_sock_ref(p.s);
	assert_true(tb_fd_set(d, p.s));
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	tb_wd_wait_begin(p.s, TB_RD, d, T0 + 50 * MS);
	tb_sock_wait_end(p.s, TB_RD, T0 + 150 * MS, false, gen_of(p.s));
	assert_true(tb_fd_take(d) == p.s);
	tb_sock_unref(p.s);
	close(d);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_FIRST_BYTE, -1, false,
					T0 + 1 * S, &recheck), 1);
	assert_true(was_cut(&p));
	assert_int_equal(atomic_load(&p.s->fd), p.fd);
	close_pair(&p);
}

/* A copy's reference (dup*, F_DUPFD) is counted on a live socket only: once the last fd of
 * the socket was closed by another thread, its free entry is refused, never counted up
 * from 0 (a connect would then take an entry that a stale count still holds). */
static void test_ref_live_refuses_a_freed_socket(void **state)
{
	struct pair p = open_pair();
	struct tb_sock *s = p.s;

	(void)state;
	assert_true(tb_sock_ref_live(s));
	assert_int_equal(atomic_load(&s->refs), 2);
	tb_sock_unref(s);
	close_pair(&p); /* the last reference: the entry goes back to the pool */
	assert_int_equal(TB_ST(tb_sock_word(s)), TB_ST_FREE);
	assert_false(tb_sock_ref_live(s));
	assert_int_equal(atomic_load(&s->refs), 0);
	assert_int_equal(atomic_load(&s->inuse), 0);
}

/* The socket's number now names a pipe (closed where the hooks could not see it): nothing
 * to act through. The watchdog gives the socket up in one step and untracks the slot. */
static void test_unverifiable_socket_is_given_up_not_looped(void **state)
{
	struct pair p = open_pair();
	int pfd[2], fd = p.fd;
	struct tb_sock *s = p.s;

	(void)state;
	close(p.fd); /* unseen by the table */
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(pfd[0], fd);
	tb_wd_wait_begin(s, TB_RD, fd, T0);
	atomic_store(&s->side[TB_RD].expiry, T0 + 1 * S);
	wd.heap_len = 0;
	evaluate(s, T0 + 1 * S);
	assert_int_equal(atomic_load(&s->wd_filed_at), 0);
	assert_int_equal(wd.heap_len, 0);
	assert_null(tb_fd_sock(fd));
	assert_int_equal(fake.logged, 0);
	close(pfd[0]);
	close(pfd[1]);
	close(p.peer);
}

/* A thread's own expiry through an fd another thread just closed: no cut, no claim. */
static void test_own_fd_no_longer_ours_is_not_cut(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0;

	(void)state;
	assert_true(tb_fd_take(p.fd) == p.s);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_DEADLINE, p.fd, true,
					T0 + 1 * S, &recheck), -1);
	assert_false(was_cut(&p));
	assert_int_equal(TB_ST(tb_sock_word(p.s)), TB_ST_OPEN);
	tb_sock_unref(p.s);
	close(p.fd);
	close(p.peer);
}

/* ---- the watchdog's cut of a reader: the reading half at once, the FIN later ------------ */

static bool reader_woken(struct pair *p)
{
	char c;

	return recv(p->fd, &c, 1, MSG_DONTWAIT) == 0;
}

/* The reader wakes (EOF through its fd) and the socket is expired at once; the peer hears
 * the FIN only when the rest of the cut is made. */
static void test_watchdog_cuts_a_reader_and_owes_the_fin(void **state)
{
	struct pair p = open_pair();
	uint32_t gen = gen_of(p.s);
	int64_t recheck = 0;

	(void)state;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire_first(p.s, gen, TB_RD, TB_PHASE_READ, T0 + 1 * S,
					      &recheck), 2);
	assert_int_equal(TB_ST(tb_sock_word(p.s)), TB_ST_EXPIRED);
	assert_true(reader_woken(&p));
	assert_false(was_cut(&p));
	assert_int_equal(fake.logged, 1);
	assert_int_equal(atomic_load(&p.s->busy), 0);
	tb_sock_cut_rest(p.s, gen);
	assert_true(was_cut(&p));
	assert_int_equal(atomic_load(&p.s->busy), 0);
	close_pair(&p);
}

/* A thread blocked in a send wakes only when the writing half is shut: with one waiting,
 * the reader's cut is whole at once. */
static void test_reader_cut_is_whole_while_a_writer_waits(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0;

	(void)state;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	tb_wd_wait_begin(p.s, TB_WR, p.fd, T0);
	assert_int_equal(tb_sock_expire_first(p.s, gen_of(p.s), TB_RD, TB_PHASE_READ, T0 + 1 * S,
					      &recheck), 1);
	assert_true(was_cut(&p));
	close_pair(&p);
}

/* The rest of a cut after the program closed the socket, its number and its entry reused
 * by a new connection: the new one is not touched. */
static void test_rest_of_a_cut_spares_a_reused_socket(void **state)
{
	struct pair p = open_pair(), q;
	uint32_t gen = gen_of(p.s);
	struct tb_sock *old = p.s;
	int64_t recheck = 0;

	(void)state;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire_first(p.s, gen, TB_RD, TB_PHASE_READ, T0 + 1 * S,
					      &recheck), 2);
	tb_sock_wait_end(p.s, TB_RD, T0 + 1 * S, false, gen);
	close_pair(&p);
	q = open_pair();
	assert_int_equal(q.fd, p.fd);
	tb_sock_cut_rest(old, gen);
	assert_false(was_cut(&q));
	assert_int_equal(TB_ST(tb_sock_word(q.s)), TB_ST_OPEN);
	close_pair(&q);
}

/* The watchdog's step: the cut at the expiry, the FIN owed FIN_GRACE_NS later (a program
 * told ETIMEDOUT closes the socket itself meanwhile), and sent then. */
static void test_watchdog_sends_the_fin_after_its_grace(void **state)
{
	struct pair p = open_pair();

	(void)state;
	wd.heap_len = 0;
	wd.owed_head = wd.owed_len = 0;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	atomic_store(&p.s->side[TB_RD].expiry, T0 + 1 * S);
	evaluate(p.s, T0 + 1 * S);
	assert_int_equal(TB_ST(tb_sock_word(p.s)), TB_ST_EXPIRED);
	assert_true(reader_woken(&p));
	assert_int_equal(wd.owed_len - wd.owed_head, 1);
	assert_true(next_due() == T0 + 1 * S + FIN_GRACE_NS);
	assert_false(complete_owed(T0 + 1 * S + FIN_GRACE_NS - 1));
	assert_false(was_cut(&p));
	assert_false(complete_owed(T0 + 1 * S + FIN_GRACE_NS));
	assert_true(was_cut(&p));
	assert_int_equal(wd.owed_len - wd.owed_head, 0);
	assert_true(next_due() == TB_NEVER);
	close_pair(&p);
}

/* The line is written after the cut, with `busy` down: a blocked log cannot hold either. */
static void test_log_line_after_the_cut(void **state)
{
	struct pair p = open_pair();
	int64_t recheck = 0;

	(void)state;
	tb_wd_wait_begin(p.s, TB_RD, p.fd, T0);
	assert_int_equal(tb_sock_expire(p.s, gen_of(p.s), TB_RD, TB_PHASE_READ, -1, false,
					T0 + 1 * S, &recheck), 1);
	assert_int_equal(fake.logged, 1);
	assert_true(fake.shut_when_logged);
	assert_int_equal(atomic_load(&p.s->busy), 0);
	assert_int_equal(atomic_load(&p.s->log_pending), 0);
	close_pair(&p);
}

/* ---- what a socket keeps ------------------------------------------------------------------ */

/* A connection forced raw takes no framing; one that may be framed takes one, gives it back
 * when it turns RAW (the holder of the try-flag, rule 11), and the next socket gets it
 * started afresh. */
static void test_framing_is_taken_and_given_back(void **state)
{
	struct tb_dest d = dest_v4("127.0.0.1", 80);
	struct tb_sock *s, *t;
	struct tb_frame *f;

	(void)state;
	set.protocol = TB_PROTO_RAW;
	s = tb_sock_new(-1, &set, &d, 1, false, T0);
	assert_null(tb_sock_framing(s));
	assert_int_equal(atomic_load(&s->frame_state) & TB_FS_STATE, TB_FRAME_RAW);
	tb_sock_unref(s);

	set.protocol = TB_PROTO_AUTO;
	s = tb_sock_new(-1, &set, &d, 1, false, T0);
	f = tb_sock_framing(s);
	assert_non_null(f);
	assert_int_equal(atomic_load(&s->frame_state) & TB_FS_STATE, TB_FRAME_UNKNOWN);
	assert_int_equal(tb_frame_sent(f, "\x01\x02\x03\x04\x05\x06\x07\x08", 8) &
			 TB_FRAME_EV_RAW, TB_FRAME_EV_RAW);
	tb_sock_frame_over(s);
	assert_null(tb_sock_framing(s));
	tb_sock_frame_over(s); /* once only: nothing left to give */

	set.protocol = TB_PROTO_TLS;
	t = tb_sock_new(-1, &set, &d, 1, false, T0);
	assert_ptr_equal(tb_sock_framing(t), f); /* the free list is a stack */
	assert_int_equal(tb_frame_proto(f), TB_PROTO_TLS);
	assert_int_equal(atomic_load(&t->frame_state) & TB_FS_STATE, tb_frame_state(f));
	tb_sock_unref(s);
	tb_sock_unref(t); /* the last reference gives the framing back too */
	t = tb_sock_new(-1, &set, &d, 1, false, T0);
	assert_ptr_equal(tb_sock_framing(t), f);
	tb_sock_unref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_largest_connect_timeout_never_expires, setup),
		cmocka_unit_test_setup(test_ref_live_refuses_a_freed_socket, setup),
		cmocka_unit_test_setup(test_bytes_for_one_reader_restart_the_others_silence, setup),
		cmocka_unit_test_setup(test_framed_expiry_follows_the_published_state, setup),
		cmocka_unit_test_setup(test_waitall_bytes_arriving_are_progress, setup),
		cmocka_unit_test_setup(test_data_before_the_wait_does_not_delay_the_cut, setup),
		cmocka_unit_test_setup(test_queued_data_is_not_cut, setup),
		cmocka_unit_test_setup(test_request_in_flight_delays_the_first_byte, setup),
		cmocka_unit_test_setup(test_acknowledgement_in_an_earlier_poll_round_counts, setup),
		cmocka_unit_test_setup(test_bytes_acked_decide_write_progress, setup),
		cmocka_unit_test_setup(test_write_cut_waits_for_tcp_at_most_one_more_limit, setup),
		cmocka_unit_test_setup(test_closed_dup_cut_through_the_other_fd, setup),
		cmocka_unit_test_setup(test_unverifiable_socket_is_given_up_not_looped, setup),
		cmocka_unit_test_setup(test_own_fd_no_longer_ours_is_not_cut, setup),
		cmocka_unit_test_setup(test_log_line_after_the_cut, setup),
		cmocka_unit_test_setup(test_framing_is_taken_and_given_back, setup),
		cmocka_unit_test_setup(test_watchdog_cuts_a_reader_and_owes_the_fin, setup),
		cmocka_unit_test_setup(test_reader_cut_is_whole_while_a_writer_waits, setup),
		cmocka_unit_test_setup(test_rest_of_a_cut_spares_a_reused_socket, setup),
		cmocka_unit_test_setup(test_watchdog_sends_the_fin_after_its_grace, setup),
		cmocka_unit_test_setup(test_fresh_wait_under_a_filed_watchdog_is_cut_at_its_true_expiry,
				       setup),
		cmocka_unit_test_setup(test_fresh_wait_filed_too_late_tells_the_watchdog, setup),
		cmocka_unit_test_setup(test_fresh_wait_bound_and_the_exact_cases, setup),
		cmocka_unit_test_setup(test_wait_begun_during_the_watchdogs_look_is_not_missed, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
