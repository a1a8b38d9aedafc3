/* configure.c - start-up reading of the environment and the configuration file, and the
 * per-connect rule lookup. Not on the data path: it runs once per process and per connect. */
#include "configure.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "env.h"
#include "log.h"
#include "names.h"
#include "real.h"
#include "rules.h"

struct tb_settings tb_default_settings;
const struct tb_config *tb_file_config;
atomic_bool tb_governing;

extern char **environ;

/* The learned names. A mutex is fine here: lookups happen in getaddrinfo and connect, which
 * are system calls' worth of work anyway, never in read/write. Two rules keep it from ever
 * deadlocking: signals are blocked while it is held (POSIX lets a signal handler call
 * connect, and a handler that interrupted its own thread inside getaddrinfo would wait for
 * itself), and fork takes it first and lets go on both sides (see init.c). */
static struct tb_names names;
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static sigset_t fork_saved_mask; /* the forking thread's mask; written under names_lock */

#define MAX_REPORTED 16

/* Errors are kept until the whole file is read: its own `strict` decides what they say.
 * Copies, since the parser's texts die with it. */
struct pending {
	int count;
	struct {
		int line;
		bool has_key;
		char key[64];
		char value[160];
		char why[200];
		const char *effect; /* a static sentence of config.c */
	} e[MAX_REPORTED];
};

static void copy(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void keep(void *ctx, const struct tb_config_error *e)
{
	struct pending *p = ctx;

	if (p->count < MAX_REPORTED) {
		p->e[p->count].line = e->line;
		p->e[p->count].has_key = e->key != NULL;
		copy(p->e[p->count].key, sizeof(p->e[0].key), e->key != NULL ? e->key : "");
		copy(p->e[p->count].value, sizeof(p->e[0].value), e->value != NULL ? e->value : "");
		copy(p->e[p->count].why, sizeof(p->e[0].why), e->why);
		p->e[p->count].effect = e->effect;
	}
	p->count++;
}

/*
 * Reads the file at path into memory and resolves it (see tb_cli_read_config, which the
 * launcher uses: the same rules). Only a regular file is read - opened O_NONBLOCK so that a
 * FIFO cannot hold the program in its constructor, a symbolic link followed and the fstat
 * of what it leads to checked - and at most TB_CONFIG_MAX_BYTES of it. Every libc call
 * here goes through tb_real or is one the library does not hook (open, fstat).
 */
static struct tb_config *read_config(const char *path, const struct tb_overrides *ov,
				     struct pending *p, int *errors)
{
	tb_config_error_fn err = p != NULL ? keep : NULL;
	struct tb_config *c = NULL;
	char why[200], *text = NULL;
	const char *refused;
	struct stat st;
	size_t len = 0;
	int fd;

	fd = tb_open_raw(AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0 || fstat(fd, &st) < 0)
		goto unreadable;
	refused = tb_config_refusal(st.st_mode, (long long)st.st_size);
	if (refused != NULL) {
		c = tb_config_unread(path, refused, ov, err, p, errors);
		goto out;
	}
	/* One byte beyond the cap tells a file that grew past it since the fstat. */
	text = malloc(TB_CONFIG_MAX_BYTES + 2);
	if (text == NULL)
		goto out;
	for (;;) {
		ssize_t n = tb_real.read(fd, text + len, TB_CONFIG_MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto unreadable;
		len += (size_t)n;
		if (n == 0 || len > TB_CONFIG_MAX_BYTES)
			break;
	}
	text[len] = '\0';
	c = tb_config_parse_text(text, len, path, ov, err, p, errors);
	goto out;
unreadable:
	copy(why, sizeof(why), "cannot read the file: ");
	copy(why + strlen(why), sizeof(why) - strlen(why), strerror(errno));
	c = tb_config_unread(path, why, ov, err, p, errors);
out:
	free(text);
	if (fd >= 0)
		tb_real.close(fd);
	return c;
}

/*
 * The process's TIMEBOX_* variables, gathered in one pass over environ: the settings look
 * up some forty names, and getenv scans the whole environment for each - in a container
 * whose environment names every service, a few hundred entries forty times at every exec.
 * The first entry of a name wins, as getenv's does; a name of another prefix, or more
 * TIMEBOX_* entries than fit, go to getenv.
 */
#define OWN_ENV_MAX 128

struct own_env {
	size_t n;
	bool all;
	const char *v[OWN_ENV_MAX];
};

static void own_env_gather(struct own_env *e)
{
	e->n = 0;
	e->all = true;
	for (char **p = environ; p != NULL && *p != NULL; p++) {
		if (strncmp(*p, "TIMEBOX_", 8) != 0)
			continue;
		if (e->n == OWN_ENV_MAX) {
			e->all = false;
			return;
		}
		e->v[e->n++] = *p;
	}
}

static const char *own_env_get(const char *name, void *ctx)
{
	const struct own_env *e = ctx;
	size_t len = strlen(name);

	if (!e->all || strncmp(name, "TIMEBOX_", 8) != 0)
		return getenv(name);
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, len) == 0 && e->v[i][len] == '=')
			return e->v[i] + len + 1;
	return NULL;
}

/*
 * Reads TIMEBOX_CONFIG, if set, over the environment's settings: *cfg becomes the resolved
 * defaults. Prints one line per problem, saying what is done about it (or that the process
 * refuses to run when `strict`, or when the file's defaults say strict). Returns the number
 * of problems; sets *strict_out when the file asks for strictness.
 */
static int configure_file(struct tb_settings *cfg, struct own_env *env, bool strict,
			  bool *strict_out)
{
	const char *path = own_env_get("TIMEBOX_CONFIG", env);
	struct tb_overrides ov;
	struct tb_config *c;
	struct pending *p;
	int errors = 0;

	*strict_out = false;
	if (path == NULL || path[0] == '\0')
		return 0; /* an empty value was reported by the env parser */
	p = calloc(1, sizeof(*p));
	memset(&ov, 0, sizeof(ov));
	/* Launcher options reach us as variables: for the library both are "the environment". */
	tb_overrides_from(&ov, own_env_get, env, TB_ORIGIN_ENV);
	c = read_config(path, &ov, p, &errors);
	if (c == NULL) {
		tb_log_config_file_error(path, 0, NULL, NULL, "out of memory reading the file",
					 strict ? TB_EFFECT_REFUSE : "file ignored");
		free(p);
		return 1;
	}
	*strict_out = c->defaults.set.strict;
	/* The file's own `observe` (a process-wide key) drops strictness like the variable's. */
	strict = (strict || c->defaults.set.strict) && !c->defaults.set.observe;
	for (int i = 0; p != NULL && i < p->count && i < MAX_REPORTED; i++)
		tb_log_config_file_error(path, p->e[i].line, p->e[i].has_key ? p->e[i].key : NULL,
					 p->e[i].value, p->e[i].why,
					 strict ? TB_EFFECT_REFUSE : p->e[i].effect);
	if (p != NULL && p->count > MAX_REPORTED)
		tb_log_config_more(path, p->count - MAX_REPORTED);
	free(p);
	*cfg = c->defaults.set;
	tb_file_config = c; /* never freed: sockets keep pointers to its settings */
	return errors;
}

static void report_env(void *ctx, const char *name, const char *value, const char *why)
{
	const bool *strict = ctx;

	tb_log_config_error(name, value, why, *strict ? TB_EFFECT_REFUSE : "setting ignored");
}

bool tb_configure(void)
{
	static struct own_env env; /* at load, before any thread of ours */
	const char *strict_text, *observe_text;
	struct tb_settings scratch;
	bool strict = false, file_strict;
	int errors;

	own_env_gather(&env);
	strict_text = own_env_get("TIMEBOX_STRICT", &env);
	observe_text = own_env_get("TIMEBOX_OBSERVE", &env);
	/* Strictness first: it decides what the other errors say they do. An observed process
	 * (TIMEBOX_OBSERVE) is never refused: nothing would be governed anyway. */
	tb_settings_init(&scratch);
	if (strict_text != NULL &&
	    tb_env_apply(&scratch, tb_env_find("TIMEBOX_STRICT", 0), strict_text, NULL, NULL) == 0)
		strict = scratch.strict;
	if (observe_text != NULL &&
	    tb_env_apply(&scratch, tb_env_find("TIMEBOX_OBSERVE", 0), observe_text, NULL,
			 NULL) == 0 && scratch.observe)
		strict = false;
	errors = tb_env_load(&tb_default_settings, own_env_get, &env, report_env, &strict);
	errors += tb_env_check_unknown(environ, report_env, &strict);
	errors += configure_file(&tb_default_settings, &env,
				 strict || tb_default_settings.strict, &file_strict);
	if (tb_default_settings.observe)
		return true;
	return errors == 0 || !(strict || tb_default_settings.strict || file_strict);
}

bool tb_configure_any_limit(void)
{
	return tb_file_config != NULL && tb_config_any_limit(tb_file_config);
}

bool tb_configure_learning(void)
{
	return tb_file_config != NULL && tb_file_config->has_host_rules;
}

/* Takes names_lock with every signal blocked, saving the caller's mask in *old. Two
 * rt_sigprocmask calls: cheap beside the lookup or the connect that needs the table. */
static void names_enter(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, old);
	pthread_mutex_lock(&names_lock);
}

static void names_leave(const sigset_t *old)
{
	pthread_mutex_unlock(&names_lock);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

void tb_configure_learn(const char *name, int family, const void *addr)
{
	sigset_t old;

	names_enter(&old);
	tb_names_learn(&names, name, family, addr);
	names_leave(&old);
}

void tb_configure_name_of(const struct tb_dest *d, char *buf, size_t len)
{
	char found[1][TB_NAME_MAX];
	sigset_t old;
	size_t n;

	buf[0] = '\0';
	if (!tb_configure_learning())
		return;
	names_enter(&old);
	n = tb_names_lookup(&names, d, found, 1);
	names_leave(&old);
	if (n > 0)
		snprintf(buf, len, "%s", found[0]);
}

void tb_configure_fork_prepare(void)
{
	sigset_t old;

	names_enter(&old);
	fork_saved_mask = old;
}

void tb_configure_fork_parent(void)
{
	sigset_t old = fork_saved_mask;

	names_leave(&old);
}

void tb_configure_fork_child(void)
{
	sigset_t old = fork_saved_mask;

	/* The table is whole (we held the lock across fork); a fresh mutex is unlocked. */
	pthread_mutex_init(&names_lock, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* 128 bits of FNV-1a over the path: two unix sockets share a destination (a gate, a retry
 * window) only when their paths are equal. */
static void hash_path(const char *path, uint8_t out[16])
{
	uint64_t h1 = UINT64_C(0xcbf29ce484222325), h2 = UINT64_C(0x84222325cbf29ce4);

	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		h1 = (h1 ^ *p) * UINT64_C(0x100000001b3);
		h2 = (h2 ^ *p) * UINT64_C(0x100000001b3) + 1;
	}
	memcpy(out, &h1, 8);
	memcpy(out + 8, &h2, 8);
}

/* The path of an AF_UNIX address ("@name" for an abstract one) into buf; -1 for an unnamed
 * or malformed one. */
static int unix_path(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
	size_t off = offsetof(struct sockaddr_un, sun_path), n;

	if (len <= (socklen_t)off || len > (socklen_t)sizeof(*un))
		return -1;
	n = (size_t)len - off;
	if (un->sun_path[0] == '\0') {
		/* Abstract: the name is every byte after the NUL, by length. */
		if (n < 2 || n > size - 1)
			return -1;
		buf[0] = '@';
		memcpy(buf + 1, un->sun_path + 1, n - 1);
		buf[n] = '\0';
		return memchr(buf + 1, '\0', n - 1) == NULL ? 0 : -1;
	}
	n = strnlen(un->sun_path, n);
	if (n == 0 || n >= size)
		return -1;
	memcpy(buf, un->sun_path, n);
	buf[n] = '\0';
	return 0;
}

const struct tb_settings *tb_configure_governing(const struct sockaddr *sa, socklen_t len,
						 struct tb_dest *d)
{
	char found[TB_NAMES_PER_ADDR][TB_NAME_MAX], path[TB_UNIX_PATH_MAX + 1];
	const char *ptrs[TB_NAMES_PER_ADDR];
	struct tb_target t = { NULL, NULL, ptrs, 0 };

	if (tb_file_config == NULL)
		return tb_dest_from_sockaddr(d, sa, len) == 0 ? &tb_default_settings : NULL;
	if (sa != NULL && len >= (socklen_t)sizeof(sa_family_t) && sa->sa_family == AF_UNIX) {
		if (!tb_file_config->has_unix_rules || unix_path(sa, len, path, sizeof(path)) < 0)
			return NULL;
		memset(d, 0, sizeof(*d));
		d->family = AF_UNIX;
		hash_path(path, d->addr);
		t.unix_path = path;
		return tb_config_governing(tb_file_config, &t);
	}
	if (tb_dest_from_sockaddr(d, sa, len) < 0)
		return NULL;
	t.dest = d;
	if (tb_file_config->has_host_rules) {
		sigset_t old;

		names_enter(&old);
		t.nnames = tb_names_lookup(&names, d, found, TB_NAMES_PER_ADDR);
		names_leave(&old);
		for (size_t i = 0; i < t.nnames; i++)
			ptrs[i] = found[i];
	}
	return tb_config_governing(tb_file_config, &t);
}
