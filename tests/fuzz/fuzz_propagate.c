/* fuzz_propagate.c - libFuzzer target for deadline propagation (policy/propagate*.c): the
 * inbound parser split anywhere, the outbound planner under random sends and partial accepts.
 *
 * Input: byte 0 chooses the header name and the outmax regime, bytes 1..4 the remaining
 * milliseconds, bytes 5..8 seed the generator that draws the program's send boundaries, the
 * iovec pieces and the kernel's partial accepts; the rest is the byte stream (the program's
 * request, or a server's inbound bytes). Invariants:
 *   inbound: any split gives the one-feed result; HEAD_DONE and "started" said at most once;
 *     a deadline is -1 or within [0, TB_PROP_NS_CAP], its strings terminated.
 *   outbound: the counts the program is told sum to its total, each at most its send's n;
 *     0 for k > 0 only when the kernel took inserted bytes alone; the bytes on the wire are
 *     the program's with at most one `Name: <digits>\r\n` right after the first line and
 *     same-length digits/spaces inside the first copy's value, and nothing else; they do not
 *     depend on the iovec pieces nor on the kernel's partial accepts; a stream whose first
 *     line is not an HTTP/1.x request line goes byte-identical; when a header was written,
 *     the inbound parser reads the wire's head back at most the budget.
 */
#include <stdbool.h>
#include <sys/uio.h>

#include "fuzz.h"
#include "propagate.h"

#define PROG_MAX 4096
#define WIRE_MAX (PROG_MAX + 256)

static uint64_t rng;

static uint32_t draw(uint32_t bound)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return bound ? (uint32_t)(rng % bound) : 0;
}

static const char *const names[] = { NULL, "X-Budget", "grpc-timeout", "x" };

/* ------------------------------------ inbound ------------------------------------ */

struct in_view {
	struct tb_prop_deadline d;
	int last, dones, starts;
};

static void in_run(const uint8_t *b, size_t n, const char *name, const size_t *cuts,
		   size_t ncuts, struct in_view *v)
{
	struct tb_prop_in p;
	size_t at = 0;

	tb_prop_in_reset(&p);
	v->dones = v->starts = 0;
	v->last = TB_PIN_IDLE;
	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;
		int st = tb_prop_in_feed(&p, name, b + at, end - at);

		FUZZ_CHECK(st >= TB_PIN_IDLE && st <= TB_PIN_NOT_HTTP, "status %d", st);
		v->dones += st == TB_PIN_HEAD_DONE;
		v->starts += tb_prop_in_started(&p);
		if (st != TB_PIN_IDLE || end > at)
			v->last = st == TB_PIN_HEAD_DONE ? TB_PIN_BODY
				  : st == TB_PIN_HEAD_STARTED ? TB_PIN_IN_HEAD : st;
		at = end;
	}
	v->d = *tb_prop_in_result(&p);
	FUZZ_CHECK(v->dones <= 1 && v->starts <= 1, "done %d, started %d times", v->dones,
		   v->starts);
	FUZZ_CHECK(v->d.ns == -1 || (v->d.ns >= 0 && v->d.ns <= TB_PROP_NS_CAP), "ns %lld",
		   (long long)v->d.ns);
	FUZZ_CHECK((v->d.ns < 0) == (v->d.source == TB_PROP_SRC_NONE), "source %u for %lld",
		   v->d.source, (long long)v->d.ns);
	FUZZ_CHECK(memchr(v->d.value, 0, sizeof(v->d.value)) &&
			   memchr(v->d.bad_name, 0, sizeof(v->d.bad_name)) &&
			   memchr(v->d.bad_value, 0, sizeof(v->d.bad_value)),
		   "an unterminated string");
}

static void in_check(const uint8_t *b, size_t n, const char *name)
{
	struct in_view whole, split;
	size_t cuts[16], ncuts = draw(16);

	in_run(b, n, name, NULL, 0, &whole);
	for (size_t i = 0; i < ncuts; i++)
		cuts[i] = n ? draw((uint32_t)n + 1) : 0;
	for (size_t i = 1; i < ncuts; i++) /* sorted: insertion sort, few */
		for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
			size_t t = cuts[j];

			cuts[j] = cuts[j - 1];
			cuts[j - 1] = t;
		}
	in_run(b, n, name, cuts, ncuts, &split);
	FUZZ_CHECK(whole.d.ns == split.d.ns && whole.d.source == split.d.source &&
			   whole.d.bad == split.d.bad &&
			   strcmp(whole.d.value, split.d.value) == 0 &&
			   strcmp(whole.d.bad_value, split.d.bad_value) == 0 &&
			   whole.dones == split.dones && whole.starts == split.starts &&
			   whole.last == split.last,
		   "split in %zu: ns %lld/%lld, done %d/%d, last %d/%d", ncuts + 1,
		   (long long)whole.d.ns, (long long)split.d.ns, whole.dones, split.dones,
		   whole.last, split.last);
}

/* ------------------------------------ outbound ------------------------------------ */

struct out_run {
	char wire[WIRE_MAX];
	size_t wlen;
	bool carried, missed;
};

/* The program writes prog in sends ending at cuts[] (resending from where the kernel
 * stopped), each as iovecs of `piece` bytes (0: one); the kernel accepts what draw()
 * says when `partial`, else all. */
static void out_run(const uint8_t *prog, size_t len, const char *name, int64_t ms,
		    const size_t *cuts, size_t ncuts, size_t piece, bool partial, int omax,
		    struct out_run *r)
{
	struct tb_prop_out o;
	size_t pos = 0, zeros = 0, calls = 0;

	tb_prop_out_reset(&o);
	r->wlen = 0;
	for (size_t w = 0; w <= ncuts; w++) {
		size_t end = w < ncuts ? cuts[w] : len;

		while (pos < end) {
			struct iovec in[PROG_MAX], out[PROG_MAX + TB_PROP_IOV_EXTRA];
			char scratch[TB_PROP_SCRATCH];
			size_t n = end - pos, step = piece ? piece : n, total = 0, k, p, ins = 0;
			int inn = 0, cnt, outmax;
			const struct iovec *v;

			for (size_t q = pos; q < end; q += step) {
				in[inn].iov_base = (void *)(prog + q);
				in[inn++].iov_len = end - q < step ? end - q : step;
			}
			outmax = omax ? omax : inn + TB_PROP_IOV_EXTRA;
			cnt = tb_prop_out_plan(&o, name, ms, in, inn, out, outmax, scratch);
			FUZZ_CHECK(cnt >= 0 && cnt <= outmax, "%d iovecs for %d", cnt, outmax);
			v = cnt ? out : in;
			for (int i = 0; i < (cnt ? cnt : inn); i++) {
				total += v[i].iov_len;
				if (cnt && ((const char *)v[i].iov_base < (const char *)prog ||
					    (const char *)v[i].iov_base >= (const char *)prog + len))
					ins += v[i].iov_len; /* scratch bytes */
			}
			k = total;
			if (partial && draw(2)) {
				k = draw((uint32_t)total + 1);
				if (k == 0 && ++zeros > 3)
					k = total; /* the socket drains at last */
			}
			for (int i = 0, left = (int)k; i < (cnt ? cnt : inn) && left > 0; i++) {
				size_t t = v[i].iov_len < (size_t)left ? v[i].iov_len : (size_t)left;

				FUZZ_CHECK(r->wlen + t <= WIRE_MAX, "wire overflow");
				memcpy(r->wire + r->wlen, v[i].iov_base, t);
				r->wlen += t;
				left -= (int)t;
			}
			p = tb_prop_out_sent(&o, k);
			FUZZ_CHECK(p <= n, "told %zu of %zu", p, n);
			FUZZ_CHECK(p > 0 || k == 0 || ins > 0, "0 for %zu bytes without ours", k);
			if (k == total)
				FUZZ_CHECK(p == n || cnt > 0, "unchanged send of %zu told %zu", n, p);
			if (k == total && total == n + ins)
				FUZZ_CHECK(p == n, "all of %zu taken, told %zu", total, p);
			pos += p;
			FUZZ_CHECK(++calls < 100000, "no progress");
		}
	}
	FUZZ_CHECK(pos == len, "told %zu of %zu in all", pos, len);
	/* A stream that ends right after a request line whose header went out in part: the
	 * program's next write would carry the rest first; an empty one does here. */
	for (int tries = 0; tb_prop_out_pending(&o) && tries < 100; tries++) {
		struct iovec out[TB_PROP_IOV_EXTRA];
		char scratch[TB_PROP_SCRATCH];
		int cnt = tb_prop_out_plan(&o, name, ms, NULL, 0, out, TB_PROP_IOV_EXTRA, scratch);
		size_t k = 0;

		for (int i = 0; i < cnt; i++) {
			size_t t = out[i].iov_len;

			if (partial && draw(2) && t)
				t = draw((uint32_t)t) + 1;
			FUZZ_CHECK(r->wlen + t <= WIRE_MAX, "wire overflow");
			memcpy(r->wire + r->wlen, out[i].iov_base, t);
			r->wlen += t;
			k += t;
			if (t < out[i].iov_len)
				break;
		}
		FUZZ_CHECK(tb_prop_out_sent(&o, k) == 0, "an empty send told more than 0");
		if (cnt == 0)
			break; /* an in-place value armed, no bytes owed */
	}
	r->carried = tb_prop_out_carried(&o);
	r->missed = tb_prop_out_missed(&o);
}

static bool tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Where the first request line ends (after its LF), or 0: not an HTTP/1.x request line.
 * Written independently of the planner, from RFC 9112's grammar. */
static size_t request_line_end(const uint8_t *b, size_t n)
{
	size_t i = 0, t;

	while (i < n && (b[i] == '\r' || b[i] == '\n'))
		i++;
	if (i > TB_PROP_HEAD_MAX)
		return 0;
	t = i;
	while (i < n && tchar(b[i]))
		i++;
	if (i == t || i >= n || b[i++] != ' ')
		return 0;
	t = i;
	while (i < n && b[i] > 0x20 && b[i] != 0x7f)
		i++;
	if (i == t || i >= n || b[i++] != ' ')
		return 0;
	if (n - i < 9 || memcmp(b + i, "HTTP/1.", 7) != 0 || b[i + 7] < '0' || b[i + 7] > '9')
		return 0;
	i += 8;
	if (b[i] == '\r')
		i++;
	if (i >= n || b[i] != '\n')
		return 0;
	return i + 1;
}

static bool name_at(const uint8_t *b, size_t n, const char *name)
{
	size_t l = strlen(name);

	if (n < l + 1 || b[l] != ':')
		return false;
	for (size_t i = 0; i < l; i++) {
		uint8_t c = b[i], d = (uint8_t)name[i];

		if ((c | 0x20) != (d | 0x20) || (((c | 0x20) < 'a' || (c | 0x20) > 'z') && c != d))
			return false;
	}
	return true;
}

/* The wire is the program's bytes, with at most one header line after the first line and
 * same-length digits/spaces inside the first copy's value. */
static void out_shape(const uint8_t *prog, size_t len, const char *name,
		      const struct out_run *r)
{
	size_t rl = request_line_end(prog, len), il = 0, i, line = 0, first_diff = SIZE_MAX,
	       last_diff = 0;
	const char *w = r->wire;

	if (rl == 0 || rl > TB_PROP_HEAD_MAX) {
		FUZZ_CHECK(r->wlen == len && memcmp(w, prog, len) == 0,
			   "not a request line, yet changed (%zu -> %zu bytes)", len, r->wlen);
		return;
	}
	FUZZ_CHECK(r->wlen >= len && memcmp(w, prog, rl) == 0, "the request line changed");
	if (r->wlen > len) {
		size_t nl = strlen(name);

		il = r->wlen - len;
		FUZZ_CHECK(il >= nl + 5 && il <= nl + 12 && memcmp(w + rl, name, nl) == 0 &&
				   w[rl + nl] == ':' && w[rl + nl + 1] == ' ' &&
				   w[rl + il - 2] == '\r' && w[rl + il - 1] == '\n',
			   "not one header line inserted (%zu bytes)", il);
		for (i = rl + nl + 2; i < rl + il - 2; i++)
			FUZZ_CHECK(w[i] >= '0' && w[i] <= '9', "inserted byte %#x", w[i]);
	}
	for (i = rl; i < len; i++)
		if (w[i + il] != (char)prog[i]) {
			if (first_diff == SIZE_MAX)
				first_diff = i;
			last_diff = i;
			FUZZ_CHECK(w[i + il] == ' ' || w[i + il] == 'm' ||
					   (w[i + il] >= '0' && w[i + il] <= '9'),
				   "in-place byte %#x", w[i + il]);
		}
	if (first_diff == SIZE_MAX)
		return;
	/* the changed bytes lie in one line that names the header, after its colon */
	for (line = first_diff; line > rl && prog[line - 1] != '\n'; line--)
		;
	FUZZ_CHECK(name_at(prog + line, len - line, name), "changed bytes outside a copy");
	FUZZ_CHECK(first_diff > line + strlen(name) && last_diff - first_diff < TB_PROP_SPAN_MAX,
		   "changed bytes not in the value");
	for (i = first_diff; i <= last_diff; i++)
		FUZZ_CHECK(prog[i] != '\r' && prog[i] != '\n', "a change across lines");
}

static void out_check(const uint8_t *prog, size_t len, const char *name, int64_t ms,
		      int omax)
{
	static struct out_run ref, run;
	size_t cuts[8], ncuts = draw(8), piece = draw(3) ? draw(17) : 0;
	const char *nm = name ? name : TB_PROP_HEADER_DEFAULT;

	for (size_t i = 0; i < ncuts; i++)
		cuts[i] = draw((uint32_t)len + 1);
	for (size_t i = 1; i < ncuts; i++)
		for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
			size_t t = cuts[j];

			cuts[j] = cuts[j - 1];
			cuts[j - 1] = t;
		}
	out_run(prog, len, name, ms, cuts, ncuts, 0, false, 0, &ref);
	out_shape(prog, len, nm, &ref);
	out_run(prog, len, name, ms, cuts, ncuts, piece, true, omax, &run);
	out_shape(prog, len, nm, &run);
	if (!omax)
		FUZZ_CHECK(ref.wlen == run.wlen && memcmp(ref.wire, run.wire, ref.wlen) == 0 &&
				   ref.carried == run.carried,
			   "the wire depends on pieces (%zu) or partial accepts: %zu/%zu bytes",
			   piece, ref.wlen, run.wlen);
	FUZZ_CHECK(!(ref.missed && omax == 0), "a header missed with outmax enough");

	/* Read back: a head the planner wrote into says at most the budget. */
	if (ref.carried && ref.wlen > len) {
		size_t rl = request_line_end(prog, len), il = ref.wlen - len;
		struct tb_prop_in p;
		int st;

		if (rl + il < ref.wlen && (ref.wire[rl + il] == ' ' || ref.wire[rl + il] == '\t'))
			return; /* the program's next line folds onto ours: its own malformation */
		tb_prop_in_reset(&p);
		st = tb_prop_in_feed(&p, name, ref.wire, ref.wlen);
		if (st == TB_PIN_HEAD_DONE)
			FUZZ_CHECK(tb_prop_in_result(&p)->ns >= 0 &&
					   tb_prop_in_result(&p)->ns <= ms * 1000000,
				   "read back %lld ns for %lld ms",
				   (long long)tb_prop_in_result(&p)->ns, (long long)ms);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *b;
	const char *name;
	size_t n;
	uint32_t raw;
	int64_t ms;
	int omax;

	if (size < 9)
		return 0;
	name = names[data[0] & 3];
	omax = (data[0] >> 2) & 3 ? 0 : 1 + ((data[0] >> 4) & 7); /* 1 in 4: 1..8 iovecs */
	raw = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4];
	ms = data[1] & 0x80 ? (int64_t)(raw % 120000000u) : (int64_t)(raw % 100000u) + 1;
	rng = ((uint64_t)data[5] << 24 | (uint64_t)data[6] << 16 | (uint64_t)data[7] << 8 |
	       data[8]) * 0x9e3779b97f4a7c15ull | 1;
	b = data + 9;
	n = size - 9 > PROG_MAX ? PROG_MAX : size - 9;

	in_check(b, n, name);
	out_check(b, n, name, ms, omax);
	return 0;
}
