/* test_epoll_set.c - the interest-set bookkeeping of epoll instances (shim/epoll_set.c):
 * register, modify, delete, close while registered, dup, one-shot, growth, fork. Pure. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "epoll_set.h"

#define CAP 4096

struct seen {
	int n;
	int fd[CAP];
	uint32_t events[CAP];
	uint64_t tag[CAP], data[CAP];
	int stop_after; /* 0: never */
};

static bool collect(void *ctx, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	struct seen *s = ctx;

	s->fd[s->n] = fd;
	s->events[s->n] = events;
	s->tag[s->n] = tag;
	s->data[s->n] = data;
	s->n++;
	return s->stop_after == 0 || s->n < s->stop_after;
}

/* The entry for fd in a scan, or -1. */
static int index_of(const struct seen *s, int fd)
{
	for (int i = 0; i < s->n; i++)
		if (s->fd[i] == fd)
			return i;
	return -1;
}

static struct seen scan(struct tb_epset *set)
{
	struct seen s;

	memset(&s, 0, sizeof(s));
	tb_epset_scan(set, collect, &s);
	return s;
}

static int setup(void **state)
{
	(void)state;
	assert_int_equal(tb_epset_init(CAP), 0);
	return 0;
}

static void test_unknown_epfd_has_no_instance(void **state)
{
	(void)state;
	assert_null(tb_epset_get(7));
	assert_false(tb_epset_known(7));
	assert_null(tb_epset_get(-1));
	assert_null(tb_epset_get(CAP));
	assert_null(tb_epset_get_or_make(CAP)); /* outside the table: not followed */
}

static void test_register_then_scan_sees_it(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(10);
	struct seen s;
	int i;

	(void)state;
	assert_non_null(set);
	assert_true(tb_epset_known(10));
	assert_int_equal(tb_epset_put(set, 5, EPOLLIN, 0x100, 55), 0);
	s = scan(set);
	assert_int_equal(s.n, 1);
	i = index_of(&s, 5);
	assert_int_equal(s.events[i], EPOLLIN);
	assert_int_equal(s.tag[i], 0x100);
	assert_int_equal(s.data[i], 55);
	assert_int_equal(atomic_load(&set->live), 1);
	tb_epset_put_ref(set);
	tb_epset_drop(10);
	assert_false(tb_epset_known(10));
}

static void test_modify_replaces_in_place(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(11);
	struct seen s;

	(void)state;
	tb_epset_put(set, 5, EPOLLOUT, 0x100, 1);
	/* libuv's churn: every read/write switch is a MOD */
	for (int k = 0; k < 1000; k++)
		tb_epset_put(set, 5, k % 2 ? EPOLLIN : EPOLLOUT, 0x100, 1);
	tb_epset_put(set, 5, EPOLLIN | EPOLLET, 0x100, 2);
	s = scan(set);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.events[0], EPOLLIN | EPOLLET);
	assert_int_equal(s.data[0], 2);
	assert_int_equal(atomic_load(&set->live), 1);
	tb_epset_put_ref(set);
	tb_epset_drop(11);
}

static void test_delete_removes_only_that_fd(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(12);
	struct seen s;

	(void)state;
	tb_epset_put(set, 5, EPOLLIN, 1, 5);
	tb_epset_put(set, 6, EPOLLIN, 2, 6);
	tb_epset_del(set, 5);
	tb_epset_del(set, 99); /* never registered: nothing */
	s = scan(set);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.fd[0], 6);
	/* re-adding after a delete reuses the tombstone's chain correctly */
	tb_epset_put(set, 5, EPOLLOUT, 3, 5);
	s = scan(set);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.events[index_of(&s, 5)], EPOLLOUT);
	assert_int_equal(s.tag[index_of(&s, 5)], 3);
	tb_epset_put_ref(set);
	tb_epset_drop(12);
}

static void test_close_while_registered_forgets_in_every_instance(void **state)
{
	struct tb_epset *a = tb_epset_get_or_make(13), *b = tb_epset_get_or_make(14);

	(void)state;
	tb_epset_put(a, 5, EPOLLIN, 1, 5);
	tb_epset_put(b, 5, EPOLLOUT, 1, 5);
	tb_epset_put(b, 6, EPOLLOUT, 2, 6);
	tb_epset_forget_fd(5);
	assert_int_equal(scan(a).n, 0);
	assert_int_equal(scan(b).n, 1);
	assert_int_equal(scan(b).fd[0], 6);
	tb_epset_put_ref(a);
	tb_epset_put_ref(b);
	tb_epset_drop(13);
	tb_epset_drop(14);
}

/* dup: two numbers of one socket registered separately carry the same tag; closing one
 * number forgets that number only (the kernel's registration of a closed number whose file
 * is still open through the dup stays, unfollowed: documented). */
static void test_dup_numbers_are_separate_entries(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(15);
	struct seen s;

	(void)state;
	tb_epset_put(set, 5, EPOLLIN, 0x77, 5);
	tb_epset_put(set, 8, EPOLLIN, 0x77, 8);
	tb_epset_forget_fd(5);
	s = scan(set);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.fd[0], 8);
	assert_int_equal(s.tag[0], 0x77);
	tb_epset_put_ref(set);
	tb_epset_drop(15);
}

static void test_oneshot_disarm_needs_the_same_tag(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(16);

	(void)state;
	tb_epset_put(set, 5, EPOLLIN | EPOLLONESHOT, 0x10, 5);
	tb_epset_disarm(set, 5, 0x11); /* a newer socket under that number: untouched */
	assert_int_equal(scan(set).events[0], EPOLLIN | EPOLLONESHOT);
	tb_epset_disarm(set, 5, 0x10);
	assert_int_equal(scan(set).events[0], 0);
	tb_epset_put(set, 5, EPOLLIN | EPOLLONESHOT, 0x10, 5); /* MOD re-arms */
	assert_int_equal(scan(set).events[0], EPOLLIN | EPOLLONESHOT);
	tb_epset_put_ref(set);
	tb_epset_drop(16);
}

/* The count of one-shot entries follows every writer: a waiter asks the kernel first only
 * while it is 0 (a fired one-shot must be matched to be disarmed). It survives growth,
 * and a recycled instance starts from 0. */
static void test_oneshot_count_follows_every_writer(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(17);

	(void)state;
	assert_int_equal(atomic_load(&set->oneshots), 0);
	tb_epset_put(set, 5, EPOLLIN | EPOLLONESHOT, 0x10, 5);   /* ADD */
	tb_epset_put(set, 6, EPOLLIN, 0x20, 6);
	assert_int_equal(atomic_load(&set->oneshots), 1);
	assert_true(tb_epset_modify(17, 6, EPOLLOUT | EPOLLONESHOT, 0x20, 6)); /* MOD to */
	assert_int_equal(atomic_load(&set->oneshots), 2);
	assert_true(tb_epset_modify(17, 6, EPOLLIN | EPOLLONESHOT, 0x20, 6));  /* within */
	assert_int_equal(atomic_load(&set->oneshots), 2);
	tb_epset_put(set, 6, EPOLLIN, 0x20, 6);                 /* MOD away, general path */
	assert_int_equal(atomic_load(&set->oneshots), 1);
	tb_epset_disarm(set, 5, 0x11);                          /* another socket: kept */
	assert_int_equal(atomic_load(&set->oneshots), 1);
	tb_epset_disarm(set, 5, 0x10);                          /* fired: watches nothing */
	assert_int_equal(atomic_load(&set->oneshots), 0);
	tb_epset_put(set, 5, EPOLLIN | EPOLLONESHOT, 0x10, 5);  /* re-armed */
	assert_int_equal(atomic_load(&set->oneshots), 1);
	for (int fd = 100; fd < 200; fd++)                      /* growth rehashes */
		tb_epset_put(set, fd, (fd & 1) ? EPOLLIN | EPOLLONESHOT : EPOLLIN, 1, 0);
	assert_int_equal(atomic_load(&set->oneshots), 51);
	for (int fd = 100; fd < 200; fd++)
		tb_epset_del(set, fd);
	tb_epset_forget_fd(5);                                  /* closed while registered */
	assert_int_equal(atomic_load(&set->oneshots), 0);
	tb_epset_put(set, 7, EPOLLIN | EPOLLONESHOT, 0x30, 7);
	tb_epset_put_ref(set);
	tb_epset_drop(17);
	set = tb_epset_get_or_make(17);                         /* recycled */
	assert_int_equal(atomic_load(&set->oneshots), 0);
	tb_epset_put_ref(set);
	tb_epset_drop(17);
}

static void test_growth_keeps_every_entry_and_drops_tombstones(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(17);
	struct seen s;

	(void)state;
	for (int fd = 0; fd < 1000; fd++)
		assert_int_equal(tb_epset_put(set, fd, EPOLLIN, (uint64_t)fd, (uint64_t)fd), 0);
	for (int fd = 0; fd < 1000; fd += 2)
		tb_epset_del(set, fd);
	for (int round = 0; round < 20; round++) /* churn: add and delete many times */
		for (int fd = 1000; fd < 1100; fd++) {
			tb_epset_put(set, fd, EPOLLOUT, 1, 1);
			tb_epset_del(set, fd);
		}
	s = scan(set);
	assert_int_equal(s.n, 500);
	for (int fd = 1; fd < 1000; fd += 2)
		assert_int_equal(s.tag[index_of(&s, fd)], (uint64_t)fd);
	assert_int_equal(atomic_load(&set->live), 500);
	/* the array stays proportionate to what is live */
	assert_true(atomic_load(&set->arr)->cap <= 4096);
	tb_epset_put_ref(set);
	tb_epset_drop(17);
}

static void test_scan_stops_when_asked(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(18);
	struct seen s;

	(void)state;
	for (int fd = 0; fd < 10; fd++)
		tb_epset_put(set, fd, EPOLLIN, 0, 0);
	memset(&s, 0, sizeof(s));
	s.stop_after = 3;
	tb_epset_scan(set, collect, &s);
	assert_int_equal(s.n, 3);
	tb_epset_put_ref(set);
	tb_epset_drop(18);
}

/* Closing an epoll fd while another thread holds its instance (inside epoll_wait): the
 * instance lives until that reference goes; the number then has nothing, and a new instance
 * made under the same number starts empty. */
static void test_drop_while_referenced_then_reuse(void **state)
{
	struct tb_epset *held = tb_epset_get_or_make(19), *fresh;

	(void)state;
	tb_epset_put(held, 5, EPOLLIN, 1, 5);
	tb_epset_drop(19);
	assert_null(tb_epset_get(19));
	assert_int_equal(scan(held).n, 1); /* still readable by its holder */
	tb_epset_put_ref(held);
	fresh = tb_epset_get_or_make(19);
	assert_non_null(fresh);
	assert_int_equal(scan(fresh).n, 0);
	tb_epset_put_ref(fresh);
	tb_epset_drop(19);
}

/* fork: the child's table is a copy (its epoll fds share the kernel instance); a lock
 * another thread of the parent held at the fork is free in the child. */
static void test_fork_child_inherits_sets_and_lock_is_free(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(20);
	pid_t pid;
	int status;

	(void)state;
	tb_epset_put(set, 5, EPOLLIN, 1, 5);
	atomic_flag_test_and_set(&set->lock); /* as if held by another thread at fork */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct tb_epset *c;

		tb_epset_fork_child();
		c = tb_epset_get(20);
		if (c == NULL || scan(c).n != 1)
			_exit(1);
		tb_epset_put(c, 6, EPOLLOUT, 2, 6); /* would spin forever on a held lock */
		_exit(scan(c).n == 2 ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	atomic_flag_clear(&set->lock);
	assert_int_equal(scan(set).n, 1); /* the parent's set is its own */
	tb_epset_put_ref(set);
	tb_epset_drop(20);
}

/* A thread of the parent blocked in epoll_wait holds a reference for the whole wait; in the
 * child that thread is gone, and its reference kept the instance (and its array) for ever
 * after the child closed the epoll fd. Now the child's instance counts the table's
 * reference alone, and its close releases it: the next instance made is the same memory,
 * recycled. */
static struct tb_epset *blocked_ref;
static pthread_mutex_t blocked_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t blocked_cv = PTHREAD_COND_INITIALIZER;
static int blocked_stage;

static void *blocked_waiter(void *arg)
{
	pthread_mutex_lock(&blocked_mu);
	blocked_ref = tb_epset_get((int)(intptr_t)arg);
	blocked_stage = 1;
	pthread_cond_broadcast(&blocked_cv);
	while (blocked_stage != 2)
		pthread_cond_wait(&blocked_cv, &blocked_mu);
	pthread_mutex_unlock(&blocked_mu);
	tb_epset_put_ref(blocked_ref);
	return NULL;
}

static void test_fork_child_drops_the_references_of_gone_threads(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(22);
	pthread_t t;
	pid_t pid;
	int status;

	(void)state;
	tb_epset_put(set, 5, EPOLLIN, 1, 5);
	tb_epset_put_ref(set); /* this thread holds nothing at the fork */
	assert_int_equal(pthread_create(&t, NULL, blocked_waiter, (void *)(intptr_t)22), 0);
	pthread_mutex_lock(&blocked_mu);
	while (blocked_stage != 1)
		pthread_cond_wait(&blocked_cv, &blocked_mu);
	pthread_mutex_unlock(&blocked_mu);
	assert_ptr_equal(blocked_ref, set);
	assert_int_equal(atomic_load(&set->refs), 2);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct tb_epset *again;

		tb_epset_fork_child();
		if (atomic_load(&set->refs) != 1)
			_exit(1);
		tb_epset_drop(22); /* the child closes the epoll fd */
		again = tb_epset_get_or_make(23);
		/* Released: recycled for the next instance made. Kept, a new one is allocated. */
		_exit(again == set ? 0 : 2);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	pthread_mutex_lock(&blocked_mu); /* the parent's waiter goes before any check fails */
	blocked_stage = 2;
	pthread_cond_broadcast(&blocked_cv);
	pthread_mutex_unlock(&blocked_mu);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&set->refs), 1); /* the parent's own count is untouched */
	tb_epset_drop(22);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A fork while another thread of the parent was inside a writer (its lock held) copied the
 * instance's counts half-made: an entry filled, `live` not yet raised - a waiter then takes
 * the instance for one with nothing to watch. The child makes the counts again from the
 * entries. Simulated: the lock set and the counts skewed as that writer would leave them. */
static void test_fork_child_recounts_an_instance_copied_mid_update(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(24);
	pid_t pid;
	int status;

	(void)state;
	tb_epset_put(set, 5, EPOLLIN, 1, 5);
	tb_epset_put(set, 6, EPOLLIN | EPOLLONESHOT, 2, 6);
	tb_epset_put(set, 7, EPOLLIN, 3, 7);
	tb_epset_del(set, 7); /* a tombstone: used 3, live 2 */
	tb_epset_put_ref(set);
	atomic_flag_test_and_set(&set->lock); /* held by a writer of another thread */
	atomic_store(&set->live, 1);          /* 6 filled, not yet counted */
	atomic_store(&set->oneshots, 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		tb_epset_fork_child();
		if (atomic_load(&set->live) != 2 || atomic_load(&set->oneshots) != 1 ||
		    set->used != 3)
			_exit(1);
		_exit(atomic_flag_test_and_set(&set->lock) ? 2 : 0); /* free */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	atomic_flag_clear(&set->lock); /* the parent's instance made whole before any check */
	atomic_store(&set->live, 2);
	atomic_store(&set->oneshots, 1);
	tb_epset_drop(24);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A reader that found an instance in the table just before it was closed and recycled under
 * the same number (epoll_wait on one thread, close + epoll_create on another) takes its
 * reference on the recycled instance. The recycling set the count with plain stores
 * (1, then 2), which could overwrite that increment: the count then fell to 0 while the
 * table still held the instance, which was released and handed to the next epoll fd while
 * in use. The maker (this thread) checks, each round, that its instance still counts its
 * own reference and the table's. Racy by nature: rounds until one lands in the window, at most
 * RACE_SECS (a sanitizer's build runs far fewer rounds in them, and must not pass the suite's
 * time limit). */
#define RACE_EPFD 21
#define RACE_ROUNDS 20000000
#define RACE_SECS 3
static atomic_bool race_over;

static void *race_reader(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&race_over, memory_order_relaxed)) {
		struct tb_epset *s = tb_epset_get(RACE_EPFD);

		if (s != NULL)
			tb_epset_put_ref(s);
	}
	return NULL;
}

static void test_recycled_instance_keeps_a_racing_reference(void **state)
{
	pthread_t t;
	long lost = 0;
	struct timespec t0, now;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	atomic_store(&race_over, false);
	assert_int_equal(pthread_create(&t, NULL, race_reader, NULL), 0);
	for (long i = 0; i < RACE_ROUNDS && lost == 0; i++) {
		struct tb_epset *s;

		tb_epset_drop(RACE_EPFD);
		s = tb_epset_get_or_make(RACE_EPFD);
		assert_non_null(s);
		tb_epset_put_ref(s);
		/* The table's reference at least (the reader's may come and go). */
		if (atomic_load(&s->refs) == 0 || tb_epset_get_or_make(RACE_EPFD) != s)
			lost = i + 1;
		else
			tb_epset_put_ref(s);
		if ((i & 0xffff) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - t0.tv_sec >= RACE_SECS)
				break;
		}
	}
	atomic_store(&race_over, true);
	pthread_join(t, NULL);
	if (lost != 0)
		fail_msg("round %ld: the instance in the table lost its references", lost);
	tb_epset_drop(RACE_EPFD);
}

/* tb_epset_modify: the MOD fast path rewrites an entry the instance holds, and declines
 * (false: the caller takes the general path) when the instance or the entry is missing. */
static void test_modify_rewrites_only_a_known_entry(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(22);
	struct seen s;
	int i;

	(void)state;
	assert_false(tb_epset_modify(23, 5, EPOLLOUT, 1, 5)); /* no instance */
	assert_false(tb_epset_modify(CAP, 5, EPOLLOUT, 1, 5)); /* outside the table */
	assert_false(tb_epset_modify(-1, 5, EPOLLOUT, 1, 5));
	assert_false(tb_epset_modify(22, 5, EPOLLOUT, 1, 5)); /* no entry for fd 5 yet */
	assert_int_equal(scan(set).n, 0);
	tb_epset_put(set, 5, EPOLLIN, 1, 55);
	assert_true(tb_epset_modify(22, 5, EPOLLOUT, 2, 66));
	s = scan(set);
	assert_int_equal(s.n, 1);
	i = index_of(&s, 5);
	assert_true(i >= 0);
	assert_int_equal(s.events[i], EPOLLOUT);
	assert_int_equal(s.tag[i], 2);
	assert_int_equal(s.data[i], 66);
	tb_epset_del(set, 5);
	assert_false(tb_epset_modify(22, 5, EPOLLIN, 2, 66)); /* deleted: a tombstone */
	tb_epset_put_ref(set);
	tb_epset_drop(22);
	assert_false(tb_epset_modify(22, 5, EPOLLIN, 2, 66)); /* the instance is gone */
}

/* redis's ae switches a socket between reading and writing by DEL and ADD. Each ADD took a
 * new slot and every few dozen a rehash retired the array, which was freed only with the
 * instance: 53 MB per million switches. An ADD now takes its fd's tombstone back, and a
 * retired array goes as soon as no scan is under way. */
static void test_del_add_churn_neither_grows_nor_keeps_arrays(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(25);
	struct tb_epset_arr *first;

	(void)state;
	for (int fd = 100; fd < 120; fd++)
		tb_epset_put(set, fd, EPOLLIN, (uint64_t)fd, (uint64_t)fd);
	first = atomic_load(&set->arr);
	for (int k = 0; k < 100000; k++) { /* the same fds: their own tombstones */
		int fd = 100 + k % 20;

		tb_epset_del(set, fd);
		tb_epset_put(set, fd, k % 2 ? EPOLLIN : EPOLLOUT, (uint64_t)fd, (uint64_t)fd);
	}
	assert_ptr_equal(atomic_load(&set->arr), first);
	assert_int_equal(set->used, 20);
	assert_int_equal(atomic_load(&set->live), 20);
	for (int k = 0; k < 100000; k++) { /* new numbers: rehashes, each array freed at once */
		tb_epset_del(set, 100 + k % 20);
		tb_epset_put(set, 1000 + k, EPOLLIN, 1, 1);
		tb_epset_del(set, 1000 + k);
		tb_epset_put(set, 100 + k % 20, EPOLLIN, 1, 1);
		assert_null(atomic_load(&set->retired));
	}
	assert_int_equal(scan(set).n, 20);
	assert_int_equal(atomic_load(&set->live), 20);
	tb_epset_put_ref(set);
	tb_epset_drop(25);
}

/* A thread pool blocked in epoll_wait on one instance always holds a reference to it. The
 * retired arrays used to be freed only when the references fell to the table's, so with
 * one waiter always blocked, churn through new numbers (a proxy's outbound sockets taking
 * numbers among its inbound ones: a rehash every few connections) kept every array until
 * the epoll fd closed. A reference held across a wait keeps none now. */
static void test_a_waiters_reference_keeps_no_retired_array(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(27), *waiter = tb_epset_get(27);

	(void)state;
	assert_ptr_equal(waiter, set);
	tb_epset_put(set, 3, EPOLLIN, 3, 3);
	for (int k = 0; k < 20000; k++) {
		tb_epset_put(set, 1000 + k, EPOLLIN, 1, 1);
		tb_epset_del(set, 1000 + k);
		assert_null(atomic_load(&set->retired));
	}
	assert_int_equal(scan(waiter).n, 1);
	tb_epset_put_ref(waiter);
	tb_epset_put_ref(set);
	tb_epset_drop(27);
}

/* A scan under way keeps the arrays retired meanwhile (it may be reading one), and the last
 * scan to finish frees them. Here the scan's own callback grows the instance, as another
 * thread's ADD would while a waiter scans: the array being scanned is retired under it and
 * must stay readable (the address sanitizer sees a read of a freed one). */
struct grow_ctx {
	struct tb_epset *set;
	int seen;
	bool kept;
};

static bool grow_while_scanning(void *ctx, int fd, uint32_t events, uint64_t tag, uint64_t data)
{
	struct grow_ctx *g = ctx;

	(void)fd;
	(void)events;
	(void)tag;
	(void)data;
	if (g->seen++ == 0) {
		for (int k = 0; k < 200; k++) /* growth: the scanned array is retired */
			tb_epset_put(g->set, 500 + k, EPOLLIN, 1, 1);
		g->kept = atomic_load(&g->set->retired) != NULL;
	}
	return true;
}

static void test_retired_arrays_go_with_the_last_scan(void **state)
{
	struct tb_epset *set = tb_epset_get_or_make(26);
	struct grow_ctx g = { .set = set };

	(void)state;
	for (int fd = 0; fd < 4; fd++)
		tb_epset_put(set, fd, EPOLLIN, 1, 1);
	tb_epset_scan(set, grow_while_scanning, &g);
	assert_true(g.kept);     /* retired while the scan ran: kept */
	/* The old array (8 slots), read to its end after it was retired: its 4 entries and
	 * those the first puts added before it filled up. */
	assert_true(g.seen >= 4 && g.seen <= 8);
	assert_null(atomic_load(&set->retired)); /* the scan's end freed them */
	assert_int_equal(scan(set).n, 204);
	tb_epset_put_ref(set);
	tb_epset_drop(26);
}

/* tb_epset_modify holds no reference: while one thread modifies, another closes the epoll
 * fd and makes a new instance under the same number, over and over. The modifier must never
 * touch a released instance's arrays (set_release frees them under the lock the modify
 * holds: the address sanitizer and the thread sanitizer see a violation), and an entry
 * it rewrote belongs to the instance the table names. At most RACE_SECS. */
#define MOD_EPFD 24
static void *mod_racer(void *arg)
{
	long *done = arg;

	while (!atomic_load_explicit(&race_over, memory_order_relaxed)) {
		if (tb_epset_modify(MOD_EPFD, 5, EPOLLOUT, 7, 77))
			(*done)++;
	}
	return NULL;
}

static void test_modify_races_close_and_recycling(void **state)
{
	pthread_t t;
	long done = 0, rounds = 0;
	struct timespec t0, now;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	atomic_store(&race_over, false);
	assert_int_equal(pthread_create(&t, NULL, mod_racer, &done), 0);
	for (;; rounds++) {
		struct tb_epset *s = tb_epset_get_or_make(MOD_EPFD);
		struct seen seen;

		assert_non_null(s);
		tb_epset_put(s, 5, EPOLLIN, 7, 77);
		/* Growth under the racer too: the old array is retired, not freed. */
		for (int fd = 6; fd < 6 + (int)(rounds % 16); fd++)
			tb_epset_put(s, fd, EPOLLIN, 1, 1);
		seen = scan(s);
		assert_true(index_of(&seen, 5) >= 0);
		assert_int_equal(seen.tag[index_of(&seen, 5)], 7);
		tb_epset_put_ref(s);
		tb_epset_drop(MOD_EPFD);
		if ((rounds & 0xff) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - t0.tv_sec >= RACE_SECS)
				break;
		}
	}
	atomic_store(&race_over, true);
	pthread_join(t, NULL);
	assert_true(rounds > 0);
	assert_true(done > 0); /* the fast path did run against the closes, not only decline */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unknown_epfd_has_no_instance),
		cmocka_unit_test(test_register_then_scan_sees_it),
		cmocka_unit_test(test_modify_replaces_in_place),
		cmocka_unit_test(test_delete_removes_only_that_fd),
		cmocka_unit_test(test_close_while_registered_forgets_in_every_instance),
		cmocka_unit_test(test_dup_numbers_are_separate_entries),
		cmocka_unit_test(test_oneshot_disarm_needs_the_same_tag),
		cmocka_unit_test(test_oneshot_count_follows_every_writer),
		cmocka_unit_test(test_growth_keeps_every_entry_and_drops_tombstones),
		cmocka_unit_test(test_scan_stops_when_asked),
		cmocka_unit_test(test_drop_while_referenced_then_reuse),
		cmocka_unit_test(test_fork_child_inherits_sets_and_lock_is_free),
		cmocka_unit_test(test_fork_child_drops_the_references_of_gone_threads),
		cmocka_unit_test(test_fork_child_recounts_an_instance_copied_mid_update),
		cmocka_unit_test(test_recycled_instance_keeps_a_racing_reference),
		cmocka_unit_test(test_modify_rewrites_only_a_known_entry),
		cmocka_unit_test(test_modify_races_close_and_recycling),
		cmocka_unit_test(test_del_add_churn_neither_grows_nor_keeps_arrays),
		cmocka_unit_test(test_a_waiters_reference_keeps_no_retired_array),
		cmocka_unit_test(test_retired_arrays_go_with_the_last_scan),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
