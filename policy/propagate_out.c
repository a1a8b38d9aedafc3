/* propagate_out.c - the remaining budget written into the HTTP/1.x request heads a program
 * sends: planned per send over its own iovecs, exact under partial accepts. */
#include <string.h>

#include "propagate_impl.h"

_Static_assert(sizeof(struct tb_prop_out) <= 96, "tb_prop_out is kept per governed socket");

enum {
	OUT_START, OUT_METHOD, OUT_TARGET0, OUT_TARGET, OUT_VERSION, OUT_RL_EOL, OUT_RL_CR,
	OUT_LSTART, OUT_NAME, OUT_VALUE, OUT_SKIP, OUT_CR, OUT_END_CR,
	OUT_BODY, OUT_OFF, /* passive until reset */
};

/* tb_prop_scan.flags */
#define SF_COPY_SEEN 0x1u /* the request's first line with the configured name began */
#define SF_IN_COPY   0x2u /* ... and the scan is in its value */
#define SF_LEAD      0x4u /* ... which began with whitespace */

/* scan_step's events */
#define EV_RL_END     0x01u /* the request line ended with this byte */
#define EV_LINE_START 0x02u /* this byte begins a header line (not the blank one) */
#define EV_COPY_NAME  0x04u /* this byte is the colon of the program's copy */
#define EV_COPY_VALUE 0x08u /* this byte is in the copy's value (index m->vlen - 1) */
#define EV_COPY_END   0x10u /* the copy's value ended at this byte (CR or LF) */

/* tb_prop_out.ov_fl: the form of the in-place value */
#define OV_UNIT 0x1u /* the program wrote a grpc unit: ours is written as `<ms>m` */
#define OV_LEAD 0x2u /* the program's value began with whitespace: ours does too */

/* tb_prop_out.pflags: the last plan's decisions */
#define PF_INS_NEW  0x01u /* insert at rl_end */
#define PF_INS_OWED 0x02u /* the rest of an inserted line goes first */
#define PF_SKIP_INS 0x04u /* no insert at rl_end: the program's copy carries the value */
#define PF_OV_NEW   0x08u /* arm the in-place value for the copy at copy_at */
#define PF_MISSED   0x10u /* the send goes unchanged although rl_end wanted a header */
#define PF_ACTIVE   0x20u /* a plan awaits tb_prop_out_sent (its in may be NULL: n == 0) */

/* tb_prop_out.rflags: this request's outcome */
#define RF_CARRIED 0x1u
#define RF_MISSED  0x2u

void tb_prop_out_reset(struct tb_prop_out *o)
{
	memset(o, 0, sizeof(*o));
}

int tb_prop_out_verdict(const struct tb_prop_out *o)
{
	if (o->m.st == OUT_OFF) /* only ever reached before the request line's end */
		return -1;
	return o->m.st >= OUT_LSTART ? 1 : 0;
}

/* One byte of the program's request as far as the head goes (m->st < OUT_BODY): the
 * request line validated, header lines told apart, the first copy of the configured
 * header's value followed. Returns EV_* bits. */
static inline unsigned scan_step(struct tb_prop_scan *m, unsigned char c, const char *name,
				 unsigned nlen)
{
	unsigned ev = 0;

	if (m->st == OUT_START) {
		if (c == '\r' || c == '\n') {
			if (++m->hbytes > TB_PROP_HEAD_MAX)
				m->st = OUT_OFF;
			return 0;
		}
		m->hbytes = 1;
		m->st = is_tchar(c) ? OUT_METHOD : OUT_OFF; /* TLS's 0x16, RESP's *, ... */
		return 0;
	}
	/* The bound never cuts an in-place value short: its span is at most SPAN_MAX. */
	if (++m->hbytes > TB_PROP_HEAD_MAX &&
	    !((m->flags & SF_IN_COPY) && m->vlen < TB_PROP_SPAN_MAX)) {
		if (m->st == OUT_VALUE)
			ev |= EV_COPY_END;
		m->flags &= (uint8_t)~SF_IN_COPY;
		m->st = m->st < OUT_LSTART ? OUT_OFF : OUT_BODY;
		return ev;
	}
	switch (m->st) {
	case OUT_METHOD: /* m->hbytes - 1 method bytes before c */
		if (c == ' ')
			m->st = OUT_TARGET0;
		else if (!is_tchar(c) || m->hbytes > TB_PROP_METHOD_MAX)
			m->st = OUT_OFF;
		break;
	case OUT_TARGET0:
		m->st = c <= 0x20 || c == 0x7f ? OUT_OFF : OUT_TARGET;
		break;
	case OUT_TARGET:
		if (c == ' ') {
			m->st = OUT_VERSION;
			m->pos = 0;
		} else if (c < 0x20 || c == 0x7f) {
			m->st = OUT_OFF;
		}
		break;
	case OUT_VERSION:
		if (m->pos < 7 ? c == (unsigned char)HTTP1[m->pos] : c >= '0' && c <= '9') {
			if (++m->pos == 8)
				m->st = OUT_RL_EOL;
		} else {
			m->st = OUT_OFF;
		}
		break;
	case OUT_RL_EOL:
	case OUT_RL_CR:
		if (c == '\r' && m->st == OUT_RL_EOL) {
			m->st = OUT_RL_CR;
		} else if (c == '\n') {
			m->st = OUT_LSTART;
			ev |= EV_RL_END;
		} else {
			m->st = OUT_OFF;
		}
		break;
	case OUT_LSTART:
		if (c == '\r') {
			m->st = OUT_END_CR;
		} else if (c == '\n') {
			m->st = OUT_BODY; /* the head's end: the body is never looked at */
		} else {
			ev |= EV_LINE_START;
			m->pos = 1;
			/* name[0] is a tchar (name_len): a match implies a field name */
			m->st = nlen && lower(c) == lower((unsigned char)name[0]) ? OUT_NAME : OUT_SKIP;
		}
		break;
	case OUT_NAME:
		if (c == ':') {
			m->st = OUT_SKIP;
			if (m->pos == nlen && !(m->flags & SF_COPY_SEEN)) {
				m->st = OUT_VALUE;
				m->flags = (uint8_t)((m->flags | SF_COPY_SEEN | SF_IN_COPY) & ~SF_LEAD);
				m->vst = V_PRE;
				m->num = 0;
				m->ndig = 0;
				m->unit = 0;
				m->vlen = 0;
				ev |= EV_COPY_NAME;
			}
		} else if (c == '\r') {
			m->st = OUT_CR;
		} else if (c == '\n') {
			m->st = OUT_LSTART;
		} else if (m->pos < nlen && lower(c) == lower((unsigned char)name[m->pos])) {
			m->pos++;
		} else {
			m->st = OUT_SKIP;
		}
		break;
	case OUT_VALUE:
		if (c == '\r' || c == '\n') {
			m->st = c == '\r' ? OUT_CR : OUT_LSTART;
			m->flags &= (uint8_t)~SF_IN_COPY;
			ev |= EV_COPY_END;
			break;
		}
		ev |= EV_COPY_VALUE;
		if (m->vlen == 0 && is_ows(c))
			m->flags |= SF_LEAD;
		if (m->vlen < UINT8_MAX)
			m->vlen++;
		m->vst = value_step(m->vst, c, true, &m->num, &m->ndig, &m->unit);
		break;
	case OUT_SKIP:
		if (c == '\r')
			m->st = OUT_CR;
		else if (c == '\n')
			m->st = OUT_LSTART;
		break;
	case OUT_CR:
		/* a bare CR in a head: the server will refuse it; stop looking */
		m->st = c == '\n' ? OUT_LSTART : OUT_BODY;
		break;
	case OUT_END_CR:
		m->st = OUT_BODY;
		break;
	default:
		break;
	}
	return ev;
}

/* The inserted line `Name: <ms>\r\n` into dst (<= TB_PROP_HEADER_MAX + 12 bytes). */
static uint8_t ins_text(char *dst, const char *name, unsigned nlen, uint32_t ms)
{
	unsigned n = nlen;

	memcpy(dst, name, nlen);
	dst[n++] = ':';
	dst[n++] = ' ';
	n += fmt_u32(dst + n, ms);
	dst[n++] = '\r';
	dst[n++] = '\n';
	return (uint8_t)n;
}

/* Our value in the program's copy's span of `len` bytes, or false when it does not fit. */
static bool ov_text(char *dst, uint32_t ms, unsigned len, unsigned fl)
{
	char d[10];
	unsigned nd = fmt_u32(d, ms), need = nd + ((fl & OV_UNIT) ? 1u : 0u), n = 0, i;

	if (need > len || len > TB_PROP_SPAN_MAX)
		return false;
	if (dst == NULL)
		return true;
	if ((fl & OV_LEAD) && need < len)
		dst[n++] = ' ';
	for (i = 0; i < nd; i++)
		dst[n++] = d[i];
	if (fl & OV_UNIT)
		dst[n++] = 'm';
	while (n < len)
		dst[n++] = ' '; /* trailing whitespace: the field's length never changes */
	return true;
}

/* Where the in-place value sits in the scratch: after the inserted line. */
#define SCRATCH_OV (TB_PROP_HEADER_MAX + 16)
/* ... and what sent() resumes from, after that. */
#define SCRATCH_RESUME (SCRATCH_OV + TB_PROP_SPAN_MAX)

/* What a plan's first pass learns of the send. */
struct look {
	uint32_t rl_end;   /* the request line ends before this byte (NONE: not here) */
	uint32_t copy_at;  /* the copy's line begins here (NONE: before this send, or none) */
	uint32_t v_at;     /* the copy's first value byte in this send (NONE: none) */
	uint32_t v_from;   /* ... its index in the value */
	uint32_t v_cnt;    /* value bytes in this send */
	bool copy_end;     /* the copy's value ended in this send */
	int64_t copy_ns;   /* ... its deadline (-1: malformed) */
	uint8_t copy_len, copy_unit, copy_lead;
	struct tb_prop_scan end; /* the scan where the first pass stopped ... */
	uint32_t end_off;        /* ... before this byte */
};

/* What tb_prop_out_sent reuses of the first pass (kept in the caller's scratch, which
 * lives until then): when the kernel took at least the bytes the pass scanned, the scan
 * resumes there instead of starting over (a request's head is scanned once, not twice). */
struct resume {
	struct tb_prop_scan m;
	uint32_t off;
	uint8_t copy_end;
};
_Static_assert(SCRATCH_RESUME + sizeof(struct resume) <= TB_PROP_SCRATCH, "scratch too small");

/* The first pass: runs a copy of the scan over the send until the head's end, or until
 * nothing more can change the plan. */
static void look_ahead(const struct tb_prop_out *o, const char *name, unsigned nlen,
		       const struct iovec *in, int inn, struct look *lk)
{
	struct tb_prop_scan m = o->m;
	uint32_t off = 0, line = m.st == OUT_LSTART ? 0 : NONE;
	bool rl_done = m.st >= OUT_LSTART;
	int i;

	memset(lk, 0, sizeof(*lk));
	lk->rl_end = lk->copy_at = lk->v_at = NONE;
	lk->copy_ns = -1;
	for (i = 0; i < inn; i++) {
		const unsigned char *b = in[i].iov_base;
		size_t j;

		for (j = 0; j < in[i].iov_len; j++, off++) {
			unsigned ev;

			if (m.st >= OUT_BODY)
				goto out;
			/* nothing left to learn: the request line is behind, and so is the copy */
			if (rl_done && (lk->copy_end ||
					((m.flags & SF_COPY_SEEN) && !(m.flags & SF_IN_COPY))))
				goto out;
			ev = scan_step(&m, b[j], name, nlen);
			if (ev & EV_RL_END) {
				lk->rl_end = off + 1;
				rl_done = true;
				line = off + 1;
			}
			if (ev & EV_LINE_START)
				line = off;
			if (ev & EV_COPY_NAME)
				lk->copy_at = line;
			if (ev & EV_COPY_VALUE) {
				if (lk->v_at == NONE) {
					lk->v_at = off;
					lk->v_from = m.vlen - 1u;
				}
				lk->v_cnt++;
			}
			if (ev & EV_COPY_END) {
				lk->copy_end = true;
				lk->copy_ns = value_ns(m.vst, m.num, m.unit);
				lk->copy_len = m.vlen;
				lk->copy_unit = m.unit;
				lk->copy_lead = (m.flags & SF_LEAD) != 0;
			}
		}
	}
out:
	lk->end = m;
	lk->end_off = off;
}

/* Walks the program's pieces into `out`, with the inserted bytes (scratch + ins_base,
 * o->ins_plan of them) before program byte o->at_ins and the in-place bytes over
 * [o->sub_at, +o->sub_len). Stops at outmax: returns the count, the program bytes covered
 * in *cover and whether the inserted bytes are in. */
static int build(const struct tb_prop_out *o, const struct iovec *in, int inn,
		 struct iovec *out, int outmax, char *scratch, size_t ins_base, size_t *cover,
		 bool *ins_in)
{
	size_t pos = 0, j = 0, take;
	int i = 0, cnt = 0;
	bool ins = o->ins_plan > 0, sub = o->sub_len > 0;

	for (;;) {
		while (i < inn && j >= in[i].iov_len) {
			i++;
			j = 0;
		}
		if (ins && pos == o->at_ins) {
			if (cnt == outmax)
				break;
			out[cnt].iov_base = scratch + ins_base;
			out[cnt++].iov_len = o->ins_plan;
			ins = false;
			continue;
		}
		if (i == inn || cnt == outmax)
			break;
		if (sub && pos == o->sub_at) {
			size_t left = o->sub_len;

			out[cnt].iov_base = scratch + SCRATCH_OV + o->sub_from;
			out[cnt++].iov_len = o->sub_len;
			sub = false;
			while (left) { /* the program's bytes it stands for (look_ahead counted them) */
				while (j >= in[i].iov_len) {
					i++;
					j = 0;
				}
				take = in[i].iov_len - j < left ? in[i].iov_len - j : left;
				j += take;
				left -= take;
			}
			pos += o->sub_len;
			continue;
		}
		take = in[i].iov_len - j;
		if (ins && o->at_ins - pos < take)
			take = o->at_ins - pos;
		if (sub && o->sub_at - pos < take)
			take = o->sub_at - pos;
		out[cnt].iov_base = (char *)in[i].iov_base + j;
		out[cnt++].iov_len = take;
		j += take;
		pos += take;
	}
	*cover = pos;
	*ins_in = !ins;
	return cnt;
}

/* Clears what a plan leaves for tb_prop_out_sent (a plan never followed by its sent()
 * leaves no in-place value armed either). */
static void plan_clear(struct tb_prop_out *o)
{
	if (o->pflags & PF_OV_NEW)
		o->ov_len = 0;
	o->in = NULL;
	o->name = NULL;
	o->scratch = NULL;
	o->inn = 0;
	o->pflags = 0;
	o->ins_plan = 0;
	o->sub_len = 0;
	o->sub_from = 0;
	o->rl_end = o->at_ins = o->sub_at = o->copy_at = NONE;
}

int tb_prop_out_plan(struct tb_prop_out *o, const char *header_name, int64_t remaining_ms,
		     const struct iovec *in, int inn, struct iovec *out, int outmax,
		     char *scratch)
{
	const char *name = header_name ? header_name : TB_PROP_HEADER_DEFAULT;
	struct look lk;
	size_t n = 0, cover, ins_base = 0;
	uint32_t ms;
	unsigned nlen, fl = 0;
	bool writable, whole, lower_needed = false, can_lower = false, owed, ins_in;
	int i, cnt;

	plan_clear(o);
	if (o->m.st >= OUT_BODY && !o->ins_len && !o->ov_len)
		return 0; /* a body, or not HTTP: O(1), and tb_prop_out_sent returns k */
	for (i = 0; i < inn; i++)
		n += in[i].iov_len;
	o->in = in;
	o->inn = inn;
	o->name = name;
	o->pflags = PF_ACTIVE;
	o->cover = n;
	nlen = name_len(name);
	ms = remaining_ms < 0 ? 0
	     : remaining_ms > TB_PROP_MS_MAX ? NONE : (uint32_t)remaining_ms;
	writable = nlen && ms != NONE;
	look_ahead(o, name, nlen, in, inn, &lk);
	o->rl_end = lk.rl_end;
	o->copy_at = lk.copy_at;
	o->scratch = scratch;
	{
		struct resume r = { .m = lk.end, .off = lk.end_off, .copy_end = lk.copy_end };

		memcpy(scratch + SCRATCH_RESUME, &r, sizeof(r));
	}

	whole = lk.copy_end && lk.copy_at != NONE && lk.copy_ns >= 0 && !o->ov_len &&
		!(o->m.flags & SF_COPY_SEEN);
	if (whole && writable) {
		fl = (lk.copy_unit ? OV_UNIT : 0u) | (lk.copy_lead ? OV_LEAD : 0u);
		lower_needed = lk.copy_ns > (int64_t)ms * 1000000;
		can_lower = lower_needed && ov_text(NULL, ms, lk.copy_len, fl);
	}

	if (o->ins_len) {
		/* the rest of a line accepted in part goes first; while its digits have not
		 * begun to go, they say the latest budget */
		uint32_t v = writable && ms < o->ins_ms && o->ins_off <= nlen + 2 ? ms : o->ins_ms;

		o->ins_ms = v;
		o->ins_len = ins_text(scratch, name, nlen, v);
		ins_base = o->ins_off;
		o->at_ins = 0;
		o->ins_plan = (uint8_t)(o->ins_len - o->ins_off);
		o->pflags |= PF_INS_OWED;
	} else if (lk.rl_end != NONE && writable) {
		if (whole && (!lower_needed || can_lower)) {
			o->pflags |= PF_SKIP_INS; /* one header: the program's, at most ours */
		} else {
			o->pflags |= PF_INS_NEW;
			o->ins_ms = ms;
			o->at_ins = lk.rl_end;
			o->ins_plan = ins_text(scratch, name, nlen, ms);
		}
	}

	if (o->ov_len) {
		/* armed by an earlier send: its value goes on over the copy's bytes here */
		if (writable && ms < o->ov_ms && !((o->m.flags & SF_IN_COPY) && o->m.vlen))
			o->ov_ms = ms;
		if (lk.v_at != NONE && lk.v_from < o->ov_len) {
			o->sub_at = lk.v_at;
			o->sub_from = (uint8_t)lk.v_from;
			o->sub_len = (uint8_t)(o->ov_len - lk.v_from < lk.v_cnt ? o->ov_len - lk.v_from
							     : lk.v_cnt);
		}
	} else if (can_lower) {
		o->pflags |= PF_OV_NEW;
		o->ov_ms = ms;
		o->ov_len = lk.copy_len;
		o->ov_fl = (uint8_t)fl;
		o->sub_at = lk.v_at;
		o->sub_from = 0;
		o->sub_len = lk.copy_len;
	}
	if (o->sub_len)
		ov_text(scratch + SCRATCH_OV, o->ov_ms, o->ov_len, o->ov_fl);

	if (!o->ins_plan && !o->sub_len)
		return 0; /* nothing to change here: tb_prop_out_sent follows the bytes */
	owed = (o->pflags & PF_INS_OWED) || (o->sub_len && !(o->pflags & PF_OV_NEW));
	if (outmax < 1) {
		/* no room at all (the caller's mistake): what was owed cannot go in order;
		 * the header of this request is given up rather than sent out of place */
		o->ins_len = o->ins_off = 0;
		o->ov_len = 0;
		o->pflags = PF_ACTIVE | PF_MISSED;
		o->rl_end = 0;
		o->at_ins = o->sub_at = NONE;
		o->ins_plan = 0;
		o->sub_len = 0;
		return 0;
	}
	cnt = build(o, in, inn, out, outmax, scratch, ins_base, &cover, &ins_in);
	if (cover == n && ins_in)
		return cnt;
	if (owed) {
		o->cover = cover; /* owed bytes first: fewer of the program's bytes this time */
		return cnt;
	}
	/* Does not fit, nothing owed: the program's own send, unchanged. */
	if (o->pflags & PF_OV_NEW)
		o->ov_len = 0;
	o->pflags = PF_ACTIVE | ((o->pflags & (PF_INS_NEW | PF_SKIP_INS)) ? PF_MISSED : 0);
	o->at_ins = o->sub_at = NONE;
	o->ins_plan = 0;
	o->sub_len = 0;
	return 0;
}

size_t tb_prop_out_sent(struct tb_prop_out *o, size_t k)
{
	const struct iovec *in = o->in;
	size_t p = k, h = 0, left, from;
	struct resume r;
	bool copy_done = false;
	unsigned nlen;
	int i;

	if (!(o->pflags & PF_ACTIVE))
		return k; /* the plan's O(1) pass-through: a body, or not HTTP */
	if (k > o->cover + o->ins_plan)
		k = o->cover + o->ins_plan;
	p = k;
	if (o->ins_plan && k > o->at_ins) {
		h = k - o->at_ins < o->ins_plan ? k - o->at_ins : o->ins_plan;
		p = k - h;
	}
	/* the stream as far as the kernel took it: the same scan the plan looked ahead with,
	 * resumed where that stopped when the kernel took at least as much */
	nlen = name_len(o->name);
	memcpy(&r, o->scratch + SCRATCH_RESUME, sizeof(r));
	from = 0;
	if (p >= r.off) {
		o->m = r.m;
		copy_done = r.copy_end;
		from = r.off;
	}
	left = p - from;
	for (i = 0; i < o->inn && left && o->m.st < OUT_BODY; i++) {
		const unsigned char *b = in[i].iov_base;
		size_t j = 0;

		if (from >= in[i].iov_len) {
			from -= in[i].iov_len;
			continue;
		}
		for (j = from, from = 0; j < in[i].iov_len && left && o->m.st < OUT_BODY;
		     j++, left--)
			if (scan_step(&o->m, b[j], o->name, nlen) & EV_COPY_END)
				copy_done = true;
	}

	if (o->pflags & PF_INS_OWED) {
		o->ins_off = (uint8_t)(o->ins_off + h);
	} else if ((o->pflags & PF_INS_NEW) && p >= o->rl_end) {
		/* past the request line: the header is part of this request now, whole or
		 * owed (h < its length: the next send carries the rest first) */
		o->ins_len = o->ins_plan;
		o->ins_off = (uint8_t)h;
		o->rflags |= RF_CARRIED;
	}
	if (o->ins_len && o->ins_off >= o->ins_len)
		o->ins_len = o->ins_off = 0;
	if ((o->pflags & PF_SKIP_INS) && p >= o->rl_end)
		o->rflags |= RF_CARRIED;
	if ((o->pflags & PF_MISSED) && p >= o->rl_end)
		o->rflags |= RF_MISSED;
	/* A new in-place value holds once its line went out in part, or once the request
	 * line went without a header because of it; otherwise the next plan decides again. */
	if ((o->pflags & PF_OV_NEW) &&
	    !(p > o->copy_at || ((o->pflags & PF_SKIP_INS) && p >= o->rl_end)))
		o->ov_len = 0;
	if (o->ov_len && (copy_done || o->m.st >= OUT_BODY))
		o->ov_len = 0;
	o->pflags = 0; /* committed */
	plan_clear(o);
	return p;
}

bool tb_prop_out_pending(const struct tb_prop_out *o)
{
	return o->ins_len || o->ov_len;
}

bool tb_prop_out_carried(const struct tb_prop_out *o)
{
	return o->rflags & RF_CARRIED;
}

bool tb_prop_out_missed(const struct tb_prop_out *o)
{
	return o->rflags & RF_MISSED;
}
