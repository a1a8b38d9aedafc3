/* phase.c - idle accounting and expiry choice for one wait.
 * Kept pure so the unit tests can walk a socket through many waits on a simulated clock. */
#include "phase.h"

void tb_idle_wait_begin(struct tb_idle *c, int64_t now)
{
	c->wait_begin = now;
}

void tb_idle_wait_end(struct tb_idle *c, int64_t now)
{
	if (now > c->wait_begin)
		c->idle_ns += now - c->wait_begin;
}

void tb_idle_progress(struct tb_idle *c)
{
	c->idle_ns = 0;
}

int64_t tb_idle_silence(const struct tb_idle *c, bool waiting, int64_t now)
{
	int64_t s = c->idle_ns;

	if (waiting && now > c->wait_begin)
		s += now - c->wait_begin;
	return s;
}

int64_t tb_idle_expiry(const struct tb_idle *c, int64_t limit_ns)
{
	int64_t left;

	if (limit_ns <= 0)
		return TB_NEVER;
	left = limit_ns - c->idle_ns;
	if (left < 0)
		left = 0;
	if (c->wait_begin > TB_NEVER - left)
		return TB_NEVER;
	return c->wait_begin + left;
}

struct tb_expiry tb_expiry_pick(enum tb_phase phase, int64_t phase_at, int64_t call_deadline)
{
	struct tb_expiry e = { phase_at, phase };

	if (call_deadline <= phase_at) {
		e.at = call_deadline;
		e.phase = TB_PHASE_DEADLINE;
	}
	return e;
}
