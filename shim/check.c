/* check.c - `timebox check`: the configuration file validated and linted, or one destination's
 * effective settings explained. Launcher-only; the lint rules themselves are in lint.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "env.h"

void tb_cli_config_error(void *ctx, const struct tb_config_error *e)
{
	int *count = ctx;

	if (count != NULL)
		(*count)++;
	if (e->line > 0)
		fprintf(stderr, "timebox: %s:%d: ", e->file, e->line);
	else
		fprintf(stderr, "timebox: %s: ", e->file);
	if (e->key != NULL && e->value != NULL && e->value[0] != '\0')
		fprintf(stderr, "%s = %s: ", e->key, e->value);
	else if (e->key != NULL)
		fprintf(stderr, "%s: ", e->key);
	fprintf(stderr, "%s\n", e->why);
}

struct opt_ctx {
	const char *const *values;
};

static const char *get_env(const char *name, void *ctx)
{
	(void)ctx;
	return getenv(name);
}

static const char *get_opt(const char *name, void *ctx)
{
	const struct opt_ctx *o = ctx;
	const struct tb_env_var *v = tb_env_find(name, 0);

	return v != NULL && o->values != NULL ? o->values[v - tb_env_vars] : NULL;
}

struct tb_config *tb_cli_load(const char *path, const char *const *opt_values, int *errors)
{
	struct tb_overrides ov;
	struct opt_ctx o = { opt_values };
	struct tb_config *c;

	memset(&ov, 0, sizeof(ov));
	tb_overrides_from(&ov, get_env, NULL, TB_ORIGIN_ENV);
	tb_overrides_from(&ov, get_opt, &o, TB_ORIGIN_OPTION);
	*errors = 0;
	c = tb_config_load(path, &ov, tb_cli_config_error, NULL, errors);
	if (c == NULL) {
		fprintf(stderr, "timebox: out of memory\n");
		(*errors)++;
	}
	return c;
}

int tb_check_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "timebox: check: not available yet\n");
	return EXIT_USAGE;
}
