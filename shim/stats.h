/* stats.h - per-destination counters and latency histograms of this process, kept in a
 * shared-memory segment that `timebox stats` reads, and the Prometheus file export. */
#ifndef TB_STATS_H
#define TB_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "settings.h"
#include "log.h"
#include "sock.h"
#include "stats_seg.h"

/*
 * The hooks' side. Each is one call at its site, lock-free, no allocation and no system call
 * once the segment exists (the first governed connect creates it: open, ftruncate, mmap,
 * and starts the stats thread with every signal blocked). Without a segment (it could not
 * be created, or the socket index is past the table) they do nothing.
 */

/* A governed connect begins on s (after the gate): counts a call of s->dest. `start` is the
 * call's start (the gate wait and earlier attempts of the call lie between it and the
 * handshake's start). */
void tb_stats_call_begin(struct tb_sock *s, int64_t start);

/* The handshake of s completed (a blocking connect returned 0). */
void tb_stats_connected(struct tb_sock *s);

/* Called before the socket's progress is recorded, so s->got_bytes still tells whether this
 * is the first byte of a response or of a new request. A send moved bytes; `begun` is when
 * the program made the call (the transfer's own clock reading: no clock read here). */
void tb_stats_sent(struct tb_sock *s, int64_t begun);

/* A read returned r bytes (0: EOF). Reads the clock once (the response's last byte so far)
 * and returns that reading for the transfer's other users (0: no reading was taken). */
int64_t tb_stats_received(struct tb_sock *s, ssize_t r);

/* The program closes an fd of s: a call whose response is complete ends there (framed:
 * the framing rests, or TLS answered; raw: response bytes read since the last send), as
 * DESIGN's scope=call rule ends it, and is counted done with its duration. */
void tb_stats_closed(struct tb_sock *s);

/* The watchdog (or a hook) cut s in `phase`: counts it, and gives the call's timers to the
 * log line the cutter writes next, in *t. False when there are none (no segment). */
bool tb_stats_cut(struct tb_sock *s, enum tb_phase phase, struct tb_log_timers *t);

/* Something on s stopped being governed (an `event=notice` of kind k, stats_seg.h): counts
 * it for s's destination, whatever the log level. Lock-free, no system call. */
void tb_stats_notice(struct tb_sock *s, enum tb_notice k);

/* A request to d was not sent: the thread's request budget was spent (request.h). */
void tb_stats_not_sent(const struct tb_dest *d);

/* An inbound request arrived with its budget already spent (a deadline header of 0). */
void tb_stats_arrived_spent(void);

/* Wakes the stats thread (a log line was held back: it reports the count a second later).
 * One futex system call; safe in a signal handler. Nothing without a segment. */
void tb_stats_wake(void);

/* Settings the stats thread needs (the stats file and its interval); at start-up. */
void tb_stats_configure(const struct tb_settings *s);

/* Starts the stats thread if the segment asked for it and it is not started. */
void tb_stats_thread_start(void);

/* Who starts it: run_soon(tb_stats_thread_start) when the segment is ready - the
 * watchdog's tb_wd_run_soon, named by init.c (the statistics are a layer below the
 * watchdog); without one, the asker starts it itself. */
void tb_stats_thread_starter(void (*run_soon)(void (*)(void)));

/* A fork child: the stats thread is the parent's. */
void tb_stats_fork_child(void);

#endif
