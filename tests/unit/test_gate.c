/* test_gate.c - the gate's state machine driven from one thread on a simulated clock: FIFO
 * hand-off, the fast path closed while anyone waits, cancel, the queue limit, the counters
 * and the bound of a wait (acquire_timeout against the call's deadline). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "unit.h"

#include "gate.h"


static void gate(struct tb_gate *g, int max, int max_pending)
{
	struct tb_dest d = dest_v4("10.0.0.1", 8080);

	tb_gate_init(g, &d, max, max_pending);
}

/* Takes every slot through the fast path. */
static void fill(struct tb_gate *g)
{
	for (int i = 0; i < g->max; i++)
		assert_true(tb_gate_try_acquire(g));
	assert_false(tb_gate_try_acquire(g));
	assert_int_equal(atomic_load(&g->leased), g->max);
}

static void expect_queued(struct tb_gate *g, struct tb_gate_waiter *w)
{
	assert_int_equal(tb_gate_enqueue(g, w), TB_GATE_QUEUED);
	assert_int_equal(atomic_load(&w->granted), 0);
}

/* A release that must hand the slot to exactly w. */
static void expect_handed_to(struct tb_gate *g, struct tb_gate_waiter *w)
{
	int leased = atomic_load(&g->leased);
	struct tb_gate_waiter *got = tb_gate_release(g);

	if (got != w)
		fail_msg("release handed the slot to %p, want %p", (void *)got, (void *)w);
	assert_int_equal(atomic_load(&w->granted), 1);
	/* A hand-off: the slot never becomes free, so no late arrival can take it. */
	assert_int_equal(atomic_load(&g->leased), leased);
}

static void test_fast_path_until_full(void **state)
{
	struct tb_gate g;

	(void)state;
	gate(&g, 3, 0);
	assert_int_equal(atomic_load(&g.leased), 0);
	fill(&g);
	assert_int_equal(atomic_load(&g.acquired), 3);
	assert_int_equal(atomic_load(&g.pending), 0);
}

static void test_enqueue_takes_a_free_slot(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w;

	(void)state;
	gate(&g, 2, 0);
	assert_true(tb_gate_try_acquire(&g));
	/* The slow path with a free slot and nobody queued takes it, without queuing. */
	assert_int_equal(tb_gate_enqueue(&g, &w), TB_GATE_TOOK);
	assert_int_equal(atomic_load(&g.leased), 2);
	assert_int_equal(atomic_load(&g.pending), 0);
	assert_null(g.head);
	assert_int_equal(atomic_load(&g.acquired), 2);
}

static void test_fifo_order(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2, w3;

	(void)state;
	gate(&g, 2, 0);
	fill(&g);
	expect_queued(&g, &w1);
	expect_queued(&g, &w2);
	expect_queued(&g, &w3);
	assert_int_equal(atomic_load(&g.pending), 3);

	expect_handed_to(&g, &w1);
	assert_int_equal(atomic_load(&w2.granted), 0);
	assert_int_equal(atomic_load(&w3.granted), 0);
	assert_int_equal(atomic_load(&g.pending), 2);
	expect_handed_to(&g, &w2);
	assert_int_equal(atomic_load(&w3.granted), 0);
	expect_handed_to(&g, &w3);
	assert_int_equal(atomic_load(&g.pending), 0);
	assert_null(g.head);
	assert_null(g.tail);
	assert_int_equal(atomic_load(&g.acquired), 2 + 3);
}

static void test_waiter_blocks_the_fast_path(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2;

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	expect_queued(&g, &w1);
	expect_handed_to(&g, &w1);
	expect_queued(&g, &w2);

	/* w1's slot is given back and handed to w2; w1 releases again, with nobody queued. */
	expect_handed_to(&g, &w2);
	assert_null(tb_gate_release(&g));
	assert_int_equal(atomic_load(&g.leased), 0);

	/* A free slot, but somebody queued: newcomers must not overtake the queue. */
	fill(&g);
	expect_queued(&g, &w1);
	expect_queued(&g, &w2);
	atomic_fetch_sub(&g.leased, 1); /* as if a release were between its two steps */
	assert_false(tb_gate_try_acquire(&g));
	assert_int_equal(atomic_load(&g.leased), 0);
	atomic_fetch_add(&g.leased, 1);
	expect_handed_to(&g, &w1);
	assert_false(tb_gate_try_acquire(&g));
	expect_handed_to(&g, &w2);
	assert_int_equal(atomic_load(&g.pending), 0);
	assert_null(tb_gate_release(&g));
	/* Nobody waits any more: the fast path opens again. */
	assert_true(tb_gate_try_acquire(&g));
}

static void test_enqueue_behind_the_queue(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2;

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	expect_queued(&g, &w1);
	/* Even with a slot free at that moment, the slow path queues behind w1. */
	atomic_fetch_sub(&g.leased, 1);
	expect_queued(&g, &w2);
	assert_int_equal(atomic_load(&g.leased), 0);
	assert_ptr_equal(g.head, &w1);
	assert_ptr_equal(g.tail, &w2);
}

static void test_release_without_waiter(void **state)
{
	struct tb_gate g;

	(void)state;
	gate(&g, 2, 0);
	fill(&g);
	assert_null(tb_gate_release(&g));
	assert_int_equal(atomic_load(&g.leased), 1);
	assert_true(tb_gate_try_acquire(&g));
	assert_null(tb_gate_release(&g));
	assert_null(tb_gate_release(&g));
	assert_int_equal(atomic_load(&g.leased), 0);
	assert_int_equal(atomic_load(&g.acquired), 3);
}

static void test_release_wakes_exactly_one(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w[4];

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	for (int i = 0; i < 4; i++)
		expect_queued(&g, &w[i]);
	expect_handed_to(&g, &w[0]);
	for (int i = 1; i < 4; i++)
		assert_int_equal(atomic_load(&w[i].granted), 0);
	assert_int_equal(atomic_load(&g.pending), 3);
	assert_int_equal(atomic_load(&g.leased), 1);
}

/* A waiter times out on the simulated clock and cancels: it leaves the queue, and the next
 * release goes to the waiter behind it. */
static void test_cancel_on_timeout(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2, w3;
	struct tb_expiry bound;
	int64_t now = T0;

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	expect_queued(&g, &w1);
	bound = tb_gate_wait_bound(now, 300 * MS, TB_NEVER);
	assert_int_equal(bound.at, T0 + 300 * MS);
	assert_int_equal(bound.phase, TB_PHASE_GATE);
	now += 10 * MS;
	expect_queued(&g, &w2);
	expect_queued(&g, &w3);

	now = bound.at; /* w1's wait runs out, nothing released meanwhile */
	assert_true(tb_gate_cancel(&g, &w1));
	assert_int_equal(atomic_load(&g.pending), 2);
	assert_ptr_equal(g.head, &w2);
	/* The gate counts grants and refusals; a timeout is counted by whoever waited. */
	assert_int_equal(atomic_load(&g.timed_out), 0);
	assert_int_equal(atomic_load(&g.acquired), 1);

	expect_handed_to(&g, &w2);
	assert_int_equal(atomic_load(&w1.granted), 0);
	expect_handed_to(&g, &w3);
	assert_int_equal(atomic_load(&g.pending), 0);
}

static void test_cancel_middle_and_tail(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2, w3, w4;

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	expect_queued(&g, &w1);
	expect_queued(&g, &w2);
	expect_queued(&g, &w3);
	expect_queued(&g, &w4);
	assert_true(tb_gate_cancel(&g, &w2));
	assert_true(tb_gate_cancel(&g, &w4));
	assert_ptr_equal(g.head, &w1);
	assert_ptr_equal(g.tail, &w3);
	assert_int_equal(atomic_load(&g.pending), 2);
	expect_handed_to(&g, &w1);
	expect_handed_to(&g, &w3);
	assert_null(tb_gate_release(&g));
	assert_int_equal(atomic_load(&g.leased), 0);
	assert_int_equal(atomic_load(&w2.granted), 0);
	assert_int_equal(atomic_load(&w4.granted), 0);
}

static void test_cancel_every_waiter_reopens_fast_path(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2;

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	expect_queued(&g, &w1);
	expect_queued(&g, &w2);
	assert_true(tb_gate_cancel(&g, &w2));
	assert_true(tb_gate_cancel(&g, &w1));
	assert_null(g.head);
	assert_null(g.tail);
	assert_int_equal(atomic_load(&g.pending), 0);
	assert_null(tb_gate_release(&g));
	assert_true(tb_gate_try_acquire(&g));
}

/* The release raced the timeout: the slot was handed over before the waiter cancelled. It
 * keeps the slot (cancel says false), and must give it back like any holder. */
static void test_cancel_after_grant_keeps_slot(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2;

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	expect_queued(&g, &w1);
	expect_queued(&g, &w2);
	expect_handed_to(&g, &w1);
	assert_false(tb_gate_cancel(&g, &w1));
	assert_int_equal(atomic_load(&g.leased), 1);
	assert_int_equal(atomic_load(&g.pending), 1);
	assert_ptr_equal(g.head, &w2);
	/* w1 kept the slot: its release goes on to w2, not to a free slot. */
	expect_handed_to(&g, &w2);
	assert_null(tb_gate_release(&g));
	assert_int_equal(atomic_load(&g.leased), 0);
}

static void test_max_pending_rejects(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2, w3, w4;

	(void)state;
	gate(&g, 1, 2);
	fill(&g);
	expect_queued(&g, &w1);
	expect_queued(&g, &w2);
	assert_int_equal(tb_gate_enqueue(&g, &w3), TB_GATE_REJECTED);
	assert_int_equal(tb_gate_enqueue(&g, &w4), TB_GATE_REJECTED);
	assert_int_equal(atomic_load(&g.rejected), 2);
	assert_int_equal(atomic_load(&g.pending), 2);
	assert_ptr_equal(g.tail, &w2);
	assert_null(w2.next);

	/* A seat frees up (w1 served): the next caller may queue again. */
	expect_handed_to(&g, &w1);
	expect_queued(&g, &w3);
	assert_int_equal(tb_gate_enqueue(&g, &w4), TB_GATE_REJECTED);
	assert_int_equal(atomic_load(&g.rejected), 3);
	expect_handed_to(&g, &w2);
	expect_handed_to(&g, &w3);
	assert_int_equal(atomic_load(&g.acquired), 1 + 3);
}

static void test_max_pending_zero_is_unlimited(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w[64];

	(void)state;
	gate(&g, 1, 0);
	fill(&g);
	for (int i = 0; i < 64; i++)
		expect_queued(&g, &w[i]);
	assert_int_equal(atomic_load(&g.pending), 64);
	assert_int_equal(atomic_load(&g.rejected), 0);
	for (int i = 0; i < 64; i++)
		expect_handed_to(&g, &w[i]);
}

/* Experiment B on the state machine: 20 callers, 5 slots, each holding 500 ms, each giving
 * up after 300 ms: 5 are served, 15 time out, nobody else is granted anything. */
static void test_counters_experiment_b(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w[15];
	struct tb_expiry bound[15];
	int64_t now = T0;
	int took = 0;

	(void)state;
	gate(&g, 5, 0);
	for (int i = 0; i < 5; i++)
		took += tb_gate_try_acquire(&g);
	assert_int_equal(took, 5);
	for (int i = 0; i < 15; i++) {
		assert_false(tb_gate_try_acquire(&g));
		expect_queued(&g, &w[i]);
		bound[i] = tb_gate_wait_bound(now, 300 * MS, TB_NEVER);
	}
	now += 300 * MS;
	for (int i = 0; i < 15; i++) {
		assert_true(now >= bound[i].at);
		assert_int_equal(bound[i].phase, TB_PHASE_GATE);
		assert_true(tb_gate_cancel(&g, &w[i]));
	}
	now += 200 * MS;
	for (int i = 0; i < 5; i++)
		assert_null(tb_gate_release(&g));
	assert_int_equal(atomic_load(&g.leased), 0);
	assert_int_equal(atomic_load(&g.pending), 0);
	assert_int_equal(atomic_load(&g.acquired), 5);
	assert_int_equal(atomic_load(&g.rejected), 0);
}

/* The same without an acquire limit: 4 waves of 5, every grant a hand-off in order. */
static void test_waves_without_acquire_limit(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w[15];
	struct tb_expiry bound = tb_gate_wait_bound(T0, 0, TB_NEVER);
	int next = 0;

	(void)state;
	assert_int_equal(bound.at, TB_NEVER);
	gate(&g, 5, 0);
	fill(&g);
	for (int i = 0; i < 15; i++)
		expect_queued(&g, &w[i]);
	for (int wave = 1; wave < 4; wave++)
		for (int k = 0; k < 5; k++, next++) {
			expect_handed_to(&g, &w[next]);
			for (int j = next + 1; j < 15; j++)
				assert_int_equal(atomic_load(&w[j].granted), 0);
		}
	for (int k = 0; k < 5; k++)
		assert_null(tb_gate_release(&g));
	assert_int_equal(atomic_load(&g.leased), 0);
	assert_int_equal(atomic_load(&g.acquired), 20);
}

static void test_fork_child_empties_queue(void **state)
{
	struct tb_gate g;
	struct tb_gate_waiter w1, w2;

	(void)state;
	gate(&g, 2, 0);
	fill(&g);
	expect_queued(&g, &w1);
	expect_queued(&g, &w2);
	tb_gate_fork_child(&g);
	/* The child inherits the sockets, not the waiting threads: every slot is free until
	 * the sockets' are counted back. */
	assert_null(g.head);
	assert_null(g.tail);
	assert_int_equal(atomic_load(&g.pending), 0);
	assert_int_equal(atomic_load(&g.leased), 0);
	tb_gate_fork_held(&g);
	tb_gate_fork_held(&g);
	assert_int_equal(atomic_load(&g.leased), 2);
	assert_null(tb_gate_release(&g));
	assert_true(tb_gate_try_acquire(&g));
}

/* A slot another thread took but no socket holds yet (a connect under way at the fork):
 * not counted back, so the child's gate is not one short for ever
 * (regress/gate_fork_slot_in_hand). */
static void test_fork_child_frees_a_slot_no_socket_holds(void **state)
{
	struct tb_gate g;

	(void)state;
	gate(&g, 1, 0);
	assert_true(tb_gate_try_acquire(&g));
	tb_gate_fork_child(&g);
	assert_true(tb_gate_try_acquire(&g));
	assert_false(tb_gate_try_acquire(&g));
}

static void test_wait_bound_acquire_first(void **state)
{
	struct tb_expiry e = tb_gate_wait_bound(T0, 300 * MS, T0 + 500 * MS);

	(void)state;
	assert_int_equal(e.at, T0 + 300 * MS);
	assert_int_equal(e.phase, TB_PHASE_GATE);
}

static void test_wait_bound_deadline_first(void **state)
{
	/* The budget bounds the wait: 300 ms of deadline left, acquire_timeout 5 s. */
	struct tb_expiry e = tb_gate_wait_bound(T0, 5 * S, T0 + 300 * MS);

	(void)state;
	assert_int_equal(e.at, T0 + 300 * MS);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);

	/* A deadline already past bounds the wait at once. */
	e = tb_gate_wait_bound(T0, 5 * S, T0 - 1);
	assert_int_equal(e.at, T0 - 1);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
}

static void test_wait_bound_tie_is_deadline(void **state)
{
	struct tb_expiry e = tb_gate_wait_bound(T0, 300 * MS, T0 + 300 * MS);

	(void)state;
	assert_int_equal(e.at, T0 + 300 * MS);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
}

static void test_wait_bound_unbounded(void **state)
{
	struct tb_expiry e = tb_gate_wait_bound(T0, 0, TB_NEVER);

	(void)state;
	assert_int_equal(e.at, TB_NEVER);

	/* acquire_timeout 0 means no acquire limit: only the deadline bounds the wait. */
	e = tb_gate_wait_bound(T0, 0, T0 + 2 * S);
	assert_int_equal(e.at, T0 + 2 * S);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
}

static void test_wait_bound_saturates(void **state)
{
	struct tb_expiry e = tb_gate_wait_bound(TB_NEVER - 10, 300 * MS, TB_NEVER);

	(void)state;
	assert_int_equal(e.at, TB_NEVER);
	e = tb_gate_wait_bound(T0, INT64_MAX, TB_NEVER);
	assert_int_equal(e.at, TB_NEVER);
	e = tb_gate_wait_bound(T0, INT64_MAX, T0 + S);
	assert_int_equal(e.at, T0 + S);
	assert_int_equal(e.phase, TB_PHASE_DEADLINE);
}

static void test_file_name_ipv4_and_ipv6(void **state)
{
	struct tb_dest d4 = dest_v4("127.0.0.1", 8080), d6 = { .family = AF_INET6, .port = 8080 };
	char buf[96];

	(void)state;
	d6.addr[15] = 1;
	assert_int_equal(tb_gate_file_name(&d4, 5, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "gate-127.0.0.1_8080-max5");
	assert_int_equal(tb_gate_file_name(&d6, 30, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "gate-___1__8080-max30");
}

/* Two unix paths (different hashes) get two files; the size is part of the name. */
static void test_file_name_unix_by_path_hash(void **state)
{
	struct tb_dest a = { .family = AF_UNIX }, b = { .family = AF_UNIX };
	char na[96], nb[96];

	(void)state;
	for (int i = 0; i < 16; i++) {
		a.addr[i] = (uint8_t)(0xa0 + i);
		b.addr[i] = (uint8_t)(0xa0 + i);
	}
	b.addr[15] ^= 1;
	assert_int_equal(tb_gate_file_name(&a, 1, na, sizeof(na)), 0);
	assert_int_equal(tb_gate_file_name(&b, 1, nb, sizeof(nb)), 0);
	assert_string_equal(na, "gate-unix-a0a1a2a3a4a5a6a7a8a9aaabacadaeaf-max1");
	assert_string_not_equal(na, nb);
}

static void test_file_name_refuses_short_buffer_and_no_family(void **state)
{
	struct tb_dest d = dest_v4("127.0.0.1", 8080), none = { 0 };
	char buf[96];

	(void)state;
	assert_int_equal(tb_gate_file_name(&d, 5, buf, 10), -1);
	assert_int_equal(tb_gate_file_name(&none, 5, buf, sizeof(buf)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fast_path_until_full),
		cmocka_unit_test(test_enqueue_takes_a_free_slot),
		cmocka_unit_test(test_fifo_order),
		cmocka_unit_test(test_waiter_blocks_the_fast_path),
		cmocka_unit_test(test_enqueue_behind_the_queue),
		cmocka_unit_test(test_release_without_waiter),
		cmocka_unit_test(test_release_wakes_exactly_one),
		cmocka_unit_test(test_cancel_on_timeout),
		cmocka_unit_test(test_cancel_middle_and_tail),
		cmocka_unit_test(test_cancel_every_waiter_reopens_fast_path),
		cmocka_unit_test(test_cancel_after_grant_keeps_slot),
		cmocka_unit_test(test_max_pending_rejects),
		cmocka_unit_test(test_max_pending_zero_is_unlimited),
		cmocka_unit_test(test_counters_experiment_b),
		cmocka_unit_test(test_waves_without_acquire_limit),
		cmocka_unit_test(test_fork_child_empties_queue),
		cmocka_unit_test(test_fork_child_frees_a_slot_no_socket_holds),
		cmocka_unit_test(test_wait_bound_acquire_first),
		cmocka_unit_test(test_wait_bound_deadline_first),
		cmocka_unit_test(test_wait_bound_tie_is_deadline),
		cmocka_unit_test(test_wait_bound_unbounded),
		cmocka_unit_test(test_wait_bound_saturates),
		cmocka_unit_test(test_file_name_ipv4_and_ipv6),
		cmocka_unit_test(test_file_name_unix_by_path_hash),
		cmocka_unit_test(test_file_name_refuses_short_buffer_and_no_family),
	};

	return cmocka_run_group_tests_name("gate", tests, NULL, NULL);
}
