/* stress.h - what the stress driver's fault server and its clients share: the request that
 * tells a downstream how to misbehave, the records both sides keep, a PRNG and a clock. */
#ifndef TB_STRESS_H
#define TB_STRESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Downstream kinds: one listener port each, so a cut's peer port names what it cut. */
enum kind {
	K_NORMAL,    /* request (+upload) -> checksum + response after a short delay */
	K_DRIP,      /* response in chunks; within the limits unless req.flags & F_LONG */
	K_STALL,     /* reads the request, never answers (closes after end_ms when set) */
	K_RESET,     /* answers part of the response, then RST (SO_LINGER 0) */
	K_SINK,      /* a healthy slow upload: drains in small reads with pauses */
	K_STREAM,    /* a steady stream read with MSG_WAITALL */
	K_SIDE,      /* what signal handlers send on: counted, never answered */
	K_BLACKHOLE, /* SYNs dropped: connect never completes */
	NKIND
};
#define F_LONG 1u
enum { ST_CONNECT, ST_SEND, ST_RECV }; /* where a call ended */ /* a drip that outlives the deadline: a cut is expected */

#define REQ_MAGIC 0x54425354u
struct req {
	uint32_t magic, kind, flags, delay_ms;
	uint64_t conn_id, seed;
	uint32_t n, gap_ms, resp_len, upload_len, chunk, end_ms;
};

/* What the server saw of one connection (indexed by conn_id). */
struct srec {
	uint8_t kind, seen, eof_kind;     /* eof_kind: 1 FIN, 2 RST/error */
	uint8_t done;                     /* the server finished its answer */
	float max_gap_ms;                 /* the longest pause the server really made */
	int64_t t_accept, t_first, t_done, t_eof; /* CLOCK_MONOTONIC ns, shared by processes;
					   * t_first: the answer's first byte sent */
	uint64_t side_bytes;
};

/* What the client did with one connection: written to the record file, one per call. */
struct crec {
	uint64_t conn_id;
	uint8_t kind, family, healthy, tainted, how_closed, flags, in_window, stage;
	int32_t err;                      /* 0: answer complete and verified */
	int32_t tid, fd;                  /* to find the library's log line */
	int32_t mode;                     /* enum mode (client.h) */
	int64_t t_start, t_sent, t_end, t_close, chain_start; /* t_sent: request's last byte */
	int64_t side_last;                /* a handler's last send on the side stream */
	uint64_t bytes;
};
enum { CL_SELF, CL_OTHER, CL_DUP2, CL_RANGE }; /* how_closed */

#define MAX_CONNS_LOG (1u << 21)

static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint32_t rnd(uint64_t *s, uint32_t lo, uint32_t hi) /* [lo, hi] */
{
	return hi <= lo ? lo : lo + (uint32_t)(splitmix(s) % (hi - lo + 1));
}

/* Byte `off` onwards of the payload stream `seed`: what the server sends, what the client
 * expects, whatever the chunking. */
static inline void fill(uint64_t seed, uint64_t off, unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t k = seed ^ ((off + i) >> 3) * 0x9e3779b97f4a7c15ull, w = splitmix(&k);

		b[i] = (unsigned char)(w >> (8 * ((off + i) & 7)));
	}
}

static inline uint64_t fnv(uint64_t h, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}
#define FNV0 0xcbf29ce484222325ull

/* server.c: listeners on 127.0.0.1 (ports[kind]), threads serving them, the log. */
int server_start(int ports[NKIND]);
struct srec *server_log(void);
void server_stop(void);

/* client.c: the program under the library. */
int client_main(int argc, char **argv);
int child_exchange(int port, uint64_t seed, uint64_t conn_id);

#endif
