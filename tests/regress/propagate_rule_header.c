/* propagate_rule_header.c - a rule's deadline_header was not the name sent.
 *
 * What happened: `deadline_header` is a per-rule setting for outbound requests (docs/
 * configuration.md; `timebox check --explain` showed the rule's name), but the send path
 * wrote the defaults' name into every request. The sequence: defaults { deadline = "2s";
 * propagate = true; } and a rule for 127.0.0.1 with deadline_header = "X-Budget-Ms"; the
 * program sends "GET / HTTP/1.1" to a server on 127.0.0.1 -> the server received
 * "X-Deadline-Ms: 1999", not "X-Budget-Ms: 1999". Now the socket's own settings name it.
 */
#include "regress.h"

static char got[4096];

static void *serve(void *arg)
{
	int lfd = (int)(intptr_t)arg, c = accept(lfd, NULL, NULL);
	size_t n = 0;

	TBR_CHECK(c >= 0, "accept: %s", strerror(errno));
	while (n < sizeof(got) - 1 && strstr(got, "\r\n\r\n") == NULL) {
		ssize_t r = read(c, got + n, sizeof(got) - 1 - n);

		if (r <= 0)
			break;
		n += (size_t)r;
		got[n] = '\0';
	}
	TBR_CHECK(write(c, "HTTP/1.1 204 No Content\r\n\r\n", 27) == 27, "write");
	close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	static char confvar[300];
	static const char req[] = "GET / HTTP/1.1\r\nHost: inventory\r\n\r\n";
	char conf[] = "/tmp/tbr-rule-header-XXXXXX", answer[64];
	pthread_t t;
	int port, lfd, fd;
	ssize_t r;

	(void)argc;
	if (getenv("TBR_CHILD") == NULL) {
		int cfd = mkstemp(conf);
		FILE *f;

		TBR_CHECK(cfd >= 0 && (f = fdopen(cfd, "w")) != NULL, "mkstemp");
		fprintf(f, "defaults = { deadline = \"2s\"; propagate = true; };\n"
			   "destinations = ( { match = \"127.0.0.1\"; deadline_header = \"X-Budget-Ms\"; } );\n");
		fclose(f);
		snprintf(confvar, sizeof(confvar), "TIMEBOX_CONFIG=%s", conf);
		setenv("TBR_CONF_PATH", conf, 1);
		tbr_preload_self(argv, confvar, NULL);
	}
	lfd = tbr_listen(&port);
	TBR_CHECK(pthread_create(&t, NULL, serve, (void *)(intptr_t)lfd) == 0, "pthread_create");
	fd = tbr_connect(port);
	TBR_CHECK(write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1), "write: %s",
		  strerror(errno));
	r = read(fd, answer, sizeof(answer));
	TBR_CHECK(r > 0, "read: %s", r < 0 ? strerror(errno) : "EOF");
	pthread_join(t, NULL);
	unlink(getenv("TBR_CONF_PATH"));
	TBR_CHECK(strstr(got, "\r\nX-Budget-Ms: ") != NULL,
		  "the rule's header name was not sent; the server received:\n%s", got);
	TBR_CHECK(strstr(got, "X-Deadline-Ms") == NULL,
		  "the defaults' header name was sent instead of the rule's:\n%s", got);
	printf("the rule's header went out: %.*s\n", (int)strcspn(strstr(got, "X-Budget-Ms"), "\r"),
	       strstr(got, "X-Budget-Ms"));
	close(fd);
	return 0;
}
