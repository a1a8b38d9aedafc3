/* suggest.c - `timebox suggest PID|STATS-FILE`: reads a process's measurements (its statistics
 * segment, or the Prometheus file it keeps written) and prints a configuration for them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "duration.h"
#include "stats_prom.h"
#include "stats_seg.h"
#include "suggest.h"

static const char USAGE[] =
	"usage: timebox suggest PID|STATS-FILE [--budget DURATION] [--qps-window DURATION]\n"
	"\n"
	"Prints a configuration file (timebox.conf(5)) with a rule per destination the process\n"
	"called, each value chosen from what was measured and commented with where it came\n"
	"from: first_byte/read timeouts 1.5-2 x the p99, connect from the handshake's p99,\n"
	"max_conns = QPS x p99 x 1.5 (Little's law), a deadline that fits --budget. Run the\n"
	"program under `timebox run --observe` first: it measures and governs nothing.\n"
	"\n"
	"  PID              a running process's statistics segment (what timebox stats reads)\n"
	"  STATS-FILE       the file TIMEBOX_STATS_FILE keeps written (Prometheus text)\n"
	"  --budget D       the most one call may take (your caller's budget minus your own\n"
	"                   work): every deadline; limits that cannot fit are reported\n"
	"  --qps-window D   measure the rate over D (two readings D apart; a stats file must be\n"
	"                   rewritten meanwhile). Without it: a PID's calls over its age; a\n"
	"                   stats file has no time base, and max_conns is left off\n"
	"\n"
	"Exit status: 0 (warnings are comments in the output and lines on stderr), 1 when\n"
	"nothing can be read, 2 for a bad command line.\n";

/* One destination as read: the segment's row or the stats file's metrics. */
struct reading {
	char dest[TB_STATS_TEXT];
	char host[TB_STATS_TEXT];
	unsigned long long calls;
	long leased, max;
	struct tb_dist dist[TB_HIST_COUNT];
};

struct snapshot {
	int n;
	double at; /* seconds: monotonic for a segment, the file's mtime for a file; < 0 none */
	struct reading r[TB_STATS_DESTS];
};

static double monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000), (long)(ns % 1000000000) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- the segment ------------------------------------------------------------------------- */

static void from_segment(const struct tb_stats_seg *seg, struct snapshot *s)
{
	static struct tb_stats_row rows[TB_STATS_DESTS];
	int n = tb_stats_rows(seg, rows);

	s->n = 0;
	s->at = monotonic_s();
	for (int i = 0; i < n && s->n < TB_STATS_DESTS; i++) {
		struct reading *r = &s->r[s->n++];

		memcpy(r->dest, rows[i].dest, sizeof(r->dest));
		memcpy(r->host, rows[i].host, sizeof(r->host));
		r->calls = rows[i].calls;
		r->max = rows[i].max;
		r->leased = rows[i].max > 0 ? rows[i].leased : -1;
		for (int k = 0; k < TB_HIST_COUNT; k++)
			tb_dist_from_hist(&r->dist[k], &rows[i].hist[k]);
	}
}

/* ---- the stats file ---------------------------------------------------------------------- */

static const char *const hist_metric[TB_HIST_COUNT] = {
	[TB_HIST_CONNECT] = "timebox_connect_seconds_bucket",
	[TB_HIST_FIRST_BYTE] = "timebox_first_byte_seconds_bucket",
	[TB_HIST_CALL] = "timebox_call_seconds_bucket",
};

#define LE_SLOTS (TB_PROM_LE_LAST - TB_PROM_LE_FIRST + 2) /* the 2^k edges and +Inf */

struct parsed {
	struct reading r;
	unsigned long long cum[TB_HIST_COUNT][LE_SLOTS]; /* cumulative, as the file gives them */
};

/* Reads one label value (after its opening quote) with the format's three escapes. Returns
 * the text after the closing quote, or NULL. */
static const char *label_value(const char *p, char *out, size_t len)
{
	size_t n = 0;

	for (; *p != '\0' && *p != '"'; p++) {
		char c = *p;

		if (c == '\\' && p[1] != '\0') {
			p++;
			c = *p == 'n' ? '\n' : *p;
		}
		if (n + 1 < len)
			out[n++] = c;
	}
	out[n] = '\0';
	return *p == '"' ? p + 1 : NULL;
}

/* The slot of an `le` edge: 2^k microseconds written in seconds, or +Inf. -1 otherwise. */
static int le_slot(const char *le)
{
	double v;

	if (strcmp(le, "+Inf") == 0)
		return LE_SLOTS - 1;
	v = strtod(le, NULL) * 1e6;
	for (int e = TB_PROM_LE_FIRST; e <= TB_PROM_LE_LAST; e++) {
		double edge = (double)(UINT64_C(1) << e);

		if (v > edge * 0.999 && v < edge * 1.001)
			return e - TB_PROM_LE_FIRST;
	}
	return -1;
}

static struct parsed *row_named(struct parsed *rows, int *n, const char *dest, const char *host)
{
	for (int i = 0; i < *n; i++)
		if (strcmp(rows[i].r.dest, dest) == 0)
			return &rows[i];
	if (*n >= TB_STATS_DESTS)
		return NULL;
	memset(&rows[*n], 0, sizeof(rows[*n]));
	snprintf(rows[*n].r.dest, sizeof(rows[*n].r.dest), "%s", dest);
	snprintf(rows[*n].r.host, sizeof(rows[*n].r.host), "%s", host);
	rows[*n].r.leased = -1;
	return &rows[(*n)++];
}

/* One sample line: name{labels} value. Lines of other metrics, comments and HELP/TYPE are
 * skipped; what timebox writes is all that is understood. */
static void parse_line(const char *line, struct parsed *rows, int *n)
{
	char name[64], key[32], val[TB_STATS_TEXT], dest[TB_STATS_TEXT] = "",
		host[TB_STATS_TEXT] = "", le[32] = "";
	const char *p = strchr(line, '{');
	unsigned long long v;
	struct parsed *row;
	size_t len;

	if (line[0] == '#' || p == NULL || (len = (size_t)(p - line)) >= sizeof(name))
		return;
	memcpy(name, line, len);
	name[len] = '\0';
	for (p++; *p != '\0' && *p != '}';) {
		const char *eq = strchr(p, '=');

		if (eq == NULL || eq[1] != '"' || (size_t)(eq - p) >= sizeof(key))
			return;
		memcpy(key, p, (size_t)(eq - p));
		key[eq - p] = '\0';
		if (strcmp(key, "dest") == 0)
			p = label_value(eq + 2, dest, sizeof(dest));
		else if (strcmp(key, "host") == 0)
			p = label_value(eq + 2, host, sizeof(host));
		else if (strcmp(key, "le") == 0)
			p = label_value(eq + 2, le, sizeof(le));
		else
			p = label_value(eq + 2, val, sizeof(val));
		if (p == NULL)
			return;
		if (*p == ',')
			p++;
	}
	if (*p != '}' || dest[0] == '\0')
		return;
	v = strtoull(p + 1, NULL, 10);
	row = row_named(rows, n, dest, host);
	if (row == NULL)
		return;
	if (strcmp(name, "timebox_calls_total") == 0)
		row->r.calls = v;
	else if (strcmp(name, "timebox_gate_leased") == 0)
		row->r.leased = (long)v;
	else if (strcmp(name, "timebox_gate_max") == 0)
		row->r.max = (long)v;
	for (int k = 0; k < TB_HIST_COUNT; k++) {
		int slot = le[0] != '\0' ? le_slot(le) : -1;

		if (strcmp(name, hist_metric[k]) == 0 && slot >= 0)
			row->cum[k][slot] = v;
	}
}

/* The file's cumulative buckets as ranges: [2^(k-1), 2^k) us, the first from 0. */
static void to_dist(const unsigned long long *cum, struct tb_dist *d)
{
	unsigned long long prev = 0;

	tb_dist_init(d);
	for (int s = 0; s < LE_SLOTS; s++) {
		int e = TB_PROM_LE_FIRST + s;
		uint64_t lo = s == 0 ? 0 : UINT64_C(1) << (e - 1);
		uint64_t hi = s == LE_SLOTS - 1 ? UINT64_MAX : UINT64_C(1) << e;

		if (cum[s] > prev)
			tb_dist_add(d, lo, hi, cum[s] - prev);
		if (cum[s] > prev)
			prev = cum[s];
	}
}

static int from_file(const char *path, struct snapshot *s, char *why, size_t len)
{
	static struct parsed rows[TB_STATS_DESTS];
	FILE *f = fopen(path, "re");
	char line[1024];
	struct stat st;
	int n = 0;

	if (f == NULL || fstat(fileno(f), &st) < 0) {
		snprintf(why, len, "%s: %s", path, strerror(errno));
		if (f != NULL)
			fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL)
		parse_line(line, rows, &n);
	fclose(f);
	s->n = n;
	s->at = (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec / 1e9;
	for (int i = 0; i < n; i++) {
		s->r[i] = rows[i].r;
		if (s->r[i].max <= 0)
			s->r[i].leased = -1;
		for (int k = 0; k < TB_HIST_COUNT; k++)
			to_dist(rows[i].cum[k], &s->r[i].dist[k]);
	}
	return 0;
}

/* ---- the command ------------------------------------------------------------------------- */

static const struct reading *find(const struct snapshot *s, const char *dest)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->r[i].dest, dest) == 0)
			return &s->r[i];
	return NULL;
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "timebox suggest: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", USAGE);
	return EXIT_USAGE;
}

/* A duration option's value: above 0. */
static int duration_arg(const char *opt, const char *text, int64_t *out)
{
	const char *why = NULL;

	if (tb_duration_parse(text, out, &why) < 0 || *out <= 0) {
		fprintf(stderr, "timebox suggest: %s %s: %s\n", opt, text,
			why != NULL ? why : "a duration above 0");
		return -1;
	}
	return 0;
}

/* Fills in[i] from the latest reading and the rate from the pair (or from age_s). */
static void inputs(const struct snapshot *first, const struct snapshot *last, double age_s,
		   struct tb_suggest_in *in, int *n)
{
	*n = 0;
	for (int i = 0; i < last->n; i++) {
		const struct reading *r = &last->r[i], *before = first != NULL ? find(first, r->dest)
									      : NULL;
		struct tb_suggest_in *x = &in[(*n)++];

		memset(x, 0, sizeof(*x));
		snprintf(x->dest, sizeof(x->dest), "%s", r->dest);
		snprintf(x->host, sizeof(x->host), "%s", r->host);
		x->connect = r->dist[TB_HIST_CONNECT];
		x->first_byte = r->dist[TB_HIST_FIRST_BYTE];
		x->call = r->dist[TB_HIST_CALL];
		x->calls = r->calls;
		x->leased = r->leased;
		x->qps = -1;
		if (first != NULL && last->at > first->at) {
			unsigned long long was = before != NULL ? before->calls : 0;

			x->qps = r->calls >= was ? (double)(r->calls - was) / (last->at - first->at)
						 : -1; /* a new image of the process (exec) */
		}
		else if (first == NULL && age_s > 0)
			x->qps = (double)r->calls / age_s;
	}
}

int tb_suggest_main(int argc, char **argv)
{
	static struct snapshot first, last;
	static struct tb_suggest_in in[TB_STATS_DESTS];
	static struct tb_suggestion out[TB_STATS_DESTS];
	struct tb_suggest_opts opts = { 0 };
	const char *target = NULL;
	char why[600], source[400], qps_from[200], d[TB_DURATION_TEXT_MAX];
	int64_t window = 0;
	double age = -1;
	bool have_first = false, is_pid;
	long pid = 0;
	size_t need;
	char *text, *end;
	int n;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(USAGE, stdout);
			return EXIT_SUCCESS;
		} else if (strcmp(a, "--budget") == 0 && i + 1 < argc) {
			if (duration_arg(a, argv[++i], &opts.budget_ns) < 0)
				return EXIT_USAGE;
		} else if (strcmp(a, "--qps-window") == 0 && i + 1 < argc) {
			if (duration_arg(a, argv[++i], &window) < 0)
				return EXIT_USAGE;
		} else if (a[0] == '-' && a[1] != '\0') {
			return usage_error("unknown option or missing value '%s'", a);
		} else if (target == NULL) {
			target = a;
		} else {
			return usage_error("one process or file at a time ('%s')", a);
		}
	}
	if (target == NULL)
		return usage_error("%s", "no PID or STATS-FILE given");

	errno = 0;
	pid = strtol(target, &end, 10);
	is_pid = *end == '\0' && errno == 0 && pid > 0 && pid <= INT_MAX;
	if (is_pid) {
		struct tb_stats_seg *seg = tb_cli_stats_open((int)pid, why, sizeof(why));

		if (seg == NULL) {
			fprintf(stderr, "timebox suggest: %s\n", why);
			return EXIT_FAILURE;
		}
		snprintf(source, sizeof(source), "pid %d (%.64s)", seg->pid, seg->comm);
		from_segment(seg, &last);
		if (window > 0) {
			first = last;
			have_first = true;
			sleep_ns(window);
			tb_cli_stats_refresh(seg);
			from_segment(seg, &last);
		} else {
			age = difftime(time(NULL), (time_t)seg->started);
		}
		tb_cli_stats_close(seg);
	} else {
		snprintf(source, sizeof(source), "the stats file %.300s", target);
		if (from_file(target, &last, why, sizeof(why)) < 0) {
			fprintf(stderr, "timebox suggest: %s\n", why);
			return EXIT_FAILURE;
		}
		if (window > 0) {
			first = last;
			have_first = true;
			sleep_ns(window);
			if (from_file(target, &last, why, sizeof(why)) < 0) {
				fprintf(stderr, "timebox suggest: %s\n", why);
				return EXIT_FAILURE;
			}
			if (!(last.at > first.at))
				fprintf(stderr, "timebox suggest: %s was not rewritten in %s: no rate "
					"(is its process running? its stats_interval longer?)\n",
					target, tb_duration_format(window, d, sizeof(d)));
		}
	}

	if (have_first && last.at > first.at)
		snprintf(qps_from, sizeof(qps_from), "calls over %.1f s (--qps-window %s)",
			 last.at - first.at, tb_duration_format(window, d, sizeof(d)));
	else if (age > 0)
		snprintf(qps_from, sizeof(qps_from), "calls over the process's age, %.0f s "
			 "(an average: read it with --qps-window at a busy hour)", age);
	else
		snprintf(qps_from, sizeof(qps_from), "unknown (no time base)");
	inputs(have_first ? &first : NULL, &last, age, in, &n);
	for (int i = 0; i < n; i++) {
		in[i].coarse = !is_pid;
		tb_suggest(&in[i], &opts, &out[i]);
		for (int w = 0; w < out[i].nwarnings; w++)
			fprintf(stderr, "timebox suggest: %s: warning: %s\n", in[i].dest,
				out[i].warning[w]);
	}
	if (n == 0)
		fprintf(stderr, "timebox suggest: %s has measured no destination yet\n", source);

	need = tb_suggest_render(in, out, (size_t)n, &opts, source, qps_from, NULL, 0);
	text = malloc(need + 1);
	if (text == NULL) {
		fprintf(stderr, "timebox suggest: out of memory\n");
		return EXIT_FAILURE;
	}
	tb_suggest_render(in, out, (size_t)n, &opts, source, qps_from, text, need + 1);
	fputs(text, stdout);
	free(text);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
