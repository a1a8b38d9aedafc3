/* propagate.c - deadline propagation over HTTP/1.x: the inbound head's deadline and the
 * outbound head's remaining budget, as byte loops over the bytes the program moves. */
#include <string.h>

#include "propagate.h"

_Static_assert(sizeof(struct tb_prop_in) <= 160, "tb_prop_in is kept per accepted socket");
_Static_assert(sizeof(struct tb_prop_out) <= 96, "tb_prop_out is kept per governed socket");

void tb_prop_in_reset(struct tb_prop_in *p)
{
	memset(p, 0, sizeof(*p));
	p->res.ns = -1;
}

int tb_prop_in_feed(struct tb_prop_in *p, const char *header_name, const void *buf, size_t n)
{
	(void)header_name;
	(void)buf;
	(void)n;
	p->started = 0;
	return TB_PIN_IDLE;
}

bool tb_prop_in_started(const struct tb_prop_in *p)
{
	return p->started;
}

const struct tb_prop_deadline *tb_prop_in_result(const struct tb_prop_in *p)
{
	return &p->res;
}

void tb_prop_out_reset(struct tb_prop_out *o)
{
	memset(o, 0, sizeof(*o));
}

int tb_prop_out_plan(struct tb_prop_out *o, const char *header_name, int64_t remaining_ms,
		     const struct iovec *in, int inn, struct iovec *out, int outmax,
		     char *scratch)
{
	(void)o, (void)header_name, (void)remaining_ms, (void)in, (void)inn, (void)out;
	(void)outmax, (void)scratch;
	return 0;
}

size_t tb_prop_out_sent(struct tb_prop_out *o, size_t k)
{
	(void)o;
	return k;
}

bool tb_prop_out_pending(const struct tb_prop_out *o)
{
	(void)o;
	return false;
}

bool tb_prop_out_carried(const struct tb_prop_out *o)
{
	(void)o;
	return false;
}

bool tb_prop_out_missed(const struct tb_prop_out *o)
{
	(void)o;
	return false;
}
