/* gate_unix_paths.c - every unix socket shared one cross-process gate.
 *
 * What happened: the shared gate's file was named after the destination as the log writes
 * it, and an AF_UNIX destination is written "unix" whatever its path. So every unix socket
 * a rule governed with gate_shared mapped to the one file gate-unix-max<N>: with
 * max_conns 1, a connection held to /run/a.sock made every connect to /run/b.sock wait and
 * time out. The sequence: a rule "unix:<dir>/ *.sock" with max_conns 1, acquire_timeout
 * 300ms, gate_shared; connect to a.sock (held), connect to b.sock -> must succeed at once;
 * a second connect to a.sock must still wait and time out.
 */
#include <sys/un.h>

#include "gate_regress.h"

static int unix_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	TBR_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(fd, 8) == 0,
		  "listen on %s: %s", path, strerror(errno));
	return fd;
}

static int unix_connect(const char *path, int *err, double *ms)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	double t0 = tbt_now_ms();

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	*err = 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		*err = errno;
		close(fd);
		fd = -1;
	}
	*ms = tbt_now_ms() - t0;
	return fd;
}

int main(int argc, char **argv)
{
	static char conf_env[128], xdg_env[128];
	char a[96], b[96];
	const char *dir;
	double ms;
	int err, la, lb, fa, fb, fa2;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		char conf[96];
		FILE *f;

		dir = tbg_private_dir();
		snprintf(conf, sizeof(conf), "%s/timebox.conf", dir);
		f = fopen(conf, "w");
		TBR_CHECK(f != NULL, "write %s", conf);
		fprintf(f, "destinations = (\n  { match = \"unix:%s/*.sock\"; max_conns = 1;\n"
			   "    acquire_timeout = \"300ms\"; gate_shared = true; }\n);\n", dir);
		fclose(f);
		snprintf(conf_env, sizeof(conf_env), "TIMEBOX_CONFIG=%s", conf);
		snprintf(xdg_env, sizeof(xdg_env), "XDG_RUNTIME_DIR=%s", dir);
		setenv("TBR_DIR", dir, 1);
		tbr_preload_self(argv, conf_env, xdg_env, NULL);
	}
	dir = getenv("TBR_DIR");
	snprintf(a, sizeof(a), "%s/a.sock", dir);
	snprintf(b, sizeof(b), "%s/b.sock", dir);
	la = unix_listen(a);
	lb = unix_listen(b);
	fa = unix_connect(a, &err, &ms);
	TBR_CHECK(fa >= 0, "connect a.sock: %s", tbt_errno_name(err));
	fb = unix_connect(b, &err, &ms);
	TBR_CHECK(fb >= 0 && ms < 250, "connect b.sock while a.sock holds its slot: fd %d %s "
		  "after %.0f ms (want a slot at once: another path, another gate)", fb,
		  tbt_errno_name(err), ms);
	fa2 = unix_connect(a, &err, &ms);
	TBR_CHECK(fa2 < 0 && err == ETIMEDOUT && ms >= 300,
		  "second connect a.sock: fd %d %s after %.0f ms (want ETIMEDOUT after >= 300)",
		  fa2, tbt_errno_name(err), ms);
	close(fa);
	close(fb);
	close(la);
	close(lb);
	tbg_cleanup(NULL);
	return 0;
}
