/* main.c - the stress driver: starts the fault server, runs the client under the library,
 * then judges every call against what the server saw and prints the invariant table.
 * usage: stress [--short] [--threads N] [--secs N] [--seed N] [--slack MS] 
 *        (LD_PRELOAD for the client comes from $STRESS_PRELOAD: sanitizer runtime first) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

static const char *const kind_names[NKIND] = { "normal", "drip", "stall", "reset",
					       "slow-drain", "stream", "side", "blackhole" };
static int failed;

static void row(const char *name, unsigned long long bad, const char *detail)
{
	printf("  %-34s %-5s %llu%s%s\n", name, bad ? "FAIL" : "ok", bad, *detail ? "  " : "",
	       detail);
	failed |= bad != 0;
}

static unsigned long long sum_get(const char *path, const char *key)
{
	char line[256], k[128];
	unsigned long long v, r = 0;
	FILE *f = fopen(path, "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %llu", k, &v) == 2 && strcmp(k, key) == 0)
			r = v;
	if (f)
		fclose(f);
	return r;
}

static double sum_getf(const char *path, const char *key)
{
	char line[256], k[128];
	double v, r = -1;
	FILE *f = fopen(path, "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %lf", k, &v) == 2 && strcmp(k, key) == 0)
			r = v;
	if (f)
		fclose(f);
	return r;
}

/* Runs the client under $STRESS_PRELOAD; kills it (stacks first) past its time. */
static int run_client(char **argv, const char *out, const char *logpath)
{
	char cfgs[512], outs[300], logs[300], conns[64];
	const char *pre = getenv("STRESS_PRELOAD");
	int status = 0;
	pid_t pid;
	int64_t limit;

	snprintf(cfgs, sizeof(cfgs), "%d %d %llu %u %u %u %u %u %d %d %d %d %d %d %d %d",
		 cfg.threads, cfg.secs, (unsigned long long)cfg.seed, cfg.connect_ms, cfg.read_ms,
		 cfg.write_ms, cfg.deadline_ms, cfg.slack_ms, cfg.ports[0], cfg.ports[1],
		 cfg.ports[2], cfg.ports[3], cfg.ports[4], cfg.ports[5], cfg.ports[6], cfg.ports[7]);
	snprintf(outs, sizeof(outs), "%s", out);
	snprintf(logs, sizeof(logs), "%s", logpath);
	snprintf(conns, sizeof(conns), "%d", cfg.threads * 4 + 64);
	pid = fork();
	if (pid == 0) {
		char v[64];

		for (char **e = environ; *e;) { /* the run's own TIMEBOX_* settings only */
			if (strncmp(*e, "TIMEBOX_", 8) == 0) {
				char name[128];

				snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
				unsetenv(name);
				continue;
			}
			e++;
		}
		setenv("STRESS_CFG", cfgs, 1);
		setenv("STRESS_OUT", outs, 1);
		setenv("TIMEBOX_LOG", logs, 1);
		setenv("TIMEBOX_LOG_LEVEL", "info", 1);
		setenv("TIMEBOX_MAX_CONNS", conns, 1);
		snprintf(v, sizeof(v), "%ums", cfg.connect_ms);
		setenv("TIMEBOX_CONNECT_TIMEOUT", v, 1);
		snprintf(v, sizeof(v), "%ums", cfg.read_ms);
		setenv("TIMEBOX_READ_TIMEOUT", v, 1);
		snprintf(v, sizeof(v), "%ums", cfg.write_ms);
		setenv("TIMEBOX_WRITE_TIMEOUT", v, 1);
		snprintf(v, sizeof(v), "%ums", cfg.deadline_ms);
		setenv("TIMEBOX_DEADLINE", v, 1);
		if (pre && *pre)
			setenv("LD_PRELOAD", pre, 1);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	limit = now_ns() + ((int64_t)cfg.secs + 120) * 1000000000;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ns() > limit) {
			char p[16];

			fprintf(stderr, "stress: the client outlived its time: stacks, then kill\n");
			snprintf(p, sizeof(p), "%d", (int)pid);
			if (fork() == 0) {
				execlp("gdb", "gdb", "-p", p, "-batch", "-ex", "thread apply all bt",
				       (char *)NULL);
				_exit(127);
			}
			sleep(20);
			kill(pid, SIGKILL);
		}
		usleep(100000);
	}
	return status;
}

/* The library's lines about fd of thread tid (what it said about a cut). */
static void grep_log(const char *logpath, int tid, int fd)
{
	char line[1024], t[32], f[32];
	FILE *l = fopen(logpath, "re");

	snprintf(t, sizeof(t), "tid=%d\n", tid);
	snprintf(f, sizeof(f), " fd=%d ", fd);
	while (l && fgets(line, sizeof(line), l))
		if (strstr(line, t) && strstr(line, f))
			fprintf(stderr, "    %s", line);
	if (l)
		fclose(l);
}

/* Whether the library cut fd of thread tid in `phase` after more than own_ms + 50 ms (for the
 * deadline with own_ms the call's own age: a budget some earlier send had opened). */
static bool log_has(const char *logpath, int tid, int fd, const char *phase, long own_ms)
{
	char line[1024], t[32], f[32];
	FILE *l = fopen(logpath, "re");
	bool found = false;

	snprintf(t, sizeof(t), "tid=%d\n", tid);
	snprintf(f, sizeof(f), " fd=%d ", fd);
	while (l && !found && fgets(line, sizeof(line), l)) {
		char *e = strstr(line, "elapsed_ms=");

		found = strstr(line, t) && strstr(line, f) && strstr(line, phase) && e &&
			atol(e + 11) > own_ms + 50;
	}
	if (l)
		fclose(l);
	return found;
}

/* Judges each client record against the server's log; prints the table. */
static void judge(const char *out, const char *logpath, int status)
{
	char path[300], line[1024];
	struct srec *s = server_log();
	struct crec r;
	unsigned long long per[NKIND][4] = { { 0 } }, healthy_cut = 0, excused = 0, wrong = 0,
			   unexpected = 0, over = 0, side_bad = 0, n = 0, leaked = 0, tmo = 0,
			   gates = 0, hist[8] = { 0 }, excuse[5] = { 0 }, known[2] = { 0 },
			   kids[4] = { 0 };
	int64_t D = (int64_t)cfg.deadline_ms * 1000000, slack = (int64_t)cfg.slack_ms * 1000000;
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "%s.rec", out);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd >= 0 && read(fd, &r, sizeof(r)) == (ssize_t)sizeof(r)) {
		struct srec *v = r.conn_id < MAX_CONNS_LOG ? &s[r.conn_id] : NULL;
		int o = r.err == 0 ? 0 : r.err == ETIMEDOUT ? 1 : r.err == ECONNRESET ? 2 : 3;
		float lim = (float)(r.kind == K_SINK ? cfg.write_ms : cfg.read_ms);

		if (r.kind == K_SIDE) {
			if (v && v->side_bytes != r.bytes && side_bad++ < 5)
				fprintf(stderr, "side conn %llu: handlers sent %llu, server got %llu\n",
					(unsigned long long)r.conn_id, (unsigned long long)r.bytes,
					(unsigned long long)v->side_bytes);
			continue;
		}
		n++;
		if (r.how_closed == CL_OTHER) {
			hist[o]++;
			continue; /* its fd was taken away: any end is native, the time is bounded */
		}
		per[r.kind][o]++;
		if (r.mode == M_CHILD)
			kids[o]++;
		if (r.t_end - r.t_start > D + slack)
			over++;
		if (r.err == ETIMEDOUT && (r.healthy || r.kind == K_RESET)) {
			int why = r.in_window ? 1 : r.tainted && r.t_end >= r.chain_start + D ? 2 :
				  r.t_end - r.t_start >= D ? 3 :
				  r.stage == ST_CONNECT && r.t_end - r.t_start >=
				  (int64_t)cfg.connect_ms * 1000000 ? 3 : v && v->max_gap_ms >= lim ? 4 :
				  r.stage == ST_RECV && v && (v->t_first == 0 || v->t_first - r.t_sent >=
				  (int64_t)cfg.read_ms * 1000000) ? 4 : 0;

			/* fd numbers recur in the log: a send-stage cut is looked up as a write
			 * cut first, and a deadline cut only for a thread whose handler sent. */
			if (!why && r.stage == ST_SEND && v && v->max_gap_ms < (float)cfg.write_ms / 2 &&
			    log_has(logpath, r.tid, r.fd, "phase=write", 0))
				why = 6;
			if (!why && r.side_last != 0 && r.side_last < r.t_start &&
			    log_has(logpath, r.tid, r.fd, "phase=deadline",
				    (long)((r.t_end - r.t_start) / 1000000)))
				why = 5;
			if (why >= 5) {
				if (known[why - 5]++ < 3)
					fprintf(stderr, "HEALTHY CUT (a fixed defect again): conn %llu %s cut after %lld ms: %s\n",
					(unsigned long long)r.conn_id, kind_names[r.kind],
					(long long)((r.t_end - r.t_start) / 1000000), why == 5 ?
					"its deadline began at a handler's send on another socket" :
					"write_timeout while the peer drained (server gaps below "
					"half the limit)");
			} else if (why) {
				excused++;
				excuse[why]++;
			} else if (healthy_cut++ < 10) {
				fprintf(stderr, "HEALTHY CUT: conn %llu %s%s family %d after %lld ms "
					"in %s (server: seen %d, max gap %.0f ms, answered %d at %+lld ms; "
					"tainted %d, tid %d fd %d)\n",
					(unsigned long long)r.conn_id, kind_names[r.kind],
					r.mode == M_CHILD ? " (a child's)" : "", r.family,
					(long long)((r.t_end - r.t_start) / 1000000),
					r.stage == ST_CONNECT ? "connect" : r.stage == ST_SEND ?
					"sending" : "receiving", v ? v->seen : 0,
					v ? v->max_gap_ms : -1.0, v ? v->done : 0,
					v && v->done ? (long long)((v->t_done - r.t_start) / 1000000) : 0,
					r.tainted, r.tid, r.fd);
				grep_log(logpath, r.tid, r.fd);
			}
		} else if (r.err != 0 && r.err != ETIMEDOUT &&
			   !(r.kind == K_RESET && (r.err == ECONNRESET || r.err == EPIPE))) {
			if (unexpected++ < 10)
			{
				fprintf(stderr, "UNEXPECTED: conn %llu %s family %d mode %d while %s: "
					"%s (tid %d fd %d)\n", (unsigned long long)r.conn_id,
					kind_names[r.kind], r.family, r.mode, r.stage == ST_CONNECT ?
					"connecting" : r.stage == ST_SEND ? "sending" : "receiving",
					strerror(r.err), r.tid, r.fd);
				grep_log(logpath, r.tid, r.fd);
			}
		}
		if (r.err == 0 && v && v->seen && v->t_eof && r.t_close &&
		    v->t_eof < r.t_close - 2000000 && wrong++ < 10)
			fprintf(stderr, "WRONG CUT: conn %llu %s: server saw %s %.1f ms before "
				"the client closed\n", (unsigned long long)r.conn_id,
				kind_names[r.kind], v->eof_kind == 1 ? "FIN" : "RST",
				(double)(r.t_close - v->t_eof) / 1e6);
	}
	if (fd >= 0)
		close(fd);
	f = fopen(logpath, "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *l = strstr(line, "leased=");

		if (strstr(line, "event=timeout"))
			tmo++;
		if (strstr(line, "event=gate")) {
			gates++;
			if (l && atol(l + 7) != 0 && leaked++ < 5)
				fprintf(stderr, "LEAK: %s", line);
		}
	}
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "%s.sum", out);
	printf("\nstress: seed %llu, %d threads, %d s; limits connect %u read %u write %u "
	       "deadline %u ms\n", (unsigned long long)cfg.seed, cfg.threads, cfg.secs,
	       cfg.connect_ms, cfg.read_ms, cfg.write_ms, cfg.deadline_ms);
	printf("  calls %llu (by kind: ok/ETIMEDOUT/ECONNRESET/other)\n", n);
	for (int k = 0; k < NKIND; k++)
		if (k != K_SIDE)
			printf("    %-11s %6llu %6llu %6llu %6llu   port %d\n", kind_names[k],
			       per[k][0], per[k][1], per[k][2], per[k][3], cfg.ports[k]);
	printf("  fd taken from a waiting thread: close %llu, close_range %llu, dup2 %llu "
	       "(the wait ended: ok/EOF %llu, ETIMEDOUT %llu, other %llu)\n",
	       sum_get(path, "waited.close"), sum_get(path, "waited.close_range"),
	       sum_get(path, "waited.dup2"), hist[0], hist[1], hist[2] + hist[3]);
	printf("  forks %llu, fork+exec %llu, vfork+exec %llu, python-style %llu, posix_spawn "
	       "%llu; their calls (judged as the others) %llu/%llu/%llu/%llu\n",
	       sum_get(path, "forks"), sum_get(path, "fork_execs"), sum_get(path, "vforks"),
	       sum_get(path, "pyspawns"), sum_get(path, "spawns"), kids[0], kids[1], kids[2],
	       kids[3]);
	printf("  side connections retried after a cut a loaded machine explains: %llu\n",
	       sum_get(path, "side_retries"));
	printf("  signals %llu SA_RESTART + %llu without; handler sends %llu bytes (EAGAIN %llu, "
	       "ETIMEDOUT %llu, other %llu)\n", sum_get(path, "signals.restart"),
	       sum_get(path, "signals.norestart"), sum_get(path, "side.sent"),
	       sum_get(path, "side.eagain"), sum_get(path, "side.etimedout"),
	       sum_get(path, "side.other"));
	printf("  fd reuses %llu, dup/dup2 over live fds %llu, bytes checked %llu, EINTR seen "
	       "%llu, EAGAIN checks %llu, library timeouts logged %llu, gate summaries %llu\n",
	       sum_get(path, "fd_reuse"), sum_get(path, "dups"), sum_get(path, "bytes"),
	       sum_get(path, "eintr_ok"), sum_get(path, "eagain_checks"), tmo, gates);
	printf("  healthy-kind calls cut for a reason (not violations): %llu: retry_window %llu, "
	       "a failed attempt's deadline %llu, ran past the limit that cut it (a loaded machine) "
	       "%llu, server slower than "
	       "the limit %llu\n", excused, excuse[1], excuse[2], excuse[3], excuse[4]);
	printf("\ninvariant                            state count\n");
	snprintf(line, sizeof(line), "exit status %#x", status);
	row("no crash", !WIFEXITED(status) || WEXITSTATUS(status) != 0, line);
	row("no hang (calls within deadline+slack)", over + sum_get(path, "hang"),
	    sum_get(path, "hang") ? "the client's watchdog aborted: stacks above" : "");
	snprintf(line, sizeof(line), "run %.2f %%, idle %.2f %% of a core",
		 sum_getf(path, "wd_cpu_run"), sum_getf(path, "wd_cpu_idle"));
	row("watchdog never spins (<5 %)", sum_getf(path, "wd_cpu_run") >= 5 ||
	    sum_getf(path, "wd_cpu_idle") >= 5 || sum_getf(path, "wd_cpu_run") < 0, line);
	row("every cut the right socket", wrong, "");
	row("no healthy call cut", healthy_cut, "");
	row("  deadline begun by another send", known[0], "regress/budget_other_socket.c");
	row("  write cut under a steady drain", known[1],
	    "regress/write_steady_drain.c, write_probe_drain.c");
	row("healthy calls: no other error", unexpected, "");
	snprintf(line, sizeof(line), "fds %llu before, %llu after",
		 sum_get(path, "fds_before"), sum_get(path, "fds_after"));
	row("no fd leak", sum_get(path, "fds_before") != sum_get(path, "fds_after"), line);
	row("no gate slot leak (leased=0)", leaked + (gates == 0), "");
	row("EINTR only without SA_RESTART", sum_get(path, "eintr_spurious"), "");
	row("EAGAIN when nothing queued", sum_get(path, "eagain_bad"), "");
	row("bytes intact", sum_get(path, "corrupt"), "");
	row("handler bytes all arrived", side_bad, "");
	row("children exit 0", sum_get(path, "child_fail"), "");
	row("setup", sum_get(path, "setup_fail") + sum_get(path, "rec_lost"), "");
}

int main(int argc, char **argv)
{
	char out[256], logpath[300];
	uint64_t s;
	int status;

	if (argc == 5 && strcmp(argv[1], "--child") == 0)
		return child_exchange(atoi(argv[2]), strtoull(argv[3], NULL, 10),
				      strtoull(argv[4], NULL, 10));
	if (getenv("STRESS_CFG") != NULL)
		return client_main(argc, argv);
	cfg.threads = 200;
	cfg.secs = 240;
	cfg.slack_ms = 3000;
	cfg.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";

		if (strcmp(a, "--short") == 0) {
			cfg.threads = 50;
			cfg.secs = 30;
			continue;
		}
		i++;
		if (strcmp(a, "--threads") == 0)
			cfg.threads = atoi(v);
		else if (strcmp(a, "--secs") == 0)
			cfg.secs = atoi(v);
		else if (strcmp(a, "--seed") == 0)
			cfg.seed = strtoull(v, NULL, 10);
		else if (strcmp(a, "--slack") == 0)
			cfg.slack_ms = (uint32_t)atoi(v);
		else {
			fprintf(stderr, "usage: stress [--short] [--threads N] [--secs N] "
					"[--seed N] [--slack MS]\n");
			return 2;
		}
	}
	s = cfg.seed;
	cfg.connect_ms = rnd(&s, 200, 400);
	cfg.read_ms = rnd(&s, 300, 600);
	cfg.write_ms = rnd(&s, 300, 600);
	cfg.deadline_ms = rnd(&s, 1500, 2500);
	printf("stress: seed %llu (rerun with --seed %llu)\n", (unsigned long long)cfg.seed,
	       (unsigned long long)cfg.seed);
	fflush(stdout);
	signal(SIGPIPE, SIG_IGN);
	if (server_start(cfg.ports) < 0) {
		perror("stress: server");
		return 2;
	}
	snprintf(out, sizeof(out), "/tmp/stress.%d", (int)getpid());
	snprintf(logpath, sizeof(logpath), "%s.log", out);
	status = run_client(argv, out, logpath);
	usleep(300000); /* the server's threads see the last ends of streams */
	judge(out, logpath, status);
	server_stop();
	printf("\nstress: %s (log %s)\n", failed ? "FAILED" : "passed", logpath);
	if (!failed) {
		char p[300];

		snprintf(p, sizeof(p), "%s.rec", out);
		unlink(p);
		snprintf(p, sizeof(p), "%s.sum", out);
		unlink(p);
		unlink(logpath);
	}
	return failed;
}
