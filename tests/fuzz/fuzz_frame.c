/* fuzz_frame.c - libFuzzer target for the framing state machines (policy/frame*.c): a script of
 * sent and received chunks, EOFs and unseen bytes, replayed twice with its invariants checked.
 *
 * Built once per protocol (Makefile: -DFUZZ_FRAME_PROTO="http", "tls", "postgres", "redis",
 * or "pick": the input's first byte chooses the rule's protocol, AUTO included). The input
 * is a script of steps, each opened by a control byte c:
 *   c & 0x40 == 0   a chunk of (c & 0x3f) + 1 bytes, sent (c & 0x80 == 0) or received;
 *   c & 0x40, op = c & 0x3f:
 *     0  a long chunk: the next two bytes (big-endian) + 1 bytes, in c's direction;
 *     1  the peer closed (a read returned 0);
 *     2  1 + the next two bytes moved unseen (sendfile, splice) in c's direction;
 *     3  the next four bytes moved unseen;
 *     4  one thread sends while another receives: tb_frame_abandon;
 *     else  only the queries.
 * A chunk is cut short by the end of the input. tests/fuzz/frame_seeds.py writes the seeds in
 * this form from real conversations.
 */
#include <stdbool.h>

#include "frame.h"
#include "fuzz.h"

#ifndef FUZZ_FRAME_PROTO
#define FUZZ_FRAME_PROTO "pick"
#endif

/* What one pass saw after each step: the state and the events, to compare across passes. */
struct step_view {
	uint8_t state, proto, ev, begun, starts;
};

#define MAX_STEPS 4096

static size_t be(const uint8_t *p, size_t avail, size_t want)
{
	size_t v = 0;

	for (size_t i = 0; i < want; i++)
		v = v << 8 | (i < avail ? p[i] : 0);
	return v;
}

/* The invariants that hold after any step: a known state and protocol, a state that agrees
 * with the protocol, the queries consistent with the state, RAW and SESSION for good, and
 * the events saying exactly what changed. */
static void check_step(const struct tb_frame *f, enum tb_frame_state was, unsigned ev,
		       bool sent, size_t step)
{
	enum tb_frame_state st = tb_frame_state(f);
	enum tb_proto p = tb_frame_proto(f);

	FUZZ_CHECK(st >= TB_FRAME_UNKNOWN && st <= TB_FRAME_SESSION, "step %zu: state %d", step,
		   (int)st);
	FUZZ_CHECK(tb_proto_name(p) != NULL, "step %zu: protocol %d", step, (int)p);
	FUZZ_CHECK(f->forced <= TB_PROTO_RAW, "step %zu: forced %u", step, f->forced);
	FUZZ_CHECK(f->dlen <= sizeof(f->u.detect), "step %zu: %u bytes held", step, f->dlen);
	FUZZ_CHECK((ev & ~0x3fu) == 0, "step %zu: unknown events %#x", step, ev);
	/* A 5xx status is an answer's (received, HTTP), and a gateway status is a 5xx. */
	FUZZ_CHECK(!(ev & TB_FRAME_EV_GATEWAY) || (ev & TB_FRAME_EV_5XX),
		   "step %zu: a gateway status that is no 5xx (ev %#x)", step, ev);
	FUZZ_CHECK(!(ev & TB_FRAME_EV_5XX) || (!sent && p != TB_PROTO_TLS &&
					       p != TB_PROTO_POSTGRES && p != TB_PROTO_REDIS),
		   "step %zu: a 5xx event on a %s %s (ev %#x)", step, sent ? "send" : "read",
		   tb_proto_name(p), ev);
	FUZZ_CHECK((st == TB_FRAME_UNKNOWN) == (p == TB_PROTO_AUTO) &&
			   (st == TB_FRAME_RAW) == (p == TB_PROTO_RAW) &&
			   (st == TB_FRAME_SESSION) == (p == TB_PROTO_SESSION),
		   "step %zu: state %d with protocol %s", step, (int)st, tb_proto_name(p));
	FUZZ_CHECK(st != TB_FRAME_ANSWERED || p == TB_PROTO_TLS,
		   "step %zu: ANSWERED is for TLS only, not %s", step, tb_proto_name(p));
	FUZZ_CHECK(!tb_frame_answer_begun(f) || st == TB_FRAME_AWAITING,
		   "step %zu: an answer begun in state %d", step, (int)st);
	FUZZ_CHECK(!tb_frame_send_starts_call(f) ||
			   (st != TB_FRAME_RAW && st != TB_FRAME_SESSION && st != TB_FRAME_UNKNOWN),
		   "step %zu: a call would start in state %d", step, (int)st);
	if (was == TB_FRAME_RAW)
		FUZZ_CHECK(st == TB_FRAME_RAW && ev == 0, "step %zu: RAW left for %d (ev %#x)",
			   step, (int)st, ev);
	if (was == TB_FRAME_SESSION)
		FUZZ_CHECK(st == TB_FRAME_SESSION && ev == 0,
			   "step %zu: SESSION left for %d (ev %#x)", step, (int)st, ev);
	/* Giving up and becoming a session are said once, when they happen, and only then. */
	FUZZ_CHECK(!!(ev & TB_FRAME_EV_RAW) == (st == TB_FRAME_RAW && was != TB_FRAME_RAW),
		   "step %zu: state %d -> %d with events %#x", step, (int)was, (int)st, ev);
	FUZZ_CHECK(!!(ev & TB_FRAME_EV_SESSION) ==
			   (st == TB_FRAME_SESSION && was != TB_FRAME_SESSION),
		   "step %zu: state %d -> %d with events %#x", step, (int)was, (int)st, ev);
	/* A call starts on bytes the program sends, ends on bytes it receives. */
	FUZZ_CHECK(!(ev & TB_FRAME_EV_CALL_STARTS) || sent, "step %zu: a receive starts a call",
		   step);
	FUZZ_CHECK(!(ev & TB_FRAME_EV_CALL_ENDS) || !sent, "step %zu: a send ends a call", step);
}

/*
 * Runs the script once. bytewise: each chunk is fed one byte at a time (as a program reading
 * one byte per call would). Fills views[0..) with what each step left; returns their count.
 * The frame lives alone in a heap block of its exact size, and each chunk in one of its
 * exact length, so that AddressSanitizer sees any access past either.
 */
static size_t run(const uint8_t *data, size_t size, enum tb_proto forced, bool bytewise,
		  struct step_view *views)
{
	struct tb_frame *f = malloc(sizeof(*f));
	size_t i = 0, steps = 0;
	bool eof = false;
	static int trace = -1;

	if (f == NULL)
		abort();
	if (trace < 0) /* FUZZ_FRAME_TRACE=1 build/fuzz/fuzz_frame_X input: each step told */
		trace = getenv("FUZZ_FRAME_TRACE") != NULL;
	tb_frame_init(f, forced);
	FUZZ_CHECK(tb_frame_proto(f) == (forced == TB_PROTO_TLS || forced == TB_PROTO_SESSION ||
							 forced == TB_PROTO_RAW
						 ? forced
						 : TB_PROTO_AUTO),
		   "init(%s) frames %s", tb_proto_name(forced), tb_proto_name(tb_frame_proto(f)));
	while (i < size && steps < MAX_STEPS) {
		uint8_t c = data[i++];
		bool sent = !(c & 0x80);
		enum tb_frame_state was = tb_frame_state(f);
		unsigned ev = 0;
		size_t len = 0;

		if (!(c & 0x40) || (c & 0x3f) == 0) {
			if (!(c & 0x40)) {
				len = (size_t)(c & 0x3f) + 1;
			} else {
				len = be(data + i, size - i, 2) + 1;
				i += size - i < 2 ? size - i : 2;
			}
			if (len > size - i)
				len = size - i;
			if (len == 0)
				break;
			uint8_t *chunk = malloc(len);

			if (chunk == NULL)
				abort();
			memcpy(chunk, data + i, len);
			i += len;
			for (size_t k = 0; k < len; k += bytewise ? 1 : len) {
				size_t n = bytewise ? 1 : len;
				enum tb_frame_state w = tb_frame_state(f);
				bool starts = tb_frame_send_starts_call(f);
				unsigned e = sent ? tb_frame_sent(f, chunk + k, n)
						  : tb_frame_received(f, chunk + k, n);

				if (bytewise) {
					check_step(f, w, e, sent, steps);
					/* A request that begins with this byte was announced before
					 * it went (the budget's step runs there). The converse need
					 * not hold: a TLS alert or a stray CRLF starts nothing. Nor
					 * after the peer closed: tb_frame_send_starts_call says no
					 * more (nothing can answer) while tb_frame_sent still tells
					 * the start; only the former reaches the runtime. */
					FUZZ_CHECK(!(e & TB_FRAME_EV_CALL_STARTS) || starts ||
							   w == TB_FRAME_UNKNOWN || eof,
						   "step %zu byte %zu: a call started that "
						   "tb_frame_send_starts_call denied", steps, k);
				}
				ev |= e;
			}
			free(chunk);
		} else {
			switch (c & 0x3f) {
			case 1:
				ev = tb_frame_received(f, "", 0);
				sent = false;
				eof = true;
				break;
			case 2:
			case 3: {
				size_t w = (c & 0x3f) == 2 ? 2 : 4;
				uint64_t n = be(data + i, size - i, w) + (w == 2);

				i += size - i < w ? size - i : w;
				ev = tb_frame_unseen(f, sent, n);
				break;
			}
			case 4:
				tb_frame_abandon(f);
				FUZZ_CHECK(tb_frame_state(f) == TB_FRAME_RAW, "abandoned, state %d",
					   (int)tb_frame_state(f));
				was = TB_FRAME_RAW; /* abandoning says nothing: the caller knows */
				break;
			default:
				break;
			}
		}
		check_step(f, was, ev, sent, steps);
		if (trace)
			fprintf(stderr, "%s step %zu: %s %zu bytes at %zu (c=%#x): ev %#x, "
				"state %d -> %d, proto %s\n", bytewise ? "bytes" : "whole", steps,
				sent ? "sent" : "received", len, i - len, c, ev, (int)was,
				(int)tb_frame_state(f), tb_proto_name(tb_frame_proto(f)));
		views[steps++] = (struct step_view){
			(uint8_t)tb_frame_state(f), (uint8_t)tb_frame_proto(f), (uint8_t)ev,
			tb_frame_answer_begun(f), tb_frame_send_starts_call(f),
		};
	}
	free(f);
	return steps;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct step_view whole[MAX_STEPS], bytes[MAX_STEPS];
	enum tb_proto forced;
	size_t n1, n2;

	if (tb_proto_parse(FUZZ_FRAME_PROTO, &forced) < 0) {
		if (size == 0)
			return 0;
		forced = (enum tb_proto)(data[0] % (TB_PROTO_RAW + 1));
		data++;
		size--;
	}
	n1 = run(data, size, forced, false, whole);
	n2 = run(data, size, forced, true, bytes);
	FUZZ_CHECK(n1 == n2, "%zu steps, then %zu", n1, n2);
	/* Framing reads a byte stream: where the kernel cut it cannot matter. Fed one byte per
	 * call, each step ends in the same state with the same events (or-ed over its bytes),
	 * but for a call start in bytes found malformed further on: a whole TLS record header
	 * is checked before its type counts, a byte-fed one after, and the step gives up
	 * (RAW) either way. */
	for (size_t s = 0; s < n1; s++) {
		if (whole[s].state == TB_FRAME_RAW && (whole[s].ev & TB_FRAME_EV_RAW)) {
			whole[s].ev &= (uint8_t)~TB_FRAME_EV_CALL_STARTS;
			bytes[s].ev &= (uint8_t)~TB_FRAME_EV_CALL_STARTS;
		}
		FUZZ_CHECK(memcmp(&whole[s], &bytes[s], sizeof(whole[s])) == 0,
			   "step %zu: whole chunk: state %u proto %u ev %#x begun %u starts %u; "
			   "byte by byte: state %u proto %u ev %#x begun %u starts %u",
			   s, whole[s].state, whole[s].proto, whole[s].ev, whole[s].begun,
			   whole[s].starts, bytes[s].state, bytes[s].proto, bytes[s].ev,
			   bytes[s].begun, bytes[s].starts);
	}
	return 0;
}
