/* cli.h - what the launcher's commands share: exit codes, config error printing, `timebox
 * check`, and the checks on the program to run. Launcher-only: never linked into the library. */
#ifndef TB_CLI_H
#define TB_CLI_H

#include <stdio.h>

#include "config.h"

#define EXIT_USAGE 2      /* bad command line or settings, like most CLI tools */
#define EXIT_NOEXEC 126   /* found but could not be run, like shells */
#define EXIT_NOTFOUND 127 /* not found, like shells */

/* A tb_config_error_fn that prints "timebox: FILE:LINE: KEY = VALUE: WHY" on stderr; ctx is
 * an int counter (may be NULL). */
void tb_cli_config_error(void *ctx, const struct tb_config_error *e);

/*
 * Reads the configuration file at path the way the library does - only a regular file (a
 * symbolic link is followed and what it leads to is checked), at most TB_CONFIG_MAX_BYTES,
 * whole into memory - and resolves it (tb_config_parse_text). A file that cannot be read is
 * one problem reported through err. Returns the configuration, or NULL when out of memory.
 */
struct tb_config *tb_cli_read_config(const char *path, const struct tb_overrides *ov,
				     tb_config_error_fn err, void *ctx, int *errors);

/* Loads `path` for the launcher, over the environment's values and the options' (opt_values,
 * one per tb_env_vars row, NULL when not given). Errors are printed; *errors counts them. */
struct tb_config *tb_cli_load(const char *path, const char *const *opt_values, int *errors);

/* `timebox check ...` (argv[0] is "check"). Returns the exit status. */
int tb_check_main(int argc, char **argv);

/* `timebox plan ...` (argv[0] is "plan"). Returns the exit status. */
int tb_plan_main(int argc, char **argv);

/* `timebox stats [PID] ...` (argv[0] is "stats"). Returns the exit status. */
int tb_stats_main(int argc, char **argv);

struct tb_stats_seg;

/*
 * Maps the statistics segment of process pid the way `timebox stats PID` does - after
 * removing the segments of processes that are gone - and asks the process to refresh its
 * gauges (200 ms at most). Returns NULL after writing why (len bytes). Unmap it with
 * tb_cli_stats_close; tb_cli_stats_refresh asks for fresh gauges again.
 */
struct tb_stats_seg *tb_cli_stats_open(int pid, char *why, size_t len);
void tb_cli_stats_refresh(struct tb_stats_seg *seg);
void tb_cli_stats_close(struct tb_stats_seg *seg);

/* `timebox suggest PID|STATS-FILE ...` (argv[0] is "suggest"). Returns the exit status. */
int tb_suggest_main(int argc, char **argv);

/*
 * Checks that LD_PRELOAD can reach the program `file` (a path found on PATH): not static, not
 * Go, not setuid/setgid or with file capabilities; for a #! script, the same for its
 * interpreter. Returns 0, or -1 after writing why to `why` (len bytes). A program that links
 * liburing is not refused: one warning line goes to stderr.
 */
int tb_program_check(const char *file, char *why, size_t len);

/* The libc whose loader runs a program, for the library to preload: musl's when the ELF's
 * PT_INTERP names ld-musl-*, glibc's otherwise. */
enum tb_libc {
	TB_LIBC_GLIBC,
	TB_LIBC_MUSL,
};

/*
 * Which libc runs `file` (found on PATH as execvp finds it): TB_LIBC_MUSL when its dynamic
 * loader (PT_INTERP) is musl's, TB_LIBC_GLIBC otherwise, and for anything unreadable or not
 * ELF. A #! script is judged by its interpreter ("/usr/bin/env NAME" resolved on PATH).
 */
enum tb_libc tb_program_libc(const char *file);

/* Where a setting's value came from, for its error message: "--read-timeout 250" (an
 * option) or "TIMEBOX_READ_TIMEOUT=250" (the environment); errors are counted. */
struct tb_cli_report {
	int from_option;
	int errors;
};

/* A tb_env_report_fn for `timebox run` and `timebox plan`: one line on stderr per bad value
 * (ctx: a struct tb_cli_report). */
void tb_cli_report_error(void *ctx, const char *name, const char *value, const char *why);

#endif
