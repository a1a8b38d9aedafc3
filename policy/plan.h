/* plan.h - `timebox plan`: one call and the program's retries played on a simulated clock
 * through the library's own budget, phase and gate code. Pure: no I/O, no clock. */
#ifndef TB_PLAN_H
#define TB_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dest.h"
#include "settings.h"

/*
 * Linux's defaults that end a wait when no timebox limit does. An unanswered SYN is sent
 * again after 1, 2, 4 ... s: tcp_syn_retries = 6 gives up after 1+2+...+64 = 127 s. Data
 * that is never acknowledged is sent again with a doubling RTO (200 ms up to 120 s):
 * tcp_retries2 = 15 gives up after about 924.6 s (Documentation/networking/ip-sysctl.rst).
 */
#define TB_PLAN_SYN_GIVEUP_NS (127 * TB_NS_PER_S)
#define TB_PLAN_RETRIES2_NS (INT64_C(924600) * TB_NS_PER_MS)

/* What the downstream does with a connection and the request it reads. */
enum tb_down_kind {
	TB_DOWN_OK,        /* answers the whole response after `answer_ns` */
	TB_DOWN_STALL,     /* the same, but named for a slow answer; answer_ns < 0: never */
	TB_DOWN_DRIP,      /* a first byte, then one byte every interval_ns, `bytes` of them */
	TB_DOWN_DOWN,      /* the machine is gone: SYNs unanswered, data never acknowledged */
	TB_DOWN_BLACKHOLE, /* the handshake completes, then every packet is dropped */
};

struct tb_downstream {
	enum tb_down_kind kind;
	int64_t answer_ns;   /* OK, STALL: from the request to the response; -1: never */
	int64_t first_ns;    /* DRIP: from the request to the first byte; -1: one interval */
	int64_t interval_ns; /* DRIP */
	long bytes;          /* DRIP: bytes after the first one (or in all, without first_ns) */
	int64_t gate_busy_ns; /* slow-gate: every slot of the gate is held until then; 0: none */
};

/*
 * Parses a downstream behaviour: "ok=50ms", "stall=1200ms", "stall" (never answers),
 * "drip=150ms/20", "first=20ms,drip=150ms/20", "down", "blackhole", "slow-gate=800ms"
 * (then the downstream answers at once), and slow-gate combined with another
 * ("slow-gate=800ms,ok=50ms"). Returns 0, or -1 with *why set (a static sentence).
 * @unittest test_plan.c: test_parse_downstream
 */
int tb_downstream_parse(const char *text, struct tb_downstream *d, const char **why);

/* What the plan is asked about: the settings that govern the destination (finished), the
 * downstream, and how the program behaves. */
struct tb_plan_input {
	struct tb_settings set;
	struct tb_dest dest;
	struct tb_downstream down;
	int retries;        /* attempts after the first failure */
	int64_t backoff_ns; /* the program's pause before each retry */
	int64_t rtt_ns;     /* the handshake's duration */
	bool reuse;         /* the first attempt uses a kept-alive connection (no handshake) */
};

#define TB_PLAN_MAX_RETRIES 100

enum tb_plan_what {
	TB_EV_BACKOFF,      /* the program pauses before a retry */
	TB_EV_REUSE,        /* the attempt takes a kept-alive connection */
	TB_EV_GATE_WAIT,    /* every slot is taken: the connect waits at the gate */
	TB_EV_GATE_SLOT,    /* a slot was handed over */
	TB_EV_CONNECT,      /* connect() starts the handshake */
	TB_EV_HANDSHAKE,    /* the handshake completed */
	TB_EV_SENT,         /* the request's last byte was sent */
	TB_EV_BYTE,         /* response byte number `count` arrived */
	TB_EV_BYTES,        /* `count` more bytes, one every `span` ns, until `at` (elided) */
	TB_EV_RESPONSE,     /* the response is complete */
	TB_EV_EXPIRED,      /* timebox cut the wait: `phase` fired; errno `err` */
	TB_EV_REFUSED,      /* the attempt failed at once, sending nothing: the retry window */
	TB_EV_REJECTED,     /* the gate's queue is full (max_pending): failed at once */
	TB_EV_KERNEL,       /* no timebox limit: the kernel's default ended it (`kernel`) */
	TB_EV_FOREVER,      /* nothing ends the wait */
};

enum tb_plan_kernel { TB_KERNEL_NONE, TB_KERNEL_SYN, TB_KERNEL_RETRIES2 };

struct tb_plan_event {
	int64_t at;         /* ns since t=0 (the first attempt's start) */
	int attempt;        /* 1 for the first */
	enum tb_plan_what what;
	enum tb_phase phase; /* TB_EV_EXPIRED */
	int err;            /* errno the program sees (failures) */
	long count;         /* TB_EV_BYTE: the byte's number; TB_EV_BYTES: how many */
	int64_t span;       /* TB_EV_BYTES: the interval */
	enum tb_plan_kernel kernel;
};

#define TB_PLAN_MAX_EVENTS 1024

enum tb_plan_outcome { TB_PLAN_OK, TB_PLAN_FAILED, TB_PLAN_FOREVER };

struct tb_plan {
	enum tb_plan_outcome outcome;
	int64_t end;        /* ns since t=0 when the program has its answer (TB_NEVER: never) */
	int executed;       /* requests the downstream received, and so executed */
	int attempts;       /* attempts the program made */
	int err;            /* the last errno the program saw (0 on success) */
	int fired;          /* the phase that ended the last attempt, or -1 */
	enum tb_plan_kernel kernel; /* the kernel's default ended the last attempt */
	bool gate_ignored;  /* slow-gate without max_conns: timebox has no gate to wait at */
	size_t nevents;
	struct tb_plan_event ev[TB_PLAN_MAX_EVENTS];
};

/*
 * Plays the call: each attempt steps the thread's budget (tb_budget_step) at its connect and
 * its send, waits at the gate (tb_gate_* and tb_gate_wait_bound), bounds the handshake and
 * every read wait with tb_idle_expiry and tb_expiry_pick, and reports expiries, failures and
 * responses to the budget the way the library's hooks do. An attempt that fails is followed
 * by the next one (a fresh connection), up to in->retries. Fills *out; returns 0, or -1 when
 * the input is out of range (retries) with out->outcome left FAILED.
 * @unittest test_plan.c: test_seed_teaser, test_seed_q4_*, test_seed_q5_*
 */
int tb_plan_run(const struct tb_plan_input *in, struct tb_plan *out);

/* One line of tb_plan_protection, NUL included. */
#define TB_PLAN_LINE_MAX 480
#define TB_PLAN_PROTECTION_MAX 4

/*
 * What the downstream's protection does for a destination governed by s (finished), in the
 * plan's words: a line for each of the breaker, what it counts as a failure, the retry
 * budget and the adaptive gate that is on; none when all are off. The simulated call above
 * is one caller's: these act across calls, so they are told, not played. Writes up to max
 * lines; returns how many there are. Pure (policy/plan_protect.c).
 * @unittest test_plan.c: test_protection_*
 */
size_t tb_plan_protection(const struct tb_settings *s, char (*lines)[TB_PLAN_LINE_MAX],
			  size_t max);

/* "connect", "sent", ... : the event's name in text and JSON output. */
const char *tb_plan_what_name(enum tb_plan_what what);

#endif
