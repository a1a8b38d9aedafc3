/* stats_segment_rows.c - a process's first connect allocated the whole statistics table.
 *
 * What happened: the statistics segment (stats-<pid> in the timebox directory, a tmpfs) was
 * created at the first governed connect with one fallocate of its whole size, 32
 * destination rows of histograms: 196 KB that tmpfs zeroes page by page, ~60 us inside
 * that connect, for rows most processes never use. Now the head and the first row are
 * allocated then, each later row by the first connect to a destination that needs it, and
 * nothing touches a row before its pages are allocated (a fault on a tmpfs hole allocates
 * a page, even a read's; on a full tmpfs that is SIGBUS).
 * The sequence, in a mount namespace of our own (as root) with the timebox directory on a
 * small tmpfs: (1) one connect: the file holds at most 32 KB (196 KB before), one row
 * allocated and published; (2) connects to three more destinations: four rows, each
 * published with its own destination; (3) 16 threads connect at once, each to a
 * destination of its own: rows claimed and allocated concurrently, every one gets a row
 * and none is counted as other; (4) the tmpfs filled, connects to three more: each
 * succeeds, the process lives (no SIGBUS), the log says once which row could not be had,
 * and those calls are counted as other.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>

#include "gate_regress.h"
#include "../../policy/stats_seg.h"

static const struct tb_stats_seg *map_own_segment(const char *dir, struct stat *st)
{
	char name[32], path[400];
	void *p;
	int fd;

	snprintf(name, sizeof(name), "stats-%d", (int)getpid());
	TBR_CHECK(tbg_find_file(dir, name, path, sizeof(path)), "no %s in %s", name, dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	TBR_CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	TBR_CHECK(fstat(fd, st) == 0, "fstat: %s", strerror(errno));
	/* Only the head is read through this map; rows are read where they are allocated. */
	p = mmap(NULL, sizeof(struct tb_stats_seg), PROT_READ, MAP_SHARED, fd, 0);
	TBR_CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	close(fd);
	return p;
}

static long file_kb(const char *dir)
{
	struct stat st;

	munmap((void *)map_own_segment(dir, &st), sizeof(struct tb_stats_seg));
	return (long)st.st_blocks * 512 / 1024;
}

static void connect_to(int port)
{
	double ms;
	int err, fd = tbg_connect(port, &err, &ms);

	TBR_CHECK(fd >= 0, "connect to port %d: %s", port, tbt_errno_name(err));
	close(fd);
}

/* Phase 3: threads that each connect to a destination of their own, at once. */
#define RACERS 16
static int racer_port[RACERS];
static pthread_barrier_t racers_go;

static void *racer(void *arg)
{
	pthread_barrier_wait(&racers_go);
	connect_to(racer_port[(intptr_t)arg]);
	return NULL;
}

static int child(const char *dir)
{
	int lfd[7], port[7], filler;
	const struct tb_stats_seg *seg;
	struct stat st;
	char fill[4096], path[300];
	unsigned full_rows;
	long kb;

	memset(fill, 1, sizeof(fill));
	for (int i = 0; i < 7; i++)
		lfd[i] = tbr_listen(&port[i]);

	connect_to(port[0]);
	kb = file_kb(dir);
	seg = map_own_segment(dir, &st);
	fprintf(stderr, "one destination: %ld KB allocated, %u rows\n", kb,
		atomic_load(&seg->rows_allocated));
	TBR_CHECK(kb <= 32, "the segment holds %ld KB after one connect (want <= 32: the head "
		  "and one row, not the whole table)", kb);
	TBR_CHECK(atomic_load(&seg->rows_allocated) == 1 &&
		  atomic_load(&seg->d[0].state) == 2 && atomic_load(&seg->d[0].calls) == 1,
		  "after one connect: rows %u, row 0 state %u calls %llu (want 1, 2, 1)",
		  atomic_load(&seg->rows_allocated), atomic_load(&seg->d[0].state),
		  (unsigned long long)atomic_load(&seg->d[0].calls));

	for (int i = 1; i < 4; i++)
		connect_to(port[i]);
	fprintf(stderr, "four destinations: %ld KB allocated, %u rows\n", file_kb(dir),
		atomic_load(&seg->rows_allocated));
	TBR_CHECK(atomic_load(&seg->rows_allocated) == 4, "rows allocated %u after four "
		  "destinations (want 4)", atomic_load(&seg->rows_allocated));
	for (int i = 0; i < 4; i++) {
		char want[32];

		snprintf(want, sizeof(want), "127.0.0.1:%d", port[i]);
		TBR_CHECK(atomic_load(&seg->d[i].state) == 2 && strcmp(seg->d[i].dest, want) == 0 &&
			  atomic_load(&seg->d[i].calls) == 1, "row %d: state %u dest %s calls "
			  "%llu (want 2, %s, 1)", i, atomic_load(&seg->d[i].state), seg->d[i].dest,
			  (unsigned long long)atomic_load(&seg->d[i].calls), want);
	}

	/* Many first connects to new destinations at once: rows claimed and allocated
	 * concurrently. */
	{
		int rl[RACERS];
		pthread_t t[RACERS];

		for (int i = 0; i < RACERS; i++)
			rl[i] = tbr_listen(&racer_port[i]);
		pthread_barrier_init(&racers_go, NULL, RACERS);
		for (intptr_t i = 0; i < RACERS; i++)
			TBR_CHECK(pthread_create(&t[i], NULL, racer, (void *)i) == 0, "thread");
		for (int i = 0; i < RACERS; i++)
			pthread_join(t[i], NULL);
		for (int i = 0; i < RACERS; i++)
			close(rl[i]);
		fprintf(stderr, "%d more at once: %u rows, other calls %llu\n", RACERS,
			atomic_load(&seg->rows_allocated),
			(unsigned long long)atomic_load(&seg->other_calls));
		TBR_CHECK(atomic_load(&seg->other_calls) == 0 &&
			  atomic_load(&seg->rows_allocated) >= 4 + RACERS,
			  "%d destinations connected at once: rows %u, other calls %llu (want >= %d "
			  "and 0)", RACERS, atomic_load(&seg->rows_allocated),
			  (unsigned long long)atomic_load(&seg->other_calls), 4 + RACERS);
	}

	/* Fill the tmpfs: no page left for another row. */
	snprintf(path, sizeof(path), "%s/filler", dir);
	filler = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	TBR_CHECK(filler >= 0, "filler: %s", strerror(errno));
	while (write(filler, fill, sizeof(fill)) > 0)
		;
	close(filler);
	full_rows = atomic_load(&seg->rows_allocated);
	for (int i = 4; i < 7; i++)
		connect_to(port[i]);
	fprintf(stderr, "full: %u rows, other calls %llu\n", atomic_load(&seg->rows_allocated),
		(unsigned long long)atomic_load(&seg->other_calls));
	TBR_CHECK(atomic_load(&seg->rows_allocated) == full_rows &&
		  atomic_load(&seg->other_calls) == 3,
		  "on a full tmpfs: rows %u, other calls %llu (want %u and 3)",
		  atomic_load(&seg->rows_allocated),
		  (unsigned long long)atomic_load(&seg->other_calls), full_rows);
	unlink(path);
	for (int i = 0; i < 7; i++)
		close(lfd[i]);
	return 0;
}

int main(int argc, char **argv)
{
	static char dir[] = "/tmp/tbr-statsrows-XXXXXX", xdg[64], logenv[96];
	char logpath[64], tbdir[96];
	pid_t pid;
	int st, lines, all;

	(void)argc;
	if (getenv("TBR_CHILD") != NULL) {
		snprintf(tbdir, sizeof(tbdir), "%s/timebox", getenv("XDG_RUNTIME_DIR"));
		return child(tbdir);
	}
	TBR_CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
	tbg_private_tmpfs(dir, "size=256k,mode=0700");
	snprintf(xdg, sizeof(xdg), "XDG_RUNTIME_DIR=%s", dir);
	putenv(xdg);
	snprintf(logpath, sizeof(logpath), "/tmp/tbr-statsrows-%d.log", (int)getpid());
	snprintf(logenv, sizeof(logenv), "TIMEBOX_LOG=%s", logpath);
	pid = fork();
	TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0)
		tbr_preload_self(argv, "TIMEBOX_CONNECT_TIMEOUT=5s", logenv, NULL);
	st = tbg_wait(pid);
	lines = tbg_count_lines_with(logpath, "what=stats_segment", "cannot allocate");
	all = tbg_count_lines(logpath, "what=stats_segment");
	fprintf(stderr, "exit %d%s, stats_segment lines saying a row could not be allocated: %d (all: %d)\n", st,
		st == 128 + SIGBUS ? " (SIGBUS)" : "", lines, all);
	if (st != 0 || lines != 1 || all != 1)
		tbg_dump(logpath);
	unlink(logpath);
	umount(dir);
	rmdir(dir);
	TBR_CHECK(st == 0, "the governed run failed (status %d)", st);
	TBR_CHECK(lines == 1 && all == 1, "%d lines about the segment, %d saying a row could "
		  "not be allocated (want one of each)", all, lines);
	return 0;
}
