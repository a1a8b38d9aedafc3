/* test_frame_script.h - what the framing tests share: a script of exchanges (bytes each way,
 * the events and state expected after each), run whole, byte by byte and in random splits. */
#ifndef TB_TEST_FRAME_SCRIPT_H
#define TB_TEST_FRAME_SCRIPT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

#define STARTS TB_FRAME_EV_CALL_STARTS
#define ENDS TB_FRAME_EV_CALL_ENDS
#define EV_RAW TB_FRAME_EV_RAW
#define EV_SESSION TB_FRAME_EV_SESSION
#define UNKNOWN TB_FRAME_UNKNOWN
#define RAW TB_FRAME_RAW
#define RESTING TB_FRAME_RESTING
#define AWAITING TB_FRAME_AWAITING
#define ANSWERED TB_FRAME_ANSWERED
#define SESSION TB_FRAME_SESSION

/* A sent step that is not a request (an alert, Terminate, a stray CRLF): the send-side
 * query, which cannot see the bytes, may say a call would start there. */
#define NOT_REQ 0x100u

#define FS_SEEDS 300

struct fstep {
	bool tx;
	bool eof;
	size_t off, n;
	unsigned ev;
	enum tb_frame_state st;
	int begun; /* tb_frame_answer_begun expected after the step, -1: not checked */
};

struct fscript {
	enum tb_proto forced;
	size_t n;
	size_t used, open; /* arena bytes used; start of the step being built */
	struct fstep s[128];
	unsigned char arena[1 << 17];
};

static inline struct fscript *fs_new(enum tb_proto forced)
{
	struct fscript *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->forced = forced;
	return s;
}

/* Appends bytes to the step being built. */
static inline void fs_put(struct fscript *s, const void *p, size_t n)
{
	assert_true(s->used + n <= sizeof(s->arena));
	memcpy(s->arena + s->used, p, n);
	s->used += n;
}

static inline void fs_fill(struct fscript *s, unsigned char c, size_t n)
{
	assert_true(s->used + n <= sizeof(s->arena));
	memset(s->arena + s->used, c, n);
	s->used += n;
}

static inline void fs_be16(struct fscript *s, unsigned v)
{
	unsigned char b[2] = { (unsigned char)(v >> 8), (unsigned char)v };

	fs_put(s, b, 2);
}

static inline void fs_be32(struct fscript *s, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16),
			       (unsigned char)(v >> 8), (unsigned char)v };

	fs_put(s, b, 4);
}

/* Closes the step: these bytes go one way, then `ev` and `st` are expected. */
static inline void fs_end(struct fscript *s, bool tx, unsigned ev, enum tb_frame_state st)
{
	assert_true(s->n < sizeof(s->s) / sizeof(s->s[0]));
	s->s[s->n++] = (struct fstep){ tx, false, s->open, s->used - s->open, ev, st, -1 };
	s->open = s->used;
}

static inline void fs_text(struct fscript *s, bool tx, const char *text, unsigned ev,
			   enum tb_frame_state st)
{
	fs_put(s, text, strlen(text));
	fs_end(s, tx, ev, st);
}

#define TX(s, text, ev, st) fs_text(s, true, text, ev, st)
#define RX(s, text, ev, st) fs_text(s, false, text, ev, st)

/* The peer closes (a read returns 0). */
static inline void fs_eof(struct fscript *s, unsigned ev, enum tb_frame_state st)
{
	assert_true(s->n < sizeof(s->s) / sizeof(s->s[0]));
	s->s[s->n++] = (struct fstep){ false, true, s->used, 0, ev, st, -1 };
}

/* After the last step, tb_frame_answer_begun must say `begun`. */
static inline void fs_begun(struct fscript *s, bool begun)
{
	s->s[s->n - 1].begun = begun;
}

static inline uint64_t fs_rand(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * Runs the script with every step fed whole (mode 0), byte by byte (mode 1), and in random
 * splits (modes 2.., one seed each; a seed also picks small or large pieces). After each
 * step the events seen (OR of every piece's) and the state must be the expected ones; before
 * a sent step, tb_frame_send_starts_call must predict its CALL_STARTS. Ends with `proto`.
 */
static inline void fs_run(const struct fscript *s, enum tb_proto proto)
{
	for (int mode = 0; mode < 2 + FS_SEEDS; mode++) {
		struct tb_frame f;
		uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(mode + 1);

		tb_frame_init(&f, s->forced);
		for (size_t k = 0; k < s->n; k++) {
			const struct fstep *st = &s->s[k];
			const unsigned char *p = s->arena + st->off;
			size_t left = st->n, cap = 1 + fs_rand(&x) % 3 * 40;
			unsigned ev = 0;

			if (st->tx && !(st->ev & NOT_REQ) &&
			    tb_frame_send_starts_call(&f) != !!(st->ev & STARTS))
				fail_msg("step %zu mode %d: starts_call says %d", k, mode,
					 tb_frame_send_starts_call(&f));
			if (st->eof)
				ev = tb_frame_received(&f, NULL, 0);
			while (left > 0) {
				size_t piece = left;

				if (mode == 1)
					piece = 1;
				else if (mode >= 2)
					piece = 1 + fs_rand(&x) % (cap == 1 ? left : cap);
				if (piece > left)
					piece = left;
				ev |= st->tx ? tb_frame_sent(&f, p, piece)
					     : tb_frame_received(&f, p, piece);
				p += piece;
				left -= piece;
			}
			if (ev != (st->ev & ~NOT_REQ) || tb_frame_state(&f) != st->st)
				fail_msg("step %zu mode %d: events %#x state %d, want %#x %d", k,
					 mode, ev, tb_frame_state(&f), st->ev, st->st);
			if (st->begun >= 0 && tb_frame_answer_begun(&f) != st->begun)
				fail_msg("step %zu mode %d: answer begun %d", k, mode, !st->begun);
		}
		if (tb_frame_proto(&f) != proto)
			fail_msg("mode %d: proto %d, want %d", mode, tb_frame_proto(&f), proto);
	}
}

#endif
