/* dlopen_deepbind.c - a library loaded with RTLD_DEEPBIND escaped timebox entirely.
 *
 * What happened: PHP loads its extensions with dlopen(RTLD_DEEPBIND), which makes a
 * library (and what it pulls in: libcurl, libpq) bind its symbols to its own dependencies
 * - libc - before the global scope, where the preloaded timebox sits. curl_exec() and
 * pg_connect() against a stalled server hung forever under a read timeout that bounded
 * file_get_contents() in the same script. The sequence: with TIMEBOX_READ_TIMEOUT=250ms,
 * dlopen("libcurl.so.4", RTLD_NOW | RTLD_DEEPBIND) (as PHP's curl extension brings it in),
 * then curl_easy_perform() of a URL whose server accepts and never answers -> the transfer
 * must fail with CURLE_RECV_ERROR at >= 250 ms, not at curl's own 5 s backstop.
 */
#include <dlfcn.h>
#include <sys/wait.h>

#include "regress.h"

/* From curl/curl.h (the headers may not be installed; the ABI values are fixed). */
#define CURLOPT_URL 10002
#define CURLOPT_TIMEOUT_MS 155
#define CURLOPT_NOSIGNAL 99
#define CURLE_OPERATION_TIMEDOUT 28
#define CURLE_RECV_ERROR 56

int main(int argc, char **argv)
{
	void *(*easy_init)(void);
	int (*easy_setopt)(void *, int, ...);
	int (*easy_perform)(void *);
	void *curl, *h;
	char url[64];
	int port, lfd, rc;
	double t0, ms;

	(void)argc;
	if (getenv("TBR_PROBE") != NULL) /* the probe below: can this host deep-bind at all? */
		return dlopen("libcurl.so.4", RTLD_NOW | RTLD_DEEPBIND) != NULL ||
		       dlopen("libcurl.so.4", RTLD_NOW) == NULL ? 0 : 3;
	/* A sanitizer's runtime comes first in TBR_PRELOAD; ASan's and TSan's dlopen
	 * interceptors refuse RTLD_DEEPBIND (exit 66) before anything reaches timebox. Probe
	 * with the runtime alone. */
	if (getenv("TBR_CHILD") == NULL && getenv("TBR_PRELOAD") != NULL &&
	    strchr(getenv("TBR_PRELOAD"), ' ') != NULL) {
		char runtime[4096];
		const char *all = getenv("TBR_PRELOAD");
		int status;
		pid_t pid;

		snprintf(runtime, sizeof(runtime), "%.*s", (int)(strrchr(all, ' ') - all), all);
		pid = fork();
		TBR_CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			setenv("LD_PRELOAD", runtime, 1);
			setenv("TBR_PROBE", "1", 1);
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		TBR_CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			tbr_skip("the sanitizer's runtime alone refuses RTLD_DEEPBIND "
				 "(google/sanitizers#611)");
	}
	tbr_preload_self(argv, "TIMEBOX_READ_TIMEOUT=250ms", NULL);
	h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
	if (h == NULL)
		tbr_skip("libcurl.so.4 is not installed (tests/deps.sh installs curl)");
	*(void **)&easy_init = dlsym(h, "curl_easy_init");
	*(void **)&easy_setopt = dlsym(h, "curl_easy_setopt");
	*(void **)&easy_perform = dlsym(h, "curl_easy_perform");
	TBR_CHECK(easy_init && easy_setopt && easy_perform, "libcurl lacks the easy API");
	/* The listener never accepts: the kernel completes the handshake, nothing answers. */
	lfd = tbr_listen(&port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	curl = easy_init();
	TBR_CHECK(curl != NULL, "curl_easy_init failed");
	easy_setopt(curl, CURLOPT_URL, url);
	easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L); /* the backstop of an ungoverned run */
	t0 = tbt_now_ms();
	rc = easy_perform(curl);
	ms = tbt_now_ms() - t0;
	TBR_CHECK(rc != CURLE_OPERATION_TIMEDOUT, "the transfer ran to curl's own 5 s limit "
		  "(%.0f ms): the deep-bound library was not governed", ms);
	TBR_CHECK(rc == CURLE_RECV_ERROR, "curl_easy_perform returned %d after %.0f ms", rc, ms);
	TBR_CHECK(ms >= 250 && ms < 250 + 1000, "the stalled transfer was cut after %.0f ms", ms);
	fprintf(stderr, "stalled transfer cut after %.0f ms\n", ms);
	close(lfd);
	return 0;
}
