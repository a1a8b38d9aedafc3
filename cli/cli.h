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

/* Loads `path` for the launcher, over the environment's values and the options' (opt_values,
 * one per tb_env_vars row, NULL when not given). Errors are printed; *errors counts them. */
struct tb_config *tb_cli_load(const char *path, const char *const *opt_values, int *errors);

/* `timebox check ...` (argv[0] is "check"). Returns the exit status. */
int tb_check_main(int argc, char **argv);

/*
 * Checks that LD_PRELOAD can reach the program `file` (a path found on PATH): not static, not
 * Go, not setuid/setgid or with file capabilities; for a #! script, the same for its
 * interpreter. Returns 0, or -1 after writing why to `why` (len bytes).
 */
int tb_program_check(const char *file, char *why, size_t len);

#endif
