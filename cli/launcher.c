/* launcher.c - `timebox`, the operator's front end: validates the settings, preloads
 * libtimebox.so and execs the command in place (no extra process, its exit status is ours). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "duration.h"
#include "env.h"
#include "settings.h"

#ifndef TB_VERSION
#define TB_VERSION "unknown"
#endif


#define LIB_NAME "libtimebox.so"
#define MUSL_LIB_NAME "libtimebox-musl.so"
#ifndef TB_MULTIARCH
#define TB_MULTIARCH "x86_64-linux-gnu" /* the Makefile passes the compiler's own */
#endif

extern char **environ;

/* One value per row of tb_env_vars, as given on the command line (NULL: not given). */
#define MAX_VARS TB_FIELDS_MAX /* one per tb_env_vars row: fewer than the config fields */

struct run_args {
	const char *values[MAX_VARS];
	char **command; /* NULL-terminated argv of the program to run */
	int force;      /* --force: run a program tb_program_check refuses */
	int print_env;  /* --print-env: print the environment instead of running */
};

static size_t var_count(void)
{
	size_t n = 0;

	while (tb_env_vars[n].name != NULL)
		n++;
	return n;
}

/* The placeholder shown after an option in --help; NULL for a flag. */
static const char *value_hint(enum tb_env_kind kind)
{
	switch (kind) {
	case TB_ENV_DURATION:
		return "DURATION";
	case TB_ENV_SCOPE:
		return "call|process|request";
	case TB_ENV_ON_TIMEOUT:
		return "etimedout|eagain";
	case TB_ENV_LOG:
		return "stderr|syslog|off|/PATH";
	case TB_ENV_COUNT:
		return "N";
	case TB_ENV_GATE_NB:
		return "wait|fail";
	case TB_ENV_LOG_LEVEL:
		return "warn|info";
	case TB_ENV_PROTOCOL:
		return "auto|http|tls|postgres|redis|session|raw";
	case TB_ENV_PATH:
		return "FILE";
	case TB_ENV_LOG_FORMAT:
		return "logfmt|json";
	case TB_ENV_FILE:
		return "/PATH|off";
	case TB_ENV_HEADER:
		return "NAME";
	case TB_ENV_GATE_SIZE:
		return "N|auto";
	case TB_ENV_PERIOD:
		return "DURATION";
	case TB_ENV_POSITIVE:
	case TB_ENV_NUMBER:
		return "N";
	case TB_ENV_PERCENT:
	case TB_ENV_SHARE:
		return "P%";
	case TB_ENV_ERRNO:
		return "ERRNO";
	case TB_ENV_BREAKER_HTTP:
		return "gateway|5xx|off";
	case TB_ENV_BOOL:
	case TB_ENV_BREAKER:
		break;
	}
	return NULL;
}

/* The option list is generated from tb_env_vars so that --help and the parser never drift. */
static void usage(FILE *out)
{
	fprintf(out,
		"usage: timebox run [OPTIONS] [--] COMMAND [ARG...]\n"
		"       timebox run --print-env [OPTIONS]\n"
		"       timebox check [--format text|json] [--inbound DURATION] [FILE]\n"
		"       timebox check --explain DEST [FILE]\n"
		"       timebox plan [OPTIONS] --downstream BEHAVIOUR  (see timebox plan --help)\n"
		"       timebox stats [PID [--watch DURATION] [--prom]]  (governed processes' counters)\n"
		"       timebox run --observe [OPTIONS] [--] COMMAND  (measure only: nothing is cut)\n"
		"       timebox suggest PID|STATS-FILE [--budget DURATION] [--qps-window DURATION]\n"
		"       timebox --help | --version\n"
		"\n"
		"Runs COMMAND with libtimebox.so preloaded (libtimebox-musl.so for a musl\n"
		"program), adding timeouts to its TCP calls.\n"
		"Each option sets the environment variable shown under it; an option beats the\n"
		"environment. Every value, and every TIMEBOX_* variable already set, is checked\n"
		"before COMMAND starts. timebox then becomes COMMAND: its exit status is COMMAND's.\n"
		"\n"
		"Options:\n");
	for (const struct tb_env_var *v = tb_env_vars; v->name != NULL; v++) {
		const char *hint = value_hint(v->kind);
		char left[64];

		snprintf(left, sizeof(left), "%s%s%s", v->option, hint ? " " : "", hint ? hint : "");
		fprintf(out, "  %-38s %s\n      %s\n", left, v->name, v->help);
	}
	fprintf(out,
		"  --force\n      run COMMAND even when it looks static, Go, setuid or setgid\n"
		"  --print-env\n      print the environment COMMAND would get, and run nothing\n"
		"  -h, --help\n      this text\n"
		"\n"
		"A DURATION has a unit: 250ms, 1.5s, 2m, 800us (also ns, h); 0 or off means no limit.\n"
		"TIMEBOX_LIBRARY names the library to preload (default: found beside this program).\n"
		"\n"
		"Examples:\n"
		"  timebox run --connect-timeout 1s --read-timeout 250ms --deadline 300ms -- \\\n"
		"      curl -s http://backend:8080/\n"
		"  TIMEBOX_DEADLINE=5s timebox run --scope=process -- python3 batch.py\n"
		"  timebox run --read-timeout 2s --strict redis-cli -h cache GET key\n"
		"  timebox run --deadline 2s --breaker --retry-budget 20%% --max-conns auto -- ./api\n"
		"\n"
		"Observe, then suggest: with --observe every limit and the gate's bounds are off,\n"
		"whether set by option, environment or configuration file, and a bad setting never\n"
		"stops the program; only the statistics are kept (timebox stats PID).\n"
		"  timebox run --observe -- ./service &\n"
		"  timebox suggest $! --budget 300ms --qps-window 1m > service.conf\n"
		"  timebox check service.conf && timebox run --config service.conf -- ./service\n"
		"\n"
		"Before it runs COMMAND, timebox refuses (exit 2) a program that LD_PRELOAD cannot\n"
		"reach: statically linked, Go, setuid/setgid or with file capabilities (or a #!\n"
		"script whose interpreter is one of those).\n"
		"\n"
		"Exit status: COMMAND's; 2 for a bad option, setting or configuration file, or a\n"
		"program timebox cannot govern; 126 or 127 when COMMAND cannot be run.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "timebox: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see timebox --help)\n");
	return EXIT_USAGE;
}

/*
 * Parses `run`'s arguments (argv[0] is "run"). Options end at "--" or at the first word
 * that is not an option, which starts the command. Returns 0, -1 for --help (printed), or
 * EXIT_USAGE after printing why.
 */
static int parse_run_args(int argc, char **argv, struct run_args *args)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *eq, *value;
		const struct tb_env_var *var;
		char option[64];
		size_t len;

		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
			usage(stdout);
			return -1;
		}
		if (strcmp(arg, "--force") == 0 || strcmp(arg, "--print-env") == 0) {
			*(arg[2] == 'f' ? &args->force : &args->print_env) = 1;
			continue;
		}
		if (arg[0] != '-' || arg[1] == '\0')
			break;

		eq = strchr(arg, '=');
		len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
		if (len >= sizeof(option))
			return usage_error("unknown option '%s'", arg);
		memcpy(option, arg, len);
		option[len] = '\0';
		var = tb_env_find(option, 1);
		if (var == NULL)
			return usage_error("unknown option '%s'", arg);

		if (eq != NULL)
			value = eq + 1;
		else if (TB_ENV_IS_SWITCH(var->kind))
			value = "1"; /* a flag: never takes the next word */
		else if (i + 1 < argc)
			value = argv[++i];
		else
			return usage_error("%s needs a value", option);
		args->values[var - tb_env_vars] = value;
	}
	if (i >= argc && !args->print_env)
		return usage_error("%s", "run: no command given");
	args->command = i < argc ? &argv[i] : NULL;
	return 0;
}

/* The configuration file named by --config or TIMEBOX_CONFIG, or NULL. */
static const char *config_path(const struct run_args *args)
{
	const struct tb_env_var *v = tb_env_find("TIMEBOX_CONFIG", 0);
	const char *opt = args->values[v - tb_env_vars];

	return opt != NULL ? opt : getenv("TIMEBOX_CONFIG");
}

/*
 * Reads the configuration file the way the library will, printing each problem with its
 * file and line. Any problem refuses the start: the library alone would run the program
 * without the broken rule, which is not what the operator asked for.
 */
static int validate_config(const struct run_args *args)
{
	const char *path = config_path(args);
	struct tb_config *c;
	int errors;

	if (path == NULL || path[0] == '\0')
		return 0; /* an empty value is the env parser's error */
	c = tb_cli_load(path, args->values, &errors);
	tb_config_free(c);
	return errors;
}

/*
 * Checks every TIMEBOX_* variable in the environment and every option value with the
 * library's own parser, printing one line per mistake. Returns the number of mistakes.
 * An environment value is checked even when an option overrides it: the launcher is the
 * strict gate, and the library would meet that value again in a nested launch.
 */
static int validate(const struct run_args *args)
{
	struct tb_cli_report from_env = { 0, 0 }, from_opt = { 1, 0 };
	struct tb_settings scratch;

	tb_env_check_unknown(environ, tb_cli_report_error, &from_env);
	tb_settings_init(&scratch);
	for (size_t i = 0; tb_env_vars[i].name != NULL; i++) {
		const char *env_value = getenv(tb_env_vars[i].name);

		if (env_value != NULL)
			tb_env_apply(&scratch, &tb_env_vars[i], env_value, tb_cli_report_error, &from_env);
		if (args->values[i] != NULL)
			tb_env_apply(&scratch, &tb_env_vars[i], args->values[i], tb_cli_report_error,
				     &from_opt);
	}
	return from_env.errors + from_opt.errors + validate_config(args);
}

static int is_regular_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/*
 * Finds the library for a program of `libc` and stores its absolute, canonical path in out
 * (PATH_MAX bytes): libtimebox.so for glibc, libtimebox-musl.so for musl, in the same
 * places. TIMEBOX_LIBRARY wins; otherwise the build tree's layout (bin/../lib/) then the
 * installed one (bin/../lib/timebox/, or the Debian package's bin/../lib/<triplet>/timebox/),
 * all relative to this executable so that a copied or relocated tree keeps working; the
 * musl build also in the build tree's build/musl/lib/, seen from build/bin/. Returns 0, or
 * EXIT_USAGE after printing why: a musl program is never given the glibc build, which musl's
 * loader refuses (the program would not start).
 */
static int find_library(enum tb_libc libc, char *out)
{
	const char *forced = getenv("TIMEBOX_LIBRARY");
	const char *name = libc == TB_LIBC_MUSL ? MUSL_LIB_NAME : LIB_NAME;
	char self[PATH_MAX], candidate[PATH_MAX + 64];
	static const char *const layouts[] = { "/../lib/", "/../lib/timebox/",
					       "/../lib/" TB_MULTIARCH "/timebox/",
					       "/../musl/lib/" };
	size_t count = sizeof(layouts) / sizeof(layouts[0]) - (libc == TB_LIBC_MUSL ? 0 : 1);
	ssize_t n;
	char *slash;

	if (forced != NULL) {
		if (!is_regular_file(forced) || realpath(forced, out) == NULL) {
			fprintf(stderr, "timebox: TIMEBOX_LIBRARY=%s: not an existing file\n", forced);
			return EXIT_USAGE;
		}
		return 0;
	}

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		fprintf(stderr, "timebox: cannot find my own location (/proc/self/exe: %s); "
				"set TIMEBOX_LIBRARY to the path of %s\n",
			strerror(errno), name);
		return EXIT_USAGE;
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash != NULL)
		*slash = '\0';

	for (size_t i = 0; i < count; i++) {
		snprintf(candidate, sizeof(candidate), "%s%s%s", self, layouts[i], name);
		if (is_regular_file(candidate) && realpath(candidate, out) != NULL)
			return 0;
	}
	if (libc == TB_LIBC_MUSL) {
		fprintf(stderr, "timebox: the program is linked against musl and needs " MUSL_LIB_NAME
				", not found in %s/../lib/, %s/../lib/timebox/, %s/../lib/" TB_MULTIARCH
				"/timebox/ or %s/../musl/lib/; build it with make MUSL=1, or set "
				"TIMEBOX_LIBRARY to its path\n",
			self, self, self, self);
		return EXIT_USAGE;
	}
	fprintf(stderr, "timebox: cannot find " LIB_NAME " in %s/../lib/, %s/../lib/timebox/ or "
			"%s/../lib/" TB_MULTIARCH "/timebox/; set TIMEBOX_LIBRARY to its path\n",
		self, self, self);
	return EXIT_USAGE;
}

/* True when `list` (an LD_PRELOAD value) already holds `path` as one of its entries. */
static int preload_has(const char *list, const char *path)
{
	size_t len = strlen(path);

	/* ld.so splits LD_PRELOAD on both colons and spaces. */
	for (const char *p = list; *p != '\0';) {
		size_t span = strcspn(p, ": ");

		if (span == len && memcmp(p, path, len) == 0)
			return 1;
		p += span;
		if (*p != '\0')
			p++;
	}
	return 0;
}

/* Appends `lib` to LD_PRELOAD unless present. Returns 0, or EXIT_USAGE after printing why. */
static int add_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char *joined;
	int rc;

	if (strpbrk(lib, ": ") != NULL) {
		fprintf(stderr, "timebox: %s: LD_PRELOAD cannot carry a path with a colon or "
				"a space; move the library or set TIMEBOX_LIBRARY\n",
			lib);
		return EXIT_USAGE;
	}
	if (old == NULL || old[0] == '\0')
		return setenv("LD_PRELOAD", lib, 1) == 0 ? 0 : EXIT_USAGE;
	if (preload_has(old, lib))
		return 0;
	/* Appended, not prepended: a sanitizer runtime already in the list must stay first. */
	if (asprintf(&joined, "%s:%s", old, lib) < 0) {
		fprintf(stderr, "timebox: out of memory\n");
		return EXIT_USAGE;
	}
	rc = setenv("LD_PRELOAD", joined, 1);
	free(joined);
	return rc == 0 ? 0 : EXIT_USAGE;
}

/* Exports the command line's values, so they beat the environment. The configuration file's
 * name becomes absolute: the program may change directory before the library reads it. */
static int export_options(const struct run_args *args)
{
	const char *path = config_path(args);
	char abs[PATH_MAX];

	if (path != NULL && path[0] != '\0' && path[0] != '/' && realpath(path, abs) != NULL &&
	    setenv("TIMEBOX_CONFIG", abs, 1) != 0)
		return EXIT_USAGE;
	for (size_t i = 0; tb_env_vars[i].name != NULL; i++) {
		if (args->values[i] == NULL ||
		    (strcmp(tb_env_vars[i].name, "TIMEBOX_CONFIG") == 0 && path[0] != '/'))
			continue;
		if (setenv(tb_env_vars[i].name, args->values[i], 1) != 0) {
			fprintf(stderr, "timebox: cannot set %s: %s\n", tb_env_vars[i].name,
				strerror(errno));
			return EXIT_USAGE;
		}
	}
	return 0;
}

/*
 * --print-env: the variables a program started by `timebox run` would see from us, one
 * NAME=VALUE per line, for systemd Environment= lines and container manifests.
 */
static int print_env(void)
{
	const char *v = getenv("LD_PRELOAD");

	printf("LD_PRELOAD=%s\n", v != NULL ? v : "");
	for (size_t i = 0; tb_env_vars[i].name != NULL; i++)
		if ((v = getenv(tb_env_vars[i].name)) != NULL)
			printf("%s=%s\n", tb_env_vars[i].name, v);
	return fflush(stdout) == 0 ? EXIT_SUCCESS : EXIT_USAGE;
}

/* The libc of the program to run; with no command (--print-env alone, for a manifest), the
 * launcher's own: the static musl launcher is the one an Alpine image carries. */
static enum tb_libc program_libc(const struct run_args *args)
{
	if (args->command != NULL)
		return tb_program_libc(args->command[0]);
#ifdef __GLIBC__
	return TB_LIBC_GLIBC;
#else
	return TB_LIBC_MUSL;
#endif
}

/* `timebox run ...`: returns an exit status only when the command could not be started. */
static int run(int argc, char **argv)
{
	struct run_args args = { { NULL }, NULL, 0, 0 };
	char lib[PATH_MAX], why[600];
	int rc;

	if (var_count() > MAX_VARS) {
		fprintf(stderr, "timebox: internal error: too many settings\n");
		return EXIT_USAGE;
	}
	rc = parse_run_args(argc, argv, &args);
	if (rc != 0)
		return rc < 0 ? EXIT_SUCCESS : rc;
	if (validate(&args) != 0)
		return EXIT_USAGE;
	if ((rc = find_library(program_libc(&args), lib)) != 0 ||
	    (rc = export_options(&args)) != 0 ||
	    (rc = add_preload(lib)) != 0)
		return rc;

	if (args.print_env)
		return print_env();
	if (!args.force && tb_program_check(args.command[0], why, sizeof(why)) < 0) {
		fprintf(stderr, "timebox: %s\n(run it anyway with --force; see timebox(1))\n",
			why);
		return EXIT_USAGE;
	}
	execvp(args.command[0], args.command);
	rc = errno;
	fprintf(stderr, "timebox: cannot run '%s': %s\n", args.command[0], strerror(rc));
	return rc == EACCES ? EXIT_NOEXEC : EXIT_NOTFOUND;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return EXIT_SUCCESS;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("timebox %s\n", TB_VERSION);
		return EXIT_SUCCESS;
	}
	if (strcmp(argv[1], "run") == 0)
		return run(argc - 1, argv + 1);
	if (strcmp(argv[1], "check") == 0)
		return tb_check_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "plan") == 0)
		return tb_plan_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "stats") == 0)
		return tb_stats_main(argc - 1, argv + 1);
	if (strcmp(argv[1], "suggest") == 0)
		return tb_suggest_main(argc - 1, argv + 1);
	fprintf(stderr, "timebox: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
