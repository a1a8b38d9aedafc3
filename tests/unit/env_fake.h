/* env_fake.h - what the environment suites share: a fake environment (an array of
 * "NAME=VALUE"), and tb_env_load with every error captured instead of printed. */
#ifndef TB_TEST_ENV_FAKE_H
#define TB_TEST_ENV_FAKE_H

#include <stdio.h>
#include <string.h>

#include "env.h"
#include "settings.h"

/* A fake environment: NULL-terminated "NAME=VALUE" strings. */
struct fake_env {
	const char *const *entries;
};

static inline const char *fake_get(const char *name, void *ctx)
{
	const struct fake_env *env = ctx;
	size_t len = strlen(name);

	for (const char *const *e = env->entries; *e != NULL; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return *e + len + 1;
	return NULL;
}

#define MAX_ERRORS 16

struct errors {
	int count;
	char name[MAX_ERRORS][64];
	char value[MAX_ERRORS][300];
	char why[MAX_ERRORS][160];
};

static inline void collect(void *ctx, const char *name, const char *value, const char *why)
{
	struct errors *e = ctx;

	if (e->count < MAX_ERRORS) {
		snprintf(e->name[e->count], sizeof(e->name[0]), "%s", name);
		snprintf(e->value[e->count], sizeof(e->value[0]), "%s", value);
		snprintf(e->why[e->count], sizeof(e->why[0]), "%s", why);
	}
	e->count++;
}

/* Loads `entries` into *s and returns the errors seen. */
static inline struct errors load(struct tb_settings *s, const char *const *entries)
{
	struct fake_env env = { entries };
	struct errors e;
	int n;

	memset(&e, 0, sizeof(e));
	n = tb_env_load(s, fake_get, &env, collect, &e);
	assert_int_equal(n, e.count);
	return e;
}


/* Applies one value to fresh settings; returns the error sentence or NULL. */
static inline const char *apply(struct tb_settings *s, const char *name, const char *value)
{
	static struct errors e;
	const struct tb_env_var *var = tb_env_find(name, 0);

	assert_non_null(var);
	memset(&e, 0, sizeof(e));
	tb_settings_init(s);
	if (tb_env_apply(s, var, value, collect, &e) == 0) {
		assert_int_equal(e.count, 0);
		return NULL;
	}
	assert_int_equal(e.count, 1);
	assert_string_equal(e.name[0], name);
	assert_string_equal(e.value[0], value);
	return e.why[0];
}

#endif
