/* stats.c - `timebox stats`: the governed processes of this user, and one process's table of
 * destinations (or its Prometheus metrics), read from its statistics segment. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "duration.h"
#include "stats_prom.h"
#include "stats_seg.h"

static const char USAGE[] =
	"usage: timebox stats                 list this user's governed processes\n"
	"       timebox stats PID             a table per destination of process PID\n"
	"       timebox stats PID --watch DURATION   the table again every DURATION\n"
	"       timebox stats PID --prom      the Prometheus text format\n";

/* The library's directory for this user (shim/gate_file.c chooses it the same way). */
static void stats_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (xdg != NULL && xdg[0] == '/' && strlen(xdg) < 240 && stat(xdg, &st) == 0 &&
	    S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0)
		snprintf(buf, len, "%s/timebox", xdg);
	else
		snprintf(buf, len, "/dev/shm/timebox-%u", (unsigned)geteuid());
}

static bool alive(int pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/*
 * Maps the segment of pid (read-write: a reader asks for a refresh through it). Only a
 * regular file of ours, closed to others, not a link. Returns NULL with a reason in why.
 */
static struct tb_stats_seg *map_seg(const char *dir, int pid, char *why, size_t len)
{
	char path[512];
	struct stat st;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/stats-%d", dir, pid);
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "no statistics for pid %d (%s): is it governed by timebox?",
			 pid, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077) != 0 || st.st_size < (off_t)sizeof(struct tb_stats_seg)) {
		snprintf(why, len, "%s is not a statistics segment of ours", path);
		close(fd);
		return NULL;
	}
	p = mmap(NULL, sizeof(struct tb_stats_seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		snprintf(why, len, "cannot map %s: %s", path, strerror(errno));
		return NULL;
	}
	if (((struct tb_stats_seg *)p)->magic != TB_STATS_MAGIC ||
	    ((struct tb_stats_seg *)p)->version != TB_STATS_VERSION) {
		snprintf(why, len, "%s: not a segment this version of timebox reads", path);
		munmap(p, sizeof(struct tb_stats_seg));
		return NULL;
	}
	return p;
}

/* Asks the process's stats thread to refresh the gauges, and waits for it (200 ms at most:
 * a stopped process shows its last figures). */
static void refresh(struct tb_stats_seg *seg)
{
	uint32_t before = atomic_load(&seg->refreshed);
	struct timespec ts = { 0, 20 * 1000 * 1000 };

	atomic_fetch_add(&seg->wake, 1);
	syscall(SYS_futex, &seg->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	for (int i = 0; i < 10 && atomic_load(&seg->refreshed) == before; i++)
		syscall(SYS_futex, &seg->refreshed, FUTEX_WAIT, before, &ts, NULL, 0);
}

/* Removes the segments of processes that are gone (a kill -9 leaves them). */
static int clean_dead(const char *dir, bool quiet)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int removed = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long pid;

		if (strncmp(e->d_name, "stats-", 6) != 0)
			continue;
		pid = strtol(e->d_name + 6, &end, 10);
		if (*end != '\0' || pid <= 0 || pid > INT_MAX || alive((int)pid))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
			removed++;
			if (!quiet)
				fprintf(stderr, "timebox: removed the statistics of pid %ld, which "
					"is gone\n", pid);
		}
	}
	closedir(d);
	return removed;
}

static int list(const char *dir)
{
	DIR *d;
	struct dirent *e;
	int n = 0;

	clean_dead(dir, false);
	d = opendir(dir);
	if (d == NULL) {
		printf("no governed process (no %s)\n", dir);
		return EXIT_SUCCESS;
	}
	printf("%-8s %-16s %-20s %6s %10s %8s\n", "PID", "COMMAND", "STARTED", "DESTS",
	       "CALLS", "CUTS");
	while ((e = readdir(d)) != NULL) {
		struct tb_stats_row rows[TB_STATS_DESTS];
		unsigned long long calls = 0, cuts = 0;
		struct tb_stats_seg *seg;
		char why[600], when[32];
		struct tm tm;
		time_t t;
		int pid, k;

		if (strncmp(e->d_name, "stats-", 6) != 0)
			continue;
		pid = atoi(e->d_name + 6);
		seg = map_seg(dir, pid, why, sizeof(why));
		if (seg == NULL)
			continue;
		k = tb_stats_rows(seg, rows);
		for (int i = 0; i < k; i++) {
			calls += rows[i].calls;
			for (int p = 0; p < TB_PHASE_COUNT; p++)
				cuts += rows[i].cuts[p];
		}
		t = (time_t)seg->started;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
		printf("%-8d %-16.16s %-20s %6d %10llu %8llu\n", pid, seg->comm, when, k, calls,
		       cuts);
		munmap(seg, sizeof(*seg));
		n++;
	}
	closedir(d);
	if (n == 0)
		printf("(none)\n");
	return EXIT_SUCCESS;
}

/* A latency in us as "850us", "12.5ms", "1.20s"; "-" when there is none. */
static const char *lat(int64_t us, char *buf, size_t len)
{
	if (us < 0)
		snprintf(buf, len, "-");
	else if (us < 1000)
		snprintf(buf, len, "%lldus", (long long)us);
	else if (us < 1000000)
		snprintf(buf, len, "%.1fms", (double)us / 1e3);
	else
		snprintf(buf, len, "%.2fs", (double)us / 1e6);
	return buf;
}

static const char *breaker_state(unsigned long long st)
{
	return st == 1 ? "open" : st == 2 ? "half-open" : "closed";
}

/* The downstream's protection, for the destinations that have one (docs/breaker.md). */
static void protection_table(const struct tb_stats_row *rows, int n)
{
	char a[16], b[16], lim[24];
	bool any = false;

	for (int i = 0; i < n; i++)
		any |= rows[i].protect;
	if (!any)
		return;
	printf("%-22s %-9s %6s %8s %8s %13s %8s %7s %7s %7s\n", "DEST", "BREAKER", "OPENED",
	       "REFUSED", "RETRIES", "RETRY_REFUSED", "AUTO_MAX", "IN_USE", "QUEUED", "MIN_RTT");
	for (int i = 0; i < n; i++) {
		const struct tb_stats_row *r = &rows[i];

		if (!r->protect)
			continue;
		if (r->auto_limit > 0)
			snprintf(lim, sizeof(lim), "%lld", r->auto_limit);
		else
			snprintf(lim, sizeof(lim), "-");
		printf("%-22s %-9s %6llu %8llu %8llu %13llu %8s %7ld %7ld %7s (rtt %s)\n",
		       r->dest, breaker_state(r->breaker_state), r->breaker_opened,
		       r->breaker_refused, r->retries, r->retry_refused, lim, r->leased,
		       r->pending, lat(r->auto_limit > 0 ? r->min_rtt_us : -1, a, sizeof(a)),
		       lat(r->auto_limit > 0 ? r->rtt_us : -1, b, sizeof(b)));
	}
}

static void table(const struct tb_stats_seg *seg)
{
	struct tb_stats_row rows[TB_STATS_DESTS];
	int n = tb_stats_rows(seg, rows);
	char a[16], b[16], c[16], d[16];

	printf("pid %d (%s): %d destination%s", seg->pid, seg->comm, n, n == 1 ? "" : "s");
	if (atomic_load(&seg->other_calls) > 0)
		printf(", %llu calls to destinations past the table",
		       (unsigned long long)atomic_load(&seg->other_calls));
	if (atomic_load(&seg->arrived_spent) > 0)
		printf(", %llu inbound requests arrived with their budget spent",
		       (unsigned long long)atomic_load(&seg->arrived_spent));
	printf("\n%-22s %-16s %6s %7s %5s %4s %7s %7s %6s %s %7s %7s %8s %8s %8s %s\n", "DEST", "HOST",
	       "LEASED", "PENDING", "AVAIL", "MAX", "CALLS", "DONE", "REJECT",
	       "CUTS gate/conn/write/fb/read/dl", "FB_P50", "FB_P99", "CALL_P50", "CALL_P99",
	       "NOT_SENT", "NOTICES tls_answered_wait/framing_raw");
	for (int i = 0; i < n; i++) {
		const struct tb_stats_row *r = &rows[i];
		char cuts[160], avail[24], notices[48];

		snprintf(cuts, sizeof(cuts), "%llu/%llu/%llu/%llu/%llu/%llu",
			 r->cuts[TB_PHASE_GATE], r->cuts[TB_PHASE_CONNECT], r->cuts[TB_PHASE_WRITE],
			 r->cuts[TB_PHASE_FIRST_BYTE], r->cuts[TB_PHASE_READ],
			 r->cuts[TB_PHASE_DEADLINE]);
		snprintf(notices, sizeof(notices), "%llu/%llu",
			 r->notices[TB_NOTICE_TLS_ANSWERED_WAIT], r->notices[TB_NOTICE_FRAMING_RAW]);
		if (r->max > 0)
			snprintf(avail, sizeof(avail), "%ld",
				 r->max > r->leased ? r->max - r->leased : 0);
		else
			snprintf(avail, sizeof(avail), "-");
		printf("%-22s %-16.16s %6ld %7ld %5s %4ld %7llu %7llu %6llu %-31s %7s %7s %8s %8s "
		       "%8llu %s\n",
		       r->dest, r->host[0] ? r->host : "-", r->leased, r->pending, avail, r->max,
		       r->calls, r->completed, r->rejects, cuts,
		       lat(tb_hist_quantile(&r->hist[TB_HIST_FIRST_BYTE], 0.5), a, sizeof(a)),
		       lat(tb_hist_quantile(&r->hist[TB_HIST_FIRST_BYTE], 0.99), b, sizeof(b)),
		       lat(tb_hist_quantile(&r->hist[TB_HIST_CALL], 0.5), c, sizeof(c)),
		       lat(tb_hist_quantile(&r->hist[TB_HIST_CALL], 0.99), d, sizeof(d)),
		       r->not_sent, notices);
	}
	protection_table(rows, n);
	fflush(stdout);
}

static int prom(const struct tb_stats_seg *seg)
{
	static struct tb_stats_row rows[TB_STATS_DESTS];
	int n = tb_stats_rows(seg, rows);
	size_t need = tb_stats_prom(rows, n, seg->pid, NULL, 0);
	size_t more = tb_stats_prom_process(seg, seg->pid, NULL, 0);
	char *buf = malloc(need + more + 1);

	if (buf == NULL) {
		fprintf(stderr, "timebox stats: out of memory\n");
		return EXIT_FAILURE;
	}
	tb_stats_prom(rows, n, seg->pid, buf, need + 1);
	tb_stats_prom_process(seg, seg->pid, buf + need, more + 1);
	fputs(buf, stdout);
	free(buf);
	return EXIT_SUCCESS;
}

struct tb_stats_seg *tb_cli_stats_open(int pid, char *why, size_t len)
{
	char dir[300];
	struct tb_stats_seg *seg;

	stats_dir(dir, sizeof(dir));
	clean_dead(dir, true);
	seg = map_seg(dir, pid, why, len);
	if (seg != NULL)
		refresh(seg);
	return seg;
}

void tb_cli_stats_refresh(struct tb_stats_seg *seg)
{
	refresh(seg);
}

void tb_cli_stats_close(struct tb_stats_seg *seg)
{
	if (seg != NULL)
		munmap(seg, sizeof(*seg));
}

int tb_stats_main(int argc, char **argv)
{
	char dir[300], why[600];
	const char *err = NULL;
	int64_t watch = 0;
	bool as_prom = false;
	struct tb_stats_seg *seg;
	long pid = 0;
	char *end;

	stats_dir(dir, sizeof(dir));
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(USAGE, stdout);
			return EXIT_SUCCESS;
		} else if (strcmp(argv[i], "--prom") == 0) {
			as_prom = true;
		} else if (strcmp(argv[i], "--watch") == 0 && i + 1 < argc) {
			if (tb_duration_parse(argv[++i], &watch, &err) != 0 || watch <= 0) {
				fprintf(stderr, "timebox stats: --watch %s: %s\n", argv[i],
					err != NULL ? err : "a duration above 0");
				return EXIT_USAGE;
			}
		} else if (pid == 0 && (pid = strtol(argv[i], &end, 10)) > 0 && *end == '\0' &&
			   pid <= INT_MAX) {
			continue;
		} else {
			fprintf(stderr, "timebox stats: unexpected '%s'\n%s", argv[i], USAGE);
			return EXIT_USAGE;
		}
	}
	if (pid == 0) {
		if (as_prom || watch > 0) {
			fprintf(stderr, "timebox stats: --prom and --watch need a PID\n%s", USAGE);
			return EXIT_USAGE;
		}
		return list(dir);
	}
	seg = tb_cli_stats_open((int)pid, why, sizeof(why));
	if (seg == NULL) {
		fprintf(stderr, "timebox stats: %s\n", why);
		return EXIT_FAILURE;
	}
	if (as_prom)
		return prom(seg);
	for (;;) {
		struct timespec ts = { (time_t)(watch / 1000000000), (long)(watch % 1000000000) };

		table(seg);
		if (watch == 0 || !alive((int)pid))
			break;
		nanosleep(&ts, NULL);
		refresh(seg);
		printf("\n");
	}
	return EXIT_SUCCESS;
}
