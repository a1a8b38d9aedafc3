/* test_suggest.c - `timebox suggest`'s arithmetic on made-up measurements: quantiles, the
 * seed's factor, Little's law, fitting a budget, and output that parses and lints clean; and
 * TIMEBOX_OBSERVE turning every limit off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "env.h"
#include "lint.h"
#include "suggest.h"
#include "unit.h"

static struct tb_suggest_in in;
static struct tb_suggestion out;
static const struct tb_suggest_opts no_budget = { 0 };

/* n values of ms milliseconds recorded into a histogram, added to d. */
static void record(struct tb_hist *h, uint64_t n, double ms)
{
	for (uint64_t i = 0; i < n; i++)
		tb_hist_record(h, (int64_t)(ms * 1e6));
}

static void dist_of(struct tb_dist *d, struct tb_hist *h)
{
	struct tb_hist_snap s;

	tb_hist_snapshot(h, &s);
	tb_dist_from_hist(d, &s);
}

/*
 * A destination whose calls answer in `base` ms except 1 % in `tail` ms and 0.2 % in
 * `worst` (so that the p99 is a tail one and the p99.9 a worst one), at qps calls/s, with
 * handshakes of 0.2 ms.
 */
static void measured(uint64_t calls, double base, double tail, double worst, double qps)
{
	static struct tb_hist conn, fb, call;
	uint64_t slow = calls / 100, worse = calls / 500;

	memset(&in, 0, sizeof(in));
	memset(&conn, 0, sizeof(conn));
	memset(&fb, 0, sizeof(fb));
	memset(&call, 0, sizeof(call));
	snprintf(in.dest, sizeof(in.dest), "10.0.0.5:8080");
	record(&conn, 8, 0.2);
	record(&fb, calls - slow - worse, base);
	record(&fb, slow, tail);
	record(&fb, worse, worst);
	record(&call, calls - slow - worse, base + 0.5);
	record(&call, slow, tail + 0.5);
	record(&call, worse, worst + 0.5);
	dist_of(&in.connect, &conn);
	dist_of(&in.first_byte, &fb);
	dist_of(&in.call, &call);
	in.calls = calls;
	in.qps = qps;
	in.leased = -1;
}

static double ms(int64_t ns)
{
	return (double)ns / 1e6;
}

static bool warned(const char *fragment)
{
	for (int i = 0; i < out.nwarnings; i++)
		if (strstr(out.warning[i], fragment) != NULL)
			return true;
	return false;
}

/* The suggestion's text parses without an error and `timebox check` finds nothing in it. */
static void renders_clean(const struct tb_suggest_opts *o)
{
	size_t need = tb_suggest_render(&in, &out, 1, o, "pid 1 (test)", "a test", NULL, 0);
	char *text = malloc(need + 1);
	struct tb_finding f[8];
	struct tb_config *c;
	int errors = 0;
	size_t n;

	assert_non_null(text);
	assert_int_equal(tb_suggest_render(&in, &out, 1, o, "pid 1 (test)", "a test", text,
					   need + 1), need);
	c = tb_config_parse(text, "suggested.conf", NULL, NULL, NULL, &errors);
	assert_non_null(c);
	if (errors != 0)
		fail_msg("%d errors in:\n%s", errors, text);
	n = tb_lint_config(c, 0, f, 8);
	if (n != 0)
		fail_msg("lint: [%s] %s in:\n%s", f[0].rule, f[0].message, text);
	assert_int_equal(c->nrules, out.usable ? 1 : 0);
	tb_config_free(c);
	free(text);
}

static void test_quantile_interpolates_within_a_bucket(void **state)
{
	struct tb_dist d;

	(void)state;
	tb_dist_init(&d);
	assert_int_equal(tb_dist_quantile_ns(&d, 0.99), -1);
	tb_dist_add(&d, 0, 10, 50);
	tb_dist_add(&d, 10, 20, 50);
	tb_dist_add(&d, 15, 30, 5); /* overlaps the previous: refused */
	assert_int_equal(d.n, 2);
	assert_int_equal(tb_dist_quantile_ns(&d, 0.5), 10 * 1000);
	assert_int_equal(tb_dist_quantile_ns(&d, 0.75), 15 * 1000);
	assert_int_equal(tb_dist_quantile_ns(&d, 1.0), 20 * 1000);
}

static void test_quantile_of_a_histogram_is_within_its_bucket(void **state)
{
	(void)state;
	measured(10000, 20, 80, 90, 100);
	/* p99 falls on the last of the 80 ms values: within the ~12 % bucket around 80 ms. */
	assert_true(ms(tb_dist_quantile_ns(&in.first_byte, 0.99)) >= 80 * 0.88);
	assert_true(ms(tb_dist_quantile_ns(&in.first_byte, 0.99)) <= 80 * 1.13);
	assert_true(ms(tb_dist_quantile_ns(&in.first_byte, 0.5)) >= 20 * 0.88);
	assert_true(ms(tb_dist_quantile_ns(&in.first_byte, 0.5)) <= 20 * 1.13);
}

static void test_tight_tail_gets_the_seeds_lower_factor(void **state)
{
	(void)state;
	measured(10000, 20, 80, 90, 100);
	tb_suggest(&in, &no_budget, &out);
	assert_true(out.usable);
	assert_true(out.fb_factor == 1.5);
	assert_true(ms(out.first_byte.ns) >= 1.5 * ms(out.fb_p99));
	assert_true(ms(out.first_byte.ns) < 1.5 * ms(out.fb_p99) + 1);
	assert_non_null(strstr(out.first_byte.why, "1.5"));
	assert_int_equal(out.nwarnings, 0);
}

static void test_tail_between_gets_the_factor_that_covers_it(void **state)
{
	(void)state;
	measured(10000, 20, 60, 100, 100); /* p99.9 / p99 ~ 1.7 */
	tb_suggest(&in, &no_budget, &out);
	assert_true(out.fb_factor > 1.5 && out.fb_factor <= 2.0);
	assert_true(out.fb_factor * (double)out.fb_p99 >= (double)out.fb_p999 * 0.999);
	assert_non_null(strstr(out.first_byte.why, "covers the p99.9"));
}

static void test_long_tail_gets_two_and_a_warning(void **state)
{
	(void)state;
	measured(10000, 20, 60, 400, 100);
	tb_suggest(&in, &no_budget, &out);
	assert_true(out.fb_factor == 2.0);
	assert_true(warned("will be cut"));
}

static void test_few_calls_get_two_and_say_so(void **state)
{
	(void)state;
	measured(50, 20, 80, 90, 5);
	tb_suggest(&in, &no_budget, &out);
	assert_true(out.fb_factor == 2.0 && out.call_factor == 2.0);
	assert_non_null(strstr(out.first_byte.why, "too few"));
	assert_true(warned("only 50 calls"));
	renders_clean(&no_budget);
}

static void test_connect_has_a_floor(void **state)
{
	(void)state;
	measured(10000, 20, 80, 90, 100);
	tb_suggest(&in, &no_budget, &out);
	assert_int_equal(out.connect.ns, TB_SUGGEST_CONNECT_FLOOR_NS);
	assert_non_null(strstr(out.connect.why, "floor"));
}

static void test_max_conns_is_littles_law(void **state)
{
	(void)state;
	/* 200 calls/s x p99 ~80.5 ms = 16.1 in flight, x 1.5 = 24.2: 25. */
	measured(10000, 20, 80, 90, 200);
	tb_suggest(&in, &no_budget, &out);
	assert_true(out.little > 200 * 0.080 * 0.88 && out.little < 200 * 0.081 * 1.13);
	assert_int_equal(out.max_conns, (int)(out.little * 1.5) + 1);
	assert_int_equal(out.acquire.ns, TB_SUGGEST_ACQUIRE_NS);
	renders_clean(&no_budget);
}

static void test_max_conns_never_below_the_programs_pool(void **state)
{
	(void)state;
	measured(10000, 20, 80, 90, 200);
	in.leased = 40;
	tb_suggest(&in, &no_budget, &out);
	assert_int_equal(out.max_conns, 40);
	assert_non_null(strstr(out.why_max_conns, "its own pool"));
	assert_false(warned("twice")); /* 40 < 2 x 25 */
	in.leased = 60;
	tb_suggest(&in, &no_budget, &out);
	assert_true(warned("cap-vs-littles-law"));
}

static void test_no_rate_leaves_max_conns_off(void **state)
{
	(void)state;
	measured(10000, 20, 80, 90, -1);
	tb_suggest(&in, &no_budget, &out);
	assert_int_equal(out.max_conns, 0);
	assert_int_equal(out.acquire.ns, 0);
	assert_non_null(strstr(out.why_max_conns, "no rate"));
	renders_clean(&no_budget);
}

/* First bytes measured, no call seen to its end: the reason says so, not "no call". */
static void test_calls_never_ended_leave_max_conns_off_and_say_why(void **state)
{
	(void)state;
	measured(10000, 20, 80, 90, 200);
	tb_dist_init(&in.call);
	tb_suggest(&in, &no_budget, &out);
	assert_true(out.usable);
	assert_int_equal(out.max_conns, 0);
	assert_non_null(strstr(out.why_max_conns, "none was seen to end"));
	renders_clean(&no_budget);
}

static void test_without_budget_deadline_leaves_room_for_a_retry(void **state)
{
	(void)state;
	measured(10000, 20, 80, 90, 200);
	tb_suggest(&in, &no_budget, &out);
	assert_int_equal(out.deadline.ns,
			 2 * out.read.ns + out.connect.ns + out.acquire.ns);
	renders_clean(&no_budget);
}

static void test_budget_that_fits_is_the_deadline(void **state)
{
	const struct tb_suggest_opts o = { 300 * MS };

	(void)state;
	measured(10000, 20, 50, 55, 200);
	tb_suggest(&in, &o, &out);
	assert_int_equal(out.deadline.ns, 300 * MS);
	assert_int_equal(out.connect.ns, TB_SUGGEST_CONNECT_FLOOR_NS);
	assert_int_equal(out.acquire.ns, TB_SUGGEST_ACQUIRE_NS);
	assert_int_equal(out.nwarnings, 0);
	renders_clean(&o);
}

static void test_tight_budget_shrinks_acquire_and_connect(void **state)
{
	const struct tb_suggest_opts o = { 150 * MS };

	(void)state;
	measured(10000, 20, 80, 90, 200); /* first byte ~120 ms: 30 ms left */
	tb_suggest(&in, &o, &out);
	assert_true(out.first_byte.ns > 0 && out.first_byte.ns < 150 * MS);
	assert_true(out.acquire.ns + out.connect.ns + out.first_byte.ns <= 150 * MS);
	assert_true(out.connect.ns > 0 && out.connect.ns < TB_SUGGEST_CONNECT_FLOOR_NS);
	assert_non_null(strstr(out.connect.why, "shrunk"));
	renders_clean(&o);
}

static void test_budget_below_the_p99_says_change_the_call(void **state)
{
	const struct tb_suggest_opts o = { 200 * MS };

	(void)state;
	measured(10000, 100, 250, 260, 50);
	tb_suggest(&in, &o, &out);
	assert_true(warned("does not fit the upstream budget"));
	assert_true(warned("change the call (batch, cache, asynchronous), not the timeout"));
	assert_int_equal(out.read.ns, 0);
	assert_int_equal(out.first_byte.ns, 0);
	assert_non_null(strstr(out.read.why, "left off"));
	assert_int_equal(out.deadline.ns, 200 * MS);
	renders_clean(&o);
}

static void test_margin_beyond_the_budget_is_a_warning_too(void **state)
{
	const struct tb_suggest_opts o = { 100 * MS };

	(void)state;
	measured(10000, 20, 80, 90, 50); /* p99 ~80 fits, 1.5 x p99 does not */
	tb_suggest(&in, &o, &out);
	assert_true(warned("with the seed's margin"));
	renders_clean(&o);
}

static void test_no_response_writes_no_rule(void **state)
{
	(void)state;
	memset(&in, 0, sizeof(in));
	snprintf(in.dest, sizeof(in.dest), "10.0.0.5:8080");
	in.calls = 3;
	in.qps = 1;
	tb_suggest(&in, &no_budget, &out);
	assert_false(out.usable);
	assert_non_null(strstr(out.skipped, "no response"));
	renders_clean(&no_budget);
}

static void test_learned_host_is_matched_with_the_address(void **state)
{
	size_t need;
	char *text;

	(void)state;
	measured(10000, 20, 80, 90, 200);
	snprintf(in.host, sizeof(in.host), "inventory");
	tb_suggest(&in, &no_budget, &out);
	need = tb_suggest_render(&in, &out, 1, &no_budget, "x", "y", NULL, 0);
	text = malloc(need + 1);
	assert_non_null(text);
	tb_suggest_render(&in, &out, 1, &no_budget, "x", "y", text, need + 1);
	assert_non_null(strstr(text, "match = [ \"inventory:8080\", \"10.0.0.5:8080\" ];"));
	free(text);
	renders_clean(&no_budget);
}

/* ---- TIMEBOX_OBSERVE ---------------------------------------------------------------------- */

static const char *hostile_env(const char *name, void *ctx)
{
	static const char *const vars[][2] = {
		{ "TIMEBOX_OBSERVE", "1" },	    { "TIMEBOX_READ_TIMEOUT", "5ms" },
		{ "TIMEBOX_DEADLINE", "10ms" },	    { "TIMEBOX_MAX_CONNS", "1" },
		{ "TIMEBOX_MAX_PENDING", "1" },	    { "TIMEBOX_ACQUIRE_TIMEOUT", "1ms" },
		{ "TIMEBOX_CONNECT_TIMEOUT", "1ms" }, { "TIMEBOX_GATE_SHARED", "1" },
		{ "TIMEBOX_STRICT", "1" },
	};

	(void)ctx;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (strcmp(vars[i][0], name) == 0)
			return vars[i][1];
	return NULL;
}

static void no_limit(const struct tb_settings *s)
{
	assert_true(s->observe);
	assert_int_equal(s->dns_ns, 0);
	assert_int_equal(s->connect_ns, 0);
	assert_int_equal(s->write_ns, 0);
	assert_int_equal(s->first_byte_ns, 0);
	assert_int_equal(s->read_ns, 0);
	assert_int_equal(s->deadline_ns, 0);
	assert_int_equal(s->acquire_ns, 0);
	assert_int_equal(s->max_pending, 0);
	assert_int_equal(s->max_conns, TB_MAX_CONNS_LIMIT);
	assert_false(s->gate_shared);
	assert_false(s->strict);
	/* Still tracked: the statistics need the sockets. */
	assert_true(tb_settings_any_limit(s));
}

static void test_observe_turns_every_limit_off(void **state)
{
	struct tb_settings s;

	(void)state;
	assert_int_equal(tb_env_load(&s, hostile_env, NULL, NULL, NULL), 0);
	no_limit(&s);
}

static void test_observe_overrides_the_file(void **state)
{
	const char *text = "defaults = { read_timeout = \"5ms\"; deadline = \"10ms\"; };\n"
			   "destinations = ( { match = \"10.0.0.5:8080\"; max_conns = 1;\n"
			   "  first_byte_timeout = \"3ms\"; acquire_timeout = \"1ms\"; },\n"
			   "  { match = \"10.0.0.6:8080\"; enabled = false; } );\n";
	struct tb_overrides ov;
	struct tb_config *c;
	struct tb_dest d = dest_ip("10.0.0.5", 8080), other = dest_ip("10.0.0.6", 8080);
	struct tb_target t = { &d, NULL, NULL, 0 };
	struct tb_finding f[4];
	int errors = 0;

	(void)state;
	memset(&ov, 0, sizeof(ov));
	tb_overrides_from(&ov, hostile_env, NULL, TB_ORIGIN_ENV);
	c = tb_config_parse(text, "t.conf", &ov, NULL, NULL, &errors);
	assert_non_null(c);
	assert_int_equal(errors, 0);
	no_limit(&c->defaults.set);
	no_limit(&c->rules[0].r.set);
	assert_ptr_equal(tb_config_governing(c, &t), &c->rules[0].r.set);
	t.dest = &other; /* a destination the file leaves alone stays alone */
	assert_null(tb_config_governing(c, &t));
	assert_int_equal(tb_lint_config(c, 0, f, 4), 0);
	tb_config_free(c);

	/* The file's own observe, in defaults only: a rule may not set it. */
	c = tb_config_parse("defaults = { observe = true; read_timeout = \"5ms\"; };",
			    "t.conf", NULL, NULL, NULL, &errors);
	assert_int_equal(errors, 0);
	no_limit(&c->defaults.set);
	tb_config_free(c);
	c = tb_config_parse("destinations = ( { match = \"10.0.0.5:80\"; observe = true; } );",
			    "t.conf", NULL, NULL, NULL, &errors);
	assert_int_equal(errors, 1);
	tb_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantile_interpolates_within_a_bucket),
		cmocka_unit_test(test_quantile_of_a_histogram_is_within_its_bucket),
		cmocka_unit_test(test_tight_tail_gets_the_seeds_lower_factor),
		cmocka_unit_test(test_tail_between_gets_the_factor_that_covers_it),
		cmocka_unit_test(test_long_tail_gets_two_and_a_warning),
		cmocka_unit_test(test_few_calls_get_two_and_say_so),
		cmocka_unit_test(test_connect_has_a_floor),
		cmocka_unit_test(test_max_conns_is_littles_law),
		cmocka_unit_test(test_max_conns_never_below_the_programs_pool),
		cmocka_unit_test(test_no_rate_leaves_max_conns_off),
		cmocka_unit_test(test_calls_never_ended_leave_max_conns_off_and_say_why),
		cmocka_unit_test(test_without_budget_deadline_leaves_room_for_a_retry),
		cmocka_unit_test(test_budget_that_fits_is_the_deadline),
		cmocka_unit_test(test_tight_budget_shrinks_acquire_and_connect),
		cmocka_unit_test(test_budget_below_the_p99_says_change_the_call),
		cmocka_unit_test(test_margin_beyond_the_budget_is_a_warning_too),
		cmocka_unit_test(test_no_response_writes_no_rule),
		cmocka_unit_test(test_learned_host_is_matched_with_the_address),
		cmocka_unit_test(test_observe_turns_every_limit_off),
		cmocka_unit_test(test_observe_overrides_the_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
