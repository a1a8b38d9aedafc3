/* libconfig_dl.c - the glibc build's libconfig, loaded when a configuration file is read.
 *
 * The library names no libconfig.so.9 (no DT_NEEDED): musl's loader, given this build by hand
 * in a musl program, refuses the program on any library it cannot find, before the
 * constructor could say that timebox is inactive there (shim/libc_compat.h), and most
 * processes read no file at all. Debian's libconfig.a is not position-independent, so it
 * cannot be linked in. These hidden definitions stand for the functions policy/config.c
 * calls (the launcher and the unit tests link the real ones): config_init loads
 * libconfig.so.9 once and binds them; if it cannot, config_read_string fails with the
 * loader's reason as the file's error, which the configuration reports as for a broken file.
 * The make MUSL=1 build links its own libconfig.a and does not compile this file.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <libconfig.h>

#include "real.h"

#define TB_LIBCONFIG_SONAME "libconfig.so.9"

static struct {
	void (*init)(config_t *);
	void (*destroy)(config_t *);
	int (*read_string)(config_t *, const char *);
	int (*get_bool)(const config_setting_t *);
	config_setting_t *(*get_elem)(const config_setting_t *, unsigned int);
	double (*get_float)(const config_setting_t *);
	long long (*get_int64)(const config_setting_t *);
	config_setting_t *(*get_member)(const config_setting_t *, const char *);
	const char *(*get_string)(const config_setting_t *);
	int (*length)(const config_setting_t *);
} lc;
static bool lc_ready;
static char lc_error[160];
static pthread_once_t lc_once = PTHREAD_ONCE_INIT;

static void *bind_one(void *h, const char *name)
{
	void *f = dlsym(h, name);

	if (f == NULL && lc_error[0] == '\0')
		snprintf(lc_error, sizeof(lc_error), "%s has no %s", TB_LIBCONFIG_SONAME, name);
	return f;
}

static void lc_load(void)
{
	/* libc's dlopen: the hook would treat it as the program's (hooks_dl.c). */
	void *h = tb_real.dlopen(TB_LIBCONFIG_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *why;

	if (h == NULL) {
		why = dlerror();
		snprintf(lc_error, sizeof(lc_error), "cannot load %s to read the file: %s "
			 "(install libconfig9)", TB_LIBCONFIG_SONAME, why ? why : "not found");
		return;
	}
	lc.init = (void (*)(config_t *))bind_one(h, "config_init");
	lc.destroy = (void (*)(config_t *))bind_one(h, "config_destroy");
	lc.read_string = (int (*)(config_t *, const char *))bind_one(h, "config_read_string");
	lc.get_bool = (int (*)(const config_setting_t *))bind_one(h, "config_setting_get_bool");
	lc.get_elem = (config_setting_t * (*)(const config_setting_t *, unsigned int))
		bind_one(h, "config_setting_get_elem");
	lc.get_float = (double (*)(const config_setting_t *))bind_one(h, "config_setting_get_float");
	lc.get_int64 = (long long (*)(const config_setting_t *))
		bind_one(h, "config_setting_get_int64");
	lc.get_member = (config_setting_t * (*)(const config_setting_t *, const char *))
		bind_one(h, "config_setting_get_member");
	lc.get_string = (const char *(*)(const config_setting_t *))
		bind_one(h, "config_setting_get_string");
	lc.length = (int (*)(const config_setting_t *))bind_one(h, "config_setting_length");
	lc_ready = lc_error[0] == '\0';
}

void config_init(config_t *cf)
{
	pthread_once(&lc_once, lc_load);
	if (lc_ready) {
		lc.init(cf);
		return;
	}
	memset(cf, 0, sizeof(*cf));
}

int config_read_string(config_t *cf, const char *text)
{
	if (lc_ready)
		return lc.read_string(cf, text);
	cf->error_text = lc_error;
	cf->error_line = 0;
	return CONFIG_FALSE;
}

void config_destroy(config_t *cf)
{
	if (lc_ready)
		lc.destroy(cf);
}

/* The accessors below run only on settings of a file config_read_string read. */
int config_setting_get_bool(const config_setting_t *s)
{
	return lc.get_bool(s);
}

config_setting_t *config_setting_get_elem(const config_setting_t *s, unsigned int i)
{
	return lc.get_elem(s, i);
}

double config_setting_get_float(const config_setting_t *s)
{
	return lc.get_float(s);
}

long long config_setting_get_int64(const config_setting_t *s)
{
	return lc.get_int64(s);
}

config_setting_t *config_setting_get_member(const config_setting_t *s, const char *name)
{
	return lc.get_member(s, name);
}

const char *config_setting_get_string(const config_setting_t *s)
{
	return lc.get_string(s);
}

int config_setting_length(const config_setting_t *s)
{
	return lc.length(s);
}
